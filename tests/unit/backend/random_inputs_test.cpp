// The GPU's input generator (device/solder/random_inputs.cuh), compiled for the host: it stores the
// bytes make_inputs() + encode_values() give, for every distribution and dtype; its rounding agrees with
// round_to_dtype() on values across every dtype's range; its draws follow the distribution and depend
// only on the seed, the input's name and the element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/inputs.h"
#include "backend/cuda/device_inputs.h"
#include "backend/cuda/host_encoding.h"
#include "../../../device/solder/random_inputs.cuh"
#include "../test_util.h"

namespace solder {
namespace {

namespace ri = random_inputs;

ri::DrawSpec spec_of(const InputDraw& d) { return ri::DrawSpec{d.distribution, d.dtype, d.p0, d.p1, d.stream}; }

// The input's bytes as the GPU stores them, drawn by the device header's code (run here).
std::vector<uint8_t> drawn_bytes(const TensorInfo& info, uint64_t seed) {
  std::optional<InputDraw> draw = input_draw(info, seed);
  EXPECT_TRUE(draw.has_value()) << info.name;
  if (!draw) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(info.elements() * dtype_bytes(info.dtype)));
  ri::draw_input_elements(spec_of(*draw), 0, static_cast<uint64_t>(info.elements()), bytes.data());
  return bytes;
}

TEST(RandomInputs, StoreTheHostGeneratorsBytesForEveryDistributionAndDtype) {
  auto p = testing::bind_text(
      "program i\ndim N = 20011\n"
      "in a[N] : bf16\nin b[N] : f16 ~ normal(3, 40)\nin c[N] : f32 ~ uniform(-2, 5)\nin d[N] : f8e4m3 ~ normal(0, 300)\n"
      "in e[N] : f8e5m2 ~ normal(0, 1e5)\nin f[N] : i32\nin g[N] : i32 ~ randint(-7, 100000)\nin h[N] : bool ~ bernoulli(0.3)\n"
      "in k[N] : bf16 ~ uniform(-1e-40, 1e-40)\nin m[N] : f16 ~ normal(0, 1e-6)\n"
      "out y[n] = a[n] + b[n] + c[n] + d[n] + e[n] + f[n] + g[n] + h[n] + k[n] + m[n]\n");
  for (uint64_t seed : {1ull, 77ull}) {
    TensorSet host = make_inputs(p, seed);
    for (const TensorInfo* info : p.inputs()) {
      const std::vector<uint8_t> expected = encode_values(host.at(info->name).values, info->dtype);
      EXPECT_EQ(drawn_bytes(*info, seed), expected) << info->name << " seed " << seed;
    }
  }
}

TEST(RandomInputs, AnyRangeOfElementsGivesTheSameBytes) {
  auto p = testing::bind_text("program i\ndim N = 4099\nin x[N] : bf16\nout y[n] = x[n]\n");
  const TensorInfo& info = *p.inputs()[0];
  const std::vector<uint8_t> whole = drawn_bytes(info, 9);
  const ri::DrawSpec spec = spec_of(*input_draw(info, 9));
  std::vector<uint8_t> pieces(whole.size(), 0xff);
  for (uint64_t begin = 0; begin < 4099; begin += 1000) ri::draw_input_elements(spec, begin, std::min<uint64_t>(begin + 1000, 4099), pieces.data());
  EXPECT_EQ(pieces, whole);
}

TEST(RandomInputs, DependOnTheSeedAndTheNameOnly) {
  auto p = testing::bind_text("program i\ndim N = 1000\nin x[N] : bf16\nin z[N] : bf16\nout y[n] = x[n] + z[n]\n");
  auto q = testing::bind_text("program j\ndim N = 1000, M = 3\nin z[N] : bf16\nin w[M] : f32\nout y[n] = z[n] + w[0]\n");
  const TensorInfo& x = *p.inputs()[0];
  const TensorInfo& z = *p.inputs()[1];
  const TensorInfo& z_elsewhere = *q.inputs()[0];
  EXPECT_EQ(drawn_bytes(x, 4), drawn_bytes(x, 4));
  EXPECT_NE(drawn_bytes(x, 4), drawn_bytes(x, 5));
  EXPECT_NE(drawn_bytes(x, 4), drawn_bytes(z, 4));
  EXPECT_EQ(drawn_bytes(z, 4), drawn_bytes(z_elsewhere, 4));  // the same name in another program
}

TEST(RandomInputs, FollowTheirDistribution) {
  auto p = testing::bind_text(
      "program i\ndim N = 200000\nin x[N] : f32 ~ normal(2, 3)\nin u[N] : f32 ~ uniform(-1, 3)\nin m[N] : bool ~ bernoulli(0.9)\n"
      "in k[N] : i32 ~ randint(0, 16)\nout y[n] = x[n] + u[n] + m[n] + k[n]\n");
  auto stats = [&](const char* name) {
    for (const TensorInfo* info : p.inputs()) {
      if (info->name != name) continue;
      const std::vector<double> v = decode_values(drawn_bytes(*info, 3), info->dtype, info->elements());
      double mean = 0, square = 0, lo = v[0], hi = v[0];
      for (double x : v) {
        mean += x / static_cast<double>(v.size());
        square += x * x / static_cast<double>(v.size());
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      return std::vector<double>{mean, std::sqrt(square - mean * mean), lo, hi};
    }
    return std::vector<double>{};
  };
  const auto x = stats("x"), u = stats("u"), m = stats("m"), k = stats("k");
  EXPECT_NEAR(x[0], 2, 0.03);  // standard error 3 / sqrt(2e5) = 0.0067
  EXPECT_NEAR(x[1], 3, 0.03);
  EXPECT_NEAR(u[0], 1, 0.02);
  EXPECT_GE(u[2], -1);
  EXPECT_LT(u[3], 3);
  EXPECT_NEAR(m[0], 0.9, 0.005);
  EXPECT_EQ(k[2], 0);
  EXPECT_EQ(k[3], 15);
  EXPECT_NEAR(k[0], 7.5, 0.05);
}

// The rounding alone, on values spread over every dtype's range: subnormals, ties, the largest
// finite values, overflow, zeros of both signs, infinities and NaN.
TEST(RandomInputs, RoundLikeRoundToDtype) {
  std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 1.00390625, 1.01171875, 65504.0, 65519.999, 65520.0, 448.0, 463.9, 464.0, 470.0, 1e6,
                                57344.0, 61439.0, 61440.0, 3.3895313892515355e38, 3.39e38, 1e39, 1e-45, 1e-40, 5.9604644775390625e-08,
                                2.98023223876953125e-08, 2.9802322387695314e-08, 1e-300, 4e-320, 0.0009765625, 0.001953125 * 1.5,
                                std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 2147483647.6, -3e9, 2.5, 3.5, -2.5};
  ri::u64 state = 12345;
  for (int i = 0; i < 20000; ++i) {
    const double mantissa = static_cast<double>(ri::splitmix64(state) >> 11) * 0x1.0p-53 * 2 - 1;
    const int exponent = static_cast<int>(ri::splitmix64(state) % 300) - 150;
    values.push_back(std::ldexp(mantissa, exponent));
  }
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2, DType::i32, DType::boolean};
  const int codes[] = {ri::kF32, ri::kF16, ri::kBF16, ri::kE4M3, ri::kE5M2, ri::kI32, ri::kBool};
  for (int t = 0; t < 7; ++t) {
    const int size = dtype_bytes(dtypes[t]);
    for (double v : values) {
      const std::vector<uint8_t> host = encode_values({round_to_dtype(v, dtypes[t])}, dtypes[t]);
      uint32_t expected = 0;
      std::memcpy(&expected, host.data(), static_cast<size_t>(size));
      EXPECT_EQ(ri::encode(v, codes[t]), expected) << dtype_name(dtypes[t]) << " of " << v;
    }
    const std::vector<uint8_t> nan = encode_values({round_to_dtype(std::nan(""), dtypes[t])}, dtypes[t]);
    uint32_t expected = 0;
    std::memcpy(&expected, nan.data(), static_cast<size_t>(size));
    EXPECT_EQ(ri::encode(std::nan(""), codes[t]), expected) << dtype_name(dtypes[t]) << " of NaN";
  }
}

// The kernel solder bench launches compiles under NVRTC for sm_90a (the header's host-only branches
// stay out of device code).
TEST(RandomInputs, KernelCompilesUnderNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << why;
  runtime::CompileFlags flags;
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(draw_input_source(), "solder_random_inputs.cu", flags);
  ASSERT_EQ(compiled.cubins.size(), 1u);
  EXPECT_FALSE(compiled.cubins.front().empty());
}

}  // namespace
}  // namespace solder
