// The gathered-GEMM writer (backend/cuda/gathered_gemm_writer.h): conv_chain runs both convolutions
// whole as implicit GEMMs on mma.sync (the 3×3 one with ReLU as its epilogue, h f16) — as one chained
// kernel at its default sizes (h kept on chip), as two where the chained grid would be too narrow or
// chains are off (SOLDER_GATHERED_CHAIN=0) — and nerf_mlp's concatenated products too; the modules
// compile with NVRTC for sm_90a (nothing runs here; skipped without NVRTC).
#include <gtest/gtest.h>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_codegen.h"
#include "contract/gathered_gemm_fit.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
#include "support/refusal.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

GeneratedModule example_for_gpu(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  SizeChoice sizes{false, std::move(dims)};
  BoundProgram bound = bind_program(program, sizes);
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
}

// Sets an environment variable for the scope (the writer's and planner's tuning switches).
using testing::ScopedEnv;

int gathered_kernels(const GeneratedModule& m) {
  int n = 0;
  for (auto& c : m.contractions) n += c.skeleton == ContractionSchedule::kGatheredGemm;
  return n;
}

TEST(GatheredGemmWriter, ConvChainRunsBothConvolutionsAsImplicitGemms) {
  ScopedEnv unchained("SOLDER_GATHERED_CHAIN", "0");
  GeneratedModule m = example_for_gpu("conv_chain");
  ASSERT_EQ(m.kernels.size(), 2u) << m.source;
  EXPECT_EQ(gathered_kernels(m), 2) << contraction_schedule_text(m.contractions);
  EXPECT_NE(m.source.find("implicit GEMM with gathered operands on mma.sync"), std::string::npos);
  // y1: M = 56·56 pixels (n, r, col), N = 64 output channels, K = 64·3·3 flattened.
  EXPECT_NE(m.source.find("// M 3136 (rows n__ r col) x N 64 (columns o__) x K 576 (reduced ci kr kc)"), std::string::npos) << m.source;
  // The padding is the operand's zero-filled select; ReLU is y1's epilogue (h stored, y1 never).
  EXPECT_NE(m.source.find("then max("), std::string::npos) << m.source;
  for (auto& k : m.kernels) {
    EXPECT_EQ(k.threads, 128);
    EXPECT_LE(k.shared_bytes, 48 * 1024);
  }
}

TEST(GatheredGemmWriter, ConvChainModuleCompilesWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  for (const char* chain : {"0", ""}) {  // two kernels, then the chained one
    ScopedEnv env("SOLDER_GATHERED_CHAIN", chain);
    GeneratedModule m = example_for_gpu("conv_chain");
    ASSERT_EQ(m.kernels.size(), *chain ? 2u : 1u);
    runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "conv_chain.cu", flags);
    EXPECT_FALSE(compiled.cubins.front().empty());
  }
  // C1 (1×1 then 1×1: N1 = 256, the widest row tile on chip) chained.
  GeneratedModule c1 = example_for_gpu("conv_chain", {{"KS", 1}, {"OC1", 256}, {"OC2", 64}});
  ASSERT_EQ(c1.kernels.size(), 1u);
  runtime::CompiledModule compiled = runtime::compile_cuda(c1.source, "conv_chain_c1.cu", flags);
  EXPECT_FALSE(compiled.cubins.front().empty());
}

// The chain (fit_gathered_chain, whole_contractions.h): at 56 × 56 pixels (98 row tiles of 32, at least
// half the SMs) both convolutions run in one kernel that never stores h: C1 (one K step) one block per
// row tile, C5 (9 K steps) in clusters of 2 (measured faster on the H100; SOLDER_GATHERED_CHAIN=block
// keeps one block per row tile); at 28 × 28 (25 row tiles) and 14 × 14 (7) across clusters (below).
TEST(GatheredGemmWriter, ConvChainAtPaperSizesRunsAsOneChainedKernel) {
  struct Cell {
    std::vector<std::pair<std::string, int64_t>> dims;
    const char* chain;
    int64_t blocks;
    int cluster;
  };
  for (const Cell& cell : {Cell{{}, "", 196, 2}, Cell{{}, "block", 98, 1}, Cell{{{"KS", 1}, {"OC1", 256}, {"OC2", 64}}, "", 98, 1}}) {
    ScopedEnv env("SOLDER_GATHERED_CHAIN", cell.chain);
    GeneratedModule m = example_for_gpu("conv_chain", cell.dims);
    ASSERT_EQ(m.kernels.size(), 1u) << m.source;
    EXPECT_EQ(gathered_kernels(m), 2) << contraction_schedule_text(m.contractions);
    EXPECT_EQ(m.kernels[0].blocks, cell.blocks);
    EXPECT_EQ(m.kernels[0].cluster, cell.cluster);
    EXPECT_EQ(m.kernels[0].threads, 256);
    EXPECT_LE(m.kernels[0].shared_bytes, 227 * 1024);
    EXPECT_NE(m.source.find("two implicit GEMMs chained in one kernel"), std::string::npos) << m.source;
    EXPECT_EQ(m.source.find("solder::store(&h["), std::string::npos) << m.source;  // h is never stored
    EXPECT_NE(m.source.find("solder::store(&y2["), std::string::npos) << m.source;
    EXPECT_NE(m.source.find(cell.cluster == 1 ? "into h_s_ (never stored)" : "h_s_ (never stored to memory)"), std::string::npos) << m.source;
    // programmatic dependent launch: w2 (an input) is staged before the wait, x read after it
    EXPECT_TRUE(m.kernels[0].programmatic);
    const size_t staged = m.source.find("cp_async_commit()"), wait = m.source.find("griddepcontrol.wait;"), x = m.source.find("x[");
    ASSERT_NE(wait, std::string::npos) << m.source;
    EXPECT_LT(staged, wait);
    EXPECT_LT(wait, m.source.find("a_issue_(kt0_, 0)"));
    EXPECT_NE(x, std::string::npos);
  }
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/conv_chain.sol"));
  // 28 x 28 pixels with a w2 that fits one block: 25 row tiles, under half the SMs, so the cluster form
  // (below); SOLDER_GATHERED_CHAIN=block takes the one-block form whatever the grid.
  BoundProgram narrow = bind_program(program, SizeChoice{false, {{"IC", 128}, {"HH", 28}, {"WW", 28}, {"OC1", 128}, {"OC2", 128}}});
  std::string report = skeletons_text(narrow, choose_skeletons(narrow, CompileOptions::for_gpu()));
  EXPECT_NE(report.find("kept on chip as its A: 25 clusters of 4 blocks of 32 rows (100 blocks"), std::string::npos) << report;
  ScopedEnv forced("SOLDER_GATHERED_CHAIN", "block");
  GeneratedModule chained = generate_cuda(compile_program(narrow, CompileOptions::for_gpu()).kernels);
  ASSERT_EQ(chained.kernels.size(), 1u);
  EXPECT_EQ(chained.kernels[0].blocks, 25);
  EXPECT_EQ(chained.kernels[0].cluster, 1);
}

// The cells whose B is too large for one block (C6: w2 of 128 KB over 25 row tiles; C7: 512 KB over 7)
// chain across a thread-block cluster: S ranks per row tile (C6 4, C7 8) split the first product's K
// steps, sum h over distributed shared memory and each computes 1/S of y2's columns from its slice of
// w2 (32 and 64 KB). h is never stored.
TEST(GatheredGemmWriter, WideSecondProductsChainAcrossACluster) {
  struct Cell {
    std::vector<std::pair<std::string, int64_t>> dims;
    int cluster;
    int64_t blocks;
    int64_t w2_slice_kb;
  };
  const Cell cells[] = {{{{"IC", 128}, {"HH", 28}, {"WW", 28}, {"OC1", 128}, {"OC2", 512}}, 4, 25 * 4, 32},
                        {{{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 1024}}, 8, 7 * 8, 64}};
  for (const Cell& cell : cells) {
    GeneratedModule m = example_for_gpu("conv_chain", cell.dims);
    ASSERT_EQ(m.kernels.size(), 1u) << contraction_schedule_text(m.contractions);
    EXPECT_EQ(m.kernels[0].cluster, cell.cluster);
    EXPECT_EQ(m.kernels[0].blocks, cell.blocks);
    EXPECT_EQ(m.kernels[0].threads, 256);
    EXPECT_LE(m.kernels[0].shared_bytes, 227 * 1024);
    EXPECT_NE(m.source.find("stays in the cluster: " + std::to_string(cell.cluster) + " ranks per row tile"), std::string::npos) << m.source;
    EXPECT_NE(m.source.find("w2's slice staged (" + std::to_string(cell.w2_slice_kb) + " KB)"), std::string::npos) << m.source;
    EXPECT_NE(m.source.find("ld.shared::cluster.v4.f32"), std::string::npos);
    EXPECT_NE(m.source.find("st.shared::cluster.v4.b32"), std::string::npos);
    EXPECT_EQ(m.source.find("solder::store(&h["), std::string::npos) << m.source;  // h is never stored
    EXPECT_NE(m.source.find("solder::store(&y2["), std::string::npos);
    EXPECT_NE(contraction_schedule_text(m.contractions).find("split-K over a cluster of " + std::to_string(cell.cluster)), std::string::npos)
        << contraction_schedule_text(m.contractions);
  }
  // The knobs: two kernels, clusters of 8 at C6, and C5 (one block per row tile as planned) forced into
  // the cluster form (2 ranks: its 32 KB of w2 fit in one slice of 2 and its grid fills the SMs).
  {
    ScopedEnv off("SOLDER_GATHERED_CHAIN", "0");
    EXPECT_EQ(example_for_gpu("conv_chain", cells[0].dims).kernels.size(), 2u);
  }
  {
    ScopedEnv eight("SOLDER_GATHERED_CHAIN_CLUSTER", "8");
    GeneratedModule m = example_for_gpu("conv_chain", cells[0].dims);
    ASSERT_EQ(m.kernels.size(), 1u);
    EXPECT_EQ(m.kernels[0].cluster, 8);
    EXPECT_EQ(m.kernels[0].blocks, 200);
  }
  {
    ScopedEnv cluster("SOLDER_GATHERED_CHAIN", "cluster");
    GeneratedModule m = example_for_gpu("conv_chain");
    ASSERT_EQ(m.kernels.size(), 1u);
    EXPECT_EQ(m.kernels[0].cluster, 2);
    EXPECT_EQ(m.kernels[0].blocks, 196);
  }
  {
    ScopedEnv block("SOLDER_GATHERED_CHAIN", "block");  // C7's w2 does not fit one block: two kernels
    EXPECT_EQ(example_for_gpu("conv_chain", cells[1].dims).kernels.size(), 2u);
  }
  ScopedEnv bad("SOLDER_GATHERED_CHAIN_CLUSTER", "3");
  EXPECT_THROW(example_for_gpu("conv_chain", cells[0].dims), Refusal);
}

// The refusals are typed (GatheredChainRefusal): the fit and the form choice on the two contracts of
// the unchained plan.
TEST(GatheredGemmWriter, ChainRefusalsAreTyped) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/conv_chain.sol"));
  // The two contracts of the unchained plan, fitted as a chain (the fit's own refusal, if any, in `reason`).
  auto fit_of = [&](std::vector<std::pair<std::string, int64_t>> dims) {
    BoundProgram bound = bind_program(program, SizeChoice{false, dims});
    KernelProgram kernels;
    {
      ScopedEnv off("SOLDER_GATHERED_CHAIN", "0");
      kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
    }
    EXPECT_EQ(kernels.kernels.size(), 2u);
    if (kernels.kernels.size() != 2) return GatheredChainFit{};
    const ContractNode& c1 = *kernels.kernels[0].body.back().as<ContractNode>();
    const ContractNode& c2 = *kernels.kernels[1].body.back().as<ContractNode>();
    return fit_gathered_chain(c1, c2, kernels.globals, &kernels.dims);
  };
  auto form_of = [&](std::vector<std::pair<std::string, int64_t>> dims) {
    GatheredChainFit fit = fit_of(dims);
    if (!fit.problem) {
      GatheredChainForm refused;
      refused.reason = fit.reason;
      return refused;
    }
    return choose_gathered_chain_form(*fit.problem, 132);
  };
  const std::vector<std::pair<std::string, int64_t>> c7_dims = {{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 1024}};
  // 10 x 10 pixels, 4 row tiles, 2 K steps (IC 8): neither grid is wide enough (4 blocks; 4 clusters of 2)
  GatheredChainForm small = form_of({{"IC", 8}, {"HH", 10}, {"WW", 10}, {"OC1", 64}, {"OC2", 64}});
  EXPECT_FALSE(small.kind);
  EXPECT_EQ(small.reason, GatheredChainRefusal::grid_too_narrow) << small.why;
  // w2 of 2048 x 256 (1 MB): 128 KB per rank even over 8
  GatheredChainForm wide = form_of({{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 2048}});
  EXPECT_FALSE(wide.kind);
  EXPECT_EQ(wide.reason, GatheredChainRefusal::b2_too_large);
  GatheredChainForm c5 = form_of({{"HH", 56}, {"WW", 56}});  // 9 K steps: clusters of 2
  ASSERT_TRUE(c5.kind);
  EXPECT_EQ(*c5.kind, GatheredChainFormKind::cluster);
  EXPECT_EQ(c5.cluster, 2);
  GatheredChainForm c1 = form_of({{"KS", 1}, {"OC1", 256}, {"OC2", 64}});  // one K step: one block per row tile
  ASSERT_TRUE(c1.kind);
  EXPECT_EQ(*c1.kind, GatheredChainFormKind::one_block);
  GatheredChainForm c7 = form_of(c7_dims);
  ASSERT_TRUE(c7.kind);
  EXPECT_EQ(*c7.kind, GatheredChainFormKind::cluster);
  EXPECT_EQ(c7.cluster, 8);
  EXPECT_EQ(c7.grid, 56);
  // forced to one block per row tile, C7's 512 KB of w2 does not fit
  GatheredChainFit c7_fit = fit_of(c7_dims);
  ASSERT_TRUE(c7_fit.problem);
  ScopedEnv block("SOLDER_GATHERED_CHAIN", "block");
  GatheredChainForm forced = choose_gathered_chain_form(*c7_fit.problem, 132);
  EXPECT_FALSE(forced.kind);
  EXPECT_EQ(forced.reason, GatheredChainRefusal::form_refused);
  // and off: the fit's own refusal, before it looks at the contracts
  setenv("SOLDER_GATHERED_CHAIN", "0", 1);
  EXPECT_EQ(fit_gathered_chain(ContractNode{}, ContractNode{}, {}).reason, GatheredChainRefusal::off);
}

TEST(GatheredGemmWriter, ClusterChainModulesCompileWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  for (auto dims : std::vector<std::vector<std::pair<std::string, int64_t>>>{{{"IC", 128}, {"HH", 28}, {"WW", 28}, {"OC1", 128}, {"OC2", 512}},
                                                                            {{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 1024}}}) {
    GeneratedModule m = example_for_gpu("conv_chain", dims);
    ASSERT_EQ(m.kernels.size(), 1u);
    runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "conv_chain_cluster.cu", flags);
    EXPECT_FALSE(compiled.cubins.front().empty());
  }
}

// The GPU plan with its gathered whole contractions (nerf_mlp's concatenations inlined into the
// operands: cat and catv never stored; conv_chain's two convolutions) computes the program: through
// the CUDA backend's view of the contracts, on the CPU executor, against the reference.
TEST(GatheredGemmWriter, GpuPlansVerifyOnTheExecutor) {
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, int64_t>>>> cases = {
      {"nerf_mlp", {{"N", 256}, {"H", 256}, {"IN", 15}, {"DIN", 9}}},
      {"conv_chain", {{"HH", 10}, {"WW", 10}, {"IC", 8}, {"OC1", 64}, {"OC2", 64}}},
      {"conv_chain", {{"HH", 9}, {"WW", 8}, {"IC", 5}, {"OC1", 80}, {"OC2", 64}, {"KS", 5}}}};
  ScopedEnv gathered("SOLDER_PADDED_OPERANDS", "0");  // nerf_mlp's products on this writer, not copied for the skeleton
  for (const char* chain : {"", "1", "cluster"})  // as planned (two kernels), then chained (one kernel: two contracts, h between them)
  for (auto& [name, dims] : cases) {
    SCOPED_TRACE(name + std::string(*chain ? " chained" : ""));
    ScopedEnv env("SOLDER_GATHERED_CHAIN", chain);
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
    BoundProgram bound = bind_program(program, SizeChoice{false, dims});
    KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
    GeneratedModule m = generate_cuda(kernels);
    EXPECT_GE(gathered_kernels(m), 2) << contraction_schedule_text(m.contractions);
    if (*chain && name == "conv_chain") EXPECT_EQ(m.kernels.size(), 1u) << m.source;
    KernelProgram view = contracts_as_reduces(kernels);
    verify_kernel_program(view);
    TensorSet inputs = make_inputs(bound, 3);
    auto v = testing::verify_kernels(bound, view, inputs);
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

// The two-phase gather: every operand of conv_chain and nerf_mlp is a tree of selects over loads, so
// each K step's loads are issued (predicated, no branch) before the previous step's mma and stored
// after it; 32-bit indices (proved). nerf_mlp's concatenations are two loads under complementary
// guards.
TEST(GatheredGemmWriter, OperandsAreIssuedBeforeTheMmaAndCommittedAfter) {
  GeneratedModule conv = example_for_gpu("conv_chain");
  EXPECT_EQ(conv.source.find("evaluated as written"), std::string::npos) << conv.source;
  EXPECT_EQ(conv.source.find("64-bit indices"), std::string::npos) << conv.source;
  const size_t issue = conv.source.find("a_issue_(kt_ + 1, s_ ^ 1)"), mma = conv.source.find("gemm_.accumulate", issue),
               commit = conv.source.find("a_commit_(s_ ^ 1)", mma);
  ASSERT_NE(issue, std::string::npos);
  ASSERT_NE(mma, std::string::npos);
  ASSERT_NE(commit, std::string::npos);
  // The pixel decode is hoisted: once per thread, before the K loop (a_row_ is the thread's row).
  EXPECT_NE(conv.source.find("const int a_row_ = threadIdx.x % 32;"), std::string::npos) << conv.source;
  ScopedEnv gathered("SOLDER_PADDED_OPERANDS", "0");  // nerf_mlp's products on this writer (fusion/padded_operands.h)
  GeneratedModule nerf = example_for_gpu("nerf_mlp");
  EXPECT_NE(nerf.source.find("2 load(s) in flight each"), std::string::npos);
  EXPECT_EQ(nerf.source.find("evaluated as written"), std::string::npos);
}

// Split-K across a cluster where the grid leaves SMs idle and K is deep: C7's first convolution (56
// tiles of 36 K steps) runs as clusters of 4 (224 blocks of 9 steps), C5's (196 tiles) does not.
// SOLDER_GATHERED_SPLIT overrides the size and is checked.
TEST(GatheredGemmWriter, DeepFewTileCellsSplitKAcrossACluster) {
  ScopedEnv unchained("SOLDER_GATHERED_CHAIN", "0");  // the two-kernel plan (chained, C7 runs across a cluster anyway)
  GeneratedModule c7 = example_for_gpu("conv_chain", {{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 1024}});
  ASSERT_EQ(c7.kernels.size(), 2u);
  EXPECT_EQ(c7.kernels[0].cluster, 4) << c7.source;
  EXPECT_EQ(c7.kernels[0].blocks, 224);
  EXPECT_NE(c7.source.find("barrier.cluster.arrive.release.aligned"), std::string::npos);
  EXPECT_NE(c7.source.find("mapa.shared::cluster.u32"), std::string::npos);
  GeneratedModule c5 = example_for_gpu("conv_chain");
  for (auto& k : c5.kernels) EXPECT_EQ(k.cluster, 1);
  setenv("SOLDER_GATHERED_SPLIT", "8", 1);
  GeneratedModule forced = example_for_gpu("conv_chain");
  EXPECT_EQ(forced.kernels[0].cluster, 8);
  EXPECT_EQ(forced.kernels[0].blocks, 196 * 8);
  setenv("SOLDER_GATHERED_SPLIT", "3", 1);
  EXPECT_THROW(example_for_gpu("conv_chain"), Refusal);
  unsetenv("SOLDER_GATHERED_SPLIT");
}

TEST(GatheredGemmWriter, SplitKModuleCompilesWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  ScopedEnv unchained("SOLDER_GATHERED_CHAIN", "0");
  GeneratedModule m = example_for_gpu("conv_chain", {{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 1024}});
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(m.source, "conv_chain_c7.cu", flags);
  EXPECT_FALSE(compiled.cubins.front().empty());
}

TEST(GatheredGemmWriter, TileOverrideIsCheckedAndApplied) {
  ScopedEnv unchained("SOLDER_GATHERED_CHAIN", "0");
  setenv("SOLDER_GATHERED_TILE", "64,64,32,256", 1);
  GeneratedModule m = example_for_gpu("conv_chain");
  EXPECT_NE(m.source.find("tile BM 64 x BN 64 x BK 32, 256 threads"), std::string::npos);
  setenv("SOLDER_GATHERED_TILE", "64,48,32,128", 1);
  EXPECT_THROW(example_for_gpu("conv_chain"), Refusal);
  unsetenv("SOLDER_GATHERED_TILE");
}

// Programmatic dependent launch for short chains only (≤ 1 GFLOP: the chained conv_chain cells); the
// one-contract kernels (C7's two, nerf_mlp's gathered layers) keep the plain launch (a measured loss).
TEST(GatheredGemmWriter, OnlyShortChainsTakeProgrammaticLaunch) {
  {
    ScopedEnv unchained("SOLDER_GATHERED_CHAIN", "0");
    GeneratedModule c7 = example_for_gpu("conv_chain", {{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 1024}});
    ASSERT_EQ(c7.kernels.size(), 2u);
    for (auto& k : c7.kernels) EXPECT_FALSE(k.programmatic) << k.name;
    EXPECT_EQ(c7.source.find("griddepcontrol"), std::string::npos);
  }
  // C7 chained across clusters (0.33 GFLOP) takes it, w2's slice staged before the wait
  GeneratedModule c7 = example_for_gpu("conv_chain", {{"IC", 256}, {"HH", 14}, {"WW", 14}, {"OC1", 256}, {"OC2", 1024}});
  ASSERT_EQ(c7.kernels.size(), 1u);
  EXPECT_TRUE(c7.kernels[0].programmatic);
  EXPECT_LT(c7.source.find("cp_async_commit()"), c7.source.find("griddepcontrol.wait;"));
  GeneratedModule c5 = example_for_gpu("conv_chain");
  ASSERT_EQ(c5.kernels.size(), 1u);
  EXPECT_TRUE(c5.kernels[0].programmatic);
  ScopedEnv gathered("SOLDER_PADDED_OPERANDS", "0");
  GeneratedModule nerf = example_for_gpu("nerf_mlp");
  for (auto& c : nerf.contractions)
    if (c.skeleton == ContractionSchedule::kGatheredGemm)
      for (auto& k : nerf.kernels)
        if (k.name == c.kernel) EXPECT_FALSE(k.programmatic) << c.kernel;
}

TEST(GatheredGemmWriter, OffSwitchRestoresTheFusedPlan) {
  setenv("SOLDER_GATHERED_GEMM", "0", 1);
  GeneratedModule off = example_for_gpu("conv_chain");
  unsetenv("SOLDER_GATHERED_GEMM");
  EXPECT_EQ(gathered_kernels(off), 0) << contraction_schedule_text(off.contractions);
  EXPECT_EQ(gathered_kernels(example_for_gpu("conv_chain")), 2);
}

}  // namespace
// A short K (at most 128) asks for four blocks per SM: conv_chain's 1×1 convolutions at K = 64 (C1's
// first, C5's second) take 32 × 32 tiles; a deeper K keeps one block per SM as the bar (C5's first
// convolution, K = 576: 196 tiles of 32 × 32 already; C1's second, K = 256: 32 × 32 from 196 tiles).
TEST(GatheredGemmWriter, ShortKTakesSmallTilesForFourBlocksPerSm) {
  ScopedEnv unchained("SOLDER_GATHERED_CHAIN", "0");
  GeneratedModule c1 = example_for_gpu("conv_chain", {{"KS", 1}, {"OC1", 256}, {"OC2", 64}});
  ASSERT_EQ(c1.kernels.size(), 2u);
  EXPECT_EQ(c1.kernels[0].blocks, 98 * 8) << c1.source;  // M 3136 / 32, N 256 / 32
  GeneratedModule c5 = example_for_gpu("conv_chain");
  ASSERT_EQ(c5.kernels.size(), 2u);
  EXPECT_EQ(c5.kernels[1].blocks, 98 * 8) << c5.source;  // M 3136 / 32, N 256 / 32
  EXPECT_EQ(c5.kernels[0].blocks, 196);
  // C6's second convolution (1 × 1, K = 128: two steps of 64) too: 25 × 16 tiles of 32 × 32, not 13 × 16
  // of 64 × 32 with K steps of 32.
  GeneratedModule c6 = example_for_gpu("conv_chain", {{"IC", 128}, {"HH", 28}, {"WW", 28}, {"OC1", 128}, {"OC2", 512}});
  ASSERT_EQ(c6.kernels.size(), 2u);
  EXPECT_EQ(c6.kernels[1].blocks, 25 * 16) << c6.source;
}

}  // namespace solder
