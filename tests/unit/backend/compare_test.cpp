// The verification tolerance (compare.h): set from the dtypes an output depends on and from the
// length of the float32 chain that produces it; long correct chains pass, wrong answers still fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../fusion/fusion_test_util.h"
#include "backend/cpu/compare.h"

namespace solder {
namespace {

std::string chain_of_additions(int terms) {
  std::string text = "program p\ndim T = 8, N = 16\nin x[T, N] : f32\nout y[t, n] = x[t, n]";
  for (int i = 1; i < terms; ++i) text += " + x[t, n]";
  return text + "\n";
}

TEST(Tolerance, GrowsWithTheSquareRootOfTheChainLength) {
  BoundProgram p = testing::bind_text(chain_of_additions(1000));
  Tolerance t = output_tolerance(p, "y");
  EXPECT_EQ(t.base, 1e-5);
  EXPECT_EQ(t.chain_length, 999);
  EXPECT_NEAR(t.value, 16 * std::ldexp(1.0, -24) * std::sqrt(999.0), 1e-12);
  // A short chain keeps the f32 floor.
  EXPECT_EQ(output_tolerance(testing::bind_text(chain_of_additions(3)), "y").value, 1e-5);
}

TEST(Tolerance, ReductionLengthsAddAlongTheChainAndMaxIsExact) {
  BoundProgram p = testing::bind_text(
      "program p\ndim T = 4, N = 100000\nin x[T, N] : f32\n"
      "m[t] = max(n) x[t, n]\n"
      "s[t] = sum(n) exp(x[t, n] - m[t])\n"
      "out y[t] = s[t] * 2\n"
      "out z[t] = m[t] + 1\n");
  // s: 2 operations + 100000 terms, after m (0 operations: a max rounds nothing); y: one more.
  EXPECT_EQ(output_tolerance(p, "y").chain_length, 100000 + 2 + 1);
  EXPECT_EQ(output_tolerance(p, "z").chain_length, 1);
  EXPECT_EQ(output_tolerance(p, "z").value, 1e-5);
  EXPECT_GT(output_tolerance(p, "y").value, 2e-4);
  EXPECT_EQ(tolerance_for(p), output_tolerance(p, "y").value);
}

TEST(Tolerance, LowPrecisionDtypesOnlyLoosenTheOutputsThatDependOnThem) {
  BoundProgram p = testing::bind_text(
      "program p\ndim N = 8\nin a[N] : f32\nin b[N] : bf16\nin c[N] : f8e4m3\n"
      "out x[n] = a[n] * 2\nout y[n] = a[n] + b[n]\nout z[n] = c[n] + y[n]\n");
  EXPECT_EQ(output_tolerance(p, "x").value, 1e-5);
  EXPECT_EQ(output_tolerance(p, "y").value, 1e-2);
  EXPECT_EQ(output_tolerance(p, "z").value, 5e-2);
}

TEST(Tolerance, TheThousandTermSumVerifiesAndAWrongAnswerStillFails) {
  BoundProgram p = testing::bind_text(chain_of_additions(1000));
  auto fused = fuse_program(p);
  TensorSet inputs = make_inputs(p, 1);
  TensorSet reference = run_reference(p, inputs);
  ExecutionResult got = execute_kernel_program(fused.kernels, inputs);
  double tolerance = output_tolerance(p, "y").value;
  OutputCheck check = compare_output(got.outputs.at("y"), reference.at("y"), tolerance);
  EXPECT_TRUE(check.ok) << check.error << " > " << tolerance;
  EXPECT_GT(check.error, 0);  // a real float32 rounding error (the long sum is added pairwise: ~5e-8)

  // 999 terms instead of 1000 (one term lost: 1e-3 relative) fails by far.
  HostTensor wrong = reference.at("y");
  for (double& v : wrong.values) v = static_cast<double>(static_cast<float>(v * 999 / 1000));
  OutputCheck bad = compare_output(wrong, reference.at("y"), tolerance);
  EXPECT_FALSE(bad.ok);
  EXPECT_GT(bad.error, 10 * tolerance);
  // The largest element wrong by 1%, among 128, fails too.
  HostTensor one = reference.at("y");
  auto largest = std::max_element(one.values.begin(), one.values.end(), [](double a, double b) { return std::fabs(a) < std::fabs(b); });
  *largest *= 1.01;
  EXPECT_FALSE(compare_output(one, reference.at("y"), tolerance).ok);
}

TEST(NonFiniteReport, CountsAndLocatesNaNsAndInfinities) {
  HostTensor t{"t", {2, 3}, DType::f32, {1, NAN, INFINITY, 0, -INFINITY, NAN}};
  NonFinite f = find_non_finite(t, 1);
  EXPECT_EQ(f.nans, 2);
  EXPECT_EQ(f.positive_infinities, 1);
  EXPECT_EQ(f.negative_infinities, 1);
  ASSERT_EQ(f.first_nans.size(), 1u);
  EXPECT_EQ(index_text(t.shape, f.first_nans[0]), "[0, 1]");
  EXPECT_EQ(index_text(t.shape, 5), "[1, 2]");
  EXPECT_EQ(index_text({}, 0), "[]");
}

}  // namespace
}  // namespace solder
