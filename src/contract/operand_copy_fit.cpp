#include "contract/operand_copy_fit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "contract/gathered_gemm_fit.h"
#include "contract/gemm_skeleton_fit.h"
#include "contract/operand_reads.h"
#include "hw/hardware.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "plan/copy_cost.h"
#include "plan/skeleton_choice.h"

namespace solder {
namespace {

const GlobalTensor* find(const std::vector<GlobalTensor>& globals, const std::string& name) {
  for (auto& g : globals)
    if (g.name == name) return &g;
  return nullptr;
}

std::string us(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f us", x);
  return text;
}

}  // namespace

std::string OperandCopies::figures() const {
  char fraction[16];
  std::snprintf(fraction, sizeof fraction, "%.1f", 100 * alternative_fraction());
  return "copy " + us(copy_us) + " + skeleton " + us(skeleton_us) + (copy_us + skeleton_us < mma_sync_us ? " < " : " >= ") +
         (gathered ? "gathered GEMM " : scalar ? "scalar loop " : "mma.sync ") + us(mma_sync_us) + " (a launch and the product's FLOPs at " + fraction +
         " % of the tensor rate)" + (operand_copies_forced() ? ", taken: SOLDER_OPERAND_COPIES=force" : "");
}

double OperandCopies::alternative_fraction() const {
  if (gathered) return element_wise ? kGatheredGemmElementWiseTensorFraction : kGatheredGemmTensorFraction;
  return scalar ? kScalarLoopTensorFraction : kFusedMmaSyncTensorFraction;
}

std::optional<DType> copy_dtype(MmaType type) {
  switch (type) {
    case MmaType::bf16: return DType::bf16;
    case MmaType::f16: return DType::f16;
    case MmaType::f8e4m3: return DType::f8e4m3;
    case MmaType::f8e5m2: return DType::f8e5m2;
    case MmaType::tf32: return DType::f32;  // tf32 wgmma reads f32 storage; the copied values are exact in tf32
    default: return std::nullopt;
  }
}

bool operand_copies_enabled() {
  const char* v = std::getenv("SOLDER_OPERAND_COPIES");
  return !(v && std::string(v) == "0");
}

bool operand_copies_forced() {
  const char* v = std::getenv("SOLDER_OPERAND_COPIES");
  return v && std::string(v) == "force";
}

bool OperandCopies::pays() const { return operand_copies_forced() || copy_us + skeleton_us < mma_sync_us; }

std::optional<OperandCopies> fit_operand_copies(const ContractNode& c, const std::vector<GlobalTensor>& globals, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<OperandCopies> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (!operand_copies_enabled()) return refuse("conversion copies are off (SOLDER_OPERAND_COPIES=0)");
  const std::optional<DType> t = copy_dtype(c.type);
  if (!t) return refuse("T = " + std::string(mma_type_name(c.type)) + " (the copies store bf16, f16, e4m3, e5m2 or tf32's f32)");
  if (c.terms.size() != 1 || !c.pair_terms.empty()) return refuse("not one product term");
  // T = tf32 only for loads of bf16 or f16 (the canonicalizer's bf16 x f16: tf32 holds both exactly), so
  // that storing them in f32 changes no value: a copy of anything else would leave its rounding to tf32
  // to the tensor cores, which truncate.
  if (c.type == MmaType::tf32)
    for (const Expr* x : {&c.terms[0].a, &c.terms[0].b}) {
      auto load = x->as<LoadNode>();
      const GlobalTensor* g = load ? find(globals, load->tensor) : nullptr;
      if (!g || (g->dtype != DType::bf16 && g->dtype != DType::f16))
        return refuse("T = tf32 with operand " + print_expr(*x) + ", not a load of bf16 or f16 (exact in tf32)");
    }
  if (c.where || c.domain.guard || c.accumulate) return refuse("a where condition, a guard or accumulation");
  if (c.row_axes.size() != 1 || c.column_axes.size() != 1 || c.reduce_axes.size() != 1 || c.domain.axes.size() != 2)
    return refuse("not one row axis, one column axis and one reduced axis without a batch");
  const std::string& depth = c.reduce_axes[0].var;
  const int64_t k = c.reduce_axes[0].extent;
  const int64_t kp = (k * dtype_bytes(*t) + 15) / 16 * 16 / dtype_bytes(*t);
  auto extent_of = [&](const std::string& var) {
    for (auto& a : c.domain.axes)
      if (a.var == var) return a.extent;
    return int64_t{0};
  };
  OperandCopies out;
  const bool fp8_type = *t == DType::f8e4m3 || *t == DType::f8e5m2;
  const bool k_major_only = fp8_type || c.type == MmaType::tf32;  // fp8 and tf32 wgmma read K-major operands
  for (int which = 0; which < 2; ++which) {
    const Expr& x = which == 0 ? c.terms[0].a : c.terms[0].b;
    const std::string& side = which == 0 ? c.row_axes[0] : c.column_axes[0];
    const char* name = which == 0 ? "A" : "B";
    std::vector<std::string> order;
    std::string staged_why;
    auto staged = operand_of(x, {side}, depth, {}, globals, name, order, staged_why);
    if (staged && staged->dtype == *t && (!k_major_only || staged->k_major)) continue;  // the skeleton stages it as it is
    if (staged) {
      staged_why = staged->dtype != *t ? std::string(name) + " is " + std::string(dtype_name(staged->dtype)) + ", T is " + std::string(mma_type_name(c.type))
                                       : std::string(name) + " is " + (fp8_type ? "fp8" : "f32") + " stored [K, " + (which == 0 ? "M" : "N") +
                                             "] (" + (fp8_type ? "fp8" : "tf32") + " wgmma reads K-major operands)";
    }
    for (auto& v : vars_used(x))
      if (v != side && v != depth) return refuse("operand " + std::string(name) + " = " + print_expr(x) + " uses " + v + ", not only " + side + " and " + depth);
    OperandCopy copy;
    copy.operand = name;
    copy.copy = GlobalTensor{"", {extent_of(side), kp}, *t, GlobalRole::intermediate};
    copy.value = x;
    copy.side = side;
    copy.depth = depth;
    copy.k = k;
    for (auto& tensor : tensors_used(x))
      if (!find(globals, tensor)) return refuse("operand " + std::string(name) + " reads " + tensor + ", not a global tensor");
    copy.bytes_read = *operand_bytes_read(x, extent_of(side) * k, globals);  // a gather: the rows it reads (operand_reads.h)
    copy.why = staged_why;
    out.copies.push_back(std::move(copy));
  }
  if (out.copies.empty()) return refuse("the skeleton stages both operands as they are");
  // The contract reading the copies, with placeholder names, through the skeleton's fit and cost model.
  std::vector<GlobalTensor> with = globals;
  for (auto& copy : out.copies) {
    const std::string base = c.dst.name + "_" + (copy.operand == "A" ? "a" : "b") + "_" + std::string(dtype_name(*t));
    copy.copy.name = base;
    for (int i = 2; find(with, copy.copy.name); ++i) copy.copy.name = base + "_" + std::to_string(i);
    with.push_back(copy.copy);
  }
  const ContractNode converted = with_copies(c, out.copies);
  GemmSkeletonFit fit = fit_gemm_skeleton(converted, with);
  if (!fit.problem) return refuse("the skeleton does not take it with the copies either: " + fit.refusal);
  const GlobalTensor* dst = find(globals, c.dst.name);
  if (!dst) return refuse("its destination " + c.dst.name + " is not a global tensor");
  SkeletonChoice choice = choose_skeleton_config(*fit.problem, c.type, dst->dtype);
  if (!choice.chosen) return refuse("no tile of the skeleton: " + choice.why);
  const Rates& rates = default_hardware().rates;
  for (auto& copy : out.copies) out.copy_us += copy_cost_us(static_cast<double>(copy.bytes_read), static_cast<double>(copy.copy.bytes()), rates);
  out.skeleton_us = choice.chosen->cost.total_us;
  double flops = 2.0 * static_cast<double>(k);
  for (auto& a : c.domain.axes) flops *= static_cast<double>(a.extent);
  double tflops = rates.tensor(mma_type_name(c.type));
  if (!(tflops > 0)) tflops = fp8_type ? 1570 : 785;  // no rates: the H100's dense figures
  const GatheredGemmFit gathered = fit_gathered_gemm(c, globals);
  out.gathered = gathered.problem.has_value();
  out.element_wise = out.gathered && (gathered.problem->a_leaves.empty() || gathered.problem->b_leaves.empty());
  out.scalar = !out.gathered && c.type == MmaType::tf32;
  out.mma_sync_us = rates.launch_us + flops / (tflops * 1e6 * out.alternative_fraction());
  return out;
}

ContractNode with_copies(const ContractNode& c, const std::vector<OperandCopy>& copies) {
  ContractNode out = c;
  for (auto& copy : copies) {
    Expr load = make_load(copy.copy.name, {make_var(copy.side), make_var(copy.depth)});
    (copy.operand == "A" ? out.terms[0].a : out.terms[0].b) = load;
  }
  return out;
}

}  // namespace solder
