// The sm_90a attention skeleton's host side: the launch geometry and shared memory of
// device/solder/attention/config.cuh (plain C++, no CUDA), the TMA plans of q, k and v (the GEMM
// operand plan of src/runtime/tma.h), and one NVRTC compile of a skeleton instantiation through the
// runtime's compile path (skipped without NVRTC or the CuTe headers). The device test is
// tests/gpu/attention_skeleton (an H100).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "../../../device/solder/attention/config.cuh"
#include "runtime/runtime.h"
#include "runtime/tma.h"

namespace solder::runtime {
namespace {

namespace fs = std::filesystem;
namespace at = solder::attention;

// Compiles `source` with NVRTC into a fresh cache directory, so that the compile is cold, and removes the
// directory after.
CompiledModule compile_cold(const char* source, const char* name) {
  CompileFlags flags;
  flags.defines = {"NDEBUG"};
  std::string pattern = (fs::temp_directory_path() / "solder-attention-nvrtc-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << pattern;
    return {};
  }
  flags.cache_dir = pattern;
  CompiledModule compiled = compile_cuda(source, name, flags);
  fs::remove_all(pattern);
  return compiled;
}

// A CUBIN came out, and ptxas kept the skeleton's schedule: setmaxnreg not ignored (C7508), wgmma not
// serialized (C7513).
void expect_schedule_kept(const CompiledModule& compiled) {
  ASSERT_FALSE(compiled.cubins.empty());
  ASSERT_GT(compiled.cubins.front().size(), 4u);
  EXPECT_EQ(compiled.cubins.front()[0], 0x7f);
  EXPECT_EQ(compiled.log.find("C7508"), std::string::npos) << compiled.log;  // setmaxnreg ignored
  EXPECT_EQ(compiled.log.find("C7513"), std::string::npos) << compiled.log;  // wgmma serialized
}

TEST(AttentionConfig, LaunchGeometryAndSharedMemory) {
  using C = at::Config<at::Dtype::bf16, 128, 128, 2, 2>;
  static_assert(C::BM == 128 && C::Threads == 384 && C::Chunks == 2 && !C::Persistent);
  static_assert(C::SmemBytes == 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2 + 8 * (2 + 4 * 2) + 1024);
  static_assert(C::QBoxRows == 64 && C::KVBoxRows == 128);
  at::AttentionShape shape;
  shape.batch = 3;
  shape.heads = 4;
  shape.heads_kv = 2;
  shape.seq_q = 1000;  // 8 query tiles of 128 rows
  shape.seq_k = 77;
  at::LaunchGeometry g = at::launch_config(C{}, shape);
  EXPECT_EQ(g.grid[0], 8u * 3u * 4u);  // one block per work tile
  EXPECT_EQ(g.grid[1], 1u);
  EXPECT_EQ(g.block[0], 384u);
  EXPECT_EQ(g.smem_bytes, unsigned(C::SmemBytes));
  EXPECT_EQ(at::launch_config(C{}, shape, 20).grid[0], 96u);  // not Persistent: persistent_blocks ignored
  using P = at::Config<at::Dtype::bf16, 128, 128, 2, 2, true>;
  EXPECT_EQ(at::launch_config(P{}, shape, 20).grid[0], 20u);    // 20 blocks loop over 96 tiles
  EXPECT_EQ(at::launch_config(P{}, shape, 132).grid[0], 96u);   // fewer tiles than blocks
  EXPECT_EQ(at::launch_config(P{}, shape).grid[0], 96u);
  shape.seq_q = 1;
  EXPECT_EQ(at::launch_config(C{}, shape).grid[0], 12u);
  // Three consumers: 192 query rows, 512 threads, 32 + 3·160 registers per thread slot.
  using C3 = at::Config<at::Dtype::bf16, 64, 128, 4, 3>;
  static_assert(C3::BM == 192 && C3::Threads == 512 && C3::ProducerRegisters == 32 && C3::ConsumerRegisters == 160);
  static_assert(C3::SmemBytes == 192 * 64 * 2 + 2 * 4 * 128 * 64 * 2 + 8 * (2 + 16) + 1024);
  static_assert(C3::SmemBytes <= 232448);
  // A staged bias: each K stage also holds the bias tile (BM × BN × 2 bytes) and 128 column bytes;
  // the mbarriers follow them.
  using CB = at::Config<at::Dtype::bf16, 128, 64, 4, 2, true, 3>;
  static_assert(CB::BiasTileBytes == 128 * 64 * 2 && CB::BiasColumnBytes == 128);
  static_assert(CB::BiasTileOffset == 128 * 128 * 2 + 2 * 4 * 64 * 128 * 2 && CB::BiasTileOffset % 1024 == 0);
  static_assert(CB::BiasColumnOffset == CB::BiasTileOffset + 4 * 128 * 64 * 2 && CB::BiasColumnOffset % 1024 == 0);
  static_assert(CB::BarrierOffset == CB::BiasColumnOffset + 4 * 128);
  static_assert(CB::SmemBytes == CB::BarrierOffset + 8 * (2 + 16) + 1024 && CB::SmemBytes <= 232448);
  static_assert(at::Config<at::Dtype::bf16, 64, 64, 4, 2, false, 1>::BiasColumnBytes == 0);
  static_assert(at::Config<at::Dtype::bf16, 64, 64, 4, 2, false, 2>::BiasTileBytes == 0);
  static_assert(at::Config<at::Dtype::bf16, 64, 64, 4, 2>::BarrierOffset == 128 * 64 * 2 + 2 * 4 * 64 * 64 * 2);
  // Two Q buffers (persistent blocks): two Q tiles before the K ring, two mbarrier pairs for them.
  using Q2 = at::Config<at::Dtype::bf16, 64, 128, 4, 2, true, 0, 2>;
  static_assert(Q2::QBuffers == 2 && Q2::BiasTileOffset == 2 * 128 * 64 * 2 + 2 * 4 * 128 * 64 * 2);
  static_assert(Q2::SmemBytes == Q2::BarrierOffset + 8 * (2 * 2 + 4 * 4) + 1024 && Q2::SmemBytes <= 232448);
  static_assert(at::Config<at::Dtype::bf16, 128, 128, 2, 2, true, 0, 2>::SmemBytes <= 232448);
  static_assert(at::Config<at::Dtype::bf16, 64, 128, 4, 2, true>::QBuffers == 1);
  // Staggered consumers: the same layout (no shared memory of their own); the emitter's 6-stage ring fits.
  using St = at::Config<at::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>;
  static_assert(St::Stagger == 2 && Q2::Stagger == 0 && St::BM == 128 && St::Threads == 384);
  static_assert(St::SmemBytes == 2 * 128 * 64 * 2 + 2 * 6 * 128 * 64 * 2 + 8 * (2 * 2 + 4 * 6) + 1024 && St::SmemBytes <= 232448);
  EXPECT_EQ(at::launch_config(St{}, shape, 132).grid[0], at::launch_config(Q2{}, shape, 132).grid[0]);
  EXPECT_EQ(at::launch_config(Q2{}, shape, 132).grid[0], at::launch_config(P{}, shape, 132).grid[0]);
}

// q, k and v are K-major GEMM operands: rows = sequence, k = head dim, batch = batch · heads.
TEST(AttentionTma, OperandsArePlannedAsKMajorGemmOperands) {
  GemmOperand q;
  q.dtype = GemmDtype::bf16;
  q.rows = 1000;
  q.k = 128;
  q.ld = 136;  // padded rows
  q.batch = 12;
  q.batch_stride = 136 * 1000;
  q.tile_rows = at::Config<at::Dtype::bf16, 128, 128, 2, 2>::QBoxRows;
  q.tile_k = 64;
  q.base = 0x10000;
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(q, "q", &args), "");
  EXPECT_EQ(args.dims[0], 128u);
  EXPECT_EQ(args.dims[1], 1000u);
  EXPECT_EQ(args.dims[2], 12u);
  EXPECT_EQ(args.strides[0], 272u);
  EXPECT_EQ(args.strides[1], 272u * 1000u);
  EXPECT_EQ(args.box[0], 64u);  // one 128-byte chunk of the head dim per box
  EXPECT_EQ(args.box[1], 64u);  // one consumer's 64 rows
  EXPECT_EQ(args.swizzle, 3);   // 128-byte swizzle
  GemmOperand k = q;
  k.tile_rows = at::Config<at::Dtype::bf16, 128, 128, 2, 2>::KVBoxRows;
  ASSERT_EQ(plan_gemm_operand(k, "k", &args), "");
  EXPECT_EQ(args.box[1], 128u);
}

// e4m3 at head dim 64: rows of 64 bytes in shared memory (one 64-byte chunk, the 64-byte swizzle), so the
// maps' boxes are 64 elements wide and 64-byte swizzled; hd128 and the 16-bit types keep 128-byte rows.
TEST(AttentionTma, Fp8HeadDim64RowsTakeThe64ByteSwizzle) {
  using F = at::Config<at::Dtype::e4m3, 64, 128, 4, 3>;
  static_assert(F::RowBytes == 64 && F::ChunkElements == 64 && F::Chunks == 1 && F::BM == 192 && F::Threads == 512);
  static_assert(F::QBytes == 192 * 64 && F::KVTileBytes == 128 * 64 && F::VtTileBytes == 64 * 128);
  static_assert(F::SmemBytes == 192 * 64 + 4 * (2 * 128 * 64 + 64 * 128) + 8 * (2 + 5 * 4) + 1024);
  using F128 = at::Config<at::Dtype::e4m3, 128, 128, 4, 2>;
  static_assert(F128::RowBytes == 128 && F128::ChunkElements == 128 && F128::Chunks == 1);
  using B64 = at::Config<at::Dtype::bf16, 64, 128, 4, 2>;
  static_assert(B64::RowBytes == 128 && B64::ChunkElements == 64 && B64::Chunks == 1);
  GemmOperand k;
  k.dtype = GemmDtype::e4m3;
  k.rows = 4096;
  k.k = 64;
  k.ld = 64;
  k.batch = 16;
  k.batch_stride = 64 * 4096;
  k.tile_rows = F::KVBoxRows;
  k.tile_k = F::ChunkElements;
  k.base = 0x10000;
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(k, "k", &args), "");
  EXPECT_EQ(args.box[0], 64u);   // one 64-byte row
  EXPECT_EQ(args.box[1], 128u);  // BN keys
  EXPECT_EQ(args.swizzle, 2);    // CU_TENSOR_MAP_SWIZZLE_64B
  k.tile_k = F128::ChunkElements;  // the padded form: 128-element boxes, TMA zero-fills columns 64..127
  ASSERT_EQ(plan_gemm_operand(k, "k", &args), "");
  EXPECT_EQ(args.box[0], 128u);
  EXPECT_EQ(args.swizzle, 3);
  k.dtype = GemmDtype::bf16;  // 64 bytes of a 16-bit type: not a swizzle the skeletons take
  k.tile_k = 32;
  EXPECT_NE(plan_gemm_operand(k, "k", &args).find("128 bytes"), std::string::npos);
}

// A staged bias's column map: a 1-byte operand, one 128-byte box per row, no swizzle.
TEST(AttentionTma, StagedBiasColumnIsAnUnswizzledByteRow) {
  GemmOperand c;
  c.dtype = GemmDtype::e4m3;  // one byte (UINT8 in the map)
  c.rows = 8 * 256;
  c.k = 256;
  c.ld = 256;
  c.tile_rows = 1;
  c.tile_k = 128;
  c.swizzle = false;
  c.base = 0x10000;
  TmaEncodeArgs args;
  ASSERT_EQ(plan_gemm_operand(c, "bias column", &args), "");
  EXPECT_EQ(args.data_type, 0);  // CU_TENSOR_MAP_DATA_TYPE_UINT8
  EXPECT_EQ(args.dims[0], 256u);
  EXPECT_EQ(args.dims[1], 2048u);
  EXPECT_EQ(args.box[0], 128u);
  EXPECT_EQ(args.box[1], 1u);
  EXPECT_EQ(args.swizzle, 0);  // CU_TENSOR_MAP_SWIZZLE_NONE
  c.ld = 200;  // rows must be 16-byte multiples
  c.k = 200;
  EXPECT_NE(plan_gemm_operand(c, "bias column", &args).find("multiple of 16 bytes"), std::string::npos);
}

// One instantiation compiled by NVRTC through compile_cuda, as generated code will be.
TEST(AttentionNvrtc, CompilesOneSkeletonInstantiation) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  if (cutlass_include_dir(&why).empty()) GTEST_SKIP() << why;
  const char* source = R"(
#include <solder/attention/sm90_attention.cuh>
struct Epilogue {
  __nv_bfloat16* out;
  int seq;
  __device__ void operator()(int bh, int row, int col, float o0, float o1) const {
    *reinterpret_cast<__nv_bfloat162*>(out + ((long long)bh * seq + row) * 128 + col) = __floats2bfloat162_rn(o0, o1);
  }
};
using TestConfig = solder::attention::Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true>;
SOLDER_ATTENTION_KERNEL(solder_attention_bf16_d128, TestConfig, solder::attention::PlainScore,
                        solder::attention::CausalMask, Epilogue)
)";
  CompiledModule compiled = compile_cold(source, "attention_skeleton.cu");
  EXPECT_FALSE(compiled.from_cache);
  expect_schedule_kept(compiled);
  if (compiled.cubins.empty()) return;
  std::printf("NVRTC %s compiled one attention skeleton instantiation (bf16 hd128 128x128, causal) cold in %.2f s: %zu-byte CUBIN\n",
              nvrtc_version().c_str(), compiled.compile_seconds, compiled.cubins.front().size());
}

// A staged-bias instantiation under NVRTC (the emitter's evoformer kernels): NVRTC has fewer builtins
// than nvcc (a __builtin_memcpy compiled with nvcc and failed here, 2026-11-27).
TEST(AttentionNvrtc, CompilesAStagedBiasInstantiation) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  if (cutlass_include_dir(&why).empty()) GTEST_SKIP() << why;
  const char* source = R"(
#include <solder/attention/sm90_attention.cuh>
struct Score {
  solder::attention::TensorMap bias_tile;
  solder::attention::TensorMap bias_column;
  static constexpr float scale_log2 = 1.4426950408889634f;
  static constexpr bool kIdentity = false;
  static constexpr bool kBias = true;
  static constexpr int kStagedBias = 3;
  using BiasTile = __nv_bfloat16;
  using BiasColumn = unsigned char;
  __device__ float dot_factor(int) const { return 0.125f; }
  __device__ float bias(int, int, int) const { return 0.0f; }
  __device__ int bias_tile_batch(int bh) const { return bh % 4; }
  __device__ int bias_column_row(int bh) const { return bh / 4; }
  __device__ float staged_bias(int, int, int, BiasTile t, BiasColumn c) const {
    return __bfloat162float(t) + 1e9f * (c != 0 ? 0.0f : -1.0f);
  }
  __device__ float operator()(int, int, int, float dot) const { return dot; }
};
struct Epilogue {
  __nv_bfloat16* out;
  __device__ void operator()(int bh, int row, int col, float o0, float o1) const {
    *reinterpret_cast<__nv_bfloat162*>(out + ((long long)bh * 256 + row) * 64 + col) = __floats2bfloat162_rn(o0, o1);
  }
};
using TestConfig = solder::attention::Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 3>;
SOLDER_ATTENTION_KERNEL(solder_attention_staged_bias, TestConfig, Score, solder::attention::NoMask, Epilogue)
)";
  expect_schedule_kept(compile_cold(source, "attention_staged_bias.cu"));
}

// A data-mask instantiation under NVRTC (document_mask's kernel at S 4k / 16k: hd64, 128-key tiles,
// Dynamic persistent blocks, one-id tiles, the id table): the boundary tiles' per-score select and the
// ragged tile's bound compile there with setmaxnreg and wgmma kept.
TEST(AttentionNvrtc, CompilesADataMaskInstantiation) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  if (cutlass_include_dir(&why).empty()) GTEST_SKIP() << why;
  const char* source = R"(
#include <solder/attention/sm90_attention.cuh>
struct Mask {
  const int* doc;
  int seq;
  static constexpr bool kDataTiles = true;
  static constexpr bool kEmptyRowNaN = true;
  static constexpr int kMaxKeyTiles = 128;
  static constexpr bool kOneIdTiles = true;
  static constexpr int kColGroups = 4;
  __device__ void key_tiles(int, int, int, int seq_k, int bn, int* begin, int* end) const { *begin = 0; *end = (seq_k + bn - 1) / bn; }
  __device__ bool partial(int, int, int, int, int) const { return true; }
  __device__ int row_id(int bh, int row) const { return doc[(bh / 16) * seq + row]; }
  __device__ int col_id(int bh, int col) const { return doc[(bh / 16) * seq + col]; }
  __device__ bool match(int, int r, int c) const { return r == c; }
  __device__ int tile_class(int, int row_lo, int row_hi, int col_lo, int col_hi) const {
    if (col_hi < row_lo || col_lo > row_hi) return 0;
    return row_lo == row_hi && col_lo == col_hi && row_lo == col_lo ? 1 : 2;
  }
  __device__ bool visible(int bh, int row, int col) const { return match(bh, row_id(bh, row), col_id(bh, col)); }
  __device__ int col_groups() const { return 4; }
  __device__ int col_group(int bh) const { return bh / 16; }
  __device__ int group_bh(int group) const { return group * 16; }
};
struct Epilogue {
  __nv_bfloat16* out;
  int seq;
  __device__ void operator()(int bh, int row, int col, float o0, float o1) const {
    *reinterpret_cast<__nv_bfloat162*>(out + ((long long)bh * seq + row) * 64 + col) = __floats2bfloat162_rn(o0, o1);
  }
};
using TestConfig = solder::attention::Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true>;
SOLDER_ATTENTION_KERNEL(solder_attention_data_mask, TestConfig, solder::attention::PlainScore, Mask, Epilogue)
)";
  expect_schedule_kept(compile_cold(source, "attention_data_mask.cu"));
}

}  // namespace
}  // namespace solder::runtime
