// Host-side timing for the cluster benchmarks: CUDA events around CUDA-graph replays (per launch) or around
// single launches (in-kernel differences), median of several samples; and writing a result file.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../../tests/gpu/cluster/launch.h"

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over `samples` of the µs between CUDA events recorded on `stream` around body(), divided by `per`.
template <class Body>
static float median_event_us(cudaStream_t stream, int samples, int per, Body body) {
  cudaEvent_t begin, end;
  CLUSTER_CHECK_CUDA(cudaEventCreate(&begin));
  CLUSTER_CHECK_CUDA(cudaEventCreate(&end));
  std::vector<float> values;
  for (int s = 0; s < samples; ++s) {
    CLUSTER_CHECK_CUDA(cudaEventRecord(begin, stream));
    body();
    CLUSTER_CHECK_CUDA(cudaEventRecord(end, stream));
    CLUSTER_CHECK_CUDA(cudaEventSynchronize(end));
    float ms;
    CLUSTER_CHECK_CUDA(cudaEventElapsedTime(&ms, begin, end));
    values.push_back(ms * 1000.f / per);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return median(values);
}

// Median µs per launch: CUDA events around replays of a graph of `per_graph` launches.
template <class Launch>
static float per_launch_us(Launch launch, int per_graph = 20, int replays = 30) {
  cudaStream_t stream;
  CLUSTER_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CLUSTER_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < per_graph; ++i) CLUSTER_CHECK_CUDA(launch(stream));
  CLUSTER_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CLUSTER_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CLUSTER_CHECK_CUDA(cudaGraphLaunch(exec, stream));
  const float us = median_event_us(stream, replays, per_graph, [&] { CLUSTER_CHECK_CUDA(cudaGraphLaunch(exec, stream)); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return us;
}

// Median µs of one launch (events around it), after a warm-up.
template <class Launch>
static float single_launch_us(Launch launch, int repeats = 5) {
  CLUSTER_CHECK_CUDA(launch(nullptr));
  return median_event_us(nullptr, repeats, 1, [&] { CLUSTER_CHECK_CUDA(launch(nullptr)); });
}

// Median µs per launch the way ClusterFusion's microbenchmark times Table 1: `launches` back-to-back launches
// on one stream (no graph) after as many warm-up launches, CUDA events around them; median of `samples`. The
// launch must not set kernel attributes (launch_prepared_clusters), or the host, not the GPU, is timed.
template <class Launch>
static float stream_launch_us(Launch launch, int launches = 100, int samples = 7) {
  cudaStream_t stream;
  CLUSTER_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < launches; ++i) CLUSTER_CHECK_CUDA(launch(stream));
  const float us = median_event_us(stream, samples, launches, [&] {
    for (int i = 0; i < launches; ++i) CLUSTER_CHECK_CUDA(launch(stream));
  });
  cudaStreamDestroy(stream);
  return us;
}

// Writes `text` to `path` (nothing when the path is empty). On failure, says so on stderr, naming `program`, and
// returns false.
static bool write_result_file(const char* program, const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  FILE* f = std::fopen(path.c_str(), "w");
  bool ok = f && std::fputs(text.c_str(), f) >= 0;
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) std::fprintf(stderr, "%s: cannot write %s\n", program, path.c_str());
  return ok;
}
