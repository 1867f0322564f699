#include "ir/interval.h"

#include <algorithm>
#include <limits>

namespace solder {
namespace {

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 4;

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? -kHuge : kHuge;
  return std::clamp(r, -kHuge, kHuge);
}

Interval clamp(Interval i) {
  i.lo = std::max(i.lo, -kHuge);
  i.hi = std::min(i.hi, kHuge);
  return i;
}

std::optional<Interval> intersect(Interval a, Interval b) {
  Interval r{std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
  if (r.lo > r.hi) return std::nullopt;
  return r;
}

BinaryOp negate_comparison(BinaryOp op) {
  switch (op) {
    case BinaryOp::lt: return BinaryOp::ge;
    case BinaryOp::le: return BinaryOp::gt;
    case BinaryOp::gt: return BinaryOp::le;
    case BinaryOp::ge: return BinaryOp::lt;
    case BinaryOp::eq: return BinaryOp::ne;
    default: return BinaryOp::eq;
  }
}

BinaryOp mirror_comparison(BinaryOp op) {  // a op b  <=>  b mirror(op) a
  switch (op) {
    case BinaryOp::lt: return BinaryOp::gt;
    case BinaryOp::le: return BinaryOp::ge;
    case BinaryOp::gt: return BinaryOp::lt;
    case BinaryOp::ge: return BinaryOp::le;
    default: return op;
  }
}

}  // namespace

std::optional<Interval> RangeFacts::bound(const Expr& e) const {
  std::optional<Interval> result;
  if (auto c = e.as<ConstNode>()) {
    if (!c->is_integer) return std::nullopt;
    auto v = static_cast<int64_t>(c->value);
    result = Interval{v, v};
  } else if (auto v = e.as<VarNode>()) {
    auto it = vars.find(v->name);
    if (it == vars.end()) return std::nullopt;
    result = it->second;
  } else if (auto d = e.as<DimRefNode>()) {
    auto it = dims.find(d->name);
    if (it == dims.end()) return std::nullopt;
    result = Interval{it->second, it->second};
  } else if (auto u = e.as<UnaryNode>()) {
    if (u->op != UnaryOp::neg) return std::nullopt;
    auto a = bound(u->operand);
    if (!a) return std::nullopt;
    result = Interval{-a->hi, -a->lo};
  } else if (auto l = e.as<LoadNode>()) {
    if (!integer_tensors || !integer_tensors->count(l->tensor)) return std::nullopt;
    result = Interval{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  } else if (auto s = e.as<SelectNode>()) {
    auto c = decide(s->cond);
    if (c) return (*c ? assuming(s->cond, true).bound(s->if_true) : assuming(s->cond, false).bound(s->if_false));
    auto a = assuming(s->cond, true).bound(s->if_true);
    auto b = assuming(s->cond, false).bound(s->if_false);
    if (!a || !b) return std::nullopt;
    result = Interval{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
  } else if (auto b = e.as<BinaryNode>()) {
    if (is_comparison(b->op) || is_logical(b->op)) {
      auto d = decide(e);
      result = d ? Interval{*d ? 1 : 0, *d ? 1 : 0} : Interval{0, 1};
    } else {
      auto x = bound(b->lhs), y = bound(b->rhs);
      if (!x || !y) return std::nullopt;
      switch (b->op) {
        // Bounds stay within ±kHuge (clamp below), so sums and differences cannot overflow;
        // products saturate at ±kHuge.
        case BinaryOp::add: result = Interval{x->lo + y->lo, x->hi + y->hi}; break;
        case BinaryOp::sub: result = Interval{x->lo - y->hi, x->hi - y->lo}; break;
        case BinaryOp::mul: {
          int64_t p[] = {saturating_mul(x->lo, y->lo), saturating_mul(x->lo, y->hi), saturating_mul(x->hi, y->lo),
                         saturating_mul(x->hi, y->hi)};
          result = Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
          break;
        }
        case BinaryOp::floordiv: {
          if (y->lo <= 0) return std::nullopt;  // only division by positive values
          int64_t p[] = {floor_div(x->lo, y->lo), floor_div(x->lo, y->hi), floor_div(x->hi, y->lo),
                         floor_div(x->hi, y->hi)};
          result = Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
          break;
        }
        case BinaryOp::mod: {
          if (y->lo <= 0) return std::nullopt;
          if (x->lo >= 0 && x->hi < y->lo) result = *x;
          else result = Interval{0, y->hi - 1};
          break;
        }
        case BinaryOp::max: result = Interval{std::max(x->lo, y->lo), std::max(x->hi, y->hi)}; break;
        case BinaryOp::min: result = Interval{std::min(x->lo, y->lo), std::min(x->hi, y->hi)}; break;
        default: return std::nullopt;
      }
    }
  } else {
    return std::nullopt;
  }
  result = clamp(*result);
  for (auto& [fact_expr, range] : expr_facts_) {
    if (structurally_equal(fact_expr, e)) {
      auto narrowed = intersect(*result, range);
      if (narrowed) result = narrowed;
    }
  }
  return result;
}

std::optional<bool> RangeFacts::decide(const Expr& cond) const {
  if (auto u = cond.as<UnaryNode>(); u && u->op == UnaryOp::logical_not) {
    auto d = decide(u->operand);
    if (!d) return std::nullopt;
    return !*d;
  }
  auto b = cond.as<BinaryNode>();
  if (!b) {
    if (auto c = cond.as<ConstNode>()) return c->value != 0;
    return std::nullopt;
  }
  if (b->op == BinaryOp::logical_and || b->op == BinaryOp::logical_or) {
    auto x = decide(b->lhs);
    auto y = b->op == BinaryOp::logical_and ? assuming(b->lhs, true).decide(b->rhs)
                                            : assuming(b->lhs, false).decide(b->rhs);
    if (b->op == BinaryOp::logical_and) {
      if ((x && !*x) || (y && !*y)) return false;
      if (x && y) return true;
    } else {
      if ((x && *x) || (y && *y)) return true;
      if (x && y) return false;
    }
    return std::nullopt;
  }
  if (!is_comparison(b->op)) return std::nullopt;
  // Decide on the difference lhs - rhs, which cancels shared variables (i - j vs j ranges).
  auto diff = bound(make_binary(BinaryOp::sub, b->lhs, b->rhs));
  if (!diff) return std::nullopt;
  switch (b->op) {
    case BinaryOp::lt: if (diff->hi < 0) return true; if (diff->lo >= 0) return false; break;
    case BinaryOp::le: if (diff->hi <= 0) return true; if (diff->lo > 0) return false; break;
    case BinaryOp::gt: if (diff->lo > 0) return true; if (diff->hi <= 0) return false; break;
    case BinaryOp::ge: if (diff->lo >= 0) return true; if (diff->hi < 0) return false; break;
    case BinaryOp::eq: if (diff->lo == 0 && diff->hi == 0) return true; if (diff->lo > 0 || diff->hi < 0) return false; break;
    case BinaryOp::ne: if (diff->lo > 0 || diff->hi < 0) return true; if (diff->lo == 0 && diff->hi == 0) return false; break;
    default: break;
  }
  return std::nullopt;
}

RangeFacts RangeFacts::assuming(const Expr& cond, bool holds) const {
  RangeFacts facts = *this;
  facts.learn_atom(cond, holds);
  return facts;
}

void RangeFacts::narrow(const Expr& e, Interval range) {
  if (auto v = e.as<VarNode>()) {
    auto it = vars.find(v->name);
    if (it != vars.end()) {
      auto n = intersect(it->second, range);
      // An empty intersection means the branch is dead; keep the old range (nothing to check).
      if (n) it->second = *n;
    }
    return;
  }
  expr_facts_.emplace_back(e, range);
}

void RangeFacts::learn_atom(const Expr& atom, bool holds) {
  if (auto u = atom.as<UnaryNode>(); u && u->op == UnaryOp::logical_not) {
    learn_atom(u->operand, !holds);
    return;
  }
  auto b = atom.as<BinaryNode>();
  if (!b) return;
  if ((b->op == BinaryOp::logical_and && holds) || (b->op == BinaryOp::logical_or && !holds)) {
    learn_atom(b->lhs, holds);
    learn_atom(b->rhs, holds);
    return;
  }
  if (!is_comparison(b->op)) return;
  BinaryOp op = holds ? b->op : negate_comparison(b->op);
  // Learn a bound for each side that is compared with a bounded other side.
  for (int side = 0; side < 2; ++side) {
    const Expr& subject = side == 0 ? b->lhs : b->rhs;
    const Expr& other = side == 0 ? b->rhs : b->lhs;
    BinaryOp rel = side == 0 ? op : mirror_comparison(op);  // subject rel other
    if (subject.as<ConstNode>() || subject.as<DimRefNode>()) continue;
    auto o = bound(other);
    if (!o) continue;
    Interval r{-kHuge, kHuge};
    switch (rel) {
      case BinaryOp::lt: r.hi = o->hi - 1; break;
      case BinaryOp::le: r.hi = o->hi; break;
      case BinaryOp::gt: r.lo = o->lo + 1; break;
      case BinaryOp::ge: r.lo = o->lo; break;
      case BinaryOp::eq: r = *o; break;
      default: continue;
    }
    narrow(subject, r);
  }
}

}  // namespace solder
