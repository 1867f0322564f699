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

namespace solder::mma_stream {

// The factors of a product a * b * c (not a product: the expression itself).
void product_factors(const Expr& e, std::vector<Expr>& out);
Expr product_of(const std::vector<Expr>& factors);  // 1.0 when empty

// `e` rebuilt with f applied to each direct child (operands, condition and branches).
Expr map_children(const Expr& e, const std::function<Expr(const Expr&)>& f);
// `e` with every load replaced by fn(load, the load as an Expr) (return the latter to keep it).
Expr rewrite_loads(const Expr& e, const std::function<Expr(const LoadNode&, const Expr&)>& fn);
// `e` with variables replaced by the expressions of `at` (in indices too).
Expr substitute_vars(const Expr& e, const std::map<std::string, Expr>& at);

bool is_var(const Expr& e, const std::string& name);
bool is_neg_infinity(const Expr& e);  // -inf as a constant or the negation of +inf

struct IntervalText {
  std::string lo, hi;  // C++ expressions (long long)
};

// Interval arithmetic over integer index expressions, printed as C++ evaluated at run time.
class IntervalPrinter {
 public:
  std::map<std::string, IntervalText> vars;  // tile-local variables and their ranges (others: a point)
  std::map<std::string, int64_t> dims;
  // The range of a load over the tile (data-dependent bounds computed at run time), if known.
  std::function<std::optional<IntervalText>(const LoadNode&)> load_range;

  // C++ that is false only when `e` is false at every point of the ranges (nullopt: unknown).
  std::optional<std::string> may_be_true(const Expr& e) { return truth(e, true); }
  // C++ that is false only when `e` is true at every point of the ranges (nullopt: unknown).
  std::optional<std::string> may_be_false(const Expr& e) { return truth(e, false); }

 private:
  std::optional<IntervalText> range(const Expr& e);
  std::optional<std::string> truth(const Expr& e, bool want);
};

}  // namespace solder::mma_stream
