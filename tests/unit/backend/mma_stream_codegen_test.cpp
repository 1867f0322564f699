// The tensor-core emitter: which kernels it takes, which rule refuses the others, and the shape of
// what it writes. (Whether the kernels compute the right values is checked on the GPU by
// tests/gpu/attention.sh and tests/gpu/run.sh; CudaCodegen.EveryExampleCompilesWithNvccForSm90a
// compiles them.)
#include <gtest/gtest.h>

#include "backend/cuda/mma_stream_codegen.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

KernelProgram compile_example(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims, bool small = true) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  BoundProgram bound = bind_program(program, SizeChoice{small, dims});
  return compile_program(bound, CompileOptions::for_gpu()).kernels;
}

std::optional<MmaStreamKernel> emit(const KernelProgram& kp, std::string* refusal) {
  return generate_mma_stream_kernel(kp, kp.kernels.front(), refusal);
}

TEST(MmaStreamCodegen, TakesVanillaAttention) {
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
  KernelProgram d64 = compile_example("vanilla", {{"D", 64}, {"S", 256}});
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
  // the rows' ids: block-wide min/max once; the keys' ids: min/max per tile, read from the input
  EXPECT_NE(k->source.find("row_lo0"), std::string::npos);
  EXPECT_NE(k->source.find("auto column_range0 = [&](long long j_t"), std::string::npos);
  EXPECT_NE(k->source.find("return (row_lo0 <= col_hi0 && col_lo0 <= row_hi0); }"), std::string::npos);
  // no static shared memory: the launch declares all of it (static bytes would count against the
  // 48 KB a kernel gets without opting in)
  EXPECT_EQ(k->source.find("__shared__ long long"), std::string::npos);
  // reads of the input are bounded (0 outside, as the Kernel IR's copies)
  EXPECT_NE(k->source.find("< 256LL))) ? static_cast<long long>(doc["), std::string::npos);
}

TEST(MmaStreamCodegen, RaggedTilesKeepTheirGuards) {
  KernelProgram kp = compile_example("vanilla", {{"S", 200}, {"D", 32}});
  std::string refusal;
  auto k = emit(kp, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("< 200LL"), std::string::npos);
}

TEST(MmaStreamCodegen, SmallGridsGetSmallerRowTiles) {
  KernelProgram kp = compile_example("vanilla", {{"S", 256}});  // 1 x 2 heads: 16-row tiles fill more SMs
  std::string refusal;
  auto k = emit(kp, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_EQ(k->info.threads, 32);
  EXPECT_EQ(k->info.blocks, 32);
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
