// The Program IR: what a tensor program computes.
//
// A Program is a list of named dims (sizes), inputs, and definitions in order. Every definition is
// one generic form (Flashlight §3.1, the unified reduction IR):
//
//     target[p0, p1, ...] = R(r0, r1, ...) body
//
// The p-variables index the target; the r-variables are consumed by the reduction R (none, sum,
// max, min, prod, argmax, argmin, topk(k)). The body is a scalar expression (expr.h) over loads of
// inputs and earlier targets, index variables, dims and constants.
//
// Meaning (the float64 reference interpreter implements exactly this):
//   * Definitions run in order; a target is complete before any later definition reads it.
//   * For each point of the p-space, the body is evaluated at every point of the r-space (in
//     lexicographic order of the r-variables) and combined with R's monoid: sum (+, 0),
//     prod (x, 1), max (max, -inf), min (min, +inf); max and min propagate NaN. R = none evaluates
//     the body once. argmax/argmin (one r-variable) give the index of the first extreme element
//     (NaN counts as extreme). topk(k) (one r-variable) gives the k largest body values in
//     descending order, ties to the lower index, and, as an optional second target, their indices;
//     its targets carry one extra p-variable of extent k, naming the rank.
//   * The combined value is rounded to the target's dtype (f32 unless declared) when written.
//   * A load whose index is out of range is an error, except inside the untaken branch of a
//     select, which is never evaluated (guarded loads, e.g. convolution padding).
//
// Sizes are symbolic here: dims are expressions over earlier dims. `bind_program` (verifier.h) fixes
// concrete sizes, checks everything, and yields a BoundProgram that later passes work on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/diagnostics.h"
#include "ir/dtype.h"
#include "ir/expr.h"

namespace solder {

struct DimDecl {
  std::string name;
  Expr value;  // integer expression over earlier dims
  SourceLoc loc;
};

// How the random-input generator draws an input (docs/language.md, "Inputs").
struct InputDistribution {
  enum class Kind { standard, normal, uniform, randint, sorted_randint, bernoulli };
  Kind kind = Kind::standard;  // standard: normal(0,1) / randint(0,16) / bernoulli(0.5) by dtype
  std::vector<double> params;
};
std::string_view distribution_name(InputDistribution::Kind kind);
// Number of parameters a distribution takes.
int distribution_arity(InputDistribution::Kind kind);

struct InputDecl {
  std::string name;
  std::vector<Expr> shape;  // dim expressions; empty for a 0-d input
  DType dtype = DType::f32;
  InputDistribution distribution;
  SourceLoc loc;
};

struct IndexVarDecl {
  std::string name;
  std::optional<Expr> extent;  // explicit `i : DIM`; otherwise inferred from bare uses
  SourceLoc loc;
};

enum class ReduceOp { none, sum, max, min, prod, argmax, argmin, topk };
std::string_view reduce_op_name(ReduceOp op);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);  // excludes "none"

struct DefTarget {
  std::string name;
  std::vector<IndexVarDecl> index;  // the p-variables
  std::optional<DType> dtype;       // declared dtype; f32 (or i32 for indices) when absent
  bool is_output = false;
  SourceLoc loc;
};

struct Definition {
  DefTarget target;
  std::optional<DefTarget> index_target;  // topk only: the tensor of indices
  ReduceOp reduce = ReduceOp::none;
  Expr topk_k;                            // topk only: integer dim expression
  std::vector<IndexVarDecl> reduce_vars;  // the r-variables
  Expr body;
  SourceLoc loc;

  // The dtype the target is written with.
  DType value_dtype() const;
};

struct Program {
  std::string name;
  std::string file;  // for messages; "<api>" for programs built in C++
  std::vector<DimDecl> dims;
  std::vector<DimDecl> small;  // --small values (names refer to dims)
  std::vector<InputDecl> inputs;
  std::vector<Definition> defs;

  const DimDecl* find_dim(std::string_view name) const;
  const InputDecl* find_input(std::string_view name) const;
  // The definition whose target (or index target) is `name`, or nullptr.
  const Definition* find_definition(std::string_view name) const;
};

}  // namespace solder
