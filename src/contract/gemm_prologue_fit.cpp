#include "contract/gemm_prologue_fit.h"

#include <algorithm>
#include <map>

#include "ir/expr_visitor.h"
#include "lower/lower_prologue.h"

namespace solder {

GemmPrologueFit fit_gemm_prologue(const Kernel& kernel, const std::vector<GlobalTensor>& globals) {
  GemmPrologueFit fit;
  auto refuse = [&](std::string why) {
    fit.refusal = std::move(why);
    return fit;
  };
  GemmPrologueProblem pp;
  if (!is_prologue_contraction(kernel, &pp.sides)) return refuse("its body is not side reductions and one contract");
  const ContractNode& c = *kernel.body.back().as<ContractNode>();
  pp.contract = &c;
  if (c.terms.size() != 1 || c.where || c.domain.guard || c.accumulate || c.bias || c.epilogue)
    return refuse("not one unconditional product term with a scale only");
  if (c.type == MmaType::f32 || c.type == MmaType::tf32) return refuse("T = " + std::string(mma_type_name(c.type)));
  if (c.reduce_axes.size() != 1 || c.row_axes.size() != 1 || c.column_axes.empty()) return refuse("not one row axis and one K");
  if (c.domain.axes.size() != 1 + c.column_axes.size()) return refuse("a batch axis (the prologue path has none)");
  std::set<std::string> side_buffers;
  for (auto* s : pp.sides) {
    if (s->op != ReduceOp::sum && s->op != ReduceOp::max && s->op != ReduceOp::min) return refuse("a side reduction that is not a sum, max or min");
    side_buffers.insert(s->dst.name);
  }
  const std::string row = c.row_axes[0], k = c.reduce_axes[0].var;
  std::string source;
  for_each_load(c.terms[0].a, [&](const LoadNode& load) {
    if (load.index.size() == 2 && load.index[0].as<VarNode>() && load.index[1].as<VarNode>() &&
        load.index[0].as<VarNode>()->name == row && load.index[1].as<VarNode>()->name == k)
      source = load.tensor;
    if (side_buffers.count(load.tensor)) pp.pre_sweep = true;
  });
  if (source.empty()) return refuse("operand A reads no tensor at [" + row + ", " + k + "]");
  GemmSkeletonProblem& p = pp.problem;
  p.reduce_axis = k;
  p.k = c.reduce_axes[0].extent;
  std::map<std::string, int64_t> extent;
  for (auto& a : c.domain.axes) extent[a.var] = a.extent;
  std::string why;
  auto a = operand_of(make_load(source, {make_var(row), make_var(k)}), c.row_axes, k, {}, globals, "A", p.row_axes, why);
  if (!a) return refuse(why);
  auto b = operand_of(c.terms[0].b, c.column_axes, k, {}, globals, "B", p.column_axes, why);
  if (!b) return refuse(why);
  for (auto& v : p.row_axes) {
    p.row_extents.push_back(extent.at(v));
    p.m *= extent.at(v);
  }
  for (auto& v : p.column_axes) {
    p.column_extents.push_back(extent.at(v));
    p.n *= extent.at(v);
  }
  if (a->dtype != DType::bf16 && a->dtype != DType::f16)
    return refuse("the staged " + source + " is " + std::string(dtype_name(a->dtype)) + " (the prologue stages bf16 or f16)");
  const bool fp8_t = c.type == MmaType::f8e4m3 || c.type == MmaType::f8e5m2;
  const bool b_fp8 = b->dtype == DType::f8e4m3 || b->dtype == DType::f8e5m2;
  if (fp8_t ? !b_fp8 : !((c.type == MmaType::bf16 && b->dtype == DType::bf16) || (c.type == MmaType::f16 && b->dtype == DType::f16)))
    return refuse("B is " + std::string(dtype_name(b->dtype)) + ", not exact in T = " + std::string(mma_type_name(c.type)));
  if (fp8_t && !b->k_major) return refuse("the fp8 B operand is not K-major (fp8 wgmma reads K-major operands)");
  if (a->rows != p.m || b->rows != p.n || a->k != p.k || b->k != p.k) return refuse("the operands' shapes are not the contract's M, N, K");
  if (p.m > (1LL << 31) - 1 || p.n > (1LL << 31) - 1) return refuse("M or N over 2^31");
  p.a = *a;
  p.b = *b;
  fit.problem = pp;
  return fit;
}

}  // namespace solder
