// The sm_90a GEMM skeleton with an operand-A prologue and side reductions (prologue_config.cuh: the
// meaning of a launch). A separate kernel body beside gemm_body (sm90_gemm.cuh), which is unchanged:
// the same TMA producer, mbarrier ring, persistent tile loop and setmaxnreg split, but A is staged in
// its source type and each consumer warpgroup builds its wgmma register operand (RS) from it.
//
// ---- The prologue interface (what the code generator writes) -----------------------------------
//
//   struct Prologue {
//     static constexpr int Sides = 1;          // side reductions (0 … 4), f32 each
//     static constexpr bool PreSweep = true;   // operand() reads the sides: sweep A once before
//     __device__ void side_init(float* s) const;                        // s[i] = identity of side i
//     __device__ void side_step(float* s, int row, int k, float x) const; // fold X(row, k) = x in
//     __device__ void side_merge(float* s, const float* other) const;    // combine two partials
//     __device__ float operand(int row, int k, float x, const float* s) const;  // A(row, k)
//   };
//   struct Epilogue {
//     __device__ void operator()(int batch, int row, int col, float acc, const float* s) const;
//   };
//
// side_step is called exactly once per in-bounds (row, k) of the thread's share (k < shape.k; rows
// past M see zero-filled x and are never stored); operand() for k ≥ shape.k is replaced by 0. The
// side values s passed to operand() (PreSweep) and to the epilogue are the row's complete folds.
//
// ---- Schedule ---------------------------------------------------------------------------------
//
// Per tile: (PreSweep, once per tile-row a block meets: with PreSweep each block takes a contiguous
// row-major range of tiles, so the side values carry over along the row) the producer loads the A
// stripe's K tiles alone into the ring and the consumers fold them into the side state, releasing each
// stage at once; then the producer loads A and B per K tile as in gemm_body. Each consumer thread reads its fragment's elements of the swizzled A source
// tile (plain index arithmetic: the 128-byte swizzle XORs the 16-byte chunk with the row mod 8),
// folds them (no PreSweep), applies operand(), rounds to TA into its register fragment and issues the
// RS wgmma, waiting for it before the next fill (a fragment redefined while its wgmma may be in flight
// makes ptxas serialize every wgmma; the two consumer warpgroups interleave instead). The row's sides live in the 4 lanes of a quad (wgmma's A layout: lane l of warp w holds
// rows 16w + l/4 and 16w + l/4 + 8), merged with two shuffles.
#pragma once

#include "prologue_config.cuh"
#include "sm90_gemm.cuh"

namespace solder::gemm {

namespace detail {

// The CuTe types of a PrologueConfig: the RS atom and B's swizzled layout.
template <class C>
struct PrologueTypes {
  using TA = typename cute_type<C::TA>::type;
  using TB = typename cute_type<C::TB>::type;
  using TS = typename cute_type<C::TS>::type;
  static constexpr cute::GMMA::Major MajorB = C::BKMajor ? cute::GMMA::Major::K : cute::GMMA::Major::MN;
  using WarpgroupTile = cute::Shape<cute::_64, cute::Int<C::BN>, cute::Int<C::BK>>;
  using MmaOp = decltype(cute::GMMA::rs_op_selector<TA, TB, float, WarpgroupTile, cute::GMMA::Major::K, MajorB>());
  using TiledMma = decltype(cute::make_tiled_mma(MmaOp{}));
  using AtomB = cute::conditional_t<C::BKMajor, cute::GMMA::Layout_K_SW128_Atom<TB>, cute::GMMA::Layout_MN_SW128_Atom<TB>>;
  using StepB = cute::conditional_t<C::BKMajor, cute::Step<cute::_1, cute::_2, cute::_3>, cute::Step<cute::_2, cute::_1, cute::_3>>;
  using SmemLayoutB = decltype(cute::tile_to_shape(
      AtomB{}, cute::make_shape(cute::Int<C::BN>{}, cute::Int<C::BK>{}, cute::Int<C::Stages>{}), StepB{}));
  static constexpr int KAtom = int(cute::size<2>(typename TiledMma::AtomShape_MNK{}));
  static constexpr int KBlocks = C::BK / KAtom;
};

// The f32 value of A's source element (row r of the tile, k < BK) in stage `stage` of the ring: box
// j = k / ABoxK holds BM rows of 128 bytes, 128-byte swizzled (chunk c of row r at chunk c ^ (r % 8)).
template <class C>
__device__ __forceinline__ float source_at(const unsigned char* ring_a, int stage, int r, int k) {
  constexpr int esize = dtype_bytes(C::TS);
  const int j = k / C::ABoxK, byte = (k % C::ABoxK) * esize;
  const int offset = ((stage * C::ABoxes + j) * C::BM + r) * 128 + ((((byte >> 4) ^ (r & 7)) << 4) | (byte & 15));
  const unsigned short bits = *reinterpret_cast<const unsigned short*>(ring_a + offset);
  if constexpr (C::TS == Dtype::bf16) {
    return __uint_as_float(static_cast<unsigned>(bits) << 16);
  } else {
    return __half2float(__ushort_as_half(bits));
  }
}

// G consecutive source elements (row r, k … k + G - 1, k a multiple of G, G = 2 or 4: 4 or 8 bytes,
// inside one 16-byte chunk) of stage `stage`, as f32, with one shared-memory load.
template <class C, int G>
__device__ __forceinline__ void source_group(const unsigned char* ring_a, int stage, int r, int k, float (&x)[G]) {
  constexpr int esize = dtype_bytes(C::TS);
  const int j = k / C::ABoxK, byte = (k % C::ABoxK) * esize;
  const int offset = ((stage * C::ABoxes + j) * C::BM + r) * 128 + ((((byte >> 4) ^ (r & 7)) << 4) | (byte & 15));
  unsigned short bits[G];
  if constexpr (G == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(ring_a + offset);
    bits[0] = v.x & 0xffffu; bits[1] = v.x >> 16; bits[2] = v.y & 0xffffu; bits[3] = v.y >> 16;
  } else {
    const unsigned v = *reinterpret_cast<const unsigned*>(ring_a + offset);
    bits[0] = v & 0xffffu; bits[1] = v >> 16;
  }
#pragma unroll
  for (int i = 0; i < G; ++i) {
    if constexpr (C::TS == Dtype::bf16) {
      x[i] = __uint_as_float(static_cast<unsigned>(bits[i]) << 16);
    } else {
      x[i] = __half2float(__ushort_as_half(bits[i]));
    }
  }
}

}  // namespace detail

struct NoSides {};

template <class C, class Prologue, class Epilogue>
__device__ __forceinline__ void gemm_prologue_body(const TensorMap& a, const TensorMap& b, const GemmShape& shape,
                                                   const Prologue& prologue, const Epilogue& epilogue) {
  using T = detail::PrologueTypes<C>;
  using TA = typename T::TA;
  using TB = typename T::TB;
  constexpr int NS = Prologue::Sides > 0 ? Prologue::Sides : 1;
  if (shape.m <= 0 || shape.n <= 0) return;

  extern __shared__ unsigned char solder_gemm_smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(solder_gemm_smem) + 1023) & ~uintptr_t(1023));
  unsigned char* ring_a = base;
  TB* ring_b = reinterpret_cast<TB*>(base + C::Stages * C::ABytesPerStage);
  uint64_t* full = reinterpret_cast<uint64_t*>(base + C::Stages * C::StageBytes);
  uint64_t* empty = full + C::Stages;

  const int tiles_m = ceil_div(shape.m, C::BM);
  const int tiles_n = ceil_div(shape.n, C::BN);
  const int total_units = tiles_m * tiles_n;
  const int k_tiles = ceil_div(shape.k, C::BK);
  // Work: with PreSweep, block b takes the contiguous range [b·U/G, (b+1)·U/G) of the tiles in row-major
  // order, so consecutive tiles of a block mostly share their tile-row and the pre-sweep runs once per
  // tile-row a block meets, not once per tile (the side values carry over); otherwise tiles
  // b, b + G, … in the grouped order of tile_of (config.cuh).
  auto locate = [&](int t, int* m0, int* n0) {
    int tile_m = 0, tile_n = 0;
    if constexpr (Prologue::PreSweep) {
      tile_m = t / tiles_n;
      tile_n = t % tiles_n;
    } else {
      tile_of(t, tiles_m, tiles_n, C::GroupM, &tile_m, &tile_n);
    }
    *m0 = tile_m * C::BM;
    *n0 = tile_n * C::BN;
  };
  const int unit_begin = Prologue::PreSweep ? static_cast<int>((long long)total_units * blockIdx.x / gridDim.x) : static_cast<int>(blockIdx.x);
  const int unit_end = Prologue::PreSweep ? static_cast<int>((long long)total_units * (blockIdx.x + 1) / gridDim.x) : total_units;
  const int unit_step = Prologue::PreSweep ? 1 : static_cast<int>(gridDim.x);
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], C::Consumers * 4);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();

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
#pragma unroll
        for (int j = 0; j < C::ABoxes; ++j)
          detail::tma_load(ring_a + (stage * C::ABoxes + j) * C::BM * 128, a, k0 + j * C::ABoxK, m0, 0, &full[stage]);
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
    cute::Tensor sB = cute::make_tensor(cute::make_smem_ptr(ring_b), typename T::SmemLayoutB{});  // (BN, BK, S)
    auto thr = mma.get_thread_slice(thread);
    cute::Tensor tCsB = thr.partition_B(sB);
    cute::Tensor tCrB = thr.make_fragment_B(tCsB);
    // A's register fragments and the (row, k) each of their values holds, within the warpgroup's 64 × BK.
    cute::Tensor cA = cute::make_identity_tensor(cute::Shape<cute::_64, cute::Int<C::BK>>{});
    cute::Tensor tCcA = thr.partition_A(cA);
    cute::Tensor frag = cute::make_tensor<TA>(cute::shape(tCcA));  // (V, 1, KBlocks), compact like tCcA
    cute::Tensor acc = cute::partition_fragment_C(mma, cute::Shape<cute::_64, cute::Int<C::BN>>{});
    const int warp = thread / 32, lane = thread % 32;
    const int my_row = 16 * warp + lane / 4;  // this thread's rows: my_row and my_row + 8 (of the 64)
    const int tile_row = consumer * 64;

    int stage = 0;
    uint32_t phase = 0;
    auto advance = [&] {
      if (++stage == C::Stages) {
        stage = 0;
        phase ^= 1u;
      }
    };
    auto release = [&](int s) {
      __syncwarp();
      if (lane == 0) cuda::ptx::mbarrier_arrive(&empty[s]);
    };
    // Side state of the thread's two rows (slot = row bit 3 within the warp's 16).
    float side[2][NS];
    // Folds the thread's elements of the staged A tile of stage s (K tile kt) into side.
    // The (row, k) coordinates of the thread's fragment values are recomputed where they are used: an
    // opaque copy of the thread index keeps the compiler from hoisting all of them (and their
    // shared-memory offsets) out of the K loop into registers, which spilled.
    auto coordinates = [&] {
      int t = thread;
      asm volatile("" : "+r"(t));
      return mma.get_thread_slice(t).partition_A(cA);
    };
    auto fold = [&](int s, int k0, int m0) {
      cute::Tensor tc = coordinates();
#pragma unroll
      for (int i = 0; i < cute::size(tc); ++i) {
        const int r = cute::get<0>(tc(i)), kk = cute::get<1>(tc(i));
        const int slot = (r >> 3) & 1;
        if (k0 + kk < shape.k) {
          const float x = detail::source_at<C>(ring_a, s, tile_row + r, kk);
          prologue.side_step(side[slot], m0 + tile_row + r, k0 + kk, x);
        }
      }
    };
    // Fills K block kb of `frag` from the staged tile (and folds the sides when there is no pre-sweep).
    // wgmma's register A layout holds G = 4 (fp8) or 2 (16-bit) consecutive k per 32-bit register,
    // starting at a multiple of G: each group is read with one shared-memory load.
    constexpr int G = dtype_bytes(C::TA) == 1 ? 4 : 2;
    auto fill = [&](auto& frag, int kb, int s, int k0, int m0) {
      cute::Tensor coords = coordinates()(cute::_, cute::_, kb);
      cute::Tensor values = frag(cute::_, cute::_, kb);
      static_assert(decltype(cute::size(coords))::value % G == 0, "the fragment holds whole groups");
#pragma unroll
      for (int i = 0; i < cute::size(coords); i += G) {
        const int r = cute::get<0>(coords(i)), kk = cute::get<1>(coords(i));
        const int slot = (r >> 3) & 1;
        const int row = m0 + tile_row + r;
        float x[G];
        detail::source_group<C, G>(ring_a, s, tile_row + r, kk, x);
#pragma unroll
        for (int j = 0; j < G; ++j) {
          const int k = k0 + kk + j;
          float v = 0.0f;
          if (k < shape.k) {
            if constexpr (!Prologue::PreSweep && Prologue::Sides > 0) prologue.side_step(side[slot], row, k, x[j]);
            v = prologue.operand(row, k, x[j], side[slot]);
          }
          values(i + j) = TA(v);
        }
      }
    };
    auto merge_quad = [&] {
#pragma unroll
      for (int slot = 0; slot < 2; ++slot)
#pragma unroll
        for (int d = 1; d <= 2; d <<= 1) {
          float other[NS];
#pragma unroll
          for (int j = 0; j < NS; ++j) other[j] = __shfl_xor_sync(0xffffffffu, side[slot][j], d);
          prologue.side_merge(side[slot], other);
        }
    };

    int swept_m0 = -1;
    for (int u = unit_begin; u < unit_end; u += unit_step) {
      int m0, n0;
      locate(u, &m0, &n0);
      if constexpr (Prologue::PreSweep) {
        if (m0 != swept_m0) {  // a new tile-row: sweep its A stripe (the producer loads it alone)
          prologue.side_init(side[0]);
          prologue.side_init(side[1]);
          for (int kt = 0; kt < k_tiles; ++kt) {
            detail::wait_parity(&full[stage], phase);
            fold(stage, kt * C::BK, m0);
            release(stage);
            advance();
          }
          merge_quad();
          swept_m0 = m0;
        }
      } else {
        prologue.side_init(side[0]);
        prologue.side_init(side[1]);
      }
      cute::clear(acc);
      // One K tile, one K block at a time: fill the block's registers, then issue its wgmma in a
      // stage of its own (warpgroup_arrive), so the next block's fill overlaps it; ptxas serializes
      // every wgmma when a register operand is redefined inside a stage (C7513). The fragment is
      // reused by the next K tile only after all its wgmma completed (wait<0>), which also frees the
      // ring stage; the two consumer warpgroups interleave meanwhile.
      for (int kt = 0; kt < k_tiles; ++kt) {
        detail::wait_parity(&full[stage], phase);
        cute::warpgroup_fence_operand(acc);
#pragma unroll
        for (int kb = 0; kb < T::KBlocks; ++kb) {
          fill(frag, kb, stage, kt * C::BK, m0);
          cute::warpgroup_fence_operand(frag);
          cute::warpgroup_arrive();
          cute::gemm(mma, frag(cute::_, cute::_, kb), tCrB(cute::_, cute::_, kb, stage), acc);
          cute::warpgroup_commit_batch();
        }
        cute::warpgroup_wait<0>();
        cute::warpgroup_fence_operand(acc);
        cute::warpgroup_fence_operand(frag);
        release(stage);
        advance();
      }
      if constexpr (!Prologue::PreSweep) merge_quad();

      // ---- Epilogue (the m64nBNk accumulator layout, as gemm_body) ----
      const int row_base = m0 + tile_row + my_row;
      const int col_base = n0 + 2 * (lane % 4);
#pragma unroll
      for (int i = 0; i < C::BN / 2; i += 2) {
        const int slot = (i / 2) % 2;
        const int row = row_base + 8 * slot;
        const int col = col_base + 8 * (i / 4);
        if (row < shape.m) {
          if (col < shape.n) epilogue(0, row, col, acc(i), side[slot]);
          if (col + 1 < shape.n) epilogue(0, row, col + 1, acc(i + 1), side[slot]);
        }
      }
    }
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
