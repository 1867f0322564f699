// Two attention kernels as one launch of the skeleton's dual mode (attention_dual.cpp): differential
// attention's fusion plan (a0 in f32, then a1 and o = a0 − λ·a1) becomes one kernel whose consumers run
// one half each; the rules that keep two kernels. (The values are checked on the GPU: `solder run
// --backend cuda examples/diff_attn.sol`, and tests/gpu/attention_skeleton/test_sm90_attention_dual.cu.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "backend/cuda/attention_dual.h"
#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/cuda_names.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

struct Compiled {
  KernelProgram kernels, named, view;
};

Compiled compile_text(const std::string& text, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto program = std::make_shared<Program>(parse_program(text, "dual.sol"));
  KernelProgram kernels = compile_program(bind_program(program, SizeChoice{false, dims}), CompileOptions::for_gpu()).kernels;
  KernelProgram named = with_cuda_names(kernels);
  return {kernels, named, contracts_as_reduces(named, false)};
}

std::string example_text(const std::string& name) {
  std::ifstream in(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// diff_attn at head dims 64 and 128: one kernel, 64 query rows per work tile, consumer 0 the half of
// q[b, 0, h], consumer 1 of q[b, 1, h]; the combine takes a0 from the first half's o / Σp.
TEST(AttentionDual, DiffAttnRunsAsOneKernel) {
  for (int64_t d : {64, 128}) {
    Compiled c = compile_text(example_text("diff_attn"), {{"D", d}});
    ASSERT_EQ(c.view.kernels.size(), 2u) << "the fusion plan keeps a0 and a1 in two kernels";
    std::string refusal;
    auto k = generate_attention_dual_kernel(c.view, c.named, 0, &refusal);
    ASSERT_TRUE(k) << refusal;
    const int stages = d == 64 ? 4 : 2;
    // the staged combine on persistent blocks: two Q buffers at hd64, one at hd128 (the 2-stage ring's room)
    const int q_buffers = d == 64 ? 2 : 1;
    const std::string config = "solder::attention::DualConfig<solder::gemm::Dtype::bf16, " + std::to_string(d) + ", 128, " + std::to_string(stages) +
                               ", true, true, " + std::to_string(q_buffers) + ">";
    EXPECT_NE(k->source.find("#include <solder/attention/sm90_attention_dual.cuh>"), std::string::npos);
    EXPECT_NE(k->source.find("using fused_o_config_ = " + config + ";"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find("SOLDER_ATTENTION_DUAL_KERNEL(fused_o, fused_o_config_, fused_o_score_, fused_o_mask_, fused_o_epilogue_)"), std::string::npos);
    EXPECT_EQ(k->source.find("SOLDER_ATTENTION_KERNEL("), std::string::npos);
    // the combine: a0 is the first half's value x_, λ read at the stored element, one rounding to bf16
    EXPECT_NE(k->source.find("return ((&x_)[0] - (solder::to_float(lam[0]) * (&a_)[0]));"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find("__device__ void combine(int bh_, int row_, int col_, float x0_, float x1_, float o0_, float o1_) const {"), std::string::npos);
    // the staged combine: the same value as one packed word (no store), and the row's address
    EXPECT_NE(k->source.find("static constexpr bool kStagedCombine = true;"), std::string::npos);
    EXPECT_NE(k->source.find("__device__ unsigned int staged_combine(int bh_, int row_, int col_, float x0_, float x1_, float o0_, float o1_) const {\n"
                             "    o0_ = combine_value_(bh_, row_, col_, x0_, o0_);\n    o1_ = combine_value_(bh_, row_, col_ + 1, x1_, o1_);\n"
                             "    const __nv_bfloat162 w_ = __floats2bfloat162_rn(o0_, o1_);\n    return *reinterpret_cast<const unsigned int*>(&w_);\n  }\n"),
              std::string::npos)
        << k->source;
    EXPECT_NE(k->source.find("__device__ void* staged_row(int bh_, int row_) const {\n    return &o__[(static_cast<long long>(bh_) * 1024LL + row_) * " +
                             std::to_string(d) + "LL];\n  }\n"),
              std::string::npos);
    const size_t combine = k->source.find("combine_value_(");
    ASSERT_NE(combine, std::string::npos);
    EXPECT_EQ(k->source.find("a0[", combine), std::string::npos) << "the dual kernel never reads a0";
    EXPECT_EQ(k->source.find("store(&a0["), std::string::npos) << "nor stores it";
    EXPECT_EQ(k->info.name, "fused_o");
    EXPECT_EQ(k->info.blocks, 132) << "persistent blocks, one per SM (of 16 * 8 * 16 work tiles)";
    EXPECT_EQ(k->info.threads, 384);
    EXPECT_EQ(k->info.shared_bytes, q_buffers * 2 * 64 * d * 2 + stages * 3 * 128 * d * 2 + 8 * (2 * q_buffers + 4 * stages) + 1024);
    ASSERT_TRUE(k->info.attention);
    const AttentionSkeletonLaunch& a = *k->info.attention;
    EXPECT_EQ(a.config, config);
    EXPECT_EQ(a.batch, 16);
    EXPECT_EQ(a.heads, 8);
    EXPECT_EQ(a.seq_q, 1024);
    EXPECT_EQ(a.q_heads, 16);
    EXPECT_EQ(a.q_head0, 0) << "the first half's lead index: the kernel adds heads for the second";
    EXPECT_EQ(a.k_heads, 16);
    EXPECT_EQ(a.k_head0, 0);
    EXPECT_EQ(a.v_heads, 0);
    EXPECT_EQ(a.q.batch, 16 * 2 * 8);
    EXPECT_EQ(a.k.tile_rows, 128);
  }
}

// generate_cuda launches the one kernel, and names it for both kernels' contractions;
// $SOLDER_ATTN_DUAL=0 keeps the two (the A/B switch).
TEST(AttentionDual, GeneratedModuleAndTheSwitch) {
  Compiled c = compile_text(example_text("diff_attn"));
  GeneratedModule one = generate_cuda(c.kernels);
  ASSERT_EQ(one.kernels.size(), 1u);
  EXPECT_EQ(one.kernels[0].name, "fused_o");
  ASSERT_TRUE(one.kernels[0].attention);
  EXPECT_EQ(one.contractions.size(), 4u);
  for (auto& s : one.contractions) {
    EXPECT_EQ(s.kernel, "fused_o");
    EXPECT_EQ(s.skeleton, ContractionSchedule::kAttentionSkeleton);
    EXPECT_NE(s.tile.find("DualConfig<"), std::string::npos) << s.tile;
  }
  setenv("SOLDER_ATTN_DUAL", "0", 1);
  GeneratedModule two = generate_cuda(c.kernels);
  unsetenv("SOLDER_ATTN_DUAL");
  ASSERT_EQ(two.kernels.size(), 2u);
  EXPECT_EQ(two.source.find("DualConfig"), std::string::npos);
  EXPECT_NE(two.source.find("SOLDER_ATTENTION_KERNEL(fused_a0"), std::string::npos);
}

// $SOLDER_ATTN_DUAL_COMBINE=pairs keeps consumer 0's pair-by-pair combine on one block per work tile (the
// Config without StagedCombine); $SOLDER_ATTN_DUAL_PERSISTENT=0 the staged combine on one block per tile.
TEST(AttentionDual, CombineAndPersistentKnobs) {
  Compiled c = compile_text(example_text("diff_attn"));
  std::string refusal;
  setenv("SOLDER_ATTN_DUAL_COMBINE", "pairs", 1);
  auto pairs = generate_attention_dual_kernel(c.view, c.named, 0, &refusal);
  unsetenv("SOLDER_ATTN_DUAL_COMBINE");
  ASSERT_TRUE(pairs) << refusal;
  EXPECT_EQ(pairs->info.attention->config, "solder::attention::DualConfig<solder::gemm::Dtype::bf16, 64, 128, 4>");
  EXPECT_EQ(pairs->info.blocks, 2048);
  EXPECT_EQ(pairs->summary.find("16-byte row stores"), std::string::npos) << pairs->summary;
  setenv("SOLDER_ATTN_DUAL_PERSISTENT", "0", 1);
  auto staged = generate_attention_dual_kernel(c.view, c.named, 0, &refusal);
  unsetenv("SOLDER_ATTN_DUAL_PERSISTENT");
  ASSERT_TRUE(staged) << refusal;
  EXPECT_EQ(staged->info.attention->config, "solder::attention::DualConfig<solder::gemm::Dtype::bf16, 64, 128, 4, true>");
  EXPECT_EQ(staged->info.blocks, 2048);
  EXPECT_EQ(staged->info.shared_bytes, 2 * 64 * 64 * 2 + 4 * 3 * 128 * 64 * 2 + 8 * (2 + 4 * 4) + 1024);
  EXPECT_NE(staged->summary.find("each consumer half of the columns, 16-byte row stores"), std::string::npos) << staged->summary;
  EXPECT_EQ(staged->summary.find("persistent"), std::string::npos) << staged->summary;
  auto persistent = generate_attention_dual_kernel(c.view, c.named, 0, &refusal);
  ASSERT_TRUE(persistent) << refusal;
  EXPECT_NE(persistent->summary.find("; persistent blocks, one per SM, 2 Q buffers"), std::string::npos) << persistent->summary;
  EXPECT_EQ(persistent->info.cluster, 1);
  EXPECT_EQ(persistent->summary.find("clusters of 2"), std::string::npos) << persistent->summary;
}

// $SOLDER_ATTN_DUAL_CLUSTER=2: persistent blocks in clusters of two, one 128-row pair of work tiles per
// cluster (K and V multicast), at most 66 clusters, at head dim 64; without persistent blocks the knob takes
// nothing.
TEST(AttentionDual, ClusterKnob) {
  Compiled c = compile_text(example_text("diff_attn"));
  std::string refusal;
  setenv("SOLDER_ATTN_DUAL_CLUSTER", "2", 1);
  auto clustered = generate_attention_dual_kernel(c.view, c.named, 0, &refusal);
  ASSERT_TRUE(clustered) << refusal;
  EXPECT_EQ(clustered->info.attention->config, "solder::attention::DualConfig<solder::gemm::Dtype::bf16, 64, 128, 4, true, true, 2, 2>");
  EXPECT_EQ(clustered->info.cluster, 2);
  EXPECT_EQ(clustered->info.blocks, 132) << "66 clusters of 2 (of 16 * 8 * 8 pairs of work tiles)";
  EXPECT_NE(clustered->summary.find("; clusters of 2 blocks, the ranks the two work tiles of a 128-row pair, K and V multicast to both"), std::string::npos)
      << clustered->summary;
  EXPECT_NE(clustered->source.find("using fused_o_config_ = solder::attention::DualConfig<solder::gemm::Dtype::bf16, 64, 128, 4, true, true, 2, 2>;"),
            std::string::npos);
  // few pairs: one cluster per pair (B 1, H 8, S 256: 4 work tiles per head, 2 pairs; 16 clusters)
  Compiled small = compile_text(example_text("diff_attn"), {{"B", 1}, {"S", 256}});
  auto few = generate_attention_dual_kernel(small.view, small.named, 0, &refusal);
  ASSERT_TRUE(few) << refusal;
  EXPECT_EQ(few->info.blocks, 2 * 8 * 2);
  EXPECT_EQ(few->info.blocks % few->info.cluster, 0);
  // hd128 keeps single blocks (the cluster Config's 232 consumer registers spill there)
  Compiled d128 = compile_text(example_text("diff_attn"), {{"D", 128}});
  auto wide = generate_attention_dual_kernel(d128.view, d128.named, 0, &refusal);
  ASSERT_TRUE(wide) << refusal;
  EXPECT_EQ(wide->info.cluster, 1);
  EXPECT_EQ(wide->info.attention->config, "solder::attention::DualConfig<solder::gemm::Dtype::bf16, 128, 128, 2, true, true, 1>");
  setenv("SOLDER_ATTN_DUAL_PERSISTENT", "0", 1);
  auto single = generate_attention_dual_kernel(c.view, c.named, 0, &refusal);
  unsetenv("SOLDER_ATTN_DUAL_PERSISTENT");
  unsetenv("SOLDER_ATTN_DUAL_CLUSTER");
  ASSERT_TRUE(single) << refusal;
  EXPECT_EQ(single->info.cluster, 1);
  EXPECT_EQ(single->info.blocks, 2048);
}

// Rows over 32 key tiles keep the two kernels (faster there on the H100); SOLDER_ATTN_DUAL=1 forces the dual one.
TEST(AttentionDual, LongRowsKeepTwoKernels) {
  Compiled c = compile_text(example_text("diff_attn"), {{"B", 1}, {"S", 16384}});
  ASSERT_EQ(c.view.kernels.size(), 2u);
  std::string refusal;
  EXPECT_FALSE(generate_attention_dual_kernel(c.view, c.named, 0, &refusal));
  EXPECT_NE(refusal.find("128 key tiles per row (the dual mode takes at most 32"), std::string::npos) << refusal;
  setenv("SOLDER_ATTN_DUAL", "1", 1);
  auto forced = generate_attention_dual_kernel(c.view, c.named, 0, &refusal);
  unsetenv("SOLDER_ATTN_DUAL");
  ASSERT_TRUE(forced) << refusal;
  EXPECT_EQ(forced->info.blocks, 132) << "persistent blocks over 8 * 256 work tiles";
  Compiled s4k = compile_text(example_text("diff_attn"), {{"B", 4}, {"S", 4096}});
  EXPECT_TRUE(generate_attention_dual_kernel(s4k.view, s4k.named, 0, &refusal)) << refusal;
}

// The rules that keep two kernels, each named in the refusal.
TEST(AttentionDual, RefusesWhatIsNotTheSameComputation) {
  const std::string text = example_text("diff_attn");
  std::string refusal;
  // the second half reads K's first half: not the next fixed lead index
  {
    Compiled c = compile_text(replaced(text, "q[b, 1, h, i, d] * k[b, 1, h, j, d]", "q[b, 1, h, i, d] * k[b, 0, h, j, d]"));
    ASSERT_EQ(c.view.kernels.size(), 2u);
    EXPECT_FALSE(generate_attention_dual_kernel(c.view, c.named, 0, &refusal));
    EXPECT_NE(refusal.find("K is not the first's at the next fixed lead index"), std::string::npos) << refusal;
  }
  // a0 is an output too (the dual kernel would not store it): refused (here already by the skeleton,
  // whose P·V of an f32 output is not rounded to bf16)
  {
    Compiled c = compile_text(replaced(text, "a0[b, h, i, d] = sum(j)", "out a0[b, h, i, d] : f32 = sum(j)"));
    refusal.clear();
    EXPECT_FALSE(generate_attention_dual_kernel(c.view, c.named, 0, &refusal));
    EXPECT_FALSE(refusal.empty());
  }
  // the combine reads a0 at another element (its rows reversed)
  {
    Compiled c = compile_text(replaced(text, "= a0[b, h, i, d] - lam", "= a0[b, h, S - 1 - i, d] - lam"));
    ASSERT_EQ(c.view.kernels.size(), 2u);
    refusal.clear();
    EXPECT_FALSE(generate_attention_dual_kernel(c.view, c.named, 0, &refusal));
    EXPECT_FALSE(refusal.empty());
  }
  // one attention: no second kernel
  {
    Compiled c = compile_text(example_text("vanilla"));
    EXPECT_FALSE(generate_attention_dual_kernel(c.view, c.named, 0, &refusal));
  }
}

}  // namespace
}  // namespace solder
