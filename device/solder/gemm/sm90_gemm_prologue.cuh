// The sm_90a GEMM skeleton with an operand-A prologue and side reductions (prologue_config.cuh: the
// meaning of a launch). A separate kernel body beside gemm_body (sm90_gemm.cuh), which is unchanged:
// the same TMA producer, mbarrier ring, persistent tile loop and setmaxnreg split, but A is staged in
// its source type and each consumer warpgroup converts it into a shared-memory tile of the MMA type
// that an SS wgmma reads.
//
// ---- The prologue interface (what the code generator writes) -----------------------------------
//
//   struct Prologue {
//     static constexpr int Sides = 1;          // side reductions (0 … C::SideSlots), f32 each
//     static constexpr bool PreSweep = true;   // operand() reads the sides: sweep A once before
//     __device__ void side_init(float* s) const;                        // s[i] = identity of side i
//     __device__ void side_step(float* s, int row, int k, float x) const; // fold X(row, k) = x in
//     __device__ void side_merge(float* s, const float* other) const;    // combine two partials
//     __device__ float operand(int row, int k, float x, const float* s) const;  // A(row, k)
//     // Optional: operand() is numerator(row, k, x, s) / divisor(row, s) in IEEE f32 arithmetic, the
//     // divisor the same along a row (reading sides only with PreSweep). The kernel then multiplies
//     // by RN(1/divisor) where row_divide.h proves the rounded result is the same, else calls operand().
//     static constexpr bool RowDivisor = true;
//     __device__ float numerator(int row, int k, float x, const float* s) const;
//     __device__ float divisor(int row, const float* s) const;
//   };
//   struct Epilogue {
//     __device__ void operator()(int batch, int row, int col, float acc, const float* s) const;
//     // Optional: the scale depends on the row and its sides only. row_factor() computes it once per
//     // row and tile; scaled() is operator() given it; with Pairs, scaled_pair() stores columns col
//     // and col + 1 (col even) as operator() would, two at once.
//     static constexpr bool RowFactor = true;
//     __device__ float row_factor(int row, const float* s) const;
//     __device__ void scaled(int batch, int row, int col, float acc, float factor) const;
//     static constexpr bool Pairs = true;
//     __device__ void scaled_pair(int batch, int row, int col, float acc0, float acc1, float factor) const;
//   };
//
// side_step is called exactly once per in-bounds (row, k) of the thread's share (k < shape.k; rows
// past M see zero-filled x and are never stored); operand() for k ≥ shape.k is replaced by 0. The
// side values s passed to operand() (PreSweep) and to the epilogue are the row's complete folds.
//
// ---- Schedule ---------------------------------------------------------------------------------
//
// Per tile: (PreSweep, once per tile-row a block meets: with PreSweep each block takes a contiguous
// row-major range of tiles, within one tile-row when there are at least as many blocks as tile-rows,
// so the side values carry over along the row) the producer loads the A
// stripe's K tiles alone into the ring and the consumers fold them into the side state, releasing each
// stage at once; then the producer loads A and B per K tile as in gemm_body. Each consumer warpgroup
// converts its 64 rows of the staged source tile (16-byte shared-memory loads, 8 elements per thread
// and chunk), folding the sides (no PreSweep) and applying operand(), rounds to TA and stores the
// result into one of two converted buffers laid out as a 128-byte-swizzled K-major TMA tile of TA;
// then fence.proxy.async, a warpgroup barrier and the SS wgmma of that K tile. The wait for the
// previous K tile's wgmma follows this one's issue, so the conversion of K tile kt+1 overlaps the
// wgmma of kt (the registers hold only the accumulator; no RS fragment, no C7513 serialisation).
// The sides of a conversion row are spread over the lanes that convert its chunks (merged with
// shuffles); the epilogue's rows read them back from a small shared-memory array.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "prologue_config.cuh"
#include "row_divide.h"
#include "sm90_gemm.cuh"

namespace solder::gemm {

namespace detail {

// The CuTe types of a PrologueConfig: the SS atom, the converted A tile's and B's swizzled layouts.
template <class C>
struct PrologueTypes {
  using TA = typename cute_type<C::TA>::type;
  using TB = typename cute_type<C::TB>::type;
  static constexpr cute::GMMA::Major MajorB = C::BKMajor ? cute::GMMA::Major::K : cute::GMMA::Major::MN;
  using WarpgroupTile = cute::Shape<cute::_64, cute::Int<C::BN>, cute::Int<C::BK>>;
  using MmaOp = decltype(cute::GMMA::ss_op_selector<TA, TB, float, WarpgroupTile, cute::GMMA::Major::K, MajorB>());
  using TiledMma = decltype(cute::make_tiled_mma(MmaOp{}));
  // Converted A: (64 rows, BK, 2 buffers × Consumers); block b·Consumers + c is consumer c's rows of
  // buffer b, each 64 × 128 bytes, row r at r·128 with 16-byte chunk j at j ^ (r % 8).
  using SmemLayoutA = decltype(cute::tile_to_shape(
      cute::GMMA::Layout_K_SW128_Atom<TA>{}, cute::make_shape(cute::_64{}, cute::Int<C::BK>{}, cute::Int<2 * C::Consumers>{}),
      cute::Step<cute::_1, cute::_2, cute::_3>{}));
  using AtomB = cute::conditional_t<C::BKMajor, cute::GMMA::Layout_K_SW128_Atom<TB>, cute::GMMA::Layout_MN_SW128_Atom<TB>>;
  using StepB = cute::conditional_t<C::BKMajor, cute::Step<cute::_1, cute::_2, cute::_3>, cute::Step<cute::_2, cute::_1, cute::_3>>;
  using SmemLayoutB = decltype(cute::tile_to_shape(
      AtomB{}, cute::make_shape(cute::Int<C::BN>{}, cute::Int<C::BK>{}, cute::Int<C::Stages>{}), StepB{}));
  static constexpr int KBlocks = C::BK / int(cute::size<2>(typename TiledMma::AtomShape_MNK{}));
};

}  // namespace detail

namespace detail {

// Shared-memory accesses by 32-bit shared address (the ring's pointer is computed through an integer,
// which loses the state space: generic loads otherwise).
__device__ __forceinline__ uint4 lds128(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(address));
  return v;
}
__device__ __forceinline__ void sts64(uint32_t address, uint32_t a, uint32_t b) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(address), "r"(a), "r"(b));
}
__device__ __forceinline__ void sts128(uint32_t address, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(a), "r"(b), "r"(c), "r"(d));
}
// The consumer warpgroup's own barrier (named barrier 1 + consumer; 0 is __syncthreads).
__device__ __forceinline__ void warpgroup_sync(int consumer) {
  asm volatile("bar.sync %0, 128;" ::"r"(consumer + 1) : "memory");
}

// Eight 16-bit source values (one 16-byte chunk) as f32.
template <Dtype TS>
__device__ __forceinline__ void unpack8(const uint4& v, float (&x)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (TS == Dtype::bf16) {
      x[2 * i] = __uint_as_float(w[i] << 16);
      x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else {
      x[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] & 0xffffu)));
      x[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] >> 16)));
    }
  }
}

// Two f32 values rounded to the MMA type TA (round to nearest even; fp8 saturating, as cute's
// float_e4m3_t / float_e5m2_t conversions), packed: 16 bits for fp8, 32 bits for 16-bit types.
template <Dtype TA>
__device__ __forceinline__ uint32_t round_pair(float a, float b) {
  if constexpr (TA == Dtype::e4m3) {
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  } else if constexpr (TA == Dtype::e5m2) {
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E5M2);
  } else if constexpr (TA == Dtype::bf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Whether the prologue divides by a per-row divisor (RowDivisor, numerator(), divisor(): see the
// interface above).
template <class P, class = void>
struct has_row_divisor : cuda::std::false_type {};
template <class P>
struct has_row_divisor<P, cuda::std::enable_if_t<P::RowDivisor>> : cuda::std::true_type {};

// Whether the epilogue computes its scale once per row (RowFactor: row_factor(), scaled()) and stores
// two columns at once (Pairs: scaled_pair()); see the interface above.
template <class E, class = void>
struct has_row_factor : cuda::std::false_type {};
template <class E>
struct has_row_factor<E, cuda::std::enable_if_t<E::RowFactor>> : cuda::std::true_type {};
template <class E, class = void>
struct has_scaled_pair : cuda::std::false_type {};
template <class E>
struct has_scaled_pair<E, cuda::std::enable_if_t<E::Pairs>> : cuda::std::true_type {};

}  // namespace detail

struct NoSides {};

template <class C, class Prologue, class Epilogue>
__device__ __forceinline__ void gemm_prologue_body(const TensorMap& a, const TensorMap& b, const GemmShape& shape,
                                                   const Prologue& prologue, const Epilogue& epilogue) {
  using T = detail::PrologueTypes<C>;
  using TB = typename T::TB;
  constexpr int NS = Prologue::Sides > 0 ? Prologue::Sides : 1;
  constexpr bool Divide = detail::has_row_divisor<Prologue>::value;
  static_assert(Prologue::Sides <= C::SideSlots, "more side reductions than the config's SideSlots");
  if (shape.m <= 0 || shape.n <= 0) return;

  extern __shared__ unsigned char solder_gemm_smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(solder_gemm_smem) + 1023) & ~uintptr_t(1023));
  unsigned char* ring_a = base;
  TB* ring_b = reinterpret_cast<TB*>(base + C::Stages * C::ABytesPerStage);
  unsigned char* conv = base + C::Stages * C::StageBytes;  // (2 buffers × Consumers) blocks of 64 × BK of TA
  float* side_smem = reinterpret_cast<float*>(conv + 2 * C::ConvBytesPerBuffer);  // (Consumers, 64, NS)
  uint64_t* full = reinterpret_cast<uint64_t*>(side_smem + C::Consumers * 64 * C::SideSlots);
  uint64_t* empty = full + C::Stages;

  // Work units: ClusterN horizontally adjacent tiles of one tile-row, one per block of the cluster
  // (with ClusterN 2 the blocks share the A tile: each loads one of its two K boxes and multicasts it).
  const int tiles_m = ceil_div(shape.m, C::BM);
  const int tiles_n = ceil_div(ceil_div(shape.n, C::BN), C::ClusterN);  // unit columns
  const int total_units = tiles_m * tiles_n;
  const int rank = C::ClusterN > 1 ? static_cast<int>(cute::block_rank_in_cluster()) : 0;
  const int k_tiles = ceil_div(shape.k, C::BK);
  // Work: with PreSweep, block b takes a contiguous range of the tiles in row-major order, so its tiles
  // share their tile-row and the pre-sweep runs once per tile-row a block meets, not once per tile (the
  // side values carry over): with G ≥ R blocks (R tile-rows) each block's range lies in one row (below);
  // otherwise [b·U/G, (b+1)·U/G). Without PreSweep: tiles b, b + G, … in the grouped order of tile_of
  // (config.cuh).
  auto locate = [&](int t, int* m0, int* n0) {
    int tile_m = 0, tile_n = 0;
    if constexpr (Prologue::PreSweep) {
      tile_m = t / tiles_n;
      tile_n = t % tiles_n;
    } else {
      tile_of(t, tiles_m, tiles_n, C::GroupM, &tile_m, &tile_n);
    }
    *m0 = tile_m * C::BM;
    *n0 = (tile_n * C::ClusterN + rank) * C::BN;  // past N for the second block of a ragged pair: zero-filled, not stored
  };
  int unit_begin = static_cast<int>(blockIdx.x) / C::ClusterN, unit_end = total_units, unit_step = static_cast<int>(gridDim.x) / C::ClusterN;
  if constexpr (Prologue::PreSweep) {
    const int blocks = static_cast<int>(gridDim.x) / C::ClusterN, block = static_cast<int>(blockIdx.x) / C::ClusterN;
    unit_step = 1;
    if (blocks >= tiles_m) {
      // At least one block per tile-row: block b serves tile-row r = ⌊b·R/G⌋ (each row ⌊G/R⌋ or ⌈G/R⌉
      // consecutive blocks), an even share of that row's tiles, and sweeps one stripe only.
      const int row = static_cast<int>((long long)block * tiles_m / blocks);
      const int first = static_cast<int>(((long long)row * blocks + tiles_m - 1) / tiles_m);
      const int count = static_cast<int>(((long long)(row + 1) * blocks + tiles_m - 1) / tiles_m) - first;
      const int i = block - first;
      unit_begin = row * tiles_n + static_cast<int>((long long)tiles_n * i / count);
      unit_end = row * tiles_n + static_cast<int>((long long)tiles_n * (i + 1) / count);
    } else {
      unit_begin = static_cast<int>((long long)total_units * block / blocks);
      unit_end = static_cast<int>((long long)total_units * (block + 1) / blocks);
    }
  }
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], C::Consumers * 4 * C::ClusterN);  // every consumer warp of the cluster
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  if constexpr (C::ClusterN > 1) {
    cute::cluster_sync();  // the peer's barriers are initialised before anyone multicasts or arrives
  } else {
    __syncthreads();
  }

  if (warpgroup == 0) {
    // ---- Producer ----
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (thread == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&a) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&b) : "memory");
      int stage = 0;
      uint32_t phase = 0;
      auto next = [&] {
        if (++stage == C::Stages) {
          stage = 0;
          phase ^= 1u;
        }
      };
      auto load_a = [&](int k0, int m0) {
        if constexpr (C::ClusterN > 1) {  // K box `rank`, into both blocks (each full barrier expects the whole tile)
          detail::tma_load_multicast(ring_a + (stage * C::ABoxes + rank) * C::BM * 128, a, k0 + rank * C::ABoxK, m0, 0, &full[stage],
                                     static_cast<uint16_t>((1u << C::ClusterN) - 1));
        } else {
#pragma unroll
          for (int j = 0; j < C::ABoxes; ++j)
            detail::tma_load(ring_a + (stage * C::ABoxes + j) * C::BM * 128, a, k0 + j * C::ABoxK, m0, 0, &full[stage]);
        }
      };
      int swept_m0 = -1;  // the tile-row whose side values the consumers hold
      for (int u = unit_begin; u < unit_end; u += unit_step) {
        int m0, n0;
        locate(u, &m0, &n0);
        if constexpr (Prologue::PreSweep) {
          if (m0 != swept_m0) {  // a new tile-row: its A stripe alone, for the consumers' side reductions
            for (int kt = 0; kt < k_tiles; ++kt) {
              detail::wait_parity(&empty[stage], phase ^ 1u);
              cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                                   &full[stage], static_cast<uint32_t>(C::ABytesPerStage));
              load_a(kt * C::BK, m0);
              next();
            }
          }
          swept_m0 = m0;
        }
        for (int kt = 0; kt < k_tiles; ++kt) {
          detail::wait_parity(&empty[stage], phase ^ 1u);
          cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                               &full[stage], static_cast<uint32_t>(C::StageBytes));
          const int k0 = kt * C::BK;
          load_a(k0, m0);
          TB* sb = ring_b + stage * (C::BN * C::BK);
          if constexpr (C::BKMajor) {
            detail::tma_load(sb, b, k0, n0, 0, &full[stage]);
          } else {
#pragma unroll
            for (int i = 0; i < C::BN / 64; ++i) detail::tma_load(sb + i * 64 * C::BK, b, n0 + 64 * i, k0, 0, &full[stage]);
          }
          next();
        }
      }
    }
  } else {
    // ---- Consumers ----
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int consumer = warpgroup - 1;
    typename T::TiledMma mma;
    cute::Tensor sA = cute::make_tensor(cute::make_smem_ptr(reinterpret_cast<typename T::TA*>(conv)), typename T::SmemLayoutA{});
    cute::Tensor sB = cute::make_tensor(cute::make_smem_ptr(ring_b), typename T::SmemLayoutB{});  // (BN, BK, S)
    auto thr = mma.get_thread_slice(thread);
    cute::Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // descriptors of the converted tiles
    cute::Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    cute::Tensor acc = cute::partition_fragment_C(mma, cute::Shape<cute::_64, cute::Int<C::BN>>{});
    const int warp = thread / 32, lane = thread % 32;
    const int my_row = 16 * warp + lane / 4;  // the accumulator's rows: my_row and my_row + 8 (of the 64)
    const int tile_row = consumer * 64;

    // The conversion's share of this thread: 16-byte source chunk q of rows r0 + RowsPerPass·j,
    // j < Passes, of the warpgroup's 64 rows (8 consecutive lanes read 8 chunks of one row: no bank
    // conflict through the 128-byte swizzle).
    constexpr int SrcChunks = C::BK * dtype_bytes(C::TS) / 16;  // per row: 16 (fp8 MMA) or 8 (16-bit)
    constexpr int RowsPerPass = 128 / SrcChunks;
    constexpr int Passes = 64 / RowsPerPass;
    constexpr int OutBytes = 8 * dtype_bytes(C::TA);  // one chunk's 8 values in TA
    const int q = thread % SrcChunks, r0 = thread / SrcChunks;
    const uint32_t ring_a_s = static_cast<uint32_t>(__cvta_generic_to_shared(ring_a));
    const uint32_t conv_s = static_cast<uint32_t>(__cvta_generic_to_shared(conv));
    // Byte offsets of pass 0 (row r0; the swizzle's row bits r & 7 are the same for every pass, as
    // RowsPerPass is a multiple of 8).
    const uint32_t src_offset = ((q / 8) * C::BM + tile_row + r0) * 128 + (((q % 8) ^ (r0 & 7)) << 4);
    const uint32_t out_byte = q * OutBytes;
    const uint32_t conv_offset = (consumer * 64 + r0) * 128 + ((((out_byte >> 4) ^ (r0 & 7)) << 4) | (out_byte & 15));
    const int kq = q * 8;  // the chunk's first k within the K tile

    int stage = 0;
    uint32_t phase = 0;
    auto advance = [&] {
      if (++stage == C::Stages) {
        stage = 0;
        phase ^= 1u;
      }
    };
    auto release = [&](int s) {  // on every block of the cluster: the peer multicasts into this stage too
      __syncwarp();
      if constexpr (C::ClusterN == 1) {
        if (lane == 0) cuda::ptx::mbarrier_arrive(&empty[s]);
      } else {
        if (lane < C::ClusterN) detail::arrive_remote(&empty[s], static_cast<uint32_t>(lane));
      }
    };
    // Side state of the thread's conversion rows, and of its two accumulator rows (the epilogue's).
    float side[Passes][NS];
    float side_acc[2][NS];
    // With a row divisor: r = RN(1/d) per conversion row, and whether the row may use it.
    float inverse[Passes];
    bool inverse_ok[Passes];
    auto side_reset = [&] {
#pragma unroll
      for (int j = 0; j < Passes; ++j) prologue.side_init(side[j]);
    };
    // Completes the sides of the conversion rows (the SrcChunks lanes of a row hold partial folds) and
    // publishes them for the accumulator rows through side_smem (read_sides), between two warpgroup
    // barriers.
    auto merge_sides = [&] {
#pragma unroll
      for (int j = 0; j < Passes; ++j)
#pragma unroll
        for (int d = 1; d < SrcChunks; d <<= 1) {
          float other[NS];
#pragma unroll
          for (int i = 0; i < NS; ++i) other[i] = __shfl_xor_sync(0xffffffffu, side[j][i], d);
          prologue.side_merge(side[j], other);
        }
      detail::warpgroup_sync(consumer);  // every thread has read the previous values (read_sides)
      if (q == 0) {
#pragma unroll
        for (int j = 0; j < Passes; ++j)
#pragma unroll
          for (int i = 0; i < NS; ++i) side_smem[((consumer * 64) + r0 + RowsPerPass * j) * C::SideSlots + i] = side[j][i];
      }
      detail::warpgroup_sync(consumer);
    };
    auto read_sides = [&] {
#pragma unroll
      for (int slot = 0; slot < 2; ++slot)
#pragma unroll
        for (int i = 0; i < NS; ++i) side_acc[slot][i] = side_smem[((consumer * 64) + my_row + 8 * slot) * C::SideSlots + i];
    };
    // Folds the thread's chunks of the staged source tile (stage s, K tile at k0) into side; Tail: the
    // K tile crosses shape.k.
    auto fold = [&](auto tail, int s, int k0, int m0) {
      constexpr bool Tail = decltype(tail)::value;
#pragma unroll
      for (int j = 0; j < Passes; ++j) {
        float x[8];
        detail::unpack8<C::TS>(detail::lds128(ring_a_s + s * C::ABytesPerStage + src_offset + j * RowsPerPass * 128), x);
        const int row = m0 + tile_row + r0 + RowsPerPass * j;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int k = k0 + kq + e;
          if (!Tail || k < shape.k) prologue.side_step(side[j], row, k, x[e]);
        }
      }
    };
    // Converts the thread's chunks of stage s into converted buffer `buffer` (folding the sides on the
    // way when there is no pre-sweep).
    auto convert = [&](auto tail, int s, int buffer, int k0, int m0) {
      constexpr bool Tail = decltype(tail)::value;
#pragma unroll
      for (int j = 0; j < Passes; ++j) {
        float x[8];
        detail::unpack8<C::TS>(detail::lds128(ring_a_s + s * C::ABytesPerStage + src_offset + j * RowsPerPass * 128), x);
        const int row = m0 + tile_row + r0 + RowsPerPass * j;
        float v[8];
        uint32_t packed[4];
        if constexpr (Divide) {
          // n · RN(1/d), kept where the window proves it rounds as RN(n / d) does (row_divide.h).
          float lo[8], hi[8];
          bool tiny = false;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int k = k0 + kq + e;
            if constexpr (!Prologue::PreSweep && Prologue::Sides > 0)
              if (!Tail || k < shape.k) prologue.side_step(side[j], row, k, x[e]);
            const float qv = prologue.numerator(row, k, x[e], side[j]) * inverse[j];
            row_divide_window(qv, &lo[e], &hi[e]);
            if constexpr (row_divide_tiny(C::TA)) tiny |= fabsf(qv) < 7.52316385e-37f;  // 2⁻¹²⁰
          }
          uint32_t differ = 0;
#pragma unroll
          for (int e = 0; e < 8; e += 2) {
            const uint32_t l = detail::round_pair<C::TA>(lo[e], lo[e + 1]);
            differ |= l ^ detail::round_pair<C::TA>(hi[e], hi[e + 1]);
            if constexpr (dtype_bytes(C::TA) == 1) {
              if (e % 4 == 0) packed[e / 4] = l; else packed[e / 4] |= l << 16;
            } else {
              packed[e / 2] = l;
            }
          }
          if (differ != 0 || tiny || !inverse_ok[j] || (Tail && k0 + kq + 8 > shape.k)) {
            // The IEEE division (the program's operand), as the window could not prove the rounding.
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const int k = k0 + kq + e;
              v[e] = (!Tail || k < shape.k) ? prologue.operand(row, k, x[e], side[j]) : 0.0f;
            }
#pragma unroll
            for (int e = 0; e < 8; e += 2) {
              const uint32_t l = detail::round_pair<C::TA>(v[e], v[e + 1]);
              if constexpr (dtype_bytes(C::TA) == 1) {
                if (e % 4 == 0) packed[e / 4] = l; else packed[e / 4] |= l << 16;
              } else {
                packed[e / 2] = l;
              }
            }
          }
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int k = k0 + kq + e;
            v[e] = 0.0f;
            if (!Tail || k < shape.k) {
              if constexpr (!Prologue::PreSweep && Prologue::Sides > 0) prologue.side_step(side[j], row, k, x[e]);
              v[e] = prologue.operand(row, k, x[e], side[j]);
            }
          }
#pragma unroll
          for (int e = 0; e < 8; e += 2) {
            const uint32_t l = detail::round_pair<C::TA>(v[e], v[e + 1]);
            if constexpr (dtype_bytes(C::TA) == 1) {
              if (e % 4 == 0) packed[e / 4] = l; else packed[e / 4] |= l << 16;
            } else {
              packed[e / 2] = l;
            }
          }
        }
        const uint32_t out = conv_s + buffer * C::ConvBytesPerBuffer + conv_offset + j * RowsPerPass * 128;
        if constexpr (OutBytes == 8) {
          detail::sts64(out, packed[0], packed[1]);
        } else {
          detail::sts128(out, packed[0], packed[1], packed[2], packed[3]);
        }
      }
    };
    auto prepare_divisors = [&](int m0) {
      if constexpr (Divide) {
#pragma unroll
        for (int j = 0; j < Passes; ++j) {
          const float d = prologue.divisor(m0 + tile_row + r0 + RowsPerPass * j, side[j]);
          inverse[j] = __frcp_rn(d);
          inverse_ok[j] = row_divisor_ok(d, inverse[j]);
        }
      }
    };

    int swept_m0 = -1;
    int buffer = 0;
    for (int u = unit_begin; u < unit_end; u += unit_step) {
      int m0, n0;
      locate(u, &m0, &n0);
      if constexpr (Prologue::PreSweep) {
        if (m0 != swept_m0) {  // a new tile-row: sweep its A stripe (the producer loads it alone)
          side_reset();
          for (int kt = 0; kt < k_tiles; ++kt) {
            detail::wait_parity(&full[stage], phase);
            if (kt * C::BK + C::BK <= shape.k) fold(cuda::std::false_type{}, stage, kt * C::BK, m0);
            else fold(cuda::std::true_type{}, stage, kt * C::BK, m0);
            release(stage);
            advance();
          }
          merge_sides();
          prepare_divisors(m0);
          swept_m0 = m0;
        }
      } else {
        side_reset();
        prepare_divisors(m0);  // a divisor that reads no side values (gemm_prologue_writer checks)
      }
      cute::clear(acc);
      // Per K tile: convert the staged source tile into a converted buffer (TA, 128-byte swizzled like
      // a TMA tile), make it visible to the async proxy, then the SS wgmma. The wait for the previous
      // K tile's wgmma (wait<1>) comes after this one's issue: converting K tile kt+1 overlaps the
      // wgmma of kt, and the buffer it writes (that of kt-1) is free by then.
      int previous = 0;
      for (int kt = 0; kt < k_tiles; ++kt) {
        detail::wait_parity(&full[stage], phase);
        if (kt * C::BK + C::BK <= shape.k) convert(cuda::std::false_type{}, stage, buffer, kt * C::BK, m0);
        else convert(cuda::std::true_type{}, stage, buffer, kt * C::BK, m0);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the converted tile, for wgmma
        detail::warpgroup_sync(consumer);
        cute::warpgroup_fence_operand(acc);
        cute::warpgroup_arrive();
#pragma unroll
        for (int kb = 0; kb < T::KBlocks; ++kb)
          cute::gemm(mma, tCrA(cute::_, cute::_, kb, buffer * C::Consumers + consumer), tCrB(cute::_, cute::_, kb, stage), acc);
        cute::warpgroup_commit_batch();
        cute::warpgroup_wait<1>();  // the previous K tile's wgmma is done: its stage and buffer are free
        cute::warpgroup_fence_operand(acc);
        if (kt > 0) release(previous);
        previous = stage;
        buffer ^= 1;
        advance();
      }
      cute::warpgroup_wait<0>();
      cute::warpgroup_fence_operand(acc);
      if (k_tiles > 0) release(previous);
      if constexpr (!Prologue::PreSweep) merge_sides();
      read_sides();

      // ---- Epilogue (the m64nBNk accumulator layout, as gemm_body) ----
      const int row_base = m0 + tile_row + my_row;
      const int col_base = n0 + 2 * (lane % 4);
      if constexpr (detail::has_row_factor<Epilogue>::value) {
        // The scale once per row; pairs of columns stored together where the epilogue can.
        float factor[2];
#pragma unroll
        for (int slot = 0; slot < 2; ++slot) factor[slot] = epilogue.row_factor(row_base + 8 * slot, side_acc[slot]);
#pragma unroll
        for (int i = 0; i < C::BN / 2; i += 2) {
          const int slot = (i / 2) % 2;
          const int row = row_base + 8 * slot;
          const int col = col_base + 8 * (i / 4);
          if (row < shape.m) {
            if constexpr (detail::has_scaled_pair<Epilogue>::value) {
              if (col + 1 < shape.n) {
                epilogue.scaled_pair(0, row, col, acc(i), acc(i + 1), factor[slot]);
              } else if (col < shape.n) {
                epilogue.scaled(0, row, col, acc(i), factor[slot]);
              }
            } else {
              if (col < shape.n) epilogue.scaled(0, row, col, acc(i), factor[slot]);
              if (col + 1 < shape.n) epilogue.scaled(0, row, col + 1, acc(i + 1), factor[slot]);
            }
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < C::BN / 2; i += 2) {
          const int slot = (i / 2) % 2;
          const int row = row_base + 8 * slot;
          const int col = col_base + 8 * (i / 4);
          if (row < shape.m) {
            if (col < shape.n) epilogue(0, row, col, acc(i), side_acc[slot]);
            if (col + 1 < shape.n) epilogue(0, row, col + 1, acc(i + 1), side_acc[slot]);
          }
        }
      }
    }
  }
  // No block leaves while its peer may still multicast into it or arrive on its barriers.
  if constexpr (C::ClusterN > 1) cute::cluster_sync();
}

template <class C, class Prologue, class Epilogue>
__global__ void __launch_bounds__(C::Threads, 1)
    gemm_prologue_kernel(const __grid_constant__ TensorMap a, const __grid_constant__ TensorMap b, GemmShape shape,
                         Prologue prologue, Epilogue epilogue) {
  gemm_prologue_body<C>(a, b, shape, prologue, epilogue);
}

}  // namespace solder::gemm

// An unmangled kernel for NVRTC. Parameters: a, b, shape, prologue, epilogue.
#define SOLDER_GEMM_PROLOGUE_KERNEL(name, ConfigType, PrologueType, EpilogueType)                            \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                      \
      name(const __grid_constant__ ::solder::gemm::TensorMap a, const __grid_constant__ ::solder::gemm::TensorMap b, \
           ::solder::gemm::GemmShape shape, PrologueType prologue, EpilogueType epilogue) {                  \
    ::solder::gemm::gemm_prologue_body<ConfigType>(a, b, shape, prologue, epilogue);                         \
  }
