// The writer of GEMM-skeleton kernels (backend/cuda/gemm_skeleton_writer.h): the unfused lowering's
// whole contractions become instantiations of device/solder/gemm with a generated epilogue, and the
// module compiles with NVRTC for sm_90a (nothing runs here; skipped without NVRTC or the CuTe headers).
#include <gtest/gtest.h>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
#include "../test_util.h"

namespace solder {
namespace {

GeneratedModule unfused_for_gpu(const std::string& text) {
  BoundProgram bound = testing::bind_text(text);
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu(false)).kernels);
}

const char* kScaledGemm =
    "program scaled\n"
    "dim B = 2, M = 40, N = 48, K = 64\n"
    "in a[B, M, K] : bf16\nin w[N, K] : bf16\nin s[N] : f32\n"
    "out y[z, m, n] : bf16 = sum(k) a[z, m, k] * w[n, k] * s[n]\n";

TEST(GemmSkeletonWriter, WritesTheSkeletonWithAnEpilogueNamedAfterTheProgram) {
  GeneratedModule m = unfused_for_gpu(kScaledGemm);
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_TRUE(m.kernels[0].gemm.has_value());
  const GemmSkeletonLaunch& g = *m.kernels[0].gemm;
  // Rows (z, m) flatten into M = 80 (A is [B, M, K], K-major); w is [N, K]: a K-major B shared by
  // both batches... of which there are none left: z is a row axis.
  EXPECT_EQ(g.m, 80);
  EXPECT_EQ(g.n, 48);
  EXPECT_EQ(g.k, 64);
  EXPECT_TRUE(g.a.k_major);
  EXPECT_TRUE(g.b.k_major);
  EXPECT_NE(m.source.find("#include <solder/gemm/sm90_gemm.cuh>"), std::string::npos);
  EXPECT_NE(m.source.find("SOLDER_GEMM_KERNEL(y_kernel, y_kernel_config_, y_kernel_epilogue_)"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("const long long m = row_rest_ % 40LL; row_rest_ /= 40LL;"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("value_ = value_ * ("), std::string::npos) << m.source;
}

TEST(GemmSkeletonWriter, FfnUnfusedRunsBothGemmsOnTheSkeleton) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/ffn.sol"));
  BoundProgram bound = bind_program(program, SizeChoice{false, {}});
  GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu(false)).kernels);
  int skeleton = 0;
  for (auto& k : m.kernels) skeleton += k.gemm.has_value();
  EXPECT_EQ(skeleton, 2) << m.source;  // c and e; h (gelu) is a generic kernel
  EXPECT_NE(m.source.find("// tile chosen by the cost model: "), std::string::npos);
  // At the small sizes the second product (M 16, N 32) has no feasible configuration (a 64-column
  // tile for 32 columns): it is tiled like any other definition.
  BoundProgram small = bind_program(program, SizeChoice{true, {}});
  GeneratedModule s = generate_cuda(compile_program(small, CompileOptions::for_gpu(false)).kernels);
  skeleton = 0;
  for (auto& k : s.kernels) skeleton += k.gemm.has_value();
  EXPECT_EQ(skeleton, 1) << s.source;
}

// ffn's second product at paper size: M 128, N 3072, K 8192 (24 tiles of 128 x 128 for 132 SMs).
const char* kSkinnyGemm =
    "program skinny\n"
    "dim M = 128, N = 3072, K = 8192\n"
    "in h[M, K] : f16\nin d[K, N] : f16\n"
    "out e[m, n] : f16 = sum(k) h[m, k] * d[k, n]\n";

TEST(GemmSkeletonWriter, SplitsKForASkinnyProductAndSizesItsWorkspace) {
  GeneratedModule m = unfused_for_gpu(kSkinnyGemm);
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_TRUE(m.kernels[0].gemm.has_value());
  const GeneratedKernel& k = m.kernels[0];
  const GemmSkeletonLaunch& g = *k.gemm;
  ASSERT_GT(g.split_k, 1) << g.config;
  EXPECT_EQ(g.m, 128);
  EXPECT_EQ(g.n, 3072);
  EXPECT_EQ(g.k, 8192);
  // The Config names the split (ClusterM 1, GroupM 16, SplitK), and the launch sizes its workspace:
  // one f32 partial tile per (tile, split), one counter per 16-row warp slice of a tile.
  EXPECT_NE(g.config.find(", 1, 16, " + std::to_string(g.split_k) + ">"), std::string::npos) << g.config;
  const int bm = g.a.tile_rows, bn = g.b.tile_rows;
  const int64_t tiles = ((128 + bm - 1) / bm) * ((3072 + bn - 1) / bn);
  EXPECT_EQ(g.workspace_floats, tiles * g.split_k * bm * bn);
  EXPECT_EQ(g.counters, tiles * (bm / 16));
  EXPECT_EQ(k.blocks, std::min<int64_t>(132, tiles * g.split_k));
  EXPECT_NE(m.source.find("// split-K " + std::to_string(g.split_k) + ": partials merged in the kernel"), std::string::npos) << m.source;
}

TEST(GemmSkeletonWriter, LargeProductsDoNotSplitK) {
  GeneratedModule m = unfused_for_gpu(kScaledGemm);
  ASSERT_TRUE(m.kernels[0].gemm.has_value());
  EXPECT_EQ(m.kernels[0].gemm->split_k, 1);  // K = 64: one K tile
  EXPECT_EQ(m.kernels[0].gemm->workspace_floats, 0);
  EXPECT_EQ(m.kernels[0].gemm->counters, 0);
}

TEST(GemmSkeletonWriter, SplitKModuleCompilesWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (runtime::cutlass_include_dir(&why).empty()) GTEST_SKIP() << "CuTe headers not found: " << why;
  GeneratedModule m = unfused_for_gpu(kSkinnyGemm);
  ASSERT_GT(m.kernels.at(0).gemm->split_k, 1);
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "skinny.cu", flags);
  EXPECT_FALSE(compiled.cubin.empty());
}

TEST(GemmSkeletonWriter, ModuleCompilesWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (runtime::cutlass_include_dir(&why).empty()) GTEST_SKIP() << "CuTe headers not found: " << why;
  GeneratedModule m = unfused_for_gpu(kScaledGemm);
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "scaled.cu", flags);
  EXPECT_FALSE(compiled.cubin.empty());
}

}  // namespace
}  // namespace solder
