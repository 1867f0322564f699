// The float64 reference interpreter: the definition of what every program means (program.h).
//
// Every definition is evaluated in order over its whole p-space, in float64, and each value is
// rounded to its tensor's dtype when written. It is deliberately simple — a direct transcription
// of the semantics — and parallel over the p-space.
#pragma once

#include <functional>
#include <string>

#include "backend/cpu/host_tensor.h"
#include "ir/verifier.h"

namespace solder {

struct ReferenceOptions {
  // Called now and then with (definition index, fraction of the whole program done).
  std::function<void(int, double)> progress;
};

// Returns every tensor of the program: the inputs and every definition's targets.
TensorSet run_reference(const BoundProgram& program, const TensorSet& inputs, const ReferenceOptions& options = {});

// Scalar evaluations the reference will make (sum over definitions of p-points × r-points), to
// warn before long runs.
double reference_work(const BoundProgram& program);

}  // namespace solder
