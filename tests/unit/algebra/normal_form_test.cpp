// Normal forms of scalar expressions (src/algebra/normal_form.h): before/expected pairs compared as
// printed text, plus a randomized check that building a form and printing it back never changes the
// value of an expression where the expression is finite.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "algebra/normal_form.h"
#include "ir/printer.h"
#include "../test_util.h"

namespace solder {
namespace {

// Parses one expression over x[t, n], y[t, n], m[t], z[t] and the index variables t, n.
Expr parse_expr(const std::string& e) {
  std::string text = "program p\ndim T = 4, N = 8\nin x[T, N] : f32\nin y[T, N] : f32\nin m[T] : f32\nin z[T] : f32\n"
                     "out r[t, n] = " + e + "\n";
  Program program = parse_program(text, "expr.sol");
  return program.defs.back().body;
}

bool is_d(const std::string& t) { return t == "m" || t == "z"; }

std::string product_text(const std::string& e) { return print_expr(from_product_form(to_product_form(parse_expr(e)))); }
std::string sum_text(const std::string& e) { return print_expr(from_sum_form(to_sum_form(parse_expr(e)))); }

TEST(NormalForm, ProductFormSplitsExpOfDifferences) {
  // before → expected
  EXPECT_EQ(product_text("exp(x[t, n] - m[t])"), "exp(x[t, n] - m[t])");
  ProductForm p = to_product_form(parse_expr("exp(x[t, n] - m[t])"));
  EXPECT_TRUE(p.powers.empty());
  ASSERT_EQ(p.exponent.terms.size(), 2u);
  EXPECT_EQ(print_expr(p.exponent.terms[0].first), "x[t, n]");
  EXPECT_EQ(p.exponent.terms[0].second, 1);
  EXPECT_EQ(print_expr(p.exponent.terms[1].first), "m[t]");
  EXPECT_EQ(p.exponent.terms[1].second, -1);
}

TEST(NormalForm, ProductFormFlattensProductsQuotientsAndPowers) {
  struct Case { const char* before; const char* expected; };
  const Case cases[] = {
      {"x[t, n] * y[t, n] / z[t]", "x[t, n] * y[t, n] / z[t]"},
      {"x[t, n] * x[t, n]", "pow(x[t, n], 2.0)"},                           // equal atoms merge
      {"x[t, n] / x[t, n]", "1.0"},                                         // and cancel
      {"rsqrt(z[t])", "rsqrt(z[t])"},                                       // power −1/2
      {"sqrt(z[t]) * sqrt(z[t])", "z[t]"},
      {"pow(x[t, n] * m[t], 2)", "pow(x[t, n], 2.0) * pow(m[t], 2.0)"},     // integer powers distribute
      {"pow(x[t, n] * m[t], 0.5)", "sqrt(x[t, n] * m[t])"},                 // non-integer ones do not
      {"-x[t, n] * 3", "-3.0 * x[t, n]"},
      {"exp(x[t, n]) * exp(-m[t]) / z[t]", "exp(x[t, n] - m[t]) / z[t]"},
      {"exp(2 * (x[t, n] - m[t]) + 1)", "exp(2.0 * x[t, n] - 2.0 * m[t] + 1.0)"},
      {"exp(x[t, n] - m[t]) * exp(m[t])", "exp(x[t, n])"},
  };
  for (auto& c : cases) EXPECT_EQ(product_text(c.before), c.expected) << c.before;
}

TEST(NormalForm, SumFormFlattensAndMergesTerms) {
  struct Case { const char* before; const char* expected; };
  const Case cases[] = {
      {"x[t, n] - m[t]", "x[t, n] - m[t]"},
      {"x[t, n] + 2 * m[t] - x[t, n] + 3", "2.0 * m[t] + 3.0"},
      {"-(x[t, n] - m[t])", "-x[t, n] + m[t]"},
      {"(x[t, n] + m[t]) / 4", "0.25 * x[t, n] + 0.25 * m[t]"},
      {"x[t, n] * m[t] + 1", "x[t, n] * m[t] + 1.0"},  // a product is one atom of a sum
      {"5 - 7", "-2.0"},
  };
  for (auto& c : cases) EXPECT_EQ(sum_text(c.before), c.expected) << c.before;
  SumForm s = to_sum_form(parse_expr("x[t, n] - x[t, n]"));
  EXPECT_TRUE(s.empty());
}

TEST(NormalForm, FormArithmetic) {
  ProductForm a = to_product_form(parse_expr("x[t, n] * exp(-m[t])"));
  ProductForm b = to_product_form(parse_expr("exp(m[t]) / z[t]"));
  EXPECT_EQ(print_expr(from_product_form(product_of(a, b))), "x[t, n] / z[t]");
  EXPECT_EQ(print_expr(from_product_form(inverse_of(a))), "exp(m[t]) / x[t, n]");
  EXPECT_EQ(print_expr(from_product_form(product_of(a, inverse_of(a)))), "1.0");
  SumForm s = to_sum_form(parse_expr("x[t, n] - 2 * m[t]"));
  EXPECT_EQ(print_expr(from_sum_form(negation_of(s))), "-x[t, n] + 2.0 * m[t]");
  EXPECT_EQ(print_expr(from_sum_form(sum_of(s, negation_of(s)))), "0.0");
}

TEST(NormalForm, SideOfAtoms) {
  EXPECT_EQ(side_of(parse_expr("3 * 2"), is_d), Side::constant);
  EXPECT_EQ(side_of(parse_expr("x[t, n]"), is_d), Side::x);
  EXPECT_EQ(side_of(parse_expr("n < 3"), is_d), Side::x);                // index variables are X
  EXPECT_EQ(side_of(parse_expr("m[t]"), is_d), Side::d);                 // D's own index does not make it X
  EXPECT_EQ(side_of(parse_expr("exp(-m[t]) / z[t]"), is_d), Side::d);
  EXPECT_EQ(side_of(parse_expr("x[t, n] * m[t]"), is_d), Side::mixed);
  EXPECT_EQ(side_of(parse_expr("select(n < 3, m[t], 0)"), is_d), Side::mixed);
}

TEST(NormalForm, FoldConstantsKeepsNonFiniteSemantics) {
  EXPECT_EQ(print_expr(fold_constants(parse_expr("2 * 3 + x[t, n] * 1"))), "6 + x[t, n]");
  EXPECT_EQ(print_expr(fold_constants(parse_expr("x[t, n] * 0"))), "x[t, n] * 0");  // inf·0 is NaN
  EXPECT_EQ(print_expr(fold_constants(parse_expr("x[t, n] / 1.0 - 0"))), "x[t, n]");
  EXPECT_EQ(print_expr(fold_constants(parse_expr("exp(0.0) * m[t]"))), "m[t]");
}

TEST(NormalForm, RenameLoadsAndEvaluate) {
  Expr e = parse_expr("exp(x[t, n] - m[t]) * z[t]");
  Expr renamed = rename_loads(e, {{"m", "m_old"}});
  EXPECT_EQ(print_expr(renamed), "exp(x[t, n] - m_old[t]) * z[t]");
  double v = evaluate_with(renamed, {{"x[t, n]", 1.0}, {"m_old[t]", 0.5}, {"z[t]", 2.0}}, {}, {});
  EXPECT_NEAR(v, std::exp(0.5) * 2.0, 1e-12);
  EXPECT_TRUE(std::isnan(evaluate_with(e, {{"x[t, n]", 1.0}}, {}, {})));  // a missing load is NaN
  EXPECT_EQ(evaluate_with(parse_expr("select(n < T, 1, 2)"), {}, {{"n", 3}}, {{"T", 4}}), 1);
}

// ---- Randomized: forms preserve values -----------------------------------------------------------
class ExprGenerator {
 public:
  explicit ExprGenerator(uint64_t seed) : rng_(seed) {}
  Expr next(int depth) {
    int pick = static_cast<int>(rng_() % (depth <= 0 ? 3 : 14));
    switch (pick) {
      case 0: return make_load(rng_() % 2 ? "x" : "y", {make_var("t"), make_var("n")});
      case 1: return make_load(rng_() % 2 ? "m" : "z", {make_var("t")});
      case 2: {  // a non-zero constant (pow(0, -1) would bring infinities in through the constants)
        int k = static_cast<int>(rng_() % 6) - 3;
        return make_const((k >= 0 ? k + 1 : k) * 0.5);
      }
      case 3: return next(depth - 1) + next(depth - 1);
      case 4: return next(depth - 1) - next(depth - 1);
      case 5: case 6: return next(depth - 1) * next(depth - 1);
      case 7: return next(depth - 1) / next(depth - 1);
      case 8: return -next(depth - 1);
      case 9: return make_unary(UnaryOp::exp, next(depth - 1));
      case 10: return make_unary(rng_() % 2 ? UnaryOp::sqrt : UnaryOp::rsqrt, next(depth - 1));
      case 11: return make_binary(BinaryOp::pow, next(depth - 1), make_const(static_cast<double>(rng_() % 5) * 0.5 - 1));
      case 12: return make_unary(UnaryOp::tanh, next(depth - 1));
      default: return make_select(make_binary(BinaryOp::lt, make_var("n"), make_int(4)), next(depth - 1), next(depth - 1));
    }
  }

 private:
  std::mt19937_64 rng_;
};

TEST(NormalForm, RandomizedFormsPreserveValues) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> value(-3, 3);
  int compared = 0;
  for (uint64_t seed = 1; seed <= 1500; ++seed) {
    Expr e = ExprGenerator(seed).next(4);
    Expr as_product = from_product_form(to_product_form(e));
    Expr as_sum = from_sum_form(to_sum_form(e));
    Expr folded = fold_constants(e);
    for (int k = 0; k < 8; ++k) {
      std::map<std::string, double> loads{{"x[t, n]", value(rng)}, {"y[t, n]", value(rng)}, {"m[t]", value(rng)}, {"z[t]", value(rng)}};
      std::map<std::string, double> vars{{"t", 0}, {"n", static_cast<double>(rng() % 8)}};
      double want = evaluate_with(e, loads, vars, {});
      if (!std::isfinite(want) || std::fabs(want) > 1e12) continue;
      ++compared;
      for (auto& [name, form] : {std::pair{"product", as_product}, {"sum", as_sum}, {"folded", folded}}) {
        double got = evaluate_with(form, loads, vars, {});
        ASSERT_NEAR(got, want, 1e-9 * (1 + std::fabs(want)))
            << name << " form of " << print_expr(e) << " is " << print_expr(form);
      }
    }
  }
  EXPECT_GT(compared, 3000);
}

}  // namespace
}  // namespace solder
