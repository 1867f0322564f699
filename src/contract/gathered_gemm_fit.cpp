// The implicit-GEMM fit of a whole contract (gathered_gemm_fit.h).
#include "contract/gathered_gemm_fit.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "contract/canonicalize.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// The first load `e` makes (in evaluation order), or nullptr.
const LoadNode* first_load(const Expr& e) {
  const LoadNode* found = nullptr;
  for_each_load(e, [&](const LoadNode& load) {
    if (!found) found = &load;
  });
  return found;
}

// Whether the innermost index of the first load of `e` uses `var`.
bool innermost_uses(const Expr& e, const std::string& var) {
  const LoadNode* load = first_load(e);
  if (!load || load->index.empty() || var.empty()) return false;
  return contains(vars_used(load->index.back()), var);
}

}  // namespace

GatheredGemmFit fit_gathered_gemm(const ContractNode& c, const std::vector<GlobalTensor>& globals) {
  auto refuse = [](std::string why) { return GatheredGemmFit{std::nullopt, std::move(why)}; };
  if (const char* off = std::getenv("SOLDER_GATHERED_GEMM"); off && std::string(off) == "0") return refuse("off by SOLDER_GATHERED_GEMM=0");
  if (c.type != MmaType::f16 && c.type != MmaType::bf16)
    return refuse("T is " + std::string(mma_type_name(c.type)) + " (the gathered GEMM takes bf16 or f16)");
  if (!c.pair_terms.empty()) return refuse("a paired product");
  if (c.where) return refuse("a where condition on the reduced points");
  if (c.domain.guard) return refuse("a guarded domain");
  if (c.accumulate) return refuse("it accumulates onto its destination");
  const std::vector<ContractTerm> terms = merge_k_range_terms(c.terms);
  if (terms.size() != 1) return refuse(std::to_string(terms.size()) + " product terms (one, after merging K ranges)");
  auto global = [&](const std::string& name) -> const GlobalTensor* {
    for (auto& g : globals)
      if (g.name == name) return &g;
    return nullptr;
  };
  if (!global(c.dst.name)) return refuse("the destination " + c.dst.name + " is not a global tensor");
  auto dtype_of = [&](const std::string& name) -> std::optional<DType> {
    if (auto g = global(name)) return g->dtype;
    return std::nullopt;
  };
  GatheredGemmProblem p;
  p.a = terms[0].a;
  p.b = terms[0].b;
  for (const Expr* operand : {&p.a, &p.b}) {
    auto exact = exact_mma_type(*operand, dtype_of);
    if (!exact || !(*exact == c.type || *exact == MmaType::f8e4m3 || *exact == MmaType::f8e5m2))
      return refuse("operand " + print_expr(*operand) + " is not exact in " + std::string(mma_type_name(c.type)) + " as written");
  }
  // Every tensor read is a global the contract does not write.
  std::vector<Expr> read = {p.a, p.b};
  for (const Expr* e : {&c.scale, &c.bias, &c.epilogue})
    if (*e) read.push_back(*e);
  for (auto& i : c.dst.index) read.push_back(i);
  for (auto& e : read)
    for (auto& t : tensors_used(e)) {
      if (t == c.value && !c.value.empty()) continue;
      if (!global(t)) return refuse(t + " is not a global tensor");
      if (t == c.dst.name) return refuse("it reads its destination " + t);
    }
  for (auto& axis : c.domain.axes) {
    if (contains(c.row_axes, axis.var)) {
      p.row_axes.push_back(axis);
      p.m *= axis.extent;
    } else if (contains(c.column_axes, axis.var)) {
      p.column_axes.push_back(axis);
      p.n *= axis.extent;
    } else {
      p.batch_axes.push_back(axis);
      p.batch *= axis.extent;
    }
  }
  p.reduce_axes = c.reduce_axes;
  for (auto& axis : c.reduce_axes) p.k *= axis.extent;
  if (p.row_axes.empty() || p.column_axes.empty()) return refuse("no row or no column axis (a matrix-vector product)");
  if (p.m < 16 || p.n < 16)
    return refuse(std::to_string(p.m) + " rows × " + std::to_string(p.n) + " columns: fewer than one 16 × 16 mma tile (a decode's product)");
  auto uses_only = [&](const Expr& e, const std::vector<Axis>& side) {
    for (auto& v : vars_used(e)) {
      bool known = false;
      for (const std::vector<Axis>* axes : {&side, static_cast<const std::vector<Axis>*>(&p.reduce_axes), static_cast<const std::vector<Axis>*>(&p.batch_axes)})
        for (auto& a : *axes) known |= a.var == v;
      if (!known) return false;
    }
    return true;
  };
  if (!uses_only(p.a, p.row_axes)) return refuse("operand A uses an axis that is not a row, reduced or batch axis");
  if (!uses_only(p.b, p.column_axes)) return refuse("operand B uses an axis that is not a column, reduced or batch axis");
  constexpr int64_t kIndexLimit = int64_t{1} << 30;  // the writer's flat indices are int
  if (p.m >= kIndexLimit || p.n >= kIndexLimit || p.k >= kIndexLimit || p.batch >= kIndexLimit)
    return refuse("M, N, K or the batch reaches 2^30 (the writer's flat indices are 32-bit)");
  p.a_rows_fastest = !p.row_axes.empty() && innermost_uses(p.a, p.row_axes.back().var);
  p.b_columns_fastest = !p.column_axes.empty() && innermost_uses(p.b, p.column_axes.back().var);
  return GatheredGemmFit{std::move(p), ""};
}

}  // namespace solder
