// Host encoding of tensor values for the GPU: every value representable in a dtype survives
// encode → decode exactly, the bit layouts match the formats, and poison is recognised.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cuda/host_encoding.h"

namespace solder {
namespace {

std::vector<double> representable_values(DType dtype) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0, 3);
  std::vector<double> values = {0.0, -0.0, 1.0, -1.5, 0.5};
  for (int i = 0; i < 2000; ++i) values.push_back(round_to_dtype(normal(rng) * std::pow(2.0, static_cast<int>(rng() % 20) - 10), dtype));
  if (dtype == DType::f16) values.insert(values.end(), {65504.0, std::ldexp(1.0, -24), std::ldexp(3.0, -24), INFINITY, -INFINITY});
  if (dtype == DType::bf16) values.insert(values.end(), {std::ldexp(1.0, -133), 3.3895313892515355e38, -INFINITY});
  if (dtype == DType::f8e4m3) values.insert(values.end(), {448.0, -448.0, std::ldexp(1.0, -9), 0.875});
  if (dtype == DType::f8e5m2) values.insert(values.end(), {57344.0, std::ldexp(1.0, -16), INFINITY});
  if (dtype == DType::i32) values = {0, 1, -1, 2147483647.0, -2147483648.0, 12345};
  if (dtype == DType::boolean) values = {0, 1, 1, 0};
  return values;
}

TEST(HostEncoding, RoundTripsEveryRepresentableValue) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2, DType::i32, DType::boolean}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    auto values = representable_values(d);
    auto bytes = encode_values(values, d);
    EXPECT_EQ(bytes.size(), values.size() * static_cast<size_t>(dtype_bytes(d)));
    auto back = decode_values(bytes, d, static_cast<int64_t>(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(back[i], values[i]) << "value " << values[i];
      EXPECT_EQ(std::signbit(back[i]), std::signbit(values[i])) << "value " << values[i];
    }
  }
}

TEST(HostEncoding, BitLayoutsMatchTheFormats) {
  auto bits16 = [](double v, DType d) {
    auto b = encode_values({v}, d);
    return static_cast<unsigned>(b[0] | (b[1] << 8));
  };
  EXPECT_EQ(bits16(1.0, DType::f16), 0x3c00u);
  EXPECT_EQ(bits16(-2.0, DType::f16), 0xc000u);
  EXPECT_EQ(bits16(1.0, DType::bf16), 0x3f80u);
  EXPECT_EQ(bits16(-INFINITY, DType::bf16), 0xff80u);
  EXPECT_EQ(encode_values({1.0}, DType::f8e4m3)[0], 0x38u);
  EXPECT_EQ(encode_values({448.0}, DType::f8e4m3)[0], 0x7eu);
  EXPECT_EQ(encode_values({1.0}, DType::f8e5m2)[0], 0x3cu);
  EXPECT_EQ(encode_values({INFINITY}, DType::f8e5m2)[0], 0x7cu);
  float f = 0.1f;
  uint32_t want;
  std::memcpy(&want, &f, 4);
  auto b = encode_values({static_cast<double>(f)}, DType::f32);
  uint32_t got;
  std::memcpy(&got, b.data(), 4);
  EXPECT_EQ(got, want);
}

TEST(HostEncoding, NaNsDecodeAsNaN) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2}) {
    auto back = decode_values(encode_values({NAN}, d), d, 1);
    EXPECT_TRUE(std::isnan(back[0])) << dtype_name(d);
  }
}

TEST(HostEncoding, PoisonIsCountedAndNeverARealValue) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2, DType::i32, DType::boolean}) {
    int size = dtype_bytes(d);
    std::vector<uint8_t> bytes(static_cast<size_t>(8 * size));
    uint32_t word = poison_fill_word(d);
    for (size_t i = 0; i < bytes.size(); i += 4) std::memcpy(&bytes[i], &word, std::min<size_t>(4, bytes.size() - i));
    EXPECT_EQ(count_poison(bytes, d, 8), 8) << dtype_name(d);
    auto written = encode_values({1, 2, 3, 0, 1, 0, 1, 1}, d);
    std::memcpy(bytes.data(), written.data(), static_cast<size_t>(3 * size));  // three elements written
    EXPECT_EQ(count_poison(bytes, d, 8), 5) << dtype_name(d);
  }
}

}  // namespace
}  // namespace solder
