// Contractions on tensor cores in the generic writer (gemm_codegen.h): which reduces the recogniser
// takes (and as which matrix product), which rule refuses the others, and what the writer emits for
// each form. (The values are checked on the GPU: tests/gpu/tile/test_block_gemm.cu for the primitive,
// `solder run --backend cuda` for the examples; CudaCodegen.EveryExampleCompilesWithNvccForSm90a
// compiles the generated code.)
#include <gtest/gtest.h>

#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/gemm_codegen.h"
#include "driver/compile.h"
#include "../kernel_builders.h"
#include "../test_util.h"

namespace solder {
namespace {

using generic::match_contraction;
namespace kb = kernel_builders;

KernelProgram gpu_kernels(const std::string& example, bool small) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + example + ".sol"));
  BoundProgram bound = bind_program(program, SizeChoice{small, {}});
  return compile_program(bound, CompileOptions::for_gpu()).kernels;
}

// The first reduce into `dst` in the kernel that has one.
std::pair<const Kernel*, const ReduceNode*> find_reduce(const KernelProgram& kp, const std::string& dst) {
  struct Finder : StmtVisitor {
    std::string dst;
    const ReduceNode* found = nullptr;
    using StmtVisitor::visit;
    void visit(const ReduceNode& r) override {
      if (!found && r.dst.name == dst) found = &r;
    }
  };
  for (auto& k : kp.kernels) {
    Finder f;
    f.dst = dst;
    f.visit(k.body);
    if (f.found) return {&k, f.found};
  }
  return {nullptr, nullptr};
}

generic::ContractionMatch match_in(const std::string& example, bool small, const std::string& dst) {
  KernelProgram kp = gpu_kernels(example, small);
  auto [kernel, reduce] = find_reduce(kp, dst);
  EXPECT_NE(reduce, nullptr) << example << " " << dst;
  if (!reduce) return {};
  return match_contraction(*reduce, *kernel);
}

TEST(GemmCodegen, TakesTheMoeRouterGemm) {
  auto m = match_in("moe_routing", false, "logits_tile");
  ASSERT_TRUE(m.contraction) << m.refusal;
  const generic::Contraction& g = *m.contraction;
  EXPECT_EQ(g.a, "x_tile");
  EXPECT_EQ(g.b, "wg_tile");
  EXPECT_EQ(g.type, DType::bf16);
  EXPECT_EQ(g.m, 16);
  EXPECT_EQ(g.n, 64);
  EXPECT_EQ(g.k, 128);
  EXPECT_FALSE(g.b_k_major);  // wg_tile[c, e]: columns contiguous (ldmatrix.trans)
  EXPECT_EQ(g.a_depth, 1);
  EXPECT_EQ(g.a_row, 128);
  EXPECT_EQ(g.b_depth, 64);
  EXPECT_EQ(g.c_row, 64);
  EXPECT_EQ(g.c_column, 1);
  EXPECT_TRUE(g.accumulate);
}

TEST(GemmCodegen, TakesAKMajorOperandAndASingleRow) {
  // mla_decode: s_nope[b,h,j] = Σ_c q_nope[b,h,c] ckv[b,j,c] — one row (M = 1), B stored [n][k].
  auto m = match_in("mla_decode", false, "s_nope_tile");
  ASSERT_TRUE(m.contraction) << m.refusal;
  EXPECT_EQ(m.contraction->a, "q_nope_tile");
  EXPECT_EQ(m.contraction->m, 1);
  EXPECT_EQ(m.contraction->n, 128);
  EXPECT_TRUE(m.contraction->b_k_major);
}

TEST(GemmCodegen, RefusesAnOperandThatIsAnExpression) {
  auto m = match_in("ffn", false, "e_tile");
  EXPECT_FALSE(m.contraction);
  EXPECT_NE(m.refusal.find("is not a staged tile (an expression)"), std::string::npos) << m.refusal;
}

TEST(GemmCodegen, RefusesAProductOfThreeFactors) {
  // rmsnorm_gemm: x_tile[t, c] * g_tile[c] * w_tile[c, n]: the left factor is itself a product.
  auto m = match_in("rmsnorm_gemm", false, "acc_y");
  EXPECT_FALSE(m.contraction);
  EXPECT_NE(m.refusal.find("is not a staged tile"), std::string::npos) << m.refusal;
}

TEST(GemmCodegen, RefusesF32OperandsAndOtherShapes) {
  using namespace kernel_builders;
  auto kernel_with = [](DType type, int64_t m, int64_t n) {
    Kernel k;
    k.name = "k";
    k.buffers = {Buffer{"a", {m, 32}, type}, Buffer{"b", {32, n}, type}, Buffer{"c", {m, n}, DType::f32}};
    return k;
  };
  ReduceNode r;
  r.op = ReduceOp::sum;
  r.domain = kb::over({Axis{"i", 16}, Axis{"j", 32}});
  r.reduce_axes = {Axis{"k", 32}};
  r.dst = kb::at("c", {kb::var("i"), kb::var("j")});
  r.value = kb::binary(BinaryOp::mul, kb::load("a", {kb::var("i"), kb::var("k")}), kb::load("b", {kb::var("k"), kb::var("j")}));
  r.accumulate = true;
  EXPECT_TRUE(match_contraction(r, kernel_with(DType::f16, 16, 32)).contraction);
  auto f32 = match_contraction(r, kernel_with(DType::f32, 16, 32));
  EXPECT_FALSE(f32.contraction);
  EXPECT_NE(f32.refusal.find("is f32 (tensor cores only for bf16/f16 operands)"), std::string::npos) << f32.refusal;
  // N = 24: not whole column pairs either way round.
  ReduceNode narrow = r;
  narrow.domain = kb::over({Axis{"i", 16}, Axis{"j", 24}});
  auto n24 = match_contraction(narrow, kernel_with(DType::bf16, 16, 24));
  EXPECT_FALSE(n24.contraction);
  EXPECT_NE(n24.refusal.find("is not a multiple of 16"), std::string::npos) << n24.refusal;
  // A where condition on the reduced points.
  ReduceNode masked = r;
  masked.where = kb::less(kb::var("k"), kb::num(7));
  EXPECT_EQ(match_contraction(masked, kernel_with(DType::bf16, 16, 32)).refusal, "a where condition on the reduced points");
  // Not a sum.
  ReduceNode maximum = r;
  maximum.op = ReduceOp::max;
  EXPECT_EQ(match_contraction(maximum, kernel_with(DType::bf16, 16, 32)).refusal, "not a sum");
  // A kept axis in neither operand.
  ReduceNode broadcast = r;
  broadcast.value = kb::binary(BinaryOp::mul, kb::load("a", {kb::var("i"), kb::var("k")}), kb::load("b", {kb::var("k"), kb::num(0)}));
  auto bcast = match_contraction(broadcast, kernel_with(DType::bf16, 16, 32));
  EXPECT_FALSE(bcast.contraction);
  EXPECT_NE(bcast.refusal.find("in neither operand"), std::string::npos) << bcast.refusal;
}

std::string kernel_source(const std::string& example, bool small) {
  return generate_cuda(gpu_kernels(example, small)).source;
}

TEST(GemmCodegen, MoeRouterRunsTheStagedLoop) {
  std::string source = kernel_source("moe_routing", false);
  EXPECT_NE(source.find("tensor cores (block_gemm): logits_tile += x_tile · wg_tile over c_t"), std::string::npos);
  EXPECT_NE(source.find("solder::tile::SwizzledB<__nv_bfloat16, 128, 64, false>"), std::string::npos);
  EXPECT_NE(source.find("solder::tile::cp_async_16("), std::string::npos);
  // The staged tiles get no float storage, and the scalar loop is gone.
  EXPECT_EQ(source.find("float* const x_tile"), std::string::npos);
  EXPECT_EQ(source.find("reduce into logits_tile"), std::string::npos);
  // At its small sizes (HID = 64: no loop over c) the one reduce runs on the float tiles.
  std::string small = kernel_source("moe_routing", true);
  EXPECT_NE(small.find("tensor cores (block_gemm on the float tiles): logits_tile += x_tile · wg_tile"), std::string::npos);
}

TEST(GemmCodegen, KeepsTheRoundingOfA16BitAccumulator) {
  // llama_decode's q_tile is f16 and accumulates over c_t: each step rounds to f16, so summing the
  // whole loop in f32 would change the result. Refused.
  auto m = match_in("llama_decode", false, "q_tile");
  EXPECT_FALSE(m.contraction);
  EXPECT_EQ(m.refusal, "the result is not an f32 tile");
}

TEST(GemmCodegen, RefusalsAreWrittenIntoTheSource) {
  std::string source = kernel_source("ffn", true);
  EXPECT_NE(source.find("// tensor cores not used for e_tile: operand cast(gelu("), std::string::npos);
}

TEST(GemmCodegen, OneReduceOnFloatTiles) {
  // nerf_mlp z0: the tiles are staged outside any loop; the reduce runs on their float copies.
  std::string source = kernel_source("nerf_mlp", true);
  EXPECT_NE(source.find("tensor cores (block_gemm on the float tiles): z0_tile"), std::string::npos);
  EXPECT_NE(source.find("solder::tile::FloatA<__half>"), std::string::npos);
}

}  // namespace
}  // namespace solder
