// The sm_90a attention skeleton's compile-time configuration, problem shape and launch geometry.
//
// Like gemm/config.cuh this header has no CuTe and no CUDA dependency: it compiles with nvcc, NVRTC and
// a plain host C++ compiler, so that the code generator and the cost model can size launches without
// instantiating the kernel (sm90_attention.cuh).
//
// Meaning of one launch, for every batch b < shape.batch, query head h < shape.heads, query row
// i < shape.seq_q and column d < HeadDim, with g = h / (heads / heads_kv) the key/value head:
//     s_j   = score(b·heads + h, i, j, Σ_d q[b,h,i,d] · k[b,g,j,d])    (f32 dot product, wgmma)
//     p_j   = exp(scale · (s_j − max_j' s_j'))  over the keys j < seq_k the mask lets row i see
//     o[b,h,i,d] = Σ_j p_j · v[b,g,j,d] / Σ_j p_j                          (epilogue(b·heads + h, i, d, …))
// (the functors are in functors.cuh; the default score is the dot product itself).
#pragma once

#include "../gemm/config.cuh"  // Dtype, TensorMap, ceil_div

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOLDER_ATTN_HD __host__ __device__
#else
#define SOLDER_ATTN_HD
#endif

namespace solder::attention {

using solder::gemm::ceil_div;
using solder::gemm::Dtype;
using solder::gemm::TensorMap;

// The problem. q, o: [batch][heads][seq_q][HeadDim]; k, v: [batch][heads_kv][seq_k][HeadDim] (rows may
// be padded: the tensor maps carry the strides). heads must be a multiple of heads_kv (grouped-query
// attention: heads / heads_kv query heads share one key/value head). Query rows past seq_q are never
// stored; key rows past seq_k are read as zeros by TMA and masked out of the softmax.
struct AttentionShape {
  int batch = 1;
  int heads = 1;
  int heads_kv = 1;
  int seq_q = 0;
  int seq_k = 0;
  // Operands whose lead dims hold more heads than the launch's (a fixed index in a dim between the batch
  // and the head dims: differential attention's q[b, 1, h] of a [B, 2, H, S, D] tensor): head h of batch
  // b reads batch coordinate b · X_heads + X_head0 + h of X's tensor map (batch = B · X_heads there).
  // 0 (the default): the plain layout, b · heads + h (q) and b · heads_kv + g (k, v).
  int q_heads = 0, q_head0 = 0;
  int k_heads = 0, k_head0 = 0;
  int v_heads = 0, v_head0 = 0;
};

// The batch coordinate of an operand's tensor map for head `bh` = b · heads + h (AttentionShape above).
SOLDER_ATTN_HD inline int operand_batch(int bh, int heads, int all, int head0) {
  return all > 0 ? (bh / heads) * all + head0 + bh % heads : bh;
}

// One tile configuration.
//   T          bf16, f16 or e4m3 (Q, K, V and P; f32 accumulation and softmax). e4m3 (FP8): S = Q·Kᵀ and
//              O += P·V on fp8 wgmma (k 32), P rounded to e4m3 (satfinite, nearest even) in the A-operand
//              layout of the fp8 instruction; fp8 wgmma reads B K-major only, so each V tile ([key][d]) is
//              transposed in shared memory by the producer warpgroup's warps 1..3 into a Vᵀ ring ([d][key],
//              keys permuted within each 16 so that P's fp8 registers come straight from the accumulator:
//              sm90_attention.cuh, "FP8"). HeadDim 64 (rows of 64 bytes, 64-byte swizzle: RowBytes), 128 or
//              256, BN 128, not with a staged bias, the staged epilogue, Dynamic or a data mask.
//   HeadDim    64, 128 (or 256 with few stages: shared memory permitting).
//   BN         keys per tile: a multiple of 16 in [16, 256] (the N of S = Q·Kᵀ and the K of O += P·V).
//   Stages     depth of the K and V rings (2 … 8; each stage holds one K and one V tile).
//   Consumers  consumer warpgroups, 64 query rows each (BM = 64·Consumers): 2 or 3. They take turns
//              issuing their products (ping-pong), so one's softmax overlaps the other's MMAs.
//   Persistent blocks loop over work tiles (launch_config's persistent_blocks); false: one block per
//              work tile, and the loop's registers are saved (3 consumers at 160 registers need them).
//   StagedBias a score's bias staged by the producer into each K stage (functors.cuh, "A staged bias"):
//              bit 1: a 16-bit [BM × BN] tile (a pair bias), bit 2: a byte vector of 128 keys (a column
//              mask). 0: none.
//   QBuffers   Q tiles in shared memory: 1, or 2 with Persistent (the producer loads the next work
//              tile's Q, and then its K and V, while the consumers still read this tile's Q; with 1 it
//              waits until every consumer has issued this tile's last S).
//   Stagger    turns of the consumers' ring by which consumer 1 runs behind consumer 0 (2 consumers; 0:
//              one turn apart, both reach a work tile's first S, last P·V and epilogue together). With
//              Stagger = L consumer 1 starts L turns late and consumer 0 ends with L empty turns, so the
//              one's tile boundary (last P·V, epilogue, first S and its softmax) falls between the other's
//              full S + P·V issues. Both still read every K/V stage of one ring, so a stage stays L turns
//              longer: L ≤ Stages − 1 keeps the ring free of deadlock, and L ≤ 3 with two Q buffers (1
//              with one) the Q buffers: consumer 0 may wait for the Q after next while consumer 1 still
//              reads this tile's (a protocol model checks both bounds:
//              tests/gpu/attention_skeleton/stagger_model.py). Not with a data mask (its list buffers
//              assume no lag).
//   Dynamic    persistent blocks claim work tiles from a counter in global memory instead of dealing the
//              longest-first list out in fixed rounds: block b takes entry b first, then whichever entry
//              is next when its producer starts loading a tile, so blocks that drew short tiles (causal:
//              1 … 8 key tiles per work tile) take more of them. The counter resets itself at the end of
//              each launch (the last block to finish), so launches of the kernels of one module must not
//              overlap in time (one stream, as every Solder launch is). With Persistent, not with a data
//              mask (its classifier warps build the lists by rounds), and not with Stagger: consumer 0
//              passes work tiles without key tiles with no turn, so it can wait on a slot of the two-slot
//              work ring that consumer 1, still owed Stagger turns, has not read (a deadlock, found by the
//              device test's St2 case at offset -200 on one block).
//   FreeConsumers  no turn ring: each consumer issues its products as soon as its own operands are there
//              (its K or V stage landed, its softmax done), so the consumers drift apart by up to the K/V
//              ring's depth (both still read every stage; a stage is refilled once both released it) and
//              one consumer's work-tile boundary overlaps the other's products, at the cost of the
//              ping-pong order inside a tile. Free of deadlock with and without Dynamic at every depth
//              and Q buffer count (tests/gpu/attention_skeleton/stagger_model.py). Two consumers only
//              (with three, at 160 registers, softcap's free kernel spills 24 bytes); not with Stagger
//              (a lag of turns, and there are none) nor with a data mask (its list buffers assume no lag).
//   StagedEpilogue  the output through shared memory (sm90_attention.cuh, "Staged epilogue"): each consumer
//              writes its 64 × HeadDim tile of stored words (an Epilogue with kStaged) into its own slice of
//              a dedicated buffer (BM × HeadDim × 2 bytes, 128-byte swizzled like TMA's), then stores whole
//              rows with 16-byte coalesced stores (full 128-byte lines per 8 lanes) instead of one 4-byte
//              store per pair of columns. An Epilogue without kStaged keeps the per-pair stores. Without
//              Persistent the buffer is the consumer's own Q rows (its last S is done before its epilogue and
//              the block has no next work tile whose Q would land there): no shared memory of its own; on
//              persistent blocks the same with QRowsEpilogue.
//   PostedWork  with Dynamic: the producer posts each work tile's setup (head, key/value head, first row, the
//              mask's key-tile range: `locate`'s result) with its entry in the work ring, so the consumers
//              read it instead of computing it (integer divisions by run-time values, the mask's range),
//              and each consumer takes the next entry before its epilogue's stores rather than after them.
//              The same work tiles in the same order: the outputs are bit for bit those without it. With a
//              data mask (Dynamic persistent blocks) the classifier warps, which locate each work tile to
//              classify it, post its setup with its list instead, and the consumers take the next list
//              after their stores as before (a list holds no ring slot).
//   QRowsEpilogue  with Persistent and StagedEpilogue: the staged epilogue's buffer is the consumer's own Q
//              rows of the work tile (its Q buffer), as without Persistent (EpilogueInQ), so the buffer
//              takes no shared memory (the staggered hd64 kernel keeps its sixth K/V stage). Each consumer
//              then releases its Q buffer after its epilogue's reads instead of after its last S, so the
//              producer's load of the Q after next (two Q buffers; the next with one) waits for that
//              epilogue: free of deadlock with Stagger <= 2 and two Q buffers, Stagger 0 with one (with
//              Stagger 3, or 1 on one buffer, consumer 0 waits for a Q whose buffer consumer 1, still owed
//              turns, has not released: tests/gpu/attention_skeleton/stagger_model.py, late_q). A work tile
//              without key tiles has no Q buffer and stores pair by pair. Not with a data mask.
template <Dtype T_, int HeadDim_, int BN_, int Stages_, int Consumers_ = 2, bool Persistent_ = false, int StagedBias_ = 0,
          int QBuffers_ = 1, int Stagger_ = 0, bool Dynamic_ = false, bool FreeConsumers_ = false, bool StagedEpilogue_ = false,
          bool PostedWork_ = false, bool QRowsEpilogue_ = false>
struct Config {
  static constexpr Dtype T = T_;
  static constexpr int HeadDim = HeadDim_;
  static constexpr int BN = BN_;
  static constexpr int Stages = Stages_;
  static constexpr int Consumers = Consumers_;
  static constexpr bool Persistent = Persistent_;
  static constexpr int QBuffers = QBuffers_;
  static constexpr int Stagger = Stagger_;
  static constexpr bool Dynamic = Dynamic_;
  static constexpr bool FreeConsumers = FreeConsumers_;
  static constexpr bool StagedEpilogue = StagedEpilogue_;
  static constexpr bool PostedWork = PostedWork_;
  static constexpr bool QRowsEpilogue = QRowsEpilogue_;
  static constexpr int BM = 64 * Consumers_;
  static constexpr int Threads = 128 * (Consumers_ + 1);  // + one producer warpgroup
  static constexpr int ElementBytes = solder::gemm::dtype_bytes(T_);
  static constexpr bool Fp8 = solder::gemm::dtype_is_fp8(T_);
  // Q, K and V rows in shared memory: column chunks of RowBytes, each TMA's box row and swizzle span: 128
  // bytes (128-byte swizzle), or 64 for e4m3 at head dim 64 (the 64-byte swizzle: one 64-byte chunk a row).
  static constexpr int RowBytes = HeadDim_ * ElementBytes < 128 ? HeadDim_ * ElementBytes : 128;
  static constexpr int ChunkElements = RowBytes / ElementBytes;        // elements of one column chunk
  static constexpr int Chunks = HeadDim_ * ElementBytes / RowBytes;    // column chunks of a row
  // Registers per thread after setmaxnreg (producer, consumer): 128 · (P + C · Consumers) ≤ 64 K.
  static constexpr int ProducerRegisters = Consumers_ == 2 ? 24 : 32;
  static constexpr int ConsumerRegisters = Consumers_ == 2 ? 240 : 160;
  // TMA box rows of the tensor maps (tile_rows for runtime::encode_gemm_operand; tile_k = ChunkElements).
  static constexpr int QBoxRows = 64;
  static constexpr int KVBoxRows = BN_;
  static constexpr int QBytes = BM * HeadDim_ * ElementBytes;
  static constexpr int KVTileBytes = BN_ * HeadDim_ * ElementBytes;  // one K or one V tile
  // FP8: the Vᵀ ring (HeadDim rows of BN keys, 128-byte swizzled: P·V's K-major B), after the V ring.
  static constexpr int VtTileBytes = Fp8 ? HeadDim_ * BN_ : 0;
  // The staged bias of one K stage: the tile (64-column chunks of BM rows × 128 bytes, 128-byte
  // swizzled like K) and the column bytes (one 128-byte box, not swizzled).
  static constexpr int StagedBias = StagedBias_;
  static constexpr int BiasTileBytes = (StagedBias_ & 1) ? BM * BN_ * 2 : 0;
  static constexpr int BiasColumnBytes = (StagedBias_ & 2) ? 128 : 0;
  static constexpr int BiasTileOffset = QBuffers_ * QBytes + 2 * Stages_ * KVTileBytes + Stages_ * VtTileBytes;
  static constexpr int BiasColumnOffset = BiasTileOffset + Stages_ * BiasTileBytes;
  // The staged epilogue's buffer: 64 × HeadDim 16-bit words per consumer (a multiple of 128 bytes from
  // the 1024-aligned base, so each 128-byte row of its swizzled panels starts a bank line). Without
  // Persistent, consumer c's slice is its own Q rows (Q buffer 0 at c · 64 · HeadDim · 2, the same size
  // and alignment), and the buffer takes no bytes; with QRowsEpilogue the same on persistent blocks (the
  // slice in the work tile's Q buffer).
  static constexpr bool EpilogueInQ = StagedEpilogue_ && (!Persistent_ || QRowsEpilogue_);
  static constexpr int EpilogueBytes = StagedEpilogue_ && !EpilogueInQ ? BM * HeadDim_ * 2 : 0;
  static constexpr int EpilogueOffset = BiasColumnOffset + Stages_ * BiasColumnBytes;
  static constexpr int BarrierOffset = EpilogueOffset + EpilogueBytes;
  // Q (QBuffers tiles), the K ring, the V ring (FP8: and the Vᵀ ring), the staged bias, the staged
  // epilogue's buffer, 2·QBuffers + 4·Stages mbarriers (FP8: + Stages, Vᵀ written), 1 KB of slack to
  // align to 1024 bytes.
  static constexpr int SmemBytes = BarrierOffset + 8 * (2 * QBuffers_ + (Fp8 ? 5 : 4) * Stages_) + 1024;

  static_assert(T_ == Dtype::bf16 || T_ == Dtype::f16 || T_ == Dtype::e4m3, "the attention skeleton takes bf16, f16 or e4m3");
  static_assert(!Fp8 || BN_ == 128, "e4m3: BN 128 (one 128-byte Vᵀ row)");
  static_assert(!Fp8 || (StagedBias_ == 0 && !StagedEpilogue_ && !Dynamic_),
                "e4m3: not with a staged bias, the staged epilogue or Dynamic (the Vᵀ warps follow the plain work loop)");
  static_assert(HeadDim_ == 64 || HeadDim_ == 128 || HeadDim_ == 256, "HeadDim must be 64, 128 or 256");
  static_assert(BN_ % 16 == 0 && BN_ >= 16 && BN_ <= 256, "BN must be a multiple of 16 in [16, 256]");
  static_assert(Stages_ >= 2 && Stages_ <= 8, "Stages must be in [2, 8]");
  static_assert(Consumers_ == 2 || Consumers_ == 3, "Consumers must be 2 or 3");
  static_assert(QBuffers_ == 1 || (QBuffers_ == 2 && Persistent_), "QBuffers: 1, or 2 with persistent blocks");
  static_assert(Stagger_ >= 0 && (Stagger_ == 0 || Consumers_ == 2), "Stagger: 0, or with 2 consumers");
  static_assert(Stagger_ <= Stages_ - 1 && Stagger_ <= (QBuffers_ == 2 ? 3 : 1),
                "Stagger: at most Stages - 1 turns, and 3 with two Q buffers (1 with one), or the ring deadlocks");
  static_assert(!Dynamic_ || Persistent_, "Dynamic: with persistent blocks");
  static_assert(!Dynamic_ || Stagger_ == 0, "Dynamic: not with Stagger (the work ring deadlocks on tiles with no key tile)");
  static_assert(!FreeConsumers_ || Stagger_ == 0, "FreeConsumers: not with Stagger (a lag of turns, and there are no turns)");
  static_assert(!FreeConsumers_ || Consumers_ == 2, "FreeConsumers: two consumers (with three, at 160 registers, it spills)");
  static_assert(!PostedWork_ || Dynamic_, "PostedWork: with Dynamic (the work ring carries the posted setup)");
  static_assert(!QRowsEpilogue_ || (Persistent_ && StagedEpilogue_), "QRowsEpilogue: with persistent blocks and the staged epilogue");
  static_assert(!QRowsEpilogue_ || Stagger_ <= (QBuffers_ == 2 ? 2 : 0),
                "QRowsEpilogue: Stagger at most 2 with two Q buffers (0 with one), or the Q release after the epilogue deadlocks");
  static_assert(!StagedEpilogue_ || HeadDim_ <= 128, "StagedEpilogue: head dims 64 and 128 (its swizzled reads assume 8 or 16 rows per step)");
  static_assert(StagedBias_ >= 0 && StagedBias_ <= 3, "StagedBias: bit 1 a tile, bit 2 a column vector");
  static_assert(!(StagedBias_ & 1) || BN_ % 64 == 0, "a staged bias tile needs BN a multiple of 64 (128-byte chunks)");
  static_assert(!(StagedBias_ & 2) || BN_ <= 128, "a staged bias column holds 128 keys");
  static_assert(SmemBytes <= 232448, "Q and the K/V rings do not fit in 227 KB of shared memory");
  static_assert(128 * (ProducerRegisters + Consumers_ * ConsumerRegisters) <= 65536, "setmaxnreg: over 64 K registers");
};

// Launch geometry: a 1-D grid over the work tiles (BM query rows of one head each; batch · heads ·
// ceil(seq_q / BM) of them): one block per tile, head-major, the query tiles of a head in reverse order
// so that the longest causal rows start first. With Config::Persistent and persistent_blocks > 0 (e.g.
// the SM count: one block per SM fits), the grid has at most that many blocks, which deal out a
// longest-first list of the tiles in rounds (sm90_attention.cuh); the producer then loads the next
// tile's Q, K and V while the consumers finish the current one. Without Config::Persistent (or with
// 0) one block per tile.
struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem_bytes = 0;  // dynamic shared memory (needs the > 48 KB opt-in attribute)
};

template <class C>
SOLDER_ATTN_HD constexpr long long total_tiles(C, const AttentionShape& shape) {
  return (long long)ceil_div(shape.seq_q > 0 ? shape.seq_q : 1, C::BM) * (shape.batch > 0 ? shape.batch : 1) *
         (shape.heads > 0 ? shape.heads : 1);
}

template <class C>
SOLDER_ATTN_HD constexpr LaunchGeometry launch_config(C, const AttentionShape& shape, int persistent_blocks = 0) {
  LaunchGeometry g{};
  long long blocks = total_tiles(C{}, shape);
  if (C::Persistent && persistent_blocks > 0 && blocks > persistent_blocks) blocks = persistent_blocks;
  g.grid[0] = static_cast<unsigned>(blocks);
  g.block[0] = C::Threads;
  g.smem_bytes = C::SmemBytes;
  return g;
}

}  // namespace solder::attention
