// 2^x on the FMA pipe: the software exponential the attention row state (functors.cuh, OnlineSoftmax)
// takes for a fixed share of its weights, so that the MUFU unit (ex2.approx: 16 results per clock and
// SM) and the FP32 pipe (128 per clock and SM) share the softmax's exponentials.
//
// Like config.cuh this header compiles with nvcc, NVRTC and a plain host C++ compiler: the host form
// runs the same float operations in the same order (tests/unit/backend/attention_exp2_fma_test.cpp checks
// it against 2^x in double; the device test checks that the device form gives the host form's bits).
//
// For x ≤ 0 (the softmax's argument after the maximum is subtracted; any x < 128 works):
//     x'    = max(x, −127)                      NaN stays NaN, −inf becomes −127
//     t     = RD(x' + 1.5·2²³)                  floor(x') in t's low mantissa bits (exact: ulp 1 there)
//     j     = t − 1.5·2²³                       floor(x'), exact
//     f     = x' − j                            in [0, 1]: exact, or within 2^-25 where |x'| < 1/2
//     p     = ((c3·f + c2)·f + c1)·f + 1        three FFMA; p(0) = 1 exactly
//     2^j   = the float with bits (t << 23) + bits(1.0)   exact for j ≥ −126, +0 at j = −127
//     2^x  ≈ p · 2^j                            one FMUL (NaN · 2^j stays NaN)
// c1..c3 minimise the relative error of p against 2^f on [0, 1] with the constant term held at 1
// (Lawson iterations on a dense grid, rounded to float): max |p(f) / 2^f − 1| ≈ 8.56e-5 ≈ 2^-13.5. With
// the float roundings the measured maximum over every float of [−1, 0] and of [−64, −63)
// (bench/attention/exp2_fma_check.cpp) is 8.566e-5, under kExp2FmaMaxRelativeError. Against P's rounding
// to 16 bits before P·V that is ≈ 1/23 of bf16's half-ulp (2^-9 relative at most) and ≈ 1/6 of f16's
// (2^-11); ex2.approx.ftz.f32's own error is ≈ 2^-22. Below 2^-126 (x < −126) the result is in
// [0, 2^-126), as ex2.approx.ftz's flushed denormals are, and −inf gives exactly +0 (masked scores).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOLDER_EXP2_FMA_HD __host__ __device__ __forceinline__
#else
#define SOLDER_EXP2_FMA_HD inline
#endif
#if !defined(__CUDACC_RTC__)
#include <cmath>
#include <cstdint>
#include <cstring>
#endif

namespace solder::attention {

inline constexpr float kExp2FmaC1 = 0x1.63e65ap-1f;  // 0.69511682
inline constexpr float kExp2FmaC2 = 0x1.d23776p-3f;  // 0.22764485
inline constexpr float kExp2FmaC3 = 0x1.3baaccp-4f;  // 0.07706718
// A bound of |exp2_fma(x) / 2^x − 1| over x in [−126, 0] (measured: 8.566e-5).
inline constexpr double kExp2FmaMaxRelativeError = 9.0e-5;

SOLDER_EXP2_FMA_HD float exp2_fma(float x) {
#if defined(__CUDA_ARCH__)
  float clamped;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(clamped) : "f"(x), "f"(-127.0f));
  const float shifted = __fadd_rd(clamped, 12582912.0f);  // 1.5 · 2^23 + floor(x')
  const float whole = shifted - 12582912.0f;
  const float fraction = clamped - whole;
  float p = fmaf(kExp2FmaC3, fraction, kExp2FmaC2);
  p = fmaf(p, fraction, kExp2FmaC1);
  p = fmaf(p, fraction, 1.0f);
  const float scale = __int_as_float(static_cast<int>((static_cast<unsigned>(__float_as_int(shifted)) << 23) + 0x3f800000u));
  return p * scale;
#else
  // The host form: the same operations (floor for the round-down add, which it equals on [−127, 128)).
  if (std::isnan(x)) return x;
  const float clamped = x > -127.0f ? x : -127.0f;
  const float whole = std::floor(clamped);
  const float shifted = whole + 12582912.0f;
  const float fraction = clamped - whole;
  float p = std::fmaf(kExp2FmaC3, fraction, kExp2FmaC2);
  p = std::fmaf(p, fraction, kExp2FmaC1);
  p = std::fmaf(p, fraction, 1.0f);
  uint32_t shifted_bits;
  std::memcpy(&shifted_bits, &shifted, 4);
  const uint32_t scale_bits = (shifted_bits << 23) + 0x3f800000u;
  float scale;
  std::memcpy(&scale, &scale_bits, 4);
  return p * scale;
#endif
}

// Whether score i of a thread's accumulator fragment (columns 8·(i / 4) + lane's + i % 2 of a key tile)
// takes exp2_fma when `eighths` of each eight of the thread's columns do: its column index
// j = 2·(i / 4) + i % 2 has j mod 8 < eighths. Both rows of a column go the same way.
SOLDER_EXP2_FMA_HD constexpr bool exp2_on_fma(int i, int eighths) { return (2 * (i / 4) + i % 2) % 8 < eighths; }

}  // namespace solder::attention
