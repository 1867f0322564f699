// Normal forms of scalar expressions for the reduction algebra.
//
// A SumForm is c + Σ coeffᵢ·atomᵢ (for the + that max and min pair with); a ProductForm is
// c × Π atomᵢ^powᵢ × exp(Σ exponent terms) (for the × that sum and prod pair with). Building them
// flattens + - × / and negation, turns exp(a ± b) into exp(a)·exp(±b), rsqrt/sqrt into powers, and
// integer powers of products into products of powers; anything else is an atom. Equal atoms
// (structurally) are merged. Non-integer powers are never distributed over products (that is
// wrong for negative factors).
//
// Every atom is on one side of a cascade: constant (dims and literals only), X (depends on the
// reduced data or index variables only), D (depends on earlier reductions' results only), or mixed.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/expr.h"

namespace solder {

struct SumForm {
  double constant = 0;
  std::vector<std::pair<Expr, double>> terms;  // atom, coefficient
  void add(const Expr& atom, double coefficient);
  bool empty() const { return terms.empty() && constant == 0; }
};

struct ProductForm {
  double constant = 1;
  std::vector<std::pair<Expr, double>> powers;  // atom, power
  SumForm exponent;                             // exp(exponent)
  void multiply(const Expr& atom, double power);
};

SumForm to_sum_form(const Expr& e);
ProductForm to_product_form(const Expr& e);
Expr from_sum_form(const SumForm& s);
Expr from_product_form(const ProductForm& p);
ProductForm product_of(const ProductForm& a, const ProductForm& b);
ProductForm inverse_of(const ProductForm& p);
SumForm sum_of(const SumForm& a, const SumForm& b);
SumForm negation_of(const SumForm& s);

enum class Side { constant, x, d, mixed };
// `is_d(tensor)` tells which loads are results of earlier reductions of the cascade.
Side side_of(const Expr& e, const std::function<bool(const std::string&)>& is_d);

// Folds constant sub-expressions (without changing results on non-finite values: x*0 is kept).
Expr fold_constants(const Expr& e);

// Evaluates `e` in float64 with loads given by `load_value` (keyed by the load's canonical text),
// index variables by `vars` and dims by `dims`. Returns NaN where evaluation fails.
double evaluate_with(const Expr& e, const std::map<std::string, double>& load_value,
                     const std::map<std::string, double>& vars, const std::map<std::string, int64_t>& dims);

// Replaces loads of tensors by loads of other tensors with the same indices (`renamed[old] = new`).
Expr rename_loads(const Expr& e, const std::map<std::string, std::string>& renamed);

}  // namespace solder
