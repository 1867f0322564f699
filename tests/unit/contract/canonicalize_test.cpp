// The canonicalizer (src/contract/canonicalize.h): before/expected pairs. Each case is a one-line
// .sol definition `c[...] = sum(...) ...`; its reduce (the definition read as a Kernel IR reduce
// over its own index variables) is canonicalized and the contract printed.
#include <gtest/gtest.h>

#include "contract/canonicalize.h"
#include "kernel/kernel_printer.h"
#include "../test_util.h"

namespace solder {
namespace {

struct Case {
  std::string text;
  Canonicalization result;
  std::string printed;
};

// The last definition of `program` as a reduce, canonicalized under `policy`.
Case canonicalize_last(const std::string& program, bool sixteen_bit = false, bool fp8 = false) {
  BoundProgram bound = testing::bind_text(program);
  const BoundDefinition& def = bound.defs.back();
  ReduceNode r;
  r.op = def.def->reduce;
  for (size_t i = 0; i < def.def->target.index.size(); ++i) {
    r.domain.axes.push_back({def.def->target.index[i].name, def.p_extents[i]});
    r.dst.index.push_back(make_var(def.def->target.index[i].name));
  }
  for (size_t i = 0; i < def.def->reduce_vars.size(); ++i) r.reduce_axes.push_back({def.def->reduce_vars[i].name, def.r_extents[i]});
  r.dst.name = def.def->target.name;
  r.value = def.def->body;
  ContractPolicy policy{sixteen_bit, fp8 ? "fp8 inputs" : sixteen_bit ? "16-bit outputs" : "f32 outputs", fp8};
  Case c;
  c.result = canonicalize_contraction(r, [&](const std::string& name) -> std::optional<DType> { return bound.tensor(name).dtype; }, policy);
  if (c.result.contract) {
    c.printed = print_stmt(make_stmt(*c.result.contract));
    while (!c.printed.empty() && c.printed.back() == '\n') c.printed.pop_back();
  }
  return c;
}

std::string notes(const Case& c) {
  std::string s;
  for (auto& n : c.result.notes) s += n + "\n";
  return s;
}

const char* kHeader =
    "program p\n"
    "dim M = 4, N = 8, K = 16, H = 2\n";

TEST(Canonicalize, PlainBf16ProductIsExactInBf16) {
  Case c = canonicalize_last(std::string(kHeader) +
                             "in a[M, K] : bf16\nin b[K, N] : bf16\n"
                             "out y[m, n] = sum(k) a[m, k] * b[k, n]\n");
  EXPECT_EQ(c.printed, "contract(bf16) y[m, n] = Σ (a[m, k]) · (b[k, n])  over m < 4, n < 8  reducing k < 16  rows m; columns n");
  EXPECT_EQ(notes(c), "T = bf16 (every operand is exact in it)\n");
}

TEST(Canonicalize, RowScaleGoesAfterTheDotAndFp8StaysFp8) {
  // quant_gemm: Σ aq · w · scale[m], aq and w e4m3.
  Case c = canonicalize_last(std::string(kHeader) +
                             "in a[M, K] : bf16\nin w[K, N] : f8e4m3\nin s[M] : f32\n"
                             "aq[m, k] : f8e4m3 = a[m, k] / s[m]\n"
                             "out y[m, n] : bf16 = sum(k) aq[m, k] * w[k, n] * s[m]\n");
  EXPECT_EQ(c.printed, "contract(f8e4m3) y[m, n] = s[m] · Σ (aq[m, k]) · (w[k, n])  over m < 4, n < 8  reducing k < 16  rows m; columns n");
  EXPECT_NE(notes(c).find("scale s[m] applied after the dot product"), std::string::npos) << notes(c);
}

TEST(Canonicalize, ComputedOperandIsRoundedOnlyIn16BitPrograms) {
  // rmsnorm_gemm: x · rsqrt(ms + eps) · g · w, the k-only g folded into A.
  std::string text = std::string(kHeader) +
                     "in x[M, K] : bf16\nin g[K] : bf16\nin w[K, N] : bf16\nin ms[M] : f32\n"
                     "out y[m, n] : bf16 = sum(k) x[m, k] * rsqrt(ms[m] + 1e-5) * g[k] * w[k, n]\n";
  Case sixteen = canonicalize_last(text, true);
  EXPECT_EQ(sixteen.printed,
            "contract(bf16) y[m, n] = rsqrt(ms[m] + 1e-05) · Σ (x[m, k] * g[k]) · (w[k, n])  over m < 4, n < 8  reducing k < 16  rows m; columns n");
  EXPECT_NE(notes(sixteen).find("k-only factor g[k] folded into operand A"), std::string::npos) << notes(sixteen);
  EXPECT_NE(notes(sixteen).find("operand A = x[m, k] * g[k] is computed: rounded to bf16 (16-bit outputs)"), std::string::npos)
      << notes(sixteen);
  Case wide = canonicalize_last(text, false);
  ASSERT_TRUE(wide.result.contract);
  EXPECT_EQ(wide.result.contract->type, MmaType::f32);
  EXPECT_NE(notes(wide).find("T = f32, no operand rounding"), std::string::npos) << notes(wide);
}

TEST(Canonicalize, Fp8ClassRoundsAComputedOperandBesideAnFp8OneToItsType) {
  // attention_fp8's P·V: P = exp(s − m) computed in f32, V e4m3. In the fp8 tolerance class P is
  // rounded to e4m3 (FlashAttention-3's fp8 P·V); in the 16-bit class without an fp8 input nothing
  // holds it (no 16-bit tensor read, an fp8 partner): T stays f32.
  std::string text = std::string(kHeader) +
                     "in sc[M, K] : f32\nin mx[M] : f32\nin v[K, N] : f8e4m3\n"
                     "out y[m, n] : bf16 = sum(k) exp(sc[m, k] - mx[m]) * v[k, n]\n";
  Case fp8 = canonicalize_last(text, true, true);
  EXPECT_EQ(fp8.printed, "contract(f8e4m3) y[m, n] = Σ (exp(sc[m, k] - mx[m])) · (v[k, n])  over m < 4, n < 8  reducing k < 16  rows m; columns n");
  EXPECT_NE(notes(fp8).find("operand A = exp(sc[m, k] - mx[m]) is computed: rounded to f8e4m3, the fp8 type of operand B (fp8 inputs)"),
            std::string::npos)
      << notes(fp8);
  Case sixteen = canonicalize_last(text, true, false);
  ASSERT_TRUE(sixteen.result.contract);
  EXPECT_EQ(sixteen.result.contract->type, MmaType::f32);
  // a computed operand that reads a 16-bit tensor keeps the 16-bit rule in the fp8 class too
  Case mixed = canonicalize_last(std::string(kHeader) +
                                     "in a[M, K] : bf16\nin g[M] : f32\nin w[K, N] : f8e4m3\n"
                                     "out y[m, n] : bf16 = sum(k) exp(a[m, k] - g[m]) * w[k, n]\n",
                                 true, true);
  ASSERT_TRUE(mixed.result.contract);
  EXPECT_EQ(mixed.result.contract->type, MmaType::bf16);
}

TEST(Canonicalize, Fp8ToleranceClassNeedsAnFp8InputAndNarrowOutputs) {
  EXPECT_TRUE(contract_policy_for({{"o", DType::bf16}}, {{"q", DType::f8e4m3}, {"k", DType::bf16}}).fp8);
  EXPECT_EQ(contract_policy_for({{"o", DType::bf16}}, {{"q", DType::f8e4m3}}).why,
            "every output is 16-bit or narrower and input q is fp8 (tolerance class 5e-2)");
  EXPECT_FALSE(contract_policy_for({{"o", DType::bf16}}, {{"q", DType::bf16}}).fp8);
  EXPECT_FALSE(contract_policy_for({{"o", DType::f32}}, {{"q", DType::f8e4m3}}).fp8);
  EXPECT_FALSE(contract_policy_for({{"o", DType::bf16}}).fp8);
}

TEST(Canonicalize, BatchAxesAreSharedAndScalarScalesAreCollected) {
  // Attention scores: q[h, i, d] · k[h, j, d] · rsqrt(D) · 2.
  Case c = canonicalize_last(std::string(kHeader) +
                             "in q[H, M, K] : bf16\nin kk[H, N, K] : bf16\n"
                             "out s[h, i, j] = sum(d) 2.0 * q[h, i, d] * kk[h, j, d] * rsqrt(K)\n");
  EXPECT_EQ(c.printed,
            "contract(bf16) s[h, i, j] = 2.0 * rsqrt(K) · Σ (q[h, i, d]) · (kk[h, j, d])  over h < 2, i < 4, j < 8  reducing d < 16  "
            "rows i; columns j");
}

TEST(Canonicalize, KFreeTermsBecomeABiasTimesTheCount) {
  Case c = canonicalize_last(std::string(kHeader) +
                             "in a[M, K] : f16\nin b[K, N] : f16\nin c[M] : f32\n"
                             "out y[m, n] = sum(k) a[m, k] * b[k, n] - c[m]\n");
  EXPECT_EQ(c.printed,
            "contract(f16) y[m, n] = Σ (a[m, k]) · (b[k, n]) + 16.0 * -c[m]  over m < 4, n < 8  reducing k < 16  rows m; columns n");
}

TEST(Canonicalize, SeveralTermsAccumulateIntoOneContract) {
  Case c = canonicalize_last(std::string(kHeader) +
                             "in a[M, K] : bf16\nin b[K, N] : bf16\nin a2[M, K] : bf16\nin b2[K, N] : bf16\n"
                             "out y[m, n] = sum(k) a[m, k] * b[k, n] + a2[m, k] * b2[k, n]\n");
  EXPECT_EQ(c.printed,
            "contract(bf16) y[m, n] = Σ (a[m, k]) · (b[k, n]) + (a2[m, k]) · (b2[k, n])  over m < 4, n < 8  reducing k < 16  rows m; columns n");
}

TEST(Canonicalize, SeveralReducedAxesAreOneK) {
  // llama_decode's output projection: Σ over (h, d).
  Case c = canonicalize_last(std::string(kHeader) +
                             "in a[H, K] : f16\nin wo[H, K, N] : f16\n"
                             "out y[n] = sum(h, d) a[h, d] * wo[h, d, n]\n");
  EXPECT_EQ(c.printed, "contract(f16) y[n] = Σ (wo[h, d, n]) · (a[h, d])  over n < 8  reducing h < 2, d < 16  rows n; columns none");
}

TEST(Canonicalize, ConcatenationOfTwoExactTensorsStaysExact) {
  // llama_decode's scores over select(j < KV, cache, new).
  Case c = canonicalize_last(std::string(kHeader) +
                             "in q[K] : f16\nin cache[M, K] : f16\nin fresh[K] : f16\n"
                             "out s[j : N] = sum(d) q[d] * select(j < M, cache[j, d], fresh[d])\n");
  ASSERT_TRUE(c.result.contract) << c.result.refusal;
  EXPECT_EQ(c.result.contract->type, MmaType::f16);
  EXPECT_EQ(c.result.contract->row_axes, std::vector<std::string>{"j"});
}

TEST(Canonicalize, MixedBf16AndF16MeetInTf32) {
  Case c = canonicalize_last(std::string(kHeader) +
                             "in a[M, K] : bf16\nin b[K, N] : f16\n"
                             "out y[m, n] = sum(k) a[m, k] * b[k, n]\n");
  ASSERT_TRUE(c.result.contract);
  EXPECT_EQ(c.result.contract->type, MmaType::tf32);
}

TEST(Canonicalize, RefusesWhatIsNotAMatrixProduct) {
  auto refusal = [](const std::string& def, const std::string& inputs = "in x[M, K] : f32\nin b[K, N] : f32\n") {
    return canonicalize_last(std::string(kHeader) + inputs + def).result.refusal;
  };
  EXPECT_EQ(refusal("out y[m] = max(k) x[m, k]\n"), "not a sum");
  EXPECT_EQ(refusal("out y[m] = sum(k) x[m, k] * x[m, k]\n"), "the factors of x[m, k] * x[m, k] do not split into two operands");
  EXPECT_EQ(refusal("out y[m, n] = sum(k) exp(x[m, k] * b[k, n])\n"),
            "the term exp(x[m, k] * b[k, n]) has one operand (a row reduction, not a matrix product)");
  EXPECT_EQ(refusal("out y[m, n] = sum(k) x[m, k] * b[k, n] + x[m, k]\n"),
            "the term x[m, k] has one operand (a row reduction, not a matrix product)");
}

TEST(Canonicalize, MatrixVectorProductHasNoColumns) {
  Case c = canonicalize_last(std::string(kHeader) +
                             "in x[M, K] : bf16\nin w[K] : bf16\n"
                             "out y[m] = sum(k) x[m, k] * w[k]\n");
  EXPECT_EQ(c.printed, "contract(bf16) y[m] = Σ (x[m, k]) · (w[k])  over m < 4  reducing k < 16  rows m; columns none");
}

}  // namespace
}  // namespace solder
