// Pass: lower a planned group to Kernel IR (src/fusion/lower_fused.h). Before/expected pairs: a
// small log-sum-exp cascade is planned and lowered, and the printed Kernel IR is compared with the
// expected text (single segment; segments merged through DSM in a cluster; segments merged by a
// second kernel), then the polynomial (variance) lowering. Every expected program was checked by
// hand against the incremental form (RedFuser eq. 15–16) and the fused merge (eq. 11); the e2e tests
// run them.
#include <gtest/gtest.h>

#include "fusion/group_plan.h"
#include "fusion/inline_pointwise.h"
#include "fusion/lower_fused.h"
#include "fusion_test_util.h"
#include "kernel/kernel_printer.h"

namespace solder {
namespace {

const char* kLogSumExp = R"(program logsumexp
dim T = 4, N = 32
in x[T, N] : f32
m[t] = max(n) x[t, n]
z[t] = sum(n) exp(x[t, n] - m[t])
out l[t] = log(z[t]) + m[t]
)";

LoweredGroup lower_text(const std::string& text, const FusionParams& params, std::vector<std::pair<std::string, int64_t>> overrides = {},
                        BoundProgram* bound_out = nullptr) {
  BoundProgram bound = testing::bind_text(text, false, std::move(overrides));
  InlinedProgram inlined = inline_pointwise(bound);
  std::vector<std::string> exported;
  for (const TensorInfo* t : bound.outputs()) exported.push_back(t->name);
  PlanAttempt plan = plan_group(bound, inlined.defs, exported, params);
  EXPECT_TRUE(plan.plan) << plan.refusal;
  LoweredGroup lowered = lower_group(bound, *plan.plan, "k");
  if (bound_out) *bound_out = bound;
  return lowered;
}

FusionParams params(int64_t stream_tile, int min_blocks) {
  FusionParams p;
  p.stream_tile = stream_tile;
  p.min_blocks_for_single_segment = min_blocks;
  return p;
}

TEST(LowerFused, SingleSegmentOnlineSoftmax) {
  LoweredGroup g = lower_text(kLogSumExp, params(16, 1));
  ASSERT_EQ(g.kernels.size(), 1u);
  EXPECT_TRUE(g.scratch.empty());
  EXPECT_EQ(print_kernel(g.kernels[0]), R"(kernel k  # computes m z l
  grid block < 1  (1 blocks)  threads 128
  register m_tile[4] : f32
  register z_tile[4] : f32
  register l_tile[4] : f32
  shared x_tile[4, 16] : f32
  register acc_m[4] : f32
  register acc_z[4] : f32
  register old_m[4] : f32
  # m = max over the stream, independent
  fill acc_m = -inf
  fill m_tile = -inf
  # z = sum over the stream, multiplicative
  fill acc_z = 0.0
  fill z_tile = 0.0
  # stream n in tiles of 16
  for n_t in 0 .. 2 {
    # stage x
    copy x_tile[t, n] = x[t, n_t * 16 + n]  over t < 4, n < 16
    # remember m before this tile
    copy old_m[t] = m_tile[t]  over t < 4
    # m: add this tile
    reduce max acc_m[t] += x_tile[t, n]  over t < 4  reducing n < 16
    map m_tile[t] = acc_m[t]  over t < 4
    # z: rescale by exp(-m[t] + old_m[t]), or reset where the old value is not invertible
    map acc_z[t] = select(abs(old_m[t]) < inf && abs(exp(-m_tile[t] + old_m[t])) < inf, acc_z[t] * exp(-m_tile[t] + old_m[t]), select(m_tile[t] == old_m[t], acc_z[t], 0.0))  over t < 4
    # z: add this tile
    reduce sum acc_z[t] += exp(x_tile[t, n] - m_tile[t])  over t < 4  reducing n < 16
  }
  map m_tile[t] = acc_m[t]  over t < 4
  map z_tile[t] = acc_z[t]  over t < 4
  # l = (post)
  map l_tile[t] = log(z_tile[t]) + m_tile[t]  over t < 4
  # store l
  copy l[t] = l_tile[t]  over t < 4
)");
}

TEST(LowerFused, SegmentsOfAClusterMergeThroughDsm) {
  // N = 20 in tiles of 8: three segments (the last one ragged), one cluster of three blocks.
  LoweredGroup g = lower_text(kLogSumExp, params(8, 1000), {{"N", 20}});
  ASSERT_EQ(g.kernels.size(), 1u);
  EXPECT_TRUE(g.scratch.empty());
  const Kernel& k = g.kernels[0];
  EXPECT_EQ(k.cluster, 3);
  std::string text = print_kernel(k);
  EXPECT_NE(text.find("  grid seg < 3  (3 blocks)  cluster 3  threads 128\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  for n_t in seg * 1 .. min(seg * 1 + 1, 3) {\n"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce max acc_m[t] += x_tile[t, n]  over t < 4  reducing n < 8 where n_t * 8 + n < 20\n"), std::string::npos) << text;
  // After the loop: m by a cluster max; z rescaled from its segment's m to the merged m, then summed.
  size_t tail = text.find("  # this segment's m");
  ASSERT_NE(tail, std::string::npos) << text;
  EXPECT_EQ(text.substr(tail), R"(  # this segment's m, before the segments are merged
  copy segment_m[t] = m_tile[t]  over t < 4
  # m: merge the 3 segments of the cluster (independent)
  copy dsm_acc_m[e0] = acc_m[e0]  over e0 < 4
  cluster_reduce(max) dsm_acc_m
  copy acc_m[e0] = dsm_acc_m[e0]  over e0 < 4
  map m_tile[t] = acc_m[t]  over t < 4
  # z: merge the 3 segments of the cluster (multiplicative): rescale to the merged values
  map acc_z[t] = select(abs(segment_m[t]) < inf && abs(exp(-m_tile[t] + segment_m[t])) < inf, acc_z[t] * exp(-m_tile[t] + segment_m[t]), select(m_tile[t] == segment_m[t], acc_z[t], 0.0))  over t < 4
  # z: merge the 3 segments of the cluster (multiplicative)
  copy dsm_acc_z[e0] = acc_z[e0]  over e0 < 4
  cluster_reduce(sum) dsm_acc_z
  copy acc_z[e0] = dsm_acc_z[e0]  over e0 < 4
  map z_tile[t] = acc_z[t]  over t < 4
  # the segments now agree; the first block of each cluster finishes
  if seg == 0 {
    # l = (post)
    map l_tile[t] = log(z_tile[t]) + m_tile[t]  over t < 4
    # store l
    copy l[t] = l_tile[t]  over t < 4
  }
)");
}

TEST(LowerFused, ManySegmentsMergeInASecondKernel) {
  // Ten segments: more than a portable cluster, so partial states go to global scratch.
  BoundProgram bound;
  LoweredGroup g = lower_text(kLogSumExp, params(2, 1000), {{"N", 20}}, &bound);
  ASSERT_EQ(g.kernels.size(), 2u);
  EXPECT_EQ(g.kernels[0].name, "k");
  EXPECT_EQ(g.kernels[0].cluster, 1);
  std::vector<std::string> scratch;
  for (auto& s : g.scratch) {
    scratch.push_back(s.name);
    EXPECT_EQ(s.shape, (std::vector<int64_t>{10, 4})) << s.name;
    EXPECT_EQ(s.role, GlobalRole::scratch);
  }
  EXPECT_EQ(scratch, (std::vector<std::string>{"k_part_acc_m", "k_part_m_tile", "k_part_acc_z", "k_part_z_tile"}));
  std::string first = print_kernel(g.kernels[0]);
  EXPECT_NE(first.find("  copy k_part_acc_z[seg, t] = acc_z[t]  over t < 4\n"), std::string::npos) << first;
  EXPECT_EQ(print_kernel(g.kernels[1]), R"(kernel k_merge  # computes m z l
  grid block < 1  (1 blocks)  threads 128
  register m_tile[4] : f32
  register z_tile[4] : f32
  register l_tile[4] : f32
  register acc_m[4] : f32
  register acc_z[4] : f32
  # m: merge the 10 segments (independent)
  fill acc_m = -inf
  reduce max acc_m[t] += k_part_acc_m[seg_part, t]  over t < 4  reducing seg_part < 10
  map m_tile[t] = acc_m[t]  over t < 4
  # z: merge the 10 segments (multiplicative)
  fill acc_z = 0.0
  reduce sum acc_z[t] += select(abs(k_part_m_tile[seg_part, t]) < inf && abs(exp(-m_tile[t] + k_part_m_tile[seg_part, t])) < inf, k_part_acc_z[seg_part, t] * exp(-m_tile[t] + k_part_m_tile[seg_part, t]), select(m_tile[t] == k_part_m_tile[seg_part, t], k_part_acc_z[seg_part, t], 0.0))  over t < 4  reducing seg_part < 10
  map z_tile[t] = acc_z[t]  over t < 4
  # l = (post)
  map l_tile[t] = log(z_tile[t]) + m_tile[t]  over t < 4
  # store l
  copy l[t] = l_tile[t]  over t < 4
)");
}

TEST(LowerFused, LoweredVariantsComputeTheSameFunction) {
  for (auto [stream_tile, min_blocks] : {std::pair{16, 1}, {8, 1000}, {2, 1000}}) {
    SCOPED_TRACE("stream_tile " + std::to_string(stream_tile) + ", min_blocks " + std::to_string(min_blocks));
    BoundProgram bound;
    LoweredGroup g = lower_text(kLogSumExp, params(stream_tile, min_blocks), {{"N", 20}}, &bound);
    KernelProgram kp;
    kp.name = "logsumexp";
    kp.dims = bound.dims;
    for (auto& t : bound.tensors)
      if (t.role != TensorRole::intermediate)
        kp.globals.push_back({t.name, t.shape, t.dtype, t.role == TensorRole::input ? GlobalRole::input : GlobalRole::output});
    for (auto& s : g.scratch) kp.globals.push_back(s);
    kp.kernels = g.kernels;
    verify_kernel_program(kp);
    testing::Verified v = testing::verify_kernels(bound, kp, make_inputs(bound, 3));
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

TEST(LowerFused, PolynomialStateMovesItsCentreWithTheRunningMean) {
  LoweredGroup g = lower_text(R"(program variance
dim BS = 2, L = 32
in x[BS, L] : f32
mean[b] = sum(l) x[b, l] / L
out var[b] = sum(l) pow(x[b, l] - mean[b], 2) / L
)", params(16, 1));
  ASSERT_EQ(g.kernels.size(), 1u);
  std::string text = print_kernel(g.kernels[0]);
  for (const char* line : {
           // the running mean, extrapolated to the whole row (a plain sum that has seen part of it)
           "    map center_var_new[b] = mean_tile[b] * 32 / min((l_t + 1) * 16, 32)  over b < 2\n",
           // B'_j = Σ_{k≥j} C(k, j) δ^{k−j} B_k
           "    map B0_var[b] = B0_var[b] + select(B1_var[b] == 0.0, 0.0, 1.0 * (center_var_new[b] - center_var[b]) * B1_var[b]) + select(B2_var[b] == 0.0, 0.0, 1.0 * pow(center_var_new[b] - center_var[b], 2.0) * B2_var[b])  over b < 2\n",
           "    map B1_var[b] = B1_var[b] + select(B2_var[b] == 0.0, 0.0, 2.0 * (center_var_new[b] - center_var[b]) * B2_var[b])  over b < 2\n",
           // F_k at the centre
           "    reduce sum B0_var[b] += pow(x_tile[b, l] - center_var[b], 2) / L  over b < 2  reducing l < 16\n",
           "    reduce sum B1_var[b] += 2.0 * (x_tile[b, l] - center_var[b]) * -1.0 / L  over b < 2  reducing l < 16\n",
           "    reduce sum B2_var[b] += 2.0 / L / 2.0  over b < 2  reducing l < 16\n",
           // after the loop: the final centre is the final mean, and var is B_0 there
           "  map center_var_new[b] = mean_tile[b]  over b < 2\n",
           "  copy var_tile[b] = B0_var[b]  over b < 2\n",
       })
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "in:\n" << text;
}

TEST(LowerFused, AttentionStagesQOnceAndKVPerStreamTile) {
  BoundProgram bound = testing::bind_example("vanilla");
  InlinedProgram inlined = inline_pointwise(bound);
  PlanAttempt plan = plan_group(bound, inlined.defs, {"o"}, FusionParams{});
  ASSERT_TRUE(plan.plan) << plan.refusal;
  LoweredGroup g = lower_group(bound, *plan.plan, "fused_o");
  std::string text = print_kernel(g.kernels[0]);
  size_t q = text.find("copy q_tile"), loop = text.find("for j_t in 0 .. 4 {"), k = text.find("copy k_tile"), v = text.find("copy v_tile");
  ASSERT_NE(q, std::string::npos);
  ASSERT_NE(loop, std::string::npos);
  EXPECT_LT(q, loop);  // once per block
  EXPECT_GT(k, loop);  // once per stream tile
  EXPECT_GT(v, loop);
  // s is a shared tile of one query tile by one key tile: never seq × seq.
  EXPECT_NE(text.find("  shared s_tile[1, 1, 16, 16] : f32\n"), std::string::npos) << text;
  EXPECT_NE(text.find("map o_tile[b, h, i, d] = acc_o[b, h, i, d] * (1.0 / z_tile[b, h, i])"), std::string::npos) << text;
}

}  // namespace
}  // namespace solder
