// The attention kernels on the sm_90a attention skeleton (mma_stream_skeleton.cpp): which kernels it
// takes, the functors and launch it writes, and the rule that sends the others to the emitter's own
// schedule. (The values are checked on the GPU: `solder run --backend cuda` of every attention example;
// CudaCodegen.EveryExampleCompilesWithNvccForSm90a compiles the sources.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <cstdlib>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_names.h"
#include "backend/cuda/mma_stream_codegen.h"
#include "driver/compile.h"
#include "ir/expr_eval.h"
#include "runtime/runtime.h"
#include "../test_util.h"

namespace solder {
namespace {

struct Compiled {
  KernelProgram named, view;
};

Compiled compile(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims, bool small = false) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  BoundProgram bound = bind_program(program, SizeChoice{small, dims});
  KernelProgram named = with_cuda_names(compile_program(bound, CompileOptions::for_gpu()).kernels);
  KernelProgram view = contracts_as_reduces(named, false);
  return {named, view};
}

std::optional<AttentionSkeletonKernel> emit(const Compiled& c, std::string* refusal) {
  return generate_attention_skeleton_kernel(c.view, c.view.kernels.front(), c.named.kernels.front(), refusal);
}

TEST(AttentionSkeletonEmit, PaperShapesRunOnTheSkeleton) {
  for (const char* name : {"vanilla", "causal", "gqa", "alibi", "softcap", "sliding_window", "prefix_lm"}) {
    Compiled c = compile(name, {});
    std::string refusal;
    auto k = emit(c, &refusal);
    ASSERT_TRUE(k) << name << ": " << refusal;
    EXPECT_NE(k->source.find("#include <solder/attention/sm90_attention.cuh>"), std::string::npos) << name;
    EXPECT_NE(k->source.find("SOLDER_ATTENTION_KERNEL("), std::string::npos) << name;
    // (6 stages: the staggered consumers of the two-Q-buffer kernels)
    EXPECT_TRUE(k->source.find("// on the sm_90a attention skeleton: solder::attention::Config<solder::gemm::Dtype::bf16, 64, 128, 4, ") != std::string::npos ||
                k->source.find("// on the sm_90a attention skeleton: solder::attention::Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>") != std::string::npos)
        << name;
    ASSERT_TRUE(k->info.attention) << name;
    const AttentionSkeletonLaunch& a = *k->info.attention;
    EXPECT_EQ(a.seq_q, 1024) << name;
    EXPECT_EQ(a.seq_k, 1024) << name;
    EXPECT_EQ(a.batch, 16) << name;
    EXPECT_EQ(a.heads, 16) << name;
    EXPECT_EQ(a.q.rows, 1024) << name;
    EXPECT_EQ(a.q.k, 64) << name;
    EXPECT_EQ(a.q.batch, 256) << name;
    EXPECT_EQ(a.q.batch_stride, 1024 * 64) << name;
    EXPECT_EQ(a.q.tile_rows, 64) << name;
    EXPECT_EQ(a.k.tile_rows, 128) << name;
    EXPECT_EQ(k->info.threads % 128, 0) << name;
    const int64_t rows = (k->info.threads - 128) / 2;  // 64 query rows per consumer warpgroup
    // short sequences (S 1k: vanilla, gqa, causal, and the masked variants): one block per SM
    const bool persistent = k->source.find(", true>;") != std::string::npos || k->source.find(", true, 0, 2>;") != std::string::npos ||
                            k->source.find(", true, 0, 2, 2>;") != std::string::npos;
    EXPECT_EQ(k->info.blocks, persistent ? 132 : (1024 + rows - 1) / rows * 256) << name;
    EXPECT_NE(k->summary.find("skipped tiles:"), std::string::npos) << name;
  }
}

TEST(AttentionSkeletonEmit, VanillaFoldsTheScaleAndUsesThreeConsumers) {
  std::string refusal;
  // S 4k: three consumers (192 query rows), one block per work tile, the staged epilogue in the Q rows
  auto k = emit(compile("vanilla", {{"B", 4}, {"S", 4096}}), &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos);
  EXPECT_NE(k->source.find("static constexpr bool kIdentity = true;"), std::string::npos);
  // log2(e) / 8
  EXPECT_NE(k->source.find("scale_log2 = 0.180336878f"), std::string::npos) << k->source;
  EXPECT_EQ(k->info.threads, 512);
  EXPECT_EQ(k->info.blocks, (4096 + 191) / 192 * 64);
  EXPECT_NE(k->summary.find("skipped tiles: none"), std::string::npos) << k->summary;
  // the epilogue stores bf16 pairs at [bh, row, col]
  EXPECT_NE(k->source.find("(static_cast<long long>(bh_) * 4096LL + row_) * 64LL + col_"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("__floats2bfloat162_rn(o0_, o1_)"), std::string::npos);
}

TEST(AttentionSkeletonEmit, CausalSkipsTilesByIntervalBounds) {
  std::string refusal;
  auto k = emit(compile("causal", {}), &refusal);
  ASSERT_TRUE(k) << refusal;
  // the mask as global rows and columns, and its interval decisions
  EXPECT_NE(k->source.find("as rows row_ and columns col_: col_ <= row_"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("__device__ bool live_("), std::string::npos);
  EXPECT_NE(k->source.find("__device__ void key_tiles("), std::string::npos);
  EXPECT_NE(k->source.find("__device__ bool partial("), std::string::npos);
  EXPECT_NE(k->summary.find("are skipped"), std::string::npos) << k->summary;
  EXPECT_EQ(k->source.find("return true;\n  }\n  // the key tiles"), std::string::npos) << "live_ must not be constant";
  // short causal sequences: persistent blocks with two Q buffers, no stagger, work tiles claimed from a
  // counter, free consumers, the posted setup (S 1k); past 32 key tiles per work tile one block per tile
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos);
  EXPECT_EQ(k->info.blocks, 132);
  auto longer = emit(compile("causal", {{"B", 1}, {"S", 16384}}), &refusal);
  ASSERT_TRUE(longer) << refusal;
  EXPECT_NE(longer->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos);
  EXPECT_EQ(longer->info.blocks, (16384 + 191) / 192 * 16);
}

TEST(AttentionSkeletonEmit, ScoreModifiersBecomeTheScoreFunctor) {
  for (const char* name : {"softcap", "alibi"}) {
    std::string refusal;
    auto k = emit(compile(name, {}), &refusal);
    ASSERT_TRUE(k) << name << ": " << refusal;
    EXPECT_NE(k->source.find("static constexpr bool kIdentity = false;"), std::string::npos) << name;
    EXPECT_NE(k->source.find("const float s_ = dot_ * 0.125f;"), std::string::npos) << name << k->source;
    // (alibi at S 1k: the short-row schedule of vanilla, persistent blocks, two Q buffers, staggered)
    EXPECT_NE(k->source.find(std::string("Config<solder::gemm::Dtype::bf16, 64, 128, ") + (std::string(name) == "alibi" ? "6, 2, true, 0, 2, 2>" : "4, 2>")), std::string::npos) << name;
  }
}

// ALiBi's S + slope_h·(j − i) is affine in the row and column: the head's slope once per work tile
// (no pow per score) and vanilla's schedules: three consumers on long rows (a = 0.125 > 0: the score divided
// by a, its column term by the tensor cores, kAffineColumnMma), the short-row schedule at S ≤ 1k (2
// consumers: one FFMA per score, the column terms in registers, the row term in the row state).
// $SOLDER_ATTN_AFFINE=two: the whole bias per score everywhere (kAffineTwoFfma); =ffma: the column term by
// one FFMA per score; =unscaled: two FFMA with 3 consumers; =scaled / scaled-ffma: the scaled form with 2.
TEST(AttentionSkeletonEmit, AlibiIsAnAffineScoreWithTheSlopePerHead) {
  std::string refusal;
  auto k = emit(compile("alibi", {{"B", 4}, {"S", 4096}}), &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("static constexpr bool kAffine = true;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("__device__ void affine(int bh_, float* a_, float* u_, float* w_, float* c_) const {"), std::string::npos);
  EXPECT_NE(k->source.find("*a_ = 1.0f * 0.125f;"), std::string::npos) << k->source;
  const size_t u = k->source.find("*u_ = ");
  ASSERT_NE(u, std::string::npos);
  EXPECT_NE(k->source.substr(u, k->source.find('\n', u) - u).find("powf("), std::string::npos) << "the slope is u";
  EXPECT_NE(k->source.find("*w_ = 0.0f;"), std::string::npos) << "col − row's row parts cancel";
  EXPECT_NE(k->source.find("*c_ = 0.0f;"), std::string::npos);
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3>"), std::string::npos);
  EXPECT_NE(k->summary.find("affine: a·dot + u·(col − row) + w·row + c"), std::string::npos) << k->summary;
  // (3 consumers, a = 0.125 > 0: the score divided by a, the column term by the tensor cores)
  EXPECT_NE(k->source.find("static constexpr bool kAffinePositiveA = true;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("static constexpr bool kAffineColumnMma = true;"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("(a > 0, the score divided by a: dot + (u / a)·(column offset in the tile), the column term by one more m64n128k16 wgmma"),
            std::string::npos)
      << k->summary;
  EXPECT_EQ(k->info.shared_bytes, 24576 + 4 * 32768 + 8 * 18 + 1024 + 2176) << "the offsets' tile";
  EXPECT_EQ(k->source.find("kAffineTwoFfma"), std::string::npos);
  // $SOLDER_ATTN_AFFINE=ffma: one FFMA per score with the column offset as its immediate (main's kernel before)
  setenv("SOLDER_ATTN_AFFINE", "ffma", 1);
  auto ffma = emit(compile("alibi", {{"B", 4}, {"S", 4096}}), &refusal);
  unsetenv("SOLDER_ATTN_AFFINE");
  ASSERT_TRUE(ffma) << refusal;
  EXPECT_NE(ffma->source.find("static constexpr bool kAffinePositiveA = true;"), std::string::npos) << ffma->source;
  EXPECT_EQ(ffma->source.find("kAffineColumnMma"), std::string::npos);
  EXPECT_NE(ffma->summary.find("(a > 0, the score divided by a: dot + (u / a)·(column offset in the tile), one FFMA per score"), std::string::npos)
      << ffma->summary;
  EXPECT_EQ(ffma->info.shared_bytes, 24576 + 4 * 32768 + 8 * 18 + 1024);
  // $SOLDER_ATTN_AFFINE=unscaled: the previous 3-consumer kernel (the whole bias per score, two FFMA)
  setenv("SOLDER_ATTN_AFFINE", "unscaled", 1);
  auto unscaled = emit(compile("alibi", {{"B", 4}, {"S", 4096}}), &refusal);
  unsetenv("SOLDER_ATTN_AFFINE");
  ASSERT_TRUE(unscaled) << refusal;
  EXPECT_EQ(unscaled->source.find("kAffinePositiveA"), std::string::npos);
  EXPECT_NE(unscaled->summary.find("(one FFMA per score for the bias, one for a·dot)"), std::string::npos) << unscaled->summary;
  EXPECT_NE(unscaled->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3>"), std::string::npos);
  // S 1k: vanilla's short-row schedule (persistent blocks, two Q buffers, consumer 1 two turns behind)
  auto short_rows = emit(compile("alibi", {}), &refusal);
  ASSERT_TRUE(short_rows) << refusal;
  EXPECT_NE(short_rows->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>;"), std::string::npos) << short_rows->summary;
  EXPECT_EQ(short_rows->info.blocks, 132);
  EXPECT_NE(short_rows->summary.find("(one FFMA per score: a·dot + u·(column offset in the tile)"), std::string::npos) << short_rows->summary;
  EXPECT_EQ(short_rows->source.find("kAffineTwoFfma"), std::string::npos);
  EXPECT_EQ(short_rows->source.find("kAffinePositiveA"), std::string::npos) << "2 consumers keep the column terms";
  EXPECT_EQ(short_rows->info.shared_bytes, 2 * 16384 + 6 * 32768 + 8 * 28 + 1024);
  // $SOLDER_ATTN_AFFINE=scaled: the scaled form with 2 consumers, its column term by wgmma where the tile fits
  // (not beside six stages; with SOLDER_ATTN_STAGES=5 it does)
  setenv("SOLDER_ATTN_AFFINE", "scaled", 1);
  auto scaled = emit(compile("alibi", {}), &refusal);
  setenv("SOLDER_ATTN_STAGES", "5", 1);
  auto scaled5 = emit(compile("alibi", {}), &refusal);
  unsetenv("SOLDER_ATTN_STAGES");
  setenv("SOLDER_ATTN_AFFINE", "scaled-ffma", 1);
  auto scaled_ffma = emit(compile("alibi", {}), &refusal);
  unsetenv("SOLDER_ATTN_AFFINE");
  ASSERT_TRUE(scaled && scaled5 && scaled_ffma) << refusal;
  EXPECT_NE(scaled->source.find("static constexpr bool kAffinePositiveA = true;"), std::string::npos) << scaled->source;
  EXPECT_NE(scaled->source.find("static constexpr bool kAffineColumnMma = true;"), std::string::npos);
  EXPECT_EQ(scaled->info.shared_bytes, 2 * 16384 + 6 * 32768 + 8 * 28 + 1024) << "six stages: the offsets' tile does not fit";
  EXPECT_NE(scaled5->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2>;"), std::string::npos) << scaled5->summary;
  EXPECT_EQ(scaled5->info.shared_bytes, 2 * 16384 + 5 * 32768 + 8 * 24 + 1024 + 2176);
  EXPECT_NE(scaled_ffma->source.find("static constexpr bool kAffinePositiveA = true;"), std::string::npos);
  EXPECT_EQ(scaled_ffma->source.find("kAffineColumnMma"), std::string::npos);
  // the A/B knobs: the two-FFMA score, the previous short-row choice, two consumers on long rows
  setenv("SOLDER_ATTN_AFFINE", "two", 1);
  setenv("SOLDER_ATTN_SHORT", "old", 1);
  auto old_form = emit(compile("alibi", {}), &refusal);
  unsetenv("SOLDER_ATTN_AFFINE");
  unsetenv("SOLDER_ATTN_SHORT");
  ASSERT_TRUE(old_form) << refusal;
  EXPECT_NE(old_form->source.find("static constexpr bool kAffineTwoFfma = true;"), std::string::npos);
  EXPECT_NE(old_form->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3>;"), std::string::npos) << old_form->summary;
  EXPECT_NE(old_form->summary.find("(one FFMA per score for the bias, one for a·dot)"), std::string::npos) << old_form->summary;
  setenv("SOLDER_ATTN_CONSUMERS", "2", 1);
  auto two = emit(compile("alibi", {{"B", 4}, {"S", 4096}}), &refusal);
  unsetenv("SOLDER_ATTN_CONSUMERS");
  ASSERT_TRUE(two) << refusal;
  EXPECT_NE(two->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2>;"), std::string::npos) << two->summary;
  EXPECT_NE(two->summary.find("(one FFMA per score: a·dot + u·(column offset in the tile)"), std::string::npos) << two->summary;
  // softcap is not affine: the per-score functor
  auto soft = emit(compile("softcap", {}), &refusal);
  ASSERT_TRUE(soft) << refusal;
  EXPECT_EQ(soft->source.find("kAffine"), std::string::npos);
  EXPECT_NE(soft->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2>"), std::string::npos);
}

TEST(AttentionSkeletonEmit, AffineScoresTakeRowAndConstantTerms) {
  auto build = [](const std::string& score) {
    std::string text =
        "program biased\ndim B = 2, H = 4, S = 1024, D = 64\n"
        "in q[B, H, S, D] : bf16\nin k[B, H, S, D] : bf16\nin v[B, H, S, D] : bf16\n"
        "s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)\n"
        "sb[b, h, i, j] = " + score + "\n"
        "m[b, h, i] = max(j) sb[b, h, i, j]\ne[b, h, i, j] = exp(sb[b, h, i, j] - m[b, h, i])\n"
        "z[b, h, i] = sum(j) e[b, h, i, j]\n"
        "out o[b, h, i, d] : bf16 = sum(j) e[b, h, i, j] / z[b, h, i] * v[b, h, j, d]\n";
    auto program = std::make_shared<Program>(parse_program(text, "biased.sol"));
    KernelProgram named = with_cuda_names(compile_program(bind_program(program, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels);
    return Compiled{named, contracts_as_reduces(named, false)};
  };
  std::string refusal;
  auto k = emit(build("2 * s[b, h, i, j] + 0.25 * (j - i) + 0.5 * i + 3"), &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("kAffine = true"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("*a_ = static_cast<float>(2LL) * 0.125f;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("*u_ = 0.25f;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("*w_ = 0.5f;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("*c_ = static_cast<float>(3LL);"), std::string::npos) << k->source;
  // a product of the row and the column is not affine: the per-score functor
  auto q = emit(build("s[b, h, i, j] + 0.001 * i * j"), &refusal);
  ASSERT_TRUE(q) << refusal;
  EXPECT_EQ(q->source.find("kAffine"), std::string::npos);
}

// The columns a mask may reach from a block of rows, solved from its linear bounds: every column where
// the mask holds for one of the rows lies inside, and for these masks the bounds are attained.
TEST(AttentionSkeletonEmit, MaskReachIsSoundAndTight) {
  const Expr row = make_var("row_"), col = make_var("col_"), win = make_dim("WIN"), pre = make_dim("PRE");
  auto bin = [](BinaryOp op, Expr a, Expr b) { return make_binary(op, a, b); };
  const std::map<std::string, int64_t> dims{{"WIN", 37}, {"PRE", 20}};
  struct Case {
    const char* name;
    Expr mask;
    bool bounded_lo, bounded_hi, exact;
  };
  const std::vector<Case> cases = {
      {"causal", bin(BinaryOp::le, col, row), false, true, true},
      {"sliding", bin(BinaryOp::logical_and, bin(BinaryOp::le, col, row), bin(BinaryOp::le, bin(BinaryOp::sub, row, col), win)), true, true, true},
      {"prefix", bin(BinaryOp::logical_or, bin(BinaryOp::lt, col, pre), bin(BinaryOp::le, col, row)), false, true, true},  // two intervals from 0: one
      {"prefix-and-window", bin(BinaryOp::logical_and, bin(BinaryOp::logical_or, bin(BinaryOp::lt, col, pre), bin(BinaryOp::le, col, row)), bin(BinaryOp::ge, col, make_int(3))), true, true, true},
      {"two-windows", bin(BinaryOp::logical_or, bin(BinaryOp::lt, col, make_int(5)), bin(BinaryOp::gt, col, bin(BinaryOp::add, row, make_int(10)))), false, false, false},  // a gap
      {"two-bands", bin(BinaryOp::logical_or, bin(BinaryOp::logical_and, bin(BinaryOp::ge, col, make_int(0)), bin(BinaryOp::lt, col, make_int(5))),
                                  bin(BinaryOp::logical_and, bin(BinaryOp::ge, col, row), bin(BinaryOp::le, col, bin(BinaryOp::add, row, make_int(3))))), true, true, false},
      {"band", bin(BinaryOp::logical_and, bin(BinaryOp::gt, col, bin(BinaryOp::sub, row, make_int(5))), bin(BinaryOp::lt, col, bin(BinaryOp::add, row, make_int(7)))), true, true, true},
      {"anti", bin(BinaryOp::ge, bin(BinaryOp::add, col, row), make_int(50)), true, false, true},
      {"diagonal", bin(BinaryOp::eq, col, bin(BinaryOp::mul, make_int(2), row)), true, true, true},
      {"even", bin(BinaryOp::le, bin(BinaryOp::mul, make_int(2), col), row), false, false, false},  // |coefficient of col| ≠ 1: open
      {"not-equal", bin(BinaryOp::ne, col, row), false, false, false},
      {"window-and-even", bin(BinaryOp::logical_and, bin(BinaryOp::le, col, row), bin(BinaryOp::eq, bin(BinaryOp::mod, col, make_int(2)), make_int(0))), false, true, false},
  };
  for (const Case& c : cases) {
    CompiledExpr::Bindings bindings;
    bindings.dims = dims;
    bindings.vars = {"row_", "col_"};
    CompiledExpr holds(c.mask, bindings, Arithmetic::float64);
    for (int64_t lo_row : {0, 3, 40, 64, 100}) {
      for (int64_t rows : {1, 16, 64}) {
        const int64_t hi_row = lo_row + rows - 1;
        bool exact = false;
        auto [lo, hi] = attention_mask_reach(c.mask, dims, lo_row, hi_row, &exact);
        EXPECT_EQ(exact, c.exact) << c.name;
        EXPECT_EQ(std::isfinite(lo), c.bounded_lo) << c.name;
        EXPECT_EQ(std::isfinite(hi), c.bounded_hi) << c.name;
        double seen_lo = 1e9, seen_hi = -1e9;
        for (int64_t r = lo_row; r <= hi_row; ++r)
          for (int64_t j = -200; j < 400; ++j) {
            int64_t at[2] = {r, j};
            if (holds.eval(at) == 0) continue;
            EXPECT_GE(static_cast<double>(j), lo) << c.name << " row " << r << " col " << j;
            EXPECT_LE(static_cast<double>(j), hi) << c.name << " row " << r << " col " << j;
            seen_lo = std::min(seen_lo, static_cast<double>(j));
            seen_hi = std::max(seen_hi, static_cast<double>(j));
          }
        // attained where every leaf is solved (a conjunction, or prefix's || of two solved bounds)
        const bool tight = c.exact || std::string(c.name) == "two-bands";
        if (tight && c.bounded_lo && seen_lo > -200) EXPECT_EQ(lo, seen_lo) << c.name << " rows " << lo_row << ".." << hi_row;
        if (tight && c.bounded_hi && seen_hi < 399) EXPECT_EQ(hi, seen_hi) << c.name << " rows " << lo_row << ".." << hi_row;
        // exact: on each single row the mask holds on every column of [lo, hi] and nowhere else
        if (!c.exact || rows != 1) continue;
        for (int64_t j = -200; j < 400; ++j) {
          int64_t at[2] = {lo_row, j};
          const bool inside = static_cast<double>(j) >= lo && static_cast<double>(j) <= hi;
          EXPECT_EQ(holds.eval(at) != 0, inside) << c.name << " row " << lo_row << " col " << j;
        }
      }
    }
  }
}

// Sliding windows: the key range from the window's linear bounds (no scan over the key tiles), and
// persistent blocks at every length (a work tile has 3 key tiles at S 1k as at 16k), with free consumers
// and the staged epilogue (a mask of two comparisons).
TEST(AttentionSkeletonEmit, SlidingWindowSolvesTheKeyRange) {
  for (int64_t seq : {1024, 4096, 16384}) {
    std::string refusal;
    auto k = emit(compile("sliding_window", {{"B", 16384 / seq}, {"S", seq}}), &refusal);
    ASSERT_TRUE(k) << refusal;
    EXPECT_NE(k->source.find("const long long lo_ = max_ll_(0LL, (1LL) * row_lo_ + (-256LL));"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find("const long long hi_ = min_ll_(static_cast<long long>(seq_k_) - 1, (1LL) * row_hi_ + (0LL));"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true>;"), std::string::npos) << seq;
    EXPECT_EQ(k->info.blocks, 132) << seq;
    EXPECT_NE(k->summary.find("solved from its linear bounds"), std::string::npos) << k->summary;
    // a conjunction of bounds: boundary tiles compare with each row's two ends
    EXPECT_NE(k->source.find("static constexpr bool kRowInterval = true;"), std::string::npos);
    EXPECT_NE(k->source.find("const long long l_ = (1LL) * row_lo_ + (-256LL), h_ = (1LL) * row_hi_ + (0LL);"), std::string::npos) << k->source;
  }
  // prefix_lm's `col < PRE || col <= row` is one interval per row too, [0, max(PRE - 1, row)]: boundary
  // tiles compare with the row's two ends (the lower one open)
  std::string why;
  auto prefix = emit(compile("prefix_lm", {}), &why);
  ASSERT_TRUE(prefix) << why;
  EXPECT_NE(prefix->source.find("static constexpr bool kRowInterval = true;"), std::string::npos) << prefix->source;
  EXPECT_NE(prefix->source.find("max_ll_((255LL), (1LL) * row_hi_ + (0LL))"), std::string::npos) << prefix->source;
  EXPECT_NE(prefix->source.find("const long long l_ = -1073741824LL, h_ = max_ll_((255LL), (1LL) * row_hi_ + (0LL));"), std::string::npos) << prefix->source;
  // causal S 4k (16.5 key tiles per work tile) on persistent blocks, as S 1k
  std::string refusal;
  auto c = emit(compile("causal", {{"B", 4}, {"S", 4096}}), &refusal);
  ASSERT_TRUE(c) << refusal;
  EXPECT_NE(c->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos);
  EXPECT_NE(c->source.find("(1LL) * row_hi_ + (0LL)"), std::string::npos);
}

TEST(AttentionSkeletonEmit, GqaMapsQueryHeadsOnKvHeads) {
  std::string refusal;
  auto k = emit(compile("gqa", {}), &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_EQ(k->info.attention->heads, 16);
  EXPECT_EQ(k->info.attention->heads_kv, 2);
  EXPECT_EQ(k->info.attention->k.batch, 32);
  EXPECT_NE(k->summary.find("GQA 16 heads on 2 KV heads"), std::string::npos) << k->summary;
}

TEST(AttentionSkeletonEmit, HeadDim128TakesTheTwoStageConfig) {
  std::string refusal;
  // one block per work tile at S 1k too (persistent blocks measured slower at hd128), the staged
  // epilogue in the Q rows
  auto k = emit(compile("vanilla", {{"D", 128}}), &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, false, 0, 1, 0, false, false, true>;"), std::string::npos);
  EXPECT_EQ(k->info.attention->q.k, 128);
  EXPECT_EQ(k->info.blocks, 8 * 256);
  // causal S 1k: persistent blocks, one Q buffer, 3 stages, and the staged epilogue's 32 KB in place of
  // the third stage (2 stages); with $SOLDER_ATTN_EPI=0 3 stages; with $SOLDER_ATTN_SHORT=all two Q
  // buffers (2 x 32 KB) and 2 K/V stages (2 x 64 KB) within 227 KB
  auto causal = emit(compile("causal", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_EPI", "0", 1);
  auto causal3 = emit(compile("causal", {{"D", 128}}), &refusal);
  unsetenv("SOLDER_ATTN_EPI");
  ASSERT_TRUE(causal && causal3) << refusal;
  EXPECT_NE(causal->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, true, true, true, true>;"), std::string::npos) << causal->summary;
  EXPECT_EQ(causal->info.shared_bytes, 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2 + 128 * 128 * 2 + 8 * (2 + 4 * 2) + 1024);
  EXPECT_NE(causal3->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 3, 2, true, 0, 1, 0, true, true, false, true>;"), std::string::npos) << causal3->summary;
  setenv("SOLDER_ATTN_SHORT", "all", 1);
  auto all = emit(compile("vanilla", {{"D", 128}}), &refusal);
  unsetenv("SOLDER_ATTN_SHORT");
  ASSERT_TRUE(all) << refusal;
  EXPECT_NE(all->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true, 0, 2>;"), std::string::npos) << all->summary;
  EXPECT_EQ(all->info.shared_bytes, 2 * 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2 + 8 * (2 * 2 + 4 * 2) + 1024);
  EXPECT_LE(all->info.shared_bytes, 232448);
}

// Short sequences at hd64 (at most 8 key tiles of 128 per work tile) without a data mask or a bias:
// persistent blocks of 128 rows with two Q buffers, for unmasked rows too (vanilla, gqa at S 1k), and
// there the consumers staggered by 2 turns on a 6-stage ring (not under a mask: causal keeps 4 stages).
// The A/B knobs: $SOLDER_ATTN_STAGGER=N (0: no stagger, 4 stages; masked kernels too),
// $SOLDER_ATTN_STAGES=N, $SOLDER_ATTN_QBUFFERS=1 keeps one Q buffer (and no stagger),
// $SOLDER_ATTN_SHORT=old the previous choice (one 192-row block per tile unmasked, one Q buffer under a
// mask), =all this schedule at S 4k.
TEST(AttentionSkeletonEmit, ShortRowsRunOnPersistentBlocksWithTwoQBuffers) {
  std::string refusal;
  for (const char* name : {"vanilla", "gqa", "causal"}) {
    auto k = emit(compile(name, {}), &refusal);
    ASSERT_TRUE(k) << name << ": " << refusal;
    const bool masked = std::string(name) == "causal";
    const int stages = masked ? 4 : 6;
    EXPECT_NE(k->source.find(masked ? "Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;" : "Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>;"),
              std::string::npos)
        << name << ": " << k->summary;
    EXPECT_EQ(k->info.blocks, 132) << name;
    EXPECT_EQ(k->info.threads, 384) << name;
    EXPECT_EQ(k->info.shared_bytes, 2 * 128 * 64 * 2 + 2 * stages * 128 * 64 * 2 + (masked ? 128 * 64 * 2 : 0) + 8 * (2 * 2 + 4 * stages) + 1024) << name;
    EXPECT_LE(k->info.shared_bytes, 232448) << name;
    EXPECT_NE(k->summary.find("2 Q buffers: the next work tile's Q, K and V load while this one runs"), std::string::npos) << name << ": " << k->summary;
    EXPECT_EQ(k->summary.find("consumer 1 staggered 2 turns behind consumer 0") != std::string::npos, !masked) << name << ": " << k->summary;
    EXPECT_EQ(k->summary.find("claimed from a counter") != std::string::npos, masked) << name << ": " << k->summary;
  }
  // fewer work tiles than SMs: one persistent block each
  auto few = emit(compile("vanilla", {{"B", 2}, {"H", 3}, {"S", 512}}), &refusal);
  ASSERT_TRUE(few) << refusal;
  EXPECT_NE(few->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>;"), std::string::npos);
  EXPECT_EQ(few->info.blocks, 4 * 6);
  // a score that is not the dot product itself (softcap) keeps its configuration
  auto soft = emit(compile("softcap", {}), &refusal);
  ASSERT_TRUE(soft) << refusal;
  EXPECT_NE(soft->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2>;"), std::string::npos);

  // the stagger knobs: 0 is the previous Config exactly; N staggers masked kernels too (causal); the
  // stages where they fit (7 do not)
  setenv("SOLDER_ATTN_STAGGER", "0", 1);
  auto s0 = emit(compile("vanilla", {}), &refusal);
  setenv("SOLDER_ATTN_STAGGER", "1", 1);
  auto s1 = emit(compile("causal", {}), &refusal);
  setenv("SOLDER_ATTN_STAGGER", "3", 1);
  setenv("SOLDER_ATTN_STAGES", "4", 1);
  auto s3 = emit(compile("gqa", {}), &refusal);
  setenv("SOLDER_ATTN_STAGES", "7", 1);
  auto s7 = emit(compile("gqa", {}), &refusal);
  unsetenv("SOLDER_ATTN_STAGGER");
  unsetenv("SOLDER_ATTN_STAGES");
  ASSERT_TRUE(s0 && s1 && s3 && s7) << refusal;
  EXPECT_NE(s0->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2>;"), std::string::npos) << s0->summary;
  EXPECT_EQ(s0->summary.find("staggered"), std::string::npos) << s0->summary;
  // (a staggered kernel never claims its tiles from the counter: config.cuh refuses Dynamic with Stagger)
  EXPECT_NE(s1->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 1>;"), std::string::npos) << s1->summary;
  EXPECT_NE(s3->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 3>;"), std::string::npos) << s3->summary;
  EXPECT_NE(s7->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 3>;"), std::string::npos) << s7->summary;

  setenv("SOLDER_ATTN_QBUFFERS", "1", 1);
  auto q1 = emit(compile("vanilla", {}), &refusal);
  unsetenv("SOLDER_ATTN_QBUFFERS");
  ASSERT_TRUE(q1) << refusal;
  EXPECT_NE(q1->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true>;"), std::string::npos);

  setenv("SOLDER_ATTN_SHORT", "old", 1);
  auto old_vanilla = emit(compile("vanilla", {}), &refusal);
  auto old_causal = emit(compile("causal", {}), &refusal);
  unsetenv("SOLDER_ATTN_SHORT");
  ASSERT_TRUE(old_vanilla && old_causal) << refusal;
  EXPECT_NE(old_vanilla->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos);
  EXPECT_EQ(old_vanilla->info.blocks, (1024 + 191) / 192 * 256);
  EXPECT_NE(old_causal->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, false, false, true>;"), std::string::npos);

  setenv("SOLDER_ATTN_SHORT", "all", 1);
  auto all = emit(compile("causal", {{"B", 4}, {"S", 4096}}), &refusal);
  unsetenv("SOLDER_ATTN_SHORT");
  ASSERT_TRUE(all) << refusal;
  EXPECT_NE(all->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos);

  // the counter knob: 0 is the snake's fixed rounds (the previous Config exactly), 1 takes the counter
  // on unmasked persistent kernels too, but never on a staggered one (vanilla's default stagger keeps
  // the rounds; with the stagger off it claims) and never with one block per tile
  setenv("SOLDER_ATTN_DYNAMIC", "0", 1);
  auto d0 = emit(compile("causal", {}), &refusal);
  setenv("SOLDER_ATTN_DYNAMIC", "1", 1);
  auto d1_staggered = emit(compile("vanilla", {}), &refusal);
  setenv("SOLDER_ATTN_STAGGER", "0", 1);
  auto d1 = emit(compile("vanilla", {}), &refusal);
  unsetenv("SOLDER_ATTN_STAGGER");
  auto d1_long = emit(compile("causal", {{"B", 1}, {"S", 16384}}), &refusal);
  unsetenv("SOLDER_ATTN_DYNAMIC");
  ASSERT_TRUE(d0 && d1_staggered && d1 && d1_long) << refusal;
  EXPECT_NE(d0->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, false, false, true>;"), std::string::npos) << d0->summary;
  EXPECT_NE(d0->summary.find("snake order"), std::string::npos) << d0->summary;
  EXPECT_NE(d1_staggered->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>;"), std::string::npos) << d1_staggered->summary;
  EXPECT_EQ(d1_staggered->summary.find("claimed from a counter"), std::string::npos) << d1_staggered->summary;
  EXPECT_NE(d1->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true>;"), std::string::npos) << d1->summary;
  EXPECT_NE(d1->summary.find("claimed from a counter"), std::string::npos) << d1->summary;
  EXPECT_NE(d1_long->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos) << d1_long->summary;
}

// Free consumers (Config::FreeConsumers, the last template argument): by default on causal's Dynamic
// kernel at S 1k (a mask of one comparison) and, with the staged epilogue, on the same kernel of a mask of
// two comparisons (sliding_window, prefix_lm S 1k); $SOLDER_ATTN_FREE=0 keeps the turns there, =1 frees
// every two-consumer kernel without a data mask, in place of a stagger (vanilla keeps its 6 stages); never
// with 3 consumers (causal S 16k, prefix_lm S 16k). prefix_lm S 4k takes the two comparisons' kernel too.
TEST(AttentionSkeletonEmit, FreeConsumersByKnob) {
  std::string refusal;
  setenv("SOLDER_ATTN_FREE", "1", 1);
  auto causal = emit(compile("causal", {}), &refusal);
  auto vanilla = emit(compile("vanilla", {}), &refusal);
  auto causal_long = emit(compile("causal", {{"B", 1}, {"S", 16384}}), &refusal);
  auto causal_hd128 = emit(compile("causal", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_FREE", "0", 1);
  auto turns = emit(compile("causal", {}), &refusal);
  unsetenv("SOLDER_ATTN_FREE");
  auto plain = emit(compile("causal", {}), &refusal);
  auto sliding = emit(compile("sliding_window", {}), &refusal);
  auto sliding_long = emit(compile("sliding_window", {{"B", 1}, {"S", 16384}}), &refusal);
  auto prefix = emit(compile("prefix_lm", {}), &refusal);
  auto prefix_long = emit(compile("prefix_lm", {{"B", 4}, {"S", 4096}}), &refusal);
  setenv("SOLDER_ATTN_FREE", "0", 1);
  auto sliding_turns = emit(compile("sliding_window", {}), &refusal);
  unsetenv("SOLDER_ATTN_FREE");
  ASSERT_TRUE(causal && vanilla && causal_long && causal_hd128 && turns && plain && sliding && sliding_long && prefix && prefix_long && sliding_turns) << refusal;
  EXPECT_NE(causal->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos) << causal->summary;
  EXPECT_NE(causal->summary.find("free consumer warpgroups"), std::string::npos) << causal->summary;
  EXPECT_NE(vanilla->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 0, false, true>;"), std::string::npos) << vanilla->summary;
  EXPECT_EQ(vanilla->summary.find("staggered"), std::string::npos) << vanilla->summary;
  EXPECT_NE(causal_long->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos) << causal_long->summary;
  EXPECT_NE(causal_hd128->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, true, true, true, true>;"), std::string::npos) << causal_hd128->summary;
  EXPECT_NE(turns->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, false, true, true>;"), std::string::npos) << turns->summary;
  EXPECT_NE(turns->summary.find("in ping-pong"), std::string::npos) << turns->summary;
  EXPECT_NE(plain->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos) << plain->summary;
  EXPECT_NE(plain->summary.find("free consumer warpgroups"), std::string::npos) << plain->summary;
  // a mask of two comparisons: causal's Config (free consumers and the staged epilogue), not on 3 consumers
  for (const auto* e : {&sliding, &sliding_long, &prefix}) {
    EXPECT_NE((*e)->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true>;"), std::string::npos) << (*e)->summary;
    EXPECT_NE((*e)->summary.find("free consumer warpgroups"), std::string::npos) << (*e)->summary;
  }
  // prefix_lm S 4k (16.6 key tiles per work tile on average) on the same kernel; $SOLDER_ATTN_TWO_LONG=0 (or
  // $SOLDER_ATTN_CAUSAL=old): the previous 3-consumer kernel, one block per work tile; S 16k (64.5) keeps it
  // (with the posted work-tile setup, causal's: the one difference from prefix_lm S 1k's Config)
  EXPECT_NE(prefix_long->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos) << prefix_long->summary;
  EXPECT_NE(prefix_long->summary.find("posted by the producer with its entry"), std::string::npos) << prefix_long->summary;
  EXPECT_EQ(prefix_long->info.blocks, 132);
  setenv("SOLDER_ATTN_TWO_LONG", "0", 1);
  auto prefix_long_old = emit(compile("prefix_lm", {{"B", 4}, {"S", 4096}}), &refusal);
  unsetenv("SOLDER_ATTN_TWO_LONG");
  setenv("SOLDER_ATTN_CAUSAL", "old", 1);
  auto prefix_long_causal_old = emit(compile("prefix_lm", {{"B", 4}, {"S", 4096}}), &refusal);
  unsetenv("SOLDER_ATTN_CAUSAL");
  auto prefix_16k = emit(compile("prefix_lm", {{"B", 1}, {"S", 16384}}), &refusal);
  ASSERT_TRUE(prefix_long_old && prefix_long_causal_old && prefix_16k) << refusal;
  for (const auto* e : {&prefix_long_old, &prefix_long_causal_old, &prefix_16k})
    EXPECT_NE((*e)->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3>;"), std::string::npos) << (*e)->summary;
  // with the turns, no staged epilogue either (it measured slower than the turns alone there)
  EXPECT_NE(sliding_turns->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true>;"), std::string::npos) << sliding_turns->summary;
}

// $SOLDER_ATTN_EXP2_EMU=K (1..16) writes kExp2Emulated = K in the score functor (K of 16 weights by exp2_poly on
// the FMA pipe, functors.cuh), the dual mode's too; unset, 0 or a value outside 1..16: no member, the source
// as before. The Config does not change.
TEST(AttentionSkeletonEmit, Exp2EmulationByKnob) {
  std::string refusal;
  auto plain = emit(compile("vanilla", {}), &refusal);
  setenv("SOLDER_ATTN_EXP2_EMU", "4", 1);
  auto vanilla = emit(compile("vanilla", {}), &refusal);
  auto alibi = emit(compile("alibi", {{"B", 4}, {"S", 4096}}), &refusal);
  auto diff = emit(compile("diff_attn", {}), &refusal);
  setenv("SOLDER_ATTN_EXP2_EMU", "0", 1);
  auto zero = emit(compile("vanilla", {}), &refusal);
  setenv("SOLDER_ATTN_EXP2_EMU", "17", 1);
  auto over = emit(compile("vanilla", {}), &refusal);
  setenv("SOLDER_ATTN_EXP2_EMU", "4x", 1);
  auto junk = emit(compile("vanilla", {}), &refusal);
  unsetenv("SOLDER_ATTN_EXP2_EMU");
  ASSERT_TRUE(plain && vanilla && alibi && diff && zero && over && junk) << refusal;
  const std::string member = "static constexpr int kExp2Emulated = 4;";
  for (const auto* e : {&vanilla, &alibi, &diff}) EXPECT_NE((*e)->source.find(member), std::string::npos) << (*e)->summary;
  EXPECT_EQ(plain->source.find("kExp2Emulated"), std::string::npos);
  for (const auto* e : {&zero, &over, &junk}) EXPECT_EQ((*e)->source, plain->source);
  std::string without = vanilla->source;
  without.erase(without.find("  " + member), without.find('\n', without.find(member)) + 1 - without.find("  " + member));
  EXPECT_EQ(without, plain->source);
}

// The staged epilogue (Config::StagedEpilogue, the last template argument: O through shared memory,
// 16-byte row stores): $SOLDER_ATTN_EPI=1 takes it on a plain 16-bit output at the full head dim, with
// a K/V stage fewer where its buffer does not fit beside the ring (vanilla's 6 stages -> 5, hd128 S 1k's
// 3 -> 2; causal S 1k keeps its 4), and gives the epilogue functor staged_pack() and staged_row(); not where the head
// dim is padded (its padding columns are not stored) nor with evoformer's preloaded gate. By default on
// causal's kernels (hd64 S 1k: its 4 stages; hd128 S 1k: 3 -> 2 stages) and sliding_window's (with its
// free consumers), not on vanilla's staggered one nor on three consumers (alibi S 4k); =0: the Config and
// the functor as before.
TEST(AttentionSkeletonEmit, StagedEpilogueByKnob) {
  std::string refusal;
  setenv("SOLDER_ATTN_EPI", "1", 1);
  auto causal = emit(compile("causal", {}), &refusal);
  auto vanilla = emit(compile("vanilla", {}), &refusal);
  auto causal_hd128 = emit(compile("causal", {{"D", 128}}), &refusal);
  auto padded = emit(compile("causal", {{"D", 32}}), &refusal);
  auto evoformer = emit(compile("evoformer", {}), &refusal);
  setenv("SOLDER_ATTN_EPI", "0", 1);
  auto off = emit(compile("causal", {}), &refusal);
  unsetenv("SOLDER_ATTN_EPI");
  auto plain = emit(compile("causal", {}), &refusal);
  auto plain_vanilla = emit(compile("vanilla", {}), &refusal);
  auto plain_sliding = emit(compile("sliding_window", {}), &refusal);
  auto plain_alibi_long = emit(compile("alibi", {{"B", 4}, {"S", 4096}}), &refusal);
  ASSERT_TRUE(causal && vanilla && causal_hd128 && padded && evoformer && off && plain && plain_vanilla && plain_sliding && plain_alibi_long) << refusal;
  EXPECT_NE(causal->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos) << causal->summary;
  EXPECT_NE(causal->source.find("static constexpr bool kStaged = true;"), std::string::npos);
  EXPECT_NE(causal->source.find("__device__ void* staged_row(int bh_, int row_) const {"), std::string::npos);
  EXPECT_NE(causal->summary.find("through shared memory, 16-byte row stores"), std::string::npos) << causal->summary;
  EXPECT_NE(vanilla->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2, false, false, true>;"), std::string::npos) << vanilla->summary;
  EXPECT_NE(causal_hd128->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, true, true, true, true>;"), std::string::npos)
      << causal_hd128->summary;
  EXPECT_NE(plain_sliding->source.find("static constexpr bool kStaged = true;"), std::string::npos) << plain_sliding->summary;
  for (const auto* e : {&padded, &evoformer, &off, &plain_vanilla, &plain_alibi_long}) {
    EXPECT_EQ((*e)->source.find("kStaged = true;"), std::string::npos) << (*e)->summary;
    EXPECT_EQ((*e)->source.find(", true, true, true>;"), std::string::npos) << (*e)->summary;
  }
  EXPECT_NE(off->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, false, true>;"), std::string::npos) << off->summary;
  EXPECT_EQ(causal->source, plain->source);
  EXPECT_NE(plain_vanilla->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>;"), std::string::npos) << plain_vanilla->summary;
}

// The staged epilogue in the Q rows on persistent blocks (Config::QRowsEpilogue, the last template
// argument): $SOLDER_ATTN_EPIQ=1 takes it on vanilla / gqa's staggered kernel at its 6 stages (the
// dedicated buffer of $SOLDER_ATTN_EPI=1 costs the sixth), with the staged functor; on causal's Dynamic
// kernel at its 4 stages; not past the Q protocol's bound (a stagger of 3 turns: the per-pair stores
// and the 6 stages as without it) nor with a data mask (document_mask keeps its dedicated buffer); with
// $SOLDER_ATTN_EPI=0 nowhere.
TEST(AttentionSkeletonEmit, QRowsEpilogueByKnob) {
  std::string refusal;
  setenv("SOLDER_ATTN_EPIQ", "1", 1);
  auto vanilla = emit(compile("vanilla", {}), &refusal);
  auto gqa = emit(compile("gqa", {}), &refusal);
  auto causal = emit(compile("causal", {}), &refusal);
  auto docmask = emit(compile("document_mask", {}), &refusal);
  setenv("SOLDER_ATTN_STAGGER", "3", 1);
  auto stagger3 = emit(compile("vanilla", {}), &refusal);
  unsetenv("SOLDER_ATTN_STAGGER");
  setenv("SOLDER_ATTN_EPI", "0", 1);
  auto off = emit(compile("vanilla", {}), &refusal);
  unsetenv("SOLDER_ATTN_EPI");
  unsetenv("SOLDER_ATTN_EPIQ");
  auto plain_docmask = emit(compile("document_mask", {}), &refusal);
  ASSERT_TRUE(vanilla && gqa && causal && docmask && stagger3 && off && plain_docmask) << refusal;
  const std::string staggered_q_rows = "Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2, false, false, true, false, true>;";
  EXPECT_NE(vanilla->source.find(staggered_q_rows), std::string::npos) << vanilla->summary;
  EXPECT_NE(gqa->source.find(staggered_q_rows), std::string::npos) << gqa->summary;
  EXPECT_NE(vanilla->source.find("static constexpr bool kStaged = true;"), std::string::npos);
  EXPECT_NE(vanilla->summary.find("each consumer's own Q rows, Q released after the epilogue"), std::string::npos) << vanilla->summary;
  EXPECT_EQ(vanilla->info.shared_bytes, 2 * 128 * 64 * 2 + 6 * 2 * 128 * 64 * 2 + 8 * (4 + 24) + 1024) << vanilla->summary;
  EXPECT_NE(causal->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true, true>;"), std::string::npos)
      << causal->summary;
  EXPECT_NE(stagger3->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 3>;"), std::string::npos) << stagger3->summary;
  EXPECT_NE(off->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>;"), std::string::npos) << off->summary;
  EXPECT_EQ(docmask->source, plain_docmask->source);
}

// The TMA-stored epilogue ($SOLDER_ATTN_O_STORE=tma, functors.cuh kTmaStore): vanilla / gqa hd64 S 1k's
// staggered kernel takes the staged epilogue in its Q rows at its 6 stages (the shared memory of
// QRowsEpilogue: no byte more) with kTmaStore and the output's map as the epilogue's last member after the
// pointers (sizeof checked in the source) and launch.out (o as {64, 1024, 16 heads}, box {64, 16});
// vanilla hd128's one-block-per-tile staged epilogue stores by TMA too; a stagger of 3 turns (no staged
// epilogue) and unset keep main's kernel; an unknown value refuses.
TEST(AttentionSkeletonEmit, TmaStoreOByKnob) {
  std::string refusal;
  auto plain = emit(compile("vanilla", {}), &refusal);
  setenv("SOLDER_ATTN_O_STORE", "regs", 1);
  auto regs = emit(compile("vanilla", {}), &refusal);
  setenv("SOLDER_ATTN_O_STORE", "tma", 1);
  auto vanilla = emit(compile("vanilla", {}), &refusal);
  auto gqa = emit(compile("gqa", {}), &refusal);
  auto hd128 = emit(compile("vanilla", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_STAGGER", "3", 1);
  auto stagger3 = emit(compile("vanilla", {}), &refusal);
  unsetenv("SOLDER_ATTN_STAGGER");
  ASSERT_TRUE(plain && regs && vanilla && gqa && hd128 && stagger3) << refusal;
  setenv("SOLDER_ATTN_O_STORE", "stg", 1);
  std::string bad;
  auto unknown = emit(compile("vanilla", {}), &bad);
  unsetenv("SOLDER_ATTN_O_STORE");
  EXPECT_FALSE(unknown);
  EXPECT_NE(bad.find("SOLDER_ATTN_O_STORE=stg"), std::string::npos) << bad;
  EXPECT_EQ(regs->source, plain->source);
  EXPECT_FALSE(plain->info.attention->out.has_value());
  const std::string staggered_q_rows = "Config<solder::gemm::Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2, false, false, true, false, true>;";
  for (const auto* e : {&vanilla, &gqa}) {
    EXPECT_NE((*e)->source.find(staggered_q_rows), std::string::npos) << (*e)->summary;
    EXPECT_NE((*e)->source.find("static constexpr bool kTmaStore = true;\n  solder::attention::TensorMap out_map;"), std::string::npos);
    EXPECT_NE((*e)->source.find("static_assert(sizeof("), std::string::npos);
    EXPECT_NE((*e)->source.find("SOLDER_ATTENTION_KERNEL_TMA_STORE("), std::string::npos);
    EXPECT_NE((*e)->summary.find("one TMA store of 16 rows x 64 columns per consumer warp"), std::string::npos) << (*e)->summary;
    EXPECT_EQ((*e)->info.shared_bytes, 2 * 128 * 64 * 2 + 6 * 2 * 128 * 64 * 2 + 8 * (4 + 24) + 1024) << (*e)->summary;
    ASSERT_TRUE((*e)->info.attention->out.has_value());
  }
  const auto& o = *vanilla->info.attention->out;
  EXPECT_EQ(o.rows, 1024);
  EXPECT_EQ(o.k, 64);
  EXPECT_EQ(o.ld, 64);
  EXPECT_EQ(o.batch, vanilla->info.attention->batch * vanilla->info.attention->heads);
  EXPECT_EQ(o.batch_stride, 1024 * 64);
  EXPECT_EQ(o.tile_rows, 16);
  EXPECT_EQ(o.tile_k, 64);
  EXPECT_EQ(o.dtype, 0);
  EXPECT_NE(hd128->source.find("static constexpr bool kTmaStore = true;"), std::string::npos) << hd128->summary;
  ASSERT_TRUE(hd128->info.attention->out.has_value());
  EXPECT_EQ(hd128->info.attention->out->k, 128);
  EXPECT_EQ(stagger3->source.find("kTmaStore"), std::string::npos) << stagger3->summary;
  EXPECT_FALSE(stagger3->info.attention->out.has_value());
}

// The staged epilogue on one block per work tile (vanilla at hd128, vanilla / gqa at hd64 from S 4k):
// its buffer is each consumer's own Q rows (Config::EpilogueInQ), so it keeps every stage there (hd128:
// 2; hd64's 3 consumers: 4), by default with the plain score and no mask (not alibi's affine score, not
// diff_attn's fixed lead index; causal S 4k is persistent); $SOLDER_ATTN_EPI=0 keeps the per-pair stores,
// and $SOLDER_ATTN_STAGES=N sets the depth of such a kernel where N stages fit (hd128: 3, not 4: 32 KB
// of Q + 4 x 64 KB is over 227 KB).
TEST(AttentionSkeletonEmit, StagedEpilogueInQRows) {
  std::string refusal;
  auto by_default = emit(compile("vanilla", {{"D", 128}}), &refusal);
  auto gqa_long = emit(compile("gqa", {{"B", 4}, {"S", 4096}}), &refusal);
  auto alibi_long = emit(compile("alibi", {{"B", 4}, {"S", 4096}}), &refusal);
  auto causal_long = emit(compile("causal", {{"B", 4}, {"S", 4096}}), &refusal);
  ASSERT_TRUE(by_default && gqa_long && alibi_long && causal_long) << refusal;
  EXPECT_NE(by_default->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, false, 0, 1, 0, false, false, true>;"), std::string::npos) << by_default->summary;
  EXPECT_NE(by_default->summary.find("through shared memory, 16-byte row stores"), std::string::npos) << by_default->summary;
  EXPECT_NE(gqa_long->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos) << gqa_long->summary;
  EXPECT_EQ(alibi_long->source.find("kStaged = true;"), std::string::npos) << alibi_long->summary;
  // (causal S 4k: on persistent blocks with the dedicated buffer, CausalRowsOnPersistentBlocks)
  EXPECT_NE(causal_long->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos) << causal_long->summary;
  setenv("SOLDER_ATTN_EPI", "1", 1);
  auto hd128 = emit(compile("vanilla", {{"D", 128}}), &refusal);
  auto hd64_long = emit(compile("vanilla", {{"B", 4}, {"S", 4096}}), &refusal);
  setenv("SOLDER_ATTN_STAGES", "3", 1);
  auto hd128_s3 = emit(compile("vanilla", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_STAGES", "4", 1);
  auto hd128_s4 = emit(compile("vanilla", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_EPI", "0", 1);
  auto hd128_off = emit(compile("vanilla", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_STAGES", "3", 1);
  auto hd128_plain_s3 = emit(compile("vanilla", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_STAGES", "6", 1);
  auto hd64_long_s6 = emit(compile("vanilla", {{"B", 4}, {"S", 4096}}), &refusal);
  unsetenv("SOLDER_ATTN_STAGES");
  unsetenv("SOLDER_ATTN_EPI");
  ASSERT_TRUE(hd128 && hd64_long && hd128_s3 && hd128_s4 && hd128_off && hd128_plain_s3 && hd64_long_s6) << refusal;
  EXPECT_EQ(hd128->source, by_default->source);
  EXPECT_NE(hd128_off->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2>;"), std::string::npos) << hd128_off->summary;
  EXPECT_NE(hd128->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, false, 0, 1, 0, false, false, true>;"), std::string::npos) << hd128->summary;
  EXPECT_NE(hd128->source.find("static constexpr bool kStaged = true;"), std::string::npos);
  EXPECT_NE(hd64_long->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos) << hd64_long->summary;
  EXPECT_NE(hd128_s3->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 3, 2, false, 0, 1, 0, false, false, true>;"), std::string::npos) << hd128_s3->summary;
  EXPECT_NE(hd128_s4->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, false, 0, 1, 0, false, false, true>;"), std::string::npos) << hd128_s4->summary;
  EXPECT_NE(hd128_plain_s3->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 3, 2>;"), std::string::npos) << hd128_plain_s3->summary;
  EXPECT_EQ(hd128_plain_s3->source.find("kStaged = true;"), std::string::npos);
  EXPECT_NE(hd64_long_s6->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 6, 3>;"), std::string::npos) << hd64_long_s6->summary;
}

// The work tile's setup posted with its entry (Config's PostedWork): $SOLDER_ATTN_POSTED=1 takes it on every
// Dynamic kernel (causal and sliding_window S 1k; on document_mask's the classifier warps post it with each
// list), not where there is no work ring (causal S 16k: one block per work tile); =0 nowhere. By default on
// causal's Dynamic kernels (S 1k and 4k), not on sliding_window's (free consumers and the staged epilogue by
// default there) nor on document_mask's.
TEST(AttentionSkeletonEmit, PostedWorkByKnob) {
  std::string refusal;
  setenv("SOLDER_ATTN_POSTED", "1", 1);
  auto causal = emit(compile("causal", {}), &refusal);
  auto sliding = emit(compile("sliding_window", {}), &refusal);
  auto documents = emit(compile("document_mask", {}), &refusal);
  auto longer = emit(compile("causal", {{"B", 1}, {"S", 16384}}), &refusal);
  setenv("SOLDER_ATTN_POSTED", "0", 1);
  auto off = emit(compile("causal", {}), &refusal);
  unsetenv("SOLDER_ATTN_POSTED");
  auto plain = emit(compile("causal", {}), &refusal);
  auto plain_long = emit(compile("causal", {{"B", 4}, {"S", 4096}}), &refusal);
  auto plain_sliding = emit(compile("sliding_window", {}), &refusal);
  ASSERT_TRUE(causal && sliding && documents && longer && off && plain && plain_long && plain_sliding) << refusal;
  EXPECT_EQ(plain->source, causal->source);
  EXPECT_NE(plain_long->summary.find("posted by the producer with its entry"), std::string::npos) << plain_long->summary;
  EXPECT_EQ(plain_sliding->summary.find("posted by the producer"), std::string::npos) << plain_sliding->summary;
  EXPECT_NE(causal->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos)
      << causal->summary;
  EXPECT_NE(causal->summary.find("posted by the producer with its entry"), std::string::npos) << causal->summary;
  EXPECT_NE(sliding->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos)
      << sliding->summary;
  for (const auto* e : {&documents, &longer, &off}) EXPECT_EQ((*e)->summary.find("posted by the producer"), std::string::npos) << (*e)->summary;
  EXPECT_NE(documents->summary.find("posted by the classifier warps with its list"), std::string::npos) << documents->summary;
  EXPECT_NE(documents->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true, false, true, true>;"), std::string::npos)
      << documents->summary;
  EXPECT_NE(off->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true>;"), std::string::npos) << off->summary;
  EXPECT_NE(longer->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>;"), std::string::npos) << longer->summary;
}

// A data mask keeps one Q buffer on its persistent kernel; $SOLDER_ATTN_QBUFFERS=2 takes two there (the
// staged epilogue's buffer and the 4-stage ring still fit: 2 x 16 KB + 4 x 32 KB + 16 KB at S 4k).
TEST(AttentionSkeletonEmit, DataMaskTwoQBuffersByKnob) {
  std::string refusal;
  auto plain = emit(compile("document_mask", {{"B", 4}, {"S", 4096}}), &refusal);
  setenv("SOLDER_ATTN_QBUFFERS", "2", 1);
  auto two = emit(compile("document_mask", {{"B", 4}, {"S", 4096}}), &refusal);
  auto two_1k = emit(compile("document_mask", {}), &refusal);
  unsetenv("SOLDER_ATTN_QBUFFERS");
  ASSERT_TRUE(plain && two && two_1k) << refusal;
  EXPECT_NE(plain->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>;"), std::string::npos) << plain->summary;
  EXPECT_NE(two->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, false, true>;"), std::string::npos) << two->summary;
  EXPECT_NE(two->summary.find("2 Q buffers"), std::string::npos) << two->summary;
  EXPECT_NE(two_1k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 0, 2, 0, true, false, true>;"), std::string::npos) << two_1k->summary;
}

// Causal's rows (a mask of one comparison, the plain score) on persistent blocks past 8 key tiles per work
// tile too: hd64 up to 32 (S 4k), hd128 at every length (two Q buffers, Dynamic, free consumers, the
// staged epilogue, the posted setup; S 1k keeps one Q buffer); hd64 S 16k on 3 consumers with the staged
// epilogue. $SOLDER_ATTN_CAUSAL=old: the previous Configs (one block per tile, per-pair stores).
TEST(AttentionSkeletonEmit, CausalRowsOnPersistentBlocks) {
  std::string refusal;
  auto hd128_4k = emit(compile("causal", {{"B", 4}, {"S", 4096}, {"D", 128}}), &refusal);
  auto hd128_16k = emit(compile("causal", {{"B", 1}, {"S", 16384}, {"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_CAUSAL", "old", 1);
  auto old_4k = emit(compile("causal", {{"B", 4}, {"S", 4096}}), &refusal);
  auto old_hd128_4k = emit(compile("causal", {{"B", 4}, {"S", 4096}, {"D", 128}}), &refusal);
  auto old_hd128_1k = emit(compile("causal", {{"D", 128}}), &refusal);
  unsetenv("SOLDER_ATTN_CAUSAL");
  ASSERT_TRUE(hd128_4k && hd128_16k && old_4k && old_hd128_4k && old_hd128_1k) << refusal;
  for (const auto* e : {&hd128_4k, &hd128_16k}) {
    EXPECT_NE((*e)->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, true, true, true, true>;"), std::string::npos) << (*e)->summary;
    EXPECT_EQ((*e)->info.blocks, 132);
    EXPECT_LE((*e)->info.shared_bytes, 232448);
  }
  EXPECT_NE(old_4k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 3>;"), std::string::npos) << old_4k->summary;
  EXPECT_NE(old_hd128_4k->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2>;"), std::string::npos) << old_hd128_4k->summary;
  EXPECT_NE(old_hd128_1k->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, false, false, true>;"), std::string::npos) << old_hd128_1k->summary;
}

TEST(AttentionSkeletonEmit, RefusesWithTheRule) {
  std::string refusal;
  // small sizes: head dim 16, one key tile
  refusal.clear();
  EXPECT_FALSE(emit(compile("vanilla", {}, true), &refusal));
  EXPECT_FALSE(refusal.empty());
  // a ragged sequence
  refusal.clear();
  EXPECT_FALSE(emit(compile("vanilla", {{"S", 1000}}), &refusal));
  EXPECT_FALSE(refusal.empty());
  // the emitter's own schedule asked for
  setenv("SOLDER_MMA_PATH", "wgmma-serial", 1);
  refusal.clear();
  EXPECT_FALSE(emit(compile("vanilla", {}), &refusal));
  EXPECT_NE(refusal.find("SOLDER_MMA_PATH"), std::string::npos);
  unsetenv("SOLDER_MMA_PATH");
}

// document_mask: a data mask. The key tiles are classified per work tile from the min/max of the
// document ids (kDataTiles), skipped ones neither loaded nor computed; persistent blocks with the key
// tiles' id ranges in a table per batch (kColGroups).
TEST(AttentionSkeletonEmit, DocumentMaskClassifiesKeyTilesFromTheIds) {
  for (auto dims : {std::vector<std::pair<std::string, int64_t>>{}, std::vector<std::pair<std::string, int64_t>>{{"B", 1}, {"S", 16384}},
                    std::vector<std::pair<std::string, int64_t>>{{"D", 128}}}) {
    std::string refusal;
    auto k = emit(compile("document_mask", dims), &refusal);
    ASSERT_TRUE(k) << refusal;
    const int64_t seq = dims.size() == 2 ? 16384 : 1024, head_dim = dims.size() == 1 ? 128 : 64;
    // 64-key tiles at hd64 up to 1024 keys, else 128
    const int64_t bn = head_dim == 64 && seq <= 1024 ? 64 : 128;
    EXPECT_NE(k->source.find("static constexpr bool kDataTiles = true;"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find("static constexpr bool kEmptyRowNaN = true;"), std::string::npos);
    EXPECT_NE(k->source.find("static constexpr int kMaxKeyTiles = " + std::to_string(seq / bn) + ";"), std::string::npos) << k->source;
    // the ids of a row and of a key are the document ids of the block's batch at the global row / column
    EXPECT_NE(k->source.find(std::to_string(seq) + "LL + (row_))]"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find(std::to_string(seq) + "LL + (col_))]"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find("__device__ int row_id(int bh_, int row_) const {"), std::string::npos);
    EXPECT_NE(k->source.find("return (rid_ == cid_);"), std::string::npos) << k->source;
    // skipped when the ranges do not meet, full when both are one and the same id
    EXPECT_NE(k->source.find("if (!(((rid_lo_ <= cid_hi_) && (cid_lo_ <= rid_hi_)))) return 0;"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find("return 1;"), std::string::npos);
    // 2048 work tiles of 128 rows, 2 consumers: persistent blocks, one per SM, at every S; from 16 key
    // tiles per work tile (S 1k on 64-key tiles and S 16k here) the ids doc[b, j], which depend on the
    // batch alone, give a table of the key tiles' id ranges per batch (kColGroups) that each block
    // reduces once per batch; the schedule stated
    EXPECT_EQ(seq / 128 * (dims.size() == 2 ? 16 : 256), 2048);
    const int64_t batch = dims.size() == 2 ? 1 : 16;
    if (seq / bn < 16) {
      EXPECT_EQ(k->source.find("kColGroups"), std::string::npos) << k->source;
      EXPECT_EQ(k->summary.find("a table of"), std::string::npos) << k->summary;
    } else {
      EXPECT_NE(k->source.find("static constexpr int kColGroups = " + std::to_string(batch) + ";"), std::string::npos) << k->source;
      EXPECT_NE(k->source.find("__device__ int col_group(int bh_) const {"), std::string::npos) << k->source;
      // bh_ = b_t * 16 + h_t: the group is b_t, and group g's first head is bh_ = 16 g (at B = 1 no batch
      // variable: one group, 0)
      if (batch > 1) {
        EXPECT_NE(k->source.find("return static_cast<int>(0 + b_t * 1LL);"), std::string::npos) << k->source;
        EXPECT_NE(k->source.find("__device__ int group_bh(int group_) const { return static_cast<int>(0 + ((static_cast<long long>(group_) / 1LL) % " +
                                 std::to_string(batch) + "LL) * 16LL); }"),
                  std::string::npos)
            << k->source;
      } else {
        EXPECT_NE(k->source.find("__device__ int group_bh(int group_) const { return static_cast<int>(0); }"), std::string::npos) << k->source;
      }
      EXPECT_NE(k->summary.find("a table of " + std::to_string(batch) + " id groups x " + std::to_string(seq / bn) + " key tiles"), std::string::npos) << k->summary;
      // with the counter (hd64) each group's ranges when the block's first work tile in it is classified
      EXPECT_EQ(k->summary.find("a group when the block's first work tile in it is classified") != std::string::npos, head_dim == 64) << k->summary;
    }
    // hd64 claims its work tiles from the counter (Dynamic), hd128 keeps the snake
    EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, " + std::to_string(head_dim) + ", " + std::to_string(bn) + ", " +
                             (head_dim == 64 ? "4, 2, true, 0, 1, 0, true, false, true>;" : "2, 2, true>;")),
              std::string::npos)
        << k->source;
    EXPECT_EQ(k->info.blocks, 132);
    EXPECT_NE(k->summary.find("a data mask: key tiles where rid_ == cid_ holds for no pair of ids"), std::string::npos) << k->summary;
    EXPECT_NE(k->summary.find("walk in the same order"), std::string::npos) << k->summary;
    EXPECT_NE(k->summary.find("loaded once per tile right after S is issued, shared by shuffles"), std::string::npos) << k->summary;
    EXPECT_NE(k->tiles_and_skipping.find("(no loads, no MMA)"), std::string::npos) << k->tiles_and_skipping;
    EXPECT_NE(k->summary.find("on 132 persistent blocks"), std::string::npos) << k->summary;
    EXPECT_NE(k->summary.find("each next one by the producer warpgroup's three idle warps while the consumers run the current one"), std::string::npos) << k->summary;
    EXPECT_NE(k->summary.find(head_dim == 64 ? "claimed from a counter" : "block order: persistent blocks deal out the work tiles longest first"), std::string::npos) << k->summary;
    // one-id boundary tiles compared once per row (the default)
    EXPECT_NE(k->source.find("static constexpr bool kOneIdTiles = true;"), std::string::npos) << k->source;
    EXPECT_NE(k->tiles_and_skipping.find("on 132 persistent blocks"), std::string::npos) << k->tiles_and_skipping;
  }
}

// Without the id table ($SOLDER_ATTN_ID_TABLE=0, the previous kernel): persistent up to 32 key tiles per
// work tile, S 4096 persistent, S 8192 (64) one block per tile, no kColGroups; with it (the default)
// persistent at both. $SOLDER_ATTN_PERSISTENT=1 forces persistent blocks at S 16k without the table.
TEST(AttentionSkeletonEmit, DocumentMaskPersistentUpTo32KeyTilesWithoutTheIdTable) {
  for (const char* table : {"0", "1"}) {
    setenv("SOLDER_ATTN_ID_TABLE", table, 1);
    for (auto [seq, b, want] : {std::tuple{int64_t{4096}, int64_t{4}, true}, std::tuple{int64_t{8192}, int64_t{2}, false}}) {
      if (std::string(table) == "1") want = true;
      std::string refusal;
      auto k = emit(compile("document_mask", {{"B", b}, {"S", seq}}), &refusal);
      ASSERT_TRUE(k) << refusal;
      EXPECT_EQ(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>;") != std::string::npos, want) << seq;
      EXPECT_EQ(k->info.blocks, want ? 132 : seq / 128 * b * 16) << seq;
      EXPECT_EQ(k->source.find("kColGroups") != std::string::npos, std::string(table) == "1") << seq;
    }
  }
  setenv("SOLDER_ATTN_ID_TABLE", "0", 1);
  setenv("SOLDER_ATTN_PERSISTENT", "1", 1);
  std::string refusal;
  auto k = emit(compile("document_mask", {{"B", 1}, {"S", 16384}}), &refusal);
  unsetenv("SOLDER_ATTN_PERSISTENT");
  unsetenv("SOLDER_ATTN_ID_TABLE");
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>;"), std::string::npos);
  EXPECT_EQ(k->source.find("kColGroups"), std::string::npos);
  EXPECT_EQ(k->info.blocks, 132);
}

// The id table from 16 key tiles per work tile: at S 1k on 64-key tiles (16, the default), not on 128
// (8, $SOLDER_ATTN_DATA_BN=128), at S 2k (16 of 128); $SOLDER_ATTN_ID_TABLE=1 takes it at S 1k on 128
// too, =0 leaves it out on 64.
TEST(AttentionSkeletonEmit, DocumentMaskIdTableFrom16KeyTiles) {
  for (auto [seq, b, bn, want] : {std::tuple{int64_t{1024}, int64_t{16}, "128", false}, std::tuple{int64_t{1024}, int64_t{16}, "", true},
                                  std::tuple{int64_t{2048}, int64_t{8}, "", true}}) {
    if (*bn) setenv("SOLDER_ATTN_DATA_BN", bn, 1);
    std::string refusal;
    auto k = emit(compile("document_mask", {{"B", b}, {"S", seq}}), &refusal);
    unsetenv("SOLDER_ATTN_DATA_BN");
    ASSERT_TRUE(k) << refusal;
    EXPECT_EQ(k->source.find("static constexpr int kColGroups = " + std::to_string(b) + ";") != std::string::npos, want) << seq << " " << bn;
    EXPECT_EQ(k->info.blocks, 132) << seq;
  }
  setenv("SOLDER_ATTN_ID_TABLE", "1", 1);
  setenv("SOLDER_ATTN_DATA_BN", "128", 1);
  std::string refusal;
  auto k = emit(compile("document_mask", {}), &refusal);
  setenv("SOLDER_ATTN_ID_TABLE", "0", 1);
  unsetenv("SOLDER_ATTN_DATA_BN");
  auto none = emit(compile("document_mask", {}), &refusal);
  unsetenv("SOLDER_ATTN_ID_TABLE");
  ASSERT_TRUE(k && none) << refusal;
  EXPECT_NE(k->source.find("static constexpr int kColGroups = 16;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("static constexpr int kMaxKeyTiles = 8;"), std::string::npos) << k->source;
  EXPECT_EQ(none->source.find("kColGroups"), std::string::npos) << none->source;
  EXPECT_NE(none->source.find("static constexpr int kMaxKeyTiles = 16;"), std::string::npos) << none->source;
}

// A data mask at hd64 runs on 64-key tiles up to 1024 keys (S 1k, S 256), on 128 above (S 2k, 4k) and at
// hd128; $SOLDER_ATTN_DATA_BN=64|128 overrides it (A/B runs).
TEST(AttentionSkeletonEmit, DocumentMaskOn64KeyTilesUpTo1024Keys) {
  auto config_of = [](std::vector<std::pair<std::string, int64_t>> dims, const char* knob) {
    if (knob) setenv("SOLDER_ATTN_DATA_BN", knob, 1);
    std::string refusal;
    auto k = emit(compile("document_mask", dims), &refusal);
    unsetenv("SOLDER_ATTN_DATA_BN");
    EXPECT_TRUE(k) << refusal;
    if (!k) return std::string();
    const size_t at = k->source.find("Config<solder::gemm::Dtype::bf16, ");
    return at == std::string::npos ? std::string() : k->source.substr(at, k->source.find('>', at) - at + 1);
  };
  EXPECT_EQ(config_of({}, nullptr), "Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true, false, true>");
  EXPECT_EQ(config_of({{"S", 256}}, nullptr), "Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true, false, true>");
  EXPECT_EQ(config_of({{"B", 8}, {"S", 2048}}, nullptr), "Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>");
  EXPECT_EQ(config_of({{"B", 4}, {"S", 4096}}, nullptr), "Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>");
  EXPECT_EQ(config_of({{"D", 128}}, nullptr), "Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true>");
  EXPECT_EQ(config_of({}, "128"), "Config<solder::gemm::Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>");
  EXPECT_EQ(config_of({{"B", 4}, {"S", 4096}}, "64"), "Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true, false, true>");
}

// The staged epilogue (O through shared memory, 16-byte row stores) on a data mask's Dynamic hd64 kernel
// at every S, beside the 4-stage ring; not at hd128 (the snake, unmeasured there), not on the static
// kernel of $SOLDER_ATTN_DYNAMIC=0; $SOLDER_ATTN_EPI=0 leaves it out.
TEST(AttentionSkeletonEmit, DocumentMaskStagesTheEpilogueOnTheDynamicKernel) {
  for (auto dims : {std::vector<std::pair<std::string, int64_t>>{}, std::vector<std::pair<std::string, int64_t>>{{"B", 4}, {"S", 4096}},
                    std::vector<std::pair<std::string, int64_t>>{{"B", 1}, {"S", 16384}}}) {
    std::string refusal;
    auto k = emit(compile("document_mask", dims), &refusal);
    ASSERT_TRUE(k) << refusal;
    EXPECT_NE(k->source.find("static constexpr bool kStaged = true;"), std::string::npos) << k->source;
    EXPECT_NE(k->source.find(", 4, 2, true, 0, 1, 0, true, false, true>;"), std::string::npos) << k->source;
    EXPECT_NE(k->summary.find("through shared memory, 16-byte row stores"), std::string::npos) << k->summary;
  }
  std::string refusal;
  auto k128 = emit(compile("document_mask", {{"D", 128}}), &refusal);
  setenv("SOLDER_ATTN_DYNAMIC", "0", 1);
  auto fixed = emit(compile("document_mask", {}), &refusal);
  unsetenv("SOLDER_ATTN_DYNAMIC");
  setenv("SOLDER_ATTN_EPI", "0", 1);
  auto off = emit(compile("document_mask", {}), &refusal);
  unsetenv("SOLDER_ATTN_EPI");
  ASSERT_TRUE(k128 && fixed && off) << refusal;
  EXPECT_EQ(k128->source.find("kStaged"), std::string::npos) << k128->source;
  EXPECT_EQ(fixed->source.find("kStaged"), std::string::npos) << fixed->source;
  EXPECT_EQ(off->source.find("kStaged"), std::string::npos) << off->source;
  EXPECT_NE(off->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true>;"), std::string::npos) << off->source;
}

// $SOLDER_ATTN_DYNAMIC=1 claims a data mask's work tiles from a counter at hd64 (not at hd128, which
// spills with it); $SOLDER_ATTN_ONE_ID=1 has boundary tiles of one key id compared once per row.
TEST(AttentionSkeletonEmit, DocumentMaskDynamicAndOneIdSwitches) {
  // the defaults at hd64: tiles claimed from the counter, one-id boundary tiles compared once per row
  std::string refusal;
  auto k = emit(compile("document_mask", {}), &refusal);
  auto k128 = emit(compile("document_mask", {{"D", 128}}), &refusal);
  // the A/B switches back: the snake's rounds, a compare per score
  setenv("SOLDER_ATTN_DYNAMIC", "0", 1);
  setenv("SOLDER_ATTN_ONE_ID", "0", 1);
  auto off = emit(compile("document_mask", {}), &refusal);
  unsetenv("SOLDER_ATTN_DYNAMIC");
  unsetenv("SOLDER_ATTN_ONE_ID");
  ASSERT_TRUE(k && k128 && off) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true, false, true>;"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("the next one claimed from a counter as a block frees up"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("the classifier warps classify each tile the producer claims"), std::string::npos) << k->summary;
  EXPECT_NE(k->source.find("static constexpr bool kOneIdTiles = true;"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("or once per row where all the tile's keys carry one id"), std::string::npos) << k->summary;
  EXPECT_EQ(k->info.blocks, 132);
  // hd128 keeps the snake (its Dynamic data configuration spills) and takes the one-id compare
  EXPECT_NE(k128->source.find("Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2, true>;"), std::string::npos) << k128->source;
  EXPECT_NE(k128->summary.find("longest first in a snake"), std::string::npos) << k128->summary;
  EXPECT_NE(k128->source.find("static constexpr bool kOneIdTiles = true;"), std::string::npos) << k128->source;
  EXPECT_NE(off->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true>;"), std::string::npos) << off->source;
  EXPECT_EQ(off->source.find("kOneIdTiles"), std::string::npos) << off->source;
  EXPECT_EQ(off->summary.find("claimed from a counter"), std::string::npos) << off->summary;
}

// $SOLDER_ATTN_PERSISTENT=0 puts a data mask back on one block per work tile at S 1k (the A/B switch).
TEST(AttentionSkeletonEmit, DocumentMaskPersistentSwitch) {
  setenv("SOLDER_ATTN_PERSISTENT", "0", 1);
  std::string refusal;
  auto k = emit(compile("document_mask", {}), &refusal);
  unsetenv("SOLDER_ATTN_PERSISTENT");
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2>;"), std::string::npos) << k->source;
  EXPECT_EQ(k->info.blocks, 2048);
  EXPECT_NE(k->summary.find("once per block by every warp before the loads"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("block order: one block per work tile"), std::string::npos) << k->summary;
}

// diff_attn: the two skeleton passes of its fusion plan, at head dims 64 and 128. Q and K are read at a
// fixed index of their [B, 2, H] lead dims (AttentionShape's q_heads / q_head0: batch coordinate
// b·2H + c·H + h), the first pass stores a0 in f32, the second's epilogue computes a0 − λ·a1.
TEST(AttentionSkeletonEmit, DiffAttnRunsAsTwoSkeletonPasses) {
  for (int64_t d : {64, 128}) {
    Compiled c = compile("diff_attn", {{"D", d}});
    ASSERT_EQ(c.view.kernels.size(), 2u);
    std::string refusal;
    std::vector<AttentionSkeletonKernel> passes;
    for (size_t i = 0; i < 2; ++i) {
      auto k = generate_attention_skeleton_kernel(c.view, c.view.kernels[i], c.named.kernels[i], &refusal);
      ASSERT_TRUE(k) << "pass " << i << ": " << refusal;
      passes.push_back(*k);
    }
    for (size_t i = 0; i < 2; ++i) {
      const AttentionSkeletonLaunch& a = *passes[i].info.attention;
      EXPECT_EQ(a.batch, 16);
      EXPECT_EQ(a.heads, 8);
      EXPECT_EQ(a.q.batch, 16 * 2 * 8) << "Q's map covers both halves";
      EXPECT_EQ(a.k.batch, 16 * 2 * 8);
      EXPECT_EQ(a.v.batch, 16 * 8) << "V has no fixed index";
      EXPECT_EQ(a.q_heads, 16);
      EXPECT_EQ(a.q_head0, static_cast<int>(8 * i));
      EXPECT_EQ(a.k_heads, 16);
      EXPECT_EQ(a.k_head0, static_cast<int>(8 * i));
      EXPECT_EQ(a.v_heads, 0);
      EXPECT_EQ(passes[i].info.blocks, 16 * 8 * (1024 / (d == 64 ? 192 : 128) + (d == 64 ? 1 : 0)));
    }
    // the first pass stores a0 in f32; the second reads it and lambda at the stored element
    EXPECT_NE(passes[0].source.find("solder::store(&a0["), std::string::npos) << passes[0].source;
    EXPECT_NE(passes[1].source.find("a0["), std::string::npos) << passes[1].source;
    EXPECT_NE(passes[1].source.find("lam[0]"), std::string::npos) << passes[1].source;
    EXPECT_NE(passes[1].source.find("__floats2bfloat162_rn(o0_, o1_)"), std::string::npos);
    EXPECT_EQ(passes[1].source.find("a1["), std::string::npos) << "a1 stays in registers: " << passes[1].source;
  }
}

// Any i32 ids compared across the row and the key are a data mask; a mask that also reads the row or
// the column directly is refused with the rule (the emitter's own classification runs it).
TEST(AttentionSkeletonEmit, DataMasksOfOtherComparisons) {
  auto build = [](const std::string& cond) {
    std::string text =
        "program ids\ndim B = 2, H = 4, S = 1024, D = 64\n"
        "in q[B, H, S, D] : bf16\nin k[B, H, S, D] : bf16\nin v[B, H, S, D] : bf16\nin g[B, S] : i32 ~ randint(0, 4)\n"
        "s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)\n"
        "sm[b, h, i, j] = select(" + cond + ", s[b, h, i, j], -inf)\n"
        "m[b, h, i] = max(j) sm[b, h, i, j]\ne[b, h, i, j] = exp(sm[b, h, i, j] - m[b, h, i])\n"
        "z[b, h, i] = sum(j) e[b, h, i, j]\n"
        "out o[b, h, i, d] : bf16 = sum(j) e[b, h, i, j] / z[b, h, i] * v[b, h, j, d]\n";
    auto program = std::make_shared<Program>(parse_program(text, "ids.sol"));
    KernelProgram named = with_cuda_names(compile_program(bind_program(program, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels);
    return Compiled{named, contracts_as_reduces(named, false)};
  };
  std::string refusal;
  auto le = emit(build("g[b, i] <= g[b, j]"), &refusal);
  ASSERT_TRUE(le) << refusal;
  EXPECT_NE(le->source.find("return (rid_ <= cid_);"), std::string::npos) << le->source;
  // no pair matches when every row id exceeds every key id; all match when the largest row id is at most the smallest key id
  EXPECT_NE(le->source.find("if (!((rid_lo_ <= cid_hi_))) return 0;"), std::string::npos) << le->source;
  EXPECT_NE(le->source.find("if (!((rid_hi_ > cid_lo_))) return 1;"), std::string::npos) << le->source;
  refusal.clear();
  auto other = emit(build("g[b, i] == g[b, j] && j <= i"), &refusal);
  EXPECT_FALSE(other);
  EXPECT_NE(refusal.find("outside its ids"), std::string::npos) << refusal;
}

// A mask under which a query row sees no key: the program's softmax is 0/0 there, the skeleton would
// write zeros, so the kernel stays on the emitter's schedule (which keeps the IR's arithmetic).
TEST(AttentionSkeletonEmit, RefusesMasksThatLeaveARowWithoutKeys) {
  auto build = [](const std::string& cond) {
    std::string text =
        "program strict\ndim B = 2, H = 4, S = 1024, D = 64\n"
        "in q[B, H, S, D] : bf16\nin k[B, H, S, D] : bf16\nin v[B, H, S, D] : bf16\n"
        "s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)\n"
        "sm[b, h, i, j] = select(" + cond + ", s[b, h, i, j], -inf)\n"
        "m[b, h, i] = max(j) sm[b, h, i, j]\ne[b, h, i, j] = exp(sm[b, h, i, j] - m[b, h, i])\n"
        "z[b, h, i] = sum(j) e[b, h, i, j]\n"
        "out o[b, h, i, d] : bf16 = sum(j) e[b, h, i, j] / z[b, h, i] * v[b, h, j, d]\n";
    auto program = std::make_shared<Program>(parse_program(text, "strict.sol"));
    KernelProgram named = with_cuda_names(compile_program(bind_program(program, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels);
    return Compiled{named, contracts_as_reduces(named, false)};
  };
  std::string refusal;
  EXPECT_FALSE(emit(build("j < i"), &refusal));  // row 0 sees nothing
  EXPECT_NE(refusal.find("query row 0 sees no key"), std::string::npos) << refusal;
  refusal.clear();
  EXPECT_FALSE(emit(build("j < i || h == 1"), &refusal));  // row 0 of heads other than 1
  EXPECT_NE(refusal.find("sees no key"), std::string::npos) << refusal;
  refusal.clear();
  EXPECT_TRUE(emit(build("j < i || j == 0"), &refusal)) << refusal;  // every row sees key 0
}

TEST(AttentionSkeletonEmit, FallbackStatesTheReasonInTheSource) {
  // a data mask that also reads the row and the column (documents, causal inside): the emitter's schedule
  const std::string text =
      "program doc_causal\ndim B = 2, H = 4, S = 1024, D = 64\n"
      "in q[B, H, S, D] : bf16\nin k[B, H, S, D] : bf16\nin v[B, H, S, D] : bf16\nin doc[B, S] : i32 ~ sorted_randint(0, 12)\n"
      "s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)\n"
      "sm[b, h, i, j] = select(doc[b, i] == doc[b, j] && j <= i, s[b, h, i, j], -inf)\n"
      "m[b, h, i] = max(j) sm[b, h, i, j]\ne[b, h, i, j] = exp(sm[b, h, i, j] - m[b, h, i])\n"
      "z[b, h, i] = sum(j) e[b, h, i, j]\n"
      "out o[b, h, i, d] : bf16 = sum(j) e[b, h, i, j] / z[b, h, i] * v[b, h, j, d]\n";
  auto program = std::make_shared<Program>(parse_program(text, "doc_causal.sol"));
  BoundProgram bound = bind_program(program, SizeChoice{false, {}});
  GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
  EXPECT_NE(m.source.find("// attention skeleton not used for"), std::string::npos);
  EXPECT_NE(m.source.find("// tensor-core emitter: "), std::string::npos);
  auto vanilla = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/vanilla.sol"));
  GeneratedModule v = generate_cuda(compile_program(bind_program(vanilla, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels);
  ASSERT_EQ(v.kernels.size(), 1u);
  EXPECT_TRUE(v.kernels[0].attention);
  EXPECT_NE(v.source.find("// on the sm_90a attention skeleton: "), std::string::npos);
  // `solder emit --report` / --json: each contraction's reason names the work tiles and the skipping rule
  ASSERT_FALSE(v.contractions.empty());
  for (auto& s : v.contractions) {
    EXPECT_EQ(s.skeleton, ContractionSchedule::kAttentionSkeleton);
    EXPECT_NE(s.reason.find("2048 work tiles of 128 query rows x 128 keys on 132 persistent blocks; skipped tiles: none"), std::string::npos) << s.reason;
  }
  auto window = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/sliding_window.sol"));
  GeneratedModule w = generate_cuda(compile_program(bind_program(window, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels);
  ASSERT_FALSE(w.contractions.empty());
  EXPECT_NE(w.contractions[0].reason.find("on 132 persistent blocks; skipped tiles: key tiles outside the columns"), std::string::npos) << w.contractions[0].reason;
  EXPECT_NE(contraction_schedule_text(w.contractions).find("solved from its linear bounds"), std::string::npos);
}

// Without the CuTe headers both skeletons are off together (skeletons_here): attention then goes to
// the tensor-core emitter, and its kernel says why.
TEST(AttentionSkeletonEmit, OffWhenTheCodegenOptionsSaySo) {
  auto vanilla = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/vanilla.sol"));
  KernelProgram kernels = compile_program(bind_program(vanilla, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels;
  CudaCodegenOptions off;
  off.attention_skeleton_off = "the CUTLASS/CuTe headers were not found (test)";
  GeneratedModule v = generate_cuda(kernels, off);
  ASSERT_EQ(v.kernels.size(), 1u);
  EXPECT_FALSE(v.kernels[0].attention);
  EXPECT_NE(v.source.find("// attention skeleton not used for"), std::string::npos);
  EXPECT_NE(v.source.find("the CUTLASS/CuTe headers were not found (test)"), std::string::npos);
  EXPECT_EQ(v.source.find("// on the sm_90a attention skeleton: "), std::string::npos);
}

TEST(AttentionSkeletonEmit, SkeletonsHereTurnsBothOffTogether) {
  bool gemm = true;
  std::string note;
  CudaCodegenOptions codegen = skeletons_here(gemm, &note);
  const bool headers = !runtime::cutlass_include_dir().empty();
  EXPECT_EQ(codegen.attention_skeleton_off.empty(), headers);
  EXPECT_EQ(gemm, headers);
  EXPECT_EQ(note.empty(), headers);
  bool asked_off = false;
  skeletons_here(asked_off);
  EXPECT_FALSE(asked_off);  // never turns a skeleton on that the caller turned off
}

// evoformer (examples/evoformer.sol): one kernel on the skeleton at head dims 64, 32 and 128 -- the pair
// bias and the mask bias in the score functor (the kBias form, read while S runs), the sigmoid gate in
// the epilogue; (b, r, h) flattened into the skeleton's batch and heads.
TEST(AttentionSkeletonEmit, EvoformerIsOneKernelWithBiasAndGate) {
  Compiled c = compile("evoformer", {});
  ASSERT_EQ(c.view.kernels.size(), 1u);
  std::string refusal;
  auto k = emit(c, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3, 2, 0, false, true>"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("static constexpr bool kBias = true;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("return 1.0f * 0.125f;"), std::string::npos) << k->source;  // a = 1, scale 1 / sqrt(64)
  // the pair bias at [h, row, col] and the mask at [r, col], on global rows and columns
  EXPECT_NE(k->source.find("pair_bias[((((0LL) * 4LL + ((h_t + 0LL))) * 256LL + (row_)) * 256LL + (col_))]"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("mask[(((0LL) * 256LL + ((r_t + 0LL))) * 256LL + (col_))]"), std::string::npos) << k->source;
  // the gate: sigmoid(g) at the stored element (the tensor-core kernels' fast form), times o / sum p
  EXPECT_NE(k->source.find("solder::tile::fast_sigmoid("), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("o0_ = value_(bh_, row_, col_, o0_, p_, 0);"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("epilogue: sigmoid(g["), std::string::npos) << k->summary;
  ASSERT_TRUE(k->info.attention);
  const AttentionSkeletonLaunch& a = *k->info.attention;
  EXPECT_EQ(a.batch, 256);  // B · S1
  EXPECT_EQ(a.heads, 4);
  EXPECT_EQ(a.heads_kv, 4);
  EXPECT_EQ(a.seq_q, 256);
  EXPECT_EQ(a.seq_k, 256);
  EXPECT_EQ(a.q.k, 64);
  EXPECT_EQ(a.k.tile_rows, 64);
  EXPECT_EQ(k->info.blocks, 132);  // persistent blocks, one per SM, over 2 x 1024 work tiles
  // the emitter's own schedule does not take the [rows, keys] bias tile
  std::string mma_refusal;
  EXPECT_FALSE(generate_mma_stream_kernel(c.view, c.view.kernels.front(), &mma_refusal));
  EXPECT_NE(mma_refusal.find("the scores read tile pair_bias"), std::string::npos) << mma_refusal;
}

TEST(AttentionSkeletonEmit, EvoformerHeadDim32RunsPaddedInTheHd64Configuration) {
  Compiled c = compile("evoformer", {{"D", 32}});
  ASSERT_EQ(c.view.kernels.size(), 1u);
  std::string refusal;
  auto k = emit(c, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3, 2, 0, false, true>"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("if (col_ >= 32) return;  // padding columns"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("if (col_ >= 32) return p_;  // padding columns"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("head dim 32 zero-padded to 64 by TMA"), std::string::npos) << k->summary;
  ASSERT_TRUE(k->info.attention);
  EXPECT_EQ(k->info.attention->q.k, 32);  // TMA zero-fills columns 32..63 of the 64-column box
  EXPECT_EQ(k->info.attention->q.ld, 32);
  EXPECT_EQ(k->info.attention->q.tile_k, 64);
  EXPECT_EQ(k->info.attention->v.batch_stride, 256 * 32);
}

TEST(AttentionSkeletonEmit, EvoformerHeadDim128IsOneKernel) {
  Compiled c = compile("evoformer", {{"D", 128}, {"B", 8}});
  ASSERT_EQ(c.view.kernels.size(), 1u);  // 32-row IR tiles: the pair-bias and gate tiles fit the budget
  std::string refusal;
  auto k = emit(c, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 128, 64, 4, 2, true, 3>"), std::string::npos) << k->source;
  ASSERT_TRUE(k->info.attention);
  EXPECT_EQ(k->info.attention->batch, 8 * 256);
  // Q 32 KB, K and V 4 x 16 KB each, the staged bias 4 x (16 KB + 128 B), barriers, 1 KB slack: under 227 KB
  EXPECT_EQ(k->info.shared_bytes, 32768 + 2 * 4 * 16384 + 4 * (16384 + 128) + 8 * 18 + 1024);
  EXPECT_LE(k->info.shared_bytes, 232448);
}

// The pair bias and the mask are staged by TMA into the K stages (functors.cuh, "A staged bias"): the
// score functor carries the two tensor maps first, the launch their operands, the summary says so.
TEST(AttentionSkeletonEmit, EvoformerStagesThePairBiasAndTheMaskByTma) {
  Compiled c = compile("evoformer", {{"B", 2}});
  std::string refusal;
  auto k = emit(c, &refusal);
  ASSERT_TRUE(k) << refusal;
  const std::string& src = k->source;
  EXPECT_NE(src.find("  solder::attention::TensorMap bias_tile;\n  solder::attention::TensorMap bias_column;\n  const __nv_bfloat16* q;"), std::string::npos) << src;
  EXPECT_NE(src.find("static constexpr int kStagedBias = 3;"), std::string::npos) << src;
  EXPECT_NE(src.find("using BiasTile = __nv_bfloat16;"), std::string::npos) << src;
  EXPECT_NE(src.find("__device__ float staged_bias(int bh_, int row_, int col_, BiasTile bt_, BiasColumn bc_) const"), std::string::npos) << src;
  // the staged elements replace both loads: no global read is left in staged_bias()
  const size_t at = src.find("staged_bias(int bh_");
  ASSERT_NE(at, std::string::npos);
  const std::string body = src.substr(at, src.find("\n  }\n", at) - at);
  EXPECT_NE(body.find("solder::to_float((&bt_)[0])"), std::string::npos) << body;
  EXPECT_NE(body.find("(&bc_)[0]"), std::string::npos) << body;
  EXPECT_EQ(body.find("pair_bias["), std::string::npos) << body;
  EXPECT_EQ(body.find("mask["), std::string::npos) << body;
  // the maps' batch (b·H + h) and row (b·S1 + r) per head
  EXPECT_NE(src.find("__device__ int bias_tile_batch(int bh_) const"), std::string::npos) << src;
  EXPECT_NE(src.find("__device__ int bias_column_row(int bh_) const"), std::string::npos) << src;
  EXPECT_NE(k->summary.find("staged bias: the producer TMA-loads the bf16 tile pair_bias[.., row, col] of the work tile's 128 rows x 64 keys"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("the 64 bytes of mask[.., col]"), std::string::npos) << k->summary;
  ASSERT_TRUE(k->info.attention);
  const AttentionSkeletonLaunch& a = *k->info.attention;
  ASSERT_TRUE(a.bias_tile);
  ASSERT_TRUE(a.bias_column);
  EXPECT_EQ(a.bias_tile->rows, 256);
  EXPECT_EQ(a.bias_tile->k, 256);
  EXPECT_EQ(a.bias_tile->ld, 256);
  EXPECT_EQ(a.bias_tile->batch, 2 * 4);  // B · H
  EXPECT_EQ(a.bias_tile->batch_stride, 256 * 256);
  EXPECT_EQ(a.bias_tile->tile_rows, 64);
  EXPECT_EQ(a.bias_tile->tile_k, 64);
  EXPECT_TRUE(a.bias_tile->swizzle);
  EXPECT_EQ(a.bias_column->rows, 2 * 256);  // B · S1
  EXPECT_EQ(a.bias_column->k, 256);
  EXPECT_EQ(a.bias_column->dtype, 2);  // one byte
  EXPECT_EQ(a.bias_column->tile_rows, 1);
  EXPECT_EQ(a.bias_column->tile_k, 128);
  EXPECT_FALSE(a.bias_column->swizzle);
  EXPECT_EQ(k->info.shared_bytes, 2 * 16384 + 2 * 6 * 8192 + 6 * (16384 + 128) + 8 * 28 + 1024);  // 2 Q buffers, 6 stages
}

// The sigmoid gate is preloaded (functors.cuh, "Epilogue preload"): one 4-byte word of g per pair of
// columns, loaded when a work tile starts, and the stored value reads the word, not g. The summary
// states the schedule (one round's heads per group) and the ring depth.
TEST(AttentionSkeletonEmit, EvoformerPreloadsTheGateAndStatesTheSchedule) {
  Compiled c = compile("evoformer", {{"B", 8}});
  std::string refusal;
  auto k = emit(c, &refusal);
  ASSERT_TRUE(k) << refusal;
  const std::string& src = k->source;
  EXPECT_NE(src.find("static constexpr bool kPreload = true;"), std::string::npos) << src;
  EXPECT_NE(src.find("struct Preload {\n    unsigned int w[1];\n  };"), std::string::npos) << src;
  EXPECT_NE(src.find("p_.w[0] = __ldg(reinterpret_cast<const unsigned int*>(&g[((((((b_t + 0LL)) * 256LL + ((r_t + 0LL))) * 4LL + ((h_t + 0LL))) * 256LL + (((i_t * 64LL) + i))) * 64LL + (col_))]));"),
            std::string::npos)
      << src;
  // the pair's bounds: col_ + 1 inside the last dim
  EXPECT_NE(src.find("(col_) >= 0LL && (col_) + 1LL < 64LL"), std::string::npos) << src;
  const size_t at = src.find("__device__ float value_(int bh_, int row_, int col_, float a_, const Preload& p_, int half_) const");
  ASSERT_NE(at, std::string::npos) << src;
  const std::string body = src.substr(at, src.find("\n  }\n", at) - at);
  EXPECT_NE(body.find("solder::tile::fast_sigmoid(solder::to_float(reinterpret_cast<const __nv_bfloat16*>(&p_.w[0])[(half_)]))"), std::string::npos) << body;
  EXPECT_EQ(body.find("g["), std::string::npos) << body;
  EXPECT_NE(src.find("__device__ void operator()(int bh_, int row_, int col_, float o0_, float o1_, const Preload& p_) const"), std::string::npos) << src;
  EXPECT_NE(k->summary.find("preloaded at the start of each work tile"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("schedule: heads in groups of at most one round's (66 heads x 2 query tiles)"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("6-stage K/V ring"), std::string::npos) << k->summary;
}

// $SOLDER_ATTN_EPILOGUE_PRELOAD=0 reads the gate at the store (A/B runs); $SOLDER_ATTN_STAGES picks the
// ring depth where it fits (8 does not at hd64 with the staged bias: the default 6 stays).
TEST(AttentionSkeletonEmit, EvoformerPreloadAndStagesEnvironment) {
  setenv("SOLDER_ATTN_EPILOGUE_PRELOAD", "0", 1);
  setenv("SOLDER_ATTN_STAGES", "4", 1);
  Compiled c = compile("evoformer", {});
  std::string refusal;
  auto k = emit(c, &refusal);
  unsetenv("SOLDER_ATTN_EPILOGUE_PRELOAD");
  unsetenv("SOLDER_ATTN_STAGES");
  ASSERT_TRUE(k) << refusal;
  EXPECT_EQ(k->source.find("kPreload"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("o0_ = value_(bh_, row_, col_, o0_);"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2, true, 3, 2, 0, false, true>"), std::string::npos) << k->source;
  setenv("SOLDER_ATTN_STAGES", "8", 1);
  Compiled c8 = compile("evoformer", {});
  auto k8 = emit(c8, &refusal);
  unsetenv("SOLDER_ATTN_STAGES");
  ASSERT_TRUE(k8) << refusal;
  EXPECT_NE(k8->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3, 2, 0, false, true>"), std::string::npos) << k8->source;
}

// The staged bias pair_bias + 1e9 · (mask − 1) is the tile element plus a term of the column byte alone:
// the score declares kStagedSum with that term as staged_column() (once per key column in the
// skeleton); the second Q buffer fits beside the 6-stage ring at hd64, not beside hd128's 4 stages.
// $SOLDER_ATTN_STAGED_SUM=0, $SOLDER_ATTN_QBUFFERS=1 and $SOLDER_ATTN_FREE=0 give the evoformer2 form (A/B
// runs).
TEST(AttentionSkeletonEmit, EvoformerBiasAsColumnSumAndTwoQBuffers) {
  Compiled c = compile("evoformer", {});
  std::string refusal;
  auto k = emit(c, &refusal);
  ASSERT_TRUE(k) << refusal;
  const std::string& src = k->source;
  EXPECT_NE(src.find("static constexpr bool kStagedSum = true;"), std::string::npos) << src;
  const size_t at = src.find("__device__ float staged_column(int bh_, int col_, BiasColumn bc_) const {");
  ASSERT_NE(at, std::string::npos) << src;
  const std::string body = src.substr(at, src.find("\n  }\n", at) - at);
  EXPECT_NE(body.find("return (1e+09f * static_cast<float>((((((&bc_)[0] != 0)) ? 1LL : 0LL) - 1LL)));"), std::string::npos) << body;
  EXPECT_EQ(body.find("bt_"), std::string::npos) << body;
  EXPECT_EQ(body.find("row_"), std::string::npos) << body;
  EXPECT_NE(k->summary.find("the column term 1e+09 * ((&bc_) - 1) once per key column"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("2 Q buffers"), std::string::npos) << k->summary;
  Compiled c128 = compile("evoformer", {{"D", 128}});
  auto k128 = emit(c128, &refusal);
  ASSERT_TRUE(k128) << refusal;
  EXPECT_NE(k128->source.find("Config<solder::gemm::Dtype::bf16, 128, 64, 4, 2, true, 3>;"), std::string::npos) << k128->source;
  EXPECT_NE(k128->source.find("static constexpr bool kStagedSum = true;"), std::string::npos) << k128->source;
  setenv("SOLDER_ATTN_STAGED_SUM", "0", 1);
  setenv("SOLDER_ATTN_QBUFFERS", "1", 1);
  setenv("SOLDER_ATTN_FREE", "0", 1);
  Compiled c_old = compile("evoformer", {});
  auto k_old = emit(c_old, &refusal);
  unsetenv("SOLDER_ATTN_STAGED_SUM");
  unsetenv("SOLDER_ATTN_QBUFFERS");
  unsetenv("SOLDER_ATTN_FREE");
  ASSERT_TRUE(k_old) << refusal;
  EXPECT_EQ(k_old->source.find("kStagedSum"), std::string::npos) << k_old->source;
  EXPECT_NE(k_old->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3>;"), std::string::npos) << k_old->source;
}

// A staged bias at hd64 runs on free consumers (Config's FreeConsumers, after Dynamic = false and
// Stagger 0); hd128's staged kernel keeps the turns; $SOLDER_ATTN_FREE=0 restores them at hd64.
TEST(AttentionSkeletonEmit, EvoformerHd64RunsOnFreeConsumers) {
  std::string refusal;
  Compiled c = compile("evoformer", {{"B", 8}});
  auto k = emit(c, &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3, 2, 0, false, true>;"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("2 free consumer warpgroups"), std::string::npos) << k->summary;
  Compiled c128 = compile("evoformer", {{"D", 128}, {"B", 8}});
  auto k128 = emit(c128, &refusal);
  ASSERT_TRUE(k128) << refusal;
  EXPECT_EQ(k128->summary.find("free consumer"), std::string::npos) << k128->summary;
  setenv("SOLDER_ATTN_FREE", "0", 1);
  Compiled c_turns = compile("evoformer", {{"B", 8}});
  auto k_turns = emit(c_turns, &refusal);
  unsetenv("SOLDER_ATTN_FREE");
  ASSERT_TRUE(k_turns) << refusal;
  EXPECT_NE(k_turns->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3, 2>;"), std::string::npos) << k_turns->source;
}

// $SOLDER_ATTN_BIAS_BN=128 (A/B runs) puts a staged bias at hd64 in the column-sum form on 128-key tiles (2
// key tiles per work tile at S2 = 256): 3 stages of K, V, the 128 x 128 bias tile and the mask bytes beside
// two Q buffers. hd128, the per-score form ($SOLDER_ATTN_STAGED_SUM=0) and one block per work tile keep
// 64-key tiles under it; without it the former 64-key Config on 6 stages.
TEST(AttentionSkeletonEmit, EvoformerHd64On128KeyTilesByKnob) {
  std::string refusal;
  setenv("SOLDER_ATTN_BIAS_BN", "128", 1);
  Compiled c = compile("evoformer", {{"B", 8}});
  auto k = emit(c, &refusal);
  Compiled c32 = compile("evoformer", {{"D", 32}});
  auto k32 = emit(c32, &refusal);
  Compiled c128 = compile("evoformer", {{"D", 128}, {"B", 8}});
  auto k128 = emit(c128, &refusal);
  setenv("SOLDER_ATTN_STAGED_SUM", "0", 1);
  Compiled c_per_score = compile("evoformer", {{"B", 8}});
  auto k_per_score = emit(c_per_score, &refusal);
  unsetenv("SOLDER_ATTN_STAGED_SUM");
  setenv("SOLDER_ATTN_PERSISTENT", "0", 1);
  Compiled c_blocks = compile("evoformer", {{"B", 8}});
  auto k_blocks = emit(c_blocks, &refusal);
  unsetenv("SOLDER_ATTN_PERSISTENT");
  unsetenv("SOLDER_ATTN_BIAS_BN");
  ASSERT_TRUE(k && k32 && k128 && k_per_score && k_blocks) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 3, 2, true, 3, 2, 0, false, true>;"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("128 query rows x 128 keys per tile, 3-stage K/V ring"), std::string::npos) << k->summary;
  EXPECT_NE(k->summary.find("of the work tile's 128 rows x 128 keys"), std::string::npos) << k->summary;
  ASSERT_TRUE(k->info.attention);
  EXPECT_EQ(k->info.attention->k.tile_rows, 128);
  EXPECT_EQ(k->info.attention->v.tile_rows, 128);
  EXPECT_EQ(k->info.shared_bytes, 2 * 16384 + 2 * 3 * 16384 + 3 * (32768 + 128) + 8 * 16 + 1024);  // 2 Q buffers, 3 stages
  EXPECT_NE(k32->source.find("Config<solder::gemm::Dtype::bf16, 64, 128, 3, 2, true, 3, 2, 0, false, true>;"), std::string::npos) << k32->source;
  EXPECT_NE(k128->source.find("Config<solder::gemm::Dtype::bf16, 128, 64, 4, 2, true, 3>;"), std::string::npos) << k128->source;
  EXPECT_NE(k_per_score->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3, 2, 0, false, true>;"), std::string::npos) << k_per_score->source;
  EXPECT_NE(k_blocks->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, false, 3>;"), std::string::npos) << k_blocks->source;
  // the default: 64-key tiles
  Compiled c64 = compile("evoformer", {{"B", 8}});
  auto k64 = emit(c64, &refusal);
  ASSERT_TRUE(k64) << refusal;
  EXPECT_NE(k64->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 6, 2, true, 3, 2, 0, false, true>;"), std::string::npos) << k64->source;
  ASSERT_TRUE(k64->info.attention);
  EXPECT_EQ(k64->info.attention->k.tile_rows, 64);
}

// A bias read the producer does not stage (here the mask as a bf16 [.., col] vector: neither a
// [.., row, col] tile nor bool bytes) stays a bounded global read inside staged_bias(), with the reason
// in the summary; the pair bias is still staged.
TEST(AttentionSkeletonEmit, EvoformerBiasReadsNotStagedStayGlobal) {
  std::ifstream in(std::string(SOLDER_SOURCE_DIR) + "/examples/evoformer.sol");
  std::stringstream text;
  text << in.rdbuf();
  std::string source = text.str();
  const std::string bool_mask = "in mask[B, S1, S2] : bool ~ bernoulli(0.9)";
  ASSERT_NE(source.find(bool_mask), std::string::npos);
  source.replace(source.find(bool_mask), bool_mask.size(), "in mask[B, S1, S2] : bf16");
  const std::string path = (std::filesystem::temp_directory_path() / "solder-evoformer-bf16-mask.sol").string();
  std::ofstream(path) << source;
  auto program = std::make_shared<Program>(parse_program_file(path));
  KernelProgram named = with_cuda_names(compile_program(bind_program(program, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels);
  KernelProgram view = contracts_as_reduces(named, false);
  std::remove(path.c_str());
  std::string refusal;
  auto k = generate_attention_skeleton_kernel(view, view.kernels.front(), named.kernels.front(), &refusal);
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("static constexpr int kStagedBias = 1;"), std::string::npos) << k->source;
  EXPECT_NE(k->summary.find("still read per score from global memory: the bias reads mask"), std::string::npos) << k->summary;
  const size_t at = k->source.find("staged_bias(int bh_");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(k->source.find("mask[", at), std::string::npos);
  EXPECT_NE(k->source.find("solder::to_float((&bt_)[0])", at), std::string::npos);
  ASSERT_TRUE(k->info.attention);
  EXPECT_TRUE(k->info.attention->bias_tile);
  EXPECT_FALSE(k->info.attention->bias_column);
}

// $SOLDER_ATTN_BIAS_GLOBAL keeps the previous path (every bias read per score from global memory).
TEST(AttentionSkeletonEmit, EvoformerBiasGlobalEnvironmentKeepsThePerScoreReads) {
  setenv("SOLDER_ATTN_BIAS_GLOBAL", "1", 1);
  Compiled c = compile("evoformer", {});
  std::string refusal;
  auto k = emit(c, &refusal);
  unsetenv("SOLDER_ATTN_BIAS_GLOBAL");
  ASSERT_TRUE(k) << refusal;
  EXPECT_NE(k->source.find("Config<solder::gemm::Dtype::bf16, 64, 64, 4, 2>"), std::string::npos) << k->source;
  EXPECT_EQ(k->source.find("kStagedBias"), std::string::npos) << k->source;
  ASSERT_TRUE(k->info.attention);
  EXPECT_FALSE(k->info.attention->bias_tile);
  EXPECT_FALSE(k->info.attention->bias_column);
}

// Head dims the skeleton does not take keep the emitter's own schedule, with the reason.
TEST(AttentionSkeletonEmit, EvoformerSmallHeadDimFallsBackWithTheReason) {
  Compiled c = compile("evoformer", {{"D", 16}});
  ASSERT_EQ(c.view.kernels.size(), 1u);
  std::string refusal;
  EXPECT_FALSE(emit(c, &refusal));
  EXPECT_NE(refusal.find("head dim 16 (the skeleton takes 32, 64, 128 and 256)"), std::string::npos) << refusal;
}

// Head dim 256 (suite attention_hd256): the fusion plan holds the score depth whole at the GPU's tiles
// (FusionParams::score_depth_whole_up_to), so vanilla and causal reach the skeleton, on a Config its
// device test covers: 128 query rows x 80 keys, 2 stages (64 KB of Q + 2 x 80 KB of K and V), 2
// consumers, one block per work tile; the summary says so. A data mask at head dim 256 keeps the
// emitter's own schedule, with the reason.
TEST(AttentionSkeletonEmit, HeadDim256RunsTheDeviceTestedConfig) {
  for (const char* name : {"vanilla", "softcap", "gqa"}) {
    SCOPED_TRACE(name);
    std::string refusal;
    auto k = emit(compile(name, {{"B", 4}, {"S", 4096}, {"H", 16}, {"D", 256}}), &refusal);
    ASSERT_TRUE(k) << refusal;
    EXPECT_NE(k->source.find("using fused_o_config_ = solder::attention::Config<solder::gemm::Dtype::bf16, 256, 80, 2, 2>;"), std::string::npos) << k->summary;
    EXPECT_NE(k->summary.find("head dim 256: 80-key tiles on 2 stages (Q 64 KB + 2 x 80 KB of K and V in shared memory) and 2 consumers"), std::string::npos) << k->summary;
    ASSERT_TRUE(k->info.attention);
    EXPECT_EQ(k->info.attention->q.k, 256);
    EXPECT_EQ(k->info.attention->k.tile_rows, 80);
    EXPECT_EQ(k->info.blocks, 4 * 16 * 4096 / 128);
    EXPECT_LE(k->info.shared_bytes, 232448);
  }
  // Causal (one comparison of row and column, the plain score) up to 4096 query rows runs the persistent
  // longest-first blocks on 80-key tiles ("dyn80"); past 4096 rows the one-block-per-tile Config.
  const std::string dyn80 = "using fused_o_config_ = solder::attention::Config<solder::gemm::Dtype::bf16, 256, 80, 2, 2, true, 0, 1, 0, true, true, false, true>;";
  std::string refusal;
  auto causal4k = emit(compile("causal", {{"B", 4}, {"S", 4096}, {"H", 16}, {"D", 256}}), &refusal);
  auto causal16k = emit(compile("causal", {{"B", 1}, {"S", 16384}, {"H", 16}, {"D", 256}}), &refusal);
  ASSERT_TRUE(causal4k && causal16k) << refusal;
  EXPECT_NE(causal4k->source.find(dyn80), std::string::npos) << causal4k->summary;
  EXPECT_EQ(causal4k->info.blocks, 132);
  EXPECT_LE(causal4k->info.shared_bytes, 232448);
  EXPECT_NE(causal16k->source.find("using fused_o_config_ = solder::attention::Config<solder::gemm::Dtype::bf16, 256, 80, 2, 2>;"), std::string::npos) << causal16k->summary;
  EXPECT_EQ(causal16k->info.blocks, 16 * 16384 / 128);
  auto small = emit(compile("causal", {{"S", 256}, {"D", 256}}, true), &refusal);
  ASSERT_TRUE(small) << refusal;
  EXPECT_NE(small->source.find(dyn80), std::string::npos) << small->summary;
  // (its fusion plan keeps the depth in two steps of 128: the running max reads the ids, fuse_test.cpp)
  auto docmask = emit(compile("document_mask", {{"S", 4096}, {"D", 256}}), &refusal);
  EXPECT_FALSE(docmask);
  EXPECT_NE(refusal.find("the stream loop holds a statement other than copy, fill, map and reduce"), std::string::npos) << refusal;
}

// fp8 at head dim 64 and 128: the device-tested persistent Configs with two Q buffers, one block per SM;
// $SOLDER_ATTN_FP8_PERSISTENT=0 (head dim 64) and $SOLDER_ATTN_FP8_PERSISTENT128=s4|tile (128) are A/B knobs.
TEST(AttentionSkeletonEmit, Fp8HeadDim64RunsPersistentBlocks) {
  const std::string prefix = "using fused_o_config_ = solder::attention::Config<solder::gemm::Dtype::e4m3, ";
  std::string refusal;
  auto persistent = emit(compile("attention_fp8", {{"B", 16}, {"S", 1024}, {"H", 16}, {"D", 64}}), &refusal);
  auto hd128 = emit(compile("attention_fp8", {{"B", 16}, {"S", 1024}, {"H", 16}, {"D", 128}}), &refusal);
  ASSERT_TRUE(persistent && hd128) << refusal;
  EXPECT_NE(persistent->source.find(prefix + "64, 128, 4, 3, true, 0, 2>;"), std::string::npos) << persistent->summary;
  EXPECT_EQ(persistent->info.blocks, 132);
  EXPECT_LE(persistent->info.shared_bytes, 232448);
  EXPECT_NE(hd128->source.find(prefix + "128, 128, 3, 2, true, 0, 2>;"), std::string::npos) << hd128->summary;
  EXPECT_EQ(hd128->info.blocks, 132);
  setenv("SOLDER_ATTN_FP8_PERSISTENT", "0", 1);
  auto plain = emit(compile("attention_fp8", {{"B", 16}, {"S", 1024}, {"H", 16}, {"D", 64}}), &refusal);
  unsetenv("SOLDER_ATTN_FP8_PERSISTENT");
  ASSERT_TRUE(plain) << refusal;
  EXPECT_NE(plain->source.find(prefix + "64, 128, 4, 3>;"), std::string::npos) << plain->summary;
  EXPECT_EQ(plain->info.blocks, 16 * 16 * 6);
  // head dim 128: $SOLDER_ATTN_FP8_PERSISTENT128=s4|tile (A/B runs): the one-Q-buffer persistent Config, or one
  // block per work tile; any other value is the default
  for (auto [mode, config] : {std::pair{"s4", "128, 128, 4, 2, true>;"}, std::pair{"q2", "128, 128, 3, 2, true, 0, 2>;"},
                              std::pair{"tile", "128, 128, 4, 2>;"}}) {
    setenv("SOLDER_ATTN_FP8_PERSISTENT128", mode, 1);
    auto k = emit(compile("attention_fp8", {{"B", 16}, {"S", 1024}, {"H", 16}, {"D", 128}}), &refusal);
    auto d64 = emit(compile("attention_fp8", {{"B", 16}, {"S", 1024}, {"H", 16}, {"D", 64}}), &refusal);
    unsetenv("SOLDER_ATTN_FP8_PERSISTENT128");
    ASSERT_TRUE(k && d64) << refusal;
    EXPECT_NE(k->source.find(prefix + config), std::string::npos) << mode << ": " << k->summary;
    EXPECT_EQ(k->info.blocks, std::string(mode) == "tile" ? 16 * 16 * 8 : 132);
    EXPECT_LE(k->info.shared_bytes, 232448);
    EXPECT_EQ(d64->source, persistent->source) << "head dim 64 ignores it";
  }
}

// vanilla / gqa at head dim 128: one block per work tile by default; $SOLDER_ATTN_HD128_Q2 (A/B runs) picks a
// device-tested persistent Config with two Q buffers and the staged epilogue in the Q rows, each within 227 KB,
// whatever $SOLDER_ATTN_EPI says; masked kernels, head dim 64 and unknown values keep the default.
TEST(AttentionSkeletonEmit, HeadDim128TwoQBufferCandidatesByKnob) {
  const std::string prefix = "using fused_o_config_ = solder::attention::Config<solder::gemm::Dtype::bf16, 128, ";
  const std::pair<const char*, const char*> modes[] = {
      {"st1", "128, 2, 2, true, 0, 2, 1, false, false, true, false, true>;"},
      {"bn64", "64, 5, 2, true, 0, 2, 2, false, false, true, false, true>;"},
      {"bn64f", "64, 5, 2, true, 0, 2, 0, true, true, true, true, true>;"},
  };
  std::string refusal;
  for (auto [mode, config] : modes) {
    for (const char* name : {"vanilla", "gqa"}) {
      for (const char* epi : {"", "0", "1"}) {
        SCOPED_TRACE(std::string(mode) + " " + name + " SOLDER_ATTN_EPI=" + epi);
        setenv("SOLDER_ATTN_HD128_Q2", mode, 1);
        if (*epi) setenv("SOLDER_ATTN_EPI", epi, 1);
        auto k = emit(compile(name, {{"S", 1024}, {"D", 128}}), &refusal);
        unsetenv("SOLDER_ATTN_EPI");
        unsetenv("SOLDER_ATTN_HD128_Q2");
        ASSERT_TRUE(k) << refusal;
        EXPECT_NE(k->source.find(prefix + config), std::string::npos) << k->summary;
        EXPECT_EQ(k->info.blocks, 132);
        EXPECT_LE(k->info.shared_bytes, 232448);
      }
    }
  }
  // the default, an unknown value, causal and head dim 64 are untouched
  auto plain = emit(compile("vanilla", {{"S", 1024}, {"D", 128}}), &refusal);
  auto causal = emit(compile("causal", {{"S", 1024}, {"D", 128}}), &refusal);
  auto hd64 = emit(compile("vanilla", {{"S", 1024}, {"D", 64}}), &refusal);
  ASSERT_TRUE(plain && causal && hd64) << refusal;
  EXPECT_NE(plain->source.find(prefix + "128, 2, 2, false, 0, 1, 0, false, false, true>;"), std::string::npos) << plain->summary;
  for (const char* mode : {"bn96", "bn64f"}) {
    SCOPED_TRACE(mode);
    setenv("SOLDER_ATTN_HD128_Q2", mode, 1);
    auto other = emit(compile("vanilla", {{"S", 1024}, {"D", 128}}), &refusal);
    auto causal_knob = emit(compile("causal", {{"S", 1024}, {"D", 128}}), &refusal);
    auto hd64_knob = emit(compile("vanilla", {{"S", 1024}, {"D", 64}}), &refusal);
    unsetenv("SOLDER_ATTN_HD128_Q2");
    ASSERT_TRUE(other && causal_knob && hd64_knob) << refusal;
    if (std::string(mode) == "bn96") EXPECT_EQ(other->source, plain->source);
    EXPECT_EQ(causal_knob->source, causal->source);
    EXPECT_EQ(hd64_knob->source, hd64->source);
  }
}

// S = 64 at head dim 128 (--small --dim D=128): one row tile and one key tile. The lowering keeps no grid
// variable for the rows (Q is read at i, not i_t * 64 + i); the skeleton takes the rows as the tile's, in
// its own Config (64 of 128 rows and keys, TMA zero-fills the rest), with a causal mask on row_.
TEST(AttentionSkeletonEmit, OneRowTileRunsOnTheSkeleton) {
  std::string refusal;
  auto fp8 = emit(compile("attention_fp8", {{"D", 128}}, true), &refusal);
  ASSERT_TRUE(fp8) << refusal;
  EXPECT_NE(fp8->source.find("Config<solder::gemm::Dtype::e4m3, 128, 128, "), std::string::npos) << fp8->summary;
  ASSERT_TRUE(fp8->info.attention);
  EXPECT_EQ(fp8->info.attention->seq_q, 64);
  EXPECT_EQ(fp8->info.attention->seq_k, 64);
  EXPECT_EQ(fp8->info.attention->heads, 2);
  EXPECT_LE(fp8->info.shared_bytes, 232448);
  auto causal = emit(compile("causal", {{"D", 128}}, true), &refusal);
  ASSERT_TRUE(causal) << refusal;
  EXPECT_NE(causal->source.find("row_"), std::string::npos) << causal->source;
  // more than one row tile keeps its grid variable (the unchanged path)
  auto two = emit(compile("causal", {{"D", 128}, {"S", 128}}, true), &refusal);
  ASSERT_TRUE(two) << refusal;
  EXPECT_EQ(two->info.attention->seq_q, 128);
}

// Head dim 256: 80-key tiles by default (causal up to 4096 rows on their persistent form, "dyn80");
// $SOLDER_ATTN_HD256 (A/B runs) picks the device-tested candidates, each exactly; unset or any other value
// is the default.
TEST(AttentionSkeletonEmit, HeadDim256CandidatesByKnob) {
  const std::string prefix = "using fused_o_config_ = solder::attention::Config<solder::gemm::Dtype::bf16, 256, ";
  const std::tuple<const char*, const char*, int64_t> modes[] = {
      {"bn80", "80, 2, 2>;", 4 * 16 * 4096 / 128},
      {"dyn", "64, 2, 2, true, 0, 1, 0, true, true, false, true>;", 132},
      {"dyn80", "80, 2, 2, true, 0, 1, 0, true, true, false, true>;", 132},
      {"bn64", "64, 2, 2>;", 4 * 16 * 4096 / 128},
      {"bn96", "80, 2, 2>;", 4 * 16 * 4096 / 128},
      {"", "80, 2, 2>;", 4 * 16 * 4096 / 128},
  };
  for (auto [mode, config, blocks] : modes) {
    for (const char* name : {"vanilla", "causal"}) {
      SCOPED_TRACE(std::string(mode) + " " + name);
      const bool by_default = std::string(mode) != "bn80" && std::string(mode) != "bn64" && std::string(mode) != "dyn" &&
                              std::string(mode) != "dyn80";
      if (by_default && std::string(name) == "causal") config = "80, 2, 2, true, 0, 1, 0, true, true, false, true>;", blocks = 132;
      if (*mode) setenv("SOLDER_ATTN_HD256", mode, 1);
      std::string refusal;
      auto k = emit(compile(name, {{"B", 4}, {"S", 4096}, {"H", 16}, {"D", 256}}), &refusal);
      unsetenv("SOLDER_ATTN_HD256");
      ASSERT_TRUE(k) << refusal;
      EXPECT_NE(k->source.find(prefix + config), std::string::npos) << k->summary;
      EXPECT_EQ(k->info.blocks, blocks);
      EXPECT_LE(k->info.shared_bytes, 232448);
    }
  }
  // hd128 never reads it
  setenv("SOLDER_ATTN_HD256", "dyn80", 1);
  std::string refusal;
  auto hd128 = emit(compile("vanilla", {{"B", 4}, {"S", 4096}, {"H", 16}, {"D", 128}}), &refusal);
  unsetenv("SOLDER_ATTN_HD256");
  auto plain128 = emit(compile("vanilla", {{"B", 4}, {"S", 4096}, {"H", 16}, {"D", 128}}), &refusal);
  ASSERT_TRUE(hd128 && plain128) << refusal;
  EXPECT_EQ(hd128->source, plain128->source);
}

}  // namespace
}  // namespace solder
