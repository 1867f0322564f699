// The cascaded-reduction analysis (src/algebra/decompose.h): before/expected pairs.
//
// Each case is a small program whose pointwise definitions are inlined (as the fusion pass does)
// and whose last reduction is decomposed with every earlier reduction as D. The expected G, H and
// online forms are compared as printed text; Taylor coefficients and rescale factors are checked by
// evaluation. The randomized test at the end checks decompose's claims independently of its own
// confirmation, at points and ranges that it does not sample.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "algebra/decompose.h"
#include "algebra/normal_form.h"
#include "fusion/inline_pointwise.h"
#include "ir/printer.h"
#include "../test_util.h"

namespace solder {
namespace {

using Kind = Decomposition::Kind;

struct Decomposed {
  Decomposition d;
  std::map<std::string, int64_t> dims;
  Expr body;
};

// Decomposes the body of `target` in `text` (pointwise definitions inlined); D = `d` when given,
// else every reduction defined before it.
Decomposed decompose_in(const std::string& text, const std::string& target, std::set<std::string> d = {}) {
  BoundProgram bound = testing::bind_text(text);
  InlinedProgram inlined = inline_pointwise(bound);
  std::set<std::string> earlier;
  for (auto& def : inlined.defs) {
    if (def.target.name == target) {
      if (!d.empty()) earlier = d;
      auto is_d = [earlier](const std::string& t) { return earlier.count(t) > 0; };
      return {decompose_reduction(def.body, def.reduce, is_d, bound.dims), bound.dims, def.body};
    }
    if (def.reduce != ReduceOp::none) earlier.insert(def.target.name);
  }
  ADD_FAILURE() << "no reduction named " << target;
  return {};
}

std::string text(const Expr& e) { return e ? print_expr(e) : "<none>"; }

double eval(const Expr& e, const std::map<std::string, double>& loads, const std::map<std::string, int64_t>& dims,
            const std::map<std::string, double>& vars = {}) {
  return evaluate_with(e, loads, vars, dims);
}

const char* kSoftmax = R"(program softmax
dim T = 4, N = 64
in x[T, N] : f32
m[t] = max(n) x[t, n]
e[t, n] = exp(x[t, n] - m[t])
z[t] = sum(n) e[t, n]
out y[t, n] = e[t, n] / z[t]
)";

const char* kAttention = R"(program attention
dim S = 32, D = 8
in q[S, D] : f32
in k[S, D] : f32
in v[S, D] : f32
s[i, j] = sum(d) q[i, d] * k[j, d] * rsqrt(D)
m[i] = max(j) s[i, j]
e[i, j] = exp(s[i, j] - m[i])
z[i] = sum(j) e[i, j]
p[i, j] = e[i, j] / z[i]
out o[i, d] = sum(j) p[i, j] * v[j, d]
)";

TEST(Decompose, SoftmaxMaxIsIndependent) {
  Decomposed r = decompose_in(kSoftmax, "m");
  EXPECT_EQ(r.d.kind, Kind::independent);
  EXPECT_TRUE(r.d.d_tensors.empty());
  EXPECT_EQ(text(r.d.online_term), "x[t, n]");
}

TEST(Decompose, SoftmaxDenominatorIsMultiplicativeWithOnlineExp) {
  Decomposed r = decompose_in(kSoftmax, "z");
  ASSERT_EQ(r.d.kind, Kind::multiplicative) << r.d.reason;
  EXPECT_EQ(r.d.d_tensors, std::vector<std::string>{"m"});
  EXPECT_EQ(text(r.d.g), "exp(x[t, n])");
  EXPECT_EQ(text(r.d.h), "exp(-m[t])");
  EXPECT_EQ(text(r.d.h_online), "exp(-m[t])");
  EXPECT_FALSE(r.d.h_deferred.defined());
  // The accumulator adds F itself (kept in range by the running max).
  EXPECT_EQ(text(r.d.online_term), "exp(x[t, n] - m[t])");
  EXPECT_NE(r.d.confirmation.find("confirmed at"), std::string::npos);
  // Online rescale when the max moves: exp(m_old − m).
  Expr rescale = rescale_factor(r.d, {{"m", "m_old"}});
  EXPECT_EQ(text(rescale), "exp(-m[t] + m_old[t])");
  for (auto [m_old, m_new] : {std::pair{1.0, 3.0}, {-2.5, 0.25}, {4.0, 4.0}}) {
    double got = eval(rescale, {{"m[t]", m_new}, {"m_old[t]", m_old}}, r.dims);
    EXPECT_NEAR(got, std::exp(m_old - m_new), 1e-12);
  }
}

TEST(Decompose, AttentionOutputDefersOneOverZ) {
  Decomposed r = decompose_in(kAttention, "o", {"m", "z"});  // s is per tile, not a D
  ASSERT_EQ(r.d.kind, Kind::multiplicative) << r.d.reason;
  std::set<std::string> d(r.d.d_tensors.begin(), r.d.d_tensors.end());
  EXPECT_EQ(d, (std::set<std::string>{"m", "z"}));
  EXPECT_EQ(text(r.d.g), "v[j, d] * exp(s[i, j])");
  EXPECT_EQ(text(r.d.h), "exp(-m[i]) / z[i]");
  EXPECT_EQ(text(r.d.h_online), "exp(-m[i])");        // rescaled as the max moves
  EXPECT_EQ(text(r.d.h_deferred), "1.0 / z[i]");      // applied once, at the end
  // F with the deferred factor set to 1, as written (not re-associated through the normal form)
  EXPECT_EQ(text(r.d.online_term), "exp(s[i, j] - m[i]) * v[j, d]");
  // The rescale factor depends only on m, not on z.
  Expr rescale = rescale_factor(r.d, {{"m", "m_old"}, {"z", "z_old"}});
  EXPECT_EQ(text(rescale), "exp(-m[i] + m_old[i])");
  // online_term × h_deferred = F at a point.
  std::map<std::string, double> at{{"s[i, j]", 0.7}, {"m[i]", 1.5}, {"z[i]", 3.25}, {"v[j, d]", -0.4}};
  double f = eval(r.body, at, r.dims);
  EXPECT_NEAR(eval(r.d.online_term, at, r.dims) * eval(r.d.h_deferred, at, r.dims), f, 1e-12);
  EXPECT_NEAR(f, std::exp(0.7 - 1.5) / 3.25 * -0.4, 1e-12);
}

TEST(Decompose, AttentionDenominatorAndMaxOfTheAttentionCascade) {
  EXPECT_EQ(decompose_in(kAttention, "m", {"none"}).d.kind, Kind::independent);
  Decomposed z = decompose_in(kAttention, "z", {"m"});
  ASSERT_EQ(z.d.kind, Kind::multiplicative);
  EXPECT_EQ(text(z.d.h), "exp(-m[i])");
}

TEST(Decompose, RmsnormGemmDefersRsqrt) {
  Decomposed r = decompose_in(R"(program rmsnorm_gemm
dim T = 4, HID = 32, N = 8
in x[T, HID] : f32
in g[HID] : f32
in w[HID, N] : f32
ms[t] = sum(c) x[t, c] * x[t, c] / HID
xn[t, c] = x[t, c] * rsqrt(ms[t] + 1e-5) * g[c]
out y[t, n] = sum(c) xn[t, c] * w[c, n]
)", "y");
  ASSERT_EQ(r.d.kind, Kind::multiplicative) << r.d.reason;
  EXPECT_EQ(r.d.d_tensors, std::vector<std::string>{"ms"});
  EXPECT_EQ(text(r.d.g), "x[t, c] * g[c] * w[c, n]");
  EXPECT_EQ(text(r.d.h), "rsqrt(ms[t] + 1e-05)");
  EXPECT_FALSE(r.d.h_online.defined());  // nothing to rescale while streaming
  EXPECT_EQ(text(r.d.h_deferred), "rsqrt(ms[t] + 1e-05)");
  EXPECT_EQ(text(r.d.online_term), "x[t, c] * g[c] * w[c, n]");
  EXPECT_EQ(text(rescale_factor(r.d, {{"ms", "ms_old"}})), "1.0");
  std::map<std::string, double> at{{"x[t, c]", 0.5}, {"g[c]", 1.1}, {"w[c, n]", -2.0}, {"ms[t]", 0.81}};
  EXPECT_NEAR(eval(r.d.g, at, r.dims) * eval(r.d.h, at, r.dims), eval(r.body, at, r.dims), 1e-12);
}

TEST(Decompose, Fp8QuantCastIsRefusedNamingTheCast) {
  Decomposed r = decompose_in(R"(program quant_gemm
dim M = 4, N = 8, K = 32
in a[M, K] : bf16
in w[K, N] : f8e4m3
amax[m] = max(k) abs(a[m, k])
scale[m] = amax[m] / 448
aq[m, k] : f8e4m3 = a[m, k] / scale[m]
out c[m, n] : bf16 = sum(k) aq[m, k] * w[k, n] * scale[m]
)", "c");
  EXPECT_EQ(r.d.kind, Kind::refused);
  EXPECT_FALSE(r.d.decomposable());
  EXPECT_NE(r.d.reason.find("cast(a[m, k] / (amax[m] / 448), f8e4m3)"), std::string::npos) << r.d.reason;
  EXPECT_NE(r.d.reason.find("amax"), std::string::npos) << r.d.reason;
  EXPECT_NE(r.d.reason.find("not a homomorphism"), std::string::npos) << r.d.reason;
}

const char* kVariance = R"(program variance
dim BS = 2, L = 64
in x[BS, L] : f32
mean[b] = sum(l) x[b, l] / L
out var[b] = sum(l) pow(x[b, l] - mean[b], 2) / L
)";

TEST(Decompose, VarianceIsAPolynomialOfDegreeTwo) {
  Decomposed r = decompose_in(kVariance, "var");
  ASSERT_EQ(r.d.kind, Kind::polynomial) << r.d.reason;
  EXPECT_EQ(text(r.d.d_load), "mean[b]");
  ASSERT_EQ(r.d.taylor.size(), 3u);
  EXPECT_EQ(polynomial_degree(r.body, r.d.d_load), 2);
  // F_k = (1/k!) ∂^k F / ∂mean^k: (x − m)²/L, −2(x − m)/L, 1/L.
  const double L = 64;
  for (double x : {-1.5, 0.0, 2.25, 1000.5})
    for (double m : {-0.5, 0.75, 999.0}) {
      std::map<std::string, double> at{{"x[b, l]", x}, {"mean[b]", m}};
      EXPECT_NEAR(eval(r.d.taylor[0], at, r.dims), (x - m) * (x - m) / L, 1e-9);
      EXPECT_NEAR(eval(r.d.taylor[1], at, r.dims), -2 * (x - m) / L, 1e-12);
      EXPECT_NEAR(eval(r.d.taylor[2], at, r.dims), 1 / L, 1e-15);
    }
  // The shift B'_0 = Σ_k δ^k B_k reproduces F at a moved centre.
  std::map<std::string, double> at{{"x[b, l]", 3.0}, {"mean[b]", 1.0}};
  double delta = 0.625, series = 0, power = 1;
  for (auto& f : r.d.taylor) series += eval(f, at, r.dims) * power, power *= delta;
  EXPECT_NEAR(series, (3.0 - 1.625) * (3.0 - 1.625) / L, 1e-12);
}

TEST(Decompose, MomentOfInertiaIsAPolynomialOfDegreeTwo) {
  Decomposed r = decompose_in(R"(program inertia
dim BS = 2, N = 64, DIM = 3
in pos[BS, N, DIM] : f32
in mass[BS, N] : f32
msum[b] = sum(n) mass[b, n]
c[b, x] = sum(n) mass[b, n] * pos[b, n, x] / msum[b]
out moment[b] = sum(n, x) mass[b, n] * pow(pos[b, n, x] - c[b, x], 2)
)", "moment");
  ASSERT_EQ(r.d.kind, Kind::polynomial) << r.d.reason;
  EXPECT_EQ(text(r.d.d_load), "c[b, x]");
  ASSERT_EQ(r.d.taylor.size(), 3u);
  for (double p : {-1.0, 0.5, 7.0})
    for (double c : {0.25, -3.0})
      for (double mass : {0.1, 0.9}) {
        std::map<std::string, double> at{{"pos[b, n, x]", p}, {"c[b, x]", c}, {"mass[b, n]", mass}};
        EXPECT_NEAR(eval(r.d.taylor[0], at, r.dims), mass * (p - c) * (p - c), 1e-12);
        EXPECT_NEAR(eval(r.d.taylor[1], at, r.dims), -2 * mass * (p - c), 1e-12);
        EXPECT_NEAR(eval(r.d.taylor[2], at, r.dims), mass, 1e-12);
      }
  // The centre of mass itself divides by the mass sum: multiplicative, 1/msum deferred.
  Decomposed c = decompose_in(R"(program inertia
dim BS = 2, N = 64, DIM = 3
in pos[BS, N, DIM] : f32
in mass[BS, N] : f32
msum[b] = sum(n) mass[b, n]
out c[b, x] = sum(n) mass[b, n] * pos[b, n, x] / msum[b]
)", "c");
  ASSERT_EQ(c.d.kind, Kind::multiplicative);
  EXPECT_EQ(text(c.d.h_deferred), "1.0 / msum[b]");
  EXPECT_FALSE(c.d.h_online.defined());
}

TEST(Decompose, MaxWithAdditiveDSelectsOnG) {
  Decomposed r = decompose_in(R"(program shifted_max
dim T = 4, N = 32
in x[T, N] : f32
in y[T, N] : f32
z[t] = sum(n) y[t, n]
out r[t] = max(n) 2 * x[t, n] - z[t] + 1
)", "r");
  ASSERT_EQ(r.d.kind, Kind::additive) << r.d.reason;
  EXPECT_EQ(text(r.d.g), "2.0 * x[t, n] + 1.0");
  EXPECT_EQ(text(r.d.h), "-z[t]");
  EXPECT_EQ(text(r.d.h_deferred), "-z[t]");
  EXPECT_EQ(text(r.d.online_term), "2.0 * x[t, n] + 1.0");
}

TEST(Decompose, MinAndArgmaxWithAdditiveD) {
  const char* base = R"(program shifted
dim T = 4, N = 32
in x[T, N] : f32
m[t] = max(n) x[t, n]
)";
  Decomposed mn = decompose_in(std::string(base) + "out r[t] = min(n) x[t, n] + 3 * m[t]\n", "r");
  ASSERT_EQ(mn.d.kind, Kind::additive) << mn.d.reason;
  EXPECT_EQ(text(mn.d.h), "3.0 * m[t]");
  Decomposed am = decompose_in(std::string(base) + "out r[t] = argmax(n) x[t, n] - m[t]\n", "r");
  ASSERT_EQ(am.d.kind, Kind::additive) << am.d.reason;
  EXPECT_EQ(text(am.d.g), "x[t, n]");  // the D-independent selection key
}

TEST(Decompose, MixedExponentIsRefusedNamingTheFactor) {
  Decomposed r = decompose_in(R"(program mixed
dim T = 4, N = 32
in x[T, N] : f32
m[t] = max(n) x[t, n]
out z[t] = sum(n) exp(x[t, n] * m[t])
)", "z");
  EXPECT_EQ(r.d.kind, Kind::refused);
  EXPECT_NE(r.d.reason.find("exp(x[t, n] * m[t])"), std::string::npos) << r.d.reason;
  EXPECT_NE(r.d.reason.find("mixes the reduced data with m"), std::string::npos) << r.d.reason;
}

TEST(Decompose, MixedTermUnderMaxIsRefused) {
  Decomposed r = decompose_in(R"(program mixed
dim T = 4, N = 32
in x[T, N] : f32
z[t] = sum(n) x[t, n]
out r[t] = max(n) x[t, n] * z[t]
)", "r");
  EXPECT_EQ(r.d.kind, Kind::refused);
  EXPECT_NE(r.d.reason.find("x[t, n] * z[t]"), std::string::npos) << r.d.reason;
}

TEST(Decompose, ProductWithDIsRefused) {
  Decomposed r = decompose_in(R"(program prod_d
dim T = 4, N = 32
in x[T, N] : f32
m[t] = max(n) x[t, n]
out p[t] = prod(n) x[t, n] * m[t]
)", "p");
  EXPECT_EQ(r.d.kind, Kind::refused);
  EXPECT_NE(r.d.reason.find("prod"), std::string::npos) << r.d.reason;
  EXPECT_NE(r.d.reason.find("m"), std::string::npos) << r.d.reason;
}

TEST(Decompose, NonPolynomialInDIsRefused) {
  Decomposed r = decompose_in(R"(program tanh_d
dim T = 4, N = 32
in x[T, N] : f32
m[t] = sum(n) x[t, n]
out z[t] = sum(n) tanh(x[t, n] - m[t])
)", "z");
  EXPECT_EQ(r.d.kind, Kind::refused);
  EXPECT_NE(r.d.reason.find("tanh(x[t, n] - m[t])"), std::string::npos) << r.d.reason;
}

TEST(Decompose, MaskSelectInsideExpStaysAnXFactor) {
  Decomposed r = decompose_in(R"(program causal
dim S = 32
in s0[S, S] : f32
sm[i, j] = select(j <= i, s0[i, j], -inf)
m[i] = max(j) sm[i, j]
out z[i] = sum(j) exp(sm[i, j] - m[i])
)", "z");
  ASSERT_EQ(r.d.kind, Kind::multiplicative) << r.d.reason;
  EXPECT_EQ(text(r.d.g), "exp(select(j <= i, s0[i, j], -inf))");
  EXPECT_EQ(text(r.d.h), "exp(-m[i])");
}

TEST(Decompose, PolynomialDegreeAndDerivative) {
  Expr x = make_load("x", {make_var("n")});
  Expr m = make_load("m", {make_var("t")});
  EXPECT_EQ(polynomial_degree(x, m), 0);
  EXPECT_EQ(polynomial_degree(m, m), 1);
  EXPECT_EQ(polynomial_degree(make_binary(BinaryOp::pow, x - m, make_const(3)), m), 3);
  EXPECT_EQ(polynomial_degree(x * m * m - m, m), 2);
  EXPECT_EQ(polynomial_degree(x / m, m), -1);
  EXPECT_EQ(polynomial_degree(make_unary(UnaryOp::exp, m), m), -1);
  EXPECT_EQ(polynomial_degree(make_binary(BinaryOp::pow, m, make_const(0.5)), m), -1);
  Expr d = derivative(x * m * m, m);
  std::map<std::string, int64_t> dims;
  EXPECT_NEAR(eval(d, {{"x[n]", 1.5}, {"m[t]", 2.0}}, dims), 2 * 1.5 * 2.0, 1e-12);
}

// ---- Randomized confirmation -------------------------------------------------------------------
// Random bodies over X loads (x, y), D loads (m, z) and the index n. Whenever decompose claims a
// decomposition, the claim is checked here at fresh points over wider ranges than decompose
// samples (D may be negative, X up to ±4). A claim that fails anywhere both sides are finite is a
// wrong claim. The checker itself is shown to catch a wrong claim (a mutated decomposition).

class BodyGenerator {
 public:
  explicit BodyGenerator(uint64_t seed) : rng_(seed) {}
  Expr body(int depth) {
    int pick = static_cast<int>(rng_() % (depth <= 0 ? 4 : 16));
    switch (pick) {
      case 0: return x();
      case 1: return y();
      case 2: return rng_() % 3 == 0 ? make_const(static_cast<double>(rng_() % 5) - 2.0 + 0.5) : d();
      case 3: return rng_() % 2 ? d() : x();
      case 4: return make_binary(BinaryOp::add, body(depth - 1), body(depth - 1));
      case 5: return make_binary(BinaryOp::sub, body(depth - 1), body(depth - 1));
      case 6: case 7: return make_binary(BinaryOp::mul, body(depth - 1), body(depth - 1));
      case 8: return make_binary(BinaryOp::div, body(depth - 1), safe(body(depth - 1)));
      case 9: case 10: return make_unary(UnaryOp::exp, body(depth - 1));
      case 11: return make_unary(UnaryOp::tanh, body(depth - 1));
      case 12: return make_unary(UnaryOp::sigmoid, body(depth - 1));
      case 13: return make_binary(rng_() % 2 ? BinaryOp::max : BinaryOp::min, body(depth - 1), body(depth - 1));
      case 14: return make_select(mask(), body(depth - 1), body(depth - 1));
      default: return make_binary(BinaryOp::pow, body(depth - 1), make_const(static_cast<double>(1 + rng_() % 3)));
    }
  }

 private:
  std::mt19937_64 rng_;
  Expr x() { return make_load("x", {make_var("t"), make_var("n")}); }
  Expr y() { return make_load("y", {make_var("t"), make_var("n")}); }
  Expr d() { return rng_() % 2 ? make_load("m", {make_var("t")}) : make_load("z", {make_var("t")}); }
  // log(abs(e) + 1): a denominator that never vanishes
  Expr safe(Expr e) { return make_binary(BinaryOp::add, make_unary(UnaryOp::log, make_binary(BinaryOp::add, make_unary(UnaryOp::abs, e), make_const(1))), make_const(0.5)); }
  Expr mask() { return make_binary(BinaryOp::lt, make_var("n"), make_int(static_cast<int64_t>(rng_() % 12))); }
};

struct ClaimCheck {
  int points = 0;
  std::string failure;  // "" when the claim held everywhere
};

// Checks a claimed decomposition of `body` at random points; D = m, z.
ClaimCheck check_claim(const Expr& body, ReduceOp op, const Decomposition& dec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> xs(-4, 4), ds(-3, 3);
  std::map<std::string, int64_t> dims;
  ClaimCheck out;
  auto close = [](double a, double b) { return std::fabs(a - b) <= 1e-7 * (std::fabs(a) + std::fabs(b)) + 1e-9; };
  for (int trial = 0; trial < 200 && out.failure.empty(); ++trial) {
    std::map<std::string, double> a{{"x[t, n]", xs(rng)}, {"y[t, n]", xs(rng)}, {"m[t]", ds(rng)}, {"z[t]", ds(rng)}};
    std::map<std::string, double> vars{{"t", 0}, {"n", static_cast<double>(rng() % 16)}};
    std::map<std::string, double> b = a;  // same X, other D
    b["m[t]"] = ds(rng);
    b["z[t]"] = ds(rng);
    std::map<std::string, double> x0 = a;  // other X, same D
    x0["x[t, n]"] = xs(rng);
    x0["y[t, n]"] = xs(rng);
    double f = evaluate_with(body, a, vars, dims);
    if (!std::isfinite(f)) continue;
    auto at = [&](const Expr& e, const std::map<std::string, double>& p) { return evaluate_with(e, p, vars, dims); };
    std::string why;
    switch (dec.kind) {
      case Kind::independent:
        if (!close(at(body, b), f)) why = "F depends on D but was called independent";
        break;
      case Kind::multiplicative: {
        double gh = at(dec.g, a) * at(dec.h, a);
        double split = at(dec.online_term, a) * (dec.h_deferred ? at(dec.h_deferred, a) : 1.0);
        if (std::isfinite(gh) && !close(f, gh)) why = "F != G*H";
        else if (std::isfinite(split) && !close(f, split)) why = "F != online_term * h_deferred";
        else {
          // eq. 23: F(x,d)·F(x0,d0) = F(x,d0)·F(x0,d)
          std::map<std::string, double> x0b = b;
          x0b["x[t, n]"] = x0["x[t, n]"];
          x0b["y[t, n]"] = x0["y[t, n]"];
          double lhs = f * at(body, x0b), rhs = at(body, b) * at(body, x0);
          if (std::isfinite(lhs) && std::isfinite(rhs) && !close(lhs, rhs)) why = "fixed-point identity fails";
        }
        break;
      }
      case Kind::additive: {
        double gh = at(dec.g, a) + at(dec.h, a);
        if (std::isfinite(gh) && !close(f, gh)) why = "F != G + H";
        // the selection must not depend on D: F(x,d) - F(x0,d) = G(x) - G(x0) (to the rounding of F)
        double f0 = at(body, x0);
        double lhs = f - f0, rhs = at(dec.g, a) - at(dec.g, x0);
        double slack = 1e-7 * (std::fabs(f) + std::fabs(f0)) + 1e-9;
        if (why.empty() && std::isfinite(lhs) && std::isfinite(rhs) && std::fabs(lhs - rhs) > slack) why = "G depends on D";
        break;
      }
      case Kind::polynomial: {
        const std::string key = print_expr(dec.d_load);
        double delta = b[key] - a[key];
        std::map<std::string, double> shifted = a;
        shifted[key] = b[key];
        double direct = at(body, shifted), series = 0, power = 1;
        for (auto& fk : dec.taylor) series += at(fk, a) * power, power *= delta;
        if (std::isfinite(direct) && std::isfinite(series) && !close(direct, series)) why = "Taylor series does not reproduce F";
        break;
      }
      case Kind::refused: break;
    }
    (void)op;
    ++out.points;
    if (!why.empty()) {
      out.failure = why + " at x=" + std::to_string(a["x[t, n]"]) + " y=" + std::to_string(a["y[t, n]"]) +
                    " m=" + std::to_string(a["m[t]"]) + " z=" + std::to_string(a["z[t]"]);
    }
  }
  return out;
}

TEST(Decompose, RandomizedClaimsHoldAtFreshPoints) {
  auto is_d = [](const std::string& t) { return t == "m" || t == "z"; };
  std::map<std::string, int64_t> dims;
  std::map<Kind, int> counts;
  int checked = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    BodyGenerator gen(seed);
    Expr body = gen.body(3);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
      Decomposition dec = decompose_reduction(body, op, is_d, dims);
      ++counts[dec.kind];
      SCOPED_TRACE("seed " + std::to_string(seed) + " " + std::string(reduce_op_name(op)) + "(n) " + print_expr(body));
      if (!dec.decomposable()) {
        EXPECT_FALSE(dec.reason.empty());
        continue;
      }
      ClaimCheck c = check_claim(body, op, dec, seed * 7 + 3);
      EXPECT_TRUE(c.failure.empty()) << decomposition_kind_name(dec.kind) << ": " << c.failure;
      checked += c.points > 0;
    }
  }
  // The generator reaches every outcome, so the check above is not vacuous.
  EXPECT_GT(counts[Kind::independent], 50);
  EXPECT_GT(counts[Kind::multiplicative], 50);
  EXPECT_GT(counts[Kind::additive], 50);
  EXPECT_GT(counts[Kind::polynomial], 10);
  EXPECT_GT(counts[Kind::refused], 300);
  EXPECT_GT(checked, 300);
}

TEST(Decompose, ClaimCheckerCatchesWrongClaims) {
  auto is_d = [](const std::string& t) { return t == "m" || t == "z"; };
  std::map<std::string, int64_t> dims;
  Expr x = make_load("x", {make_var("t"), make_var("n")});
  Expr m = make_load("m", {make_var("t")});
  // A correct claim, then the same claim mutated.
  Expr body = make_unary(UnaryOp::exp, x - m);
  Decomposition good = decompose_reduction(body, ReduceOp::sum, is_d, dims);
  ASSERT_EQ(good.kind, Kind::multiplicative);
  EXPECT_TRUE(check_claim(body, ReduceOp::sum, good, 1).failure.empty());
  Decomposition bad = good;
  bad.h = make_unary(UnaryOp::exp, m);  // wrong sign
  EXPECT_FALSE(check_claim(body, ReduceOp::sum, bad, 1).failure.empty());
  // A body that is not decomposable, claimed as if it were.
  Expr mixed = make_unary(UnaryOp::tanh, x - m);
  Decomposition fake = good;
  EXPECT_FALSE(check_claim(mixed, ReduceOp::sum, fake, 1).failure.empty());
  Decomposition poly = decompose_reduction(make_binary(BinaryOp::pow, x - m, make_const(2)), ReduceOp::sum, is_d, dims);
  ASSERT_EQ(poly.kind, Kind::polynomial);
  EXPECT_TRUE(check_claim(make_binary(BinaryOp::pow, x - m, make_const(2)), ReduceOp::sum, poly, 2).failure.empty());
  poly.taylor.pop_back();  // drop the quadratic term
  EXPECT_FALSE(check_claim(make_binary(BinaryOp::pow, x - m, make_const(2)), ReduceOp::sum, poly, 2).failure.empty());
  // And decompose itself refuses these bodies.
  EXPECT_EQ(decompose_reduction(mixed, ReduceOp::sum, is_d, dims).kind, Kind::refused);
  EXPECT_EQ(decompose_reduction(x * m, ReduceOp::max, is_d, dims).kind, Kind::refused);
}

}  // namespace
}  // namespace solder
