// How the CUDA backend runs `contract` statements today (internal to src/backend/cuda): each is
// rewritten into the `reduce sum` the writers know, with the contract's operand rounding made
// explicit, before the tensor-core emitter and the generic writer see the kernel.
//
//   contract(T) dst (+)= scale · Σ_R Σ_t round_T(a_t) · round_T(b_t) + bias
//
// becomes, with cast_T(x) = cast(x, T) where x is not already exact in T (T = bf16, f16 or fp8;
// an operand of a tf32 or f32 contract is never rounded: tf32 is only chosen for operands exact in it;
// a 3xtf32 contract's product a · b is written as its three tf32 products,
// round_tf32(a) · lo(b) + lo(a) · round_tf32(b) + round_tf32(a) · round_tf32(b), lo(x) = round_tf32(x − round_tf32(x))):
//   * without bias, and with no scale, or (for the attention emitter's view, cast_computed false) a
//     scale free of variables and loads (attention's rsqrt(D)):
//       reduce sum dst (+)= (Σ_t cast_T(a_t) · cast_T(b_t)) · scale
//     The constant scale multiplies each term (one more float32 rounding per term than the
//     contract's single multiplication; exact for a power of two), and the tensor-core emitter
//     moves it after the dot product itself;
//   * otherwise (a row, column or per-element scale, a bias, or any scale in the generic writer's
//     view) the dot product first, into dst when dst is an f32 buffer that is not accumulated onto
//     (or only onto the 0 of a fill just before), else into a new f32 register tile over the domain,
//     then the epilogue:
//       reduce sum dot = Σ_t cast_T(a_t) · cast_T(b_t);  map dst = (dst +) dot · scale + bias
//     which is exactly the contract.
#pragma once

#include "kernel/kernel_ir.h"

namespace solder {

// With `cast_computed` false, an operand that is computed (neither a load nor a cast) is left
// unrounded: the view for the tensor-core attention emitter, which rounds its P operand to the input
// type itself (the contract's T), and recognises P by its expression.
KernelProgram contracts_as_reduces(const KernelProgram& program, bool cast_computed = true);

}  // namespace solder
