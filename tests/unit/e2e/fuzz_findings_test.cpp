// Regression tests for the programs the random-valid-program fuzzer found (tests/data/fuzz-findings,
// each with the cause in its header): every one runs unfused and fused on the CPU executor, over
// the tile parameters the fuzzer draws (stream tile 8/16/32, grid tile 1/2/16, segment threshold
// 1/4/64) and several input seeds, and must match the float64 reference.
#include <gtest/gtest.h>

#include "kernel/kernel_printer.h"
#include "lower/lower_unfused.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

BoundProgram bind_finding(const std::string& name) {
  std::string path = std::string(SOLDER_SOURCE_DIR) + "/tests/data/fuzz-findings/" + name + ".sol";
  auto program = std::make_shared<Program>(parse_program_file(path));
  return bind_program(program, SizeChoice{});
}

// Unfused, and fused with each of the fuzzer's parameter choices, for each seed: verified.
void expect_verified_everywhere(const std::string& name, std::vector<uint64_t> seeds) {
  BoundProgram bound = bind_finding(name);
  for (uint64_t seed : seeds) {
    TensorSet inputs = make_inputs(bound, seed);
    TensorSet reference = run_reference(bound, inputs);
    KernelProgram unfused = lower_unfused(bound);
    verify_kernel_program(unfused);
    testing::Verified u = testing::verify_kernels(bound, unfused, inputs, &reference);
    EXPECT_TRUE(u.ok()) << name << " seed " << seed << " unfused: " << u.failures();
    for (int64_t stream : {8, 16, 32})
      for (int64_t grid : {1, 2, 16})
        for (int blocks : {1, 4, 64}) {
          FusionParams params;
          params.stream_tile = stream;
          params.grid_tile = grid;
          params.min_blocks_for_single_segment = blocks;
          std::string what = name + " seed " + std::to_string(seed) + ", stream_tile " + std::to_string(stream) + ", grid_tile " +
                             std::to_string(grid) + ", min_blocks_for_single_segment " + std::to_string(blocks);
          KernelProgram kernels;
          try {
            kernels = fuse_program(bound, params).kernels;
            verify_kernel_program(kernels);
          } catch (const Error& e) {
            ADD_FAILURE() << what << ": " << e.formatted();
            continue;
          }
          testing::Verified v = testing::verify_kernels(bound, kernels, inputs, &reference);
          EXPECT_TRUE(v.ok()) << what << ": " << v.failures() << print_kernel_program(kernels);
        }
  }
}

TEST(FuzzFindings, FusedBf16Accumulator) { expect_verified_everywhere("fused_bf16_accumulator", {1, 2, 36, 37}); }
TEST(FuzzFindings, KernelOrderReadBeforeWrite) { expect_verified_everywhere("kernel_order_read_before_write", {1, 2}); }
TEST(FuzzFindings, ScalarCascadePolynomialCrash) { expect_verified_everywhere("scalar_cascade_polynomial_crash", {1, 2}); }
TEST(FuzzFindings, TileReadBeforeWritten) { expect_verified_everywhere("tile_read_before_written", {1, 2}); }
TEST(FuzzFindings, TopkF16RunningValues) { expect_verified_everywhere("topk_f16_running_values", {1, 2, 3, 4}); }
TEST(FuzzFindings, TopkRowTileBelowK) { expect_verified_everywhere("topk_row_tile_below_k", {1, 2}); }
TEST(FuzzFindings, TopkUnusedValues) { expect_verified_everywhere("topk_unused_values", {1, 2}); }

}  // namespace
}  // namespace solder
