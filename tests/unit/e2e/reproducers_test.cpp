// Regression tests for the reproducers of issue 16 that the back end fixed (tests/data/reproducers,
// copied from the session's reproducer folder): each compiles fused and unfused, with the CPU's and
// the GPU's tiles, runs on the CPU executor and matches the float64 reference, and its CUDA is
// generated. (Their CUDA compiles with nvcc and NVRTC: backend/cuda_names_test.cpp.)
#include <gtest/gtest.h>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "kernel/kernel_printer.h"
#include "kernel/kernel_verifier.h"
#include "lower/lower_unfused.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

std::string reproducer(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/tests/data/reproducers/" + name + ".sol"; }

BoundProgram bind_reproducer(const std::string& name, bool small, std::vector<std::pair<std::string, int64_t>> overrides = {}) {
  auto program = std::make_shared<Program>(parse_program_file(reproducer(name)));
  return bind_program(program, SizeChoice{small, std::move(overrides)});
}

// Fused with the CPU's and the GPU's tiles, and unfused: verified against the reference; the CUDA of
// the GPU plan is generated.
void expect_verified(const BoundProgram& bound, const std::string& what) {
  SCOPED_TRACE(what);
  TensorSet inputs = make_inputs(bound, 7);
  TensorSet reference = run_reference(bound, inputs);
  for (bool gpu : {false, true}) {
    CompileOptions options = gpu ? CompileOptions::for_gpu() : CompileOptions{};
    CompileResult compiled = compile_program(bound, options);
    testing::Verified v = testing::verify_kernels(bound, compiled.kernels, inputs, &reference);
    EXPECT_TRUE(v.ok()) << (gpu ? "GPU tiles: " : "CPU tiles: ") << v.failures();
    if (gpu) EXPECT_FALSE(generate_cuda(compiled.kernels).source.empty());
  }
  KernelProgram unfused = lower_unfused(bound);
  verify_kernel_program(unfused);
  testing::Verified u = testing::verify_kernels(bound, unfused, inputs, &reference);
  EXPECT_TRUE(u.ok()) << "unfused: " << u.failures();
}

// The variance of a whole vector streams it with a scalar centre state: for A >= 17 the lowering read
// that scalar tile with an index per dim it does not have (SIGSEGV).
TEST(Reproducers, ScalarVarianceAtEverySize) {
  for (int64_t a : {16, 17, 64, 65, 129, 1000}) expect_verified(bind_reproducer("crash_scalar_variance", false, {{"A", a}}), "A=" + std::to_string(a));
}

// An input named like the tile of a member (`y_tile`): the tile gets another name.
TEST(Reproducers, InputNamedLikeAnInternalTile) {
  for (bool small : {true, false}) expect_verified(bind_reproducer("crash_name_y_tile", small), small ? "small" : "default");
  FusionResult fused = fuse_program(bind_reproducer("crash_name_y_tile", true), FusionParams{});
  std::string text;
  for (auto& k : fused.kernels.kernels) text += print_kernel(k);
  EXPECT_NE(text.find("y_tile_2"), std::string::npos) << text;
}

// Tensors named like the fusion's buffers and kernels (x_tile, acc_y, y_kernel, fused_y_kernel).
TEST(Reproducers, TensorsNamedLikeFusionNames) {
  for (bool small : {true, false}) expect_verified(bind_reproducer("ice_name_collisions_h5", small), small ? "small" : "default");
}

// A topk whose indices no one reads: they stay on chip (were stored to a global that does not exist).
TEST(Reproducers, TopkWithUnusedIndices) { expect_verified(bind_reproducer("ice_topk_unused_indices", false), "default"); }

// A topk whose values stay in its kernel while its indices feed a reduction in another kernel (at
// T >= 3511 the two split): only the indices are stored.
TEST(Reproducers, TopkIndicesFeedAnotherKernel) {
  for (int64_t t : {64, 3510, 3511, 4096}) expect_verified(bind_reproducer("ice_topk_idx_reduction", false, {{"T", t}}), "T=" + std::to_string(t));
}

// Every C++ keyword and many CUDA names as tensor names: verified on the CPU (the CUDA compiles:
// backend/cuda_names_test.cpp).
TEST(Reproducers, HostileNamesVerify) {
  expect_verified(bind_reproducer("uncompilable_cuda_cxx_keywords", true), "C++ keywords");
  expect_verified(bind_reproducer("uncompilable_cuda_builtins", true), "CUDA names");
}

// i32 values between 1e8 and 2e8 plus one: exact in the executor (it stores doubles) and in the CUDA
// (i32 tiles are int, integer stores saturate_i32).
TEST(Reproducers, I32AboveTwoTo24IsExact) {
  BoundProgram bound = bind_reproducer("wrong_i32_through_float", false);
  expect_verified(bound, "i32");
  TensorSet inputs = make_inputs(bound, 3);
  ExecutionResult r = execute_kernel_program(compile_program(bound, CompileOptions{}).kernels, inputs);
  const HostTensor& a = inputs.at("a");
  const HostTensor& b = r.outputs.at("b");
  for (size_t i = 0; i < a.values.size(); ++i) ASSERT_EQ(b.values[i], a.values[i] + 1) << i;
  std::string source = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels).source;
  EXPECT_NE(source.find("int* const a_tile"), std::string::npos) << source;
  EXPECT_NE(source.find("solder::saturate_i32("), std::string::npos) << source;
}

// Saturation at the int32 bounds, the same in the reference and the executor.
TEST(Reproducers, I32StoresSaturate) {
  auto program = std::make_shared<Program>(parse_program(
      "program sat\ndim N = 8\nin a[N] : i32 ~ randint(2000000000, 2100000000)\n"
      "out up[n] : i32 = a[n] * 2\nout down[n] : i32 = -a[n] * 2\nout same[n] : i32 = a[n] * 2 - a[n]\n", "sat.sol"));
  BoundProgram bound = bind_program(program, SizeChoice{false, {}});
  expect_verified(bound, "saturation");
  TensorSet inputs = make_inputs(bound, 5);
  ExecutionResult r = execute_kernel_program(compile_program(bound, CompileOptions{}).kernels, inputs);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(r.outputs.at("up").values[i], 2147483647.0);
    EXPECT_EQ(r.outputs.at("down").values[i], -2147483648.0);
    EXPECT_EQ(r.outputs.at("same").values[i], inputs.at("a").values[i]);
  }
}

}  // namespace
}  // namespace solder
