// The sm_90a layer chain: several whole contractions of one M, each layer's result the next layer's A
// operand, in one kernel whose activations never leave the SM (issue 15, nerf_mlp; Kitsune's spatial
// pipeline of an MLP, on one SM).
//
// ---- Meaning ----------------------------------------------------------------------------------
//
// For every row m < params.m and layer l < params.layers (N columns each, N ≤ 256):
//     acc_l[m, n] = Σ_{k < K_l} X_l[m, k] · W_l[k, n]           (f32 accumulation, wgmma)
//     X_{l+1}[m, n] = round_T(act_l(acc_l[m, n] + bias_l[n]))    (act: ReLU where bit l of relu_mask)
// with X_0 = A (M × K_0, K contiguous: params.k0 = K_0) and K_l = N for l > 0. round_T is round to
// nearest of the element type T (f16 or bf16), as a store of X_{l+1} would round it: the chain computes
// what the separate layers compute, up to the f32 summation order. X_{l+1} is written to out[l] (row
// stride ld_out[l] elements) where out[l] is not null; the last layer's must be. W_l is read through a
// tensor map of an N-major (K × N, N contiguous) 16-bit matrix: nerf_mlp's weights w[in, out].
//
// ---- Schedule ---------------------------------------------------------------------------------
//
// 256 threads, one block per SM (persistent: blocks loop over 128-row tiles t = blockIdx.x, + gridDim.x).
// A ring of ChainConfig::Stages shared-memory stages (full / empty mbarriers, TMA, 128-byte swizzle)
// holds, per tile, layer 0's A and W_0 K tiles and then each later layer's W_l K tiles (64 K rows each);
// thread 0 refills every stage both warpgroups released, without blocking, before each of its K tiles and
// while it waits for a full stage, so the ring runs on across layers and tiles (the next layer's weights
// load during a layer's epilogue). Warpgroups 0 and 1 own 64 rows each of the tile: layer 0 runs wgmma
// SS (A and W from shared memory); its accumulator gets the layer's epilogue in registers (bias, ReLU,
// rounding to T) and becomes the A fragment of layer 1, which runs wgmma RS (A from registers, W from
// shared memory), and so on. Per thread: the 64 × N f32 accumulator (N/2 registers) and the 64 × N
// 16-bit A fragment (N/4): 192 registers at N 256. There is no producer warp: a ninth warp would bound
// every thread at 168 registers (ChainConfig::Threads).
// A stored layer's rows go to global memory from the A fragment (4 bytes per lane and column pair).
//
// Ragged M: TMA zero-fills A's rows past M, whose results are never stored. K_0 is any K a TMA map
// takes (zero-filled to whole K tiles); the weights' K rows past K_l are zero-filled the same way.
// Compiles with NVRTC (-default-device, sm_90a, the CUTLASS include dir) and with nvcc. Device test:
// tests/gpu/gemm/test_sm90_chain.cu.
#pragma once

#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cuda/ptx>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cute/arch/mma_sm90.hpp>
#include <cute/numeric/numeric_types.hpp>

#include "../tile/mma.cuh"
#include "config.cuh"
#include "wgmma.cuh"

namespace solder::gemm {

// The most layers one chain kernel takes (the weights' tensor maps are kernel parameters).
inline constexpr int kChainMaxLayers = 8;

// One chain's compile-time shape: element type T (f16 or bf16), layer width N (64, 128, 192 or 256:
// every layer's N, and every later layer's K), the ring's depth (0: as many stages as fit, at most 8).
template <Dtype T_, int N_, int Stages_ = 0>
struct ChainConfig {
  static constexpr Dtype T = T_;
  static constexpr int N = N_;
  static constexpr int BM = 128;  // two consumer warpgroups of 64 rows
  static constexpr int BK = 64;   // 128 bytes of K
  // Two consumer warpgroups, no producer warp: with 8 warps (2 per SM sub-partition) ptxas allocates up
  // to 255 registers per thread; a ninth warp (or a producer warpgroup with setmaxnreg) bounds every
  // thread at 168 (3 warps in one sub-partition's 16 K registers), below the 192 + that N 256 needs.
  static constexpr int Threads = 256;
  static constexpr int ABytesPerStage = BM * BK * 2;  // layer 0's A tile (unused by later layers)
  static constexpr int WBytesPerStage = BK * N * 2;   // one K tile of a weight: N/64 boxes {64, BK}
  static constexpr int StageBytes = ABytesPerStage + WBytesPerStage;
  static constexpr int FittingStages = (kGemmSmemLimit - 1024) / (StageBytes + 16);
  static constexpr int Stages = Stages_ > 0 ? Stages_ : (FittingStages < 8 ? FittingStages : 8);
  static constexpr int SmemBytes = Stages * StageBytes + 16 * Stages + 1024;
  static_assert(T_ == Dtype::f16 || T_ == Dtype::bf16, "a chain runs on 16-bit activations");
  static_assert(N_ % 64 == 0 && N_ >= 64 && N_ <= 256, "N must be 64, 128, 192 or 256 (whole N-major boxes)");
  static_assert(Stages >= 2 && SmemBytes <= kGemmSmemLimit, "the ring does not fit in 227 KB");
};

// The tensor maps of one launch: A (M × K_0, K-major, boxes {64, 128}) and each layer's weight
// (K_l × N, N-major, boxes {64, 64}: runtime::encode_gemm_operand with tile_rows N, tile_k 64).
struct ChainMaps {
  TensorMap a;
  TensorMap w[kChainMaxLayers];
};

// The runtime part: rows, K_0, layers, and per layer its bias (T[N], null: none), its result's store
// (T, row stride ld_out elements, null: not stored; 4-byte aligned rows) and whether ReLU applies.
struct ChainParams {
  int m = 0, k0 = 0, layers = 0;
  unsigned relu_mask = 0;
  const void* bias[kChainMaxLayers] = {};
  void* out[kChainMaxLayers] = {};
  long long ld_out[kChainMaxLayers] = {};
};

namespace chain_detail {

template <Dtype T> struct element;
template <> struct element<Dtype::f16> {
  using cute_type = cute::half_t;
  using scalar = __half;
  using pair = __half2;
  __device__ static float2 to_float2(pair p) { return __half22float2(p); }
};
template <> struct element<Dtype::bf16> {
  using cute_type = cute::bfloat16_t;
  using scalar = __nv_bfloat16;
  using pair = __nv_bfloat162;
  __device__ static float2 to_float2(pair p) { return __bfloat1622float2(p); }
};

__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

__device__ __forceinline__ void tma_load(void* dst, const TensorMap& map, int c0, int c1, uint64_t* bar) {
  const int32_t coords[3] = {c0, c1, 0};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, &map, coords, bar);
}

// f(integral_constant<int, I>) for I = 0 .. N - 1, unrolled at compile time.
template <class F, int... I>
__device__ __forceinline__ void static_for_impl(F&& f, cuda::std::integer_sequence<int, I...>) {
  (f(cuda::std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, cuda::std::make_integer_sequence<int, N>{});
}

}  // namespace chain_detail

// The kernel's body (chain_kernel and SOLDER_CHAIN_KERNEL wrap it with the __launch_bounds__).
template <class C>
__device__ __forceinline__ void chain_body(const ChainMaps& maps, const ChainParams& p) {
  using E = chain_detail::element<C::T>;
  using TE = typename E::cute_type;
  using Tile = cute::Shape<cute::_64, cute::Int<C::N>, cute::Int<C::BK>>;
  using OpSS = decltype(cute::SM90::GMMA::ss_op_selector<TE, TE, float, Tile, cute::SM90::GMMA::Major::K,
                                                         cute::SM90::GMMA::Major::MN>());
  using OpRS = decltype(cute::SM90::GMMA::rs_op_selector<TE, TE, float, Tile, cute::SM90::GMMA::Major::K,
                                                         cute::SM90::GMMA::Major::MN>());
  static_assert(wgmma::op_registers<OpSS> == C::N / 2 && wgmma::op_registers<OpRS> == C::N / 2,
                "one instruction spans the layer's N columns");
  if (p.m <= 0 || p.k0 <= 0 || p.layers <= 0) return;

  extern __shared__ unsigned char solder_chain_smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(solder_chain_smem) + 1023) & ~uintptr_t(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(base + C::Stages * C::StageBytes);
  uint64_t* empty = full + C::Stages;
  // Stage s: A's 128 × 64 tile (two 64-row blocks of 8 KB), then W's N/64 boxes of 64 K rows × 128 bytes.
  auto stage_a = [&](int s) { return base + s * C::StageBytes; };
  auto stage_w = [&](int s) { return base + s * C::StageBytes + C::ABytesPerStage; };

  const int tiles = (p.m + C::BM - 1) / C::BM;
  const int k0_tiles = (p.k0 + C::BK - 1) / C::BK;
  constexpr int kN_tiles = C::N / C::BK;  // K tiles of a later layer
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;

  if (threadIdx.x == 0) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(&maps.a) : "memory");
    for (int l = 0; l < p.layers; ++l) asm volatile("prefetch.tensormap [%0];" ::"l"(&maps.w[l]) : "memory");
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], 2 * 4);  // one arrival per consumer warp
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  {
    // ---- The loader (thread 0, also a consumer): the layers' K tiles in order, tile after tile ----
    // Every free stage (both warpgroups released it) is refilled with the next K tile of the sequence
    // the consumers walk: per tile, layer 0's K_0 tiles of A and W_0, then each later layer's N/64 tiles
    // of W_l. try_issue never blocks: the loader calls it before each of its own K tiles and while it
    // waits for a full stage, so the ring runs ahead across layers and tiles.
    struct Cursor {
      int t, l, kt, stage;
      uint32_t phase;
    };
    Cursor load{static_cast<int>(blockIdx.x), 0, 0, 0, 0u};
    const bool loader = threadIdx.x == 0;
    auto try_issue = [&] {
      while (load.t < tiles && cuda::ptx::mbarrier_test_wait_parity(&empty[load.stage], load.phase ^ 1u)) {
        const int s = load.stage;
        const uint32_t bytes = static_cast<uint32_t>(C::WBytesPerStage + (load.l == 0 ? C::ABytesPerStage : 0));
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &full[s], bytes);
        if (load.l == 0) chain_detail::tma_load(stage_a(s), maps.a, load.kt * C::BK, load.t * C::BM, &full[s]);  // box {64, 128}
#pragma unroll
        for (int i = 0; i < C::N / 64; ++i)  // boxes {64 columns, 64 K rows}
          chain_detail::tma_load(stage_w(s) + i * 64 * C::BK * 2, maps.w[load.l], 64 * i, load.kt * C::BK, &full[s]);
        if (++load.stage == C::Stages) {
          load.stage = 0;
          load.phase ^= 1u;
        }
        if (++load.kt == (load.l == 0 ? k0_tiles : kN_tiles)) {
          load.kt = 0;
          if (++load.l == p.layers) {
            load.l = 0;
            load.t += static_cast<int>(gridDim.x);
          }
        }
      }
    };

    // ---- Consumers (warpgroups 0 and 1): 64 rows each, every layer ----
    const int consumer = warpgroup;
    const int warp = thread / 32, lane = thread % 32;
    wgmma::Fragment<float, C::N / 2> acc;    // layer l's accumulator (wgmma.cuh's register order)
    wgmma::Fragment<uint32_t, C::N / 4> x;   // layer l + 1's A operand: packed pairs of T
    int stage = 0;
    uint32_t phase = 0;
    auto release = [&](int s) {
      __syncwarp();
      if (lane == 0) cuda::ptx::mbarrier_arrive(&empty[s]);
    };
    // One K tile of a layer: wait for its stage, issue its 4 k-blocks (`issue(stage, w_desc)`), release
    // the previous stage once at most one batch is in flight.
    int previous = 0;
    auto step = [&](int kt, auto issue) {
      if (loader) {
        try_issue();
        while (!cuda::ptx::mbarrier_try_wait_parity(&full[stage], phase)) try_issue();
      } else {
        chain_detail::wait_parity(&full[stage], phase);
      }
      const uint64_t w_desc = wgmma::mn_major(wgmma::shared_address(stage_w(stage)), C::BK);
      wgmma::fence(acc);
      wgmma::fence(x);
      wgmma::arrive();
      issue(stage, w_desc);
      wgmma::commit();
      wgmma::wait<1>();  // the previous batch is done: its stage can be refilled
      wgmma::fence(acc);
      if (kt > 0) release(previous);
      previous = stage;
      if (++stage == C::Stages) {
        stage = 0;
        phase ^= 1u;
      }
    };
    // After a layer's last K tile: every wgmma has completed, the last stage is released.
    auto drain = [&] {
      wgmma::wait<0>();
      wgmma::fence(acc);
      wgmma::fence(x);
      release(previous);
    };
    for (int t = static_cast<int>(blockIdx.x); t < tiles; t += static_cast<int>(gridDim.x)) {
      const int row_a = t * C::BM + 64 * consumer + 16 * warp + lane / 4;  // this lane's rows: row_a, row_a + 8
      for (int l = 0; l < p.layers; ++l) {
        // Layer 0: A and W from shared memory; later layers: A (x) from registers, whose k-block index
        // must be known at compile time (the K tiles unrolled).
        if (l == 0) {
          for (int kt = 0; kt < k0_tiles; ++kt)
            step(kt, [&](int s, uint64_t w_desc) {
              const uint64_t a_desc = wgmma::k_major(wgmma::shared_address(stage_a(s) + consumer * 64 * C::BK * 2));
#pragma unroll
              for (int kb = 0; kb < 4; ++kb)
                wgmma::mma_ss<OpSS>(wgmma::advance(a_desc, wgmma::k_major_block(64, kb)),
                                    wgmma::advance(w_desc, wgmma::mn_major_block(kb)), acc, kt > 0 || kb > 0);
            });
        } else {
          chain_detail::static_for<kN_tiles>([&](auto kt) {
            step(kt, [&](int, uint64_t w_desc) {
#pragma unroll
              for (int kb = 0; kb < 4; ++kb)
                wgmma::mma_rs<OpRS>(x, decltype(kt)::value * 4 + kb, wgmma::advance(w_desc, wgmma::mn_major_block(kb)), acc,
                                    decltype(kt)::value > 0 || kb > 0);
            });
          });
        }
        drain();

        // ---- Layer l's epilogue, in registers: x = round_T(act(acc + bias)) ----
        // Accumulator register i: row row_a + 8·((i/2) % 2), column 8·(i/4) + 2·(lane % 4) + i % 2; the
        // A fragment's register j packs accumulator elements 2j and 2j + 1 (wgmma.cuh).
        const bool relu = (p.relu_mask >> l) & 1u;
        const auto* bias = static_cast<const uint32_t*>(p.bias[l]);  // packed pairs of T
        // 8 column groups at a time (the compiler barrier keeps their bias loads from being hoisted all
        // at once beside the live accumulator).
#pragma unroll
        for (int g0 = 0; g0 < C::N / 8; g0 += 8) {
          uint32_t bits[8];
#pragma unroll
          for (int g = 0; g < 8; ++g) bits[g] = bias != nullptr ? __ldg(bias + 4 * (g0 + g) + lane % 4) : 0u;
#pragma unroll
          for (int g = g0; g < g0 + 8; ++g) {
            const float2 b = E::to_float2(*reinterpret_cast<const typename E::pair*>(&bits[g - g0]));
            float v[4] = {acc(4 * g) + b.x, acc(4 * g + 1) + b.y, acc(4 * g + 2) + b.x, acc(4 * g + 3) + b.y};
            if (relu) {
#pragma unroll
              for (int e = 0; e < 4; ++e) v[e] = fmaxf(v[e], 0.0f);
            }
            x(2 * g) = solder::tile::pack2<typename E::scalar>(v[0], v[1]);
            x(2 * g + 1) = solder::tile::pack2<typename E::scalar>(v[2], v[3]);
          }
          asm volatile("" ::: "memory");
        }
        if (p.out[l] != nullptr) {
          auto* out = static_cast<uint16_t*>(p.out[l]);
          const long long ld = p.ld_out[l];
#pragma unroll
          for (int j = 0; j < C::N / 4; ++j) {
            const int row = row_a + 8 * (j % 2), col = 8 * (j / 2) + 2 * (lane % 4);
            if (row < p.m) *reinterpret_cast<uint32_t*>(out + row * ld + col) = x(j);
          }
        }
      }
    }
  }
}

template <class C>
__global__ void __launch_bounds__(C::Threads, 1) chain_kernel(const __grid_constant__ ChainMaps maps, ChainParams params) {
  chain_body<C>(maps, params);
}

// Blocks of one launch: one per 128-row tile, at most `persistent_blocks` (the SM count) when > 0.
inline int chain_blocks(int m, int persistent_blocks) {
  const int tiles = (m + 127) / 128;
  return persistent_blocks > 0 && persistent_blocks < tiles ? persistent_blocks : tiles;
}

}  // namespace solder::gemm

// An extern "C" entry for NVRTC (unmangled name), launched with ConfigType::Threads threads and
// ConfigType::SmemBytes of dynamic shared memory.
#define SOLDER_CHAIN_KERNEL(name, ConfigType)                                                            \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                  \
      name(const __grid_constant__ ::solder::gemm::ChainMaps maps, ::solder::gemm::ChainParams params) { \
    ::solder::gemm::chain_body<ConfigType>(maps, params);                                               \
  }
