// The tile search (src/plan/plan.h): choices on known shapes, pruning counts, the JSON report, speed.
#include "plan/plan.h"

#include <gtest/gtest.h>

#include <ctime>

#include "support/json_reader.h"

namespace solder {
namespace {

GemmProblem problem(int64_t m, int64_t n, int64_t k, MmaType type = MmaType::bf16) {
  GemmProblem p;
  p.name = "test";
  p.m = m;
  p.n = n;
  p.k = k;
  p.type = type;
  return p;
}

TEST(Plan, LargeSquareBf16PicksALargeTileWithoutSplitK) {
  const GemmPlan plan = plan_gemm(problem(8192, 8192, 8192), default_hardware());
  ASSERT_NE(plan.chosen(), nullptr);
  const GemmConfig& c = plan.chosen()->config;
  EXPECT_EQ(c.split_k, 1) << config_name(c);
  EXPECT_GE(c.bm * c.bn, 128 * 192) << config_name(c);
  EXPECT_EQ(plan.chosen()->cost.binding, Resource::tensor);
}

TEST(Plan, SkinnyProblemSplitsKOrUsesSixtyFourRowTiles) {
  const GemmPlan plan = plan_gemm(problem(128, 3072, 8192), default_hardware());
  ASSERT_NE(plan.chosen(), nullptr);
  const GemmConfig& c = plan.chosen()->config;
  EXPECT_TRUE(c.split_k > 1 || c.bm == 64) << config_name(c);
  EXPECT_GE(plan.chosen()->cost.ctas, 64) << config_name(c);  // fills at least half of the SMs
}

TEST(Plan, Fp8PicksFp8ConfigurationsWith128ByteK) {
  const GemmPlan plan = plan_gemm(problem(4096, 7168, 2048, MmaType::f8e4m3), default_hardware());
  ASSERT_NE(plan.chosen(), nullptr);
  EXPECT_EQ(plan.chosen()->config.type, MmaType::f8e4m3);
  EXPECT_EQ(plan.chosen()->config.bk, 128);
}

TEST(Plan, PrunedCountsAddUpAndCandidatesAreSorted) {
  PlanOptions options;
  options.top = 10;
  const GemmPlan plan = plan_gemm(problem(2048, 2048, 2048), default_hardware(), options);
  int64_t pruned = 0;
  for (const auto& [rule, count] : plan.pruned) pruned += count;
  EXPECT_EQ(pruned + plan.feasible, plan.considered);
  EXPECT_EQ(plan.considered, static_cast<int64_t>(gemm_catalogue(MmaType::bf16).size()));
  EXPECT_GT(plan.pruned.at(PruneRule::bk_swizzle), 0);
  EXPECT_GT(plan.pruned.at(PruneRule::smem_capacity), 0);
  ASSERT_EQ(plan.top.size(), 10u);
  for (size_t i = 1; i < plan.top.size(); ++i) EXPECT_LE(plan.top[i - 1].cost.total_us, plan.top[i].cost.total_us);
  for (const GemmCandidate& c : plan.top) EXPECT_FALSE(check_feasibility(plan.problem, c.config, default_hardware()));
}

TEST(Plan, InfeasibleProblemHasNoChoiceAndSaysWhy) {
  GemmProblem p = problem(4096, 4096, 4096, MmaType::f8e4m3);
  p.b_k_major = false;
  const GemmPlan plan = plan_gemm(p, default_hardware());
  EXPECT_EQ(plan.chosen(), nullptr);
  EXPECT_EQ(plan.pruned.at(PruneRule::operand_major), plan.considered);
  const std::string text = plan_text({plan}, default_hardware());
  EXPECT_NE(text.find("no feasible configuration"), std::string::npos) << text;
  EXPECT_NE(text.find("operand_major"), std::string::npos) << text;
}

TEST(Plan, OnlyRestrictsTheSearch) {
  PlanOptions options;
  for (const GemmConfig& c : gemm_catalogue(MmaType::bf16))
    if (in_device_skeleton(c)) options.only.push_back(c);
  const GemmPlan plan = plan_gemm(problem(8192, 8192, 8192), default_hardware(), options);
  ASSERT_NE(plan.chosen(), nullptr);
  EXPECT_TRUE(in_device_skeleton(plan.chosen()->config));
  EXPECT_EQ(plan.considered, static_cast<int64_t>(options.only.size()));
}

TEST(Plan, JsonReportParses) {
  std::vector<GemmPlan> plans = {plan_gemm(problem(8192, 8192, 8192), default_hardware()),
                                 plan_gemm(problem(128, 3072, 8192), default_hardware())};
  const JsonValue root = parse_json(plan_json(plans, default_hardware()), "plan.json");
  ASSERT_EQ(root.kind, JsonValue::object);
  const JsonValue* list = root.member("plans");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->items.size(), 2u);
  const JsonValue& first = list->items[0];
  ASSERT_NE(first.member("chosen"), nullptr);
  EXPECT_EQ(first.member("chosen")->member("binding")->text, "tensor");
  EXPECT_EQ(first.member("problem")->member("m")->number_value, 8192);
  EXPECT_GT(first.member("pruned")->member("smem_capacity")->number_value, 0);
  EXPECT_EQ(first.member("candidates")->items.size(), 5u);
  EXPECT_NE(first.member("candidates")->items[0].member("cost")->member("time_us"), nullptr);
}

TEST(Plan, TextNamesTheChoiceAndTheBindingResource) {
  const std::string text = plan_text({plan_gemm(problem(8192, 8192, 8192), default_hardware())}, default_hardware());
  EXPECT_NE(text.find("chosen: bf16 "), std::string::npos) << text;
  EXPECT_NE(text.find("bound by tensor"), std::string::npos) << text;
  EXPECT_NE(text.find("pruned: "), std::string::npos) << text;
}

TEST(Plan, TenProblemsPlanInUnderASecond) {
  // Processor time, not wall time: the test machine is shared.
  const std::clock_t start = std::clock();
  for (int i = 0; i < 10; ++i) plan_gemm(problem(128 << (i % 6), 4096, 1024 << (i % 4)), default_hardware());
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace solder
