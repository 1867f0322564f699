#include "backend/cuda/mma_stream_expr.h"

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_expr.h"

namespace solder::mma_stream {

void product_factors(const Expr& e, std::vector<Expr>& out) {
  if (e.kind() == ExprKind::Binary && e.as<BinaryNode>()->op == BinaryOp::mul) {
    product_factors(e.as<BinaryNode>()->lhs, out);
    product_factors(e.as<BinaryNode>()->rhs, out);
  } else {
    out.push_back(e);
  }
}

Expr product_of(const std::vector<Expr>& factors) {
  if (factors.empty()) return make_const(1.0);
  Expr e = factors[0];
  for (size_t k = 1; k < factors.size(); ++k) e = make_binary(BinaryOp::mul, e, factors[k]);
  return e;
}

Expr map_children(const Expr& e, const std::function<Expr(const Expr&)>& f) {
  switch (e.kind()) {
    case ExprKind::Load: {
      std::vector<Expr> index;
      for (auto& i : e.as<LoadNode>()->index) index.push_back(f(i));
      return make_load(e.as<LoadNode>()->tensor, index);
    }
    case ExprKind::Unary: return make_unary(e.as<UnaryNode>()->op, f(e.as<UnaryNode>()->operand));
    case ExprKind::Binary: return make_binary(e.as<BinaryNode>()->op, f(e.as<BinaryNode>()->lhs), f(e.as<BinaryNode>()->rhs));
    case ExprKind::Select: return make_select(f(e.as<SelectNode>()->cond), f(e.as<SelectNode>()->if_true), f(e.as<SelectNode>()->if_false));
    case ExprKind::Cast: return make_cast(e.as<CastNode>()->dtype, f(e.as<CastNode>()->operand));
    default: return e;
  }
}

Expr rewrite_loads(const Expr& e, const std::function<Expr(const LoadNode&, const Expr&)>& fn) {
  if (e.kind() == ExprKind::Load) return fn(*e.as<LoadNode>(), e);  // indices are left as they are
  return map_children(e, [&](const Expr& c) { return rewrite_loads(c, fn); });
}

bool is_var(const Expr& e, const std::string& name) { return e.kind() == ExprKind::Var && e.as<VarNode>()->name == name; }
bool is_neg_infinity(const Expr& e) {
  if (e.kind() == ExprKind::Const) return std::isinf(e.as<ConstNode>()->value) && e.as<ConstNode>()->value < 0;
  if (e.kind() == ExprKind::Unary && e.as<UnaryNode>()->op == UnaryOp::neg && e.as<UnaryNode>()->operand.kind() == ExprKind::Const)
    return std::isinf(e.as<UnaryNode>()->operand.as<ConstNode>()->value) && e.as<UnaryNode>()->operand.as<ConstNode>()->value > 0;
  return false;
}

// ---- Interval arithmetic over expressions (for the per-tile mask decision) ------------------------

namespace {
std::optional<int64_t> integer_constant(const Expr& e) {
  if (e.kind() != ExprKind::Const || !e.as<ConstNode>()->is_integer) return std::nullopt;
  return static_cast<int64_t>(e.as<ConstNode>()->value);
}
}  // namespace

Expr fold_binary(BinaryOp op, const Expr& x, const Expr& y) {
  auto a = integer_constant(x), b = integer_constant(y);
  if (a && b) {
    switch (op) {
      case BinaryOp::add: return make_int(*a + *b);
      case BinaryOp::sub: return make_int(*a - *b);
      case BinaryOp::mul: return make_int(*a * *b);
      case BinaryOp::max: return make_int(std::max(*a, *b));
      case BinaryOp::min: return make_int(std::min(*a, *b));
      default: break;
    }
  }
  if ((op == BinaryOp::add || op == BinaryOp::sub) && b && *b == 0) return x;
  if (op == BinaryOp::add && a && *a == 0) return y;
  if ((op == BinaryOp::max || op == BinaryOp::min) && structurally_equal(x, y)) return x;
  return make_binary(op, x, y);
}

std::optional<IntervalExpr> IntervalBuilder::range(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Const:
      if (!e.as<ConstNode>()->is_integer) return std::nullopt;
      return IntervalExpr{e, e};
    case ExprKind::DimRef: {
      Expr v = make_int(dims.at(e.as<DimRefNode>()->name));
      return IntervalExpr{v, v};
    }
    case ExprKind::Load:
      if (load_range) return load_range(*e.as<LoadNode>());
      return std::nullopt;
    case ExprKind::Var: {
      auto it = vars.find(e.as<VarNode>()->name);
      if (it != vars.end()) return it->second;
      return IntervalExpr{e, e};
    }
    case ExprKind::Unary: {
      if (e.as<UnaryNode>()->op != UnaryOp::neg) return std::nullopt;
      auto a = range(e.as<UnaryNode>()->operand);
      if (!a) return std::nullopt;
      return IntervalExpr{fold_binary(BinaryOp::sub, make_int(0), a->hi), fold_binary(BinaryOp::sub, make_int(0), a->lo)};
    }
    case ExprKind::Binary: {
      auto b = e.as<BinaryNode>();
      auto x = range(b->lhs), y = range(b->rhs);
      if (!x || !y) return std::nullopt;
      switch (b->op) {
        case BinaryOp::add: return IntervalExpr{fold_binary(BinaryOp::add, x->lo, y->lo), fold_binary(BinaryOp::add, x->hi, y->hi)};
        case BinaryOp::sub: return IntervalExpr{fold_binary(BinaryOp::sub, x->lo, y->hi), fold_binary(BinaryOp::sub, x->hi, y->lo)};
        case BinaryOp::mul: {
          Expr p[4] = {fold_binary(BinaryOp::mul, x->lo, y->lo), fold_binary(BinaryOp::mul, x->lo, y->hi), fold_binary(BinaryOp::mul, x->hi, y->lo),
                       fold_binary(BinaryOp::mul, x->hi, y->hi)};
          Expr lo = p[0], hi = p[0];
          for (int k = 1; k < 4; ++k) {
            lo = fold_binary(BinaryOp::min, lo, p[k]);
            hi = fold_binary(BinaryOp::max, hi, p[k]);
          }
          return IntervalExpr{lo, hi};
        }
        case BinaryOp::floordiv: {  // monotone non-decreasing in the dividend for a positive divisor
          int64_t divisor = 0;
          if (auto c = integer_constant(b->rhs)) divisor = *c;
          else if (b->rhs.kind() == ExprKind::DimRef) divisor = dims.at(b->rhs.as<DimRefNode>()->name);
          if (divisor <= 0) return std::nullopt;
          return IntervalExpr{make_binary(BinaryOp::floordiv, x->lo, make_int(divisor)), make_binary(BinaryOp::floordiv, x->hi, make_int(divisor))};
        }
        case BinaryOp::max: return IntervalExpr{fold_binary(BinaryOp::max, x->lo, y->lo), fold_binary(BinaryOp::max, x->hi, y->hi)};
        case BinaryOp::min: return IntervalExpr{fold_binary(BinaryOp::min, x->lo, y->lo), fold_binary(BinaryOp::min, x->hi, y->hi)};
        default: return std::nullopt;
      }
    }
    default: return std::nullopt;
  }
}

// want == true: "e may be true somewhere"; false: "e may be false somewhere".
std::optional<Expr> IntervalBuilder::truth(const Expr& e, bool want) {
  if (e.kind() == ExprKind::Unary && e.as<UnaryNode>()->op == UnaryOp::logical_not) return truth(e.as<UnaryNode>()->operand, !want);
  if (e.kind() != ExprKind::Binary) return std::nullopt;
  auto b = e.as<BinaryNode>();
  if (is_logical(b->op)) {
    auto x = truth(b->lhs, want), y = truth(b->rhs, want);
    // may-true of a && b needs both to be possible (an unknown side: assume it may); may-false of
    // a || b likewise. The other two need either, so an unknown side makes the whole unknown.
    bool conjunctive = (b->op == BinaryOp::logical_and) == want;
    if (conjunctive) {
      if (!x) return y;
      if (!y) return x;
      return make_binary(BinaryOp::logical_and, *x, *y);
    }
    if (!x || !y) return std::nullopt;
    return make_binary(BinaryOp::logical_or, *x, *y);
  }
  if (!is_comparison(b->op)) return std::nullopt;
  auto x = range(b->lhs), y = range(b->rhs);
  if (!x || !y) return std::nullopt;
  BinaryOp op = b->op;
  if (!want) {  // "may be false" = "the negation may be true"
    switch (op) {
      case BinaryOp::lt: op = BinaryOp::ge; break;
      case BinaryOp::le: op = BinaryOp::gt; break;
      case BinaryOp::gt: op = BinaryOp::le; break;
      case BinaryOp::ge: op = BinaryOp::lt; break;
      case BinaryOp::eq: op = BinaryOp::ne; break;
      case BinaryOp::ne: op = BinaryOp::eq; break;
      default: break;
    }
  }
  switch (op) {
    case BinaryOp::lt: return make_binary(BinaryOp::lt, x->lo, y->hi);
    case BinaryOp::le: return make_binary(BinaryOp::le, x->lo, y->hi);
    case BinaryOp::gt: return make_binary(BinaryOp::gt, x->hi, y->lo);
    case BinaryOp::ge: return make_binary(BinaryOp::ge, x->hi, y->lo);
    case BinaryOp::eq: return make_binary(BinaryOp::logical_and, make_binary(BinaryOp::le, x->lo, y->hi), make_binary(BinaryOp::le, y->lo, x->hi));
    case BinaryOp::ne: {
      // false only when both sides are the same single value
      Expr same = make_binary(BinaryOp::logical_and, make_binary(BinaryOp::logical_and, make_binary(BinaryOp::eq, x->lo, x->hi), make_binary(BinaryOp::eq, y->lo, y->hi)),
                              make_binary(BinaryOp::eq, x->lo, y->lo));
      return make_unary(UnaryOp::logical_not, same);
    }
    default: return std::nullopt;
  }
}

}  // namespace solder::mma_stream
