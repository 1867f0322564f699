// The constructs of docs/language.md that meet users halfway, front to back: reductions inside
// expressions (desugared into '$' temporaries), the unary math functions, and loads at
// data-dependent indices (gathers), each parsed, printed, verified, and run by the float64 reference
// and the CPU executor (unfused, fused, and with the GPU's tiles), and each gather's generated CUDA
// checked for its index guard.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/cuda_expr.h"
#include "driver/compile.h"
#include "ir/expr_eval.h"
#include "ir/interval.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/runtime.h"
#include "../test_util.h"

namespace solder {
namespace {

std::string canonical(const std::string& text) { return print_program(parse_program(text, "t.sol")); }

// The message of the Error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.formatted();
  }
  return "";
}

std::shared_ptr<Program> parsed(const std::string& text) { return std::make_shared<Program>(parse_program(text, "t.sol")); }

// Runs `bound` on the CPU executor three ways (unfused, fused with the CPU's tiles, fused with the
// GPU's) and compares each output with the float64 reference.
void expect_executor_matches_reference(const BoundProgram& bound, uint64_t seed, const TensorSet* given = nullptr) {
  TensorSet inputs = given ? *given : make_inputs(bound, seed);
  TensorSet reference = run_reference(bound, inputs);
  double tolerance = tolerance_for(bound);
  for (int way = 0; way < 3; ++way) {
    SCOPED_TRACE(way == 0 ? "unfused" : way == 1 ? "fused" : "fused, GPU tiles");
    CompileOptions options = way == 2 ? CompileOptions::for_gpu() : CompileOptions{};
    options.fuse = way != 0;
    KernelProgram kernels = compile_program(bound, options).kernels;
    ExecutionResult result = execute_kernel_program(kernels, inputs);
    for (const TensorInfo* out : bound.outputs()) {
      SCOPED_TRACE(out->name);
      EXPECT_EQ(result.unwritten.at(out->name), 0);
      OutputCheck check = compare_output(result.outputs.at(out->name), reference.at(out->name), tolerance);
      EXPECT_TRUE(check.ok) << check.reason << " (error " << check.error << ", tolerance " << tolerance << ")";
    }
  }
}

// ---- Reductions inside expressions ----------------------------------------------------------------

const char* kRms =
    "program p\ndim N = 4, L = 8\nin x[N, L] : f32\nin g[N] : f32\n"
    "out r[n] = rsqrt(sum(l) x[n, l] * x[n, l] / L + 1e-6) * g[n]\n";

TEST(InnerReductions, DesugarIntoTemporariesThatPrintAndParseAgain) {
  std::string printed = canonical(kRms);
  EXPECT_EQ(printed,
            "program p\ndim N = 4, L = 8\nin x[N, L] : f32\nin g[N] : f32\n"
            "$sum1[n] = sum(l) x[n, l] * x[n, l] / L\n"
            "out r[n] = rsqrt($sum1[n] + 1e-06) * g[n]\n");
  EXPECT_EQ(canonical(printed), printed);
  Program p = parse_program(kRms, "t.sol");
  ASSERT_EQ(p.defs.size(), 2u);
  EXPECT_EQ(p.defs[0].reduce, ReduceOp::sum);
  EXPECT_FALSE(p.defs[0].target.is_output);
  // The temporary's position is the reduction's in the user's text.
  EXPECT_EQ(p.defs[0].loc.line, 5);
  EXPECT_EQ(p.defs[0].loc.column, 18);
}

TEST(InnerReductions, BodyIsTheProductThatFollows) {
  // sum(l) binds like a product: the 1e-6 is added once, not L times.
  BoundProgram bound = bind_program(parsed(kRms), SizeChoice{});
  TensorSet inputs = make_inputs(bound, 5);
  TensorSet reference = run_reference(bound, inputs);
  const HostTensor& x = inputs.at("x");
  const HostTensor& g = inputs.at("g");
  for (int n = 0; n < 4; ++n) {
    double ms = 0;
    for (int l = 0; l < 8; ++l) ms += x.values[n * 8 + l] * x.values[n * 8 + l] / 8;
    ms = static_cast<double>(static_cast<float>(ms));  // the temporary is f32
    double want = 1 / std::sqrt(ms + 1e-6) * g.values[n];
    EXPECT_NEAR(reference.at("r").values[n], want, 1e-6 * std::abs(want)) << n;
  }
  expect_executor_matches_reference(bound, 6);
}

TEST(InnerReductions, NestedSiblingAndTopLevel) {
  std::string text =
      "program p\ndim N = 3, M = 5\nin a[N, M] : f32\nin b[M, M] : f32\n"
      "out y[i] = sum(j) a[i, j] * max(k) b[j, k]\n"
      "out z[i] = 1 + sum(l) a[i, l] - max(l) a[i, l] / 2\n"
      "out w[i] = max(a[i, 0], 0) + min(j) a[i, j]\n";
  std::string printed = canonical(text);
  EXPECT_EQ(printed,
            "program p\ndim N = 3, M = 5\nin a[N, M] : f32\nin b[M, M] : f32\n"
            "$max1[j] = max(k) b[j, k]\n"
            "out y[i] = sum(j) a[i, j] * $max1[j]\n"
            "$sum2[i] = sum(l) a[i, l]\n"
            "$max3[i] = max(l) a[i, l] / 2\n"
            "out z[i] = 1 + $sum2[i] - $max3[i]\n"
            "$min4[i] = min(j) a[i, j]\n"
            "out w[i] = max(a[i, 0], 0) + $min4[i]\n");
  EXPECT_EQ(canonical(printed), printed);
  BoundProgram bound = bind_program(parsed(text), SizeChoice{});
  expect_executor_matches_reference(bound, 7);
}

TEST(InnerReductions, ReductionsOfAReductionAndNoFreeVariables) {
  std::string text =
      "program p\ndim N = 6\nin x[N] : f32\n"
      "out y[i] = x[i] / sum(j) exp(x[j] - max(k) x[k])\n"
      "out c[] = argmax(j) x[j] + 0\n";
  std::string printed = canonical(text);
  EXPECT_EQ(printed,
            "program p\ndim N = 6\nin x[N] : f32\n"
            "$max1[] = max(k) x[k]\n"
            "$sum2[] = sum(j) exp(x[j] - $max1)\n"
            "out y[i] = x[i] / $sum2\n"
            "out c[] = argmax(j) x[j] + 0\n");
  BoundProgram bound = bind_program(parsed(text), SizeChoice{});
  expect_executor_matches_reference(bound, 8);
}

TEST(InnerReductions, ArgmaxInsideAnExpressionIsAnIndex) {
  // argmax(e) inside a load's index: the i32 temporary makes it a data-dependent load.
  std::string text =
      "program p\ndim T = 4, E = 6\nin l[T, E] : f32\n"
      "out best[t] = l[t, argmax(e) l[t, e]] * 2\n";
  Program p = parse_program(text, "t.sol");
  ASSERT_EQ(p.defs.size(), 2u);
  EXPECT_EQ(p.defs[0].target.name, "$argmax1");
  BoundProgram bound = bind_program(parsed(text), SizeChoice{});
  EXPECT_EQ(bound.tensor("$argmax1").dtype, DType::i32);
  expect_executor_matches_reference(bound, 9);
}

struct BadText {
  const char* what;
  const char* line;       // appended to the header as line 4
  const char* position;   // "line:column"
  const char* message;
};

TEST(InnerReductions, ErrorsPointAtTheUsersText) {
  const char* header = "program p\ndim N = 4, M = 3\nin a[N, M] : f32\n";
  const BadText cases[] = {
      {"topk inside an expression", "out y[i, r] = 1 + topk(2, j) a[i, j]\n", "4:19", "topk may only start the right-hand side"},
      {"unknown name in a body", "out y[i] = 1 + sum(j) a[i, q]\n", "4:28", "unknown name 'q'"},
      {"unknown tensor in a body", "out y[i] = 1 + sum(j) a[i, j] * w[j]\n", "4:33", "unknown tensor 'w'"},
      {"reduction variable reused", "out y[i] = 1 + sum(i) a[i, 0]\n", "4:20", "index variable 'i' appears twice"},
      {"missing body", "out y[i] = 1 + sum(j)\n", "4:22", "expected the expression that sum reduces"},
      {"reduction in a size", "in w[sum(j) N] : f32\nout y[i] = a[i, 0]\n", "4:6", "may only appear in a definition's right-hand side"},
      {"a '$' input", "in $w[N] : f32\nout y[i] = a[i, 0]\n", "4:4", "names starting with '$' are reserved"},
      {"a '$' index variable", "out y[$i] = a[$i, 0]\n", "4:7", "names starting with '$' are reserved"},
      // The temporary's variables take their extents from its own body (or an explicit one).
      {"variable only in index arithmetic", "out y[i] = a[i, 0] + sum(j) a[i + 1, j]\n", "4:7", "index variable 'i' has no extent"},
      {"range of a temporary's load", "out y[i : N] = a[i, 0] + sum(j) a[i + 1, j]\n", "4:35", "index 'i + 1' of 'a' may be out of range"},
  };
  for (const BadText& c : cases) {
    SCOPED_TRACE(c.what);
    std::string message = error_of([&] { testing::bind_text(std::string(header) + c.line); });
    EXPECT_NE(message.find(std::string("test.sol:") + c.position + ": error: "), std::string::npos) << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
  }
}

TEST(InnerReductions, TemporaryNamesAvoidTakenOnes) {
  std::string text =
      "program p\ndim N = 4\nin x[N, N] : f32\n$sum1[i] = x[i, 0]\nout y[i] = $sum1[i] + sum(j) x[i, j]\n";
  Program p = parse_program(text, "t.sol");
  ASSERT_EQ(p.defs.size(), 3u);
  EXPECT_EQ(p.defs[1].target.name, "$sum2");
}

// ---- Unary math -------------------------------------------------------------------------------------

const char* kUnaryNames[] = {"sin", "cos", "tan", "erf", "exp2", "log2", "log1p", "expm1", "floor", "ceil", "round"};

TEST(UnaryMath, EachFunctionParsesPrintsAndIsReal) {
  for (const char* name : kUnaryNames) {
    SCOPED_TRACE(name);
    std::string text = std::string("program p\ndim N = 4\nin x[N] : f32\nout y[i] = ") + name + "(x[i]) * 2\n";
    EXPECT_EQ(canonical(text), text);
    auto u = unary_function(name);
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(unary_op_name(*u), name);
    // A condition is not a number.
    std::string bad = std::string("program p\ndim N = 4\nin x[N] : f32\nout y[i] = ") + name + "(x[i] < 0)\n";
    EXPECT_NE(error_of([&] { testing::bind_text(bad); }).find("expects a number, found a condition"), std::string::npos);
  }
  // floor of an integer is a real number: not an index.
  EXPECT_NE(error_of([&] { testing::bind_text("program p\ndim N = 4\nin x[N] : f32\nout y[i] = x[i] + x[floor(i)]\n"); })
                .find("must be an integer, found a real number"),
            std::string::npos);
}

TEST(UnaryMath, ValuesAreTheCLibrarys) {
  EXPECT_EQ(apply_unary(UnaryOp::round, 2.5), 2.0);  // half to even
  EXPECT_EQ(apply_unary(UnaryOp::round, 3.5), 4.0);
  EXPECT_TRUE(std::signbit(apply_unary(UnaryOp::round, -0.5)));
  EXPECT_EQ(apply_unary(UnaryOp::floor, -1.5), -2.0);
  EXPECT_EQ(apply_unary(UnaryOp::ceil, -1.5), -1.0);
  EXPECT_EQ(apply_unary(UnaryOp::exp2, 3), 8.0);
  EXPECT_EQ(apply_unary(UnaryOp::log2, 8), 3.0);
  EXPECT_EQ(apply_unary(UnaryOp::erf, 0), 0.0);
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::sin, 1.0), std::sin(1.0));
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::cos, 1.0), std::cos(1.0));
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::tan, 1.0), std::tan(1.0));
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::log1p, 1e-10), std::log1p(1e-10));
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::expm1, 1e-10), std::expm1(1e-10));
  EXPECT_TRUE(std::isnan(apply_unary(UnaryOp::log2, -1)));
}

TEST(UnaryMath, Float32ModeRoundsEachResultOnce) {
  CompiledExpr::Bindings b;
  b.vars = {"i"};
  b.tensor = [](const std::string&) -> const TensorStorage* { return nullptr; };
  Expr e = make_unary(UnaryOp::sin, make_binary(BinaryOp::mul, make_var("i"), make_const(0.1)));
  CompiledExpr f64(e, b, Arithmetic::float64), f32(e, b, Arithmetic::float32);
  for (int64_t i : {1, 7, 1000, 123456}) {
    double x = static_cast<double>(static_cast<float>(static_cast<double>(i) * static_cast<double>(static_cast<float>(0.1))));
    EXPECT_EQ(f32.eval(&i), static_cast<double>(static_cast<float>(std::sin(x)))) << i;
    EXPECT_EQ(f64.eval(&i), std::sin(static_cast<double>(i) * 0.1)) << i;
  }
}

TEST(UnaryMath, ExecutorMatchesReferenceForEachFunction) {
  // Arguments kept in each function's domain and away from tan's poles.
  std::string text =
      "program p\ndim N = 8, M = 16\nsmall N = 3\nin x[N, M] : f32 ~ uniform(-1.4, 1.4)\n"
      "out s[n, m] = sin(x[n, m] * 9) + cos(x[n, m] * 9)\n"
      "out t[n, m] = tan(x[n, m]) + erf(x[n, m] * 2)\n"
      "out e[n, m] = exp2(x[n, m] * 5) + log2(abs(x[n, m]) + 0.01)\n"
      "out l[n, m] = log1p(abs(x[n, m])) + expm1(x[n, m])\n"
      "out f[n, m] = floor(x[n, m] * 7) + ceil(x[n, m] * 7) * 10 + round(x[n, m] * 7) * 100\n"
      "out r[n] = sum(m) sin(x[n, m] * 3) * erf(x[n, m])\n";
  expect_executor_matches_reference(testing::bind_text(text, true), 21);
  expect_executor_matches_reference(testing::bind_text(text, false), 22);
}

TEST(UnaryMath, CudaUsesThePreciseFunctions) {
  std::string text =
      "program p\ndim N = 8\nin x[N] : f32\n"
      "out y[n] = sin(x[n]) + cos(x[n]) + tan(x[n]) + erf(x[n]) + exp2(x[n]) + log2(x[n]) + log1p(x[n]) + expm1(x[n])"
      " + floor(x[n]) + ceil(x[n]) + round(x[n])\n";
  BoundProgram bound = testing::bind_text(text);
  GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
  for (const char* f : {"sinf(", "cosf(", "tanf(", "erff(", "exp2f(", "log2f(", "log1pf(", "expm1f(", "floorf(", "ceilf(", "rintf("})
    EXPECT_NE(m.source.find(f), std::string::npos) << f;
  EXPECT_EQ(m.source.find("__sinf("), std::string::npos);
  EXPECT_EQ(m.source.find("__cosf("), std::string::npos);
}

// ---- Data-dependent loads -----------------------------------------------------------------------

const char* kGather =
    "program p\ndim T = 6, V = 10, C = 4\nin tok[T] : i32 ~ randint(0, 10)\nin emb[V, C] : f32\n"
    "out y[t, c] = emb[tok[t], c] * 2\n";

TEST(Gathers, VerifyRoundTripAndMatchTheReference) {
  EXPECT_EQ(canonical(kGather), kGather);
  BoundProgram bound = testing::bind_text(kGather);
  expect_executor_matches_reference(bound, 31);
}

TEST(Gathers, OnlyI32TensorsMayBeIndices) {
  std::string text = "program p\ndim T = 6, V = 10\nin f[T] : f32\nin emb[V] : f32\nout y[t] = emb[f[t]]\n";
  std::string message = error_of([&] { testing::bind_text(text); });
  EXPECT_NE(message.find("must be an integer, found a real number"), std::string::npos) << message;
  text = "program p\ndim T = 6, V = 10\nin f[T] : bool\nin emb[V] : f32\nout y[t] = emb[f[t] + 0]\n";
  message = error_of([&] { testing::bind_text(text); });
  EXPECT_NE(message.find("test.sol:5:16: error: index 'f[t] + 0' of 'emb' reads 'f', which is bool; an index may read i32 tensors only"),
            std::string::npos) << message;
}

TEST(Gathers, AddressAtMost2To24Elements) {
  // Kernels hold indices in f32 tiles: exact up to 2^24, so larger dims are refused.
  std::string text = "program p\ndim T = 2, V = 16777217\nin tok[T] : i32\nin emb[V] : bf16\nout y[t] = emb[tok[t]]\n";
  std::string message = error_of([&] { testing::bind_text(text); });
  EXPECT_NE(message.find("test.sol:5:16: error: index 'tok[t]' of 'emb' reads a tensor, and dim 1 has extent 16777217"),
            std::string::npos) << message;
  testing::bind_text("program p\ndim T = 2, V = 16777216\nin tok[T] : i32\nin emb[V] : bf16\nout y[t] = emb[tok[t]]\n");
}

TEST(Gathers, IntervalAnalysisBoundsALoadOnlyWhereGuardsProveIt) {
  std::set<std::string, std::less<>> integers = {"tok"};
  RangeFacts facts;
  facts.vars["t"] = Interval{0, 5};
  Expr load = make_load("tok", {make_var("t")});
  EXPECT_FALSE(facts.bound(load).has_value());  // no integer tensors known: unknown
  facts.integer_tensors = &integers;
  auto any = facts.bound(load);
  ASSERT_TRUE(any.has_value());
  EXPECT_EQ(any->lo, INT32_MIN);  // the i32 range, never the extent of the dim it indexes
  EXPECT_EQ(any->hi, INT32_MAX);
  Expr guard = make_binary(BinaryOp::logical_and, make_binary(BinaryOp::ge, load, make_int(0)),
                           make_binary(BinaryOp::lt, load, make_int(10)));
  auto proven = facts.assuming(guard, true).bound(load);
  ASSERT_TRUE(proven.has_value());
  EXPECT_EQ(proven->lo, 0);
  EXPECT_EQ(proven->hi, 9);
  // Real tensors are never bounded, even under a guard.
  Expr real = make_load("emb", {make_var("t")});
  Expr real_guard = make_binary(BinaryOp::logical_and, make_binary(BinaryOp::gt, real, make_int(0)),
                                make_binary(BinaryOp::lt, real, make_int(2)));
  EXPECT_FALSE(facts.assuming(real_guard, true).bound(real).has_value());
}

TEST(Gathers, GuardedGatherIsNeverEvaluatedOutOfRange) {
  std::string text =
      "program p\ndim T = 6, V = 10, C = 4\nin tok[T] : i32 ~ randint(-3, 14)\nin emb[V, C] : f32\n"
      "out y[t, c] = select(tok[t] >= 0 && tok[t] < V, emb[tok[t], c], 0)\n";
  BoundProgram bound = testing::bind_text(text);
  // A third of the ids are out of range: the select's untaken branch never loads them (no staging
  // copy reads them speculatively either).
  expect_executor_matches_reference(bound, 32);
  // The generated code checks every data-dependent index, proven or not (one comparison).
  GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
  EXPECT_TRUE(m.checks_indices);
}

TEST(Gathers, OutOfRangeIndexIsAClearErrorInTheReferenceAndTheExecutor) {
  BoundProgram bound = testing::bind_text(kGather);
  TensorSet inputs = make_inputs(bound, 33);
  inputs.at("tok").values[3] = 73;
  std::string want = "index 73 of dim 1 is outside [0, 10)";
  std::string message = error_of([&] { run_reference(bound, inputs); });
  EXPECT_NE(message.find("load out of range: emb[73, "), std::string::npos) << message;
  EXPECT_NE(message.find(want), std::string::npos) << message;
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    CompileOptions options;
    options.fuse = fuse;
    KernelProgram kernels = compile_program(bound, options).kernels;
    message = error_of([&] { execute_kernel_program(kernels, inputs); });
    EXPECT_NE(message.find("load out of range: emb[73, "), std::string::npos) << message;
    EXPECT_NE(message.find(want), std::string::npos) << message;
  }
  inputs.at("tok").values[3] = -1;
  message = error_of([&] { run_reference(bound, inputs); });
  EXPECT_NE(message.find("index -1 of dim 1 is outside [0, 10)"), std::string::npos) << message;
}

TEST(Gathers, GeneratedCudaGuardsTheIndexAndRecordsTheError) {
  BoundProgram bound = testing::bind_text(kGather);
  KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
  GeneratedModule m = generate_cuda(kernels);
  EXPECT_TRUE(m.checks_indices);
  EXPECT_NE(m.source.find(kCheckedIndexPrologue), std::string::npos);
  size_t parameter = 0;
  while (m.parameters[parameter] != "emb") ++parameter;
  EXPECT_NE(m.source.find(", 10LL, " + std::to_string(parameter) + ", 0)"), std::string::npos) << m.source;
  // The prologue comes before the first kernel.
  EXPECT_LT(m.source.find(kCheckedIndexPrologue), m.source.find("__global__"));
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  runtime::CompileFlags flags;
  flags.use_cache = false;
  EXPECT_FALSE(runtime::compile_cuda(m.source, "gather.cu", flags).cubins.front().empty());
}

// The new examples compile with NVRTC, small and at their default sizes (the tensor-core emitter for
// RoPE attention); examples_test.cpp runs them on the CPU executor.
TEST(LanguageExamples, NvrtcCompilesThem) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (const char* name : {"embedding", "rope_attention", "paged_decode"}) {
    for (bool small : {true, false}) {
      SCOPED_TRACE(std::string(name) + (small ? " (small)" : " (default)"));
      std::string file = std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol";
      BoundProgram bound = bind_program(std::make_shared<Program>(parse_program_file(file)), SizeChoice{small, {}});
      GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
      runtime::CompileFlags flags;
      flags.use_cache = false;
      EXPECT_FALSE(runtime::compile_cuda(m.source, std::string(name) + ".cu", flags).cubins.front().empty());
    }
  }
}

}  // namespace
}  // namespace solder
