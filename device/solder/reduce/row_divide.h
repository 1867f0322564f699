// The IEEE quotient n / d by a divisor that is the same for a whole row, through one reciprocal per row
// (the register pass of the generic writer, kernel_writer_registers.cpp: quant_gemm's aq = a / scale,
// softmax's e / sum). Plain C++ too: the host unit test checks this same arithmetic against the IEEE
// division (tests/unit/backend/row_divide_exact_test.cpp).
//
// Once per row (row_divisor): r = RN(1/d), e = 1 − d·r (exact: a property of r = RN(1/d)) and
// l = RN(e·r) ≈ 1/d − r, so that r + l is 1/d to a relative 2⁻⁴⁶.
// Per element (divide_by_row), in round-to-nearest binary32 with fused multiply-adds:
//   q0 = RN(n·r + RN(n·l))   within 2⁻⁴⁶ relative of n/d before its rounding: a faithful quotient
//                            (less than one ulp from n/d);
//   q  = RN(q0 + RN(n − d·q0)·r)   Markstein's correction: with q0 faithful and r within a relative
//                            2⁻²⁴ of 1/d, the remainder n − d·q0 is exact and q = RN(n/d) (Markstein,
//                            IBM J. R&D 34(1), 1990; Muller et al., Handbook of Floating-Point
//                            Arithmetic, the theorem on division by Newton–Raphson iterations).
// The theorem needs every step away from underflow and overflow: the row's divisor within
// [2⁻²⁶, 2²⁶] (row_divisor's `exact`) and the element's q0 within [2⁻⁷⁴, 2¹⁰⁰], so that n lies in
// [2⁻¹⁰⁰, 2¹²⁶], n·l and q0 are normal and the remainder is a multiple of 2⁻¹⁴⁶ (exact even when
// subnormal). Everything else — zeros (the sign of −0 / d), infinities, NaNs, tiny and huge values,
// a row whose divisor is out of range — takes the IEEE division itself. So the result is RN(n / d)
// bit for bit on every input, which is what the Kernel IR's division (and the CPU executor) computes.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOLDER_ROW_DIVIDE_HD __host__ __device__ __forceinline__
#else
#include <cmath>
#define SOLDER_ROW_DIVIDE_HD inline
#endif

namespace solder::reduce {

// Round-to-nearest binary32 operations, never contracted or approximated.
SOLDER_ROW_DIVIDE_HD float row_fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
SOLDER_ROW_DIVIDE_HD float row_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SOLDER_ROW_DIVIDE_HD float row_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
SOLDER_ROW_DIVIDE_HD float row_abs(float x) { return x < 0.0f ? -x : x; }

// The row's divisor and what is computed from it once per row.
struct RowDivisor {
  float divisor;     // d
  float reciprocal;  // r = RN(1/d)
  float low;         // l = RN((1 − d·r)·r)
  bool exact;        // d within [2⁻²⁶, 2²⁶]: the reciprocal path may be taken
  float lowest, highest;  // the |q0| that take it: [2⁻⁷⁴, 2¹⁰⁰] where exact, none elsewhere
};

SOLDER_ROW_DIVIDE_HD RowDivisor row_divisor(float d) {
  RowDivisor r;
  r.divisor = d;
  r.reciprocal = row_div(1.0f, d);
  r.low = row_mul(row_fma(-d, r.reciprocal, 1.0f), r.reciprocal);
  const float magnitude = row_abs(d);
  r.exact = magnitude >= 0x1p-26f && magnitude <= 0x1p26f;  // false for NaN
  r.lowest = r.exact ? 0x1p-74f : 0x1p127f;  // 2¹²⁷ > 2¹⁰⁰: an empty range
  r.highest = r.exact ? 0x1p100f : 0.0f;
  return r;
}

// RN(n / d) for the row's divisor d, bit for bit (see the top of this file).
SOLDER_ROW_DIVIDE_HD float divide_by_row(float n, const RowDivisor& d) {
  const float q0 = row_fma(n, d.reciprocal, row_mul(n, d.low));
  const float magnitude = row_abs(q0);
  if (magnitude >= d.lowest && magnitude <= d.highest) return row_fma(row_fma(-q0, d.divisor, n), d.reciprocal, q0);
  return row_div(n, d.divisor);
}

}  // namespace solder::reduce
