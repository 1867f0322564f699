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

// exp(a - b) as FlashAttention computes it: one FFMA (a · log2 e − b · log2 e; the product b · log2 e
// is common to a row and hoisted by the compiler) and ex2.approx. Special values as exp(a - b):
// a = -inf with b finite gives 0; a - b undefined (inf - inf) gives NaN.
__device__ __forceinline__ float fast_exp_diff(float a, float b) {
  constexpr float kLog2e = 1.4426950408889634f;
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(fmaf(a, kLog2e, -b * kLog2e)));
  return y;
}

// sigmoid(x) = 1 / (1 + e^-x) as ex2.approx of x · -log2 e and rcp.approx (four instructions: FMUL, MUFU.EX2,
// FADD, MUFU.RCP; the precise form, solder::sigmoid, is ≈ 20 with a slow-path branch). Relative error
// ≈ 2^-21 for |x| ≤ 16 (ex2.approx's 2^-22.5 and the product's rounding scaled by |x|, rcp.approx's 1 ulp),
// far below a 16-bit output's rounding (2^-9). Limits as sigmoid: x → -inf gives 0 (e^-x = inf,
// rcp(inf) = 0), x → +inf gives 1, NaN gives NaN.
__device__ __forceinline__ float fast_sigmoid(float x) {
  constexpr float kMinusLog2e = -1.4426950408889634f;
  float e, y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * kMinusLog2e));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(1.0f + e));
  return y;
}

// 2^x in one ex2.approx (flush-to-zero): the softmax form with log2 e and the score scale folded into one
// FFMA by the caller, exp(c·(s − m)) = fast_exp2(s · c log2 e − m · c log2 e). fast_exp2(-inf) = 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace solder::tile
