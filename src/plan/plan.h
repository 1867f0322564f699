// The tile search: every configuration of the catalogue for a problem, pruned by the named rules
// (feasibility.h), the rest ranked by the cost model (cost_model.h). The plan keeps the counts pruned by
// each rule, the best few candidates, and the choice with its predicted time and binding resource.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hw/hardware.h"
#include "plan/catalogue.h"
#include "plan/cost_model.h"
#include "plan/feasibility.h"
#include "plan/gemm_problem.h"

namespace solder {

struct PlanOptions {
  FeasibilityOptions feasibility;
  int top = 5;                   // candidates kept, best first
  std::vector<GemmConfig> only;  // when not empty, the search covers these configurations instead of the catalogue
};

struct GemmCandidate {
  GemmConfig config;
  GemmCost cost;
};

struct GemmPlan {
  GemmProblem problem;
  int64_t considered = 0, feasible = 0;
  std::map<PruneRule, int64_t> pruned;       // configurations removed by each rule (the first it broke)
  std::map<PruneRule, std::string> example;  // the first refusal of each rule, with its numbers
  std::vector<GemmCandidate> top;            // best first
  const GemmCandidate* chosen() const { return top.empty() ? nullptr : &top.front(); }
};

GemmPlan plan_gemm(const GemmProblem& problem, const HardwareDescription& hw, const PlanOptions& options = {});

// Reports for people and for tools (`solder plan`, `solder plan --json`).
std::string plan_text(const std::vector<GemmPlan>& plans, const HardwareDescription& hw);
std::string plan_json(const std::vector<GemmPlan>& plans, const HardwareDescription& hw);

}  // namespace solder
