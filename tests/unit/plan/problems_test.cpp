// The planner's problems (src/plan/problems.h) from the unfused lowering's whole contractions.
#include "plan/problems.h"

#include <gtest/gtest.h>

#include "lower/lower_unfused.h"
#include "../test_util.h"

namespace solder {
namespace {

std::vector<GemmProblem> problems_of(const std::string& text) {
  return gemm_problems(lower_unfused(testing::bind_text(text), UnfusedOptions{true, false}));
}

TEST(GemmProblems, PlainProductAndItsLayout) {
  auto problems = problems_of(R"(program p
dim M = 256, N = 512, K = 1024
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
)");
  ASSERT_EQ(problems.size(), 1u);
  const GemmProblem& p = problems[0];
  EXPECT_EQ(p.batch, 1);
  EXPECT_EQ(p.m, 256);
  EXPECT_EQ(p.n, 512);
  EXPECT_EQ(p.k, 1024);
  EXPECT_EQ(p.type, MmaType::bf16);
  EXPECT_EQ(p.output, DType::bf16);
  EXPECT_TRUE(p.a_k_major);
  EXPECT_FALSE(p.b_k_major);  // b[k, n]: n contiguous
  EXPECT_EQ(p.epilogue_bytes_per_output, 0);
}

TEST(GemmProblems, TransposedWeightIsKMajorAndOperandsAreFoundInEitherOrder) {
  auto problems = problems_of(R"(program p
dim M = 64, N = 128, K = 256
in w[N, K] : f16
in x[M, K] : f16
out y[m, n] : f32 = sum(k) w[n, k] * x[m, k]
)");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].m, 64);  // A is the operand indexed like y's first dim
  EXPECT_EQ(problems[0].n, 128);
  EXPECT_TRUE(problems[0].a_k_major);
  EXPECT_TRUE(problems[0].b_k_major);
  EXPECT_EQ(problems[0].type, MmaType::f16);
  EXPECT_EQ(problems[0].output, DType::f32);
}

TEST(GemmProblems, BatchDimsAndScales) {
  auto problems = problems_of(R"(program p
dim B = 4, H = 2, S = 128, D = 64
in q[B, H, S, D] : bf16
in k[B, H, S, D] : bf16
in scale[S] : f32
out s[b, h, i, j] : f32 = sum(d) q[b, h, i, d] * k[b, h, j, d] * scale[i] * 0.125
)");
  ASSERT_EQ(problems.size(), 1u);
  const GemmProblem& p = problems[0];
  EXPECT_EQ(p.batch, 8);
  EXPECT_EQ(p.m, 128);
  EXPECT_EQ(p.n, 128);
  EXPECT_EQ(p.k, 64);
  EXPECT_TRUE(p.b_k_major);
  EXPECT_DOUBLE_EQ(p.epilogue_bytes_per_output, 128.0 * 4 / (8 * 128 * 128));
}

// torch.matmul of a [M, K] by b [Bt, K, N]: a batch of 4 with A = a shared by every batch (read once),
// B = b N-major; m along the rows, so c's contiguous n runs along the tile's columns.
TEST(GemmProblems, AOneOperandBatchSharesItsOtherOperand) {
  auto problems = problems_of(R"(program p
dim B = 4, M = 256, N = 192, K = 128
in a[M, K] : bf16
in b[B, K, N] : bf16
out c[i, m, n] : bf16 = sum(k) a[m, k] * b[i, k, n]
)");
  ASSERT_EQ(problems.size(), 1u);
  const GemmProblem& p = problems[0];
  EXPECT_EQ(p.batch, 4);
  EXPECT_EQ(p.m, 256);
  EXPECT_EQ(p.n, 192);
  EXPECT_TRUE(p.a_shared);
  EXPECT_FALSE(p.b_shared);
  EXPECT_TRUE(p.a_k_major);
  EXPECT_FALSE(p.b_k_major);
  EXPECT_NE(describe(p).find("batch=4 (A shared)"), std::string::npos) << describe(p);
}

TEST(GemmProblems, WhatIsNotAPlainProductIsLeftOut) {
  auto problems = problems_of(R"(program p
dim M = 64, N = 64, K = 64
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : f32 = sum(k) exp(a[m, k]) * b[k, n]
out r[m] : f32 = max(k) a[m, k]
out s[m] : f32 = sum(k) a[m, k] * a[m, k] * a[m, k]
)");
  EXPECT_TRUE(problems.empty());
}

TEST(GemmProblems, ExamplesFfnAndQuantGemm) {
  auto load = [](const std::string& name) {
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name));
    return gemm_problems(lower_unfused(bind_program(program, SizeChoice{}), UnfusedOptions{true, false}));
  };
  auto ffn = load("ffn.sol");
  ASSERT_EQ(ffn.size(), 2u);
  EXPECT_EQ(ffn[0].m, 128);
  EXPECT_EQ(ffn[0].n, 8192);
  EXPECT_EQ(ffn[0].k, 3072);
  EXPECT_EQ(ffn[0].type, MmaType::f16);
  EXPECT_EQ(ffn[1].n, 3072);
  EXPECT_EQ(ffn[1].k, 8192);
  // quant_gemm's fp8 weight is stored [N, K] (K-major, as fp8 wgmma reads it): its product is a
  // skeleton problem of type e4m3.
  auto quant = load("quant_gemm.sol");
  ASSERT_EQ(quant.size(), 1u);
  EXPECT_EQ(quant[0].type, MmaType::f8e4m3);
  EXPECT_EQ(quant[0].k, 2048);
  EXPECT_EQ(load("gated_ffn.sol").size(), 3u);
}

}  // namespace
}  // namespace solder
