// Top-k and arg-max after a monotone map: select on a key the running results do not change.
#include <gtest/gtest.h>

#include "algebra/decompose.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace solder {
namespace {

Decomposition decompose_text(const std::string& body, ReduceOp op, bool z_positive) {
  auto program = parse_program(
      "program p\ndim T = 2, E = 8, K = 2\nin l[T, E] : f32\nm[t] = max(e) l[t, e]\nz[t] = sum(e) exp(l[t, e] - m[t])\n"
      "out v[t, r] = topk(K, e) " + body + "\n", "t.sol");
  auto is_d = [](const std::string& t) { return t == "m" || t == "z"; };
  auto positive = [z_positive](const std::string& t) { return z_positive && t == "z"; };
  return decompose_reduction(program.defs.back().body, op, is_d, {{"T", 2}, {"E", 8}, {"K", 2}}, positive);
}

TEST(Monotone, TopkOfSoftmaxSelectsOnTheLogits) {
  Decomposition d = decompose_text("exp(l[t, e] - m[t]) / z[t]", ReduceOp::topk, true);
  ASSERT_EQ(d.kind, Decomposition::Kind::monotone) << d.reason;
  EXPECT_EQ(print_expr(d.g), "l[t, e]");
  EXPECT_EQ(print_expr(d.value_from_key), "exp(-m[t] + @key) / z[t]");
  EXPECT_NE(d.confirmation.find("monotone"), std::string::npos);
}

TEST(Monotone, ArgmaxOfAScaledExponential) {
  Decomposition d = decompose_text("2.0 * exp(3.0 * l[t, e] - m[t])", ReduceOp::argmax, false);
  ASSERT_EQ(d.kind, Decomposition::Kind::monotone) << d.reason;
  EXPECT_EQ(print_expr(d.g), "3.0 * l[t, e]");
}

TEST(Monotone, RefusesWhatNoSingleKeyOrders) {
  // A factor of the data outside the exponential: no single key orders the values.
  Decomposition a = decompose_text("l[t, e] * exp(l[t, e] - m[t])", ReduceOp::topk, true);
  EXPECT_EQ(a.kind, Decomposition::Kind::refused);
  EXPECT_NE(a.reason.find("not inside the exponential"), std::string::npos) << a.reason;
  // Dividing by something not known to be positive could reverse the order.
  Decomposition b = decompose_text("exp(l[t, e] - m[t]) / z[t]", ReduceOp::topk, false);
  EXPECT_EQ(b.kind, Decomposition::Kind::refused);
  EXPECT_NE(b.reason.find("not known to be positive"), std::string::npos) << b.reason;
  // A negative constant reverses the order.
  Decomposition c = decompose_text("-1.0 * exp(l[t, e] - m[t])", ReduceOp::topk, true);
  EXPECT_EQ(c.kind, Decomposition::Kind::refused);
}

}  // namespace
}  // namespace solder
