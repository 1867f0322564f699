// The benchmarks' timing rule in one place: CUDA events around replays of a CUDA graph that holds
// `per_graph` launches, the median over the replays, per launch. Used by bench/gemm and bench/attention
// (bench/cluster/timing.h keeps its own variants, which also time single and stream launches).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace graph_timing {

inline void graph_timer_check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "graph timer: %s failed: %s\n", what, cudaGetErrorString(err));
  std::exit(3);
}

// Median time per launch in milliseconds. `launch(stream)` enqueues one launch on `stream`; it is captured
// `per_graph` times into one graph, which is replayed twice to warm up and then `replays` times, each
// replay between two events. The caller launches once outside the capture first when the launch sets
// kernel attributes or loads a module (neither may happen while capturing).
template <class Launch>
double graph_median_ms(cudaStream_t stream, int per_graph, int replays, Launch&& launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  graph_timer_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < per_graph; ++i) launch(stream);
  graph_timer_check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  graph_timer_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaEvent_t start, stop;
  graph_timer_check(cudaEventCreate(&start), "cudaEventCreate");
  graph_timer_check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 2; ++i) graph_timer_check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  std::vector<float> times;
  for (int i = 0; i < replays; ++i) {
    graph_timer_check(cudaEventRecord(start, stream), "cudaEventRecord");
    graph_timer_check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    graph_timer_check(cudaEventRecord(stop, stream), "cudaEventRecord");
    graph_timer_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    graph_timer_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms / per_graph);
  }
  std::sort(times.begin(), times.end());
  graph_timer_check(cudaEventDestroy(start), "cudaEventDestroy");
  graph_timer_check(cudaEventDestroy(stop), "cudaEventDestroy");
  graph_timer_check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  graph_timer_check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  return times.empty() ? 0.0 : times[times.size() / 2];
}

}  // namespace graph_timing
