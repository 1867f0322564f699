// The matrix products of a Kernel IR program, as planner problems: every kernel of one whole
// `contract` that the GEMM skeleton takes (src/contract/gemm_skeleton_fit.h), which the unfused
// lowering emits with UnfusedOptions::gemm_skeleton (`solder plan FILE` lowers so). Extents come from
// the globals, the MMA type is the contract's T, the epilogue's bytes are its loaded scale and bias
// elements amortised over the outputs. A paired (dual-B) contract is one product of 2N columns, as
// choose_skeleton_config models it.
#pragma once

#include <vector>

#include "ir/expr_visitor.h"
#include "kernel/kernel_ir.h"
#include "plan/gemm_problem.h"

namespace solder {

std::vector<GemmProblem> gemm_problems(const KernelProgram& program);

}  // namespace solder
