// Pass: inline pointwise definitions into their consumers (recompute instead of materialise).
//
// A definition without a reduction that is not a program output is substituted into every load of
// it: its index variables are replaced by the load's index expressions. A declared dtype other than
// f32 is a rounding point of the program, so the substituted body is wrapped in cast(…, dtype) and
// rounds exactly where the reference rounds; f32 is the working precision of every backend, so f32
// definitions inline as they are. Inlining never changes what the program computes; it removes
// tensors from global memory. A producer whose inlined body would exceed 64 levels or 1024 nodes
// stays a definition of its own (every use copies the body; chains would grow exponentially).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/verifier.h"

namespace solder {

struct InlinedProgram {
  // The definitions that remain (reductions, outputs and large producers), with inlined bodies, in
  // program order.
  std::vector<Definition> defs;
  std::vector<std::string> inlined;  // names of the definitions substituted away
};

// `keep`: pointwise definitions that stay definitions (materialised: a whole contraction reads them).
InlinedProgram inline_pointwise(const BoundProgram& program, const std::set<std::string>& keep = {});

}  // namespace solder
