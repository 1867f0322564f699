// The sm_90a GEMM skeleton's operand-A prologue path: its compile-time configuration (plain C++, like
// config.cuh: the code generator sizes launches with it). The kernel is in sm90_gemm_prologue.cuh.
//
// Meaning of one launch, for every row m < shape.m and column n < shape.n (shape.batch must be 1):
//     side_i(m) = fold_{k < shape.k} side_step_i(m, k, X(m, k))      (side reductions, f32, i < Sides)
//     acc(m, n) = Σ_{k < shape.k} round_TA(operand(m, k, X(m, k), side(m))) · B(k, n)
//     epilogue(0, m, n, acc(m, n), side(m))
// X is A's source tensor, (M × K) K-major in the 16-bit type TS, staged by TMA; the prologue functor
// turns each staged element into A's value, which is rounded to the MMA type TA and stored into a
// converted shared-memory tile that wgmma reads (SS). The side reductions fold the staged elements of
// each row.
// With PreSweep, operand() reads the final side values: each block first sweeps its A stripe (TMA
// loads of A only, no MMA) to complete them, then the converting sweep; without it, the side reductions
// are folded during the one sweep and only the epilogue reads them.
#pragma once

#include "config.cuh"

namespace solder::gemm {

// TS, TA, TB   A's source type (bf16 or f16), A's and B's MMA input types (as Config: both 16-bit and
//              equal, or both fp8).
// BM, BN       as Config (BM 64 or 128; BN a multiple of 16 in [16, 256]).
// BK           128 bytes of B's K: 64 for 16-bit MMA types, 128 for fp8; A's source tile per stage is
//              BM × BK elements of TS, loaded as BK·bytes(TS)/128 TMA boxes of 128 bytes × BM rows.
// Stages       ring depth; BKMajor as Config; no clusters and no split-K on this path.
// SideSlots    side values per row kept in shared memory for the epilogue (≥ the prologue's Sides).
// ConverterWarpgroup  the schedule: false (the default, what the code generator writes) converts in
//              the consumer warpgroups; true in a dedicated converter warpgroup (measured slower on
//              2026-11-26: bench/NOTES.md, "converter warpgroup").
// ClusterN     1, or 2: clusters of two blocks on horizontally adjacent tiles of one tile-row; each
//              loads one of the A tile's two K boxes (fp8 MMA types: BK 128, A in 16 bits) and
//              multicasts it to both, halving A's L2 reads. The grid must be even.
// Shared memory: Stages stages of A's source and of B (one ring in the inline schedule, two in the
// converter schedule), two converted A buffers of BM × BK in TA (one is filled while wgmma reads the
// other), the side values, the barriers.
template <Dtype TS_, Dtype TA_, Dtype TB_, int BM_, int BN_, int Stages_, bool BKMajor_ = true, int GroupM_ = 16,
          int SideSlots_ = 1, int ClusterN_ = 1, bool ConverterWarpgroup_ = false>
struct PrologueConfig {
  static constexpr Dtype TS = TS_;
  static constexpr Dtype TA = TA_;
  static constexpr Dtype TB = TB_;
  static constexpr int BM = BM_;
  static constexpr int BN = BN_;
  static constexpr int BK = 128 / dtype_bytes(TB_);
  static constexpr int Stages = Stages_;
  static constexpr bool AKMajor = true;
  static constexpr bool BKMajor = BKMajor_;
  static constexpr int ClusterM = 1;
  static constexpr int ClusterN = ClusterN_;
  static constexpr int GroupM = GroupM_;
  static constexpr int SplitK = 1;
  static constexpr int ABoxRows = BM_;
  static constexpr int BBoxRows = BN_;
  static constexpr int ABoxes = BK * dtype_bytes(TS_) / 128;  // 128-byte K boxes of A per stage
  static constexpr int ABoxK = 128 / dtype_bytes(TS_);        // A's elements per box row
  static constexpr int Consumers = BM_ / 64;
  // The schedule (sm90_gemm_prologue.cuh). false (inline): a producer warpgroup loads A and B, each
  // consumer warpgroup converts its 64 rows and runs the wgmma. true: a converter warpgroup (which
  // also loads A's source tiles) and Consumers MMA warpgroups (the first one's thread 0 loads B).
  // Either way 128 · (Consumers + 1) threads: ptxas compiles every role at the launch's 65536 / Threads
  // registers (setmaxnreg or not), so a fourth warpgroup would leave a 64 × 256 accumulator 128.
  static constexpr bool ConverterWarpgroup = ConverterWarpgroup_;
  static constexpr int Threads = 128 * (Consumers + 1);
  static constexpr int ABytesPerStage = BM_ * BK * dtype_bytes(TS_);
  static constexpr int BBytesPerStage = BN_ * BK * dtype_bytes(TB_);
  static constexpr int StageBytes = ABytesPerStage + BBytesPerStage;
  static constexpr int SideSlots = SideSlots_;
  static constexpr int ConvBytesPerBuffer = BM_ * BK * dtype_bytes(TA_);  // = BM × 128
  static constexpr int ConvStages = 2;  // converted A buffers: the converter fills one while wgmma reads the other
  static constexpr int SmemBytes =
      Stages_ * StageBytes + ConvStages * ConvBytesPerBuffer + BM_ * SideSlots_ * 4 + 32 * Stages_ + 16 * ConvStages + 16 + 1024;

  static_assert(TS_ == Dtype::bf16 || TS_ == Dtype::f16, "A's source must be bf16 or f16");
  static_assert(dtype_bytes(TA_) == dtype_bytes(TB_) && (TA_ == TB_ || dtype_is_fp8(TA_)),
                "A and B: the same 16-bit type, or two fp8 types");
  static_assert(BM_ == 64 || BM_ == 128, "BM must be 64 or 128");
  static_assert(BN_ % 16 == 0 && BN_ >= 16 && BN_ <= 256, "BN must be a multiple of 16 in [16, 256]");
  static_assert(Stages_ >= 2 && Stages_ <= 8, "Stages must be in [2, 8]");
  static_assert(!dtype_is_fp8(TB_) || BKMajor_, "fp8 wgmma needs a K-major B");
  static_assert(BKMajor_ || BN_ % 64 == 0, "an N-major B needs BN a multiple of 64");
  static_assert(SideSlots_ >= 1 && SideSlots_ <= 4, "SideSlots must be in [1, 4]");
  static_assert(ClusterN_ == 1 || (ClusterN_ == 2 && ABoxes == 2), "ClusterN 2 splits A's two K boxes between the blocks");
  static_assert(SmemBytes <= 232448, "the ring does not fit in 227 KB of shared memory");
};

// The launch of a PrologueConfig: one block per tile (ClusterN per unit of ClusterN adjacent tiles), or
// at most persistent_blocks (rounded down to whole clusters), each looping over its share of the tiles.
template <class C>
SOLDER_GEMM_HD constexpr LaunchGeometry prologue_launch_config(C, const GemmShape& shape, int persistent_blocks = 0) {
  LaunchGeometry g{};
  long long units = (long long)((shape.m + C::BM - 1) / C::BM) * (((shape.n + C::BN - 1) / C::BN + C::ClusterN - 1) / C::ClusterN);
  if (units < 1) units = 1;
  const long long clusters = persistent_blocks / C::ClusterN;
  if (persistent_blocks > 0 && units > clusters) units = clusters > 0 ? clusters : 1;
  g.grid[0] = static_cast<unsigned>(units * C::ClusterN);
  g.cluster[0] = C::ClusterN;
  g.block[0] = C::Threads;
  g.smem_bytes = C::SmemBytes;
  return g;
}

// Threads per block of the prologue path for a BM (the converter and BM / 64 consumer warpgroups).
SOLDER_GEMM_HD constexpr int prologue_threads(int bm) { return 128 * (bm / 64 + 1); }

// PrologueConfig's SmemBytes from its numbers (the code generator sizes launches with it).
SOLDER_GEMM_HD constexpr int prologue_smem_bytes(int bm, int bn, int source_bytes, int mma_bytes, int stages, int side_slots = 1) {
  const int bk = 128 / mma_bytes;
  return stages * (bm * bk * source_bytes + bn * bk * mma_bytes) + 2 * bm * bk * mma_bytes + bm * side_slots * 4 + 32 * stages + 16 * 2 + 16 +
         1024;
}

// The largest ring depth (≤ max_stages) whose shared memory fits 227 KB, for A staged in `source`
// bytes per element: what the code generator uses after the planner chose BM and BN.
SOLDER_GEMM_HD constexpr int prologue_stages(int bm, int bn, int source_bytes, int mma_bytes, int max_stages, int side_slots = 1) {
  int s = max_stages;
  while (s > 2 && prologue_smem_bytes(bm, bn, source_bytes, mma_bytes, s, side_slots) > 232448) --s;
  return s;
}

}  // namespace solder::gemm
