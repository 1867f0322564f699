// Random program inputs, reproducible from a seed on every machine.
//
// Each input is drawn from its declared distribution (docs/language.md, "Inputs") with a
// generator seeded from (seed, input name), so adding an input does not change the others, then
// rounded to its dtype. Defaults by dtype: floats normal(0, 1), i32 randint(0, 16), bool
// bernoulli(0.5). The generator is our own (splitmix64 + Box–Muller), not the standard library's
// distributions, whose output differs between implementations.
#pragma once

#include <cstdint>

#include "backend/cpu/host_tensor.h"
#include "ir/verifier.h"

namespace solder {

TensorSet make_inputs(const BoundProgram& program, uint64_t seed);

}  // namespace solder
