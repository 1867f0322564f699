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

TEST(WholeContractions, GatedFfnRunsGateAndUpAsOnePairedLaunch) {
  // h = silu(gate) * up reads two contractions over the same A: one paired (dual-B) contract computes
  // both products and h as its epilogue; neither gate nor up is stored.
  BoundProgram bound = example("gated_ffn", kFfnDims);
  WholeContractionPlan plan = plan_whole_contractions(bound);
  ASSERT_EQ(plan.whole.size(), 2u) << whole_contractions_text(bound, plan);
  const WholeContraction& w = plan.whole[0];
  EXPECT_EQ(bound.defs[w.def].def->target.name, "up");
  ASSERT_TRUE(w.pair.has_value());
  EXPECT_EQ(bound.defs[*w.pair].def->target.name, "gate");
  ASSERT_TRUE(w.epilogue.has_value());
  EXPECT_EQ(bound.defs[*w.epilogue].def->target.name, "h");
  EXPECT_EQ(plan.computing(bound, "gate"), &w);
  const ContractNode& c = *w.kernel.body[0].as<ContractNode>();
  EXPECT_EQ(c.dst.name, "h");
  ASSERT_EQ(c.pair_terms.size(), 1u);
  KernelProgram one;
  one.kernels.push_back(w.kernel);
  std::string text = print_kernel_program(one);
  EXPECT_NE(text.find("Σ (a[m, k]) · (b2[k, n]) as up_value[0] and Σ (a[m, k]) · (b1[k, n]) as gate_value[0] in "
                      "silu(gate_value[0]) * up_value[0]"),
            std::string::npos)
      << text;
  EXPECT_NE(whole_contractions_text(bound, plan).find("up paired with gate (one dual-B launch"), std::string::npos)
      << whole_contractions_text(bound, plan);

  CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
  EXPECT_EQ(compiled.kernels.kernels.size(), 2u) << compiled.report;
  EXPECT_EQ(compiled.kernels.find_global("gate"), nullptr);
  EXPECT_EQ(compiled.kernels.find_global("up"), nullptr);
  EXPECT_NE(compiled.report.find("gate and up: whole, paired over one A in one dual-B launch, with h as their epilogue"), std::string::npos)
      << compiled.report;
  expect_matches_reference(bound, compiled.kernels, 5);
}

TEST(WholeContractions, PairOverTwoDifferentAStaysTwoLaunches) {
  // gate and up read different A: no dual-B pair; gate is stored and up's kernel computes h.
  BoundProgram bound = testing::bind_text(
      "program two_a\n"
      "dim M = 64, N = 128, K = 512\n"
      "in a[M, K] : f16\nin a2[M, K] : f16\nin b1[K, N] : f16 ~ normal(0, 0.05)\nin b2[K, N] : f16 ~ normal(0, 0.05)\n"
      "gate[m, n] = sum(k) a[m, k] * b1[k, n]\n"
      "up[m, n] = sum(k) a2[m, k] * b2[k, n]\n"
      "out h[m, n] : f16 = silu(gate[m, n]) * up[m, n]\n");
  WholeContractionPlan plan = plan_whole_contractions(bound);
  std::string text = whole_contractions_text(bound, plan);
  ASSERT_EQ(plan.whole.size(), 2u) << text;
  EXPECT_FALSE(plan.whole[0].pair.has_value());
  EXPECT_NE(text.find("gate and up: not paired: the paired term's A a[m, k] is not the contract's A a2[m, k]"), std::string::npos) << text;
  CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
  EXPECT_NE(compiled.kernels.find_global("gate"), nullptr);
  expect_matches_reference(bound, compiled.kernels, 9);
}

TEST(WholeContractions, PairedGateOfANarrowDtypeIsRoundedAsStoringItWould) {
  // gate is declared f16 and has a scale: the epilogue reads cast(gate_value[0] * 0.5, f16).
  BoundProgram bound = testing::bind_text(
      "program narrow_gate\n"
      "dim M = 64, N = 128, K = 512\n"
      "in a[M, K] : f16\nin b1[K, N] : f16 ~ normal(0, 0.05)\nin b2[K, N] : f16 ~ normal(0, 0.05)\n"
      "gate[m, n] : f16 = sum(k) 0.5 * a[m, k] * b1[k, n]\n"
      "up[m, n] = sum(k) a[m, k] * b2[k, n]\n"
      "out h[m, n] : f16 = gelu(gate[m, n]) * up[m, n]\n");
  CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
  ASSERT_EQ(compiled.kernels.kernels.size(), 1u) << compiled.report;
  std::string text = print_kernel_program(compiled.kernels);
  EXPECT_NE(text.find("gelu(cast(gate_value[0] * 0.5, f16)) * up_value[0]"), std::string::npos) << text;
  expect_matches_reference(bound, compiled.kernels, 11);
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
