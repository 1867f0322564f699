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
#include <set>
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
// With `epilogue` (the index of a pointwise definition p that reads the contraction c only as
// c[i…] at p's own index i…, see absorbable_epilogue), the kernel computes p instead of c: the
// contract's epilogue is p's body with c's value in place of the loads of c, and c is never stored.
// A contraction the skeleton does not stage runs as the gathered GEMM when fit_gathered_gemm takes it
// (contract/gathered_gemm_fit.h), with the pointwise intermediates its operands read inlined where
// they read only inputs and `stored` tensors (and are not stored themselves).
// With `operand_copies` (kCopiesThatPay), a contraction that neither takes runs whole when conversion copies
// of its operands into T bring it onto the skeleton and pay (contract/operand_copy_fit.h); the
// padded-operands pass (fusion/padded_operands.h) makes the copies. kCopiesThatFit takes them paying or
// not (the planner's look at which operands they would copy); the unfused lowering, which runs no such
// pass, passes kNoCopies.
enum class OperandCopyMode { kNoCopies, kCopiesThatPay, kCopiesThatFit };
std::optional<Kernel> lower_whole_contraction(const BoundProgram& program, size_t index, std::string* why,
                                              bool feasible_only = true, std::optional<size_t> epilogue = std::nullopt,
                                              const std::set<std::string>& stored = {},
                                              OperandCopyMode operand_copies = OperandCopyMode::kCopiesThatPay);

// Whether a whole 3xtf32 contraction inlines the pointwise intermediates its operands read (its split then
// evaluates them; fusion/tf32_split.h): unset or anything but "0". $SOLDER_TF32_SPLIT_INLINE=0 keeps them
// stored and read back as plain loads, the plan before it, for A/B runs.
bool tf32_split_inlines_enabled();

// The MMA type the canonical form of definition `index` over its whole domain takes (canonicalize.h's
// policy at the program's extents); nothing when it is not a contraction.
std::optional<MmaType> whole_contraction_type(const BoundProgram& program, size_t index);

// Whether definition `consumer` can be the epilogue of the contraction `producer`: it has no
// reduction, has p's extents, and loads `producer` only at its own index variables in order; its other
// loads are program inputs or the tensors of `stored` (written by kernels that run before). Why not
// otherwise.
bool absorbable_epilogue(const BoundProgram& program, size_t producer, size_t consumer, std::string* why,
                         const std::set<std::string>& stored = {});

KernelProgram lower_unfused(const BoundProgram& program, const UnfusedOptions& options = {});

}  // namespace solder
