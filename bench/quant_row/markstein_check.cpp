// quant_gemm's row kernel divides every element by its row's scale in IEEE arithmetic (a / scale, the
// IR's rounding). This checks, exhaustively on the CPU, a cheaper exact form for the next session
// (bench/NOTES.md, eleventh session, "what is left at Q8"): with r = RN(1 / s) once per row and
// q0 = RN(a * r), the Markstein correction q = fma(fma(-q0, s, a), r, q0) equals RN(a / s) bit for bit
// for every bf16 a and every scale the kernel forms (s = RN(amax / 448), amax = |a'| of a bf16 a',
// |a| <= amax), wherever |a| >= 2^-100, |q0| >= 2^-100, s is normal and r is finite and normal (a
// guard cheap enough per element; the rest takes the IEEE division). rcp.rn.f32 and fma.rn.f32 on
// the GPU are the IEEE operations used here. Prints the number of mismatches under the guard (0 on
// 2026-11-27: 1,065,402,238 pairs, 32,639 scales; 210,639,802 for q0 alone, 3,628,021 for the
// corrected quotient without the guard).
// It also checks the form the register pass emits (device/solder/reduce/row_divide.h, twelfth session:
// q0 from a two-word reciprocal, so faithful by construction, then the same correction, with its own
// guard; exact on every binary32 input by Markstein's theorem): mismatches against the IEEE quotient
// must be 0 (2026-11-27: 0 of the 1,065,402,238 pairs).
//   g++ -O2 -std=c++20 -ffp-contract=off -Idevice bench/quant_row/markstein_check.cpp -o /tmp/markstein && /tmp/markstein
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "solder/reduce/row_divide.h"

static float bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

static uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The guard: where the corrected quotient is used (elsewhere the IEEE division).
static bool guarded(float a, float s, float r, float q0) {
  const float normal = 1.17549435e-38f;
  return std::fabs(q0) >= 0x1p-100f && std::fabs(a) >= 0x1p-100f && std::fabs(s) >= normal && std::isfinite(r) && std::fabs(r) >= normal;
}

int main() {
  uint64_t pairs = 0, wrong_plain = 0, wrong_corrected = 0, wrong_guarded = 0, wrong_emitted = 0;
  int scales = 0;
  for (uint32_t h = 1; h < 0x7f80; ++h) {  // every positive finite bf16 amax
    const float amax = bf16(uint16_t(h));
    volatile float divisor = 448.0f, one = 1.0f;  // volatile: IEEE divisions, not folded
    const float s = amax / divisor;
    if (s == 0.0f) continue;  // amax / 448 underflows: a / 0, the IEEE division's case
    ++scales;
    const float r = one / s;  // once per row
    const solder::reduce::RowDivisor row = solder::reduce::row_divisor(s);
    for (uint32_t g = 0; g < 0x7f80; ++g) {
      const float magnitude = bf16(uint16_t(g));
      if (magnitude > amax) break;  // |a| <= amax in the row
      for (float a : {magnitude, -magnitude}) {
        ++pairs;
        volatile float numerator = a;
        const float exact = numerator / s;
        const float q0 = numerator * r;
        const float q = std::fmaf(std::fmaf(-q0, s, numerator), r, q0);
        if (bits(q0) != bits(exact)) ++wrong_plain;
        if (bits(solder::reduce::divide_by_row(numerator, row)) != bits(exact) && ++wrong_emitted < 6)
          std::printf("row_divide.h mismatch: a %a s %a exact %a\n", a, s, exact);
        if (bits(q) == bits(exact)) continue;
        ++wrong_corrected;
        if (!guarded(a, s, r, q0)) continue;
        if (++wrong_guarded < 6) std::printf("mismatch under the guard: a %a s %a exact %a q %a\n", a, s, exact, q);
      }
    }
  }
  std::printf("%d scales, %llu pairs: a * r differs from a / s at %llu, the corrected quotient at %llu, under the guard at %llu; "
              "row_divide.h's divide_by_row at %llu\n", scales, (unsigned long long)pairs, (unsigned long long)wrong_plain,
              (unsigned long long)wrong_corrected, (unsigned long long)wrong_guarded, (unsigned long long)wrong_emitted);
  return wrong_guarded == 0 && wrong_emitted == 0 ? 0 : 1;
}
