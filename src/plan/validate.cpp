#include "plan/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "ir/diagnostics.h"
#include "plan/cost_model.h"
#include "plan/feasibility.h"
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
  return describe(p) + " e" + std::to_string(p.epilogue_bytes_per_output);
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
  std::map<std::string, std::vector<const SweepRecord*>> groups;
  std::vector<std::string> order;
  for (const SweepRecord& r : sweep) {
    auto [it, inserted] = groups.try_emplace(problem_key(r.problem));
    if (inserted) order.push_back(it->first);
    it->second.push_back(&r);
  }
  for (const std::string& key : order) {
    const auto& records = groups[key];
    if (records.size() < 2) continue;
    ProblemValidation pv;
    pv.problem = records.front()->problem;
    pv.configurations = static_cast<int>(records.size());
    std::vector<double> predicted, measured;
    size_t chosen = 0, best = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      const SweepRecord& r = *records[i];
      FeasibilityOptions options;
      options.allow_nonportable_clusters = true;
      if (auto refusal = check_feasibility(r.problem, r.config, hw, options))
        pv.infeasible.push_back(config_name(r.config) + ": " + std::string(prune_rule_name(refusal->rule)) + " (" + refusal->detail + ")");
      predicted.push_back(predict_gemm(r.problem, r.config, hw).total_us);
      measured.push_back(r.time_us);
      if (predicted[i] < predicted[chosen]) chosen = i;
      if (measured[i] < measured[best]) best = i;
    }
    pv.spearman = spearman(predicted, measured);
    pv.model_choice = config_name(records[chosen]->config);
    pv.best_measured = config_name(records[best]->config);
    pv.model_choice_measured_us = measured[chosen];
    pv.best_measured_us = measured[best];
    pv.gap = measured[chosen] / measured[best] - 1;
    pv.predicted_best_us = predicted[best];
    v.problems.push_back(pv);
  }
  for (const ProblemValidation& pv : v.problems) {
    v.mean_spearman += pv.spearman / static_cast<double>(v.problems.size());
    v.mean_gap += pv.gap / static_cast<double>(v.problems.size());
    v.max_gap = std::max(v.max_gap, pv.gap);
  }
  return v;
}

std::string validation_text(const Validation& v) {
  std::string out = "cost model against " + std::to_string(v.records) + " measured configurations, " +
                    std::to_string(v.problems.size()) + " problems with two or more\n";
  for (const ProblemValidation& pv : v.problems) {
    out += "\n" + describe(pv.problem) + ": " + std::to_string(pv.configurations) + " configurations, Spearman " +
           fixed(pv.spearman, 3) + "\n";
    out += "  model's choice " + pv.model_choice + ": " + fixed(pv.model_choice_measured_us, 2) + " µs measured\n";
    out += "  best measured  " + pv.best_measured + ": " + fixed(pv.best_measured_us, 2) + " µs (predicted " +
           fixed(pv.predicted_best_us, 2) + " µs, " + fixed(pv.predicted_best_us / pv.best_measured_us, 2) + "× measured)\n";
    out += "  gap " + fixed(100 * pv.gap, 1) + " %\n";
    for (const std::string& refused : pv.infeasible) out += "  pruned by the model but measured: " + refused + "\n";
  }
  out += "\nmean Spearman " + fixed(v.mean_spearman, 3) + ", mean gap " + fixed(100 * v.mean_gap, 1) + " %, worst gap " +
         fixed(100 * v.max_gap, 1) + " %\n";
  return out;
}

std::string validation_json(const Validation& v) {
  JsonWriter json;
  json.begin_object();
  json.key("records").value(v.records);
  json.key("mean_spearman").value(v.mean_spearman).key("mean_gap").value(v.mean_gap).key("max_gap").value(v.max_gap);
  json.key("problems").begin_array();
  for (const ProblemValidation& pv : v.problems) {
    json.begin_object();
    json.key("problem").value(describe(pv.problem));
    json.key("configurations").value(pv.configurations);
    json.key("spearman").value(pv.spearman);
    json.key("model_choice").value(pv.model_choice).key("model_choice_measured_us").value(pv.model_choice_measured_us);
    json.key("best_measured").value(pv.best_measured).key("best_measured_us").value(pv.best_measured_us);
    json.key("gap").value(pv.gap).key("predicted_best_us").value(pv.predicted_best_us);
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
