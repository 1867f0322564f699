// The generic writer's register pass (kernel_writer_registers.cpp): memory-bound kernels without a
// stream loop or a contraction (SiLU·up, RMSNorm: bench/programs/) keep the tiles that each thread
// touches only at its own elements in registers, with 16-byte loads and stores and no shared-memory
// staging; everything else keeps the shared-memory tiles. Results on the H100: bench/NOTES.md
// ("Pointwise speed"); compilation of the source here with NVRTC when it is available.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
#include "../test_util.h"

namespace solder {
namespace {

GeneratedModule generate_file(const std::string& file, bool small, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto program = std::make_shared<Program>(parse_program_file(file));
  BoundProgram bound = bind_program(program, SizeChoice{small, dims});
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
}
std::string bench_program(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/bench/programs/" + name + ".sol"; }
std::string example(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"; }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RegisterPass, SiluMulLoadsComputesAndStoresInRegisters) {
  GeneratedModule m = generate_file(bench_program("silu_mul"), false);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_NE(m.source.find("// the register pass: 4096 elements of each point tile per block, 2 vectors of 8 per thread"), std::string::npos)
      << m.source;
  // Two 16-byte loads (g, u) and one 16-byte store per vector; nothing staged in shared memory.
  EXPECT_EQ(count(m.source, "solder::reduce::load_vector("), 2);
  EXPECT_EQ(count(m.source, "solder::reduce::store_vector("), 1);
  EXPECT_EQ(count(m.source, "__syncthreads"), 0);
  EXPECT_EQ(count(m.source, "store_tile"), 0);
  EXPECT_EQ(m.kernels[0].shared_bytes, 0);
  // The map reads its operands from the registers, element by element.
  EXPECT_NE(m.source.find("reg_g_tile[u_][i_]"), std::string::npos);
  EXPECT_NE(m.source.find("reg_y_tile[u_][i_] = solder::round_bf16("), std::string::npos);
}

TEST(RegisterPass, RaggedTileStoresElementByElementWhereTheGuardFails) {
  // F = 5000: tiles of 1024 along F, the fifth 904 long; the store's guard is checked per element of
  // each vector, a vector store where all of them hold.
  GeneratedModule m = generate_file(bench_program("silu_mul"), false, {{"T", 64}, {"F", 5000}});
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_NE(m.source.find("the register pass"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("whole_ = whole_ && "), std::string::npos);
  EXPECT_NE(m.source.find("solder::store(&y["), std::string::npos);
}

TEST(RegisterPass, RmsNormReducesTheRowFromRegisters) {
  GeneratedModule m = generate_file(bench_program("rmsnorm"), false);
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_NE(m.source.find("the register pass"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("reduce into ms_tile from registers"), std::string::npos);
  // x and w once each, y once; the statistic (one float) and the 8 warp partials in shared memory.
  EXPECT_EQ(count(m.source, "solder::reduce::load_vector("), 2);
  EXPECT_EQ(count(m.source, "solder::reduce::store_vector("), 1);
  EXPECT_LE(count(m.source, "__syncthreads"), 3);
  EXPECT_LT(m.kernels[0].shared_bytes, 5000);
  EXPECT_GE(m.kernels[0].blocks, 512);
}

TEST(RegisterPass, StreamLoopsAndSharedReadsKeepTheSharedTiles) {
  // Stream loops (variance), reduces over many points (softmax) and contractions keep their tiles.
  for (const char* name : {"variance", "softmax", "inertia", "rmsnorm_gemm"}) {
    SCOPED_TRACE(name);
    for (bool small : {true, false}) {
      GeneratedModule m = generate_file(example(name), small);
      EXPECT_EQ(m.source.find("the register pass"), std::string::npos);
    }
  }
}

TEST(RegisterPass, NvrtcCompilesTheRegisterKernels) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (const char* name : {"silu_mul", "rmsnorm"})
    for (bool small : {true, false}) {
      SCOPED_TRACE(std::string(name) + (small ? " small" : " default"));
      GeneratedModule m = generate_file(bench_program(name), small);
      runtime::CompileFlags flags;
      flags.use_cache = false;
      runtime::CompiledModule compiled = runtime::compile_cuda(m.source, std::string(name) + ".cu", flags);
      EXPECT_FALSE(compiled.cubins.front().empty());
    }
}

}  // namespace
}  // namespace solder
