#include "backend/cpu/compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "ir/expr_visitor.h"

namespace solder {

namespace {

constexpr double kUnitRoundoff = 0x1p-24;
constexpr double kChainFactor = 16;

double base_tolerance(DType dtype) {
  if (dtype == DType::bf16 || dtype == DType::f16) return 1e-2;
  if (dtype == DType::f8e4m3 || dtype == DType::f8e5m2) return 5e-2;
  return 1e-5;
}

// Arithmetic nodes of an expression: each is one float32 rounding in the executor and on the GPU.
class OperationCounter : public ExprVisitor {
 public:
  double count = 0;
  using ExprVisitor::visit;
  void visit(const UnaryNode& n) override { ++count; ExprVisitor::visit(n); }
  void visit(const BinaryNode& n) override { ++count; ExprVisitor::visit(n); }
  void visit(const SelectNode& n) override { ++count; ExprVisitor::visit(n); }
  void visit(const CastNode& n) override { ++count; ExprVisitor::visit(n); }
};

}  // namespace

Tolerance output_tolerance(const BoundProgram& program, const std::string& output) {
  // Tensors in definition order: each definition reads inputs or earlier targets only.
  std::map<std::string, double> chain, base;
  for (auto& t : program.tensors)
    if (t.role == TensorRole::input) {
      chain[t.name] = 0;
      base[t.name] = base_tolerance(t.dtype);
    }
  for (auto& bd : program.defs) {
    const Definition& def = *bd.def;
    OperationCounter ops;
    ops.visit(def.body);
    double reduction = 0;
    if (def.reduce == ReduceOp::sum || def.reduce == ReduceOp::prod) {  // max, min, argmax, topk are exact
      reduction = 1;
      for (int64_t e : bd.r_extents) reduction *= static_cast<double>(e);
    }
    double longest = 0, b = base_tolerance(program.tensor(def.target.name).dtype);
    for (const std::string& t : tensors_used(def.body)) {
      longest = std::max(longest, chain.count(t) ? chain[t] : 0.0);
      if (base.count(t)) b = std::max(b, base[t]);
    }
    std::vector<std::string> targets{def.target.name};
    if (def.index_target) targets.push_back(def.index_target->name);
    for (auto& name : targets) {
      chain[name] = ops.count + reduction + longest;
      base[name] = b;
    }
  }
  Tolerance t;
  if (!chain.count(output)) return t;
  t.base = base[output];
  t.chain_length = chain[output];
  t.value = std::max(t.base, kChainFactor * kUnitRoundoff * std::sqrt(t.chain_length));
  return t;
}

double tolerance_for(const BoundProgram& program) {
  double tolerance = 1e-5;
  for (const TensorInfo* out : program.outputs()) tolerance = std::max(tolerance, output_tolerance(program, out->name).value);
  return tolerance;
}

std::string index_text(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t extent = std::max<int64_t>(shape[d], 1);
    index[d] = flat % extent;
    flat /= extent;
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

NonFinite find_non_finite(const HostTensor& t, size_t positions) {
  NonFinite f;
  for (size_t i = 0; i < t.values.size(); ++i) {
    double v = t.values[i];
    if (std::isnan(v)) {
      if (f.first_nans.size() < positions) f.first_nans.push_back(static_cast<int64_t>(i));
      ++f.nans;
    } else if (std::isinf(v)) {
      if (f.first_infinities.size() < positions) f.first_infinities.push_back(static_cast<int64_t>(i));
      ++(v > 0 ? f.positive_infinities : f.negative_infinities);
    }
  }
  return f;
}

OutputCheck compare_output(const HostTensor& got, const HostTensor& reference, double tolerance) {
  OutputCheck check;
  check.name = reference.name;
  check.tolerance = tolerance;
  if (got.shape != reference.shape || got.values.size() != reference.values.size()) {
    check.reason = "shape differs from the reference";
    check.error = INFINITY;
    return check;
  }
  bool integer = reference.dtype == DType::i32 || reference.dtype == DType::boolean;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < reference.values.size(); ++i) {
    double r = reference.values[i], g = got.values[i];
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) != std::isnan(g)) ++check.nan_mismatches;
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (r != g) ++check.inf_mismatches;
      continue;
    }
    if (integer) {
      if (r != g) ++check.index_mismatches;
      continue;
    }
    diff2 += (g - r) * (g - r);
    ref2 += r * r;
  }
  check.error = std::sqrt(diff2) / (ref2 > 0 ? std::sqrt(ref2) : 1.0);
  auto allowed_index_mismatches = static_cast<int64_t>(0.001 * static_cast<double>(reference.values.size()));
  if (check.nan_mismatches)
    check.reason = std::to_string(check.nan_mismatches) + " element(s) NaN in one and not the other";
  else if (check.inf_mismatches)
    check.reason = std::to_string(check.inf_mismatches) + " element(s) with different infinities";
  else if (check.index_mismatches > allowed_index_mismatches)
    check.reason = std::to_string(check.index_mismatches) + " integer element(s) differ";
  else if (!(check.error <= tolerance))
    check.reason = "relative error above tolerance";
  check.ok = check.reason.empty();
  return check;
}

}  // namespace solder
