// The CPU executor (src/backend/cpu/executor.h), one behaviour per test, each against a direct
// computation on random data: every statement kind of the Kernel IR, each cluster collective for
// cluster sizes 2, 4, 8 and 16, queues between producer and consumer blocks, the global traffic
// counters, and deadlocks, which must come back as an Error naming the kernel and the statement —
// never as a hang (each deadlock test runs the executor on its own thread with a 20 s limit).
//
// Programs are built directly from Kernel IR nodes; the helpers at the top keep them short.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "kernel/kernel_verifier.h"
#include "kernel/kernel_ir.h"
#include "../kernel_builders.h"

namespace solder {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using namespace kernel_builders;

KernelProgram program(std::vector<GlobalTensor> globals, std::vector<Kernel> kernels) {
  KernelProgram p;
  p.name = "test";
  p.globals = std::move(globals);
  p.kernels = std::move(kernels);
  return p;
}

// ---- Data ---------------------------------------------------------------------------------------

// Uniform random values in [lo, hi), rounded to `dtype`; reproducible from `seed`.
HostTensor random_tensor(std::string name, std::vector<int64_t> shape, uint64_t seed, double lo = -1, double hi = 1,
                         DType dtype = DType::f32) {
  HostTensor t{std::move(name), std::move(shape), dtype, {}};
  std::mt19937_64 generator(seed);
  for (int64_t i = 0; i < t.elements(); ++i) {
    double unit = static_cast<double>(generator() >> 11) * 0x1.0p-53;
    t.values.push_back(round_to_dtype(lo + (hi - lo) * unit, dtype));
  }
  return t;
}

TensorSet tensors(std::vector<HostTensor> list) {
  TensorSet set;
  for (auto& t : list) set[t.name] = t;
  return set;
}

double round_f32(double v) { return static_cast<double>(static_cast<float>(v)); }
double round_bf16(double v) { return round_to_dtype(v, DType::bf16); }

// Element-wise |got - want| <= tolerance * max(1, |want|); reports the first few mismatches.
void expect_values(const HostTensor& got, const std::vector<double>& want, double tolerance = 0) {
  ASSERT_EQ(got.values.size(), want.size()) << got.name;
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.values[i], w = want[i];
    bool ok = g == w || std::abs(g - w) <= tolerance * std::max(1.0, std::abs(w));
    if (!ok && reported++ < 5) ADD_FAILURE() << got.name << "[" << i << "] = " << g << ", expected " << w;
  }
}

// ---- Running ------------------------------------------------------------------------------------

// Declares `result` and runs `program` into it.
#define RUN_OR_SKIP(result, program, inputs) \
  ExecutionResult result = execute_kernel_program(program, inputs)

// Runs a program that must deadlock on another thread and returns the message of the Error it
// throws. Fails instead of hanging when the executor has not answered within 20 s.
std::string deadlock_message(const KernelProgram& program, const TensorSet& inputs = {}) {
  auto future = std::make_shared<std::future<std::string>>(std::async(std::launch::async, [program, inputs] {
    try {
      execute_kernel_program(program, inputs);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }));
  if (future->wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the executor hung for 20 s instead of reporting a deadlock";
    // Leak the future on purpose: the destructor of a std::async future waits for the hung thread.
    new std::shared_ptr<std::future<std::string>>(future);
    return "";
  }
  std::string message = future->get();
  EXPECT_FALSE(message.empty()) << "the deadlocking program ran to completion";
  return message;
}

// =================================================================================================
// for
// =================================================================================================

TEST(ExecutorFor, SerialLoopAccumulatesEveryIteration) {
  // y[b] = sum over t < 20 of x[b, t], one map per iteration.
  auto p = program({input("x", {3, 20}), output("y", {3})},
                   {kernel("sum_rows", {{"b", 3}}, 1, {buffer("acc", {1}, Scope::register_file)},
                           {fill("acc", 0),
                            loop("t", num(0), num(20), {map(at("acc", {num(0)}), load("acc", {num(0)}) + load("x", {var("b"), var("t")}))}),
                            copy(at("y", {var("b")}), at("acc", {num(0)}))})});
  HostTensor x = random_tensor("x", {3, 20}, 1);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want(3, 0);
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 20; ++t) want[b] = round_f32(want[b] + x.values[b * 20 + t]);
  expect_values(r.outputs.at("y"), want);
}

TEST(ExecutorFor, BoundsDependOnGridVariables) {
  // y[b] = sum of x[i] for b <= i < 2b (block 0's loop is empty).
  auto p = program({input("x", {10}), output("y", {5})},
                   {kernel("triangle", {{"b", 5}}, 1, {buffer("acc", {1}, Scope::register_file)},
                           {fill("acc", 0),
                            loop("i", var("b"), var("b") * num(2), {map(at("acc", {num(0)}), load("acc", {num(0)}) + load("x", {var("i")}))}),
                            copy(at("y", {var("b")}), at("acc", {num(0)}))})});
  HostTensor x = random_tensor("x", {10}, 2);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want(5, 0);
  for (int b = 0; b < 5; ++b)
    for (int i = b; i < 2 * b; ++i) want[b] = round_f32(want[b] + x.values[i]);
  expect_values(r.outputs.at("y"), want);
}

TEST(ExecutorFor, BoundsDependOnEnclosingLoopVariable) {
  // y[b] = number of pairs (i, j) with 0 <= i < b + 1, i <= j < b + 1.
  auto p = program({output("y", {4})},
                   {kernel("pairs", {{"b", 4}}, 1, {buffer("count", {1}, Scope::register_file)},
                           {fill("count", 0),
                            loop("i", num(0), var("b") + num(1),
                                 {loop("j", var("i"), var("b") + num(1), {map(at("count", {num(0)}), load("count", {num(0)}) + real(1))})}),
                            copy(at("y", {var("b")}), at("count", {num(0)}))})});
  ExecutionResult r = execute_kernel_program(p, {});
  expect_values(r.outputs.at("y"), {1, 3, 6, 10});
}

// =================================================================================================
// if
// =================================================================================================

TEST(ExecutorIf, EachBlockTakesItsOwnBranch) {
  // Even rows double, odd rows negate.
  auto p = program({input("x", {6, 8}), output("y", {6, 8})},
                   {kernel("rows", {{"b", 6}}, 1, {},
                           {branch(equal(mod(var("b"), num(2)), num(0)),
                                   {map(at("y", {var("b"), var("j")}), load("x", {var("b"), var("j")}) * real(2), over({{"j", 8}}))},
                                   {map(at("y", {var("b"), var("j")}), -load("x", {var("b"), var("j")}), over({{"j", 8}}))})})});
  HostTensor x = random_tensor("x", {6, 8}, 3);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want;
  for (int b = 0; b < 6; ++b)
    for (int j = 0; j < 8; ++j) want.push_back(b % 2 == 0 ? x.values[b * 8 + j] * 2 : -x.values[b * 8 + j]);
  expect_values(r.outputs.at("y"), want);
}

TEST(ExecutorIf, WithoutElseLeavesOtherBlocksAlone) {
  auto p = program({input("x", {4, 3}), output("y", {4, 3})},
                   {kernel("init", {{"b", 4}}, 1, {}, {map(at("y", {var("b"), var("j")}), real(7), over({{"j", 3}}))}),
                    kernel("first_two", {{"b", 4}}, 1, {},
                           {branch(less(var("b"), num(2)),
                                   {copy(at("y", {var("b"), var("j")}), at("x", {var("b"), var("j")}), over({{"j", 3}}))})})});
  HostTensor x = random_tensor("x", {4, 3}, 4);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want;
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 3; ++j) want.push_back(b < 2 ? x.values[b * 3 + j] : 7);
  expect_values(r.outputs.at("y"), want);
}

// =================================================================================================
// fill
// =================================================================================================

TEST(ExecutorFill, WritesEveryElementRoundedToTheBufferDtype) {
  auto p = program({output("ya", {3, 4}), output("yh", {5}), output("yn", {2})},
                   {kernel("fills", {{"b", 1}}, 1,
                           {buffer("a", {3, 4}, Scope::shared), buffer("h", {5}, Scope::register_file, DType::bf16),
                            buffer("n", {2}, Scope::register_file)},
                           {fill("a", 3.25), fill("h", 1.0 / 3.0), fill("n", -kInf),
                            copy(at("ya", {var("i"), var("j")}), at("a", {var("i"), var("j")}), over({{"i", 3}, {"j", 4}})),
                            copy(at("yh", {var("i")}), at("h", {var("i")}), over({{"i", 5}})),
                            copy(at("yn", {var("i")}), at("n", {var("i")}), over({{"i", 2}}))})});
  ExecutionResult r = execute_kernel_program(p, {});
  expect_values(r.outputs.at("ya"), std::vector<double>(12, 3.25));
  expect_values(r.outputs.at("yh"), std::vector<double>(5, round_bf16(1.0 / 3.0)));
  EXPECT_NE(round_bf16(1.0 / 3.0), round_f32(1.0 / 3.0));  // the bf16 rounding is visible
  expect_values(r.outputs.at("yn"), {-kInf, -kInf});
}

// =================================================================================================
// copy
// =================================================================================================

TEST(ExecutorCopy, RaggedTilesReadZeroOutOfBoundsAndSkipOutOfBoundsWrites) {
  // x[10, 13] in 8×8 tiles (a 2×2 grid): the tile reads 0 past x's edge; writes to y[10, 13] past
  // its edge are skipped, writes to the padded [16, 16] copy show the zeros.
  auto tile_index = [](const char* t, const char* i) { return var(t) * num(8) + var(i); };
  Domain tile = over({{"i", 8}, {"j", 8}});
  auto p = program({input("x", {10, 13}), output("y", {10, 13}), output("padded", {16, 16})},
                   {kernel("tiles", {{"ti", 2}, {"tj", 2}}, 1, {buffer("t", {8, 8}, Scope::shared)},
                           {copy(at("t", {var("i"), var("j")}), at("x", {tile_index("ti", "i"), tile_index("tj", "j")}), tile),
                            copy(at("y", {tile_index("ti", "i"), tile_index("tj", "j")}), at("t", {var("i"), var("j")}), tile),
                            copy(at("padded", {tile_index("ti", "i"), tile_index("tj", "j")}), at("t", {var("i"), var("j")}), tile)})});
  HostTensor x = random_tensor("x", {10, 13}, 5);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  expect_values(r.outputs.at("y"), x.values);
  EXPECT_EQ(r.unwritten.at("y"), 0);
  std::vector<double> padded;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) padded.push_back(i < 10 && j < 13 ? x.values[i * 13 + j] : 0.0);
  expect_values(r.outputs.at("padded"), padded);
}

TEST(ExecutorCopy, GuardSkipsPointsWhereItIsFalse) {
  Expr checkerboard = equal(mod(var("i") + var("j"), num(2)), num(0));
  auto p = program({input("x", {6, 7}), output("y", {6, 7})},
                   {kernel("init", {{"b", 1}}, 1, {}, {map(at("y", {var("i"), var("j")}), real(-1), over({{"i", 6}, {"j", 7}}))}),
                    kernel("guarded", {{"b", 1}}, 1, {},
                           {copy(at("y", {var("i"), var("j")}), at("x", {var("i"), var("j")}), over({{"i", 6}, {"j", 7}}, checkerboard))})});
  HostTensor x = random_tensor("x", {6, 7}, 6);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 7; ++j) want.push_back((i + j) % 2 == 0 ? x.values[i * 7 + j] : -1);
  expect_values(r.outputs.at("y"), want);
}

TEST(ExecutorCopy, StoreRoundsToTheDestinationDtype) {
  auto p = program({input("x", {32}), output("y", {32}, DType::bf16)},
                   {kernel("narrow", {{"b", 1}}, 1, {}, {copy(at("y", {var("i")}), at("x", {var("i")}), over({{"i", 32}}))})});
  HostTensor x = random_tensor("x", {32}, 7);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want;
  for (double v : x.values) want.push_back(round_bf16(v));
  expect_values(r.outputs.at("y"), want);
}

TEST(ExecutorCopy, BufferAccessOutOfBoundsIsAnError) {
  // Only globals may be accessed out of bounds; a buffer index past its end names the statement.
  auto p = program({input("x", {8}), output("y", {8})},
                   {kernel("overrun", {{"b", 1}}, 1, {buffer("t", {8}, Scope::shared)},
                           {copy(at("t", {var("i") + num(1)}), at("x", {var("i")}), over({{"i", 8}})),
                            copy(at("y", {var("i")}), at("t", {var("i")}), over({{"i", 8}}))})});
  try {
    execute_kernel_program(p, tensors({random_tensor("x", {8}, 8)}));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("kernel 'overrun'"), std::string::npos) << m;
    EXPECT_NE(m.find("statement 1 (copy)"), std::string::npos) << m;
    EXPECT_NE(m.find("out of the buffer's bounds"), std::string::npos) << m;
  }
}

// =================================================================================================
// map
// =================================================================================================

TEST(ExecutorMap, ReadsAGlobalAndABufferAndRoundsToBf16OnStore) {
  // y[b, j] = x[b, j] * w[j] + 0.5 with w staged in shared memory; y is bf16. The same value is
  // also stored into a bf16 register tile and copied to an f32 output: rounded at that store.
  Expr value = load("x", {var("b"), var("j")}) * load("ws", {var("j")}) + real(0.5);
  auto p = program({input("x", {4, 16}), input("w", {16}), output("y", {4, 16}, DType::bf16), output("z", {4, 16})},
                   {kernel("scale", {{"b", 4}}, 1,
                           {buffer("ws", {16}, Scope::shared), buffer("t", {16}, Scope::register_file, DType::bf16)},
                           {copy(at("ws", {var("j")}), at("w", {var("j")}), over({{"j", 16}})),
                            map(at("y", {var("b"), var("j")}), value, over({{"j", 16}})),
                            map(at("t", {var("j")}), value, over({{"j", 16}})),
                            copy(at("z", {var("b"), var("j")}), at("t", {var("j")}), over({{"j", 16}}))})});
  HostTensor x = random_tensor("x", {4, 16}, 9), w = random_tensor("w", {16}, 10);
  ExecutionResult r = execute_kernel_program(p, tensors({x, w}));
  std::vector<double> want;
  int rounded = 0;
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 16; ++j) {
      double f32 = round_f32(round_f32(x.values[b * 16 + j] * w.values[j]) + 0.5);
      want.push_back(round_bf16(f32));
      rounded += round_bf16(f32) != f32;
    }
  EXPECT_GT(rounded, 32);  // the data does exercise the rounding
  expect_values(r.outputs.at("y"), want);
  expect_values(r.outputs.at("z"), want);
}

TEST(ExecutorMap, SkipsOutOfBoundsGlobalWritesAtARaggedEdge) {
  // Two tiles of 8 over 13 elements; the load is guarded by a select, the store runs past the end.
  Expr i = var("t") * num(8) + var("i");
  Expr value = make_select(less(i, num(13)), load("x", {i}) * real(3), real(0));
  auto p = program({input("x", {13}), output("y", {13})},
                   {kernel("triple", {{"t", 2}}, 1, {}, {map(at("y", {i}), value, over({{"i", 8}}))})});
  HostTensor x = random_tensor("x", {13}, 11);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want;
  for (double v : x.values) want.push_back(round_f32(v * 3));
  expect_values(r.outputs.at("y"), want);
}

TEST(ExecutorMap, LoadOutOfBoundsNamesTheKernelAndStatement) {
  auto p = program({input("x", {4, 4}), output("y", {4})},
                   {kernel("overread", {{"b", 4}}, 1, {}, {map(at("y", {var("b")}), load("x", {var("b"), num(9)}))})});
  try {
    execute_kernel_program(p, tensors({random_tensor("x", {4, 4}, 12)}));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("kernel 'overread'"), std::string::npos) << m;
    EXPECT_NE(m.find("statement 1 (map)"), std::string::npos) << m;
  }
}

// =================================================================================================
// reduce: sum, max, min, prod
// =================================================================================================

struct ReduceCase {
  ReduceOp op;
  bool accumulate;
  bool where;
};

std::string reduce_case_name(const ::testing::TestParamInfo<ReduceCase>& info) {
  return std::string(reduce_op_name(info.param.op)) + (info.param.accumulate ? "_accumulate" : "_fresh") +
         (info.param.where ? "_where" : "");
}

class ExecutorReduce : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ExecutorReduce, CombinesTheReduceAxisWithTheMonoid) {
  // acc[i] (op)= x[i, n] over n < 24 (where n % 3 != 1); with accumulate, acc starts from init[i].
  const ReduceCase c = GetParam();
  const bool prod = c.op == ReduceOp::prod;
  ReduceNode reduce;
  reduce.op = c.op;
  reduce.domain = over({{"i", 4}});
  reduce.reduce_axes = {{"n", 24}};
  reduce.dst = at("acc", {var("i")});
  reduce.value = load("x", {var("i"), var("n")});
  if (c.where) reduce.where = not_equal(mod(var("n"), num(3)), num(1));
  reduce.accumulate = c.accumulate;
  Block body;
  if (c.accumulate) body.push_back(copy(at("acc", {var("i")}), at("init", {var("i")}), over({{"i", 4}})));
  body.push_back(make_stmt(std::move(reduce)));
  body.push_back(copy(at("y", {var("i")}), at("acc", {var("i")}), over({{"i", 4}})));
  auto p = program({input("x", {4, 24}), input("init", {4}), output("y", {4})},
                   {kernel("reduce", {{"b", 1}}, 1, {buffer("acc", {4}, Scope::register_file)}, body)});
  HostTensor x = prod ? random_tensor("x", {4, 24}, 12, 0.7, 1.4) : random_tensor("x", {4, 24}, 12);
  HostTensor init = prod ? random_tensor("init", {4}, 13, 0.5, 2) : random_tensor("init", {4}, 13);
  ExecutionResult r = execute_kernel_program(p, tensors({x, init}));

  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    double acc = c.accumulate ? init.values[i]
                 : c.op == ReduceOp::sum ? 0 : prod ? 1 : c.op == ReduceOp::max ? -kInf : kInf;
    for (int n = 0; n < 24; ++n) {
      if (c.where && n % 3 == 1) continue;
      double v = x.values[i * 24 + n];
      acc = c.op == ReduceOp::sum ? acc + v : prod ? acc * v : c.op == ReduceOp::max ? std::max(acc, v) : std::min(acc, v);
    }
    want.push_back(acc);
  }
  expect_values(r.outputs.at("y"), want, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Monoids, ExecutorReduce,
                         ::testing::Values(ReduceCase{ReduceOp::sum, false, false}, ReduceCase{ReduceOp::sum, true, false},
                                           ReduceCase{ReduceOp::sum, false, true}, ReduceCase{ReduceOp::sum, true, true},
                                           ReduceCase{ReduceOp::max, false, false}, ReduceCase{ReduceOp::max, true, false},
                                           ReduceCase{ReduceOp::max, false, true}, ReduceCase{ReduceOp::max, true, true},
                                           ReduceCase{ReduceOp::min, false, false}, ReduceCase{ReduceOp::min, true, false},
                                           ReduceCase{ReduceOp::min, false, true}, ReduceCase{ReduceOp::min, true, true},
                                           ReduceCase{ReduceOp::prod, false, false}, ReduceCase{ReduceOp::prod, true, false},
                                           ReduceCase{ReduceOp::prod, false, true}, ReduceCase{ReduceOp::prod, true, true}),
                         reduce_case_name);

TEST(ExecutorReduceGuard, PointsOutsideTheDomainGuardKeepTheirValue) {
  ReduceNode reduce;
  reduce.op = ReduceOp::sum;
  reduce.domain = over({{"i", 4}}, not_equal(var("i"), num(2)));
  reduce.reduce_axes = {{"n", 5}};
  reduce.dst = at("acc", {var("i")});
  reduce.value = load("x", {var("i"), var("n")});
  auto p = program({input("x", {4, 5}), output("y", {4})},
                   {kernel("guarded", {{"b", 1}}, 1, {buffer("acc", {4}, Scope::register_file)},
                           {fill("acc", 5), make_stmt(std::move(reduce)),
                            copy(at("y", {var("i")}), at("acc", {var("i")}), over({{"i", 4}}))})});
  HostTensor x = random_tensor("x", {4, 5}, 14);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int n = 0; n < 5; ++n) s += x.values[i * 5 + n];
    want.push_back(i == 2 ? 5 : s);
  }
  expect_values(r.outputs.at("y"), want, 1e-6);
}

// =================================================================================================
// reduce: argmax, argmin
// =================================================================================================

struct ArgCase {
  ReduceOp op;
  bool accumulate;
  bool where;
};

std::string arg_case_name(const ::testing::TestParamInfo<ArgCase>& info) {
  return std::string(reduce_op_name(info.param.op)) + (info.param.accumulate ? "_accumulate" : "_fresh") +
         (info.param.where ? "_where" : "");
}

class ExecutorArgReduce : public ::testing::TestWithParam<ArgCase> {};

// reduce argmax/argmin val[i], idx[i] <- index (base + n) over n < count of x[i, base + n].
Stmt arg_reduce(ReduceOp op, int base, int count, bool accumulate, bool where) {
  ReduceNode r;
  r.op = op;
  r.domain = over({{"i", 4}});
  r.reduce_axes = {{"n", count}};
  r.dst = at("val", {var("i")});
  r.index_dst = at("idx", {var("i")});
  r.value = load("x", {var("i"), num(base) + var("n")});
  r.index_value = num(base) + var("n");
  if (where) r.where = not_equal(mod(num(base) + var("n"), num(3)), num(1));
  r.accumulate = accumulate;
  return make_stmt(std::move(r));
}

TEST_P(ExecutorArgReduce, FindsTheWinnerAndItsIndex) {
  // Fresh: one reduce over all 24 columns. Accumulate: the first 12 columns, then the other 12
  // combined with the first result (the online form).
  const ArgCase c = GetParam();
  Block body;
  if (c.accumulate) {
    body.push_back(arg_reduce(c.op, 0, 12, false, c.where));
    body.push_back(arg_reduce(c.op, 12, 12, true, c.where));
  } else {
    body.push_back(arg_reduce(c.op, 0, 24, false, c.where));
  }
  body.push_back(copy(at("yv", {var("i")}), at("val", {var("i")}), over({{"i", 4}})));
  body.push_back(copy(at("yi", {var("i")}), at("idx", {var("i")}), over({{"i", 4}})));
  auto p = program({input("x", {4, 24}), output("yv", {4}), output("yi", {4})},
                   {kernel("arg", {{"b", 1}}, 1,
                           {buffer("val", {4}, Scope::register_file), buffer("idx", {4}, Scope::register_file)}, body)});
  HostTensor x = random_tensor("x", {4, 24}, 15);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want_value, want_index;
  for (int i = 0; i < 4; ++i) {
    int best = -1;
    for (int n = 0; n < 24; ++n) {
      if (c.where && n % 3 == 1) continue;
      double v = x.values[i * 24 + n];
      if (best < 0 || (c.op == ReduceOp::argmax ? v > x.values[i * 24 + best] : v < x.values[i * 24 + best])) best = n;
    }
    want_value.push_back(x.values[i * 24 + best]);
    want_index.push_back(best);
  }
  expect_values(r.outputs.at("yv"), want_value);
  expect_values(r.outputs.at("yi"), want_index);
}

INSTANTIATE_TEST_SUITE_P(ArgOps, ExecutorArgReduce,
                         ::testing::Values(ArgCase{ReduceOp::argmax, false, false}, ArgCase{ReduceOp::argmax, true, false},
                                           ArgCase{ReduceOp::argmax, false, true}, ArgCase{ReduceOp::argmax, true, true},
                                           ArgCase{ReduceOp::argmin, false, false}, ArgCase{ReduceOp::argmin, true, false},
                                           ArgCase{ReduceOp::argmin, false, true}, ArgCase{ReduceOp::argmin, true, true}),
                         arg_case_name);

TEST(ExecutorArgReduceTies, FirstIndexWinsATieAcrossAccumulatingSteps) {
  // Row [1, 3, 0, 3] in two steps of two columns: the 3 at index 1 beats the later 3 at index 3.
  auto p = program({input("x", {4, 24}), output("yv", {4}), output("yi", {4})},
                   {kernel("ties", {{"b", 1}}, 1,
                           {buffer("val", {4}, Scope::register_file), buffer("idx", {4}, Scope::register_file)},
                           {arg_reduce(ReduceOp::argmax, 0, 2, false, false), arg_reduce(ReduceOp::argmax, 2, 2, true, false),
                            copy(at("yv", {var("i")}), at("val", {var("i")}), over({{"i", 4}})),
                            copy(at("yi", {var("i")}), at("idx", {var("i")}), over({{"i", 4}}))})});
  HostTensor x{"x", {4, 24}, DType::f32, std::vector<double>(96, 0)};
  for (int i = 0; i < 4; ++i) {
    x.values[i * 24 + 0] = 1;
    x.values[i * 24 + 1] = 3;
    x.values[i * 24 + 3] = 3;
  }
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  expect_values(r.outputs.at("yv"), {3, 3, 3, 3});
  expect_values(r.outputs.at("yi"), {1, 1, 1, 1});
}

// =================================================================================================
// reduce: topk
// =================================================================================================

struct TopkCase {
  bool accumulate;
  bool where;
};

class ExecutorTopk : public ::testing::TestWithParam<TopkCase> {};

// reduce topk(3, rank r) val[i, r], idx[i, r] <- index (base + n) over n < count of x[i, base + n].
Stmt topk_reduce(int base, int count, bool accumulate, bool where) {
  ReduceNode r;
  r.op = ReduceOp::topk;
  r.k = 3;
  r.rank_var = "r";
  r.domain = over({{"i", 4}});
  r.reduce_axes = {{"n", count}};
  r.dst = at("val", {var("i"), var("r")});
  r.index_dst = at("idx", {var("i"), var("r")});
  r.value = load("x", {var("i"), num(base) + var("n")});
  r.index_value = num(base) + var("n");
  if (where) r.where = not_equal(mod(num(base) + var("n"), num(3)), num(1));
  r.accumulate = accumulate;
  return make_stmt(std::move(r));
}

TEST_P(ExecutorTopk, KeepsTheKLargestInDescendingOrderWithTheirIndices) {
  // Fresh: one reduce over 24 columns. Accumulate: start from (-inf, -1) and merge two halves.
  const TopkCase c = GetParam();
  Block body;
  if (c.accumulate) {
    body.push_back(fill("val", -kInf));
    body.push_back(fill("idx", -1));
    body.push_back(topk_reduce(0, 12, true, c.where));
    body.push_back(topk_reduce(12, 12, true, c.where));
  } else {
    body.push_back(topk_reduce(0, 24, false, c.where));
  }
  Domain all = over({{"i", 4}, {"r", 3}});
  body.push_back(copy(at("yv", {var("i"), var("r")}), at("val", {var("i"), var("r")}), all));
  body.push_back(copy(at("yi", {var("i"), var("r")}), at("idx", {var("i"), var("r")}), all));
  auto p = program({input("x", {4, 24}), output("yv", {4, 3}), output("yi", {4, 3})},
                   {kernel("topk", {{"b", 1}}, 1,
                           {buffer("val", {4, 3}, Scope::register_file), buffer("idx", {4, 3}, Scope::register_file)}, body)});
  HostTensor x = random_tensor("x", {4, 24}, 16);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want_value, want_index;
  for (int i = 0; i < 4; ++i) {
    std::vector<int> order;
    for (int n = 0; n < 24; ++n)
      if (!(c.where && n % 3 == 1)) order.push_back(n);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x.values[i * 24 + a] > x.values[i * 24 + b]; });
    for (int k = 0; k < 3; ++k) {
      want_value.push_back(x.values[i * 24 + order[k]]);
      want_index.push_back(order[k]);
    }
  }
  expect_values(r.outputs.at("yv"), want_value);
  expect_values(r.outputs.at("yi"), want_index);
}

INSTANTIATE_TEST_SUITE_P(Modes, ExecutorTopk,
                         ::testing::Values(TopkCase{false, false}, TopkCase{true, false}, TopkCase{false, true}, TopkCase{true, true}),
                         [](const ::testing::TestParamInfo<TopkCase>& info) {
                           return std::string(info.param.accumulate ? "accumulate" : "fresh") + (info.param.where ? "_where" : "");
                         });

// =================================================================================================
// contract
// =================================================================================================

struct GemmCase {
  bool trans_a, trans_b, accumulate;
};

class ExecutorGemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(ExecutorGemm, MultipliesWholeTilesWithTransposes) {
  // c[8, 12] (+)= a · b with K = 16; a is stored [16, 8] when transposed, b [12, 16].
  const GemmCase g = GetParam();
  const int M = 8, N = 12, K = 16;
  std::vector<int64_t> a_shape = g.trans_a ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K};
  std::vector<int64_t> b_shape = g.trans_b ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
  Block body{copy(at("sa", {var("i"), var("j")}), at("a", {var("i"), var("j")}), over({{"i", a_shape[0]}, {"j", a_shape[1]}})),
             copy(at("rb", {var("i"), var("j")}), at("b", {var("i"), var("j")}), over({{"i", b_shape[0]}, {"j", b_shape[1]}}))};
  if (g.accumulate) body.push_back(copy(at("c", {var("i"), var("j")}), at("c0", {var("i"), var("j")}), over({{"i", M}, {"j", N}})));
  body.push_back(contract_tiles("c", M, N, K, "sa", "rb", g.trans_a, g.trans_b, g.accumulate));
  body.push_back(copy(at("y", {var("i"), var("j")}), at("c", {var("i"), var("j")}), over({{"i", M}, {"j", N}})));
  auto p = program({input("a", a_shape), input("b", b_shape), input("c0", {M, N}), output("y", {M, N})},
                   {kernel("gemm", {{"b", 1}}, 1,
                           {buffer("sa", a_shape, Scope::shared), buffer("rb", b_shape, Scope::register_file),
                            buffer("c", {M, N}, Scope::register_file)},
                           body)});
  HostTensor a = random_tensor("a", a_shape, 17), b = random_tensor("b", b_shape, 18), c0 = random_tensor("c0", {M, N}, 19);
  ExecutionResult r = execute_kernel_program(p, tensors({a, b, c0}));
  const HostTensor& y = r.outputs.at("y");
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = g.accumulate ? c0.values[i * N + j] : 0, magnitude = std::abs(want);
      for (int k = 0; k < K; ++k) {
        double x = g.trans_a ? a.values[k * M + i] : a.values[i * K + k];
        double z = g.trans_b ? b.values[j * K + k] : b.values[k * N + j];
        want += x * z;
        magnitude += std::abs(x * z);
      }
      EXPECT_NEAR(y.values[i * N + j], want, 2 * K * 0x1.0p-24 * magnitude) << "c[" << i << ", " << j << "]";
    }
}

INSTANTIATE_TEST_SUITE_P(Transposes, ExecutorGemm,
                         ::testing::Values(GemmCase{false, false, false}, GemmCase{false, true, false}, GemmCase{true, false, false},
                                           GemmCase{true, true, false}, GemmCase{false, false, true}, GemmCase{false, true, true},
                                           GemmCase{true, false, true}, GemmCase{true, true, true}),
                         [](const ::testing::TestParamInfo<GemmCase>& info) {
                           return std::string(info.param.trans_a ? "At" : "A") + (info.param.trans_b ? "Bt" : "B") +
                                  (info.param.accumulate ? "_accumulate" : "");
                         });

TEST(ExecutorPairedContract, ComputesBothProductsAndTheirEpilogue) {
  // y[i, j] = (Σ_k a·b2)[i, j] · silu((Σ_k a·b1)[i, j]): a paired (dual-B) contract whose epilogue reads
  // the value (a·b2) and the pair value (a·b1), both unscaled f32 sums of bf16-rounded products.
  const int M = 8, N = 12, K = 16;
  ContractNode n = *contract_tiles("y", M, N, K, "a", "b2", false, false, false, MmaType::bf16).as<ContractNode>();
  n.pair_terms = {ContractTerm{load("a", {var("i"), var("k")}), load("b1", {var("k"), var("j")})}};
  n.value = "up_value";
  n.pair_value = "gate_value";
  n.epilogue = make_unary(UnaryOp::silu, load("gate_value", {num(0)})) * load("up_value", {num(0)});
  auto p = program({input("a", {M, K}), input("b1", {K, N}), input("b2", {K, N}), output("y", {M, N})},
                   {kernel("paired", {{"b", 1}}, 1,
                           {buffer("up_value", {1}, Scope::register_file), buffer("gate_value", {1}, Scope::register_file)},
                           {make_stmt(std::move(n))})});
  verify_kernel_program(p);
  HostTensor a = random_tensor("a", {M, K}, 21), b1 = random_tensor("b1", {K, N}, 22), b2 = random_tensor("b2", {K, N}, 23);
  ExecutionResult r = execute_kernel_program(p, tensors({a, b1, b2}));
  const HostTensor& y = r.outputs.at("y");
  auto bf16 = [](double v) { return round_to_mma_type(v, MmaType::bf16); };
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double gate = 0, up = 0, magnitude = 0;
      for (int k = 0; k < K; ++k) {
        gate += bf16(a.values[i * K + k]) * bf16(b1.values[k * N + j]);
        up += bf16(a.values[i * K + k]) * bf16(b2.values[k * N + j]);
        magnitude += std::abs(bf16(a.values[i * K + k]) * bf16(b2.values[k * N + j]));
      }
      const double want = gate / (1 + std::exp(-gate)) * up;
      EXPECT_NEAR(y.values[i * N + j], want, 4 * K * 0x1.0p-24 * (magnitude + std::abs(want)) + 1e-6) << "y[" << i << ", " << j << "]";
    }
}

// =================================================================================================
// Cluster collectives, for cluster sizes 2, 4, 8 and 16
// =================================================================================================
//
// The kernel's grid is (row < 2, blk < 2C) with clusters of C: four clusters. Every block copies
// its slice x[row, blk, :] into `src`, runs the collective(s), and writes `dst` to y[row, blk, :].
// A block's rank is blk % C; its cluster's first block is blk - rank.

KernelProgram cluster_program(int C, int64_t n_in, int64_t n_out, std::vector<Buffer> buffers, Block collective,
                              const std::string& src = "src", const std::string& dst = "dst") {
  Block body{copy(at(src, {var("i")}), at("x", {var("row"), var("blk"), var("i")}), over({{"i", n_in}}))};
  for (auto& s : collective) body.push_back(s);
  body.push_back(copy(at("y", {var("row"), var("blk"), var("i")}), at(dst, {var("i")}), over({{"i", n_out}})));
  return program({input("x", {2, 2 * C, n_in}), output("y", {2, 2 * C, n_out})},
                 {kernel("collective", {{"row", 2}, {"blk", 2 * C}}, C, std::move(buffers), std::move(body))});
}

HostTensor cluster_input(int C, int64_t n_in, uint64_t seed, double lo = -1, double hi = 1) {
  return random_tensor("x", {2, 2 * C, n_in}, seed, lo, hi);
}

// Checks y[row, blk, i] == want(x_of, rank, i) for every block, where x_of(r, j) is element j of
// the slice of the block of rank r in the same cluster.
void expect_cluster_values(const HostTensor& y, const HostTensor& x, int C,
                           const std::function<double(const std::function<double(int, int64_t)>&, int, int64_t)>& want,
                           double tolerance) {
  const int64_t n_in = x.shape[2], n_out = y.shape[2];
  std::vector<double> expected;
  for (int row = 0; row < 2; ++row)
    for (int blk = 0; blk < 2 * C; ++blk) {
      int rank = blk % C, first = blk - rank;
      auto x_of = [&](int r, int64_t j) { return x.values[(row * 2 * C + first + r) * n_in + j]; };
      for (int64_t i = 0; i < n_out; ++i) expected.push_back(want(x_of, rank, i));
    }
  expect_values(y, expected, tolerance);
}

double combine(ReduceOp op, double a, double b) {
  return op == ReduceOp::sum ? a + b : op == ReduceOp::max ? std::max(a, b) : std::min(a, b);
}

class ClusterCollectives : public ::testing::TestWithParam<int> {};

void check_cluster_reduce(int C, ReduceOp op, ExecutionResult* result, const HostTensor& x) {
  expect_cluster_values(result->outputs.at("y"), x, C, [&](auto& x_of, int, int64_t i) {
    double acc = x_of(0, i);
    for (int r = 1; r < C; ++r) acc = combine(op, acc, x_of(r, i));
    return acc;
  }, 1e-5);
}

TEST_P(ClusterCollectives, ClusterReduceSum) {
  const int C = GetParam();
  auto p = cluster_program(C, 6, 6, {buffer("buf", {6}, Scope::cluster)}, {cluster_reduce(ReduceOp::sum, "buf")}, "buf", "buf");
  HostTensor x = cluster_input(C, 6, 100 + C);
  RUN_OR_SKIP(r, p, tensors({x}));
  check_cluster_reduce(C, ReduceOp::sum, &r, x);
}

TEST_P(ClusterCollectives, ClusterReduceMax) {
  const int C = GetParam();
  auto p = cluster_program(C, 6, 6, {buffer("buf", {6}, Scope::cluster)}, {cluster_reduce(ReduceOp::max, "buf")}, "buf", "buf");
  HostTensor x = cluster_input(C, 6, 110 + C);
  RUN_OR_SKIP(r, p, tensors({x}));
  check_cluster_reduce(C, ReduceOp::max, &r, x);
}

TEST_P(ClusterCollectives, ClusterReduceMin) {
  const int C = GetParam();
  auto p = cluster_program(C, 6, 6, {buffer("buf", {6}, Scope::cluster)}, {cluster_reduce(ReduceOp::min, "buf")}, "buf", "buf");
  HostTensor x = cluster_input(C, 6, 120 + C);
  RUN_OR_SKIP(r, p, tensors({x}));
  check_cluster_reduce(C, ReduceOp::min, &r, x);
}

TEST_P(ClusterCollectives, ClusterGatherConcatenatesByRank) {
  // dst[r * 3 + i] = src of rank r, element i, in every block.
  const int C = GetParam();
  auto p = cluster_program(C, 3, 3 * C, {buffer("src", {3}, Scope::cluster), buffer("dst", {3 * C}, Scope::shared)},
                           {cluster_gather("src", "dst")});
  HostTensor x = cluster_input(C, 3, 130 + C);
  RUN_OR_SKIP(r, p, tensors({x}));
  expect_cluster_values(r.outputs.at("y"), x, C, [](auto& x_of, int, int64_t i) { return x_of(static_cast<int>(i / 3), i % 3); }, 0);
}

void check_reduce_scatter(int C, ReduceOp op, ExecutionResult* result, const HostTensor& x) {
  // Block r's dst[i] = op over s of src_s[r * 3 + i].
  expect_cluster_values(result->outputs.at("y"), x, C, [&](auto& x_of, int rank, int64_t i) {
    double acc = x_of(0, rank * 3 + i);
    for (int s = 1; s < C; ++s) acc = combine(op, acc, x_of(s, rank * 3 + i));
    return acc;
  }, 1e-5);
}

KernelProgram reduce_scatter_program(int C, ReduceOp op) {
  return cluster_program(C, 3 * C, 3, {buffer("src", {3 * C}, Scope::cluster), buffer("dst", {3}, Scope::cluster)},
                         {reduce_scatter(op, "src", "dst")});
}

TEST_P(ClusterCollectives, ReduceScatterSum) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 3 * C, 140 + C);
  RUN_OR_SKIP(r, reduce_scatter_program(C, ReduceOp::sum), tensors({x}));
  check_reduce_scatter(C, ReduceOp::sum, &r, x);
}

TEST_P(ClusterCollectives, ReduceScatterMax) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 3 * C, 150 + C);
  RUN_OR_SKIP(r, reduce_scatter_program(C, ReduceOp::max), tensors({x}));
  check_reduce_scatter(C, ReduceOp::max, &r, x);
}

TEST_P(ClusterCollectives, ReduceScatterMin) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 3 * C, 160 + C);
  RUN_OR_SKIP(r, reduce_scatter_program(C, ReduceOp::min), tensors({x}));
  check_reduce_scatter(C, ReduceOp::min, &r, x);
}

// The group rank g of a block receives the src of group rank (g - 1 + G) mod G.
void check_shuffle(int C, int G, ExecutionResult* result, const HostTensor& x, int steps = 1) {
  expect_cluster_values(result->outputs.at("y"), x, C, [&](auto& x_of, int rank, int64_t i) {
    int first = rank / G * G, g = rank - first;
    return x_of(first + ((g - steps) % G + G) % G, i);
  }, 0);
}

KernelProgram shuffle_program(int C, int group) {
  return cluster_program(C, 5, 5, {buffer("src", {5}, Scope::cluster), buffer("dst", {5}, Scope::cluster)},
                         {dsm_shuffle("src", "dst", group)});
}

TEST_P(ClusterCollectives, DsmShuffleOverTheWholeCluster) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 5, 170 + C);
  RUN_OR_SKIP(r, shuffle_program(C, 0), tensors({x}));
  check_shuffle(C, C, &r, x);
}

TEST_P(ClusterCollectives, DsmShuffleWithGroupEqualToTheCluster) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 5, 175 + C);
  RUN_OR_SKIP(r, shuffle_program(C, C), tensors({x}));
  check_shuffle(C, C, &r, x);
}

TEST_P(ClusterCollectives, DsmShuffleWithinSmallerGroups) {
  const int C = GetParam(), G = C / 2;  // C = 2: groups of one block keep their own data
  HostTensor x = cluster_input(C, 5, 180 + C);
  RUN_OR_SKIP(r, shuffle_program(C, G), tensors({x}));
  check_shuffle(C, G, &r, x);
}

// Every block of each group of G ends with the sum (or product) over the group.
void check_all_exchange(int C, int G, bool multiply, ExecutionResult* result, const HostTensor& x) {
  expect_cluster_values(result->outputs.at("y"), x, C, [&](auto& x_of, int rank, int64_t i) {
    int first = rank / G * G;
    double acc = x_of(first, i);
    for (int r = first + 1; r < first + G; ++r) acc = multiply ? acc * x_of(r, i) : acc + x_of(r, i);
    return acc;
  }, 1e-5);
}

KernelProgram all_exchange_program(int C, bool multiply, int group) {
  return cluster_program(C, 4, 4, {buffer("buf", {4}, Scope::cluster)}, {all_exchange(multiply, "buf", group)}, "buf", "buf");
}

TEST_P(ClusterCollectives, AllExchangeAddOverTheWholeCluster) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 4, 190 + C);
  RUN_OR_SKIP(r, all_exchange_program(C, false, 0), tensors({x}));
  check_all_exchange(C, C, false, &r, x);
}

TEST_P(ClusterCollectives, AllExchangeMulOverTheWholeCluster) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 4, 200 + C, 0.8, 1.25);
  RUN_OR_SKIP(r, all_exchange_program(C, true, 0), tensors({x}));
  check_all_exchange(C, C, true, &r, x);
}

TEST_P(ClusterCollectives, AllExchangeAddWithinGroups) {
  const int C = GetParam(), G = C / 2;
  HostTensor x = cluster_input(C, 4, 210 + C);
  RUN_OR_SKIP(r, all_exchange_program(C, false, G), tensors({x}));
  check_all_exchange(C, G, false, &r, x);
}

TEST_P(ClusterCollectives, AllExchangeMulWithinGroups) {
  const int C = GetParam(), G = C / 2;
  HostTensor x = cluster_input(C, 4, 220 + C, 0.8, 1.25);
  RUN_OR_SKIP(r, all_exchange_program(C, true, G), tensors({x}));
  check_all_exchange(C, G, true, &r, x);
}

// Four clusters each cluster_reduce their slices; rank 0 of each adds its cluster's result into
// z[i] atomically. z is first set to the identity by a kernel of its own.
KernelProgram inter_cluster_program(int C, ReduceOp op) {
  double identity = op == ReduceOp::sum ? 0 : op == ReduceOp::max ? -kInf : kInf;
  Expr rank = mod(var("blk"), num(C));
  return program({input("x", {2, 2 * C, 6}), output("z", {6})},
                 {kernel("identity", {{"b", 1}}, 1, {}, {map(at("z", {var("i")}), real(identity), over({{"i", 6}}))}),
                  kernel("combine", {{"row", 2}, {"blk", 2 * C}}, C, {buffer("buf", {6}, Scope::cluster)},
                         {copy(at("buf", {var("i")}), at("x", {var("row"), var("blk"), var("i")}), over({{"i", 6}})),
                          cluster_reduce(op, "buf"),
                          branch(equal(rank, num(0)),
                                 {inter_cluster_reduce(op, at("z", {var("i")}), at("buf", {var("i")}), over({{"i", 6}}))})})});
}

void check_inter_cluster(int C, ReduceOp op, ExecutionResult* result, const HostTensor& x) {
  std::vector<double> want;
  for (int i = 0; i < 6; ++i) {
    double acc = x.values[i];
    for (int block = 1; block < 4 * C; ++block) acc = combine(op, acc, x.values[block * 6 + i]);
    want.push_back(acc);
  }
  expect_values(result->outputs.at("z"), want, 1e-5);
}

TEST_P(ClusterCollectives, InterClusterReduceSumFromSeveralClusters) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 6, 230 + C);
  RUN_OR_SKIP(r, inter_cluster_program(C, ReduceOp::sum), tensors({x}));
  check_inter_cluster(C, ReduceOp::sum, &r, x);
}

TEST_P(ClusterCollectives, InterClusterReduceMaxFromSeveralClusters) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 6, 240 + C);
  RUN_OR_SKIP(r, inter_cluster_program(C, ReduceOp::max), tensors({x}));
  check_inter_cluster(C, ReduceOp::max, &r, x);
}

TEST_P(ClusterCollectives, InterClusterReduceMinFromSeveralClusters) {
  const int C = GetParam();
  HostTensor x = cluster_input(C, 6, 250 + C);
  RUN_OR_SKIP(r, inter_cluster_program(C, ReduceOp::min), tensors({x}));
  check_inter_cluster(C, ReduceOp::min, &r, x);
}

TEST_P(ClusterCollectives, RepeatedShufflesInALoopRotateTheRing) {
  // 2C + 1 shuffles (each followed by copying dst back to src and a cluster barrier) rotate the
  // ring by one in total.
  const int C = GetParam();
  auto p = cluster_program(C, 5, 5, {buffer("src", {5}, Scope::cluster), buffer("dst", {5}, Scope::cluster)},
                           {loop("step", num(0), num(2 * C + 1),
                                 {dsm_shuffle("src", "dst", 0), copy(at("src", {var("i")}), at("dst", {var("i")}), over({{"i", 5}})),
                                  barrier(true)})});
  HostTensor x = cluster_input(C, 5, 260 + C);
  RUN_OR_SKIP(r, p, tensors({x}));
  check_shuffle(C, C, &r, x, 2 * C + 1);
}

TEST_P(ClusterCollectives, RepeatedReductionsInALoopMatchAStepByStepSimulation) {
  // 10 times: buf += x * (step + 1); buf = cluster sum of buf; buf = buf / C.
  const int C = GetParam(), steps = 10;
  Expr scaled = load("buf", {var("i")}) + load("x", {var("row"), var("blk"), var("i")}) * (var("step") + num(1));
  auto p = cluster_program(C, 4, 4, {buffer("buf", {4}, Scope::cluster)},
                           {loop("step", num(0), num(steps),
                                 {map(at("buf", {var("i")}), scaled, over({{"i", 4}})), cluster_reduce(ReduceOp::sum, "buf"),
                                  map(at("buf", {var("i")}), load("buf", {var("i")}) / real(C), over({{"i", 4}}))})},
                           "buf", "buf");
  HostTensor x = cluster_input(C, 4, 270 + C);
  RUN_OR_SKIP(r, p, tensors({x}));
  expect_cluster_values(r.outputs.at("y"), x, C, [&](auto& x_of, int, int64_t i) {
    std::vector<double> buf(C);
    for (int rank = 0; rank < C; ++rank) buf[rank] = x_of(rank, i);
    for (int step = 0; step < steps; ++step) {
      double sum = 0;
      for (int rank = 0; rank < C; ++rank) sum += buf[rank] + x_of(rank, i) * (step + 1);
      for (int rank = 0; rank < C; ++rank) buf[rank] = sum / C;
    }
    return buf[0];
  }, 1e-4);
}

TEST_P(ClusterCollectives, ClusterBarriersInALoopComplete) {
  // Block and cluster barriers do not change data; 20 rounds of them must neither hang nor fail.
  const int C = GetParam();
  auto p = cluster_program(C, 3, 3, {buffer("buf", {3}, Scope::cluster)},
                           {loop("step", num(0), num(20), {barrier(false), barrier(true)})}, "buf", "buf");
  HostTensor x = cluster_input(C, 3, 280 + C);
  RUN_OR_SKIP(r, p, tensors({x}));
  expect_values(r.outputs.at("y"), x.values);
}

// ---- max and min on special values --------------------------------------------------------------
//
// The rule (docs/kernel-ir.md, "Arithmetic"; PTX max.NaN / min.NaN, which the generated code and the device
// collectives use): a NaN operand gives NaN, and -0 orders below +0, so max(+0, -0) = +0 and
// min(+0, -0) = -0 in either order. The executor's results therefore do not depend on the rank order.

const double kSpecials[5] = {0.0, -0.0, kInf, -kInf, std::numeric_limits<double>::quiet_NaN()};

double rule_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0) return std::signbit(a) && std::signbit(b) ? -0.0 : 0.0;
  return a > b ? a : b;
}
double rule_min(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0) return std::signbit(a) || std::signbit(b) ? -0.0 : 0.0;
  return a < b ? a : b;
}

// Same value, bit for bit where it matters: NaN matches NaN, and +0 does not match -0.
void expect_same_values(const HostTensor& got, const std::vector<double>& want) {
  ASSERT_EQ(got.values.size(), want.size()) << got.name;
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.values[i], w = want[i];
    bool ok = std::isnan(w) ? std::isnan(g) : g == w && std::signbit(g) == std::signbit(w);
    if (!ok && reported++ < 5) ADD_FAILURE() << got.name << "[" << i << "] = " << g << ", expected " << w;
  }
}

// x[row, blk, i] for 25 elements per block: in row 0, rank 0 holds kSpecials[i / 5] and rank 1
// kSpecials[i % 5] (every ordered pair meets), ranks >= 2 kSpecials[(i + rank) % 5]; row 1 holds the same
// values with the rank order reversed (rank r gets row 0's values of rank C - 1 - r).
HostTensor special_input(int C, int64_t n_in) {
  HostTensor x{"x", {2, 2 * C, n_in}, DType::f32, {}};
  for (int row = 0; row < 2; ++row)
    for (int blk = 0; blk < 2 * C; ++blk) {
      int rank = row == 0 ? blk % C : C - 1 - blk % C;
      for (int64_t j = 0; j < n_in; ++j) {
        int i = static_cast<int>(j % 25);
        x.values.push_back(kSpecials[rank == 0 ? i / 5 : rank == 1 ? i % 5 : (i + rank) % 5]);
      }
    }
  return x;
}

TEST_P(ClusterCollectives, MaxAndMinPropagateNaNAndOrderSignedZerosWhateverTheRankOrder) {
  const int C = GetParam();
  HostTensor x = special_input(C, 25);
  HostTensor scattered = special_input(C, 25 * C);
  for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
    auto fold = [&](auto& x_of, int64_t i) {
      double acc = x_of(0, i);
      for (int r = 1; r < C; ++r) acc = op == ReduceOp::max ? rule_max(acc, x_of(r, i)) : rule_min(acc, x_of(r, i));
      return acc;
    };
    auto want = [&](const HostTensor& input, int64_t n_out, auto element) {
      std::vector<double> values;
      for (int row = 0; row < 2; ++row)
        for (int blk = 0; blk < 2 * C; ++blk) {
          const int64_t n_in = input.shape[2], first = blk - blk % C;
          auto x_of = [&](int r, int64_t j) { return input.values[(row * 2 * C + first + r) * n_in + j]; };
          for (int64_t i = 0; i < n_out; ++i) values.push_back(fold(x_of, element(blk % C, i)));
        }
      return values;
    };
    SCOPED_TRACE(reduce_op_name(op));
    auto all_reduce = cluster_program(C, 25, 25, {buffer("buf", {25}, Scope::cluster)}, {cluster_reduce(op, "buf")}, "buf", "buf");
    RUN_OR_SKIP(r, all_reduce, tensors({x}));
    std::vector<double> expected = want(x, 25, [](int, int64_t i) { return i; });
    expect_same_values(r.outputs.at("y"), expected);
    // Row 1 reverses the rank order: the same results.
    for (size_t i = 0; i < expected.size() / 2; ++i)
      ASSERT_EQ(std::signbit(expected[i]), std::signbit(expected[i + expected.size() / 2])) << i;

    auto scatter = cluster_program(C, 25 * C, 25, {buffer("src", {25 * C}, Scope::cluster), buffer("dst", {25}, Scope::cluster)},
                                   {reduce_scatter(op, "src", "dst")});
    RUN_OR_SKIP(s, scatter, tensors({scattered}));
    expect_same_values(s.outputs.at("y"), want(scattered, 25, [](int rank, int64_t i) { return rank * 25 + i; }));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ClusterCollectives, ::testing::Values(2, 4, 8, 16),
                         [](const ::testing::TestParamInfo<int>& info) { return "cluster" + std::to_string(info.param); });

TEST(ExecutorMaxMin, ReduceAndInterClusterReduceFollowTheRuleForSpecialValues) {
  // reduce max/min over n < 2 of x[i, n] = (kSpecials[i / 5], kSpecials[i % 5]); inter_cluster_reduce from two
  // blocks into z, which holds -inf / +inf (the identity) or, for i >= 25, a special value (a NaN in z stays).
  HostTensor x{"x", {30, 2}, DType::f32, {}}, init{"init", {30}, DType::f32, {}};
  for (int i = 0; i < 30; ++i) {
    x.values.push_back(i < 25 ? kSpecials[i / 5] : 0.5);
    x.values.push_back(i < 25 ? kSpecials[i % 5] : -0.5);
  }
  for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
    SCOPED_TRACE(reduce_op_name(op));
    auto rule = [&](double a, double b) { return op == ReduceOp::max ? rule_max(a, b) : rule_min(a, b); };
    init.values.clear();
    for (int i = 0; i < 30; ++i) init.values.push_back(i < 25 ? (op == ReduceOp::max ? -kInf : kInf) : kSpecials[i - 25]);
    ReduceNode reduce;
    reduce.op = op;
    reduce.domain = over({{"i", 30}});
    reduce.reduce_axes = {{"n", 2}};
    reduce.dst = at("acc", {var("i")});
    reduce.value = load("x", {var("i"), var("n")});
    auto p = program({input("x", {30, 2}), input("init", {30}), output("y", {30}), output("z", {30})},
                     {kernel("reduce", {{"b", 1}}, 1, {buffer("acc", {30}, Scope::register_file)},
                             {make_stmt(std::move(reduce)), copy(at("y", {var("i")}), at("acc", {var("i")}), over({{"i", 30}}))}),
                      kernel("init", {{"b", 1}}, 1, {}, {copy(at("z", {var("i")}), at("init", {var("i")}), over({{"i", 30}}))}),
                      kernel("combine", {{"b", 2}}, 1, {},
                             {inter_cluster_reduce(op, at("z", {var("i")}), at("x", {var("i"), var("b")}), over({{"i", 30}}))})});
    ExecutionResult r = execute_kernel_program(p, tensors({x, init}));
    std::vector<double> want_y, want_z;
    for (int i = 0; i < 30; ++i) {
      double a = x.values[i * 2], b = x.values[i * 2 + 1];
      want_y.push_back(rule(rule(op == ReduceOp::max ? -kInf : kInf, a), b));
      want_z.push_back(rule(rule(init.values[i], a), b));
    }
    expect_same_values(r.outputs.at("y"), want_y);
    expect_same_values(r.outputs.at("z"), want_z);
  }
}

TEST(ExecutorInterClusterReduce, EveryBlockContributesWithoutACluster) {
  // inter_cluster_reduce needs no cluster: each of 6 blocks adds its row of x into z.
  auto p = program({input("x", {6, 4}), output("z", {4})},
                   {kernel("zero", {{"b", 1}}, 1, {}, {map(at("z", {var("i")}), real(0), over({{"i", 4}}))}),
                    kernel("add", {{"b", 6}}, 1, {},
                           {inter_cluster_reduce(ReduceOp::sum, at("z", {var("i")}), at("x", {var("b"), var("i")}), over({{"i", 4}}))})});
  HostTensor x = random_tensor("x", {6, 4}, 290);
  ExecutionResult r = execute_kernel_program(p, tensors({x}));
  std::vector<double> want(4, 0);
  for (int b = 0; b < 6; ++b)
    for (int i = 0; i < 4; ++i) want[i] += x.values[b * 4 + i];
  expect_values(r.outputs.at("z"), want, 1e-5);
}

// =================================================================================================
// Queues
// =================================================================================================

TEST(ExecutorQueue, ProducerAndConsumerBlocksCarryTilesAndTags) {
  // Blocks 0 and 1 produce rows x[w * 16 + i, :] tagged with their row number; blocks 2 and 3
  // consume 16 tiles each and write 2 * tile to the row the tag names. Queue depth 2.
  const int rows_per_producer = 16;
  Expr row = var("w") * num(rows_per_producer) + var("i");
  Block producer{loop("i", num(0), num(rows_per_producer),
                      {map(at("tile", {var("j")}), load("x", {row, var("j")}), over({{"j", 8}})), queue_push("q", "tile", row)})};
  Block consumer{loop("i", num(0), num(rows_per_producer),
                      {queue_pop("q", "got", "item"),
                       map(at("y", {var("item"), var("j")}), load("got", {var("j")}) * real(2), over({{"j", 8}}))})};
  auto p = program({input("x", {32, 8}), output("y", {32, 8})},
                   {kernel("pipeline", {{"w", 4}}, 1,
                           {buffer("tile", {8}, Scope::register_file), buffer("got", {8}, Scope::shared),
                            buffer("q", {8}, Scope::queue, DType::f32, 2)},
                           {branch(less(var("w"), num(2)), producer, consumer)})});
  HostTensor x = random_tensor("x", {32, 8}, 300);
  RUN_OR_SKIP(r, p, tensors({x}));
  std::vector<double> want;
  for (double v : x.values) want.push_back(v * 2);
  expect_values(r.outputs.at("y"), want);
  EXPECT_EQ(r.unwritten.at("y"), 0);
}

TEST(ExecutorQueue, OneProducerOneConsumerIsFirstInFirstOut) {
  // The consumer records the tag of its i-th pop in order[i]: it must be i. Depth 1.
  auto p = program({output("order", {12})},
                   {kernel("fifo", {{"w", 2}}, 1,
                           {buffer("tile", {2}, Scope::register_file), buffer("q", {2}, Scope::queue, DType::f32, 1)},
                           {branch(equal(var("w"), num(0)),
                                   {loop("i", num(0), num(12), {fill("tile", 1), queue_push("q", "tile", var("i") * num(10))})},
                                   {loop("i", num(0), num(12),
                                         {queue_pop("q", "tile", "tag"), map(at("order", {var("i")}), var("tag"))})})})});
  RUN_OR_SKIP(r, p, {});
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) want.push_back(i * 10);
  expect_values(r.outputs.at("order"), want);
}

TEST(ExecutorQueue, PopRoundsToTheDestinationDtype) {
  auto p = program({input("x", {4}), output("y", {4})},
                   {kernel("narrow", {{"w", 2}}, 1,
                           {buffer("wide", {4}, Scope::register_file), buffer("narrow", {4}, Scope::register_file, DType::bf16),
                            buffer("q", {4}, Scope::queue, DType::f32, 1)},
                           {branch(equal(var("w"), num(0)),
                                   {copy(at("wide", {var("i")}), at("x", {var("i")}), over({{"i", 4}})), queue_push("q", "wide", num(0))},
                                   {queue_pop("q", "narrow", "tag"), copy(at("y", {var("i")}), at("narrow", {var("i")}), over({{"i", 4}}))})})});
  HostTensor x = random_tensor("x", {4}, 301);
  RUN_OR_SKIP(r, p, tensors({x}));
  std::vector<double> want;
  for (double v : x.values) want.push_back(round_bf16(v));
  expect_values(r.outputs.at("y"), want);
}

// =================================================================================================
// Global traffic counters
// =================================================================================================

TEST(ExecutorTraffic, CopyKernelsCountEveryElementInBytesOfItsDtype) {
  // Kernel 1 copies x[10, 13] (f32) to y (bf16) through ragged 8×8 tiles: the out-of-bounds reads
  // and writes at the edge are not traffic. Kernel 2 copies y to z (f32) in one block.
  auto tile_index = [](const char* t, const char* i) { return var(t) * num(8) + var(i); };
  Domain tile = over({{"i", 8}, {"j", 8}});
  Domain whole = over({{"i", 10}, {"j", 13}});
  auto p = program({input("x", {10, 13}), intermediate("y", {10, 13}, DType::bf16), output("z", {10, 13})},
                   {kernel("narrow", {{"ti", 2}, {"tj", 2}}, 1, {buffer("t", {8, 8}, Scope::shared)},
                           {copy(at("t", {var("i"), var("j")}), at("x", {tile_index("ti", "i"), tile_index("tj", "j")}), tile),
                            copy(at("y", {tile_index("ti", "i"), tile_index("tj", "j")}), at("t", {var("i"), var("j")}), tile)}),
                    kernel("widen", {{"b", 1}}, 1, {}, {copy(at("z", {var("i"), var("j")}), at("y", {var("i"), var("j")}), whole)})});
  ExecutionResult r = execute_kernel_program(p, tensors({random_tensor("x", {10, 13}, 310)}));
  ASSERT_EQ(r.traffic.size(), 2u);
  const KernelTraffic& narrow = r.traffic[0];
  EXPECT_EQ(narrow.kernel, "narrow");
  EXPECT_EQ(narrow.blocks, 4);
  EXPECT_EQ(narrow.bytes_read, 130 * 4);
  EXPECT_EQ(narrow.bytes_written, 130 * 2);
  EXPECT_EQ(narrow.read_by_tensor.at("x"), 130 * 4);
  EXPECT_EQ(narrow.written_by_tensor.at("y"), 130 * 2);
  const KernelTraffic& widen = r.traffic[1];
  EXPECT_EQ(widen.kernel, "widen");
  EXPECT_EQ(widen.blocks, 1);
  EXPECT_EQ(widen.bytes_read, 130 * 2);
  EXPECT_EQ(widen.bytes_written, 130 * 4);
}

// =================================================================================================
// Deadlocks: reported as an Error naming the kernel and the statement, never a hang
// =================================================================================================

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
}

TEST(ExecutorDeadlock, ClusterBarrierReachedOnlyByRankZero) {
  auto p = program({output("y", {4})},
                   {kernel("lonely_barrier", {{"b", 4}}, 2, {},
                           {branch(equal(mod(var("b"), num(2)), num(0)), {barrier(true)}),
                            map(at("y", {var("b")}), real(1))})});
  expect_mentions(deadlock_message(p), {"deadlock", "kernel 'lonely_barrier'", "statement 2 (barrier)"});
}

TEST(ExecutorDeadlock, BlocksOfAClusterReachDifferentCollectives) {
  auto p = program({output("y", {2})},
                   {kernel("split_collectives", {{"b", 2}}, 2, {buffer("buf", {1}, Scope::cluster)},
                           {fill("buf", 1),
                            branch(equal(var("b"), num(0)), {cluster_reduce(ReduceOp::sum, "buf")}, {all_exchange(false, "buf", 0)}),
                            copy(at("y", {var("b")}), at("buf", {num(0)}))})});
  expect_mentions(deadlock_message(p),
                  {"deadlock", "kernel 'split_collectives'", "statement 3 (cluster_reduce)", "statement 4 (all_exchange)"});
}

TEST(ExecutorDeadlock, OneRankRunsMoreCollectivesThanItsPeers) {
  // Rank 0 loops three times, rank 1 twice: rank 1 exits while rank 0 waits in its third round.
  auto p = program({output("y", {2})},
                   {kernel("uneven_loop", {{"b", 2}}, 2, {buffer("buf", {1}, Scope::cluster)},
                           {fill("buf", 1),
                            loop("i", num(0), num(3) - var("b"), {cluster_reduce(ReduceOp::max, "buf")}),
                            copy(at("y", {var("b")}), at("buf", {num(0)}))})});
  expect_mentions(deadlock_message(p), {"deadlock", "kernel 'uneven_loop'", "statement 3 (cluster_reduce)"});
}

TEST(ExecutorDeadlock, QueuePopWithoutAProducer) {
  auto p = program({output("y", {2})},
                   {kernel("starved", {{"b", 2}}, 1,
                           {buffer("t", {4}, Scope::register_file), buffer("q", {4}, Scope::queue, DType::f32, 2)},
                           {queue_pop("q", "t", "tag"), copy(at("y", {var("b")}), at("t", {num(0)}))})});
  expect_mentions(deadlock_message(p), {"deadlock", "kernel 'starved'", "statement 1 (queue_pop)", "queue 'q' empty"});
}

TEST(ExecutorDeadlock, QueuePushIntoAFullQueueThatNobodyPops) {
  auto p = program({output("y", {1})},
                   {kernel("flooded", {{"b", 1}}, 1,
                           {buffer("t", {4}, Scope::register_file), buffer("q", {4}, Scope::queue, DType::f32, 2)},
                           {fill("t", 1), loop("i", num(0), num(3), {queue_push("q", "t", var("i"))}),
                            map(at("y", {num(0)}), real(1))})});
  expect_mentions(deadlock_message(p), {"deadlock", "kernel 'flooded'", "statement 3 (queue_push)", "queue 'q' full"});
}

// =================================================================================================
// Former executor bugs, kept as regression tests
// =================================================================================================

TEST(ExecutorBug, OneClusterReduceIsNotReportedAsADeadlock) {
  auto p = cluster_program(2, 4, 4, {buffer("buf", {4}, Scope::cluster)}, {cluster_reduce(ReduceOp::sum, "buf")}, "buf", "buf");
  HostTensor x = cluster_input(2, 4, 400);
  for (int run = 0; run < 20; ++run) EXPECT_NO_THROW(execute_kernel_program(p, tensors({x}))) << "run " << run;
}

TEST(ExecutorBug, QueueHandOffIsNotReportedAsADeadlock) {
  auto p = program({output("y", {16})},
                   {kernel("handoff", {{"w", 2}}, 1,
                           {buffer("t", {4}, Scope::register_file), buffer("q", {4}, Scope::queue, DType::f32, 1)},
                           {branch(equal(var("w"), num(0)), {loop("i", num(0), num(16), {fill("t", 2), queue_push("q", "t", var("i"))})},
                                   {loop("i", num(0), num(16),
                                         {queue_pop("q", "t", "tag"), copy(at("y", {var("tag")}), at("t", {num(0)}))})})})});
  for (int run = 0; run < 20; ++run) EXPECT_NO_THROW(execute_kernel_program(p, {})) << "run " << run;
}

}  // namespace
}  // namespace solder
