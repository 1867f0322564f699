// The sm_90a GEMM skeleton: a TMA producer warpgroup, an mbarrier ring of Config::Stages shared-memory
// stages, and 1 or 2 consumer warpgroups running wgmma (both operands from shared memory) into f32
// register accumulators, with setmaxnreg moving registers from the producer to the consumers.
// Compiles with NVRTC (-default-device --gpu-architecture=sm_90a, the CUTLASS include dir, -DNDEBUG)
// and with nvcc -gencode=arch=compute_90a,code=sm_90a.
//
// ---- The epilogue interface (what the code generator writes) ------------------------------------
//
//   struct Epilogue {
//     // Required. Called exactly once per in-bounds output element (row < shape.m, col < shape.n)
//     // with the f32 dot product; applies scales, bias, activation, rounding and the store itself.
//     __device__ void operator()(int batch, int row, int col, float acc) const;
//
//     // Optional, faster: two horizontally adjacent elements, (row, col) and (row, col + 1), with col
//     // even and col + 1 < shape.n. When present the skeleton calls it for every such pair and
//     // operator() only for a last odd column. It must mean the same as two operator() calls.
//     __device__ void pair(int batch, int row, int col, float acc0, float acc1) const;
//   };
//
//     // Optional, fastest (a 16-bit result stored row-major, columns contiguous): both of
//     using element = __half;                                            // or __nv_bfloat16
//     __device__ float value(int batch, int row, int col, float acc) const;  // operator() without the store
//     __device__ element* row_pointer(int batch, int row) const;             // the row's column 0
//     // When present (single B, BN a multiple of 32) the skeleton calls neither operator() nor pair():
//     // it rounds value() to `element` (nearest) and stores 8 consecutive columns of a row per lane as
//     // one 16-byte vector (one scalar store per element where the row's address or N is not aligned to
//     // 16 bytes, or the 8 columns run past N), or stages the rows in shared memory and stores them with
//     // bulk copies (row_store_mode_of below). value() must be pure (it reads, never writes): it is
//     // called for every in-bounds element, and at the tile's edges also with indices clamped to the last
//     // row / column, whose results are discarded. Optional: `static constexpr int row_store_mode` (0, 1, 2).
//
// With two B operands (Config::BOperands = 2, dual-B) the same two hooks take both accumulators of an
// element, acc (A·B) then acc2 (A·B2):
//     __device__ void operator()(int batch, int row, int col, float acc, float acc2) const;
//     __device__ void pair(int batch, int row, int col, float acc0, float acc1, float acc2_0, float acc2_1) const;
//
// Row reductions (row_epilogue.cuh; single B, the tile covering all N columns): an epilogue with
// `static constexpr bool row_reduction = true` gets whole rows instead of elements,
//     template <class Row> __device__ void row(int batch, int row, bool row_in, const Row& values) const;
// called by every lane for both of its rows (row_in false past M) with RowFragment<BN>.
//
// The functor is passed by value as a kernel parameter (keep it small: pointers and scalars).
// A dual-B kernel (gemm_dual_kernel, SOLDER_GEMM_DUAL_KERNEL) takes B2's tensor map after B's.
//
// ---- The kernel -------------------------------------------------------------------------------
//
//   template <class Config, class Epilogue>
//   __global__ void gemm_kernel(const __grid_constant__ TensorMap a, const __grid_constant__ TensorMap b,
//                               GemmShape shape, Epilogue epilogue, SplitKWorkspace workspace);
//
// `workspace` is read only when Config::SplitK > 1 or Config::TailSplit > 1 (config.cuh: sizes, layout, the
// merge protocol).
//
// launched with launch_config(Config{}, shape[, persistent_blocks]) (config.cuh): grid, block, dynamic
// shared memory (more than 48 KB: set cudaFuncAttributeMaxDynamicSharedMemorySize / CU_FUNC_ATTRIBUTE_
// MAX_DYNAMIC_SHARED_SIZE_BYTES first) and the cluster shape (ClusterSize × 1 × 1; launch with the cluster
// attribute when ClusterSize > 1). A's and B's tensor maps use Config::ABoxRows and Config::BBoxRows rows per box. The tensor maps come from
// solder::runtime::encode_gemm_operand (src/runtime/tma.h) for the same Config. NVRTC needs an
// unmangled name: SOLDER_GEMM_KERNEL(name, Config, Epilogue) defines extern "C" __global__ `name`
// with the same parameters and the right __launch_bounds__.
//
// K ranges: gemm_ranges_kernel / SOLDER_GEMM_RANGES_KERNEL take a second pair of tensor maps (A2, B2)
// and its K after the shape: acc = Σ_{k < shape.k} A·B + Σ_{k < k2} A2·B2 (config.cuh). The producer
// loads the first ⌈shape.k / BK⌉ K tiles of a unit from (A, B), the next ⌈k2 / BK⌉ from (A2, B2); each
// map's bounds zero-fill its range's last tile, so the range boundary needs no alignment to BK. The
// consumers see one K loop of k_tiles stages; split-K splits it as one.
//
// ---- Schedule ---------------------------------------------------------------------------------
//
// Each block computes BM×BN output tiles t = blockIdx.x, + gridDim.x, ... (one tile per block, or
// persistent blocks: launch_config; tile order: config.cuh tile_of). Warpgroup 0 is the producer: one
// thread waits for a free stage (empty barrier), arms the stage's full barrier with the stage's byte
// count, and issues the TMA loads of the A and B tiles (out-of-bounds boxes are zero-filled, so ragged
// M, N and K need nothing else). With ClusterM = 2 the two blocks of a cluster work on vertically
// adjacent tiles of one tile-column: each loads its A tile and one half of the shared B tile, multicast
// into both blocks, and a stage is free only when the consumers of both blocks released it. With
// ClusterN = 2 or 4 the blocks of a cluster take horizontally adjacent tiles of one tile-row and share A
// the same way (each loads BM/ClusterN rows of it, multicast into all; each loads its own B tiles).
// With both above 1 (a 2 × ClusterN cluster: a block of 2 tile-rows × ClusterN tile-columns), each block
// loads its slice of A into the blocks of its tile-row and its half of B into the two blocks of its
// tile-column, and releases every stage on every block of the cluster.
// Warpgroups 1..Consumers each own 64 rows of the tile: they wait on the full barrier, issue BK/k_atom
// wgmma into their accumulators, commit, and release the previous stage (one arrival per warp, on every
// block of the cluster) once at most one wgmma batch is in flight. Then each thread hands its accumulators to the epilogue
// by plain index arithmetic (wgmma's accumulator layout). The descriptors and accumulators are built
// by index arithmetic too (wgmma.cuh): CuTe's TiledMMA partitioning cost most of the NVRTC front end.
// Dual-B (BOperands = 2): each stage also holds B2's tile, loaded by the same producer thread onto the
// same full barrier; the consumers issue the B2 wgmma into a second accumulator in the same batch, so A's
// tile is read from global memory once for both products, and the epilogue gets both values.
//
// Ping-pong (Config::Pingpong, BM 64): the two consumer warpgroups take the block's work units in turn
// (unit i to warpgroup i % 2), each computing whole 64 × BN tiles. The producer fills the ring in unit
// order, so a warpgroup's K tiles follow the other's in the ring: each consumer skips the other's stages
// (advancing its stage and phase by their count), and a stage is read and released by one warpgroup
// (StageReaders). A handoff orders them: a warpgroup starts waiting for its unit's first stage only after
// the other has seen its previous unit's last stage full (named barrier 3 + c, "warpgroup c's turn":
// bar.arrive by the one, bar.sync by the other). Without it the skipping warpgroup would wait on a stage
// whose barrier is several phases behind the fill it wants, and an mbarrier parity wait cannot tell
// phase j from phase j - 2. The ring then keeps the main loops in turn (the next warpgroup's first stage
// is loaded once the previous one released all but Stages - 1 of its own), so one warpgroup's epilogue
// (and the stores it waits for) runs while the other's wgmma keep the tensor cores busy; in the
// cooperative schedule the tensor cores idle during every tile's epilogue but for the producer's
// prefetch. Each warpgroup has its own staging buffer (64 rows) and named barrier.
//
// Programmatic dependent launch: after the barriers are initialised every thread executes
// griddepcontrol.wait, then griddepcontrol.launch_dependents; a launch with the programmatic stream
// serialization attribute (runtime::LaunchConfig::programmatic) thus overlaps this kernel's start with
// the previous kernel's tail, and the next kernel's start with this one's. Without the attribute both
// instructions do nothing.
//
// Split-K (SplitK > 1): a work unit is (tile, split); the producer and the consumers walk the split's
// range of K tiles only. Each consumer warp then stores its 16 × BN partial to the workspace, and the
// last of the SplitK warps for those rows (per-warp counter) sums the partials in split order and runs
// the epilogue ("serial" split-K through global memory, chosen over a DSM cluster reduction because it
// needs no co-scheduling of the splits, works for any SplitK up to 16 and with persistent blocks, and
// keeps the cluster dimension for B multicast).
//
// Tail split (TailSplit > 1, SplitK 1): with persistent blocks, the tile units left over after every
// cluster has taken the same number (the partial last wave, config.cuh tail_tile_units) are split over K
// in TailSplit units each, after the whole-K units, so that the last wave's K tiles spread over every SM;
// a split tail unit merges exactly as split-K does (same protocol, its own workspace of the tail's tiles),
// and a whole-K unit runs as without the split.
#pragma once

// CuTe's instruction selector offers every wgmma width N = 8 … 256 in steps of 8 only with this macro;
// without it a tile like BN 224 or 160 is issued as 7 or 5 narrower instructions (n32), about 0.72× the
// rate of one wide one (bench/NOTES.md, quant-fp8). Set before any CuTe header, in every Solder header
// that includes one, so that the first inclusion in a translation unit decides it the same way.
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cuda/ptx>

#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/numeric/numeric_types.hpp>
#include <cutlass/arch/reg_reconfig.h>

#include "config.cuh"
#include "wgmma.cuh"
#include "row_epilogue.cuh"

namespace solder::gemm {

namespace detail {

template <Dtype T> struct cute_type;
template <> struct cute_type<Dtype::bf16> { using type = cute::bfloat16_t; };
template <> struct cute_type<Dtype::f16> { using type = cute::half_t; };
template <> struct cute_type<Dtype::e4m3> { using type = cute::float_e4m3_t; };
template <> struct cute_type<Dtype::e5m2> { using type = cute::float_e5m2_t; };
template <> struct cute_type<Dtype::tf32> { using type = cute::tfloat32_t; };

// Whether the epilogue has the optional pair() hook.
template <class E, class = void>
struct has_pair : cuda::std::false_type {};
template <class E>
struct has_pair<E, decltype((void)cuda::std::declval<const E&>().pair(0, 0, 0, 0.0f, 0.0f))>
    : cuda::std::true_type {};
// The same for a dual-B epilogue's pair(batch, row, col, acc0, acc1, acc2_0, acc2_1).
template <class E, class = void>
struct has_dual_pair : cuda::std::false_type {};
template <class E>
struct has_dual_pair<E, decltype((void)cuda::std::declval<const E&>().pair(0, 0, 0, 0.0f, 0.0f, 0.0f, 0.0f))>
    : cuda::std::true_type {};
// Whether the epilogue has the optional row-store hooks (value(), row_pointer(), a 16-bit `element`).
template <class E, class = void>
struct has_row_store : cuda::std::false_type {};
template <class E>
struct has_row_store<E, decltype((void)cuda::std::declval<const E&>().value(0, 0, 0, 0.0f),
                                 (void)cuda::std::declval<const E&>().row_pointer(0, 0))>
    : cuda::std::bool_constant<sizeof(typename E::element) == 2> {};

// Whether the epilogue is a row reduction (row_epilogue.cuh: `static constexpr bool row_reduction`).
template <class E, class = void>
struct is_row_reduction : cuda::std::false_type {};
template <class E>
struct is_row_reduction<E, decltype((void)E::row_reduction)> : cuda::std::integral_constant<bool, E::row_reduction> {};

// The row-store epilogue's schedule (an optional `static constexpr int row_store_mode` of the functor):
//   0 direct: value() and a 16-byte global store per group of 8 columns, interleaved (the first form);
//   1 registers first: every value() of the thread's 2 × BN/2 elements before any store (the scale and
//     bias loads are not re-issued behind stores that might alias them), then the quad exchange and
//     the 16-byte global stores;
//   2 staged (the default): as 1, but the rows go into shared memory (the whole tile:
//     Config::EpilogueColumns = BN) and one bulk copy per row (cp.async.bulk shared → global) stores
//     them asynchronously: the warpgroup starts the next tile's wgmma while the stores drain. Where the
//     Config has no buffer (EpilogueColumns 0: the tile does not fit beside the ring) or with split-K,
//     mode 1.
template <class E, class = void>
struct row_store_mode_of : cuda::std::integral_constant<int, 2> {};
template <class E>
struct row_store_mode_of<E, decltype((void)E::row_store_mode)> : cuda::std::integral_constant<int, E::row_store_mode> {};

__device__ __forceinline__ uint32_t smem_address(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void st_shared_v4(uint32_t address, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(a), "r"(b), "r"(c), "r"(d));
}
__device__ __forceinline__ uint16_t ld_shared_u16(uint32_t address) {
  uint16_t v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(address) : "memory");
  return v;
}
// The 128 threads of one consumer warpgroup (named barrier 1 + consumer; 0 is __syncthreads').
__device__ __forceinline__ void warpgroup_barrier(int consumer) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + consumer) : "memory");
}
// The ping-pong handoff between the two consumer warpgroups (256 threads): named barrier 3 + c is
// "consumer c's turn"; the other warpgroup arrives, c waits.
__device__ __forceinline__ void turn_wait(int consumer) { asm volatile("bar.sync %0, 256;" ::"r"(3 + consumer) : "memory"); }
__device__ __forceinline__ void turn_give(int consumer) { asm volatile("bar.arrive %0, 256;" ::"r"(3 + consumer) : "memory"); }
// Generic-proxy writes of shared memory made visible to the async proxy (the bulk copy's reads).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void bulk_store(void* global, uint32_t shared, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(global), "r"(shared), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// This thread's bulk copies have read their shared memory (the buffer may be rewritten).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// This thread's bulk copies are complete (their global writes performed).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Two f32 values rounded to a 16-bit element type (E's conversion from float: round to nearest),
// packed low then high into one 32-bit word.
template <class Element>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  const Element a = static_cast<Element>(lo), b = static_cast<Element>(hi);
  const uint16_t ua = *reinterpret_cast<const uint16_t*>(&a), ub = *reinterpret_cast<const uint16_t*>(&b);
  return static_cast<uint32_t>(ua) | (static_cast<uint32_t>(ub) << 16);
}

// w[i] of this lane; i in [0, 4) known only at run time (selects, no local memory).
__device__ __forceinline__ uint32_t pick4(const uint32_t (&w)[4], int i) {
  uint32_t r = w[0];
  r = i == 1 ? w[1] : r;
  r = i == 2 ? w[2] : r;
  r = i == 3 ? w[3] : r;
  return r;
}

// The 4 × 4 exchange inside a quad: w[jj] holds this lane's packed pair (columns 2q, 2q + 1) of group
// jj; afterwards out[p] holds quad lane p's pair of group q, i.e. out = columns 0..7 of group q.
__device__ __forceinline__ void quad_exchange(const uint32_t (&w)[4], int q, uint32_t (&out)[4]) {
  out[0] = w[0];
  out[1] = w[1];
  out[2] = w[2];
  out[3] = w[3];  // out[q] = w[q]; the other three are replaced
#pragma unroll
  for (int r = 1; r < 4; ++r) {
    const uint32_t got = __shfl_xor_sync(0xffffffffu, pick4(w, q ^ r), r);
    const int p = q ^ r;
    out[0] = p == 0 ? got : out[0];
    out[1] = p == 1 ? got : out[1];
    out[2] = p == 2 ? got : out[2];
    out[3] = p == 3 ? got : out[3];
  }
}

// Stores 8 consecutive 16-bit results (out, packed pairs) at columns col.. of a row starting at dst:
// one 16-byte vector, or one scalar per in-bounds element where the row is not 16-byte aligned or the
// 8 columns run past n.
template <class Element>
__device__ __forceinline__ void store_row_group(Element* dst, bool row_in, bool aligned, int col, int n, const uint32_t (&out)[4]) {
  if (!row_in || col >= n) return;
  if (aligned && col + 8 <= n) {
    *reinterpret_cast<uint4*>(dst + col) = make_uint4(out[0], out[1], out[2], out[3]);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (col + e < n) *reinterpret_cast<uint16_t*>(dst + col + e) = static_cast<uint16_t>(out[e / 2] >> (16 * (e % 2)));
  }
}

// B's ring as its TMA boxes write it (128-byte swizzle), for wgmma: tiles of BN × BK bytes-per-stage
// apart; K-major: BN rows of 128 bytes per K chunk; MN-major: BN / 64 chunks of BK K rows of 128 bytes.
// Shared by Types (this file) and PrologueTypes (sm90_gemm_prologue.cuh): C needs BN, BK, BKMajor and
// BBytesPerStage.
template <class C, class TB>
struct BTiles {
  __device__ static __forceinline__ uint64_t b_descriptor(const void* ring_b) {
    return C::BKMajor ? wgmma::k_major(wgmma::shared_address(ring_b)) : wgmma::mn_major(wgmma::shared_address(ring_b), C::BK);
  }
  // k-block kb of B's tile `tile`, in bytes from the ring.
  __device__ static __forceinline__ uint32_t b_offset(int tile, int kb) {
    return static_cast<uint32_t>(tile * C::BBytesPerStage) + (C::BKMajor ? wgmma::k_major_block(C::BN, kb) : wgmma::mn_major_block(kb));
  }
  // B's column c (an instruction narrower than BN starts there), in bytes: K-major a row of 128 bytes,
  // MN-major an element of a 64-column chunk of BK rows.
  __device__ static __forceinline__ uint32_t b_column(int c) {
    return static_cast<uint32_t>(C::BKMajor ? c * 128 : (c / 64) * C::BK * 128 + (c % 64) * static_cast<int>(sizeof(TB)));
  }
};

// The element and wgmma instruction types of one Config (the instruction wrapper of CuTe's selector;
// descriptors and fragments by plain index arithmetic: wgmma.cuh).
template <class C>
struct Types : BTiles<C, typename cute_type<C::TB>::type> {
  using TA = typename cute_type<C::TA>::type;
  using TB = typename cute_type<C::TB>::type;
  static constexpr cute::SM90::GMMA::Major MajorA = C::AKMajor ? cute::SM90::GMMA::Major::K : cute::SM90::GMMA::Major::MN;
  static constexpr cute::SM90::GMMA::Major MajorB = C::BKMajor ? cute::SM90::GMMA::Major::K : cute::SM90::GMMA::Major::MN;
  // One consumer warpgroup computes 64 × BN.
  using WarpgroupTile = cute::Shape<cute::_64, cute::Int<C::BN>, cute::Int<C::BK>>;
  using MmaOp = decltype(cute::SM90::GMMA::ss_op_selector<TA, TB, float, WarpgroupTile, MajorA, MajorB>());
  // Shared memory (what the TMA boxes write, tma.h; 128-byte swizzle):
  // A: Stages × BM/64 blocks of 64 rows × BK, block s·BM/64 + c rows 64c.. of stage s (cooperative:
  //   consumer c's rows; ping-pong: BM 64, one block per stage). K-major: 64 rows of 128 bytes per
  //   128-byte K chunk; MN-major: BK K rows of 128 bytes (the 64 rows).
  // B: Stages × BOperands tiles (BTiles), tile s·BOperands + j operand j's tile of stage s.
  static constexpr int KBlocks = C::BK * static_cast<int>(sizeof(TA)) / 32;  // 32-byte k-blocks (one instruction's K)
  static constexpr int ABlockBytes = 64 * C::BK * static_cast<int>(sizeof(TA));
  __device__ static __forceinline__ uint64_t a_descriptor(const void* ring_a) {
    return C::AKMajor ? wgmma::k_major(wgmma::shared_address(ring_a)) : wgmma::mn_major(wgmma::shared_address(ring_a), C::BK);
  }
  // k-block kb of A's block `block`, in bytes from the ring.
  __device__ static __forceinline__ uint32_t a_offset(int block, int kb) {
    return static_cast<uint32_t>(block * ABlockBytes) + (C::AKMajor ? wgmma::k_major_block(64, kb) : wgmma::mn_major_block(kb));
  }
};

__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

__device__ __forceinline__ void tma_load(void* dst, const TensorMap& map, int c0, int c1, int c2, uint64_t* bar) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, &map, coords, bar);
}

// The same box written at the same shared-memory offset of every block in `mask`, completing bytes on
// each block's barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_multicast(void* dst, const TensorMap& map, int c0, int c1, int c2, uint64_t* bar,
                                                   uint16_t mask) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, &map, coords, bar, mask);
}

// The warp's split-K merge counter: +1 with acquire-release semantics at GPU scope; returns the old value.
__device__ __forceinline__ unsigned counter_arrive(unsigned* counter) {
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
}

// The multicast masks of a cluster of ClusterM × ClusterN blocks (rank = rank_m + ClusterM · rank_n): the
// blocks of one tile-row (same rank_m, sharing A) and of one tile-column (same rank_n, sharing B).
template <class C>
__device__ __forceinline__ uint16_t cluster_row_mask(int rank_m) {
  unsigned mask = 0;
#pragma unroll
  for (int j = 0; j < C::ClusterN; ++j) mask |= 1u << (rank_m + C::ClusterM * j);
  return static_cast<uint16_t>(mask);
}
template <class C>
__device__ __forceinline__ uint16_t cluster_column_mask(int rank_n) {
  return static_cast<uint16_t>(((1u << C::ClusterM) - 1u) << (C::ClusterM * rank_n));
}

// Arrives on the mbarrier at `bar`'s offset in block `rank` of the cluster. The default .release.cta
// semantics on purpose: what the arrival publishes is that this warp's wgmma (async proxy) reads of the
// stage are complete, and .release.cluster costs a MEMBAR.ALL.GPU per arrival (measured 2026-11-26:
// the 2x1-cluster kernel ran at 0.63x of the cluster-less one with it).
__device__ __forceinline__ void arrive_remote(uint64_t* bar, uint32_t rank) {
  const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(local),
      "r"(rank)
      : "memory");
}

// Programmatic dependent launch (PTX griddepcontrol, sm_90): wait for the prerequisite grid's completion
// and memory flush; allow the dependent grid to be scheduled.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

}  // namespace detail

// The kernel's body; gemm_kernel and SOLDER_GEMM_KERNEL wrap it (they carry the __launch_bounds__).
// b2: the second B operand's tensor map, read only when C::BOperands is 2.
// KRanges (gemm_ranges_kernel, SOLDER_GEMM_RANGES_KERNEL): K is two ranges, the first of shape.k over
// (a, b), the second of `second.k` over (second.a, second.b); read only when KRanges is true.
template <class C, bool KRanges = false, class Epilogue>
__device__ __forceinline__ void gemm_body(const TensorMap& a, const TensorMap& b, const GemmShape& shape,
                                          const Epilogue& epilogue, const SplitKWorkspace& workspace = {},
                                          const TensorMap* b2 = nullptr, const SecondKRange& second = {}) {
  using T = detail::Types<C>;
  using TA = typename T::TA;
  using TB = typename T::TB;
  if (shape.m <= 0 || shape.n <= 0) return;

  extern __shared__ unsigned char solder_gemm_smem[];
  // The 128-byte swizzle repeats every 1024 bytes: the ring starts on a 1024-byte boundary.
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(solder_gemm_smem) + 1023) & ~uintptr_t(1023));
  TA* ring_a = reinterpret_cast<TA*>(base);
  TB* ring_b = reinterpret_cast<TB*>(base + C::Stages * C::ABytesPerStage);
  // The staged epilogue's buffer (C::EpilogueBytes, consumer c's 64 rows at c · 64 · EpilogueColumns
  // elements) sits between the ring and the barriers.
  const uint32_t staging_address = detail::smem_address(base + C::Stages * C::StageBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(base + C::Stages * C::StageBytes + C::EpilogueBytes);
  uint64_t* empty = full + C::Stages;

  // Work units: ClusterM vertically × ClusterN horizontally adjacent tiles, one per block of the
  // cluster (config.cuh).
  const int tiles_m = ceil_div(ceil_div(shape.m, C::BM), C::ClusterM);  // unit rows
  const int tiles_n = ceil_div(ceil_div(shape.n, C::BN), C::ClusterN);  // unit columns
  const int tiles_per_batch = tiles_m * tiles_n;
  const int tile_units = tiles_per_batch * (shape.batch > 0 ? shape.batch : 1);
  // With K ranges each range takes whole K tiles (its last one zero-filled past the range's K by its
  // own tensor maps' bounds): k_tiles = ⌈K1 / BK⌉ + ⌈K2 / BK⌉, the second range's from first_tiles on.
  const int first_tiles = ceil_div(shape.k, C::BK);
  const int k_tiles = first_tiles + (KRanges ? ceil_div(second.k, C::BK) : 0);
  const int rank = C::ClusterSize > 1 ? static_cast<int>(cute::block_rank_in_cluster()) : 0;
  // A 2-D cluster (ClusterM × ClusterN blocks) numbers its blocks M-fastest: rank = rank_m + ClusterM · rank_n.
  const int rank_m = C::ClusterM > 1 ? rank % C::ClusterM : 0, rank_n = C::ClusterN > 1 ? rank / C::ClusterM : 0;
  const int first_unit = static_cast<int>(blockIdx.x) / C::ClusterSize;
  const int unit_step = static_cast<int>(gridDim.x) / C::ClusterSize;
  // The tail split (Config::TailSplit, config.cuh): the last partial wave's tile units, split over K.
  const int tail_units = C::TailSplit > 1 ? tail_tile_units(tile_units, unit_step) : 0;
  const int full_units = tile_units - tail_units;
  const int total_units = full_units * C::SplitK + tail_units * C::TailSplit;  // × splits
  // Work unit u: its tile unit, its split and that tile unit's splits (SplitK, or TailSplit in the tail).
  auto unit_of = [&](int u, int* t, int* split, int* splits) {
    if constexpr (C::TailSplit > 1) {
      tail_split_unit(u, full_units, C::TailSplit, t, split, splits);
    } else {
      *t = u / C::SplitK;
      *split = u % C::SplitK;
      *splits = C::SplitK;
    }
  };
  // Where this block's tile of tile unit `t` (linear over batch × unit-rows × unit-columns) is. With a
  // cluster, a block's tile may lie below M (right of N): its own loads of B (A) are zero-filled, its
  // stores skipped, and its slice of the shared operand still serves the other blocks.
  // Work unit u is tile unit t and K tiles split_range(split, splits) (unit_of).
  auto locate = [&](int t, int* batch, int* m0, int* n0) {
    *batch = t / tiles_per_batch;
    int tile_m = 0, tile_n = 0;
    tile_of(t - *batch * tiles_per_batch, tiles_m, tiles_n, C::GroupM / C::ClusterM > 0 ? C::GroupM / C::ClusterM : 1,
            &tile_m, &tile_n);
    *m0 = (tile_m * C::ClusterM + rank_m) * C::BM;
    *n0 = (tile_n * C::ClusterN + rank_n) * C::BN;
  };

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;

  if (threadIdx.x == 0) {
    // The tensor maps are kernel parameters, never written by an earlier kernel: fetched before the
    // dependency wait below.
    asm volatile("prefetch.tensormap [%0];" ::"l"(&a) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&b) : "memory");
    if constexpr (C::BOperands == 2) asm volatile("prefetch.tensormap [%0];" ::"l"(b2) : "memory");
    if constexpr (KRanges) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(second.a) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(second.b) : "memory");
    }
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      // One arrival per consumer warp that reads the stage, on every block of the cluster.
      cuda::ptx::mbarrier_init(&empty[s], C::ClusterSize * C::StageReaders * 4);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  if constexpr (C::ClusterSize > 1) {
    cute::cluster_sync();  // the peers' barriers are initialised before anyone multicasts or arrives
  } else {
    __syncthreads();
  }
  // Programmatic dependent launch (both no-ops unless the launch carries the programmatic stream
  // serialization attribute): everything above touches no global memory, so it may overlap the previous
  // kernel's tail; every thread waits here for that kernel to complete (its writes visible) before any
  // load, store or epilogue read. Then the next kernel may be scheduled at once: its blocks take SMs only
  // as ours leave them, and wait at this same point for our completion.
  detail::grid_dependency_wait();
  detail::launch_dependents();

  const TensorMap& a_first = a;
  const TensorMap& b_first = b;
  if (warpgroup == 0) {
    // ---- Producer ----
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (thread == 0) {
      // The ring's position carries over from tile to tile: the next tile's loads start while the
      // consumers are still in the previous tile's epilogue.
      int stage = 0;
      uint32_t phase = 0;
      for (int u = first_unit; u < total_units; u += unit_step) {
        int batch, m0, n0, kt_begin, kt_end, t, split, splits;
        unit_of(u, &t, &split, &splits);
        locate(t, &batch, &m0, &n0);
        split_range(k_tiles, split, splits, &kt_begin, &kt_end);
        const int batch_a = shape.broadcast_a ? 0 : batch;
        const int batch_b = shape.broadcast_b ? 0 : batch;
        for (int kt = kt_begin; kt < kt_end; ++kt) {
          detail::wait_parity(&empty[stage], phase ^ 1u);
          cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                               &full[stage], static_cast<uint32_t>(C::StageBytes));
          // The K range of this K tile: its operands' tensor maps and the tile's K offset inside it.
          const bool in_second = KRanges && kt >= first_tiles;
          const TensorMap& a = in_second ? *second.a : a_first;
          const TensorMap& b = in_second ? *second.b : b_first;
          const int k0 = (in_second ? kt - first_tiles : kt) * C::BK;
          TA* sa = ring_a + stage * (C::BM * C::BK);
          TB* sb = ring_b + stage * C::BOperands * (C::BN * C::BK);
          if constexpr (C::ClusterN == 1) {
            if constexpr (C::AKMajor) {
              detail::tma_load(sa, a, k0, m0, batch_a, &full[stage]);  // box {BK, BM}
            } else {
#pragma unroll
              for (int i = 0; i < C::BM / 64; ++i)  // boxes {64, BK}
                detail::tma_load(sa + i * 64 * C::BK, a, m0 + 64 * i, k0, batch_a, &full[stage]);
            }
          } else {
            // This block's slice of the shared A tile, into every block of the cluster's tile-row (the
            // blocks of its rank_m: rank_m + ClusterM · j).
            const uint16_t all = detail::cluster_row_mask<C>(rank_m);
            if constexpr (C::AKMajor) {
              constexpr int slice = C::BM / C::ClusterN;  // box {BK, BM/ClusterN}
              detail::tma_load_multicast(sa + rank_n * slice * C::BK, a, k0, m0 + rank_n * slice, batch_a, &full[stage], all);
            } else {
#pragma unroll
              for (int i = 0; i < C::BM / 64; ++i)
                if (i % C::ClusterN == rank_n)
                  detail::tma_load_multicast(sa + i * 64 * C::BK, a, m0 + 64 * i, k0, batch_a, &full[stage], all);
            }
          }
          if constexpr (C::ClusterM == 1) {
#pragma unroll
            for (int j = 0; j < C::BOperands; ++j) {  // B, then B2 (dual-B) into the next block
              const TensorMap& map = j == 0 ? b : *b2;
              TB* dst = sb + j * (C::BN * C::BK);
              if constexpr (C::BKMajor) {
                detail::tma_load(dst, map, k0, n0, batch_b, &full[stage]);  // box {BK, BN}
              } else {
#pragma unroll
                for (int i = 0; i < C::BN / 64; ++i)
                  detail::tma_load(dst + i * 64 * C::BK, map, n0 + 64 * i, k0, batch_b, &full[stage]);
              }
            }
          } else {
            // This block's half of the shared B tile, into both blocks of the cluster's tile-column (the
            // blocks of its rank_n: ClusterM · rank_n + i).
            const uint16_t both = detail::cluster_column_mask<C>(rank_n);
            if constexpr (C::BKMajor) {
              constexpr int half = C::BN / C::ClusterM;  // box {BK, BN/2}
              detail::tma_load_multicast(sb + rank_m * half * C::BK, b, k0, n0 + rank_m * half, batch_b, &full[stage], both);
            } else if constexpr (!C::BSplitK) {
#pragma unroll
              for (int i = 0; i < C::BN / 64; ++i)
                if (i % C::ClusterM == rank_m)
                  detail::tma_load_multicast(sb + i * 64 * C::BK, b, n0 + 64 * i, k0, batch_b, &full[stage], both);
            } else {
              // BN/64 boxes that do not deal out: this block's BBoxKRows K rows of every box (box {64,
              // BK/ClusterM}; a box's row k is 64 elements at k · 64, whole 1024-byte swizzle atoms).
#pragma unroll
              for (int i = 0; i < C::BN / 64; ++i)
                detail::tma_load_multicast(sb + i * 64 * C::BK + rank_m * C::BBoxKRows * 64, b, n0 + 64 * i,
                                           k0 + rank_m * C::BBoxKRows, batch_b, &full[stage], both);
            }
          }
          if (++stage == C::Stages) {
            stage = 0;
            phase ^= 1u;
          }
        }
      }
    }
  } else {
    // ---- Consumers ----
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int consumer = warpgroup - 1;
    // The 64-row block of each tile (and of each stage's A) this warpgroup computes: its own in the
    // cooperative schedule, the whole (64-row) tile in the ping-pong one.
    const int row_block = C::Pingpong ? 0 : consumer;
    const uint64_t a_desc = T::a_descriptor(ring_a), b_desc = T::b_descriptor(ring_b);
    // The m64nBNk accumulators, in the instruction's register order (wgmma.cuh); acc2: dual-B only.
    wgmma::Fragment<float, C::BN / 2> acc;
    wgmma::Fragment<float, C::BN / 2> acc2;
    const int warp = thread / 32, lane = thread % 32;
    constexpr bool kRowReduction = detail::is_row_reduction<Epilogue>::value;
    static_assert(!kRowReduction || (C::BOperands == 1 && C::ClusterN == 1),
                  "a row-reduction epilogue needs one B and a tile covering all N columns (no cluster along N)");
    constexpr bool kRowStore = !kRowReduction && C::BOperands == 1 && C::BN % 32 == 0 && detail::has_row_store<Epilogue>::value;
    // The staged mode needs a buffer and the whole warpgroup at its barriers (split-K's merge is per
    // warp: a warp whose split is not the last skips the epilogue), else registers first.
    constexpr int kRowMode = detail::row_store_mode_of<Epilogue>::value == 2 &&
                                     (C::EpilogueColumns == 0 || C::SplitK > 1 || C::TailSplit > 1)
                                 ? 1
                                 : detail::row_store_mode_of<Epilogue>::value;

    int stage = 0;
    uint32_t phase = 0;
    // A stage is released once per consumer warp, on every block of the cluster.
    auto release = [&](int s) {
      __syncwarp();
      if constexpr (C::ClusterSize == 1) {
        if (lane == 0) cuda::ptx::mbarrier_arrive(&empty[s]);
      } else {
        if (lane < C::ClusterSize) detail::arrive_remote(&empty[s], static_cast<uint32_t>(lane));
      }
    };

    int local_unit = 0;  // the block's units in order: the ping-pong schedule alternates them
    for (int u = first_unit; u < total_units; u += unit_step, ++local_unit) {
      int batch, m0, n0, kt_begin, kt_end, t, split, splits;
      unit_of(u, &t, &split, &splits);
      split_range(k_tiles, split, splits, &kt_begin, &kt_end);
      if constexpr (C::Pingpong) {
        if (local_unit % 2 != consumer) {
          // The other warpgroup's unit: its K tiles fill the ring's next kt_end - kt_begin stages.
          const int next = stage + (kt_end - kt_begin);
          phase ^= static_cast<uint32_t>((next / C::Stages) & 1);
          stage = next % C::Stages;
          continue;
        }
      }
      // Ping-pong: wait until the other warpgroup has seen its previous unit's stages full.
      if constexpr (C::Pingpong) {
        if (local_unit > 0) detail::turn_wait(consumer);
      }
      locate(t, &batch, &m0, &n0);
      wgmma::clear(acc);
      if constexpr (C::BOperands == 2) wgmma::clear(acc2);
      int previous = 0;
      for (int kt = kt_begin; kt < kt_end; ++kt) {
        detail::wait_parity(&full[stage], phase);
        wgmma::fence(acc);
        if constexpr (C::BOperands == 2) wgmma::fence(acc2);
        wgmma::arrive();
#pragma unroll
        for (int kb = 0; kb < T::KBlocks; ++kb)
          wgmma::mma_ss_columns<typename T::MmaOp>(wgmma::advance(a_desc, T::a_offset(stage * (C::BM / 64) + row_block, kb)),
                                                   wgmma::advance(b_desc, T::b_offset(stage * C::BOperands, kb)), acc, true,
                                                   T::b_column);
        if constexpr (C::BOperands == 2) {
#pragma unroll
          for (int kb = 0; kb < T::KBlocks; ++kb)
            wgmma::mma_ss_columns<typename T::MmaOp>(wgmma::advance(a_desc, T::a_offset(stage * (C::BM / 64) + row_block, kb)),
                                                     wgmma::advance(b_desc, T::b_offset(stage * C::BOperands + 1, kb)), acc2, true,
                                                     T::b_column);
        }
        wgmma::commit();
        wgmma::wait<1>();  // the previous batch is done: its stage can be refilled
        wgmma::fence(acc);
        if constexpr (C::BOperands == 2) wgmma::fence(acc2);
        if (kt > kt_begin) release(previous);
        previous = stage;
        if (++stage == C::Stages) {
          stage = 0;
          phase ^= 1u;
        }
      }
      // Ping-pong: every stage of this unit has been seen full; the other warpgroup's next unit may start
      // waiting for its own (only when there is one: each arrival meets exactly one wait).
      if constexpr (C::Pingpong) {
        if (u + unit_step < total_units) detail::turn_give(1 - consumer);
      }
      wgmma::wait<0>();
      wgmma::fence(acc);
      if constexpr (C::BOperands == 2) wgmma::fence(acc2);
      if (kt_end > kt_begin) release(previous);

      // Split-K's splits, or the tail split's (TailSplit > 1 needs SplitK 1); a unit merges when its tile
      // unit is split (always with SplitK > 1; in the tail with TailSplit > 1).
      constexpr int kSplits = C::SplitK > 1 ? C::SplitK : C::TailSplit;
      if constexpr (kSplits > 1) {
        if (splits > 1) {
          // ---- Split-K merge (config.cuh, SplitKWorkspace) ----
          // This warp's 16 × BN slice: BN/8 float4 per lane, float4 j of lane l at (32·j + l)·4. The tail
          // split's workspace holds the tail's tile units only (tail_split_workspace_floats).
          constexpr int Slice = 16 * C::BN;
          constexpr int Vectors = C::BN / 8;
          const long long tile = static_cast<long long>(C::SplitK > 1 ? t : t - full_units) * C::ClusterSize + rank;
          const int slice = row_block * 4 + warp;  // 16-row slice of the tile
          float* own = workspace.partials + ((tile * kSplits + split) * C::BM / 16 + slice) * Slice;
#pragma unroll
          for (int j = 0; j < Vectors; ++j)
            __stcg(reinterpret_cast<float4*>(own) + 32 * j + lane,
                   make_float4(acc(4 * j), acc(4 * j + 1), acc(4 * j + 2), acc(4 * j + 3)));
          __threadfence();
          __syncwarp();
          unsigned* counter = workspace.counters + tile * (C::BM / 16) + slice;
          unsigned arrived = 0;
          if (lane == 0) arrived = detail::counter_arrive(counter);
          arrived = __shfl_sync(0xffffffffu, arrived, 0);
          if (arrived != static_cast<unsigned>(kSplits - 1)) continue;  // another split merges
          __threadfence();
          // The last split: acc = partial 0 + partial 1 + … in split order, every partial (its own too, which
          // it just stored) read back from L2. Loop order: chunks of Chunk float4 per lane, then splits, so
          // each split's Chunk loads are in flight together (a split-inner loop serialized one L2 round trip
          // per float4: measured 2026-11-26, the merge then cost more than the split saved).
          const float* first = workspace.partials + (tile * kSplits * C::BM / 16 + slice) * Slice;
          // 8 float4 per split in flight where they divide BN/8 (BN a multiple of 64), else 4 or 2.
          constexpr int Chunk = Vectors % 8 == 0 ? 8 : Vectors % 4 == 0 ? 4 : 2;
          static_assert(Vectors % Chunk == 0, "the merge's chunks must tile BN/8");
          // Adds split s's Chunk float4 at j0 into sum (the first split initialises it).
          auto add_split = [&](int s, int j0, float4 (&sum)[Chunk]) {
            const float4* part = reinterpret_cast<const float4*>(first + static_cast<long long>(s) * C::BM / 16 * Slice) + 32 * j0 + lane;
            float4 v[Chunk];
#pragma unroll
            for (int j = 0; j < Chunk; ++j) v[j] = __ldcg(part + 32 * j);
#pragma unroll
            for (int j = 0; j < Chunk; ++j) {
              if (s == 0) {
                sum[j] = v[j];
              } else {
                sum[j].x += v[j].x;
                sum[j].y += v[j].y;
                sum[j].z += v[j].z;
                sum[j].w += v[j].w;
              }
            }
          };
#pragma unroll
          for (int j0 = 0; j0 < Vectors; j0 += Chunk) {
            float4 sum[Chunk];
            if constexpr (C::BN > 128) {
              // 128 accumulators per thread: one split's loads in flight at a time (unrolled, ptxas spills).
#pragma unroll 1
              for (int s = 0; s < kSplits; ++s) add_split(s, j0, sum);
            } else {
#pragma unroll
              for (int s = 0; s < kSplits; ++s) add_split(s, j0, sum);
            }
#pragma unroll
            for (int j = 0; j < Chunk; ++j) {
              acc(4 * (j0 + j)) = sum[j].x;
              acc(4 * (j0 + j) + 1) = sum[j].y;
              acc(4 * (j0 + j) + 2) = sum[j].z;
              acc(4 * (j0 + j) + 3) = sum[j].w;
            }
          }
          if (lane == 0) *counter = 0u;  // ready for the next launch (or graph replay)
        }
      }

      // ---- Epilogue: the m64nBNk accumulator layout ----
      // Register i of thread t (warp w = t/32, lane l): row 16w + l/4 + 8·((i/2)%2),
      // column 8·(i/4) + 2·(l%4) + i%2.
      const int row_base = m0 + row_block * 64 + warp * 16 + lane / 4;
      const int col_base = n0 + 2 * (lane % 4);
      if constexpr (kRowReduction) {
        // Row reductions (row_epilogue.cuh): the tile holds whole rows (BN ≥ N, n0 = 0); each lane
        // hands its two rows' BN/4 values to the functor, which combines them over the quad. A tile right
        // of the first (N > BN: the code generator never launches one) has no whole row: nothing.
#pragma unroll
        for (int h = 0; h < (n0 == 0 ? 2 : 0); ++h) {
          RowFragment<C::BN> values;
#pragma unroll
          for (int j = 0; j < C::BN / 8; ++j) {
            values.v[2 * j] = acc(4 * j + 2 * h);
            values.v[2 * j + 1] = acc(4 * j + 2 * h + 1);
          }
          values.col0 = col_base;
          values.n = shape.n;
          const int row = row_base + 8 * h;
          epilogue.row(batch, row, row < shape.m, values);
        }
      } else if constexpr (kRowStore) {
        // Row stores (the epilogue's value() and row_pointer(), a 16-bit element): the 4 lanes of a quad
        // hold 8 consecutive columns of a row (2 each) per 8-column group; a 4 × 4 exchange of packed
        // pairs inside the quad (3 shuffles, detail::quad_exchange) gives each lane 8 consecutive columns
        // of one group: a 16-byte vector. kRowMode (detail::row_store_mode_of) says where it goes.
        using Element = typename Epilogue::element;
        const int q = lane % 4;
        if constexpr (kRowMode == 0) {
          // Direct: value() per group of four, then one 16-byte global store per lane: a warp's store
          // writes 64 contiguous bytes of each of 8 rows. Columns past N and rows whose pointer or width
          // is not 16-byte aligned take one scalar store per element.
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row_base + 8 * h;
            const bool row_in = row < shape.m;
            Element* dst = row_in ? epilogue.row_pointer(batch, row) : nullptr;
            const bool aligned = (reinterpret_cast<uintptr_t>(dst) & 15u) == 0;
#pragma unroll
            for (int j0 = 0; j0 < C::BN / 8; j0 += 4) {
              uint32_t w[4];
#pragma unroll
              for (int jj = 0; jj < 4; ++jj) {
                const int i = 4 * (j0 + jj) + 2 * h;
                const int col = col_base + 8 * (j0 + jj);
                const float v0 = row_in && col < shape.n ? epilogue.value(batch, row, col, acc(i)) : 0.0f;
                const float v1 = row_in && col + 1 < shape.n ? epilogue.value(batch, row, col + 1, acc(i + 1)) : 0.0f;
                w[jj] = detail::pack_pair<Element>(v0, v1);
              }
              uint32_t out[4];
              detail::quad_exchange(w, q, out);
              detail::store_row_group(dst, row_in, aligned, n0 + 8 * (j0 + q), shape.n, out);
            }
          }
        } else {
          // Parts of Part columns (64, or 32 where 64 does not divide the tile or the buffer): every
          // value() of a part first (2 rows × Part/8 groups, packed pairs), so its scale and bias loads all
          // go out before its stores; then its exchanges and stores. Rows and columns past the edge are
          // clamped to the last one instead of predicated (their results are never stored): value() is
          // called unconditionally, so the compiler loads a row's factor once for all its columns and a
          // column's once for both rows (predicated calls measured one load per element: 2026-11-27, ncu,
          // fp8 Q5). A whole 128 × 256 tile at once held 128 accumulators and 64 column factors at the same
          // time and spilled under the 168-register bound of a 384-thread block.
          constexpr int Cols = kRowMode == 2 ? C::EpilogueColumns : C::BN;  // columns per staged chunk
          constexpr int Part = kRowMode == 1 && C::BN % 64 == 0 ? 64 : 32;
          // This part's values: packed[h][g] = columns 2q, 2q + 1 of group p0/8 + g of row h.
          auto part_values = [&](int p0, uint32_t (&packed)[2][Part / 8]) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = min(row_base + 8 * h, shape.m - 1);
#pragma unroll
              for (int g = 0; g < Part / 8; ++g) {
                const int j = p0 / 8 + g;
                const int i = 4 * j + 2 * h;
                const int col = col_base + 8 * j;
                const float v0 = epilogue.value(batch, row, min(col, shape.n - 1), acc(i));
                const float v1 = epilogue.value(batch, row, min(col + 1, shape.n - 1), acc(i + 1));
                packed[h][g] = detail::pack_pair<Element>(v0, v1);
              }
            }
          };
          if constexpr (kRowMode == 1) {
#pragma unroll
            for (int p0 = 0; p0 < C::BN; p0 += Part) {
              uint32_t packed[2][Part / 8];
              part_values(p0, packed);
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int row = row_base + 8 * h;
                const bool row_in = row < shape.m;
                Element* dst = row_in ? epilogue.row_pointer(batch, row) : nullptr;
                const bool aligned = (reinterpret_cast<uintptr_t>(dst) & 15u) == 0;
#pragma unroll
                for (int g0 = 0; g0 < Part / 8; g0 += 4) {
                  const uint32_t w[4] = {packed[h][g0], packed[h][g0 + 1], packed[h][g0 + 2], packed[h][g0 + 3]};
                  uint32_t out[4];
                  detail::quad_exchange(w, q, out);
                  detail::store_row_group(dst, row_in, aligned, n0 + p0 + 8 * (g0 + q), shape.n, out);
                }
              }
            }
          } else {
            // Staged: Cols columns at a time into this warpgroup's 64 × Cols buffer (row r at r · Cols
            // elements: what one bulk copy per row reads), then lanes 0..15 of each warp store the warp's
            // 16 rows with one cp.async.bulk each (a scalar copy where the row's address or width is not a
            // multiple of 16 bytes; the copy takes uniform operands, so each warp issues its 16 in turn).
            // Before the buffer is rewritten (next chunk, next tile) the storing threads wait until their
            // copies have read it, and the warpgroup meets at a barrier.
            const uint32_t buffer = staging_address + static_cast<uint32_t>(consumer * 64 * Cols * 2);
#pragma unroll
            for (int c0 = 0; c0 < C::BN; c0 += Cols) {
              if (lane < 16) detail::bulk_wait_read();
              detail::warpgroup_barrier(consumer);
#pragma unroll
              for (int p0 = c0; p0 < c0 + Cols; p0 += Part) {
                uint32_t packed[2][Part / 8];
                part_values(p0, packed);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                  const int local_row = warp * 16 + lane / 4 + 8 * h;
#pragma unroll
                  for (int g0 = 0; g0 < Part / 8; g0 += 4) {
                    const uint32_t w[4] = {packed[h][g0], packed[h][g0 + 1], packed[h][g0 + 2], packed[h][g0 + 3]};
                    uint32_t out[4];
                    detail::quad_exchange(w, q, out);
                    detail::st_shared_v4(buffer + static_cast<uint32_t>((local_row * Cols + p0 - c0 + 8 * (g0 + q)) * 2), out[0],
                                         out[1], out[2], out[3]);
                  }
                }
              }
              detail::fence_async_shared();
              detail::warpgroup_barrier(consumer);
              if (lane < 16) {
                const int store_row = warp * 16 + lane;  // the storing lane's row of the warpgroup's 64
                const int row = m0 + row_block * 64 + store_row;
                const int col0 = n0 + c0;
                if (row < shape.m && col0 < shape.n) {
                  const int count = shape.n - col0 < Cols ? shape.n - col0 : Cols;
                  Element* dst = epilogue.row_pointer(batch, row) + col0;
                  const uint32_t src = buffer + static_cast<uint32_t>(store_row * Cols * 2);
                  if ((reinterpret_cast<uintptr_t>(dst) & 15u) == 0 && count % 8 == 0) {
                    detail::bulk_store(dst, src, static_cast<uint32_t>(count * 2));
                  } else {
                    for (int e = 0; e < count; ++e) reinterpret_cast<uint16_t*>(dst)[e] = detail::ld_shared_u16(src + 2 * e);
                  }
                }
                detail::bulk_commit();
              }
            }
          }
        }
      }
      if constexpr (!kRowReduction) {
#pragma unroll
      for (int i = 0; i < (kRowStore ? 0 : C::BN / 2); i += 2) {
        const int row = row_base + 8 * ((i / 2) % 2);
        const int col = col_base + 8 * (i / 4);
        if constexpr (C::BOperands == 2) {
          if (row < shape.m) {
            if constexpr (detail::has_dual_pair<Epilogue>::value) {
              if (col + 1 < shape.n) {
                epilogue.pair(batch, row, col, acc(i), acc(i + 1), acc2(i), acc2(i + 1));
              } else if (col < shape.n) {
                epilogue(batch, row, col, acc(i), acc2(i));
              }
            } else {
              if (col < shape.n) epilogue(batch, row, col, acc(i), acc2(i));
              if (col + 1 < shape.n) epilogue(batch, row, col + 1, acc(i + 1), acc2(i + 1));
            }
          }
        } else if (row < shape.m) {
          if constexpr (detail::has_pair<Epilogue>::value) {
            if (col + 1 < shape.n) {
              epilogue.pair(batch, row, col, acc(i), acc(i + 1));
            } else if (col < shape.n) {
              epilogue(batch, row, col, acc(i));
            }
          } else {
            if (col < shape.n) epilogue(batch, row, col, acc(i));
            if (col + 1 < shape.n) epilogue(batch, row, col + 1, acc(i + 1));
          }
        }
      }
      }  // !kRowReduction
    }
    // The staged epilogue's last bulk copies: complete before the block (and its shared memory) goes.
    if constexpr (kRowStore && kRowMode == 2) {
      if (lane < 16) detail::bulk_wait_all();
    }
  }
  // No block leaves while its peers may still multicast into it or arrive on its barriers.
  if constexpr (C::ClusterSize > 1) cute::cluster_sync();
}

template <class C, class Epilogue>
__global__ void __launch_bounds__(C::Threads, 1)
    gemm_kernel(const __grid_constant__ TensorMap a, const __grid_constant__ TensorMap b, GemmShape shape,
                Epilogue epilogue, SplitKWorkspace workspace) {
  gemm_body<C>(a, b, shape, epilogue, workspace);
}

// Dual-B (C::BOperands == 2): B2's tensor map follows B's.
template <class C, class Epilogue>
__global__ void __launch_bounds__(C::Threads, 1)
    gemm_dual_kernel(const __grid_constant__ TensorMap a, const __grid_constant__ TensorMap b,
                     const __grid_constant__ TensorMap b2, GemmShape shape, Epilogue epilogue, SplitKWorkspace workspace) {
  static_assert(C::BOperands == 2, "gemm_dual_kernel takes a Config with BOperands = 2");
  gemm_body<C>(a, b, shape, epilogue, workspace, &b2);
}

// K ranges (KRanges): the first range's tensor maps a and b, the second's in `second` (kernel
// parameters too: SecondKRange holds their addresses inside the parameter space), K1 = shape.k.
template <class C, class Epilogue>
__global__ void __launch_bounds__(C::Threads, 1)
    gemm_ranges_kernel(const __grid_constant__ TensorMap a, const __grid_constant__ TensorMap b,
                       const __grid_constant__ TensorMap a2, const __grid_constant__ TensorMap b2, GemmShape shape, int k2,
                       Epilogue epilogue, SplitKWorkspace workspace) {
  static_assert(C::BOperands == 1, "K ranges take one B operand per range");
  gemm_body<C, true>(a, b, shape, epilogue, workspace, nullptr, SecondKRange{&a2, &b2, k2});
}

}  // namespace solder::gemm

// An unmangled kernel for NVRTC (the runtime looks kernels up by their extern "C" names).
#define SOLDER_GEMM_KERNEL(name, ConfigType, EpilogueType)                                                  \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                     \
      name(const __grid_constant__ ::solder::gemm::TensorMap a, const __grid_constant__ ::solder::gemm::TensorMap b, \
           ::solder::gemm::GemmShape shape, EpilogueType epilogue, ::solder::gemm::SplitKWorkspace workspace) { \
    ::solder::gemm::gemm_body<ConfigType>(a, b, shape, epilogue, workspace);                                \
  }

// The same for a dual-B Config (BOperands = 2): B2's tensor map follows B's.
#define SOLDER_GEMM_DUAL_KERNEL(name, ConfigType, EpilogueType)                                             \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                     \
      name(const __grid_constant__ ::solder::gemm::TensorMap a, const __grid_constant__ ::solder::gemm::TensorMap b, \
           const __grid_constant__ ::solder::gemm::TensorMap b2, ::solder::gemm::GemmShape shape,           \
           EpilogueType epilogue, ::solder::gemm::SplitKWorkspace workspace) {                             \
    static_assert(ConfigType::BOperands == 2, "SOLDER_GEMM_DUAL_KERNEL takes a Config with BOperands = 2");  \
    ::solder::gemm::gemm_body<ConfigType>(a, b, shape, epilogue, workspace, &b2);                          \
  }

// The same for K ranges: the second range's tensor maps after the first's, then GemmShape (shape.k the
// first range's K) and the second range's K.
#define SOLDER_GEMM_RANGES_KERNEL(name, ConfigType, EpilogueType)                                           \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                     \
      name(const __grid_constant__ ::solder::gemm::TensorMap a, const __grid_constant__ ::solder::gemm::TensorMap b, \
           const __grid_constant__ ::solder::gemm::TensorMap a2, const __grid_constant__ ::solder::gemm::TensorMap b2, \
           ::solder::gemm::GemmShape shape, int k2, EpilogueType epilogue, ::solder::gemm::SplitKWorkspace workspace) { \
    static_assert(ConfigType::BOperands == 1, "SOLDER_GEMM_RANGES_KERNEL takes a Config with one B operand");  \
    ::solder::gemm::gemm_body<ConfigType, true>(a, b, shape, epilogue, workspace, nullptr,                  \
                                                ::solder::gemm::SecondKRange{&a2, &b2, k2});                \
  }
