// The attention skeleton's dual mode: two attentions over the same query rows, keys and values, one per
// consumer warpgroup, combined in f32 before the one rounding of the output (differential attention:
// o = a0 − λ·a1 with a0 = softmax(q0·k0ᵀ)·v and a1 = softmax(q1·k1ᵀ)·v).
//
// ---- Meaning --------------------------------------------------------------------------------------
//
// For every batch b, head h < shape.heads, query row i < shape.seq_q and column d < HeadDim, with
// g = h / (heads / heads_kv) the key/value head and half c ∈ {0, 1}:
//     x_c[b,h,i,d] = Σ_j p_j^c · v[b,g,j,d] / Σ_j p_j^c,    p_j^c = exp(scale · (s_j^c − max_j' s_j'^c)),
//     s_j^c = score(b·heads + h, i, j, Σ_d q_c[b,h,i,d] · k_c[b,g,j,d])
// over the keys j < seq_k the mask lets row i see (the same score and mask functors for both halves),
// and the epilogue receives both halves' values of each element in f32:
//     epilogue.combine(b·heads + h, i, d, x_0[d], x_0[d + 1], x_1[d], x_1[d + 1])   (d even, i < seq_q)
// Half c of q reads batch coordinate b · q_heads + q_head0 + c · heads + h of q's tensor map, and of k
// b · k_heads + k_head0 + c · heads_kv + g (AttentionShape's fixed lead block: [B, 2, H, S, D] tensors,
// q_heads = 2·heads, q_head0 = 0); v is shared: b · heads_kv + g, or with v_heads its fixed lead index.
// Each half is exactly the skeleton's attention (sm90_attention.cuh): the same tiles, the same order of
// key tiles, the same online softmax (State) and P rounded to T before P·V.
//
// ---- Schedule -------------------------------------------------------------------------------------
//
// One block per work tile of 64 query rows of one head (DualConfig::BM = 64; head-major, the query tiles
// of a head in reverse order). Warpgroup 0 is the producer: one thread loads both halves' Q tiles once,
// then per key tile one K stage holding both halves' K tiles (one mbarrier, 2·KVTileBytes) and one V
// stage. Consumer c computes half c exactly as a consumer of the skeleton does (S SS wgmma, the row
// state, P in registers, O += P·V RS wgmma on the shared V stage, the two consumers taking turns to issue
// on named barriers 1 and 2). After the last P·V: consumer 1 waits until consumer 0 is done with Q
// (named barrier 3), writes x_1 = O/Σp in f32 into Q's shared memory (64 × HeadDim × 4 bytes: exactly the
// two Q tiles) in its own accumulator order, and signals (named barrier 4); consumer 0 reads the same
// registers' elements (the two consumers' fragments cover the same rows and columns) and calls combine().
//
//   template <class DualConfig, class Score, class Mask, class Epilogue, template <int> class State = OnlineSoftmax>
//   __global__ void attention_dual_kernel(q, k, v, AttentionShape shape, Score score, Mask mask, Epilogue epilogue);
//
// The parameters are the skeleton's (runtime::AttentionLaunchArgs packs both). Scores with a bias or an
// affine form, data masks and epilogue preloads are not taken (static_assert): the code generator takes
// the dual mode only without them. SOLDER_ATTENTION_DUAL_KERNEL(name, DualConfig, Score, Mask, Epilogue)
// defines an extern "C" entry for NVRTC.
#pragma once

#include "sm90_attention.cuh"

namespace solder::attention {

// One dual configuration. T, HeadDim, BN as for Config; Stages: depth of the K ring (each stage both
// halves' K tiles) and of the V ring. Two consumer warpgroups (one per half) of the same 64 query rows.
template <Dtype T_, int HeadDim_, int BN_, int Stages_>
struct DualConfig {
  static constexpr Dtype T = T_;
  static constexpr int HeadDim = HeadDim_;
  static constexpr int BN = BN_;
  static constexpr int Stages = Stages_;
  static constexpr int Consumers = 2;
  static constexpr bool Persistent = false;
  static constexpr int QBuffers = 1;
  static constexpr int StagedBias = 0;
  static constexpr int BM = 64;               // query rows of a work tile (both halves)
  static constexpr int Threads = 384;         // the producer warpgroup and two consumers
  static constexpr int Chunks = HeadDim_ / 64;
  static constexpr int ProducerRegisters = 24;
  static constexpr int ConsumerRegisters = 240;
  static constexpr int QBoxRows = 64;
  static constexpr int KVBoxRows = BN_;
  static constexpr int QTileBytes = 64 * HeadDim_ * 2;  // one half's Q tile
  static constexpr int QBytes = 2 * QTileBytes;
  static constexpr int KVTileBytes = BN_ * HeadDim_ * 2;
  static constexpr int KStageBytes = 2 * KVTileBytes;  // both halves' K tiles
  static constexpr int KOffset = QBytes;
  static constexpr int VOffset = KOffset + Stages_ * KStageBytes;
  static constexpr int BarrierOffset = VOffset + Stages_ * KVTileBytes;
  // Q (both halves; x_1 in f32 after the last S), the K ring, the V ring, 2 + 4·Stages mbarriers, 1 KB
  // of slack to align to 1024 bytes.
  static constexpr int SmemBytes = BarrierOffset + 8 * (2 + 4 * Stages_) + 1024;

  static_assert(T_ == Dtype::bf16 || T_ == Dtype::f16, "the dual mode takes bf16 or f16");
  static_assert(HeadDim_ == 64 || HeadDim_ == 128, "the dual mode takes head dims 64 and 128");
  static_assert(BN_ % 16 == 0 && BN_ >= 16 && BN_ <= 256, "BN must be a multiple of 16 in [16, 256]");
  static_assert(Stages_ >= 2 && Stages_ <= 8, "Stages must be in [2, 8]");
  static_assert(64 * HeadDim_ * 4 <= QBytes, "x_1 in f32 fits in Q's shared memory");
  static_assert(SmemBytes <= 232448, "Q and the K/V rings do not fit in 227 KB of shared memory");
};

template <class C>
SOLDER_ATTN_HD constexpr LaunchGeometry dual_launch_config(C, const AttentionShape& shape) {
  LaunchGeometry g{};
  g.grid[0] = static_cast<unsigned>(total_tiles(C{}, shape));
  g.block[0] = C::Threads;
  g.smem_bytes = C::SmemBytes;
  return g;
}

template <class C, class Score, class Mask, class Epilogue, template <int> class State = OnlineSoftmax>
__device__ __forceinline__ void attention_dual_body(const TensorMap& q, const TensorMap& k, const TensorMap& v,
                                                    const AttentionShape& shape, const Score& score, const Mask& mask,
                                                    const Epilogue& epilogue) {
  static_assert(C::Consumers == 2 && C::BM == 64, "attention_dual_body takes a DualConfig");
  static_assert(!score_is_affine<Score>(0) && !score_has_bias<Score>(0), "the dual mode takes plain score functors");
  static_assert(!mask_has_data_tiles<Mask>(0), "the dual mode takes no data mask");
  static_assert(!epilogue_preloads<Epilogue>(0), "the dual mode's epilogue preloads nothing");
  using Ty = detail::Types<C>;
  using T = typename Ty::T;
  if (shape.seq_q <= 0) return;

  extern __shared__ unsigned char solder_attention_smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(solder_attention_smem) + 1023) & ~uintptr_t(1023));
  T* smem_q = reinterpret_cast<T*>(base);
  T* smem_k = reinterpret_cast<T*>(base + C::KOffset);
  T* smem_v = reinterpret_cast<T*>(base + C::VOffset);
  float* smem_x1 = reinterpret_cast<float*>(base);  // after the last S of both halves
  uint64_t* q_full = reinterpret_cast<uint64_t*>(base + C::BarrierOffset);
  uint64_t* q_empty = q_full + 1;  // (unused: one Q per block)
  uint64_t* k_full = q_full + 2;
  uint64_t* k_empty = k_full + C::Stages;
  uint64_t* v_full = k_empty + C::Stages;
  uint64_t* v_empty = v_full + C::Stages;
  (void)q_empty;

  // The work tile (config.cuh's order: head-major, the query tiles of a head last to first).
  const int tiles_m = ceil_div(shape.seq_q, C::BM);
  const int t = static_cast<int>(blockIdx.x);
  const int bh = t / tiles_m;
  const int row0 = (tiles_m - 1 - t % tiles_m) * C::BM;
  const int batch = bh / shape.heads, head = bh % shape.heads;
  const int bh_kv = batch * shape.heads_kv + head / (shape.heads / shape.heads_kv);
  const int last_key_tile = ceil_div(shape.seq_k, C::BN);
  int begin = 0, end = 0;
  mask.key_tiles(bh, row0, C::BM, shape.seq_k, C::BN, &begin, &end);
  if (begin < 0) begin = 0;
  if (end > last_key_tile) end = last_key_tile;
  const int count = end > begin ? end - begin : 0;

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(&q_full[0], 1);
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&k_full[s], 1);
      cuda::ptx::mbarrier_init(&v_full[s], 1);
      cuda::ptx::mbarrier_init(&k_empty[s], 2 * 4);  // one arrival per consumer warp
      cuda::ptx::mbarrier_init(&v_empty[s], 2 * 4);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---- Producer: one thread issues every TMA load ----
    cutlass::arch::warpgroup_reg_dealloc<C::ProducerRegisters>();
    if (thread == 0 && count > 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&q) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&k) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&v) : "memory");
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &q_full[0],
                                           static_cast<uint32_t>(C::QBytes));
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int chunk = 0; chunk < C::Chunks; ++chunk)
          detail::tma_load(smem_q + (half * C::Chunks + chunk) * 64 * 64, q, 64 * chunk, row0,
                           operand_batch(bh, shape.heads, shape.q_heads, shape.q_head0 + half * shape.heads), &q_full[0]);
      const int k_batch0 = operand_batch(bh_kv, shape.heads_kv, shape.k_heads, shape.k_head0);
      const int k_batch1 = operand_batch(bh_kv, shape.heads_kv, shape.k_heads, shape.k_head0 + shape.heads_kv);
      const int v_batch = operand_batch(bh_kv, shape.heads_kv, shape.v_heads, shape.v_head0);
      for (int n = 0; n < count; ++n) {
        const int j = begin + n;
        const int stage = detail::stage_of<C::Stages>(n);
        const uint32_t phase = detail::phase_of<C::Stages>(n);
        detail::wait_parity(&k_empty[stage], phase ^ 1u);
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &k_full[stage],
                                             static_cast<uint32_t>(C::KStageBytes));
#pragma unroll
        for (int chunk = 0; chunk < C::Chunks; ++chunk) {
          T* k_stage = smem_k + stage * (C::KStageBytes / 2);
          detail::tma_load(k_stage + chunk * C::BN * 64, k, 64 * chunk, j * C::BN, k_batch0, &k_full[stage]);
          detail::tma_load(k_stage + (C::KVTileBytes / 2) + chunk * C::BN * 64, k, 64 * chunk, j * C::BN, k_batch1, &k_full[stage]);
        }
        detail::wait_parity(&v_empty[stage], phase ^ 1u);
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &v_full[stage],
                                             static_cast<uint32_t>(C::KVTileBytes));
#pragma unroll
        for (int chunk = 0; chunk < C::Chunks; ++chunk)
          detail::tma_load(smem_v + (stage * C::Chunks + chunk) * C::BN * 64, v, 64 * chunk, j * C::BN, v_batch, &v_full[stage]);
      }
    }
  } else {
    // ---- Consumers: consumer c computes half c of the same 64 rows ----
    cutlass::arch::warpgroup_reg_alloc<C::ConsumerRegisters>();
    const int consumer = warpgroup - 1;
    const int warp = thread / 32, lane = thread % 32;
    const uint64_t q_desc = wgmma::k_major(wgmma::shared_address(smem_q) + consumer * C::QTileBytes);
    const uint64_t k_desc = wgmma::k_major(wgmma::shared_address(smem_k) + consumer * C::KVTileBytes);
    const uint64_t v_desc = wgmma::mn_major(wgmma::shared_address(smem_v), C::BN);
    wgmma::Fragment<float, C::BN / 2> acc_s;
    wgmma::Fragment<float, C::HeadDim / 2> acc_o;
    wgmma::Fragment<uint32_t, C::BN / 4> p;
    const int col_lane = 2 * (lane % 4);
    const int row_base = row0 + 16 * warp + lane / 4;

    // The turn ring (sm90_attention.cuh): consumer c waits on barrier 1 + c, passes it to the other.
    constexpr int kTurnThreads = 256;
    constexpr int kQDoneBarrier = 3, kX1Barrier = 4;
    const int my_turn = 1 + consumer;
    const int next_turn = 1 + (consumer + 1) % 2;
    if (consumer == 1) detail::named_arrive(next_turn, kTurnThreads);

    auto release = [&](uint64_t* bar) {
      __syncwarp();
      if (lane == 0) cuda::ptx::mbarrier_arrive(bar);
    };
    auto to_p = [&] {
#pragma unroll
      for (int i = 0; i < C::BN / 4; ++i) p(i) = detail::pack2<T>(acc_s(2 * i), acc_s(2 * i + 1));
    };
    auto issue_s = [&](int stage) {
      wgmma::fence(acc_s);
      wgmma::arrive();
      const uint64_t k_stage = wgmma::advance(k_desc, stage * static_cast<uint32_t>(C::KStageBytes));
#pragma unroll
      for (int kb = 0; kb < Ty::KBlocksS; ++kb)
        wgmma::mma_ss<typename Ty::MmaS>(wgmma::advance(q_desc, wgmma::k_major_block(64, kb)),
                                         wgmma::advance(k_stage, wgmma::k_major_block(C::BN, kb)), acc_s, kb > 0);
      wgmma::commit();
    };
    auto issue_o = [&](int stage) {
      wgmma::fence(p);
      wgmma::fence(acc_o);
      wgmma::arrive();
      const uint64_t v_stage = wgmma::advance(v_desc, stage * static_cast<uint32_t>(C::KVTileBytes));
#pragma unroll
      for (int kb = 0; kb < Ty::KBlocksO; ++kb)
        wgmma::mma_rs<typename Ty::MmaO>(p, kb, wgmma::advance(v_stage, wgmma::mn_major_block(kb)), acc_o, true);
      wgmma::commit();
    };
    // Logits of key tile j: the score functor, then the mask on boundary tiles (and keys ≥ seq_k).
    auto logits = [&](int j) {
      const int col0 = j * C::BN;
      if constexpr (!Score::kIdentity) {
#pragma unroll
        for (int i = 0; i < C::BN / 2; ++i)
          acc_s(i) = score(bh, row_base + 8 * ((i / 2) % 2), col0 + 8 * (i / 4) + col_lane + i % 2, acc_s(i));
      }
      if (col0 + C::BN > shape.seq_k || mask.partial(bh, row0, 64, col0, C::BN)) {
#pragma unroll
        for (int i = 0; i < C::BN / 2; ++i) {
          const int row = row_base + 8 * ((i / 2) % 2), col = col0 + 8 * (i / 4) + col_lane + i % 2;
          if (!(col < shape.seq_k && mask.visible(bh, row, col))) acc_s(i) = negative_infinity();
        }
      }
    };
    State<C::BN / 2> state;
    state.init();
    wgmma::clear(acc_o);

    if (count > 0) {
      float correction[2];
      auto rescale_o = [&] {
#pragma unroll
        for (int i = 0; i < C::HeadDim / 2; ++i) acc_o(i) *= correction[(i / 2) % 2];
      };
      detail::wait_parity(&q_full[0], 0);
      {
        const int ks = detail::stage_of<C::Stages>(0);
        detail::wait_parity(&k_full[ks], detail::phase_of<C::Stages>(0));
        detail::named_sync(my_turn, kTurnThreads);
        issue_s(ks);
        detail::named_arrive(next_turn, kTurnThreads);
        wgmma::wait<0>();
        wgmma::fence(acc_s);
        release(&k_empty[ks]);
        logits(begin);
        state.update(acc_s, score.scale_log2, correction);
        to_p();
      }
      for (int n = 1; n < count; ++n) {
        const int ks = detail::stage_of<C::Stages>(n), vs = detail::stage_of<C::Stages>(n - 1);
        detail::wait_parity(&k_full[ks], detail::phase_of<C::Stages>(n));
        detail::named_sync(my_turn, kTurnThreads);
        issue_s(ks);
        rescale_o();
        detail::wait_parity(&v_full[vs], detail::phase_of<C::Stages>(n - 1));
        issue_o(vs);
        detail::named_arrive(next_turn, kTurnThreads);
        wgmma::wait<1>();
        wgmma::fence(acc_s);
        release(&k_empty[ks]);
        logits(begin + n);
        state.update(acc_s, score.scale_log2, correction);
        wgmma::wait<0>();
        wgmma::fence(acc_o);
        wgmma::fence(p);
        release(&v_empty[vs]);
        to_p();
      }
      {
        const int vs = detail::stage_of<C::Stages>(count - 1);
        detail::wait_parity(&v_full[vs], detail::phase_of<C::Stages>(count - 1));
        detail::named_sync(my_turn, kTurnThreads);
        rescale_o();
        issue_o(vs);
        detail::named_arrive(next_turn, kTurnThreads);
        wgmma::wait<0>();
        wgmma::fence(acc_o);
        release(&v_empty[vs]);
      }
    }

    // ---- Epilogue: x_c = O / Σ p (zeros for rows that see no key; NaN with Mask::kEmptyRowNaN) ----
    float inverse[2];
    state.finish(inverse);
    if constexpr (mask_empty_row_nan<Mask>(0)) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
        if (inverse[r] == 0.0f) inverse[r] = __int_as_float(0x7fc00000);
    }
    if (consumer == 1) {
      // Q is free once consumer 0's products are done too (its last wgmma wait above).
      detail::named_sync(kQDoneBarrier, kTurnThreads);
#pragma unroll
      for (int i = 0; i < C::HeadDim / 2; ++i) smem_x1[i * 128 + thread] = acc_o(i) * inverse[(i / 2) % 2];
      detail::named_arrive(kX1Barrier, kTurnThreads);
    } else {
      detail::named_arrive(kQDoneBarrier, kTurnThreads);
      detail::named_sync(kX1Barrier, kTurnThreads);
#pragma unroll
      for (int i = 0; i < C::HeadDim / 2; i += 2) {
        const int r = (i / 2) % 2;
        const int row = row_base + 8 * r;
        if (row < shape.seq_q)
          epilogue.combine(bh, row, 8 * (i / 4) + col_lane, acc_o(i) * inverse[r], acc_o(i + 1) * inverse[r], smem_x1[i * 128 + thread],
                           smem_x1[(i + 1) * 128 + thread]);
      }
      detail::named_sync(my_turn, kTurnThreads);  // the ring's opening arrival
    }
  }
}

template <class C, class Score, class Mask, class Epilogue, template <int> class State = OnlineSoftmax>
__global__ void __launch_bounds__(C::Threads, 1)
    attention_dual_kernel(const __grid_constant__ TensorMap q, const __grid_constant__ TensorMap k,
                          const __grid_constant__ TensorMap v, AttentionShape shape, const __grid_constant__ Score score, Mask mask,
                          Epilogue epilogue) {
  attention_dual_body<C, Score, Mask, Epilogue, State>(q, k, v, shape, score, mask, epilogue);
}

}  // namespace solder::attention

#define SOLDER_ATTENTION_DUAL_KERNEL(name, ConfigType, ScoreType, MaskType, EpilogueType)                                          \
  extern "C" __global__ void __launch_bounds__(ConfigType::Threads, 1)                                                             \
      name(const __grid_constant__ ::solder::attention::TensorMap q, const __grid_constant__ ::solder::attention::TensorMap k,     \
           const __grid_constant__ ::solder::attention::TensorMap v, ::solder::attention::AttentionShape shape,                   \
           const __grid_constant__ ScoreType score, MaskType mask, EpilogueType epilogue) {                                        \
    ::solder::attention::attention_dual_body<ConfigType>(q, k, v, shape, score, mask, epilogue);                                  \
  }
