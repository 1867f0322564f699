// fusion/tf32_split.h on computed operands: before (the whole 3xtf32 contract of the unfused lowering with
// the skeleton) and expected (the split kernels and the tf32 contract over 3K, printed); the CUDA writer's
// reading of a computed operand's split; the fusion report's reasons where 3xTF32 does not take a product.
#include <gtest/gtest.h>

#include "backend/cuda/tf32_split_writer.h"
#include "driver/compile.h"
#include "fusion/tf32_split.h"
#include "kernel/kernel_printer.h"
#include "fusion_test_util.h"

namespace solder {
namespace {

KernelProgram whole_contract(const std::string& text) {
  CompileOptions whole;
  whole.fuse = false;
  whole.gemm_skeleton = true;
  return compile_program(testing::bind_text(text), whole).kernels;
}

TEST(Tf32Split, ComputedOperandIsEvaluatedIntoTheTile) {
  // before: c = Σ_k x[m, k] · s[k] · w[k, n], its A computed (the k-only factor folded into it), K = 40 ragged.
  const std::string text = "program p\ndim M = 64, N = 64, K = 40\nin x[M, K] : f32\nin s[K] : f32\nin w[K, N] : f32\n"
                           "out c[m, n] : f32 = sum(k) x[m, k] * s[k] * w[k, n]\n";
  KernelProgram before = whole_contract(text);
  ASSERT_EQ(before.kernels.size(), 1u);
  EXPECT_EQ(print_kernel(before.kernels[0]),
            "kernel c  # computes c\n"
            "  grid block < 1  (1 blocks)  threads 128\n"
            "  # c (the whole contraction, one launch of the GEMM skeleton)\n"
            "  contract(3xtf32) c[m, n] = Σ (x[m, k] * s[k]) · (w[k, n])  over m < 64, n < 64  reducing k < 40  rows m; columns n\n");
  Tf32Split after = split_tf32x3_operands(before);
  ASSERT_EQ(after.program.kernels.size(), 3u);
  EXPECT_EQ(print_kernel(after.program.kernels[0]),
            "kernel split_c_a3\n"
            "  grid split_c_a3_r < 2, split_c_a3_k < 2  (4 blocks)  threads 256\n"
            "  shared split_c_a3_tile[32, 32] : f32\n"
            "  # 32 rows x 32 k of the computed operand x[m, k] * s[k]\n"
            "  map split_c_a3_tile[i, j] = x[split_c_a3_r * 32 + i, split_c_a3_k * 32 + j] * s[split_c_a3_k * 32 + j]  over i < 32, j < 32 "
            "where split_c_a3_k * 32 + j < 40\n"
            "  barrier block\n"
            "  # 3xTF32 split of x[m, k] * s[k] into c_a3 = [hi | lo | hi] along K (hi = round_tf32(x), lo = round_tf32(x - hi))\n"
            "  map c_a3[split_c_a3_r * 32 + i, p * 40 + (split_c_a3_k * 32 + j)] = select(p == 1, round_tf32(split_c_a3_tile[i, j] - "
            "round_tf32(split_c_a3_tile[i, j])), round_tf32(split_c_a3_tile[i, j]))  over i < 32, p < 3, j < 32 where split_c_a3_k * 32 + j < 40\n");
  // B, a plain load, keeps the copy (read along its rows: w is stored [K, N]).
  EXPECT_NE(print_kernel(after.program.kernels[1]).find("copy split_c_b3_tile[i, j] = w[split_c_b3_k * 32 + j, split_c_b3_r * 32 + i]"),
            std::string::npos)
      << print_kernel(after.program.kernels[1]);
  EXPECT_NE(print_kernel(after.program.kernels[2]).find("contract(tf32) c[m, n] = Σ (c_a3[m, k3]) · (c_b3[n, k3])  over m < 64, n < 64  reducing k3 < 120"),
            std::string::npos)
      << print_kernel(after.program.kernels[2]);
  // The executor runs the split form within the f32 tolerance of float64.
  BoundProgram bound = testing::bind_text(text);
  auto v = testing::verify_kernels(bound, after.program, make_inputs(bound, 3));
  EXPECT_TRUE(v.ok()) << v.failures();
}

TEST(Tf32Split, WriterReadsAComputedSplitBack) {
  // A transposed, computed A (tanh of x stored [K, M]): its tile is evaluated along rows, then tf32_split.cuh's parts.
  const std::string text = "program p\ndim M = 96, N = 64, K = 64\nin x[K, M] : f32\nin w[N, K] : f32\n"
                           "out c[m, n] : f32 = sum(k) tanh(x[k, m]) * w[n, k]\n";
  KernelProgram p = split_tf32x3_operands(whole_contract(text)).program;
  ASSERT_EQ(p.kernels.size(), 3u) << print_kernel_program(p);
  std::optional<Tf32SplitKernel> a = tf32_split_kernel_of(p, p.kernels[0]);
  ASSERT_TRUE(a) << print_kernel_program(p);
  ASSERT_TRUE(a->value);
  EXPECT_TRUE(a->along_rows);
  EXPECT_FALSE(a->guard);
  EXPECT_EQ(a->rows, 96);
  EXPECT_EQ(a->k, 64);
  EXPECT_EQ(a->ld, 192);
  EXPECT_EQ(a->row_var, "split_c_a3_r");
  EXPECT_EQ(a->k_var, "split_c_a3_k");
  std::optional<Tf32SplitWriterKernel> w = write_tf32_split_kernel(p, p.kernels[0]);
  ASSERT_TRUE(w);
  EXPECT_NE(w->source.find("const long long i = lane, j = group + step;"), std::string::npos) << w->source;
  EXPECT_NE(w->source.find("tile[i][j] = solder::round_f32(tanhf("), std::string::npos) << w->source;
  EXPECT_NE(w->source.find("solder::gemm::tf32_split_store_parts<2>(tile, args,"), std::string::npos) << w->source;
  EXPECT_EQ(w->info.blocks, 6);
}

TEST(Tf32Split, PointwiseIntermediateIsInlinedIntoTheSplit) {
  // h = silu(x + bias) read only by the product: the split evaluates it, h is never stored.
  const std::string text = "program p\ndim M = 64, N = 64, K = 64\nin x[M, K] : f32\nin bias[K] : f32\nin w[N, K] : f32\n"
                           "h[m, k] = silu(x[m, k] + bias[k])\nout c[m, n] : f32 = sum(k) h[m, k] * w[n, k]\n";
  BoundProgram bound = testing::bind_text(text);
  CompileResult gpu = compile_program(bound, CompileOptions::for_gpu());
  ASSERT_EQ(gpu.kernels.kernels.size(), 3u) << print_kernel_program(gpu.kernels);
  EXPECT_NE(gpu.report.find("3xTF32: silu(x[m, k] + bias[k]) and w[n, k] split into c_a3"), std::string::npos) << gpu.report;
  EXPECT_EQ(gpu.kernels.find_global("h"), nullptr);
  auto v = testing::verify_kernels(bound, gpu.kernels, make_inputs(bound, 4));
  EXPECT_TRUE(v.ok()) << v.failures();
}

TEST(Tf32Split, ReportSaysWhyAComputedProductStaysOnCudaCores) {
  struct Case {
    const char* text;
    const char* why;
  };
  for (const Case& c : {
           Case{"program p\ndim M = 64, N = 64, K = 16, L = 4\nin x[M, K, L] : f32\nin w[K, L, N] : f32\n"
                "out c[m, n] : f32 = sum(k, l) silu(x[m, k, l]) * w[k, l, n]\n",
                "3xtf32 evaluates a computed operand over one row and one reduced axis only (1 and 2 here)"},
           Case{"program p\ndim B = 2, M = 64, N = 64, K = 32\nin x[B, M, K] : f32\nin w[K, N] : f32\n"
                "out c[b, m, n] : f32 = sum(k) silu(x[b, m, k]) * w[k, n]\n",
                "3xtf32 evaluates a computed operand over one row and one reduced axis only (2 and 1 here)"},
       }) {
    SCOPED_TRACE(c.text);
    CompileResult gpu = compile_program(testing::bind_text(c.text), CompileOptions::for_gpu());
    EXPECT_NE(gpu.report.find("c: stays fused, on CUDA cores: not 3xTF32: "), std::string::npos) << gpu.report;
    EXPECT_NE(gpu.report.find(c.why), std::string::npos) << gpu.report;
  }
}

}  // namespace
}  // namespace solder
