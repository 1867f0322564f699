// Verifying a backend's outputs against the float64 reference.
//
// The error of an output is ‖out − ref‖₂ / ‖ref‖₂ over the elements where the reference is finite
// (‖ref‖₂ taken as 1 when it is 0). Beyond that error:
//   * NaN never passes: an output NaN where the reference has a number fails, and a reference NaN
//     must be matched by a NaN (masked rows give exactly the reference's answer);
//   * infinities must match in place and sign;
//   * integer outputs (indices) must match exactly, except for at most 0.1% of the elements, which
//     near-ties between values can flip in float32 arithmetic.
// The tolerance of an output o (docs/architecture.md, "Verification tolerance") is
//
//   tol(o) = max(base(o), c · u · sqrt(L(o)))        c = 16, u = 2^-24 (float32's unit roundoff)
//
// base(o): 1e-5 when every tensor o depends on (inputs included) is f32, i32 or bool; 1e-2 when one
// of them is bf16 or f16; 5e-2 when one is fp8 (design.md).
// L(o): the length of the longest chain of float32 roundings that produces o, a definition at a
// time: L(d) = ops(d) + R(d) + max over the tensors t that d reads of L(t) (0 for inputs), where
// ops(d) counts the arithmetic nodes of d's body (unary, binary, select, cast) and R(d) is its
// reduction's length (the product of its r-extents) for sum and prod, 0 otherwise (pointwise
// definitions; max, min, argmax, argmin and topk select a value and round nothing).
// Rounding errors of a chain of L float32 operations on well-conditioned data grow like u·sqrt(L)
// (Higham, "Accuracy and Stability of Numerical Algorithms", ch. 2-4, probabilistic bound); c
// covers correlated errors (a 1000-term sum of equal values reaches about 5·u·sqrt(L)). The data's
// conditioning (cancellation, Σ|x| / |Σx|) is not estimated: an ill-conditioned program can still
// fail in float32, and that is reported, not hidden.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/host_tensor.h"
#include "ir/verifier.h"

namespace solder {

struct OutputCheck {
  std::string name;
  double error = 0;       // relative L2 error over finite reference elements
  double tolerance = 0;
  int64_t nan_mismatches = 0;     // NaN in one and not the other
  int64_t inf_mismatches = 0;
  int64_t index_mismatches = 0;   // integer outputs
  int64_t unwritten = 0;          // elements that still hold the poison value (executor outputs)
  bool ok = false;
  std::string reason;             // why it failed ("" when ok)
};

// The rule above, with its parts (shown by `solder run --json`).
struct Tolerance {
  double base = 1e-5;
  double chain_length = 0;  // L(o)
  double value = 1e-5;      // max(base, c · u · sqrt(L))
};
Tolerance output_tolerance(const BoundProgram& program, const std::string& output);
// The largest tolerance over the program's outputs.
double tolerance_for(const BoundProgram& program);

// Where an output is NaN or infinite (reported even when the reference agrees).
struct NonFinite {
  int64_t nans = 0, positive_infinities = 0, negative_infinities = 0;
  std::vector<int64_t> first_nans, first_infinities;  // flat indices, the first few of each
};
NonFinite find_non_finite(const HostTensor& t, size_t positions = 4);
// "[2, 7]" for a flat index of a tensor of shape `shape`.
std::string index_text(const std::vector<int64_t>& shape, int64_t flat);

OutputCheck compare_output(const HostTensor& got, const HostTensor& reference, double tolerance);

}  // namespace solder
