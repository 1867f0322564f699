// Host-side timing for the cluster benchmarks: CUDA events around CUDA-graph replays (per launch) or around
// single launches (in-kernel differences), median of several samples.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "../../tests/gpu/cluster/launch.h"

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  cudaEvent_t begin, end;
  CLUSTER_CHECK_CUDA(cudaEventCreate(&begin));
  CLUSTER_CHECK_CUDA(cudaEventCreate(&end));
  for (int i = 0; i < 3; ++i) CLUSTER_CHECK_CUDA(cudaGraphLaunch(exec, stream));
  std::vector<float> samples;
  for (int i = 0; i < replays; ++i) {
    CLUSTER_CHECK_CUDA(cudaEventRecord(begin, stream));
    CLUSTER_CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CLUSTER_CHECK_CUDA(cudaEventRecord(end, stream));
    CLUSTER_CHECK_CUDA(cudaEventSynchronize(end));
    float ms;
    CLUSTER_CHECK_CUDA(cudaEventElapsedTime(&ms, begin, end));
    samples.push_back(ms * 1000.f / per_graph);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaStreamDestroy(stream);
  return median(samples);
}

// Median µs of one launch (events around it), after a warm-up.
template <class Launch>
static float single_launch_us(Launch launch, int repeats = 5) {
  cudaEvent_t begin, end;
  CLUSTER_CHECK_CUDA(cudaEventCreate(&begin));
  CLUSTER_CHECK_CUDA(cudaEventCreate(&end));
  CLUSTER_CHECK_CUDA(launch(nullptr));
  std::vector<float> samples;
  for (int i = 0; i < repeats; ++i) {
    CLUSTER_CHECK_CUDA(cudaEventRecord(begin));
    CLUSTER_CHECK_CUDA(launch(nullptr));
    CLUSTER_CHECK_CUDA(cudaEventRecord(end));
    CLUSTER_CHECK_CUDA(cudaEventSynchronize(end));
    float ms;
    CLUSTER_CHECK_CUDA(cudaEventElapsedTime(&ms, begin, end));
    samples.push_back(ms * 1000.f);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return median(samples);
}

// Median µs per launch the way ClusterFusion's microbenchmark times Table 1: `launches` back-to-back launches
// on one stream (no graph) after as many warm-up launches, CUDA events around them; median of `samples`. The
// launch must not set kernel attributes (launch_prepared_clusters), or the host, not the GPU, is timed.
template <class Launch>
static float stream_launch_us(Launch launch, int launches = 100, int samples = 7) {
  cudaStream_t stream;
  CLUSTER_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t begin, end;
  CLUSTER_CHECK_CUDA(cudaEventCreate(&begin));
  CLUSTER_CHECK_CUDA(cudaEventCreate(&end));
  for (int i = 0; i < launches; ++i) CLUSTER_CHECK_CUDA(launch(stream));
  std::vector<float> values;
  for (int s = 0; s < samples; ++s) {
    CLUSTER_CHECK_CUDA(cudaEventRecord(begin, stream));
    for (int i = 0; i < launches; ++i) CLUSTER_CHECK_CUDA(launch(stream));
    CLUSTER_CHECK_CUDA(cudaEventRecord(end, stream));
    CLUSTER_CHECK_CUDA(cudaEventSynchronize(end));
    float ms;
    CLUSTER_CHECK_CUDA(cudaEventElapsedTime(&ms, begin, end));
    values.push_back(ms * 1000.f / launches);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaStreamDestroy(stream);
  return median(values);
}
