// Names a lowering introduces into the Kernel IR: tiles, accumulators, loop and grid variables,
// scratch globals. They read like the program (`x_tile`, `acc_y`, `T_t`), and never collide with a
// name the program uses (a tensor, a dim or an index variable: an input named `y_tile` is legal) or
// with each other: a taken name gets a numeric suffix (`y_tile_2`). One Kernel IR namespace holds
// globals, buffers and variables alike, so that the CUDA backend can declare each as a C++ name in
// one scope.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include "ir/expr.h"
#include "ir/verifier.h"

namespace solder {

class InternalNames {
 public:
  InternalNames() = default;
  // Reserves every tensor, dim and index-variable name of the program.
  explicit InternalNames(const BoundProgram& program);

  void reserve(const std::string& name) { taken_.insert(name); }
  // Reserves the variables and tensors an expression names (inlined bodies, decompositions).
  void reserve_names_in(const Expr& e);
  void reserve_definition(const Definition& d);

  // The name for the purpose (`kind`, `of`): `wanted` when free, else `wanted_2`, `wanted_3`, ...
  // The same purpose always gets the same name.
  std::string get(const std::string& kind, const std::string& of, const std::string& wanted);

 private:
  std::map<std::pair<std::string, std::string>, std::string> given_;
  std::set<std::string> taken_;
};

}  // namespace solder
