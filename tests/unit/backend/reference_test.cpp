// The float64 reference against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "../test_util.h"

namespace solder {
namespace {

TensorSet run(const BoundProgram& p, TensorSet inputs) { return run_reference(p, inputs); }
TensorSet run(const BoundProgram& p, uint64_t seed = 7) { return run_reference(p, make_inputs(p, seed)); }

TEST(Reference, SoftmaxRowsSumToOne) {
  auto p = testing::bind_text(
      "program softmax\ndim T = 5, N = 33\nin x[T, N] : f32 ~ normal(0, 3)\nm[t] = max(n) x[t, n]\n"
      "e[t, n] = exp(x[t, n] - m[t])\nz[t] = sum(n) e[t, n]\nout y[t, n] = e[t, n] / z[t]\n");
  auto r = run(p);
  const auto& y = r.at("y");
  for (int t = 0; t < 5; ++t) {
    double s = 0;
    for (int n = 0; n < 33; ++n) s += y.values[t * 33 + n];
    EXPECT_NEAR(s, 1.0, 1e-6);  // y is f32: each element rounded once
  }
}

TEST(Reference, AttentionWithOneKeyReturnsV) {
  auto p = testing::bind_text(
      "program attn\ndim S = 4, J = 1, D = 8\nin q[S, D] : f32\nin k[J, D] : f32\nin v[J, D] : f32\n"
      "s[i, j] = sum(d) q[i, d] * k[j, d] * rsqrt(D)\nm[i] = max(j) s[i, j]\ne[i, j] = exp(s[i, j] - m[i])\n"
      "z[i] = sum(j) e[i, j]\nout o[i, d] = sum(j) e[i, j] / z[i] * v[j, d]\n");
  auto r = run(p);
  for (int i = 0; i < 4; ++i)
    for (int d = 0; d < 8; ++d) EXPECT_EQ(r.at("o").values[i * 8 + d], r.at("v").values[d]);
}

TEST(Reference, VarianceOfAConstantIsZero) {
  auto p = testing::bind_text(
      "program variance\ndim B = 3, L = 1000\nin x[B, L] : f32 ~ uniform(1000, 1000.0001)\n"
      "c[b, l] = 1000 + 0 * x[b, l]\nmu[b] = sum(l) c[b, l] / L\nout var[b] = sum(l) (c[b, l] - mu[b]) * (c[b, l] - mu[b]) / L\n");
  auto r = run(p);
  for (double v : r.at("var").values) EXPECT_EQ(v, 0.0);
}

TEST(Reference, MatrixProductByHand) {
  auto p = testing::bind_text("program mm\ndim M = 2, K = 3, N = 2\nin a[M, K] : f32\nin b[K, N] : f32\nout c[m, n] = sum(k) a[m, k] * b[k, n]\n");
  TensorSet in;
  in["a"] = HostTensor{"a", {2, 3}, DType::f32, {1, 2, 3, 4, 5, 6}};
  in["b"] = HostTensor{"b", {3, 2}, DType::f32, {7, 8, 9, 10, 11, 12}};
  auto r = run(p, in);
  EXPECT_EQ(r.at("c").values, (std::vector<double>{58, 64, 139, 154}));
}

TEST(Reference, TopkArgmaxAndTies) {
  auto p = testing::bind_text(
      "program top\ndim T = 1, E = 6, K = 3\nin l[T, E] : f32\nout v[t, r], out ix[t, r] = topk(K, e) l[t, e]\n"
      "out a[t] = argmax(e) l[t, e]\nout b[t] = argmin(e) l[t, e]\n");
  TensorSet in;
  in["l"] = HostTensor{"l", {1, 6}, DType::f32, {0.5, 2, -1, 2, 7, -1}};
  auto r = run(p, in);
  EXPECT_EQ(r.at("v").values, (std::vector<double>{7, 2, 2}));
  EXPECT_EQ(r.at("ix").values, (std::vector<double>{4, 1, 3}));  // ties → lower index first
  EXPECT_EQ(r.at("a").values, (std::vector<double>{4}));
  EXPECT_EQ(r.at("b").values, (std::vector<double>{2}));          // first of the two minima
}

TEST(Reference, PaddedConvolutionReadsZerosOutside) {
  auto p = testing::bind_text(
      "program conv\ndim H = 3, W = 3\nin x[H, W] : f32\nin w[3, 3] : f32\n"
      "out y[r : H, c : W] = sum(kr, kc) select(r + kr - 1 >= 0 && r + kr - 1 < H && c + kc - 1 >= 0 && c + kc - 1 < W,"
      " x[r + kr - 1, c + kc - 1], 0) * w[kr, kc]\n");
  TensorSet in;
  in["x"] = HostTensor{"x", {3, 3}, DType::f32, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  in["w"] = HostTensor{"w", {3, 3}, DType::f32, {1, 1, 1, 1, 1, 1, 1, 1, 1}};
  auto r = run(p, in);
  // Box sums with zero padding.
  EXPECT_EQ(r.at("y").values, (std::vector<double>{12, 21, 16, 27, 45, 33, 24, 39, 28}));
}

TEST(Reference, MaskedRowsGiveNaNLikeTheMathSays) {
  // A fully masked row: max is -inf, exp(-inf - -inf) is NaN; the reference keeps that answer.
  auto p = testing::bind_text(
      "program masked\ndim S = 3\nin s[S, S] : f32\nsm[i, j] = select(j < i, s[i, j], -inf)\nm[i] = max(j) sm[i, j]\n"
      "e[i, j] = exp(sm[i, j] - m[i])\nz[i] = sum(j) e[i, j]\nout y[i, j] = e[i, j] / z[i]\n");
  auto r = run(p);
  const auto& y = r.at("y").values;
  for (int j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(y[j]));  // row 0 sees no key
  EXPECT_EQ(y[3], 1.0);
  EXPECT_EQ(y[4], 0.0);
}

TEST(Reference, WritesRoundToTheDeclaredDtype) {
  auto p = testing::bind_text("program r\ndim N = 1\nin x[N] : f32\ny[i] : bf16 = x[i] * 0 + 1.00390625\nout z[i] = y[i] * 1\n");
  auto r = run(p);
  EXPECT_EQ(r.at("z").values[0], 1.0);  // 1 + 2^-8 rounds to 1 in bf16 (tie to even)
}

TEST(Reference, InputsAreReproducibleAndFollowTheirDistributions) {
  auto p = testing::bind_text(
      "program i\ndim B = 4, S = 1000\nin doc[B, S] : i32 ~ sorted_randint(0, 12)\nin x[B, S] : bf16 ~ normal(1000, 1)\n"
      "in m[S] : bool ~ bernoulli(0.25)\nout y[b, s] = x[b, s] + doc[b, s] + m[s]\n");
  auto a = make_inputs(p, 5), b = make_inputs(p, 5), c = make_inputs(p, 6);
  EXPECT_EQ(a.at("x").values, b.at("x").values);
  EXPECT_NE(a.at("x").values, c.at("x").values);
  const auto& doc = a.at("doc").values;
  for (int row = 0; row < 4; ++row)
    for (int s = 1; s < 1000; ++s) EXPECT_LE(doc[row * 1000 + s - 1], doc[row * 1000 + s]);
  EXPECT_GE(*std::min_element(doc.begin(), doc.end()), 0);
  EXPECT_LE(*std::max_element(doc.begin(), doc.end()), 11);
  double mean = 0;
  for (double v : a.at("x").values) mean += v / 4000;
  EXPECT_NEAR(mean, 1000, 0.2);
  double ones = 0;
  for (double v : a.at("m").values) ones += v;
  EXPECT_NEAR(ones / 1000, 0.25, 0.05);
}

// Inputs are generated in parallel chunks; the values must not depend on how many threads ran.
TEST(Reference, InputsDoNotDependOnTheThreadCount) {
  auto p = testing::bind_text(
      "program i\ndim N = 300001\nin x[N] : bf16\nin u[N] : f32 ~ uniform(-1, 1)\nin k[N] : i32\n"
      "out y[n] = x[n] + u[n] + k[n]\n");
  const char* saved = std::getenv("SOLDER_THREADS");
  std::string restore = saved ? saved : "";
  setenv("SOLDER_THREADS", "1", 1);
  TensorSet one = make_inputs(p, 3);
  setenv("SOLDER_THREADS", "7", 1);
  TensorSet seven = make_inputs(p, 3);
  if (saved) setenv("SOLDER_THREADS", restore.c_str(), 1);
  else unsetenv("SOLDER_THREADS");
  for (const char* name : {"x", "u", "k"}) EXPECT_EQ(one.at(name).values, seven.at(name).values) << name;
}

}  // namespace
}  // namespace solder
