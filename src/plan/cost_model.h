// The GEMM cost model: predicted time of one configuration on one problem, and what binds it.
//
// FlashFuser's minimax form (eq. 1-3): the data each memory level moves divided by that level's bandwidth,
// the slowest level bounding the main loop, with the tensor cores as one more level; plus what a
// roofline leaves out — wave quantisation, the pipeline fill and epilogue of every wave, the launch, and
// the split-K merge pass:
//
//   time = launch + max(tensor, smem, load, L2, HBM) + waves × (fill + epilogue) + split-K merge
//
//   tensor  padded tile FLOPs of the busiest SM (waves of CTAs over SMs × CTAs per SM) at the measured
//           rate for T × wgmma efficiency (issue overhead per m64nBNk instruction)
//   smem    bytes through shared memory per SM: TMA writes of A and B tiles, wgmma reads of A once and of
//           B once per m64 row block, at the measured shared-memory bandwidth (DSM table, cluster size 1)
//   load    what one SM receives: the A and B tiles of its CTAs through its load port (sm_load_gbps), and
//           the memory latency each K step waits for when a CTA has only stages - 1 loads in flight
//   L2      bytes from L2 into SMs (each CTA's A and B panels, divided by the multicast factor of its
//           cluster; D, the epilogue reads and split-K partials) at the L2 bandwidth
//   HBM     A and B once when both fit in half of L2, otherwise the panels each wave of CTAs touches (a
//           wave covers a near-square block of tiles); D or the f32 partials; epilogue reads
//   merge   split_k > 1: the last CTA of each tile reads the other f32 partials and writes D, in the
//           same launch (at L2 speed while the partials fit in half of L2; at least one tile's partials
//           through one SM's load port), plus kSplitKMergeLatencies memory latencies per round of CTAs
//
// docs/planner.md gives the constants and how to re-measure them (`solder probe`).
#pragma once

#include <string>
#include <string_view>

#include "hw/hardware.h"
#include "plan/catalogue.h"
#include "plan/gemm_problem.h"

namespace solder {

// The binding resource: the term of the formula that contributes the most time.
enum class Resource { tensor, smem, load, l2, hbm, fill, launch, split_merge };
// "tensor", "smem", "load", "l2", "hbm", "fill", "launch", "split_merge"
std::string_view resource_name(Resource resource);

struct GemmCost {
  double total_us = 0;
  Resource binding = Resource::tensor;
  // The terms.
  double tensor_us = 0, smem_us = 0, load_us = 0, l2_us = 0, hbm_us = 0;  // the main loop is their maximum
  double fill_us = 0;  // waves × (pipeline fill + epilogue store)
  double launch_us = 0, merge_us = 0;
  // What they came from.
  int64_t ctas = 0, concurrent_ctas = 0;
  int ctas_per_sm = 0;
  double waves = 0;            // ctas / concurrent_ctas, rounded up
  double wgmma_efficiency = 1;
  double hbm_bytes = 0, l2_bytes = 0, smem_bytes_per_cta = 0;
  double tflops() const;       // the problem's FLOPs / total
  double flops = 0;
};

// Issue overhead of one wgmma instruction, in cycles of its N/2-cycle run time (efficiency
// (BN/2) / (BN/2 + kWgmmaIssueCycles), normalised to 1 at N = 256).
constexpr double kWgmmaIssueCycles = 8;
// Dependent memory round trips of the skeleton's split-K merge per round of CTAs: the partials'
// stores and fence, the counter's atomic, the partials' reads, the epilogue's stores. Fitted to the
// H100 split-K measurements of 2026-11-26 (bench/results/h100/gemm-skeleton.md, "Split-K"): with it
// the model's ranking of split 1/2/4/8 at M 128, N 8192, K 3072 goes from Spearman 0.81 to 0.95 and
// ffn's first product (f32 out) keeps split 1, which measured faster; the other shapes' choices hold.
constexpr double kSplitKMergeLatencies = 4;
// Fraction of L2 within which A and B count as read from HBM once.
constexpr double kL2ResidentFraction = 0.5;

double wgmma_efficiency(int bn);

// Predicts `config` on `problem`. Feasibility is not checked (check_feasibility first); needs hw.has_rates
// and a tensor rate for the problem's type (throws solder::Error naming what is missing otherwise).
GemmCost predict_gemm(const GemmProblem& problem, const GemmConfig& config, const HardwareDescription& hw);

}  // namespace solder
