// Reductions v2 of the CUDA code generator and the planner's memory-bound tiles: contraction-free
// groups get few rows and long stream tiles on the GPU (contractions keep 128 x 64), staging copies
// use 16-byte vectors, large reduces are cooperative (merged when consecutive), and block barriers
// stand only where a statement touches what another thread wrote. The generated code's compilation
// is checked by cuda_codegen_test (nvcc, NVRTC); its results on the H100 (tests/gpu, bench/NOTES.md).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

KernelProgram gpu_kernels(const std::string& example, bool small = false) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + example + ".sol"));
  BoundProgram bound = bind_program(program, SizeChoice{small, {}});
  CompileOptions options = CompileOptions::for_gpu();
  options.gemm_skeleton = false;  // the fused kernels' writers (whole contractions: whole_contractions_test.cpp)
  return compile_program(bound, options).kernels;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const Buffer* buffer(const Kernel& k, const std::string& name) {
  const Buffer* b = k.find_buffer(name);
  EXPECT_NE(b, nullptr) << name;
  return b;
}

TEST(ReduceTiles, VarianceGetsFewRowsAndALongStream) {
  KernelProgram kp = gpu_kernels("variance");
  ASSERT_EQ(kp.kernels.size(), 1u);
  const Kernel& k = kp.kernels[0];
  EXPECT_GE(k.blocks(), 264);  // two blocks per SM of an H100
  EXPECT_EQ(k.cluster, 1);     // enough rows: no segments
  const Buffer* x = buffer(k, "x_tile");
  ASSERT_EQ(x->shape.size(), 2u);
  EXPECT_LE(x->shape[0], 8);
  EXPECT_EQ(x->shape[0] * x->shape[1], 4096);
}

TEST(ReduceTiles, ContractionsKeepTheTensorCoreTiles) {
  // Kernels with a contraction get the same Kernel IR with and without the memory-bound tiles.
  for (const char* example : {"vanilla", "rmsnorm_gemm", "quant_gemm", "llama_decode"}) {
    SCOPED_TRACE(example);
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + example + ".sol"));
    BoundProgram bound = bind_program(program, SizeChoice{false, {}});
    CompileOptions streaming = CompileOptions::for_gpu(), plain = streaming;
    plain.fusion.streaming_tiles = false;
    KernelProgram a = compile_program(bound, streaming).kernels, b = compile_program(bound, plain).kernels;
    int compared = 0;
    for (auto& k : b.kernels) {
      bool contraction = false;
      for (auto& d : k.definitions) contraction |= d == "y" || d == "s" || d == "c" || d == "o";
      if (!contraction) continue;
      const Kernel* same = nullptr;
      for (auto& other : a.kernels) if (other.name == k.name) same = &other;
      ASSERT_NE(same, nullptr) << k.name;
      ASSERT_EQ(same->buffers.size(), k.buffers.size()) << k.name;
      for (size_t i = 0; i < k.buffers.size(); ++i) EXPECT_EQ(same->buffers[i].shape, k.buffers[i].shape) << k.name << " " << k.buffers[i].name;
      ++compared;
    }
    EXPECT_GT(compared, 0);
  }
}

TEST(ReduceTiles, FewRowsSplitTheStreamIntoSegments) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/variance.sol"));
  BoundProgram bound = bind_program(program, SizeChoice{false, {{"BS", 128}}});
  KernelProgram kp = compile_program(bound, CompileOptions::for_gpu()).kernels;
  ASSERT_FALSE(kp.kernels.empty());
  EXPECT_GE(kp.kernels[0].blocks(), 264);
  EXPECT_GT(kp.kernels[0].cluster, 1);
}

TEST(ReduceCodegen, VarianceIsVectorisedCooperativeAndMerged) {
  std::string source = generate_cuda(gpu_kernels("variance")).source;
  // The stream's tiles of x: 16-byte vectors, the next tile prefetched into registers.
  EXPECT_NE(source.find("solder::reduce::load_vector(x + "), std::string::npos);
  EXPECT_NE(source.find("prefetch0_"), std::string::npos);
  EXPECT_NE(source.find("reduce into B0_var, B1_var, B2_var"), std::string::npos) << "the three Taylor states in one pass";
  EXPECT_NE(source.find("solder::reduce::warp_combine"), std::string::npos);
  EXPECT_EQ(source.find("powf("), std::string::npos) << "pow(x, 2) is a product";
  // The per-tile maps over the rows are each row's own thread: no barrier between them.
  size_t loop = source.find("for (long long l_t");
  ASSERT_NE(loop, std::string::npos);
  EXPECT_LE(count(source.substr(loop), "__syncthreads();"), 8);
}

TEST(ReduceCodegen, ColumnSumsArePointMajor) {
  std::string source = generate_cuda(gpu_kernels("batch_reduction")).source;
  EXPECT_NE(source.find("point-major"), std::string::npos);
  EXPECT_NE(source.find("solder::reduce::load_vector(dy + "), std::string::npos);
}

}  // namespace
}  // namespace solder

namespace solder {
namespace {

// The MoE router's top-8 on the default GPU path: the logits run whole on the GEMM skeleton and the
// softmax + top-k kernel holds 4 rows per block (E = 128 whole): 32 threads per row, candidates in
// registers, 8 rounds of the group's first (kernel_writer_topk.cpp) instead of one thread per row with
// a sorted list. (Fused with the product, --no-skeleton, the row tile is the product's, at least 64
// rows: one thread per row.)
TEST(ReduceCodegen, TopkIsCooperativeWhereTheRowsAreFew) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/moe_routing.sol"));
  KernelProgram kp = compile_program(bind_program(program, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels;
  std::string source = generate_cuda(kp).source;
  EXPECT_EQ(count(source, "#include <solder/reduce/topk.cuh>"), 1);
  EXPECT_EQ(count(source, "32 threads per point, each with 5 candidates; 8 rounds of the group's first"), 1) << source;
  EXPECT_EQ(count(source, "insert into the sorted list"), 0);
  EXPECT_EQ(count(source, "solder::reduce::topk_group_best<32>(mine_)"), 1);
}

}  // namespace
}  // namespace solder
