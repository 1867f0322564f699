// The sm_90a GEMM skeleton's compile-time configuration, problem shape and launch geometry.
//
// This header has no CuTe and no CUDA dependency: it compiles with nvcc, NVRTC and a plain host C++
// compiler (g++), so that the code generator, the cost model and the runtime can compute launch
// geometry and shared-memory sizes without instantiating the kernel. The kernel is in sm90_gemm.cuh.
//
// Meaning of one launch, for every batch b < shape.batch, row m < shape.m, column n < shape.n:
//     acc = Σ_{k < shape.k} A_b(m, k) · B_b(k, n)        (f32 accumulation, wgmma)
//     epilogue(b, m, n, acc)                              (exactly once per in-bounds element)
// and with two B operands (BOperands = 2, a "dual-B" GEMM: gated FFN's gate and up over one A):
//     acc  = Σ_k A_b(m, k) · B_b(k, n),   acc2 = Σ_k A_b(m, k) · B2_b(k, n)
//     epilogue(b, m, n, acc, acc2)
// and with two K ranges (gemm_ranges_kernel: a concatenation along K, nerf_mlp's cat([x, h4]) · w5):
//     acc = Σ_{k < shape.k} A_b(m, k) · B_b(k, n) + Σ_{k < k2} A2_b(m, k) · B2_b(k, n)
//     epilogue(b, m, n, acc)
// each range read through its own pair of tensor maps, in whole K tiles (a range's last tile is
// zero-filled past its K by its maps' bounds, so a boundary need not be a multiple of BK).
// A is read through a TMA tensor map as an (M × K) matrix, B as a (K × N) matrix; see
// src/runtime/tma.h for how the host encodes the maps for a Config (box sizes, swizzle).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOLDER_GEMM_HD __host__ __device__
#else
#define SOLDER_GEMM_HD
#endif

namespace solder::gemm {

// The MMA input types the skeleton takes. tf32 operands are stored as 32-bit floats (4 bytes) whose low
// 13 fraction bits are zero: the code generator rounds them (round_tf32 of the Kernel IR, nearest even)
// before they are staged, so the wgmma never sees bits it would drop.
enum class Dtype : int { bf16 = 0, f16 = 1, e4m3 = 2, e5m2 = 3, tf32 = 4 };

SOLDER_GEMM_HD constexpr int dtype_bytes(Dtype t) {
  return t == Dtype::tf32 ? 4 : (t == Dtype::bf16 || t == Dtype::f16) ? 2 : 1;
}
SOLDER_GEMM_HD constexpr bool dtype_is_fp8(Dtype t) { return t == Dtype::e4m3 || t == Dtype::e5m2; }
// The types wgmma reads K-major only (A and B): fp8 and tf32.
SOLDER_GEMM_HD constexpr bool dtype_k_major_only(Dtype t) { return dtype_is_fp8(t) || t == Dtype::tf32; }

// A CUtensorMap (cuda.h), 128 bytes aligned to 64, as the kernel receives it: encoded on the host by
// solder::runtime::encode_gemm_operand (src/runtime/tma.h) and passed as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// The second K range of a gemm_ranges_kernel launch: its operands' tensor maps (addresses of the
// kernel's own __grid_constant__ parameters) and its K.
struct SecondKRange {
  const TensorMap* a = nullptr;
  const TensorMap* b = nullptr;
  int k = 0;
};

// The problem. Rows of A and columns of B past m / n and the K tail past k are zero-filled by TMA; the
// epilogue is only called for in-bounds elements. broadcast_a / broadcast_b: that operand has one
// batch (its tensor map's batch extent is 1) shared by every batch of the launch.
struct GemmShape {
  int m = 0, n = 0, k = 0;
  int batch = 1;
  int broadcast_a = 0, broadcast_b = 0;
};

// The staged row-store epilogue (sm90_gemm.cuh): a consumer warpgroup writes its 64 rows of 16-bit
// results into shared memory and one bulk copy per row (cp.async.bulk, shared → global) stores them
// while the warpgroup goes on to the next tile. The buffer is the whole BM × BN tile where it fits
// beside the ring in 227 KB, else none (the registers-first row stores). Half a tile, stored in two
// rounds, was tried: its second round's accumulators stay live across the first round's copies, and
// ptxas spilled under the 168-register bound of a 384-thread block (2026-11-27).
// ring_bytes: the ring, its barriers and the alignment slack (Config::RingSmemBytes).
inline constexpr int kGemmSmemLimit = 232448;
// The deepest ring a Config takes (shared memory bounds it first for every tile of 64 + 64 rows or more).
inline constexpr int kMaxStages = 16;
SOLDER_GEMM_HD constexpr int epilogue_staging_columns(int bm, int bn, int b_operands, int ring_bytes) {
  return b_operands == 1 && bn % 32 == 0 && ring_bytes + bm * bn * 2 <= kGemmSmemLimit ? bn : 0;
}
// Dynamic shared memory of a plain skeleton launch (Config::SmemBytes without the Config type).
// A stage holds 128 bytes of K per row of A and of each B, whatever the type.
// pingpong: the ping-pong schedule (Config::Pingpong): two consumer warpgroups of 64 rows each own a
// staging buffer whatever BM (64) is, so the buffer holds 128 rows.
SOLDER_GEMM_HD constexpr int gemm_smem_bytes(int bm, int bn, int stages, int b_operands, bool pingpong = false) {
  const int ring = stages * (bm + b_operands * bn) * 128 + 16 * stages + 1024;
  const int rows = pingpong ? 128 : bm;
  return ring + rows * epilogue_staging_columns(rows, bn, b_operands, ring) * 2;
}

// One tile configuration.
//   TA, TB     MMA input types: both 16-bit and equal (bf16 or f16), both fp8 (e4m3/e5m2, mixed ok), or
//              both tf32 (K-major A and B).
//   BM         64 (one consumer warpgroup) or 128 (two consumer warpgroups, 64 rows each).
//   BN         a multiple of 16 in [16, 256] (the wgmma N; 64 ≤ BN when an operand is MN-major).
//   BK         128 bytes of K: 64 for 16-bit types, 128 for fp8, 32 for tf32 (one 128-byte swizzle atom;
//              4 wgmma k-steps of 32 bytes: K 16, 32 and 8 elements per instruction).
//   Stages     depth of the TMA → wgmma shared-memory ring (2 … 16, as many as fit in 227 KB: 13 for a
//              64 × 64 16-bit tile with its staging buffer, 14 without).
//   AKMajor    A stored (M, K) with K contiguous; false: (K, M) with M contiguous (16-bit types only).
//   BKMajor    B stored (N, K) with K contiguous; false: (K, N) with N contiguous (16-bit types only).
//   ClusterM   1, or 2: clusters of 2 blocks on adjacent tile-rows that share the B tile, each loading
//              half of it with TMA multicast into both blocks (half the B traffic through L2).
//   GroupM     rasterization: tiles are visited in groups of GroupM tile-rows (L2 reuse).
//   SplitK     1, or 2 … 16: the K tiles of every output tile are split over SplitK work units (balanced
//              contiguous ranges, in order); their f32 partial tiles meet in a global workspace and the
//              last unit to finish sums them in split order and runs the epilogue (SplitKWorkspace).
//   BOperands  1, or 2 (dual-B): a second B operand of B's type, layout and shape, read through its own
//              tensor map into a second f32 accumulator; each stage holds A's tile once and both B
//              tiles. Two accumulators of 64 × BN per consumer thread-group: BN ≤ 128. Not yet with
//              SplitK > 1 or ClusterM = 2 (ClusterN is fine: each block loads its own B tiles).
//   ClusterN   1, 2 or 4: clusters of ClusterN blocks on horizontally adjacent tile-columns of one
//              tile-row that share the A tile, each loading 1/ClusterN of it with TMA multicast into
//              all of them (A's L2 → SM traffic divided by ClusterN; for M = 128, where A is re-read
//              by every tile of the row). Both above 1: a 2-D cluster of ClusterM × ClusterN blocks (ranks
//              M-fastest) that shares A along its tile-rows and B along its tile-columns (ffn's M = 128
//              down projections: 2 × 4 blocks of 64 × 64 cover 128 × 256 of D).
//   Pingpong   false: the cooperative schedule (the BM/64 consumer warpgroups share each tile, 64 rows
//              each, and reach its epilogue together). true: the ping-pong schedule: BM = 64, two consumer
//              warpgroups, each computing whole tiles, the block's work units alternating between them
//              (unit i of the block to warpgroup i % 2); the ring holds one warpgroup's K tiles after the
//              other's, so one warpgroup's epilogue runs while the other's wgmma use the tensor cores.
//              SplitK 1 and BOperands 1. Worth it with persistent blocks of two or more units each.
//   TailSplit  1, or 2 … 16: with persistent blocks, the last partial wave of tile units (the tile units
//              left over when the clusters have each taken the same number: tail_tile_units) is split
//              over K in TailSplit units each, merged as split-K merges (the same workspace layout,
//              indexed by the tail's own tiles: tail_split_workspace_floats), so that the last wave's
//              work spreads over every SM. The units before the tail keep their whole K range. SplitK 1,
//              BOperands 1, the cooperative schedule. Nothing changes where no wave is partial or the
//              grid is one cluster per unit.
template <Dtype TA_, Dtype TB_, int BM_, int BN_, int Stages_, bool AKMajor_ = true, bool BKMajor_ = true,
          int ClusterM_ = 1, int GroupM_ = 16, int SplitK_ = 1, int BOperands_ = 1, int ClusterN_ = 1,
          bool Pingpong_ = false, int TailSplit_ = 1>
struct Config {
  static constexpr Dtype TA = TA_;
  static constexpr Dtype TB = TB_;
  static constexpr int BM = BM_;
  static constexpr int BN = BN_;
  static constexpr int BK = 128 / dtype_bytes(TA_);
  static constexpr int Stages = Stages_;
  static constexpr bool AKMajor = AKMajor_;
  static constexpr bool BKMajor = BKMajor_;
  static constexpr int ClusterM = ClusterM_;
  static constexpr int GroupM = GroupM_;
  static constexpr int SplitK = SplitK_;
  static constexpr int BOperands = BOperands_;
  static constexpr int ClusterN = ClusterN_;
  static constexpr int ClusterSize = ClusterM_ * ClusterN_;  // blocks per cluster (the grid's x dimension)
  static constexpr bool Pingpong = Pingpong_;
  static constexpr int TailSplit = TailSplit_;
  // The TMA box rows of each operand's tensor map (tile_rows for runtime::encode_gemm_operand): a
  // K-major B is loaded in ClusterM slices of BN/ClusterM rows, a K-major A in ClusterN slices of
  // BM/ClusterN rows; MN-major boxes are 64 wide anyway.
  static constexpr int ABoxRows = AKMajor_ ? BM_ / ClusterN_ : BM_;
  static constexpr int BBoxRows = BKMajor_ ? BN_ / ClusterM_ : BN_;
  // The K rows of an N-major B's 64-wide boxes: BK, or BK/ClusterM where a cluster along M shares B and
  // BN/64 boxes do not deal out evenly (BN 64: each block loads its K rows of the one box).
  static constexpr bool BSplitK = !BKMajor_ && ClusterM_ > 1 && (BN_ / 64) % ClusterM_ != 0;
  static constexpr int BBoxKRows = BSplitK ? BK / ClusterM_ : BK;
  // Consumer warpgroups: 64 rows of each tile each (cooperative), or 2 taking turns (ping-pong).
  static constexpr int Consumers = Pingpong_ ? 2 : BM_ / 64;
  static constexpr int ABlocks = BM_ / 64;              // 64-row blocks of A in one stage
  // Consumer warpgroups that read each stage (and release it: its empty barrier's arrivals per block / 4).
  static constexpr int StageReaders = Pingpong_ ? 1 : Consumers;
  static constexpr int Threads = 128 * (Consumers + 1);  // + one producer warpgroup
  static constexpr int ABytesPerStage = BM_ * BK * dtype_bytes(TA_);
  static constexpr int BBytesPerStage = BN_ * BK * dtype_bytes(TB_);  // one B operand's tile
  static constexpr int StageBytes = ABytesPerStage + BOperands_ * BBytesPerStage;
  // The ring, 2 mbarriers per stage, and 1 KB of slack to align the ring to 1024 bytes (128B swizzle).
  static constexpr int RingSmemBytes = Stages_ * StageBytes + 16 * Stages_ + 1024;
  // The staged row-store epilogue's buffer (sm90_gemm.cuh, epilogue_staging_columns): 64 rows per
  // consumer warpgroup × EpilogueColumns 16-bit results, between the ring and the barriers; 0 where none
  // fits.
  static constexpr int EpilogueColumns = epilogue_staging_columns(64 * Consumers, BN_, BOperands_, RingSmemBytes);
  static constexpr int EpilogueBytes = 64 * Consumers * EpilogueColumns * 2;
  static constexpr int SmemBytes = RingSmemBytes + EpilogueBytes;

  static_assert(dtype_bytes(TA_) == dtype_bytes(TB_) && (TA_ == TB_ || dtype_is_fp8(TA_)),
                "A and B: the same 16-bit type, two fp8 types, or both tf32");
  static_assert(BM_ == 64 || BM_ == 128, "BM must be 64 or 128");
  static_assert(BN_ % 16 == 0 && BN_ >= 16 && BN_ <= 256, "BN must be a multiple of 16 in [16, 256]");
  static_assert(Stages_ >= 2 && Stages_ <= kMaxStages, "Stages must be in [2, 16]");
  static_assert(!dtype_k_major_only(TA_) || (AKMajor_ && BKMajor_), "fp8 and tf32 wgmma need K-major A and B");
  static_assert(AKMajor_ || BM_ % 64 == 0, "an M-major A needs BM a multiple of 64");
  static_assert(BKMajor_ || BN_ % 64 == 0, "an N-major B needs BN a multiple of 64");
  static_assert(SmemBytes <= kGemmSmemLimit, "the ring does not fit in 227 KB of shared memory");
  static_assert(ClusterM_ == 1 || ClusterM_ == 2, "ClusterM must be 1 or 2");
  static_assert(SplitK_ >= 1 && SplitK_ <= 16, "SplitK must be in [1, 16]");
  static_assert(BOperands_ == 1 || BOperands_ == 2, "BOperands must be 1 or 2");
  static_assert(BOperands_ == 1 || (BN_ <= 128 && SplitK_ == 1 && ClusterM_ == 1),
                "a dual-B configuration takes BN <= 128 (two accumulators), no split-K and no cluster along M");
  static_assert(ClusterM_ == 1 || !BKMajor_ || (BN_ / 2) % 8 == 0,
                "a 2-block cluster splits a K-major B in halves: BN/2 a multiple of 8 rows");
  static_assert(ClusterN_ == 1 || ClusterN_ == 2 || ClusterN_ == 4, "ClusterN must be 1, 2 or 4");
  static_assert(!Pingpong_ || (BM_ == 64 && SplitK_ == 1 && BOperands_ == 1),
                "the ping-pong schedule takes BM 64 (one warpgroup per tile), no split-K and one B operand");
  static_assert(TailSplit_ >= 1 && TailSplit_ <= 16, "TailSplit must be in [1, 16]");
  static_assert(TailSplit_ == 1 || (SplitK_ == 1 && BOperands_ == 1 && !Pingpong_),
                "the tail split takes SplitK 1, one B operand and the cooperative schedule");
  static_assert(ClusterN_ == 1 || (AKMajor_ ? (BM_ / ClusterN_) % 8 == 0 : (BM_ / 64) % ClusterN_ == 0),
                "a cluster along N splits A in ClusterN slices: BM/ClusterN a multiple of 8 rows (K-major, whole "
                "1024-byte swizzle atoms) or BM/64 a multiple of ClusterN (M-major)");
};

// A configuration type's ClusterN, 1 when it has none (prologue_config.cuh's PrologueConfig shares
// launch_config and the split-K sizes below), and its blocks per cluster.
namespace detail {
template <class C, class = void>
struct cluster_n_of {
  static constexpr int value = 1;
};
template <class C>
struct cluster_n_of<C, decltype((void)C::ClusterN)> {
  static constexpr int value = C::ClusterN;
};
}  // namespace detail
template <class C>
constexpr int cluster_n_v = detail::cluster_n_of<C>::value;
template <class C>
constexpr int cluster_size_v = C::ClusterM * cluster_n_v<C>;

// Split-K's global memory, provided by the launcher (no allocation in a launch); both null when
// SplitK and TailSplit are 1. Sizes: splitk_workspace_floats / splitk_counters below, for the launch's
// shape (the tail split's: tail_split_workspace_floats / tail_split_counters, for its grid).
//   partials  f32, [tile][split][BM × BN] in the accumulator's register order (each warp's 16 rows ×
//             BN as float4 per lane: coalesced 512-byte rows), tile = the linear tile index of the
//             launch (batch-major, ClusterM × unit-rows of tiles).
//   counters  one unsigned per (tile, 16-row warp slice): zero before the first launch; every launch
//             leaves them zero again (the last split resets its counter), so CUDA-graph replays and
//             back-to-back launches on one stream reuse them. Launches that may overlap (two streams)
//             need separate workspaces.
// Merge ("serial split-K"): each split stores its partial with st.global.cg, fences (__threadfence),
// and one lane per warp increments the warp's counter (atom.acq_rel.gpu); the warp that sees SplitK - 1
// is last: it fences, reads all SplitK partials back with ld.global.cg (its own too) and sums them in
// split order 0, 1, …, SplitK - 1, so the result does not depend on which split finished last, calls
// the epilogue once per element, and stores 0 to the counter.
struct SplitKWorkspace {
  float* partials = nullptr;
  unsigned* counters = nullptr;
};

// Output tiles of one launch as the workspace indexes them (tile units × the cluster's blocks: tile-rows
// rounded up to ClusterM, tile-columns to ClusterN).
SOLDER_GEMM_HD constexpr long long splitk_tiles(int bm, int bn, int cluster_m, const GemmShape& shape, int cluster_n = 1) {
  return (long long)((shape.m + bm - 1) / bm + cluster_m - 1) / cluster_m * cluster_m *
         (((shape.n + bn - 1) / bn + cluster_n - 1) / cluster_n * cluster_n) * (shape.batch > 0 ? shape.batch : 1);
}
// f32 elements of the partials buffer and unsigned counters (0 when split_k is 1). Plain ints, so the
// code generator and the launcher can size them without the Config type.
SOLDER_GEMM_HD constexpr long long splitk_workspace_floats(int bm, int bn, int cluster_m, int split_k, const GemmShape& shape,
                                                           int cluster_n = 1) {
  return split_k > 1 ? splitk_tiles(bm, bn, cluster_m, shape, cluster_n) * split_k * bm * bn : 0;
}
SOLDER_GEMM_HD constexpr long long splitk_counters(int bm, int bn, int cluster_m, int split_k, const GemmShape& shape,
                                                   int cluster_n = 1) {
  return split_k > 1 ? splitk_tiles(bm, bn, cluster_m, shape, cluster_n) * (bm / 16) : 0;
}
// The tail split (Config::TailSplit): of tile_units tile units looped over by `clusters` persistent
// clusters, the last tile_units % clusters (the partial last wave), when there is at least one full wave
// and a partial one; else 0 (nothing is split). The kernel reads `clusters` from its grid; the launcher
// sizes the workspace with the same count.
SOLDER_GEMM_HD constexpr int tail_tile_units(long long tile_units, int clusters) {
  return clusters > 0 && tile_units > clusters ? static_cast<int>(tile_units % clusters) : 0;
}
// The tail's workspace: f32 partials [tail tile][split][BM × BN] and one counter per (tail tile, 16-row
// slice), a tail tile being a tail unit's block (tail unit × ClusterSize + rank); 0 without a tail.
SOLDER_GEMM_HD constexpr long long tail_split_workspace_floats(int bm, int bn, int cluster_size, int tail_split, int tail_units) {
  return tail_split > 1 ? (long long)tail_units * cluster_size * tail_split * bm * bn : 0;
}
SOLDER_GEMM_HD constexpr long long tail_split_counters(int bm, int cluster_size, int tail_split, int tail_units) {
  return tail_split > 1 ? (long long)tail_units * cluster_size * (bm / 16) : 0;
}
// Work unit u of a launch with `full` whole-K tile units then `tail` tile units split in `tail_split`
// (full + tail · tail_split units in all): its tile unit, its split and the splits of that tile unit.
SOLDER_GEMM_HD inline void tail_split_unit(int u, int full, int tail_split, int* tile_unit, int* split, int* splits) {
  if (u < full) {
    *tile_unit = u;
    *split = 0;
    *splits = 1;
  } else {
    *tile_unit = full + (u - full) / tail_split;
    *split = (u - full) % tail_split;
    *splits = tail_split;
  }
}
template <class C>
SOLDER_GEMM_HD constexpr long long splitk_workspace_floats(C, const GemmShape& shape) {
  return splitk_workspace_floats(C::BM, C::BN, C::ClusterM, C::SplitK, shape, cluster_n_v<C>);
}
template <class C>
SOLDER_GEMM_HD constexpr long long splitk_counters(C, const GemmShape& shape) {
  return splitk_counters(C::BM, C::BN, C::ClusterM, C::SplitK, shape, cluster_n_v<C>);
}

// Launch geometry: a 1-D grid over the work units of every batch (batch-major; inside a batch, groups
// of GroupM tile-rows; each tile unit SplitK times). A unit is ClusterM vertically × ClusterN
// horizontally adjacent tiles, one per block of a cluster of ClusterSize × 1 × 1 blocks. With persistent_blocks > 0 (e.g. the SM count: one block per SM fits), the
// grid has at most that many blocks and each cluster loops over units u = cluster id, + clusters, ...;
// the TMA ring then runs on across tiles, so the next tile's loads overlap the current tile's
// epilogue. With 0, one cluster per unit.
struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned cluster[3] = {1, 1, 1};
  unsigned smem_bytes = 0;  // dynamic shared memory per block (needs the >48 KB opt-in attribute)
};

SOLDER_GEMM_HD constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Work units of one launch (all batches): ClusterM tile-rows × ClusterN tile-columns each, × SplitK K
// ranges (unit u is tile unit u / SplitK, split u % SplitK: the splits of a tile are adjacent units, so
// they run at the same time).
template <class C>
SOLDER_GEMM_HD constexpr long long total_units(C, const GemmShape& shape) {
  return (long long)ceil_div(ceil_div(shape.m, C::BM), C::ClusterM) * ceil_div(ceil_div(shape.n, C::BN), cluster_n_v<C>) *
         (shape.batch > 0 ? shape.batch : 1) * C::SplitK;
}

// The K tiles [*begin, *end) of split `split` of `splits` over k_tiles: contiguous, balanced, in order.
SOLDER_GEMM_HD constexpr void split_range(int k_tiles, int split, int splits, int* begin, int* end) {
  *begin = (int)((long long)k_tiles * split / splits);
  *end = (int)((long long)k_tiles * (split + 1) / splits);
}

template <class C>
SOLDER_GEMM_HD constexpr LaunchGeometry launch_config(C, const GemmShape& shape, int persistent_blocks = 0) {
  LaunchGeometry g{};
  long long units = total_units(C{}, shape);
  if (units < 1) units = 1;
  const long long clusters = persistent_blocks / cluster_size_v<C>;
  if (persistent_blocks > 0 && units > clusters) units = clusters > 0 ? clusters : 1;
  g.grid[0] = static_cast<unsigned>(units * cluster_size_v<C>);
  g.cluster[0] = cluster_size_v<C>;
  g.block[0] = C::Threads;
  g.smem_bytes = C::SmemBytes;
  return g;
}

// Which (tile-row, tile-column) a linear tile index visits: column-major inside groups of GroupM
// tile-rows, so that the blocks of one wave share A row-panels and B column-panels in L2.
SOLDER_GEMM_HD inline void tile_of(int linear, int tiles_m, int tiles_n, int group_m, int* tile_m, int* tile_n) {
  const int per_group = group_m * tiles_n;
  const int group = linear / per_group;
  const int first_m = group * group_m;
  const int rows = (tiles_m - first_m) < group_m ? (tiles_m - first_m) : group_m;
  const int within = linear - group * per_group;
  *tile_m = first_m + within % rows;
  *tile_n = within / rows;
}

}  // namespace solder::gemm
