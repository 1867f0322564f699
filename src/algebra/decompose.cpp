#include "algebra/decompose.h"

#include <cmath>
#include <set>

#include "algebra/normal_form.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {

std::string_view decomposition_kind_name(Decomposition::Kind kind) {
  switch (kind) {
    case Decomposition::Kind::independent: return "independent";
    case Decomposition::Kind::multiplicative: return "multiplicative";
    case Decomposition::Kind::additive: return "additive";
    case Decomposition::Kind::monotone: return "monotone";
    case Decomposition::Kind::polynomial: return "polynomial";
    case Decomposition::Kind::refused: return "refused";
  }
  return "?";
}

namespace {

bool contains(const Expr& e, const Expr& atom) {
  if (structurally_equal(e, atom)) return true;
  bool found = false;
  struct Finder : ExprVisitor {
    const Expr* atom;
    bool* found;
    using ExprVisitor::visit;
    void visit(const LoadNode& n) override {
      if (!*found && atom->as<LoadNode>() && n.tensor == atom->as<LoadNode>()->tensor) {
        // compare structurally through a rebuilt handle
        *found = print_expr(make_load(n.tensor, n.index)) == print_expr(*atom);
      }
      ExprVisitor::visit(n);
    }
  } finder;
  finder.atom = &atom;
  finder.found = &found;
  finder.visit(e);
  return found;
}

bool is_zero(const Expr& e) { auto c = e.as<ConstNode>(); return c && c->value == 0; }
bool is_one(const Expr& e) { auto c = e.as<ConstNode>(); return c && c->value == 1; }
Expr zero() { return make_const(0.0); }
Expr one() { return make_const(1.0); }
Expr add(Expr a, Expr b) { if (is_zero(a)) return b; if (is_zero(b)) return a; return make_binary(BinaryOp::add, a, b); }
Expr sub(Expr a, Expr b) { if (is_zero(b)) return a; if (is_zero(a)) return make_unary(UnaryOp::neg, b); return make_binary(BinaryOp::sub, a, b); }
Expr mul(Expr a, Expr b) {
  if (is_zero(a) || is_zero(b)) return zero();
  if (is_one(a)) return b;
  if (is_one(b)) return a;
  return make_binary(BinaryOp::mul, a, b);
}
Expr div(Expr a, Expr b) { if (is_zero(a)) return zero(); if (is_one(b)) return a; return make_binary(BinaryOp::div, a, b); }

// All loads and index variables of an expression, for random evaluation.
void collect_leaves(const Expr& e, std::map<std::string, Expr>& loads, std::set<std::string>& vars) {
  struct Collector : ExprVisitor {
    std::map<std::string, Expr>* loads;
    std::set<std::string>* vars;
    using ExprVisitor::visit;
    void visit(const LoadNode& n) override {
      Expr handle = make_load(n.tensor, n.index);
      (*loads)[print_expr(handle)] = handle;
      ExprVisitor::visit(n);
    }
    void visit(const VarNode& n) override { vars->insert(n.name); }
  } c;
  c.loads = &loads;
  c.vars = &vars;
  c.visit(e);
}

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : state_(seed) {}
  double uniform(double lo, double hi) {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return lo + (hi - lo) * static_cast<double>(state_ >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

bool close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return false;
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= 1e-9 * (std::fabs(a) + std::fabs(b)) + 1e-12;
}

// Confirms `claim(point)` at random points: loads of D tensors draw from [0.5, 2], other loads from
// [-2, 2], index variables from 0..15. Returns "" when confirmed, else what failed.
struct Point {
  std::map<std::string, double> loads, vars;
};

std::string confirm(const Expr& body, const std::function<bool(const std::string&)>& is_d,
                    const std::function<bool(const Point&, const Point&, std::string&)>& claim, int* tested) {
  std::map<std::string, Expr> loads;
  std::set<std::string> vars;
  collect_leaves(body, loads, vars);
  Sampler sampler(0x5eed);
  int valid = 0;
  for (int attempt = 0; attempt < 200 && valid < 64; ++attempt) {
    Point a, b;
    for (auto& [text, load] : loads) {
      bool d = is_d(load.as<LoadNode>()->tensor);
      a.loads[text] = d ? sampler.uniform(0.5, 2) : sampler.uniform(-2, 2);
      b.loads[text] = d ? sampler.uniform(0.5, 2) : sampler.uniform(-2, 2);
    }
    for (auto& v : vars) {
      a.vars[v] = std::floor(sampler.uniform(0, 16));
      b.vars[v] = std::floor(sampler.uniform(0, 16));
    }
    std::string failure;
    if (!claim(a, b, failure)) {
      if (failure.empty()) continue;  // not finite here: try another point
      return failure;
    }
    ++valid;
  }
  *tested = valid;
  if (valid < 16) return "could not confirm it: the expression is not finite at enough random points";
  return "";
}

// A point whose X loads come from `x` and D loads from `d`.
Point mix(const Point& x, const Point& d, const std::function<bool(const std::string&)>& is_d,
          const std::map<std::string, Expr>& loads) {
  Point p = x;
  for (auto& [text, load] : loads)
    if (is_d(load.as<LoadNode>()->tensor)) p.loads[text] = d.loads.at(text);
  return p;
}

// Replaces loads (by canonical text) with constants.
Expr replace_loads_with_constants(const Expr& e, const std::map<std::string, double>& values) {
  struct Replacer : ExprMutator {
    const std::map<std::string, double>* values;
    using ExprMutator::mutate;
    Expr mutate(const LoadNode& n, const Expr& self) override {
      auto it = values->find(print_expr(self));
      return it == values->end() ? ExprMutator::mutate(n, self) : make_const(it->second);
    }
  } r;
  r.values = &values;
  return r.mutate(e);
}

bool positive_factor(const Expr& atom, const std::function<bool(const std::string&)>& is_positive) {
  if (auto u = atom.as<UnaryNode>()) return u->op == UnaryOp::exp || u->op == UnaryOp::sigmoid;
  if (auto l = atom.as<LoadNode>()) return is_positive && is_positive(l->tensor);
  return false;
}

// F = c·exp(K(x) + E(D))·P(D) with c > 0 and every factor of P positive: F increases with K.
Decomposition decompose_monotone(const Expr& body, Decomposition result, const std::function<bool(const std::string&)>& is_d,
                                 const std::function<bool(const std::string&)>& is_positive, const std::map<std::string, int64_t>& dims) {
  ProductForm form = to_product_form(body);
  auto refuse = [&](const std::string& why) {
    result.kind = Decomposition::Kind::refused;
    result.reason = "not decomposable: " + why;
    return result;
  };
  if (!(form.constant > 0)) return refuse("the selected value is not a positive multiple of exp(key)");
  SumForm key, rest_exponent;
  key.constant = form.exponent.constant;
  for (auto& [atom, coefficient] : form.exponent.terms) {
    Side s = side_of(atom, is_d);
    if (s == Side::mixed) return refuse("exponent term '" + print_expr(atom) + "' mixes the reduced data with an earlier result");
    (s == Side::d ? rest_exponent : key).add(atom, coefficient);
  }
  ProductForm scale;
  scale.constant = form.constant;
  for (auto& [atom, power] : form.powers) {
    if (side_of(atom, is_d) != Side::d && side_of(atom, is_d) != Side::constant)
      return refuse("factor '" + print_expr(atom) + "' of the reduced data is not inside the exponential, so no single key orders the values");
    if (!positive_factor(atom, is_positive)) return refuse("factor '" + print_expr(atom) + "' is not known to be positive");
    scale.multiply(atom, power);
  }
  if (key.terms.empty()) return refuse("the selected value does not depend on the reduced data");
  ProductForm value = scale;
  value.exponent = sum_of(rest_exponent, SumForm{0, {{make_load("@key", {}), 1.0}}});
  result.kind = Decomposition::Kind::monotone;
  result.g = fold_constants(from_sum_form(key));
  ProductForm h = scale;
  h.exponent = rest_exponent;
  result.h = fold_constants(from_product_form(h));
  result.online_term = result.g;
  result.value_from_key = fold_constants(from_product_form(value));
  auto eval = [&](const Expr& e, const Point& p) { return evaluate_with(e, p.loads, p.vars, dims); };
  int tested = 0;
  std::string failure = confirm(body, is_d, [&](const Point& a, const Point& b, std::string& why) {
    Point with_key = a;
    double k = eval(result.g, a);
    with_key.loads["@key"] = k;
    double f = eval(body, a), v = eval(result.value_from_key, with_key);
    // Same D, two keys: F must be ordered like the keys.
    Point other = a;
    for (auto& [text, value_b] : b.loads)
      if (!is_d(text.substr(0, text.find('[')))) other.loads[text] = value_b;
    double f2 = eval(body, other), k2 = eval(result.g, other);
    if (!std::isfinite(f) || !std::isfinite(v) || !std::isfinite(f2) || !std::isfinite(k2)) return false;
    if (!close(f, v)) { why = "F differs from its value rebuilt from the key"; return false; }
    if ((k < k2 && !(f <= f2)) || (k > k2 && !(f >= f2))) { why = "F is not ordered like its key"; return false; }
    return true;
  }, &tested);
  if (!failure.empty()) return refuse(failure);
  result.confirmation = "monotone in the key, confirmed at " + std::to_string(tested) + " random points";
  return result;
}

}  // namespace

Expr derivative(const Expr& e, const Expr& wrt) {
  if (structurally_equal(e, wrt)) return one();
  if (!contains(e, wrt)) return zero();
  if (auto u = e.as<UnaryNode>()) {
    Expr a = derivative(u->operand, wrt);
    switch (u->op) {
      case UnaryOp::neg: return is_zero(a) ? zero() : make_unary(UnaryOp::neg, a);
      case UnaryOp::exp: return mul(e, a);
      default: break;
    }
  }
  if (auto b = e.as<BinaryNode>()) {
    Expr da = derivative(b->lhs, wrt), db = derivative(b->rhs, wrt);
    switch (b->op) {
      case BinaryOp::add: return add(da, db);
      case BinaryOp::sub: return sub(da, db);
      case BinaryOp::mul: return add(mul(da, b->rhs), mul(b->lhs, db));
      case BinaryOp::div:
        if (is_zero(db)) return div(da, b->rhs);
        return div(sub(mul(da, b->rhs), mul(b->lhs, db)), mul(b->rhs, b->rhs));
      case BinaryOp::pow:
        if (auto c = b->rhs.as<ConstNode>()) {
          double p = c->value;
          if (p == 0) return zero();
          Expr lowered = p - 1 == 1 ? b->lhs : p - 1 == 0 ? one() : make_binary(BinaryOp::pow, b->lhs, make_const(p - 1));
          return mul(mul(make_const(p), lowered), da);
        }
        break;
      default: break;
    }
  }
  if (auto s = e.as<SelectNode>()) {
    if (!contains(s->cond, wrt)) return make_select(s->cond, derivative(s->if_true, wrt), derivative(s->if_false, wrt));
  }
  throw Error("cannot differentiate '" + print_expr(e) + "' with respect to " + print_expr(wrt));
}

int polynomial_degree(const Expr& e, const Expr& wrt) {
  if (structurally_equal(e, wrt)) return 1;
  if (!contains(e, wrt)) return 0;
  if (auto u = e.as<UnaryNode>(); u && u->op == UnaryOp::neg) return polynomial_degree(u->operand, wrt);
  if (auto s = e.as<SelectNode>()) {
    if (contains(s->cond, wrt)) return -1;
    int a = polynomial_degree(s->if_true, wrt), b = polynomial_degree(s->if_false, wrt);
    return a < 0 || b < 0 ? -1 : std::max(a, b);
  }
  if (auto b = e.as<BinaryNode>()) {
    int x = polynomial_degree(b->lhs, wrt), y = polynomial_degree(b->rhs, wrt);
    switch (b->op) {
      case BinaryOp::add: case BinaryOp::sub: return x < 0 || y < 0 ? -1 : std::max(x, y);
      case BinaryOp::mul: return x < 0 || y < 0 ? -1 : x + y;
      case BinaryOp::div: return x < 0 || y != 0 ? -1 : x;
      case BinaryOp::pow: {
        auto c = b->rhs.as<ConstNode>();
        if (!c || y != 0 || x < 0 || c->value < 0 || c->value != std::floor(c->value) || c->value > 8) return -1;
        return x * static_cast<int>(c->value);
      }
      default: return -1;
    }
  }
  return -1;
}

Decomposition decompose_reduction(const Expr& body, ReduceOp op, const std::function<bool(const std::string&)>& is_d,
                                  const std::map<std::string, int64_t>& dims,
                                  const std::function<bool(const std::string&)>& is_positive) {
  Decomposition result;
  std::map<std::string, Expr> loads;
  std::set<std::string> vars;
  collect_leaves(body, loads, vars);
  for (auto& [text, load] : loads) {
    const std::string& t = load.as<LoadNode>()->tensor;
    if (is_d(t) && std::find(result.d_tensors.begin(), result.d_tensors.end(), t) == result.d_tensors.end())
      result.d_tensors.push_back(t);
  }
  if (result.d_tensors.empty()) {
    result.kind = Decomposition::Kind::independent;
    result.online_term = body;
    result.g = body;
    return result;
  }
  Monoid monoid = monoid_of(op);
  auto eval = [&](const Expr& e, const Point& p) { return evaluate_with(e, p.loads, p.vars, dims); };
  std::string multiplicative_failure;

  if (op == ReduceOp::sum) {
    ProductForm form = to_product_form(body);
    ProductForm g, h_online, h_deferred;
    g.constant = form.constant;
    std::string mixed;
    for (auto& [atom, power] : form.powers) {
      Side s = side_of(atom, is_d);
      if (s == Side::mixed) { mixed = print_expr(atom); break; }
      if (s == Side::d) h_deferred.multiply(atom, power);
      else g.multiply(atom, power);
    }
    for (auto& [atom, coefficient] : form.exponent.terms) {
      Side s = side_of(atom, is_d);
      if (s == Side::mixed) { mixed = "exp(" + print_expr(atom) + ")"; break; }
      if (s == Side::d) h_online.exponent.add(atom, coefficient);
      else g.exponent.add(atom, coefficient);
    }
    g.exponent.constant = form.exponent.constant;
    if (mixed.empty()) {
      result.kind = Decomposition::Kind::multiplicative;
      result.g = fold_constants(from_product_form(g));
      result.h = fold_constants(from_product_form(product_of(h_online, h_deferred)));
      if (!h_online.exponent.empty()) result.h_online = from_product_form(h_online);
      if (!h_deferred.powers.empty()) result.h_deferred = from_product_form(h_deferred);
      // The online term is F without its deferred factors. Where the deferred factors' loads appear
      // nowhere else in F, setting them to 1 in F itself keeps F's own structure (exp(sb - m) with sb
      // as written): rebuilding it from the normal form would re-associate sums such as
      // s + 1e9·(mask − 1) and lose the score's bits in float32.
      std::map<std::string, double> deferred_loads;
      bool substitutable = true;
      for (auto& [atom, power] : h_deferred.powers) {
        if (!atom.as<LoadNode>()) { substitutable = false; break; }
        deferred_loads[print_expr(atom)] = 1.0;
      }
      for (auto& [atom, coefficient] : h_online.exponent.terms)
        for (auto& [text, one] : deferred_loads) if (print_expr(atom).find(text) != std::string::npos) substitutable = false;
      if (substitutable && !deferred_loads.empty()) {
        result.online_term = fold_constants(replace_loads_with_constants(body, deferred_loads));
      } else if (h_deferred.powers.empty()) {
        result.online_term = body;
      } else {
        ProductForm online = g;
        online.exponent = sum_of(g.exponent, h_online.exponent);
        result.online_term = fold_constants(from_product_form(online));
      }
      int tested = 0;
      std::string failure = confirm(body, is_d, [&](const Point& a, const Point& b, std::string& why) {
        double f = eval(body, a);
        double gh = eval(result.g, a) * eval(result.h, a);
        double split = eval(result.online_term, a) * (result.h_deferred ? eval(result.h_deferred, a) : 1.0);
        // Fixed-point identity (eq. 23) between a and b.
        Point ad = mix(a, b, is_d, loads), bd = mix(b, a, is_d, loads);
        double lhs = eval(body, a) * eval(body, b), rhs = eval(body, ad) * eval(body, bd);
        if (!std::isfinite(f) || !std::isfinite(gh) || !std::isfinite(split) || !std::isfinite(lhs) || !std::isfinite(rhs)) return false;
        if (!close(f, gh)) { why = "F ≠ G × H at a random point"; return false; }
        if (!close(f, split)) { why = "the online and deferred parts do not multiply back to F"; return false; }
        if (!close(lhs, rhs)) { why = "the fixed-point identity F(x,d)·F(x0,d0) = F(x,d0)·F(x0,d) fails"; return false; }
        return true;
      }, &tested);
      if (failure.empty()) {
        result.confirmation = "confirmed at " + std::to_string(tested) + " random points";
        return result;
      }
      multiplicative_failure = failure;
    } else {
      multiplicative_failure = "factor '" + mixed + "' mixes the reduced data with " + result.d_tensors[0] +
                               (mixed.find("cast(") != std::string::npos ? " (rounding to a narrower dtype is not a homomorphism)" : "");
    }
    // Polynomial in a single D load?
    std::vector<Expr> d_loads;
    for (auto& [text, load] : loads)
      if (is_d(load.as<LoadNode>()->tensor)) d_loads.push_back(load);
    if (d_loads.size() == 1) {
      int degree = polynomial_degree(body, d_loads[0]);
      if (degree >= 1 && degree <= 4) {
        result = Decomposition{};
        result.d_tensors = {d_loads[0].as<LoadNode>()->tensor};
        result.kind = Decomposition::Kind::polynomial;
        result.d_load = d_loads[0];
        Expr current = body;
        for (int k = 0; k <= degree; ++k) {
          if (k > 0) current = fold_constants(div(derivative(current, d_loads[0]), make_const(static_cast<double>(k))));
          result.taylor.push_back(k == 0 ? body : current);
        }
        const std::string key = print_expr(d_loads[0]);
        int tested = 0;
        std::string failure = confirm(body, is_d, [&](const Point& a, const Point& b, std::string& why) {
          double delta = b.loads.at(key) - a.loads.at(key);
          Point shifted = a;
          shifted.loads[key] = b.loads.at(key);
          double direct = eval(body, shifted), series = 0, power = 1;
          for (int k = 0; k <= degree; ++k, power *= delta) series += eval(result.taylor[static_cast<size_t>(k)], a) * power;
          if (!std::isfinite(direct) || !std::isfinite(series)) return false;
          if (!close(direct, series)) { why = "the Taylor expansion does not reproduce F"; return false; }
          return true;
        }, &tested);
        if (failure.empty()) {
          result.confirmation = "confirmed at " + std::to_string(tested) + " random points";
          return result;
        }
        multiplicative_failure += "; as a polynomial in " + key + ": " + failure;
      }
    }
    result = Decomposition{};
    result.kind = Decomposition::Kind::refused;
    result.reason = "not decomposable: " + multiplicative_failure;
    return result;
  }

  if (monoid.otimes == Compatible::plus) {
    SumForm form = to_sum_form(body);
    SumForm g, h;
    g.constant = form.constant;
    for (auto& [atom, coefficient] : form.terms) {
      Side s = side_of(atom, is_d);
      if (s == Side::mixed) {
        bool selects = op == ReduceOp::argmax || op == ReduceOp::argmin || op == ReduceOp::topk;
        if (selects) return decompose_monotone(body, result, is_d, is_positive, dims);
        result.reason = "not decomposable: term '" + print_expr(atom) + "' mixes the reduced data with " + result.d_tensors[0];
        return result;
      }
      (s == Side::d ? h : g).add(atom, coefficient);
    }
    result.kind = Decomposition::Kind::additive;
    result.g = fold_constants(from_sum_form(g));
    result.h = fold_constants(from_sum_form(h));
    result.h_deferred = result.h;
    result.online_term = result.g;
    int tested = 0;
    std::string failure = confirm(body, is_d, [&](const Point& a, const Point&, std::string& why) {
      double f = eval(body, a), gh = eval(result.g, a) + eval(result.h, a);
      if (!std::isfinite(f) || !std::isfinite(gh)) return false;
      if (!close(f, gh)) { why = "F ≠ G + H at a random point"; return false; }
      return true;
    }, &tested);
    if (!failure.empty()) {
      result.kind = Decomposition::Kind::refused;
      result.reason = "not decomposable: " + failure;
      return result;
    }
    result.confirmation = "confirmed at " + std::to_string(tested) + " random points";
    return result;
  }

  result.reason = std::string("not decomposable: ") + std::string(reduce_op_name(op)) +
                  " has no ⊗ that distributes over it for a value that depends on " + result.d_tensors[0];
  return result;
}

Expr rescale_factor(const Decomposition& d, const std::map<std::string, std::string>& old_names) {
  if (!d.h_online) return make_const(1.0);
  ProductForm now = to_product_form(d.h_online);
  ProductForm before = to_product_form(rename_loads(d.h_online, old_names));
  return fold_constants(from_product_form(product_of(now, inverse_of(before))));
}

}  // namespace solder
