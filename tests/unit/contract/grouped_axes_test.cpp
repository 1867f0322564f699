// The shared-head split (contract/grouped_axes.h): GQA's h // G head index becomes a batch of KV heads and
// rows of their query heads, which the GEMM skeleton takes with one batch stride; the plan computes the
// program on the CPU executor.
#include <gtest/gtest.h>

#include "backend/cuda/contract_view.h"
#include "contract/gemm_skeleton_fit.h"
#include "contract/grouped_axes.h"
#include "ir/printer.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

BoundProgram bind_census(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/tests/census/" + name + ".sol"));
  return bind_program(program, SizeChoice{false, std::move(dims)});
}

// The rewrite itself: h (extent 8) read as h // G (G = 4) becomes h_kv (2) and h_g (4), h = h_kv · 4 + h_g.
TEST(GroupedAxes, SplitsTheSharedHeadIndex) {
  ReduceNode r;
  r.domain.axes = {{"b", 2}, {"h", 8}, {"i", 16}, {"j", 16}};
  r.reduce_axes = {{"d", 32}};
  r.dst = Access{"s", {make_var("b"), make_var("h"), make_var("i"), make_var("j")}};
  r.value = make_binary(BinaryOp::mul, make_load("q", {make_var("b"), make_var("h"), make_var("i"), make_var("d")}),
                        make_load("k", {make_var("b"), make_binary(BinaryOp::floordiv, make_var("h"), make_int(4)), make_var("j"), make_var("d")}));
  auto split = split_grouped_axis(r, {});
  ASSERT_TRUE(split);
  ASSERT_EQ(split->domain.axes.size(), 5u);
  EXPECT_EQ(split->domain.axes[1].var, "h_kv");
  EXPECT_EQ(split->domain.axes[1].extent, 2);
  EXPECT_EQ(split->domain.axes[2].var, "h_g");
  EXPECT_EQ(split->domain.axes[2].extent, 4);
  EXPECT_EQ(print_expr(split->value), print_expr(make_binary(
                                          BinaryOp::mul,
                                          make_load("q", {make_var("b"), make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var("h_kv"), make_int(4)), make_var("h_g")),
                                                          make_var("i"), make_var("d")}),
                                          make_load("k", {make_var("b"), make_var("h_kv"), make_var("j"), make_var("d")}))));
  // No h // G: nothing; a G that does not divide h's extent: nothing.
  ReduceNode plain = r;
  plain.value = make_load("q", {make_var("b"), make_var("h"), make_var("i"), make_var("d")});
  EXPECT_FALSE(split_grouped_axis(plain, {}));
  r.domain.axes[1].extent = 6;
  EXPECT_FALSE(split_grouped_axis(r, {}));
}

// bmm_gqa (scores) and bmm_gqa_pv (P · V) on the skeleton: one batched GEMM of M = G · S rows per KV
// head, the batch (b, h_kv) with one stride each; the plan verifies on the executor (default and ragged S;
// D 64: P · V's N, under 64 it stays fused).
TEST(GroupedAxes, GqaProductsRunOnTheSkeletonAndVerify) {
  testing::ScopedEnv on("SOLDER_GROUPED_AXES", "1");
  for (const char* name : {"bmm_gqa", "bmm_gqa_pv"}) {
    for (auto dims : std::vector<std::vector<std::pair<std::string, int64_t>>>{{}, {{"S", 72}, {"D", 64}}}) {
      SCOPED_TRACE(std::string(name) + (dims.empty() ? "" : " S 72"));
      BoundProgram bound = bind_census(name, dims);
      KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
      ASSERT_EQ(kernels.kernels.size(), 1u);
      const auto* c = kernels.kernels[0].body[0].as<ContractNode>();
      ASSERT_NE(c, nullptr);
      GemmSkeletonFit fit = fit_gemm_skeleton(*c, kernels.globals);
      ASSERT_TRUE(fit.problem) << fit.refusal;
      const int64_t s = dims.empty() ? 256 : 72;
      EXPECT_EQ(fit.problem->batch, 2 * 2);
      EXPECT_EQ(fit.problem->m, 4 * s);
      EXPECT_TRUE(gemm_row_stores(*c, *fit.problem, DType::bf16));  // the head index h_kv · 4 + h_g is no column
      KernelProgram view = contracts_as_reduces(kernels);
      verify_kernel_program(view);
      TensorSet inputs = make_inputs(bound, 3);
      auto v = testing::verify_kernels(bound, view, inputs);
      EXPECT_TRUE(v.ok()) << v.failures();
    }
  }
}

// Off by default (SOLDER_GROUPED_AXES unset): main's plan, the implicit GEMM.
TEST(GroupedAxes, OffByDefault) {
  EXPECT_FALSE(grouped_axes_enabled());
  BoundProgram bound = bind_census("bmm_gqa", {});
  KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
  ASSERT_EQ(kernels.kernels.size(), 1u);
  const auto* c = kernels.kernels[0].body[0].as<ContractNode>();
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(fit_gemm_skeleton(*c, kernels.globals).problem);
}

}  // namespace
}  // namespace solder
