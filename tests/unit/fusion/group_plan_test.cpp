// Planning one fused kernel (src/fusion/group_plan.h): dim roles, phases, the choice of the stream
// and of the number of segments, and refusals with the rule that refused. Each case plans a whole
// program as one group (pointwise definitions inlined) and compares a one-line summary of the plan
// with the expected one:
//
//   dims:    name:role/tile, "!" when the dim must be held whole (read at computed indices)
//   members: name:phase, (decomposition) for cascade members, "*" when stored to global memory
#include <gtest/gtest.h>

#include "backend/cuda/fusion_params.h"
#include "fusion/group_plan.h"
#include "fusion/inline_pointwise.h"
#include "../test_util.h"

namespace solder {
namespace {

std::string dims_summary(const GroupPlan& p) {
  std::string s;
  for (auto& d : p.dims)
    s += (s.empty() ? "" : " ") + d.name + ":" + std::string(dim_role_name(d.role)) + "/" + std::to_string(d.tile) + (d.whole ? "!" : "");
  return s;
}

std::string members_summary(const GroupPlan& p) {
  std::string s;
  for (auto& m : p.members) {
    s += (s.empty() ? "" : " ") + m.def.target.name + ":" + std::string(phase_name(m.phase));
    if (m.phase == Phase::cascade) s += "(" + std::string(decomposition_kind_name(m.decomposition.kind)) + ")";
    if (m.exported) s += "*";
  }
  return s;
}

std::string notes(const GroupPlan& p) {
  std::string s;
  for (auto& n : p.notes) s += n + "\n";
  return s;
}

PlanAttempt plan_bound(const BoundProgram& bound, const FusionParams& params) {
  InlinedProgram inlined = inline_pointwise(bound);
  std::vector<std::string> exported;
  for (const TensorInfo* t : bound.outputs()) exported.push_back(t->name);
  return plan_group(bound, inlined.defs, exported, params);
}

PlanAttempt plan_text(const std::string& text, const FusionParams& params = {}) {
  return plan_bound(testing::bind_text(text), params);
}

PlanAttempt plan_example(const std::string& name, const FusionParams& params = {}, std::vector<std::pair<std::string, int64_t>> overrides = {}) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  return plan_bound(bind_program(program, SizeChoice{true, std::move(overrides)}), params);
}

// A matrix product on tensor cores (one sum of two 16-bit factors, A with the rows, B with the
// columns, no stream) tiles its rows by one mma fragment (16) besides the columns, so that a block's
// weight tile serves 16 rows; anything else keeps one row per block.
TEST(GroupPlan, ATensorCoreProductTilesItsRows) {
  auto plan_of = [](const std::string& a_type, const std::string& body) {
    PlanAttempt a = plan_text("program p\ndim M = 64, N = 64, K = 32, H = 4\nin a[M, K] : " + a_type +
                              "\nin b[K, N] : f16\nin w[K, H, N] : f16\n" + body + "\n");
    EXPECT_TRUE(a.plan) << a.refusal;
    return a.plan ? dims_summary(*a.plan) : std::string();
  };
  EXPECT_EQ(plan_of("f16", "out c[m, n] = sum(k) a[m, k] * b[k, n]"), "m:grid/16 n:grid/16 k:inner/16");
  EXPECT_EQ(plan_of("f32", "out c[m, n] : f16 = sum(k) cast(a[m, k], f16) * b[k, n]"), "m:grid/16 n:grid/16 k:inner/16");
  // Not a product the tensor cores take: an f32 factor; a weight that holds both kept dims (a decode
  // projection: its rows are not A's).
  EXPECT_EQ(plan_of("f32", "out c[m, n] = sum(k) a[m, k] * b[k, n]"), "m:grid/1 n:grid/16 k:inner/16");
  EXPECT_EQ(plan_of("f16", "out c[m, h, n] = sum(k) a[m, k] * w[k, h, n]"), "m:grid/1 h:grid/1 n:grid/16 k:inner/16");
}

// On the GPU a tensor-core product keeps its 64- or 128-row tile; while twice its blocks still fit in
// one wave, the column tile halves instead, down to 16 (ffn G1: gelu(a·b) at 128 × 512, 8 blocks at 128
// columns, 64 at 16). A product with enough blocks keeps the wide column tile.
TEST(GroupPlan, ASmallTensorCoreProductNarrowsItsColumnsNotItsRows) {
  auto plan_of = [](int64_t n) {
    PlanAttempt a = plan_text("program p\ndim M = 128, N = " + std::to_string(n) + ", K = 32\nin a[M, K] : f16\nin b[K, N] : f16\n" +
                                  "out h[m, n] : f16 = gelu(sum(k) a[m, k] * b[k, n])\n",
                              gpu_fusion_params());
    EXPECT_TRUE(a.plan) << a.refusal;
    return a.plan ? dims_summary(*a.plan) + "\n" + notes(*a.plan) : std::string();
  };
  const std::string small = plan_of(512);
  EXPECT_NE(small.find("n:grid/16"), std::string::npos) << small;
  EXPECT_EQ(small.find("m:grid/16 "), std::string::npos) << small;  // rows stay at 64 or 128
  EXPECT_NE(small.find("column tile 16 of n, not 128"), std::string::npos) << small;
  const std::string wide = plan_of(16384);  // 128 blocks of 128 columns: one wave on 132 SMs already
  EXPECT_NE(wide.find("n:grid/128"), std::string::npos) << wide;
  EXPECT_EQ(wide.find("column tile"), std::string::npos) << wide;
}

// On the GPU an operand the precision policy rounds to T (an f32 weight, the census's mixed_bf16_f32w;
// an f32 intermediate, chain_f32_mid) tiles the product's rows like an exact one: the cost model's 64 or
// 128, not 1 (512 blocks of one row, an mma of 16 rows 15 of them padding: issue 15 forbids rows under 64).
TEST(GroupPlan, ARoundedOperandKeepsTheProductsRowTileOnTheGpu) {
  PlanAttempt a = plan_text("program p\ndim M = 512, N = 512, K = 512\nin a[M, K] : bf16\nin w[N, K] : f32\n"
                            "out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]\n",
                            gpu_fusion_params());
  ASSERT_TRUE(a.plan) << a.refusal;
  const std::string dims = dims_summary(*a.plan);
  EXPECT_TRUE(dims.find("m:grid/64 ") != std::string::npos || dims.find("m:grid/128 ") != std::string::npos) << dims;
  EXPECT_NE(notes(*a.plan).find("row tile"), std::string::npos) << notes(*a.plan);
}

// On the GPU an element-wise group whose contiguous row is shorter than a streaming step takes
// several rows per block (about 4096 elements), as long as the grid keeps two blocks per SM
// (linear_relu_backward's g = dy · (z > 0): one row of 256 per block was 65536 blocks of 256
// elements). Rows of a reduction keep one row per block; long rows are unchanged.
TEST(GroupPlan, ElementwiseRowsAreGroupedOnTheGpu) {
  auto plan_of = [](int64_t n, int64_t o, const std::string& body) {
    PlanAttempt a = plan_text("program p\ndim N = " + std::to_string(n) + ", O = " + std::to_string(o) +
                                  "\nin dy[N, O] : f16\nin z[N, O] : f16\n" + body + "\n",
                              gpu_fusion_params());
    EXPECT_TRUE(a.plan) << a.refusal;
    return a.plan ? dims_summary(*a.plan) + "\n" + notes(*a.plan) : std::string();
  };
  const std::string mask = "out g[n, o] : f16 = dy[n, o] * (z[n, o] > 0)";
  const std::string nerf = plan_of(65536, 256, mask);
  EXPECT_NE(nerf.find("n:grid/16 o:grid/256\n"), std::string::npos) << nerf;
  EXPECT_NE(nerf.find("16 rows of n per block: element-wise, 256 elements of o per row"), std::string::npos) << nerf;
  // 1024 rows: 16 per block would leave 64 blocks; 2 per block keeps 512 (two per SM on 132 SMs: 264).
  EXPECT_NE(plan_of(1024, 256, mask).find("n:grid/2 o:grid/256\n"), std::string::npos);
  EXPECT_NE(plan_of(300, 256, mask).find("n:grid/1 o:grid/256\n"), std::string::npos);  // 300 rows: no room
  EXPECT_NE(plan_of(65536, 4096, mask).find("n:grid/1 o:grid/4096\n"), std::string::npos);  // a whole step per row
  EXPECT_NE(plan_of(65536, 6000, mask).find("n:grid/1 o:grid/3000\n"), std::string::npos);  // the row itself tiled (no ragged tile)
  // A row reduction keeps one row per block.
  const std::string rows = plan_of(65536, 256, "out s[n] = sum(o) dy[n, o] * z[n, o]");
  EXPECT_EQ(rows.find("rows of n per block"), std::string::npos) << rows;
}

TEST(GroupPlan, AttentionStreamsKeysAndValues) {
  PlanAttempt a = plan_example("vanilla");
  ASSERT_TRUE(a.plan) << a.refusal;
  // b, h, i: the grid (i in tiles of 16); j: streamed and demoted into m, z, o; d: held whole (the
  // head dim of q·k, eliminated at tile level) and d2 (o's head dim).
  EXPECT_EQ(dims_summary(*a.plan), "b:grid/1 h:grid/1 i:grid/16 j:stream/16 d:resident/16 d2:resident/16");
  EXPECT_EQ(members_summary(*a.plan), "s:per-tile m:cascade(independent) z:cascade(multiplicative) o:cascade(multiplicative)*");
  EXPECT_EQ(a.plan->segments, 1);  // every i-tile reuses the streamed k, v tiles
  EXPECT_EQ(a.plan->dims[static_cast<size_t>(a.plan->stream)].name, "j");
}

TEST(GroupPlan, AttentionVariantsPlanTheSameWay) {
  for (const char* name : {"causal", "alibi", "softcap", "sliding_window", "prefix_lm", "document_mask", "gqa"}) {
    SCOPED_TRACE(name);
    PlanAttempt a = plan_example(name);
    ASSERT_TRUE(a.plan) << a.refusal;
    EXPECT_EQ(dims_summary(*a.plan), "b:grid/1 h:grid/1 i:grid/16 j:stream/16 d:resident/16 d2:resident/16");
    EXPECT_EQ(members_summary(*a.plan), "s:per-tile m:cascade(independent) z:cascade(multiplicative) o:cascade(multiplicative)*");
  }
  PlanAttempt diff = plan_example("diff_attn");
  ASSERT_TRUE(diff.plan) << diff.refusal;
  EXPECT_EQ(members_summary(*diff.plan),
            "s0:per-tile m0:cascade(independent) z0:cascade(multiplicative) a0:cascade(multiplicative) "
            "s1:per-tile m1:cascade(independent) z1:cascade(multiplicative) a1:cascade(multiplicative) o:post*");
}

TEST(GroupPlan, EvoformerStreamsOnlyWhenTheKeysSpanSeveralTiles) {
  PlanAttempt one_tile = plan_example("evoformer");  // S2 = 16 = one stream tile: held whole
  ASSERT_TRUE(one_tile.plan) << one_tile.refusal;
  EXPECT_EQ(dims_summary(*one_tile.plan), "b:grid/1 r:grid/1 h:grid/1 i:grid/16 j:resident/16 d:resident/8 d2:resident/8");
  EXPECT_EQ(members_summary(*one_tile.plan), "s:pre m:pre z:pre a:pre o:pre*");
  FusionParams p;
  p.stream_tile = 8;
  PlanAttempt streamed = plan_example("evoformer", p);
  ASSERT_TRUE(streamed.plan) << streamed.refusal;
  EXPECT_EQ(dims_summary(*streamed.plan), "b:grid/1 r:grid/1 h:grid/1 i:grid/16 j:stream/8 d:resident/8 d2:resident/8");
  EXPECT_EQ(members_summary(*streamed.plan), "s:per-tile m:cascade(independent) z:cascade(multiplicative) a:cascade(multiplicative) o:post*");
}

TEST(GroupPlan, FfnStreamsTheHiddenDimAndLoopsOverK) {
  PlanAttempt a = plan_example("ffn");
  ASSERT_TRUE(a.plan) << a.refusal;
  EXPECT_EQ(dims_summary(*a.plan), "m:grid/16 n:stream/16 k:inner/16 l:resident/32");
  EXPECT_EQ(members_summary(*a.plan), "c:per-tile e:cascade(independent)*");
  PlanAttempt g = plan_example("gated_ffn");
  ASSERT_TRUE(g.plan) << g.refusal;
  EXPECT_EQ(members_summary(*g.plan), "gate:per-tile up:per-tile e:cascade(independent)*");
}

TEST(GroupPlan, AnOutputThatKeepsTheReducedDimIsNotStreamed) {
  // softmax: y[t, n] is an output, so every value of n is needed at once: n is held whole.
  PlanAttempt a = plan_example("softmax");
  ASSERT_TRUE(a.plan) << a.refusal;
  EXPECT_EQ(dims_summary(*a.plan), "t:grid/8 n:resident/64");
  EXPECT_EQ(members_summary(*a.plan), "m:pre z:pre y:pre*");
  EXPECT_EQ(a.plan->stream, -1);
}

TEST(GroupPlan, VarianceIsPolynomialOverASplitStream) {
  PlanAttempt a = plan_example("variance");
  ASSERT_TRUE(a.plan) << a.refusal;
  EXPECT_EQ(dims_summary(*a.plan), "b:grid/2 l:stream/16");
  EXPECT_EQ(members_summary(*a.plan), "mean:cascade(independent) var:cascade(polynomial)*");
  EXPECT_EQ(a.plan->member("var")->d_extensive, std::optional<std::string>("mean"));  // a plain sum: its centre is extrapolated
  // One block on the grid: FlashDecoding's rule splits the 4 stream tiles across 4 blocks.
  EXPECT_EQ(a.plan->segments, 4);
  EXPECT_NE(notes(*a.plan).find("multi-segment: the stream l is split into 4 segments"), std::string::npos) << notes(*a.plan);
}

TEST(GroupPlan, SegmentsFollowTheBlockThreshold) {
  struct Case { int64_t stream_tile; int min_blocks; int segments; };
  for (Case c : {Case{16, 64, 4}, Case{16, 1, 1}, Case{16, 2, 2}, Case{16, 1000, 4}, Case{8, 64, 8}, Case{32, 64, 2}, Case{4, 1000, 16}}) {
    FusionParams p;
    p.stream_tile = c.stream_tile;
    p.min_blocks_for_single_segment = c.min_blocks;
    PlanAttempt a = plan_example("variance", p);
    ASSERT_TRUE(a.plan) << a.refusal;
    EXPECT_EQ(a.plan->segments, c.segments) << "stream_tile " << c.stream_tile << ", min_blocks " << c.min_blocks;
  }
  // Attention never splits: each i-tile reuses the streamed k and v.
  FusionParams p;
  p.min_blocks_for_single_segment = 1000;
  EXPECT_EQ(plan_example("vanilla", p).plan->segments, 1);
}

TEST(GroupPlan, AGridDimThatReusesStreamedTilesKeepsOneSegment) {
  // evoformer with S2 = 32: two query tiles (i) each read every key and value tile, so i reuses the
  // streamed k and v tiles and, by the documented rule, the stream is not split. pair_bias[b, h, i, j]
  // is also streamed and does have i; the rule must hold for the reused tiles, not for the union of
  // the streamed inputs' dims.
  PlanAttempt a = plan_example("evoformer", {}, {{"S2", 32}});
  ASSERT_TRUE(a.plan) << a.refusal;
  EXPECT_EQ(dims_summary(*a.plan), "b:grid/1 r:grid/1 h:grid/1 i:grid/16 j:stream/16 d:resident/8 d2:resident/8");
  EXPECT_EQ(a.plan->segments, 1) << notes(*a.plan);
}

TEST(GroupPlan, RaggedStreamTiles) {
  PlanAttempt a = plan_example("vanilla", {}, {{"S", 50}});
  ASSERT_TRUE(a.plan) << a.refusal;
  const GroupDim& j = a.plan->dims[static_cast<size_t>(a.plan->stream)];
  EXPECT_EQ(j.extent, 50);
  EXPECT_EQ(j.tiles(), 4);
  EXPECT_TRUE(j.ragged());
}

TEST(GroupPlan, LongestCascadeDimIsStreamed) {
  PlanAttempt a = plan_text(R"(program two
dim T = 4, N = 64, K = 96
in x[T, N] : f32
in y[T, K] : f32
m[t] = max(n) x[t, n]
z[t] = sum(n) exp(x[t, n] - m[t])
r[t] = max(k) y[t, k]
w[t] = sum(k) exp(y[t, k] - r[t])
out o[t] = z[t] + w[t]
)");
  ASSERT_TRUE(a.plan) << a.refusal;
  EXPECT_EQ(dims_summary(*a.plan), "t:grid/4 n:resident/64 k:stream/16");
  EXPECT_EQ(members_summary(*a.plan), "m:pre z:pre r:cascade(independent) w:cascade(multiplicative) o:post*");
}

TEST(GroupPlan, IdenticalSketchesShareTheStreamLoop) {
  PlanAttempt a = plan_text(R"(program same
dim T = 4, N = 64
in x[T, N] : f32
in y[T, N] : f32
m[t] = max(n) x[t, n]
z[t] = sum(n) exp(x[t, n] - m[t])
r[t] = max(k) y[t, k]
w[t] = sum(k) exp(y[t, k] - r[t])
out o[t] = z[t] + w[t]
)");
  ASSERT_TRUE(a.plan) << a.refusal;
  EXPECT_EQ(dims_summary(*a.plan), "t:grid/4 n:stream/16 k:stream/16");
  EXPECT_EQ(members_summary(*a.plan), "m:cascade(independent) z:cascade(multiplicative) r:cascade(independent) w:cascade(multiplicative) o:post*");
}

TEST(GroupPlan, ProducerReadAtComputedIndicesIsHeldWhole) {
  PlanAttempt a = plan_text(R"(program whole
dim T = 4, C = 32, K = 8
in x[T, C, K] : f32
in w[C] : f32
y[t, c] = sum(k) x[t, c, k]
out z[t] = sum(c) y[t, C - 1 - c] * w[c]
)");
  ASSERT_TRUE(a.plan) << a.refusal;
  EXPECT_EQ(dims_summary(*a.plan), "t:grid/4 c:resident/32! k:resident/8 c2:inner/16");
  EXPECT_EQ(members_summary(*a.plan), "y:pre z:pre*");
}

TEST(GroupPlan, RefusedStreamsAreNotedWithTheirRule) {
  // fp8 quantisation: the cast is not a homomorphism, so k is held whole instead of streamed.
  PlanAttempt q = plan_example("quant_gemm");
  ASSERT_TRUE(q.plan) << q.refusal;
  EXPECT_EQ(dims_summary(*q.plan), "m:grid/16 k:resident/64 n:resident/32");
  EXPECT_EQ(members_summary(*q.plan), "amax:pre c:pre*");
  EXPECT_EQ(notes(*q.plan),
            "not streaming k: c over the streamed dim: not decomposable: factor 'cast(a[m, k] / (amax[m] / 448), f8e4m3)' "
            "mixes the reduced data with amax (rounding to a narrower dtype is not a homomorphism)\n");

  // A demoted producer that reads a running result.
  PlanAttempt p = plan_text(R"(program pertile
dim T = 4, N = 64, K = 8
in x[T, N, K] : f32
in y[T, N] : f32
m[t] = max(n) y[t, n]
w[t, n] = sum(k) x[t, n, k] * m[t] * y[t, n]
out z[t] = sum(n) w[t, n]
)");
  ASSERT_TRUE(p.plan) << p.refusal;
  EXPECT_EQ(members_summary(*p.plan), "m:pre w:pre z:pre*");
  EXPECT_EQ(notes(*p.plan), "not streaming n: w is computed per tile but reads m, which is final only after the loop\n");

  // A polynomial state is exact only at the end: nothing may read it inside the loop.
  PlanAttempt v = plan_text(R"(program polyread
dim T = 4, N = 64
in x[T, N] : f32
mean[t] = sum(n) x[t, n] / N
var[t] = sum(n) pow(x[t, n] - mean[t], 2) / N
out r[t] = sum(n) x[t, n] * var[t]
)");
  ASSERT_TRUE(v.plan) << v.refusal;
  EXPECT_EQ(members_summary(*v.plan), "mean:pre var:pre r:pre*");
  EXPECT_EQ(notes(*v.plan), "not streaming n: var is a polynomial cascade member read by r inside the loop\n");

  // Non-decomposable cascade (tanh of a difference): held whole, with the factor named.
  PlanAttempt t = plan_text(R"(program tanh_cascade
dim T = 4, N = 64
in x[T, N] : f32
m[t] = max(n) x[t, n]
out z[t] = sum(n) tanh(x[t, n] - m[t])
)");
  ASSERT_TRUE(t.plan) << t.refusal;
  EXPECT_EQ(dims_summary(*t.plan), "t:grid/4 n:resident/64");
  EXPECT_NE(notes(*t.plan).find("not streaming n: z over the streamed dim: not decomposable: factor 'tanh(x[t, n] - m[t])'"), std::string::npos)
      << notes(*t.plan);
}

// Two reads a stream loop cannot serve (tests/data/fuzz-findings/tile_read_before_written.sol,
// tests/data/reproducers/fuzz_alibi_max_at_j.sol): a reduction over the stream that reads a result
// computed after the loop, and one that reads a running result at its own reduced variable (a
// different D for every term). Both are refused as streams, with the rule, and planned whole.
TEST(GroupPlan, StreamsThatWouldReadUnfinishedResultsAreRefused) {
  PlanAttempt post = plan_text(R"(program postread
dim T = 4, N = 64
in x[T, N] : f32
m[t] = max(n) x[t, n]
c[] = min(t) m[t]
out r[t] = sum(n) exp(x[t, n] - m[t]) * c
)");
  ASSERT_TRUE(post.plan) << post.refusal;
  EXPECT_EQ(members_summary(*post.plan), "m:pre c:pre r:pre*");
  EXPECT_EQ(notes(*post.plan), "not streaming n: r reduces over the streamed dim but reads c, which is final only after the loop\n");

  PlanAttempt shifted = plan_text(R"(program shifted
dim T = 64, N = 64
in x[T, N] : f32
m[t] = max(n) x[t, n]
out z[t] = sum(n) exp(x[t, n] - m[n])
)");
  ASSERT_TRUE(shifted.plan) << shifted.refusal;
  EXPECT_EQ(members_summary(*shifted.plan), "m:pre z:pre*");
  EXPECT_EQ(notes(*shifted.plan),
            "not streaming n: z over the streamed dim reads the running result m at its reduced variable n (the stream's): a different value for "
            "every term, not one per element\n");
}

TEST(GroupPlan, CapacityRefusalNamesTheLargestBuffer) {
  FusionParams p;
  p.on_chip_budget = 1024;
  PlanAttempt a = plan_example("vanilla", p);
  ASSERT_FALSE(a.plan);
  // s: 16×16 words; m, z: 16 words and a state each; o: 16×16 words and a state.
  EXPECT_EQ(a.refusal, "on-chip capacity: the tiles and states need 3 KB per block (largest: o, 2 KB) but the budget is 1 KB");
  EXPECT_TRUE(a.over_capacity);  // typed, for the retry at smaller tiles
  p.on_chip_budget = 3328;  // exactly enough
  EXPECT_TRUE(plan_example("vanilla", p).plan);
}

TEST(GroupPlan, DecodeAttentionPlans) {
  // llama_decode as one group: the projections run before the loop, y after it, the KV cache is
  // the stream and is split across blocks (one block on the grid).
  PlanAttempt l = plan_example("llama_decode");
  ASSERT_TRUE(l.plan) << l.refusal;
  EXPECT_EQ(members_summary(*l.plan),
            "q:pre k_new:pre v_new:pre s:per-tile m:cascade(independent) z:cascade(multiplicative) a:cascade(multiplicative) y:post*");
  EXPECT_EQ(l.plan->dims[static_cast<size_t>(l.plan->stream)].name, "j");
  EXPECT_EQ(l.plan->dims[static_cast<size_t>(l.plan->stream)].extent, 33);
  EXPECT_EQ(l.plan->segments, 3);
  PlanAttempt m = plan_example("mla_decode");
  ASSERT_TRUE(m.plan) << m.refusal;
  EXPECT_EQ(dims_summary(*m.plan), "b:grid/1 h:grid/4 j:stream/16 c:resident/32 r:resident/8");
  EXPECT_EQ(members_summary(*m.plan), "s_nope:per-tile s_pe:per-tile m:cascade(independent) z:cascade(multiplicative) o:cascade(multiplicative)*");
}

}  // namespace
}  // namespace solder
