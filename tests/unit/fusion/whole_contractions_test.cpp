// Whole contractions in the fused GPU plan (fusion/whole_contractions.h): which contractions leave
// fusion for the GEMM skeleton, the pointwise consumer absorbed as the contract's epilogue, and the
// CPU executor running the resulting plan against the float64 reference.
#include <gtest/gtest.h>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "driver/compile.h"
#include "fusion/whole_contractions.h"
#include "ir/parser.h"
#include "kernel/kernel_printer.h"
#include "kernel/kernel_verifier.h"
#include "../test_util.h"

namespace solder {
namespace {

BoundProgram example(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  return bind_program(program, SizeChoice{false, std::move(dims)});
}

void expect_matches_reference(const BoundProgram& bound, const KernelProgram& kernels, uint64_t seed) {
  TensorSet inputs = make_inputs(bound, seed);
  ExecutionResult result = execute_kernel_program(kernels, inputs);
  TensorSet reference = run_reference(bound, inputs);
  const double tolerance = tolerance_for(bound);
  for (const TensorInfo* out : bound.outputs()) {
    SCOPED_TRACE(out->name);
    EXPECT_EQ(result.unwritten.at(out->name), 0);
    OutputCheck check = compare_output(result.outputs.at(out->name), reference.at(out->name), tolerance);
    EXPECT_TRUE(check.ok) << check.reason << " (error " << check.error << ", tolerance " << tolerance << ")";
  }
}

// ffn with a K long enough for the rule, small enough for the executor.
const std::vector<std::pair<std::string, int64_t>> kFfnDims{{"M", 64}, {"N", 128}, {"K", 512}, {"L", 64}};

TEST(WholeContractions, FfnRunsBothProductsWholeWithGeluAsTheFirstOnesEpilogue) {
  BoundProgram bound = example("ffn", kFfnDims);
  WholeContractionPlan plan = plan_whole_contractions(bound);
  ASSERT_EQ(plan.whole.size(), 2u) << whole_contractions_text(bound, plan);
  EXPECT_EQ(bound.defs[plan.whole[0].def].def->target.name, "c");
  ASSERT_TRUE(plan.whole[0].epilogue.has_value());
  EXPECT_EQ(bound.defs[*plan.whole[0].epilogue].def->target.name, "h");
  EXPECT_EQ(bound.defs[plan.whole[1].def].def->target.name, "e");
  EXPECT_FALSE(plan.whole[1].epilogue.has_value());  // e is an output
  EXPECT_TRUE(plan.kept.count("h"));
  // The first kernel stores h, computed from the contract's value; c is never stored.
  const ContractNode& c = *plan.whole[0].kernel.body[0].as<ContractNode>();
  EXPECT_EQ(c.dst.name, "h");
  ASSERT_TRUE(c.epilogue.defined());
  std::string text = print_kernel_program([&] {
    KernelProgram kp;
    kp.kernels.push_back(plan.whole[0].kernel);
    return kp;
  }());
  EXPECT_NE(text.find("as c_value[0] in gelu(c_value[0])"), std::string::npos) << text;

  CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
  EXPECT_EQ(compiled.kernels.kernels.size(), 2u) << compiled.report;
  EXPECT_EQ(compiled.kernels.find_global("c"), nullptr);  // never stored
  EXPECT_NE(compiled.report.find("c: whole, with h as its epilogue"), std::string::npos) << compiled.report;
  expect_matches_reference(bound, compiled.kernels, 3);
}

TEST(WholeContractions, EpilogueRoundsANarrowProductAndReadsInputs) {
  // c is declared f16: the epilogue reads the value rounded as storing c would round it; the bias is
  // a program input read by the epilogue.
  BoundProgram bound = testing::bind_text(
      "program biased\n"
      "dim M = 64, N = 128, K = 512\n"
      "in a[M, K] : f16\nin b[K, N] : f16 ~ normal(0, 0.05)\nin bias[N] : f32\n"
      "c[m, n] : f16 = sum(k) a[m, k] * b[k, n]\n"
      "out h[m, n] : bf16 = gelu(c[m, n] + bias[n])\n");
  WholeContractionPlan plan = plan_whole_contractions(bound);
  ASSERT_EQ(plan.whole.size(), 1u) << whole_contractions_text(bound, plan);
  ASSERT_TRUE(plan.whole[0].epilogue.has_value());
  CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
  ASSERT_EQ(compiled.kernels.kernels.size(), 1u) << compiled.report;
  std::string text = print_kernel_program(compiled.kernels);
  EXPECT_NE(text.find("gelu(cast(c_value[0], f16) + bias[n])"), std::string::npos) << text;
  expect_matches_reference(bound, compiled.kernels, 7);
}

TEST(WholeContractions, GatedFfnComputesItsGateProductAsTheEpilogueOfUp) {
  // h = silu(gate) * up reads two contractions: gate is stored by the kernel before, and up's kernel
  // computes h as it stores (up is never stored).
  BoundProgram bound = example("gated_ffn", kFfnDims);
  WholeContractionPlan plan = plan_whole_contractions(bound);
  ASSERT_EQ(plan.whole.size(), 3u) << whole_contractions_text(bound, plan);
  EXPECT_FALSE(plan.whole[0].epilogue.has_value());  // gate: read by h, which reads up too
  ASSERT_TRUE(plan.whole[1].epilogue.has_value());
  EXPECT_EQ(bound.defs[*plan.whole[1].epilogue].def->target.name, "h");
  CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
  EXPECT_EQ(compiled.kernels.kernels.size(), 3u) << compiled.report;
  EXPECT_NE(compiled.kernels.find_global("gate"), nullptr);
  EXPECT_EQ(compiled.kernels.find_global("up"), nullptr);
  expect_matches_reference(bound, compiled.kernels, 5);
}

TEST(WholeContractions, AttentionScoresStayFused) {
  // K = the head dim: writing the scores out costs more than computing them.
  BoundProgram bound = example("vanilla", {});
  WholeContractionPlan plan = plan_whole_contractions(bound);
  EXPECT_TRUE(plan.whole.empty()) << whole_contractions_text(bound, plan);
}

TEST(WholeContractions, OffWithoutTheSkeletonOption) {
  BoundProgram bound = example("ffn", kFfnDims);
  CompileOptions options = CompileOptions::for_gpu();
  options.gemm_skeleton = false;
  CompileResult compiled = compile_program(bound, options);
  EXPECT_EQ(compiled.report.find("whole contractions"), std::string::npos) << compiled.report;
  EXPECT_NE(compiled.kernels.find_global("h") == nullptr && compiled.kernels.find_global("c") == nullptr, false);
}

TEST(WholeContractions, EpilogueNeedsItsValueBuffer) {
  BoundProgram bound = example("ffn", kFfnDims);
  WholeContractionPlan plan = plan_whole_contractions(bound);
  ASSERT_FALSE(plan.whole.empty());
  KernelProgram kp = compile_program(bound, CompileOptions::for_gpu()).kernels;
  Kernel& k = kp.kernels[0];
  ASSERT_TRUE(k.body[0].as<ContractNode>());
  k.buffers.clear();
  try {
    verify_kernel_program(kp);
    FAIL() << "the verifier accepted an epilogue without its value buffer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c_value"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace solder
