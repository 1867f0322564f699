// The device side of the runtime: the query (which must work, and explain itself, without a GPU), and
// on a Hopper GPU: clustered launches (2 and 16 blocks, portable and non-portable), dynamic shared memory
// above 48 KB, launch errors naming the kernel, device memory, and CUDA-graph capture and replay timed
// with events. The GPU tests skip, saying why, where query_device() finds no usable device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "ir/diagnostics.h"
#include "runtime/runtime.h"

namespace solder::runtime {
namespace {

namespace fs = std::filesystem;

TEST(RuntimeDevice, QueryNeverThrowsAndExplainsAMissingGpu) {
  DeviceInfo info;
  EXPECT_NO_THROW(info = query_device());
  if (info.available) {
    std::printf("device: %s, sm_%d%d, %d SMs, %lld MB L2, %lld GB, %d KB shared per block, driver %d\n",
                info.name.c_str(), info.major, info.minor, info.sm_count, (long long)(info.l2_bytes >> 20),
                (long long)(info.global_bytes >> 30), info.max_shared_per_block_optin / 1024, info.driver_version);
    EXPECT_GT(info.sm_count, 0);
    EXPECT_GT(info.global_bytes, 0);
    EXPECT_TRUE(info.why_unavailable.empty());
  } else {
    std::printf("no device: %s\n", info.why_unavailable.c_str());
    EXPECT_FALSE(info.why_unavailable.empty());
    EXPECT_FALSE(info.runs_sm90a());
    EXPECT_EQ(info.sm_count, 0);
  }
  EXPECT_EQ(info.max_cluster_portable, 8);
}

TEST(RuntimeDevice, NoGpuMeansClearErrorsNotCrashes) {
  setenv("SOLDER_NO_GPU", "1", 1);
  DeviceInfo info = query_device();
  EXPECT_FALSE(info.available);
  EXPECT_NE(info.why_unavailable.find("SOLDER_NO_GPU"), std::string::npos) << info.why_unavailable;
  try {
    DeviceBuffer buffer(1024);
    ADD_FAILURE() << "allocation without a GPU should throw";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no usable GPU"), std::string::npos) << e.message();
  }
  EXPECT_THROW(Stream(), Error);
  EXPECT_THROW(synchronize_device(), Error);
  EXPECT_THROW(Module(std::vector<char>{0x7f, 'E', 'L', 'F'}, "m"), Error);
  unsetenv("SOLDER_NO_GPU");
}

TEST(RuntimeDevice, LaunchDescriptionNamesEverything) {
  LaunchConfig config{{32, 1, 1}, {128, 1, 1}, {16, 1, 1}, 65536};
  EXPECT_EQ(describe_launch("attention_fused", config),
            "kernel 'attention_fused' (grid 32x1x1, block 128x1x1, cluster 16x1x1, dynamic shared memory 65536 bytes)");
}

// ---- On a Hopper GPU ------------------------------------------------------------------------------

// Each block records its blockIdx.x, its rank in the cluster, the cluster's size and — read through
// distributed shared memory — the rank written by the next block of its cluster.
const char* kClusterKernel = R"(
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void record_cluster_ranks(unsigned* out) {
  extern __shared__ unsigned shared[];
  cg::cluster_group cluster = cg::this_cluster();
  unsigned rank = cluster.block_rank();
  if (threadIdx.x == 0) shared[0] = rank;
  cluster.sync();
  if (threadIdx.x == 0) {
    unsigned* neighbour = cluster.map_shared_rank(shared, (rank + 1) % cluster.num_blocks());
    unsigned* row = out + 4 * blockIdx.x;
    row[0] = blockIdx.x;
    row[1] = rank;
    row[2] = cluster.num_blocks();
    row[3] = neighbour[0];
  }
  cluster.sync();  // no block leaves while its shared memory may still be read
}
extern "C" __global__ void add_one(unsigned* data, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1;
}
)";

class RuntimeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceInfo info = query_device();
    if (!info.available) GTEST_SKIP() << "no GPU: " << info.why_unavailable;
    if (!info.runs_sm90a()) GTEST_SKIP() << info.name << " is not sm_90 (Hopper)";
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << why;
    flags_.cache_dir = (fs::temp_directory_path() / "solder-gpu-test-cache").string();
    compiled_ = compile_cuda(kClusterKernel, "runtime_gpu_test.cu", flags_);
  }
  CompileFlags flags_;
  CompiledModule compiled_;
};

// Launches record_cluster_ranks on `blocks` blocks in clusters of `cluster` and checks every row.
void check_cluster_launch(const Module& module, unsigned blocks, unsigned cluster, unsigned shared_bytes) {
  Function kernel = module.get_function("record_cluster_ranks");
  DeviceBuffer out(4 * blocks * sizeof(unsigned));
  fill_u32(out.pointer(), 0xffffffffu, 4 * blocks);
  LaunchConfig config{{blocks, 1, 1}, {64, 1, 1}, {cluster, 1, 1}, shared_bytes};
  launch_with(kernel, config, out.pointer());
  synchronize_device();
  std::vector<unsigned> rows = out.download<unsigned>(4 * blocks);
  int wrong = 0;
  for (unsigned b = 0; b < blocks; ++b) {
    const unsigned* row = &rows[4 * b];
    bool ok = row[0] == b && row[1] == b % cluster && row[2] == cluster && row[3] == (b % cluster + 1) % cluster;
    if (!ok && wrong++ < 4)
      ADD_FAILURE() << "cluster " << cluster << ", block " << b << ": blockIdx " << row[0] << ", rank " << row[1]
                    << ", size " << row[2] << ", neighbour's rank " << row[3];
  }
  EXPECT_EQ(wrong, 0);
  std::printf("cluster %u: %u blocks, %u-byte dynamic shared memory: ranks and DSM reads correct\n", cluster, blocks,
              shared_bytes);
}

TEST_F(RuntimeGpu, ClusteredLaunchesOf2And16Blocks) {
  Module module(compiled_);
  check_cluster_launch(module, 64, 2, 4);
  check_cluster_launch(module, 64, 16, 4);  // non-portable: launch() sets the attribute
  check_cluster_launch(module, 32, 2, 100 * 1024);  // above 48 KB: launch() raises the limit
  FunctionInfo info = module.get_function("record_cluster_ranks").info();
  EXPECT_GT(info.registers, 0);
  EXPECT_GE(info.max_threads_per_block, 64);
}

TEST_F(RuntimeGpu, LaunchErrorsNameTheKernelAndConfiguration) {
  Module module(compiled_);
  Function kernel = module.get_function("record_cluster_ranks");
  DeviceBuffer out(4096);
  // Refused before the driver sees it: the grid is not a multiple of the cluster.
  try {
    launch_with(kernel, LaunchConfig{{30, 1, 1}, {64, 1, 1}, {16, 1, 1}, 4}, out.pointer());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("kernel 'record_cluster_ranks' (grid 30x1x1, block 64x1x1, cluster 16x1x1"),
              std::string::npos) << e.message();
    std::printf("%s\n", e.message().c_str());
  }
  // Refused by the driver: more dynamic shared memory than a block can have.
  try {
    launch_with(kernel, LaunchConfig{{2, 1, 1}, {64, 1, 1}, {2, 1, 1}, 300 * 1024}, out.pointer());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("CUDA_ERROR_"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("dynamic shared memory 307200 bytes"), std::string::npos) << e.message();
    std::printf("%s\n", e.message().c_str());
  }
  // An unknown kernel names the module.
  try {
    module.get_function("no_such_kernel");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no_such_kernel"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("runtime_gpu_test.cu"), std::string::npos) << e.message();
  }
  synchronize_device();  // the context is still usable
}

TEST_F(RuntimeGpu, GraphCaptureReplayAndEventTiming) {
  Module module(compiled_);
  Function add_one = module.get_function("add_one");
  const unsigned n = 1 << 20;
  DeviceBuffer data(n * sizeof(unsigned));
  fill_u32(data.pointer(), 0, n);
  Stream stream;
  const int launches_per_graph = 10;
  LaunchConfig config{{n / 256, 1, 1}, {256, 1, 1}, {1, 1, 1}, 0, stream.handle()};
  Graph graph = capture_graph(stream, [&] {
    for (int i = 0; i < launches_per_graph; ++i) launch_with(add_one, config, data.pointer(), n);
  });
  stream.synchronize();
  std::vector<unsigned> untouched = data.download<unsigned>(n);
  EXPECT_EQ(untouched[0], 0u) << "capture must not run the work";

  const int warmup = 2, replays = 5;
  ReplayTiming timing = time_replays(graph, stream, warmup, replays);
  std::vector<unsigned> values = data.download<unsigned>(n);
  unsigned expected = launches_per_graph * (warmup + replays);
  int wrong = 0;
  for (unsigned i = 0; i < n; ++i) wrong += values[i] != expected;
  EXPECT_EQ(wrong, 0) << "first value " << values[0] << ", expected " << expected;
  EXPECT_GT(timing.median_ms, 0.0);
  EXPECT_LE(timing.min_ms, timing.median_ms);
  EXPECT_LE(timing.median_ms, timing.max_ms);
  std::printf("graph of %d launches over %u words: median %.4f ms (min %.4f, max %.4f) over %d replays\n",
              launches_per_graph, n, timing.median_ms, timing.min_ms, timing.max_ms, timing.replays);

  // A failure inside the capture ends it and leaves the stream usable.
  EXPECT_THROW(capture_graph(stream, [&] { throw Error("planned failure"); }), Error);
  Event start, end;
  start.record(stream.handle());
  launch_with(add_one, config, data.pointer(), n);
  end.record(stream.handle());
  EXPECT_GE(elapsed_ms(start, end), 0.0f);
  EXPECT_EQ(data.download<unsigned>(1)[0], expected + 1);
}

// Two streams forked from a capturing stream and joined back (what cuda_backend.cpp's concurrent
// launches record): the graph holds both branches, and every replay runs each launch once, in order
// on its branch and after the join.
TEST_F(RuntimeGpu, GraphCaptureOfTwoStreamsForkedAndJoined) {
  Module module(compiled_);
  Function add_one = module.get_function("add_one");
  const unsigned n = 1 << 20;
  DeviceBuffer left(n * sizeof(unsigned)), right(n * sizeof(unsigned));
  fill_u32(left.pointer(), 0, n);
  fill_u32(right.pointer(), 0, n);
  Stream stream, side;
  Event fork, join;
  LaunchConfig on_main{{n / 256, 1, 1}, {256, 1, 1}, {1, 1, 1}, 0, stream.handle()};
  LaunchConfig on_side = on_main;
  on_side.stream = side.handle();
  Graph graph = capture_graph(stream, [&] {
    fork.record(stream.handle());
    wait_event(side.handle(), fork);
    for (int i = 0; i < 3; ++i) launch_with(add_one, on_main, left.pointer(), n);
    for (int i = 0; i < 2; ++i) launch_with(add_one, on_side, right.pointer(), n);
    join.record(side.handle());
    wait_event(stream.handle(), join);
    launch_with(add_one, on_main, right.pointer(), n);  // after both branches
  });
  const int replays = 4;
  for (int r = 0; r < replays; ++r) graph.launch(stream);
  stream.synchronize();
  std::vector<unsigned> l = left.download<unsigned>(n), r = right.download<unsigned>(n);
  int wrong = 0;
  for (unsigned i = 0; i < n; ++i) wrong += l[i] != 3u * replays || r[i] != 3u * replays;
  EXPECT_EQ(wrong, 0) << "left " << l[0] << ", right " << r[0] << ", expected " << 3 * replays;
}

}  // namespace
}  // namespace solder::runtime
