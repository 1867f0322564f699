// A whole contraction whose A operand is computed from one staged tensor: the form the GEMM
// skeleton's operand prologue runs (device/solder/gemm/sm90_gemm_prologue.cuh). Plain Kernel IR, no
// new statement: one kernel (a grid of one block, as every whole contraction; the skeleton tiles it)
// whose body is
//
//     fill side_i = identity(op_i)                                     (one f32 register buffer [M] each)
//     reduce op_i side_i[m] += f_i(X[m, k])  over m < M  reducing k < K  (the side reductions)
//     contract(T) dst[m, n…] = scale(m, n…) · Σ_k round_T(A(m, k)) · round_T(B(k, n…))
//
// where A is an expression of X[m, k], of side_i[m] and of inputs indexed by k alone (a k-only factor
// folded into the operand), B a load of a global, and the scale an expression of the rows, columns,
// inputs and side_i[m]. Statements run in order, so the side reductions are complete before the
// contract reads them: exactly what the program computes. The skeleton computes the same values
// (the side reductions over the A tiles it stages, then A converted and rounded to T), up to the
// order of the f32 sums.
//
// The program shapes it takes (definition c = sum(k) …, reading through pointwise definitions that
// are inlined, with their declared rounding):
//   quant_gemm   amax[m] = max(k) |a[m,k]|; aq = a / (amax/448) : f8e4m3; c = Σ aq·w · amax/448
//   rmsnorm_gemm ms[t] = Σ x²/HID; xn = x · rsqrt(ms + eps) · g; y = Σ xn · w
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct PrologueContraction {
  Kernel kernel;                     // fills, side reduces, then the contract (last statement)
  std::vector<size_t> absorbed;      // definitions it computes besides the contraction (indices)
  std::string source;                // X, the staged tensor A's operand is computed from
  std::vector<std::string> notes;    // what was folded where, for the fusion report
};

// The kernel for definition `index`, or nothing with `why`. Every absorbed definition must be an
// intermediate read only by absorbed definitions and the contraction.
std::optional<PrologueContraction> lower_prologue_contraction(const BoundProgram& program, size_t index, std::string* why);

// Whether a kernel is a prologue contraction (its statements are fills and reduces of register
// buffers, then one contract); `sides` receives the side reduces in order.
bool is_prologue_contraction(const Kernel& kernel, std::vector<const ReduceNode*>* sides = nullptr);

}  // namespace solder
