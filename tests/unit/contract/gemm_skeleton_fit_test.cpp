// The skeleton choice (src/contract/gemm_skeleton_fit.h) and the unfused lowering's whole
// contractions (lower_whole_contraction): which contractions run as one launch of the GEMM skeleton,
// and that the CPU executor computes them right.
#include <gtest/gtest.h>

#include "contract/gemm_skeleton_fit.h"
#include "driver/compile.h"
#include "fusion/whole_contractions.h"
#include "plan/skeleton_choice.h"
#include "lower/lower_unfused.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

// The skeleton's refusal: with the gathered GEMM (gathered_gemm_fit.h, which takes some of these
// instead) off, the reason up to the gathered GEMM's own.
std::string whole_refusal(const std::string& text) {
  BoundProgram bound = testing::bind_text(text);
  std::string why;
  setenv("SOLDER_GATHERED_GEMM", "0", 1);
  auto kernel = lower_whole_contraction(bound, bound.defs.size() - 1, &why);
  unsetenv("SOLDER_GATHERED_GEMM");
  return kernel ? "" : why.substr(0, why.find("; not a gathered GEMM either"));
}

const char* kDims = "program p\ndim B = 3, M = 40, N = 48, K = 64\n";

TEST(GemmSkeletonFit, TakesKMajorAndMnMajorBf16AndF16Operands) {
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[M, K] : bf16\nin b[K, N] : bf16\nout y[m, n] : bf16 = sum(k) a[m, k] * b[k, n]\n"), "");
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[K, M] : f16\nin b[N, K] : f16\nout y[m, n] = sum(k) a[k, m] * b[n, k]\n"), "");
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[B, M, K] : bf16\nin b[K, N] : bf16\nout y[z, m, n] = sum(k) a[z, m, k] * b[k, n]\n"), "");
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[B, M, K] : bf16\nin b[B, N, K] : bf16\nout y[z, m, n] = sum(k) a[z, m, k] * b[z, n, k]\n"), "");
  EXPECT_EQ(whole_refusal(std::string(kDims) +
                          "in a[M, K] : f8e4m3\nin b[N, K] : f8e5m2\nin s[M] : f32\nout y[m, n] : bf16 = sum(k) a[m, k] * b[n, k] * s[m]\n"),
            "");
  // All f32, 64 rows and columns: T = 3xtf32, any layout (the split copies the operands K-major).
  EXPECT_EQ(whole_refusal("program p\ndim M = 64, N = 64, K = 63\nin a[K, M] : f32\nin b[K, N] : f32\nout y[m, n] = sum(k) a[k, m] * b[k, n]\n"), "");
}

TEST(GemmSkeletonFit, RefusesWhatTheSkeletonCannotStage) {
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[M, K] : f32\nin b[K, N] : f32\nout y[m, n] = sum(k) a[m, k] * b[k, n]\n"),
            "T = f32 (the skeleton takes bf16, f16, e4m3, e5m2, tf32 and 3xtf32)");  // 40 rows: no 3xTF32
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[M, K] : bf16\nin b[K, N] : bf16\nin g[K] : bf16\nout y[m, n] : bf16 = sum(k) a[m, k] * g[k] * b[k, n]\n"),
            "operand A = a[m, k] * g[k] is computed, not a load (the skeleton stages loads)");
  EXPECT_EQ(whole_refusal("program p\ndim M = 48, N = 48, K = 64\nin a[K, M] : f8e4m3\nin b[K, N] : f8e4m3\n"
                          "out y[m, n] : bf16 = sum(k) a[k, m] * b[k, n]\n"),
            "an fp8 operand is not K-major (fp8 wgmma reads K-major operands)");
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[M, K] : bf16\nin w[K] : bf16\nout y[m] = sum(k) a[m, k] * w[k]\n"),
            "no row or no column axis (a matrix-vector product)");
  EXPECT_EQ(whole_refusal("program p\ndim M = 40, N = 48, K = 63\nin a[M, K] : bf16\nin b[K, N] : bf16\nout y[m, n] = sum(k) a[m, k] * b[k, n]\n"),
            "operand A's rows are 126 bytes apart (the tensor memory accelerator needs a multiple of 16)");
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[M, K] : bf16\nin b[K, N] : f16\nout y[m, n] = sum(k) a[m, k] * b[k, n]\n"),
            "operands of bf16 and f16 with T = tf32 (the skeleton takes two of one 16-bit type or two fp8, or two f32 with T tf32 or "
            "3xtf32)");
  // 3xtf32: several row axes are refused (the split takes one row, column and reduced axis).
  EXPECT_EQ(whole_refusal("program p\ndim M = 8, H = 8, N = 64, K = 64\nin a[M, H, K] : f32\nin b[K, N] : f32\n"
                          "out y[m, h, n] = sum(k) a[m, h, k] * b[k, n]\n"),
            "3xtf32 over several row, column or reduced axes (the split takes one of each)");
}

// With the GPU's options and without fusion, a whole contraction is one kernel of one contract; the
// CPU executor runs it (one block) and it matches the reference, scale and all.
TEST(GemmSkeletonFit, WholeContractionKernelsVerifyOnTheExecutor) {
  std::string text = std::string(kDims) +
                     "in a[B, M, K] : bf16\nin b[N, K] : bf16\nin s[N] : f32 ~ uniform(0.5, 2)\n"
                     "out y[z, m, n] : bf16 = sum(k) a[z, m, k] * b[n, k] * s[n]\n";
  BoundProgram bound = testing::bind_text(text);
  KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu(false)).kernels;
  ASSERT_EQ(kernels.kernels.size(), 1u);
  ASSERT_EQ(kernels.kernels[0].body.size(), 1u);
  ASSERT_NE(kernels.kernels[0].body[0].as<ContractNode>(), nullptr);
  auto v = testing::verify_kernels(bound, kernels, make_inputs(bound, 3));
  EXPECT_TRUE(v.ok()) << v.failures();
  // Without the option the same definition is tiled (no whole contract).
  KernelProgram tiled = compile_program(bound, CompileOptions{false}).kernels;
  EXPECT_GT(tiled.kernels[0].body.size(), 1u);
}

// Several reduced axes that both operands name consecutively, in one order (einsum 'mkr,krn->mn', and
// 'bmhd,bnhd->bmn' with heads summed): one K of their product, flattened row-major in A's order; the
// whole contraction verifies on the executor. In two orders (a[m, k, r] by b[r, k, n]), or apart in an
// operand: refused.
TEST(GemmSkeletonFit, FlattensSeveralReducedAxesIntoOneK) {
  const char* dims = "program p\ndim B = 2, M = 40, N = 48, K = 8, R = 16\n";
  const std::string mkr = std::string(dims) + "in a[M, K, R] : bf16\nin b[K, R, N] : bf16\nout y[m, n] : bf16 = sum(k, r) a[m, k, r] * b[k, r, n]\n";
  EXPECT_EQ(whole_refusal(mkr), "");
  EXPECT_EQ(whole_refusal(std::string(dims) + "in a[R, K, M] : f16\nin b[N, R, K] : f16\nout y[m, n] : f16 = sum(k, r) a[r, k, m] * b[n, r, k]\n"), "");
  EXPECT_EQ(whole_refusal(std::string(dims) +
                          "in a[B, M, K, R] : bf16\nin b[B, N, K, R] : bf16\nout y[z, m, n] : bf16 = sum(k, r) a[z, m, k, r] * b[z, n, k, r]\n"),
            "");
  EXPECT_EQ(whole_refusal(std::string(dims) + "in a[M, K, R] : bf16\nin b[R, K, N] : bf16\nout y[m, n] : bf16 = sum(k, r) a[m, k, r] * b[r, k, n]\n"),
            "operand B = b[r, k, n] is not indexed [rows…, k, r] or [k, r, rows…] with its rows consecutive");
  EXPECT_EQ(whole_refusal(std::string(dims) + "in a[K, M, R] : bf16\nin b[K, R, N] : bf16\nout y[m, n] : bf16 = sum(k, r) a[k, m, r] * b[k, r, n]\n"),
            "operand A = a[k, m, r] is not indexed [rows…, k, r] or [k, r, rows…] with its rows consecutive");
  // Large enough for the planner to run it whole (not fused under one tile).
  BoundProgram large = testing::bind_text("program p\ndim M = 256, N = 192, K = 8, R = 16\nin a[M, K, R] : bf16\nin b[K, R, N] : bf16\n"
                                          "out y[m, n] : bf16 = sum(k, r) a[m, k, r] * b[k, r, n]\n");
  WholeContractionPlan plan = plan_whole_contractions(large);
  ASSERT_EQ(plan.whole.size(), 1u) << whole_contractions_text(large, plan);
  const ContractNode& c = *plan.whole[0].kernel.body[0].as<ContractNode>();
  GemmSkeletonFit fit = fit_gemm_skeleton(c, program_globals(large));
  ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
  EXPECT_EQ(fit.problem->k, 128);
  EXPECT_EQ(fit.problem->reduce_axes, (std::vector<std::string>{"k", "r"}));
  EXPECT_TRUE(fit.problem->a.k_major);
  EXPECT_EQ(fit.problem->a.ld, 128);
  EXPECT_FALSE(fit.problem->b.k_major);
  EXPECT_EQ(fit.problem->b.k, 128);
  EXPECT_EQ(fit.problem->b.ld, 192);
  BoundProgram bound = testing::bind_text(mkr);
  KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu(false)).kernels;
  ASSERT_EQ(kernels.kernels.size(), 1u);
  ASSERT_NE(kernels.kernels[0].body[0].as<ContractNode>(), nullptr);
  auto v = testing::verify_kernels(bound, kernels, make_inputs(bound, 3));
  EXPECT_TRUE(v.ok()) << v.failures();
}

// torch.matmul of a [M, K] by b [Bt, K, N]: the batch axis z is B's alone and leads it before K, so the
// columns (z, n) are not consecutive in B; z runs as a batch axis, A shared by every batch. The same on
// A's side (a [Bt, K, M] by b [K, N]). Without z, y's first axis is m: a is A (rows m) and b is B
// (columns n, N-major), whichever side the canonical form gave b, so y's contiguous n runs along the
// tile's columns (row stores); SOLDER_GEMM_BATCH_EXCHANGE=0 keeps the contract's sides. The whole
// contraction verifies on the executor.
TEST(GemmSkeletonFit, TakesAOneOperandLeadingAxisAsABatch) {
  const std::string left = std::string(kDims) + "in a[M, K] : bf16\nin b[B, K, N] : bf16\nout y[z, m, n] : bf16 = sum(k) a[m, k] * b[z, k, n]\n";
  EXPECT_EQ(whole_refusal(left), "");
  EXPECT_EQ(whole_refusal(std::string(kDims) + "in a[B, K, M] : f16\nin b[K, N] : f16\nout y[z, m, n] : f16 = sum(k) a[z, k, m] * b[k, n]\n"), "");
  // Large enough for the planner to run it whole (not fused under one tile).
  BoundProgram large = testing::bind_text("program p\ndim B = 3, M = 256, N = 192, K = 64\nin a[M, K] : bf16\nin b[B, K, N] : bf16\n"
                                          "out y[z, m, n] : bf16 = sum(k) a[m, k] * b[z, k, n]\n");
  WholeContractionPlan plan = plan_whole_contractions(large);
  ASSERT_EQ(plan.whole.size(), 1u) << whole_contractions_text(large, plan);
  const ContractNode& c = *plan.whole[0].kernel.body[0].as<ContractNode>();
  // The canonical form names z a side axis of b's operand (b[z, k, n]: z and n not consecutive).
  const bool b_is_a = c.terms[0].a.as<LoadNode>()->tensor == "b";
  std::vector<std::string> sides = b_is_a ? c.row_axes : c.column_axes;
  std::sort(sides.begin(), sides.end());
  EXPECT_EQ(sides, (std::vector<std::string>{"n", "z"}));
  GemmSkeletonFit fit = fit_gemm_skeleton(c, program_globals(large));
  ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
  const GemmSkeletonProblem& p = *fit.problem;
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.batch_axes, (std::vector<std::string>{"z"}));
  EXPECT_EQ(p.row_axes, (std::vector<std::string>{"m"}));
  EXPECT_EQ(p.column_axes, (std::vector<std::string>{"n"}));
  EXPECT_EQ(p.m, 256);
  EXPECT_EQ(p.n, 192);
  EXPECT_EQ(p.a.tensor, "a");
  EXPECT_TRUE(p.a.k_major);
  EXPECT_EQ(p.a.batch, 1);
  EXPECT_EQ(p.b.tensor, "b");
  EXPECT_EQ(p.b.batch, 3);
  EXPECT_EQ(p.b.batch_stride, 64 * 192);
  EXPECT_FALSE(p.b.k_major);
  EXPECT_TRUE(gemm_row_stores(c, p, DType::bf16));
  // The contract's sides (the fit before the exchange): b as A along n, its output down the tile's columns.
  if (b_is_a) {
    setenv("SOLDER_GEMM_BATCH_EXCHANGE", "0", 1);
    GemmSkeletonFit kept = fit_gemm_skeleton(c, program_globals(large));
    unsetenv("SOLDER_GEMM_BATCH_EXCHANGE");
    ASSERT_TRUE(kept.problem.has_value()) << kept.refusal;
    EXPECT_EQ(kept.problem->a.tensor, "b");
    EXPECT_FALSE(kept.problem->a.k_major);
    EXPECT_EQ(kept.problem->row_axes, (std::vector<std::string>{"n"}));
    EXPECT_EQ(kept.problem->b.tensor, "a");
    EXPECT_EQ(kept.problem->b.batch, 1);
    EXPECT_FALSE(gemm_row_stores(c, *kept.problem, DType::bf16));
  }
  // A's side: a [Bt, K, M] is A already (y's first axis after z is m), nothing exchanged.
  BoundProgram right = testing::bind_text("program p\ndim B = 3, M = 256, N = 192, K = 64\nin a[B, K, M] : f16\nin b[K, N] : f16\n"
                                          "out y[z, m, n] : f16 = sum(k) a[z, k, m] * b[k, n]\n");
  WholeContractionPlan right_plan = plan_whole_contractions(right);
  ASSERT_EQ(right_plan.whole.size(), 1u) << whole_contractions_text(right, right_plan);
  GemmSkeletonFit right_fit = fit_gemm_skeleton(*right_plan.whole[0].kernel.body[0].as<ContractNode>(), program_globals(right));
  ASSERT_TRUE(right_fit.problem.has_value()) << right_fit.refusal;
  EXPECT_EQ(right_fit.problem->a.tensor, "a");
  EXPECT_FALSE(right_fit.problem->a.k_major);
  EXPECT_EQ(right_fit.problem->a.batch, 3);
  EXPECT_EQ(right_fit.problem->b.batch, 1);
  EXPECT_EQ(right_fit.problem->column_axes, (std::vector<std::string>{"n"}));
  BoundProgram bound = testing::bind_text(left);
  KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu(false)).kernels;
  ASSERT_EQ(kernels.kernels.size(), 1u);
  ASSERT_NE(kernels.kernels[0].body[0].as<ContractNode>(), nullptr);
  auto v = testing::verify_kernels(bound, kernels, make_inputs(bound, 3));
  EXPECT_TRUE(v.ok()) << v.failures();
}

// All f32: the 3xTF32 split writes the term's a as A3 and its b as B3, so the one-operand batch keeps the
// contract's sides (no exchange) and still runs whole; the split kernels and the GEMM verify on the executor.
TEST(GemmSkeletonFit, KeepsA3xTf32OneOperandBatchOnItsSides) {
  const std::string text = "program p\ndim B = 3, M = 256, N = 192, K = 64\nin a[M, K] : f32\nin b[B, K, N] : f32\n"
                           "out y[z, m, n] : f32 = sum(k) a[m, k] * b[z, k, n]\n";
  BoundProgram bound = testing::bind_text(text);
  WholeContractionPlan plan = plan_whole_contractions(bound);
  ASSERT_EQ(plan.whole.size(), 1u) << whole_contractions_text(bound, plan);
  const ContractNode& c = *plan.whole[0].kernel.body[0].as<ContractNode>();
  ASSERT_EQ(c.type, MmaType::tf32x3);
  GemmSkeletonFit fit = fit_gemm_skeleton(c, program_globals(bound));
  ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
  EXPECT_EQ(fit.problem->a.tensor, c.terms[0].a.as<LoadNode>()->tensor);
  EXPECT_EQ(fit.problem->b.tensor, c.terms[0].b.as<LoadNode>()->tensor);
  KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu(false)).kernels;
  auto v = testing::verify_kernels(bound, kernels, make_inputs(bound, 3));
  EXPECT_TRUE(v.ok()) << v.failures();
}

// A paired contract (gate and up over one A): the dual-B problem, with B2 = gate's weights.
TEST(GemmSkeletonFit, TakesAPairedContractAsADualBProblem) {
  BoundProgram bound = testing::bind_text(
      "program gated\ndim M = 64, N = 128, K = 512\n"
      "in a[M, K] : f16\nin b1[K, N] : f16\nin b2[K, N] : f16\nin b3[N, K] : f16\n"
      "gate[m, n] = sum(k) a[m, k] * b1[k, n]\nup[m, n] = sum(k) a[m, k] * b2[k, n]\n"
      "out h[m, n] : f16 = silu(gate[m, n]) * up[m, n]\n");
  WholeContractionPlan plan = plan_whole_contractions(bound);
  ASSERT_EQ(plan.whole.size(), 1u) << whole_contractions_text(bound, plan);
  ContractNode c = *plan.whole[0].kernel.body[0].as<ContractNode>();
  const std::vector<GlobalTensor> globals = program_globals(bound);
  GemmSkeletonFit fit = fit_gemm_skeleton(c, globals);
  ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
  ASSERT_TRUE(fit.problem->b2.has_value());
  EXPECT_EQ(fit.problem->b.tensor, "b2");
  EXPECT_EQ(fit.problem->b2->tensor, "b1");
  EXPECT_FALSE(fit.problem->b2->k_major);
  // The choice: per-operand BN of at most 128, a multiple of 64 (N-major), no split-K.
  SkeletonChoice choice = choose_skeleton_config(*fit.problem, c.type, DType::f16);
  ASSERT_TRUE(choice.chosen.has_value()) << choice.why;
  EXPECT_LE(choice.chosen->config.bn, 128);
  EXPECT_EQ(choice.chosen->config.bn % 64, 0);
  EXPECT_EQ(choice.chosen->config.split_k, 1);
  EXPECT_NE(choice.why.find("dual-B"), std::string::npos) << choice.why;
  // B2 of another layout than B, or another A: refused.
  ContractNode other = c;
  other.pair_terms[0].b = make_load("b3", {make_var("n"), make_var("k")});
  EXPECT_EQ(fit_gemm_skeleton(other, globals).refusal,
            "the paired B2 = b3 differs from B = b2 in dtype, layout, shape or batch (the dual-B skeleton reads both through one box shape)");
  other = c;
  other.pair_terms.push_back(other.pair_terms[0]);
  EXPECT_EQ(fit_gemm_skeleton(other, globals).refusal, "2 paired product terms (the dual-B skeleton takes one)");
}

// An operand longer along K than the contract (a padded copy, fusion/padded_operands.h: K 63 in rows of
// 64) is read over the contract's K with the tensor's pitch, and the skeleton choice takes it: its
// rows are 128 bytes apart, though K is 126 bytes. Shorter than K: refused.
TEST(GemmSkeletonFit, ReadsALongerOperandOverTheContractsK) {
  const std::vector<GlobalTensor> globals = {{"a", {256, 64}, DType::f16, GlobalRole::input},
                                             {"b", {63, 128}, DType::f16, GlobalRole::input},
                                             {"y", {256, 128}, DType::f16, GlobalRole::output}};
  ContractNode c;
  c.domain.axes = {{"m", 256}, {"n", 128}};
  c.reduce_axes = {{"k", 63}};
  c.dst = Access{"y", {make_var("m"), make_var("n")}};
  c.terms = {ContractTerm{make_load("a", {make_var("m"), make_var("k")}), make_load("b", {make_var("k"), make_var("n")})}};
  c.type = MmaType::f16;
  c.row_axes = {"m"};
  c.column_axes = {"n"};
  GemmSkeletonFit fit = fit_gemm_skeleton(c, globals);
  ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
  EXPECT_EQ(fit.problem->k, 63);
  EXPECT_EQ(fit.problem->a.k, 63);
  EXPECT_EQ(fit.problem->a.ld, 64);
  EXPECT_EQ(fit.problem->b.k, 63);
  EXPECT_EQ(fit.problem->b.ld, 128);
  SkeletonChoice choice = choose_skeleton_config(*fit.problem, c.type, DType::f16);
  EXPECT_TRUE(choice.chosen.has_value()) << choice.why;
  c.reduce_axes = {{"k", 65}};
  EXPECT_EQ(fit_gemm_skeleton(c, globals).refusal, "the operands' shapes are not the contract's M, N, K");
}

// K ranges (the default): y = Σ_k cat([a1, a2])[m, k] · b[k, n] as its two product terms,
// select(k < K1, a1[m, k], 0) · b and select(k < K1, 0, a2[m, k − K1]) · b, fits as two ranges: a1 with b's
// rows k < K1, a2 with b from row K1 (an offset of K1 rows), any K1 for an N-major b; a K-major b only where
// K1 · |T| is a multiple of 16 bytes. SOLDER_GEMM_K_RANGES=0: two product terms are refused, as before.
TEST(GemmSkeletonFit, TakesTwoKRangesWithTheirOwnTensorMaps) {
  auto contract = [](int64_t k1, int64_t k, bool b_k_major) {
    ContractNode c;
    c.domain.axes = {{"m", 256}, {"n", 128}};
    c.reduce_axes = {{"k", k}};
    c.dst = Access{"y", {make_var("m"), make_var("n")}};
    Expr b = b_k_major ? make_load("bt", {make_var("n"), make_var("k")}) : make_load("b", {make_var("k"), make_var("n")});
    Expr cond = make_binary(BinaryOp::lt, make_var("k"), make_int(k1));
    Expr a1 = make_load("a1", {make_var("m"), make_var("k")});
    Expr a2 = make_load("a2", {make_var("m"), make_binary(BinaryOp::sub, make_var("k"), make_int(k1))});
    // The second range first: the fit orders the ranges by their start.
    c.terms = {ContractTerm{make_select(cond, make_const(0.0), a2), b}, ContractTerm{make_select(cond, a1, make_const(0.0)), b}};
    c.type = MmaType::f16;
    c.row_axes = {"m"};
    c.column_axes = {"n"};
    return c;
  };
  auto globals = [](int64_t k1, int64_t k) {
    return std::vector<GlobalTensor>{{"a1", {256, (k1 + 7) / 8 * 8}, DType::f16, GlobalRole::input},
                                     {"a2", {256, (k - k1 + 7) / 8 * 8}, DType::f16, GlobalRole::input},
                                     {"b", {k, 128}, DType::f16, GlobalRole::input},
                                     {"bt", {128, k}, DType::f16, GlobalRole::input},
                                     {"y", {256, 128}, DType::f16, GlobalRole::output}};
  };
  {
    testing::ScopedEnv off("SOLDER_GEMM_K_RANGES", "0");
    EXPECT_FALSE(gemm_k_ranges_enabled());
    EXPECT_EQ(fit_gemm_skeleton(contract(63, 319, false), globals(63, 319)).refusal, "2 product terms (the skeleton takes one)");
  }
  ASSERT_TRUE(gemm_k_ranges_enabled());
  GemmSkeletonFit fit = fit_gemm_skeleton(contract(63, 319, false), globals(63, 319));
  ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
  const GemmSkeletonProblem& p = *fit.problem;
  ASSERT_TRUE(p.second.has_value());
  EXPECT_EQ(p.k, 319);
  EXPECT_EQ(p.first_k(), 63);
  EXPECT_EQ(p.a.tensor, "a1");
  EXPECT_EQ(p.a.k, 63);
  EXPECT_EQ(p.a.ld, 64);
  EXPECT_EQ(p.b.tensor, "b");
  EXPECT_EQ(p.b.k, 63);
  EXPECT_EQ(p.b.offset, 0);
  EXPECT_EQ(p.second->k, 256);
  EXPECT_EQ(p.second->a.tensor, "a2");
  EXPECT_EQ(p.second->a.k, 256);
  EXPECT_EQ(p.second->b.tensor, "b");
  EXPECT_EQ(p.second->b.k, 256);
  EXPECT_EQ(p.second->b.offset, 63 * 128);  // row 63 of b
  SkeletonChoice choice = choose_skeleton_config(p, MmaType::f16, DType::f16);
  EXPECT_TRUE(choice.chosen.has_value()) << choice.why;
  // A K-major b: its second map starts 63 elements (126 bytes) into each row: refused; 64 elements: taken.
  EXPECT_EQ(fit_gemm_skeleton(contract(63, 320, true), globals(63, 320)).refusal,
            "B's second K range starts 126 bytes in (its tensor map needs a 16-byte aligned start)");
  GemmSkeletonFit k_major = fit_gemm_skeleton(contract(64, 320, true), globals(64, 320));
  ASSERT_TRUE(k_major.problem.has_value()) << k_major.refusal;
  EXPECT_EQ(k_major.problem->second->b.offset, 64);
  // Ranges that do not partition K, or over two B operands: refused.
  ContractNode gap = contract(63, 319, false);
  gap.terms[0].a = make_select(make_binary(BinaryOp::lt, make_var("k"), make_int(64)), make_const(0.0),
                               make_load("a2", {make_var("m"), make_binary(BinaryOp::sub, make_var("k"), make_int(64))}));
  EXPECT_EQ(fit_gemm_skeleton(gap, globals(63, 319)).refusal, "K ranges that do not partition K");
  ContractNode two_b = contract(63, 319, false);
  two_b.terms[0].b = make_load("b", {make_var("k"), make_var("m")});
  EXPECT_EQ(fit_gemm_skeleton(two_b, globals(63, 319)).refusal, "K ranges over two different B operands (the skeleton's ranges share one B)");
  // The second range's A must be read at k − K1.
  ContractNode unshifted = contract(63, 319, false);
  unshifted.terms[0].a = make_select(make_binary(BinaryOp::lt, make_var("k"), make_int(63)), make_const(0.0),
                                     make_load("a2", {make_var("m"), make_var("k")}));
  EXPECT_NE(fit_gemm_skeleton(unshifted, globals(63, 319)).refusal.find("not K ranges"), std::string::npos);
}

}  // namespace
}  // namespace solder
