// The implicit-GEMM form of convolutions (contract/gathered_gemm_fit.h, lower_whole_contraction):
// random small 2-D convolutions — NCHW, kernel 1×1 to 5×5, stride 1 or 2, zero padding, ragged sizes
// (at least 16 output pixels and channels: one mma tile),
// a bias and ReLU consumer or none — lowered as one whole `contract` (K = C_in·KH·KW flattened, the
// padding a zero-filled select in the gathered A operand), run on the CPU executor, must agree with
// the plain reduce (the unfused lowering without contracts) and with the float64 reference. The
// canonical form must be the gathered GEMM's (the skeleton does not stage an im2col operand), with
// M = N·HO·WO rows, N = C_out columns and K = C_in·KH·KW. Seeded; a failure prints the program.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "backend/cuda/gathered_gemm_writer.h"
#include "contract/gathered_gemm_fit.h"
#include "contract/gemm_skeleton_fit.h"
#include "driver/compile.h"
#include "kernel/kernel_printer.h"
#include "lower/lower_unfused.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

struct Conv {
  int n, c, h, w, o, kh, kw, stride, ph, pw, ho, wo;
  std::string text;
};

Conv random_conv(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  Conv v;
  v.n = pick(1, 2);
  v.c = pick(1, 6);
  v.h = pick(4, 9);
  v.w = pick(4, 11);
  v.o = pick(16, 40);  // at least one 16 x 16 mma tile (fit_gathered_gemm), ragged against 32
  const int kernels[] = {1, 3, 5};
  v.kh = kernels[pick(0, 2)];
  v.kw = pick(0, 3) == 0 ? kernels[pick(0, 2)] : v.kh;
  v.stride = pick(1, 2);
  v.ph = v.kh / 2;
  v.pw = v.kw / 2;
  v.ho = (v.h + 2 * v.ph - v.kh) / v.stride + 1;
  v.wo = (v.w + 2 * v.pw - v.kw) / v.stride + 1;
  if (v.ho < 1 || v.wo < 1 || v.n * v.ho * v.wo < 16) v.stride = 1, v.ho = v.h + 2 * v.ph - v.kh + 1, v.wo = v.w + 2 * v.pw - v.kw + 1;
  const bool relu = pick(0, 1) == 1;
  const std::string type = pick(0, 2) ? "f16" : "bf16";
  auto s = [](int x) { return std::to_string(x); };
  const std::string row = "r * " + s(v.stride) + " + u - " + s(v.ph), col = "q * " + s(v.stride) + " + t - " + s(v.pw);
  std::string& text = v.text;
  text = "program conv_" + std::to_string(seed) + "\n";
  text += "dim NB = " + s(v.n) + ", C = " + s(v.c) + ", H = " + s(v.h) + ", W = " + s(v.w) + ", O = " + s(v.o) + ", KH = " + s(v.kh) +
          ", KW = " + s(v.kw) + ", HO = " + s(v.ho) + ", WO = " + s(v.wo) + "\n";
  text += "in x[NB, C, H, W] : " + type + "\n";
  text += "in wt[O, C, KH, KW] : " + type + " ~ normal(0, 0.5)\n";
  if (relu) text += "in bias[O] : " + type + " ~ normal(0, 0.5)\n";
  const std::string body = "sum(ci, u, t) select(" + row + " >= 0 && " + row + " < H && " + col + " >= 0 && " + col + " < W, x[b, ci, " + row +
                           ", " + col + "], 0) * wt[o, ci, u, t]";
  if (relu) {
    text += "y[b, o, r : HO, q : WO] = " + body + "\n";
    text += "out z[b, o, r, q] : " + type + " = max(y[b, o, r, q] + bias[o], 0)\n";
  } else {
    text += "out y[b, o, r : HO, q : WO] : " + std::string(pick(0, 1) ? "f32" : type.c_str()) + " = " + body + "\n";
  }
  return v;
}

TEST(ConvImplicitGemmProperty, WholeGatheredContractAgreesWithThePlainReduce) {
  const int programs = 40;
  for (int i = 0; i < programs; ++i) {
    const uint64_t seed = 5000 + static_cast<uint64_t>(i);
    Conv v = random_conv(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + v.text);
    BoundProgram bound = testing::bind_text(v.text);
    size_t index = 0;
    for (size_t d = 0; d < bound.defs.size(); ++d)
      if (bound.defs[d].def->target.name == "y") index = d;
    std::string why;
    std::optional<Kernel> whole = lower_whole_contraction(bound, index, &why, false);
    ASSERT_TRUE(whole.has_value()) << why;
    const ContractNode* c = whole->body.back().as<ContractNode>();
    ASSERT_NE(c, nullptr);
    KernelProgram plain = lower_unfused(bound, UnfusedOptions{});
    EXPECT_FALSE(fit_gemm_skeleton(*c, plain.globals).problem.has_value()) << "the skeleton stages no im2col operand";
    GatheredGemmFit fit = fit_gathered_gemm(*c, plain.globals, &plain.dims);
    ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
    EXPECT_EQ(fit.problem->m, int64_t{v.n} * v.ho * v.wo);
    EXPECT_EQ(fit.problem->n, v.o);
    EXPECT_EQ(fit.problem->k, int64_t{v.c} * v.kh * v.kw);
    EXPECT_TRUE(fit.problem->a_rows_fastest);   // x's contiguous axis is the output column's
    EXPECT_FALSE(fit.problem->b_columns_fastest);  // wt's is the reduced kw
    // The writer's two-phase gather: A is one zero-filled select over x (the padding: four guards,
    // one leaf), B one load of wt; both index in 32 bits (small extents; the dims bound H and W in the
    // conditions).
    ASSERT_EQ(fit.problem->a_leaves.size(), 1u);
    EXPECT_EQ(fit.problem->a_leaves[0].guards.size(), 1u);  // the select's one condition (a conjunction), taken
    EXPECT_TRUE(fit.problem->a_leaves[0].guards[0].second);
    ASSERT_EQ(fit.problem->b_leaves.size(), 1u);
    EXPECT_TRUE(fit.problem->b_leaves[0].guards.empty());
    EXPECT_TRUE(fit.problem->a_index32);
    EXPECT_TRUE(fit.problem->b_index32);
    // The whole contract in place of y's kernel, the rest as the plain lowering has it.
    KernelProgram rewritten = plain;
    for (auto& k : rewritten.kernels)
      if (std::find(k.definitions.begin(), k.definitions.end(), "y") != k.definitions.end()) k = *whole;
    verify_kernel_program(rewritten);
    // The CUDA writer takes it (the kernel runs on the GPU: tests/gpu, bench/contract_suites_device.sh
    // runs these programs through the CUDA backend; SOLDER_DUMP_CONV_PROGRAMS=DIR writes them there).
    std::string writer_why;
    for (auto& k : rewritten.kernels)
      if (k.name == whole->name) {
        auto written = write_gathered_gemm_kernel(rewritten, k, &writer_why);
        ASSERT_TRUE(written.has_value()) << writer_why;
        EXPECT_NE(written->source.find("a_issue_"), std::string::npos);
        EXPECT_NE(written->source.find("32-bit indices"), std::string::npos);
      }
    if (const char* dir = std::getenv("SOLDER_DUMP_CONV_PROGRAMS")) std::ofstream(std::string(dir) + "/conv_" + std::to_string(seed) + ".sol") << v.text;
    TensorSet inputs = make_inputs(bound, seed);
    TensorSet reference = run_reference(bound, inputs);
    auto a = testing::verify_kernels(bound, plain, inputs, &reference);
    auto b = testing::verify_kernels(bound, rewritten, inputs, &reference);
    ASSERT_TRUE(a.ok()) << "plain reduce: " << a.failures();
    ASSERT_TRUE(b.ok()) << "whole gathered contract: " << b.failures() << print_kernel_program(rewritten);
    // Beyond the tolerance: the two agree to the float32 sum's reordering.
    for (const TensorInfo* out : bound.outputs()) {
      const auto& x = a.exec.outputs.at(out->name).values;
      const auto& y = b.exec.outputs.at(out->name).values;
      ASSERT_EQ(x.size(), y.size());
      for (size_t e = 0; e < x.size(); ++e) ASSERT_NEAR(x[e], y[e], 1e-2 * (1 + std::abs(x[e]))) << out->name << " element " << e;
    }
  }
}

// The 32-bit proof refuses where an operand's offset can pass 2^31 (a 2^31-element operand, x's
// 40 000 × 60 000 rows): that operand keeps 64-bit indices; the small one still gets 32-bit ones.
TEST(ConvImplicitGemmProperty, IndicesAre32BitOnlyWhereProved) {
  BoundProgram big = testing::bind_text(
      "program p\ndim M = 40000, N = 48, K = 60000\nin a[M, K] : bf16\nin b[N, K] : bf16\nout y[m, n] = sum(k) a[m, k] * b[n, k]\n");
  std::string why;
  auto kernel = lower_whole_contraction(big, 0, &why, false);
  ASSERT_TRUE(kernel.has_value()) << why;
  const ContractNode* c = kernel->body.back().as<ContractNode>();
  KernelProgram plain = lower_unfused(big, UnfusedOptions{});
  GatheredGemmFit fit = fit_gathered_gemm(*c, plain.globals);
  if (!fit.problem) GTEST_SKIP() << "taken by the skeleton's fit: " << fit.refusal;
  EXPECT_FALSE(fit.problem->a_index32);
  EXPECT_TRUE(fit.problem->b_index32);
  ASSERT_EQ(fit.problem->a_leaves.size(), 1u);
}

// The gathered GEMM refuses what it cannot run exactly: f32 operands (no 16-bit T).
TEST(ConvImplicitGemmProperty, RefusesFloat32Operands) {
  const char* text =
      "program conv32\n"
      "dim C = 4, H = 6, W = 6, O = 8\n"
      "in x[C, H, W] : f32\nin wt[O, C, 3, 3] : f32\n"
      "out y[o, r : H, q : W] : f32 = sum(ci, u, t) select(r + u - 1 >= 0 && r + u - 1 < H && q + t - 1 >= 0 && q + t - 1 < W, "
      "x[ci, r + u - 1, q + t - 1], 0) * wt[o, ci, u, t]\n";
  BoundProgram bound = testing::bind_text(text);
  std::string why;
  EXPECT_FALSE(lower_whole_contraction(bound, 0, &why, false).has_value());
  EXPECT_NE(why.find("not a gathered GEMM either"), std::string::npos) << why;
}

// What the skeleton refuses for its layout alone (rows of 126 bytes) the gathered GEMM takes; a
// matrix-vector product it refuses too.
TEST(ConvImplicitGemmProperty, TakesUnalignedRowsButNotMatrixVectorProducts) {
  BoundProgram unaligned = testing::bind_text(
      "program p\ndim M = 40, N = 48, K = 63\nin a[M, K] : bf16\nin b[K, N] : bf16\nout y[m, n] = sum(k) a[m, k] * b[k, n]\n");
  std::string why;
  auto kernel = lower_whole_contraction(unaligned, 0, &why, false);
  ASSERT_TRUE(kernel.has_value()) << why;
  EXPECT_NE(kernel->body[0].get()->comment.find("gathered GEMM"), std::string::npos);
  BoundProgram matvec = testing::bind_text("program p\ndim M = 40, K = 64\nin a[M, K] : bf16\nin w[K] : bf16\nout y[m] = sum(k) a[m, k] * w[k]\n");
  EXPECT_FALSE(lower_whole_contraction(matvec, 0, &why, false).has_value());
  EXPECT_NE(why.find("not a gathered GEMM either: no row or no column axis"), std::string::npos) << why;
}

}  // namespace
}  // namespace solder
