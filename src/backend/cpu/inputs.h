// Random program inputs, reproducible from a seed on every machine.
//
// Each input is drawn from its declared distribution (docs/language.md, "Inputs") with a
// generator seeded from (seed, input name), so adding an input does not change the others, then
// rounded to its dtype. Defaults by dtype: floats normal(0, 1), i32 randint(0, 16), bool
// bernoulli(0.5). The generator is our own (splitmix64 + Box–Muller), not the standard library's
// distributions, whose output differs between implementations.
#pragma once

#include <cstdint>
#include <optional>

#include "backend/cpu/host_tensor.h"
#include "ir/verifier.h"

namespace solder {

TensorSet make_inputs(const BoundProgram& program, uint64_t seed);

// One input, drawn as make_inputs draws it.
HostTensor make_input(const TensorInfo& info, uint64_t seed);

// An input as the GPU draws it (device/solder/random_inputs.cuh: the fields of DrawSpec, whose
// numbering of distributions and dtypes they use): the distribution with the defaults by dtype
// applied, its two parameters, the dtype, and the counter's start for (seed, name). Drawn from it,
// element for element, the input holds make_input()'s values (solder bench draws its inputs so).
struct InputDraw {
  int distribution = 0;
  int dtype = 0;
  double p0 = 0, p1 = 0;
  uint64_t stream = 0;
};
// std::nullopt for an input the GPU does not draw: sorted_randint (each row is sorted after the draw).
std::optional<InputDraw> input_draw(const TensorInfo& info, uint64_t seed);

}  // namespace solder
