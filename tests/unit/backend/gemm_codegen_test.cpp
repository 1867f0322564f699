// Contractions on tensor cores in the generic writer (gemm_codegen.h): which reduces the recogniser
// takes (and as which matrix product), which rule refuses the others, and what the writer emits for
// each form. (The values are checked on the GPU: tests/gpu/tile/test_block_gemm.cu for the primitive,
// `solder run --backend cuda` for the examples; CudaCodegen.EveryExampleCompilesWithNvccForSm90a
// compiles the generated code.)
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/gemm_codegen.h"
#include "driver/compile.h"
#include "ir/printer.h"
#include "../kernel_builders.h"
#include "../test_util.h"

namespace solder {
namespace {

using generic::match_contraction;
namespace kb = kernel_builders;

KernelProgram gpu_kernels(const std::string& example, bool small) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + example + ".sol"));
  BoundProgram bound = bind_program(program, SizeChoice{small, {}});
  CompileOptions options = CompileOptions::for_gpu();
  options.gemm_skeleton = false;  // the fused kernels' writers (whole contractions: whole_contractions_test.cpp)
  return contracts_as_reduces(compile_program(bound, options).kernels);  // what the writers see
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

std::string kernel_source(const std::string& example, bool small);  // below

TEST(GemmCodegen, TakesTheMoeRouterGemm) {
  // 128 tokens a block, too few blocks (16): the hidden dim c streams, split across blocks.
  auto m = match_in("moe_routing", false, "acc_logits");
  ASSERT_TRUE(m.contraction) << m.refusal;
  const generic::Contraction& g = *m.contraction;
  EXPECT_EQ(g.a, "x_tile");
  EXPECT_EQ(g.b, "wg_tile");
  EXPECT_EQ(g.type, DType::bf16);
  EXPECT_EQ(g.m, 128);
  EXPECT_EQ(g.n, 128);  // E = 128 held whole on the GPU (gpu_fusion_params().hold_whole_up_to)
  EXPECT_EQ(g.k, 64);   // one stream step
  EXPECT_FALSE(g.b_k_major);  // wg_tile[c, e]: columns contiguous (ldmatrix.trans)
  EXPECT_EQ(g.a_depth, 1);
  EXPECT_EQ(g.a_row, 64);
  EXPECT_EQ(g.b_depth, 128);
  EXPECT_EQ(g.c_row, 128);
  EXPECT_EQ(g.c_column, 1);
  EXPECT_TRUE(g.accumulate);
}

TEST(GemmCodegen, TakesAKMajorOperandAndARowTile) {
  // mla_decode: s_nope[b,h,j] = Σ_c q_nope[b,h,c] ckv[b,j,c] — 128 heads a block (the cost model's
  // row tile of a tensor-core product), B stored [n][k].
  auto m = match_in("mla_decode", false, "s_nope_tile");
  ASSERT_TRUE(m.contraction) << m.refusal;
  EXPECT_EQ(m.contraction->a, "q_nope_tile");
  EXPECT_EQ(m.contraction->m, 128);
  EXPECT_EQ(m.contraction->n, 128);
  EXPECT_TRUE(m.contraction->b_k_major);
}

TEST(GemmCodegen, TakesAnOperandTheProgramRoundsTo16Bits) {
  // ffn: e[m, l] += Σ_n cast(gelu(c[m, n]), f16) · d[n, l]: A computed (one f16 value per element),
  // B the f16 tile; e is f16, rounded after each reduce.
  // e is f16; its sum over the n tiles accumulates in the f32 tile e_tile_f32 (rounded once after).
  auto m = match_in("ffn", false, "e_tile_f32");
  ASSERT_TRUE(m.contraction) << m.refusal;
  EXPECT_TRUE(m.contraction->a_computed);
  EXPECT_FALSE(m.contraction->b_computed);
  EXPECT_EQ(m.contraction->a, "cast(gelu(c_tile[m, n]), f16)");
  EXPECT_EQ(m.contraction->b, "d_tile");
  EXPECT_EQ(m.contraction->type, DType::f16);
  EXPECT_EQ(m.contraction->result_type, DType::f32);
  EXPECT_EQ(m.contraction->depth_axis, "n");
  EXPECT_EQ(m.contraction->column_axis, "l");
  // gated_ffn: the cast of a product of two activations.
  auto gated = match_in("gated_ffn", false, "e_tile_f32");
  ASSERT_TRUE(gated.contraction) << gated.refusal;
  EXPECT_EQ(gated.contraction->a, "cast(silu(gate_tile[m, n]) * up_tile[m, n], f16)");
  // Both at their small sizes too.
  EXPECT_TRUE(match_in("ffn", true, "e_tile").contraction);
  EXPECT_TRUE(match_in("gated_ffn", true, "e_tile").contraction);
}

TEST(GemmCodegen, QuantGemmRunsWithItsScaleAfterTheDot) {
  // quant_gemm: Σ_k aq[m, k] · w[k, n] · scale[m] is the contract scale[m] · Σ_k aq · w (T = e4m3):
  // the dot product on the tensor cores into an f32 tile, the row scale applied after it. (At its
  // paper sizes it runs whole on the skeleton's operand-prologue path: prologue_contraction_test.cpp.)
  for (bool small : {true}) {
    std::string source = kernel_source("quant_gemm", small);
    EXPECT_NE(source.find("// contract with T = f8e4m3"), std::string::npos) << small;
    EXPECT_NE(source.find("tensor cores (block_gemm): c_tile"), std::string::npos) << small;
    EXPECT_NE(source.find("// the contract's epilogue: scale and bias after the dot product"), std::string::npos) << small;
  }
}

TEST(GemmCodegen, AComputedOperandIsRoundedByThePrecisionPolicy) {
  // rmsnorm_gemm: x · g is computed in f32; the program's outputs are bf16, so the canonicalizer rounds
  // it to bf16 (stated in the fusion report) and the tensor cores take it as a computed operand. (At
  // its paper sizes it runs whole on the skeleton's operand-prologue path.)
  for (bool small : {true}) {
    std::string source = kernel_source("rmsnorm_gemm", small);
    EXPECT_NE(source.find("tensor cores (block_gemm): "), std::string::npos) << small;
    EXPECT_NE(source.find("= cast(x_tile[t__, c__] * g_tile[c__], bf16) · w_tile"), std::string::npos) << small;
  }
}

// A kernel with tiles x [rows, 32] (dtype x_type), s [rows] f32, w [32, 32] (w_type) and c [rows, 32]
// (c_type), and the reduce c[i, j] += Σ_k summand.
struct Sandbox {
  Kernel kernel;
  ReduceNode reduce;
  Sandbox(DType x_type, DType w_type, DType c_type, Expr summand, int64_t rows = 16) {
    kernel.name = "k";
    kernel.buffers = {Buffer{"x", {rows, 32}, x_type}, Buffer{"s", {rows}, DType::f32}, Buffer{"w", {32, 32}, w_type},
                      Buffer{"c", {rows, 32}, c_type}};
    reduce.op = ReduceOp::sum;
    reduce.domain = kb::over({Axis{"i", rows}, Axis{"j", 32}});
    reduce.reduce_axes = {Axis{"k", 32}};
    reduce.dst = kb::at("c", {kb::var("i"), kb::var("j")});
    reduce.value = summand;
    reduce.accumulate = true;
  }
  generic::ContractionMatch match() const { return match_contraction(reduce, kernel); }
};

Expr x_ik() { return kb::load("x", {kb::var("i"), kb::var("k")}); }
Expr w_kj() { return kb::load("w", {kb::var("k"), kb::var("j")}); }
Expr s_i() { return kb::load("s", {kb::var("i")}); }

TEST(GemmCodegen, ExpressionOperandsExactIn16BitsOnly) {
  using kb::binary;
  // x · s[i] in f32: refused, the rule named.
  auto uncast = Sandbox(DType::bf16, DType::bf16, DType::f32, binary(BinaryOp::mul, binary(BinaryOp::mul, x_ik(), s_i()), w_kj())).match();
  EXPECT_FALSE(uncast.contraction);
  EXPECT_EQ(uncast.refusal, "operand x[i, k] * s[i] is an f32 value, not rounded to f16, bf16 or fp8 by the program"
                            " (the tensor cores would round it: another result)");
  // cast(x / s[i], bf16) · w: taken, A computed, bf16.
  auto cast = Sandbox(DType::bf16, DType::bf16, DType::f32,
                      binary(BinaryOp::mul, make_cast(DType::bf16, binary(BinaryOp::div, x_ik(), s_i())), w_kj())).match();
  ASSERT_TRUE(cast.contraction) << cast.refusal;
  EXPECT_TRUE(cast.contraction->a_computed);
  EXPECT_EQ(cast.contraction->type, DType::bf16);
  // An fp8 cast times an fp8 tile: both computed, as f16.
  auto fp8 = Sandbox(DType::bf16, DType::f8e5m2, DType::f32,
                     binary(BinaryOp::mul, make_cast(DType::f8e4m3, binary(BinaryOp::div, x_ik(), s_i())), w_kj())).match();
  ASSERT_TRUE(fp8.contraction) << fp8.refusal;
  EXPECT_TRUE(fp8.contraction->a_computed && fp8.contraction->b_computed);
  EXPECT_EQ(fp8.contraction->type, DType::f16);
  // An fp8 operand beside a bf16 tile runs as bf16 (fp8 values are exact in bf16 too).
  auto mixed = Sandbox(DType::bf16, DType::f8e4m3, DType::f32, binary(BinaryOp::mul, x_ik(), w_kj())).match();
  ASSERT_TRUE(mixed.contraction) << mixed.refusal;
  EXPECT_EQ(mixed.contraction->type, DType::bf16);
  // cast to f16 beside a bf16 tile: two 16-bit types.
  auto two = Sandbox(DType::bf16, DType::bf16, DType::f32, binary(BinaryOp::mul, make_cast(DType::f16, x_ik()), w_kj())).match();
  EXPECT_EQ(two.refusal, "operands of two dtypes");
  // A scale of every term: refused.
  auto scaled = Sandbox(DType::f16, DType::f16, DType::f32, binary(BinaryOp::mul, binary(BinaryOp::mul, x_ik(), w_kj()), s_i())).match();
  EXPECT_FALSE(scaled.contraction);
  EXPECT_NE(scaled.refusal.find("the factor s[i] rounds each term"), std::string::npos) << scaled.refusal;
  // An operand reading the result tile.
  auto self = Sandbox(DType::f16, DType::f16, DType::f32,
                      binary(BinaryOp::mul, make_cast(DType::f16, kb::load("c", {kb::var("i"), kb::var("k")})), w_kj())).match();
  EXPECT_FALSE(self.contraction);
}

// The rule "few-row product": fewer than 16 rows and no computed operand stays scalar; llama_decode's
// decode projections so stay the scalar loop, while ffn's second GEMM (a computed operand) keeps the
// tensor cores.
TEST(GemmCodegen, RefusesAFewRowProductWithoutAComputedOperand) {
  using kb::binary;
  for (const char* dst : {"acc_q", "acc_k_new", "acc_v_new"}) {  // their K split across blocks
    auto m = match_in("llama_decode", false, dst);
    EXPECT_FALSE(m.contraction) << dst;
    EXPECT_NE(m.refusal.find("few-row product: M = 1 row (an mma pads 16) and no computed operand"), std::string::npos) << m.refusal;
  }
  auto ffn = match_in("ffn", true, "e_tile");
  ASSERT_TRUE(ffn.contraction) << ffn.refusal;
  EXPECT_EQ(ffn.contraction->result_type, DType::f16);
  EXPECT_TRUE(ffn.contraction->a_computed);
  // The sandbox: one row, f16 result, two tiles: refused.
  auto one_row = Sandbox(DType::f16, DType::f16, DType::f16, binary(BinaryOp::mul, x_ik(), w_kj()), 1).match();
  EXPECT_FALSE(one_row.contraction);
  EXPECT_EQ(one_row.refusal, "few-row product: M = 1 row (an mma pads 16) and no computed operand: the scalar loop reads each operand "
                             "element once too");
  auto eight_rows = Sandbox(DType::bf16, DType::bf16, DType::bf16, binary(BinaryOp::mul, x_ik(), w_kj()), 8).match();
  EXPECT_FALSE(eight_rows.contraction);
  EXPECT_NE(eight_rows.refusal.find("M = 8 rows"), std::string::npos) << eight_rows.refusal;
  // Taken: 16 rows; a computed operand. An f32 result of one row is a few-row product too.
  EXPECT_TRUE(Sandbox(DType::f16, DType::f16, DType::f16, binary(BinaryOp::mul, x_ik(), w_kj()), 16).match().contraction);
  EXPECT_FALSE(Sandbox(DType::f16, DType::f16, DType::f32, binary(BinaryOp::mul, x_ik(), w_kj()), 1).match().contraction);
  EXPECT_TRUE(Sandbox(DType::f16, DType::f16, DType::f16, binary(BinaryOp::mul, make_cast(DType::f16, binary(BinaryOp::div, x_ik(), s_i())), w_kj()), 1)
                  .match()
                  .contraction);
}

TEST(GemmCodegen, EveryFp8ValueIsExactInBothSixteenBitTypes) {
  // The claim the computed operands rest on, for all 256 codes of each format (NaN codes skipped).
  for (DType format : {DType::f8e4m3, DType::f8e5m2}) {
    const bool e4m3 = format == DType::f8e4m3;
    const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, max_exponent = e4m3 ? 15 : 31;
    int checked = 0;
    for (int code = 0; code < 256; ++code) {
      const int sign = code >> 7, exponent = (code >> mantissa_bits) & ((1 << (7 - mantissa_bits)) - 1);
      const int mantissa = code & ((1 << mantissa_bits) - 1);
      if (e4m3 && exponent == max_exponent && mantissa == (1 << mantissa_bits) - 1) continue;  // NaN
      if (!e4m3 && exponent == max_exponent) continue;  // inf, NaN
      const double fraction = static_cast<double>(mantissa) / (1 << mantissa_bits);
      double value = exponent == 0 ? std::ldexp(fraction, 1 - bias) : std::ldexp(1.0 + fraction, exponent - bias);
      if (sign) value = -value;
      ASSERT_EQ(round_to_dtype(value, format), value) << "code " << code;  // the decoding is right
      EXPECT_EQ(round_to_dtype(value, DType::f16), value) << dtype_name(format) << " code " << code;
      EXPECT_EQ(round_to_dtype(value, DType::bf16), value) << dtype_name(format) << " code " << code;
      ++checked;
    }
    EXPECT_EQ(checked, e4m3 ? 254 : 248);
  }
  // The extremes the header names.
  EXPECT_EQ(round_to_dtype(448.0, DType::f8e4m3), 448.0);
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -9), DType::f8e4m3), std::ldexp(1.0, -9));
  EXPECT_EQ(round_to_dtype(57344.0, DType::f8e5m2), 57344.0);
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -16), DType::f8e5m2), std::ldexp(1.0, -16));
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -24), DType::f16), std::ldexp(1.0, -24));
  EXPECT_EQ(round_to_dtype(65504.0, DType::f16), 65504.0);
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
  // A where condition on the reduced points (a ragged last K tile): both operands zero-filled outside
  // it, evaluated per element (computed operands, exact: a select of a 16-bit tile value and 0).
  ReduceNode masked = r;
  masked.where = kb::less(kb::var("k"), kb::num(7));
  auto zero_filled = match_contraction(masked, kernel_with(DType::bf16, 16, 32));
  ASSERT_TRUE(zero_filled.contraction) << zero_filled.refusal;
  EXPECT_TRUE(zero_filled.contraction->a_computed);
  EXPECT_TRUE(zero_filled.contraction->b_computed);
  EXPECT_EQ(zero_filled.contraction->type, DType::bf16);
  EXPECT_NE(print_expr(zero_filled.contraction->a_value).find("select(k < 7"), std::string::npos) << print_expr(zero_filled.contraction->a_value);
  // ... but not for a few-row product, which stays scalar.
  ReduceNode few = masked;
  few.domain = kb::over({Axis{"i", 4}, Axis{"j", 32}});
  auto few_rows = match_contraction(few, kernel_with(DType::bf16, 4, 32));
  EXPECT_FALSE(few_rows.contraction);
  EXPECT_NE(few_rows.refusal.find("a where condition on the reduced points of a few-row product"), std::string::npos) << few_rows.refusal;
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
  EXPECT_NE(source.find("tensor cores (block_gemm): acc_logits += x_tile · wg_tile over c_t"), std::string::npos);
  EXPECT_NE(source.find("solder::tile::SwizzledB<__nv_bfloat16, 64, 128, false>"), std::string::npos);
  EXPECT_NE(source.find("solder::tile::cp_async_16("), std::string::npos);
  // The staged tiles get no float storage, and the scalar loop is gone.
  EXPECT_EQ(source.find("float* const x_tile"), std::string::npos);
  EXPECT_EQ(source.find("reduce into acc_logits"), std::string::npos);
  // At its small sizes (HID = 64: no loop over c) the one reduce runs on the float tiles.
  std::string small = kernel_source("moe_routing", true);
  EXPECT_NE(small.find("tensor cores (block_gemm on the float tiles): logits_tile += x_tile · wg_tile"), std::string::npos);
}

TEST(GemmCodegen, A16BitSumOverALoopAccumulatesInF32AndRoundsOnce) {
  // ffn's e (f16) sums over the n tiles into the f32 tile e_tile_f32 on the tensor cores and is
  // rounded once after the loop, as the reference rounds it; llama_decode's q (one row, no computed
  // operand) stays the scalar loop ("few-row product"), also into an f32 tile: its K split across
  // blocks (too few blocks for the GPU otherwise), each segment's f32 partial merged after.
  std::string ffn = kernel_source("ffn", false);
  EXPECT_NE(ffn.find("the staged loop not used for n_t: operand cast(gelu(c_tile[m, n__]), f16) is computed"), std::string::npos);
  EXPECT_NE(ffn.find("e_tile[((m) * 128 + (l))] = solder::round_f16(e_tile_f32[((m) * 128 + (l))]);"), std::string::npos);
  std::string llama = kernel_source("llama_decode", false);
  EXPECT_NE(llama.find("// tensor cores not used for acc_q: few-row product"), std::string::npos);
  EXPECT_NE(llama.find("float* const acc_q = reinterpret_cast<float*>(smem + "), std::string::npos);
  EXPECT_NE(llama.find("// this segment's partial acc_q"), std::string::npos);
}

TEST(GemmCodegen, ComputedOperandsAreEvaluatedOnceIntoA16BitTile) {
  std::string source = kernel_source("ffn", false);
  EXPECT_NE(source.find("the staged loop not used for n_t: operand cast(gelu(c_tile[m, n__]), f16) is computed"), std::string::npos);
  EXPECT_NE(source.find("tensor cores (block_gemm): e_tile_f32 += cast(gelu(c_tile[m, n__]), f16) · d_tile; computed operands evaluated once"),
            std::string::npos);
  EXPECT_NE(source.find("value_ = solder::round_f16(solder::gelu(c_tile[((m) * 128 + (n__))]));"), std::string::npos);
  EXPECT_NE(source.find("solder::tile::SwizzledA<__half, 64, 128>{gemm_a_}, solder::tile::FloatB<__half>{d_tile, 128, 128, 1}"), std::string::npos);
  EXPECT_EQ(source.find("for (long long n__ = 0; n__ < 128LL; ++n__)"), std::string::npos);
}

TEST(GemmCodegen, RefusalsAreWrittenIntoTheSource) {
  EXPECT_NE(kernel_source("llama_decode", false).find("// tensor cores not used for acc_k_new: few-row product"), std::string::npos);
}

TEST(GemmCodegen, OneReduceOnFloatTiles) {
  // nerf_mlp z0: the tiles are staged outside any loop; the reduce runs on their float copies.
  std::string source = kernel_source("nerf_mlp", true);
  EXPECT_NE(source.find("tensor cores (block_gemm on the float tiles): z0_tile"), std::string::npos);
  EXPECT_NE(source.find("solder::tile::FloatA<__half>"), std::string::npos);
}

}  // namespace
}  // namespace solder
