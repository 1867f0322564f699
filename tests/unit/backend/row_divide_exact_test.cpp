// The register pass's division by a row divisor (device/solder/reduce/row_divide.h, the arithmetic the
// generated kernels run): divide_by_row(n, row_divisor(d)) must be the IEEE quotient n / d — what the
// Kernel IR's division and the CPU executor compute — bit for bit, on every input: the reciprocal path
// where its proof holds, the IEEE division elsewhere (zeros, infinities, NaNs, tiny and huge values,
// divisors out of range). The whole quantisation domain of quant_gemm (every bf16 numerator against
// every scale amax / 448 the kernel forms) is checked offline by bench/quant_row/markstein_check.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../../../device/solder/reduce/row_divide.h"

namespace solder {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The IEEE quotient, kept from being folded or contracted.
float ieee_quotient(float n, float d) {
  volatile float vn = n, vd = d;
  return vn / vd;
}

// Whether divide_by_row gives the IEEE quotient's bits (any NaN for a NaN).
bool same_as_ieee(float n, float d) {
  const float want = ieee_quotient(n, d);
  const float got = reduce::divide_by_row(n, reduce::row_divisor(d));
  if (std::isnan(want)) return std::isnan(got);
  return to_bits(got) == to_bits(want);
}

TEST(RowDivideExact, RandomBinary32PairsAcrossTheRange) {
  std::mt19937_64 random(15);
  int64_t wrong = 0, fast = 0;
  for (int i = 0; i < 4'000'000; ++i) {
    uint32_t n = static_cast<uint32_t>(random()), d = static_cast<uint32_t>(random());
    if (i % 2) {  // half of them near the reciprocal path's range, where the arithmetic matters
      d = (d & 0x807fffffu) | ((127u - 30u + static_cast<uint32_t>(random() % 60)) << 23);
      n = (n & 0x807fffffu) | ((127u - 40u + static_cast<uint32_t>(random() % 80)) << 23);
    }
    if (reduce::row_divisor(from_bits(d)).exact) ++fast;
    if (!same_as_ieee(from_bits(n), from_bits(d)) && ++wrong < 5)
      ADD_FAILURE() << std::hexfloat << from_bits(n) << " / " << from_bits(d);
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(fast, 1'000'000);  // the reciprocal path was exercised
}

TEST(RowDivideExact, EveryBf16NumeratorAgainstQuantScalesAndRowSums) {
  std::vector<float> divisors;
  for (float amax : {1.0f, 3.0f, 0.0078125f, 7.5f, 1.75f, 448.0f, 1e-6f, 65504.0f, 3.3895314e38f, 1e-30f})
    divisors.push_back(ieee_quotient(amax, 448.0f));  // the quantisation scales (1.75 · 2^e: a power of two)
  for (float sum : {1.0f, 1.5f, 17.25f, 2048.0f, 1234.5678f, 0.3f}) divisors.push_back(sum);  // softmax's row sums
  for (float d : {-3.0f, 0x1p-26f, 0x1p26f, 0x1.000002p-26f, 0x1.fffffep25f})  // negative, the range's ends
    divisors.push_back(d);
  int64_t wrong = 0;
  for (float d : divisors)
    for (uint32_t h = 0; h < 65536; ++h) {
      const float n = from_bits(h << 16);
      if (!same_as_ieee(n, d) && ++wrong < 5) ADD_FAILURE() << std::hexfloat << n << " / " << d;
    }
  EXPECT_EQ(wrong, 0);
}

TEST(RowDivideExact, SpecialValuesTakeTheIeeeDivision) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, nan, tiny, -tiny, big, -big, 0x1p-74f, 0x1p-75f, 0x1p100f, 0x1p101f,
                                     1.17549435e-38f, 3.0f, 0x1p-26f, 0x1p26f, 0x1p-27f, 0x1p27f};
  for (float n : values)
    for (float d : values) EXPECT_TRUE(same_as_ieee(n, d)) << std::hexfloat << n << " / " << d;
  // -0 / d keeps its sign (an e4m3 -0 is another byte than +0): through the IEEE division.
  EXPECT_TRUE(std::signbit(reduce::divide_by_row(-0.0f, reduce::row_divisor(3.0f))));
  // Divisors out of [2^-26, 2^26], zero and NaN: the whole row takes the IEEE division.
  EXPECT_FALSE(reduce::row_divisor(0.0f).exact);
  EXPECT_FALSE(reduce::row_divisor(nan).exact);
  EXPECT_FALSE(reduce::row_divisor(0x1p27f).exact);
  EXPECT_TRUE(reduce::row_divisor(-3.0f).exact);
}

// The correction is what makes the quotient exact: without it (q0 alone), many quotients differ; so the
// checks above can fail.
TEST(RowDivideExact, TheUncorrectedQuotientDiffers) {
  std::mt19937_64 random(16);
  int64_t differ = 0;
  for (int i = 0; i < 100'000; ++i) {
    const float n = std::ldexp(1.0f + static_cast<float>(random() % (1 << 23)) * 0x1p-23f, static_cast<int>(random() % 20) - 10);
    const float d = std::ldexp(1.0f + static_cast<float>(random() % (1 << 23)) * 0x1p-23f, static_cast<int>(random() % 20) - 10);
    const reduce::RowDivisor r = reduce::row_divisor(d);
    const float q0 = n * r.reciprocal;
    if (to_bits(q0) != to_bits(ieee_quotient(n, d))) ++differ;
  }
  EXPECT_GT(differ, 1000);
}

}  // namespace
}  // namespace solder
