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
//
// The byte form (the default; $SOLDER_TRANSPOSE_COPIES=tile keeps the float tile: bench/NOTES.md, fp8-tcopy and the
// twenty-second session's integrator: the copy kernel alone 9.44 us against the float tile's 14.40 by ncu at 4096^2,
// mm_e4m3_nn at 4096^3 faster by its median in three of four rounds and by its fastest replay in all four): a copy of 1-byte elements into the same dtype (mm_e4m3_nn's e4m3 b) is a bit copy (each value of
// P is src's value: the IR's tile store of an e4m3 value into e4m3 is exact), so it moves bytes, not floats, and a
// block takes kTransposeByteSides s × kTransposeCopyTile k (16 KB; the IR's 64 × 64 tiles are the same copy,
// grouped four to a block): each thread reads 16 bytes of 4 consecutive rows k of src (4 vectors in flight),
// byte-permutes (__byte_perm) them into 16 words of 4 k bytes, one for each of its 16 s, and stores them into a
// word tile [256 s][16] whose rows s and s + 16 (written by one warp at once) lie in opposite bank halves (row s
// at s ^ ((s >> 4) & 1)): no bank conflicts either way; then each thread writes 4 vectors of 16 k of P's rows.
// Unset, =tile or anything else: the float tile above for these copies too (main's form).
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

// Whether 1-byte copies into the same dtype take the byte form (unset or anything but "tile"; "0" and "generic"
// never reach this writer's transposing copies).
bool transpose_copy_byte_form_enabled();

// The byte form's block: this many s (× kTransposeCopyTile k).
constexpr int64_t kTransposeByteSides = 256;

}  // namespace solder
