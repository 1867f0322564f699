// Division by a per-row divisor through its reciprocal, with an exactness window (the operand-prologue
// path of the GEMM skeleton, sm90_gemm_prologue.cuh; plain C++ too, so the host unit test checks the
// same arithmetic).
//
// The program writes A(m, k) = round_T(n / d) with d the same for a whole row (quant_gemm: d = amax/448,
// T = e4m3). The kernel computes q = RN(n · r) with r = RN(1/d) instead of the IEEE quotient RN(n / d);
// the result is used only when it provably rounds to the same T value:
//   |q − RN(n/d)| ≤ 3·2⁻²⁴·|q| (two roundings of n·r, one of n/d), so RN(n/d) lies between
//   lo = RN(q·(1 − 2⁻²¹)) and hi = RN(q·(1 + 2⁻²¹)) (each at least 7·2⁻²⁴·|q| away from q).
//   round_T is monotonic: if round_T(lo) == round_T(hi), every value between them, RN(n/d) included,
//   rounds to it. Otherwise (a T rounding boundary within ±2⁻²¹ of q: about one element in 2¹⁶ for a
//   general divisor, but every exact tie, and ties are common when d has few significant bits, e.g.
//   amax = 1.75·2^e makes d a power of two) the caller divides in IEEE arithmetic.
// The bounds hold wherever q, lo and hi are normal binary32 numbers, infinities and NaNs (they
// multiply through unchanged). Below 2⁻¹²⁰ they may not; row_divide_tiny() says when the caller must
// fall back there: for the fp8 types and f16 every value below 2⁻¹²⁰ rounds to ±0 (sign of q, which is
// the sign of n/d) and nothing can differ; bf16 keeps subnormals down to 2⁻¹³³, so it falls back.
// The divisor must be a finite normal number with a normal reciprocal (row_divisor_ok): zero,
// subnormal, huge, infinite and NaN divisors take the IEEE division for the whole row.
#pragma once

#include "config.cuh"

namespace solder::gemm {

// 1 − 2⁻²¹ and 1 + 2⁻²¹, both exact in binary32.
inline constexpr float kRowDivideLow = 0.99999952316284179688f;
inline constexpr float kRowDivideHigh = 1.00000047683715820312f;

// Whether values of |q| below 2⁻¹²⁰ need the IEEE division for MMA type t (see above).
SOLDER_GEMM_HD constexpr bool row_divide_tiny(Dtype t) { return t == Dtype::bf16; }

// Whether divisor d (and its reciprocal r) allow the reciprocal path: both finite, normal, non-zero.
SOLDER_GEMM_HD inline bool row_divisor_ok(float d, float r) {
  const float ad = d < 0 ? -d : d, ar = r < 0 ? -r : r;
  return ad >= 1.17549435e-38f && ad <= 3.40282347e38f && ar >= 1.17549435e-38f && ar <= 3.40282347e38f;
}

// The window's two ends for q = RN(n · r).
SOLDER_GEMM_HD inline void row_divide_window(float q, float* lo, float* hi) {
  *lo = q * kRowDivideLow;
  *hi = q * kRowDivideHigh;
}

}  // namespace solder::gemm
