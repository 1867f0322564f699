// The limits of the .sol language and of the Program IR (docs/language.md, "Limits").
//
// Every limit is checked where the value first appears — the lexer (names), the parser (expression
// depth), `bind_program` (sizes) — and a program beyond one gets an Error at file:line:column naming
// the thing and the limit, never a crash or a wrapped-around size. Later passes rely on them: with
// every dim below 2^31 and every tensor below 2^40 elements, byte counts, tile counts and grid sizes
// computed from them fit in int64_t (they are still computed with checked arithmetic, checked.h).
#pragma once

#include <cstdint>

namespace solder {

// Names: a letter or '_' followed by letters, digits and '_' (ASCII), at most this many characters.
constexpr int kMaxNameLength = 128;

// Expressions nest at most this deep: parentheses, function calls, unary operators and the operands
// of binary operators each add a level. A run of more than kBalancedRunLength operands joined by
// the same `+`, `*`, `&&` or `||` is grouped as a balanced tree, so long flat sums stay shallow.
constexpr int kMaxExprDepth = 256;
constexpr int kBalancedRunLength = 64;

// Sizes: every dim, extent and topk k is an integer in [1, kMaxDim] (the i32 range, which indices
// use in generated code); every tensor holds at most kMaxElements elements; every definition's
// iteration space (the product of its p- and r-extents) has at most kMaxIterations points.
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr int64_t kMaxIterations = int64_t{1} << 62;

}  // namespace solder
