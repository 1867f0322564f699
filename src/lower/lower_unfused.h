// The unfused lowering: one kernel per definition, with a straightforward tiling.
//
// Each definition becomes a kernel whose grid covers its p-space in tiles (one output tile per
// block: the innermost p-variable in tiles of up to 32, the next in tiles of up to 8, the others
// one at a time); its reduction is a loop over tiles of the r-space accumulating into a register
// tile, which is then stored. Every intermediate lives in global memory. This is the fallback for
// whatever the fusion passes leave alone, and the proof that the Kernel IR expresses every
// program.
#pragma once

#include <optional>
#include <string>

#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

// The global tensors of a program: inputs, outputs and every intermediate.
std::vector<GlobalTensor> program_globals(const BoundProgram& program);

// The kernel computing definition `index` of `program` on its own (reads and writes globals).
Kernel lower_definition(const BoundProgram& program, size_t index);

struct UnfusedOptions {
  // A definition that is a contraction the sm_90a GEMM skeleton runs (src/contract/gemm_skeleton_fit.h)
  // becomes a kernel of one whole `contract` over globals, which the CUDA backend gives to the
  // skeleton (for_gpu); otherwise, and without this option, it is tiled as above.
  bool gemm_skeleton = false;
  // ... and only when the cost model finds a configuration of the skeleton for it (off for `solder
  // plan`, which reports the products that have none).
  bool feasible_only = true;
};

// A kernel of one `contract` covering definition `index` whole (grid of one block in the IR; the
// skeleton tiles it), when the definition is a contraction the GEMM skeleton takes; why not otherwise.
std::optional<Kernel> lower_whole_contraction(const BoundProgram& program, size_t index, std::string* why,
                                              bool feasible_only = true);

KernelProgram lower_unfused(const BoundProgram& program, const UnfusedOptions& options = {});

}  // namespace solder
