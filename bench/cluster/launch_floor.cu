// Where the per-launch floor of a clustered collective kernel goes (issue 6: the per-launch gather target).
//
// ClusterFusion's grid (32 clusters x 4 blocks x 128 threads, __cluster_dims__(4), <<<...>>>), kernels that add
// one ingredient of a collective kernel's setup and teardown at a time, each timed per launch over graph replays
// (20 launches per graph, median of 30) and over 100 back-to-back stream launches (median of 7):
//   empty            no code, no dynamic shared memory
//   smem             no code, 40 KB of dynamic shared memory (the largest gather kernel's)
//   sync1            one cluster barrier (barrier.cluster arrive.release + wait.acquire)
//   sync2            two cluster barriers (setup and teardown)
//   init+sync2       thread 0 initialises 4 mbarriers (+ fence.mbarrier_init) before the first cluster barrier
//   init+fill+sync2  and every thread writes a 1 KB tile between the barriers (the channel kernel with 0 calls)
//   split            as init+fill+sync2, but the setup barrier is split: arrive right after the init, the fill,
//                    then wait (the fill overlaps the barrier's latency)
//   store            init+fill+sync2 and block 0 of each cluster stores its tile to global memory
// Usage: launch_floor [--markdown FILE]
#include <cuda_fp16.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "../../tests/gpu/cluster/launch.h"
#include "collective_kernels.cuh"
#include "timing.h"

namespace {

constexpr unsigned clusters = 32, cluster_size = 4, threads = 128, smem_bytes = 40 * 1024;

enum variant : int { empty, smem, sync1, sync2, init_sync2, init_fill_sync2, split, store, variants };
const char* names[] = {"empty", "smem", "sync1", "sync2", "init+sync2", "init+fill+sync2", "split", "store"};

template <int V>
__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(128) floor_kernel(half* output) {
  extern __shared__ __align__(16) unsigned char area[];
  if constexpr (V == empty || V == smem) return;
  uint64_t* barriers = reinterpret_cast<uint64_t*>(area);
  half* tile = reinterpret_cast<half*>(area + 64);
  if constexpr (V >= init_sync2) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < 4; ++i) sc::ptx::barrier_init(&barriers[i], 1);
      sc::ptx::fence_barrier_init();
    }
  }
  if constexpr (V == split) {
    cuda::ptx::barrier_cluster_arrive(cuda::ptx::sem_release);
    fill_half(tile, 512, blockIdx.x);
    cuda::ptx::barrier_cluster_wait(cuda::ptx::sem_acquire);
  } else {
    sc::ptx::cluster_sync();
    if constexpr (V >= init_fill_sync2) fill_half(tile, 512, blockIdx.x);
  }
  if constexpr (V == store) {
    __syncthreads();
    if (sc::ptx::block_rank() == 0) copy_half(output + blockIdx.x * 512, tile, 512);
  }
  if constexpr (V != sync1) sc::ptx::cluster_sync();
}

template <int V>
void measure(half* output, float* graph_us, float* stream_us) {
  const size_t dynamic = V == empty ? 0 : smem_bytes;
  CLUSTER_CHECK_CUDA(cudaFuncSetAttribute(floor_kernel<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dynamic)));
  auto launch = [=](cudaStream_t stream) {
    floor_kernel<V><<<clusters * cluster_size, threads, dynamic, stream>>>(output);
    return cudaGetLastError();
  };
  CLUSTER_CHECK_CUDA(launch(nullptr));
  CLUSTER_CHECK_CUDA(cudaDeviceSynchronize());
  graph_us[V] = per_launch_us(launch);
  stream_us[V] = stream_launch_us(launch);
}

}  // namespace

int main(int argc, char** argv) {
  std::string markdown_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--markdown") && i + 1 < argc) {
      markdown_path = argv[++i];
    } else {
      std::fprintf(stderr, "launch_floor: unknown or incomplete option '%s'\nusage: launch_floor [--markdown FILE]\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CLUSTER_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  half* output;
  CLUSTER_CHECK_CUDA(cudaMalloc(&output, size_t(clusters) * cluster_size * 512 * sizeof(half)));
  float graph_us[variants], stream_us[variants];
  measure<empty>(output, graph_us, stream_us);
  measure<smem>(output, graph_us, stream_us);
  measure<sync1>(output, graph_us, stream_us);
  measure<sync2>(output, graph_us, stream_us);
  measure<init_sync2>(output, graph_us, stream_us);
  measure<init_fill_sync2>(output, graph_us, stream_us);
  measure<split>(output, graph_us, stream_us);
  measure<store>(output, graph_us, stream_us);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::string md = "# Launch floor of ClusterFusion's grid, on " + std::string(prop.name) + "\n\n" + date +
                   "; 32 clusters x 4 blocks x 128 threads, __cluster_dims__(4), <<<...>>>. Graph: replays of 20 "
                   "launches, median of 30. Stream: 100 back-to-back launches, median of 7.\n\n"
                   "| kernel | per launch, graph (µs) | per launch, stream (µs) |\n|---|---|---|\n";
  for (int v = 0; v < variants; ++v) {
    char line[160];
    std::snprintf(line, sizeof line, "| %s | %.2f | %.2f |\n", names[v], graph_us[v], stream_us[v]);
    md += line;
  }
  std::fputs(md.c_str(), stdout);
  return write_result_file("launch_floor", markdown_path, md) ? 0 : 1;
}
