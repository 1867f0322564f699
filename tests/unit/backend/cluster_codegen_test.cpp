// The CUDA code generator's cluster collectives (src/backend/cuda/kernel_writer_cluster.cpp): every
// collective statement becomes one call of the device library (device/solder/cluster) on the tiles, the
// kernel sets up one communicator over a mailbox in its dynamic shared memory and tears it down at its
// end, segments that are not whole 16-byte packets go through a padded scratch area, and the source
// compiles with nvcc for sm_90a (skipped without nvcc). That the results equal the executor's is checked
// on a GPU: tests/gpu/cluster/agreement_reference --generated.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "../../../device/solder/cluster/limits.cuh"
#include "../kernel_builders.h"
#include "../test_util.h"

namespace solder {
namespace {

using namespace kernel_builders;

// Every collective on one cluster of C blocks (grid blk < 2C): tiles of 3 elements (not whole packets)
// and of 8, f32 and bf16 (rounded after sums), groups of 2 where C allows.
KernelProgram all_collectives(int C) {
  const int G = C % 2 == 0 ? 2 : C;
  std::vector<Buffer> buffers = {
      buffer("sum3", {3}, Scope::cluster),          buffer("max8", {8}, Scope::cluster, DType::bf16),
      buffer("gather_src", {3}, Scope::cluster),    buffer("gather_dst", {3 * C}, Scope::shared),
      buffer("gather8_src", {8}, Scope::cluster),   buffer("gather8_dst", {8 * C}, Scope::shared),
      buffer("scatter_src", {3 * C}, Scope::cluster), buffer("scatter_dst", {3}, Scope::cluster, DType::bf16),
      buffer("shuffle_src", {5}, Scope::cluster),   buffer("shuffle_dst", {5}, Scope::cluster),
      buffer("exchange", {4}, Scope::cluster, DType::bf16)};
  Block body;
  for (auto& b : buffers)
    body.push_back(copy(at(b.name, {var("i")}), at("x", {var("blk"), var("i")}), over({{"i", b.elements()}})));
  body.push_back(cluster_reduce(ReduceOp::sum, "sum3"));
  body.push_back(cluster_reduce(ReduceOp::max, "max8"));
  body.push_back(cluster_gather("gather_src", "gather_dst"));
  body.push_back(cluster_gather("gather8_src", "gather8_dst"));
  body.push_back(reduce_scatter(ReduceOp::min, "scatter_src", "scatter_dst"));
  body.push_back(loop("step", num(0), num(3), {dsm_shuffle("shuffle_src", "shuffle_dst", G)}));
  body.push_back(all_exchange(true, "exchange", G));
  int64_t out = 0;
  for (auto& b : buffers) {
    body.push_back(copy(at("y", {var("blk"), num(out) + var("i")}), at(b.name, {var("i")}), over({{"i", b.elements()}})));
    out += b.elements();
  }
  KernelProgram p;
  p.name = "collectives";
  p.globals = {input("x", {2 * C, 8 * C}), output("y", {2 * C, out})};
  p.kernels = {kernel("collectives", {{"blk", 2 * C}}, C, buffers, body)};
  return p;
}

TEST(ClusterCodegen, EveryCollectiveCallsTheDeviceLibrary) {
  for (int C : {2, 3, 4, 16}) {
    GeneratedModule m = generate_cuda(all_collectives(C));
    const std::string& s = m.source;
    SCOPED_TRACE("C = " + std::to_string(C));
    EXPECT_NE(s.find("#include <solder/cluster/cluster.cuh>"), std::string::npos);
    EXPECT_NE(s.find("solder::cluster::communicator::setup(smem + "), std::string::npos);
    EXPECT_NE(s.find("comm.teardown();"), std::string::npos);
    // max8 (32 bytes) splits into whole 16-byte packets per rank only at C = 2: a reduce_channel; elsewhere the
    // communicator. sum3 (one packet) and exchange (one packet over groups of 2) never do.
    const std::string max8 = C == 2 ? "solder::cluster::cluster_reduce<solder::cluster::reduce_op::max>(channel_0, max8);"
                                    : "solder::cluster::cluster_reduce<solder::cluster::reduce_op::max>(comm, max8, 8);";
    EXPECT_NE(s.find(max8), std::string::npos) << max8 << "\n" << s;
    EXPECT_EQ(s.find("reduce_channel<2, 32, 256>::setup_unpublished(smem + ") != std::string::npos, C == 2);
    for (const char* call : {"solder::cluster::cluster_reduce<solder::cluster::reduce_op::sum>(comm, sum3, 4);",
                             "solder::cluster::cluster_gather(comm, gather_src, collective_scratch, 4);",
                             "solder::cluster::cluster_gather(comm, gather8_src, gather8_dst, 8);",
                             "solder::cluster::reduce_scatter<solder::cluster::reduce_op::min>(comm, collective_scratch, scatter_dst, 4);",
                             "solder::cluster::dsm_shuffle(comm, shuffle_src, shuffle_dst, 8, ",
                             "solder::cluster::all_exchange<solder::cluster::exchange_op::mul>(comm, exchange, 4, "})
      EXPECT_NE(s.find(call), std::string::npos) << call << "\n" << s;
    // One comment per collective names it; the hand-written DSM loops are gone.
    EXPECT_NE(s.find("// cluster_reduce(sum) sum3: "), std::string::npos);
    EXPECT_NE(s.find("// reduce_scatter(min) scatter_src -> scatter_dst: "), std::string::npos);
    EXPECT_EQ(s.find("map_shared_rank"), std::string::npos);
    // A bf16 destination of a product is rounded to bf16 after the call; a max of bf16 values is not.
    EXPECT_NE(s.find("exchange[e] = solder::round_bf16(exchange[e]);"), std::string::npos);
    EXPECT_EQ(s.find("max8[e] = solder::round_bf16(max8[e]);"), std::string::npos);
    // No static shared memory: the mailbox is part of the dynamic shared memory the launch declares.
    for (size_t at = s.find("__shared__"); at != std::string::npos; at = s.find("__shared__", at + 1))
      EXPECT_EQ(s.compare(at - 7, 7, "extern "), 0) << s.substr(at - 7, 60);
    ASSERT_EQ(m.kernels.size(), 1u);
    EXPECT_GE(m.kernels[0].shared_bytes, 272 + 2 * (C - 1) * 16);
    EXPECT_LE(m.kernels[0].shared_bytes, 227 * 1024);
  }
}

// The CUDA source of a kernel whose only collective is an all-reduce of `floats` f32 elements over C blocks.
std::string all_reduce_source(int64_t floats, int C) {
  std::vector<Buffer> buffers = {buffer("t", {floats}, Scope::cluster)};
  Block body;
  body.push_back(copy(at("t", {var("i")}), at("x", {var("blk"), var("i")}), over({{"i", floats}})));
  body.push_back(cluster_reduce(ReduceOp::sum, "t"));
  body.push_back(copy(at("y", {var("blk"), var("i")}), at("t", {var("i")}), over({{"i", floats}})));
  KernelProgram p;
  p.name = "all_reduce";
  p.globals = {input("x", {C, floats}), output("y", {C, floats})};
  p.kernels = {kernel("all_reduce", {{"blk", C}}, C, buffers, body)};
  return generate_cuda(p).source;
}

// The mailbox slot of that kernel, as the emitted comment states it (-1: no mailbox).
int64_t all_reduce_slot_bytes(int64_t floats, int C) {
  const std::string s = all_reduce_source(floats, C);
  const size_t end = s.find("-byte slots");
  if (end == std::string::npos) return -1;
  const size_t begin = s.rfind(' ', end) + 1;
  return std::stoll(s.substr(begin, end - begin));
}

// An all-reduce that goes through the communicator (its tile does not split into whole 16-byte packets per rank)
// of at most one_round_packets_per_thread packets per thread (2 x 256 threads: 8 KB) gets a slot that holds its
// whole tile, so that the device library reduces it in one round; a larger one gets a slot of 1/C of its tile
// (two rounds).
TEST(ClusterCodegen, SmallAllReducesGetASlotForTheWholeTile) {
  EXPECT_EQ(all_reduce_slot_bytes(4, 4), 16);
  EXPECT_EQ(all_reduce_slot_bytes(1028, 4), 4112);
  EXPECT_EQ(all_reduce_slot_bytes(2044, 4), 8176);
  EXPECT_EQ(all_reduce_slot_bytes(2052, 4), 2064);  // one packet over the limit: 1/4 of 8208 bytes, rounded up
  EXPECT_EQ(all_reduce_slot_bytes(4100, 4), 4112);  // 1/4 of 16400 bytes, rounded up to whole packets
  EXPECT_EQ(all_reduce_slot_bytes(2050, 2), 4112);  // 1/2 of 8208 bytes, rounded up
}

// An all-reduce whose tile splits into whole packets per rank goes through a reduce_channel compiled for its shape:
// no mailbox, one cluster barrier that publishes the channel and one at the end.
TEST(ClusterCodegen, AllReducesOfWholeSlicesGoThroughAReduceChannel) {
  for (auto [floats, C] : {std::pair<int64_t, int>{1024, 4}, {2048, 2}, {64, 16}, {12, 3}}) {
    SCOPED_TRACE(std::to_string(floats) + " floats over " + std::to_string(C) + " blocks");
    const std::string s = all_reduce_source(floats, C);
    EXPECT_EQ(all_reduce_slot_bytes(floats, C), -1);
    EXPECT_EQ(s.find("communicator::setup"), std::string::npos);
    const std::string shape = "solder::cluster::reduce_channel<" + std::to_string(C) + ", " + std::to_string(floats * 4) + ", 256>";
    EXPECT_NE(s.find("auto channel_0 = " + shape + "::setup_unpublished(smem + "), std::string::npos) << s;
    EXPECT_NE(s.find("solder::cluster::cluster_reduce<solder::cluster::reduce_op::sum>(channel_0, t__);"), std::string::npos) << s;
    const size_t first = s.find("solder::cluster::ptx::cluster_sync();");
    ASSERT_NE(first, std::string::npos);
    EXPECT_NE(s.find("solder::cluster::ptx::cluster_sync();", first + 1), std::string::npos);  // the teardown
  }
}

// The host-side check of a reduce_channel shape (device/solder/cluster/limits.cuh), which the code generator asks
// before it emits a channel: nullptr for a shape it serves, else a sentence naming what is wrong.
TEST(ClusterCodegen, ReduceChannelShapeCheckNamesWhatIsWrong) {
  using cluster::check_reduce_channel;
  EXPECT_EQ(check_reduce_channel(4, 4, 8192, 128), nullptr);
  EXPECT_EQ(check_reduce_channel(6, 3, 3072, 96), nullptr);
  EXPECT_EQ(check_reduce_channel(16, 2, 65536, 1024), nullptr);
  auto says = [](const char* why, const char* words) { return why != nullptr && std::string(why).find(words) != std::string::npos; };
  EXPECT_TRUE(says(check_reduce_channel(4, 4, 16, 256), "divisible by 16 x the group size"));
  EXPECT_TRUE(says(check_reduce_channel(4, 3, 3072, 256), "group size must divide the cluster size"));
  EXPECT_TRUE(says(check_reduce_channel(17, 1, 1024, 256), "at most 16"));
  EXPECT_TRUE(says(check_reduce_channel(4, 4, 1024, 100), "whole warps"));
  EXPECT_TRUE(says(check_reduce_channel(4, 4, 0, 256), "found 0 bytes"));
  EXPECT_TRUE(says(check_reduce_channel(2, 2, 128 * 1024, 256), "227 KB"));
  // The area: 64 bytes of barriers, then two stages of one slice per peer.
  EXPECT_EQ(cluster::reduce_channel_bytes(4, 8192), 64u + 2u * 3u * 2048u);
  EXPECT_EQ(cluster::reduce_channel_bytes(1, 8192), 64u);
}

// An all-reduce that a channel cannot serve says why in the generated code.
// The same for a gather_channel (device/solder/cluster/gather_channel.cuh).
TEST(ClusterCodegen, GatherChannelShapeCheckNamesWhatIsWrong) {
  using cluster::check_gather_channel;
  EXPECT_EQ(check_gather_channel(4, 1024, 128), nullptr);
  EXPECT_EQ(check_gather_channel(3, 1008, 96), nullptr);
  auto says = [](const char* why, const char* words) { return why != nullptr && std::string(why).find(words) != std::string::npos; };
  EXPECT_TRUE(says(check_gather_channel(4, 1000, 128), "whole 16-byte packets"));
  EXPECT_TRUE(says(check_gather_channel(4, 0, 128), "whole 16-byte packets"));
  EXPECT_TRUE(says(check_gather_channel(4, 1024, 48), "whole warps"));
  EXPECT_TRUE(says(check_gather_channel(0, 1024, 128), "at least 1"));
  EXPECT_TRUE(says(check_gather_channel(16, 8192, 128), "227 KB"));            // 64 + 30 x 8 KB
  EXPECT_TRUE(says(check_gather_channel(4, 16384, 128, 140 * 1024), "227 KB"));  // beside 140 KB of tiles
  EXPECT_EQ(cluster::gather_channel_bytes(4, 1024), 64u + 2u * 3u * 1024u);
}

TEST(ClusterCodegen, AnAllReduceWithoutAChannelSaysWhy) {
  const std::string s = all_reduce_source(4, 4);  // one 16-byte packet over 4 ranks
  EXPECT_NE(s.find("// through the communicator, no reduce_channel: reduce_channel needs tile bytes divisible by 16 x the group "
                   "size (whole 16-byte packets in every slice) (tile of 16 bytes, groups of 4)"),
            std::string::npos)
      << s;
}

// Two all-reduces of 80 KB tiles over 2 blocks: each channel alone fits (80 + 80 KB), but both beside both tiles
// (160 KB of tiles + 160 KB of areas) do not, so the kernel takes the communicator for both, and says so.
TEST(ClusterCodegen, ChannelsThatDoNotFitFallBackToTheCommunicator) {
  constexpr int64_t floats = 20480;  // 80 KB
  std::vector<Buffer> buffers = {buffer("a", {floats}, Scope::cluster), buffer("b", {floats}, Scope::cluster)};
  Block body;
  for (const char* name : {"a", "b"})
    body.push_back(copy(at(name, {var("i")}), at("x", {var("blk"), var("i")}), over({{"i", floats}})));
  body.push_back(cluster_reduce(ReduceOp::sum, "a"));
  body.push_back(cluster_reduce(ReduceOp::max, "b"));
  for (const char* name : {"a", "b"})
    body.push_back(copy(at("y", {var("blk"), var("i")}), at(name, {var("i")}), over({{"i", floats}})));
  KernelProgram p;
  p.name = "two_all_reduces";
  p.globals = {input("x", {2, floats}), output("y", {2, floats})};
  p.kernels = {kernel("two_all_reduces", {{"blk", 2}}, 2, buffers, body)};
  GeneratedModule m = generate_cuda(p);
  EXPECT_EQ(m.source.find("reduce_channel<"), std::string::npos);
  EXPECT_NE(m.source.find("solder::cluster::cluster_reduce<solder::cluster::reduce_op::sum>(comm, a, 20480);"), std::string::npos);
  EXPECT_NE(m.source.find("solder::cluster::cluster_reduce<solder::cluster::reduce_op::max>(comm, b, 20480);"), std::string::npos);
  EXPECT_NE(m.source.find("the channels' areas do not fit in shared memory"), std::string::npos);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_LE(m.kernels[0].shared_bytes, 227 * 1024);
}

TEST(ClusterCodegen, KernelsWithoutCollectivesHaveNoMailbox) {
  KernelProgram p = all_collectives(2);
  Block body;
  for (auto& s : p.kernels[0].body)
    if (s.as<CopyNode>()) body.push_back(s);
  p.kernels[0].body = body;
  GeneratedModule m = generate_cuda(p);
  EXPECT_EQ(m.source.find("solder::cluster::"), std::string::npos);
  EXPECT_EQ(m.source.find("comm.teardown"), std::string::npos);
}

// Examples whose GPU plan splits a stream across the blocks of a cluster and merges through DSM
// (cluster_reduce max and sum, cluster_gather of top-k candidates; C = 2 and 3): the Kernel IR the CUDA
// backend gets verifies, calls the library, and computes the reference's values on the executor.
TEST(ClusterCodegen, ExamplesMergedThroughTheClusterVerifyOnTheExecutor) {
  struct Case {
    const char* example;
    std::vector<std::pair<std::string, int64_t>> dims;
  };
  for (const Case& c : {Case{"moe_routing", {{"T", 8}}}, Case{"variance", {{"BS", 128}}}, Case{"inertia", {{"BS", 128}}}}) {
    SCOPED_TRACE(c.example);
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + c.example + ".sol"));
    BoundProgram bound = bind_program(program, SizeChoice{false, c.dims});
    KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
    const std::string source = generate_cuda(kernels).source;
    EXPECT_TRUE(source.find("solder::cluster::communicator::setup") != std::string::npos ||
                source.find("solder::cluster::reduce_channel<") != std::string::npos);
    TensorSet inputs = make_inputs(bound, 21);
    ExecutionResult result = execute_kernel_program(kernels, inputs);
    TensorSet reference = run_reference(bound, inputs);
    for (const TensorInfo* out : bound.outputs()) {
      EXPECT_EQ(result.unwritten.at(out->name), 0) << out->name;
      OutputCheck check = compare_output(result.outputs.at(out->name), reference.at(out->name), tolerance_for(bound));
      EXPECT_TRUE(check.ok) << out->name << ": " << check.reason;
    }
  }
}

TEST(ClusterCodegen, CompilesWithNvccForSm90a) {
  std::string nvcc;
  for (const char* candidate : std::initializer_list<const char*>{std::getenv("CUDACXX"), "/usr/local/cuda/bin/nvcc"})
    if (candidate && std::filesystem::exists(candidate)) {
      nvcc = candidate;
      break;
    }
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX): the generated CUDA was not compiled";
  const std::string cuda_root = std::filesystem::path(nvcc).parent_path().parent_path().string();
  const std::string dir = ::testing::TempDir() + "/solder_cluster_codegen";
  std::filesystem::create_directories(dir);
  // C = 4: every collective through the communicator (C is a run-time value in the library); C = 2: max8 through a
  // reduce_channel beside the communicator.
  for (int C : {4, 2}) {
    const std::string path = dir + "/collectives" + std::to_string(C) + ".cu";
    std::ofstream(path) << generate_cuda(all_collectives(C)).source;
    std::string output;
    const std::string command = nvcc + " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" + std::string(SOLDER_SOURCE_DIR) +
                                "/device -I" + cuda_root + "/include/cccl -c " + path + " -o " + path + ".o";
    EXPECT_EQ(testing::run_command(command, &output), 0) << output;
  }
}

}  // namespace
}  // namespace solder
