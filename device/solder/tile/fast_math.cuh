// Fast transcendental functions for tile epilogues (score modifiers, softmax), one MUFU instruction
// each. Relative error about 2^-11 (tanh) — below the 16-bit inputs' rounding, which is what the
// tensor-core kernels that use them are verified against.
#pragma once

namespace solder::tile {

__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace solder::tile
