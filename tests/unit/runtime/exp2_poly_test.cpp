// solder::tile::exp2_poly (device/solder/tile/exp2_poly.cuh), the attention row state's exponential on the
// FMA pipe, on the host: its relative error against exp2 in double over a stride of the f32 values the
// softmax uses, the values that flush to zero, and the special values. The same code runs on the GPU,
// where tests/gpu/attention_skeleton/test_sm90_exp2_poly.cu checks every f32 value and the host's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../../../device/solder/tile/exp2_poly.cuh"

namespace {

using solder::tile::exp2_poly;

float float_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

uint32_t bits_from_float(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// The bound the header states for −126 ≤ x ≤ 127.
constexpr double kBound = 3.0e-6;

TEST(Exp2Poly, RelativeErrorOverTheSoftmaxRange) {
  // Every 61st f32 from −127.5 up through −0 (the softmax's arguments), then every 61st from +0 to 127.
  double worst = 0.0;
  float worst_x = 0.0f;
  int64_t checked = 0;
  auto check = [&](float x) {
    const float y = exp2_poly(x);
    if (x < -126.0f) {
      ASSERT_EQ(bits_from_float(y), 0u) << "x = " << x << " gives " << y << ", not +0";
      return;
    }
    const double ref = std::exp2(static_cast<double>(x));
    const double rel = std::fabs(static_cast<double>(y) - ref) / ref;
    if (rel > worst) worst = rel, worst_x = x;
    ++checked;
  };
  for (uint32_t u = bits_from_float(-127.5f); u >= 0x80000000u && u <= bits_from_float(-127.5f); u -= 61) check(float_from_bits(u));
  for (uint32_t u = 0; u <= bits_from_float(127.0f); u += 61) check(float_from_bits(u));
  EXPECT_GT(checked, 30'000'000);
  EXPECT_LE(worst, kBound) << "at x = " << worst_x;
  // The bound is tight to a few percent: the polynomial is not better than stated.
  EXPECT_GT(worst, 0.9 * kBound);
}

TEST(Exp2Poly, EveryFractionInTheOuterBinadesAndTheIntegers) {
  // Every f32 with 0.25 ≤ |x| < 0.5 (there j = 0 and f = x), where the error peaks at the interval's ends,
  // then each integer j ± two ulps (the rounding to j changes there).
  double worst = 0.0;
  for (uint32_t u = bits_from_float(0.25f); u < bits_from_float(0.5f); ++u)
    for (float x : {float_from_bits(u), -float_from_bits(u)}) {
      const double ref = std::exp2(static_cast<double>(x));
      worst = std::fmax(worst, std::fabs(static_cast<double>(exp2_poly(x)) - ref) / ref);
    }
  EXPECT_LE(worst, kBound);
  for (int j = -127; j <= 127; ++j) {
    float x = std::nextafter(std::nextafter(static_cast<float>(j), -1e9f), -1e9f);
    for (int k = 0; k < 5; ++k, x = std::nextafter(x, 1e9f)) {
      if (x < -126.0f) {
        EXPECT_EQ(bits_from_float(exp2_poly(x)), 0u) << x;
        continue;
      }
      const double ref = std::exp2(static_cast<double>(x));
      EXPECT_LE(std::fabs(static_cast<double>(exp2_poly(x)) - ref) / ref, kBound) << x;
    }
  }
  EXPECT_EQ(exp2_poly(0.0f), 1.0f);
  EXPECT_EQ(exp2_poly(-1.0f), 0.5f);
  EXPECT_EQ(exp2_poly(-20.0f), 0x1p-20f);
}

TEST(Exp2Poly, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits_from_float(exp2_poly(-inf)), 0u);  // +0: masked scores weigh nothing
  EXPECT_EQ(bits_from_float(exp2_poly(-1e30f)), 0u);
  EXPECT_EQ(bits_from_float(exp2_poly(-127.0f)), 0u);
  EXPECT_EQ(bits_from_float(exp2_poly(-126.5f)), 0u);
  EXPECT_EQ(exp2_poly(-126.0f), 0x1p-126f);  // the smallest normal result
  EXPECT_TRUE(std::isnan(exp2_poly(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(exp2_poly(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(exp2_poly(-0.0f), 1.0f);
  EXPECT_EQ(exp2_poly(float_from_bits(0x80000001u)), 1.0f);  // a subnormal argument
  EXPECT_EQ(exp2_poly(float_from_bits(0x00000001u)), 1.0f);
}

}  // namespace
