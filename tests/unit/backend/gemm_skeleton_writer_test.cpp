// The writer of GEMM-skeleton kernels (backend/cuda/gemm_skeleton_writer.h): the unfused lowering's
// whole contractions become instantiations of device/solder/gemm with a generated epilogue, and the
// module compiles with NVRTC for sm_90a (nothing runs here; skipped without NVRTC or the CuTe headers).
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/gemm_skeleton_writer.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
#include "../../../device/solder/gemm/config.cuh"
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

TEST(GemmSkeletonWriter, ShortSkeletonKernelsAreLaunchedWithProgrammaticDependentLaunch) {
  // gemm_body waits (griddepcontrol.wait) for the previous kernel before any global access, so its
  // kernels may take the programmatic stream serialization attribute: those predicted at most
  // kProgrammaticLaunchMaxUs (ffn S8's, 6-12 us) do, longer ones (ffn S1's, 21-29 us) do not; the
  // generic kernels (ffn's gelu at the unfused lowering) do not wait and never do.
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/ffn.sol"));
  auto count = [&](const SizeChoice& sizes, int* generic) {
    GeneratedModule m = generate_cuda(compile_program(bind_program(program, sizes), CompileOptions::for_gpu(false)).kernels);
    int programmatic = 0, skeleton = 0;
    *generic = 0;
    for (auto& k : m.kernels) {
      if (k.gemm) {
        ++skeleton;
        programmatic += k.programmatic;
      } else {
        EXPECT_FALSE(k.programmatic) << k.name;
        ++*generic;
      }
    }
    EXPECT_EQ(skeleton, 2);
    return programmatic;
  };
  int generic = 0;
  EXPECT_EQ(count(SizeChoice{false, {{"N", 3072}, {"K", 1024}, {"L", 1024}}}, &generic), 2);  // ffn S8
  EXPECT_GE(generic, 1);
  EXPECT_EQ(count(SizeChoice{false, {}}, &generic), 0);  // ffn S1
}

// A down projection at M 128 with few tiles: N 1024, K 4096 (the suite's G6; 16 tiles of 128 x 64 for
// 132 SMs), where the cost model splits K.
const char* kSkinnyGemm =
    "program skinny\n"
    "dim M = 128, N = 1024, K = 4096\n"
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
  EXPECT_EQ(g.n, 1024);
  EXPECT_EQ(g.k, 4096);
  // The Config names the split (ClusterM 1, GroupM 16, SplitK), and the launch sizes its workspace:
  // one f32 partial tile per (tile, split), one counter per 16-row warp slice of a tile.
  EXPECT_NE(g.config.find(", 1, 16, " + std::to_string(g.split_k) + ">"), std::string::npos) << g.config;
  const int bm = g.bm, bn = g.bn;
  ASSERT_EQ(g.cluster_m * g.cluster_n, 1) << g.config;  // the cost model does not pay a cluster launch here
  const int64_t tiles = ((128 + bm - 1) / bm) * ((1024 + bn - 1) / bn);
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
  EXPECT_FALSE(compiled.cubins.front().empty());
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
  EXPECT_FALSE(compiled.cubins.front().empty());
}

// SOLDER_GEMM_SCHEDULE=pingpong offers only the ping-pong configurations (BM 64, two consumer warpgroups on
// alternate tiles): the writer instantiates Config<..., Pingpong = true> with 384 threads and the 128-row
// staging buffer in its shared memory, and the module compiles with NVRTC.
TEST(GemmSkeletonWriter, WritesThePingpongScheduleWhenItIsChosen) {
  setenv("SOLDER_GEMM_SCHEDULE", "pingpong", 1);
  GeneratedModule m = unfused_for_gpu(kScaledGemm);
  unsetenv("SOLDER_GEMM_SCHEDULE");
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_TRUE(m.kernels[0].gemm.has_value());
  const GemmSkeletonLaunch& g = *m.kernels[0].gemm;
  EXPECT_EQ(g.bm, 64);
  EXPECT_TRUE(g.pingpong);
  EXPECT_NE(g.config.find(", 16, 1, 1, 1, true>"), std::string::npos) << g.config;  // ..., ClusterN 1, Pingpong
  EXPECT_EQ(m.kernels[0].threads, 384);
  EXPECT_EQ(m.kernels[0].shared_bytes, solder::gemm::gemm_smem_bytes(64, g.bn, g.stages, 1, true));
  EXPECT_NE(m.source.find("// ping-pong schedule"), std::string::npos) << m.source;
  setenv("SOLDER_GEMM_SCHEDULE", "cooperative", 1);
  GeneratedModule c = unfused_for_gpu(kScaledGemm);
  unsetenv("SOLDER_GEMM_SCHEDULE");
  ASSERT_TRUE(c.kernels[0].gemm.has_value());
  EXPECT_FALSE(c.kernels[0].gemm->pingpong) << c.kernels[0].gemm->config;
  EXPECT_EQ(c.source.find("// ping-pong schedule"), std::string::npos);
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (runtime::cutlass_include_dir(&why).empty()) GTEST_SKIP() << "CuTe headers not found: " << why;
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "scaled_pingpong.cu", flags);
  EXPECT_FALSE(compiled.cubins.front().empty());
}

// gated_ffn's gate and up over one A (the default GPU path pairs them): one dual-B kernel.
const char* kGated =
    "program gated\n"
    "dim M = 128, N = 1024, K = 512\n"
    "in a[M, K] : f16\nin b1[K, N] : f16 ~ normal(0, 0.02)\nin b2[K, N] : f16 ~ normal(0, 0.02)\n"
    "gate[m, n] = sum(k) a[m, k] * b1[k, n]\n"
    "up[m, n] = sum(k) a[m, k] * b2[k, n]\n"
    "out h[m, n] : f16 = silu(gate[m, n]) * up[m, n]\n";

GeneratedModule fused_for_gpu(const std::string& text) {
  BoundProgram bound = testing::bind_text(text);
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
}

// nerf_mlp's layer: a 16-bit result stored row-major with bias and ReLU as the epilogue. The functor
// gets the row-store hooks (value() without the store, row_pointer() at column 0, the element type);
// SOLDER_GEMM_ROW_STORE=0 leaves them out; an f32 result or a destination whose last index is not the
// column axis never has them.
const char* kLayer =
    "program layer\n"
    "dim N = 4096, H = 256\n"
    "in x[N, H] : f16\nin w[H, H] : f16 ~ normal(0, 0.1)\nin b[H] : f16\n"
    "z[n, o] = sum(i) x[n, i] * w[i, o]\n"
    "out h[n, o] : f16 = max(z[n, o] + b[o], 0)\n";

TEST(GemmSkeletonWriter, GivesARowMajor16BitResultTheRowStoreHooks) {
  GeneratedModule m = fused_for_gpu(kLayer);
  ASSERT_EQ(m.kernels.size(), 1u) << m.source;
  ASSERT_TRUE(m.kernels[0].gemm.has_value()) << m.source;
  EXPECT_NE(m.source.find("  using element = __half;"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("__device__ float value(int batch_, int row_, int col_, float acc_) const {"), std::string::npos);
  EXPECT_NE(m.source.find("__device__ element* row_pointer(int batch_, int row_) const {"), std::string::npos);
  EXPECT_NE(m.source.find("const long long o__ = 0;"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("    return value_;"), std::string::npos);
  // The row-store rate is what the cost model charged (the plan note is the writer's choice).
  ::setenv("SOLDER_GEMM_ROW_STORE", "0", 1);
  GeneratedModule off = fused_for_gpu(kLayer);
  ::unsetenv("SOLDER_GEMM_ROW_STORE");
  EXPECT_EQ(off.source.find("row_pointer"), std::string::npos) << off.source;
  EXPECT_NE(off.source.find("solder::store(&"), std::string::npos);
  // The skeleton's default row-store schedule (staged) unless SOLDER_GEMM_EPILOGUE names one.
  EXPECT_EQ(m.source.find("row_store_mode"), std::string::npos) << m.source;
  const char* names[] = {"direct", "registers", "staged"};
  for (int mode = 0; mode < 3; ++mode) {
    ::setenv("SOLDER_GEMM_EPILOGUE", names[mode], 1);
    GeneratedModule named = fused_for_gpu(kLayer);
    EXPECT_NE(named.source.find("static constexpr int row_store_mode = " + std::to_string(mode) + ";"), std::string::npos)
        << names[mode];
  }
  ::setenv("SOLDER_GEMM_EPILOGUE", "sideways", 1);
  EXPECT_EQ(gemm_row_store_mode_from_env(), -1);
  ::unsetenv("SOLDER_GEMM_EPILOGUE");
  EXPECT_EQ(gemm_row_store_mode_from_env(), -1);
}

TEST(GemmSkeletonWriter, RowStoreHooksFollowTheFitsRowsAndColumns) {
  // An f32 result: none (16-bit elements only).
  GeneratedModule f32 = fused_for_gpu(
      "program layer32\n"
      "dim N = 4096, H = 256\n"
      "in x[N, H] : f16\nin w[H, H] : f16\n"
      "out z[n, o] : f32 = sum(i) x[n, i] * w[i, o]\n");
  ASSERT_TRUE(f32.kernels.at(0).gemm.has_value()) << f32.source;
  EXPECT_EQ(f32.source.find("row_pointer"), std::string::npos) << f32.source;
  // A transposed destination zt[o, n]: the fit makes o the rows (A = w, M-major) and n the columns, so
  // the columns are zt's last index again and the hooks apply, with n at 0 in row_pointer.
  GeneratedModule transposed = fused_for_gpu(
      "program layert\n"
      "dim N = 4096, H = 256\n"
      "in x[N, H] : f16\nin w[H, H] : f16\n"
      "out zt[o, n] : f16 = sum(i) x[n, i] * w[i, o]\n");
  ASSERT_TRUE(transposed.kernels.at(0).gemm.has_value()) << transposed.source;
  EXPECT_NE(transposed.source.find("const long long n__ = 0;"), std::string::npos) << transposed.source;
  EXPECT_NE(transposed.source.find("return &zt[((o__) * 4096LL + (n__))];"), std::string::npos) << transposed.source;
}

TEST(GemmSkeletonWriter, RowStoreModuleCompilesWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (runtime::cutlass_include_dir(&why).empty()) GTEST_SKIP() << "CuTe headers not found: " << why;
  GeneratedModule m = fused_for_gpu(kLayer);
  ASSERT_NE(m.source.find("row_pointer"), std::string::npos);
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "layer.cu", flags);
  EXPECT_FALSE(compiled.cubins.front().empty());
}

TEST(GemmSkeletonWriter, WritesAPairedContractAsADualBKernel) {
  GeneratedModule m = fused_for_gpu(kGated);
  ASSERT_EQ(m.kernels.size(), 1u) << m.source;
  ASSERT_TRUE(m.kernels[0].gemm.has_value());
  const GemmSkeletonLaunch& g = *m.kernels[0].gemm;
  ASSERT_TRUE(g.b2.has_value());
  EXPECT_EQ(g.split_k, 1);
  EXPECT_FALSE(g.b.k_major);  // b2[k, n]: N-major
  EXPECT_EQ(g.b2->k_major, g.b.k_major);
  EXPECT_EQ(g.b2->tile_rows, g.b.tile_rows);
  EXPECT_LE(g.bn, 128);
  EXPECT_NE(g.config.find(", 1, 16, 1, 2"), std::string::npos) << g.config;  // BOperands 2 (then ClusterN, if any)
  EXPECT_NE(m.source.find("SOLDER_GEMM_DUAL_KERNEL(h_kernel, h_kernel_config_, h_kernel_epilogue_)"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("float acc_, float acc2_) const"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("float pair_value_ = acc2_;"), std::string::npos) << m.source;
  // B = b2 (up), B2 = b1 (gate): the epilogue is silu(gate) · up.
  EXPECT_NE(m.source.find("B = b2 (N-major), B2 = b1 (dual-B"), std::string::npos) << m.source;
  const int64_t stage = (g.bm + 2 * g.bn) * 128;
  EXPECT_EQ((m.kernels[0].shared_bytes - 1024) % (stage + 16), 0) << m.kernels[0].shared_bytes;  // no staging buffer (dual-B)
}

TEST(GemmSkeletonWriter, DualBModuleCompilesWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (runtime::cutlass_include_dir(&why).empty()) GTEST_SKIP() << "CuTe headers not found: " << why;
  GeneratedModule m = fused_for_gpu(kGated);
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "gated.cu", flags);
  EXPECT_FALSE(compiled.cubins.front().empty());
}

// Forced tiles (SOLDER_GEMM_TILE) with clusters: how the writer instantiates and launches them.
GeneratedModule with_tile(const char* tile, const std::string& text, bool fused = false) {
  setenv("SOLDER_GEMM_TILE", tile, 1);
  GeneratedModule m = fused ? fused_for_gpu(text) : unfused_for_gpu(text);
  unsetenv("SOLDER_GEMM_TILE");
  return m;
}

TEST(GemmSkeletonWriter, AClusterAlongNSharesAAndLaunchesWholeClusters) {
  // M 128, N 1024: 16 tiles of 128 x 64 in one tile-row, 8 clusters of 2 along N.
  GeneratedModule m = with_tile("128x64s6k1c1x2", kSkinnyGemm);
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_TRUE(m.kernels[0].gemm.has_value()) << m.source;
  const GeneratedKernel& k = m.kernels[0];
  const GemmSkeletonLaunch& g = *k.gemm;
  EXPECT_EQ(g.bm, 128);
  EXPECT_EQ(g.bn, 64);
  EXPECT_EQ(g.cluster_m, 1);
  EXPECT_EQ(g.cluster_n, 2);
  // ClusterM 1, GroupM 16, SplitK 1, BOperands 1, ClusterN 2.
  EXPECT_NE(g.config.find(", 128, 64, 6, true, false, 1, 16, 1, 1, 2>"), std::string::npos) << g.config;
  EXPECT_EQ(k.cluster, 2);
  EXPECT_EQ(k.blocks, 16);  // every unit a cluster of 2 blocks; 8 clusters fit at once
  EXPECT_EQ(k.blocks % k.cluster, 0);
  EXPECT_EQ(g.a.tile_rows, 64);   // h is K-major: each block loads half of A's 128 rows (Config::ABoxRows)
  EXPECT_EQ(g.b.tile_rows, 64);   // d is N-major: 64-wide boxes, whole BN per block
  EXPECT_NE(m.source.find("// cluster 1x2: A's tile multicast"), std::string::npos) << m.source;
}

TEST(GemmSkeletonWriter, AClusterAlongMSharesBAndSlicesAKMajorB) {
  // M 256, N 256, K 512, w K-major: 4 tile-rows x 2 tile-columns of 64 x 128 in 2x1 clusters along M.
  GeneratedModule m = with_tile("64x128s6k1c2x1",
                                "program kb\ndim M = 256, N = 256, K = 512\nin a[M, K] : bf16\nin w[N, K] : bf16\n"
                                "out y[m, n] : bf16 = sum(k) a[m, k] * w[n, k]\n");
  ASSERT_TRUE(m.kernels.at(0).gemm.has_value()) << m.source;
  const GemmSkeletonLaunch& g = *m.kernels[0].gemm;
  EXPECT_NE(g.config.find(", 64, 128, 6, true, true, 2, 16, 1>"), std::string::npos) << g.config;
  EXPECT_EQ(m.kernels[0].cluster, 2);
  EXPECT_EQ(m.kernels[0].blocks, 8);  // 4 tile-rows x 2 tile-columns
  EXPECT_EQ(g.a.tile_rows, 64);
  EXPECT_EQ(g.b.tile_rows, 64);  // K-major B: each block of the pair loads half of the 128 rows
}

TEST(GemmSkeletonWriter, ADualBKernelTakesAClusterAlongNButNotAlongM) {
  GeneratedModule m = with_tile("128x64s5k1c1x2", kGated, true);
  ASSERT_EQ(m.kernels.size(), 1u) << m.source;
  ASSERT_TRUE(m.kernels[0].gemm.has_value() && m.kernels[0].gemm->b2.has_value()) << m.source;
  EXPECT_NE(m.kernels[0].gemm->config.find(", 128, 64, 5, true, false, 1, 16, 1, 2, 2>"), std::string::npos)
      << m.kernels[0].gemm->config;
  EXPECT_EQ(m.kernels[0].cluster, 2);
  // B multicast along M has no dual-B variant: the forced tile matches nothing and the contraction is
  // not a dual-B skeleton kernel.
  GeneratedModule refused = with_tile("64x64s6k1c2x1", kGated, true);
  for (auto& k : refused.kernels) EXPECT_FALSE(k.gemm && k.gemm->b2 && k.cluster > 1) << refused.source;
}

TEST(GemmSkeletonWriter, ClusterModulesCompileWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (runtime::cutlass_include_dir(&why).empty()) GTEST_SKIP() << "CuTe headers not found: " << why;
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  for (const char* tile : {"128x64s6k1c1x4", "128x64s6k2c1x2"}) {
    GeneratedModule m = with_tile(tile, kSkinnyGemm);
    ASSERT_TRUE(m.kernels.at(0).gemm.has_value()) << tile << "\n" << m.source;
    EXPECT_FALSE(runtime::compile_cuda(m.source, "cluster.cu", flags).cubins.front().empty()) << tile;
  }
  GeneratedModule dual = with_tile("128x64s5k1c1x2", kGated, true);
  EXPECT_FALSE(runtime::compile_cuda(dual.source, "dual_cluster.cu", flags).cubins.front().empty());
}

// The tail split (config.cuh TailSplit, $SOLDER_GEMM_TAIL_SPLIT): which S the knob gives. rmsnorm_gemm L2's
// product (128 x 256 tiles: 1792 tile units, 64 K tiles) on 132 persistent blocks leaves a partial wave of
// 76 tiles; split in 5 they end after ceil(380 / 132) = 3 fifths of a tile, the soonest of S 2 ... 8.
TEST(GemmSkeletonWriter, TailSplitTakesTheSplitThatEndsThePartialWaveSoonest) {
  EXPECT_EQ(gemm_tail_split(1792, 132, 64, ""), 1);   // unset: main's behaviour
  EXPECT_EQ(gemm_tail_split(1792, 132, 64, "0"), 1);
  EXPECT_EQ(gemm_tail_split(1792, 132, 64, "auto"), 5);
  EXPECT_EQ(gemm_tail_split(2048, 132, 128, "auto"), 7);  // 8192^3: 68 left, 7 ends after 4 sevenths
  EXPECT_EQ(gemm_tail_split(512, 132, 16, "auto"), 1);    // 116 left (0.88 of a wave): no S ends sooner by 0.2
  EXPECT_EQ(gemm_tail_split(264, 132, 64, "auto"), 1);    // whole waves: no tail
  EXPECT_EQ(gemm_tail_split(100, 132, 64, "auto"), 1);    // one partial wave: split-K's case, not the tail's
  EXPECT_EQ(gemm_tail_split(1792, 132, 12, "auto"), 3);   // 12 K tiles: at most 3 splits of 4
  EXPECT_EQ(gemm_tail_split(1792, 132, 64, "3"), 3);      // forced
  EXPECT_EQ(gemm_tail_split(1792, 132, 8, "3"), 1);       // 8 K tiles: 3 splits would keep fewer than 4
  EXPECT_EQ(gemm_tail_split(264, 132, 64, "3"), 1);       // no tail to split
  EXPECT_EQ(gemm_tail_split(1792, 132, 64, "sideways"), 1);
  EXPECT_EQ(gemm_tail_split(1792, 132, 64, "17"), 1);
}

// Every K tile of every tile unit is walked by exactly one work unit, whole-K units first, the tail's
// splits adjacent (config.cuh tail_split_unit and split_range), for tails of every size.
TEST(GemmSkeletonWriter, TailSplitUnitsCoverEveryKTileOnce) {
  for (int tiles : {1, 5, 131, 132, 133, 300, 1792})
    for (int clusters : {1, 3, 64, 132})
      for (int split : {2, 3, 5, 7})
        for (int k_tiles : {1, 3, 64}) {
          const int tail = solder::gemm::tail_tile_units(tiles, clusters);
          EXPECT_EQ(tail, tiles > clusters ? tiles % clusters : 0);
          const int full = tiles - tail, units = full + tail * split;
          std::vector<int> seen(static_cast<size_t>(tiles) * k_tiles, 0);
          for (int u = 0; u < units; ++u) {
            int t = 0, s = 0, splits = 0, begin = 0, end = 0;
            solder::gemm::tail_split_unit(u, full, split, &t, &s, &splits);
            ASSERT_LT(t, tiles);
            EXPECT_EQ(splits, t < full ? 1 : split);
            solder::gemm::split_range(k_tiles, s, splits, &begin, &end);
            for (int k = begin; k < end; ++k) ++seen[static_cast<size_t>(t) * k_tiles + k];
          }
          for (int v : seen) ASSERT_EQ(v, 1) << tiles << " tiles, " << clusters << " clusters, split " << split;
        }
}

// With the knob, the writer instantiates Config<..., TailSplit>, sizes the tail's workspace (the tail's
// tiles only) and says so in the source; the module compiles with NVRTC. Without it, nothing changes.
const char* kL2Gemm =
    "program l2\n"
    "dim T = 4096, HID = 4096, N = 14336\n"
    "in x[T, HID] : bf16\nin w[HID, N] : bf16\n"
    "out y[t, n] : bf16 = sum(c) x[t, c] * w[c, n]\n";

TEST(GemmSkeletonWriter, TailSplitKnobSplitsThePartialWaveAndSizesItsWorkspace) {
  GeneratedModule plain = unfused_for_gpu(kL2Gemm);
  ASSERT_TRUE(plain.kernels.at(0).gemm.has_value());
  const GemmSkeletonLaunch& p = *plain.kernels[0].gemm;
  EXPECT_EQ(p.tail_split, 1);
  EXPECT_EQ(p.workspace_floats, 0);
  EXPECT_EQ(plain.source.find("// tail split"), std::string::npos);
  ::setenv("SOLDER_GEMM_TAIL_SPLIT", "auto", 1);
  GeneratedModule m = unfused_for_gpu(kL2Gemm);
  ::unsetenv("SOLDER_GEMM_TAIL_SPLIT");
  const GeneratedKernel& k = m.kernels.at(0);
  ASSERT_TRUE(k.gemm.has_value());
  const GemmSkeletonLaunch& g = *k.gemm;
  ASSERT_EQ(g.split_k, 1) << g.config;
  ASSERT_FALSE(g.pingpong) << g.config;
  const int cluster = g.cluster_m * g.cluster_n;
  const int64_t tile_units = ((4096 + g.bm * g.cluster_m - 1) / (g.bm * g.cluster_m)) * ((14336 + g.bn * g.cluster_n - 1) / (g.bn * g.cluster_n));
  const int clusters = static_cast<int>(k.blocks / cluster);
  const int tail = solder::gemm::tail_tile_units(tile_units, clusters);
  ASSERT_GT(tail, 0) << g.config;
  EXPECT_EQ(g.tail_split, gemm_tail_split(tile_units, clusters, 4096 / 64, "auto"));
  ASSERT_GT(g.tail_split, 1);
  EXPECT_NE(g.config.find(", false, " + std::to_string(g.tail_split) + ">"), std::string::npos) << g.config;
  EXPECT_EQ(g.workspace_floats, static_cast<int64_t>(tail) * cluster * g.tail_split * g.bm * g.bn);
  EXPECT_EQ(g.counters, static_cast<int64_t>(tail) * cluster * (g.bm / 16));
  EXPECT_EQ(k.blocks, plain.kernels[0].blocks);
  EXPECT_NE(m.source.find("// tail split " + std::to_string(g.tail_split) + ": the last " + std::to_string(tail)), std::string::npos)
      << m.source;
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (runtime::cutlass_include_dir(&why).empty()) GTEST_SKIP() << "CuTe headers not found: " << why;
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  EXPECT_FALSE(runtime::compile_cuda(m.source, "tail.cu", flags).cubins.front().empty());
}

// The knob leaves split-K, ping-pong and dual-B kernels as they are.
TEST(GemmSkeletonWriter, TailSplitLeavesSplitKKernelsAlone) {
  ::setenv("SOLDER_GEMM_TAIL_SPLIT", "auto", 1);
  GeneratedModule m = unfused_for_gpu(kSkinnyGemm);
  ::unsetenv("SOLDER_GEMM_TAIL_SPLIT");
  ASSERT_TRUE(m.kernels.at(0).gemm.has_value());
  ASSERT_GT(m.kernels[0].gemm->split_k, 1);
  EXPECT_EQ(m.kernels[0].gemm->tail_split, 1);
}

}  // namespace
}  // namespace solder
