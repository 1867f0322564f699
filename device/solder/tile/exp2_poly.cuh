// 2^x on the FMA pipe, without the MUFU: the softmax's exponential for the fraction of weights that the
// attention row state takes off the special-function unit (functors.cuh, kExp2Emulated).
//
//   x' = max(x, -127)                    (NaN stays NaN: max.NaN)
//   t  = x' + (1.5 · 2^23 + 127)         (one FADD rounds x' to the nearest integer j; the low bits of t's
//                                         encoding then hold j + 127, the biased exponent of 2^j)
//   f  = x' − (t − (1.5 · 2^23 + 127))   (two FADD, both exact: f = x' − j in [−0.5, 0.5])
//   q  = 1 + f·(c1 + f·(c2 + f·(c3 + f·c4)))   (four FFMA)
//   2^x ≈ q · 2^j, with 2^j = the float whose bits are (t's bits) << 23 (one shift; 0.0 for j = −127)
//         (one multiplication with flush to zero, as ex2.approx.ftz)
//
// Ten instructions (one FMNMX, three FADD, four FFMA, one shift, one FMUL) where ex2.approx.ftz is one
// MUFU.EX2; none of them on the MUFU (XU) pipe.
//
// The polynomial is the minimax fit of 2^f on [−0.5, 0.5] in relative error with the constant term fixed
// at 1 (so that f = 0 gives exactly 1), its coefficients rounded to f32. Bounds, checked against exp2 in
// double on a stride of the f32 values on the host (tests/unit/runtime/exp2_poly_test.cpp) and on every
// f32 value on the GPU (tests/gpu/attention_skeleton/test_sm90_exp2_poly.cu):
//   - relative error ≤ 3.0e-6 (2^-18.3) for −126 ≤ x ≤ 127, against ex2.approx's ≈ 2^-22: far under the
//     rounding of a weight to bf16 (2^-9) or f16 (2^-11);
//   - x < −126 gives +0, as ex2.approx.ftz flushes results under 2^-126 (j = −127 scales by 0.0; j = −126
//     with f < 0 gives q · 2^-126 < 2^-126, flushed by the multiplication);
//   - −inf gives +0 (x' = −127: t encodes j = −127, whose 2^j is 0.0); NaN gives NaN; −0 and subnormal x
//     give 1;
//   - valid for x ≤ 127 (the softmax's arguments are ≤ 0 up to rounding); larger x give wrong values.
// The host and the device compute the same bits (the same correctly rounded operations in the same order).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOLDER_EXP2_POLY_HD __host__ __device__ __forceinline__
#else
#define SOLDER_EXP2_POLY_HD inline
#endif

namespace solder::tile {

namespace exp2_poly_detail {

// 1.5 · 2^23 + 127: x + this lies in [2^23, 2^24) for x in [−127, 127], where the f32 spacing is 1.
inline constexpr float kRoundShift = 12583039.0f;
// 2^f ≈ 1 + f·(c1 + f·(c2 + f·(c3 + f·c4))) on [−0.5, 0.5] (minimax in relative error, f32 coefficients).
inline constexpr float kC1 = 0x1.62e12ep-1f;
inline constexpr float kC2 = 0x1.ec036cp-3f;
inline constexpr float kC3 = 0x1.c9fc30p-5f;
inline constexpr float kC4 = 0x1.3a05f8p-7f;

SOLDER_EXP2_POLY_HD unsigned bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  unsigned u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
#endif
}

SOLDER_EXP2_POLY_HD float float_of(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// max(x, lo), NaN when x is NaN (max.NaN.f32; fmaxf would return lo).
SOLDER_EXP2_POLY_HD float max_nan(float x, float lo) {
#ifdef __CUDA_ARCH__
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(x), "f"(lo));
  return y;
#else
  return x != x ? x : (x > lo ? x : lo);
#endif
}

// a · b with a result under 2^-126 in magnitude flushed to (signed) zero (mul.ftz.f32).
SOLDER_EXP2_POLY_HD float mul_ftz(float a, float b) {
#ifdef __CUDA_ARCH__
  float y;
  asm("mul.ftz.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
#else
  const float y = a * b;
  return (y < 0x1p-126f && y > -0x1p-126f) ? y * 0.0f : y;
#endif
}

SOLDER_EXP2_POLY_HD float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

SOLDER_EXP2_POLY_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

}  // namespace exp2_poly_detail

// 2^x for x ≤ 127, by range reduction and a degree-4 polynomial on the FMA pipe (the top of this file).
SOLDER_EXP2_POLY_HD float exp2_poly(float x) {
  using namespace exp2_poly_detail;
  const float clamped = max_nan(x, -127.0f);
  const float shifted = add_rn(clamped, kRoundShift);               // j + 127 in the low bits
  const float f = add_rn(clamped, -add_rn(shifted, -kRoundShift));  // x' − j, exact
  float q = fma_rn(kC4, f, kC3);
  q = fma_rn(q, f, kC2);
  q = fma_rn(q, f, kC1);
  q = fma_rn(q, f, 1.0f);
  const float scale = float_of(bits_of(shifted) << 23);  // 2^j (0.0 for j = −127; −inf for a NaN x)
  return mul_ftz(q, scale);
}

}  // namespace solder::tile

#undef SOLDER_EXP2_POLY_HD
