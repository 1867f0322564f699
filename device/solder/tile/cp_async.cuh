// Asynchronous global → shared copies of 16 bytes (cp.async, sm_80+), for multi-stage pipelines.
//
// Each thread issues its own copies; cp_async_commit() closes a group of the calling thread's
// copies, cp_async_wait<N>() waits until at most N of its groups are still in flight. Other threads
// see the data only after a barrier that follows the wait.
#pragma once


namespace solder::tile {

// Copies 16 bytes; when `valid` is false the destination is zero-filled and `src` is not read.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid = true) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

}  // namespace solder::tile
