#include "backend/cuda/mma_stream_expr.h"

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

Expr substitute_vars(const Expr& e, const std::map<std::string, Expr>& at) {
  if (e.kind() == ExprKind::Var) {
    auto it = at.find(e.as<VarNode>()->name);
    return it == at.end() ? e : it->second;
  }
  return map_children(e, [&](const Expr& c) { return substitute_vars(c, at); });
}

bool is_var(const Expr& e, const std::string& name) { return e.kind() == ExprKind::Var && e.as<VarNode>()->name == name; }
bool is_neg_infinity(const Expr& e) {
  if (e.kind() == ExprKind::Const) return std::isinf(e.as<ConstNode>()->value) && e.as<ConstNode>()->value < 0;
  if (e.kind() == ExprKind::Unary && e.as<UnaryNode>()->op == UnaryOp::neg && e.as<UnaryNode>()->operand.kind() == ExprKind::Const)
    return std::isinf(e.as<UnaryNode>()->operand.as<ConstNode>()->value) && e.as<UnaryNode>()->operand.as<ConstNode>()->value > 0;
  return false;
}

// ---- Interval arithmetic, printed as C++ (for the per-tile mask decision) -------------------------

std::optional<IntervalText> IntervalPrinter::range(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Const: {
      auto c = e.as<ConstNode>();
      if (!c->is_integer) return std::nullopt;
      std::string v = "(" + std::to_string(static_cast<long long>(c->value)) + "LL)";
      return IntervalText{v, v};
    }
    case ExprKind::DimRef: {
      std::string v = "(" + std::to_string(dims.at(e.as<DimRefNode>()->name)) + "LL)";
      return IntervalText{v, v};
    }
    case ExprKind::Load:
      if (load_range) return load_range(*e.as<LoadNode>());
      return std::nullopt;
    case ExprKind::Var: {
      auto it = vars.find(e.as<VarNode>()->name);
      if (it != vars.end()) return it->second;
      std::string v = "(" + cuda_identifier(e.as<VarNode>()->name) + ")";
      return IntervalText{v, v};
    }
    case ExprKind::Unary: {
      if (e.as<UnaryNode>()->op != UnaryOp::neg) return std::nullopt;
      auto a = range(e.as<UnaryNode>()->operand);
      if (!a) return std::nullopt;
      return IntervalText{"(-" + a->hi + ")", "(-" + a->lo + ")"};
    }
    case ExprKind::Binary: {
      auto b = e.as<BinaryNode>();
      auto x = range(b->lhs), y = range(b->rhs);
      if (!x || !y) return std::nullopt;
      switch (b->op) {
        case BinaryOp::add: return IntervalText{"(" + x->lo + " + " + y->lo + ")", "(" + x->hi + " + " + y->hi + ")"};
        case BinaryOp::sub: return IntervalText{"(" + x->lo + " - " + y->hi + ")", "(" + x->hi + " - " + y->lo + ")"};
        case BinaryOp::mul: {
          std::string p[4] = {x->lo + " * " + y->lo, x->lo + " * " + y->hi, x->hi + " * " + y->lo, x->hi + " * " + y->hi};
          std::string lo = p[0], hi = p[0];
          for (int k = 1; k < 4; ++k) {
            lo = "solder::min_int(" + lo + ", " + p[k] + ")";
            hi = "solder::max_int(" + hi + ", " + p[k] + ")";
          }
          return IntervalText{lo, hi};
        }
        case BinaryOp::floordiv:  // monotone in the dividend for a positive constant divisor
          if (b->rhs.kind() != ExprKind::Const && b->rhs.kind() != ExprKind::DimRef) return std::nullopt;
          return IntervalText{"solder::floordiv(" + x->lo + ", " + y->lo + ")", "solder::floordiv(" + x->hi + ", " + y->lo + ")"};
        case BinaryOp::max: return IntervalText{"solder::max_int(" + x->lo + ", " + y->lo + ")", "solder::max_int(" + x->hi + ", " + y->hi + ")"};
        case BinaryOp::min: return IntervalText{"solder::min_int(" + x->lo + ", " + y->lo + ")", "solder::min_int(" + x->hi + ", " + y->hi + ")"};
        default: return std::nullopt;
      }
    }
    default: return std::nullopt;
  }
}

// want == true: C++ for "e may be true somewhere"; false: "e may be false somewhere".
std::optional<std::string> IntervalPrinter::truth(const Expr& e, bool want) {
  if (e.kind() == ExprKind::Unary && e.as<UnaryNode>()->op == UnaryOp::logical_not) return truth(e.as<UnaryNode>()->operand, !want);
  if (e.kind() != ExprKind::Binary) return std::nullopt;
  auto b = e.as<BinaryNode>();
  if (is_logical(b->op)) {
    auto x = truth(b->lhs, want), y = truth(b->rhs, want);
    bool conjunctive = (b->op == BinaryOp::logical_and) == want;  // may-true of a && b needs both
    if (conjunctive) {
      if (!x && !y) return std::nullopt;
      return "(" + x.value_or("true") + " && " + y.value_or("true") + ")";
    }
    if (!x || !y) return std::nullopt;
    return "(" + *x + " || " + *y + ")";
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
    case BinaryOp::lt: return "(" + x->lo + " < " + y->hi + ")";
    case BinaryOp::le: return "(" + x->lo + " <= " + y->hi + ")";
    case BinaryOp::gt: return "(" + x->hi + " > " + y->lo + ")";
    case BinaryOp::ge: return "(" + x->hi + " >= " + y->lo + ")";
    case BinaryOp::eq: return "(" + x->lo + " <= " + y->hi + " && " + y->lo + " <= " + x->hi + ")";
    case BinaryOp::ne: return "!(" + x->lo + " == " + x->hi + " && " + y->lo + " == " + y->hi + " && " + x->lo + " == " + y->lo + ")";
    default: return std::nullopt;
  }
}

}  // namespace solder::mma_stream
