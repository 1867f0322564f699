// The tensor-core emitter: which kernels it takes, which rule refuses the others, and the shape of
// what it writes. (Whether the kernels compute the right values is checked on the GPU by
// tests/gpu/attention.sh and tests/gpu/run.sh; CudaCodegen.EveryExampleCompilesWithNvccForSm90a
// compiles them.)
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/mma_stream_codegen.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

KernelProgram compile_example(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims, bool small = true) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  BoundProgram bound = bind_program(program, SizeChoice{small, dims});
  return contracts_as_reduces(compile_program(bound, CompileOptions::for_gpu()).kernels, false);  // what the emitter sees
}

std::optional<MmaStreamKernel> emit(const KernelProgram& kp, std::string* refusal) {
  return generate_mma_stream_kernel(kp, kp.kernels.front(), refusal);
}

// SOLDER_MMA_PATH for the life of a scope (the tests of the mma.sync path ask for it where the shape
// would take wgmma).
struct MmaPath {
  explicit MmaPath(const char* path) { setenv("SOLDER_MMA_PATH", path, 1); }
  ~MmaPath() { unsetenv("SOLDER_MMA_PATH"); }
};

// At paper sizes (bf16, 128-row tiles, 64-key stream tiles, D = 64) the attention kernels take the
// wgmma path: one warpgroup per 64 rows, descriptors, the 4-stage ring, the mma.sync fragment
// indexing of the row statements.
TEST(MmaStreamCodegen, PaperShapesTakeTheWgmmaPath) {
  MmaPath overlap("wgmma-overlap");  // the overlapped schedule (not the default: measured slower)
  for (const char* name : {"vanilla", "causal", "softcap", "alibi", "sliding_window", "prefix_lm", "document_mask", "gqa"}) {
    KernelProgram kp = compile_example(name, {}, false);
    std::string refusal;
    auto k = emit(kp, &refusal);
    ASSERT_TRUE(k) << name << ": " << refusal;
    EXPECT_NE(k->summary.find("2 warpgroups of 64 rows, wgmma m64n64k16"), std::string::npos) << name << ": " << k->summary;
    EXPECT_NE(k->source.find("// tensor-core emitter: 128 rows x 64 columns per step, 2 warpgroups"), std::string::npos) << name;
    EXPECT_EQ(k->info.threads, 256) << name;
    EXPECT_NE(k->source.find("__launch_bounds__(256, 2)"), std::string::npos) << name;
    EXPECT_NE(k->summary.find("the next tile's scores and row statements overlap P · V"), std::string::npos) << name << ": " << k->summary;
    EXPECT_NE(k->source.find("wait_group<1>();  // the scores retired; P · V may still run"), std::string::npos) << name;
    EXPECT_NE(k->source.find("mma_ss<64, false>("), std::string::npos) << name;
    EXPECT_NE(k->source.find("mma_rs<64, true>("), std::string::npos) << name;
    EXPECT_NE(k->source.find("Swizzle128<64>::byte_offset("), std::string::npos) << name;
    EXPECT_NE(k->source.find("cp_async_wait<2>();"), std::string::npos) << name;
    EXPECT_EQ(k->source.find("mma_16816"), std::string::npos) << name;
    EXPECT_EQ(k->source.find("ldmatrix"), std::string::npos) << name;
    // the same per-element statements: the row binding, NaN-propagating max, exp as one FFMA
    EXPECT_NE(k->source.find("const long long i = row0 + (rs >> 1) * 16 + (rs & 1) * 8;"), std::string::npos) << name;
    EXPECT_NE(k->source.find("solder::max_nan("), std::string::npos) << name;
    EXPECT_NE(k->source.find("solder::tile::fast_exp_diff("), std::string::npos) << name;
    // the power-of-two scale 1/8 multiplies Q once, in shared memory, instead of every score
    EXPECT_NE(k->source.find("solder::tile::scale_bf16_fragment(eight, scale);"), std::string::npos) << name;
    EXPECT_EQ(k->source.find("[nt][e] *= scale"), std::string::npos) << name;
    // 128 rows: Q 16 KB, 4 stages of K and V 64 KB, 1 KB of alignment slack
    EXPECT_GE(k->info.shared_bytes, 16384 + 65536 + 1024) << name;
  }
}

TEST(MmaStreamCodegen, WgmmaPathCoversHeadDim128AndRaggedTiles) {
  KernelProgram d128 = compile_example("vanilla", {{"D", 128}, {"S", 2048}, {"B", 2}}, false);
  std::string refusal;
  auto k = emit(d128, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->summary.find("wgmma m64n64k16 and m64n128k16"), std::string::npos) << k->summary;
  EXPECT_NE(k->source.find("mma_rs<128, true>("), std::string::npos);
  // 64 rows (the planner halves the row tile for this grid): one warpgroup; three stages keep two blocks per SM
  EXPECT_NE(k->summary.find("1 warpgroup of 64 rows"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("3-stage ring"), std::string::npos) << k->summary;
  EXPECT_NE(k->source.find("__launch_bounds__(128, 1)"), std::string::npos);

  KernelProgram ragged = compile_example("causal", {{"S", 1000}, {"B", 4}, {"H", 16}}, false);
  auto r = emit(ragged, &refusal);
  ASSERT_TRUE(r) << refusal;
  EXPECT_NE(r->summary.find("wgmma"), std::string::npos) << r->summary;
  EXPECT_NE(r->source.find("< 1000LL"), std::string::npos);  // out-of-bounds rows zero-filled, stores guarded
}

// The per-tile work of the wgmma loop: K/V copies unrolled and unguarded where every index is provably in
// bounds (guards only on the ragged dim otherwise), the O rescale without a select per element when every
// row's condition holds.
TEST(MmaStreamCodegen, WgmmaLoopBodyCarriesOnlyTheGuardsItNeeds) {
  std::string refusal;
  KernelProgram paper = compile_example("vanilla", {}, false);
  auto v = emit(paper, &refusal);
  ASSERT_TRUE(v) << refusal;
  EXPECT_EQ(v->source.find("const bool inside"), std::string::npos);
  EXPECT_NE(v->source.find("(cp.async, 16 bytes per copy, every index in bounds: no guard)"), std::string::npos);
  EXPECT_NE(v->source.find("for (int copy = 0; copy < 2; ++copy) { const int chunk = threadIdx.x + copy * 256;"), std::string::npos);
  EXPECT_NE(v->source.find("if (row_value2[0] != 0.0f && row_value2[1] != 0.0f) {  // the condition holds on every row"), std::string::npos);
  EXPECT_NE(v->source.find("long long block_linear = blockIdx.x;"), std::string::npos);

  KernelProgram ragged = compile_example("vanilla", {{"S", 4000}}, false);
  auto r = emit(ragged, &refusal);
  ASSERT_TRUE(r) << refusal;
  EXPECT_NE(r->source.find("const bool inside = (((j_t * 64LL) + j)) >= 0 && (((j_t * 64LL) + j)) + 1 <= 4000LL;"), std::string::npos);
  EXPECT_EQ(r->source.find("((b_t + b)) >= 0 && ((b_t + b)) + 1 <= "), std::string::npos);  // batch and head: in bounds
}

TEST(MmaStreamCodegen, OtherShapesKeepMmaSyncAndNameTheRule) {
  std::string refusal;
  KernelProgram d32 = compile_example("vanilla", {{"S", 4096}, {"D", 32}, {"B", 4}, {"H", 16}}, false);
  auto k32 = emit(d32, &refusal);
  ASSERT_TRUE(k32) << refusal;
  EXPECT_NE(k32->summary.find("wgmma refused: depth 32 and width 32"), std::string::npos) << k32->summary;
  {
    // The default: wgmma, each product waited for before the statements after it.
    KernelProgram paper = compile_example("vanilla", {}, false);
    auto k_serial = emit(paper, &refusal);
    ASSERT_TRUE(k_serial) << refusal;
    EXPECT_NE(k_serial->summary.find("wgmma m64n64k16"), std::string::npos) << k_serial->summary;
    EXPECT_NE(k_serial->summary.find("no overlap of the row statements with P · V (the overlap is off by default"), std::string::npos) << k_serial->summary;
    EXPECT_EQ(k_serial->source.find("wait_group<1>"), std::string::npos);
  }
  MmaPath sync("sync");
  KernelProgram paper = compile_example("vanilla", {}, false);
  auto forced = emit(paper, &refusal);
  ASSERT_TRUE(forced) << refusal;
  EXPECT_NE(forced->summary.find("mma.sync m16n8k16 bf16 (wgmma refused: SOLDER_MMA_PATH=sync)"), std::string::npos) << forced->summary;
}

TEST(MmaStreamCodegen, TakesVanillaAttention) {
  MmaPath sync("sync");
  KernelProgram kp = compile_example("vanilla", {}, false);  // paper sizes: 2048 blocks of 128 rows
  std::string refusal;
  auto k = emit(kp, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_EQ(k->info.threads, 128);  // 128 rows, one warp per 32 (two row groups of 16)
  EXPECT_NE(k->summary.find("4 warps of 32 rows"), std::string::npos) << k->summary;
  EXPECT_EQ(k->info.cluster, 1);
  EXPECT_NE(k->source.find("mma_16816"), std::string::npos);
  EXPECT_NE(k->source.find("ldmatrix_x4_trans"), std::string::npos);
  EXPECT_NE(k->source.find("cp_async_16"), std::string::npos);
  EXPECT_NE(k->summary.find("no tile skipping (no mask"), std::string::npos) << k->summary;
  // P reuses the exponentials of the row sum instead of computing them again.
  EXPECT_NE(k->source.find("P: the values the reduction above computed"), std::string::npos);
}

// exp(s - m) is one FFMA and ex2.approx; a power-of-two scale of bf16 scores multiplies Q's fragments
// once (exact) instead of every score; any other scale stays a product per score.
TEST(MmaStreamCodegen, FoldsThePowerOfTwoScaleIntoQAndExpIntoOneFfma) {
  KernelProgram d64 = compile_example("vanilla", {{"D", 16}, {"S", 256}});  // rsqrt(16) = 1/4; mma.sync (wgmma takes D 64, 128)
  std::string refusal;
  auto k = emit(d64, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("solder::tile::fast_exp_diff("), std::string::npos);
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(k->source, "expf("), count(k->source, "__expf("));  // no IEEE expf left
  EXPECT_NE(k->source.find("scale_bf16_fragment(a_frag[g][ks], scale)"), std::string::npos);
  EXPECT_EQ(k->source.find("[nt][e] *= scale"), std::string::npos);

  KernelProgram d48 = compile_example("vanilla", {{"D", 48}, {"S", 256}});  // rsqrt(48): not a power of two
  auto k48 = emit(d48, &refusal);
  ASSERT_TRUE(k48) << refusal;
  EXPECT_EQ(k48->source.find("scale_bf16_fragment"), std::string::npos);
  EXPECT_NE(k48->source.find("[nt][e] *= scale"), std::string::npos);
}

TEST(MmaStreamCodegen, SkipsTilesACausalMaskEmpties) {
  for (const char* name : {"causal", "sliding_window", "prefix_lm"}) {
    KernelProgram kp = compile_example(name, {{"S", 512}});
    std::string refusal;
    auto k = emit(kp, &refusal);
    ASSERT_TRUE(k) << name << ": " << refusal;
    EXPECT_NE(k->summary.find("tiles the mask empties are skipped"), std::string::npos) << name << ": " << k->summary;
    EXPECT_NE(k->source.find("auto tile_live = [&](long long j_t) -> bool { return ("), std::string::npos) << name;
    EXPECT_NE(k->source.find("if (tile_full(j_t)) {"), std::string::npos) << name;  // full tiles skip the mask
  }
}

TEST(MmaStreamCodegen, DocumentMasksSkipTilesFromTheIdsBounds) {
  KernelProgram kp = compile_example("document_mask", {{"S", 256}});
  std::string refusal;
  auto k = emit(kp, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->summary.find("tiles the mask empties are skipped"), std::string::npos) << k->summary;
  // the rows' ids: block-wide min/max once; the keys' ids: min/max per tile, read from the input, every
  // key tile classified once per block (tile_mask_test.cpp checks the rule)
  EXPECT_NE(k->source.find("row_lo0"), std::string::npos);
  EXPECT_NE(k->source.find("auto column_part0_ = [&](long long j_t"), std::string::npos);
  EXPECT_NE(k->source.find("tile_class_[round_ + u_] = ((row_lo0 <= col_hi0) && (col_lo0 <= row_hi0))"), std::string::npos);
  // no static shared memory: the launch declares all of it (static bytes would count against the
  // 48 KB a kernel gets without opting in)
  EXPECT_EQ(k->source.find("__shared__ long long"), std::string::npos);
  // reads of the input are bounded (0 outside, as the Kernel IR's copies) where an index may leave
  // its extent (a ragged S), and read directly where every index is provably inside
  EXPECT_EQ(k->source.find("< 256LL))) ? static_cast<long long>(doc["), std::string::npos);
  EXPECT_NE(k->source.find("== static_cast<long long>(doc["), std::string::npos);
  KernelProgram ragged = compile_example("document_mask", {{"S", 200}});
  auto r = emit(ragged, &refusal);
  ASSERT_TRUE(r) << refusal;
  EXPECT_NE(r->source.find("< 200LL)) ? static_cast<long long>(doc["), std::string::npos);
}

TEST(MmaStreamCodegen, RaggedTilesKeepTheirGuards) {
  KernelProgram kp = compile_example("vanilla", {{"S", 200}, {"D", 32}});
  std::string refusal;
  auto k = emit(kp, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("< 200LL"), std::string::npos);
}

// A contraction's row tile is never shrunk below 64 to fill a small grid (issue 15): 1 x 2 heads of
// 256 rows take 4 blocks of 128 rows.
TEST(MmaStreamCodegen, SmallGridsKeepFullRowTiles) {
  KernelProgram kp = compile_example("vanilla", {{"S", 256}});
  std::string refusal;
  auto k = emit(kp, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_EQ(k->info.blocks, 4);
}

TEST(MmaStreamCodegen, RefusesOtherShapesWithTheRule) {
  std::string refusal;
  KernelProgram moe = compile_example("moe_routing", {}, false);
  EXPECT_FALSE(emit(moe, &refusal));
  EXPECT_FALSE(refusal.empty());
  KernelProgram variance = compile_example("variance", {{"L", 4096}});
  EXPECT_FALSE(emit(variance, &refusal));
  EXPECT_FALSE(refusal.empty());
  KernelProgram one_tile = compile_example("vanilla", {});  // 64 keys: held whole, no stream
  EXPECT_FALSE(emit(one_tile, &refusal));
  EXPECT_NE(refusal.find("loop"), std::string::npos) << refusal;
}

}  // namespace
}  // namespace solder
