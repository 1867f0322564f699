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
// Staged combine (DualConfig::StagedCombine with an Epilogue of kStagedCombine): after both consumers'
// last products (named barrier 3, both waiting), consumer c owns the columns of its accumulator's first
// (c = 0) or second (c = 1) half of the fragment (columns [c·HeadDim/2, (c+1)·HeadDim/2) of every row):
// each writes its own x_c of the other's columns in f32 into Q's shared memory (st.shared, conflict-free:
// element i of thread t at word i·128 + t), named barrier 4, reads the other's values of its own columns,
// and packs staged_combine(bh, row, col, x_0, x_0', x_1, x_1') (the stored pair as one 4-byte word) into
// the K ring, now idle (64-column panels of 64 rows × 128 bytes, TMA's 128-byte swizzle); named barrier 5,
// and the 256 consumer threads store whole rows with 16-byte stores at staged_row(bh, row). The combine's
// inputs are read once per row (no store between the packs); each consumer's own x is rounded to f32 on
// its own (__fmul_rn), as the other's is through shared memory. Where a row's address is not 16-byte
// aligned each consumer calls combine() for its own columns instead.
//
// Persistent blocks (DualConfig::Persistent, with StagedCombine): blocks loop over the work tiles, tile
// round·gridDim + b in round `round` (b reversed in odd rounds); each tile takes the next of QBuffers Q
// buffers (q_full / q_empty, released by the 8 consumer warps after their row stores), the K/V rings run
// on across tiles, and the rows are staged in the tile's Q buffer once the exchange is read (named
// barrier 6) instead of the K ring, which holds the next tile's stages. With one Q buffer the producer
// issues the next tile's first K stage before it waits for the buffer.
//
// K/V multicast (DualConfig::Cluster 2; launched with a cluster dimension of 2): the work items are pairs
// of work tiles (128 rows of one head, the pairs of a head last to first), one per cluster (persistent:
// dealt out to the clusters in rounds as above), and rank r takes work tile 2·pair + r. Both ranks run the
// pair's key tiles (Mask::key_tiles of the 128 rows: a key tile one rank's rows do not see is masked on
// each of them, which leaves the online softmax and O exactly as they were), so their K/V rings advance
// together: rank r's producer loads half r's K tile and, for key tile j with j % 2 = r, the V tile, each by
// TMA multicast into the same stage of both blocks, and arms only its own block's mbarrier with the whole
// stage's bytes (the partner's bytes may land first: the phase completes on both). A stage's empty
// barrier counts the consumer warps of both blocks (each warp arrives in both, at cluster scope), so no
// rank refills a stage its partner still reads. A rank whose tile lies past seq_q computes rows it never
// stores. Q, the exchange and the row stores stay per block. Cluster barriers after the mbarrier init
// and before the exit (no block leaves while its partner may still arrive on its barriers).
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

namespace detail {
// A compile-time index as a value (a generic lambda's template argument).
template <int N>
struct Index {
  static constexpr int value = N;
};

// ---- Clusters of two (DualConfig::Cluster 2) ----
__device__ __forceinline__ int cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return static_cast<int>(r);
}
// Every thread of both blocks: the writes before it (mbarrier inits, remote arrivals) seen after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// One arrival on the mbarrier at `bar`'s shared address in block `rank` of the cluster (mapa of that very
// address; release at cluster scope: this block's reads of the stage, waited for before, ordered before
// that block's next multicast into it).
__device__ __forceinline__ void mbarrier_arrive_remote(uint64_t* bar, int rank) {
  const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
// A TMA load into the same shared address of every block in `cta_mask`, each block's bytes counted on
// its own mbarrier at `bar`'s address.
__device__ __forceinline__ void tma_load_multicast(void* dst, const TensorMap& map, int c0, int c1, int c2, uint64_t* bar,
                                                   uint16_t cta_mask) {
  const int32_t coords[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, &map, coords, bar, cta_mask);
}
}  // namespace detail

// One dual configuration. T, HeadDim, BN as for Config; Stages: depth of the K ring (each stage both
// halves' K tiles) and of the V ring. Two consumer warpgroups (one per half) of the same 64 query rows.
// StagedCombine: with an Epilogue of kStagedCombine (functors.cuh), the combine of "Staged combine" below
// (each consumer half of the columns, 16-byte row stores); false: consumer 0 calls combine() pair by pair.
// Persistent: blocks loop over work tiles (dual_launch_config's persistent_blocks), QBuffers (1 or 2) Q
// tiles in shared memory: the producer loads the next work tile's Q (into the other buffer with 2) and
// K/V stages while the consumers combine and store the current one. Needs StagedCombine.
// Cluster (1 or 2): with 2, the blocks run in clusters of two whose ranks take the two 64-row work tiles
// of one 128-row pair of the same head ("K/V multicast" below); each K/V tile is read from L2 once per
// cluster and multicast into both blocks' stages.
template <Dtype T_, int HeadDim_, int BN_, int Stages_, bool StagedCombine_ = false, bool Persistent_ = false, int QBuffers_ = 1,
          int Cluster_ = 1>
struct DualConfig {
  static constexpr Dtype T = T_;
  static constexpr int HeadDim = HeadDim_;
  static constexpr int BN = BN_;
  static constexpr int Stages = Stages_;
  static constexpr int Consumers = 2;
  static constexpr bool Persistent = Persistent_;
  static constexpr int QBuffers = QBuffers_;
  static constexpr int Cluster = Cluster_;
  static constexpr int StagedBias = 0;
  static constexpr int BM = 64;               // query rows of a work tile (both halves)
  static constexpr int Threads = 384;         // the producer warpgroup and two consumers
  static constexpr int Chunks = HeadDim_ / 64;
  static constexpr int ElementBytes = 2;  // 16-bit only (detail::Types: the k-blocks, P·V's B layout)
  static constexpr bool Fp8 = false;
  // With a cluster the multicast producer needs more than 24 registers (it spilled 24 bytes at 24): 40, and
  // the consumers 232 (setmaxnreg moves registers within the launch's 384 × 168 = 128 × 40 + 256 × 232),
  // which hd64's consumers fit (hd128's spilled up to 60 bytes in the device test: clusters at hd64 only)
  static constexpr int ProducerRegisters = Cluster_ > 1 ? 40 : 24;
  static constexpr int ConsumerRegisters = Cluster_ > 1 ? 232 : 240;
  static constexpr int QBoxRows = 64;
  static constexpr int KVBoxRows = BN_;
  static constexpr int QTileBytes = 64 * HeadDim_ * 2;  // one half's Q tile
  static constexpr int QBytes = 2 * QTileBytes;  // one Q buffer: both halves' tiles
  static constexpr int KVTileBytes = BN_ * HeadDim_ * 2;
  static constexpr int KStageBytes = 2 * KVTileBytes;  // both halves' K tiles
  static constexpr int KOffset = QBuffers_ * QBytes;
  static constexpr int VOffset = KOffset + Stages_ * KStageBytes;
  static constexpr int BarrierOffset = VOffset + Stages_ * KVTileBytes;
  // Q buffers (both halves; the combine's exchange after the last S), the K ring, the V ring,
  // 2·QBuffers + 4·Stages mbarriers, 1 KB of slack to align to 1024 bytes.
  static constexpr int SmemBytes = BarrierOffset + 8 * (2 * QBuffers_ + 4 * Stages_) + 1024;
  static constexpr bool StagedCombine = StagedCombine_;

  static_assert(T_ == Dtype::bf16 || T_ == Dtype::f16, "the dual mode takes bf16 or f16");
  static_assert(HeadDim_ == 64 || HeadDim_ == 128, "the dual mode takes head dims 64 and 128");
  static_assert(BN_ % 16 == 0 && BN_ >= 16 && BN_ <= 256, "BN must be a multiple of 16 in [16, 256]");
  static_assert(Stages_ >= 2 && Stages_ <= 8, "Stages must be in [2, 8]");
  static_assert(64 * HeadDim_ * 4 <= QBytes, "x_1 in f32 fits in Q's shared memory");
  static_assert(64 * HeadDim_ * 2 <= Stages_ * KStageBytes, "the staged combine's rows fit in the K ring");
  static_assert(SmemBytes <= 232448, "Q and the K/V rings do not fit in 227 KB of shared memory");
  static_assert(QBuffers_ == 1 || (QBuffers_ == 2 && Persistent_), "QBuffers: 1, or 2 with persistent blocks");
  static_assert(!Persistent_ || StagedCombine_, "persistent dual blocks take the staged combine");
  static_assert(Cluster_ == 1 || (Cluster_ == 2 && HeadDim_ == 64), "Cluster: 1, or 2 at head dim 64 (the ranks take a 128-row pair's two work tiles)");
  // setmaxnreg only moves registers within the block's launch allocation (384 threads × 168 under
  // __launch_bounds__(384, 1)): a setmaxnreg.inc beyond it waits forever.
  static_assert(128 * (ProducerRegisters + 2 * ConsumerRegisters) <= 384 * 168, "the warpgroups' registers exceed the launch's 384 x 168");
};

// The work items: 64-row work tiles, or with DualConfig::Cluster 2 pairs of them (128 rows of one head).
template <class C>
SOLDER_ATTN_HD constexpr long long dual_work_items(C, const AttentionShape& shape) {
  if constexpr (C::Cluster == 1) {
    return total_tiles(C{}, shape);
  } else {
    return (long long)ceil_div(ceil_div(shape.seq_q > 0 ? shape.seq_q : 1, C::BM), 2) * (shape.batch > 0 ? shape.batch : 1) *
           (shape.heads > 0 ? shape.heads : 1);
  }
}

// One block per work tile, or with DualConfig::Persistent and persistent_blocks > 0 (the SM count) at
// most that many blocks, which deal out the work tiles in rounds. With DualConfig::Cluster 2: one cluster
// of two blocks per pair of work tiles, at most persistent_blocks / 2 clusters (launch with a cluster
// dimension of C::Cluster; persistent_blocks ≥ 2).
template <class C>
SOLDER_ATTN_HD constexpr LaunchGeometry dual_launch_config(C, const AttentionShape& shape, int persistent_blocks = 0) {
  LaunchGeometry g{};
  long long clusters = dual_work_items(C{}, shape);
  const int limit = persistent_blocks / C::Cluster;
  if (C::Persistent && limit > 0 && clusters > limit) clusters = limit;
  g.grid[0] = static_cast<unsigned>(clusters * C::Cluster);
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
  static_assert(!C::Persistent || epilogue_staged_combine<Epilogue>(0), "persistent dual blocks need an Epilogue of kStagedCombine");
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
  uint64_t* q_empty = q_full + C::QBuffers;  // (unused without persistent blocks: one Q per block)
  uint64_t* k_full = q_empty + C::QBuffers;
  uint64_t* k_empty = k_full + C::Stages;
  uint64_t* v_full = k_empty + C::Stages;
  uint64_t* v_empty = v_full + C::Stages;

  // The work tiles (config.cuh's order: head-major, the query tiles of a head last to first): one per
  // block, or with persistent blocks tile round · blocks + b in round `round` (b reversed in odd rounds).
  // With clusters of two the items are pairs of work tiles, dealt out to the clusters the same way, and
  // rank r of a cluster takes work tile 2·pair + r of the pair (a rank whose tile lies past seq_q runs
  // the pair's key tiles on rows it never stores: its partner's stages need its loads and releases).
  const int tiles_m = ceil_div(shape.seq_q, C::BM);
  const int pairs_m = ceil_div(tiles_m, C::Cluster);  // items per head
  const int total = static_cast<int>(dual_work_items(C{}, shape));
  const int rank = C::Cluster == 1 ? 0 : detail::cluster_rank();
  auto tile_index = [&](int round) {
    const int blocks = static_cast<int>(gridDim.x) / C::Cluster, b = static_cast<int>(blockIdx.x) / C::Cluster;
    if constexpr (C::Persistent) {
      return round * blocks + ((round & 1) ? blocks - 1 - b : b);
    } else {
      return round == 0 ? b : total;
    }
  };
  struct Work {
    int bh, row0, bh_kv, begin, count;
  };
  auto work_of = [&](int t) {
    Work w;
    w.bh = t / pairs_m;
    const int first_row = (pairs_m - 1 - t % pairs_m) * C::Cluster * C::BM;  // of the item
    w.row0 = first_row + rank * C::BM;
    const int batch = w.bh / shape.heads, head = w.bh % shape.heads;
    w.bh_kv = batch * shape.heads_kv + head / (shape.heads / shape.heads_kv);
    const int last_key_tile = ceil_div(shape.seq_k, C::BN);
    int begin = 0, end = 0;
    // the key tiles of the item's rows (with a cluster both ranks run the union: a key tile that one
    // rank's rows do not see is masked on every row, an exact no-op of the online softmax and of P·V)
    mask.key_tiles(w.bh, first_row, C::Cluster * C::BM, shape.seq_k, C::BN, &begin, &end);
    if (begin < 0) begin = 0;
    if (end > last_key_tile) end = last_key_tile;
    w.begin = begin;
    w.count = end > begin ? end - begin : 0;
    return w;
  };

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int thread = static_cast<int>(threadIdx.x) % 128;
  if (threadIdx.x == 0) {
    for (int b = 0; b < C::QBuffers; ++b) {
      cuda::ptx::mbarrier_init(&q_full[b], 1);
      cuda::ptx::mbarrier_init(&q_empty[b], 2 * 4);  // one arrival per consumer warp
    }
    for (int s = 0; s < C::Stages; ++s) {
      cuda::ptx::mbarrier_init(&k_full[s], 1);
      cuda::ptx::mbarrier_init(&v_full[s], 1);
      // one arrival per consumer warp (with a cluster: of both blocks, each stage is refilled in both at once)
      cuda::ptx::mbarrier_init(&k_empty[s], 2 * 4 * C::Cluster);
      cuda::ptx::mbarrier_init(&v_empty[s], 2 * 4 * C::Cluster);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  if constexpr (C::Cluster > 1) {
    // both blocks' mbarriers initialized before either block's multicast or remote arrival reaches them
    detail::cluster_sync();
  } else {
    __syncthreads();
  }

  if (warpgroup == 0) {
    // ---- Producer: one thread issues every TMA load ----
    cutlass::arch::warpgroup_reg_dealloc<C::ProducerRegisters>();
    if (thread == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&q) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&k) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&v) : "memory");
      uint32_t loaded = 0, q_loads = 0;  // uses of the K/V rings and of the Q buffers so far
      for (int round = 0, t = tile_index(0); t < total; t = tile_index(++round)) {
        const Work w = work_of(t);
        // Without persistent blocks a tile without key tiles loads nothing; with them every tile takes a Q
        // buffer (its consumers exchange x through it).
        if (!C::Persistent && w.count == 0) break;
        // (with a cluster k_batch0 is this rank's half: the one K tile it loads)
        const int k_batch0 = operand_batch(w.bh_kv, shape.heads_kv, shape.k_heads, shape.k_head0 + (C::Cluster > 1 ? rank * shape.heads_kv : 0));
        const int k_batch1 = C::Cluster > 1 ? 0 : operand_batch(w.bh_kv, shape.heads_kv, shape.k_heads, shape.k_head0 + shape.heads_kv);
        const int v_batch = operand_batch(w.bh_kv, shape.heads_kv, shape.v_heads, shape.v_head0);
        auto load_k = [&](int n) {
          const int j = w.begin + n;
          const int stage = detail::stage_of<C::Stages>(loaded + n);
          detail::wait_parity(&k_empty[stage], detail::phase_of<C::Stages>(loaded + n) ^ 1u);
          cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &k_full[stage],
                                               static_cast<uint32_t>(C::KStageBytes));
          T* k_stage = smem_k + stage * (C::KStageBytes / 2);
          if constexpr (C::Cluster > 1) {
            // rank r loads half r's K tile into both blocks (each block's barrier expects both halves)
#pragma unroll
            for (int chunk = 0; chunk < C::Chunks; ++chunk)
              detail::tma_load_multicast(k_stage + rank * (C::KVTileBytes / 2) + chunk * C::BN * 64, k, 64 * chunk, j * C::BN, k_batch0,
                                         &k_full[stage], uint16_t(0x3));
          } else {
#pragma unroll
            for (int chunk = 0; chunk < C::Chunks; ++chunk) {
              detail::tma_load(k_stage + chunk * C::BN * 64, k, 64 * chunk, j * C::BN, k_batch0, &k_full[stage]);
              detail::tma_load(k_stage + (C::KVTileBytes / 2) + chunk * C::BN * 64, k, 64 * chunk, j * C::BN, k_batch1, &k_full[stage]);
            }
          }
        };
        auto load_v = [&](int n) {
          const int j = w.begin + n;
          const int stage = detail::stage_of<C::Stages>(loaded + n);
          detail::wait_parity(&v_empty[stage], detail::phase_of<C::Stages>(loaded + n) ^ 1u);
          cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &v_full[stage],
                                               static_cast<uint32_t>(C::KVTileBytes));
          if constexpr (C::Cluster > 1) {
            // V of key tile j from rank j % 2, into both blocks
            if (j % 2 == rank) {
#pragma unroll
              for (int chunk = 0; chunk < C::Chunks; ++chunk)
                detail::tma_load_multicast(smem_v + (stage * C::Chunks + chunk) * C::BN * 64, v, 64 * chunk, j * C::BN, v_batch, &v_full[stage],
                                           uint16_t(0x3));
            }
          } else {
#pragma unroll
            for (int chunk = 0; chunk < C::Chunks; ++chunk)
              detail::tma_load(smem_v + (stage * C::Chunks + chunk) * C::BN * 64, v, 64 * chunk, j * C::BN, v_batch, &v_full[stage]);
          }
        };
        // With one Q buffer on persistent blocks the next tile's Q waits for this tile's epilogue: its first
        // K stage is issued before it.
        constexpr bool kKFirst = C::Persistent && C::QBuffers == 1;
        const bool k_first = kKFirst && round > 0 && w.count > 0;
        if (k_first) load_k(0);
        const int qb = detail::stage_of<C::QBuffers>(q_loads);
        if constexpr (C::Persistent) detail::wait_parity(&q_empty[qb], detail::phase_of<C::QBuffers>(q_loads) ^ 1u);
        ++q_loads;
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &q_full[qb],
                                             static_cast<uint32_t>(C::QBytes));
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int chunk = 0; chunk < C::Chunks; ++chunk)
            detail::tma_load(smem_q + (qb * 2 * C::Chunks + half * C::Chunks + chunk) * 64 * 64, q, 64 * chunk, w.row0,
                             operand_batch(w.bh, shape.heads, shape.q_heads, shape.q_head0 + half * shape.heads), &q_full[qb]);
        for (int n = 0; n < w.count; ++n) {
          if (!(k_first && n == 0)) load_k(n);
          load_v(n);
        }
        loaded += static_cast<uint32_t>(w.count);
      }
    }
  } else {
    // ---- Consumers: consumer c computes half c of the same 64 rows ----
    cutlass::arch::warpgroup_reg_alloc<C::ConsumerRegisters>();
    const int consumer = warpgroup - 1;
    const int warp = thread / 32, lane = thread % 32;
    const uint64_t k_desc = wgmma::k_major(wgmma::shared_address(smem_k) + consumer * C::KVTileBytes);
    const uint64_t v_desc = wgmma::mn_major(wgmma::shared_address(smem_v), C::BN);
    wgmma::Fragment<float, C::BN / 2> acc_s;
    wgmma::Fragment<float, C::HeadDim / 2> acc_o;
    wgmma::Fragment<uint32_t, C::BN / 4> p;
    const int col_lane = 2 * (lane % 4);

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
    // a K or V stage: with a cluster, released in both blocks (the next multicast refills both)
    auto release_stage = [&](uint64_t* bar) {
      __syncwarp();
      if (lane == 0) {
        cuda::ptx::mbarrier_arrive(bar);
        if constexpr (C::Cluster > 1) detail::mbarrier_arrive_remote(bar, rank ^ 1);
      }
    };
    auto to_p = [&] {
#pragma unroll
      for (int i = 0; i < C::BN / 4; ++i) p(i) = detail::pack2<T>(acc_s(2 * i), acc_s(2 * i + 1));
    };
    uint32_t consumed = 0, q_uses = 0;  // uses of the K/V rings and of the Q buffers so far
    for (int round = 0, t = tile_index(0); t < total; t = tile_index(++round)) {
      const Work w = work_of(t);
      const int bh = w.bh, row0 = w.row0, begin = w.begin, count = w.count;
      const int row_base = row0 + 16 * warp + lane / 4;
      const int qb = detail::stage_of<C::QBuffers>(q_uses);
      const uint32_t q_phase = detail::phase_of<C::QBuffers>(q_uses);
      if (C::Persistent || count > 0) ++q_uses;
      unsigned char* q_buffer = base + qb * C::QBytes;
      const uint64_t q_desc = wgmma::k_major(wgmma::shared_address(q_buffer) + consumer * C::QTileBytes);

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
      // the weights per 16 on the FMA pipe (functors.cuh, kExp2Emulated)
      constexpr int kEmulated = score_exp2_emulated<Score>(0, SOLDER_ATTN_EXP2_EMULATED_DEFAULT);
      state.init();
      wgmma::clear(acc_o);

      // With persistent blocks every tile's Q buffer is waited for: the exchange below writes into it.
      if (C::Persistent && count == 0) detail::wait_parity(&q_full[qb], q_phase);
      if (count > 0) {
        float correction[2];
        auto rescale_o = [&] {
#pragma unroll
          for (int i = 0; i < C::HeadDim / 2; ++i) acc_o(i) *= correction[(i / 2) % 2];
        };
        detail::wait_parity(&q_full[qb], q_phase);
        {
          const int ks = detail::stage_of<C::Stages>(consumed);
          detail::wait_parity(&k_full[ks], detail::phase_of<C::Stages>(consumed));
          detail::named_sync(my_turn, kTurnThreads);
          issue_s(ks);
          detail::named_arrive(next_turn, kTurnThreads);
          wgmma::wait<0>();
          wgmma::fence(acc_s);
          release_stage(&k_empty[ks]);
          logits(begin);
          state.template update<0, kEmulated>(acc_s, score.scale_log2, correction);
          to_p();
        }
        for (int n = 1; n < count; ++n) {
          const int ks = detail::stage_of<C::Stages>(consumed + n), vs = detail::stage_of<C::Stages>(consumed + n - 1);
          detail::wait_parity(&k_full[ks], detail::phase_of<C::Stages>(consumed + n));
          detail::named_sync(my_turn, kTurnThreads);
          issue_s(ks);
          rescale_o();
          detail::wait_parity(&v_full[vs], detail::phase_of<C::Stages>(consumed + n - 1));
          issue_o(vs);
          detail::named_arrive(next_turn, kTurnThreads);
          wgmma::wait<1>();
          wgmma::fence(acc_s);
          release_stage(&k_empty[ks]);
          logits(begin + n);
          state.template update<0, kEmulated>(acc_s, score.scale_log2, correction);
          wgmma::wait<0>();
          wgmma::fence(acc_o);
          wgmma::fence(p);
          release_stage(&v_empty[vs]);
          to_p();
        }
        {
          const int vs = detail::stage_of<C::Stages>(consumed + count - 1);
          detail::wait_parity(&v_full[vs], detail::phase_of<C::Stages>(consumed + count - 1));
          detail::named_sync(my_turn, kTurnThreads);
          rescale_o();
          issue_o(vs);
          detail::named_arrive(next_turn, kTurnThreads);
          wgmma::wait<0>();
          wgmma::fence(acc_o);
          release_stage(&v_empty[vs]);
        }
        consumed += static_cast<uint32_t>(count);
      }

      // ---- Epilogue: x_c = O / Σ p (zeros for rows that see no key; NaN with Mask::kEmptyRowNaN) ----
      float inverse[2];
      state.finish(inverse);
      if constexpr (mask_empty_row_nan<Mask>(0)) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
          if (inverse[r] == 0.0f) inverse[r] = __int_as_float(0x7fc00000);
      }
      constexpr bool kStagedCombine = C::StagedCombine && epilogue_staged_combine<Epilogue>(0);
      if constexpr (kStagedCombine) {
        // Consumer kC's half of the staged combine (kC a constant: the fragment's indices stay static).
        auto staged_combine = [&](auto consumer_index) {
          constexpr int kC = decltype(consumer_index)::value, kOther = 1 - kC;
          constexpr int kStagedBarrier = 5;
          constexpr int kOwn = C::HeadDim / 4;  // fragment elements of this consumer's columns
          // The Q buffer is free once both consumers' products are done (each one's last wgmma wait above);
          // the async proxy's reads of it (and of the K ring) ordered before the generic writes below.
          detail::named_sync(kQDoneBarrier, kTurnThreads);
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          const uint32_t exchange = static_cast<uint32_t>(__cvta_generic_to_shared(q_buffer));
          // this consumer's x of the other's columns: region kC, element i
#pragma unroll
          for (int i = 0; i < kOwn; ++i) {
            const float x = acc_o(kOther * kOwn + i) * inverse[((kOther * kOwn + i) / 2) % 2];
            asm volatile("st.shared.f32 [%0], %1;" ::"r"(exchange + ((kC * kOwn + i) * 128 + thread) * 4), "f"(x));
          }
          detail::named_sync(kX1Barrier, kTurnThreads);
          float theirs[kOwn];
#pragma unroll
          for (int i = 0; i < kOwn; ++i)
            asm volatile("ld.shared.f32 %0, [%1];" : "=f"(theirs[i]) : "r"(exchange + ((kOther * kOwn + i) * 128 + thread) * 4));
          // The pairs of x_0 and x_1 of this consumer's columns (i even, fragment element kC·kOwn + i). Its own
          // x rounded to f32 on its own (__fmul_rn: not contracted into the combine's arithmetic), as the
          // other's x is through shared memory and as the pair-by-pair combine receives both: the same bits.
          auto pair = [&](int i, float* x0, float* x1) {
            const int at = kC * kOwn + i, r = (at / 2) % 2;
            const float m0 = __fmul_rn(acc_o(at), inverse[r]), m1 = __fmul_rn(acc_o(at + 1), inverse[r]);
            x0[0] = kC == 0 ? m0 : theirs[i];
            x0[1] = kC == 0 ? m1 : theirs[i + 1];
            x1[0] = kC == 0 ? theirs[i] : m0;
            x1[1] = kC == 0 ? theirs[i + 1] : m1;
          };
          const bool staged = (reinterpret_cast<uintptr_t>(epilogue.staged_row(0, 0)) & 15) == 0 && (C::HeadDim * 2) % 16 == 0;
          if (staged) {
            // Every word first, one row of the thread's two after the other: no store between the packs, so
            // the epilogue's own inputs (a 0-d λ) are read once per row.
            uint32_t words[kOwn / 2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const int row = row_base + 8 * r;
              if (row < shape.seq_q) {
#pragma unroll
                for (int i = 0; i < kOwn; i += 2) {
                  if (((kC * kOwn + i) / 2) % 2 != r) continue;
                  float x0[2], x1[2];
                  pair(i, x0, x1);
                  words[i / 2] = epilogue.staged_combine(bh, row, 8 * ((kC * kOwn + i) / 4) + col_lane, x0[0], x0[1], x1[0], x1[1]);
                }
              } else {
#pragma unroll
                for (int i = 0; i < kOwn; i += 2)
                  if (((kC * kOwn + i) / 2) % 2 == r) words[i / 2] = 0u;
              }
            }
            constexpr int kRowChunks = C::HeadDim / 8;  // 16-byte chunks of a row
            // The rows: in the idle K ring with one block per work tile; with persistent blocks (the ring
            // holds the next tile's stages) in the Q buffer, once every exchange read is done.
            uint32_t slice;
            if constexpr (C::Persistent) {
              constexpr int kReadBarrier = 6;
              detail::named_sync(kReadBarrier, kTurnThreads);
              slice = exchange;
            } else {
              slice = static_cast<uint32_t>(__cvta_generic_to_shared(base + C::KOffset));
            }
            // 64-column panels of 64 rows × 128 bytes, 16-byte chunk c of row l at chunk c ^ (l % 8). Writes:
            // this thread's rows 16·warp + lane/4 (+ 8), so the 8 rows of one store hit 8 different chunks.
            const uint32_t to_row = slice + (16 * warp + lane / 4) * 128 + col_lane * 2;
            const uint32_t swizzle = (lane / 4) * 16;
#pragma unroll
            for (int i = 0; i < kOwn; i += 2) {
              const int at = kC * kOwn + i;
              const int col = 8 * (at / 4);  // + col_lane
              const uint32_t to = to_row + (col / 64) * 64 * 128 + ((at / 2) % 2) * 8 * 128 + ((((col % 64) / 8) * 16) ^ swizzle);
              asm volatile("st.shared.b32 [%0], %1;" ::"r"(to), "r"(words[i / 2]));
            }
            detail::named_sync(kStagedBarrier, kTurnThreads);  // every row packed
            // Reads: 256 threads cover 256 / kRowChunks rows per step, 8 consecutive lanes one 128-byte panel
            // row (conflict-free), stored as full 128-byte lines.
            constexpr int kRowsPerStep = 256 / kRowChunks;
            const int all = kC * 128 + thread;
            const int first_local = all / kRowChunks, chunk = all % kRowChunks;
            const uint32_t from = slice + (chunk / 8) * 64 * 128 + first_local * 128 + (((chunk % 8) ^ (first_local % 8)) * 16);
#pragma unroll
            for (int n = 0; n < 64 / kRowsPerStep; ++n) {
              const int row = row0 + first_local + kRowsPerStep * n;  // (local % 8 = first_local % 8: kRowsPerStep 32 or 16)
              uint32_t x, y, z, u;
              asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(x), "=r"(y), "=r"(z), "=r"(u) : "r"(from + kRowsPerStep * n * 128));
              if (row < shape.seq_q) {
                unsigned char* to = static_cast<unsigned char*>(epilogue.staged_row(bh, row)) + 16 * chunk;
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(x), "r"(y), "r"(z), "r"(u) : "memory");
              }
            }
          } else {
#pragma unroll
            for (int i = 0; i < kOwn; i += 2) {
              const int at = kC * kOwn + i;
              const int row = row_base + 8 * ((at / 2) % 2);
              float x0[2], x1[2];
              pair(i, x0, x1);
              if (row < shape.seq_q) epilogue.combine(bh, row, 8 * (at / 4) + col_lane, x0[0], x0[1], x1[0], x1[1]);
            }
          }
        };
        if (consumer == 0) staged_combine(detail::Index<0>{});
        else staged_combine(detail::Index<1>{});
        if constexpr (C::Persistent) {
          // this warp's reads of the Q buffer are done; the generic accesses ordered before the next TMA write
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          release(&q_empty[qb]);
        }
      } else if (consumer == 1) {
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
      }
    }
    if (consumer == 0) detail::named_sync(my_turn, kTurnThreads);  // the ring's opening arrival
  }
  // With a cluster no block leaves while its partner may still arrive on its mbarriers.
  if constexpr (C::Cluster > 1) {
    __syncwarp();
    detail::cluster_sync();
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
