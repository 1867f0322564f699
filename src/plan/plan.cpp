#include "plan/plan.h"

#include <algorithm>
#include <cstdio>

#include "support/json.h"

namespace solder {

namespace {

// Best first: less time, then the smaller footprint (shared memory, cluster, split), so that equal
// predictions pick the configuration that asks the least of the machine.
bool better(const GemmCandidate& a, const GemmCandidate& b, DType output) {
  if (a.cost.total_us != b.cost.total_us) return a.cost.total_us < b.cost.total_us;
  const int sa = a.config.smem_bytes(output), sb = b.config.smem_bytes(output);
  if (sa != sb) return sa < sb;
  if (a.config.cluster_size() != b.config.cluster_size()) return a.config.cluster_size() < b.config.cluster_size();
  if (a.config.pingpong != b.config.pingpong) return !a.config.pingpong;  // a tie: the simpler schedule
  if (a.config.split_k != b.config.split_k) return a.config.split_k < b.config.split_k;
  // A square tile's 2x1 and 1x2 clusters tie: the one along N (A multicast, measured on gemm_chains and
  // linear_relu_backward), whatever order the catalogue lists them in.
  return a.config.cluster_n > b.config.cluster_n;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

void write_config(JsonWriter& json, const GemmConfig& c) {
  json.begin_object();
  json.key("name").value(config_name(c));
  json.key("type").value(mma_type_name(c.type));
  json.key("bm").value(c.bm).key("bn").value(c.bn).key("bk").value(c.bk);
  json.key("stages").value(c.stages).key("consumers").value(c.consumers);
  json.key("cluster_m").value(c.cluster_m).key("cluster_n").value(c.cluster_n).key("split_k").value(c.split_k);
  json.key("pingpong").value(c.pingpong);
  json.end_object();
}

void write_cost(JsonWriter& json, const GemmCost& cost) {
  json.begin_object();
  json.key("time_us").value(cost.total_us).key("tflops").value(cost.tflops());
  json.key("binding").value(resource_name(cost.binding));
  json.key("tensor_us").value(cost.tensor_us).key("smem_us").value(cost.smem_us);
  json.key("load_us").value(cost.load_us).key("l2_us").value(cost.l2_us).key("hbm_us").value(cost.hbm_us);
  json.key("fill_us").value(cost.fill_us).key("launch_us").value(cost.launch_us).key("merge_us").value(cost.merge_us);
  json.key("ctas").value(cost.ctas).key("concurrent_ctas").value(cost.concurrent_ctas);
  json.key("ctas_per_sm").value(cost.ctas_per_sm).key("waves").value(cost.waves);
  json.key("epilogue").value(epilogue_schedule_name(cost.epilogue)).key("store_us").value(cost.store_us);
  json.key("wgmma_efficiency").value(cost.wgmma_efficiency);
  json.key("hbm_bytes").value(cost.hbm_bytes).key("l2_bytes").value(cost.l2_bytes);
  json.end_object();
}

}  // namespace

GemmPlan plan_gemm(const GemmProblem& problem, const HardwareDescription& hw, const PlanOptions& options) {
  GemmPlan plan;
  plan.problem = problem;
  std::vector<GemmConfig> configs = options.only.empty() ? gemm_catalogue(problem.type) : options.only;
  std::vector<GemmCandidate> candidates;
  for (const GemmConfig& config : configs) {
    ++plan.considered;
    if (config.type != problem.type) continue;  // `only` may list other types; they are not candidates
    if (auto refusal = check_feasibility(problem, config, hw, options.feasibility)) {
      if (plan.pruned[refusal->rule]++ == 0) plan.example[refusal->rule] = config_name(config) + ": " + refusal->detail;
      continue;
    }
    candidates.push_back({config, predict_gemm(problem, config, hw)});
  }
  plan.feasible = static_cast<int64_t>(candidates.size());
  std::stable_sort(candidates.begin(), candidates.end(),
            [&](const GemmCandidate& a, const GemmCandidate& b) { return better(a, b, problem.output); });
  // Variants that differ only in stages or consumers and predict the same time add nothing to the list:
  // the smallest footprint stands for them.
  const size_t keep = static_cast<size_t>(std::max(1, options.top));
  for (const GemmCandidate& c : candidates) {
    if (plan.top.size() == keep) break;
    bool repeat = false;
    for (const GemmCandidate& kept : plan.top)
      repeat |= kept.cost.total_us == c.cost.total_us && kept.config.bm == c.config.bm && kept.config.bn == c.config.bn &&
                kept.config.cluster_m == c.config.cluster_m && kept.config.cluster_n == c.config.cluster_n &&
                kept.config.split_k == c.config.split_k;
    if (!repeat) plan.top.push_back(c);
  }
  return plan;
}

std::string plan_text(const std::vector<GemmPlan>& plans, const HardwareDescription& hw) {
  std::string out = "GEMM plans on " + hw.name + " (" + std::to_string(hw.sm_count) + " SMs)";
  if (plans.empty()) return out + ": no contraction found\n";
  out += "\n";
  for (const GemmPlan& plan : plans) {
    out += "\n" + plan.problem.name + ": " + describe(plan.problem) + ", " + fixed(plan.problem.flops() / 1e9, 2) + " GFLOP\n";
    out += "  " + std::to_string(plan.considered) + " configurations, " + std::to_string(plan.feasible) + " feasible; pruned:";
    bool any = false;
    for (PruneRule rule : all_prune_rules()) {
      auto it = plan.pruned.find(rule);
      if (it == plan.pruned.end()) continue;
      out += std::string(any ? "," : "") + " " + std::string(prune_rule_name(rule)) + " " + std::to_string(it->second);
      any = true;
    }
    out += any ? "\n" : " none\n";
    if (plan.top.empty()) {
      out += "  no feasible configuration:";
      for (const auto& [rule, example] : plan.example) out += "\n    " + std::string(prune_rule_name(rule)) + " (" + example + ")";
      out += "\n";
      continue;
    }
    out += "  rank  configuration                      time µs  TFLOP/s  binding      tensor    smem    load      l2     hbm  waves  epilogue\n";
    for (size_t i = 0; i < plan.top.size(); ++i) {
      const GemmCandidate& c = plan.top[i];
      char line[256];
      std::snprintf(line, sizeof line, "  %4zu  %-32s %9.2f %8.1f  %-11s %7.2f %7.2f %7.2f %7.2f %7.2f %6.0f  %s\n", i + 1,
                    config_name(c.config).c_str(), c.cost.total_us, c.cost.tflops(),
                    std::string(resource_name(c.cost.binding)).c_str(), c.cost.tensor_us, c.cost.smem_us, c.cost.load_us, c.cost.l2_us,
                    c.cost.hbm_us, c.cost.waves, std::string(epilogue_schedule_name(c.cost.epilogue)).c_str());
      out += line;
    }
    const GemmCandidate& chosen = *plan.chosen();
    out += "  chosen: " + config_name(chosen.config) + ", predicted " + fixed(chosen.cost.total_us, 2) + " µs (" +
           fixed(chosen.cost.tflops(), 1) + " TFLOP/s), bound by " + std::string(resource_name(chosen.cost.binding)) + ", " +
           std::string(epilogue_schedule_name(chosen.cost.epilogue)) + " epilogue\n";
  }
  return out;
}

std::string plan_json(const std::vector<GemmPlan>& plans, const HardwareDescription& hw) {
  JsonWriter json;
  json.begin_object();
  json.key("device").value(hw.name);
  json.key("sm_count").value(hw.sm_count);
  json.key("plans").begin_array();
  for (const GemmPlan& plan : plans) {
    const GemmProblem& p = plan.problem;
    json.begin_object();
    json.key("problem").begin_object();
    json.key("name").value(p.name).key("batch").value(p.batch).key("m").value(p.m).key("n").value(p.n).key("k").value(p.k);
    json.key("type").value(mma_type_name(p.type)).key("output").value(dtype_name(p.output));
    json.key("a_k_major").value(p.a_k_major).key("b_k_major").value(p.b_k_major);
    json.key("a_shared").value(p.a_shared).key("b_shared").value(p.b_shared);
    json.key("epilogue_bytes_per_output").value(p.epilogue_bytes_per_output);
    json.key("flops").value(p.flops());
    json.end_object();
    json.key("considered").value(plan.considered).key("feasible").value(plan.feasible);
    json.key("pruned").begin_object();
    for (PruneRule rule : all_prune_rules()) {
      auto it = plan.pruned.find(rule);
      json.key(prune_rule_name(rule)).value(it == plan.pruned.end() ? int64_t{0} : it->second);
    }
    json.end_object();
    json.key("candidates").begin_array();
    for (const GemmCandidate& c : plan.top) {
      json.begin_object();
      json.key("config");
      write_config(json, c.config);
      json.key("cost");
      write_cost(json, c.cost);
      json.end_object();
    }
    json.end_array();
    json.key("chosen");
    if (const GemmCandidate* chosen = plan.chosen()) {
      json.begin_object();
      json.key("config");
      write_config(json, chosen->config);
      json.key("time_us").value(chosen->cost.total_us);
      json.key("binding").value(resource_name(chosen->cost.binding));
      json.end_object();
    } else {
      json.begin_object().key("none").value(true).end_object();
    }
    json.end_object();
  }
  json.end_array();
  json.end_object();
  return json.str();
}

}  // namespace solder
