// Binding a Program to concrete sizes, and the verifier that checks it.
//
// `bind_program` evaluates the dims (defaults, the `small` set, then `--dim` overrides; derived dims are
// recomputed), infers every index variable's extent, computes every tensor's shape, and checks:
// names, extents (a variable used alone as an index at two dims of different size is an error),
// value types (types.h), that every load is in range — taking select guards into account — and
// that the program has an output. Every failure is an Error at file:line:column.
//
// The BoundProgram it returns is what every later pass works on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/program.h"

namespace solder {

struct SizeChoice {
  bool small = false;                                     // use the program's `small` set
  std::vector<std::pair<std::string, int64_t>> overrides;  // --dim NAME=VALUE, applied last
};

enum class TensorRole { input, intermediate, output };

struct TensorInfo {
  std::string name;
  TensorRole role = TensorRole::input;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_labels;  // how each dim is named in messages ("S", "K", "HX")
  const InputDecl* input = nullptr;      // for inputs
  int def_index = -1;                    // for targets: the defining definition
  bool is_index_target = false;          // topk's indices

  int64_t elements() const;
  int64_t bytes() const { return elements() * dtype_bytes(dtype); }
};

struct BoundDefinition {
  const Definition* def = nullptr;
  std::vector<int64_t> p_extents;  // aligned with def->target.index
  std::vector<int64_t> r_extents;  // aligned with def->reduce_vars
  int64_t topk_k = 0;
  int topk_rank_position = -1;     // which target index is topk's rank
  std::map<std::string, int64_t> extent;  // every index variable of the definition
};

class BoundProgram {
 public:
  std::shared_ptr<const Program> program;
  SizeChoice sizes;
  std::map<std::string, int64_t> dims;  // every dim's concrete value
  std::vector<TensorInfo> tensors;      // inputs in order, then targets in definition order
  std::vector<BoundDefinition> defs;

  const std::string& file() const { return program->file; }
  bool has_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // throws std::out_of_range
  std::vector<const TensorInfo*> inputs() const;
  std::vector<const TensorInfo*> outputs() const;
};

BoundProgram bind_program(std::shared_ptr<const Program> program, const SizeChoice& sizes);

}  // namespace solder
