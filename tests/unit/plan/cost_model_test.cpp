// The cost model (src/plan/cost_model.h): its terms add up, it is monotone where it must be, and the
// binding resource follows the problem's shape.
#include "plan/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>

#include "ir/diagnostics.h"
#include "plan/plan.h"

namespace solder {
namespace {

GemmProblem problem(int64_t m, int64_t n, int64_t k, MmaType type = MmaType::bf16) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.type = type;
  return p;
}

GemmConfig big_tile() {
  GemmConfig c;
  c.bm = 128;
  c.bn = 256;
  c.bk = 64;
  c.stages = 4;
  c.consumers = 2;
  return c;
}

TEST(CostModel, TermsAddUpToTheTotal) {
  const GemmCost cost = predict_gemm(problem(8192, 8192, 8192), big_tile(), default_hardware());
  const double norm = std::pow(std::pow(cost.tensor_us, kMainloopNorm) + std::pow(cost.load_us, kMainloopNorm) +
                                   std::pow(cost.hbm_us, kMainloopNorm),
                               1.0 / kMainloopNorm);
  const double mainloop = std::max({norm, cost.smem_us, cost.l2_us});
  EXPECT_NEAR(cost.total_us, cost.launch_us + mainloop + cost.fill_us + cost.merge_us, 1e-9);
  // Without multicast every CTA pulls its A and B panels from L2: 12.9 GB, about as long as the tensor work.
  EXPECT_TRUE(cost.binding == Resource::tensor || cost.binding == Resource::l2) << resource_name(cost.binding);
  EXPECT_EQ(cost.ctas, 64 * 32);
  EXPECT_EQ(cost.waves, 16);  // 2048 CTAs over 132 SMs
  EXPECT_EQ(cost.merge_us, 0);
  // Near the measured bf16 rate (785 TFLOP/s) but not above it.
  EXPECT_GT(cost.tflops(), 550);
  EXPECT_LT(cost.tflops(), 785);
}

// nerf_mlp's 256 x 256 layers (M 65536, K 256: four K steps per tile) spend most of a tile in the
// epilogue; the row-store hooks (GemmProblem::row_store) store at kEpilogueRowStoreTbps, not the pair rate,
// where BN is a multiple of 32 and there is no split (the merge writes float partials).
TEST(CostModel, RowStoresChargeTheirOwnEpilogueRate) {
  GemmProblem p = problem(65536, 256, 256, MmaType::f16);
  p.output = DType::f16;
  p.b_k_major = false;
  const GemmCost pairs = predict_gemm(p, big_tile(), default_hardware());
  p.row_store = true;
  p.row_store_mode = 0;  // direct: loads and stores interleaved
  const GemmCost rows = predict_gemm(p, big_tile(), default_hardware());
  // Measured on the H100 (bench/NOTES.md, gemm-shortk): 52.4-55.7 us per layer with row stores.
  EXPECT_GT(rows.total_us, 48.0);
  EXPECT_LT(rows.total_us, 60.0);
  // The store term alone scales with the rate: the tensor time without it is the same.
  const double units = pairs.waves;
  const double tile_bytes = 128.0 * 256 * 2;
  const double blocks = static_cast<double>(pairs.concurrent_ctas);
  EXPECT_NEAR(pairs.tensor_us - rows.tensor_us,
              units * tile_bytes * blocks * (1.0 / (kEpilogueStoreTbps * 1e9) - 1.0 / (kEpilogueRowStoreTbps * 1e9)) * 1e3, 1e-6);
  // The default schedule (registers first or staged: one load per row scale and column bias),
  // measured 29.7 us per layer (bench/NOTES.md, gemm-epilogue, call 2); registers first is charged the
  // same rate.
  p.row_store_mode = 2;
  const GemmCost staged = predict_gemm(p, big_tile(), default_hardware());
  EXPECT_GT(staged.total_us, 25.0);
  EXPECT_LT(staged.total_us, 35.0);
  EXPECT_NEAR(rows.tensor_us - staged.tensor_us,
              units * tile_bytes * blocks * (1.0 / (kEpilogueRowStoreTbps * 1e9) - 1.0 / (kEpilogueRowStagedTbps * 1e9)) * 1e3, 1e-6);
  p.row_store_mode = 1;
  EXPECT_DOUBLE_EQ(predict_gemm(p, big_tile(), default_hardware()).total_us, staged.total_us);
  p.row_store_mode = 0;
  GemmConfig odd = big_tile();
  odd.bn = 48;  // not a multiple of 32: the kernel takes the pair stores
  p.row_store = false;
  const double pair_48 = predict_gemm(p, odd, default_hardware()).total_us;
  p.row_store = true;
  EXPECT_DOUBLE_EQ(predict_gemm(p, odd, default_hardware()).total_us, pair_48);
}

// The ping-pong schedule (GemmConfig::pingpong): a block's units alternate between two warpgroups, so
// all epilogues but the last run under the other warpgroup's main loop; with one unit per block it is one
// warpgroup alone, priced as the one-consumer tile of the same shape.
TEST(CostModel, PingpongHidesAllButTheLastEpilogue) {
  GemmProblem p = problem(8192, 8192, 8192, MmaType::f8e4m3);
  p.row_store = true;
  GemmConfig one;
  one.type = MmaType::f8e4m3;
  one.bm = 64;
  one.bn = 256;
  one.bk = 128;
  one.stages = 4;
  one.consumers = 1;
  GemmConfig pp = one;
  pp.consumers = 2;
  pp.pingpong = true;
  const GemmCost a = predict_gemm(p, one, default_hardware()), b = predict_gemm(p, pp, default_hardware());
  ASSERT_EQ(a.concurrent_ctas, b.concurrent_ctas);
  const double units = b.waves;
  ASSERT_GT(units, 2);
  // Same main loop per unit but for the per-step gaps (one consumer's against ping-pong's smaller ones),
  // and units - 1 fewer stores.
  const double store_us = 64.0 * 256 * 2 / (std::min(default_hardware().rates.sm_load_gbps,
                                                     kEpilogueRowStagedTbps * 1e3 / static_cast<double>(b.concurrent_ctas)) * 1e3);
  const double gaps_us = units * (8192 / 128) * (one_consumer_step_cycles(256) - kPingpongStepCycles) / default_hardware().sm_clock_mhz;
  EXPECT_NEAR(a.tensor_us - b.tensor_us, (units - 1) * store_us + gaps_us, 1e-6);
  EXPECT_LE(b.total_us, a.total_us);  // (both may be bound by another level)
  // One unit per block (M 128: 24 tiles of 64 x 256): the second warpgroup has nothing to do.
  GemmProblem skinny = problem(128, 3072, 8192, MmaType::f8e4m3);
  const GemmCost c = predict_gemm(skinny, one, default_hardware()), d = predict_gemm(skinny, pp, default_hardware());
  ASSERT_EQ(c.waves, 1);
  EXPECT_DOUBLE_EQ(c.tensor_us, d.tensor_us);
}

// A cluster's ring moves at its slowest block's pace: the tensor term grows by kClusterPacing per extra
// block. bf16 L2 (4096 x 14336 x 4096, 128x256 s4): measured faster without its 1x4 cluster (bench/NOTES.md,
// gemm-mainloop), which the model now prefers.
TEST(CostModel, ClustersPayForTheirSlowestBlock) {
  GemmProblem p = problem(4096, 14336, 4096);
  p.row_store = true;
  GemmConfig one = big_tile();
  GemmConfig four = one;
  four.cluster_n = 4;
  const GemmCost a = predict_gemm(p, one, default_hardware()), b = predict_gemm(p, four, default_hardware());
  EXPECT_LT(a.total_us, b.total_us);
  EXPECT_LT(a.tensor_us, b.tensor_us);
}

// B multicast halves B's L2 -> SM bytes in the model only in a split-K launch (b_multicast_l2_factor,
// bmc-term); A multicast halves A's with or without a split.
TEST(CostModel, BMulticastSavesL2BytesOnlyWithSplitK) {
  const HardwareDescription& hw = default_hardware();
  GemmConfig c;
  c.type = MmaType::bf16;
  c.bm = 64;
  c.bn = 64;
  c.bk = 64;
  c.stages = 8;
  c.consumers = 1;
  const GemmProblem p = problem(256, 256, 65536);
  for (int split : {1, 8}) {
    GemmConfig plain = c, along_m = c, along_n = c;
    plain.split_k = along_m.split_k = along_n.split_k = split;
    along_m.cluster_m = 2;
    along_n.cluster_n = 2;
    const GemmCost a = predict_gemm(p, plain, hw), b = predict_gemm(p, along_m, hw), d = predict_gemm(p, along_n, hw);
    const double operand_bytes = a.l2_bytes - (split > 1 ? 8.0 * 256 * 256 * 4 : 256.0 * 256 * 2);  // less D or partials
    if (split > 1)
      EXPECT_NEAR(a.l2_bytes - b.l2_bytes, operand_bytes / 4, 1) << split;  // B's half of the operand bytes, halved
    else
      EXPECT_EQ(b.l2_bytes, a.l2_bytes);
    EXPECT_NEAR(a.l2_bytes - d.l2_bytes, operand_bytes / 4, 1) << split;  // A's, halved
  }
  GemmConfig split = c;
  split.split_k = 8;
  split.cluster_m = 4;
  EXPECT_EQ(b_multicast_l2_factor(split), 4);
  split.split_k = 1;
  EXPECT_EQ(b_multicast_l2_factor(split), 1);
}

TEST(CostModel, MoreKTakesLonger) {
  const HardwareDescription& hw = default_hardware();
  for (int64_t m : {128, 1024, 8192}) {
    double previous = 0;
    for (int64_t k : {512, 1024, 2048, 4096, 8192, 16384}) {
      const double t = predict_gemm(problem(m, 4096, k), big_tile(), hw).total_us;
      EXPECT_GT(t, previous) << "M=" << m << " K=" << k;
      previous = t;
    }
  }
  // The planner's best time grows with K too.
  double previous = 0;
  for (int64_t k : {1024, 4096, 16384}) {
    const double t = plan_gemm(problem(2048, 2048, k), hw).chosen()->cost.total_us;
    EXPECT_GT(t, previous) << "K=" << k;
    previous = t;
  }
}

// The H100 with `sms` SMs of the same speed: the rates an SM has alone (tensor cores, shared memory) scale with
// the count; L2 and HBM stay as they are.
HardwareDescription with_sms(int sms) {
  HardwareDescription hw = default_hardware();
  const double scale = static_cast<double>(sms) / hw.sm_count;
  hw.sm_count = sms;
  for (auto& [type, rate] : hw.rates.tensor_tflops) rate *= scale;
  for (DsmEntry& entry : hw.dsm)
    if (entry.cluster_size == 1) entry.pull_tbps *= scale;
  return hw;
}

TEST(CostModel, MoreSmsAreNeverSlower) {
  const HardwareDescription small = with_sms(66);
  const HardwareDescription large = with_sms(264);
  const HardwareDescription& h100 = default_hardware();
  for (auto shape : {problem(8192, 8192, 8192), problem(128, 3072, 8192), problem(2048, 128, 768), problem(4096, 7168, 2048)}) {
    const double t_small = plan_gemm(shape, small).chosen()->cost.total_us;
    const double t_h100 = plan_gemm(shape, h100).chosen()->cost.total_us;
    const double t_large = plan_gemm(shape, large).chosen()->cost.total_us;
    EXPECT_LE(t_h100, t_small) << describe(shape);
    EXPECT_LE(t_large, t_h100) << describe(shape);
  }
}

TEST(CostModel, Fp8IsFasterThanBf16OnALargeProblem) {
  GemmConfig fp8 = big_tile();
  fp8.type = MmaType::f8e4m3;
  fp8.bk = 128;
  const double bf16_us = predict_gemm(problem(8192, 8192, 8192), big_tile(), default_hardware()).total_us;
  const double fp8_us = predict_gemm(problem(8192, 8192, 8192, MmaType::f8e4m3), fp8, default_hardware()).total_us;
  EXPECT_LT(fp8_us, 0.7 * bf16_us);
}

TEST(CostModel, SplitKChargesTheMergeAndHelpsASkinnyProblem) {
  const GemmProblem skinny = problem(128, 3072, 8192);
  GemmConfig tile = big_tile();
  tile.bn = 128;
  const GemmCost whole = predict_gemm(skinny, tile, default_hardware());
  tile.split_k = 4;
  const GemmCost split = predict_gemm(skinny, tile, default_hardware());
  EXPECT_EQ(whole.merge_us, 0);
  // The in-kernel merge: no second launch, but at least one tile's 3 other partials through one SM's port.
  const Rates& rates = default_hardware().rates;
  EXPECT_GE(split.merge_us, 3.0 * 128 * 128 * 4 / (rates.sm_load_gbps * 1e3) + kSplitKMergeLatencies * rates.memory_latency_ns * 1e-3);
  EXPECT_GT(split.merge_us, 0);
  EXPECT_EQ(split.ctas, 4 * whole.ctas);
  EXPECT_LT(split.total_us, whole.total_us);  // 24 CTAs cannot stream 50 MB nor reach the tensor rate
  EXPECT_NE(whole.binding, Resource::launch);
}

TEST(CostModel, FewTileProblemsChargeFewerMergeLatencies) {
  // At most half of the SMs' worth of 64 x 64 output tiles: the merge's round trips are charged
  // kSplitKMergeLatenciesFewTiles latencies per round, else kSplitKMergeLatencies; both also pay the
  // merging CTA's serial reads of the other partials (kSplitKPartialReadLatencies per 64 x 64 block).
  const HardwareDescription& hw = default_hardware();
  GemmConfig tile = big_tile();
  tile.bm = 64;
  tile.bn = 64;
  tile.consumers = 1;
  tile.stages = 8;
  tile.split_k = 4;
  const double latency_us = hw.rates.memory_latency_ns * 1e-3;
  const double reads_us = 3 * (64.0 * 64 * 4 / (hw.rates.sm_load_gbps * 1e3) + kSplitKPartialReadLatencies * latency_us);
  const GemmCost few = predict_gemm(problem(128, 1024, 3072), tile, hw);    // 32 tiles of 64 x 64
  const GemmCost edge = predict_gemm(problem(128, 2112, 3072), tile, hw);   // 66 tiles: half of the 132 SMs
  const GemmCost many = predict_gemm(problem(128, 3072, 8192), tile, hw);   // 96 tiles: 384 units, 3 rounds
  EXPECT_NEAR(few.merge_us, reads_us + kSplitKMergeLatenciesFewTiles * latency_us, 1e-9);
  EXPECT_NEAR(edge.merge_us - edge.waves * kSplitKMergeLatenciesFewTiles * latency_us, reads_us, 1e-9);
  EXPECT_GE(many.merge_us, many.waves * kSplitKMergeLatencies * latency_us + reads_us);
}

TEST(CostModel, TheMergeReadsEachPartialBlockInTurn) {
  // The merging CTA reads split_k - 1 partials of BM x BN f32, one after the other: a 128 x 64 tile split
  // 4 ways reads 6 blocks of 64 x 64, a 64 x 64 tile split 2 ways one (ffn S2's down projection).
  const HardwareDescription& hw = default_hardware();
  GemmProblem p = problem(128, 2048, 5632, MmaType::f16);
  p.a_k_major = true;
  p.b_k_major = false;
  GemmConfig wide = big_tile();
  wide.type = MmaType::f16;
  wide.bn = 64;
  wide.stages = 6;
  wide.split_k = 4;
  GemmConfig narrow = wide;
  narrow.bm = 64;
  narrow.consumers = 1;
  narrow.stages = 14;
  narrow.split_k = 2;
  const double latency_us = hw.rates.memory_latency_ns * 1e-3;
  const GemmCost w = predict_gemm(p, wide, hw), n = predict_gemm(p, narrow, hw);
  EXPECT_EQ(w.ctas, n.ctas);  // 128 of them each
  EXPECT_NEAR(w.merge_us - n.merge_us,
              (6 - 1) * kSplitKPartialReadLatencies * latency_us + (3.0 * 128 * 64 - 64 * 64) * 4 / (hw.rates.sm_load_gbps * 1e3), 1e-9);
}

TEST(CostModel, TinyProblemsAreBoundByLaunchOrLatency) {
  const GemmCost cost = predict_gemm(problem(64, 64, 64), big_tile(), default_hardware());
  EXPECT_TRUE(cost.binding == Resource::launch || cost.binding == Resource::fill) << resource_name(cost.binding);
  EXPECT_GT(cost.total_us, default_hardware().rates.launch_us);
}

TEST(CostModel, WgmmaEfficiencyGrowsWithN) {
  EXPECT_DOUBLE_EQ(wgmma_efficiency(256), 1.0);
  double previous = 0;
  for (int n : {16, 32, 64, 128, 256}) {
    EXPECT_GT(wgmma_efficiency(n), previous);
    previous = wgmma_efficiency(n);
  }
}

GemmConfig tile(int bm, int bn, int stages) {
  GemmConfig c;
  c.bm = bm;
  c.bn = bn;
  c.bk = 64;
  c.stages = stages;
  c.consumers = bm / 64;
  return c;
}

TEST(CostModel, PersistentBlocksRunTheirTilesInTurn) {
  // One block per SM: 132 tiles are one tile per block, 264 are two, in turn, at the same per-SM rates.
  const HardwareDescription& hw = default_hardware();
  const GemmCost one = predict_gemm(problem(128 * 132, 128, 4096), tile(128, 128, 4), hw);
  const GemmCost two = predict_gemm(problem(128 * 264, 128, 4096), tile(128, 128, 4), hw);
  EXPECT_EQ(one.concurrent_ctas, 132);
  EXPECT_EQ(two.concurrent_ctas, 132);
  EXPECT_EQ(one.waves, 1);
  EXPECT_EQ(two.waves, 2);
  EXPECT_NEAR(two.tensor_us, 2 * one.tensor_us, 1e-9);
  EXPECT_NEAR(two.load_us, 2 * one.load_us, 1e-9);
  // 133 tiles: one block runs two, so the busiest SM takes as long as with 264.
  const GemmCost tail = predict_gemm(problem(128 * 133, 128, 4096), tile(128, 128, 4), hw);
  EXPECT_EQ(tail.waves, 2);
  EXPECT_NEAR(tail.tensor_us, two.tensor_us, 1e-9);
}

TEST(CostModel, FewBusySmsRunFasterEachButNotTogether) {
  // 12 tiles on 12 SMs: each SM runs at up to kIdleSmTensorBoost × its full-chip share.
  const HardwareDescription& hw = default_hardware();
  const GemmCost few = predict_gemm(problem(128, 128 * 12, 8192), tile(128, 128, 4), hw);
  const GemmCost all = predict_gemm(problem(128, 128 * 132, 8192), tile(128, 128, 4), hw);
  EXPECT_EQ(few.concurrent_ctas, 12);
  EXPECT_LT(few.tensor_us, all.tensor_us);
  const double flops = 2.0 * 128 * 128 * 8192;
  const double per_sm_tflops = flops / (few.tensor_us * 1e6);  // includes the epilogue: below the bound
  EXPECT_LE(per_sm_tflops, hw.rates.tensor("bf16") * kIdleSmTensorBoost / hw.sm_count / few.wgmma_efficiency);
}

TEST(CostModel, WgmmaEfficiencyIsThatOfTheIssuedInstructions) {
  // CuTe's selector with the extended shapes (wgmma.cuh sets CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED): every
  // BN of the catalogue is one instruction, 224 and 160 included (m64n224k32 in the PTX of quant_gemm Q3's
  // 128 x 224 kernel); a BN over 256 is issued as the widest N that divides it.
  EXPECT_EQ(wgmma_instruction_n(224), 224);
  EXPECT_EQ(wgmma_instruction_n(160), 160);
  EXPECT_EQ(wgmma_instruction_n(192), 192);
  EXPECT_EQ(wgmma_instruction_n(96), 96);
  EXPECT_EQ(wgmma_instruction_n(256), 256);
  EXPECT_EQ(wgmma_instruction_n(384), 192);
  EXPECT_EQ(wgmma_instruction_n(512), 256);
  EXPECT_GT(wgmma_efficiency(224), wgmma_efficiency(192));
  EXPECT_GT(wgmma_efficiency(160), wgmma_efficiency(128));
  EXPECT_LT(wgmma_efficiency(224), 1.0);
}

TEST(CostModel, TheIdleSmBoostGrowsWithTheIdleSms) {
  // The same 128 x 128 tile per SM on 12, 66, 120 and 132 busy SMs: the per-SM rate rises as more SMs idle,
  // by at most kIdleSmTensorBoost; 120 of 132 busy (2 x 2 clusters) gain 1.6 %, not the 10 % of sharing
  // the chip's rate among them.
  const HardwareDescription& hw = default_hardware();
  auto unit_us = [&](int tiles) { return predict_gemm(problem(128, 128 * tiles, 8192), tile(128, 128, 4), hw).tensor_us; };
  EXPECT_LT(unit_us(12), unit_us(66));
  EXPECT_LT(unit_us(66), unit_us(120));
  EXPECT_LT(unit_us(120), unit_us(132));
  EXPECT_LT((unit_us(132) - unit_us(120)) / unit_us(132), 0.03);
  const double flops = 2.0 * 128 * 128 * 8192;
  EXPECT_GT(unit_us(12), flops / (hw.rates.tensor("bf16") / hw.sm_count * kIdleSmTensorBoost * 1e6 * wgmma_efficiency(128)));
}

TEST(CostModel, DeeperRingsStreamFasterUpToThePort) {
  // M = 128: each SM streams its B panel once; stages - 1 loads in flight cover the memory latency.
  const HardwareDescription& hw = default_hardware();
  double previous = 1e30;
  for (int stages = 2; stages <= 7; ++stages) {
    const GemmCost cost = predict_gemm(problem(128, 3072, 8192), tile(128, 128, stages), hw);
    EXPECT_LE(cost.load_us, previous) << stages;
    previous = cost.load_us;
  }
  const double bytes = 2.0 * 256 * 8192;  // (BM + BN) × K × 2 bytes for the one tile of an SM
  EXPECT_NEAR(previous, bytes / (hw.rates.sm_load_gbps * 1e3), 1e-9);  // 6 in flight: the port binds
  EXPECT_GT(predict_gemm(problem(128, 3072, 8192), tile(128, 128, 2), hw).total_us,
            predict_gemm(problem(128, 3072, 8192), tile(128, 128, 6), hw).total_us);
}

TEST(CostModel, APartialLastRoundReadsOnlyItsPanels) {
  // M = 128, 172 tiles of 64 x 128 on 132 blocks: B (90 MB, above half of L2) is read once, the last
  // round's 40 tiles reading only their own columns.
  GemmProblem p = problem(128, 11008, 4096, MmaType::f16);
  p.b_k_major = false;
  const GemmCost cost = predict_gemm(p, tile(64, 128, 6), default_hardware());
  EXPECT_EQ(cost.waves, 2);
  const double unique = (128.0 * 4096 + 4096.0 * 11008) * 2 + 128.0 * 11008 * 2;  // A, B, D once
  EXPECT_GE(cost.hbm_bytes, unique - 1);
  EXPECT_LE(cost.hbm_bytes, 1.05 * unique);
}

// torch.matmul of a [1024, 1024] by b [16, 1024, 1024] (the census's bmm_broadcast_left): A has no
// batch axis and stays in L2 across the batch-major grid, so HBM reads it once, not 16 times: before,
// 16 × (A + B) + D = 96 MiB; now A + 16 B + D = 66 MiB, and unique_bytes (the floor) says the same.
TEST(CostModel, ASharedOperandIsReadOnceForEveryBatch) {
  GemmProblem p = problem(1024, 1024, 1024);
  p.batch = 16;
  p.b_k_major = false;
  const double mib = 1024.0 * 1024.0, operand = 2 * mib, batched = 16 * 2 * mib;
  const GemmCost per_batch = predict_gemm(p, big_tile(), default_hardware());
  EXPECT_DOUBLE_EQ(per_batch.hbm_bytes, 16 * operand + batched + batched);
  EXPECT_DOUBLE_EQ(p.unique_bytes(), batched + batched + batched);
  p.a_shared = true;
  const GemmCost shared = predict_gemm(p, big_tile(), default_hardware());
  EXPECT_DOUBLE_EQ(shared.hbm_bytes, operand + batched + batched);
  EXPECT_DOUBLE_EQ(p.unique_bytes(), operand + batched + batched);
  EXPECT_LT(shared.hbm_us, per_batch.hbm_us);
  // The other terms do not see the sharing: every tile still loads its A panel from L2.
  EXPECT_DOUBLE_EQ(shared.tensor_us, per_batch.tensor_us);
  EXPECT_DOUBLE_EQ(shared.l2_bytes, per_batch.l2_bytes);
  // A shared B is the same; one larger than half of L2 is read for every batch again.
  GemmProblem wide = problem(64, 8192, 4096);  // B 64 MiB, above half of the H100's 50 MiB L2
  wide.batch = 4;
  const double wide_b = 8192.0 * 4096 * 2;
  const double once = predict_gemm(wide, big_tile(), default_hardware()).hbm_bytes;
  wide.b_shared = true;
  EXPECT_DOUBLE_EQ(predict_gemm(wide, big_tile(), default_hardware()).hbm_bytes, once);
  EXPECT_DOUBLE_EQ(wide.unique_bytes(), 4 * 64.0 * 4096 * 2 + wide_b + 4 * 64.0 * 8192 * 2);
}

TEST(CostModel, MissingRatesAreAnError) {
  HardwareDescription hw = default_hardware();
  hw.has_rates = false;
  EXPECT_THROW(predict_gemm(problem(1024, 1024, 1024), big_tile(), hw), Error);
  hw.has_rates = true;
  hw.rates.tensor_tflops.erase("bf16");
  EXPECT_THROW(predict_gemm(problem(1024, 1024, 1024), big_tile(), hw), Error);
}

}  // namespace
}  // namespace solder
