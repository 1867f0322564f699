// Pass: inline pointwise definitions (src/fusion/inline_pointwise.h). Before/expected pairs: the
// expected program is the same program with the pointwise definitions substituted by hand; the
// definitions that remain are compared structurally and as printed text. Inlining must not change
// what the program computes: the reference runs on both and must agree (to the f32 rounding of the
// inlined f32 definitions, which the reference rounds when it writes them and the inlined program
// does not).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/compare.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "fusion/inline_pointwise.h"
#include "ir/printer.h"
#include "../test_util.h"

namespace solder {
namespace {

// The definitions of `after` (parsed) that are reductions or outputs.
std::vector<Definition> expected_defs(const std::string& after) {
  auto program = std::make_shared<Program>(parse_program(after, "expected.sol"));
  std::vector<Definition> defs;
  for (auto& d : program->defs) defs.push_back(d);
  return defs;
}

void expect_inlined(const std::string& before, const std::string& after, const std::vector<std::string>& inlined) {
  BoundProgram bound = testing::bind_text(before);
  InlinedProgram got = inline_pointwise(bound);
  EXPECT_EQ(got.inlined, inlined);
  std::vector<Definition> want = expected_defs(after);
  ASSERT_EQ(got.defs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].target.name);
    EXPECT_EQ(got.defs[i].target.name, want[i].target.name);
    EXPECT_EQ(got.defs[i].reduce, want[i].reduce);
    EXPECT_TRUE(structurally_equal(got.defs[i].body, want[i].body))
        << "got      " << print_expr(got.defs[i].body) << "\nexpected " << print_expr(want[i].body);
  }
}

// The program made of the definitions that remain, bound with the original extents (an index
// variable that inlining leaves without a bare use keeps its extent explicitly).
BoundProgram rebind_inlined(const BoundProgram& bound, const InlinedProgram& inlined) {
  auto rewritten = std::make_shared<Program>(*bound.program);
  rewritten->defs = inlined.defs;
  for (auto& def : rewritten->defs) {
    const BoundDefinition* original = nullptr;
    for (auto& bd : bound.defs) if (bd.def->target.name == def.target.name) original = &bd;
    for (auto* vars : {&def.target.index, &def.reduce_vars})
      for (auto& v : *vars)
        if (!v.extent && def.reduce != ReduceOp::topk) v.extent = make_int(original->extent.at(v.name));
  }
  return bind_program(rewritten, bound.sizes);
}

// Runs the reference on `before` and on the program made of its remaining definitions.
void expect_same_meaning(const std::string& before, uint64_t seed = 3) {
  BoundProgram bound = testing::bind_text(before);
  InlinedProgram inlined = inline_pointwise(bound);
  BoundProgram bound2 = rebind_inlined(bound, inlined);
  TensorSet inputs = make_inputs(bound, seed);
  TensorSet a = run_reference(bound, inputs), b = run_reference(bound2, inputs);
  for (const TensorInfo* out : bound.outputs()) {
    OutputCheck check = compare_output(b.at(out->name), a.at(out->name), 1e-6);
    EXPECT_TRUE(check.ok) << out->name << ": " << check.reason << " (error " << check.error << ")";
  }
}

const char* kSoftmax = R"(program softmax
dim T = 4, N = 16
in x[T, N] : f32
m[t] = max(n) x[t, n]
e[t, n] = exp(x[t, n] - m[t])
z[t] = sum(n) e[t, n]
out y[t, n] = e[t, n] / z[t]
)";

TEST(InlinePointwise, F32DefinitionsInlineWithoutCasts) {
  expect_inlined(kSoftmax, R"(program softmax
dim T = 4, N = 16
in x[T, N] : f32
m[t] = max(n) x[t, n]
z[t] = sum(n) exp(x[t, n] - m[t])
out y[t, n] = exp(x[t, n] - m[t]) / z[t]
)", {"e"});
  expect_same_meaning(kSoftmax);
}

TEST(InlinePointwise, NarrowDtypesInlineAsCasts) {
  const char* ffn = R"(program ffn
dim M = 4, N = 8, K = 8, L = 4
in a[M, K] : f16
in b[K, N] : f16
in d[N, L] : f16
c[m, n] = sum(k) a[m, k] * b[k, n]
h[m, n] : f16 = gelu(c[m, n])
g[m, n] : bf16 = h[m, n] * 2
q[m, n] : f8e4m3 = g[m, n] - 1
out e[m, l] : f16 = sum(n) q[m, n] * d[n, l]
)";
  expect_inlined(ffn, R"(program ffn
dim M = 4, N = 8, K = 8, L = 4
in a[M, K] : f16
in b[K, N] : f16
in d[N, L] : f16
c[m, n] = sum(k) a[m, k] * b[k, n]
out e[m, l] : f16 = sum(n) cast(cast(cast(gelu(c[m, n]), f16) * 2, bf16) - 1, f8e4m3) * d[n, l]
)", {"h", "g", "q"});
  expect_same_meaning(ffn);
}

TEST(InlinePointwise, SubstitutesIndexExpressions) {
  const char* gqa = R"(program gqa
dim H = 4, HKV = 2, G = H // HKV, S = 8
in k[HKV, S] : f32
in q[H, S] : f32
kk[g, j] = k[g, j] * 0.5
sh[h, i, j : S] = q[h, i] * kk[h // G, S - 1 - j]
out r[h, i] = sum(j) sh[h, i, j]
)";
  expect_inlined(gqa, R"(program gqa
dim H = 4, HKV = 2, G = H // HKV, S = 8
in k[HKV, S] : f32
in q[H, S] : f32
out r[h, i] = sum(j) q[h, i] * (k[h // G, S - 1 - j] * 0.5)
)", {"kk", "sh"});
  expect_same_meaning(gqa);
}

TEST(InlinePointwise, OutputsAndReductionsAreNotInlined) {
  const char* text = R"(program outs
dim T = 4, N = 8
in x[T, N] : f32
out a[t, n] = x[t, n] * 2
s[t] = sum(n) a[t, n]
out b[t] = s[t] + 1
out c[t] = sum(n) a[t, n] * b[t]
)";
  // a and b are outputs: they stay, and their consumers keep reading them.
  expect_inlined(text, R"(program outs
dim T = 4, N = 8
in x[T, N] : f32
out a[t, n] = x[t, n] * 2
s[t] = sum(n) a[t, n]
out b[t] = s[t] + 1
out c[t] = sum(n) a[t, n] * b[t]
)", {});
}

TEST(InlinePointwise, ChainsThroughSeveralPointwiseDefinitions) {
  const char* text = R"(program chain
dim T = 4, N = 8
in x[T, N] : f32
in w[N] : bf16
u[t, n] = x[t, n] + w[n]
v[t, n] : bf16 = sigmoid(u[t, n]) * u[t, n]
mx[t] = max(n) v[t, n]
out r[t, n] = select(n < 4, v[t, n] - mx[t], 0)
)";
  expect_inlined(text, R"(program chain
dim T = 4, N = 8
in x[T, N] : f32
in w[N] : bf16
mx[t] = max(n) cast(sigmoid(x[t, n] + w[n]) * (x[t, n] + w[n]), bf16)
out r[t, n] = select(n < 4, cast(sigmoid(x[t, n] + w[n]) * (x[t, n] + w[n]), bf16) - mx[t], 0)
)", {"u", "v"});
  expect_same_meaning(text);
}

TEST(InlinePointwise, ExamplesKeepTheirMeaning) {
  for (const char* name : {"vanilla", "causal", "quant_gemm", "rmsnorm_gemm", "gated_ffn", "nerf_mlp", "llama_decode", "evoformer"}) {
    SCOPED_TRACE(name);
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
    BoundProgram bound = bind_program(program, SizeChoice{true, {}});
    InlinedProgram inlined = inline_pointwise(bound);
    for (auto& d : inlined.defs) EXPECT_TRUE(d.reduce != ReduceOp::none || d.target.is_output) << d.target.name;
    BoundProgram bound2 = rebind_inlined(bound, inlined);
    TensorSet inputs = make_inputs(bound, 5);
    TensorSet a = run_reference(bound, inputs), b = run_reference(bound2, inputs);
    for (const TensorInfo* out : bound.outputs()) {
      OutputCheck check = compare_output(b.at(out->name), a.at(out->name), 1e-5);
      EXPECT_TRUE(check.ok) << out->name << ": " << check.reason << " (error " << check.error << ")";
    }
  }
}

}  // namespace
}  // namespace solder
