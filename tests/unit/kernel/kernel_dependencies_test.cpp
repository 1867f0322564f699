// The kernels' global read/write sets, the dependencies between launches and their placement on
// streams (kernel_dependencies.h). The concurrent launches themselves run on the GPU (cuda_backend.cpp:
// `solder run --backend cuda` with and without SOLDER_CONCURRENT=0).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "kernel/kernel_dependencies.h"
#include "../kernel_builders.h"
#include "../test_util.h"

namespace solder {
namespace {

using namespace kernel_builders;
using Dependencies = std::vector<std::vector<size_t>>;

GlobalUse use(std::set<std::string> reads, std::set<std::string> writes, bool exclusive = false) {
  return GlobalUse{std::move(reads), std::move(writes), exclusive};
}

TEST(GlobalUse, LoadsAndStoresOfGlobalsNotBuffers) {
  KernelProgram program;
  program.globals = {input("a", {16}), input("idx", {16}), output("b", {16}), output("c", {16})};
  // tile = a[idx[i]]; b[i] = tile[i] + 1; c[i] += Σ tile  (c accumulates: read and written)
  Kernel k = kernel("k", {{"blk", 1}}, 1, {buffer("tile", {16}, Scope::shared)},
                    {copy(at("tile", {var("i")}), at("a", {load("idx", {var("i")})}), over({{"i", 16}})),
                     map(at("b", {var("i")}), binary(BinaryOp::add, load("tile", {var("i")}), real(1)), over({{"i", 16}})),
                     reduce_sum(at("c", {var("i")}), load("tile", {var("j")}), over({{"i", 16}}), {{"j", 16}}, true)});
  GlobalUse u = global_use(program, k);
  EXPECT_EQ(u.reads, (std::set<std::string>{"a", "c", "idx"}));
  EXPECT_EQ(u.writes, (std::set<std::string>{"b", "c"}));
  EXPECT_FALSE(u.exclusive);
}

TEST(GlobalUse, AKernelWithAQueueIsExclusive) {
  KernelProgram program;
  program.globals = {input("a", {16})};
  Kernel k = kernel("k", {{"blk", 2}}, 1, {buffer("t", {16}, Scope::shared), buffer("q", {16}, Scope::queue, DType::f32, 2)},
                    {copy(at("t", {var("i")}), at("a", {var("i")}), over({{"i", 16}})), queue_push("q", "t", num(0))});
  EXPECT_TRUE(global_use(program, k).exclusive);
}

TEST(KernelDependencies, ReadAfterWriteWriteAfterReadAndWriteAfterWrite) {
  // 0 writes g; 1 and 2 read g (independent of each other); 3 writes x, which 1 read; 4 writes out,
  // which 2 wrote; 5 reads only an input.
  std::vector<GlobalUse> launches = {use({"dy", "z"}, {"g"}), use({"g", "w", "x"}, {"dx"}), use({"g", "x"}, {"out"}),
                                     use({}, {"x"}), use({}, {"out"}), use({"w"}, {"other"})};
  EXPECT_EQ(kernel_dependencies(launches), (Dependencies{{}, {0}, {0}, {1, 2}, {2}, {}}));
}

TEST(KernelDependencies, ExclusiveLaunchesConflictWithEveryOther) {
  std::vector<GlobalUse> launches = {use({"a"}, {"b"}), use({"a"}, {"c"}, true), use({"a"}, {"d"})};
  EXPECT_EQ(kernel_dependencies(launches), (Dependencies{{}, {0}, {1}}));  // 0 and 2 only read a
}

TEST(ScheduleLaunches, AChainStaysOnOneStream) {
  LaunchSchedule s = schedule_launches({{}, {0}, {0, 1}, {2}}, 4);
  EXPECT_EQ(s.streams, 1);
  for (auto& step : s.steps) {
    EXPECT_EQ(step.stream, 0);
    EXPECT_TRUE(step.waits.empty());
  }
}

TEST(ScheduleLaunches, TwoBranchesForkAndJoin) {
  // g; dx and dw both after g; then a launch after both.
  LaunchSchedule s = schedule_launches({{}, {0}, {0}, {1, 2}}, 4);
  ASSERT_EQ(s.streams, 2);
  EXPECT_EQ(s.steps[0].stream, 0);
  EXPECT_EQ(s.steps[1].stream, 0);
  EXPECT_TRUE(s.steps[1].waits.empty());
  EXPECT_EQ(s.steps[2].stream, 1);
  EXPECT_EQ(s.steps[2].waits, (std::vector<size_t>{0}));  // g ran on stream 0
  EXPECT_EQ(s.steps[3].stream, 1);                         // after the latest of its dependencies
  EXPECT_EQ(s.steps[3].waits, (std::vector<size_t>{1}));
}

TEST(ScheduleLaunches, OneStreamIsTheSerialSchedule) {
  LaunchSchedule s = schedule_launches({{}, {0}, {0}, {1, 2}, {}}, 1);
  EXPECT_EQ(s.streams, 1);
  for (auto& step : s.steps) {
    EXPECT_EQ(step.stream, 0);
    EXPECT_TRUE(step.waits.empty());
  }
}

TEST(ScheduleLaunches, IndependentLaunchesBeyondTheStreamLimitShareTheEarliestStream) {
  LaunchSchedule s = schedule_launches({{}, {}, {}, {}}, 2);
  EXPECT_EQ(s.streams, 2);
  EXPECT_EQ(s.steps[0].stream, 0);
  EXPECT_EQ(s.steps[1].stream, 1);
  EXPECT_EQ(s.steps[2].stream, 0);
  EXPECT_EQ(s.steps[3].stream, 1);
  for (auto& step : s.steps) EXPECT_TRUE(step.waits.empty());
}

TEST(ScheduleLaunches, AWaitAlreadyImpliedByTheStreamIsLeftOut) {
  // 0 → 1 on stream 0; 2 independent on stream 1; 3 after 0 and 2: follows 2 on stream 1, waits for 0;
  // 4 after 0 and 3: follows 3, whose ancestor 0 is already done.
  LaunchSchedule s = schedule_launches({{}, {0}, {}, {0, 2}, {0, 3}}, 4);
  EXPECT_EQ(s.steps[3].stream, 1);
  EXPECT_EQ(s.steps[3].waits, (std::vector<size_t>{0}));
  EXPECT_EQ(s.steps[4].stream, 1);
  EXPECT_TRUE(s.steps[4].waits.empty());
}

// linear_relu_backward: g, then dx and dw, each reading g and neither the other's output: two branches.
TEST(KernelDependencies, LinearReluBackwardsTwoGemmsAreIndependent) {
  std::ifstream in(std::string(SOLDER_SOURCE_DIR) + "/examples/linear_relu_backward.sol");
  std::stringstream text;
  text << in.rdbuf();
  BoundProgram bound = testing::bind_text(text.str());
  GeneratedModule generated = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
  ASSERT_EQ(generated.kernels.size(), 3u);
  std::vector<GlobalUse> uses;
  for (auto& k : generated.kernels) uses.push_back(k.globals);
  EXPECT_EQ(uses[0].writes, (std::set<std::string>{"g"}));
  EXPECT_TRUE(uses[1].reads.count("g") && uses[2].reads.count("g"));
  const Dependencies dependencies = kernel_dependencies(uses);
  EXPECT_EQ(dependencies, (Dependencies{{}, {0}, {0}}));
  LaunchSchedule s = schedule_launches(dependencies, 4);
  EXPECT_EQ(s.streams, 2);
  EXPECT_EQ(s.steps[2].stream, 1);
  EXPECT_EQ(s.steps[2].waits, (std::vector<size_t>{0}));
}

}  // namespace
}  // namespace solder
