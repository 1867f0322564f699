// The GEMV stream (contract/gemv_fit.h, backend/cuda/gemv_stream_writer.h): which contracts it takes,
// the planner running decode's projections whole on it (fusion/whole_contractions.h), the CPU
// executor running that plan against the float64 reference, and the generated kernel's shape.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/gemv_stream_writer.h"
#include "contract/canonicalize.h"
#include "contract/gemv_fit.h"
#include "driver/compile.h"
#include "fusion/whole_contractions.h"
#include "kernel/kernel_verifier.h"
#include "lower/lower_unfused.h"
#include "runtime/runtime.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

using testing::ScopedEnv;

BoundProgram example(const std::string& name, bool small, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  return bind_program(program, SizeChoice{small, std::move(dims)});
}

std::vector<std::string> whole_names(const BoundProgram& bound, const WholeContractionPlan& plan) {
  std::vector<std::string> names;
  for (auto& w : plan.whole) names.push_back(bound.defs[w.def].def->target.name);
  return names;
}

// The contract of definition `name` in canonical form, as lower_whole_contraction builds it.
ContractNode whole_contract(const BoundProgram& bound, const std::string& name) {
  for (size_t i = 0; i < bound.defs.size(); ++i) {
    const BoundDefinition& bd = bound.defs[i];
    const Definition& def = *bd.def;
    if (def.target.name != name) continue;
    ReduceNode r;
    r.op = def.reduce;
    for (size_t j = 0; j < def.target.index.size(); ++j) {
      r.domain.axes.push_back({def.target.index[j].name, bd.p_extents[j]});
      r.dst.index.push_back(make_var(def.target.index[j].name));
    }
    for (size_t j = 0; j < def.reduce_vars.size(); ++j) r.reduce_axes.push_back({def.reduce_vars[j].name, bd.r_extents[j]});
    r.dst.name = name;
    r.value = def.body;
    auto dtype_of = [&](const std::string& t) -> std::optional<DType> {
      if (bound.has_tensor(t)) return bound.tensor(t).dtype;
      return std::nullopt;
    };
    Canonicalization c = canonicalize_contraction(r, dtype_of, contract_policy_of(bound));
    EXPECT_TRUE(c.contract.has_value()) << c.refusal;
    if (c.contract) return *c.contract;
  }
  ADD_FAILURE() << "no canonical contraction " << name;
  return {};
}

void expect_verifies(const BoundProgram& bound, const KernelProgram& kernels, uint64_t seed) {
  KernelProgram view = contracts_as_reduces(kernels);
  verify_kernel_program(view);
  TensorSet inputs = make_inputs(bound, seed);
  auto v = testing::verify_kernels(bound, kernels, inputs);
  EXPECT_TRUE(v.ok()) << v.failures();
}

int gemv_kernels(const GeneratedModule& m) {
  int n = 0;
  for (auto& c : m.contractions) n += c.skeleton == kGemvStreamSkeleton;
  return n;
}

TEST(GemvFit, TakesDecodeProjectionsAlongTheWeightsContiguousAxis) {
  BoundProgram bound = example("llama_decode", false);
  const std::vector<GlobalTensor> globals = program_globals(bound);
  // q[b, h, d] = Σ_c x[b, c] · wqkv[c, 0, h, d]: N = H·D, K = HID, W contiguous along d.
  GemvFit q = fit_gemv(whole_contract(bound, "q"), globals);
  ASSERT_TRUE(q.problem) << q.refusal;
  EXPECT_EQ(q.problem->n, 32 * 128);
  EXPECT_EQ(q.problem->k, 4096);
  ASSERT_EQ(q.problem->output_axes.size(), 2u);
  EXPECT_EQ(q.problem->output_axes.back().var, "d");
  EXPECT_EQ(q.problem->matrix_output_strides, (std::vector<int64_t>{128, 1}));
  EXPECT_EQ(q.problem->matrix_reduce_strides, (std::vector<int64_t>{3 * 32 * 128}));
  EXPECT_EQ(q.problem->matrix_base, 0);
  // v_new reads wqkv[c, 2, h, d]: the constant is W's base offset.
  GemvFit v = fit_gemv(whole_contract(bound, "v_new"), globals);
  ASSERT_TRUE(v.problem) << v.refusal;
  EXPECT_EQ(v.problem->matrix_base, 2 * 32 * 128);
  // y[b, c] = Σ_{h, d} a[b, h, d] · wo[h, d, c]: two reduced axes flattened into K.
  GemvFit y = fit_gemv(whole_contract(bound, "y"), globals);
  ASSERT_TRUE(y.problem) << y.refusal;
  EXPECT_EQ(y.problem->k, 4096);
  EXPECT_EQ(y.problem->matrix_reduce_strides, (std::vector<int64_t>{128 * 4096, 4096}));
  EXPECT_EQ(y.problem->vector_reduce_strides, (std::vector<int64_t>{128, 1}));
}

TEST(GemvFit, RefusesMatricesNotContiguousAlongTheOutputsAndRealGemms) {
  // W[n, k] read along k: each output is a dot product along contiguous memory, not this stream.
  BoundProgram rows = testing::bind_text(
      "program rows\ndim N = 256, K = 512\nin x[K] : f16\nin w[N, K] : f16\nout y[n] : f16 = sum(k) w[n, k] * x[k]\n");
  GemvFit fit = fit_gemv(whole_contract(rows, "y"), program_globals(rows));
  EXPECT_FALSE(fit.problem);
  // A product of 16 rows is a GEMM.
  BoundProgram gemm = testing::bind_text(
      "program gemm\ndim M = 16, N = 256, K = 512\nin x[M, K] : f16\nin w[K, N] : f16\nout y[m, n] : f16 = sum(k) x[m, k] * w[k, n]\n");
  fit = fit_gemv(whole_contract(gemm, "y"), program_globals(gemm));
  EXPECT_FALSE(fit.problem);
  EXPECT_NE(fit.refusal.find("not a matrix-vector product"), std::string::npos) << fit.refusal;
  // An f32 operand is not exact in T = f16... T is f32 then, which the stream does not take.
  BoundProgram wide = testing::bind_text(
      "program wide\ndim N = 256, K = 512\nin x[K] : f32\nin w[K, N] : f32\nout y[n] : f32 = sum(k) x[k] * w[k, n]\n");
  EXPECT_FALSE(fit_gemv(whole_contract(wide, "y"), program_globals(wide)).problem);
  // The knob.
  ScopedEnv off("SOLDER_GEMV", "0");
  BoundProgram bound = example("llama_decode", true);
  fit = fit_gemv(whole_contract(bound, "q"), program_globals(bound));
  EXPECT_FALSE(fit.problem);
  EXPECT_EQ(fit.refusal, "off by SOLDER_GEMV=0");
}

TEST(GemvStream, LlamaDecodeRunsItsFourProjectionsWholeAndVerifiesOnTheExecutor) {
  for (bool small : {true, false}) {
    SCOPED_TRACE(small ? "small" : "H 8, KV 64");
    BoundProgram bound = small ? example("llama_decode", true) : example("llama_decode", false, {{"KV", 64}, {"H", 8}});
    WholeContractionPlan plan = plan_whole_contractions(bound);
    EXPECT_EQ(whole_names(bound, plan), (std::vector<std::string>{"q", "k_new", "v_new", "y"})) << whole_contractions_text(bound, plan);
    EXPECT_NE(whole_contractions_text(bound, plan).find("GEMV stream: N "), std::string::npos) << whole_contractions_text(bound, plan);
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    GeneratedModule m = generate_cuda(compiled.kernels);
    EXPECT_EQ(gemv_kernels(m), 4) << contraction_schedule_text(m.contractions);
    expect_verifies(bound, compiled.kernels, small ? 11 : 12);
  }
}

TEST(GemvStream, OffByTheKnobKeepsTheFusedPlan) {
  ScopedEnv off("SOLDER_GEMV", "0");
  BoundProgram bound = example("llama_decode", true);
  EXPECT_TRUE(plan_whole_contractions(bound).whole.empty());
  GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
  EXPECT_EQ(gemv_kernels(m), 0);
}

TEST(GemvStream, PaperShapeSplitsKOverAClusterOfEight) {
  BoundProgram bound = example("llama_decode", false);
  GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
  ASSERT_EQ(gemv_kernels(m), 4) << contraction_schedule_text(m.contractions);
  int clustered = 0;
  for (auto& k : m.kernels)
    if (k.name == "q_kernel" || k.name == "k_new_kernel" || k.name == "v_new_kernel" || k.name == "y_kernel") {
      // N = 4096 outputs in vectors of 8: 32 column blocks of 128 outputs, K split over 8 ranks.
      EXPECT_EQ(k.blocks, 256) << k.name;
      EXPECT_EQ(k.cluster, 8) << k.name;
      EXPECT_EQ(k.threads, 256) << k.name;
      EXPECT_LE(k.shared_bytes, 48 * 1024) << k.name;
      ++clustered;
    }
  EXPECT_EQ(clustered, 4) << m.source;
  EXPECT_NE(m.source.find("ld.shared::cluster.f32"), std::string::npos);
  EXPECT_NE(m.source.find("__ldg(reinterpret_cast<const uint4*>(w_ + w_row_s_[r_]))"), std::string::npos) << m.source;
}

TEST(GemvStream, EitherOperandOrderAnEpilogueAndLongKVerify) {
  // The vector as B, a bias and an absorbed consumer, and K longer than one chunk of shared memory
  // (8 ranks of 2 048 rows each and more: 20 000 rows).
  const char* texts[] = {
      "program t1\ndim N = 96, K = 200\nin x[K] : bf16\nin w[K, N] : bf16 ~ normal(0, 0.05)\nout y[n] : bf16 = sum(k) w[k, n] * x[k]\n",
      "program t2\ndim N = 64, K = 300\nin x[K] : f16\nin w[K, N] : f16 ~ normal(0, 0.05)\nin bias[N] : f32\n"
      "c[n] : f16 = sum(k) x[k] * w[k, n]\nout h[n] : f16 = gelu(c[n] + bias[n])\n",
      "program t3\ndim N = 16, K = 20000\nin x[K] : f16\nin w[K, N] : f16 ~ normal(0, 0.01)\nout y[n] : f32 = sum(k) x[k] * w[k, n]\n",
      // an odd number of rows per rank (K = 301 on one block): the shared regions stay 16-byte aligned
      "program t5\ndim N = 64, K = 301\nin x[K] : f16\nin w[K, N] : f16 ~ normal(0, 0.05)\nout y[n] : f16 = sum(k) x[k] * w[k, n]\n"};
  for (const char* text : texts) {
    SCOPED_TRACE(text);
    BoundProgram bound = testing::bind_text(text);
    WholeContractionPlan plan = plan_whole_contractions(bound);
    ASSERT_EQ(plan.whole.size(), 1u) << whole_contractions_text(bound, plan);
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    GeneratedModule m = generate_cuda(compiled.kernels);
    EXPECT_EQ(gemv_kernels(m), 1) << contraction_schedule_text(m.contractions);
    expect_verifies(bound, compiled.kernels, 21);
    // Every shared region the kernel addresses starts on a 16-byte boundary.
    for (const char* region : {"reinterpret_cast<long long*>(smem + ", "reinterpret_cast<float*>(smem + "}) {
      const size_t at = m.source.find(region);
      ASSERT_NE(at, std::string::npos) << m.source;
      EXPECT_EQ(std::stol(m.source.substr(at + std::string(region).size())) % 16, 0) << m.source;
    }
  }
}

TEST(GemvStream, ModulesCompileWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  runtime::CompileFlags flags;
  flags.defines = {"NDEBUG"};
  flags.use_cache = false;
  // Paper shape (clusters of 8), and a bf16 product with an epilogue on one block per column tile.
  GeneratedModule paper = generate_cuda(compile_program(example("llama_decode", false), CompileOptions::for_gpu()).kernels);
  EXPECT_FALSE(runtime::compile_cuda(paper.source, "llama_decode.cu", flags).cubins.front().empty());
  BoundProgram bound = testing::bind_text(
      "program t4\ndim N = 64, K = 300\nin x[K] : bf16\nin w[K, N] : bf16\nin bias[N] : f32\n"
      "c[n] : bf16 = sum(k) x[k] * w[k, n]\nout h[n] : bf16 = gelu(c[n] + bias[n])\n");
  GeneratedModule small = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
  ASSERT_EQ(gemv_kernels(small), 1) << small.source;
  EXPECT_FALSE(runtime::compile_cuda(small.source, "t4.cu", flags).cubins.front().empty());
}

}  // namespace
}  // namespace solder
