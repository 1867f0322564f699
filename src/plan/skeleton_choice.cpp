#include "plan/skeleton_choice.h"

#include <cstdio>

namespace solder {

bool split_k_offered(const GemmProblem& p, const GemmConfig& c, int sm_count) {
  if (c.split_k == 1) return true;
  if ((c.split_k & (c.split_k - 1)) != 0) return false;  // 2, 4, 8, 16
  if (c.bn % 64 != 0) return false;  // the merge path run on the GPU so far (8 float4 per split and lane)
  const int64_t tiles = p.batch * ((p.m + c.bm - 1) / c.bm) * ((p.n + c.bn - 1) / c.bn);
  const int64_t k_tiles = (p.k + c.bk - 1) / c.bk;
  return tiles < sm_count && k_tiles >= static_cast<int64_t>(kMinSplitKTiles) * c.split_k;
}

SkeletonChoice choose_skeleton_config(const GemmSkeletonProblem& p, MmaType type, DType output) {
  GemmProblem problem;
  problem.batch = p.batch;
  problem.m = p.m;
  problem.n = p.n;
  problem.k = p.k;
  problem.type = type;
  problem.output = output;
  problem.a_k_major = p.a.k_major;
  problem.b_k_major = p.b.k_major;
  PlanOptions options;
  options.top = 1;
  const HardwareDescription& hw = default_hardware();
  for (const GemmConfig& c : gemm_catalogue(type))
    if (in_device_skeleton(c) && split_k_offered(problem, c, hw.sm_count)) options.only.push_back(c);
  GemmPlan plan = plan_gemm(problem, hw, options);
  SkeletonChoice choice;
  if (!plan.chosen()) {
    std::string rules;
    for (auto& [rule, example] : plan.example) rules += (rules.empty() ? "" : "; ") + example;
    choice.why = "no configuration of the GEMM skeleton is feasible for " + describe(problem) + (rules.empty() ? "" : " (" + rules + ")");
    return choice;
  }
  choice.chosen = *plan.chosen();
  char text[160];
  std::snprintf(text, sizeof text, "cost model: %.1f us predicted, bound by %s", choice.chosen->cost.total_us,
                std::string(resource_name(choice.chosen->cost.binding)).c_str());
  choice.why = text;
  return choice;
}

}  // namespace solder
