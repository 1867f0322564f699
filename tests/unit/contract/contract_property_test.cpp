// The property test of the contraction pass: random small contractions (plain, batched, with row
// scales, k-only factors, biases, two terms, mixed dtypes, sizes across the tile boundaries 1, 16,
// 17, 33), compiled with and without canonicalization, fused and unfused, run on the CPU executor:
// both must verify against the float64 reference, and the canonical form must have produced a
// contract wherever the summand is a matrix product. Seeded; a failure prints the program.
#include <gtest/gtest.h>

#include <random>

#include "backend/cuda/contract_view.h"
#include "contract/contract_pass.h"
#include "driver/compile.h"
#include "kernel/kernel_printer.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

class ContractionGenerator {
 public:
  explicit ContractionGenerator(uint64_t seed) : rng_(seed) {}

  // Whether the last program has a k-free term (a bias). Under a `where` (ragged K tiles) its count
  // varies per point, and the canonicalizer keeps such a sum a reduce.
  bool bias() const { return bias_; }

  std::string program(uint64_t seed) {
    static const int kSizes[] = {1, 3, 16, 17, 33};
    static const char* kTypes[] = {"f32", "bf16", "f16", "bf16"};
    int m = kSizes[pick(5)], n = kSizes[pick(5)], k = kSizes[pick(5)], b = 1 + pick(2);
    bool batched = pick(2) == 0;
    std::string ta = kTypes[pick(4)], tb = pick(3) == 0 ? kTypes[pick(4)] : ta;
    std::string out_type = pick(2) ? "bf16" : "f32";
    std::string bi = batched ? "b, " : "", bd = batched ? "B, " : "";
    std::string text = "program contraction_" + std::to_string(seed) + "\n";
    text += "dim B = " + std::to_string(b) + ", M = " + std::to_string(m) + ", N = " + std::to_string(n) + ", K = " + std::to_string(k) + "\n";
    text += "in a[" + bd + "M, K] : " + ta + "\nin w[" + bd + "K, N] : " + tb + " ~ normal(0, 0.5)\n";
    std::vector<std::string> factors = {"a[" + bi + "m, k]", "w[" + bi + "k, n]"};
    if (pick(3) == 0) {
      text += "in s[M] : f32 ~ uniform(0.5, 2)\n";
      factors.push_back("s[m]");
    }
    if (pick(3) == 0) {
      text += "in g[K] : " + ta + " ~ uniform(0.5, 1.5)\n";
      factors.push_back("g[k]");
    }
    if (pick(4) == 0) factors.push_back("0.5");
    std::shuffle(factors.begin(), factors.end(), rng_);
    std::string body;
    for (auto& f : factors) body += (body.empty() ? "" : " * ") + f;
    if (pick(4) == 0) {
      text += "in a2[" + bd + "M, K] : " + ta + "\nin w2[" + bd + "K, N] : " + ta + "\n";
      body += " + a2[" + bi + "m, k] * w2[" + bi + "k, n]";
    }
    bias_ = pick(4) == 0;
    if (bias_) {
      text += "in c[N] : f32\n";
      body += " - c[n] / K";
    }
    text += "out y[" + bi + "m, n] : " + out_type + " = sum(k) " + body + "\n";
    return text;
  }

 private:
  std::mt19937_64 rng_;
  bool bias_ = false;
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
};

int contracts_in(const KernelProgram& p) {
  int count = 0;
  std::function<void(const Block&)> walk = [&](const Block& block) {
    for (auto& s : block) {
      if (s.kind() == StmtKind::Contract) ++count;
      if (auto f = s.as<ForNode>()) walk(f->body);
      if (auto i = s.as<IfNode>()) {
        walk(i->then_body);
        walk(i->else_body);
      }
    }
  };
  for (auto& k : p.kernels) walk(k.body);
  return count;
}

TEST(ContractProperty, CanonicalFormAgreesWithThePlainReduce) {
  const int programs = 60;
  int with_contracts = 0;
  for (int i = 0; i < programs; ++i) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(i);
    ContractionGenerator generator(seed);
    std::string text = generator.program(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + text);
    BoundProgram bound = testing::bind_text(text);
    TensorSet inputs = make_inputs(bound, seed);
    TensorSet reference = run_reference(bound, inputs);
    for (bool fuse : {true, false}) {
      auto [reduce_form, contract_form] = testing::compile_both_forms(bound, fuse);
      EXPECT_EQ(contracts_in(reduce_form), 0);
      const int contracts = contracts_in(contract_form);
      if (!generator.bias()) EXPECT_GE(contracts, 1) << "no contract (fuse " << fuse << ")";
      with_contracts += contracts > 0;
      auto a = testing::verify_kernels(bound, reduce_form, inputs, &reference);
      auto b = testing::verify_kernels(bound, contract_form, inputs, &reference);
      EXPECT_TRUE(a.ok()) << "reduce form (fuse " << fuse << "): " << a.failures();
      EXPECT_TRUE(b.ok()) << "contract form (fuse " << fuse << "): " << b.failures();
    }
  }
  EXPECT_GE(with_contracts, 2 * programs * 8 / 10);
}

// The executor computes a contract as stated: operands rounded to T before the product, the scale
// after the sum. Checked element by element against a host computation of the same formula.
TEST(ContractProperty, ExecutorRoundsOperandsAndScalesAfterTheSum) {
  std::string text =
      "program rounding\n"
      "dim M = 5, N = 7, K = 33\n"
      "in x[M, K] : f32\nin w[K, N] : bf16\nin s[M] : f32 ~ uniform(0.5, 2)\n"
      "out y[m, n] : bf16 = sum(k) x[m, k] * 3.0 * w[k, n] * s[m]\n";
  BoundProgram bound = testing::bind_text(text);
  KernelProgram kernels = compile_program(bound, CompileOptions{}).kernels;
  ASSERT_EQ(contracts_in(kernels), 1) << print_kernel_program(kernels);
  TensorSet inputs = make_inputs(bound, 7);
  ExecutionResult r = execute_kernel_program(kernels, inputs);
  const HostTensor& x = inputs.at("x");
  const HostTensor& w = inputs.at("w");
  const HostTensor& s = inputs.at("s");
  // The output is bf16: the policy rounds the computed operand x (f32) to bf16, w's type.
  for (int m = 0; m < 5; ++m)
    for (int n = 0; n < 7; ++n) {
      float acc = 0;
      for (int k = 0; k < 33; ++k)
        acc += static_cast<float>(round_to_dtype(x.values[m * 33 + k], DType::bf16)) * static_cast<float>(w.values[k * 7 + n]);
      float want = static_cast<float>(round_to_dtype(static_cast<double>(acc * (3.0f * static_cast<float>(s.values[m]))), DType::bf16));
      EXPECT_NEAR(r.outputs.at("y").values[m * 7 + n], want, std::abs(want) * 0x1.0p-7 + 1e-6) << "y[" << m << ", " << n << "]";
    }
}

}  // namespace
}  // namespace solder

namespace solder {
namespace {

// What the CUDA backend runs (the contracts rewritten as reduces and epilogue maps,
// backend/cuda/contract_view.h) computes the same function: every example with the GPU's tiles,
// through the CPU executor, against the reference.
TEST(ContractView, EveryExampleWithGpuTilesVerifiesThroughTheView) {
  for (const std::string& file : testing::example_files()) {
    SCOPED_TRACE(file);
    auto program = std::make_shared<Program>(parse_program_file(file));
    BoundProgram bound = bind_program(program, SizeChoice{true, {}});
    KernelProgram view = contracts_as_reduces(compile_program(bound, CompileOptions::for_gpu()).kernels);
    verify_kernel_program(view);
    TensorSet inputs = make_inputs(bound, 11);
    auto v = testing::verify_kernels(bound, view, inputs);
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

}  // namespace
}  // namespace solder
