// The CUDA code generator's writer for prologue contractions (lower/lower_prologue.h) on the GEMM
// skeleton's operand-prologue path (device/solder/gemm/sm90_gemm_prologue.cuh): it writes the prologue
// functor (the side reductions' identity, fold and merge; A's value from the staged element, the
// row's side values and k-only inputs) and the epilogue functor (the scale after the dot, reading the
// row's side values; rounding and the store), chooses the tile (the planner's BM and BN for T, the
// ring depth refitted for A staged in its 16-bit source type) and the launch.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "backend/cuda/gemm_skeleton_writer.h"

namespace solder {

// A's operand (with the staged element as the load x_[0] and the side values as s_[i]) written as
// numerator / divisor, where the divisor is the same along a row: it reads no x_, no k and no tensor
// but the side arrays in `sides` (and those only with a pre-sweep), and neither side adds or
// subtracts. The kernel then takes the row-divisor path (device/solder/gemm/row_divide.h).
struct RowDivision {
  Expr numerator, divisor;
};
std::optional<RowDivision> row_division(const Expr& operand, const std::string& k, const std::set<std::string>& sides, bool pre_sweep);

std::optional<GemmSkeletonKernel> write_gemm_prologue_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

}  // namespace solder
