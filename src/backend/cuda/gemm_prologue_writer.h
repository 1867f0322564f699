// The CUDA code generator's writer for prologue contractions (lower/lower_prologue.h) on the GEMM
// skeleton's operand-prologue path (device/solder/gemm/sm90_gemm_prologue.cuh): it writes the prologue
// functor (the side reductions' identity, fold and merge; A's value from the staged element, the
// row's side values and k-only inputs) and the epilogue functor (the scale after the dot, reading the
// row's side values; rounding and the store), chooses the tile (the planner's BM and BN for T, the
// ring depth refitted for A staged in its 16-bit source type) and the launch.
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/gemm_skeleton_writer.h"

namespace solder {

std::optional<GemmSkeletonKernel> write_gemm_prologue_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

}  // namespace solder
