// Contractions on tensor cores in the generic writer (internal to src/backend/cuda).
//
// A `reduce sum C[..] (+)= A * B` over one reduced axis k whose summand is the product of two
// operands, each either a tile or an element-wise expression of tiles, is a matrix product
// C[m, n] (+)= Σ_k A[m, k] · B[k, n]: the generic writer runs it with the block-wide mma.sync
// contraction of device/solder/tile/block_gemm.cuh instead of a scalar loop, when the tensor cores
// compute exactly the terms the scalar loop computes:
//   * every operand value is exactly a value of the mma input type T (bf16 or f16): a load of a
//     16-bit tile, or an expression the program itself rounds, `cast(.., f16 | bf16 | f8e4m3 | f8e5m2)`,
//     or a load of an fp8 tile. Every fp8 value is exact in both 16-bit types (e4m3: 3 significand
//     bits, 2^-9 ≤ |x| ≤ 448; e5m2: 2 bits, 2^-16 ≤ |x| ≤ 57344; f16 reaches 2^-24 and 65504, bf16
//     has f32's exponent range), so fp8 operands run as f16, or as the other operand's 16-bit type.
//     An operand whose value is not so rounded (an f32 tile, `x * g` in f32) stays scalar: rounding it
//     for the tensor cores would change the result;
//   * products of two values of T are exact in f32, and the sum is f32 (in another order than the
//     scalar loop's, as for cooperative reduces);
//   * C is an f32 tile, or a 16-bit tile rounded once after the reduce, as the scalar loop rounds it.
//     A 16-bit C with fewer than 16 rows and no computed operand stays scalar (the rule "rounded
//     few-row product"): the mma pads the rows, saves no evaluation, and adds a round trip of C
//     through its float tile at each reduce (llama_decode's projections were slower so).
// Every other summand stays scalar; the generated source then says which rule refused it.
//
// Operands (gemm_contraction_match.cpp decides, gemm_codegen.cpp writes):
//   a tile      read where the generic writer keeps it (float in shared memory), fragments packed
//               from the floats (exact: each is a value of T);
//   computed    an expression, or an fp8 tile: evaluated once per element into a 16-bit tile in the
//               swizzled layout block_gemm reads (ldmatrix), then read from there.
// Two forms of the writer:
//   the loop   for v { copy A_tile = a[..]; copy B_tile = b[..]; reduce sum C += A_tile * B_tile }
//              with two 16-bit tiles, C f32, the copies the tiles' only writers and the reduce their
//              only reader: the tiles are staged as 16-bit values (swizzled, cp.async, several
//              buffers ahead) and the accumulators stay in registers across the loop; C is written
//              once after it (a 16-bit C is rounded at every step of the loop: not this form);
//   one reduce the operands as above, C written (and a 16-bit C rounded) after the mma.
#pragma once

#include <optional>
#include <string>

#include "kernel/kernel_ir.h"

namespace solder::generic {

// C[m, n] (+)= Σ_k A[m, k] · B[k, n] over tiles of the kernel. Unit axes index nothing; a tile
// operand's element (i, j) sits at i * stride_i + j * stride_j of its tile (row-major over its shape).
struct Contraction {
  std::string c, a, b;       // tile names (for a computed operand: its expression, printed)
  DType type = DType::bf16;  // the mma input type of A and B
  DType result_type = DType::f32;  // of C: f32, or 16-bit (rounded after the reduce)
  int64_t m = 1, n = 1, k = 1;
  bool b_k_major = false;    // B's depth stride is 1 (stored [n][k]); otherwise its column stride is
  int64_t a_row = 0, a_depth = 0, b_depth = 0, b_column = 0, c_row = 0, c_column = 0;  // tile operands
  bool accumulate = false;   // C += (otherwise C =)
  // Computed operands: the expression, and the axis variables of its rows (A) or columns (B) ("" for
  // a unit axis) and of its depth.
  bool a_computed = false, b_computed = false;
  Expr a_value, b_value;
  std::string row_axis, column_axis, depth_axis;
};

struct ContractionMatch {
  std::optional<Contraction> contraction;
  std::string refusal;  // the rule that refused it, when contraction is empty
};

// Whether `reduce` (a statement of `kernel`) is a contraction the tensor cores run, or the rule that
// refuses it.
ContractionMatch match_contraction(const ReduceNode& reduce, const Kernel& kernel);

}  // namespace solder::generic
