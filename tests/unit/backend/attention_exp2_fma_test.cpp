// exp2_fma (device/solder/attention/exp2_fma.h): the software 2^x that the attention row state takes for
// a share of its weights (kExp2Fma). Its host form runs the device form's float operations (the device
// test compares the two bit for bit); here it is measured against 2^x in double over the range the
// softmax feeds it: x ≤ 0 after the maximum is subtracted (and a little above 0: the maximum's rounding),
// −inf for masked scores, NaN kept.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../../../device/solder/attention/exp2_fma.h"

namespace solder {
namespace {

using attention::exp2_fma;
using attention::kExp2FmaMaxRelativeError;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double relative_error(float x) { return std::fabs(double(exp2_fma(x)) / std::exp2(double(x)) - 1.0); }

// The exponent 2^floor(x) is exact for x ≥ −126 and f = x − floor(x) is exact or (|x| < 1/2) within
// 2^-25, so the error is the polynomial's on f: every 64th float of [−1, 0), every float of
// (−1, −1 + 2^-10] (f near 0), a sample of [−2^-10, 0) (f near 1), then [−126, −125) and mixed exponents.
TEST(AttentionExp2Fma, RelativeErrorWithinTheBound) {
  double worst = 0;
  for (uint32_t b = 0; b < 0x3f800000u; b += 64) worst = std::max(worst, relative_error(-from_bits(b)));
  for (uint32_t b = 0x3f7fc000u; b < 0x3f800000u; ++b) worst = std::max(worst, relative_error(-from_bits(b)));
  for (uint32_t b = 0; b <= 0x3a800000u; b += 4099) worst = std::max(worst, relative_error(-from_bits(b)));
  for (uint32_t b = 0; b < 0x3f800000u; b += 4099) worst = std::max(worst, relative_error(-125.0f - from_bits(b)));
  for (uint32_t b = 0; b < 0x3f800000u; b += 4099) worst = std::max(worst, relative_error(-float(b % 126) - from_bits(b)));
  EXPECT_LE(worst, kExp2FmaMaxRelativeError);
  // The polynomial's own minimax error is ≈ 8.56e-5; a looser bound would hide a wrong coefficient.
  EXPECT_GT(worst, 8.0e-5);
}

// Far below bf16's half-ulp (2^-9 relative at most) and f16's (2^-11): P is rounded to 16 bits before P·V.
TEST(AttentionExp2Fma, BoundIsFarInsideSixteenBitRounding) {
  EXPECT_LT(kExp2FmaMaxRelativeError, std::ldexp(1.0, -9) / 16);
  EXPECT_LT(kExp2FmaMaxRelativeError, std::ldexp(1.0, -11) / 4);
}

TEST(AttentionExp2Fma, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp2_fma(0.0f), 1.0f);     // p(0) = 1 exactly: the row's maximum weighs 1
  EXPECT_EQ(exp2_fma(-0.0f), 1.0f);
  EXPECT_EQ(exp2_fma(-1.0f), 0.5f);    // integers are exact
  EXPECT_EQ(exp2_fma(-100.0f), std::ldexp(1.0f, -100));
  EXPECT_EQ(exp2_fma(-126.0f), std::ldexp(1.0f, -126));
  EXPECT_EQ(exp2_fma(-inf), 0.0f);      // a masked score weighs exactly 0
  EXPECT_FALSE(std::signbit(exp2_fma(-inf)));
  EXPECT_EQ(exp2_fma(-127.0f), 0.0f);
  EXPECT_EQ(exp2_fma(-1e30f), 0.0f);
  EXPECT_TRUE(std::isnan(exp2_fma(std::nanf(""))));  // a NaN score stays NaN, as with ex2.approx
  // Below 2^-126 the result is below 2^-126 (ex2.approx.ftz flushes those to 0).
  for (float x : {-126.001f, -126.5f, -126.999f}) {
    EXPECT_GE(exp2_fma(x), 0.0f);
    EXPECT_LT(exp2_fma(x), std::ldexp(1.0f, -126));
  }
  // Slightly above 0 (the maximum's rounding): still within the bound.
  for (float x : {1e-7f, 1e-5f, 0.01f}) EXPECT_LE(relative_error(x), kExp2FmaMaxRelativeError);
}

// Monotone on every float of [−1, 0] sampled, so the row's maximum keeps the largest weight.
TEST(AttentionExp2Fma, MonotoneOnTheUnitInterval) {
  float previous = exp2_fma(-1.0f);
  for (uint32_t b = 0x3f800000u; b >= 7; b -= 7) {
    const float y = exp2_fma(-from_bits(b));
    EXPECT_GE(y, previous) << "at x = " << -from_bits(b);
    if (y < previous) break;
    previous = y;
  }
}

// Which of a thread's scores take exp2_fma: E of each 8 columns, both rows of a column alike.
TEST(AttentionExp2Fma, ColumnShare) {
  for (int eighths = 0; eighths <= 8; ++eighths) {
    int count = 0;
    for (int i = 0; i < 64; ++i) {
      count += attention::exp2_on_fma(i, eighths);
      EXPECT_EQ(attention::exp2_on_fma(i, eighths), attention::exp2_on_fma(i ^ 2, eighths));  // the other row
    }
    EXPECT_EQ(count, 8 * eighths);
  }
}

}  // namespace
}  // namespace solder
