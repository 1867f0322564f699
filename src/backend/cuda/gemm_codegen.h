// Contractions on tensor cores in the generic writer (internal to src/backend/cuda).
//
// A `reduce sum C[..] (+)= A[..] * B[..]` whose summand is the plain product of two 16-bit tiles
// (bf16 or f16, the same) over one reduced axis k, with C an f32 tile, is a matrix product
// C[m, n] (+)= Σ_k A[m, k] · B[k, n]: the generic writer runs it with the block-wide mma.sync
// contraction of device/solder/tile/block_gemm.cuh instead of a scalar loop. Its meaning does not
// change: the operands are already rounded to their 16-bit dtype in the IR, products are exact in
// f32 and the sum is f32 (in another order than the scalar loop's, as for cooperative reduces).
// f32 operands stay scalar (no TF32), as does every summand that is not such a product; the
// generated source then says which rule refused it.
//
// Two forms (gemm_codegen.cpp):
//   the loop   for v { copy A_tile = a[..]; copy B_tile = b[..]; reduce sum C += A_tile * B_tile }
//              where the copies are the tiles' only writers and the reduce their only reader: the
//              tiles are staged as 16-bit values (swizzled, cp.async, several buffers ahead) and the
//              accumulators stay in registers across the loop; C is written once after it;
//   one reduce on the tiles as the generic writer keeps them (float in shared memory): fragments
//              packed from the floats (exact: each is a value of the 16-bit dtype).
#pragma once

#include <optional>
#include <string>

#include "kernel/kernel_ir.h"

namespace solder::generic {

// C[m, n] (+)= Σ_k A[m, k] · B[k, n] over tiles of the kernel. Unit axes index nothing; each
// operand's element (i, j) sits at i * stride_i + j * stride_j of its tile (row-major over its shape).
struct Contraction {
  std::string c, a, b;
  DType type = DType::bf16;  // of A and B
  int64_t m = 1, n = 1, k = 1;
  bool b_k_major = false;    // B's depth stride is 1 (stored [n][k]); otherwise its column stride is
  int64_t a_row = 0, a_depth = 0, b_depth = 0, b_column = 0, c_row = 0, c_column = 0;
  bool accumulate = false;   // C += (otherwise C =)
};

struct ContractionMatch {
  std::optional<Contraction> contraction;
  std::string refusal;  // the rule that refused it, when contraction is empty
};

// Whether `reduce` (a statement of `kernel`) is a contraction the tensor cores run, or the rule that
// refuses it.
ContractionMatch match_contraction(const ReduceNode& reduce, const Kernel& kernel);

}  // namespace solder::generic
