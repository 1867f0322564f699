// 3xTF32 (kernel_ir.h, T = 3xtf32; contract/canonicalize.h's f32 policy; fusion/tf32_split.h):
//   * round_tf32 on the host against the device's bit formula (runtime.cuh, tf32_split.cuh);
//   * random all-f32 contractions of at least 64 rows and columns, compiled for the GPU (the split kernels
//     and the tf32 contract over 3K) and unfused and fused for the CPU (the 3xtf32 contract, the scalar
//     view's three products), run on the executor: every form within the f32 tolerance of float64;
//   * the same product taken as 1xTF32 (T = tf32: one rounding of each operand) FAILS that tolerance, so
//     the check can fail.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>

#include "backend/cpu/compare.h"
#include "backend/cuda/contract_view.h"
#include "backend/cuda/tf32_split_writer.h"
#include "fusion/tf32_split.h"
#include "driver/compile.h"
#include "kernel/kernel_printer.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

// The device's round_tf32 (ties to even on the bits).
float device_round_tf32(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7F800000u) != 0x7F800000u) bits = (bits + 0x0FFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
  return std::bit_cast<float>(bits);
}

TEST(Tf32x3, HostRoundingIsTheDevicesBitFormula) {
  std::mt19937 rng(5);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    const double want = device_round_tf32(x);
    EXPECT_EQ(round_to_tf32(x), want) << std::hexfloat << x;
    ++checked;
  }
  // Ties: the dropped 13 bits exactly half a unit, kept last bit even and odd.
  EXPECT_EQ(round_to_tf32(std::bit_cast<float>(0x3F801000u)), std::bit_cast<float>(0x3F800000u));
  EXPECT_EQ(round_to_tf32(std::bit_cast<float>(0x3F803000u)), std::bit_cast<float>(0x3F804000u));
  EXPECT_GT(checked, 190000);
}

TEST(Tf32x3, PartsAreExactAndSumToNearlyTheValue) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int i = 0; i < 10000; ++i) {
    const float x = u(rng);
    const double hi = tf32_hi(x), lo = tf32_lo(x);
    EXPECT_EQ(round_to_tf32(hi), hi);
    EXPECT_EQ(round_to_tf32(lo), lo);
    // hi + lo holds 22 significant bits of x's 24: within 2^-21 of x relatively.
    EXPECT_LE(std::abs(hi + lo - x), std::abs(x) * 0x1.0p-21) << x;
  }
}

TEST(Tf32x3, ExecutorComputesTheThreeProducts) {
  // before: y[i, j] = Σ_k a[i, k] · b[k, j] as a 3xtf32 contract; expected: the three products of the parts,
  // added one by one in float32 (hi·lo, lo·hi, hi·hi).
  const int M = 3, N = 4, K = 37;
  std::string text = "program p\ndim M = 3, N = 4, K = 37\nin a[M, K] : f32\nin b[K, N] : f32\nout y[m, n] : f32 = sum(k) a[m, k] * b[k, n]\n";
  BoundProgram bound = testing::bind_text(text);
  ContractNode c;
  c.domain.axes = {{"m", M}, {"n", N}};
  c.reduce_axes = {{"k", K}};
  c.dst = Access{"y", {make_var("m"), make_var("n")}};
  c.terms = {ContractTerm{make_load("a", {make_var("m"), make_var("k")}), make_load("b", {make_var("k"), make_var("n")})}};
  c.type = MmaType::tf32x3;
  c.row_axes = {"m"};
  c.column_axes = {"n"};
  KernelProgram p;
  p.globals = {{"a", {M, K}, DType::f32, GlobalRole::input}, {"b", {K, N}, DType::f32, GlobalRole::input},
               {"y", {M, N}, DType::f32, GlobalRole::output}};
  Kernel k;
  k.name = "y";
  k.grid = {{"g", 1}};
  k.body = {make_stmt(c)};
  p.kernels = {k};
  EXPECT_NE(print_kernel_program(p).find("contract(3xtf32) y[m, n]"), std::string::npos) << print_kernel_program(p);
  TensorSet inputs = make_inputs(bound, 3);
  ExecutionResult r = execute_kernel_program(p, inputs);
  const HostTensor &a = inputs.at("a"), &b = inputs.at("b");
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = 0;
      for (int kk = 0; kk < K; ++kk) {
        const float x = static_cast<float>(a.values[i * K + kk]), z = static_cast<float>(b.values[kk * N + j]);
        const float xh = device_round_tf32(x), xl = device_round_tf32(x - xh), zh = device_round_tf32(z), zl = device_round_tf32(z - zh);
        acc += xh * zl;
        acc += xl * zh;
        acc += xh * zh;
      }
      EXPECT_EQ(r.outputs.at("y").values[i * N + j], static_cast<double>(acc)) << "y[" << i << ", " << j << "]";
    }
}

// A random all-f32 product of M, N ≥ 64 rows and columns: A [M, K] or [K, M], B [K, N] or [N, K]; with
// `computed`, A and B may be computed operands the split evaluates (a · s[k], silu(a + t[k]), tanh(b)).
std::string random_product(std::mt19937_64& rng, uint64_t seed, bool computed = false) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  // N a multiple of 4: the skeleton's f32 result rows must be 16-byte multiples (else the product stays fused).
  static const int kRows[] = {64, 65, 80, 130}, kColumns[] = {64, 68, 96, 128};
  static const int kDepths[] = {1, 7, 32, 33, 100, 257};
  const int m = kRows[pick(4)], n = kColumns[pick(4)], k = kDepths[pick(6)];
  const bool at = pick(2), bt = pick(2), scale = pick(3) == 0;
  std::string text = "program f32_" + std::to_string(seed) + "\ndim M = " + std::to_string(m) + ", N = " + std::to_string(n) +
                     ", K = " + std::to_string(k) + "\n";
  text += std::string("in a[") + (at ? "K, M" : "M, K") + "] : f32\nin b[" + (bt ? "N, K" : "K, N") + "] : f32\n";
  if (scale) text += "in s[N] : f32 ~ uniform(0.5, 2)\n";
  std::string a = std::string("a[") + (at ? "k, m" : "m, k") + "]", b = std::string("b[") + (bt ? "n, k" : "k, n") + "]";
  if (computed) {
    const int form = pick(3);
    if (form == 0) {
      text += "in t[K] : f32 ~ uniform(0.5, 2)\n";
      a = a + " * t[k]";
    } else if (form == 1) {
      text += "in t[K] : f32\n";
      a = "silu(" + a + " + t[k])";
    }
    if (form != 1 || pick(2)) b = "tanh(" + b + ")";
  }
  text += "out y[m, n] : f32 = sum(k) " + a + " * " + b + (scale ? " * s[n]" : "") + "\n";
  return text;
}

// The type of the program's first contract (at any depth); nothing when it has none.
std::optional<MmaType> contract_type(const KernelProgram& p) {
  std::optional<MmaType> type;
  std::function<void(const Block&)> walk = [&](const Block& block) {
    for (auto& s : block) {
      if (auto c = s.as<ContractNode>(); c && !type) type = c->type;
      if (auto f = s.as<ForNode>()) walk(f->body);
      if (auto i = s.as<IfNode>()) {
        walk(i->then_body);
        walk(i->else_body);
      }
    }
  };
  for (auto& k : p.kernels) walk(k.body);
  return type;
}

// Every form of random products (computed operands or plain loads) within the f32 tolerance of float64;
// how many the GPU's plan split.
int every_form_agrees(bool computed) {
  std::mt19937_64 rng(computed ? 43 : 42);
  int split = 0;
  for (int i = 0; i < 12; ++i) {
    const uint64_t seed = (computed ? 400 : 300) + static_cast<uint64_t>(i);
    std::string text = random_product(rng, seed, computed);
    SCOPED_TRACE(text);
    BoundProgram bound = testing::bind_text(text);
    TensorSet inputs = make_inputs(bound, seed);
    TensorSet reference = run_reference(bound, inputs);
    // The GPU's form: the split kernels and the tf32 contract over 3K, on the executor.
    CompileResult gpu = compile_program(bound, CompileOptions::for_gpu());
    const bool was_split = gpu.report.find("3xTF32: ") != std::string::npos;
    split += was_split;
    if (was_split) EXPECT_EQ(contract_type(gpu.kernels), MmaType::tf32) << gpu.report;
    auto g = testing::verify_kernels(bound, gpu.kernels, inputs, &reference);
    EXPECT_TRUE(g.ok()) << "GPU form: " << g.failures() << "\n" << print_kernel_program(gpu.kernels);
    // The unsplit whole 3xtf32 contract (the unfused lowering with the skeleton: no split pass), on the executor
    // and as the scalar view the CUDA writers see.
    CompileOptions whole;
    whole.fuse = false;
    whole.gemm_skeleton = true;
    KernelProgram kernels = compile_program(bound, whole).kernels;
    if (was_split) EXPECT_EQ(contract_type(kernels), MmaType::tf32x3) << print_kernel_program(kernels);
    auto c = testing::verify_kernels(bound, kernels, inputs, &reference);
    EXPECT_TRUE(c.ok()) << "3xtf32 contract: " << c.failures();
    auto v = testing::verify_kernels(bound, contracts_as_reduces(kernels), inputs, &reference);
    EXPECT_TRUE(v.ok()) << "scalar view: " << v.failures();
    // The CPU's plan (fused tiles of fewer than 64 rows: T = f32).
    KernelProgram cpu = compile_program(bound, CompileOptions{}).kernels;
    auto f = testing::verify_kernels(bound, cpu, inputs, &reference);
    EXPECT_TRUE(f.ok()) << "CPU plan: " << f.failures();
  }
  return split;
}

TEST(Tf32x3Property, EveryFormAgreesWithFloat64WithinTheF32Tolerance) {
  ASSERT_EQ(std::getenv("SOLDER_F32_CONTRACT"), nullptr) << "the test checks the default policy";
  EXPECT_GE(every_form_agrees(false), 10);  // every product but those the skeleton's cost model refuses
}

TEST(Tf32x3Property, ComputedOperandsAgreeWithFloat64WithinTheF32Tolerance) {
  // The split evaluates a computed operand (x · t[k], silu(x + t[k]), tanh(b)) before splitting it.
  ASSERT_EQ(std::getenv("SOLDER_F32_CONTRACT"), nullptr) << "the test checks the default policy";
  EXPECT_GE(every_form_agrees(true), 10);
}

TEST(Tf32x3Property, BatchedProductsSplitAndVerify) {
  // A batch on both operands, on one (torch.matmul of a [M, K] by b [Bt, K, N]: the canonical form names b
  // first), and two batch axes with an M-major A: each split per batch, the GPU's form within tolerance.
  for (const char* text :
       {"program p\ndim B = 3, M = 64, N = 68, K = 40\nin a[B, M, K] : f32\nin b[B, K, N] : f32\nout y[z, m, n] : f32 = sum(k) a[z, m, k] * b[z, k, n]\n",
        "program p\ndim B = 3, M = 64, N = 68, K = 40\nin a[M, K] : f32\nin b[B, K, N] : f32\nout y[z, m, n] : f32 = sum(k) a[m, k] * b[z, k, n]\n",
        "program p\ndim B = 2, C = 3, M = 64, N = 64, K = 36\nin a[B, C, K, M] : f32\nin b[B, C, N, K] : f32\n"
        "out y[z, c, m, n] : f32 = sum(k) a[z, c, k, m] * b[z, c, n, k]\n"}) {
    SCOPED_TRACE(text);
    BoundProgram bound = testing::bind_text(text);
    CompileResult gpu = compile_program(bound, CompileOptions::for_gpu());
    EXPECT_NE(gpu.report.find("3xTF32: "), std::string::npos) << gpu.report;
    EXPECT_EQ(gpu.kernels.kernels.size(), 3u);
    auto v = testing::verify_kernels(bound, gpu.kernels, make_inputs(bound, 5));
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

class OneTf32Product : public ::testing::TestWithParam<const char*> {};

TEST_P(OneTf32Product, FailsTheF32Tolerance) {
  // K = 512 products of uniform values with all their bits: one tf32 rounding of each operand costs about
  // 2^-12 relatively per product (measured 2.5e-4 on the H200 at K = 4096), the f32 tolerance here is
  // max(1e-5, 16 · 2^-24 · sqrt(513)) = 2.2e-5. A plain product, and one of computed operands.
  std::string text = std::string("program p\ndim M = 64, N = 64, K = 512\nin a[M, K] : f32 ~ uniform(-1, 1)\nin b[K, N] : f32 ~ uniform(-1, 1)\n") +
                     GetParam() + "\n";
  BoundProgram bound = testing::bind_text(text);
  TensorSet inputs = make_inputs(bound, 11);
  TensorSet reference = run_reference(bound, inputs);
  CompileOptions whole;
  whole.fuse = false;
  whole.gemm_skeleton = true;
  KernelProgram three = compile_program(bound, whole).kernels;
  ASSERT_EQ(contract_type(three), MmaType::tf32x3);
  auto ok = testing::verify_kernels(bound, three, inputs, &reference);
  EXPECT_TRUE(ok.ok()) << ok.failures();
  KernelProgram one = three;
  for (auto& k : one.kernels)
    for (auto& s : k.body)
      if (auto c = s.as<ContractNode>()) {
        ContractNode t = *c;
        t.type = MmaType::tf32;
        s = make_stmt(std::move(t));
      }
  auto fails = testing::verify_kernels(bound, one, inputs, &reference);
  EXPECT_FALSE(fails.ok()) << "1xTF32 met the f32 tolerance: the property test could not fail";
  // The GPU's form (split kernels, tf32 over 3K) meets it.
  CompileResult gpu = compile_program(bound, CompileOptions::for_gpu());
  ASSERT_NE(gpu.report.find("3xTF32: "), std::string::npos) << gpu.report;
  auto split = testing::verify_kernels(bound, gpu.kernels, inputs, &reference);
  EXPECT_TRUE(split.ok()) << split.failures();
}

std::string one_tf32_case_name(const ::testing::TestParamInfo<const char*>& info) {
  static const char* const kNames[] = {"Plain", "ScaledAndTanh", "SiluOfBiasAdded"};
  return kNames[info.index];
}

INSTANTIATE_TEST_SUITE_P(Tf32x3Property, OneTf32Product,
                         ::testing::Values("out y[m, n] : f32 = sum(k) a[m, k] * b[k, n]",
                                           "in t[K] : f32 ~ uniform(0.5, 2)\nout y[m, n] : f32 = sum(k) a[m, k] * t[k] * tanh(b[k, n])",
                                           "in t[K] : f32 ~ uniform(-1, 1)\nout y[m, n] : f32 = sum(k) silu(a[m, k] + t[k]) * b[k, n]"),
                         one_tf32_case_name);

TEST(Tf32x3Split, WriterReadsTheSplitKernelsBack) {
  // before: y = a · b with a stored [K, M] (M-major) and b [N, K], ragged M, N and K; expected: the pass's two
  // split kernels, read back with their strides and parts, written as gemm/tf32_split.cuh's tile.
  std::string text = "program p\ndim M = 100, N = 72, K = 33\nin a[K, M] : f32\nin b[N, K] : f32\n"
                     "out y[m, n] : f32 = sum(k) a[k, m] * b[n, k]\n";
  BoundProgram bound = testing::bind_text(text);
  KernelProgram p = compile_program(bound, CompileOptions::for_gpu()).kernels;
  ASSERT_EQ(p.kernels.size(), 3u) << print_kernel_program(p);
  std::optional<Tf32SplitKernel> a = tf32_split_kernel_of(p, p.kernels[0]), b = tf32_split_kernel_of(p, p.kernels[1]);
  ASSERT_TRUE(a && b) << print_kernel_program(p);
  EXPECT_EQ(a->src, "a");
  EXPECT_EQ(a->dst, "y_a3");
  EXPECT_EQ(a->rows, 100);
  EXPECT_EQ(a->k, 33);
  EXPECT_EQ(a->ld, 100);  // 3 · 33 = 99, rounded up to 4 elements
  EXPECT_EQ(a->row_stride, 1);
  EXPECT_EQ(a->k_stride, 100);
  EXPECT_EQ(a->lo_part, 1);  // [hi | lo | hi]
  EXPECT_EQ(a->row_tiles, 4);
  EXPECT_EQ(a->k_tiles, 2);
  EXPECT_EQ(b->src, "b");
  EXPECT_EQ(b->rows, 72);
  EXPECT_EQ(b->row_stride, 33);
  EXPECT_EQ(b->k_stride, 1);
  EXPECT_EQ(b->lo_part, 0);  // [lo | hi | hi]
  EXPECT_EQ(tf32_split_kernel_of(p, p.kernels[2]), std::nullopt);
  std::optional<Tf32SplitWriterKernel> w = write_tf32_split_kernel(p, p.kernels[0]);
  ASSERT_TRUE(w);
  EXPECT_NE(w->source.find("solder::gemm::tf32_split_tile<2>(args, k_tile, row_tile);"), std::string::npos) << w->source;
  EXPECT_NE(w->source.find("args.k_stride = 100LL;"), std::string::npos) << w->source;
  EXPECT_EQ(w->info.blocks, 8);
  setenv("SOLDER_TF32_SPLIT", "generic", 1);
  EXPECT_FALSE(write_tf32_split_kernel(p, p.kernels[0]));
  unsetenv("SOLDER_TF32_SPLIT");
}

TEST(Tf32x3Policy, KnobAndSizeKeepF32) {
  // The unfused lowering with the skeleton: one whole contraction, canonicalized at the program's extents.
  CompileOptions whole;
  whole.fuse = false;
  whole.gemm_skeleton = true;
  auto product = [](int m, const char* b_type, const char* out_type) {
    return "program p\ndim M = " + std::to_string(m) + ", N = 64, K = 40\nin a[M, K] : f32\nin b[K, N] : " + b_type +
           "\nout y[m, n] : " + out_type + " = sum(k) a[m, k] * b[k, n]\n";
  };
  CompileResult three = compile_program(testing::bind_text(product(64, "f32", "f32")), whole);
  EXPECT_EQ(contract_type(three.kernels), MmaType::tf32x3) << three.report;
  // The fused plan's report names the choice where the contraction runs whole.
  CompileResult fused = compile_program(testing::bind_text(product(64, "f32", "f32")), CompileOptions::for_gpu());
  EXPECT_NE(fused.report.find("(T = 3xtf32: 3xTF32 because all operands are f32)"), std::string::npos) << fused.report;
  CompileResult small = compile_program(testing::bind_text(product(63, "f32", "f32")), whole);
  EXPECT_EQ(contract_type(small.kernels), MmaType::f32) << small.report;
  EXPECT_NE(small.report.find("not 3xTF32: "), std::string::npos) << small.report;
  setenv("SOLDER_F32_CONTRACT", "f32", 1);
  CompileResult knob = compile_program(testing::bind_text(product(64, "f32", "f32")), whole);
  unsetenv("SOLDER_F32_CONTRACT");
  EXPECT_EQ(contract_type(knob.kernels), MmaType::f32) << knob.report;
  EXPECT_NE(knob.report.find("not 3xTF32: SOLDER_F32_CONTRACT=f32"), std::string::npos) << knob.report;
  // A bf16 operand and output: the 16-bit class rounds a to bf16, 3xTF32 is not chosen.
  EXPECT_EQ(contract_type(compile_program(testing::bind_text(product(64, "bf16", "bf16")), whole).kernels), MmaType::bf16);
}

}  // namespace
}  // namespace solder
