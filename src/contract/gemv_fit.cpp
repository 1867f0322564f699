#include "contract/gemv_fit.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace solder {
namespace {

constexpr int64_t kVectorElements = 8;          // one thread's outputs: 16 bytes of a 16-bit W

const GlobalTensor* global_named(const std::vector<GlobalTensor>& globals, const std::string& name) {
  for (auto& g : globals)
    if (g.name == name) return &g;
  return nullptr;
}

std::optional<int64_t> integer_constant(const Expr& e) {
  if (auto c = e.as<ConstNode>(); c && c->is_integer) return static_cast<int64_t>(c->value);
  return std::nullopt;
}

}  // namespace

bool gemv_enabled() {
  const char* v = std::getenv("SOLDER_GEMV");
  return !(v && std::string(v) == "0");
}

GemvFit fit_gemv(const ContractNode& c, const std::vector<GlobalTensor>& globals) {
  GemvFit fit;
  auto refuse = [&](std::string why) {
    fit.refusal = std::move(why);
    return fit;
  };
  if (!gemv_enabled()) return refuse("off by SOLDER_GEMV=0");
  if (c.terms.size() != 1) return refuse("not one product term");
  if (c.where || c.domain.guard || c.accumulate || !c.pair_terms.empty()) return refuse("a where, a guard, an accumulation or a paired product");
  if (c.type != MmaType::f16 && c.type != MmaType::bf16) return refuse("T is not f16 or bf16");
  const DType type = c.type == MmaType::bf16 ? DType::bf16 : DType::f16;
  auto in = [](const std::vector<std::string>& names, const std::string& v) { return std::find(names.begin(), names.end(), v) != names.end(); };
  int64_t rows = 1, columns = 1;
  for (auto& a : c.domain.axes) {
    if (in(c.row_axes, a.var)) rows *= a.extent;
    if (in(c.column_axes, a.var)) columns *= a.extent;
  }
  // The vector's side has one point; the other side's axes are the outputs.
  const bool columns_out = rows == 1;
  if (!columns_out && columns != 1) return refuse("M = " + std::to_string(rows) + " and N = " + std::to_string(columns) + ": not a matrix-vector product");
  const std::vector<std::string>& out_names = columns_out ? c.column_axes : c.row_axes;
  GemvProblem p;
  p.type = type;
  for (auto& a : c.domain.axes) (in(out_names, a.var) ? p.output_axes : p.unit_axes).push_back(a);
  for (auto& a : p.unit_axes)
    if (a.extent != 1) return refuse("a batch axis " + a.var + " of " + std::to_string(a.extent) + " points");
  if (p.output_axes.empty()) return refuse("no output axis");
  p.reduce_axes = c.reduce_axes;
  for (auto& a : p.output_axes) p.n *= a.extent;
  for (auto& a : p.reduce_axes) p.k *= a.extent;
  if (p.reduce_axes.empty()) return refuse("nothing reduced");
  p.vector = columns_out ? c.terms[0].a : c.terms[0].b;
  p.matrix = columns_out ? c.terms[0].b : c.terms[0].a;
  auto load_of = [&](const Expr& e, const GlobalTensor** g) -> const LoadNode* {
    const LoadNode* load = e.as<LoadNode>();
    if (!load) return nullptr;
    *g = global_named(globals, load->tensor);
    if (!*g || (*g)->dtype != type || (*g)->shape.size() != load->index.size()) return nullptr;
    return load;
  };
  const GlobalTensor *wg = nullptr, *vg = nullptr;
  const LoadNode* w = load_of(p.matrix, &wg);
  const LoadNode* v = load_of(p.vector, &vg);
  if (!w || !v) return refuse("an operand is not a plain load of a global of T's dtype");
  if (wg->name == c.dst.name || vg->name == c.dst.name) return refuse("an operand is the destination");
  // Row-major strides.
  auto strides_of = [](const GlobalTensor& g) {
    std::vector<int64_t> s(g.shape.size(), 1);
    for (size_t i = g.shape.size(); i-- > 1;) s[i - 1] = s[i] * g.shape[i];
    return s;
  };
  const std::vector<int64_t> ws = strides_of(*wg), vs = strides_of(*vg);
  std::map<std::string, int64_t> w_stride, v_stride;
  for (size_t i = 0; i < w->index.size(); ++i) {
    if (auto k = integer_constant(w->index[i])) {
      if (*k < 0 || *k >= wg->shape[i]) return refuse("the matrix's constant index is out of its range");
      p.matrix_base += *k * ws[i];
    } else if (auto var = w->index[i].as<VarNode>()) {
      if (w_stride.count(var->name)) return refuse("the matrix uses an axis twice");
      w_stride[var->name] = ws[i];
    } else {
      return refuse("the matrix's index is not axes and constants");
    }
  }
  for (auto& a : p.output_axes) {
    if (!w_stride.count(a.var)) return refuse("the matrix does not use output axis " + a.var);
    p.matrix_output_strides.push_back(w_stride[a.var]);
  }
  for (auto& a : p.reduce_axes) {
    if (!w_stride.count(a.var)) return refuse("the matrix does not use reduced axis " + a.var);
    p.matrix_reduce_strides.push_back(w_stride[a.var]);
  }
  if (w_stride.size() != p.output_axes.size() + p.reduce_axes.size()) return refuse("the matrix uses an axis of one point");
  // 16-byte loads of 8 contiguous outputs.
  const LoadNode& wl = *w;
  auto last = wl.index.back().as<VarNode>();
  if (!last || last->name != p.output_axes.back().var) return refuse("the matrix is not contiguous along the innermost output axis");
  if (p.output_axes.back().extent % kVectorElements != 0)
    return refuse("the innermost output axis (" + std::to_string(p.output_axes.back().extent) + ") is not a multiple of 8");
  for (size_t i = 0; i < v->index.size(); ++i) {
    if (auto k = integer_constant(v->index[i])) {
      if (*k < 0 || *k >= vg->shape[i]) return refuse("the vector's constant index is out of its range");
      p.vector_base += *k * vs[i];
    } else if (auto var = v->index[i].as<VarNode>()) {
      bool unit = false;
      for (auto& a : p.unit_axes) unit |= a.var == var->name;
      if (unit) continue;  // one point: index 0
      bool reduced = false;
      for (auto& a : p.reduce_axes) reduced |= a.var == var->name;
      if (!reduced || v_stride.count(var->name)) return refuse("the vector's index is not reduced axes, constants and axes of one point");
      v_stride[var->name] = vs[i];
    } else {
      return refuse("the vector's index is not axes and constants");
    }
  }
  for (auto& a : p.reduce_axes) p.vector_reduce_strides.push_back(v_stride.count(a.var) ? v_stride[a.var] : 0);
  fit.problem = std::move(p);
  return fit;
}

}  // namespace solder
