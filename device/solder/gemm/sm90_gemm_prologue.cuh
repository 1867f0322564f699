// The sm_90a GEMM skeleton with an operand-A prologue and side reductions (prologue_config.cuh: the
// meaning of a launch). A separate kernel body beside gemm_body (sm90_gemm.cuh), which is unchanged:
// the same TMA loads, mbarrier rings and persistent tile loop, but A is staged in its source type and
// a converter warpgroup turns it into shared-memory tiles of the MMA type that the consumers' SS
// wgmma reads.
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
// ---- Schedules (PrologueConfig::ConverterWarpgroup) -------------------------------------------
//
// Inline (false, the default; gemm_prologue_body_inline). Per tile: (PreSweep, once per tile-row a
// block meets: with PreSweep each block takes a contiguous row-major range of tiles, within one
// tile-row when there are at least as many blocks as tile-rows, so the side values carry over along
// the row) the producer loads the A stripe's K tiles alone into the ring and the consumers fold them
// into the side state, releasing each stage at once; then the producer loads A and B per K tile as in
// gemm_body. Each consumer warpgroup converts its 64 rows of the staged source tile (16-byte
// shared-memory loads, 8 elements per thread and chunk), folding the sides (no PreSweep) and applying
// operand(), rounds to TA (round_pack) and stores the result into one of two converted buffers laid
// out as a 128-byte-swizzled K-major TMA tile of TA; then fence.proxy.async, a warpgroup barrier and
// the SS wgmma of that K tile. The wait for the previous K tile's wgmma follows this one's issue, so
// the conversion of K tile kt+1 overlaps the wgmma of kt. The sides of a conversion row are spread
// over the lanes that convert its chunks (merged with shuffles); the epilogue's rows read them back
// from a small shared-memory array.
//
// Converter warpgroup (true; gemm_prologue_body_converter). No producer warpgroup (a fourth one would
// cap every thread at 128 registers, below a 64 × 256 accumulator: ptxas compiles all roles at the
// launch's count, setmaxnreg or not):
// - The converter warpgroup (warpgroup 0) owns A's source ring: its thread 0 issues A's TMA loads,
//   Stages ahead of its own reads (a stage is reused once the converter warps, of both blocks with
//   ClusterN 2, have read it), the pre-sweep stripes included. Per K tile thread r converts row r of
//   the staged source tile (BM 64: two threads per row, half the chunks each), folding the sides (no
//   PreSweep) and applying operand(), rounds to TA (round_pack) and writes 16-byte chunks into one of
//   two converted buffers laid out as the 128-byte-swizzled K-major tile the GMMA descriptor expects;
//   eight consecutive lanes touch eight rows at one logical chunk, which the swizzle spreads over all
//   32 banks (loads and stores conflict-free). fence.proxy.async, then one arrival per thread on the
//   buffer's full barrier. After a tile's last K tile it publishes the tile's side values to shared
//   memory (its own barrier pair: the consumers have read the previous tile's).
// - The consumer warpgroups (BM / 64, 64 rows each) own B's ring: the first one's thread 0 issues
//   B's loads, Stages ahead. Per K tile: wait for the converted buffer and B's stage, SS wgmma; the
//   wait for the previous K tile's wgmma follows this one's issue, then that K tile's B stage and
//   converted buffer go back.
//   Measured 2026-11-26 (bench/NOTES.md, "converter warpgroup"): correct, but 2-3x slower than the
//   inline schedule; one likely cause is that with two converted buffers the conversion of K tile
//   kt+1 waits for the consumers to issue kt's wgmma and retire kt-1's (two hand-overs per K tile).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "prologue_config.cuh"
#include "row_divide.h"
#include "sm90_gemm.cuh"

namespace solder::gemm {

namespace detail {

// The element and wgmma instruction types of a PrologueConfig, the converted A tiles' and B's layouts.
template <class C>
struct PrologueTypes : BTiles<C, typename cute_type<C::TB>::type> {
  using TA = typename cute_type<C::TA>::type;
  using TB = typename cute_type<C::TB>::type;
  static constexpr cute::SM90::GMMA::Major MajorB = C::BKMajor ? cute::SM90::GMMA::Major::K : cute::SM90::GMMA::Major::MN;
  using WarpgroupTile = cute::Shape<cute::_64, cute::Int<C::BN>, cute::Int<C::BK>>;
  using MmaOp = decltype(cute::SM90::GMMA::ss_op_selector<TA, TB, float, WarpgroupTile, cute::SM90::GMMA::Major::K, MajorB>());
  // Converted A: (ConvStages buffers × Consumers) blocks of 64 rows × 128 bytes (BK of TA), block
  // b·Consumers + c consumer c's rows of buffer b, row r at r·128 with 16-byte chunk j at j ^ (r % 8).
  // B: Stages tiles (BTiles, sm90_gemm.cuh). Descriptors by index arithmetic (wgmma.cuh).
  static constexpr int KBlocks = C::BK * static_cast<int>(sizeof(TA)) / 32;  // 32-byte k-blocks: 16 of 16 bits, 32 of 8
  // k-block kb of consumer c's rows of converted buffer b, from its base descriptor (B's: BTiles).
  __device__ static __forceinline__ uint32_t a_offset(int buffer_block, int kb) {
    return static_cast<uint32_t>(buffer_block * 64 * 128) + wgmma::k_major_block(64, kb);
  }
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
__device__ __forceinline__ float lds32f(uint32_t address) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(address));
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

namespace detail {

// Arrives `count` times on a barrier of this block / of block `rank` of the cluster (default .release
// semantics at CTA scope, as arrive_remote).
__device__ __forceinline__ void arrive_count(uint64_t* bar, uint32_t count) {
  const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(local), "r"(count) : "memory");
}
__device__ __forceinline__ void arrive_remote_count(uint64_t* bar, uint32_t rank, uint32_t count) {
  const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.shared::cluster.b64 _, [remote], %2;\n\t}" ::"r"(local),
      "r"(rank), "r"(count)
      : "memory");
}
// A warp's release of a ring stage: `count` arrivals on the stage's empty barrier of every block of
// the cluster (the peer multicasts into this stage too).
template <int ClusterN>
__device__ __forceinline__ void release_stage(uint64_t* bar, int lane, uint32_t count) {
  __syncwarp();
  if constexpr (ClusterN == 1) {
    if (lane == 0) arrive_count(bar, count);
  } else {
    if (lane < ClusterN) arrive_remote_count(bar, static_cast<uint32_t>(lane), count);
  }
}

// N f32 values rounded to TA (round_pair) and packed into N · bytes(TA) / 4 words, element 0 in the
// lowest bits: the 16 bytes one converted chunk holds when N · bytes(TA) = 16.
template <Dtype TA, int N>
__device__ __forceinline__ void round_pack(const float (&v)[N], uint32_t (&packed)[N * dtype_bytes(TA) / 4]) {
#pragma unroll
  for (int e = 0; e < N; e += 2) {
    const uint32_t l = round_pair<TA>(v[e], v[e + 1]);
    if constexpr (dtype_bytes(TA) == 1) {
      if (e % 4 == 0) packed[e / 4] = l;
      else packed[e / 4] |= l << 16;
    } else {
      packed[e / 2] = l;
    }
  }
}

}  // namespace detail

struct NoSides {};

// ---- The inline schedule (ConverterWarpgroup false, the default) ----
namespace detail {

// The epilogue of one consumer's m64nBNk accumulator (rows row_base and row_base + 8, columns col_base +
// 8j and + 1), shared by both prologue schedules: the row factor once per row and pairs of columns
// stored together where the epilogue can, else one element at a time with its side reductions.
template <class C, class Acc, int NS, class Epilogue>
__device__ __forceinline__ void store_prologue_tile(Acc& acc, const float (&side_acc)[2][NS], int row_base, int col_base,
                                                    const GemmShape& shape, const Epilogue& epilogue) {
  if constexpr (has_row_factor<Epilogue>::value) {
    float factor[2];
#pragma unroll
    for (int slot = 0; slot < 2; ++slot) factor[slot] = epilogue.row_factor(row_base + 8 * slot, side_acc[slot]);
#pragma unroll
    for (int i = 0; i < C::BN / 2; i += 2) {
      const int slot = (i / 2) % 2;
      const int row = row_base + 8 * slot;
      const int col = col_base + 8 * (i / 4);
      if (row < shape.m) {
        if constexpr (has_scaled_pair<Epilogue>::value) {
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

// Which work units block blockIdx.x takes, and where a unit's tile is. Work units: ClusterN horizontally
// adjacent tiles of one tile-row, one per block of the cluster (with ClusterN 2 the blocks share the A
// tile: each loads one of its two K boxes and multicasts it). With PreSweep, block b takes a contiguous
// range of the tiles in row-major order, so its tiles share their tile-row and the pre-sweep runs once
// per tile-row a block meets, not once per tile (the side values carry over): with G ≥ R blocks (R
// tile-rows) each block's range lies in one row (below); otherwise [b·U/G, (b+1)·U/G). Without PreSweep:
// tiles b, b + G, … in the grouped order of tile_of (config.cuh).
template <class C, bool PreSweep>
struct PrologueWork {
  int tiles_m, tiles_n, total_units, rank, k_tiles;
  int begin, end, step;  // units begin, begin + step, … below end

  __device__ __forceinline__ explicit PrologueWork(const GemmShape& shape) {
    tiles_m = ceil_div(shape.m, C::BM);
    tiles_n = ceil_div(ceil_div(shape.n, C::BN), C::ClusterN);  // unit columns
    total_units = tiles_m * tiles_n;
    rank = C::ClusterN > 1 ? static_cast<int>(cute::block_rank_in_cluster()) : 0;
    k_tiles = ceil_div(shape.k, C::BK);
    const int blocks = static_cast<int>(gridDim.x) / C::ClusterN, block = static_cast<int>(blockIdx.x) / C::ClusterN;
    begin = block;
    end = total_units;
    step = blocks;
    if constexpr (PreSweep) {
      step = 1;
      if (blocks >= tiles_m) {
        // At least one block per tile-row: block b serves tile-row r = ⌊b·R/G⌋ (each row ⌊G/R⌋ or ⌈G/R⌉
        // consecutive blocks), an even share of that row's tiles, and sweeps one stripe only.
        const int row = static_cast<int>((long long)block * tiles_m / blocks);
        const int first = static_cast<int>(((long long)row * blocks + tiles_m - 1) / tiles_m);
        const int count = static_cast<int>(((long long)(row + 1) * blocks + tiles_m - 1) / tiles_m) - first;
        const int i = block - first;
        begin = row * tiles_n + static_cast<int>((long long)tiles_n * i / count);
        end = row * tiles_n + static_cast<int>((long long)tiles_n * (i + 1) / count);
      } else {
        begin = static_cast<int>((long long)total_units * block / blocks);
        end = static_cast<int>((long long)total_units * (block + 1) / blocks);
      }
    }
  }

  // The first row and column of unit t's tile in this block.
  __device__ __forceinline__ void locate(int t, int* m0, int* n0) const {
    int tile_m = 0, tile_n = 0;
    if constexpr (PreSweep) {
      tile_m = t / tiles_n;
      tile_n = t % tiles_n;
    } else {
      tile_of(t, tiles_m, tiles_n, C::GroupM, &tile_m, &tile_n);
    }
    *m0 = tile_m * C::BM;
    *n0 = (tile_n * C::ClusterN + rank) * C::BN;  // past N for the second block of a ragged pair: zero-filled, not stored
  }
};

}  // namespace detail

template <class C, class Prologue, class Epilogue>
__device__ __forceinline__ void gemm_prologue_body_inline(const TensorMap& a, const TensorMap& b, const GemmShape& shape,
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

  const detail::PrologueWork<C, Prologue::PreSweep> work(shape);  // this block's units and their tiles
  const int rank = work.rank, k_tiles = work.k_tiles;
  const int unit_begin = work.begin, unit_end = work.end, unit_step = work.step;
  auto locate = [&](int t, int* m0, int* n0) { work.locate(t, m0, n0); };
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
    const uint64_t a_desc = wgmma::k_major(wgmma::shared_address(conv));  // the converted tiles
    const uint64_t b_desc = T::b_descriptor(ring_b);
    wgmma::Fragment<float, C::BN / 2> acc;  // the m64nBNk accumulator, in the instruction's register order
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
        uint32_t packed[8 * dtype_bytes(C::TA) / 4];
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
          uint32_t upper[8 * dtype_bytes(C::TA) / 4];
          detail::round_pack<C::TA>(lo, packed);
          detail::round_pack<C::TA>(hi, upper);
          uint32_t differ = 0;
#pragma unroll
          for (int w = 0; w < 8 * dtype_bytes(C::TA) / 4; ++w) differ |= packed[w] ^ upper[w];
          if (differ != 0 || tiny || !inverse_ok[j] || (Tail && k0 + kq + 8 > shape.k)) {
            // The IEEE division (the program's operand), as the window could not prove the rounding.
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const int k = k0 + kq + e;
              v[e] = (!Tail || k < shape.k) ? prologue.operand(row, k, x[e], side[j]) : 0.0f;
            }
            detail::round_pack<C::TA>(v, packed);
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
          detail::round_pack<C::TA>(v, packed);
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
      wgmma::clear(acc);
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
        wgmma::fence(acc);
        wgmma::arrive();
#pragma unroll
        for (int kb = 0; kb < T::KBlocks; ++kb)
          wgmma::mma_ss_columns<typename T::MmaOp>(wgmma::advance(a_desc, T::a_offset(buffer * C::Consumers + consumer, kb)),
                                                   wgmma::advance(b_desc, T::b_offset(stage, kb)), acc, true, T::b_column);
        wgmma::commit();
        wgmma::wait<1>();  // the previous K tile's wgmma is done: its stage and buffer are free
        wgmma::fence(acc);
        if (kt > 0) release(previous);
        previous = stage;
        buffer ^= 1;
        advance();
      }
      wgmma::wait<0>();
      wgmma::fence(acc);
      if (k_tiles > 0) release(previous);
      if constexpr (!Prologue::PreSweep) merge_sides();
      read_sides();

      // ---- Epilogue (the m64nBNk accumulator layout, as gemm_body) ----
      detail::store_prologue_tile<C>(acc, side_acc, m0 + tile_row + my_row, n0 + 2 * (lane % 4), shape, epilogue);
    }
  }
  // No block leaves while its peer may still multicast into it or arrive on its barriers.
  if constexpr (C::ClusterN > 1) cute::cluster_sync();
}

// ---- The converter-warpgroup schedule (ConverterWarpgroup true) ----
template <class C, class Prologue, class Epilogue>
__device__ __forceinline__ void gemm_prologue_body_converter(const TensorMap& a, const TensorMap& b, const GemmShape& shape,
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
  unsigned char* conv = base + C::Stages * C::StageBytes;  // (ConvStages × Consumers) blocks of 64 × BK of TA
  float* side_smem = reinterpret_cast<float*>(conv + C::ConvStages * C::ConvBytesPerBuffer);  // (BM, SideSlots)
  uint64_t* a_full = reinterpret_cast<uint64_t*>(side_smem + C::BM * C::SideSlots);
  uint64_t* a_empty = a_full + C::Stages;
  uint64_t* b_full = a_empty + C::Stages;
  uint64_t* b_empty = b_full + C::Stages;
  uint64_t* conv_full = b_empty + C::Stages;
  uint64_t* conv_empty = conv_full + C::ConvStages;
  uint64_t* sides_full = conv_empty + C::ConvStages;
  uint64_t* sides_empty = sides_full + 1;

  const detail::PrologueWork<C, Prologue::PreSweep> work(shape);  // this block's units and their tiles
  const int rank = work.rank, k_tiles = work.k_tiles;
  const int unit_begin = work.begin, unit_end = work.end, unit_step = work.step;
  auto locate = [&](int t, int* m0, int* n0) { work.locate(t, m0, n0); };
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;
  const int lane = thread % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&a_full[s], 1);
      cuda::ptx::mbarrier_init(&a_empty[s], 4 * C::ClusterN);  // every converter warp of the cluster (A is multicast)
      cuda::ptx::mbarrier_init(&b_full[s], 1);
      cuda::ptx::mbarrier_init(&b_empty[s], 4 * C::Consumers);  // every consumer warp, its wgmma done
    }
    for (int c = 0; c < C::ConvStages; ++c) {
      cuda::ptx::mbarrier_init(&conv_full[c], 128);                // every converter thread, after its fence
      cuda::ptx::mbarrier_init(&conv_empty[c], 4 * C::Consumers);  // every consumer warp, its wgmma done
    }
    cuda::ptx::mbarrier_init(sides_full, 128);
    cuda::ptx::mbarrier_init(sides_empty, 4 * C::Consumers);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  if constexpr (C::ClusterN > 1) {
    cute::cluster_sync();  // the peer's barriers are initialised before anyone multicasts or arrives
  } else {
    __syncthreads();
  }

  if (warpgroup == 0) {
    // ---- Converter (and A's loads) ----
    // The thread's share of a K tile: row `crow` of the BM rows, all of its 16-byte output chunks
    // (TPR 1) or half of them (TPR 2, BM 64: lanes 2r and 2r + 1 share row r). Eight consecutive lanes
    // read and write eight (four) rows at the same logical chunk, which the 128-byte swizzle (chunk j
    // of row r at j ^ (r % 8)) spreads over all 32 banks; the two halves of a row start at opposite
    // ends of their chunk ranges, so they do not collide either.
    constexpr int TPR = 128 / C::BM;
    constexpr int OutChunks = 8 / TPR;                   // 16-byte chunks of the converted row per thread
    constexpr int Elems = 16 / dtype_bytes(C::TA);       // elements per converted chunk: 16 (fp8) or 8
    constexpr int SrcPer = Elems * dtype_bytes(C::TS) / 16;  // 16-byte source chunks per converted chunk
    const int crow = thread / TPR, half = thread % TPR;
    const uint32_t ring_a_s = static_cast<uint32_t>(__cvta_generic_to_shared(ring_a));
    const uint32_t conv_s = static_cast<uint32_t>(__cvta_generic_to_shared(conv));
    const uint32_t src_row = crow * 128, swz = crow & 7;
    auto chunk_of = [&](int i) { return half * OutChunks + (i + 2 * half) % OutChunks; };
    auto src_address = [&](int s, int sc) {  // source chunk sc (box sc / 8, chunk sc % 8) of the row
      return ring_a_s + s * C::ABytesPerStage + (sc / 8) * C::BM * 128 + src_row + (((sc % 8) ^ swz) << 4);
    };

    float side[NS];
    float inverse = 1.0f;
    bool inverse_ok = false;
    auto merge_halves = [&] {
      if constexpr (TPR == 2) {
        float other[NS];
#pragma unroll
        for (int i = 0; i < NS; ++i) other[i] = __shfl_xor_sync(0xffffffffu, side[i], 1);
        prologue.side_merge(side, other);
      }
    };
    auto prepare_divisor = [&](int m0) {
      if constexpr (Divide) {
        const float d = prologue.divisor(m0 + crow, side);
        inverse = __frcp_rn(d);
        inverse_ok = row_divisor_ok(d, inverse);
      }
    };
    // Folds the thread's chunks of staged tile s (K tile at k0) into side; Tail: the tile crosses shape.k.
    auto fold = [&](auto tail, int s, int k0, int m0) {
      constexpr bool Tail = decltype(tail)::value;
      const int row = m0 + crow;
#pragma unroll
      for (int i = 0; i < OutChunks; ++i) {
        const int o = chunk_of(i);
#pragma unroll
        for (int j = 0; j < SrcPer; ++j) {
          float x[8];
          detail::unpack8<C::TS>(detail::lds128(src_address(s, o * SrcPer + j)), x);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int k = k0 + o * Elems + 8 * j + e;
            if (!Tail || k < shape.k) prologue.side_step(side, row, k, x[e]);
          }
        }
      }
    };
    // Converts the thread's chunks of staged tile s into converted buffer cb, folding the sides on the
    // way when there is no pre-sweep; one 16-byte store per converted chunk.
    auto convert = [&](auto tail, int s, int cb, int k0, int m0) {
      constexpr bool Tail = decltype(tail)::value;
      const int row = m0 + crow;
#pragma unroll
      for (int i = 0; i < OutChunks; ++i) {
        const int o = chunk_of(i);
        float x[Elems];
#pragma unroll
        for (int j = 0; j < SrcPer; ++j) {
          float part[8];
          detail::unpack8<C::TS>(detail::lds128(src_address(s, o * SrcPer + j)), part);
#pragma unroll
          for (int e = 0; e < 8; ++e) x[8 * j + e] = part[e];
        }
        const int kc = k0 + o * Elems;  // the chunk's first k
        float v[Elems];
        uint32_t packed[4];
        if constexpr (Divide) {
          // n · RN(1/d), kept where the window proves it rounds as RN(n / d) does (row_divide.h).
          float lo[Elems], hi[Elems];
          bool tiny = false;
#pragma unroll
          for (int e = 0; e < Elems; ++e) {
            const int k = kc + e;
            if constexpr (!Prologue::PreSweep && Prologue::Sides > 0)
              if (!Tail || k < shape.k) prologue.side_step(side, row, k, x[e]);
            const float qv = prologue.numerator(row, k, x[e], side) * inverse;
            row_divide_window(qv, &lo[e], &hi[e]);
            if constexpr (row_divide_tiny(C::TA)) tiny |= fabsf(qv) < 7.52316385e-37f;  // 2⁻¹²⁰
          }
          uint32_t upper[4];
          detail::round_pack<C::TA>(lo, packed);
          detail::round_pack<C::TA>(hi, upper);
          const uint32_t differ = (packed[0] ^ upper[0]) | (packed[1] ^ upper[1]) | (packed[2] ^ upper[2]) | (packed[3] ^ upper[3]);
          if (differ != 0 || tiny || !inverse_ok || (Tail && kc + Elems > shape.k)) {
            // The IEEE division (the program's operand), as the window could not prove the rounding.
#pragma unroll
            for (int e = 0; e < Elems; ++e) {
              const int k = kc + e;
              v[e] = (!Tail || k < shape.k) ? prologue.operand(row, k, x[e], side) : 0.0f;
            }
            detail::round_pack<C::TA>(v, packed);
          }
        } else {
#pragma unroll
          for (int e = 0; e < Elems; ++e) {
            const int k = kc + e;
            v[e] = 0.0f;
            if (!Tail || k < shape.k) {
              if constexpr (!Prologue::PreSweep && Prologue::Sides > 0) prologue.side_step(side, row, k, x[e]);
              v[e] = prologue.operand(row, k, x[e], side);
            }
          }
          detail::round_pack<C::TA>(v, packed);
        }
        detail::sts128(conv_s + cb * C::ConvBytesPerBuffer + src_row + ((static_cast<uint32_t>(o) ^ swz) << 4), packed[0], packed[1],
                       packed[2], packed[3]);
      }
    };

    // A's loads, issued by thread 0 in the order the converter reads them (each new tile-row's pre-sweep
    // stripe with PreSweep, then each tile's K tiles), up to Stages ahead: the stage a load reuses was
    // read by this warpgroup (and, with ClusterN 2, the peer's) one K tile earlier.
    int issue_u = unit_begin, issue_kt = 0, issue_swept = -1, issued = 0;
    bool issue_started = false, issue_pre = false;
    auto load_next_a = [&]() {
      if (k_tiles == 0 || issue_u >= unit_end) return;
      int m0, n0;
      locate(issue_u, &m0, &n0);
      if (!issue_started) {
        issue_started = true;
        issue_pre = Prologue::PreSweep && m0 != issue_swept;
        issue_swept = m0;
      }
      const int s = issued % C::Stages;
      detail::wait_parity(&a_empty[s], ((issued / C::Stages) & 1) ^ 1u);
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &a_full[s],
                                           static_cast<uint32_t>(C::ABytesPerStage));
      const int k0 = issue_kt * C::BK;
      if constexpr (C::ClusterN > 1) {  // K box `rank`, into both blocks (each full barrier expects the whole tile)
        detail::tma_load_multicast(ring_a + (s * C::ABoxes + rank) * C::BM * 128, a, k0 + rank * C::ABoxK, m0, 0, &a_full[s],
                                   static_cast<uint16_t>((1u << C::ClusterN) - 1));
      } else {
#pragma unroll
        for (int j = 0; j < C::ABoxes; ++j)
          detail::tma_load(ring_a + (s * C::ABoxes + j) * C::BM * 128, a, k0 + j * C::ABoxK, m0, 0, &a_full[s]);
      }
      ++issued;
      if (++issue_kt == k_tiles) {
        issue_kt = 0;
        if (issue_pre) {
          issue_pre = false;  // the same unit's K tiles follow its tile-row's sweep
        } else {
          issue_u += unit_step;
          issue_started = false;
        }
      }
    };
    if (thread == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&a) : "memory");
      for (int i = 0; i < C::Stages; ++i) load_next_a();
    }

    int stage = 0, cb = 0, tiles_done = 0, consumed = 0;
    uint32_t phase = 0, cphase = 0;
    // Takes staged A tile `consumed` (waits for it) after topping the ring up to Stages loads ahead.
    auto take = [&] {
      if (thread == 0)
        while (issued < consumed + C::Stages && issue_u < unit_end && k_tiles > 0) load_next_a();
      detail::wait_parity(&a_full[stage], phase);
    };
    auto advance = [&] {  // stage `consumed` is read: release it (on every block of the cluster)
      detail::release_stage<C::ClusterN>(&a_empty[stage], lane, 1u);
      ++consumed;
      if (++stage == C::Stages) {
        stage = 0;
        phase ^= 1u;
      }
    };
    int swept_m0 = -1;
    for (int u = unit_begin; u < unit_end; u += unit_step) {
      int m0, n0;
      locate(u, &m0, &n0);
      if constexpr (Prologue::PreSweep) {
        if (m0 != swept_m0) {  // a new tile-row: sweep its A stripe
          prologue.side_init(side);
          for (int kt = 0; kt < k_tiles; ++kt) {
            take();
            if (kt * C::BK + C::BK <= shape.k) fold(cuda::std::false_type{}, stage, kt * C::BK, m0);
            else fold(cuda::std::true_type{}, stage, kt * C::BK, m0);
            advance();
          }
          merge_halves();
          prepare_divisor(m0);
          swept_m0 = m0;
        }
      } else {
        prologue.side_init(side);
        prepare_divisor(m0);  // a divisor that reads no side values (gemm_prologue_writer checks)
      }
      for (int kt = 0; kt < k_tiles; ++kt) {
        take();
        detail::wait_parity(&conv_empty[cb], cphase ^ 1u);
        if (kt * C::BK + C::BK <= shape.k) convert(cuda::std::false_type{}, stage, cb, kt * C::BK, m0);
        else convert(cuda::std::true_type{}, stage, cb, kt * C::BK, m0);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the converted tile, for wgmma
        cuda::ptx::mbarrier_arrive(&conv_full[cb]);
        advance();
        if (++cb == C::ConvStages) {
          cb = 0;
          cphase ^= 1u;
        }
      }
      if constexpr (!Prologue::PreSweep) merge_halves();
      // The tile's side values, for the consumers' epilogue (once they have read the previous tile's).
      detail::wait_parity(sides_empty, (tiles_done & 1) ^ 1u);
      if (half == 0) {
#pragma unroll
        for (int i = 0; i < NS; ++i) side_smem[crow * C::SideSlots + i] = side[i];
      }
      cuda::ptx::mbarrier_arrive(sides_full);
      ++tiles_done;
    }
  } else {
    // ---- Consumers (and B's loads) ----
    const int consumer = warpgroup - 1;
    const uint64_t a_desc = wgmma::k_major(wgmma::shared_address(conv));  // the converted tiles
    const uint64_t b_desc = T::b_descriptor(ring_b);
    wgmma::Fragment<float, C::BN / 2> acc;  // the m64nBNk accumulator, in the instruction's register order
    const int warp = thread / 32;
    const int my_row = 16 * warp + lane / 4;  // the accumulator's rows: my_row and my_row + 8 (of the 64)
    const int tile_row = consumer * 64;
    float side_acc[2][NS];
    const uint32_t sides_s = static_cast<uint32_t>(__cvta_generic_to_shared(side_smem)) + (tile_row + my_row) * C::SideSlots * 4;

    // B's loads, issued by the first consumer's thread 0 in the consumers' order (each tile's K tiles),
    // Stages ahead: the stage a load reuses is the one both consumers released last.
    const bool loads_b = consumer == 0 && thread == 0;
    int issue_u = unit_begin, issue_kt = 0, issued = 0;
    auto load_next_b = [&]() {
      if (k_tiles == 0 || issue_u >= unit_end) return;
      int m0, n0;
      locate(issue_u, &m0, &n0);
      const int s = issued % C::Stages;
      detail::wait_parity(&b_empty[s], ((issued / C::Stages) & 1) ^ 1u);
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &b_full[s],
                                           static_cast<uint32_t>(C::BBytesPerStage));
      const int k0 = issue_kt * C::BK;
      TB* sb = ring_b + s * (C::BN * C::BK);
      if constexpr (C::BKMajor) {
        detail::tma_load(sb, b, k0, n0, 0, &b_full[s]);
      } else {
#pragma unroll
        for (int i = 0; i < C::BN / 64; ++i) detail::tma_load(sb + i * 64 * C::BK, b, n0 + 64 * i, k0, 0, &b_full[s]);
      }
      ++issued;
      if (++issue_kt == k_tiles) {
        issue_kt = 0;
        issue_u += unit_step;
      }
    };
    if (loads_b) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&b) : "memory");
      for (int i = 0; i < C::Stages; ++i) load_next_b();
    }
    auto release = [&](int s, int c) {  // K tile's B stage and converted buffer: read by this warp's wgmma
      __syncwarp();
      if (lane == 0) {
        cuda::ptx::mbarrier_arrive(&b_empty[s]);
        cuda::ptx::mbarrier_arrive(&conv_empty[c]);
      }
      if (loads_b) load_next_b();  // into stage s, once the other consumer has released it too
    };

    int stage = 0, cb = 0, tiles_done = 0;
    uint32_t phase = 0, cphase = 0;
    for (int u = unit_begin; u < unit_end; u += unit_step) {
      int m0, n0;
      locate(u, &m0, &n0);
      wgmma::clear(acc);
      // Per K tile: the converter's tile of TA and the staged B, the SS wgmma; the wait for the previous
      // K tile's wgmma (wait<1>) comes after this one's issue, then that K tile's stage and converted
      // buffer go back.
      for (int kt = 0; kt < k_tiles; ++kt) {
        detail::wait_parity(&conv_full[cb], cphase);
        detail::wait_parity(&b_full[stage], phase);
        wgmma::fence(acc);
        wgmma::arrive();
#pragma unroll
        for (int kb = 0; kb < T::KBlocks; ++kb)
          wgmma::mma_ss_columns<typename T::MmaOp>(wgmma::advance(a_desc, T::a_offset(cb * C::Consumers + consumer, kb)),
                                                   wgmma::advance(b_desc, T::b_offset(stage, kb)), acc, true, T::b_column);
        wgmma::commit();
        wgmma::wait<1>();
        wgmma::fence(acc);
        if (kt > 0) release(stage == 0 ? C::Stages - 1 : stage - 1, cb == 0 ? C::ConvStages - 1 : cb - 1);
        if (++stage == C::Stages) {
          stage = 0;
          phase ^= 1u;
        }
        if (++cb == C::ConvStages) {
          cb = 0;
          cphase ^= 1u;
        }
      }
      wgmma::wait<0>();
      wgmma::fence(acc);
      if (k_tiles > 0) release(stage == 0 ? C::Stages - 1 : stage - 1, cb == 0 ? C::ConvStages - 1 : cb - 1);
      // The tile's side values (the converter publishes them after the tile's last K tile).
      detail::wait_parity(sides_full, tiles_done & 1);
#pragma unroll
      for (int slot = 0; slot < 2; ++slot)
#pragma unroll
        for (int i = 0; i < NS; ++i) side_acc[slot][i] = detail::lds32f(sides_s + (8 * slot * C::SideSlots + i) * 4);
      __syncwarp();
      if (lane == 0) cuda::ptx::mbarrier_arrive(sides_empty);
      ++tiles_done;

      // ---- Epilogue (the m64nBNk accumulator layout, as gemm_body) ----
      detail::store_prologue_tile<C>(acc, side_acc, m0 + tile_row + my_row, n0 + 2 * (lane % 4), shape, epilogue);
    }
  }
  // No block leaves while its peer may still multicast into it or arrive on its barriers.
  if constexpr (C::ClusterN > 1) cute::cluster_sync();
}

// The kernel's body: the schedule the config names.
template <class C, class Prologue, class Epilogue>
__device__ __forceinline__ void gemm_prologue_body(const TensorMap& a, const TensorMap& b, const GemmShape& shape,
                                                   const Prologue& prologue, const Epilogue& epilogue) {
  if constexpr (C::ConverterWarpgroup) {
    gemm_prologue_body_converter<C>(a, b, shape, prologue, epilogue);
  } else {
    gemm_prologue_body_inline<C>(a, b, shape, prologue, epilogue);
  }
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
