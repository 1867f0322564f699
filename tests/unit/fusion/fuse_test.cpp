// Pass: fuse a program into as few kernels as the rules allow (src/fusion/fuse.h). Before/expected
// pairs on small programs: the groups each program becomes (compared as text), the rule of every
// refused fusion, and that every fused program still computes what the reference computes.
#include <gtest/gtest.h>

#include <set>

#include "backend/cuda/fusion_params.h"
#include "fusion_test_util.h"
#include "kernel/kernel_printer.h"

namespace solder {
namespace {

using testing::bind_example;
using testing::groups_text;
using testing::refusals_text;
using testing::run_fused;

// ---- Kernel counts and grouping decisions --------------------------------------------------------

TEST(Fuse, KernelCountsOfTheExamplesAtSmallSizes) {
  struct Case { const char* name; size_t kernels; };
  const Case cases[] = {
      {"vanilla", 1}, {"causal", 1}, {"alibi", 1}, {"softcap", 1}, {"sliding_window", 1}, {"prefix_lm", 1},
      {"document_mask", 1}, {"gqa", 1}, {"diff_attn", 1}, {"evoformer", 1}, {"softmax", 1}, {"moe_routing", 1},
      {"quant_gemm", 1}, {"rmsnorm_gemm", 1}, {"variance", 1}, {"variance_offset", 1}, {"inertia", 1}, {"ffn", 1},
      {"gated_ffn", 1}, {"nerf_mlp", 1}, {"mla_decode", 1}, {"batch_reduction", 1}, {"conv_chain", 1},
      {"linear_relu_backward", 1}, {"llama_decode", 3},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    FusionResult r = fuse_program(bind_example(c.name));
    EXPECT_EQ(r.kernels.kernels.size(), c.kernels) << groups_text(r) << refusals_text(r);
  }
}

TEST(Fuse, EveryDefinitionIsComputedExactlyOnceOrInlined) {
  for (const std::string& file : testing::example_files()) {
    for (bool small : {true, false}) {
      SCOPED_TRACE(file + (small ? " small" : " default"));
      auto program = std::make_shared<Program>(parse_program_file(file));
      BoundProgram bound = bind_program(program, SizeChoice{small, {}});
      FusionResult r = fuse_program(bound);
      EXPECT_NO_THROW(verify_kernel_program(r.kernels));
      std::multiset<std::string> placed(r.inlined.begin(), r.inlined.end());
      for (auto& g : r.groups)
        for (auto& m : g.plan.members) placed.insert(m.def.target.name);
      std::multiset<std::string> all;
      for (auto& d : program->defs) all.insert(d.target.name);
      EXPECT_EQ(placed, all);
      // The kernel list is the groups' kernels, in order.
      size_t kernels = 0;
      for (auto& g : r.groups) kernels += g.kernels.size();
      EXPECT_EQ(kernels, r.kernels.kernels.size());
      // A refusal always says why: "<what> does not join ...: <rule>" or "<what> run in a kernel of their own: <why>".
      for (auto& refusal : r.refusals) {
        size_t colon = refusal.find(": ");
        ASSERT_NE(colon, std::string::npos) << refusal;
        EXPECT_GT(refusal.size(), colon + 10) << refusal;
      }
      // A group has two kernels only when its stream is split and merged by a second kernel.
      for (auto& g : r.groups)
        if (g.kernels.size() > 1) EXPECT_GT(g.plan.segments, 8) << g.name;
    }
  }
}

TEST(Fuse, AttentionIsOneKernelNamedAfterItsOutput) {
  FusionResult r = fuse_program(bind_example("vanilla"));
  EXPECT_EQ(groups_text(r), "fused_o[s m z o]\n");
  EXPECT_EQ(r.inlined, (std::vector<std::string>{"e", "p"}));
  EXPECT_TRUE(r.refusals.empty()) << refusals_text(r);
  ASSERT_EQ(r.kernels.kernels.size(), 1u);
  const Kernel& k = r.kernels.kernels[0];
  EXPECT_EQ(k.definitions, (std::vector<std::string>{"s", "m", "z", "o"}));
  // The grid: h × i-tiles (b has extent 1); no cluster for a single segment.
  EXPECT_EQ(k.blocks(), 2 * 4);
  EXPECT_EQ(k.cluster, 1);
  // Globals: the inputs and the output only.
  std::vector<std::string> globals;
  for (auto& g : r.kernels.globals) globals.push_back(g.name);
  EXPECT_EQ(globals, (std::vector<std::string>{"q", "k", "v", "o"}));
}

TEST(Fuse, AReductionOverTheGridOfAStreamingKernelStartsANewKernel) {
  BoundProgram bound = testing::bind_text(R"(program logsumexp_total
dim T = 8, N = 64
in x[T, N] : f32
m[t] = max(n) x[t, n]
z[t] = sum(n) exp(x[t, n] - m[t])
out total[] = sum(t) log(z[t]) + m[t]
)");
  testing::FusedRun run = run_fused(bound);
  EXPECT_EQ(groups_text(run.fused), "fused_z[m z] x4\ntotal[total]\n");
  EXPECT_EQ(refusals_text(run.fused),
            "total does not join the kernel of m, z: it reduces over t, a grid dim of that streaming kernel "
            "(joining would run every t of the stream in one block)\n");
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
}

TEST(Fuse, UnrelatedReductionsOfOneInputShareAKernel) {
  BoundProgram bound = testing::bind_text(R"(program unrelated
dim T = 8, N = 64
in x[T, N] : f32
out a[t] = sum(n) x[t, n]
out b[n] = max(t) x[t, n]
)");
  testing::FusedRun run = run_fused(bound);
  EXPECT_EQ(groups_text(run.fused), "fused_b[a b]\n");
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
  // The shared input is read from global memory once.
  EXPECT_EQ(run.verified.exec.traffic[0].read_by_tensor.at("x"), 8 * 64 * 4);
}

// Split-KV (FusionParams::split_unshared_streams, issue 17 / 15): decode's attention reads K and V at
// every (b, h), so no two rows of its grid share a streamed tile. At the GPU's tiles it was three kernels
// (s, then m and z, then a: 128 heads' rows per block outgrow shared memory, and the group was split);
// with the flag it is one kernel of one head per block, its KV stream split into segments until the grid
// fills the GPU: 32 heads -> a cluster of 8 segments merged through DSM; 4 heads -> 16 segments and a
// merge kernel. Both verified on the CPU executor against the reference at a ragged KV.
TEST(Fuse, DecodeAttentionSplitsKvOneRowPerBlock) {
  FusionParams on = gpu_fusion_params();
  on.split_unshared_streams = true;
  FusionParams off = on;
  off.split_unshared_streams = false;
  const std::vector<std::pair<std::string, int64_t>> heads32 = {{"H", 32}, {"KV", 1000}};
  FusionResult before = fuse_program(bind_example("llama_decode", true, heads32), off);
  EXPECT_EQ(groups_text(before).find("[s m z a]"), std::string::npos) << groups_text(before);
  testing::FusedRun cluster = run_fused(bind_example("llama_decode", true, heads32), on);
  std::string groups = groups_text(cluster.fused);
  EXPECT_NE(groups.find("[s m z a] x8\n"), std::string::npos) << groups;
  for (auto& g : cluster.fused.groups)
    if (g.plan.member("a")) {
      EXPECT_FALSE(g.plan.grid_shares_stream);
      for (int d : g.plan.grid_dims()) EXPECT_EQ(g.plan.dims[static_cast<size_t>(d)].tile, 1) << g.plan.dims[static_cast<size_t>(d)].name;
      ASSERT_EQ(g.kernels.size(), 1u) << "the DSM merge needs no second kernel";
    }
  for (auto& gl : cluster.fused.kernels.globals) EXPECT_NE(gl.name, "s") << "no score tensor in global memory";
  EXPECT_TRUE(cluster.verified.ok()) << cluster.verified.failures();
  testing::FusedRun merged = run_fused(bind_example("llama_decode", true, {{"KV", 1000}}), on);
  groups = groups_text(merged.fused);
  EXPECT_NE(groups.find("[s m z a] x16\n"), std::string::npos) << groups;
  EXPECT_TRUE(merged.verified.ok()) << merged.verified.failures();
}

// Split-KV leaves alone a stream whose tiles the grid's rows share: mla_decode's 128 heads read one
// latent KV (h is a row dim of its products), paged_decode's GQA reads K at h // G.
TEST(Fuse, SplitKvKeepsSharedStreams) {
  FusionParams on = gpu_fusion_params();
  on.split_unshared_streams = true;
  FusionParams off = on;
  off.split_unshared_streams = false;
  for (const char* name : {"mla_decode", "paged_decode", "vanilla", "gqa"}) {
    FusionResult a = fuse_program(bind_example(name, false), on), b = fuse_program(bind_example(name, false), off);
    EXPECT_EQ(groups_text(a), groups_text(b)) << name;
  }
}

TEST(Fuse, ProjectionsAreHoistedOutOfAMultiSegmentKernel) {
  FusionResult r = fuse_program(bind_example("llama_decode"));
  EXPECT_EQ(groups_text(r), "fused_v_new[q k_new v_new]\nfused_a[s m z a] x3\ny[y]\n");
  EXPECT_EQ(refusals_text(r),
            "y does not join the kernel of q, k_new, v_new, s, m, z, a: it reduces over h, a grid dim of that streaming kernel "
            "(joining would run every h of the stream in one block)\n"
            "q, k_new, v_new run in a kernel of their own: the multi-segment kernel of s, m, z, a would compute them again "
            "in each of its 3 segments\n");
  std::set<std::string> intermediates;
  for (auto& g : r.kernels.globals)
    if (g.role == GlobalRole::intermediate) intermediates.insert(g.name);
  EXPECT_EQ(intermediates, (std::set<std::string>{"q", "k_new", "v_new", "a"}));
}

TEST(Fuse, CapacityRefusalsNameTheLimit) {
  // ffn at its paper widths: the e accumulator (BM × L) does not fit next to the c tile.
  FusionResult r = fuse_program(bind_example("ffn", false));
  EXPECT_EQ(groups_text(r), "c[c]\ne[e]\n");
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_EQ(r.refusals[0].rfind("e does not join the kernel of c: on-chip capacity: the kernel needs ", 0), 0u) << r.refusals[0];
  EXPECT_NE(r.refusals[0].find("(largest e_tile (196608 bytes)); the budget is 196608 bytes (192 KB)"), std::string::npos) << r.refusals[0];
  // A smaller budget splits attention the same way, says so, and still computes attention.
  FusionParams p;
  p.on_chip_budget = 4 * 1024;
  testing::FusedRun a = run_fused(bind_example("vanilla"), p);
  EXPECT_EQ(a.fused.kernels.kernels.size(), 3u) << groups_text(a.fused);
  bool named = false;
  for (auto& x : a.fused.refusals) named |= x.find("on-chip capacity") != std::string::npos && x.find("the budget is 4096 bytes (4 KB)") != std::string::npos;
  EXPECT_TRUE(named) << refusals_text(a.fused);
  EXPECT_TRUE(a.verified.ok()) << a.verified.failures();
}

TEST(Fuse, CapacityRefusalNumbersAreReadable) {
  // The refusal prints the need and the budget in whole KB and the largest buffer's size: a need
  // that is over the budget must read as over it, and the largest buffer must not read as 0 KB.
  FusionParams p;
  p.on_chip_budget = 2 * 1024;
  // With so small a budget a definition alone may not fit; that error reads the same way.
  std::vector<std::string> refusals;
  try {
    refusals = fuse_program(bind_example("vanilla"), p).refusals;
  } catch (const Error& e) {
    refusals.push_back(e.what());
  }
  ASSERT_FALSE(refusals.empty());
  std::vector<std::string> unclear;
  for (auto& x : refusals) {
    auto needs = x.find("needs "), budget = x.find("the budget is ");
    if (needs == std::string::npos || budget == std::string::npos) continue;
    long need_kb = std::stol(x.substr(needs + 6)), budget_kb = std::stol(x.substr(budget + 14));
    if (need_kb <= budget_kb || x.find("(0 KB)") != std::string::npos) unclear.push_back(x);
  }
  EXPECT_TRUE(unclear.empty()) << "capacity refusals must read as not fitting: " << (unclear.empty() ? "" : unclear[0]);
}

TEST(Fuse, ADefinitionThatFitsNowhereIsAnErrorNamingIt) {
  FusionParams p;
  p.on_chip_budget = 256;
  try {
    fuse_program(bind_example("vanilla"), p);
    FAIL() << "expected an Error";
  } catch (const OnChipCapacityError& e) {  // typed: the compile driver retries at smaller tiles on it alone
    std::string what = e.what();
    EXPECT_NE(what.find("fusion: cannot fit definition"), std::string::npos) << what;
    EXPECT_NE(what.find("on-chip capacity"), std::string::npos) << what;
  }
}

TEST(Fuse, TileParametersReachTheKernel) {
  FusionParams p;
  p.stream_tile = 8;
  p.grid_tile = 32;
  FusionResult r = fuse_program(bind_example("vanilla"), p);
  ASSERT_EQ(r.kernels.kernels.size(), 1u);
  std::string text = print_kernel(r.kernels.kernels[0]);
  EXPECT_NE(text.find("grid h_t < 2, i_t < 2  (4 blocks)"), std::string::npos) << text;
  EXPECT_NE(text.find("for j_t in 0 .. 8 {"), std::string::npos) << text;
  EXPECT_NE(text.find("shared s_tile[1, 1, 32, 8] : f32"), std::string::npos) << text;
}

// On the GPU a cascade dim of up to 128 is held whole rather than streamed in two steps (moe_routing's
// experts at paper size), unless the grid alone has too few blocks (T = 8: the stream is split across
// a cluster instead).
TEST(Fuse, ShortCascadeDimsAreHeldWholeWhenTheGridFillsTheGpu) {
  auto printed = [](const BoundProgram& bound) {
    FusionResult r = fuse_program(bound, gpu_fusion_params());
    std::string text;
    for (auto& k : r.kernels.kernels) text += print_kernel(k);
    return text;
  };
  std::string paper = printed(bind_example("moe_routing"));
  EXPECT_EQ(paper.find("for e_t in"), std::string::npos) << paper;
  std::string few_tokens = printed(bind_example("moe_routing", false, {{"T", 8}}));
  EXPECT_NE(few_tokens.find("for e_t in"), std::string::npos) << few_tokens;
}

// evoformer's group (scores, softmax, P·V whose P reads the pair bias and the mask, the gate) is one
// kernel at the GPU's tiles and head dims 32, 64 and 128: P·V is not a contraction of two inputs (only
// plain input factors count), so the group halves its row tile instead of splitting; at 128 it goes
// down to 32 rows (it reads inputs only). diff_attn's second group reads the first's output a0, which is
// in memory too: at D = 128 it also goes down to 32 rows and keeps the combine o = a0 − λ·a1 (two
// kernels, as at D = 64, instead of a0 and a1 stored and a third kernel); verified on the CPU executor.
TEST(Fuse, EvoformerIsOneKernelAtGpuTiles) {
  for (int64_t d : {32, 64, 128}) {
    FusionResult r = fuse_program(bind_example("evoformer", false, {{"D", d}}), gpu_fusion_params());
    EXPECT_EQ(r.kernels.kernels.size(), 1u) << "D = " << d;
  }
  for (int64_t d : {64, 128}) {
    FusionResult diff = fuse_program(bind_example("diff_attn", false, {{"D", d}}), gpu_fusion_params());
    ASSERT_EQ(diff.kernels.kernels.size(), 2u) << "D = " << d;
    EXPECT_EQ(diff.kernels.kernels[1].name, "fused_o") << "D = " << d;
    for (auto& g : diff.kernels.globals) EXPECT_NE(g.name, "a1") << "D = " << d << ": a1 is stored";
  }
  testing::FusedRun run = run_fused(bind_example("diff_attn", true, {{"D", 128}, {"S", 256}}), gpu_fusion_params());
  ASSERT_EQ(run.fused.kernels.kernels.size(), 2u);
  EXPECT_NE(print_kernel(run.fused.kernels.kernels[1]).find("i_t * 32"), std::string::npos) << print_kernel(run.fused.kernels.kernels[1]);
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
}

// Head dim 256 at the GPU's tiles (FusionParams::score_depth_whole_up_to): the score contraction's depth
// is held whole (one K loop of 256, which the attention skeleton runs as one wgmma K loop) instead of an
// inner loop of two 128-wide steps, and the keys stream in tiles of 32 (a key tile holds what a 64-key
// tile holds at depth 128); vanilla and causal verified on the CPU executor against the float64
// reference. Past 256 (D 512) no score depth is held whole; on the CPU's tiles the depth stays an inner
// loop; so it does for a data mask and rotated operands (kernels the skeleton does not take at D 256); an
// MLP's Σ_n gelu(a·b)·d (no running max over the stream) keeps its K loop at the GPU's tiles.
TEST(Fuse, AttentionHeadDim256HoldsTheScoreDepthWhole) {
  for (const char* name : {"vanilla", "causal"}) {
    SCOPED_TRACE(name);
    testing::FusedRun run = run_fused(bind_example(name, true, {{"D", 256}, {"S", 256}}), gpu_fusion_params());
    ASSERT_EQ(run.fused.kernels.kernels.size(), 1u);
    const std::string text = print_kernel(run.fused.kernels.kernels[0]);
    EXPECT_EQ(text.find("for d_t"), std::string::npos) << text;
    EXPECT_NE(text.find("q_tile[1, 1, 32, 256]"), std::string::npos) << text;
    EXPECT_NE(text.find("k_tile[1, 1, 32, 256]"), std::string::npos) << text;
    EXPECT_NE(text.find("for j_t in 0 .. 8 {"), std::string::npos) << text;
    EXPECT_NE(text.find("reducing d < 256"), std::string::npos) << text;
    EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
    ASSERT_EQ(run.fused.groups.size(), 1u);
    std::string notes;
    for (auto& n : run.fused.groups[0].plan.notes) notes += n + "\n";
    EXPECT_NE(notes.find("score depth 256 held whole (past the inner tile 128)"), std::string::npos) << notes;
    EXPECT_NE(notes.find("j streamed in tiles of 32"), std::string::npos) << notes;
  }
  FusionResult wide = fuse_program(bind_example("vanilla", true, {{"D", 512}, {"S", 256}}), gpu_fusion_params());
  for (auto& g : wide.groups)
    for (auto& n : g.plan.notes) EXPECT_EQ(n.find("score depth"), std::string::npos) << n;
  FusionParams cpu;
  cpu.inner_tile = 128;  // the CPU's tiles but the GPU's inner tile: no score depth held whole by default
  FusionResult on_cpu = fuse_program(bind_example("vanilla", true, {{"D", 256}, {"S", 256}}), cpu);
  ASSERT_EQ(on_cpu.kernels.kernels.size(), 1u);
  EXPECT_NE(print_kernel(on_cpu.kernels.kernels[0]).find("for d_t in 0 .. 2 {"), std::string::npos) << print_kernel(on_cpu.kernels.kernels[0]);
  // A data mask's ids (document_mask) or rotated operands (rope_attention): the depth stays two steps of 128.
  for (const char* name : {"document_mask", "rope_attention"}) {
    FusionResult other = fuse_program(bind_example(name, true, {{"D", 256}, {"S", 256}}), gpu_fusion_params());
    bool looped = false;
    for (auto& k : other.kernels.kernels) looped |= print_kernel(k).find("for d_t in 0 .. 2 {") != std::string::npos;
    EXPECT_TRUE(looped) << name;
  }
  FusionResult mlp = fuse_program(
      testing::bind_text("program p\ndim M = 128, N = 4096, K = 256, L = 64\nin a[M, K] : f16\nin b[K, N] : f16\nin d[N, L] : f16\n"
                         "out e[m, l] : f16 = sum(n) gelu(sum(k) a[m, k] * b[k, n]) * d[n, l]\n"),
      gpu_fusion_params());
  for (auto& k : mlp.kernels.kernels) EXPECT_EQ(print_kernel(k).find("reducing k < 256"), std::string::npos) << print_kernel(k);
}

// The writer's own shared memory counts when the tiler picks a kernel's tiles
// (FusionParams::writer_shared_bytes; the CUDA backend's generic_writer_shared_bytes). evoformer at head
// dim 256 at the GPU's tiles is three kernels (its fusions are over the tile budget); the score kernel s
// alone, a contraction without a stream, fitted the budget at 128 × 128 over a depth of 128 (192 KB of
// tiles as words), but the generic writer holds its operands in two 16-bit stages of 64 KB beside the f32
// score tile and the dot product's own f32 tile: 266240 bytes, over the 227 KB of a block, and the
// program was refused at code generation. Before: the tiles without the writer's answer; expected: the
// next smaller tiles (128 × 64 over a depth of 64), which the writer holds in 118784 bytes.
TEST(Fuse, TheWritersSharedMemoryCountsWhenTilesArePicked) {
  const BoundProgram bound = bind_example("evoformer", false, {{"D", 256}});
  auto kernel_s = [](const FusionResult& r) -> const Kernel& {
    for (auto& k : r.kernels.kernels)
      if (k.name == "s") return k;
    throw std::runtime_error("no kernel s:\n" + groups_text(r));
  };
  FusionParams tiles_only = gpu_fusion_params();
  tiles_only.writer_shared_bytes = nullptr;
  const FusionResult before = fuse_program(bound, tiles_only);
  std::string text = print_kernel(kernel_s(before));
  EXPECT_NE(text.find("grid r_t < 256, h_t < 4, i_t < 2, j_t < 2  (4096 blocks)"), std::string::npos) << text;
  EXPECT_NE(text.find("shared k_tile[1, 1, 1, 128, 128] : bf16"), std::string::npos) << text;
  EXPECT_EQ(generic_writer_shared_bytes(before.kernels, kernel_s(before)), 266240);

  const FusionResult after = fuse_program(bound, gpu_fusion_params());
  EXPECT_EQ(groups_text(after), groups_text(before));  // the same three kernels, other tiles
  text = print_kernel(kernel_s(after));
  EXPECT_NE(text.find("grid r_t < 256, h_t < 4, i_t < 2, j_t < 4  (8192 blocks)"), std::string::npos) << text;
  EXPECT_NE(text.find("shared q_tile[1, 1, 1, 128, 64] : bf16"), std::string::npos) << text;
  EXPECT_NE(text.find("shared k_tile[1, 1, 1, 64, 64] : bf16"), std::string::npos) << text;
  EXPECT_NE(text.find("for d_t in 0 .. 4 {"), std::string::npos) << text;
  EXPECT_EQ(generic_writer_shared_bytes(after.kernels, kernel_s(after)), 118784);
  // The kernels the generic writer writes (no stream) all fit a block now.
  for (auto& g : after.groups)
    if (g.plan.stream < 0)
      for (auto& name : g.kernels)
        for (auto& k : after.kernels.kernels)
          if (k.name == name) EXPECT_LE(generic_writer_shared_bytes(after.kernels, k).value_or(0), 227 * 1024) << name;
  // On the CPU executor, a smaller problem (S1 2, H 1: the tiler gives s 64 × 128 over a depth of 128) with a
  // limit just under what the writer asks for those tiles: s moves to smaller ones, and the program still
  // computes what the float64 reference computes.
  const BoundProgram few = bind_example("evoformer", false, {{"S1", 2}, {"H", 1}, {"D", 256}});
  const FusionResult wide = fuse_program(few, gpu_fusion_params());
  const int64_t asked = generic_writer_shared_bytes(wide.kernels, kernel_s(wide)).value_or(0);
  ASSERT_GT(asked, 0);
  FusionParams tight = gpu_fusion_params();
  tight.shared_memory_limit = asked - 1;
  testing::FusedRun run = run_fused(few, tight);
  EXPECT_NE(print_kernel(kernel_s(run.fused)), print_kernel(kernel_s(wide)));
  EXPECT_LT(generic_writer_shared_bytes(run.fused.kernels, kernel_s(run.fused)).value_or(asked), asked);
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
}

// A writer over the limit at every tile of a single definition makes it an OnChipCapacityError (the
// compile driver's typed retry) naming the writer's shared memory; a writer that fits only smaller tiles
// gets them (the tiles halve from the requested ones down to the CPU's); without a writer's answer (the
// CPU executor) the tiles stay as the budget alone gives them.
TEST(Fuse, AWriterOverTheSharedMemoryLimitTakesSmallerTilesOrRefuses) {
  const BoundProgram product = testing::bind_text(
      "program p\ndim M = 256, N = 256, K = 256\nin a[M, K] : bf16\nin b[K, N] : bf16\nout c[m, n] : f32 = sum(k) a[m, k] * b[k, n]\n");
  FusionParams p;
  p.grid_tile = 64;
  p.inner_tile = 64;
  const std::string plain = print_kernel(fuse_program(product, p).kernels.kernels.at(0));
  // 16 bytes a tile element: the 64 × 64 tiles ask for 196608 bytes, over the limit; the 32 × 32 ones 49152.
  p.writer_shared_bytes = [](const KernelProgram&, const Kernel& k) -> std::optional<int64_t> {
    int64_t elements = 0;
    for (auto& b : k.buffers) elements += b.elements();
    return elements * 16;
  };
  p.shared_memory_limit = 60000;
  const std::string smaller = print_kernel(fuse_program(product, p).kernels.kernels.at(0));
  EXPECT_NE(plain, smaller);
  EXPECT_NE(plain.find("c_tile[64, 64]"), std::string::npos) << plain;
  EXPECT_NE(smaller.find("c_tile[32, 32]"), std::string::npos) << smaller;
  p.writer_shared_bytes = [](const KernelProgram&, const Kernel&) -> std::optional<int64_t> { return 300 * 1024; };
  try {
    fuse_program(product, p);
    FAIL() << "expected an OnChipCapacityError";
  } catch (const OnChipCapacityError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("shared memory: the writer asks 307200 bytes per block for kernel 'c'"), std::string::npos) << what;
    EXPECT_NE(what.find("the limit is 60000 bytes"), std::string::npos) << what;
  }
  // A writer that does not take the kernel (nullopt) changes nothing.
  p.writer_shared_bytes = [](const KernelProgram&, const Kernel&) -> std::optional<int64_t> { return std::nullopt; };
  EXPECT_EQ(print_kernel(fuse_program(product, p).kernels.kernels.at(0)), plain);
}

// Attention at S = 64 (one stream tile of keys) and head dim 128 at the GPU's tiles
// (FusionParams::stream_one_tile_keys): held whole the keys leave the grid 2 blocks, so the second
// attempt streams them in one tile, the attention skeleton's form, instead of splitting the scores' depth
// across a cluster (over 227 KB of shared memory for fp8); verified on the CPU executor. Head dim 64 (no
// depth to split) stays held whole, as does every plan without the flag.
TEST(Fuse, AttentionOfOneKeyTileStreamsIt) {
  for (const char* name : {"attention_fp8", "vanilla", "causal"}) {
    SCOPED_TRACE(name);
    testing::FusedRun run = run_fused(bind_example(name, true, {{"D", 128}}), gpu_fusion_params());
    ASSERT_EQ(run.fused.kernels.kernels.size(), 1u);
    const std::string text = print_kernel(run.fused.kernels.kernels[0]);
    EXPECT_NE(text.find("for j_t in 0 .. 1 {"), std::string::npos) << text;
    EXPECT_NE(text.find("reducing d < 128"), std::string::npos) << text;
    EXPECT_EQ(text.find("for d_t"), std::string::npos) << text;
    EXPECT_EQ(run.fused.groups[0].plan.segments, 1);
    EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
  }
  FusionParams off = gpu_fusion_params();
  off.stream_one_tile_keys = false;
  for (const FusionParams& params : {off, gpu_fusion_params()}) {
    const bool on = params.stream_one_tile_keys;
    FusionResult d128 = fuse_program(bind_example("attention_fp8", true, {{"D", 128}}), params);
    ASSERT_EQ(d128.groups.size(), 1u);
    EXPECT_EQ(d128.groups[0].plan.segments, on ? 1 : 2) << on;  // without it: d split into 2 segments
    FusionResult d64 = fuse_program(bind_example("attention_fp8", true, {{"D", 64}}), params);
    ASSERT_EQ(d64.kernels.kernels.size(), 1u);
    EXPECT_EQ(print_kernel(d64.kernels.kernels[0]).find("for j_t"), std::string::npos) << on;
  }
}

// The GPU's grouped element-wise rows (group_plan.cpp, widen_grid_tiles) at a ragged row
// count: 32 rows of 40 per block, the last tile 15 rows; verified on the CPU executor.
TEST(Fuse, GroupedElementwiseRowsAreGuarded) {
  BoundProgram bound = testing::bind_text(
      "program p\ndim N = 9999, O = 40\nin dy[N, O] : f16\nin z[N, O] : f16\nout g[n, o] : f16 = dy[n, o] * (z[n, o] > 0)\n");
  testing::FusedRun run = run_fused(bound, gpu_fusion_params());
  ASSERT_EQ(run.fused.kernels.kernels.size(), 1u);
  std::string text = print_kernel(run.fused.kernels.kernels[0]);
  EXPECT_NE(text.find("n_t * 32"), std::string::npos) << text;
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
}

TEST(Fuse, RaggedTilesAreGuarded) {
  testing::FusedRun run = run_fused(bind_example("vanilla", true, {{"S", 50}}));
  std::string text = print_kernel(run.fused.kernels.kernels[0]);
  EXPECT_NE(text.find("for j_t in 0 .. 4 {"), std::string::npos) << text;
  EXPECT_NE(text.find("j_t * 16 + j < 50"), std::string::npos) << text;
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
}

TEST(Fuse, NonDecomposableCascadeStaysCorrectHeldWhole) {
  BoundProgram bound = testing::bind_text(R"(program tanh_cascade
dim T = 4, N = 64
in x[T, N] : f32
m[t] = max(n) x[t, n]
out z[t] = sum(n) tanh(x[t, n] - m[t])
)");
  testing::FusedRun run = run_fused(bound);
  EXPECT_EQ(groups_text(run.fused), "fused_z[m z]\n");
  std::string report = fusion_report_text(bound, run.fused);
  EXPECT_NE(report.find("note: not streaming n: z over the streamed dim: not decomposable: factor 'tanh(x[t, n] - m[t])' mixes the reduced data with m"),
            std::string::npos)
      << report;
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
}

// ---- The report ------------------------------------------------------------------------------------

TEST(Fuse, ReportNamesKernelsOnlineFormsAndRefusals) {
  BoundProgram bound = bind_example("vanilla");
  FusionResult r = fuse_program(bound);
  std::string text = fusion_report_text(bound, r);
  for (const char* part : {
           "program vanilla: 6 definitions → 1 kernel\n",
           "inlined (pointwise, recomputed in their consumers): e p\n",
           "kernel fused_o: s, m, z, o\n",
           "  grid: b=1 (tile 1), h=2 (tile 1), i=64 (tile 16)\n",
           "  stream: j=64 (tile 16)\n",
           "  z [cascade, on chip] sum — multiplicative in m\n",
           "      G = exp(s[b, h, i, j]),  H = exp(-m[b, h, i])  (confirmed at 64 random points)\n",
           "      online: acc ← acc × exp(-m[b, h, i] + m_old[b, h, i]) + Σ exp(s[b, h, i, j] - m[b, h, i])\n",
           "at the end × 1.0 / z[b, h, i]\n",
       })
    EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part << "\nin:\n" << text;
  std::string json = fusion_report_json(bound, r);
  EXPECT_NE(json.find("\"kernel_count\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"decomposition\":\"multiplicative\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"refused\":[]"), std::string::npos) << json;

  BoundProgram llama = bind_example("llama_decode");
  std::string report = fusion_report_text(llama, fuse_program(llama));
  EXPECT_NE(report.find("refused fusions:\n  y does not join"), std::string::npos) << report;
  EXPECT_NE(report.find("stream: j=33 (tile 16) split into 3 segments"), std::string::npos) << report;
}

TEST(Fuse, CommandLinePrintsTheReport) {
  std::string out;
  int status = testing::run_command(std::string(SOLDER_BINARY) + " fuse --small " + testing::example_path("causal"), &out);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("program causal: 7 definitions → 1 kernel"), std::string::npos) << out;
  status = testing::run_command(std::string(SOLDER_BINARY) + " fuse " + testing::example_path("gated_ffn"), &out);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("on-chip capacity"), std::string::npos) << out;
}

// ---- Bugs --------------------------------------------------------------------------------------------

TEST(Fuse, ProductInASplitCascadeFusesOrStaysInOneSegment) {
  // A prod that a later reduction reads joins the cascade over n; with one block on the grid the
  // stream is split into segments merged in a cluster, and the merge has no case for prod.
  BoundProgram bound = testing::bind_text(R"(program prod_cascade
dim T = 2, N = 64
in x[T, N] : f32 ~ uniform(0.5, 1.5)
p[t] = prod(n) x[t, n]
out r[t] = sum(n) x[t, n] * p[t]
)");
  testing::FusedRun run = run_fused(bound);
  EXPECT_TRUE(run.verified.ok()) << run.verified.failures();
}

}  // namespace
}  // namespace solder
