// The collective kernels the cluster benchmarks time (bench_collectives.cu, bench_cf_config.cu): one
// collective (cluster_reduce sum or cluster_gather) over DSM with the library, and the same collective through
// global memory, fp16. Device code only; the host side is in the benchmarks.
#pragma once

#include <solder/cluster/cluster.cuh>

namespace sc = solder::cluster;
using half = __half;

struct bench_args {
  const half* input;     // [blocks][in_count]
  half* output;          // [blocks][out_count]
  half* scratch;         // global-memory version: [2][blocks][in_count]
  unsigned count;        // reduce: tile elements; gather: elements each block contributes
  unsigned slot_bytes;
  unsigned iterations;   // collectives per kernel (after one warm-up call when > 1)
  int src_global, dst_global;  // where the tiles live
  long long* cycles;     // per-call cycles measured by block 0
  unsigned transport;    // sc::transport of the communicator
  // ClusterFusion's kernel shape (bench_cf_config.cu): no input load (the tile is filled from registers) and no
  // output store except the reduced tile of each cluster's rank 0, as ClusterFusion's microbenchmark kernels.
  int cf_shape;
};

__device__ void copy_half(half* dst, const half* src, unsigned count) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  for (unsigned p = threadIdx.x; p < count / 8; p += blockDim.x) d[p] = s[p];
}

// The input tile in ClusterFusion's shape: a pattern from registers instead of a global load.
__device__ void fill_half(half* dst, unsigned count, unsigned seed) {
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) dst[i] = __float2half(static_cast<float>((i + seed) % 64) / 64.f);
}

// The output in ClusterFusion's shape: rank 0 of each cluster stores the reduced tile; a gather stores nothing.
__device__ bool cf_stores(bool gather) { return !gather && sc::ptx::block_rank() == 0; }

// Where one block's tiles live: src and dst in shared memory from `smem_tiles`, or in global memory
// (bench_args), and the block's part of the output.
struct block_tiles {
  half *src, *dst, *output;
  unsigned out_count;
};

template <bool Gather>
__device__ block_tiles place_tiles(const bench_args& a, half* smem_tiles) {
  const unsigned out_count = Gather ? sc::ptx::cluster_size() * a.count : a.count;
  half* output = a.output + static_cast<size_t>(blockIdx.x) * out_count;
  half* src = a.src_global ? (Gather ? const_cast<half*>(a.input) + blockIdx.x * a.count : output) : smem_tiles;
  half* dst = a.dst_global ? output : (a.src_global ? smem_tiles : smem_tiles + a.count);
  return block_tiles{src, dst, output, out_count};
}

// Before the collectives: the input tile (a gather from global memory reads its input in place).
template <bool Gather>
__device__ void load_input(const bench_args& a, const block_tiles& t) {
  if (a.cf_shape) fill_half(t.src, a.count, blockIdx.x);
  else if (!(Gather && a.src_global)) copy_half(t.src, a.input + static_cast<size_t>(blockIdx.x) * a.count, a.count);
}

// After the collectives: the block's result to global memory.
template <bool Gather>
__device__ void store_output(const bench_args& a, const block_tiles& t) {
  if (a.cf_shape) {
    if (cf_stores(Gather)) copy_half(t.output, t.src, a.count);
    return;
  }
  if (Gather && !a.dst_global) copy_half(t.output, t.dst, t.out_count);
  if (!Gather && !a.src_global) copy_half(t.output, t.src, a.count);
}

// Collectives over DSM. reduce: tile = count (in place). gather: src = count, dst = C * count.
template <bool Gather>
__device__ void dsm_body(const bench_args& a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned C = sc::ptx::cluster_size();
  auto comm = sc::communicator::setup(smem, a.slot_bytes, sc::mailbox_layout::all_peers,
                                     static_cast<sc::transport>(a.transport));
  const block_tiles t = place_tiles<Gather>(a, reinterpret_cast<half*>(smem + sc::mailbox_bytes(C, a.slot_bytes)));
  half *src = t.src, *dst = t.dst;
  load_input<Gather>(a, t);
  const unsigned warmup = a.iterations > 1 ? 1 : 0;
  long long start = 0;
  for (unsigned i = 0; i < warmup + a.iterations; ++i) {
    if (i == warmup) start = clock64();
    if constexpr (Gather) sc::cluster_gather(comm, src, dst, a.count);
    else sc::cluster_reduce<sc::reduce_op::sum>(comm, src, a.count);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.cycles) *a.cycles = (clock64() - start) / a.iterations;
  store_output<Gather>(a, t);
  comm.teardown();
}

// Bounded to 1024 threads (the registers are then capped at 64, and the all-reduce spills: compile_check.sh);
// bench_collectives launches the 256-bounded instantiations at up to 256 threads (bounded_kernel below).
template <bool Gather, int Bound = 1024>
__global__ void __launch_bounds__(Bound) dsm_kernel(bench_args a) { dsm_body<Gather>(a); }

// ClusterFusion's launch: cluster size 4 compiled into the kernel, launched with <<<...>>> (128 threads in
// bench_cf_config; bound 256, so that the registers are not capped at 64 as under the 1024 bound of the kernels
// above, where the all-reduce spills 16-32 bytes since v6).
template <bool Gather>
__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(256) cf_dsm_kernel(bench_args a) { dsm_body<Gather>(a); }

// The channels, compiled for bench_cf_config's shape (4 blocks, 128 threads) and TileBytes per block: cluster_reduce
// over a reduce_channel (reduce_channel.cuh) of the tile, or cluster_gather over a gather_channel
// (gather_channel.cuh) of segments of TileBytes. The tiles are in shared memory after the channel's area, placed as
// dsm_body places them; input and output as dsm_body.
template <bool Gather, unsigned TileBytes>
__device__ void channel_body(const bench_args& a) {
  using channel = cuda::std::conditional_t<Gather, sc::gather_channel<4, TileBytes, 128>, sc::reduce_channel<4, TileBytes, 128>>;
  extern __shared__ __align__(16) unsigned char smem[];
  auto ch = channel::setup(smem);
  const block_tiles t = place_tiles<Gather>(a, reinterpret_cast<half*>(smem + channel::area_bytes));
  load_input<Gather>(a, t);
  const unsigned warmup = a.iterations > 1 ? 1 : 0;
  long long start = 0;
  for (unsigned i = 0; i < warmup + a.iterations; ++i) {
    if (i == warmup) start = clock64();
    if constexpr (Gather) sc::cluster_gather(ch, t.src, t.dst);
    else sc::cluster_reduce<sc::reduce_op::sum>(ch, t.src);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.cycles) *a.cycles = (clock64() - start) / a.iterations;
  store_output<Gather>(a, t);
  ch.teardown();
}

// ClusterFusion's launch (__cluster_dims__, <<<...>>>), as cf_dsm_kernel.
template <bool Gather, unsigned TileBytes>
__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(128) cf_channel_kernel(bench_args a) {
  channel_body<Gather, TileBytes>(a);
}

// The instantiation for a tile (gather: a segment) of `tile_bytes` = 1, 2, 4 or 8 KB; nullptr otherwise.
template <bool Gather>
auto cf_channel_kernel_for(unsigned tile_bytes) {
  using kernel_type = void (*)(bench_args);
  switch (tile_bytes) {
    case 1024: return static_cast<kernel_type>(cf_channel_kernel<Gather, 1024>);
    case 2048: return static_cast<kernel_type>(cf_channel_kernel<Gather, 2048>);
    case 4096: return static_cast<kernel_type>(cf_channel_kernel<Gather, 4096>);
    case 8192: return static_cast<kernel_type>(cf_channel_kernel<Gather, 8192>);
    default: return static_cast<kernel_type>(nullptr);
  }
}

// The machine's floor for this grid: a kernel with ClusterFusion's launch (__cluster_dims__(4), <<<...>>>) and no
// code at all. No collective kernel of the same grid launches faster.
__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(256) cf_empty_kernel(bench_args) {}

// The same collectives through global memory: publish the tile to a double-buffered global scratch, one
// cluster barrier (barrier.cluster), then read the cluster's tiles back and combine (fp32) or copy.
template <bool Gather>
__device__ void global_body(const bench_args& a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned C = sc::ptx::cluster_size(), rank = sc::ptx::block_rank();
  const size_t blocks = gridDim.x, base = blockIdx.x - rank;
  const block_tiles t = place_tiles<Gather>(a, reinterpret_cast<half*>(smem));
  half *src = t.src, *dst = t.dst;
  load_input<Gather>(a, t);
  sc::ptx::cluster_sync();
  const unsigned warmup = a.iterations > 1 ? 1 : 0;
  long long start = 0;
  for (unsigned i = 0; i < warmup + a.iterations; ++i) {
    if (i == warmup) start = clock64();
    half* buffer = a.scratch + (i % 2) * blocks * a.count;
    __syncthreads();
    copy_half(buffer + blockIdx.x * a.count, src, a.count);
    sc::ptx::cluster_sync();  // publishes the tiles (release/acquire at cluster scope)
    const uint4* peers = reinterpret_cast<const uint4*>(buffer + base * a.count);
    const unsigned packets = a.count / 8;
    if constexpr (Gather) {
      uint4* d = reinterpret_cast<uint4*>(dst);
      for (unsigned p = threadIdx.x; p < C * packets; p += blockDim.x) d[p] = peers[p];
    } else {
      uint4* d = reinterpret_cast<uint4*>(src);
      for (unsigned p = threadIdx.x; p < packets; p += blockDim.x) {
        sc::unpacked<half> acc = sc::unpack<half>(peers[p]);
        for (unsigned r = 1; r < C; ++r) sc::combine_into<sc::reduce_op::sum>(acc, sc::unpack<half>(peers[r * packets + p]));
        d[p] = sc::pack<half>(acc);
      }
    }
  }
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.cycles) *a.cycles = (clock64() - start) / a.iterations;
  store_output<Gather>(a, t);
  sc::ptx::cluster_sync();
}

template <bool Gather, int Bound = 1024>
__global__ void __launch_bounds__(Bound) global_kernel(bench_args a) { global_body<Gather>(a); }

// The instantiations for `threads` threads per block: bounded to 256 up to 256 threads, else to 1024.
template <bool Gather>
auto dsm_kernel_for(unsigned threads) { return threads <= 256 ? dsm_kernel<Gather, 256> : dsm_kernel<Gather, 1024>; }
template <bool Gather>
auto global_kernel_for(unsigned threads) {
  return threads <= 256 ? global_kernel<Gather, 256> : global_kernel<Gather, 1024>;
}

template <bool Gather>
__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(256) cf_global_kernel(bench_args a) { global_body<Gather>(a); }

// The peer: ClusterFusion's ClusterReduce and ClusterGather as its paper describes them (Alg. 1 and 2), written
// here from that description: log2 C rounds with the stride doubling; in each, block b pushes its whole buffer
// (reduce) or its gathered prefix D[0, stride x count) (gather) into block b + stride by one cp.async.bulk that
// completes the receiver's mbarrier; the reduce then adds the received buffer into its own in fp16 (as
// ClusterFusion's kernels do). Barriers: a cluster barrier at the top of each round (the receiver's buffer is
// free and its mbarrier armed) and, for the reduce, one after the wait (every outgoing copy has landed before
// the buffer it reads is overwritten). Power-of-two cluster sizes. The gathered segments end up rotated:
// segment j of block b holds block (b - j) mod C's data. Shared memory: 128 bytes (the mbarrier), then the
// buffer (count, or C x count for a gather), then the reduce's receive buffer (count).
template <bool Gather>
__device__ void cf_algorithm_body(const bench_args& a) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint64_t* barrier = reinterpret_cast<uint64_t*>(smem);
  half* buffer = reinterpret_cast<half*>(smem + 128);
  half* received = buffer + a.count;
  const unsigned C = sc::ptx::cluster_size(), rank = sc::ptx::block_rank();
  const unsigned out_count = Gather ? C * a.count : a.count;
  half* my_output = a.output + static_cast<size_t>(blockIdx.x) * out_count;
  if (a.cf_shape) fill_half(buffer, a.count, blockIdx.x);
  else copy_half(buffer, a.input + static_cast<size_t>(blockIdx.x) * a.count, a.count);
  if (threadIdx.x == 0) {
    sc::ptx::barrier_init(barrier, 1);
    sc::ptx::fence_barrier_init();
  }
  sc::ptx::cluster_sync();
  unsigned phase = 0;
  const unsigned warmup = a.iterations > 1 ? 1 : 0;
  long long start = 0;
  for (unsigned i = 0; i < warmup + a.iterations; ++i) {
    if (i == warmup) start = clock64();
    for (unsigned stride = 1; stride < C; stride *= 2) {
      const unsigned send_to = (rank + stride) % C;
      const unsigned bytes = (Gather ? stride * a.count : a.count) * sizeof(half);
      if (threadIdx.x == 0) sc::ptx::arrive_expect_bytes(barrier, bytes);
      sc::ptx::fence_shared_to_async_proxy();  // the buffer was written by generic stores
      sc::ptx::cluster_sync();
      if (threadIdx.x == 0)
        sc::ptx::bulk_copy_to_peer(sc::ptx::map_to_rank(Gather ? buffer + stride * a.count : received, send_to), buffer,
                                   bytes, sc::ptx::map_to_rank(barrier, send_to));
      sc::ptx::wait_parity(barrier, phase);
      phase ^= 1;
      if constexpr (!Gather) {
        sc::ptx::cluster_sync();
        __half2* d = reinterpret_cast<__half2*>(buffer);
        const __half2* r = reinterpret_cast<const __half2*>(received);
        for (unsigned p = threadIdx.x; p < a.count / 2; p += blockDim.x) d[p] = __hadd2(d[p], r[p]);
      }
    }
  }
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.cycles) *a.cycles = (clock64() - start) / a.iterations;
  if (a.cf_shape) {
    if (cf_stores(Gather)) copy_half(my_output, buffer, a.count);
  } else {
    copy_half(my_output, buffer, out_count);
  }
  sc::ptx::cluster_sync();  // no block exits while a peer may still write into it
}

template <bool Gather>
__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(256) cf_algorithm_kernel(bench_args a) {
  cf_algorithm_body<Gather>(a);
}
