// Whether a whole contract runs on the GEMV stream (the CUDA backend's gemv_stream_writer.h), and as
// which problem.
//
// A matrix-vector product — decode's projections, one token's hidden state times a weight — is
// memory-bound: each weight element is read once and used once. The sm_90a GEMM skeleton needs
// M, N ≥ 64 and the fused kernels stage the weight tile through shared memory as float and loop over
// it per output point; the GEMV stream instead reads the weight W once, 16 bytes per thread, straight
// into registers, with the vector held in shared memory, and splits K across the blocks of a cluster,
// merged through distributed shared memory. The contract is read as
//     C[n] = scale · Σ_k V(k) · W(k, n) + bias,  then the epilogue,
// with n the output axes (the columns when the rows have one point in all, else the rows when the
// columns have one), flattened in the destination's order; k the reduced axes flattened in the
// contract's order; V the operand on the other side (one point along it: the vector).
//
// It fits when: there is one product term, no `where`, no guard, no accumulation and no paired
// product; T is bf16 or f16 and each operand is a plain load of a global of exactly T's dtype (so the
// MMA input rounding changes nothing); the batch axes and the vector's side have one point in all;
// W's index is, per position, an integer constant or one output or reduced axis, each output and
// reduced axis exactly once; its last position is the innermost output axis, whose extent is a
// multiple of 8 (one thread's 8 contiguous outputs are one 16-byte load); V's index is, per
// position, an integer constant or one reduced axis or an axis of extent 1. The scale, the bias, the epilogue and the
// destination's index are any expressions of the domain's axes (and the epilogue of `value`).
//
// SOLDER_GEMV=0 turns it off: refused with the reason "off by SOLDER_GEMV=0" (the product then stays
// in the fused kernels, as before the GEMV stream existed: the A/B knob).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

struct GemvProblem {
  Expr vector, matrix;             // V(k) and W(k, n): the LoadNodes of the product term
  std::vector<Axis> output_axes;   // n, in the destination's order (the innermost last)
  std::vector<Axis> unit_axes;     // the other kept axes, one point in all (the vector's side, batch)
  std::vector<Axis> reduce_axes;   // K, in the contract's order
  int64_t n = 1, k = 1;
  // Element strides of W along each output and each reduced axis (row-major in W's shape), and of V
  // along each reduced axis (0 where V does not use it), and the element offsets of the constant
  // positions of each (the part of the address no axis moves).
  std::vector<int64_t> matrix_output_strides, matrix_reduce_strides, vector_reduce_strides;
  int64_t matrix_base = 0, vector_base = 0;
  DType type = DType::f16;         // T, the dtype of both operands
};

struct GemvFit {
  std::optional<GemvProblem> problem;
  std::string refusal;
};

GemvFit fit_gemv(const ContractNode& contract, const std::vector<GlobalTensor>& globals);

// Whether SOLDER_GEMV leaves the GEMV stream on (unset or any value but "0").
bool gemv_enabled();

}  // namespace solder
