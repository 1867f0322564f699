// Every example, end to end on the CPU: it checks at its default sizes, and at its small sizes the
// compiled program (fused with the CPU's and the GPU's tiles, and unfused) run by the CPU executor matches the float64 reference.
#include <gtest/gtest.h>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

class Examples : public ::testing::TestWithParam<std::string> {};

void run_and_verify(const std::string& file, bool fuse, uint64_t seed, bool gpu_tiles = false) {
  auto program = std::make_shared<Program>(parse_program_file(file));
  BoundProgram bound = bind_program(program, SizeChoice{true, {}});
  TensorSet inputs = make_inputs(bound, seed);
  CompileOptions options = gpu_tiles ? CompileOptions::for_gpu() : CompileOptions{};
  options.fuse = fuse;
  KernelProgram kernels = compile_program(bound, options).kernels;
  ExecutionResult result = execute_kernel_program(kernels, inputs);
  TensorSet reference = run_reference(bound, inputs);
  double tolerance = tolerance_for(bound);
  for (const TensorInfo* out : bound.outputs()) {
    SCOPED_TRACE(out->name);
    EXPECT_EQ(result.unwritten.at(out->name), 0);
    OutputCheck check = compare_output(result.outputs.at(out->name), reference.at(out->name), tolerance);
    EXPECT_TRUE(check.ok) << check.reason << " (error " << check.error << ", tolerance " << tolerance << ")";
  }
}

TEST_P(Examples, ChecksAtDefaultSizes) {
  auto program = std::make_shared<Program>(parse_program_file(GetParam()));
  BoundProgram bound = bind_program(program, SizeChoice{});
  EXPECT_FALSE(bound.outputs().empty());
}

TEST_P(Examples, UnfusedMatchesReference) { run_and_verify(GetParam(), false, 11); }
TEST_P(Examples, CompiledMatchesReference) { run_and_verify(GetParam(), true, 12); }
// The Kernel IR the CUDA backend gets (gpu_fusion_params' larger tiles), run by the CPU executor.
TEST_P(Examples, CompiledWithGpuTilesMatchesReference) { run_and_verify(GetParam(), true, 13, true); }

std::string example_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.find_last_of('/') + 1);
  name = name.substr(0, name.size() - 4);
  for (char& c : name) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(All, Examples, ::testing::ValuesIn(testing::example_files()), example_name);

}  // namespace
}  // namespace solder

namespace solder {
namespace {

// MoE routing with more experts than one tile: the top-k of the softmax streams over the experts,
// selecting on the logits (a monotone map), in one kernel, verified.
TEST(MonotoneTopk, MoeRoutingStreamsTheExperts) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/moe_routing.sol"));
  BoundProgram bound = bind_program(program, SizeChoice{true, {{"E", 64}}});
  CompileResult compiled = compile_program(bound, CompileOptions{});
  ASSERT_EQ(compiled.kernels.kernels.size(), 1u) << compiled.report;
  EXPECT_NE(compiled.report.find("monotone"), std::string::npos) << compiled.report;
  for (uint64_t seed : {3u, 4u}) {
    TensorSet inputs = make_inputs(bound, seed);
    ExecutionResult result = execute_kernel_program(compiled.kernels, inputs);
    TensorSet reference = run_reference(bound, inputs);
    for (const char* out : {"weight", "expert"}) {
      OutputCheck check = compare_output(result.outputs.at(out), reference.at(out), tolerance_for(bound));
      EXPECT_TRUE(check.ok) << out << ": " << check.reason;
    }
  }
}

}  // namespace
}  // namespace solder
