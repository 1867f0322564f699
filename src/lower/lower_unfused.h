// The unfused lowering: one kernel per definition, with a straightforward tiling.
//
// Each definition becomes a kernel whose grid covers its p-space in tiles (one output tile per
// block: the innermost p-variable in tiles of up to 32, the next in tiles of up to 8, the others
// one at a time); its reduction is a loop over tiles of the r-space accumulating into a register
// tile, which is then stored. Every intermediate lives in global memory. This is the fallback for
// whatever the fusion passes leave alone, and the proof that the Kernel IR expresses every
// program.
#pragma once

#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

// The global tensors of a program: inputs, outputs and every intermediate.
std::vector<GlobalTensor> program_globals(const BoundProgram& program);

// The kernel computing definition `index` of `program` on its own (reads and writes globals).
Kernel lower_definition(const BoundProgram& program, size_t index);

KernelProgram lower_unfused(const BoundProgram& program);

}  // namespace solder
