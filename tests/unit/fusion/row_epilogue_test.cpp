// Row epilogues (fusion/row_epilogue.h): a whole contraction whose result is only reduced along whole
// rows becomes one kernel with its reductions (moe_routing's logits → softmax → top-k), where the row
// fits one column tile and SOLDER_ROW_EPILOGUE=1 (off by default: measured slower on the H100); the CPU executor runs that kernel against the float64 reference; the CUDA
// writer (gemm_row_epilogue_writer.h) instantiates the GEMM skeleton with a row-reduction functor.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "fusion/row_epilogue.h"
#include "ir/parser.h"
#include "kernel/kernel_printer.h"
#include "../test_util.h"

namespace solder {
namespace {

BoundProgram moe(std::vector<std::pair<std::string, int64_t>> dims) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/moe_routing.sol"));
  return bind_program(program, SizeChoice{false, std::move(dims)});
}

bool has_global(const KernelProgram& p, const std::string& name) { return p.find_global(name) != nullptr; }

// The one-kernel form is off by default (measured slower on the H100): these tests turn it on.
struct RowEpilogueOn {
  RowEpilogueOn() { setenv("SOLDER_ROW_EPILOGUE", "1", 1); }
  ~RowEpilogueOn() { unsetenv("SOLDER_ROW_EPILOGUE"); }
};

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

// K long enough for the whole-contraction rule (K/4 FLOP per byte of f32 logits ≥ 87), small enough
// for the executor; T 300 and 302 (row tiles of 4 and of 2 rows), E 64, 128 and a ragged 120.
TEST(RowEpilogue, MoeRoutingIsOneKernelWithTheLogitsOnChip) {
  RowEpilogueOn on;
  for (auto [t, e, k] : {std::tuple{300, 120, 8}, std::tuple{302, 64, 6}, std::tuple{300, 128, 1}}) {
    SCOPED_TRACE("T " + std::to_string(t) + " E " + std::to_string(e) + " K " + std::to_string(k));
    BoundProgram bound = moe({{"T", t}, {"HID", 512}, {"E", e}, {"K", k}});
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    const KernelProgram& p = compiled.kernels;
    ASSERT_EQ(p.kernels.size(), 1u) << print_kernel_program(p) << compiled.report;
    EXPECT_FALSE(has_global(p, "logits")) << print_kernel_program(p);
    const ContractNode* c = p.kernels[0].body[0].as<ContractNode>();
    ASSERT_NE(c, nullptr);
    const Buffer* tile = p.kernels[0].find_buffer(c->dst.name);
    ASSERT_NE(tile, nullptr);
    EXPECT_EQ(tile->shape.back(), e);
    // The row tile is the row kernel's (a divisor of T where the planner finds one): a guard only
    // where the tiles run past T.
    EXPECT_EQ(c->domain.guard.defined(), p.kernels[0].grid[0].extent * tile->shape[0] != t) << print_kernel_program(p);
    EXPECT_NE(compiled.report.find("is never stored"), std::string::npos) << compiled.report;
    std::string why;
    EXPECT_TRUE(match_row_epilogue_kernel(p, p.kernels[0], &why).has_value()) << why;
    expect_matches_reference(bound, p, 1);
  }
}

// By default (and with SOLDER_ROW_EPILOGUE=0) the two-kernel plan: the skeleton stores the logits, a row
// kernel reads them; the report says the rule would take the pair.
TEST(RowEpilogue, TwoKernelsByDefault) {
  BoundProgram bound = moe({{"T", 300}, {"HID", 512}, {"E", 64}, {"K", 4}});
  for (const char* env : {"", "0"}) {
    SCOPED_TRACE(std::string("SOLDER_ROW_EPILOGUE=") + env);
    if (*env) setenv("SOLDER_ROW_EPILOGUE", env, 1);
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    unsetenv("SOLDER_ROW_EPILOGUE");
    EXPECT_EQ(compiled.kernels.kernels.size(), 2u) << print_kernel_program(compiled.kernels);
    EXPECT_TRUE(has_global(compiled.kernels, "logits"));
    EXPECT_NE(compiled.report.find("SOLDER_ROW_EPILOGUE=1 takes it"), std::string::npos) << compiled.report;
  }
  expect_matches_reference(bound, compile_program(bound, CompileOptions::for_gpu()).kernels, 3);
}

// A row wider than the skeleton's widest column tile (BN 256) has no block holding it: two kernels.
TEST(RowEpilogue, WideRowsStayTwoKernels) {
  RowEpilogueOn on;
  BoundProgram bound = moe({{"T", 128}, {"HID", 512}, {"E", 320}, {"K", 4}});
  CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
  EXPECT_GE(compiled.kernels.kernels.size(), 2u) << print_kernel_program(compiled.kernels);
  EXPECT_TRUE(has_global(compiled.kernels, "logits"));
  EXPECT_NE(compiled.report.find("two kernels"), std::string::npos) << compiled.report;
}

// The CUDA writer: one skeleton launch whose tile holds a whole row, with the row-reduction functor
// (softmax's max and sum over the quad, the top-K selection, the stores of weight and expert only).
TEST(RowEpilogue, CudaWriterInstantiatesTheSkeletonWithTheRowFunctor) {
  RowEpilogueOn on;
  for (auto [e, k] : {std::pair{128, 8}, std::pair{64, 6}, std::pair{120, 1}}) {
    SCOPED_TRACE("E " + std::to_string(e) + " K " + std::to_string(k));
    BoundProgram bound = moe({{"T", 2048}, {"HID", 2048}, {"E", e}, {"K", k}});
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    ASSERT_EQ(compiled.kernels.kernels.size(), 1u) << print_kernel_program(compiled.kernels);
    GeneratedModule module = generate_cuda(compiled.kernels);
    ASSERT_EQ(module.kernels.size(), 1u);
    ASSERT_TRUE(module.kernels[0].gemm.has_value()) << module.source;
    const GemmSkeletonLaunch& g = *module.kernels[0].gemm;
    EXPECT_GE(g.bn, e);
    EXPECT_EQ(g.cluster_n, 1);
    EXPECT_EQ(g.n, e);
    EXPECT_EQ(g.m, 2048);
    EXPECT_EQ(g.k, 2048);
    const std::string& s = module.source;
    EXPECT_NE(s.find("static constexpr bool row_reduction = true;"), std::string::npos) << s;
    EXPECT_NE(s.find("solder::gemm::quad_max("), std::string::npos) << s;
    EXPECT_NE(s.find("solder::gemm::quad_sum("), std::string::npos) << s;
    EXPECT_NE(s.find("solder::gemm::quad_topk<" + std::to_string(k) + ">"), std::string::npos) << s;
    EXPECT_EQ(s.find("logits["), std::string::npos) << s;  // the logits are never addressed in memory
    ASSERT_EQ(module.contractions.size(), 1u);
    EXPECT_EQ(module.contractions[0].skeleton, ContractionSchedule::kGemmSkeleton);
    EXPECT_NE(module.contractions[0].tile.find("row-reduction epilogue"), std::string::npos);
  }
}

}  // namespace
}  // namespace solder
