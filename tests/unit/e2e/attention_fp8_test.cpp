// examples/attention_fp8.sol on the CPU: the precision policy puts both products on e4m3 (S = q·kᵀ
// exact in e4m3; P = exp(s − m) rounded to e4m3 beside the e4m3 V) and the CPU executor rounds P where
// the GPU does, so its result differs from the float64 reference by P's rounding: more than the bf16
// output's rounding alone, within the fp8 tolerance class (5e-2).
#include <gtest/gtest.h>

#include <functional>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

std::vector<const ContractNode*> contracts_of(const KernelProgram& program) {
  std::vector<const ContractNode*> found;
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) {
    for (auto& s : body) {
      if (s.kind() == StmtKind::For) walk(s.as<ForNode>()->body);
      if (s.kind() == StmtKind::Contract) found.push_back(s.as<ContractNode>());
    }
  };
  for (auto& k : program.kernels) walk(k.body);
  return found;
}

TEST(AttentionFp8, BothProductsRunInE4m3AndTheExecutorRoundsP) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/attention_fp8.sol"));
  BoundProgram bound = bind_program(program, SizeChoice{true, {}});
  EXPECT_DOUBLE_EQ(tolerance_for(bound), 5e-2);
  for (bool gpu_tiles : {false, true}) {
    SCOPED_TRACE(gpu_tiles ? "GPU tiles" : "CPU tiles");
    CompileOptions options = gpu_tiles ? CompileOptions::for_gpu() : CompileOptions{};
    KernelProgram kernels = compile_program(bound, options).kernels;
    auto contracts = contracts_of(kernels);
    ASSERT_EQ(contracts.size(), 2u);
    for (auto* c : contracts) EXPECT_EQ(c->type, MmaType::f8e4m3) << c->dst.name;
    double errors[2];
    for (uint64_t seed : {21u, 22u}) {
      TensorSet inputs = make_inputs(bound, seed);
      ExecutionResult result = execute_kernel_program(kernels, inputs);
      TensorSet reference = run_reference(bound, inputs);
      EXPECT_EQ(result.unwritten.at("o"), 0);
      OutputCheck check = compare_output(result.outputs.at("o"), reference.at("o"), 5e-2);
      EXPECT_TRUE(check.ok) << check.reason << " (error " << check.error << ")";
      errors[seed - 21] = check.error;
    }
    // bf16's rounding of o alone is ≈ 1e-3 relative; e4m3's of P (2^-4 per term) several times more
    for (double e : errors) EXPECT_GT(e, 4e-3);
  }
}

}  // namespace
}  // namespace solder
