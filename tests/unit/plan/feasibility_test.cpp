// The pruning rules (src/plan/feasibility.h): each rule refuses what it names, and a known-good
// configuration passes them all.
#include "plan/feasibility.h"

#include <gtest/gtest.h>

#include <tuple>

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

GemmConfig config(int bm, int bn, int bk, int stages, int consumers, MmaType type = MmaType::bf16) {
  GemmConfig c;
  c.type = type;
  c.bm = bm;
  c.bn = bn;
  c.bk = bk;
  c.stages = stages;
  c.consumers = consumers;
  return c;
}

std::optional<PruneRule> rule(const GemmProblem& p, const GemmConfig& c, FeasibilityOptions options = {}) {
  auto refusal = check_feasibility(p, c, default_hardware(), options);
  if (refusal) EXPECT_FALSE(refusal->detail.empty());
  return refusal ? std::optional<PruneRule>(refusal->rule) : std::nullopt;
}

TEST(Feasibility, KnownGoodConfigurationsPass) {
  const GemmProblem big = problem(8192, 8192, 8192);
  EXPECT_EQ(rule(big, config(128, 256, 64, 4, 2)), std::nullopt);
  EXPECT_EQ(rule(big, config(128, 128, 64, 6, 2)), std::nullopt);
  EXPECT_EQ(rule(problem(64, 4096, 4096), config(64, 256, 64, 4, 1)), std::nullopt);
  EXPECT_EQ(rule(problem(4096, 4096, 4096, MmaType::f8e4m3), config(128, 256, 128, 4, 2, MmaType::f8e4m3)), std::nullopt);
  EXPECT_EQ(rule(problem(4096, 4096, 4096, MmaType::tf32), config(128, 128, 32, 4, 2, MmaType::tf32)), std::nullopt);
}

TEST(Feasibility, EachRuleRefusesWhatItNames) {
  const GemmProblem big = problem(8192, 8192, 8192);
  EXPECT_EQ(rule(problem(8192, 8192, 8191), config(128, 128, 64, 4, 2)), PruneRule::tma_alignment);  // 16382-byte rows
  GemmProblem pitched = problem(8192, 8192, 8191);  // K 8191 in rows of 8192 (a padded copy): the pitch decides
  pitched.a_ld = 8192;
  pitched.b_ld = 8192;
  EXPECT_EQ(rule(pitched, config(128, 128, 64, 4, 2)), std::nullopt);
  pitched.b_ld = 0;
  EXPECT_EQ(rule(pitched, config(128, 128, 64, 4, 2)), PruneRule::tma_alignment);
  GemmProblem fp8_n_major = problem(4096, 4096, 4096, MmaType::f8e4m3);
  fp8_n_major.b_k_major = false;
  EXPECT_EQ(rule(fp8_n_major, config(128, 128, 128, 4, 2, MmaType::f8e4m3)), PruneRule::operand_major);
  GemmProblem n_major = big;
  n_major.b_k_major = false;
  EXPECT_EQ(rule(n_major, config(128, 96, 64, 4, 2)), PruneRule::operand_major);  // BN 96 is not whole 64-wide atoms
  EXPECT_EQ(rule(n_major, config(128, 128, 64, 4, 2)), std::nullopt);
  EXPECT_EQ(rule(big, config(128, 128, 128, 4, 2)), PruneRule::bk_swizzle);  // 256-byte rows for bf16
  EXPECT_EQ(rule(big, config(128, 128, 32, 4, 2)), PruneRule::bk_swizzle);
  EXPECT_EQ(rule(big, config(192, 128, 64, 4, 2)), PruneRule::wgmma_shape);  // 96 rows per consumer
  EXPECT_EQ(rule(big, config(64, 128, 64, 4, 2)), PruneRule::wgmma_shape);   // 32 rows per consumer
  GemmConfig wide = config(128, 256, 64, 4, 1);
  EXPECT_EQ(rule(big, wide), PruneRule::accumulator_registers);  // 256 f32 per thread
  EXPECT_EQ(rule(big, config(256, 256, 64, 2, 2)), PruneRule::accumulator_registers);
  EXPECT_EQ(rule(big, config(128, 256, 64, 5, 2)), PruneRule::smem_capacity);  // 5 × 48 KB
  GemmConfig cluster = config(128, 128, 64, 4, 2);
  cluster.cluster_m = 4;
  cluster.cluster_n = 4;
  EXPECT_EQ(rule(big, cluster), PruneRule::cluster_portable);
  FeasibilityOptions nonportable;
  nonportable.allow_nonportable_clusters = true;
  EXPECT_EQ(rule(big, cluster, nonportable), std::nullopt);
  cluster.cluster_n = 8;
  EXPECT_EQ(rule(big, cluster, nonportable), PruneRule::cluster_limit);  // 32 > 16
  EXPECT_EQ(rule(problem(64, 8192, 8192), config(128, 128, 64, 4, 2)), PruneRule::oversized_tile);
  EXPECT_EQ(rule(problem(8192, 64, 8192), config(128, 128, 64, 4, 2)), PruneRule::oversized_tile);
  GemmConfig odd_cluster = config(128, 128, 64, 4, 2);
  odd_cluster.cluster_m = 2;
  EXPECT_EQ(rule(problem(384, 4096, 4096), odd_cluster), PruneRule::cluster_divides_grid);  // 3 M tiles
  GemmConfig split = config(128, 128, 64, 4, 2);
  split.split_k = 3;
  EXPECT_EQ(rule(problem(128, 4096, 1024), split), PruneRule::split_k_divides);  // 16 K tiles
  split.split_k = 4;
  EXPECT_EQ(rule(problem(128, 4096, 1024), split), std::nullopt);
  split.split_k = 32;
  EXPECT_EQ(rule(problem(128, 4096, 1024), split), PruneRule::split_k_divides);
}

TEST(Feasibility, OccupancyFromSharedMemoryAndRegisters) {
  const HardwareDescription& hw = default_hardware();
  EXPECT_EQ(ctas_per_sm(config(128, 256, 64, 4, 2), DType::bf16, hw), 1);
  // 34 KB each (6 would fit), 256 threads × 64 registers (4 fit)
  EXPECT_EQ(ctas_per_sm(config(64, 64, 64, 2, 1), DType::bf16, hw), 4);
  EXPECT_EQ(concurrent_ctas(config(128, 256, 64, 4, 2), DType::bf16, hw), 132);
  GemmConfig pair = config(128, 256, 64, 4, 2);
  pair.cluster_m = 2;
  EXPECT_EQ(concurrent_ctas(pair, DType::bf16, hw), 132);  // 66 clusters of 2 (measured)
  pair.cluster_m = 4;
  pair.cluster_n = 4;
  EXPECT_EQ(concurrent_ctas(pair, DType::bf16, hw), 112);  // 7 clusters of 16: GPCs leave SMs idle
}

TEST(Feasibility, RuleNamesAreListed) {
  EXPECT_EQ(all_prune_rules().size(), static_cast<size_t>(kPruneRuleCount));
  EXPECT_EQ(prune_rule_name(PruneRule::smem_capacity), "smem_capacity");
  EXPECT_EQ(prune_rule_name(PruneRule::split_k_divides), "split_k_divides");
}

TEST(Catalogue, AxesNamesAndSkeletonSubset) {
  const std::vector<GemmConfig> all = gemm_catalogue(MmaType::bf16);
  const GemmCatalogueAxes& axes = gemm_catalogue_axes();
  EXPECT_EQ(all.size(), axes.bm.size() * axes.bn.size() * axes.bk.size() * axes.stages.size() * axes.consumers.size() *
                            axes.clusters.size() * axes.split_k.size());
  GemmConfig c = config(128, 256, 64, 4, 2);
  c.cluster_m = 2;
  EXPECT_EQ(config_name(c), "bf16 128x256x64 s4 w2 c2x1 k1");
  EXPECT_EQ(c.smem_bytes(DType::bf16), 4 * 384 * 128 + 64 + 1024);
  EXPECT_TRUE(in_device_skeleton(c));  // 2x1: B multicast along M (ClusterM)
  c.cluster_m = 1;
  EXPECT_TRUE(in_device_skeleton(c));
  for (auto [m, n, ok] : {std::tuple{1, 2, true}, {1, 4, true}, {2, 2, true}, {2, 4, true}, {4, 1, false}}) {
    c.cluster_m = m;
    c.cluster_n = n;  // 1xN: A multicast along N (ClusterN); 2xN: both (2-D); no 4x1
    EXPECT_EQ(in_device_skeleton(c), ok) << config_name(c);
  }
  c.cluster_m = c.cluster_n = 1;
  EXPECT_FALSE(in_device_skeleton(config(128, 256, 64, 4, 1)));  // the skeleton has one consumer per 64 rows
  int skeleton = 0, pingpong = 0;
  for (const GemmConfig& g : all) {
    skeleton += in_device_skeleton(g);
    pingpong += in_device_skeleton(g) && g.pingpong;
    // The catalogue's (BM 64, 2 consumers) point is the ping-pong schedule, and only that point.
    EXPECT_EQ(g.pingpong, g.bm == 64 && g.consumers == 2) << config_name(g);
  }
  // BM 64/128, 9 BN, 15 stage counts (2-16), clusters 1x1, 2x1, 1x2, 2x2, 1x4, 2x4, split-K 1-16 (9
  // values); and the ping-pong schedule: BM 64, 9 BN, 15 stage counts, the 6 clusters, split-K 1 only.
  EXPECT_EQ(skeleton, 2 * 9 * 15 * 6 * 9 + 9 * 15 * 6);
  EXPECT_EQ(pingpong, 9 * 15 * 6);
  c.stages = 16;
  EXPECT_TRUE(in_device_skeleton(c));  // the ring's depth is bounded by shared memory (smem_capacity)
  c.stages = 17;
  EXPECT_FALSE(in_device_skeleton(c));
  c.stages = 4;
  c.split_k = 8;
  EXPECT_TRUE(in_device_skeleton(c));  // split-K merges in the kernel (config.cuh SplitKWorkspace)
  // tf32 (config.cuh Dtype::tf32): BK 32, four bytes per element, the same points as the 16-bit types.
  EXPECT_TRUE(in_device_skeleton(config(128, 256, 32, 4, 2, MmaType::tf32)));
  EXPECT_FALSE(in_device_skeleton(config(128, 256, 64, 4, 2, MmaType::tf32)));  // 256-byte rows
  EXPECT_EQ(config(128, 256, 32, 4, 2, MmaType::tf32).stage_bytes(), 384 * 128);
  int tf32_points = 0;
  for (const GemmConfig& g : gemm_catalogue(MmaType::tf32)) tf32_points += in_device_skeleton(g);
  EXPECT_EQ(tf32_points, skeleton);
}

TEST(Catalogue, SkeletonClustersSliceTheSharedOperandAsTheLayoutAllows) {
  GemmProblem p;
  p.m = 128;
  p.n = 8192;
  p.k = 3072;
  p.type = MmaType::f16;
  GemmConfig c = config(128, 64, 64, 6, 2);
  EXPECT_TRUE(skeleton_cluster_fits(p, c));  // no cluster
  c.cluster_n = 4;
  EXPECT_TRUE(skeleton_cluster_fits(p, c));  // K-major A: 4 slices of 32 rows
  p.a_k_major = false;
  EXPECT_FALSE(skeleton_cluster_fits(p, c));  // M-major A: 2 boxes of 64 rows for 4 blocks
  c.cluster_n = 2;
  EXPECT_TRUE(skeleton_cluster_fits(p, c));
  c = config(64, 64, 64, 6, 1);
  c.cluster_m = 2;
  p.b_k_major = false;
  EXPECT_TRUE(skeleton_cluster_fits(p, c));  // N-major B: one 64-wide box, its K rows split (Config::BSplitK)
  p.b_k_major = true;
  EXPECT_TRUE(skeleton_cluster_fits(p, c));   // K-major B: 2 slices of 32 rows
  c.cluster_n = 4;
  p.a_k_major = true;
  EXPECT_TRUE(skeleton_cluster_fits(p, c));   // 2 x 4: A in 4 slices of 16 rows, B in halves
  p.a_k_major = false;
  EXPECT_FALSE(skeleton_cluster_fits(p, c));  // M-major A: one 64-row box for 4 blocks
}

// The ping-pong schedule (GemmConfig::pingpong): BM 64 with two consumer warpgroups that take whole
// tiles in turn; each holds a whole 64 x BN accumulator, and only split-K 1 is in the skeleton.
TEST(Catalogue, PingpongIsTheBm64TwoConsumerPoint) {
  GemmConfig c = config(64, 256, 128, 4, 2);
  c.type = MmaType::f8e4m3;
  c.pingpong = true;
  EXPECT_EQ(c.rows_per_consumer(), 64);
  EXPECT_EQ(c.accumulator_registers(), 128);  // 64 x 256 / 128 threads
  EXPECT_EQ(c.threads(), 384);
  EXPECT_EQ(config_name(c), "f8e4m3 64x256x128 s4 w2 c1x1 k1 pingpong");
  EXPECT_TRUE(in_device_skeleton(c));
  GemmProblem p;
  p.m = p.n = p.k = 8192;
  p.type = MmaType::f8e4m3;
  EXPECT_FALSE(check_feasibility(p, c, default_hardware()).has_value());
  c.cluster_m = 2;
  EXPECT_TRUE(in_device_skeleton(c));
  c.cluster_m = 1;
  c.split_k = 2;
  EXPECT_FALSE(in_device_skeleton(c));  // the skeleton's ping-pong takes no split-K
  c.split_k = 1;
  c.bm = 128;
  EXPECT_FALSE(in_device_skeleton(c));  // BM 64 only
  // Without the flag the same point is refused: 32 rows per consumer is no wgmma shape.
  GemmConfig cooperative = config(64, 256, 128, 4, 2);
  cooperative.type = MmaType::f8e4m3;
  EXPECT_FALSE(in_device_skeleton(cooperative));
  ASSERT_TRUE(check_feasibility(p, cooperative, default_hardware()).has_value());
  EXPECT_EQ(check_feasibility(p, cooperative, default_hardware())->rule, PruneRule::wgmma_shape);
}

}  // namespace
}  // namespace solder
