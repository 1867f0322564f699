// Pieces shared by the channels (reduce_channel.cuh, gather_channel.cuh): the all-reduce and all-gather compiled
// for one shape, with the proof-by-data protocol that reduce_channel.cuh describes.
#pragma once

#include <cuda/std/cstdint>

#include "limits.cuh"
#include "ptx.cuh"

namespace solder::cluster::detail {

using cuda::std::uint32_t;
using cuda::std::uint64_t;

// Whether a block of `threads` threads can run a channel: 32 to 1024, whole warps.
// (Annotated: NVRTC without -default-device rejects an unannotated function in device code.)
SOLDER_CLUSTER_HOST_DEVICE constexpr bool channel_threads_ok(uint32_t threads) {
  return threads >= 32 && threads <= 1024 && threads % 32 == 0;
}

// This thread's index in its block (x fastest). Any thread.
__device__ inline uint32_t thread_in_block() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }

// Whole block, in a channel's setup: traps unless the block has `threads` threads and `area` is in shared memory.
__device__ inline void require_channel_block(uint32_t threads, const void* area) {
  if (blockDim.x * blockDim.y * blockDim.z != threads || !ptx::is_shared(area)) __trap();
}

// One thread (thread 0, in a channel's setup): initialises `count` barriers with one arrival each, arms the first
// phase of each with `bytes` of expected transactions, and fences the inits for the cluster. A cluster barrier must
// follow before any peer completes bytes on them.
__device__ inline void init_armed_barriers(uint64_t* barriers, uint32_t count, uint32_t bytes) {
  for (uint32_t i = 0; i < count; ++i) ptx::barrier_init(&barriers[i], 1);
  for (uint32_t i = 0; i < count; ++i) ptx::arrive_expect_bytes(&barriers[i], bytes);
  ptx::fence_barrier_init();
}

// Every thread: for the packets x = thread, thread + Threads, ... < Packets (compile-time bounds, unrolled), first
// value = load(x) for up to four of them, then store(x, value) for the same four, and so on: four 16-byte loads in
// flight per thread before their stores.
template <uint32_t Packets, uint32_t Threads, class Load, class Store>
__device__ inline void for_each_packet(uint32_t thread, Load load, Store store) {
  constexpr uint32_t per_thread = (Packets + Threads - 1) / Threads, batch = 4;
#pragma unroll
  for (uint32_t first = 0; first < per_thread; first += batch) {
    uint4 value[batch];
#pragma unroll
    for (uint32_t j = 0; j < batch; ++j) {
      const uint32_t x = thread + (first + j) * Threads;
      if (first + j < per_thread && (Packets % Threads == 0 || x < Packets)) value[j] = load(x);
    }
#pragma unroll
    for (uint32_t j = 0; j < batch; ++j) {
      const uint32_t x = thread + (first + j) * Threads;
      if (first + j < per_thread && (Packets % Threads == 0 || x < Packets)) store(x, value[j]);
    }
  }
}

}  // namespace solder::cluster::detail
