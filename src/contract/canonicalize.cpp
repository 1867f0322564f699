#include "contract/canonicalize.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {
namespace {

struct Term {
  Expr value;
  double sign = 1;
};

// The summand as a sum of terms: + and - and negation flattened.
void split_terms(const Expr& e, double sign, std::vector<Term>& out) {
  if (auto b = e.as<BinaryNode>(); b && (b->op == BinaryOp::add || b->op == BinaryOp::sub)) {
    split_terms(b->lhs, sign, out);
    split_terms(b->rhs, b->op == BinaryOp::add ? sign : -sign, out);
    return;
  }
  if (auto u = e.as<UnaryNode>(); u && u->op == UnaryOp::neg) return split_terms(u->operand, -sign, out);
  out.push_back({e, sign});
}

// A term as coefficient × Π factors: × and / flattened, constants collected; a divisor that is not
// a constant becomes the factor 1 / divisor.
void split_factors(const Expr& e, double& coefficient, std::vector<Expr>& factors, bool inverse = false) {
  if (auto b = e.as<BinaryNode>()) {
    if (b->op == BinaryOp::mul) {
      split_factors(b->lhs, coefficient, factors, inverse);
      split_factors(b->rhs, coefficient, factors, inverse);
      return;
    }
    if (b->op == BinaryOp::div) {
      split_factors(b->lhs, coefficient, factors, inverse);
      split_factors(b->rhs, coefficient, factors, !inverse);
      return;
    }
  }
  if (auto u = e.as<UnaryNode>(); u && u->op == UnaryOp::neg) {
    coefficient = -coefficient;
    return split_factors(u->operand, coefficient, factors, inverse);
  }
  if (auto c = e.as<ConstNode>(); c && c->value != 0 && std::isfinite(c->value)) {
    coefficient = inverse ? coefficient / c->value : coefficient * c->value;
    return;
  }
  factors.push_back(inverse ? make_binary(BinaryOp::div, make_const(1.0), e) : e);
}

Expr product_of(const std::vector<Expr>& factors) {
  Expr p;
  for (auto& f : factors) p = p ? p * f : f;
  return p;
}

std::set<std::string> vars_of(const Expr& e) {
  auto v = vars_used(e);
  return {v.begin(), v.end()};
}

bool meets(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](auto& x) { return b.count(x) > 0; });
}

bool is_fp8(MmaType t) { return t == MmaType::f8e4m3 || t == MmaType::f8e5m2; }

// A concatenation along K: select(c, P, Q) whose condition uses a reduced axis and no kept axis
// (only K and the loops outside the statement), with neither branch the constant 0 (that is a
// zero-fill, not a concatenation).
bool is_k_range_select(const Expr& e, const std::set<std::string>& reduced, const std::set<std::string>& kept) {
  auto s = e.as<SelectNode>();
  if (!s || is_constant_zero(s->if_true) || is_constant_zero(s->if_false)) return false;
  auto vars = vars_of(s->cond);
  return meets(vars, reduced) && !meets(vars, kept) && tensors_used(s->cond).empty();
}

// The operand factors of one product term with every concatenation along K split into its K
// ranges: select(c, P, Q) becomes two variants, one with select(c, P, 0), one with select(c, 0, Q);
// nested concatenations split again. Each variant is a product term of its own, zero outside its
// range; together they accumulate into one acc. At most kMaxRanges variants.
constexpr size_t kMaxRanges = 8;
void split_k_ranges(const Expr& e, const std::set<std::string>& reduced, const std::set<std::string>& kept, std::vector<Expr>& out) {
  if (!is_k_range_select(e, reduced, kept)) {
    out.push_back(e);
    return;
  }
  auto s = e.as<SelectNode>();
  std::vector<Expr> first, second;
  split_k_ranges(s->if_true, reduced, kept, first);
  split_k_ranges(s->if_false, reduced, kept, second);
  for (auto& p : first) out.push_back(make_select(s->cond, p, make_const(0.0)));
  for (auto& q : second) out.push_back(make_select(s->cond, make_const(0.0), q));
}

}  // namespace

bool is_constant_zero(const Expr& e) {
  auto c = e.as<ConstNode>();
  return c && c->value == 0;
}

std::optional<Expr> merge_k_ranges(const Expr& x, const Expr& y) {
  if (is_constant_zero(x)) return y;
  if (is_constant_zero(y)) return x;
  auto a = x.as<SelectNode>(), b = y.as<SelectNode>();
  if (!a || !b || !structurally_equal(a->cond, b->cond)) return std::nullopt;
  auto t = merge_k_ranges(a->if_true, b->if_true);
  auto f = t ? merge_k_ranges(a->if_false, b->if_false) : std::nullopt;
  if (!f) return std::nullopt;
  return make_select(a->cond, *t, *f);
}

std::vector<ContractTerm> merge_k_range_terms(const std::vector<ContractTerm>& terms) {
  std::vector<ContractTerm> out;
  for (auto& t : terms) {
    bool merged = false;
    for (auto& o : out) {
      if (structurally_equal(o.b, t.b)) {
        if (auto a = merge_k_ranges(o.a, t.a)) {
          o.a = *a;
          merged = true;
          break;
        }
      }
      if (structurally_equal(o.a, t.a)) {
        if (auto b = merge_k_ranges(o.b, t.b)) {
          o.b = *b;
          merged = true;
          break;
        }
      }
    }
    if (!merged) out.push_back(t);
  }
  return out;
}

std::optional<MmaType> exact_mma_type(const Expr& e, const DTypeOf& dtype_of) {
  if (auto load = e.as<LoadNode>()) {
    auto d = dtype_of(load->tensor);
    return d ? mma_type_of(*d) : std::nullopt;
  }
  if (auto cast = e.as<CastNode>()) return mma_type_of(cast->dtype);
  if (auto s = e.as<SelectNode>()) {
    // A zero-filled branch (a K range, padding) is exact in every type: the other branch decides.
    if (is_constant_zero(s->if_false)) return exact_mma_type(s->if_true, dtype_of);
    if (is_constant_zero(s->if_true)) return exact_mma_type(s->if_false, dtype_of);
    auto a = exact_mma_type(s->if_true, dtype_of), b = exact_mma_type(s->if_false, dtype_of);
    if (a && b && *a == *b) return a;
    return std::nullopt;
  }
  if (auto u = e.as<UnaryNode>(); u && u->op == UnaryOp::neg) return exact_mma_type(u->operand, dtype_of);
  return std::nullopt;
}

namespace {

std::optional<MmaType> exact_type(const Expr& e, const DTypeOf& dtype_of) { return exact_mma_type(e, dtype_of); }

// The narrowest type holding the values of both narrow types.
MmaType common_type(MmaType a, MmaType b) {
  if (a == b) return a;
  if (is_fp8(a) && !is_fp8(b)) return b;
  if (is_fp8(b) && !is_fp8(a)) return a;
  if (is_fp8(a) && is_fp8(b)) return MmaType::f16;
  return MmaType::tf32;  // bf16 and f16: both exact in tf32
}

// The 16-bit type of the tensors `e` reads: bf16 or f16 when all its 16-bit loads agree.
std::optional<MmaType> sixteen_bit_type_read(const Expr& e, const DTypeOf& dtype_of) {
  std::set<DType> seen;
  for_each_load(e, [&](const LoadNode& load) {
    if (auto d = dtype_of(load.tensor); d && (*d == DType::bf16 || *d == DType::f16)) seen.insert(*d);
  });
  if (seen.size() != 1) return std::nullopt;
  return mma_type_of(*seen.begin());
}

// Two sides of the operand factors: A (rows) and B (columns), batch axes used by both.
struct Sides {
  std::vector<Expr> a, b;
  std::set<std::string> rows, columns, batch;
};

// The split of `factors` (each with its kept axes) into two sides with the fewest batch axes and
// the most non-empty sides; A is the side holding the first axis of `order` that is not a batch axis.
std::optional<Sides> split_sides(const std::vector<Expr>& factors, const std::vector<std::set<std::string>>& kept,
                                 const std::vector<std::string>& order) {
  const size_t n = factors.size();
  if (n < 2 || n > 12) return std::nullopt;
  std::optional<Sides> best;
  auto score = [](const Sides& s) { return std::pair<int, int>(static_cast<int>(s.batch.size()), -(!s.rows.empty() + !s.columns.empty())); };
  for (uint32_t mask = 1; mask + 1 < (1u << n); ++mask) {
    if (mask & 1u) continue;  // each split once: factor 0 always on the second side
    Sides s;
    std::set<std::string> first, second;
    for (size_t i = 0; i < n; ++i) {
      bool on_first = mask & (1u << i);
      (on_first ? s.a : s.b).push_back(factors[i]);
      (on_first ? first : second).insert(kept[i].begin(), kept[i].end());
    }
    for (auto& v : first) (second.count(v) ? s.batch : s.rows).insert(v);
    for (auto& v : second) if (!first.count(v)) s.columns.insert(v);
    if (s.rows.empty() && s.columns.empty()) continue;
    if (!best || score(s) < score(*best)) best = s;
  }
  if (!best) return std::nullopt;
  // A is the side of the first non-batch axis of the destination's order.
  Sides sides = std::move(*best);
  for (auto& v : order) {
    if (sides.batch.count(v)) continue;
    if (sides.columns.count(v)) return Sides{sides.b, sides.a, sides.columns, sides.rows, sides.batch};
    if (sides.rows.count(v)) break;
  }
  return sides;
}

std::string joined(const std::set<std::string>& names) {
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

}  // namespace

bool f32_contract_three_tf32() {
  const char* v = std::getenv("SOLDER_F32_CONTRACT");
  if (!v || !*v) return kF32ContractThreeTf32Default;
  return std::string(v) != "f32";
}

ContractPolicy contract_policy_for(const std::vector<std::pair<std::string, DType>>& outputs,
                                   const std::vector<std::pair<std::string, DType>>& inputs) {
  ContractPolicy policy;
  std::string wide, narrow;
  for (auto& [name, dtype] : outputs)
    if (dtype == DType::f32) wide += (wide.empty() ? "" : ", ") + name;
  for (auto& [name, dtype] : inputs)
    if (dtype == DType::f8e4m3 || dtype == DType::f8e5m2) narrow += (narrow.empty() ? "" : ", ") + name;
  policy.sixteen_bit = !outputs.empty() && wide.empty();
  policy.fp8 = policy.sixteen_bit && !narrow.empty();
  if (policy.fp8) policy.why = "every output is 16-bit or narrower and input " + narrow + " is fp8 (tolerance class 5e-2)";
  else if (policy.sixteen_bit) policy.why = "every output is 16-bit or narrower (tolerance class 1e-2)";
  else policy.why = wide.empty() ? "the program has no output" : "output " + wide + " is f32 (tolerance class 1e-5)";
  return policy;
}

ContractPolicy contract_policy_of(const KernelProgram& program) {
  std::vector<std::pair<std::string, DType>> outputs, inputs;
  for (auto& g : program.globals) {
    if (g.role == GlobalRole::output) outputs.emplace_back(g.name, g.dtype);
    if (g.role == GlobalRole::input) inputs.emplace_back(g.name, g.dtype);
  }
  return contract_policy_for(outputs, inputs);
}

ContractPolicy contract_policy_of(const BoundProgram& program) {
  std::vector<std::pair<std::string, DType>> outputs, inputs;
  for (const TensorInfo* t : program.outputs()) outputs.emplace_back(t->name, t->dtype);
  for (auto& t : program.tensors)
    if (t.role == TensorRole::input) inputs.emplace_back(t.name, t.dtype);
  return contract_policy_for(outputs, inputs);
}

Canonicalization canonicalize_contraction(const ReduceNode& reduce, const DTypeOf& dtype_of, const ContractPolicy& policy) {
  Canonicalization result;
  auto refuse = [&](std::string why) {
    result.refusal = std::move(why);
    return result;
  };
  if (reduce.op != ReduceOp::sum) return refuse("not a sum");
  std::set<std::string> reduced, kept_axes;
  int64_t count = 1;
  for (auto& a : reduce.reduce_axes) {
    reduced.insert(a.var);
    count *= a.extent;
  }
  for (auto& a : reduce.domain.axes) kept_axes.insert(a.var);
  // The order of the kept axes in the destination (rows come first).
  std::vector<std::string> order;
  for (auto& i : reduce.dst.index)
    for (auto& v : vars_used(i)) if (kept_axes.count(v)) order.push_back(v);
  for (auto& a : reduce.domain.axes) order.push_back(a.var);

  std::vector<Term> terms;
  split_terms(reduce.value, 1, terms);
  ContractNode node;
  std::vector<Expr> biases;
  std::optional<Expr> common_scale;
  bool first_term = true;
  std::vector<std::pair<Expr, Expr>> operands;  // per product term: A, B
  struct TermScale {
    std::vector<Expr> factors;  // the term's k-free factors (its coefficient first, as a constant)
    Expr product;
  };
  std::vector<TermScale> scales;  // per product term
  bool scales_agree = true;
  std::vector<std::string> notes;
  for (auto& term : terms) {
    if (!meets(vars_of(term.value), reduced)) {
      biases.push_back(term.sign < 0 ? -term.value : term.value);
      continue;
    }
    double coefficient = term.sign;
    std::vector<Expr> factors;
    split_factors(term.value, coefficient, factors);
    std::vector<Expr> scale, k_only, operand;
    std::vector<std::set<std::string>> operand_kept;
    for (auto& f : factors) {
      auto vars = vars_of(f);
      bool uses_k = meets(vars, reduced);
      std::set<std::string> kept;
      for (auto& v : vars) if (kept_axes.count(v)) kept.insert(v);
      if (!uses_k) scale.push_back(f);
      else if (kept.empty()) k_only.push_back(f);
      else {
        operand.push_back(f);
        operand_kept.push_back(kept);
      }
    }
    Sides sides;
    if (operand.size() == 1 && !k_only.empty()) {
      // x[m, k] · w[k]: a matrix-vector product, w the B operand with no columns.
      sides.a = operand;
      sides.rows = operand_kept[0];
      sides.b = k_only;
      k_only.clear();
    } else if (operand.size() < 2) {
      return refuse(operand.empty() ? "no factor uses both a reduced and a kept axis (a dot product without rows or columns)"
                                    : "the term " + print_expr(term.value) + " has one operand (a row reduction, not a matrix product)");
    } else {
      auto split = split_sides(operand, operand_kept, order);
      if (!split) return refuse("the factors of " + print_expr(term.value) + " do not split into two operands");
      sides = *split;
    }
    if (!k_only.empty()) {
      notes.push_back("k-only factor " + print_expr(product_of(k_only)) + " folded into operand A");
      sides.a.insert(sides.a.end(), k_only.begin(), k_only.end());
    }
    if (coefficient != 1) scale.insert(scale.begin(), make_const(coefficient));
    Expr term_scale = product_of(scale);
    if (first_term) {
      node.row_axes.assign(sides.rows.begin(), sides.rows.end());
      node.column_axes.assign(sides.columns.begin(), sides.columns.end());
      common_scale = term_scale;
      first_term = false;
    } else {
      std::set<std::string> rows(node.row_axes.begin(), node.row_axes.end()), columns(node.column_axes.begin(), node.column_axes.end());
      if (rows != sides.rows || columns != sides.columns)
        return refuse("the product terms run along different rows or columns (" + joined(rows) + " / " + joined(columns) + " and " +
                      joined(sides.rows) + " / " + joined(sides.columns) + ")");
      bool same = (!term_scale && !*common_scale) || (term_scale && *common_scale && structurally_equal(term_scale, *common_scale));
      if (!same) scales_agree = false;
    }
    // Concatenations along K become K ranges: one product term per range, each zero outside it.
    std::vector<std::vector<Expr>> variants[2];
    bool ranges = false;
    for (int side = 0; side < 2; ++side) {
      variants[side].push_back({});
      for (auto& f : side ? sides.b : sides.a) {
        std::vector<Expr> pieces;
        split_k_ranges(f, reduced, kept_axes, pieces);
        if (pieces.size() > 1) {
          ranges = true;
          notes.push_back("concatenated K: operand factor " + print_expr(f) + " split into " + std::to_string(pieces.size()) +
                          " K ranges (one product term each, zero outside its range, one acc)");
        }
        std::vector<std::vector<Expr>> next;
        for (auto& v : variants[side])
          for (auto& p : pieces) {
            next.push_back(v);
            next.back().push_back(p);
          }
        variants[side] = std::move(next);
      }
    }
    if (ranges && variants[0].size() * variants[1].size() > kMaxRanges)
      return refuse("the concatenations along K of " + print_expr(term.value) + " make more than " + std::to_string(kMaxRanges) + " K ranges");
    for (auto& a : variants[0])
      for (auto& b : variants[1]) {
        operands.emplace_back(product_of(a), product_of(b));
        scales.push_back({scale, term_scale});
      }
  }
  if (operands.empty()) return refuse("no term uses the reduced axes");
  if (!scales_agree) {
    // Terms with different scales: each term's k-free factors go into its operands (a factor of the
    // columns into B, any other into A), and the contract has no common scale.
    std::set<std::string> columns(node.column_axes.begin(), node.column_axes.end()), rows(node.row_axes.begin(), node.row_axes.end());
    for (size_t t = 0; t < operands.size(); ++t) {
      for (auto& f : scales[t].factors) {
        auto vars = vars_of(f);
        bool column = meets(vars, columns), row = meets(vars, rows);
        if (column && row) return refuse("the product terms have different scales, and " + print_expr(f) + " uses both rows and columns");
        Expr& side = column ? operands[t].second : operands[t].first;
        side = side * f;
      }
    }
    notes.push_back("the product terms have different scales: each term's scale is folded into its operands");
    common_scale = Expr();
  }
  if (!biases.empty() && reduce.where) return refuse("a term without the reduced axes under a where condition (its count varies)");

  // The MMA type: exact operands keep their type; computed ones follow the policy.
  std::optional<MmaType> type;
  bool computed = false, unrounded = false;
  for (auto& [a, b] : operands) {
    for (int side = 0; side < 2; ++side) {
      const Expr& x = side ? b : a;
      const Expr& other = side ? a : b;
      auto exact = exact_type(x, dtype_of);
      MmaType t;
      if (exact) {
        t = *exact;
      } else {
        computed = true;
        std::optional<MmaType> rounded;
        bool to_partner_fp8 = false;
        if (policy.sixteen_bit) {
          auto partner = exact_type(other, dtype_of);
          rounded = partner && !is_fp8(*partner) ? partner : sixteen_bit_type_read(x, dtype_of);
          // the fp8 class: a computed operand beside an fp8 one (attention's P beside V) takes its type
          if (!rounded && policy.fp8 && partner && is_fp8(*partner)) {
            rounded = partner;
            to_partner_fp8 = true;
          }
        }
        if (!rounded) {
          unrounded = true;
          continue;
        }
        t = *rounded;
        notes.push_back(std::string("operand ") + (side ? "B" : "A") + " = " + print_expr(x) + " is computed: rounded to " +
                        std::string(mma_type_name(t)) +
                        (to_partner_fp8 ? ", the fp8 type of operand " + std::string(side ? "A" : "B") + " (" : " (") + policy.why + ")");
      }
      type = type ? common_type(*type, t) : t;
    }
  }
  if (unrounded && !type && !policy.sixteen_bit) {
    // Every operand f32 (none exact in a narrower type), the f32 class: 3xTF32 where the product has
    // rows and columns enough for a wgmma tile, else CUDA cores.
    std::map<std::string, int64_t> extent;
    for (auto& a : reduce.domain.axes) extent[a.var] = a.extent;
    int64_t m = 1, n = 1;
    for (auto& r : node.row_axes) m *= extent.count(r) ? extent[r] : 1;
    for (auto& c : node.column_axes) n *= extent.count(c) ? extent[c] : 1;
    std::string why_not;
    if (!f32_contract_three_tf32()) why_not = "SOLDER_F32_CONTRACT=f32";
    else if (m < kThreeTf32MinSide || n < kThreeTf32MinSide)
      why_not = std::to_string(m) + " rows and " + std::to_string(n) + " columns (3xTF32 needs " + std::to_string(kThreeTf32MinSide) + " of each)";
    if (why_not.empty()) {
      node.type = MmaType::tf32x3;
      notes.push_back("T = 3xtf32: 3xTF32 because all operands are f32 (" + policy.why + "): each split into tf32 hi and lo parts, three tf32 products");
    } else {
      node.type = MmaType::f32;
      notes.push_back("T = f32, no operand rounding (all operands are f32, " + policy.why + "; not 3xTF32: " + why_not + ")");
    }
  } else if (unrounded || !type) {
    node.type = MmaType::f32;
    notes.push_back("T = f32, no operand rounding (" + std::string(computed ? "a computed operand, " : "an f32 operand, ") + policy.why + ")");
  } else {
    node.type = *type;
    notes.push_back("T = " + std::string(mma_type_name(*type)) + (computed ? "" : " (every operand is exact in it)"));
  }
  for (auto& [a, b] : operands) node.terms.push_back({a, b});
  if (common_scale && *common_scale) {
    node.scale = *common_scale;
    notes.push_back("scale " + print_expr(node.scale) + " applied after the dot product");
  }
  if (!biases.empty()) {
    Expr sum;
    for (auto& b : biases) sum = sum ? sum + b : b;
    node.bias = count == 1 ? sum : make_const(static_cast<double>(count)) * sum;
    notes.push_back("bias " + print_expr(node.bias) + " (the k-free terms, " + std::to_string(count) + " times)");
  }
  node.domain = reduce.domain;
  node.reduce_axes = reduce.reduce_axes;
  node.dst = reduce.dst;
  node.where = reduce.where;
  node.accumulate = reduce.accumulate;
  node.comment = reduce.comment;
  result.contract = std::move(node);
  result.notes = std::move(notes);
  return result;
}

}  // namespace solder
