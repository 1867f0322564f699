// Bad input: one case per kind of error, each with its file:line:column and what was expected and
// found; and the command line's exit code 2 with the message.
#include <gtest/gtest.h>

#include <fstream>

#include "ir/parser.h"
#include "ir/verifier.h"
#include "../test_util.h"

namespace solder {
namespace {

struct BadInput {
  const char* what;
  const char* text;
  const char* position;  // "line:column"
  const char* message;   // a substring of the message
  bool small = false;
};

const char* kHeader = "program p\ndim N = 4, M = 3\nin x[N, M] : f32\nin y[N] : f32\n";

const BadInput kCases[] = {
    {"unbalanced parenthesis", "out z[i] = (x[i, 0] + 1\n", "5:24", "expected ')' to close '(' opened at 5:12, found end of line"},
    {"closing bracket without opening", "out z[i] = y[i]) + 1\n", "5:16", "found ')' with no matching '('"},
    {"unknown tensor", "out z[i] = w[i]\n", "5:12", "unknown tensor 'w'; expected one of the inputs or earlier definitions: x, y"},
    {"unknown function", "out z[i] = foo(y[i])\n", "5:12", "unknown function 'foo'"},
    {"unknown name", "out z[i] = y[i] * q\n", "5:19", "unknown name 'q'"},
    {"index var with no extent", "out z[i] = y[0]\n", "5:7", "index variable 'i' has no extent"},
    {"dim mismatch between uses", "out z[i] = x[i, i]\n", "5:17", "index 'i' is used with extent N (4) at 5:14 and with extent M (3) here"},
    {"out-of-range constant index", "out z[i] = x[i, 3]\n", "5:17", "constant index 3 is out of range: dim 2 of 'x' has extent M (3)"},
    {"index may be out of range", "out z[i] = y[i] + y[i + 1]\n", "5:21", "index 'i + 1' of 'y' may be out of range: it takes values in [1, 4]"},
    {"dtype an operation cannot take", "out z[i] = y[i] // 2\n", "5:17", "'//' needs integers, found a real number"},
    {"real-valued index", "out z[i] = y[i] + y[i / 2]\n", "5:21", "index 'i / 2' of 'y' must be an integer, found a real number"},
    {"condition where a number is needed", "out z[i : N] = exp(i < 2)\n", "5:16", "'exp' expects a number, found a condition"},
    {"number where a condition is needed", "out z[i] = select(y[i], 1, 0)\n", "5:19", "select's condition must be a condition"},
    {"wrong rank", "out z[i] = x[i]\n", "5:13", "tensor 'x' has 2 dim(s), found 1 index expression(s)"},
    {"redefinition", "out y[i] = x[i, 0]\n", "5:5", "definition 'y' has the name of a tensor"},
    {"reduction over a target index", "out z[i] = sum(i) y[i]\n", "5:16", "reduction variable 'i' is also an index of the target"},
    {"missing dtype", "in w[N] : f64\nout z[i] = y[i]\n", "5:11", "expected a dtype (f32, f16, bf16, f8e4m3, f8e5m2, i32, bool), found 'f64'"},
    {"bad character", "out z[i] = y[i] $ 2\n", "5:17", "unexpected character '$'"},
    {"missing expression", "out z[i] =\n", "6:1", "expected an expression"},
    {"no output", "z[i] = y[i]\n", "1:1", "declares no output"},
    {"topk k too large", "out v[i, r] = topk(5, j) x[i, j]\n", "5:20", "topk's k is 5 but it selects among only 3 values"},
    {"argmax dtype", "out a[i] : f32 = argmax(j) x[i, j]\n", "5:5", "argmax gives an index; declare 'a' as i32"},
    {"bad distribution", "in w[N] : i32 ~ normal(0, 1)\nout z[i] = y[i]\n", "5:4", "normal draws real numbers; input is i32"},
    {"small names an unknown dim", "small Q = 2\nout z[i] = y[i]\n", "5:7", "'small' names 'Q', which is not a declared dim"},
    {"comparisons do not chain", "out z[i] = select(0 < i < 3, y[i], 0)\n", "5:25", "comparisons do not chain"},
    {"reduction in a size", "in w[sum(j) N] : f32\nout z[i] = y[i]\n", "5:6", "a reduction ('sum(...)') may only appear in a definition's right-hand side"},
};

TEST(Errors, EachKindNamesPositionExpectedAndFound) {
  for (const BadInput& c : kCases) {
    SCOPED_TRACE(c.what);
    std::string text = std::string(kHeader) + c.text;
    try {
      testing::bind_text(text, c.small);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const Error& e) {
      std::string formatted = e.formatted();
      EXPECT_NE(formatted.find(std::string("test.sol:") + c.position + ": error: "), std::string::npos) << formatted;
      EXPECT_NE(formatted.find(c.message), std::string::npos) << formatted;
    }
  }
}

TEST(Errors, GuardedLoadsAreAccepted) {
  // Padding: the select keeps the shifted index in range, so the load is legal.
  testing::bind_text(std::string(kHeader) +
                     "out z[i : N] = select(i + 1 < N, y[i + 1], 0)\n"
                     "out w[i, c : M + N] = select(c < M, x[i, c], y[c - M])\n");
}

TEST(Errors, DimOverrideErrors) {
  std::string text = std::string(kHeader) + "out z[i] = y[i]\n";
  EXPECT_THROW(testing::bind_text(text, false, {{"Q", 3}}), Error);
  EXPECT_THROW(testing::bind_text(text, false, {{"N", 0}}), Error);
  try {
    testing::bind_text("program p\ndim N = 4, M = N + 1\nin y[M] : f32\nout z[i] = y[i]\n", false, {{"M", 3}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("dim 'M' is derived (M = N + 1)"), std::string::npos) << e.message();
  }
}

TEST(Errors, CommandLineExitsTwoWithTheMessage) {
  std::string file = ::testing::TempDir() + "/bad_unknown_tensor.sol";
  {
    std::ofstream out(file);
    out << kHeader << "out z[i] = w[i]\n";
  }
  std::string output;
  int status = testing::run_command(std::string(SOLDER_BINARY) + " check " + file, &output);
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find(file + ":5:12: error: unknown tensor 'w'"), std::string::npos) << output;
  status = testing::run_command(std::string(SOLDER_BINARY) + " run --bogus " + file, &output);
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown option '--bogus'"), std::string::npos) << output;
  status = testing::run_command(std::string(SOLDER_BINARY) + " check /nonexistent/x.sol", &output);
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("/nonexistent/x.sol: error: cannot read the file"), std::string::npos) << output;
}

}  // namespace
}  // namespace solder
