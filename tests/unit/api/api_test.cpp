// The public C++ API (include/solder/solder.h) on the CPU executor: compile with dims, call on
// caller-owned host buffers, compare with a float64 computation; every bad call is a solder::Error.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "solder/solder.h"

namespace {

const char* kSoftmax = R"(program softmax
dim T = 4096, N = 32768
in x[T, N] : f32
m[t] = max(n) x[t, n]
e[t, n] = exp(x[t, n] - m[t])
z[t] = sum(n) e[t, n]
out y[t, n] : f32 = e[t, n] / z[t]
)";

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

solder::CompileOptions cpu_options(std::map<std::string, int64_t> dims) {
  solder::CompileOptions o;
  o.dims = std::move(dims);
  o.device = solder::Device::cpu;
  return o;
}

TEST(PublicApi, SoftmaxOnHostBuffersMatchesFloat64) {
  solder::Program program = solder::Program::from_text(kSoftmax, "softmax.sol");
  EXPECT_EQ(program.name(), "softmax");
  solder::Kernel kernel = program.compile(cpu_options({{"T", 5}, {"N", 37}}));
  EXPECT_EQ(kernel.device(), solder::Device::cpu);
  ASSERT_EQ(kernel.inputs().size(), 1u);
  ASSERT_EQ(kernel.outputs().size(), 1u);
  EXPECT_EQ(kernel.inputs()[0].name, "x");
  EXPECT_EQ(kernel.outputs()[0].shape, (std::vector<int64_t>{5, 37}));
  EXPECT_EQ(kernel.dims().at("N"), 37);

  std::vector<float> x = random_values(5 * 37, 1), y(5 * 37, -1.0f);
  kernel({solder::TensorArg(x.data(), solder::DType::f32, {5, 37})},
         {solder::TensorArg(y.data(), solder::DType::f32, {5, 37})});
  for (int t = 0; t < 5; ++t) {
    double m = -INFINITY, z = 0;
    for (int n = 0; n < 37; ++n) m = std::max(m, double(x[t * 37 + n]));
    for (int n = 0; n < 37; ++n) z += std::exp(double(x[t * 37 + n]) - m);
    for (int n = 0; n < 37; ++n) EXPECT_NEAR(y[t * 37 + n], std::exp(double(x[t * 37 + n]) - m) / z, 1e-6) << t << "," << n;
  }
  EXPECT_NE(kernel.report_text().find("kernel"), std::string::npos);
  EXPECT_EQ(kernel.report_json().front(), '{');
  EXPECT_EQ(kernel.cuda_source(), "");
}

// Evoformer's row attention as the torch backend's translator writes it (q, k, v [S, H, R, C], the pair
// bias [H, R, R] added to the scores): on the GPU it runs on the attention skeleton with the bias
// staged per key tile (the Config's last parameter, StagedBias, is 1: a tile).
const char* kPairBiasAttention = R"(program pair_bias_attention
dim S = 128, H = 8, R = 256, C = 32
in k[S, H, R, C] : bf16
in q[S, H, R, C] : bf16
in z[H, R, R] : bf16
in v[S, H, R, C] : bf16
t1[s, h, i, j] : f32 = sum(c) q[s, h, i, c] * k[s, h, j, c] * 0.17677669529663687
t2[s, h, i] : f32 = max(j) (t1[s, h, i, j] + z[h, i, j])
t3[s, h, i] : f32 = sum(j) exp(t1[s, h, i, j] + z[h, i, j] - t2[s, h, i])
out y[s, h, i, c] : bf16 = sum(j) exp(t1[s, h, i, j] + z[h, i, j] - t2[s, h, i]) / t3[s, h, i] * v[s, h, j, c]
)";

TEST(PublicApi, ScheduleTextSaysWhereContractionsRun) {
  solder::Kernel kernel = solder::Program::from_text(kPairBiasAttention, "pair_bias.sol").compile(cpu_options({}));
  std::string schedule = kernel.schedule_text();
  EXPECT_NE(schedule.find("sm90 attention skeleton"), std::string::npos) << schedule;
  // Config's StagedBias 1 (the pair bias tile staged by TMA), whatever follows it (Q buffers, ...)
  EXPECT_NE(schedule.find("6, 2, true, 1"), std::string::npos) << "the pair bias is staged: " << schedule;
  EXPECT_EQ(schedule, kernel.schedule_text());  // made once, the same every call
  // A copy shares it; a program without contractions has no lines.
  solder::Kernel copy = kernel;
  EXPECT_EQ(copy.schedule_text(), schedule);
  solder::Kernel softmax = solder::Program::from_text(kSoftmax, "softmax.sol").compile(cpu_options({{"T", 2}, {"N", 4}}));
  EXPECT_EQ(softmax.schedule_text(), "");
}

TEST(PublicApi, Bf16AndUnfusedWorkspace) {
  const char* text = R"(program scale
dim N = 8
in a[N] : bf16
b[n] = sum(k) a[n] * a[k]
out c[n] : bf16 = a[n] * 2 + b[n] * 0
)";
  solder::CompileOptions options = cpu_options({{"N", 6}});
  options.fuse = false;
  solder::Kernel kernel = solder::Program::from_text(text, "scale.sol").compile(options);
  EXPECT_EQ(kernel.kernel_count(), 2);
  EXPECT_GT(kernel.workspace_bytes(), 0u);
  ASSERT_EQ(kernel.workspace_tensors().size(), 1u);
  EXPECT_EQ(kernel.workspace_tensors()[0].name, "b");
  // bf16 bits of 1.5, -2, 0.25, 3, 0, 1
  std::vector<uint16_t> a = {0x3fc0, 0xc000, 0x3e80, 0x4040, 0x0000, 0x3f80}, c(6, 0xffff);
  kernel({solder::TensorArg(a.data(), solder::DType::bf16, {6})}, {solder::TensorArg(c.data(), solder::DType::bf16, {6})});
  std::vector<uint16_t> expected = {0x4040, 0xc080, 0x3f00, 0x40c0, 0x0000, 0x4000};
  EXPECT_EQ(c, expected);
}

TEST(PublicApi, ProgramErrorsCarryFileLineColumn) {
  try {
    solder::Program::from_text("program p\ndim N = 4\nin x[N] : f32\nout y[n] = x[n] * zz[n]\n", "user.sol");
    FAIL() << "expected an error";
  } catch (const solder::Error& e) {
    EXPECT_EQ(e.file(), "user.sol");
    EXPECT_EQ(e.loc().line, 4);
    EXPECT_GT(e.loc().column, 0);
    EXPECT_NE(e.formatted().find("user.sol:4:"), std::string::npos) << e.formatted();
  }
  EXPECT_THROW(solder::Program::from_file("/nonexistent/x.sol"), solder::Error);
}

TEST(PublicApi, BadDimsAndDeviceAreErrors) {
  solder::Program program = solder::Program::from_text(kSoftmax, "softmax.sol");
  try {
    program.compile(cpu_options({{"Q", 4}}));
    FAIL();
  } catch (const solder::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no dim 'Q'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(program.compile(cpu_options({{"N", 0}})), solder::Error);
  solder::CompileOptions small;
  small.small = true;
  small.device = solder::Device::cpu;
  EXPECT_THROW(program.compile(small), solder::Error);  // no `small` line
  if (!solder::cuda_available()) {
    solder::CompileOptions cuda;
    cuda.device = solder::Device::cuda;
    cuda.dims = {{"T", 2}, {"N", 4}};
    EXPECT_THROW(program.compile(cuda), solder::Error);
  }
  EXPECT_EQ(program.dims(cpu_options({{"T", 3}})).at("T"), 3);
}

TEST(PublicApi, BadCallsAreErrors) {
  solder::Kernel kernel = solder::Program::from_text(kSoftmax, "softmax.sol").compile(cpu_options({{"T", 2}, {"N", 4}}));
  std::vector<float> x(8), y(8);
  auto expect_error = [&](std::initializer_list<solder::TensorArg> in, std::initializer_list<solder::TensorArg> out, const char* says) {
    try {
      kernel(in, out);
      FAIL() << "expected an error saying " << says;
    } catch (const solder::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_error({solder::TensorArg(x.data(), solder::DType::f16, {2, 4})}, {solder::TensorArg(y.data(), solder::DType::f32, {2, 4})},
               "expected dtype f32, found f16");
  expect_error({solder::TensorArg(x.data(), solder::DType::f32, {4, 2})}, {solder::TensorArg(y.data(), solder::DType::f32, {2, 4})},
               "expected shape [2,4], found [4,2]");
  expect_error({}, {solder::TensorArg(y.data(), solder::DType::f32, {2, 4})}, "expected 1 inputs and 1 outputs");
  const int64_t shape[] = {2, 4}, strides[] = {1, 2};
  expect_error({solder::TensorArg(x.data(), solder::DType::f32, shape, strides)}, {solder::TensorArg(y.data(), solder::DType::f32, {2, 4})},
               "not contiguous");
  expect_error({solder::TensorArg(nullptr, solder::DType::f32, {2, 4})}, {solder::TensorArg(y.data(), solder::DType::f32, {2, 4})},
               "null");
  const int64_t contiguous[] = {4, 1};
  EXPECT_NO_THROW(kernel({solder::TensorArg(x.data(), solder::DType::f32, shape, contiguous)},
                         {solder::TensorArg(y.data(), solder::DType::f32, {2, 4})}));
  EXPECT_THROW(solder::TensorArg(x.data(), solder::DType::f32, {1, 1, 1, 1, 1, 1, 1, 1, 1}), solder::Error);
}

}  // namespace
