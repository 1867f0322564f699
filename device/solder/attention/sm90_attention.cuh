// The sm_90a attention skeleton (FlashAttention-3 schedule): a TMA producer warp, Q loaded once, K and V
// rings of Config::Stages shared-memory stages on mbarriers, and 2 or 3 consumer warpgroups of 64 query
// rows each that compute S = Q·Kᵀ with wgmma from shared memory (SS), keep the online softmax state and
// P in registers, and accumulate O += P·V with wgmma taking P from registers (RS). setmaxnreg moves
// registers from the producer to the consumers. Built on CuTe's wgmma instruction wrappers, with the
// descriptors and fragments by index arithmetic (gemm/wgmma.cuh: CuTe's generic partitioning cost
// two thirds of the NVRTC front end), and CCCL <cuda/ptx> (mbarrier, TMA); compiles with nvcc and NVRTC
// like gemm/sm90_gemm.cuh.
//
// ---- Interface ------------------------------------------------------------------------------------
//
//   template <class Config, class Score, class Mask, class Epilogue, template <int> class State = OnlineSoftmax>
//   __global__ void attention_kernel(const __grid_constant__ TensorMap q, const __grid_constant__ TensorMap k,
//                                    const __grid_constant__ TensorMap v, AttentionShape shape,
//                                    const __grid_constant__ Score score,
//                                    Mask mask, Epilogue epilogue);
//   attention_kernel_tma_store<...>: the same with `const __grid_constant__ Epilogue epilogue`, for an
//   Epilogue of kTmaStore (functors.cuh), whose out_map TMA must read from the parameter itself. (A
//   __grid_constant__ epilogue everywhere costs registers: a data-mask kernel spills 12 bytes with it.)
//
// Score, Mask and State: functors.cuh. The epilogue receives each output row in pairs of columns:
//
//   struct Epilogue {
//     // o[bh][row][col], o[bh][row][col + 1] (already divided by the row's Σ p), col even; row < seq_q.
//     __device__ void operator()(int bh, int row, int col, float o0, float o1) const;
//   };
//
// or, with kPreload (functors.cuh, "Epilogue preload"), preload(bh, row, col) at the start of each
// work tile and operator()(bh, row, col, o0, o1, preloaded) at the store.
//
// Tensor maps (solder::runtime::encode_gemm_operand / plan_gemm_operand, src/runtime/tma.h): each of
// q, k, v is a K-major "GEMM operand" with rows = its sequence length, k = HeadDim, batch = batch ·
// heads (q) or batch · heads_kv (k, v), ld = the row stride, tile_k = Config::ChunkElements (64 for 16-bit
// types, 128 for e4m3, 64 for e4m3 at head dim 64: 64-byte rows, the 64-byte swizzle), tile_rows = Config::QBoxRows
// (q) or Config::KVBoxRows (k, v). V is read through the same kind of map as K: its [key][d] tile is
// the MN-major B operand of P·V. Launch with launch_config(Config{}, shape[, persistent_blocks]):
// a 1-D grid over the work tiles (or fewer persistent blocks looping over them), Config::Threads
// threads, Config::SmemBytes of dynamic shared memory.
// SOLDER_ATTENTION_KERNEL(name, Config, Score, Mask, Epilogue) defines an extern "C" entry for NVRTC.
//
// ---- Schedule -------------------------------------------------------------------------------------
//
// A block takes work tile blockIdx.x, or with Config::Persistent one tile per round of a longest-first
// list (see `locate` below), or with Config::Dynamic entry blockIdx.x of that list and then the next
// unclaimed one each time its producer starts a tile (a counter in global memory; the producer posts the
// entries to the consumers through shared memory): query rows [row0, row0 + BM) of head bh and the key tiles [begin, end) of
// Mask::key_tiles. Warpgroup 0 is the producer: one thread loads Q once per work tile (after the
// consumers released the Q that used its buffer before: the previous tile's, or with Config::QBuffers = 2
// the one before, so that the next tile's Q, K and V load while this tile's last S runs), then for each
// key tile waits for a free K stage, loads K, waits
// for a free V stage, loads V (each stage on its own full/empty mbarrier pair); with a staged bias
// (functors.cuh, Config's StagedBias) the key tile's bias tile and column bytes go into the K stage on
// K's mbarrier, and the consumers read them from there right after issuing S. Consumer warpgroup c
// owns Q rows 64c..64c+63 and, per key tile j:
//     wait K_j; [take the turn]; issue S_j = Q·K_jᵀ; O *= correction_{j-1}; wait V_{j-1};
//     issue O += P_{j-1}·V_{j-1}; [pass the turn];
//     wait S_j; release K_j; score(), mask (boundary tiles only), State::update → P_j in f32 and
//     correction_j; wait P_{j-1}·V_{j-1}; release V_{j-1}; P_j → bf16/f16 A registers.
// The softmax of tile j runs while P_{j-1}·V_{j-1} is on the tensor cores (intra-warpgroup overlap), and
// the turn — named barriers in a ring over the consumers — staggers the warpgroups: while one does its
// softmax, the next issues its products (ping-pong). With Config::Stagger = L (2 consumers) consumer 1
// runs L more turns behind: it passes its first L turns without issuing and consumer 0 ends with L empty
// turns, so that one consumer's tile boundary (last P·V, epilogue, next tile's first S and its softmax)
// falls between the other's full S + P·V issues of its own rows instead of beside the other's boundary.
// With Config::FreeConsumers there is no turn ring: each consumer issues its products as soon as its own
// K, V and softmax are ready, so the consumers drift apart by up to the ring's depth and one's tile
// boundary (last P·V, epilogue, next tile's first S and softmax) overlaps the other's products.
// After the last tile: O / Σp through the epilogue,
// by plain index arithmetic on the accumulator layout. Staged epilogue (Config::StagedEpilogue with an
// Epilogue of kStaged, functors.cuh): each consumer writes its 64 × HeadDim tile of stored words
// (staged_pack(): the tail applied, rounded) into its own slice of a dedicated shared-memory buffer, 128-byte
// swizzled (conflict-free for the accumulator layout's 8-row stores and the 16-byte reads; with one block
// per work tile, or with Config::QRowsEpilogue on persistent blocks, the slice is the consumer's own Q
// rows, Config::EpilogueInQ, and with QRowsEpilogue the Q buffer is released after the epilogue's reads
// instead of after the last S), syncs its
// warpgroup (named barrier 10 + c; once before writing, so the previous tile's reads are done), and
// stores whole rows with st.global.v4 (8 lanes per 128-byte line), rows past seq_q skipped; the
// per-pair 4-byte stores (16 per thread at hd64) become 4 full-line stores per thread. With an Epilogue of
// kTmaStore (functors.cuh: a TensorMap out_map of o) each warp instead fences its writes to the async proxy
// and its lane 0 stores the warp's 16 rows by one cp.async.bulk.tensor per 64 columns (the map clips rows
// past seq_q), then waits until those stores have read shared memory (cp.async.bulk.wait_group.read)
// before the rows are rewritten or the Q buffer released: no named barrier, no registers held by stores. The rings and the turn run on across work tiles:
// the next tile's loads overlap this tile's epilogue.
#pragma once

// CuTe's instruction selector offers every wgmma width N = 8 … 256 in steps of 8 only with this macro;
// without it a tile like BN 224 or 160 is issued as 7 or 5 narrower instructions (n32), about 0.72× the
// rate of one wide one (bench/NOTES.md, quant-fp8). Set before any CuTe header, in every Solder header
// that includes one, so that the first inclusion in a translation unit decides it the same way.
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cuda/ptx>

#include <cute/arch/mma_sm90.hpp>
#include <cute/numeric/numeric_types.hpp>
#include <cutlass/arch/reg_reconfig.h>

#include "../gemm/wgmma.cuh"

#include "config.cuh"
#include "functors.cuh"

namespace solder::attention {

namespace detail {

template <Dtype T> struct cute_type;
template <> struct cute_type<Dtype::bf16> { using type = cute::bfloat16_t; };
template <> struct cute_type<Dtype::f16> { using type = cute::half_t; };
template <> struct cute_type<Dtype::e4m3> { using type = cute::float_e4m3_t; };

// FP8 (Config::T = e4m3): four floats rounded to e4m3 (nearest even, saturating to ±448: cvt.rn.satfinite)
// and packed as one A-operand register, the first in the lowest byte.
__device__ __forceinline__ uint32_t pack4_e4m3(float a, float b, float c, float d) {
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));  // (the first source is the high byte)
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// FP8 P·V: the key order of the Vᵀ tile. The fp8 A operand (k 32) gives a thread four consecutive keys
// 4·(lane % 4) .. + 3 of each half of 16 (PTX ISA, wgmma register fragment of A for .e4m3), where the
// f32 accumulator of S gives it the pairs 2·(lane % 4), + 1 of each 8. So P's A registers are read
// straight from the accumulator (register 4·kb + r: rows r % 2 ? +8 : +0, accumulator groups 4·kb +
// 2·(r / 2) and + 1) and the keys of V are permuted to match: position L of a 16-key half of the Vᵀ row
// holds key vt_key(L) of that half. A permutation of the summation index: Σ_L P(π L)·V(π L) = Σ_j P(j)·V(j).
__host__ __device__ constexpr int vt_key(int position) {
  return 8 * ((position % 4) / 2) + 2 * (position / 4) + position % 2;
}

// An affine score's column term by the tensor cores (functors.cuh, kAffineColumnMma): the constant B tile of
// key offsets, static shared memory of the kernels that take it (none in the others). No swizzle: 17 core
// matrices of 8 key rows × 8 bf16 (128 bytes each, both descriptor offsets 128, so a k-block's second half
// of 8 is the next core matrix, multiplied by zeros of A); row n holds n at k = 0, 1, 2, zeros elsewhere.
template <bool On>
struct ColumnOffsets {
  __device__ static unsigned short* tile() { return nullptr; }
};
template <>
struct ColumnOffsets<true> {
  static constexpr int kElements = 17 * 64;
  static constexpr int kBytes = 2 * kElements;
  __device__ static unsigned short* tile() {
    __shared__ alignas(128) unsigned short offsets[kElements];
    return offsets;
  }
  // element e: row n = e / 8, k = e % 8; integers up to 256 are exact in bf16 (the f32 bits' high half)
  __device__ static void fill(unsigned short* offsets, int thread, int threads) {
    for (int e = thread; e < kElements; e += threads) {
      const int k = e % 8, row = e / 8;
      const int value = k < 3 ? row : 0;
      offsets[e] = static_cast<unsigned short>(__float_as_uint(static_cast<float>(value)) >> 16);
    }
  }
};

// x as three bf16 values hi + mid + lo = x exactly (each remainder is exact in f32, and the last fits
// in 8 significant bits), returned as floats.
__device__ __forceinline__ void bf16_pieces(float x, float (&piece)[3]) {
  piece[0] = __bfloat162float(__float2bfloat16_rn(x));
  const float rest = x - piece[0];
  piece[1] = __bfloat162float(__float2bfloat16_rn(rest));
  piece[2] = __bfloat162float(__float2bfloat16_rn(rest - piece[1]));
}

// Two floats rounded to nearest even and packed as one A-operand register, the first in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (sizeof(T) == 2 && cute::is_same_v<T, cute::bfloat16_t>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// The element and wgmma instruction types of one Config (the instruction wrappers of CuTe's selectors;
// descriptors and fragments by plain index arithmetic: gemm/wgmma.cuh).
template <class C>
struct Types {
  using T = typename cute_type<C::T>::type;
  using BN = cute::Int<C::BN>;
  using D = cute::Int<C::HeadDim>;
  // S = Q·Kᵀ for one warpgroup: 64 × BN × HeadDim, both operands K-major in shared memory.
  using MmaS = decltype(cute::SM90::GMMA::ss_op_selector<T, T, float, cute::Shape<cute::_64, BN, D>, cute::SM90::GMMA::Major::K,
                                                   cute::SM90::GMMA::Major::K>());
  // O += P·V: 64 × HeadDim × BN, P from registers, V ([key][d], d contiguous) MN-major in shared memory;
  // FP8: Vᵀ ([d][key], keys contiguous: the transposed ring) K-major, the only B fp8 wgmma reads.
  using MmaO = decltype(cute::SM90::GMMA::rs_op_selector<T, T, float, cute::Shape<cute::_64, D, BN>, cute::SM90::GMMA::Major::K,
                                                   C::Fp8 ? cute::SM90::GMMA::Major::K : cute::SM90::GMMA::Major::MN>());
  // Shared memory (what the producer's TMA boxes write, 128-byte swizzle): Q is (Consumers × Chunks)
  // chunks of 64 rows × 64 columns, consumer c's chunks first; K and V are (Stages × Chunks) chunks of
  // BN key rows × 64 columns. K is Kᵀ's K-major B; V's [key][d] chunks are P·V's MN-major B.
  // k-blocks of 32 bytes (16 elements of 16 bits, 32 of 8 bits)
  static constexpr int KBlocksS = C::HeadDim * C::ElementBytes / 32;
  static constexpr int KBlocksO = C::BN * C::ElementBytes / 32;
};

__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

__device__ __forceinline__ void tma_load(void* dst, const TensorMap& map, int c0, int c1, int c2, uint64_t* bar) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, &map, coords, bar);
}

// A rank-3 TMA store of the box at (c0, c1, c2) from shared memory (address `src`, 1024-byte aligned for
// the 128-byte swizzle) into the calling thread's bulk group; elements outside the map's extents are not
// written. Called by one thread; the map is a __grid_constant__ parameter (or in global or constant memory).
__device__ __forceinline__ void tma_store(const TensorMap& map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(&map), "r"(src),
               "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// Closes the calling thread's bulk group and waits until its stores have read shared memory (not until
// their global writes are visible: the grid's end orders those). Called by the thread that stored.
__device__ __forceinline__ void tma_store_commit_and_wait_read() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Named barriers 1..Consumers order the consumers' MMA issue (barrier 0 is __syncthreads). Called by
// all 128 threads of a consumer warpgroup; `threads` counts both sides (the waiter and the arriver).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Shared-memory loads at a 32-bit shared address (the staged bias: a pointer computed from the aligned
// dynamic shared memory is generic to the compiler, which would emit 64-bit generic loads). Volatile:
// kept after the mbarrier wait that makes the bytes visible.
__device__ __forceinline__ unsigned int lds_u32(uint32_t address) {
  unsigned int v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(address) : "memory");
  return v;
}
__device__ __forceinline__ unsigned short lds_u16(uint32_t address) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(address) : "memory");
  return v;
}
__device__ __forceinline__ void sts_u32(uint32_t address, unsigned int value) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(address), "r"(value) : "memory");
}
// (the same, zero-extended into a 32-bit register: the two bytes tested without a 16-bit extraction)
__device__ __forceinline__ unsigned int lds_u16_wide(uint32_t address) {
  unsigned int v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=r"(v) : "r"(address) : "memory");
  return v;
}

// The two 16-bit elements of a 4-byte word as f32, exactly (bf16: one integer operation each).
template <class T>
struct PairToFloat {
  __device__ __forceinline__ static void convert(unsigned int word, float* lo, float* hi) {
    const T* e = reinterpret_cast<const T*>(&word);
    *lo = static_cast<float>(e[0]);
    *hi = static_cast<float>(e[1]);
  }
};
template <>
struct PairToFloat<__nv_bfloat16> {
  __device__ __forceinline__ static void convert(unsigned int word, float* lo, float* hi) {
    *lo = __uint_as_float(word << 16);
    *hi = __uint_as_float(word & 0xffff0000u);
  }
};
template <class T>
__device__ __forceinline__ void pair_to_float(unsigned int word, float* lo, float* hi) {
  PairToFloat<T>::convert(word, lo, hi);
}

// The epilogue's preloaded values per pair of columns (functors.cuh, "Epilogue preload"); none without.
struct NoPreload {};
template <class E, bool = epilogue_preloads<E>(0)>
struct PreloadOf {
  using type = NoPreload;
};
template <class E>
struct PreloadOf<E, true> {
  using type = typename E::Preload;
};

// Config::Dynamic: [0] the work tiles claimed past each block's first (entry gridDim.x + [0] is the next
// claim), [1] the blocks done with claiming; the last block to finish resets both to 0 for the next launch.
// One pair for every attention kernel of a module: their launches must not overlap in time.
static __device__ unsigned int work_counter[2];

// Clock stamps per work tile (Stamped<Config> below; a diagnostic, compiled in only there): the record
// of work tile t's role r (0: the producer thread, 1 + c: consumer warpgroup c) is the 16 words at
// stamp_buffer + (t · (Consumers + 1) + r) · kStampWords, written by the role's thread 0. The host sets
// stamp_buffer (cudaMemcpyToSymbol) to total_tiles · (Consumers + 1) · kStampWords zeroed words; null:
// nothing is written. Word 0 of a written record: 1 << 63 | r << 48 | key tiles << 32 | block << 16 | SM.
// Consumer words: 1 globaltimer (ns) and 2 clock when the work tile's entry is taken, then clock at
// 3 Q landed, 4 first K landed, 5 first turn taken, 6 first S issued, 7 first S done, 8 first P in
// registers, 9 last S done (one key tile: = 8), 10 last V landed, 11 last turn taken, 12 last P·V done,
// 13 epilogue's stores issued; 14 globaltimer then. Clocks are the SM's 32-bit %clock (their differences
// modulo 2^32 are cycles). Producer words: 1 globaltimer and 2 clock at the tile's start (entry known),
// 3 Q's buffer free, 4 Q issued, 5 first K stage free, 6 last V issued; with a data mask on Dynamic
// persistent blocks the classifier warps' (warp 1, lane 0) clock in the same record at 7 the entry read
// from the work ring, 8 the list buffer free, 9 every class written, 10 the list posted (0: the block's
// first work tile, classified before the roles split).
static __device__ unsigned long long* stamp_buffer;
constexpr int kStampWords = 16;
__device__ __forceinline__ unsigned int clock_now() {  // (32 bits: differences modulo 2^32)
  unsigned int c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c)::"memory");
  return c;
}
__device__ __forceinline__ unsigned long long global_now() {
  unsigned long long c;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(c)::"memory");
  return c;
}
__device__ __forceinline__ unsigned int sm_id() {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// The stage and the phase parity of the n-th use of a ring of Stages stages.
template <int Stages>
__device__ __forceinline__ int stage_of(uint32_t n) {
  return static_cast<int>(n % Stages);
}
template <int Stages>
__device__ __forceinline__ uint32_t phase_of(uint32_t n) {
  return (n / Stages) & 1u;
}

}  // namespace detail

// A Config with clock stamps per work tile (detail::stamp_buffer): the same kernel plus one thread per
// role storing the SM clock at the points the record lists. Nothing it computes changes.
template <class C>
struct Stamped : C {
  static constexpr bool Stamps = true;
};
template <class C>
SOLDER_ATTN_HD constexpr auto config_stamps(int) -> decltype(C::Stamps, bool()) {
  return C::Stamps;
}
template <class C>
SOLDER_ATTN_HD constexpr bool config_stamps(long) {
  return false;
}

// The kernel's body; attention_kernel and SOLDER_ATTENTION_KERNEL wrap it (with the __launch_bounds__).
template <class C, class Score, class Mask, class Epilogue, template <int> class State = OnlineSoftmax>
__device__ __forceinline__ void attention_body(const TensorMap& q, const TensorMap& k, const TensorMap& v,
                                               const AttentionShape& shape, const Score& score, const Mask& mask,
                                               const Epilogue& epilogue) {
  using Ty = detail::Types<C>;
  using T = typename Ty::T;
  if (shape.seq_q <= 0) return;

  extern __shared__ unsigned char solder_attention_smem[];
  // 128-byte swizzle atoms repeat every 1024 bytes: everything starts on a 1024-byte boundary.
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(solder_attention_smem) + 1023) & ~uintptr_t(1023));
  T* smem_q = reinterpret_cast<T*>(base);
  T* smem_k = reinterpret_cast<T*>(base + C::QBuffers * C::QBytes);
  T* smem_v = reinterpret_cast<T*>(base + C::QBuffers * C::QBytes + C::Stages * C::KVTileBytes);
  // FP8: the Vᵀ ring (P·V's K-major B), written by the producer warpgroup's warps 1..3 (below).
  unsigned char* smem_vt = base + C::QBuffers * C::QBytes + 2 * C::Stages * C::KVTileBytes;
  // A staged bias (functors.cuh): stage s's tile at BiasTileOffset + s·BiasTileBytes, its column bytes at
  // BiasColumnOffset + s·BiasColumnBytes (both empty without); the mbarriers after them.
  unsigned char* smem_bias_tile = base + C::BiasTileOffset;
  unsigned char* smem_bias_column = base + C::BiasColumnOffset;
  static_assert(score_staged_bias<Score>(0) == C::StagedBias, "the Config's StagedBias must be the score's kStagedBias");
  static_assert(C::StagedBias == 0 || score_has_bias<Score>(0), "a staged bias needs a score with a bias (kBias)");
  // An affine score's column term by the tensor cores (functors.cuh, kAffineColumnMma): with the scaled row
  // shift, 16-bit operands, 128-key tiles, no data mask (whose lists are static shared memory too) and where
  // the offsets' tile fits beside the Config's shared memory.
  constexpr bool kColumnMma = score_is_affine<Score>(0) && !score_affine_two_ffma<Score>(0) && score_affine_positive_a<Score>(0) &&
                              score_affine_column_mma<Score>(0) && !C::Fp8 && C::BN == 128 && !mask_has_data_tiles<Mask>(0) &&
                              C::SmemBytes + detail::ColumnOffsets<true>::kBytes <= 232448;
  // Q buffer b (Config::QBuffers of them; work tiles with key tiles take them in turn): q_full[b], q_empty[b].
  uint64_t* q_full = reinterpret_cast<uint64_t*>(base + C::BarrierOffset);
  uint64_t* q_empty = q_full + C::QBuffers;
  uint64_t* k_full = q_full + 2 * C::QBuffers;
  uint64_t* k_empty = k_full + C::Stages;
  uint64_t* v_full = k_empty + C::Stages;
  uint64_t* v_empty = v_full + C::Stages;
  // FP8: vt_full[s], Vᵀ stage s written (one arrival per transposing warp); the consumers wait on it
  // instead of v_full (pv_full). Stage s of V is refilled only after v_empty[s], which the consumers
  // arrive at after their P·V read of Vᵀ stage s, itself after every transposing warp read V stage s.
  uint64_t* vt_full = v_empty + C::Stages;
  uint64_t* pv_full = C::Fp8 ? vt_full : v_full;

  // Work tiles: one block per tile (config.cuh: head-major, the query tiles of a head in reverse order),
  // or with Config::Persistent a longest-first list dealt out in a snake: the heads in groups whose K
  // and V fit in about half of L2 together (the blocks of a wave share them), inside a group the
  // query tiles from the last (the most key tiles under a causal mask) to the first, the group's
  // heads innermost; round k of the blocks takes list entries k·G .. k·G + G − 1 (G = gridDim.x),
  // in reverse order on odd rounds, so every block gets a similar amount of work.
  const int tiles_m = ceil_div(shape.seq_q, C::BM);
  const int heads_all = shape.batch * shape.heads;
  const int total = tiles_m * heads_all;
  const int last_key_tile = ceil_div(shape.seq_k, C::BN);
  int group_heads = 1;
  if constexpr (C::Persistent) {
    const long long kv_bytes = (long long)(shape.seq_k > 0 ? shape.seq_k : 1) * C::HeadDim * 4;  // K and V, 16-bit
    const long long fit = (24ll << 20) / kv_bytes;
    group_heads = fit < 1 ? 1 : fit > heads_all ? heads_all : static_cast<int>(fit);
    if constexpr (C::StagedBias != 0) {
      // With a staged bias a work tile also streams its bias tiles and the epilogue's inputs, so a
      // group of heads sized by K and V alone (evoformer: 384 heads, ≈ 43 MB of traffic between a
      // head's first and last query tile) lets K and V fall out of L2 before their second read. Here a
      // group is at most one round's heads: the query tiles of a head run in the same round on
      // neighbouring blocks, and K, V (and the bias tile of the heads that share it) come from HBM once.
      const int round_heads = static_cast<int>(gridDim.x) / tiles_m;
      if (group_heads > round_heads) group_heads = round_heads < 1 ? 1 : round_heads;
    }
  }
  struct Work {
    int bh, bh_kv, row0, begin, end;
  };
  auto locate = [&](int t) {
    Work w;
    int m;
    if constexpr (C::Persistent) {
      const int group = t / (group_heads * tiles_m);
      const int first = group * group_heads;
      const int size = heads_all - first < group_heads ? heads_all - first : group_heads;
      const int within = t - first * tiles_m;
      w.bh = first + within % size;
      m = tiles_m - 1 - within / size;
    } else {
      w.bh = t / tiles_m;
      m = tiles_m - 1 - t % tiles_m;
    }
    w.row0 = m * C::BM;
    const int batch = w.bh / shape.heads, head = w.bh % shape.heads;
    w.bh_kv = batch * shape.heads_kv + head / (shape.heads / shape.heads_kv);
    mask.key_tiles(w.bh, w.row0, C::BM, shape.seq_k, C::BN, &w.begin, &w.end);
    if (w.begin < 0) w.begin = 0;
    if (w.end > last_key_tile) w.end = last_key_tile;
    return w;
  };
  // The list entry of this block's work tile in round `round` (≥ total: none). With Config::Dynamic only
  // round 0's: the producer thread claims the later ones (work_counter) and posts every entry the block
  // takes into a ring of two slots in shared memory (work_ids on work_full / work_empty), which the
  // consumers read in the same order; the sentinel ≥ total ends the block. With a data mask the ring
  // goes to the classifier warps instead (they classify the tiles in the order the producer claims
  // them), and the producer and the consumers take each round's entry from its list (list_tile).
  constexpr bool kDynamic = C::Dynamic;
  __shared__ int work_ids[kDynamic ? 2 : 1];
  // Config::PostedWork: each slot's entry also carries its Work (bh, bh_kv, row0, begin, end), located
  // by the producer thread when it posts the entry. With a data mask the classifier warps locate each
  // work tile anyway: they post its Work with its list instead (list_work below), and the work ring
  // carries the bare entries to them.
  constexpr bool kPostedWork = C::PostedWork;
  constexpr bool kPostedRing = kPostedWork && !mask_has_data_tiles<Mask>(0);
  __shared__ int work_posted[kPostedRing ? 2 : 1][kPostedRing ? 5 : 1];
  __shared__ alignas(8) uint64_t work_barriers[kDynamic ? 4 : 1];
  uint64_t* work_full = work_barriers;       // [2]: slot s holds the entry of the block's (2k + s)-th tile
  uint64_t* work_empty = work_barriers + 2;  // [2]: every consumer warp (data masks: classifier warp) has read it
  auto tile_index = [&](int round) {
    if constexpr (C::Persistent) {
      const int blocks = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
      return round * blocks + ((round & 1) ? blocks - 1 - b : b);
    } else {
      return round == 0 ? static_cast<int>(blockIdx.x) : total;
    }
  };

  // A data mask (Mask::kDataTiles, functors.cuh): the key tiles of [begin, end) of a work tile,
  // classified from the ids' min/max, as a list in shared memory that the producer and the consumers
  // walk in the same order (entry: tile | 0x8000 for a boundary tile | 0x4000 for a boundary tile whose
  // keys all carry one id, that id beside it in list_key_id); skipped tiles are not in it.
  // One block per work tile: classified once before the roles split, by every warp. Persistent blocks:
  // the first work tile's list the same way, then the producer warpgroup's three idle warps (1..3)
  // classify work tile n + 1 while the consumers compute tile n, into a double-buffered list (buffer
  // round & 1, mbarriers list_full / list_empty), so that the producer loads the next tile's Q, K and V
  // during this tile's epilogue; with Mask::kColGroups from a table of the key tiles' id ranges reduced
  // once per block and key-id group (its rows' ids are then the only ids a work tile's classification
  // reads). Other
  // masks: tiles begin .. end − 1, boundaries from Mask::partial.
  constexpr bool kData = mask_has_data_tiles<Mask>(0);
  constexpr bool kDataLoop = kData && C::Persistent;
  static_assert(!(kDynamic && kData) || kDataLoop, "Dynamic with a data mask: persistent blocks");
  static_assert(!(kPostedWork && kData) || (kDataLoop && kDynamic), "PostedWork with a data mask: Dynamic persistent blocks");
  // PostedWork with a data mask: the Work of the work tile whose list buffer b holds, written with the list
  // by the classifier warp that compacts it (round 0's before the roles split).
  constexpr bool kPostedList = kPostedWork && kData;
  constexpr int kListSize = mask_max_key_tiles<Mask>(0);
  static_assert(kListSize <= 16383, "a data mask's list holds at most 16383 key tiles");
  // Boundary tiles of one key id (Mask::kOneIdTiles, functors.cuh): one compare per row, not per score.
  constexpr bool kOneId = kData && mask_one_id_tiles<Mask>(0);
  constexpr int kLists = kDataLoop ? 2 : 1;
  // (static shared memory, 3 bytes per key tile, 5 with persistent blocks, and with kOneId 8 / 12 more:
  // on top of Config::SmemBytes, within 227 KB)
  __shared__ uint16_t tile_list[kLists][kData ? kListSize : 1];
  __shared__ uint8_t tile_classes[kData ? kListSize : 1];  // 3: a boundary tile of one key id
  __shared__ int tile_key_id[kOneId ? kListSize : 1];      // its id (class 3), by tile of [begin, end)
  __shared__ int list_key_id[kLists][kOneId ? kListSize : 1];  // the same by list entry
  __shared__ int tile_count[kLists];
  __shared__ int list_tile[kLists];  // the list entry of the work tile whose list the buffer holds (Dynamic)
  __shared__ int list_work[kPostedList ? kLists : 1][5];  // its Work (PostedWork)
  auto post_list_work = [&](int buf, const Work& w) {
    if constexpr (kPostedList) {
      list_work[buf][0] = w.bh;
      list_work[buf][1] = w.bh_kv;
      list_work[buf][2] = w.row0;
      list_work[buf][3] = w.begin;
      list_work[buf][4] = w.end;
    }
  };
  __shared__ alignas(8) uint64_t list_barriers[kDataLoop ? 4 : 1];
  uint64_t* list_full = list_barriers;       // [2]: buffer b holds the list of the round being read
  uint64_t* list_empty = list_barriers + 2;  // [2]: the producer thread and every consumer warp are done with it
  // Named barrier of the three classifier warps (the consumers' turn ring uses 1 .. Consumers).
  constexpr int kClassifyBarrier = 8;
  constexpr int kClassifyWarps = 3;
  // The list buffer of round `round` (0 without persistent blocks).
  auto list_of = [&](int round) { return kDataLoop ? (round & 1) : 0; };
  // The Work posted with round `round`'s list, after the wait on its list_full (whose arrival releases
  // post_list_work's writes; the caller's own wait on it right after then passes at once).
  auto posted_list_work = [&](int round) -> Work {
    const int buf = list_of(round);
    detail::wait_parity(&list_full[buf], static_cast<uint32_t>(round >> 1) & 1u);
    const volatile int* posted = list_work[buf];
    return Work{posted[0], posted[1], posted[2], posted[3], posted[4]};
  };
  auto tiles_of = [&](const Work& w, int buf) -> int {
    if constexpr (kData) return tile_count[buf];
    else return w.end - w.begin;
  };
  auto tile_at = [&](const Work& w, int buf, int n) -> int {
    if constexpr (kData) return static_cast<int>(tile_list[buf][n] & 0x3fffu);
    else return w.begin + n;
  };
  // The id ranges of `count` key tiles, split over `warps` warps (warp `cw`, lane `lane_c`), U tiles at a
  // time (their id loads issued together: 16 per lane in flight at BN 128, 8 at 64), each reduced over
  // the warp: entry n is key tile `tile_of(n)` of head `bh_of(n)`, and lane 0 calls store(n, lo, hi)
  // (lo > hi: no key of the tile is inside seq_k).
  auto key_ranges = [&](int count, int cw, int warps, int lane_c, auto&& bh_of, auto&& tile_of, auto&& store) {
    if constexpr (kData) {
      constexpr int kLoads = (C::BN + 31) / 32;                                   // id loads per lane and key tile
      constexpr int kBatch = kLoads >= 4 ? (kLoads >= 16 ? 1 : 16 / kLoads) : 4;  // key tiles per batch (≤ 4)
      for (int n0 = cw * kBatch; n0 < count; n0 += warps * kBatch) {
        int lo[kBatch], hi[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          lo[b] = 0x7fffffff;
          hi[b] = -0x7fffffff - 1;
          if (n0 + b < count) {
            const int bh = bh_of(n0 + b);
            const int col0 = tile_of(n0 + b) * C::BN;
#pragma unroll
            for (int u = 0; u < kLoads; ++u) {
              const int col = col0 + 32 * u + lane_c;
              if (32 * u + lane_c < C::BN && col < shape.seq_k) {
                const int id = mask.col_id(bh, col);
                lo[b] = id < lo[b] ? id : lo[b];
                hi[b] = id > hi[b] ? id : hi[b];
              }
            }
          }
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int col_lo = __reduce_min_sync(0xffffffffu, lo[b]);
          const int col_hi = __reduce_max_sync(0xffffffffu, hi[b]);
          if (lane_c == 0 && n0 + b < count) store(n0 + b, col_lo, col_hi);
        }
      }
    }
  };
  // A data mask whose keys' ids come in groups (Mask::kColGroups, functors.cuh) on persistent blocks:
  // the id range of key tile j of group g at id_table[g · kListSize + j] (lo, hi), reduced once per
  // block and group. With Config::Dynamic at BN 64 (kLazyTable) when a work tile of the group first needs it:
  // the first work tile's group by every warp before the roles split, every other group by the three
  // classifier warps just before they classify the block's first tile in it (while the consumers run
  // the tile before); group_ready[g]: group g's ranges are in the table (written and read by the
  // classifier warps only after the roles split). Otherwise every group before the first work
  // tile, by every warp (the static classifier warps' 40 registers spill with the reduction in their
  // loop). A work tile's classification then reads its rows' ids and this table, no key id.
  constexpr int kColGroups = mask_col_groups<Mask>(0);
  constexpr bool kIdTable = kDataLoop && kColGroups > 0;
  // Lazily on 64-key tiles only (the emitter's S <= 1k rule): measured there 116.1 against 119.2 us up
  // front (document_mask S 1k), but at 128-key tiles 173.1 against 165.4 (S 4k): the three classifier
  // warps' build of a group then delays the consumers more than the whole block's build up front.
  constexpr bool kLazyTable = kIdTable && kDynamic && C::BN == 64;
  static_assert(!kIdTable || kColGroups * kListSize <= 2048, "a data mask's id table holds at most 2048 key tiles (16 KB)");
  __shared__ int2 id_table[kIdTable ? kColGroups * kListSize : 1];
  __shared__ uint8_t group_ready[kLazyTable ? kColGroups : 1];
  // Every group's ranges (warp `cw` of `warps`, lane `lane_c`), as one list of groups x key tiles.
  auto build_id_table = [&](int cw, int warps, int lane_c) {
    if constexpr (kIdTable) {
      key_ranges(
          mask.col_groups() * last_key_tile, cw, warps, lane_c, [&](int n) { return mask.group_bh(n / last_key_tile); },
          [&](int n) { return n % last_key_tile; },
          [&](int n, int lo, int hi) { id_table[(n / last_key_tile) * kListSize + n % last_key_tile] = make_int2(lo, hi); });
    }
  };
  // The key tiles' id ranges of group `group` into the table (warp `cw` of `warps`, lane `lane_c`).
  auto build_group = [&](int group, int cw, int warps, int lane_c) {
    if constexpr (kLazyTable) {
      key_ranges(
          last_key_tile, cw, warps, lane_c, [&](int) { return mask.group_bh(group); }, [&](int n) { return n; },
          [&](int n, int lo, int hi) { id_table[group * kListSize + n] = make_int2(lo, hi); });
    }
  };
  // The three classifier warps (all of them, with the same work tile): the table's ranges of w's group,
  // built first if no work tile of this block has needed them yet.
  auto ensure_group = [&](const Work& w, int cw, int lane_c) {
    if constexpr (kLazyTable) {
      const int group = mask.col_group(w.bh);
      if (group_ready[group]) return;  // (the same value in the three warps: written only after the barrier below)
      build_group(group, cw, kClassifyWarps, lane_c);
      detail::named_sync(kClassifyBarrier, 32 * kClassifyWarps);  // every range written, every warp has read the flag
      if (cw == 0 && lane_c == 0) group_ready[group] = 1;
    }
  };
  // One warp's share of a work tile's classification (warp `cw` of `warps`, lane `lane_c`): the ids'
  // range over the tile's rows (each warp alone), then the key tiles begin + n (from the id table, or
  // their ids' ranges by key_ranges), each tile's class into tile_classes. Returns the number of key
  // tiles of [begin, end).
  auto classify = [&](const Work& w, int cw, int warps, int lane_c) -> int {
    if constexpr (!kData) {
      return 0;
    } else {
      const int tiles = w.end > w.begin ? w.end - w.begin : 0;
      if (tiles > kListSize) __trap();  // Mask::kMaxKeyTiles below ceil(seq_k / BN)
      // (with the id table the group first, and the row ids' loads 2 at a time: the classifier warps
      // have 40 registers)
      int first = 0;
      if constexpr (kIdTable) first = mask.col_group(w.bh) * kListSize + w.begin;
      int row_lo = 0x7fffffff, row_hi = -0x7fffffff - 1;
      const int rows_end = w.row0 + C::BM < shape.seq_q ? w.row0 + C::BM : shape.seq_q;
      auto row_range = [&](int r) {
        const int id = mask.row_id(w.bh, r);
        row_lo = id < row_lo ? id : row_lo;
        row_hi = id > row_hi ? id : row_hi;
      };
      if constexpr (kIdTable) {
#pragma unroll 2
        for (int r = w.row0 + lane_c; r < rows_end; r += 32) row_range(r);
      } else {
        for (int r = w.row0 + lane_c; r < rows_end; r += 32) row_range(r);
      }
      row_lo = __reduce_min_sync(0xffffffffu, row_lo);
      row_hi = __reduce_max_sync(0xffffffffu, row_hi);
      auto class_of = [&](int n, int col_lo, int col_hi) {
        int c = row_lo > row_hi || col_lo > col_hi ? 0 : mask.tile_class(w.bh, row_lo, row_hi, col_lo, col_hi);
        if constexpr (kOneId) {
          // a boundary tile whose keys (all inside seq_k) carry one id
          if (c == 2 && col_lo == col_hi && (w.begin + n + 1) * C::BN <= shape.seq_k) {
            c = 3;
            tile_key_id[n] = col_lo;
          }
        }
        tile_classes[n] = static_cast<uint8_t>(c);
      };
      if constexpr (kIdTable) {
        for (int n = cw * 32 + lane_c; n < tiles; n += warps * 32) {
          const int2 r = id_table[first + n];
          class_of(n, r.x, r.y);
        }
      } else {
        key_ranges(tiles, cw, warps, lane_c, [&](int) { return w.bh; }, [&](int n) { return w.begin + n; }, class_of);
      }
      return tiles;
    }
  };
  // One warp: the live tiles of tile_classes in order (a ballot per 32 tiles) into list buffer `buf`.
  auto compact = [&](const Work& w, int tiles, int buf, int lane_c) {
    if constexpr (!kData) return;
    int count = 0;
    for (int base = 0; base < tiles; base += 32) {
      const int n = base + lane_c;
      const int c = n < tiles ? tile_classes[n] : 0;
      const unsigned live = __ballot_sync(0xffffffffu, c != 0);
      const int at = count + __popc(live & ((1u << lane_c) - 1u));
      if (c != 0) tile_list[buf][at] = static_cast<uint16_t>((w.begin + n) | (c >= 2 ? 0x8000 : 0) | (c == 3 ? 0x4000 : 0));
      if constexpr (kOneId) {
        if (c == 3) list_key_id[buf][at] = tile_key_id[n];
      }
      count += __popc(live);
    }
    if (lane_c == 0) tile_count[buf] = count;
  };

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;
  // Clock stamps (Stamped<Config>): the record of work tile t's role (0 the producer, 1 + c consumer c),
  // or null; every stamp compiles to nothing without.
  constexpr bool kStamps = config_stamps<C>(0);
  auto stamp_record = [&](int t, int role) -> unsigned long long* {
    if constexpr (kStamps) {
      if (detail::stamp_buffer == nullptr || thread != 0) return nullptr;
      return detail::stamp_buffer + ((long long)t * (C::Consumers + 1) + role) * detail::kStampWords;
    } else {
      return nullptr;
    }
  };
  auto stamp = [&](unsigned long long* record, int word, unsigned long long value) {
    if constexpr (kStamps) {
      if (record) record[word] = value;
    }
  };
  auto stamp_clock = [&](unsigned long long* record, int word) {
    if constexpr (kStamps) stamp(record, word, detail::clock_now());
  };
  auto stamp_header = [&](unsigned long long* record, int role, int count) {
    if constexpr (kStamps) {
      stamp(record, 0, 1ull << 63 | (unsigned long long)role << 48 | (unsigned long long)(unsigned)count << 32 |
                           (unsigned long long)blockIdx.x << 16 | detail::sm_id());
    }
  };

  if (threadIdx.x == 0) {
    for (int b = 0; b < C::QBuffers; ++b) {
      cuda::ptx::mbarrier_init(&q_full[b], 1);
      cuda::ptx::mbarrier_init(&q_empty[b], C::Consumers * 4);  // one arrival per consumer warp
    }
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&k_full[s], 1);
      cuda::ptx::mbarrier_init(&v_full[s], 1);
      cuda::ptx::mbarrier_init(&k_empty[s], C::Consumers * 4);
      cuda::ptx::mbarrier_init(&v_empty[s], C::Consumers * 4);
      if constexpr (C::Fp8) cuda::ptx::mbarrier_init(&vt_full[s], 3);  // warps 1..3 of the producer warpgroup
    }
    if constexpr (kDynamic) {
      for (int b = 0; b < 2; ++b) {
        cuda::ptx::mbarrier_init(&work_full[b], 1);                  // the producer thread
        cuda::ptx::mbarrier_init(&work_empty[b], kDataLoop ? kClassifyWarps : C::Consumers * 4);  // every reader warp
      }
    }
    if constexpr (kDataLoop) {
      for (int b = 0; b < 2; ++b) {
        cuda::ptx::mbarrier_init(&list_full[b], 1);                        // the classifier warp that compacts
        cuda::ptx::mbarrier_init(&list_empty[b], C::Consumers * 4 + 1);  // every consumer warp + the TMA thread
      }
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  if constexpr (kColumnMma) {
    // the offsets' tile, written by every thread before the block's barrier below, read by wgmma (the
    // async proxy) after it
    detail::ColumnOffsets<true>::fill(detail::ColumnOffsets<true>::tile(), static_cast<int>(threadIdx.x), C::Threads);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  if constexpr (kData) {
    // The id table (kIdTable; with kLazyTable the first work tile's group only), then the first work
    // tile's list, by every warp of the block (nothing to overlap yet).
    const int t0 = tile_index(0);
    const int warp_all = static_cast<int>(threadIdx.x) / 32, lane_all = static_cast<int>(threadIdx.x) % 32;
    int tiles = 0;
    Work w{};
    if (t0 < total) w = locate(t0);
    if constexpr (kIdTable) {
      if (mask.col_groups() > kColGroups || last_key_tile > kListSize) __trap();  // Mask::kColGroups / kMaxKeyTiles too small
      if constexpr (kLazyTable) {
        for (int g = static_cast<int>(threadIdx.x); g < kColGroups; g += C::Threads) group_ready[g] = 0;
        if (t0 < total) build_group(mask.col_group(w.bh), warp_all, C::Threads / 32, lane_all);
      } else {
        build_id_table(warp_all, C::Threads / 32, lane_all);
      }
      __syncthreads();
    }
    if (t0 < total) tiles = classify(w, warp_all, C::Threads / 32, lane_all);
    __syncthreads();
    if (warp_all == 0) compact(w, tiles, 0, lane_all);
    if (threadIdx.x == 0) {
      list_tile[0] = t0;
      post_list_work(0, w);
    }
    if constexpr (kLazyTable) {
      if (threadIdx.x == 0 && t0 < total) group_ready[mask.col_group(w.bh)] = 1;  // (read after the barrier below)
    }
  }
  __syncthreads();
  if constexpr (kDataLoop) {
    if (threadIdx.x == 0) cuda::ptx::mbarrier_arrive(&list_full[0]);  // round 0's list (the block's barrier above)
  }
  // Registers after setmaxnreg: persistent data-mask blocks with two consumers give the producer
  // warpgroup 40 (its classifier warps keep ≈ 16 id loads per lane in flight) and the consumers 232;
  // with Config::Dynamic 48 and 224 (the claims and posts spill at 40), and with the id table built per
  // group in the classifier warps' loop (kLazyTable) or the work tile's setup posted with its list
  // (PostedWork) 56 and 224 (at 48 the emitted document_mask S 1k kernel spilled 8 bytes, and S 4k's with
  // PostedWork 20).
  // Free consumers, clock stamps and the posted work-tile setup with two consumers: 32 and 232 (at 24 the
  // producer thread spilled a register around its TMA issues: causal S 1k's free Config, hd128's stamped
  // one; 16 bytes with PostedWork's Work beside them, the Dynamic Config with turns).
  constexpr bool kWideProducer = (C::FreeConsumers || kStamps || C::PostedWork) && C::Consumers == 2;
  // FP8 with two consumers: 40 and 232 (warps 1..3 transpose V: the work loop, four words in, four out);
  // with three (head dim 64: 192 query rows) 56 and 152 (at 32 the transposing warps would not fit; the
  // consumers hold S 64, P 16 and O 32 registers).
  constexpr int kProducerRegisters =
      C::Fp8 && C::Consumers == 2 ? 40
      : C::Fp8 ? 56
      : kDataLoop && C::Consumers == 2 ? (kLazyTable || kPostedList ? 56 : kDynamic ? 48 : 40)
      : kWideProducer ? 32 : C::ProducerRegisters;
  constexpr int kConsumerRegisters = C::Fp8 && C::Consumers == 2 ? 232
                                     : C::Fp8 ? 152
                                     : kDataLoop && C::Consumers == 2 ? (kDynamic ? 224 : 232)
                                     : kWideProducer ? 232 : C::ConsumerRegisters;
  static_assert(!C::Fp8 || !kData, "e4m3: not with a data mask (warps 1..3 classify there)");
  // setmaxnreg moves registers within the block's launch allocation (65536 / threads per thread, in
  // steps of 8: 168 at 384 threads): a warpgroup's .inc waits until others' .dec have freed enough, so
  // a split over that allocation never completes (a hang, not an error).
  static_assert(kProducerRegisters + C::Consumers * kConsumerRegisters <= (C::Consumers + 1) * (65536 / C::Threads / 8 * 8),
                "setmaxnreg: over the block's launch allocation of registers");

  if (warpgroup == 0) {
    // ---- Producer: one thread issues every TMA load; the rings run on across work tiles ----
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
    if (thread == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&q) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&k) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&v) : "memory");
      if constexpr ((C::StagedBias & 1) != 0) asm volatile("prefetch.tensormap [%0];" ::"l"(&score.bias_tile) : "memory");
      if constexpr ((C::StagedBias & 2) != 0) asm volatile("prefetch.tensormap [%0];" ::"l"(&score.bias_column) : "memory");
      uint32_t loaded = 0;  // K (and V) tiles loaded so far, over all work tiles
      uint32_t q_loads = 0;  // Q tiles loaded so far (work tiles with key tiles)
      // Config::Dynamic: entry `tile` into the next slot of the consumers' ring, and the entry claimed
      // while this tile loads (its latency hides behind the tile's TMA issues).
      uint32_t posted = 0;
      int claimed = total;
      Work posted_work{};  // Config::PostedWork: the Work of the entry posted last (this thread's next tile)
      auto post = [&](int tile) {
        const uint32_t slot = posted & 1u;
        if constexpr (kPostedRing) {
          // located before the wait: the consumers may still be reading the slot's previous Work
          if (tile < total) posted_work = locate(tile);
        }
        detail::wait_parity(&work_empty[slot], ((posted >> 1) & 1u) ^ 1u);
        work_ids[slot] = tile;
        if constexpr (kPostedRing) {
          work_posted[slot][0] = posted_work.bh;
          work_posted[slot][1] = posted_work.bh_kv;
          work_posted[slot][2] = posted_work.row0;
          work_posted[slot][3] = posted_work.begin;
          work_posted[slot][4] = posted_work.end;
        }
        cuda::ptx::mbarrier_arrive(&work_full[slot]);  // release: the entry is visible to its waiters
        ++posted;
      };
      auto next_tile = [&](int round) {
        if constexpr (kDynamic && kDataLoop) {
          // the entry the classifier warps classified for this round (posted at the round before)
          const int buf = list_of(round);
          detail::wait_parity(&list_full[buf], static_cast<uint32_t>(round >> 1) & 1u);
          return *static_cast<volatile int*>(&list_tile[buf]);
        } else if constexpr (kDynamic) {
          post(claimed);
          return claimed;
        } else {
          return tile_index(round);
        }
      };
      if constexpr (kDynamic && !kDataLoop) post(tile_index(0));
      for (int round = 0, t = tile_index(0); t < total; t = next_tile(++round)) {
        unsigned long long* const record = stamp_record(t, 0);
        if constexpr (kStamps) {
          stamp(record, 1, detail::global_now());
          stamp_clock(record, 2);
        }
        if constexpr (kDynamic) claimed = static_cast<int>(gridDim.x + atomicAdd(&detail::work_counter[0], 1u));
        const Work w = kPostedList ? posted_list_work(round) : kPostedRing ? posted_work : locate(t);
        const int buf = list_of(round);
        if constexpr (kDataLoop) detail::wait_parity(&list_full[buf], static_cast<uint32_t>(round >> 1) & 1u);
        const int count = tiles_of(w, buf);
        stamp_header(record, 0, count);
        if (count <= 0) {
          if constexpr (kDynamic && kDataLoop) post(claimed);  // round + 1's tile, to the classifier warps
          if constexpr (kDataLoop) cuda::ptx::mbarrier_arrive(&list_empty[buf]);
          continue;
        }
        // Q of this tile once every consumer is done with the Q that used its buffer before (the previous
        // tile's with one buffer; the one before that with two).
        const int qb = detail::stage_of<C::QBuffers>(q_loads);
        detail::wait_parity(&q_empty[qb], detail::phase_of<C::QBuffers>(q_loads) ^ 1u);
        stamp_clock(record, 3);
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                             &q_full[qb], static_cast<uint32_t>(C::QBytes));
#pragma unroll
        for (int c = 0; c < C::Consumers; ++c)
#pragma unroll
          for (int chunk = 0; chunk < C::Chunks; ++chunk)
            detail::tma_load(base + qb * C::QBytes + (c * C::Chunks + chunk) * 64 * C::RowBytes, q, C::ChunkElements * chunk, w.row0 + 64 * c,
                             operand_batch(w.bh, shape.heads, shape.q_heads, shape.q_head0), &q_full[qb]);
        ++q_loads;
        stamp_clock(record, 4);
        // Config::Dynamic with a data mask: round + 1's tile to the classifier warps (after Q's issue: the
        // claim's latency behind it)
        if constexpr (kDynamic && kDataLoop) post(claimed);
        const int k_batch = operand_batch(w.bh_kv, shape.heads_kv, shape.k_heads, shape.k_head0);
        const int v_batch = operand_batch(w.bh_kv, shape.heads_kv, shape.v_heads, shape.v_head0);
        // A staged bias: the tile map's batch and the column map's row of this head.
        int bias_batch = 0, bias_row = 0;
        if constexpr ((C::StagedBias & 1) != 0) bias_batch = score.bias_tile_batch(w.bh);
        if constexpr ((C::StagedBias & 2) != 0) bias_row = score.bias_column_row(w.bh);
        for (int n = 0; n < count; ++n, ++loaded) {
          const int j = tile_at(w, buf, n);
          const int stage = detail::stage_of<C::Stages>(loaded);
          const uint32_t phase = detail::phase_of<C::Stages>(loaded);
          detail::wait_parity(&k_empty[stage], phase ^ 1u);
          if (n == 0) stamp_clock(record, 5);
          cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                               &k_full[stage],
                                               static_cast<uint32_t>(C::KVTileBytes + C::BiasTileBytes + C::BiasColumnBytes));
#pragma unroll
          for (int chunk = 0; chunk < C::Chunks; ++chunk)
            detail::tma_load(reinterpret_cast<unsigned char*>(smem_k) + (stage * C::Chunks + chunk) * C::BN * C::RowBytes, k,
                             C::ChunkElements * chunk, j * C::BN, k_batch,
                             &k_full[stage]);
          // The staged bias of key tile j on K's mbarrier: the tile in 64-key chunks of BM rows (one box
          // of 64 rows per consumer), the column bytes as one box of 128 keys.
          if constexpr ((C::StagedBias & 1) != 0) {
#pragma unroll
            for (int chunk = 0; chunk < C::BN / 64; ++chunk)
#pragma unroll
              for (int c = 0; c < C::Consumers; ++c)
                detail::tma_load(smem_bias_tile + stage * C::BiasTileBytes + chunk * C::BM * 128 + c * 64 * 128, score.bias_tile,
                                 j * C::BN + 64 * chunk, w.row0 + 64 * c, bias_batch, &k_full[stage]);
          }
          if constexpr ((C::StagedBias & 2) != 0)
            detail::tma_load(smem_bias_column + stage * C::BiasColumnBytes, score.bias_column, j * C::BN, bias_row, 0, &k_full[stage]);
          detail::wait_parity(&v_empty[stage], phase ^ 1u);
          cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                               &v_full[stage], static_cast<uint32_t>(C::KVTileBytes));
#pragma unroll
          for (int chunk = 0; chunk < C::Chunks; ++chunk)
            detail::tma_load(reinterpret_cast<unsigned char*>(smem_v) + (stage * C::Chunks + chunk) * C::BN * C::RowBytes, v,
                             C::ChunkElements * chunk, j * C::BN, v_batch,
                             &v_full[stage]);
        }
        stamp_clock(record, 6);
        if constexpr (kDataLoop) cuda::ptx::mbarrier_arrive(&list_empty[buf]);  // this round's list read
      }
      if constexpr (kDynamic) {
        // This block's claims are over (its last one, ≥ total, is in the loop's condition above): the
        // last block to get here resets the counter for the next launch.
        __threadfence();
        if (atomicAdd(&detail::work_counter[1], 1u) == gridDim.x - 1) {
          detail::work_counter[0] = 0;
          detail::work_counter[1] = 0;
          __threadfence();
        }
      }
    } else if constexpr (C::Fp8) {
      // ---- FP8: warps 1..3 transpose each V tile ([key][d], as TMA wrote it) into the Vᵀ ring ----
      // Vᵀ stage s: HeadDim rows of BN = 128 bytes, 128-byte swizzled (byte L of row d at d·128 +
      // ((L/16 XOR d%8)·16) + L%16), position L of each 16-key half holding key vt_key(L) of that half.
      // One step of a warp: 8 d-quads × 4 key-quads (lane = 8a + b: d 4·(8·dh + b) .. + 3, positions
      // 4·(4·lh + a) .. + 3); four 4-byte reads (one per key, four d each: the whole warp reads 128
      // bytes of 4 distinct swizzled rows, conflict-free), a 4 × 4 byte transpose (8 PRMT), four 4-byte
      // writes (one per d, four keys each). Follows the producer thread's loop over work tiles and key tiles.
      // The addresses are affine in the step: a step s = (s_hi, s_lo) = (step / (HeadDim / 32), step %
      // (HeadDim / 32)) reads V at chunk s_lo / 4, keys 16·s_hi + vt_key(4a + q), column bytes
      // 32·(s_lo % 4) + 4b (swizzle term (2·(s_lo % 4) + b / 4) XOR key % 8), and writes Vᵀ rows
      // 32·s_lo + 4b + i at byte 16·s_hi + 4a (swizzle term s_hi XOR (4b + i) % 8): the lane's parts are
      // computed once here, a step adds two shifts and an XOR per word.
      // Head dim 64 (RowBytes 64): V's rows are 64 bytes, 64-byte swizzled (16-byte chunk c of key row r at
      // chunk c XOR (r / 2) % 4). Reading four keys of one parity, as above, would put a warp's 128 bytes in
      // 4 key rows that share 16 banks (rows of one parity start at the same bank): two-way conflicts. So
      // lanes of odd a read each pair of keys the other way round (word q holds key vt_key(4a + (q XOR 1))),
      // which spreads a warp's read over both parities, conflict-free, and undo it in the byte permutes'
      // selectors (one per lane). Key row 16·s_hi + 2a + (0, 1, 8, 9)[q] has (r / 2) % 4 = a, so the chunk
      // of column bytes 32·s_lo + 4b is (2·s_lo + b / 4) XOR a: a shift and an XOR per step as above.
      // Vᵀ's rows are BN = 128 bytes at every head dim: the writes are the ones above.
      if (thread < 32) return;
      const int tw = thread / 32 - 1, lane_t = thread % 32;
      const int a = lane_t / 8, b = lane_t % 8;
      const uint32_t v_base = wgmma::shared_address(smem_v), vt_base = wgmma::shared_address(smem_vt);
      constexpr int kSteps = (C::HeadDim / 32) * (C::BN / 16);
      constexpr uint32_t kRow = C::RowBytes;  // bytes of one V row: 64 (head dim 64) or 128
      static_assert(kRow == 64 || kRow == 128, "V's rows are 64 or 128 bytes");
      // log2 of the steps per 16 keys: HeadDim / 32 at 128-byte rows (2, 4 or 8 column quarters of 32
      // bytes), 2 at 64-byte rows (HeadDim 64)
      constexpr int kLoShift = C::HeadDim == 64 ? 1 : C::HeadDim == 128 ? 2 : 3;
      static_assert(C::HeadDim / 32 == (1 << kLoShift), "HeadDim must be 64, 128 or 256");
      // Per lane: word q reads key row 2a + (0, 1, 8, 9)[q XOR flip] of the step's 16 keys at column byte
      // 4·(b % 4) of its 16-byte chunk; flip is a % 2 in 64-byte rows (both parities per warp, above), else
      // 0. The chunk index is (2·(lo % 4) + b / 4) XOR the row's swizzle term: in 128-byte rows (key row
      // r, r % 8 = 2a + q % 2) 2a XOR q % 2, in 64-byte rows ((r / 2) % 4 = a) a. Where flip may be 1 the
      // lane's two row offsets are registers and the byte permutes' selectors take the pairs back in order.
      constexpr bool kFlip = kRow == 64;
      const uint32_t flip = kFlip ? uint32_t(a % 2) : 0u;
      const uint32_t read_lane = kRow * 2 * a + 4 * (b % 4);
      const uint32_t read_even = read_lane + kRow * flip, read_odd = read_lane + kRow * (1 - flip);
      const uint32_t read_xor = uint32_t(b / 4) ^ (kFlip ? uint32_t(a) : uint32_t(2 * a));
      const uint32_t select_lo = flip ? 0x1504u : 0x5140u, select_hi = flip ? 0x3726u : 0x7362u;
      const uint32_t write_lane = uint32_t(4 * b * 128 + 4 * a), write_xor = uint32_t((4 * b) % 8);
      uint32_t loaded = 0;
      for (int round = 0, t = tile_index(0); t < total; t = tile_index(++round)) {
        const Work w = locate(t);
        const int count = tiles_of(w, list_of(round));
        for (int n = 0; n < count; ++n, ++loaded) {
          const int stage = detail::stage_of<C::Stages>(loaded);
          detail::wait_parity(&v_full[stage], detail::phase_of<C::Stages>(loaded));
          const uint32_t from = v_base + stage * C::KVTileBytes, to = vt_base + stage * C::VtTileBytes;
#pragma unroll 1
          for (uint32_t step = tw; step < uint32_t(kSteps); step += 3) {
            const uint32_t lo = step & ((1u << kLoShift) - 1), hi = step >> kLoShift;
            const uint32_t read_base = from + (lo >> 2) * (C::BN * kRow) + hi * (16 * kRow) + (kFlip ? 0u : read_lane);
            const uint32_t lo_xor = ((lo & 3) << 1) ^ read_xor, hi_xor = hi ^ write_xor;
            const uint32_t write_base = to + lo * 4096 + write_lane;
            uint32_t word[4];
#pragma unroll
            for (int q = 0; q < 4; ++q)
              word[q] = detail::lds_u32(read_base + (kFlip ? (q % 2 ? read_odd : read_even) : kRow * (q % 2)) + kRow * 8 * (q / 2) +
                                        ((lo_xor ^ (kFlip ? 0u : uint32_t(q & 1))) << 4));
            const uint32_t lo01 = __byte_perm(word[0], word[1], select_lo), lo23 = __byte_perm(word[2], word[3], select_lo);
            const uint32_t hi01 = __byte_perm(word[0], word[1], select_hi), hi23 = __byte_perm(word[2], word[3], select_hi);
            const uint32_t out[4] = {__byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
                                     __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
#pragma unroll
            for (int i = 0; i < 4; ++i) detail::sts_u32(write_base + 128 * i + ((hi_xor ^ i) << 4), out[i]);
          }
          // generic writes, read next by the tensor cores (async proxy): fence in each writing thread first
          cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
          __syncwarp();
          if (lane_t == 0) cuda::ptx::mbarrier_arrive(&vt_full[stage]);
        }
      }
    } else if constexpr (kDataLoop) {
      if (thread / 32 < 1 || thread / 32 > kClassifyWarps) return;
      // ---- Persistent data-mask blocks: warps 1..3 classify the next work tile's key tiles ----
      // Round r's list goes into buffer r & 1 once the producer thread and the consumers are done with
      // round r − 2's (list_empty), then list_full; round 0's was built before the roles split.
      const int cw = thread / 32 - 1, lane_c = thread % 32;
      if constexpr (kDynamic) {
        // Config::Dynamic: round r's tile is the producer's (r − 1)-th post; the sentinel ≥ total goes
        // into the list as well (tile_count 0), and ends the producer's and the consumers' loops.
        for (int round = 1;; ++round) {
          const uint32_t slot = static_cast<uint32_t>(round - 1) & 1u;
          detail::wait_parity(&work_full[slot], (static_cast<uint32_t>(round - 1) >> 1) & 1u);
          const int t = *static_cast<volatile int*>(&work_ids[slot]);
          // Stamped<Config>: warp 1's lane 0 stamps words 7 .. 10 of the producer's record of tile t
          unsigned long long* record = nullptr;
          if constexpr (kStamps) {
            if (cw == 0 && lane_c == 0 && t < total && detail::stamp_buffer != nullptr)
              record = detail::stamp_buffer + (long long)t * (C::Consumers + 1) * detail::kStampWords;
          }
          stamp_clock(record, 7);
          __syncwarp();
          if (lane_c == 0) cuda::ptx::mbarrier_arrive(&work_empty[slot]);
          const int buf = list_of(round);
          detail::wait_parity(&list_empty[buf], (static_cast<uint32_t>(round >> 1) & 1u) ^ 1u);
          detail::named_sync(kClassifyBarrier, 32 * kClassifyWarps);  // the last compaction has read tile_classes
          stamp_clock(record, 8);
          Work w{};
          int tiles = 0;
          if (t < total) {
            w = locate(t);
            // (PostedWork: its Work into the list buffer now, which every reader has released, so that
            // the fields classify() does not read hold no register through it)
            if constexpr (kPostedList) {
              if (cw == 0 && lane_c == 0) post_list_work(buf, w);
            }
            ensure_group(w, cw, lane_c);
            tiles = classify(w, cw, kClassifyWarps, lane_c);
          }
          detail::named_sync(kClassifyBarrier, 32 * kClassifyWarps);  // every class written
          stamp_clock(record, 9);
          if (cw == 0) {
            compact(w, tiles, buf, lane_c);
            stamp_clock(record, 10);
            if (lane_c == 0) list_tile[buf] = t;
            __syncwarp();
            if (lane_c == 0) cuda::ptx::mbarrier_arrive(&list_full[buf]);
          }
          if (t >= total) break;
        }
        return;
      }
      for (int round = 1, t = tile_index(1); t < total; t = tile_index(++round)) {
        const int buf = list_of(round);
        detail::wait_parity(&list_empty[buf], (static_cast<uint32_t>(round >> 1) & 1u) ^ 1u);
        detail::named_sync(kClassifyBarrier, 32 * kClassifyWarps);  // the last compaction has read tile_classes
        const Work w = locate(t);
        ensure_group(w, cw, lane_c);
        const int tiles = classify(w, cw, kClassifyWarps, lane_c);
        detail::named_sync(kClassifyBarrier, 32 * kClassifyWarps);  // every class written
        if (cw == 0) {
          compact(w, tiles, buf, lane_c);
          __syncwarp();
          if (lane_c == 0) cuda::ptx::mbarrier_arrive(&list_full[buf]);
        }
      }
    }
  } else {
    // ---- Consumers ----
    cutlass::arch::warpgroup_reg_alloc<kConsumerRegisters>();
    const int consumer = warpgroup - 1;
    const int warp = thread / 32, lane = thread % 32;
    // Descriptors and fragments by index arithmetic (gemm/wgmma.cuh), in CuTe's register order.
    // (Q and K rows of 64 bytes, e4m3 at head dim 64: the 64-byte swizzle's descriptors)
    auto qk_desc = [](uint32_t tile) { return C::RowBytes == 64 ? wgmma::k_major_sw64(tile) : wgmma::k_major(tile); };
    const uint64_t q_desc = qk_desc(wgmma::shared_address(smem_q) + consumer * C::Chunks * 64 * C::RowBytes);
    const uint64_t k_desc = qk_desc(wgmma::shared_address(smem_k));
    const uint64_t v_desc = C::Fp8 ? wgmma::k_major(wgmma::shared_address(smem_vt)) : wgmma::mn_major(wgmma::shared_address(smem_v), C::BN);
    constexpr uint32_t kKVStageBytes = C::Chunks * C::BN * C::RowBytes;
    wgmma::Fragment<float, C::BN / 2> acc_s;
    wgmma::Fragment<float, C::HeadDim / 2> acc_o;
    // P: the A operand of P·V in registers, bf16/f16 pairs; register 4·kb + j holds acc_s(8·kb + 2j, + 1).
    // FP8: register 4·kb + r holds four e4m3 (vt_key above), BN / 8 registers.
    wgmma::Fragment<uint32_t, C::BN * C::ElementBytes / 8> p;
    const int col_lane = 2 * (lane % 4);
    // The staged epilogue: consumer c syncs its warpgroup on named barrier kEpilogueBarrier + c.
    constexpr bool kStagedEpilogue = C::StagedEpilogue && epilogue_staged<Epilogue>(0) && !epilogue_preloads<Epilogue>(0);
    constexpr int kEpilogueBarrier = 10;
    // Config::QRowsEpilogue: the staged epilogue in the work tile's Q rows on persistent blocks, so each
    // consumer releases its Q buffer after the epilogue's reads of it, not after its last S.
    constexpr bool kQRows = kStagedEpilogue && C::QRowsEpilogue;
    // An Epilogue of kTmaStore (functors.cuh): each warp stores its 16 staged rows by TMA (out_map).
    constexpr bool kTmaStore = kStagedEpilogue && epilogue_tma_store<Epilogue>(0);
    static_assert(!C::QRowsEpilogue || !kData, "QRowsEpilogue: not with a data mask");
    static_assert(kEpilogueBarrier + C::Consumers <= 16, "named barriers: 16");

    // The turn ring: consumer c waits on barrier 1 + c and passes the turn to the next consumer's
    // barrier after issuing its products. The last consumer opens the ring once; consumer 0 takes
    // that opening arrival back at the end, so every named barrier completes as often as it is used.
    constexpr int kTurnThreads = 256;
    const int my_turn = 1 + consumer;
    const int next_turn = 1 + (consumer + 1) % C::Consumers;
    // Config::FreeConsumers: no turns; each consumer issues as soon as its own operands are there.
    constexpr bool kTurns = !C::FreeConsumers;
    static_assert(!C::FreeConsumers || !kData, "FreeConsumers: not with a data mask");
    auto take_turn = [&] {
      if constexpr (kTurns) detail::named_sync(my_turn, kTurnThreads);
    };
    auto pass_turn = [&] {
      if constexpr (kTurns) detail::named_arrive(next_turn, kTurnThreads);
    };
    if (kTurns && consumer == C::Consumers - 1) detail::named_arrive(next_turn, kTurnThreads);
    // Config::Stagger: consumer 1 passes its first Stagger turns without issuing, so it runs that many
    // turns behind consumer 0 from here on (consumer 0 gives them back with as many empty turns at
    // its end); both still take every tile of the same rings.
    static_assert(C::Stagger == 0 || !kData, "Stagger: not with a data mask");
    if constexpr (C::Stagger > 0) {
      if (consumer == 1) {
#pragma unroll 1
        for (int turn = 0; turn < C::Stagger; ++turn) {
          detail::named_sync(my_turn, kTurnThreads);
          detail::named_arrive(next_turn, kTurnThreads);
        }
      }
    }

    auto release = [&](uint64_t* bar) {
      __syncwarp();
      if (lane == 0) cuda::ptx::mbarrier_arrive(bar);
    };
    auto to_p = [&] {
      if constexpr (C::Fp8) {
#pragma unroll
        for (int i = 0; i < C::BN / 8; ++i) {
          const int a = 16 * (i / 4) + 8 * ((i % 4) / 2) + 2 * (i % 2);  // accumulator group 4·kb + 2·(r / 2), row half r % 2
          p(i) = detail::pack4_e4m3(acc_s(a), acc_s(a + 1), acc_s(a + 4), acc_s(a + 5));
        }
      } else {
#pragma unroll
        for (int i = 0; i < C::BN / 4; ++i) p(i) = detail::pack2<T>(acc_s(2 * i), acc_s(2 * i + 1));
      }
    };
    // kColumnMma: the A registers of the column-term instruction (set per work tile from u / a) and the
    // offsets' descriptor (functors.cuh, kAffineColumnMma).
    wgmma::Fragment<uint32_t, kColumnMma ? 4 : 1> column_a;
    uint64_t column_desc = 0;
    if constexpr (kColumnMma) column_desc = wgmma::plain_descriptor(wgmma::shared_address(detail::ColumnOffsets<true>::tile()), 128, 128);
    (void)column_a;
    (void)column_desc;
    // S = Q·Kᵀ from Q buffer `qb` and K stage `stage` (kColumnMma: on top of (u / a)·(key offset)).
    auto issue_s = [&](int qb, int stage) {
      wgmma::fence(acc_s);
      if constexpr (kColumnMma) wgmma::fence(column_a);  // (written before the wgmma's stage, or ptxas serializes it)
      wgmma::arrive();
      const uint64_t k_stage = wgmma::advance(k_desc, stage * kKVStageBytes);
      const uint64_t q_buffer = wgmma::advance(q_desc, qb * static_cast<uint32_t>(C::QBytes));
      if constexpr (kColumnMma) {
        // (the chain's shape: ptxas serializes a chain of wgmma whose accumulators only overlap)
        static_assert(C::BN == 128, "the column term's instruction is 64 x 128");
        using ColumnOp = cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_RS<cute::SM90::GMMA::Major::K, cute::SM90::GMMA::Major::K>;
        wgmma::mma_rs<ColumnOp>(column_a, 0, column_desc, acc_s, false);
      }
#pragma unroll
      for (int kb = 0; kb < Ty::KBlocksS; ++kb)
        wgmma::mma_ss<typename Ty::MmaS>(wgmma::advance(q_buffer, wgmma::k_major_block(64, kb, C::RowBytes)),
                                         wgmma::advance(k_stage, wgmma::k_major_block(C::BN, kb, C::RowBytes)), acc_s,
                                         kColumnMma || kb > 0);
      wgmma::commit();
    };
    auto issue_o = [&](int stage) {
      wgmma::fence(p);
      wgmma::fence(acc_o);
      wgmma::arrive();
      const uint64_t v_stage = wgmma::advance(v_desc, stage * (C::Fp8 ? static_cast<uint32_t>(C::VtTileBytes) : kKVStageBytes));
#pragma unroll
      for (int kb = 0; kb < Ty::KBlocksO; ++kb)
        wgmma::mma_rs<typename Ty::MmaO>(
            p, kb, wgmma::advance(v_stage, C::Fp8 ? wgmma::k_major_block(C::HeadDim, kb) : wgmma::mn_major_block(kb)), acc_o, true);
      wgmma::commit();
    };

    uint32_t consumed = 0;  // K (and V) tiles consumed so far, over all work tiles
    uint32_t q_uses = 0;    // Q tiles used so far (work tiles with key tiles)
    // One pass per work tile. Without Config::Persistent the condition is false at compile time and
    // there is no loop (its registers matter at 160 per thread); a lambda called in a loop is not
    // always inlined, and wgmma across a call is serialized (C7520).
    // Config::Dynamic: the entries the producer posts, in its order (each consumer warp reads the slot,
    // then releases it).
    uint32_t taken = 0;
    Work taken_work{};  // Config::PostedWork: the Work posted with the entry taken last
    auto take = [&](int round) -> int {
      if constexpr (kDynamic && kDataLoop) {
        const int buf = list_of(round);
        detail::wait_parity(&list_full[buf], static_cast<uint32_t>(round >> 1) & 1u);
        return *static_cast<volatile int*>(&list_tile[buf]);
      } else if constexpr (kDynamic) {
        const uint32_t slot = taken & 1u;
        detail::wait_parity(&work_full[slot], (taken >> 1) & 1u);
        const int tile = *static_cast<volatile int*>(&work_ids[slot]);
        if constexpr (kPostedRing) {
          const volatile int* posted = work_posted[slot];
          taken_work = Work{posted[0], posted[1], posted[2], posted[3], posted[4]};
        }
        release(&work_empty[slot]);
        ++taken;
        return tile;
      } else {
        return tile_index(round);
      }
    };
    int round = 0, t = take(0);
    int next_t = total;  // Config::PostedWork: the next entry, taken before this tile's epilogue
    if (t < total) do {
      unsigned long long* const record = stamp_record(t, 1 + consumer);
      if constexpr (kStamps) {
        stamp(record, 1, detail::global_now());
        stamp_clock(record, 2);
      }
      const Work w = kPostedList ? posted_list_work(round) : kPostedRing ? taken_work : locate(t);
      // This thread's rows: accumulator register i ↔ row 16·warp + lane/4 + 8·((i/2) % 2), column
      // 8·(i/4) + 2·(lane % 4) + i % 2 of the warpgroup's 64 × N tile.
      const int my_row0 = w.row0 + 64 * consumer;
      const int row_base = my_row0 + 16 * warp + lane / 4;
      // A data mask: this round's list (persistent blocks: built by the classifier warps while the
      // previous tile ran), the ids of this thread's two rows once per work tile (rows past seq_q are
      // not stored: the last row's), and per boundary tile the ids of its keys, loaded right after S is
      // issued, one key per lane and 32 keys per register (kIdRegs), shared by shuffles.
      const int buf = list_of(round);
      if constexpr (kDataLoop) detail::wait_parity(&list_full[buf], static_cast<uint32_t>(round >> 1) & 1u);
      constexpr bool kIdShuffle = kData && C::BN % 32 == 0;
      constexpr int kIdRegs = kIdShuffle ? C::BN / 32 : 1;
      int row_ids[2] = {0, 0};
      int key_ids[kIdRegs];
      if constexpr (kData) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = row_base + 8 * r;
          row_ids[r] = mask.row_id(w.bh, row < shape.seq_q ? row : shape.seq_q - 1);
        }
      }
      auto is_boundary = [&](int n) -> bool {
        if constexpr (kData) return (tile_list[buf][n] & 0x8000u) != 0;
        else return false;
      };
      // a boundary tile whose keys carry one id (list_key_id[buf][n]; its keys all inside seq_k)
      auto is_one_id = [&](int n) -> bool {
        if constexpr (kOneId) return (tile_list[buf][n] & 0x4000u) != 0;
        else return false;
      };
      auto load_ids = [&](int j, int n) {
        if constexpr (kIdShuffle) {
          const int col0 = j * C::BN;
          if (col0 + C::BN > shape.seq_k || (is_boundary(n) && !is_one_id(n))) {
#pragma unroll
            for (int u = 0; u < kIdRegs; ++u) {
              const int col = col0 + 32 * u + lane;
              key_ids[u] = col < shape.seq_k ? mask.col_id(w.bh, col) : 0;
            }
          }
        }
      };
      // An epilogue that preloads its inputs (a gate): every pair this thread stores, loaded now so
      // that the loads are in flight together while the tile's key tiles run (functors.cuh).
      constexpr bool kPreload = epilogue_preloads<Epilogue>(0);
      typename detail::PreloadOf<Epilogue>::type preloaded[C::HeadDim / 4];
      (void)preloaded;
      if constexpr (kPreload) {
        // (row by row: the row's part of the address is computed once under its guard)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = row_base + 8 * r;
          if (row < shape.seq_q) {
#pragma unroll
            for (int i = 2 * r; i < C::HeadDim / 2; i += 4) preloaded[i / 2] = epilogue.preload(w.bh, row, 8 * (i / 4) + col_lane);
          }
        }
      }
      // An affine score's factors for this work tile's head (functors.cuh).
      float affine_a = 1.0f, affine_u = 0.0f, affine_w = 0.0f, affine_c = 0.0f;
      if constexpr (score_is_affine<Score>(0)) score.affine(w.bh, &affine_a, &affine_u, &affine_w, &affine_c);
      // The row-shift form: u times each of the thread's constant column offsets 8·g + e inside a key
      // tile (score i has offset 8·(i / 4) + i % 2: column_term[2·(i / 4) + i % 2]), and the row shift
      // of the key tile in flight (logits() sets it, the row state takes it).
      // Two consumers only: with 3 (a 128-register cap) the BN / 4 terms do not fit beside S, P and O, and
      // the whole bias per score (below) is the faster form there (functors.cuh, "An affine score").
      constexpr bool kRowShift = score_is_affine<Score>(0) && !score_affine_two_ffma<Score>(0) && !score_affine_positive_a<Score>(0) && C::Consumers == 2;
      // The scaled row-shift form (a Score with kAffinePositiveA: a > 0 for every head): the
      // logits divided by a, s'' = dot + (u / a)·k by one FFMA per score with the column offset k as its
      // immediate operand (no column terms in registers), the row shift divided by a, and the row state's
      // scale multiplied by a (functors.cuh, "An affine score"); with kColumnMma the wgmma forms dot + (u / a)·n.
      constexpr bool kScaledShift = score_is_affine<Score>(0) && !score_affine_two_ffma<Score>(0) && score_affine_positive_a<Score>(0);
      float column_term[kRowShift ? C::BN / 4 : 1];
      float row_shift[2] = {0.0f, 0.0f};
      if constexpr (kRowShift) {
#pragma unroll
        for (int k = 0; k < C::BN / 4; ++k) column_term[k] = affine_u * static_cast<float>(8 * (k / 2) + k % 2);
      }
      (void)column_term;
      float inverse_a = 1.0f, u_over_a = 0.0f, scaled_log2 = score.scale_log2;
      if constexpr (kScaledShift) {
        inverse_a = 1.0f / affine_a;
        u_over_a = affine_u * inverse_a;
        scaled_log2 = score.scale_log2 * affine_a;
      }
      if constexpr (kColumnMma) {
        // A of the column-term instructions: row-independent, u / a's pieces at k = 0, 1, 2 (lanes 4q, 4q + 1:
        // k = 2·(lane % 4), + 1), zeros elsewhere.
        float piece[3];
        detail::bf16_pieces(u_over_a, piece);
        using B16 = cute::bfloat16_t;
        const int quad = lane % 4;
        // registers j = 0, 1: rows lane / 4 and + 8 (the same A); j = 2, 3: k = 8 … 15 (zeros)
        const uint32_t pieces = quad == 0 ? detail::pack2<B16>(piece[0], piece[1]) : quad == 1 ? detail::pack2<B16>(piece[2], 0.0f) : 0u;
        column_a(0) = column_a(1) = pieces;
        column_a(2) = column_a(3) = 0u;

      }
      (void)inverse_a;
      (void)u_over_a;
      // A score with a bias: its factor of the dot product for this head, and the bias of the key tile
      // whose S is in flight (read right after S is issued, added once S is there).
      float dot_factor = 1.0f;
      if constexpr (score_has_bias<Score>(0)) dot_factor = score.dot_factor(w.bh);
      float bias[C::BN / 2];
      auto load_bias = [&](int j, int stage) {
        (void)stage;
        if constexpr (C::StagedBias != 0) {
          // From the K stage's shared memory in the accumulator layout: scores i, i + 1 (one row, two
          // adjacent keys) are one 4-byte word of the tile (the 128-byte swizzle: the row's 16-byte chunk
          // XOR row % 8) and one 2-byte word of the column bytes.
          using BiasTile = typename Score::BiasTile;
          using BiasColumn = typename Score::BiasColumn;
          static_assert(sizeof(BiasTile) == 2 && sizeof(BiasColumn) == 1, "a staged bias: 16-bit tile, 8-bit column");
          const uint32_t tile = static_cast<uint32_t>(__cvta_generic_to_shared(smem_bias_tile)) + stage * C::BiasTileBytes;
          const uint32_t column = static_cast<uint32_t>(__cvta_generic_to_shared(smem_bias_column)) + stage * C::BiasColumnBytes;
          const int col0 = j * C::BN;
          const int tile_row0 = 64 * consumer + 16 * warp + lane / 4;
          if constexpr (score_staged_sum<Score>(0)) {
            static_assert(C::StagedBias == 3, "kStagedSum: a staged tile and column");
            static_assert(C::BiasTileOffset % 1024 == 0 && C::BiasTileBytes % 1024 == 0, "the staged bias tile on 1024-byte boundaries");
            // The thread's word of group g in row tile_row0 (+ 8 for r = 1: + 1024 bytes): the row's
            // 128-byte line, 16-byte chunk g XOR tile_row0 % 8 (the 128-byte swizzle), byte 2·col_lane.
            // With the tile 1024-byte aligned, chunk bits 4..6 of `lane_word` hold tile_row0 % 8 and
            // chunk g is one XOR with 16·g: no per-group address arithmetic.
            const uint32_t lane_word = tile + tile_row0 * 128 + ((tile_row0 % 8) << 4) + 2 * col_lane;
#pragma unroll
            for (int group = 0; group < C::BN / 8; ++group) {
              const int key = 8 * group + col_lane;
              const unsigned int column_word = detail::lds_u16_wide(column + key);
              const float column_term0 = score.staged_column(w.bh, col0 + key, static_cast<BiasColumn>(column_word & 0xffu));
              const float column_term1 = score.staged_column(w.bh, col0 + key + 1, static_cast<BiasColumn>(column_word >> 8));
#pragma unroll
              for (int r = 0; r < 2; ++r) {
                const int i = 4 * group + 2 * r;
                const unsigned int tile_word = detail::lds_u32((lane_word ^ ((group % 8) << 4)) + (group / 8) * C::BM * 128 + r * 1024);
                float t0, t1;
                detail::pair_to_float<BiasTile>(tile_word, &t0, &t1);
                bias[i] = t0 + column_term0;
                bias[i + 1] = t1 + column_term1;
              }
            }
            return;
          }
#pragma unroll
          for (int group = 0; group < C::BN / 8; ++group) {
            // keys key, key + 1 of both rows: scores 4·group + 2·r + {0, 1}
            const int key = 8 * group + col_lane;
            unsigned short column_word = 0;
            if constexpr ((C::StagedBias & 2) != 0) column_word = detail::lds_u16(column + key);
            // (the raw bytes as the functor's types: a register reinterpreted, no memcpy under NVRTC)
            const BiasColumn bc0 = reinterpret_cast<const BiasColumn*>(&column_word)[0];
            const BiasColumn bc1 = reinterpret_cast<const BiasColumn*>(&column_word)[1];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const int tile_row = tile_row0 + 8 * r, i = 4 * group + 2 * r;
              unsigned int tile_word = 0;
              if constexpr ((C::StagedBias & 1) != 0)
                tile_word = detail::lds_u32(tile + (key / 64) * C::BM * 128 + tile_row * 128 + (((key % 64) * 2) ^ ((tile_row % 8) << 4)));
              const BiasTile bt0 = reinterpret_cast<const BiasTile*>(&tile_word)[0];
              const BiasTile bt1 = reinterpret_cast<const BiasTile*>(&tile_word)[1];
              bias[i] = score.staged_bias(w.bh, row_base + 8 * r, col0 + key, bt0, bc0);
              bias[i + 1] = score.staged_bias(w.bh, row_base + 8 * r, col0 + key + 1, bt1, bc1);
            }
          }
        } else if constexpr (score_has_bias<Score>(0)) {
          const int col0 = j * C::BN;
#pragma unroll
          for (int i = 0; i < C::BN / 2; ++i)
            bias[i] = score.bias(w.bh, row_base + 8 * ((i / 2) % 2), col0 + 8 * (i / 4) + col_lane + i % 2);
        }
      };
      // Logits of key tile j (the n-th of the work tile): score functor, then the mask on boundary tiles
      // (and keys ≥ seq_k).
      auto logits = [&](int j, int n) {
        const int col0 = j * C::BN;
        if constexpr (score_has_bias<Score>(0)) {
#pragma unroll
          for (int i = 0; i < C::BN / 2; ++i) acc_s(i) = fmaf(acc_s(i), dot_factor, bias[i]);
        } else if constexpr (kRowShift) {
          // a·dot + u·(col − row) + w·row + c as s' = a·dot + u·(constant column offset), one FFMA per
          // score, and the row shift u·(col0 + col_lane − row) + w·row + c (exact integer col0 + col_lane
          // − row) once per tile and row, which the row state adds to the maximum.
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = row_base + 8 * r;
            row_shift[r] = fmaf(affine_u, static_cast<float>(col0 + col_lane - row), fmaf(affine_w, static_cast<float>(row), affine_c));
          }
#pragma unroll
          for (int i = 0; i < C::BN / 2; ++i) acc_s(i) = fmaf(acc_s(i), affine_a, column_term[2 * (i / 4) + i % 2]);
        } else if constexpr (kScaledShift) {
          // (a·dot + u·(col − row) + w·row + c) / a as s'' = dot + (u / a)·(constant column offset), one
          // FFMA per score whose offset is an immediate, and the row shift (u·(col0 + col_lane − row) + w·row
          // + c) / a once per tile and row; the row state's scale is a·scale_log2. kColumnMma: S already
          // holds dot + (u / a)·(col − col0), and the shift is (u·(col0 − row) + w·row + c) / a.
          constexpr int kLaneInShift = kColumnMma ? 0 : 1;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = row_base + 8 * r;
            row_shift[r] = fmaf(u_over_a, static_cast<float>(col0 + kLaneInShift * col_lane - row), fmaf(affine_w, static_cast<float>(row), affine_c) * inverse_a);
          }
          if constexpr (!kColumnMma) {
#pragma unroll
            for (int i = 0; i < C::BN / 2; ++i) acc_s(i) = fmaf(u_over_a, static_cast<float>(8 * (i / 4) + i % 2), acc_s(i));
          }
        } else if constexpr (score_is_affine<Score>(0)) {
          // a·dot + u·(col − row) + w·row + c: the row part once per tile and row (exact integer
          // col0 + col_lane − row), then u times the element's constant column offset, then a·dot.
          float base[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = row_base + 8 * r;
            base[r] = fmaf(affine_u, static_cast<float>(col0 + col_lane - row), fmaf(affine_w, static_cast<float>(row), affine_c));
          }
#pragma unroll
          for (int i = 0; i < C::BN / 2; ++i)
            acc_s(i) = fmaf(acc_s(i), affine_a, fmaf(affine_u, static_cast<float>(8 * (i / 4) + i % 2), base[(i / 2) % 2]));
        } else if constexpr (!Score::kIdentity) {
#pragma unroll
          for (int i = 0; i < C::BN / 2; ++i)
            acc_s(i) = score(w.bh, row_base + 8 * ((i / 2) % 2), col0 + 8 * (i / 4) + col_lane + i % 2, acc_s(i));
        }
        bool boundary;
        if constexpr (kData) boundary = is_boundary(n);
        else boundary = mask.partial(w.bh, my_row0, 64, col0, C::BN);
        (void)n;
        if (col0 + C::BN > shape.seq_k || boundary) {
          if (is_one_id(n)) {
            if constexpr (kOneId) {
              // every key of the tile carries id v: each row sees all of them or none
              const int v = list_key_id[buf][n];
              bool keep[2];
#pragma unroll
              for (int r = 0; r < 2; ++r) keep[r] = mask.match(w.bh, row_ids[r], v);
#pragma unroll
              for (int i = 0; i < C::BN / 2; ++i)
                if (!keep[(i / 2) % 2]) acc_s(i) = negative_infinity();
            }
          } else if constexpr (kData) {
            // The ids of each of the thread's BN/4 columns against its two rows': a score whose ids
            // match() refuses is selected −∞ straight from the compare. Column c = 8·(c/2) + col_lane +
            // c%2 of the tile is key_ids[c/8] of lane 8·((c/2)%4) + col_lane + c%2 (load_ids: key 32u +
            // lane); its score of row r is i = 4·(c/2) + 2·r + c%2.
#pragma unroll
            for (int c = 0; c < C::BN / 4; ++c) {
              int col_id;
              if constexpr (kIdShuffle) {
                col_id = __shfl_sync(0xffffffffu, key_ids[c / 8], 8 * ((c / 2) % 4) + col_lane + c % 2);
              } else {
                const int col = col0 + 8 * (c / 2) + col_lane + c % 2;
                col_id = col < shape.seq_k ? mask.col_id(w.bh, col) : 0;
              }
#pragma unroll
              for (int r = 0; r < 2; ++r)
                if (!mask.match(w.bh, row_ids[r], col_id)) acc_s(4 * (c / 2) + 2 * r + c % 2) = negative_infinity();
            }
            // Keys ≥ seq_k: only a row's last, ragged tile compares the columns with the bound.
            if (col0 + C::BN > shape.seq_k) {
#pragma unroll
              for (int i = 0; i < C::BN / 2; ++i)
                if (col0 + 8 * (i / 4) + col_lane + i % 2 >= shape.seq_k) acc_s(i) = negative_infinity();
            }
          } else if constexpr (mask_has_row_interval<Mask>(0)) {
            // Each row's visible columns [lo, hi] (clamped to seq_k), relative to this thread's first
            // column: a score is kept when its constant column offset lies inside.
            int lo[2], hi[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              mask.row_columns(w.bh, row_base + 8 * r, &lo[r], &hi[r]);
              if (hi[r] > shape.seq_k - 1) hi[r] = shape.seq_k - 1;
              lo[r] -= col0 + col_lane;
              hi[r] -= col0 + col_lane;
            }
#pragma unroll
            for (int i = 0; i < C::BN / 2; ++i) {
              const int r = (i / 2) % 2, offset = 8 * (i / 4) + i % 2;
              if (offset < lo[r] || offset > hi[r]) acc_s(i) = negative_infinity();
            }
          } else {
#pragma unroll
            for (int i = 0; i < C::BN / 2; ++i) {
              const int row = row_base + 8 * ((i / 2) % 2), col = col0 + 8 * (i / 4) + col_lane + i % 2;
              if (!(col < shape.seq_k && mask.visible(w.bh, row, col))) acc_s(i) = negative_infinity();
            }
          }
        }
      };
      State<C::BN / 2> state;
      state.init();
      auto update_state = [&](float (&correction)[2]) {
        constexpr int kSchedule = score_softmax_schedule<Score>(0, 0);
        constexpr int kEmulated = score_exp2_emulated<Score>(0, SOLDER_ATTN_EXP2_EMULATED_DEFAULT);
        if constexpr (kRowShift) state.template update_shifted<kSchedule, kEmulated>(acc_s, score.scale_log2, correction, row_shift);
        else if constexpr (kScaledShift) state.template update_shifted<kSchedule, kEmulated>(acc_s, scaled_log2, correction, row_shift);
        else state.template update<kSchedule, kEmulated>(acc_s, score.scale_log2, correction);
      };
      wgmma::clear(acc_o);

      const int count = tiles_of(w, buf);
      stamp_header(record, 1 + consumer, count);
      // the Q buffer of this work tile (taken only when it has key tiles; the staged epilogue's slice with
      // Config::EpilogueInQ)
      const int tile_qb = detail::stage_of<C::QBuffers>(q_uses);
      if (count > 0) {
        // The factor of the O rows from the last State::update, applied just before the next P·V is
        // issued (O then holds the tiles before the updated one), while the tensor cores run S. No
        // branch around it: a conditional write of O before a wgmma makes ptxas serialize (C7520).
        float correction[2];
        auto rescale_o = [&] {
#pragma unroll
          for (int i = 0; i < C::HeadDim / 2; ++i) acc_o(i) *= correction[(i / 2) % 2];
        };
        // The n-th key tile of this work tile (tile_at) is the (consumed + n)-th use of the K and V rings.
        const uint32_t first = consumed;
        const int qb = detail::stage_of<C::QBuffers>(q_uses);
        detail::wait_parity(&q_full[qb], detail::phase_of<C::QBuffers>(q_uses));
        stamp_clock(record, 3);
        ++q_uses;
        // First tile: S only.
        {
          const int j0 = tile_at(w, buf, 0);
          const int ks = detail::stage_of<C::Stages>(first);
          detail::wait_parity(&k_full[ks], detail::phase_of<C::Stages>(first));
          stamp_clock(record, 4);
          take_turn();
          stamp_clock(record, 5);
          issue_s(qb, ks);
          stamp_clock(record, 6);
          pass_turn();
          load_bias(j0, ks);
          load_ids(j0, 0);
          wgmma::wait<0>();
          wgmma::fence(acc_s);
          stamp_clock(record, 7);
          release(&k_empty[ks]);
          if (count == 1 && !kQRows) release(&q_empty[qb]);
          logits(j0, 0);
          update_state(correction);  // O is 0: nothing to rescale
          to_p();
          stamp_clock(record, 8);
          if (count == 1) stamp_clock(record, 9);  // (no loop: its softmax is the first tile's)
        }
        for (int n = 1; n < count; ++n) {
          const int j = tile_at(w, buf, n);
          const int ks = detail::stage_of<C::Stages>(first + n), vs = detail::stage_of<C::Stages>(first + n - 1);
          detail::wait_parity(&k_full[ks], detail::phase_of<C::Stages>(first + n));
          take_turn();
          issue_s(qb, ks);
          rescale_o();  // by tile j−1's correction, while S_j runs (O is 0 after the first tile)
          detail::wait_parity(&pv_full[vs], detail::phase_of<C::Stages>(first + n - 1));
          issue_o(vs);
          pass_turn();
          load_bias(j, ks);
          load_ids(j, n);
          wgmma::wait<1>();  // S_j is done, P_{j-1}·V_{j-1} may still run
          wgmma::fence(acc_s);
          if (n == count - 1) stamp_clock(record, 9);
          release(&k_empty[ks]);
          if (n == count - 1 && !kQRows) release(&q_empty[qb]);  // the tile's last read of Q is done
          logits(j, n);
          update_state(correction);
          wgmma::wait<0>();
          wgmma::fence(acc_o);
          wgmma::fence(p);
          release(&v_empty[vs]);
          to_p();
        }
        // Last P·V.
        {
          const int vs = detail::stage_of<C::Stages>(first + count - 1);
          detail::wait_parity(&pv_full[vs], detail::phase_of<C::Stages>(first + count - 1));
          stamp_clock(record, 10);
          take_turn();
          stamp_clock(record, 11);
          rescale_o();
          issue_o(vs);
          pass_turn();
          wgmma::wait<0>();
          wgmma::fence(acc_o);
          stamp_clock(record, 12);
          release(&v_empty[vs]);
        }

        consumed += static_cast<uint32_t>(count);
      }
      if constexpr (kDataLoop) release(&list_empty[buf]);  // this warp's last read of the round's list
      // Config::PostedWork: the next entry now (the producer posted it once it had issued this tile's
      // loads), so that the slot's release does not follow this tile's stores. (A data mask's entries
      // come with their lists, which hold no slot: taken after the stores.)
      if constexpr (kPostedRing) next_t = take(round + 1);

      // ---- Epilogue: O / Σ p (zeros for rows that see no key; NaN with Mask::kEmptyRowNaN) ----
      float inverse[2];
      state.finish(inverse);
      if constexpr (mask_empty_row_nan<Mask>(0)) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
          if (inverse[r] == 0.0f) inverse[r] = __int_as_float(0x7fc00000);
      }
      // The staged epilogue (Config::StagedEpilogue with an Epilogue of kStaged; see "Staged epilogue"
      // above): the stored words into this consumer's slice of the buffer, then whole rows with 16-byte
      // stores. Taken only where every row's address is 16-byte aligned (a warp-uniform test).
      bool staged = false;
      if constexpr (kStagedEpilogue && !kTmaStore)
        staged = (reinterpret_cast<uintptr_t>(epilogue.staged_row(0, 0)) & 15) == 0 && (C::HeadDim * 2) % 16 == 0;
      if constexpr (kTmaStore) staged = true;  // the map's encoding checked the address and strides
      // (Config::QRowsEpilogue: a work tile without key tiles took no Q buffer, so it stores pair by pair)
      if constexpr (kQRows) staged = staged && count > 0;
      if constexpr (kStagedEpilogue) {
        if (staged) {
          constexpr int kRowChunks = C::HeadDim / 8;  // 16-byte chunks of a row
          // The per-thread shared addresses through a volatile move: otherwise the compiler hoists them (a
          // dozen loop-invariant registers) out of the work-tile loop, and hd128's consumers spill.
          // Config::EpilogueInQ (one block per work tile, or QRowsEpilogue): the slice is this consumer's own
          // Q rows in the work tile's Q buffer, whose last reader (this consumer's last S) has completed; the
          // async proxy's reads of them are ordered before the generic writes below by a proxy fence.
          uint32_t slice = static_cast<uint32_t>(__cvta_generic_to_shared(base + (C::EpilogueInQ ? tile_qb * C::QBytes : C::EpilogueOffset))) +
                           consumer * 64 * C::HeadDim * 2;
          asm volatile("mov.b32 %0, %0;" : "+r"(slice));
          if constexpr (C::EpilogueInQ) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          // 64-column panels of 64 rows × 128 bytes, 16-byte chunk c of row l at chunk c ^ (l % 8) (TMA's
          // 128-byte swizzle). Writes: this thread's rows 16·warp + lane/4 (+ 8), so l % 8 = lane / 4 and
          // the 8 rows of one store instruction hit 8 different chunks (no bank conflict).
          const uint32_t to_row = slice + (16 * warp + lane / 4) * 128 + col_lane * 2;
          const uint32_t swizzle = (lane / 4) * 16;
          // this slice's 16-byte reads of the previous tile are done in every warp (kTmaStore: each warp
          // writes and stores only its own 16 rows, and its stores' reads ended before its last tile did)
          if constexpr (!kTmaStore) detail::named_sync(kEpilogueBarrier + consumer, 128);
#pragma unroll
          for (int i = 0; i < C::HeadDim / 2; i += 2) {
            const int r = (i / 2) % 2;
            const int row = row_base + 8 * r;
            const int col = 8 * (i / 4);  // + col_lane
            const uint32_t word = row < shape.seq_q ? epilogue.staged_pack(w.bh, row, col + col_lane, acc_o(i) * inverse[r], acc_o(i + 1) * inverse[r]) : 0u;
            const uint32_t at = to_row + (col / 64) * 64 * 128 + r * 8 * 128 + ((((col % 64) / 8) * 16) ^ swizzle);
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(at), "r"(word));
          }
          if constexpr (kTmaStore) {
            // This warp's 16 rows of each 64-column panel by one TMA store: the generic writes made visible
            // to the async proxy (every writer fences), then lane 0 issues the stores and waits until they
            // have read shared memory, so the rows may be rewritten (the next tile) or the Q buffer released.
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncwarp();
            if (lane == 0) {
#pragma unroll
              for (int panel = 0; panel < C::HeadDim / 64; ++panel)
                detail::tma_store(epilogue.out_map, slice + panel * 64 * 128 + 16 * warp * 128, 64 * panel, my_row0 + 16 * warp, w.bh);
              detail::tma_store_commit_and_wait_read();
            }
            __syncwarp();
          } else {
            detail::named_sync(kEpilogueBarrier + consumer, 128);  // the slice is written
            // Reads: 128 threads cover 128 / kRowChunks rows per step, 8 consecutive lanes one 128-byte panel
            // row (conflict-free), and store them as full 128-byte lines.
            constexpr int kRowsPerStep = 128 / kRowChunks;
            const int first_local = thread / kRowChunks, chunk = thread % kRowChunks;
            const uint32_t from = slice + (chunk / 8) * 64 * 128 + first_local * 128 + (((chunk % 8) ^ (first_local % 8)) * 16);
#pragma unroll
            for (int n = 0; n < 64 / kRowsPerStep; ++n) {
              const int local = first_local + kRowsPerStep * n;  // local % 8 = first_local % 8 (kRowsPerStep: 16 or 8)
              uint32_t x, y, z, u;
              asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(x), "=r"(y), "=r"(z), "=r"(u) : "r"(from + kRowsPerStep * n * 128));
              const int row = my_row0 + local;
              if (row < shape.seq_q) {
                unsigned char* to = static_cast<unsigned char*>(epilogue.staged_row(w.bh, row)) + 16 * chunk;
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(x), "r"(y), "r"(z), "r"(u) : "memory");
              }
            }
          }
        }
      }
      if constexpr (kQRows) {
        // Config::QRowsEpilogue: this warp's reads of the Q rows are done (the staged path) or Q's last
        // read was the last S (pair by pair); the generic accesses ordered before the next Q's TMA write.
        if (count > 0) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          release(&q_empty[tile_qb]);
        }
      }
#pragma unroll
      for (int i = 0; i < C::HeadDim / 2; i += 2) {
        const int r = (i / 2) % 2;
        const int row = row_base + 8 * r;
        if (!staged && row < shape.seq_q) {
          if constexpr (kPreload)
            epilogue(w.bh, row, 8 * (i / 4) + col_lane, acc_o(i) * inverse[r], acc_o(i + 1) * inverse[r], preloaded[i / 2]);
          else
            epilogue(w.bh, row, 8 * (i / 4) + col_lane, acc_o(i) * inverse[r], acc_o(i + 1) * inverse[r]);
        }
      }
      if constexpr (kStamps) {
        stamp_clock(record, 13);
        stamp(record, 14, detail::global_now());
      }
    } while (C::Persistent && (t = kPostedRing ? (++round, next_t) : take(++round)) < total);
    if (consumer == 0) {
      if constexpr (C::Stagger > 0) {
        // the turns consumer 1 passed at its start, given back (it still has that many products to issue)
#pragma unroll 1
        for (int turn = 0; turn < C::Stagger; ++turn) {
          detail::named_sync(my_turn, kTurnThreads);
          detail::named_arrive(next_turn, kTurnThreads);
        }
      }
      if constexpr (kTurns) detail::named_sync(my_turn, kTurnThreads);  // the ring's opening arrival
    }
  }
}

template <class C, class Score, class Mask, class Epilogue, template <int> class State = OnlineSoftmax>
__global__ void __launch_bounds__(C::Threads, 1)
    attention_kernel(const __grid_constant__ TensorMap q, const __grid_constant__ TensorMap k,
                     const __grid_constant__ TensorMap v, AttentionShape shape, const __grid_constant__ Score score, Mask mask,
                     Epilogue epilogue) {
  static_assert(!epilogue_tma_store<Epilogue>(0) || !C::StagedEpilogue, "an Epilogue of kTmaStore: attention_kernel_tma_store");
  attention_body<C, Score, Mask, Epilogue, State>(q, k, v, shape, score, mask, epilogue);
}

template <class C, class Score, class Mask, class Epilogue, template <int> class State = OnlineSoftmax>
__global__ void __launch_bounds__(C::Threads, 1)
    attention_kernel_tma_store(const __grid_constant__ TensorMap q, const __grid_constant__ TensorMap k,
                               const __grid_constant__ TensorMap v, AttentionShape shape, const __grid_constant__ Score score,
                               Mask mask, const __grid_constant__ Epilogue epilogue) {
  attention_body<C, Score, Mask, Epilogue, State>(q, k, v, shape, score, mask, epilogue);
}

}  // namespace solder::attention

// An unmangled kernel for NVRTC (the runtime looks kernels up by their extern "C" names).
#define SOLDER_ATTENTION_KERNEL(name, ConfigType, ScoreType, MaskType, EpilogueType)                          \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                       \
      name(const __grid_constant__ ::solder::attention::TensorMap q, const __grid_constant__ ::solder::attention::TensorMap k, \
           const __grid_constant__ ::solder::attention::TensorMap v, ::solder::attention::AttentionShape shape, \
           const __grid_constant__ ScoreType score, MaskType mask, EpilogueType epilogue) {                                           \
    ::solder::attention::attention_body<ConfigType>(q, k, v, shape, score, mask, epilogue);                   \
  }

// The same for an Epilogue of kTmaStore (functors.cuh): the epilogue a __grid_constant__ parameter.
#define SOLDER_ATTENTION_KERNEL_TMA_STORE(name, ConfigType, ScoreType, MaskType, EpilogueType)                          \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                       \
      name(const __grid_constant__ ::solder::attention::TensorMap q, const __grid_constant__ ::solder::attention::TensorMap k, \
           const __grid_constant__ ::solder::attention::TensorMap v, ::solder::attention::AttentionShape shape, \
           const __grid_constant__ ScoreType score, MaskType mask, const __grid_constant__ EpilogueType epilogue) {                                           \
    ::solder::attention::attention_body<ConfigType>(q, k, v, shape, score, mask, epilogue);                   \
  }
