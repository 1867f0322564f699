// inter_cluster_reduce: combine each block's tile into a region of a global-memory tensor.
//
// global_dst[i] = global_dst[i] op tile[i] for i < count, atomically per element, for every calling block;
// the order in which blocks (and clusters) combine is unspecified. max/min follow the collectives' rule
// (packet.cuh, combine: NaN propagates, also a NaN already in global_dst; -0 < +0), so their result does not
// depend on that order. For float sum the combine is exact per step; for 16-bit T each combine rounds once
// to T (so a 16-bit sum depends on the order).
//
// Tiles in shared memory use the bulk reduction (cp.reduce.async.bulk, one thread issues) for sums (f32, f16,
// bf16 add). max/min and tiles in global memory use per-element compare-and-swap loops: the bulk .max/.min
// and the ordered-integer atomicMax/atomicMin tricks drop NaN (agreement test, 2026-11-22).
// Whole block (every thread of the calling block); no communication inside the cluster, so it needs no
// communicator. tile and global_dst are 16-byte aligned and count * sizeof(T) is a multiple of 16.
#pragma once

#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

#include "packet.cuh"
#include "ptx.cuh"

namespace solder::cluster {

namespace detail {

template <reduce_op Op, class T>
inline constexpr bool has_bulk_reduce = Op == reduce_op::sum;

// Combines one 32-bit word (1 float or 2 16-bit values) of `value` into global memory, atomically.
template <reduce_op Op, class T>
__device__ inline void atomic_combine_word(uint32_t* global_word, uint32_t value) {
  if constexpr (cuda::std::is_same_v<T, float>) {
    float v = __uint_as_float(value);
    if constexpr (Op == reduce_op::sum) {
      atomicAdd(reinterpret_cast<float*>(global_word), v);
    } else {
      // Compare-and-swap until the word holds old op v; bits compared, so +0 replaces -0 (max) and a NaN
      // already there is replaced once by the canonical NaN, then stays.
      uint32_t old = *global_word;
      while (true) {
        uint32_t want = __float_as_uint(combine<Op>(__uint_as_float(old), v));
        if (want == old) return;
        uint32_t seen = atomicCAS(global_word, old, want);
        if (seen == old) return;
        old = seen;
      }
    }
  } else {
    // Compare-and-swap on the pair: combine in fp32, round once to T per element.
    uint32_t old = *global_word, assumed;
    do {
      assumed = old;
      uint4 a{assumed, 0, 0, 0}, b{value, 0, 0, 0};
      unpacked<T> x = unpack<T>(a), y = unpack<T>(b);
      x.value[0] = combine<Op>(x.value[0], y.value[0]);
      x.value[1] = combine<Op>(x.value[1], y.value[1]);
      old = atomicCAS(global_word, assumed, pack<T>(x).x);
    } while (old != assumed);
  }
}

}  // namespace detail

template <reduce_op Op, class T>
__device__ void inter_cluster_reduce(const T* tile, uint32_t count, T* global_dst) {
  static_assert(Op == reduce_op::sum || Op == reduce_op::max || Op == reduce_op::min,
                "inter_cluster_reduce takes sum, max or min");
  static_assert(is_collective_element<T>, "element type must be float, __nv_bfloat16 or __half");
  const uint32_t thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  const uint32_t bytes = count * sizeof(T);
  if constexpr (detail::has_bulk_reduce<Op, T>) {
    if (ptx::is_shared(tile)) {
      ptx::fence_shared_to_async_proxy();  // the tile was written by generic stores
      __syncthreads();
      if (thread == 0) {
        constexpr uint32_t piece = 32768;
        for (uint32_t offset = 0; offset < bytes; offset += piece) {
          uint32_t length = bytes - offset < piece ? bytes - offset : piece;
          ptx::bulk_reduce_to_global(cuda::ptx::op_add, global_dst + offset / sizeof(T),
                                     tile + offset / sizeof(T), length);
        }
        ptx::bulk_commit_and_wait_all();
      }
      __syncthreads();  // the tile may be overwritten once the bulk reads are done
      return;
    }
  }
  __syncthreads();
  const uint32_t* words = reinterpret_cast<const uint32_t*>(tile);
  uint32_t* global_words = reinterpret_cast<uint32_t*>(global_dst);
  for (uint32_t w = thread; w < bytes / 4; w += threads) detail::atomic_combine_word<Op, T>(global_words + w, words[w]);
  __syncthreads();
}

}  // namespace solder::cluster
