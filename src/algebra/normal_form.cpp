#include "algebra/normal_form.h"

#include <cmath>

#include "ir/expr_eval.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {

void SumForm::add(const Expr& atom, double coefficient) {
  if (coefficient == 0) return;
  for (auto it = terms.begin(); it != terms.end(); ++it) {
    if (structurally_equal(it->first, atom)) {
      it->second += coefficient;
      if (it->second == 0) terms.erase(it);
      return;
    }
  }
  terms.emplace_back(atom, coefficient);
}

void ProductForm::multiply(const Expr& atom, double power) {
  if (power == 0) return;
  for (auto it = powers.begin(); it != powers.end(); ++it) {
    if (structurally_equal(it->first, atom)) {
      it->second += power;
      if (it->second == 0) powers.erase(it);
      return;
    }
  }
  powers.emplace_back(atom, power);
}

namespace {

const ConstNode* as_const(const Expr& e) { return e.as<ConstNode>(); }

void collect_sum(const Expr& e, double scale, SumForm& out) {
  if (auto c = as_const(e)) { out.constant += scale * c->value; return; }
  if (auto u = e.as<UnaryNode>(); u && u->op == UnaryOp::neg) { collect_sum(u->operand, -scale, out); return; }
  if (auto b = e.as<BinaryNode>()) {
    switch (b->op) {
      case BinaryOp::add: collect_sum(b->lhs, scale, out); collect_sum(b->rhs, scale, out); return;
      case BinaryOp::sub: collect_sum(b->lhs, scale, out); collect_sum(b->rhs, -scale, out); return;
      case BinaryOp::mul:
        if (auto c = as_const(b->lhs)) { collect_sum(b->rhs, scale * c->value, out); return; }
        if (auto c = as_const(b->rhs)) { collect_sum(b->lhs, scale * c->value, out); return; }
        break;
      case BinaryOp::div:
        if (auto c = as_const(b->rhs); c && c->value != 0) { collect_sum(b->lhs, scale / c->value, out); return; }
        break;
      default: break;
    }
  }
  out.add(e, scale);
}

void collect_product(const Expr& e, double power, ProductForm& out) {
  if (auto c = as_const(e)) { out.constant *= std::pow(c->value, power); return; }
  if (auto u = e.as<UnaryNode>()) {
    switch (u->op) {
      case UnaryOp::neg: out.constant *= std::pow(-1.0, power); collect_product(u->operand, power, out); return;
      case UnaryOp::exp: {
        SumForm s = to_sum_form(u->operand);
        for (auto& [atom, coefficient] : s.terms) out.exponent.add(atom, coefficient * power);
        out.exponent.constant += s.constant * power;
        return;
      }
      case UnaryOp::rsqrt: out.multiply(u->operand, -0.5 * power); return;
      case UnaryOp::sqrt: out.multiply(u->operand, 0.5 * power); return;
      default: break;
    }
  }
  if (auto b = e.as<BinaryNode>()) {
    switch (b->op) {
      case BinaryOp::mul: collect_product(b->lhs, power, out); collect_product(b->rhs, power, out); return;
      case BinaryOp::div: collect_product(b->lhs, power, out); collect_product(b->rhs, -power, out); return;
      case BinaryOp::pow:
        if (auto c = as_const(b->rhs)) {
          double p = c->value;
          if (p == std::floor(p)) collect_product(b->lhs, power * p, out);  // integer powers distribute
          else out.multiply(b->lhs, power * p);
          return;
        }
        break;
      default: break;
    }
  }
  out.multiply(e, power);
}

Expr power_expr(const Expr& atom, double p) {
  if (p == 1) return atom;
  if (p == 0.5) return make_unary(UnaryOp::sqrt, atom);
  if (p == -0.5) return make_unary(UnaryOp::rsqrt, atom);
  if (p == std::floor(p) && std::fabs(p) < 1e15) return make_binary(BinaryOp::pow, atom, make_const(p));
  return make_binary(BinaryOp::pow, atom, make_const(p));
}

}  // namespace

SumForm to_sum_form(const Expr& e) {
  SumForm s;
  collect_sum(e, 1.0, s);
  return s;
}

ProductForm to_product_form(const Expr& e) {
  ProductForm p;
  collect_product(e, 1.0, p);
  return p;
}

Expr from_sum_form(const SumForm& s) {
  Expr result;
  for (auto& [atom, coefficient] : s.terms) {
    Expr term = coefficient == 1 || coefficient == -1 ? atom : make_binary(BinaryOp::mul, make_const(std::fabs(coefficient)), atom);
    if (!result) result = coefficient < 0 ? make_unary(UnaryOp::neg, term) : term;
    else result = make_binary(coefficient < 0 ? BinaryOp::sub : BinaryOp::add, result, term);
  }
  if (s.constant != 0 || !result) {
    if (!result) return make_const(s.constant);
    result = make_binary(s.constant < 0 ? BinaryOp::sub : BinaryOp::add, result, make_const(std::fabs(s.constant)));
  }
  return result;
}

Expr from_product_form(const ProductForm& p) {
  Expr numerator, denominator;
  auto times = [](Expr a, Expr b) { return a ? make_binary(BinaryOp::mul, a, b) : b; };
  for (auto& [atom, power] : p.powers) {
    if (power < 0 && power != -0.5) denominator = times(denominator, power_expr(atom, -power));
    else numerator = times(numerator, power_expr(atom, power));
  }
  if (!p.exponent.empty()) numerator = times(numerator, make_unary(UnaryOp::exp, from_sum_form(p.exponent)));
  if (p.constant != 1 || !numerator) {
    Expr c = make_const(p.constant);
    numerator = numerator ? (p.constant == -1 ? make_unary(UnaryOp::neg, numerator) : make_binary(BinaryOp::mul, c, numerator)) : c;
  }
  return denominator ? make_binary(BinaryOp::div, numerator, denominator) : numerator;
}

ProductForm product_of(const ProductForm& a, const ProductForm& b) {
  ProductForm r = a;
  r.constant *= b.constant;
  for (auto& [atom, power] : b.powers) r.multiply(atom, power);
  r.exponent = sum_of(r.exponent, b.exponent);
  return r;
}

ProductForm inverse_of(const ProductForm& p) {
  ProductForm r;
  r.constant = 1.0 / p.constant;
  for (auto& [atom, power] : p.powers) r.multiply(atom, -power);
  r.exponent = negation_of(p.exponent);
  return r;
}

SumForm sum_of(const SumForm& a, const SumForm& b) {
  SumForm r = a;
  r.constant += b.constant;
  for (auto& [atom, c] : b.terms) r.add(atom, c);
  return r;
}

SumForm negation_of(const SumForm& s) {
  SumForm r;
  r.constant = -s.constant;
  for (auto& [atom, c] : s.terms) r.add(atom, -c);
  return r;
}

Side side_of(const Expr& e, const std::function<bool(const std::string&)>& is_d) {
  struct Finder : ExprVisitor {
    const std::function<bool(const std::string&)>* is_d;
    bool x = false, d = false;
    using ExprVisitor::visit;
    void visit(const VarNode&) override { x = true; }
    void visit(const LoadNode& load) override {
      // The indices of an earlier result only pick which value of D is read (the kept p-variables);
      // they do not make it depend on the reduced data.
      if ((*is_d)(load.tensor)) { d = true; return; }
      x = true;
      ExprVisitor::visit(load);
    }
  } finder;
  finder.is_d = &is_d;
  finder.visit(e);
  if (finder.x && finder.d) return Side::mixed;
  if (finder.d) return Side::d;
  if (finder.x) return Side::x;
  return Side::constant;
}

namespace {
class ConstantFolder : public ExprMutator {
 public:
  using ExprMutator::mutate;

 protected:
  Expr mutate(const UnaryNode& n, const Expr& self) override {
    Expr a = mutate(n.operand);
    if (auto c = a.as<ConstNode>(); c && !c->is_integer) return make_const(apply_unary(n.op, c->value), n.loc);
    if (auto c = a.as<ConstNode>(); c && n.op == UnaryOp::neg) return make_int(-static_cast<int64_t>(c->value), n.loc);
    return a.same_node(n.operand) ? self : make_unary(n.op, a, n.loc);
  }
  Expr mutate(const BinaryNode& n, const Expr& self) override {
    Expr a = mutate(n.lhs), b = mutate(n.rhs);
    auto x = a.as<ConstNode>(), y = b.as<ConstNode>();
    if (x && y && !is_logical(n.op) && !is_comparison(n.op) && n.op != BinaryOp::floordiv && n.op != BinaryOp::mod) {
      double v = apply_binary(n.op, x->value, y->value);
      bool integer = x->is_integer && y->is_integer && n.op != BinaryOp::div && n.op != BinaryOp::pow;
      return integer ? make_int(static_cast<int64_t>(v), n.loc) : make_const(v, n.loc);
    }
    if (n.op == BinaryOp::mul) {
      if (x && x->value == 1) return b;
      if (y && y->value == 1) return a;
    }
    if (n.op == BinaryOp::div && y && y->value == 1) return a;
    if (n.op == BinaryOp::add) {
      if (x && x->value == 0) return b;
      if (y && y->value == 0) return a;
    }
    if (n.op == BinaryOp::sub && y && y->value == 0) return a;
    return a.same_node(n.lhs) && b.same_node(n.rhs) ? self : make_binary(n.op, a, b, n.loc);
  }
};

class LoadRenamer : public ExprMutator {
 public:
  const std::map<std::string, std::string>* renamed;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const LoadNode& n, const Expr& self) override {
    Expr rebuilt = ExprMutator::mutate(n, self);
    auto it = renamed->find(n.tensor);
    if (it == renamed->end()) return rebuilt;
    return make_load(it->second, rebuilt.as<LoadNode>()->index, n.loc);
  }
};
}  // namespace

Expr fold_constants(const Expr& e) {
  ConstantFolder folder;
  return folder.mutate(e);
}

Expr rename_loads(const Expr& e, const std::map<std::string, std::string>& renamed) {
  LoadRenamer r;
  r.renamed = &renamed;
  return r.mutate(e);
}

double evaluate_with(const Expr& e, const std::map<std::string, double>& load_value,
                     const std::map<std::string, double>& vars, const std::map<std::string, int64_t>& dims) {
  auto rec = [&](const Expr& x) { return evaluate_with(x, load_value, vars, dims); };
  try {
    switch (e.kind()) {
      case ExprKind::Const: return e.as<ConstNode>()->value;
      case ExprKind::Var: {
        auto it = vars.find(e.as<VarNode>()->name);
        return it == vars.end() ? NAN : it->second;
      }
      case ExprKind::DimRef: {
        auto it = dims.find(e.as<DimRefNode>()->name);
        return it == dims.end() ? NAN : static_cast<double>(it->second);
      }
      case ExprKind::Load: {
        auto it = load_value.find(print_expr(e));
        return it == load_value.end() ? NAN : it->second;
      }
      case ExprKind::Unary: return apply_unary(e.as<UnaryNode>()->op, rec(e.as<UnaryNode>()->operand));
      case ExprKind::Binary: {
        auto b = e.as<BinaryNode>();
        return apply_binary(b->op, rec(b->lhs), rec(b->rhs));
      }
      case ExprKind::Select: {
        auto s = e.as<SelectNode>();
        return rec(s->cond) != 0 ? rec(s->if_true) : rec(s->if_false);
      }
      case ExprKind::Cast: return round_to_dtype(rec(e.as<CastNode>()->operand), e.as<CastNode>()->dtype);
    }
  } catch (const Error&) {
  }
  return NAN;
}

}  // namespace solder
