// Rounding to each dtype: round to nearest even, subnormals, overflow and saturation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/dtype.h"

namespace solder {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -8), DType::bf16), 1.0);                 // tie → even
  EXPECT_EQ(round_to_dtype(1.0 + 3 * std::ldexp(1.0, -8), DType::bf16), 1.0 + std::ldexp(1.0, -6));  // tie → even (up)
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -8) + 1e-12, DType::bf16), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(round_to_dtype(3.0e38, DType::bf16), std::ldexp(226.0, 120));  // 1.765625 * 2^127
  EXPECT_TRUE(std::isinf(round_to_dtype(3.4e38, DType::bf16)));
}

TEST(DType, F16RangeAndSubnormals) {
  EXPECT_EQ(round_to_dtype(65504.0, DType::f16), 65504.0);
  EXPECT_EQ(round_to_dtype(65519.0, DType::f16), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(65520.0, DType::f16)));
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -24), DType::f16), std::ldexp(1.0, -24));   // smallest subnormal
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -26), DType::f16), 0.0);
  EXPECT_EQ(round_to_dtype(0.1, DType::f16), 0.0999755859375);
}

TEST(DType, Fp8E4M3SaturatesAtMax) {
  EXPECT_EQ(round_to_dtype(448.0, DType::f8e4m3), 448.0);
  EXPECT_EQ(round_to_dtype(1000.0, DType::f8e4m3), 448.0);
  EXPECT_EQ(round_to_dtype(-1e9, DType::f8e4m3), -448.0);
  EXPECT_EQ(round_to_dtype(1.0625, DType::f8e4m3), 1.0);     // 3 fraction bits: tie → even
  EXPECT_EQ(round_to_dtype(1.1875, DType::f8e4m3), 1.25);    // tie → even (up)
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -9), DType::f8e4m3), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::f8e4m3)));
}

TEST(DType, Fp8E5M2OverflowsToInf) {
  EXPECT_EQ(round_to_dtype(57344.0, DType::f8e5m2), 57344.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(70000.0, DType::f8e5m2)));
  EXPECT_EQ(round_to_dtype(1.125, DType::f8e5m2), 1.0);
}

TEST(DType, IntegersAndBooleans) {
  EXPECT_EQ(round_to_dtype(2.5, DType::i32), 2.0);
  EXPECT_EQ(round_to_dtype(3.5, DType::i32), 4.0);
  EXPECT_EQ(round_to_dtype(1e12, DType::i32), 2147483647.0);
  EXPECT_EQ(round_to_dtype(-0.3, DType::boolean), 1.0);
  EXPECT_EQ(round_to_dtype(0.0, DType::boolean), 0.0);
}

TEST(DType, F32MatchesTheHardwareConversion) {
  for (double v : {0.1, 1.0 / 3.0, 1e-40, 3.5e38, -7.25}) EXPECT_EQ(round_to_dtype(v, DType::f32), static_cast<double>(static_cast<float>(v)));
}

}  // namespace
}  // namespace solder
