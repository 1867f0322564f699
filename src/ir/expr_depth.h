// Measures of an expression's shape that never recurse, so that they are safe on trees of any
// depth (the parser and the verifier use them to enforce kMaxExprDepth, ir/limits.h).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/expr.h"

namespace solder {

// The operands of `e` (a load's indices, a unary/cast operand, a binary node's two sides, a
// select's three), in order.
std::vector<Expr> children(const Expr& e);
// How deep `e` nests (a leaf is 1); shared subtrees are measured once.
int expr_depth(const Expr& e);
// The number of nodes of `e` counted as a tree (a shared subtree counts at every use, as passes
// that rebuild the tree see it); stops counting at `cap`.
int64_t expr_tree_size(const Expr& e, int64_t cap);

}  // namespace solder
