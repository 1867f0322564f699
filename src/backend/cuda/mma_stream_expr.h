// Expression helpers of the tensor-core emitter (mma_stream_codegen): products, rewrites, and the
// interval arithmetic printed as C++ that decides per tile whether a mask holds nowhere, everywhere
// or in part.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/expr_visitor.h"  // substitute_vars

namespace solder::mma_stream {

// The factors of a product a * b * c (not a product: the expression itself).
void product_factors(const Expr& e, std::vector<Expr>& out);
Expr product_of(const std::vector<Expr>& factors);  // 1.0 when empty

// `e` rebuilt with f applied to each direct child (operands, condition and branches).
Expr map_children(const Expr& e, const std::function<Expr(const Expr&)>& f);
// `e` with every load replaced by fn(load, the load as an Expr) (return the latter to keep it).
Expr rewrite_loads(const Expr& e, const std::function<Expr(const LoadNode&, const Expr&)>& fn);

bool is_var(const Expr& e, const std::string& name);
bool is_neg_infinity(const Expr& e);  // -inf as a constant or the negation of +inf

struct IntervalExpr {
  Expr lo, hi;  // integer expressions, inclusive bounds
};

// Interval arithmetic over integer index expressions, built as integer and boolean expressions of the
// variables the tile's bounds are known by at run time (grid and loop variables, data bounds), so that
// one decision is printed as C++ for the kernel and evaluated on the host by the tests (CompiledExpr).
// Sound by construction: each rule below encloses every value the expression takes over the ranges.
//   x + y  [xlo + ylo, xhi + yhi]      x - y  [xlo - yhi, xhi - ylo]      -x  [-xhi, -xlo]
//   x * y  min and max of the four corner products
//   x // c floor division by a positive constant or dim (monotone)        max, min: monotone
//   other operations, real values and loads without a run-time bound: unknown
// Comparisons: "may be true" and "may be false" over the ranges (a < b may be true iff alo < bhi;
// a == b iff the ranges meet; a != b unless both are the same single point); && and || combine them
// (an unknown operand counts as "may be" where that keeps the answer sound, otherwise the whole is
// unknown); ! swaps the two questions.
class IntervalBuilder {
 public:
  std::map<std::string, IntervalExpr> vars;  // tile-local variables and their ranges (others: a point)
  std::map<std::string, int64_t> dims;
  // The range of a load over the tile (data-dependent bounds computed at run time), if known.
  std::function<std::optional<IntervalExpr>(const LoadNode&)> load_range;

  // A boolean expression that is false only when `e` is false at every point of the ranges
  // (nullopt: unknown).
  std::optional<Expr> may_be_true(const Expr& e) { return truth(e, true); }
  // A boolean expression that is false only when `e` is true at every point of the ranges.
  std::optional<Expr> may_be_false(const Expr& e) { return truth(e, false); }
  std::optional<IntervalExpr> range(const Expr& e);

 private:
  std::optional<Expr> truth(const Expr& e, bool want);
};

// Integer arithmetic that folds constants (x + 0 is x; 2 + 3 is 5): keeps the printed bounds short.
Expr fold_binary(BinaryOp op, const Expr& x, const Expr& y);

}  // namespace solder::mma_stream
