// The skeleton choice (src/plan/skeleton_choice.h): which split-K candidates it offers, and that it
// splits K where the output tiles leave most SMs idle (M = 128) and not on a large square problem.
#include "plan/skeleton_choice.h"

#include "plan/cost_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

namespace solder {
namespace {

GemmProblem problem(int64_t m, int64_t n, int64_t k) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.type = MmaType::f16;
  p.output = DType::f16;
  return p;
}

GemmConfig tile(int bm, int bn, int split_k) {
  GemmConfig c;
  c.type = MmaType::f16;
  c.bm = bm;
  c.bn = bn;
  c.bk = 64;
  c.stages = 6;
  c.consumers = bm / 64;
  c.split_k = split_k;
  return c;
}

GemmSkeletonProblem skeleton_problem(int64_t m, int64_t n, int64_t k, bool b_k_major) {
  GemmSkeletonProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = GemmSkeletonOperand{"a", DType::f16, true, m, k, k, 1, 0};
  p.b = GemmSkeletonOperand{"b", DType::f16, b_k_major, n, k, b_k_major ? k : n, 1, 0};
  return p;
}

TEST(SkeletonChoice, OffersPowerOfTwoSplitsOnlyWhereTilesLeaveSmsIdle) {
  const GemmProblem skinny = problem(128, 3072, 8192);  // 24 tiles of 128 x 128, 128 K tiles
  EXPECT_TRUE(split_k_offered(skinny, tile(128, 128, 1), 132));
  for (int split : {2, 4, 8, 16}) EXPECT_TRUE(split_k_offered(skinny, tile(128, 128, split), 132)) << split;
  EXPECT_FALSE(split_k_offered(skinny, tile(128, 128, 3), 132));  // not a power of two
  EXPECT_FALSE(split_k_offered(skinny, tile(128, 128, 6), 132));
  EXPECT_FALSE(split_k_offered(skinny, tile(128, 96, 2), 132));  // BN 96: not yet run on the GPU
  EXPECT_TRUE(split_k_offered(skinny, tile(64, 192, 2), 132));
  // 8192^2: 2048 tiles fill the SMs many times over.
  EXPECT_TRUE(split_k_offered(problem(8192, 8192, 8192), tile(128, 128, 1), 132));
  EXPECT_FALSE(split_k_offered(problem(8192, 8192, 8192), tile(128, 128, 2), 132));
  // K = 384: 6 K tiles; a split must keep kMinSplitKTiles of them.
  EXPECT_FALSE(split_k_offered(problem(128, 3072, 384), tile(128, 128, 2), 132));
  EXPECT_TRUE(split_k_offered(problem(128, 3072, 512), tile(128, 128, 2), 132));
  EXPECT_FALSE(split_k_offered(problem(128, 3072, 512), tile(128, 128, 4), 132));
}

TEST(SkeletonChoice, SplitsKOnlyWhereTheMergePaysAtM128) {
  // ffn S1's down projection (M 128, N 3072, K 8192): measured on the H100 (bench/NOTES.md, gemm-chains),
  // 64x64 s8 without split-K took 27.1 us and the 128x64 s6 split 2 that the model chose before 29.7 us:
  // the merge costs more than it recovers. With N 1024, K 4096 (16 tiles of 128 x 64) and B N-major, it pays.
  for (bool b_k_major : {false, true}) {
    SkeletonChoice one = choose_skeleton_config(skeleton_problem(128, 3072, 8192, b_k_major), MmaType::f16, DType::f16);
    ASSERT_TRUE(one.chosen.has_value()) << one.why;
    EXPECT_EQ(one.chosen->config.split_k, 1) << config_name(one.chosen->config);
    EXPECT_GE(one.chosen->cost.ctas, 66) << config_name(one.chosen->config);  // at least half of the SMs busy
    if (b_k_major) continue;  // a K-major B also has 16-column tiles, enough of them without a split
    SkeletonChoice split = choose_skeleton_config(skeleton_problem(128, 1024, 4096, b_k_major), MmaType::f16, DType::f16);
    ASSERT_TRUE(split.chosen.has_value()) << split.why;
    const GemmConfig& c = split.chosen->config;
    EXPECT_TRUE(in_device_skeleton(c)) << config_name(c);
    EXPECT_GT(c.split_k, 1) << config_name(c);
    EXPECT_GT(split.chosen->cost.merge_us, 0) << config_name(c);
  }
}

TEST(SkeletonChoice, KeepsSplitOneForFfnsFirstProduct) {
  // c = a . b of examples/ffn.sol: M 128, N 8192, K 3072, f32 out, B N-major. Measured on the H100
  // (2026-11-26): every split-K tile was slower than split 1 here (26.3 us for 128 x 128 against
  // 32.0 with split 2); the merge's latencies in the model keep split 1.
  GemmSkeletonProblem p = skeleton_problem(128, 8192, 3072, false);
  SkeletonChoice choice = choose_skeleton_config(p, MmaType::f16, DType::f32);
  ASSERT_TRUE(choice.chosen.has_value()) << choice.why;
  EXPECT_EQ(choice.chosen->config.split_k, 1) << config_name(choice.chosen->config);
}

TEST(SkeletonChoice, DoesNotSplitALargeSquareProblem) {
  SkeletonChoice choice = choose_skeleton_config(skeleton_problem(8192, 8192, 8192, true), MmaType::f16, DType::f16);
  ASSERT_TRUE(choice.chosen.has_value()) << choice.why;
  EXPECT_EQ(choice.chosen->config.split_k, 1) << config_name(choice.chosen->config);
  EXPECT_EQ(choice.chosen->cost.merge_us, 0);
}

TEST(SkeletonChoice, ForcedTileMayNameACluster) {
  std::string why;
  setenv("SOLDER_GEMM_TILE", "128x64s6k1c1x2", 1);
  std::optional<ForcedTile> t = forced_skeleton_tile(&why);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->bm, 128);
  EXPECT_EQ(t->bn, 64);
  EXPECT_EQ(t->stages, 6);
  EXPECT_EQ(t->split_k, 1);
  EXPECT_EQ(t->cluster_m, 1);
  EXPECT_EQ(t->cluster_n, 2);
  setenv("SOLDER_GEMM_TILE", "128x64s8k2", 1);
  t = forced_skeleton_tile(&why);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->split_k, 2);
  EXPECT_EQ(t->cluster_m * t->cluster_n, 1);
  for (const char* bad : {"128x64s6k1c1", "128x64s6k1c1x2z", "128x64s6"}) {
    setenv("SOLDER_GEMM_TILE", bad, 1);
    why.clear();
    t = forced_skeleton_tile(&why);
    ASSERT_TRUE(t.has_value()) << bad;
    EXPECT_EQ(t->bm, 0) << bad;  // matches no configuration
    EXPECT_NE(why.find("BMxBNsSTAGESkSPLIT[cMxN]"), std::string::npos) << bad << ": " << why;
  }
  unsetenv("SOLDER_GEMM_TILE");
  // The forced cluster is taken where the skeleton has it.
  setenv("SOLDER_GEMM_TILE", "128x64s6k1c1x4", 1);
  SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, 8192, 3072, false), MmaType::f16, DType::f16);
  unsetenv("SOLDER_GEMM_TILE");
  ASSERT_TRUE(c.chosen.has_value()) << c.why;
  EXPECT_EQ(c.chosen->config.cluster_n, 4);
  EXPECT_NE(c.why.find("forced by SOLDER_GEMM_TILE"), std::string::npos) << c.why;
}

TEST(SkeletonChoice, AForcedTileTheSkeletonDoesNotOfferRefuses) {
  // 128 x 80 on an N-major B (BN not a multiple of 64) and split 10 (not on the catalogue's split axis) used
  // to fall through to the cost model's own choice, reported as forced.
  for (const char* tile : {"128x80s5k1", "128x128s6k10", "128x64s6"}) {
    setenv("SOLDER_GEMM_TILE", tile, 1);
    SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, 8960, 1536, false), MmaType::f16, DType::f16);
    unsetenv("SOLDER_GEMM_TILE");
    EXPECT_FALSE(c.chosen.has_value()) << tile << ": " << config_name(c.chosen->config);
    EXPECT_NE(c.why.find("SOLDER_GEMM_TILE"), std::string::npos) << tile << ": " << c.why;
  }
  // A tile it offers is still taken.
  setenv("SOLDER_GEMM_TILE", "64x128s8k2", 1);
  SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, 2560, 9728, false), MmaType::f16, DType::f16);
  unsetenv("SOLDER_GEMM_TILE");
  ASSERT_TRUE(c.chosen.has_value()) << c.why;
  EXPECT_EQ(c.chosen->config.bn, 128);
  EXPECT_EQ(c.chosen->config.split_k, 2);
}

TEST(SkeletonChoice, ForcedTileMayNameTheProductItApplies) {
  // "TILE@M,N,K" entries apply to that product only; the first entry that applies wins; a product no
  // entry names is the cost model's.
  std::string why;
  setenv("SOLDER_GEMM_TILE", "64x64s8k4@128,1024,3072;128x64s6k1@128,3072,1024", 1);
  std::optional<ForcedTile> t = forced_skeleton_tile(&why, std::array<int64_t, 3>{128, 1024, 3072});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->bm, 64);
  EXPECT_EQ(t->split_k, 4);
  t = forced_skeleton_tile(&why, std::array<int64_t, 3>{128, 3072, 1024});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->bm, 128);
  EXPECT_EQ(t->split_k, 1);
  EXPECT_FALSE(forced_skeleton_tile(&why, std::array<int64_t, 3>{128, 8192, 3072}).has_value());
  EXPECT_FALSE(forced_skeleton_tile(&why).has_value());  // no shape: only unqualified entries apply
  // In the choice: the named product takes the tile, the other keeps the model's.
  SkeletonChoice forced = choose_skeleton_config(skeleton_problem(128, 1024, 3072, false), MmaType::f16, DType::f16);
  ASSERT_TRUE(forced.chosen.has_value()) << forced.why;
  EXPECT_EQ(forced.chosen->config.split_k, 4);
  EXPECT_NE(forced.why.find("forced by SOLDER_GEMM_TILE"), std::string::npos) << forced.why;
  SkeletonChoice other = choose_skeleton_config(skeleton_problem(128, 8192, 3072, false), MmaType::f16, DType::f16);
  ASSERT_TRUE(other.chosen.has_value()) << other.why;
  EXPECT_EQ(other.why.find("forced"), std::string::npos) << other.why;
  // An unqualified entry after a shaped one applies to the rest.
  setenv("SOLDER_GEMM_TILE", "64x64s8k4@128,1024,3072;128x64s6k1", 1);
  t = forced_skeleton_tile(&why, std::array<int64_t, 3>{128, 8192, 3072});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->bm, 128);
  // A malformed entry or shape matches nothing and says why.
  for (const char* bad : {"64x64s8k4@128,1024", "64x64s8k4@a,b,c", "64x64s8@128,1024,3072"}) {
    setenv("SOLDER_GEMM_TILE", bad, 1);
    why.clear();
    t = forced_skeleton_tile(&why, std::array<int64_t, 3>{128, 1024, 3072});
    ASSERT_TRUE(t.has_value()) << bad;
    EXPECT_EQ(t->bm, 0) << bad;
    EXPECT_NE(why.find("@M,N,K"), std::string::npos) << bad << ": " << why;
  }
  unsetenv("SOLDER_GEMM_TILE");
}

TEST(SkeletonChoice, SplitsKForFewTileDownProjectionsWhereItMeasuredFaster) {
  // gemm_chains' down projections at M 128 (H100, 2026-11-26, gemm-chains3-sweep.json): split 4 of
  // 64 x 64 beat split 1 at N 384-1024 with K >= 1536, lost at N 768 K 768, and at N 3072 K 8192 the
  // unsplit 64 x 64 beat every split.
  // With the generated kernels' row-store epilogue (the sweep's kernels).
  for (auto [n, k] : {std::pair{1024, 3072}, std::pair{768, 3072}, std::pair{512, 2048}, std::pair{384, 1536}}) {
    SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, n, k, false), MmaType::f16, DType::f16, true, 2);
    ASSERT_TRUE(c.chosen.has_value()) << c.why;
    // N 384 K 1536 takes split 2 since the merge's partial reads are priced (ffn-s2); split 2 was not
    // measured there, split 4 and 1 were.
    EXPECT_EQ(c.chosen->config.split_k, n == 384 ? 2 : 4) << n << " " << k << ": " << config_name(c.chosen->config);
    EXPECT_EQ(c.chosen->config.bm, 64) << n << " " << k;
    EXPECT_EQ(c.chosen->config.bn, 64) << n << " " << k;
  }
  for (auto [n, k] : {std::pair{768, 768}, std::pair{256, 512}, std::pair{64, 256}, std::pair{3072, 8192}, std::pair{3072, 1024}}) {
    SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, n, k, false), MmaType::f16, DType::f16, true, 2);
    ASSERT_TRUE(c.chosen.has_value()) << c.why;
    EXPECT_EQ(c.chosen->config.split_k, 1) << n << " " << k << ": " << config_name(c.chosen->config);
  }
}

TEST(SkeletonChoice, SplitsOnlyWithClustersOfAtMostTwoBlocks) {
  const GemmProblem skinny = problem(128, 3072, 8192);
  GemmConfig c = tile(128, 64, 2);
  c.cluster_n = 2;
  EXPECT_TRUE(split_k_offered(skinny, c, 132));
  c.cluster_n = 4;
  EXPECT_FALSE(split_k_offered(skinny, c, 132));
  c.split_k = 1;
  EXPECT_TRUE(split_k_offered(skinny, c, 132));
}

TEST(SkeletonChoice, KeepsClustersOffTheM128ProductsWhereTheyMeasuredSlower) {
  // gemm_chains at M 128 (H100, 2026-11-26, gemm_chains.md "Clusters"): every product's tile as a 1x2
  // cluster along N (A multicast) ran 2.6 us per kernel slower; the model charges a cluster launch
  // kSkeletonClusterUs more than the probe's empty cluster kernel and chooses no cluster there.
  for (auto [n, k] : {std::pair{8192, 3072}, std::pair{3072, 8192}, std::pair{11008, 4096}, std::pair{16384, 4096}}) {
    SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, n, k, false), MmaType::f16, DType::f16);
    ASSERT_TRUE(c.chosen.has_value()) << c.why;
    EXPECT_EQ(c.chosen->config.cluster_size(), 1) << n << " " << k << ": " << config_name(c.chosen->config);
  }
  GemmConfig one = tile(128, 64, 1), pair = tile(128, 64, 1);
  pair.cluster_n = 2;
  const HardwareDescription& hw = default_hardware();
  const GemmCost a = predict_gemm(problem(128, 8192, 3072), one, hw), b = predict_gemm(problem(128, 8192, 3072), pair, hw);
  EXPECT_NEAR(b.launch_us - a.launch_us, hw.rates.cluster_launch_us + kSkeletonClusterUs, 1e-9);
  EXPECT_LT(b.l2_us, a.l2_us);  // the multicast still halves A's L2 -> SM bytes in the model
  // B multicast alone (a cluster along M) pays the fitted kSkeletonBMulticastClusterUs instead; a 2 x 2
  // cluster multicasts A too and pays the measured A-multicast charge.
  GemmConfig along_m = tile(64, 64, 1), square = tile(128, 64, 1);
  along_m.cluster_m = 2;
  square.cluster_m = square.cluster_n = 2;
  const GemmCost c = predict_gemm(problem(128, 8192, 3072), along_m, hw), d = predict_gemm(problem(128, 8192, 3072), tile(64, 64, 1), hw);
  EXPECT_NEAR(c.launch_us - d.launch_us, hw.rates.cluster_launch_us + kSkeletonBMulticastClusterUs, 1e-9);
  EXPECT_NEAR(predict_gemm(problem(256, 8192, 3072), square, hw).launch_us - a.launch_us, hw.rates.cluster_launch_us + kSkeletonClusterUs,
              1e-9);
  EXPECT_LT(kSkeletonBMulticastClusterUs, kSkeletonClusterUs);
}

// B multicast's L2 credit only with split-K (b_multicast_l2_factor; bench/NOTES.md, bmc-term). Before,
// with the credit in every launch (lrb-plan), the planner moved three unsplit products to B multicast that
// then ran slower with it on the H200, three rounds A/B: ffn-S3's and gated_ffn-S3's down projection (M 128,
// N 4096, K 11008, B stored [K, N]) to 64 x 64 s14 c2x1 (+2.1 and +3.4 µs against s9, fastest replays of
// the whole programs) and quant_gemm Q7 (fp8, M 4096, N 2048, K 768, row stores) to the ping-pong
// 64 x 256 s4 c2x1 (+1.2 µs against 128 x 256 s4). Expected: their former tiles, and linear_relu_backward
// wide's split-K dw keeps its B multicast (nerf's: LinearReluBackwardsDwTakesTheMulticastSplitAndDxThePingPong).
TEST(SkeletonChoice, KeepsUnsplitProductsOffBMulticastAndSplitOnesOnIt) {
  SkeletonChoice down = choose_skeleton_config(skeleton_problem(128, 4096, 11008, false), MmaType::f16, DType::f16, true);
  ASSERT_TRUE(down.chosen.has_value()) << down.why;
  EXPECT_EQ(config_name(down.chosen->config), "f16 64x64x64 s9 w1 c1x1 k1");
  GemmSkeletonProblem q7;
  q7.m = 4096;
  q7.n = 2048;
  q7.k = 768;
  q7.a = GemmSkeletonOperand{"a", DType::f8e4m3, true, 4096, 768, 768, 1, 0};
  q7.b = GemmSkeletonOperand{"b", DType::f8e4m3, true, 2048, 768, 768, 1, 0};
  SkeletonChoice fp8 = choose_skeleton_config(q7, MmaType::f8e4m3, DType::bf16, true);
  ASSERT_TRUE(fp8.chosen.has_value()) << fp8.why;
  EXPECT_EQ(config_name(fp8.chosen->config), "f8e4m3 128x256x128 s4 w2 c1x1 k1");
  // linear_relu_backward wide's dw (M = N = 1024, K 16384, A and B stored [K, ·], f32 out): split 2 with B
  // multicast, as lrb-plan chose it (140.43 µs against 143.31 for the former 128x128 s4 k2 on the H200,
  // sixteenth session).
  GemmSkeletonProblem wide;
  wide.m = 1024;
  wide.n = 1024;
  wide.k = 16384;
  wide.a = GemmSkeletonOperand{"x", DType::f16, false, 1024, 16384, 1024, 1, 0};
  wide.b = GemmSkeletonOperand{"g", DType::f16, false, 1024, 16384, 1024, 1, 0};
  SkeletonChoice w = choose_skeleton_config(wide, MmaType::f16, DType::f32);
  ASSERT_TRUE(w.chosen.has_value()) << w.why;
  EXPECT_EQ(config_name(w.chosen->config), "f16 128x128x64 s5 w2 c2x1 k2");
}

// The one-consumer step term (one_consumer_step_cycles, gemm-s7): measured on the H100 (2026-11-27,
// bench/NOTES.md, gemm-s7), ffn's M 128 down projections ran faster on unsplit 64 x 64 deep rings than on
// the tiles the flat 180-cycle term chose: S7 (N 2560, K 9728) 47.2 against 54.6 us for 64x192 s7 split 4
// (whole ffn), S2 (N 2048, K 5632) 28.2 against 29.2 for 128x64 s6 split 4, S1 (N 3072, K 8192) 43.4 on
// 14 stages. The up projection at N 11008, K 4096 keeps its 128-row tile: 64x192 s6 ran 44.0 us there
// against 38.5 for 128x128 s6 (calibration sweep), which a flat term low enough for S7 would choose.
TEST(SkeletonChoice, RunsTheM128DownProjectionsOnDeep64x64Rings) {
  for (auto [n, k] : {std::pair{2560, 9728}, std::pair{3072, 8192}}) {
    SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, n, k, false), MmaType::f16, DType::f16);
    ASSERT_TRUE(c.chosen.has_value()) << c.why;
    const GemmConfig& g = c.chosen->config;
    EXPECT_EQ(g.bm, 64) << n << " " << k << ": " << config_name(g);
    EXPECT_EQ(g.bn, 64) << n << " " << k << ": " << config_name(g);
    EXPECT_EQ(g.split_k, 1) << n << " " << k << ": " << config_name(g);
    EXPECT_GE(g.stages, 13) << n << " " << k << ": " << config_name(g);
  }
  SkeletonChoice up = choose_skeleton_config(skeleton_problem(128, 11008, 4096, false), MmaType::f16, DType::f16);
  ASSERT_TRUE(up.chosen.has_value()) << up.why;
  EXPECT_EQ(up.chosen->config.bm, 128) << config_name(up.chosen->config);
  // The step term grows with the batch's columns: 100 cycles at BN 64, 180 at 192.
  EXPECT_DOUBLE_EQ(one_consumer_step_cycles(64), 100);
  EXPECT_DOUBLE_EQ(one_consumer_step_cycles(192), 180);
}

TEST(SkeletonChoice, SplitsTheHalfChipDownProjectionsInTwo) {
  // ffn S2's and S6's down projections (M 128; N 2048, K 5632 and N 1536, K 8960: 64 and 48 tiles of
  // 64 x 64 for 132 SMs). Measured on the H100 (2026-11-27, bench/results/h100/ffn-s2-sweep.json, the
  // product alone): 64 x 64 split 2 14.14 / 15.79 us against 14.70 / 21.18 unsplit and 14.89 / 16.89
  // for 128 x 64 split 4 (the choice at S6 before).
  for (auto [n, k] : {std::pair{2048, 5632}, std::pair{1536, 8960}}) {
    SkeletonChoice c = choose_skeleton_config(skeleton_problem(128, n, k, false), MmaType::f16, DType::f16, true, 2);
    ASSERT_TRUE(c.chosen.has_value()) << c.why;
    const GemmConfig& g = c.chosen->config;
    EXPECT_EQ(g.bm, 64) << n << " " << k << ": " << config_name(g);
    EXPECT_EQ(g.bn, 64) << n << " " << k << ": " << config_name(g);
    EXPECT_EQ(g.split_k, 2) << n << " " << k << ": " << config_name(g);
    EXPECT_GE(g.stages, 10) << n << " " << k << ": " << config_name(g);
  }
}

// The eighth session's measurements (H100, bench/NOTES.md, gemm-mainloop): with row stores, e4m3 8192³
// and Q5 run the cooperative 128-row tiles (ping-pong 64x256 was 1.15x slower at 8192³ and no faster at
// Q5), and bf16 L2 runs without its former 1x4 cluster (669 against 678-720 us). SOLDER_GEMM_SCHEDULE
// restricts the choice to one schedule.
TEST(SkeletonChoice, ChoosesTheMeasuredScheduleAndCluster) {
  auto fp8 = [](int64_t m, int64_t n, int64_t k) {
    GemmSkeletonProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = GemmSkeletonOperand{"a", DType::f8e4m3, true, m, k, k, 1, 0};
    p.b = GemmSkeletonOperand{"b", DType::f8e4m3, true, n, k, k, 1, 0};
    return p;
  };
  for (auto [m, n, k] : {std::tuple{8192, 8192, 8192}, {4096, 7168, 2048}}) {
    SkeletonChoice c = choose_skeleton_config(fp8(m, n, k), MmaType::f8e4m3, DType::bf16, true);
    ASSERT_TRUE(c.chosen.has_value()) << c.why;
    EXPECT_FALSE(c.chosen->config.pingpong) << config_name(c.chosen->config);
    EXPECT_EQ(c.chosen->config.bm, 128) << config_name(c.chosen->config);
  }
  GemmSkeletonProblem l2;
  l2.m = 4096;
  l2.n = 14336;
  l2.k = 4096;
  l2.a = GemmSkeletonOperand{"a", DType::bf16, true, 4096, 4096, 4096, 1, 0};
  l2.b = GemmSkeletonOperand{"b", DType::bf16, false, 14336, 4096, 14336, 1, 0};
  SkeletonChoice c = choose_skeleton_config(l2, MmaType::bf16, DType::bf16, true);
  ASSERT_TRUE(c.chosen.has_value()) << c.why;
  EXPECT_EQ(c.chosen->config.cluster_size(), 1) << config_name(c.chosen->config);
  setenv("SOLDER_GEMM_SCHEDULE", "pingpong", 1);
  SkeletonChoice forced = choose_skeleton_config(fp8(4096, 7168, 2048), MmaType::f8e4m3, DType::bf16, true);
  unsetenv("SOLDER_GEMM_SCHEDULE");
  ASSERT_TRUE(forced.chosen.has_value()) << forced.why;
  EXPECT_TRUE(forced.chosen->config.pingpong);
  EXPECT_EQ(forced.chosen->config.bm, 64);
}

// linear_relu_backward at the paper size (N 65536, 256 x 256; bench/NOTES.md, lrb-plan). dw = xᵀ·g (M 256,
// N 256, K 65536, A and B stored [K, ·], f32 out): 64 x 64 split 8 with B multicast, the form measured
// fastest alone (lrb-dw-alone-sweep.json: 33.12–34.15 µs at 9–14 stages against 37.38 for the former
// 128 x 64 s6 split 16) and in the program (lrb-model: 95.82 / 96.78 µs against 98.61). dx = g·w (M 65536,
// N 256, K 256, row stores) and nerf_mlp's layers (the same shape, B stored [K, N]) keep the ping-pong
// 64 x 256 s4: nerf_mlp measured 612.1 µs on it against 624.5 with its layers on 128 x 256 s4 (lrb4), and
// the problem the planner sees does not tell dx (measured 0.83 µs faster alone on 128 x 256) from them.
TEST(SkeletonChoice, LinearReluBackwardsDwTakesTheMulticastSplitAndDxThePingPong) {
  GemmSkeletonProblem dw;
  dw.m = 256;
  dw.n = 256;
  dw.k = 65536;
  dw.a = GemmSkeletonOperand{"x", DType::f16, false, 256, 65536, 256, 1, 0};
  dw.b = GemmSkeletonOperand{"g", DType::f16, false, 256, 65536, 256, 1, 0};
  SkeletonChoice w = choose_skeleton_config(dw, MmaType::f16, DType::f32);
  ASSERT_TRUE(w.chosen.has_value()) << w.why;
  EXPECT_EQ(config_name(w.chosen->config), "f16 64x64x64 s14 w1 c2x1 k8");
  for (bool b_k_major : {true, false}) {  // dx (w stored [N, K]) and a nerf_mlp layer (W stored [K, N])
    SkeletonChoice x = choose_skeleton_config(skeleton_problem(65536, 256, 256, b_k_major), MmaType::f16, DType::f16, true);
    ASSERT_TRUE(x.chosen.has_value()) << x.why;
    EXPECT_EQ(config_name(x.chosen->config), "f16 64x256x64 s4 w2 c1x1 k1 pingpong") << b_k_major;
  }
}

}  // namespace
}  // namespace solder
