// Concatenations along K (issue 15, canonicalizer item "concatenations as K ranges"): random small
// contractions whose A or B operand is torch.cat of two or three tensors along K (a select on the
// reduced axis), one branch sometimes computed (a ReLU rounded to the operand's type), compiled with
// and without the contraction pass, fused and unfused, on the CPU executor. The rewritten kernel
// (the contract with one product term per K range, zero outside its range) and the plain reduce must
// both verify against the float64 reference, and so must what the CUDA backend runs (the view, where
// the K ranges that share their other operand are merged back into one product per K step). Seeded;
// a failure prints the program.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "backend/cuda/contract_view.h"
#include "contract/canonicalize.h"
#include "driver/compile.h"
#include "kernel/kernel_printer.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

class ConcatenationGenerator {
 public:
  explicit ConcatenationGenerator(uint64_t seed) : rng_(seed) {}

  int pieces() const { return pieces_; }

  std::string program(uint64_t seed) {
    static const int kSizes[] = {1, 3, 16, 17, 33};
    static const char* kTypes[] = {"f16", "bf16"};
    const int m = kSizes[pick(5)], n = kSizes[pick(5)];
    pieces_ = 2 + (pick(3) == 0);
    std::vector<int> k;
    for (int i = 0; i < pieces_; ++i) k.push_back(kSizes[1 + pick(4)]);
    const std::string t = kTypes[pick(2)];
    const bool on_b = pick(3) == 0;  // the concatenation is the B operand (K rows of two weights)
    std::string text = "program concatenation_" + std::to_string(seed) + "\n";
    text += "dim M = " + std::to_string(m) + ", N = " + std::to_string(n);
    std::string total;
    for (int i = 0; i < pieces_; ++i) {
      text += ", K" + std::to_string(i) + " = " + std::to_string(k[i]);
      total += (total.empty() ? "" : " + ") + std::string("K") + std::to_string(i);
    }
    text += ", KT = " + total + "\n";
    // The pieces: x0 .. x{p-1}, each [M, Ki] (or [Ki, N] on B); one of them may be computed.
    const int computed = pick(2) == 0 ? pick(pieces_) : -1;
    std::vector<std::string> loads;
    std::string offset;
    for (int i = 0; i < pieces_; ++i) {
      const std::string name = "x" + std::to_string(i), ki = "K" + std::to_string(i);
      const std::string shape = on_b ? "[" + ki + ", N]" : "[M, " + ki + "]";
      const std::string at = offset.empty() ? "c" : "c - (" + offset + ")";
      const std::string index = on_b ? "[" + at + ", n]" : "[m, " + at + "]";
      if (i == computed) {
        text += "in p" + std::to_string(i) + shape + " : " + t + "\n";
        text += name + (on_b ? "[r, n]" : "[m, r]") + " : " + t + " = max(p" + std::to_string(i) + (on_b ? "[r, n]" : "[m, r]") + ", 0)\n";
      } else {
        text += "in " + name + shape + " : " + t + "\n";
      }
      loads.push_back(name + index);
      offset += (offset.empty() ? "" : " + ") + ki;
    }
    // cat = select(c < K0, x0, select(c < K0 + K1, x1, x2)), as torch.cat writes it in a program.
    std::function<std::string(int, const std::string&)> cat = [&](int i, const std::string& bound) -> std::string {
      if (i == pieces_ - 1) return loads[i];
      const std::string next = bound + (bound.empty() ? "" : " + ") + "K" + std::to_string(i);
      return "select(c < " + next + ", " + loads[i] + ", " + cat(i + 1, next) + ")";
    };
    text += std::string("cat") + (on_b ? "[c : KT, n]" : "[m, c : KT]") + " = " + cat(0, "") + "\n";
    text += std::string("in w") + (on_b ? "[M, KT]" : "[KT, N]") + " : " + t + " ~ normal(0, 0.5)\n";
    const std::string out_type = pick(2) ? t : "f32";
    text += "out y[m, n] : " + out_type + " = sum(c) " + (on_b ? "w[m, c] * cat[c, n]" : "cat[m, c] * w[c, n]") + "\n";
    return text;
  }

 private:
  std::mt19937_64 rng_;
  int pieces_ = 2;
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
};

// The number of contracts, and the largest number of product terms of one.
std::pair<int, size_t> contract_terms(const KernelProgram& p) {
  int count = 0;
  size_t terms = 0;
  std::function<void(const Block&)> walk = [&](const Block& block) {
    for (auto& s : block) {
      if (auto c = s.as<ContractNode>()) {
        ++count;
        terms = std::max(terms, c->terms.size());
      }
      if (auto f = s.as<ForNode>()) walk(f->body);
      if (auto i = s.as<IfNode>()) {
        walk(i->then_body);
        walk(i->else_body);
      }
    }
  };
  for (auto& k : p.kernels) walk(k.body);
  return {count, terms};
}

TEST(KRangeProperty, ConcatenatedKAgreesWithThePlainReduce) {
  const int programs = 40;
  int split = 0;
  for (int i = 0; i < programs; ++i) {
    const uint64_t seed = 5000 + static_cast<uint64_t>(i);
    ConcatenationGenerator generator(seed);
    std::string text = generator.program(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + text);
    BoundProgram bound = testing::bind_text(text);
    TensorSet inputs = make_inputs(bound, seed);
    TensorSet reference = run_reference(bound, inputs);
    for (bool fuse : {true, false}) {
      auto [reduce_form, contract_form] = testing::compile_both_forms(bound, fuse);
      EXPECT_EQ(contract_terms(reduce_form).first, 0);
      auto [contracts, terms] = contract_terms(contract_form);
      EXPECT_GE(contracts, 1) << "no contract (fuse " << fuse << ")\n" << print_kernel_program(contract_form);
      // Fused, the concatenation is inlined into the summand: one product term per K range (unfused,
      // the contraction reads cat as stored by the kernel before it).
      if (fuse) EXPECT_EQ(terms, static_cast<size_t>(generator.pieces())) << print_kernel_program(contract_form);
      split += terms >= 2;
      auto a = testing::verify_kernels(bound, reduce_form, inputs, &reference);
      auto b = testing::verify_kernels(bound, contract_form, inputs, &reference);
      KernelProgram view = contracts_as_reduces(contract_form);
      auto c = testing::verify_kernels(bound, view, inputs, &reference);
      EXPECT_TRUE(a.ok()) << "reduce form (fuse " << fuse << "): " << a.failures();
      EXPECT_TRUE(b.ok()) << "contract form (fuse " << fuse << "): " << b.failures() << "\n" << print_kernel_program(contract_form);
      EXPECT_TRUE(c.ok()) << "the CUDA backend's view (fuse " << fuse << "): " << c.failures() << "\n" << print_kernel_program(view);
    }
  }
  EXPECT_GE(split, programs);  // at least the fused form of every program
}

// The canonical form: one term per K range, each zero outside it, exact in the tensors' type; and
// the merge back into one operand per shared other operand.
TEST(KRangeProperty, CanonicalFormHasOneTermPerRangeAndMergesBack) {
  BoundProgram bound = testing::bind_text(
      "program cat\n"
      "dim M = 4, N = 8, IN = 5, H = 11, HX = IN + H\n"
      "in x[M, IN] : f16\nin p[M, H] : f16\nin w[HX, N] : f16\n"
      "h[m, i] : f16 = max(p[m, i], 0)\n"
      "cat[m, c : HX] = select(c < IN, x[m, c], h[m, c - IN])\n"
      "out y[m, n] : f16 = sum(c) cat[m, c] * w[c, n]\n");
  CompileOptions options;  // fused: cat is inlined into the summand
  KernelProgram kernels = compile_program(bound, options).kernels;
  const ContractNode* contract = nullptr;
  std::function<void(const Block&)> walk = [&](const Block& block) {
    for (auto& s : block) {
      if (auto c = s.as<ContractNode>()) contract = c;
      if (auto f = s.as<ForNode>()) walk(f->body);
    }
  };
  for (auto& k : kernels.kernels) walk(k.body);
  ASSERT_NE(contract, nullptr) << print_kernel_program(kernels);
  ASSERT_EQ(contract->terms.size(), 2u) << print_kernel_program(kernels);
  EXPECT_EQ(contract->type, MmaType::f16);
  for (auto& t : contract->terms) {
    auto s = t.a.as<SelectNode>();
    ASSERT_NE(s, nullptr) << print_kernel_program(kernels);
    EXPECT_TRUE(is_constant_zero(s->if_true) != is_constant_zero(s->if_false));
  }
  auto merged = merge_k_range_terms(contract->terms);
  ASSERT_EQ(merged.size(), 1u);
  auto s = merged[0].a.as<SelectNode>();
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(is_constant_zero(s->if_true));
  EXPECT_FALSE(is_constant_zero(s->if_false));
  // Selects of different conditions, or two non-zero branches that overlap, do not merge.
  Expr c = make_var("c"), x = make_load("x", {make_var("m"), c});
  auto below = [&](double bound) { return make_binary(BinaryOp::lt, c, make_const(bound)); };
  EXPECT_FALSE(merge_k_ranges(make_select(below(5), x, make_const(0.0)), make_select(below(6), make_const(0.0), x)));
  EXPECT_FALSE(merge_k_ranges(x, x));
}

// nerf_mlp at its layer widths (H 256, IN 63, DIN 27; 128 points): what the CUDA backend runs — the
// whole contractions of the GPU plan, the K ranges of its two concatenations merged in the view —
// computes the program, on the CPU executor. And both concatenated products are on tensor cores.
TEST(KRangeProperty, NerfMlpAtItsWidthsVerifiesThroughTheView) {
  auto program = std::make_shared<Program>(parse_program_file(testing::example_path("nerf_mlp")));
  BoundProgram bound = bind_program(program, SizeChoice{false, {{"N", 128}}});
  KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
  KernelProgram view = contracts_as_reduces(kernels);
  verify_kernel_program(view);
  TensorSet inputs = make_inputs(bound, 3);
  auto v = testing::verify_kernels(bound, view, inputs);
  EXPECT_TRUE(v.ok()) << v.failures();
}

}  // namespace
}  // namespace solder
