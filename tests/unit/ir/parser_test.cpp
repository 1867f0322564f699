// The .sol parser and printer: canonical printing, round trips, and what each construct parses to.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ir/parser.h"
#include "ir/printer.h"
#include "../test_util.h"

namespace solder {
namespace {

std::string canonical(const std::string& text) { return print_program(parse_program(text, "t.sol")); }

TEST(Parser, PrintsCanonicalForm) {
  EXPECT_EQ(canonical("program p\ndim N = 4   # size\nin x[N] : f32\n\nout y[i] = x[i]*2\n"),
            "program p\ndim N = 4\nin x[N] : f32\nout y[i] = x[i] * 2\n");
}

TEST(Parser, MinimalParentheses) {
  EXPECT_EQ(canonical("program p\ndim N = 4\nin x[N] : f32\nout y[i] = ((x[i] + 1) * (x[i] - (2 - x[i]))) / (x[i] / 3)\n"),
            "program p\ndim N = 4\nin x[N] : f32\nout y[i] = (x[i] + 1) * (x[i] - (2 - x[i])) / (x[i] / 3)\n");
  EXPECT_EQ(canonical("program p\ndim N = 4\nin x[N] : f32\nout y[i] = select((i < 2) && !(i == 1) || i > 3, -x[i], -(x[i] + 1))\n"),
            "program p\ndim N = 4\nin x[N] : f32\nout y[i] = select(i < 2 && !(i == 1) || i > 3, -x[i], -(x[i] + 1))\n");
}

TEST(Parser, NumbersKeepTheirKind) {
  EXPECT_EQ(canonical("program p\ndim N = 4\nin x[N] : f32\nout y[i] = x[i] * 2.0 + 0.1 - 1e-6 + -inf\n"),
            "program p\ndim N = 4\nin x[N] : f32\nout y[i] = x[i] * 2.0 + 0.1 - 1e-06 + -inf\n");
}

TEST(Parser, ReductionVersusBinaryMax) {
  auto p = parse_program("program p\ndim N = 4\nin x[N, N] : f32\nm[i] = max(j) x[i, j]\nout y[i] = max(m[i], 0)\n", "t.sol");
  EXPECT_EQ(p.defs[0].reduce, ReduceOp::max);
  EXPECT_EQ(p.defs[1].reduce, ReduceOp::none);
  EXPECT_EQ(print_expr(p.defs[1].body), "max(m[i], 0)");
}

TEST(Parser, TopkWithTwoTargetsAndExplicitExtents) {
  std::string text =
      "program p\ndim T = 4, E = 8, K = 2, H = 3, HX = H + 2\nin l[T, E] : f32\nin a[T, H] : f32\nin b[T, 2] : f32\n"
      "out v[t, r], out ix[t, r] = topk(K, e) l[t, e]\n"
      "out c[t, c : HX] : bf16 = select(c < H, a[t, c], b[t, c - H])\n";
  EXPECT_EQ(canonical(text), text.substr(0, text.find("HX = H + 2")) +
                                 "HX = H + 2\nin l[T, E] : f32\nin a[T, H] : f32\nin b[T, 2] : f32\n"
                                 "out v[t, r], out ix[t, r] = topk(K, e) l[t, e]\n"
                                 "out c[t, c : HX] : bf16 = select(c < H, a[t, c], b[t, c - H])\n");
  auto p = parse_program(text, "t.sol");
  ASSERT_TRUE(p.defs[0].index_target.has_value());
  EXPECT_EQ(p.defs[0].index_target->name, "ix");
}

TEST(Parser, InputsWithDistributionsAndScalars) {
  std::string text = "program p\ndim B = 2, S = 8\nin doc[B, S] : i32 ~ sorted_randint(0, 12)\nin lam : f32 ~ uniform(0.1, 0.9)\n"
                     "in x[B, S] : f32 ~ normal(1000, 1)\nout y[b, s] = x[b, s] * lam + doc[b, s]\n";
  EXPECT_EQ(canonical(text), text);
}

TEST(Parser, LineContinuation) {
  EXPECT_EQ(canonical("program p\ndim N = 4\nin x[N] : f32\nout y[i] = select(i < 2,\n   x[i],\n   0) +\n  1\n"),
            "program p\ndim N = 4\nin x[N] : f32\nout y[i] = select(i < 2, x[i], 0) + 1\n");
}

TEST(Parser, SmallSetAndDerivedDims) {
  std::string text = "program p\ndim N = 64, M = N * 2\nsmall N = 4\nin x[M] : f32\nout y[i] = x[i]\n";
  EXPECT_EQ(canonical(text), text);
  auto b = testing::bind_text(text, true);
  EXPECT_EQ(b.dims.at("M"), 8);
  auto o = testing::bind_text(text, false, {{"N", 3}});
  EXPECT_EQ(o.dims.at("M"), 6);
}

// print → parse → print is the identity on the canonical form, for every example.
TEST(Parser, ExamplesRoundTrip) {
  auto files = testing::example_files();
  for (auto& file : files) {
    SCOPED_TRACE(file);
    Program p = parse_program_file(file);
    std::string once = print_program(p);
    std::string twice = print_program(parse_program(once, file));
    EXPECT_EQ(once, twice);
  }
}

}  // namespace
}  // namespace solder
