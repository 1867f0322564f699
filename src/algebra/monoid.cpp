#include "algebra/monoid.h"

#include <limits>

namespace solder {

Monoid monoid_of(ReduceOp op) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  switch (op) {
    case ReduceOp::sum: return {op, 0.0, Compatible::times, "+", "×"};
    case ReduceOp::prod: return {op, 1.0, Compatible::times, "×", "×"};
    case ReduceOp::max: case ReduceOp::argmax: case ReduceOp::topk: return {op, -inf, Compatible::plus, "max", "+"};
    case ReduceOp::min: case ReduceOp::argmin: return {op, inf, Compatible::plus, "min", "+"};
    case ReduceOp::none: break;
  }
  return {op, 0.0, Compatible::none, "", ""};
}

Expr monoid_combine(ReduceOp op, Expr a, Expr b) {
  switch (op) {
    case ReduceOp::sum: return make_binary(BinaryOp::add, a, b);
    case ReduceOp::prod: return make_binary(BinaryOp::mul, a, b);
    case ReduceOp::max: return make_binary(BinaryOp::max, a, b);
    case ReduceOp::min: return make_binary(BinaryOp::min, a, b);
    default: return a;
  }
}

Expr otimes(Compatible c, Expr a, Expr b) {
  return c == Compatible::times ? make_binary(BinaryOp::mul, a, b) : make_binary(BinaryOp::add, a, b);
}

}  // namespace solder
