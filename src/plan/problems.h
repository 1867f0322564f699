// The matrix products of a Kernel IR program, as planner problems.
//
// Provisional analysis (until the canonicalizer's `contract` statements replace it): every `reduce sum`
// over one reduced axis whose summand is a product of factors, exactly two of which are loads of global
// tensors that use the reduced variable (possibly under a cast: the cast's dtype is the operand's type),
// the others not using it (scales, constants; loaded scales count as epilogue bytes). The two loads are
// A and B: an index position of A that shares a variable with one of B is a batch dim; the other
// positions of A are M, of B are N; the position using the reduced variable is K. Extents come from the
// globals' shapes, so the problem is the whole product whatever tile the kernel computes per block. A is
// the operand that shares a variable with the destination's first index. Run it on the unfused lowering
// (one kernel per definition; `solder plan FILE` does), where every operand is a global.
#pragma once

#include <vector>

#include "kernel/kernel_ir.h"
#include "plan/gemm_problem.h"

namespace solder {

std::vector<GemmProblem> gemm_problems(const KernelProgram& program);

}  // namespace solder
