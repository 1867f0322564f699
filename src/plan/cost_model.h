// The GEMM cost model: predicted time of one configuration on one problem, and what binds it.
//
// FlashFuser's minimax form (eq. 1-3): the data each memory level moves divided by that level's bandwidth,
// the slowest level bounding the main loop, with the tensor cores as one more level; plus what a
// roofline leaves out — wave quantisation, the pipeline fill and epilogue of every wave, the launch, and
// the split-K merge pass:
//
//   time = launch + max(‖tensor, load, HBM‖_p, smem, L2) + waves × (fill + epilogue) + split-K merge
//          (p = kMainloopNorm: the three overlap imperfectly)
//
//   tensor  padded tile FLOPs of the busiest SM (waves of CTAs over SMs × CTAs per SM) at the measured
//           rate for T × wgmma efficiency (issue overhead per m64nBNk instruction), and each tile's
//           epilogue store after it (the ping-pong schedule: only the last, the others overlapping the
//           other warpgroup's main loop)
//   smem    bytes through shared memory per SM: TMA writes of A and B tiles, wgmma reads of A once and of
//           B once per m64 row block, at the measured shared-memory bandwidth (DSM table, cluster size 1)
//   load    what one SM receives: the A and B tiles of its CTAs through its load port (sm_load_gbps), and
//           the memory latency each K step waits for when a CTA has only stages - 1 loads in flight
//   L2      bytes from L2 into SMs (each CTA's A and B panels, divided by the multicast factor of its
//           cluster, B's only with split-K; D, the epilogue reads and split-K partials) at the L2 bandwidth
//   HBM     A and B once per batch when both fit in half of L2 (a shared operand, without the batch
//           axis, once for all batches while it fits), otherwise the panels each wave of CTAs touches (a
//           wave covers a near-square block of tiles); D or the f32 partials; epilogue reads
//   merge   split_k > 1: the last CTA of each tile reads the other f32 partials and writes D, in the
//           same launch (at L2 speed while the partials fit in half of L2; at least one tile's partials
//           through one SM's load port, read one after the other: kSplitKPartialReadLatencies), plus
//           kSplitKMergeLatencies memory latencies per round of CTAs
//
// docs/planner.md gives the constants and how to re-measure them (`solder probe`).
#pragma once

#include <string>
#include <string_view>

#include "hw/hardware.h"
#include "plan/catalogue.h"
#include "plan/epilogue_cost.h"
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
  // The epilogue's schedule (epilogue_cost.h) and the store time per unit it adds to the tensor term.
  EpilogueSchedule epilogue = EpilogueSchedule::pairs;
  double store_us = 0;
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
// (N/2) / (N/2 + kWgmmaIssueCycles) of the instruction's N, wgmma_instruction_n(BN), normalised to 1 at
// N = 256). Fitted where the instructions were narrower than the tile (before CuTe's extended widths:
// fp8 128x224 as 7 × m64n32 priced 0.71 of 128x256, measured 0.72; quant-fp8, the H100, 2026-11-27);
// with one m64n224 instruction 128x224 measured 165 µs at quant_gemm Q3 against 181 for 128x256
// (the tenth session's re-sweep), as its waves predict.
constexpr double kWgmmaIssueCycles = 8;
// Dependent memory round trips of the skeleton's split-K merge per round of CTAs: the partials'
// stores and fence, the counter's atomic, the partials' reads, the epilogue's stores. Fitted to the
// H100 split-K measurements of 2026-11-26 (bench/results/h100/gemm-skeleton.md, "Split-K"): with it
// the model's ranking of split 1/2/4/8 at M 128, N 8192, K 3072 goes from Spearman 0.81 to 0.95 and
// ffn's first product (f32 out) keeps split 1, which measured faster; the other shapes' choices hold.
// Raised from 4 to 7 with the main loop's norm (kMainloopNorm): ffn S1's down projection (M 128, N 3072,
// K 8192) ran 29.7 µs with the 128x64 s6 split 2 that 4 chose (27.2 predicted) and 27.1 µs with 64x64
// s8 unsplit (H100, 2026-11-26 17:30 UTC, bench/NOTES.md "gemm-chains"); 128x64 s8 split 2 29.3, split 4 38.0.
constexpr double kSplitKMergeLatencies = 7;
// The same where the output has few tiles: at most kFewTilesFraction × sm_count tiles of 64 × 64
// (ffn's down projections at M 128 and N ≤ 2112), where splitting K is what puts the idle SMs to work:
// one round trip (the counter's atomic) beside the partials' reads below. Measured on the H100: at
// N 384-1024 (2026-11-26 23:18 UTC, bench/results/h100/gemm-chains3-sweep.json, solder bench with many
// calls per replay and programmatic dependent launch) a 64 x 64 split-4 tile cost 0.5-2.2 µs more than
// the model's main loop without its merge (about two latencies: this one and the three partials' 1.05),
// and split 4 ran faster than split 1 at every such shape with K ≥ 1536 (N 1024 K 3072: 8.41 against
// 9.24 µs; N 512 K 2048: 5.76 / 6.48), slower where a split keeps under 8 K tiles (N 768 K 768). At
// N 1536 and 2048 (2026-11-27 17:36 UTC, bench/results/h100/ffn-s2-sweep.json: ffn S2's and S6's down
// projections, 64 and 48 tiles) 64 x 64 split 2 ran fastest of five (S2 14.14 µs against 14.70
// unsplit and 14.89 for 128 x 64 split 4; S6 15.79 against 16.89 for 128 x 64 split 4 and 21.18
// unsplit), where the seven latencies above had priced it 1.7 µs slower than unsplit: the fraction
// was 0.25 (33 tiles) and the constant 2 before the partials' reads were priced.
// The seven latencies above stay for the problems with many tiles: there they also absorb the model's
// overestimate of one-consumer tiles at long K (64 x 64 at N 3072 K 8192: 29.4 µs predicted, 26.0
// measured), so that 128 x 64 split 2 (27.4 measured) is not chosen over it.
constexpr double kSplitKMergeLatenciesFewTiles = 1;
constexpr double kFewTilesFraction = 0.5;
// The merging CTA reads the other splits' f32 partials in split order, each after the previous one's
// sum: kSplitKPartialReadLatencies memory latencies per 64 × 64 partial block (16 KB) it reads, for every
// split, beside the bytes through its load port. Fitted on ffn-s2-sweep.json (above): 128 x 64 split 4
// reads 3 partials of 2 such blocks each, 2.1 latencies, 64 x 64 split 2 one block, 0.35; with it the
// skeleton path chooses the best measured configuration at both problems, and gemm-chains3-sweep.json
// goes from Spearman 0.690 to 0.840 (docs/planner.md, "Validation").
// Every split, not the first four (lrb-plan, 2026-11-28): the merge loop (sm90_gemm.cuh) adds the splits
// in order into one running sum per chunk of 8 float4, and how many splits' chunks are in flight together
// is left to ptxas under the accumulators' register pressure (one at BN > 128 by construction; the
// source does not bound it below that). Until then the first kMergeSplitsInFlight (4) splits only were
// priced, on the assumption that four were in flight; pricing all of them ranks ffn-s2 (mean Spearman 0.700 → 0.850, its worst gap 7.1 → 0.0 %) and gemm-chains3
// (0.840 → 0.910) better, and prices linear_relu_backward's dw on 128 x 64 split 16 (15 partials of
// 32 KB) 8.6 µs slower, where it measured 37.38 µs alone against 33.12–34.15 for 64 x 64 split 8 with B
// multicast (lrb-dw-alone-sweep.json); with kSkeletonBMulticastClusterUs below the planner takes that
// form (bench/NOTES.md, lrb-plan). lrb-model tried this alone (2026-11-27) and kept the bound: without
// the cluster charge's split it chose 64 x 64 s9 split 8 without a cluster, no faster in the program.
constexpr double kSplitKPartialReadLatencies = 0.35;
// The skeleton's cost of a cluster launch beyond cluster_launch_us (the probe's empty kernel with two
// cluster barriers): its own cluster barriers at start and end, and a ring whose stage is refilled only
// once every block of the cluster released it, so the slower block of each cluster sets the pace.
// Measured on the H100 (2026-11-26 20:27 UTC, bench/results/h100/gemm_chains.md, "Clusters"): the 24
// larger gemm_chains cases with each product's tile as a 1x2 cluster along N (A multicast) ran 3.1–8.7 µs
// slower per case than the same tiles without (48 kernels, 2.6 µs per kernel on average, against the
// 1.26 µs of cluster_launch_us); the difference is charged here, to clusters with A multicast (cluster_n
// above 1, 2 × 2 included), the only ones that measurement had.
constexpr double kSkeletonClusterUs = 1.3;
// The same for clusters along M only (cluster_n 1: B multicast, 2 × 1 and 4 × 1), fitted on every
// committed sweep's pairs of one tile with and without such a cluster (27 pairs in six sweeps,
// bench/results/h100/lrb-plan-raw/cluster-pairs-*.txt): even with no charge beyond cluster_launch_us the
// model prices the 2 × 1 form 2.3 µs (median) slower relative to the plain one than measured (lrb's dw
// 64 x 64 split 8: 1.4–4.5 µs faster with B multicast at 8–14 stages, priced slower; quant-fp8-resweep's
// 128 x 256 tiles: 0.4–2.0 µs faster, priced 2.2–2.9 slower), because the multicast's halved L2 -> SM
// bytes count only where L2 binds. 0.3 is inside the window the sweeps allow: at 0.1 quant-fp8-resweep's
// choice goes to a cluster measured slower (gap 3.3 → 5.2 %), above 0.55 dw's choice leaves the
// multicast form (bench/NOTES.md, lrb-plan). Since bmc-term an unsplit launch's B multicast gets no L2
// credit (b_multicast_l2_factor), so there this charge only keeps it off.
constexpr double kSkeletonBMulticastClusterUs = 0.3;
// What B multicast (a cluster along M) divides B's L2 -> SM bytes by: cluster_m in a split-K launch, 1
// (no credit) in an unsplit one. Fitted (bmc-term, 2026-11-28; bench/NOTES.md): with the
// credit in every launch and kSkeletonBMulticastClusterUs at 0.3 (lrb-plan), the planner moved three
// unsplit products to B multicast where their L2 term bound the plain tile, and all three ran slower
// with it on the H200, three rounds A/B: ffn-S3's and gated_ffn-S3's down projection (M 128, N 4096,
// K 11008) on 64 x 64 s14 c2x1 against s9 (+2.1 and +3.4 µs on the fastest replays; the model's L2 term
// for s9, 40.2 µs, binds only through A's 64-fold reread, an operand every block shares) and quant_gemm
// Q7 (fp8 4096 x 2048 x 768) on the ping-pong 64 x 256 s4 c2x1 against 128 x 256 s4 (+1.2 µs). In the
// committed H100 sweeps no unsplit pair of one tile with and without B multicast was priced faster with
// the cluster, so none measures the credit there; the split-K pairs (linear_relu_backward's dw, 64 x 64
// split 8 and 128 x 64 split 16) ran 0.5–4.5 µs faster with it, and keep it. Without the credit in
// unsplit launches every committed sweep keeps its choices, and quant-fp8-resweep ranks better (mean
// Spearman 0.631 → 0.640); why the split launch gains from the multicast and the unsplit one does not
// is not identified.
inline int b_multicast_l2_factor(const GemmConfig& c) { return c.split_k > 1 ? c.cluster_m : 1; }
// Fraction of L2 within which A and B count as read from HBM once.
constexpr double kL2ResidentFraction = 0.5;
// The tensor rate of one SM while few SMs are busy, over its share of the full-chip rate (tensor_tflops /
// SMs): the clock headroom of a partly idle chip. Measured: bf16 128x256x64 s3 on 12 SMs at M=128 N=3072
// K=8192 (gemm-skeleton-sweep.json) runs 537 MFLOP per SM in 81 µs, ≥ 7.0 TFLOP/s per SM against 785 / 132 =
// 5.95 (the spec's 4096 FLOP per clock per SM at the 1980 MHz maximum clock would be 8.1). The boost grows
// with the idle fraction of the SMs, 1 + (kIdleSmTensorBoost − 1) × (1 − busy / SMs): with 120 of 132 busy
// (a grid of 2 × 2 clusters) 1.6 %, not the 10 % of sharing the chip's rate among the busy SMs, which made
// 2 × 2 clusters of fp8 128-row tiles the choice at quant_gemm Q3 (bench/NOTES.md, quant-fp8: fp8 128x224
// with a 2 × 2 cluster ran 259.7 µs against 213.8 without; 128 × 256 tiles ran 12.6–13.0 TFLOP/s per SM
// whether 52 or 132 SMs were busy).
constexpr double kIdleSmTensorBoost = 1.18;
// Shared-memory bytes per clock per SM (Hopper: 32 banks × 4 bytes), for the TMA writes and wgmma reads.
// The DSM table's cluster-size-1 figure (26.4 TB/s, 101 bytes per clock at 1980 MHz) is below what the
// sweep shows: bf16 128x64 s8 at M=128 N=3072 K=8192 moves 7.3 MB through one SM's shared memory in 31 µs.
constexpr double kSmemBytesPerClock = 128;
// Cycles per K step that a CTA with one consumer warpgroup (BM 64) loses between wgmma batches, with no
// other warpgroup to issue: kOneConsumerStepCycles + kOneConsumerStepCyclesPerBn64 × BN / 64 (the wait
// for the previous batch, wgmma.wait_group 1, grows with the batch's columns). The wait for the stage
// itself is the load term's (below: the loaded latency and the soft minimum), not this one's.
// History: 180 cycles at every BN were fitted on bf16 64x128 s6 at M=128 N=3072 K=8192
// (gemm-skeleton-sweep.json: 34.6 µs, 12 µs beyond its wgmma) before the load term had the loaded latency
// (gemm-deep); with both, the model double-counted that wait: it priced that point 42.6 µs, and ffn S7's
// down projection (M 128, N 2560, K 9728) on 64 × 64 × 13 stages 33.7 µs against 30.7 for 64x192 s7
// split-K 4, where the H100 ran 64x64 s13 4.5 µs faster than 64x192 s5 k4 in one call (whole ffn, 47.63
// against 52.18 µs; bench/NOTES.md, gemm-s7). Refitted (gemm-s7, 2026-11-27) on the sweeps' one-consumer
// points with the load term as it is: 60 + 40 per 64 columns (100 at BN 64, 140 at 128, 180 at 192,
// 220 at 256) keeps BN 192 where the calibration sweep needs it (M=128 N=11008 K=4096: 64x192 s6 44.0 µs
// against 128x128 s6 38.5; a flat 125 or less chooses 64x192 there, 14.5 % off) and lets S7 choose
// 64 × 64. Validation (docs/planner.md): calibration mean Spearman 0.915 → 0.917, worst gap 7.7 → 7.7 %.
constexpr double kOneConsumerStepCycles = 60;
constexpr double kOneConsumerStepCyclesPerBn64 = 40;
// The cycles per K step of one-consumer tile of BN columns (the two constants above).
constexpr double one_consumer_step_cycles(int bn) { return kOneConsumerStepCycles + kOneConsumerStepCyclesPerBn64 * bn / 64.0; }
// Cycles per K step that a ping-pong unit (GemmConfig::pingpong) loses with two or more units per block:
// one warpgroup issues at a time, so part of each step's wait for the previous wgmma batch and the next
// stage is exposed. Fitted on the H100 (2026-11-27, bench/NOTES.md, gemm-mainloop): e4m3 8192³ with row
// stores, cooperative 128x256 s4 c2 0.790 ms against ping-pong 64x256 s4 c2 0.905 ms (1.146×; the model
// without this term said 1.084×); with 50 cycles it says 1.144×, and bf16 L2 (4096 x 14336 x 4096)
// ping-pong 830 µs against 813 measured (785 without).
constexpr double kPingpongStepCycles = 50;
// The tensor term's growth per extra block of a cluster: a stage is refilled only once every block of
// the cluster released it, so the slowest block sets the pace of all (kSkeletonClusterUs charges the
// launch; this the main loop). Measured on the H100 (2026-11-27, bench/NOTES.md, gemm-mainloop): bf16 L2
// (4096 x 14336 x 4096, 128x256 s4) with a 1x4 cluster 677.6 and 719.7 µs (min 666, max 761) against
// 669.4 (min 636, max 679) without, where the model had preferred the cluster by 6.5 µs; with 1 % per
// extra block it prefers none (696.9 against 711.1).
constexpr double kClusterPacing = 0.01;
// A tile with one consumer warpgroup (BM 64, or a ping-pong block with one unit) waits for each stage
// with nothing else to issue, so its ring's depth shows: the memory latency its loads see grows with the
// SMs that stream at once (queueing in L2 and HBM), latency = memory_latency_ns × (1 + kLoadedLatencyGrowth
// × busy SMs / SMs), and its load rate is the kOneConsumerLoadNorm soft minimum of the SM's port and of
// the loads in flight over that latency (it drains the ring in bursts, so depth keeps paying past the
// port's rate). Two consumers keep the idle latency and the plain minimum. Measured on the H100
// (2026-11-27, bench/NOTES.md, gemm-deep): ffn's M = 128 down projections on 64 × 64 tiles (96 busy SMs
// at S1) ran 2.7 µs faster with 13 stages than with 8 at S1 (K 8192), 2.8 at S7, 1.2 at S2, and 14
// stages 0.6 µs faster than 13 at S1: 8 stages (112 KB in flight) received ≈ 89 GB/s per SM, a latency of
// ≈ 1.26 µs (0.3: 1.26 at 96 busy SMs, 1.09 at 24); the model now has 13 / 14 stages 2.6 / 2.7 µs faster
// than 8. Two-consumer 128-row tiles did not gain from depth in the calibration sweep (M 512, N 4096,
// K 11008: 128x128 s4 82.0 µs, s6 91.5), which the plain minimum keeps.
constexpr double kLoadedLatencyGrowth = 0.3;
constexpr double kOneConsumerLoadNorm = 4;
// The epilogue's store rate, for the whole chip: the consumers hand their accumulators to the epilogue
// functor after the last wgmma of a tile and store pairs of outputs from registers (8 rows × 16 bytes per
// warp instruction) before the next tile's wgmma; the busy SMs share this rate. Measured: at M=16384
// N=4096 K=1024 (gemm-skeleton-sweep.json, 16 K steps per tile, 132 SMs busy) bf16 128x256 s4 and
// 128x128 s4 take 7.8 and 3.7 µs per tile beyond their tensor time (307 and 303 µs for 16 and 32 tiles
// per SM): 64 KB and 32 KB per SM at 8.4 and 8.8 GB/s, × 132 SMs = 1.14 TB/s.
constexpr double kEpilogueStoreTbps = 1.14;
// The same for the row-store hooks (GemmProblem::row_store): after a 4 × 4 exchange inside each quad, a
// warp instruction stores 64 contiguous bytes of each of 8 rows (whole 32-byte sectors, 16 bytes per
// lane). Predicted 4.0 TB/s before the first measurement; measured (2026-11-27, H100, ncu): nerf_mlp's
// 65536 × 256 × 256 f16 layers (f16 128x256 s4, 3.9 tiles per SM, four K steps) take 52.4–55.7 µs, which
// the model reproduces with 0.88 TB/s (9.8 µs per 64 KB tile beyond its wgmma); with one 2-byte store per
// element (the writer's epilogue before the hooks) the same layers took 90.8–91.7 µs (≈ 0.45 TB/s). So
// the store's instruction count is not what limits a short-K epilogue: the per-SM rate stays within 25 %
// of the pair stores' (above) whatever the instruction width (bench/NOTES.md, gemm-shortk).
constexpr double kEpilogueRowStoreTbps = 0.88;
// The registers-first and staged row-store schedules (GemmProblem::row_store_mode 1 and 2, the
// skeleton's default): every value() before any store, with the tile's edge rows and columns clamped
// rather than predicated, so a row's scale and a column's bias are loaded once, not once per element;
// staged, the rows go through shared memory and bulk copies that drain during the next tile's main
// loop. Calibrated on the H100 (2026-11-27, bench/NOTES.md, gemm-epilogue, call 2; the skeleton alone,
// cost-model tiles): fp8 Q5 128x256 s4 110.1 µs, fp8 Q1 128x192 s4 29.6, bf16 L1 149.4, the nerf layer
// 65536 × 256 × 256 29.7; 3.0 TB/s (2.9 µs per 64 KB tile) predicts 111.1 / 31.2 / 151.3 / 29.5. Before,
// with one load per element, the same schedules took 121 / 33 / 154 / 48.
constexpr double kEpilogueRowStagedTbps = 3.0;

// The main loop's time is the kMainloopNorm-norm of its tensor, load and HBM times (then at least its
// shared-memory and L2 times) rather than the maximum of all five. Calibrated on the calibration sweep
// (gemm-calibration-sweep.json, 16 gemm_chains shapes
// × 19 configurations, 2026-11-26): at M = 128 a 4-stage ring whose loads just keep up with HBM ran
// 12–14 % slower than an 8-stage one (128x64, N 8192 K 3072: 25.3 vs 22.2 µs), which a maximum predicts
// equal; bench/NOTES.md (gemm-chains) has the validation before and after.
constexpr double kMainloopNorm = 4;

double wgmma_efficiency(int bn);

// The N of the wgmma instructions the skeleton issues for a tile BN columns wide: CuTe's ss_op_selector
// (sm90_gemm.cuh, Types::MmaOp; with CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED, which device/solder/gemm/wgmma.cuh
// sets) takes the largest N = 256, 248, …, 8 that divides BN, and mma_ss_columns issues BN / N of them side
// by side: every BN of the catalogue (a multiple of 8 up to 256) runs as one instruction, 224 and 160
// included (without the macro they ran as 7 and 5 m64n32 instructions, 0.72× the rate: bench/NOTES.md,
// quant-fp8).
int wgmma_instruction_n(int bn);

// Predicts `config` on `problem`. Feasibility is not checked (check_feasibility first); needs hw.has_rates
// and a tensor rate for the problem's type (throws solder::Error naming what is missing otherwise).
GemmCost predict_gemm(const GemmProblem& problem, const GemmConfig& config, const HardwareDescription& hw);

}  // namespace solder
