// The CUDA code generator's writer for the transposing conversion copies (src/fusion/padded_operands.h):
// a kernel that transposing_copy_kernel built from one load src[k, s] of a global [K, S]
// (transposing_copy_of reads it back) runs as one 64 × 64 tile per block of 256 threads, with 16-byte
// vectors on both sides: each thread reads 16 bytes of a row of src (V_in consecutive s at one k) into a
// float tile [64][65] in dynamic shared memory, and, after the barrier, writes 16 bytes of a row of P
// (V_out consecutive k at one s), each element stored by solder::store into P's dtype, as the Kernel IR's
// tile store rounds it. The columns k ≥ K of P are zeros. The generic writer emits the same kernel one
// element per thread and step.
//
// It takes a copy whose rows of src are whole 16-byte vectors (S · |src| a multiple of 16): each vector then
// lies wholly inside or wholly outside the copied tile's bounds; the others stay with the generic writer.
// $SOLDER_TRANSPOSE_COPIES=generic leaves every transposing copy to the generic writer (A/B runs).
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct TransposeCopyWriterKernel {
  std::string source;
  GeneratedKernel info;
};

std::optional<TransposeCopyWriterKernel> write_transpose_copy_kernel(const KernelProgram& program, const Kernel& kernel);

// Whether $SOLDER_TRANSPOSE_COPIES leaves the transposing copies to this writer (unset or anything but "generic").
bool transpose_copy_writer_enabled();

}  // namespace solder
