#include "plan/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "ir/diagnostics.h"
#include "plan/cost_model.h"
#include "plan/feasibility.h"
#include "plan/plan.h"
#include "plan/skeleton_choice.h"
#include "support/json.h"
#include "support/json_reader.h"

namespace solder {

namespace {

class SweepReader {
 public:
  explicit SweepReader(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void fail(const JsonValue& at, const std::string& expected, const std::string& found) const {
    throw Error(std::string(origin_) + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": expected " +
                expected + ", found " + found);
  }
  const JsonValue& member(const JsonValue& object, const char* name, JsonValue::Kind kind) const {
    const JsonValue* v = object.member(name);
    if (!v) fail(object, std::string("member \"") + name + "\" (" + json_kind_name(kind) + ")", "none");
    if (v->kind != kind) fail(*v, std::string("\"") + name + "\" to be " + json_kind_name(kind), json_kind_name(v->kind));
    return *v;
  }
  int64_t positive(const JsonValue& object, const char* name) const {
    const JsonValue& v = member(object, name, JsonValue::number);
    if (v.number_value < 1 || v.number_value != std::floor(v.number_value) || v.number_value > 1e15)
      fail(v, std::string("\"") + name + "\" to be a positive integer", std::to_string(v.number_value));
    return static_cast<int64_t>(v.number_value);
  }
  int64_t positive_or(const JsonValue& object, const char* name, int64_t fallback) const {
    return object.member(name) ? positive(object, name) : fallback;
  }
  bool flag_or(const JsonValue& object, const char* name, bool fallback) const {
    const JsonValue* v = object.member(name);
    if (!v) return fallback;
    if (v->kind != JsonValue::boolean) fail(*v, std::string("\"") + name + "\" to be true or false", json_kind_name(v->kind));
    return v->bool_value;
  }

  SweepRecord record(const JsonValue& r) const {
    if (r.kind != JsonValue::object) fail(r, "a result object", json_kind_name(r.kind));
    SweepRecord record;
    GemmProblem& p = record.problem;
    const JsonValue& dtype = member(r, "dtype", JsonValue::string);
    auto type = parse_mma_type(dtype.text);
    if (!type) fail(dtype, "an MMA type (bf16, f16, e4m3, e5m2, tf32)", "\"" + dtype.text + "\"");
    p.type = *type;
    p.m = positive(r, "m");
    p.n = positive(r, "n");
    p.k = positive(r, "k");
    p.batch = positive_or(r, "batch", 1);
    p.output = DType::bf16;
    if (const JsonValue* out = r.member("output")) {
      auto d = out->kind == JsonValue::string ? parse_dtype(out->text) : std::nullopt;
      if (!d) fail(*out, "an output dtype (f32, bf16, f16, ...)", out->kind == JsonValue::string ? "\"" + out->text + "\"" : json_kind_name(out->kind));
      p.output = *d;
    }
    const JsonValue& c = member(r, "config", JsonValue::object);
    p.a_k_major = flag_or(c, "a_k_major", flag_or(r, "a_k_major", true));
    p.b_k_major = flag_or(c, "b_k_major", flag_or(r, "b_k_major", true));
    if (const JsonValue* e = r.member("epilogue_bytes_per_output")) {
      if (e->kind != JsonValue::number || e->number_value < 0)
        fail(*e, "\"epilogue_bytes_per_output\" to be a non-negative number", json_kind_name(e->kind));
      p.epilogue_bytes_per_output = e->number_value;
    } else if (p.type == MmaType::f8e4m3 || p.type == MmaType::f8e5m2) {
      p.epilogue_bytes_per_output = 4.0 / static_cast<double>(p.n) + 4.0 / static_cast<double>(p.m);
    }
    // "row_store": true: the kernel stored its 16-bit output through the skeleton's row-store hooks (the
    // generated kernels' epilogue: `solder bench` sweeps), priced as GemmProblem::row_store.
    p.row_store = flag_or(r, "row_store", false);
    p.name = "M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) + " K=" + std::to_string(p.k);
    GemmConfig& g = record.config;
    g.type = p.type;
    g.bm = static_cast<int>(positive(c, "bm"));
    g.bn = static_cast<int>(positive(c, "bn"));
    g.bk = static_cast<int>(positive_or(c, "bk", 128 / mma_type_bytes(p.type)));
    g.stages = static_cast<int>(positive(c, "stages"));
    g.consumers = static_cast<int>(positive_or(c, "consumers", std::max(1, g.bm / 64)));
    g.split_k = static_cast<int>(positive_or(c, "split_k", 1));
    g.cluster_m = static_cast<int>(positive_or(c, "cluster_m", 1));
    g.cluster_n = static_cast<int>(positive_or(c, "cluster_n", 1));
    // bench_gemm pingpong writes "pingpong": true for the ping-pong schedule (BM 64, 2 consumers).
    if (const JsonValue* pp = c.member("pingpong"); pp && pp->kind == JsonValue::boolean) g.pingpong = pp->bool_value;
    record.blocks = positive_or(c, "blocks", 0);
    if (const JsonValue* ms = r.member("ms")) {
      if (ms->kind != JsonValue::number || !(ms->number_value > 0))
        fail(*ms, "\"ms\" to be a positive number", ms->kind == JsonValue::number ? std::to_string(ms->number_value) : json_kind_name(ms->kind));
      record.time_us = ms->number_value * 1e3;
    } else if (const JsonValue* us = r.member("time_us")) {
      if (us->kind != JsonValue::number || !(us->number_value > 0))
        fail(*us, "\"time_us\" to be a positive number", us->kind == JsonValue::number ? std::to_string(us->number_value) : json_kind_name(us->kind));
      record.time_us = us->number_value;
    } else {
      fail(r, "a measured time: member \"ms\" or \"time_us\"", "neither");
    }
    return record;
  }

 private:
  std::string_view origin_;
};

std::vector<double> ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> rank(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t t = i; t <= j; ++t) rank[order[t]] = average;
    i = j + 1;
  }
  return rank;
}

std::string problem_key(const GemmProblem& p) {
  return describe(p) + " e" + std::to_string(p.epilogue_bytes_per_output) + (p.row_store ? " rows" : "");
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

}  // namespace

std::vector<SweepRecord> parse_sweep(std::string_view text, std::string_view origin) {
  JsonValue root = parse_json(text, origin);
  SweepReader reader(origin);
  const JsonValue* results = &root;
  if (root.kind == JsonValue::object) {
    results = root.member("results");
    if (!results) results = root.member("records");
    if (!results) reader.fail(root, "member \"results\" (an array of measured configurations)", "none");
  }
  if (results->kind != JsonValue::array) reader.fail(*results, "an array of results", json_kind_name(results->kind));
  std::vector<SweepRecord> records;
  for (const JsonValue& r : results->items) records.push_back(reader.record(r));
  return records;
}

std::vector<SweepRecord> load_sweep(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": expected a readable sweep (JSON), found no such file or no permission");
  std::stringstream buffer;
  buffer << file.rdbuf();
  return parse_sweep(buffer.str(), path);
}

std::vector<SweepRecord> load_sweeps(const std::vector<std::string>& paths) {
  std::vector<SweepRecord> records;
  for (const std::string& path : paths) {
    std::vector<SweepRecord> more = load_sweep(path);
    records.insert(records.end(), more.begin(), more.end());
  }
  return records;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) return 0;
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double n = static_cast<double>(x.size()), mean = (n + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0;
}

Validation validate_cost_model(const std::vector<SweepRecord>& sweep, const HardwareDescription& hw) {
  Validation v;
  v.records = static_cast<int>(sweep.size());
  // Group by problem; inside a problem, merge repeated configurations (the median of their times).
  std::map<std::string, std::vector<std::string>> config_order;
  std::map<std::string, std::map<std::string, std::vector<const SweepRecord*>>> groups;
  std::vector<std::string> order;
  for (const SweepRecord& r : sweep) {
    if (r.blocks > hw.sm_count) {
      ++v.block_per_tile;
      continue;
    }
    const std::string key = problem_key(r.problem), name = config_name(r.config);
    auto [it, inserted] = groups.try_emplace(key);
    if (inserted) order.push_back(key);
    auto [c, new_config] = it->second.try_emplace(name);
    if (new_config) config_order[key].push_back(name);
    c->second.push_back(&r);
  }
  std::vector<double> all_predicted, all_measured, all_relative_predicted, all_relative_measured;
  for (const std::string& key : order) {
    std::vector<SweepRecord> records;
    for (const std::string& name : config_order[key]) {
      const auto& same = groups[key][name];
      std::vector<double> times;
      for (const SweepRecord* r : same) times.push_back(r->time_us);
      std::sort(times.begin(), times.end());
      SweepRecord merged = *same.front();
      merged.time_us = times.size() % 2 ? times[times.size() / 2] : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
      merged.repeats = static_cast<int>(times.size());
      v.merged += merged.repeats - 1;
      records.push_back(merged);
    }
    if (records.size() < 2) continue;
    ProblemValidation pv;
    pv.problem = records.front().problem;
    pv.configurations = static_cast<int>(records.size());
    std::vector<double> predicted, measured;
    std::vector<std::string> bindings;
    size_t chosen = 0, best = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      const SweepRecord& r = records[i];
      FeasibilityOptions options;
      options.allow_nonportable_clusters = true;
      if (auto refusal = check_feasibility(r.problem, r.config, hw, options))
        pv.infeasible.push_back(config_name(r.config) + ": " + std::string(prune_rule_name(refusal->rule)) + " (" + refusal->detail + ")");
      const GemmCost cost = predict_gemm(r.problem, r.config, hw);
      predicted.push_back(cost.total_us);
      bindings.emplace_back(resource_name(cost.binding));
      measured.push_back(r.time_us);
      if (predicted[i] < predicted[chosen]) chosen = i;
      if (measured[i] < measured[best]) best = i;
    }
    pv.spearman = spearman(predicted, measured);
    pv.model_choice = config_name(records[chosen].config);
    pv.best_measured = config_name(records[best].config);
    pv.model_choice_measured_us = measured[chosen];
    pv.best_measured_us = measured[best];
    pv.gap = measured[chosen] / measured[best] - 1;
    pv.predicted_best_us = predicted[best];
    const std::vector<double> predicted_rank = ranks(predicted), measured_rank = ranks(measured);
    for (size_t i = 0; i < records.size(); ++i) {
      pv.table.push_back({config_name(records[i].config), measured[i], predicted[i], measured_rank[i], predicted_rank[i], bindings[i],
                          records[i].repeats});
      all_predicted.push_back(predicted[i]);
      all_measured.push_back(measured[i]);
      all_relative_predicted.push_back(predicted[i] / predicted[chosen]);
      all_relative_measured.push_back(measured[i] / measured[best]);
    }
    // The skeleton path's choice: the best of the device skeleton's catalogue for this problem, among the
    // split-K candidates choose_skeleton_config offers (split_k_offered: powers of two).
    PlanOptions options;
    options.top = 1;
    for (const GemmConfig& c : gemm_catalogue(pv.problem.type))
      if (in_device_skeleton(c) && split_k_offered(pv.problem, c, hw.sm_count) && skeleton_cluster_fits(pv.problem, c))
        options.only.push_back(c);
    const GemmPlan plan = plan_gemm(pv.problem, hw, options);
    if (const GemmCandidate* c = plan.chosen()) {
      pv.skeleton_choice = config_name(c->config);
      for (size_t i = 0; i < records.size(); ++i)
        if (records[i].config == c->config) {
          pv.skeleton_choice_measured = true;
          pv.skeleton_choice_measured_us = measured[i];
          pv.skeleton_gap = measured[i] / measured[best] - 1;
        }
      int nearest = -1;
      for (size_t i = 0; i < records.size() && !pv.skeleton_choice_measured; ++i) {
        GemmConfig same = records[i].config;
        same.stages = c->config.stages;
        if (!(same == c->config)) continue;
        auto distance = [&](int j) { return std::abs(records[j].config.stages - c->config.stages) * 2 + (records[j].config.stages > c->config.stages); };
        if (nearest < 0 || distance(static_cast<int>(i)) < distance(nearest)) nearest = static_cast<int>(i);
      }
      if (nearest >= 0) {
        pv.skeleton_nearest = config_name(records[nearest].config);
        pv.skeleton_nearest_measured_us = measured[nearest];
        pv.skeleton_nearest_gap = measured[nearest] / measured[best] - 1;
      }
    }
    v.problems.push_back(pv);
  }
  for (const ProblemValidation& pv : v.problems) {
    v.pairs += pv.configurations;
    v.mean_spearman += pv.spearman / static_cast<double>(v.problems.size());
    v.mean_gap += pv.gap / static_cast<double>(v.problems.size());
    v.max_gap = std::max(v.max_gap, pv.gap);
    if (pv.skeleton_choice_measured) {
      ++v.skeleton_measured;
      v.skeleton_max_gap = std::max(v.skeleton_max_gap, pv.skeleton_gap);
    } else if (!pv.skeleton_nearest.empty()) {
      ++v.skeleton_nearest;
      v.skeleton_nearest_max_gap = std::max(v.skeleton_nearest_max_gap, pv.skeleton_nearest_gap);
    }
  }
  v.pooled_spearman = spearman(all_predicted, all_measured);
  v.relative_spearman = spearman(all_relative_predicted, all_relative_measured);
  return v;
}

std::string validation_text(const Validation& v) {
  std::string out = "cost model against " + std::to_string(v.records) + " measured results: " + std::to_string(v.problems.size()) +
                    " problems with two or more configurations, " + std::to_string(v.pairs) + " (problem, configuration) pairs";
  if (v.merged > 0) out += "; " + std::to_string(v.merged) + " repeated measurements merged (median)";
  if (v.block_per_tile > 0) out += "; " + std::to_string(v.block_per_tile) + " one-block-per-tile launches left out";
  out += "\n";
  for (const ProblemValidation& pv : v.problems) {
    out += "\n" + describe(pv.problem) + ": " + std::to_string(pv.configurations) + " configurations, Spearman " +
           fixed(pv.spearman, 3) + "\n";
    out += "  model's choice " + pv.model_choice + ": " + fixed(pv.model_choice_measured_us, 2) + " µs measured\n";
    out += "  best measured  " + pv.best_measured + ": " + fixed(pv.best_measured_us, 2) + " µs (predicted " +
           fixed(pv.predicted_best_us, 2) + " µs, " + fixed(pv.predicted_best_us / pv.best_measured_us, 2) + "× measured)\n";
    out += "  gap " + fixed(100 * pv.gap, 1) + " %\n";
    if (!pv.skeleton_choice.empty())
      out += "  skeleton path's choice " + pv.skeleton_choice +
             (pv.skeleton_choice_measured ? ": " + fixed(pv.skeleton_choice_measured_us, 2) + " µs measured, gap " + fixed(100 * pv.skeleton_gap, 1) + " %\n"
                                          : ": not measured" + (pv.skeleton_nearest.empty() ? std::string() :
                                               "; nearest measured " + pv.skeleton_nearest + ": " + fixed(pv.skeleton_nearest_measured_us, 2) +
                                               " µs, gap " + fixed(100 * pv.skeleton_nearest_gap, 1) + " %") + "\n");
    out += "    configuration                      measured µs  predicted µs  rank m/p  binding\n";
    for (const ConfigValidation& c : pv.table) {
      char line[200];
      std::snprintf(line, sizeof line, "    %-34s %11.2f %13.2f  %4.1f/%-4.1f %s%s\n", c.config.c_str(), c.measured_us, c.predicted_us,
                    c.measured_rank, c.predicted_rank, c.binding.c_str(), c.repeats > 1 ? (" (median of " + std::to_string(c.repeats) + ")").c_str() : "");
      out += line;
    }
    for (const std::string& refused : pv.infeasible) out += "  pruned by the model but measured: " + refused + "\n";
  }
  out += "\nmean Spearman " + fixed(v.mean_spearman, 3) + ", pooled " + fixed(v.pooled_spearman, 3) + ", relative to each problem's best " +
         fixed(v.relative_spearman, 3) + "; mean gap " + fixed(100 * v.mean_gap, 1) + " %, worst gap " + fixed(100 * v.max_gap, 1) + " %";
  out += "; skeleton path's choice measured for " + std::to_string(v.skeleton_measured) + " of " + std::to_string(v.problems.size()) +
         " problems, worst gap " + fixed(100 * v.skeleton_max_gap, 1) + " %; its nearest stage variant for " +
         std::to_string(v.skeleton_nearest) + " more, worst gap " + fixed(100 * v.skeleton_nearest_max_gap, 1) + " %\n";
  return out;
}

std::string validation_json(const Validation& v) {
  JsonWriter json;
  json.begin_object();
  json.key("records").value(v.records).key("pairs").value(v.pairs);
  json.key("merged").value(v.merged).key("block_per_tile").value(v.block_per_tile);
  json.key("mean_spearman").value(v.mean_spearman).key("mean_gap").value(v.mean_gap).key("max_gap").value(v.max_gap);
  json.key("pooled_spearman").value(v.pooled_spearman).key("relative_spearman").value(v.relative_spearman);
  json.key("skeleton_measured").value(v.skeleton_measured).key("skeleton_max_gap").value(v.skeleton_max_gap);
  json.key("skeleton_nearest").value(v.skeleton_nearest).key("skeleton_nearest_max_gap").value(v.skeleton_nearest_max_gap);
  json.key("problems").begin_array();
  for (const ProblemValidation& pv : v.problems) {
    json.begin_object();
    json.key("problem").value(describe(pv.problem));
    json.key("configurations").value(pv.configurations);
    json.key("spearman").value(pv.spearman);
    json.key("model_choice").value(pv.model_choice).key("model_choice_measured_us").value(pv.model_choice_measured_us);
    json.key("best_measured").value(pv.best_measured).key("best_measured_us").value(pv.best_measured_us);
    json.key("gap").value(pv.gap).key("predicted_best_us").value(pv.predicted_best_us);
    json.key("skeleton_choice").value(pv.skeleton_choice).key("skeleton_choice_measured").value(pv.skeleton_choice_measured);
    json.key("skeleton_choice_measured_us").value(pv.skeleton_choice_measured_us).key("skeleton_gap").value(pv.skeleton_gap);
    json.key("skeleton_nearest").value(pv.skeleton_nearest).key("skeleton_nearest_measured_us").value(pv.skeleton_nearest_measured_us);
    json.key("skeleton_nearest_gap").value(pv.skeleton_nearest_gap);
    json.key("table").begin_array();
    for (const ConfigValidation& c : pv.table) {
      json.begin_object();
      json.key("config").value(c.config).key("measured_us").value(c.measured_us).key("predicted_us").value(c.predicted_us);
      json.key("measured_rank").value(c.measured_rank).key("predicted_rank").value(c.predicted_rank);
      json.key("binding").value(c.binding).key("repeats").value(c.repeats);
      json.end_object();
    }
    json.end_array();
    json.key("infeasible").begin_array();
    for (const std::string& s : pv.infeasible) json.value(s);
    json.end_array();
    json.end_object();
  }
  json.end_array();
  json.end_object();
  return json.str();
}

}  // namespace solder
