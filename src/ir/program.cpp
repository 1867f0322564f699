#include "ir/program.h"

namespace solder {

std::string_view distribution_name(InputDistribution::Kind kind) {
  switch (kind) {
    case InputDistribution::Kind::standard: return "standard";
    case InputDistribution::Kind::normal: return "normal";
    case InputDistribution::Kind::uniform: return "uniform";
    case InputDistribution::Kind::randint: return "randint";
    case InputDistribution::Kind::sorted_randint: return "sorted_randint";
    case InputDistribution::Kind::bernoulli: return "bernoulli";
  }
  return "?";
}

int distribution_arity(InputDistribution::Kind kind) {
  switch (kind) {
    case InputDistribution::Kind::standard: return 0;
    case InputDistribution::Kind::bernoulli: return 1;
    default: return 2;
  }
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::none: return "none";
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::prod: return "prod";
    case ReduceOp::argmax: return "argmax";
    case ReduceOp::argmin: return "argmin";
    case ReduceOp::topk: return "topk";
  }
  return "?";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod, ReduceOp::argmax,
                      ReduceOp::argmin, ReduceOp::topk}) {
    if (reduce_op_name(op) == name) return op;
  }
  return std::nullopt;
}

DType Definition::value_dtype() const {
  if (target.dtype) return *target.dtype;
  if (reduce == ReduceOp::argmax || reduce == ReduceOp::argmin) return DType::i32;
  return DType::f32;
}

const DimDecl* Program::find_dim(std::string_view name) const {
  for (auto& d : dims) if (d.name == name) return &d;
  return nullptr;
}
const InputDecl* Program::find_input(std::string_view name) const {
  for (auto& i : inputs) if (i.name == name) return &i;
  return nullptr;
}
const Definition* Program::find_definition(std::string_view name) const {
  for (auto& d : defs) {
    if (d.target.name == name) return &d;
    if (d.index_target && d.index_target->name == name) return &d;
  }
  return nullptr;
}

}  // namespace solder
