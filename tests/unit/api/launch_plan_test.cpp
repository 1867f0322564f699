// The API's launch plan for GEMM-skeleton kernels (src/api/launch_plan.h), on the CPU: which kernels run
// on the skeleton, the split-K buffer's layout (sized at compile time, counters in one zeroed range),
// and the TMA operands a call encodes from its pointers (with the errors a bad pointer gives).
#define SOLDER_API_IMPLEMENTATION
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "api/launch_plan.h"
#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder::api::detail {
namespace {

GeneratedModule unfused_for_gpu(const std::string& text, const char* tile = nullptr) {
  BoundProgram bound = solder::testing::bind_text(text);
  if (tile) setenv("SOLDER_GEMM_TILE", tile, 1);  // docs/runtime.md: every skeleton contraction takes it
  GeneratedModule m = generate_cuda(compile_program(bound, solder::CompileOptions::for_gpu(false)).kernels);
  if (tile) unsetenv("SOLDER_GEMM_TILE");
  return m;
}

// ffn's second product at paper size (M 128) and a smaller one, both split in two along K by a forced
// tile (the cost model's choice of split changes as it is calibrated; the launch plan must not).
constexpr const char* kSplitTile = "128x64s4k2";
const char* kTwoGemms =
    "program two\n"
    "dim M = 128, N = 3072, K = 8192, P = 256\n"
    "in h[M, K] : f16\nin d[K, N] : f16\nin w[P, N] : f16\n"
    "e[m, n] : f16 = sum(k) h[m, k] * d[k, n]\n"
    "out f[m, p] : f16 = sum(n) e[m, n] * w[p, n]\n";

TEST(ApiLaunchPlan, SplitKStateIsSizedPerKernelWithCountersInOneRange) {
  GeneratedModule m = unfused_for_gpu(kTwoGemms, kSplitTile);
  ASSERT_TRUE(uses_gemm_skeleton(m));
  SplitKLayout layout = plan_split_k(m);
  ASSERT_EQ(layout.kernels.size(), m.kernels.size());
  int split = 0;
  size_t counter_words = 0;
  int64_t end_of_partials = 0;
  for (size_t k = 0; k < m.kernels.size(); ++k) {
    const auto& gemm = m.kernels[k].gemm;
    const SplitKSlot& slot = layout.kernels[k];
    if (!gemm || gemm->split_k <= 1) {
      EXPECT_EQ(slot.partials_offset, -1);
      EXPECT_EQ(slot.counters_offset, -1);
      continue;
    }
    ++split;
    EXPECT_EQ(slot.partial_floats, gemm->workspace_floats);
    EXPECT_EQ(slot.counter_words, gemm->counters);
    EXPECT_EQ(slot.partials_offset % static_cast<int64_t>(kSplitKAlignment), 0);
    EXPECT_GE(slot.counters_offset, static_cast<int64_t>(layout.counters_begin));
    EXPECT_LE(slot.counters_offset + 4 * slot.counter_words,
              static_cast<int64_t>(layout.counters_begin + 4 * layout.counter_words));
    end_of_partials = std::max(end_of_partials, slot.partials_offset + 4 * slot.partial_floats);
    counter_words += static_cast<size_t>(gemm->counters);
  }
  ASSERT_EQ(split, 2) << m.source;
  EXPECT_EQ(layout.counter_words, counter_words);
  EXPECT_GE(static_cast<int64_t>(layout.counters_begin), end_of_partials);
  EXPECT_GE(layout.bytes, layout.counters_begin + 4 * layout.counter_words);
  EXPECT_EQ(layout.bytes % kSplitKAlignment, 0u);
}

TEST(ApiLaunchPlan, NoSplitKMeansNoState) {
  GeneratedModule m = unfused_for_gpu(
      "program scaled\ndim M = 256, N = 256, K = 64\nin a[M, K] : bf16\nin w[N, K] : bf16\n"
      "out y[m, n] : bf16 = sum(k) a[m, k] * w[n, k]\n");
  ASSERT_TRUE(uses_gemm_skeleton(m));
  SplitKLayout layout = plan_split_k(m);
  EXPECT_EQ(layout.bytes, 0u);
  EXPECT_EQ(layout.counter_words, 0u);
  for (auto& slot : layout.kernels) EXPECT_EQ(slot.partials_offset, -1);
}

// A tail-split kernel (SOLDER_GEMM_TAIL_SPLIT, split-K 1) gets its workspace slot like a split-K one.
TEST(ApiLaunchPlan, TailSplitKernelsGetTheirWorkspace) {
  ::setenv("SOLDER_GEMM_TAIL_SPLIT", "auto", 1);
  GeneratedModule m = unfused_for_gpu(
      "program l2\ndim T = 4096, HID = 4096, N = 14336\nin x[T, HID] : bf16\nin w[HID, N] : bf16\n"
      "out y[t, n] : bf16 = sum(c) x[t, c] * w[c, n]\n");
  ::unsetenv("SOLDER_GEMM_TAIL_SPLIT");
  ASSERT_TRUE(uses_gemm_skeleton(m));
  const auto& gemm = m.kernels.at(0).gemm;
  ASSERT_TRUE(gemm.has_value());
  ASSERT_EQ(gemm->split_k, 1);
  ASSERT_GT(gemm->tail_split, 1) << m.source;
  SplitKLayout layout = plan_split_k(m);
  const SplitKSlot& slot = layout.kernels.at(0);
  EXPECT_EQ(slot.partials_offset, 0);
  EXPECT_EQ(slot.partial_floats, gemm->workspace_floats);
  EXPECT_EQ(slot.counter_words, gemm->counters);
  EXPECT_EQ(layout.counter_words, static_cast<size_t>(gemm->counters));
  EXPECT_GE(layout.bytes, layout.counters_begin + 4 * layout.counter_words);
}

TEST(ApiLaunchPlan, TensorMapsAreEncodedFromTheCallsPointers) {
  GeneratedModule m = unfused_for_gpu(kTwoGemms, kSplitTile);
  const GemmSkeletonLaunch* g = nullptr;
  for (auto& k : m.kernels)
    if (!g && k.gemm && k.gemm->split_k > 1) g = &*k.gemm;  // e, the first
  ASSERT_NE(g, nullptr);
  std::vector<unsigned long long> pointers(m.parameters.size());
  for (size_t i = 0; i < pointers.size(); ++i) pointers[i] = 0x7f0000000000ull + 0x10000000ull * i;
  runtime::GemmOperand a = gemm_operand(g->a, pointers), b = gemm_operand(g->b, pointers);
  EXPECT_EQ(a.base, pointers[g->a.global]);
  EXPECT_EQ(b.base, pointers[g->b.global]);
  EXPECT_EQ(a.rows, 128);
  EXPECT_EQ(a.k, 8192);
  EXPECT_EQ(b.rows, 3072);
  EXPECT_EQ(check_gemm_operands(*g, pointers), "");
  runtime::TmaEncodeArgs args;
  ASSERT_EQ(runtime::plan_gemm_operand(a, "A", &args), "");
  EXPECT_EQ(args.data_type, 6);  // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
  EXPECT_EQ(args.box[1], static_cast<uint32_t>(g->a.tile_rows));
  // Another call's pointers give other maps: nothing is cached per Kernel.
  std::vector<unsigned long long> other = pointers;
  other[g->a.global] += 4096;
  EXPECT_EQ(gemm_operand(g->a, other).base, pointers[g->a.global] + 4096);
}

TEST(ApiLaunchPlan, AMisalignedOrNullOperandIsNamed) {
  GeneratedModule m = unfused_for_gpu(kTwoGemms);
  const GemmSkeletonLaunch* g = nullptr;
  for (auto& k : m.kernels)
    if (k.gemm) g = &*k.gemm;
  ASSERT_NE(g, nullptr);
  std::vector<unsigned long long> pointers(m.parameters.size(), 0x7f0000000000ull);
  pointers[g->b.global] = 0x7f0000000008ull;
  EXPECT_NE(check_gemm_operands(*g, pointers).find("B: the base address must be 16-byte aligned"), std::string::npos);
  pointers[g->b.global] = 0;
  EXPECT_NE(check_gemm_operands(*g, pointers).find("B: the base address is null"), std::string::npos);
  EXPECT_THROW(gemm_operand(g->a, std::span<const unsigned long long>(pointers.data(), 0)), Error);
}

}  // namespace
}  // namespace solder::api::detail
