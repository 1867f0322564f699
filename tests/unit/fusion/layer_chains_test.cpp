// Layer chains (fusion/layer_chains.h): which runs of whole contractions the sm90 chain kernel would take,
// which layers it would also store, why a pair does not chain, and that the report appears only under
// SOLDER_LAYER_CHAIN=1 and changes no kernel.
#include <gtest/gtest.h>

#include <cstdlib>

#include "driver/compile.h"
#include "fusion/layer_chains.h"
#include "fusion/whole_contractions.h"
#include "ir/parser.h"
#include "kernel/kernel_printer.h"
#include "../test_util.h"

namespace solder {
namespace {

BoundProgram example(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  return bind_program(program, SizeChoice{false, std::move(dims)});
}

using testing::ScopedEnv;

std::vector<std::string> layer_names(const BoundProgram& bound, const WholeContractionPlan& plan, const LayerChain& chain) {
  std::vector<std::string> names;
  for (size_t i : chain.layers) names.push_back(bound.defs[plan.whole[i].def].def->target.name);
  return names;
}

// nerf_mlp at its paper size: h1 → h2 → h3 → h4 (from h0, on the gathered GEMM: K 63 is not a TMA row)
// and h6 → h7 → feat (from h5, the concatenation); h7 is also read by sigma, so stored; h0, h5, hv and
// the heads do not chain.
TEST(LayerChains, NerfMlpHasTwoChainsOfItsSquareLayers) {
  BoundProgram bound = example("nerf_mlp");
  WholeContractionPlan plan = plan_whole_contractions(bound);
  LayerChainPlan chains = find_layer_chains(bound, plan);
  ASSERT_EQ(chains.chains.size(), 2u);
  const LayerChain& first = chains.chains[0];
  EXPECT_EQ(layer_names(bound, plan, first), (std::vector<std::string>{"z1", "z2", "z3", "z4"}));
  EXPECT_EQ(first.results, (std::vector<std::string>{"h1", "h2", "h3", "h4"}));
  EXPECT_EQ(first.stored, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(first.m, 65536);
  EXPECT_EQ(first.k0, 256);
  EXPECT_EQ(first.n, 256);
  const LayerChain& second = chains.chains[1];
  EXPECT_EQ(layer_names(bound, plan, second), (std::vector<std::string>{"z6", "z7", "zf"}));
  EXPECT_EQ(second.results, (std::vector<std::string>{"h6", "h7", "feat"}));
  EXPECT_EQ(second.stored, (std::vector<bool>{false, true, true}));
  EXPECT_TRUE(chains.refused.empty()) << chains.refused.front();
}

// A width the chain does not take (N 320: the accumulator and the A fragment would not fit a thread)
// is refused with the reason, for each pair whose second layer reads the first one's result.
TEST(LayerChains, AWidthOver256IsRefusedWithTheReason) {
  BoundProgram bound = example("nerf_mlp", {{"H", 320}});
  WholeContractionPlan plan = plan_whole_contractions(bound);
  LayerChainPlan chains = find_layer_chains(bound, plan);
  EXPECT_TRUE(chains.chains.empty());
  ASSERT_FALSE(chains.refused.empty());
  EXPECT_NE(chains.refused.front().find("z1 and z2: not chained: N 320"), std::string::npos) << chains.refused.front();
}

// The report is the knob's only effect: the same kernels either way.
TEST(LayerChains, ReportedOnlyUnderTheKnobAndTheKernelsDoNotChange) {
  BoundProgram bound = example("nerf_mlp");
  CompileResult off = compile_program(bound, CompileOptions::for_gpu());
  EXPECT_EQ(off.report.find("layer chains"), std::string::npos);
  ScopedEnv on("SOLDER_LAYER_CHAIN", "1");
  CompileResult reported = compile_program(bound, CompileOptions::for_gpu());
  EXPECT_NE(reported.report.find("z1 (h1, on chip) -> z2 (h2, on chip) -> z3 (h3, on chip) -> z4 (h4, stored)"), std::string::npos)
      << reported.report;
  EXPECT_NE(reported.report.find("z6 (h6, on chip) -> z7 (h7, stored) -> zf (feat, stored)"), std::string::npos);
  EXPECT_EQ(print_kernel_program(reported.kernels), print_kernel_program(off.kernels));
}

}  // namespace
}  // namespace solder
