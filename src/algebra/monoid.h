// Reduction monoids and their compatible ⊗ (RedFuser Table 1).
//
//   reduction   ⊕ (identity)        compatible ⊗     ⊗'s identity   inverse of h under ⊗
//   sum         +  (0)              ×                1              1 / h   (h ≠ 0, finite)
//   prod        ×  (1)              ×                1              1 / h
//   max         max (-inf)          +                0              -h      (h finite)
//   min         min (+inf)          +                0              -h
//   argmax/argmin/topk select by max/min; a D-independent selection key is needed to stream them.
//
// Distributivity (a ⊕ b) ⊗ c = (a ⊗ c) ⊕ (b ⊗ c) holds for each pair, which is what lets a
// running accumulator be rescaled when the values it depends on change.
#pragma once

#include <string_view>

#include "ir/expr.h"
#include "ir/program.h"

namespace solder {

enum class Compatible { times, plus, none };

struct Monoid {
  ReduceOp op;
  double identity;
  Compatible otimes;
  std::string_view oplus_name;   // "+", "max", ...
  std::string_view otimes_name;  // "×", "+"
};

Monoid monoid_of(ReduceOp op);

// ⊕ as an expression (used by the lowering to emit updates).
Expr monoid_combine(ReduceOp op, Expr a, Expr b);
// ⊗ as an expression.
Expr otimes(Compatible c, Expr a, Expr b);

}  // namespace solder
