// Exhaustive accuracy check of exp2_fma (device/solder/attention/exp2_fma.h, the host form, which the
// device test shows gives the device form's bits): every float x of [−1, 0] and of [−64, −63) against
// 2^x in double, and the special values. About 10^9 evaluations (≈ 12 s of one core).
// Build and run: g++ -O2 -std=c++20 -Idevice bench/attention/exp2_fma_check.cpp -o /tmp/exp2_fma_check && /tmp/exp2_fma_check
#include <cmath>
#include <cstdio>
#include <cstring>

#include "solder/attention/exp2_fma.h"

using solder::attention::exp2_fma;

int main() {
  double worst = 0;
  float at = 0;
  long long n = 0;
  for (uint32_t b = 0; b <= 0x3f800000u; ++b, ++n) {  // x = −f for every float f in [0, 1]: j = −1 (and 0)
    float f;
    std::memcpy(&f, &b, 4);
    const float x = -f;
    const double r = std::fabs(double(exp2_fma(x)) / std::exp2(double(x)) - 1.0);
    if (r > worst) worst = r, at = x;
  }
  std::printf("every float of [-1, 0] (%lld): max relative error %.6e at %a\n", n, worst, at);
  double worst64 = 0;
  n = 0;
  for (uint32_t b = 0x42780000u; b <= 0x42800000u; ++b, ++n) {  // every float of [63, 64]: x = −that
    float f;
    std::memcpy(&f, &b, 4);
    const float x = -f;
    const double r = std::fabs(double(exp2_fma(x)) / std::exp2(double(x)) - 1.0);
    if (r > worst64) worst64 = r, at = x;
  }
  std::printf("every float of [-64, -63] (%lld): max relative error %.6e at %a\n", n, worst64, at);
  std::printf("-inf -> %a, -127 -> %a, -126 -> %a, 0 -> %a, NaN -> %f\n", exp2_fma(-INFINITY), exp2_fma(-127.0f), exp2_fma(-126.0f),
              exp2_fma(0.0f), exp2_fma(NAN));
  const bool ok = worst <= solder::attention::kExp2FmaMaxRelativeError && worst64 <= solder::attention::kExp2FmaMaxRelativeError;
  std::printf("%s: bound %.1e\n", ok ? "OK" : "FAILED", solder::attention::kExp2FmaMaxRelativeError);
  return ok ? 0 : 1;
}
