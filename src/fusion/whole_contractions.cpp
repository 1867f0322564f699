#include "fusion/whole_contractions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "hw/hardware.h"
#include "contract/gemm_prologue_fit.h"
#include "lower/lower_prologue.h"
#include "lower/lower_unfused.h"

namespace solder {
namespace {

constexpr double kBalanceFraction = 1.0 / 3.0;  // whole when FLOPs per byte materialised ≥ balance / 3
constexpr int64_t kMinSide = 64;                // ... and M and N are each at least the skeleton's smallest tile side

std::string figure(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", x);
  return text;
}

// Whether the skeleton's prologue path takes the kernel (fit_gemm_prologue); why not.
bool prologue_skeleton_takes(const BoundProgram& program, const Kernel& kernel, std::string* why) {
  GemmPrologueFit fit = fit_gemm_prologue(kernel, program_globals(program));
  if (!fit.problem && why) *why = fit.refusal;
  return fit.problem.has_value();
}

}  // namespace

const WholeContraction* WholeContractionPlan::computing(const BoundProgram& program, const std::string& target) const {
  for (auto& w : whole) {
    if (program.defs[w.def].def->target.name == target) return &w;
    for (size_t d : w.absorbed)
      if (program.defs[d].def->target.name == target) return &w;
    if (w.epilogue && program.defs[*w.epilogue].def->target.name == target) return &w;
  }
  return nullptr;
}

WholeContractionPlan plan_whole_contractions(const BoundProgram& program) {
  WholeContractionPlan plan;
  // Readers of each tensor, by definition index.
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < program.defs.size(); ++i)
    for (auto& t : tensors_used(program.defs[i].def->body)) {
      auto& r = readers[t];
      if (r.empty() || r.back() != i) r.push_back(i);
    }
  std::set<size_t> absorbed;
  std::set<std::string> materialised;  // intermediates that whole contractions already store or read
  for (size_t i = 0; i < program.defs.size(); ++i) {
    const Definition& def = *program.defs[i].def;
    if (def.reduce != ReduceOp::sum || absorbed.count(i)) continue;
    // The pointwise consumer it could compute as its epilogue.
    std::optional<size_t> consumer;
    const auto& mine = readers[def.target.name];
    if (!def.target.is_output && mine.size() == 1 && absorbable_epilogue(program, i, mine[0], nullptr, materialised)) consumer = mine[0];
    std::optional<Kernel> kernel;
    std::optional<PrologueContraction> prologue;
    if (!consumer) {
      prologue = lower_prologue_contraction(program, i, nullptr);
      if (prologue && std::any_of(prologue->absorbed.begin(), prologue->absorbed.end(), [&](size_t d) { return absorbed.count(d) > 0; }))
        prologue.reset();
      if (prologue) {
        std::string refusal;
        if (!prologue_skeleton_takes(program, prologue->kernel, &refusal)) {
          plan.fused.push_back(def.target.name + ": no operand prologue: " + refusal);
          prologue.reset();
        } else {
          kernel = prologue->kernel;
        }
      }
    }
    if (kernel) {
    } else if (consumer) kernel = lower_whole_contraction(program, i, nullptr, true, consumer, materialised);
    if (!kernel) {
      consumer.reset();
      kernel = lower_whole_contraction(program, i, nullptr, true);
    }
    if (!kernel) continue;  // not a contraction the skeleton takes (the fusion report says why, per kernel)
    const ContractNode& c = *kernel->body.back().as<ContractNode>();
    // At least one 64 × 64 tile of the skeleton: a matrix-vector product (decode) is memory-bound and
    // streams its weights through many blocks in a fused kernel instead.
    int64_t rows = 1, columns = 1;
    for (auto& a : c.domain.axes) {
      if (std::count(c.row_axes.begin(), c.row_axes.end(), a.var)) rows *= a.extent;
      if (std::count(c.column_axes.begin(), c.column_axes.end(), a.var)) columns *= a.extent;
    }
    if (rows < kMinSide || columns < kMinSide) {
      plan.fused.push_back(def.target.name + ": stays fused: " + std::to_string(rows) + " rows × " + std::to_string(columns) +
                           " columns, under one " + std::to_string(kMinSide) + " × " + std::to_string(kMinSide) + " tile of the skeleton");
      continue;
    }
    double flops = 2;
    for (auto& a : c.domain.axes) flops *= static_cast<double>(a.extent);
    for (auto& a : c.reduce_axes) flops *= static_cast<double>(a.extent);
    // The bytes that running it whole adds: its result written and read back (none for an output,
    // written anyway), and each operand that nothing materialises yet.
    auto round_trip = [&](const std::string& name) {
      const TensorInfo& info = program.tensor(name);
      if (info.role != TensorRole::intermediate || materialised.count(name)) return 0.0;
      double n = 1;
      for (int64_t e : info.shape) n *= static_cast<double>(e);
      return 2 * n * dtype_bytes(info.dtype);
    };
    double bytes = round_trip(c.dst.name);
    std::vector<std::string> operands;
    for (auto& t : tensors_used(program.defs[i].def->body)) {
      if (program.tensor(t).role == TensorRole::input) continue;
      if (prologue && std::any_of(prologue->absorbed.begin(), prologue->absorbed.end(),
                                  [&](size_t d) { return program.defs[d].def->target.name == t; }))
        continue;  // computed in the kernel (inlined into A, or a side reduction): never materialised
      bytes += round_trip(t);
      operands.push_back(t);
    }
    const Rates& rates = default_hardware().rates;
    double balance = rates.tensor(mma_type_name(c.type)) / rates.hbm_tbps;  // TFLOP/s over TB/s: FLOP per byte
    if (!(balance > 0 && balance < 1e6)) balance = 262;  // no rates: the H100's f16 figure
    const double intensity = bytes > 0 ? flops / bytes : INFINITY;
    const std::string figures = (bytes > 0 ? figure(intensity) + " FLOP per byte materialised" : std::string("no bytes materialised")) + ", " +
                                (intensity >= balance * kBalanceFraction ? "≥" : "<") + " balance / 3 = " + figure(balance * kBalanceFraction) +
                                " (T = " + std::string(mma_type_name(c.type)) + ")";
    if (!(intensity >= balance * kBalanceFraction)) {
      plan.fused.push_back(def.target.name + ": stays fused: " + figures);
      continue;
    }
    WholeContraction w;
    w.def = i;
    w.epilogue = consumer;
    w.kernel = std::move(*kernel);
    w.why = figures;
    if (prologue) {
      w.absorbed = prologue->absorbed;
      w.notes = prologue->notes;
      for (size_t d : prologue->absorbed) absorbed.insert(d);
    }
    if (consumer) {
      absorbed.insert(*consumer);
      plan.kept.insert(program.defs[*consumer].def->target.name);
    }
    for (auto& t : operands) {
      plan.kept.insert(t);
      materialised.insert(t);
    }
    materialised.insert(c.dst.name);
    plan.whole.push_back(std::move(w));
  }
  return plan;
}

std::string whole_contractions_text(const BoundProgram& program, const WholeContractionPlan& plan) {
  if (plan.whole.empty() && plan.fused.empty()) return "";
  std::string text = "Whole contractions (one launch of the sm_90a GEMM skeleton each):\n";
  for (auto& w : plan.whole) {
    text += "  " + program.defs[w.def].def->target.name;
    if (w.epilogue) text += " with epilogue " + program.defs[*w.epilogue].def->target.name + " (" +
                            program.defs[w.def].def->target.name + " is never stored)";
    text += ": " + w.why + "\n";
    if (!w.absorbed.empty()) {
      text += "    with its operand prologue (one kernel; absorbs";
      for (size_t d : w.absorbed) text += " " + program.defs[d].def->target.name;
      text += "):\n";
      for (auto& n : w.notes) text += "      " + n + "\n";
    }
  }
  for (auto& f : plan.fused) text += "  " + f + "\n";
  return text;
}

}  // namespace solder
