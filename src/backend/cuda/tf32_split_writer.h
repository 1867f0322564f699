// The CUDA code generator's writer for the 3xTF32 split kernels (src/fusion/tf32_split.h): a kernel that
// split_tf32x3_operands built (tf32_split_kernel_of reads it back) runs as device/solder/gemm/tf32_split.cuh's
// tf32_split_tile, one 32 × 32 tile per block of 256 threads, the tile from the linear block index (batch ×
// row tiles × k tiles, k fastest, as the Kernel IR's grid), instead of the generic writer's copy and map. The
// same values: the tile's hi and lo are round_tf32 as the Kernel IR's.
//
// $SOLDER_TF32_SPLIT=generic leaves the kernels to the generic writer (A/B runs).
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct Tf32SplitWriterKernel {
  std::string source;
  GeneratedKernel info;
};

std::optional<Tf32SplitWriterKernel> write_tf32_split_kernel(const KernelProgram& program, const Kernel& kernel);

// Whether $SOLDER_TF32_SPLIT leaves the split kernels to this writer (unset or anything but "generic").
bool tf32_split_writer_enabled();

}  // namespace solder
