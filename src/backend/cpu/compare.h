// Verifying a backend's outputs against the float64 reference.
//
// The error of an output is ‖out − ref‖₂ / ‖ref‖₂ over the elements where the reference is finite
// (‖ref‖₂ taken as 1 when it is 0). Beyond that error:
//   * NaN never passes: an output NaN where the reference has a number fails, and a reference NaN
//     must be matched by a NaN (masked rows give exactly the reference's answer);
//   * infinities must match in place and sign;
//   * integer outputs (indices) must match exactly, except for at most 0.1% of the elements, which
//     near-ties between values can flip in float32 arithmetic.
// The tolerance depends on the dtypes involved (design.md): f32 1e-5, any bf16/f16 input, output
// or intermediate 1e-2, any fp8 5e-2; a program whose reductions run over more than 2^16 points
// in f32 gets 1e-4 instead of 1e-5.
#pragma once

#include <cstdint>
#include <string>

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

double tolerance_for(const BoundProgram& program);

OutputCheck compare_output(const HostTensor& got, const HostTensor& reference, double tolerance);

}  // namespace solder
