// The sm_90a GEMM skeleton's host side: the TMA tensor-map plan (src/runtime/tma.h), the launch
// geometry and tile order of device/solder/gemm/config.cuh (plain C++, no CUDA), and one NVRTC compile of
// a skeleton instantiation through the runtime's compile path (skipped without NVRTC or the CuTe headers).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

#include "../../../device/solder/gemm/config.cuh"
#include "ir/diagnostics.h"
#include "runtime/runtime.h"
#include "runtime/tma.h"

namespace solder::runtime {
namespace {

namespace fs = std::filesystem;

GemmOperand bf16_k_major() {
  GemmOperand op;
  op.dtype = GemmDtype::bf16;
  op.k_major = true;
  op.rows = 1000;
  op.k = 17;
  op.ld = 24;
  op.tile_rows = 128;
  op.tile_k = 64;
  op.base = 0x10000;
  return op;
}

TEST(GemmTma, KMajorOperandIsKInnermostWithABoxOfBkByTileRows) {
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(bf16_k_major(), "A", &args), "");
  EXPECT_EQ(args.data_type, 9);  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
  EXPECT_EQ(args.rank, 3u);
  EXPECT_EQ(args.dims[0], 17u);
  EXPECT_EQ(args.dims[1], 1000u);
  EXPECT_EQ(args.dims[2], 1u);
  EXPECT_EQ(args.strides[0], 48u);
  EXPECT_EQ(args.strides[1] % 16, 0u);
  EXPECT_EQ(args.box[0], 64u);
  EXPECT_EQ(args.box[1], 128u);
  EXPECT_EQ(args.box[2], 1u);
  EXPECT_EQ(args.swizzle, 3);  // 128B
  EXPECT_EQ(args.oob_fill, 0);
}

TEST(GemmTma, MnMajorOperandUsesBoxesOf64ByBk) {
  GemmOperand op = bf16_k_major();
  op.k_major = false;
  op.rows = 100;  // N, contiguous
  op.k = 300;
  op.ld = 104;
  op.batch = 3;
  op.batch_stride = 104 * 300;
  op.tile_rows = 256;
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(op, "B", &args), "");
  EXPECT_EQ(args.dims[0], 100u);
  EXPECT_EQ(args.dims[1], 300u);
  EXPECT_EQ(args.dims[2], 3u);
  EXPECT_EQ(args.strides[0], 208u);
  EXPECT_EQ(args.strides[1], 104u * 300u * 2u);
  EXPECT_EQ(args.box[0], 64u);
  EXPECT_EQ(args.box[1], 64u);
  // A cluster along M that shares a BN-64 B (Config::BSplitK): each block's box holds half the K rows.
  op.box_k = 32;
  ASSERT_EQ(plan_gemm_operand(op, "B", &args), "");
  EXPECT_EQ(args.box[0], 64u);
  EXPECT_EQ(args.box[1], 32u);
  op.box_k = 12;  // not whole 8-row swizzle atoms
  EXPECT_NE(plan_gemm_operand(op, "B", &args).find("box_k"), std::string::npos);
  op.box_k = 32;
  op.k_major = true;  // K-major boxes split rows, not K
  EXPECT_NE(plan_gemm_operand(op, "B", &args).find("box_k"), std::string::npos);
}

TEST(GemmTma, Fp8IsKMajorWithA128ElementKTile) {
  GemmOperand op = bf16_k_major();
  op.dtype = GemmDtype::e4m3;
  op.ld = 32;
  op.tile_k = 128;
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(op, "A", &args), "");
  EXPECT_EQ(args.data_type, 0);  // UINT8
  EXPECT_EQ(args.box[0], 128u);
  EXPECT_EQ(args.strides[0], 32u);
  op.k_major = false;
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("must be K-major"), std::string::npos);
}

TEST(GemmTma, Tf32IsKMajorFloat32WithA32ElementKTile) {
  GemmOperand op = bf16_k_major();
  op.dtype = GemmDtype::tf32;
  op.ld = 20;  // 80 bytes
  op.tile_k = 32;
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(op, "A", &args), "");
  EXPECT_EQ(args.data_type, 7);  // FLOAT32: a plain copy of values already rounded to tf32
  EXPECT_EQ(args.box[0], 32u);
  EXPECT_EQ(args.strides[0], 80u);
  EXPECT_EQ(gemm_dtype_bytes(GemmDtype::tf32), 4);
  EXPECT_STREQ(gemm_dtype_name(GemmDtype::tf32), "tf32");
  op.ld = 18;  // 72 bytes
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("multiple of 16 bytes"), std::string::npos);
  op.ld = 20;
  op.tile_k = 64;
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("128 bytes"), std::string::npos);
  op.tile_k = 32;
  op.k_major = false;
  op.rows = 64;
  op.ld = 64;
  op.tile_rows = 64;
  EXPECT_NE(plan_gemm_operand(op, "B", &args).find("tf32 operand must be K-major"), std::string::npos);
}

TEST(GemmTma, RefusesWhatTmaCannotDescribe) {
  TmaEncodeArgs args;
  GemmOperand op = bf16_k_major();
  op.ld = 17;  // 34 bytes
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("multiple of 16 bytes"), std::string::npos);
  op = bf16_k_major();
  op.ld = 16;  // smaller than K = 17
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("smaller than the contiguous extent"), std::string::npos);
  op = bf16_k_major();
  op.tile_k = 32;
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("128 bytes"), std::string::npos);
  op = bf16_k_major();
  op.base = 0x10008;
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("16-byte aligned"), std::string::npos);
  op = bf16_k_major();
  op.batch = 2;
  op.batch_stride = 24 * 999;
  EXPECT_NE(plan_gemm_operand(op, "A", &args).find("smaller than one matrix"), std::string::npos);
  op = bf16_k_major();
  op.k_major = false;
  op.rows = 64;
  op.ld = 64;
  op.tile_rows = 96;
  EXPECT_NE(plan_gemm_operand(op, "B", &args).find("multiple of 64"), std::string::npos);
  // The runtime entry point reports the same problem before it needs a driver.
  op = bf16_k_major();
  op.ld = 17;
  try {
    encode_gemm_operand(op, "A");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cannot build the TMA tensor map: A: ld"), std::string::npos) << error.what();
  }
}

TEST(GemmTma, KOfZeroIsEncodedAsOne) {
  GemmOperand op = bf16_k_major();
  op.k = 0;
  op.ld = 8;
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(op, "A", &args), "");
  EXPECT_EQ(args.dims[0], 1u);
}

TEST(GemmConfig, EpilogueStagingBufferFitsBesideTheRing) {
  using S3 = gemm::Config<gemm::Dtype::bf16, gemm::Dtype::bf16, 128, 256, 3>;
  static_assert(S3::EpilogueColumns == 256 && S3::SmemBytes == S3::RingSmemBytes + 128 * 256 * 2);
  using E4 = gemm::Config<gemm::Dtype::e4m3, gemm::Dtype::e4m3, 128, 256, 4>;  // fp8 Q5's tile: no room
  static_assert(E4::EpilogueColumns == 0);
  using Q1 = gemm::Config<gemm::Dtype::e4m3, gemm::Dtype::e4m3, 128, 192, 4>;  // fp8 Q1's tile: 48 KB beside 161 KB
  static_assert(Q1::EpilogueColumns == 192 && Q1::SmemBytes == Q1::RingSmemBytes + 128 * 192 * 2);
  using S7 = gemm::Config<gemm::Dtype::bf16, gemm::Dtype::bf16, 128, 128, 7>;  // 7 × 32 KB: no room at all
  static_assert(S7::EpilogueColumns == 0 && S7::SmemBytes == S7::RingSmemBytes);
  using N48 = gemm::Config<gemm::Dtype::bf16, gemm::Dtype::bf16, 64, 48, 4>;  // BN not a multiple of 32
  static_assert(N48::EpilogueColumns == 0);
  using Dual = gemm::Config<gemm::Dtype::f16, gemm::Dtype::f16, 128, 128, 4, true, true, 1, 16, 1, 2>;
  static_assert(Dual::EpilogueColumns == 0);  // no row stores with two B operands
  EXPECT_EQ(gemm::gemm_smem_bytes(128, 128, 4, 2), Dual::SmemBytes);
  EXPECT_EQ(gemm::gemm_smem_bytes(128, 128, 7, 1), S7::SmemBytes);
  // The whole tile or nothing.
  EXPECT_EQ(gemm::epilogue_staging_columns(128, 256, 1, gemm::kGemmSmemLimit - 128 * 256 * 2), 256);
  EXPECT_EQ(gemm::epilogue_staging_columns(128, 256, 1, gemm::kGemmSmemLimit - 128 * 256 * 2 + 16), 0);
}

TEST(GemmConfig, LaunchGeometryAndSharedMemory) {
  using C = gemm::Config<gemm::Dtype::bf16, gemm::Dtype::bf16, 128, 256, 4>;
  static_assert(C::BK == 64 && C::Consumers == 2 && C::Threads == 384);
  // The ring, its barriers and alignment, then the staged epilogue's buffer where the whole tile fits:
  // not beside a 4-stage 128 × 256 ring (EpilogueStagingBufferFitsBesideTheRing).
  static_assert(C::RingSmemBytes == 4 * (128 + 256) * 128 + 64 + 1024);
  static_assert(C::EpilogueColumns == 0 && C::SmemBytes == C::RingSmemBytes);
  static_assert(C::SmemBytes <= gemm::kGemmSmemLimit);
  static_assert(gemm::gemm_smem_bytes(128, 256, 4, 1) == C::SmemBytes);
  gemm::GemmShape shape;
  shape.m = 1000;
  shape.n = 300;
  shape.k = 5;
  shape.batch = 3;
  gemm::LaunchGeometry g = gemm::launch_config(C{}, shape);
  EXPECT_EQ(g.grid[0], 8u * 2u * 3u);  // one block per tile of every batch
  EXPECT_EQ(g.grid[1], 1u);
  EXPECT_EQ(g.grid[2], 1u);
  EXPECT_EQ(gemm::launch_config(C{}, shape, 132).grid[0], 48u);  // fewer tiles than blocks
  EXPECT_EQ(gemm::launch_config(C{}, shape, 20).grid[0], 20u);   // persistent: 20 blocks loop over 48 tiles
  shape.m = 0;
  EXPECT_EQ(gemm::launch_config(C{}, shape).grid[0], 1u);
  EXPECT_EQ(g.block[0], 384u);
  EXPECT_EQ(g.smem_bytes, unsigned(C::SmemBytes));
  // 2x1 clusters: units of two tile-rows; K-major B boxes of BN/2 rows (each block loads one half).
  using C2 = gemm::Config<gemm::Dtype::bf16, gemm::Dtype::bf16, 128, 256, 4, true, true, 2>;
  static_assert(C2::BBoxRows == 128 && C2::ABoxRows == 128);
  shape.m = 1000;  // 8 tile-rows → 4 units per tile-column
  gemm::LaunchGeometry g2 = gemm::launch_config(C2{}, shape);
  EXPECT_EQ(g2.grid[0], 4u * 2u * 3u * 2u);
  EXPECT_EQ(g2.cluster[0], 2u);
  EXPECT_EQ(gemm::launch_config(C2{}, shape, 21).grid[0], 20u);  // whole clusters only
  using C2N = gemm::Config<gemm::Dtype::bf16, gemm::Dtype::bf16, 128, 128, 5, false, false, 2>;
  static_assert(C2N::BBoxRows == 128);
  using F8 = gemm::Config<gemm::Dtype::e4m3, gemm::Dtype::e5m2, 64, 128, 6>;
  static_assert(F8::BK == 128 && F8::Consumers == 1 && F8::Threads == 256);
  using Tf = gemm::Config<gemm::Dtype::tf32, gemm::Dtype::tf32, 128, 256, 4>;
  static_assert(Tf::BK == 32 && Tf::StageBytes == 384 * 128 && gemm::dtype_bytes(gemm::Dtype::tf32) == 4 &&
                gemm::dtype_k_major_only(gemm::Dtype::tf32) && !gemm::dtype_k_major_only(gemm::Dtype::bf16));
  static_assert(static_cast<int>(gemm::Dtype::tf32) == static_cast<int>(GemmDtype::tf32), "runtime and device agree");
}

TEST(GemmConfig, TileOrderVisitsEveryTileOnce) {
  for (auto [tm, tn, group] : {std::tuple{1, 1, 16}, {7, 5, 16}, {64, 32, 16}, {17, 3, 4}, {5, 9, 1}}) {
    std::set<std::pair<int, int>> seen;
    for (int linear = 0; linear < tm * tn; ++linear) {
      int m = -1, n = -1;
      gemm::tile_of(linear, tm, tn, group, &m, &n);
      ASSERT_GE(m, 0);
      ASSERT_LT(m, tm);
      ASSERT_GE(n, 0);
      ASSERT_LT(n, tn);
      EXPECT_TRUE(seen.insert({m, n}).second) << linear;
    }
    EXPECT_EQ(int(seen.size()), tm * tn);
  }
}

// One instantiation of the skeleton compiled by NVRTC through compile_cuda, as generated code will be.
TEST(GemmNvrtc, CompilesOneSkeletonInstantiation) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  if (cutlass_include_dir(&why).empty()) GTEST_SKIP() << why;
  const char* source = R"(
#include <solder/gemm/sm90_gemm.cuh>
struct Epilogue {
  float* out;
  int ld;
  __device__ void operator()(int batch, int row, int col, float acc) const { out[(long long)row * ld + col] = acc; }
};
using TestConfig = solder::gemm::Config<solder::gemm::Dtype::bf16, solder::gemm::Dtype::bf16, 128, 128, 6>;
SOLDER_GEMM_KERNEL(solder_gemm_bf16_128x128, TestConfig, Epilogue)
)";
  CompileFlags flags;
  flags.defines = {"NDEBUG"};
  std::string pattern = (fs::temp_directory_path() / "solder-gemm-nvrtc-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  flags.cache_dir = pattern;
  CompiledModule compiled = compile_cuda(source, "gemm_skeleton.cu", flags);
  EXPECT_FALSE(compiled.from_cache);
  ASSERT_GT(compiled.cubins.front().size(), 4u);
  EXPECT_EQ(compiled.cubins.front()[0], 0x7f);
  std::printf("NVRTC %s compiled one GEMM skeleton instantiation (bf16 128x128x64, 6 stages) cold in %.2f s: %zu-byte CUBIN\n",
              nvrtc_version().c_str(), compiled.compile_seconds, compiled.cubins.front().size());
  EXPECT_EQ(compiled.log.find("C7508"), std::string::npos) << compiled.log;  // setmaxnreg ignored
  EXPECT_EQ(compiled.log.find("C7513"), std::string::npos) << compiled.log;  // wgmma serialized
  CompiledModule again = compile_cuda(source, "gemm_skeleton.cu", flags);
  EXPECT_TRUE(again.from_cache);
  fs::remove_all(pattern);
}

}  // namespace
}  // namespace solder::runtime
