// The skeleton choice's tile: the cost model's best configuration among those the device skeleton
// instantiates (in_device_skeleton), for a contraction that fit_gemm_skeleton accepted. Asked by the
// unfused lowering (a contraction with no feasible configuration is tiled instead of kept whole) and
// by the CUDA writer (which instantiates the chosen configuration).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "contract/gemm_skeleton_fit.h"
#include "plan/plan.h"

namespace solder {

struct SkeletonChoice {
  std::optional<GemmCandidate> chosen;
  std::string why;  // the prediction and binding resource, or why nothing fits
};

// The K tiles each split must keep at least (a few ring stages: below that the pipeline never fills).
constexpr int kMinSplitKTiles = 4;

// Whether the skeleton choice offers `config`'s split-K for `problem`: split_k 1 always; 2, 4, 8 or 16
// only when the output tiles leave SMs idle (fewer tiles than sm_count), every split keeps at least
// kMinSplitKTiles K tiles, and BN is a multiple of 64 (the merge's variant verified on the H100; BN 96,
// 160, 224 read 4 float4 at a time, compiled and in the device test but not yet run there), and the
// cluster has at most 2 blocks (a 1x4 cluster with a split spills registers at 64x128). The cost
// model then charges the partials' traffic and the merge.
bool split_k_offered(const GemmProblem& problem, const GemmConfig& config, int sm_count);

// A dual-B problem (problem.b2) is modelled as one product of N' = 2·N with tile BN' = 2·BN: the same
// A traffic, twice the B traffic and FLOPs, the same stage bytes and accumulator registers per tile
// (the output's bytes are counted twice: a small overestimate). Offered: BN ≤ 128 per operand, split-K 1
// (config.cuh's dual-B limits). The chosen configuration's bn is per operand.
// row_store: the writer gives the epilogue the row-store hooks (sm90_gemm.cuh: 16-byte row vectors,
// GemmProblem::row_store), so the cost model charges their store rate; row_store_mode: the schedule
// (GemmProblem::row_store_mode; 2, the skeleton's default, unless SOLDER_GEMM_EPILOGUE names another).
// whole_rows > 0 (a row-reduction epilogue, row_epilogue.cuh): only tiles whose BN holds a whole row of
// that many columns, with no cluster along N (single B).
// type 3xtf32: the tf32 product of the split copies (tf32x3_gemm_problem) chosen as above, its time plus
// the split's (tf32x3_split_us); `why` names both.
SkeletonChoice choose_skeleton_config(const GemmSkeletonProblem& problem, MmaType type, DType output, bool row_store = false,
                                      int row_store_mode = 2, int64_t whole_rows = 0);

// The 3xTF32 split's time (fusion/tf32_split.h): each operand read once (4 bytes an element) and written
// three times (12 bytes) at the device's copy rate, plus its two launches.
double tf32x3_split_us(const GemmSkeletonProblem& problem, const HardwareDescription& hw);

// A/B runs: $SOLDER_GEMM_TILE = "BMxBNsSTAGESkSPLIT[cMxN]" (e.g. 128x64s8k2, or 128x64s6k1c1x2 for a
// 1x2 cluster along N; BN per B operand; no cMxN: no cluster) makes the choice take exactly that tile
// where the device skeleton has it, split-K offered or not, and refuse (the contraction is then tiled)
// where not. A malformed value matches nothing, and `why` says so. Several entries, ';'-separated, each
// optionally "@M,N,K" (e.g. "64x64s8k4@128,1024,3072;128x64s6k1"): an entry with a shape applies only
// to the product of that M, N and K (`shape`; per operand N for a dual-B product), one without to
// every product; the first entry that applies wins, and with none the cost model chooses (nullopt).
struct ForcedTile {
  int bm = 0, bn = 0, stages = 0, split_k = 0;
  int cluster_m = 1, cluster_n = 1;
};
std::optional<ForcedTile> forced_skeleton_tile(std::string* why = nullptr,
                                               const std::optional<std::array<int64_t, 3>>& shape = std::nullopt);

// A/B runs of clusters: $SOLDER_GEMM_CLUSTER = "MxN" (1x1, 2x1, 1x2, 1x4) makes the choice take the cost
// model's best configuration of that cluster shape among those it offers, where there is one (else it
// chooses as usual); SOLDER_GEMM_TILE, when set, wins. Nothing (or a malformed value): no restriction.
std::optional<std::pair<int, int>> forced_skeleton_cluster();

// A/B runs of the main loop's schedule: $SOLDER_GEMM_SCHEDULE = "pingpong" offers only the ping-pong
// configurations (GemmConfig::pingpong; BM 64), "cooperative" only the others; with SOLDER_GEMM_TILE the
// forced tile is taken in that schedule. Unset: both, chosen by cost. Anything else: a warning, unset.
std::optional<bool> forced_skeleton_schedule();

}  // namespace solder
