// Host-side launch helpers for clustered kernels (tests and benchmarks). Host-only: not a device header.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#define CLUSTER_CHECK_CUDA(call)                                                                      \
  do {                                                                                                \
    cudaError_t status_ = (call);                                                                     \
    if (status_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

// Sets the kernel attributes a cluster launch needs: the dynamic shared-memory limit and, for clusters of more
// than 8 blocks, cudaFuncAttributeNonPortableClusterSizeAllowed.
template <class Kernel>
cudaError_t prepare_cluster_kernel(Kernel kernel, unsigned cluster_size, size_t shared_bytes) {
  cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(shared_bytes));
  if (status != cudaSuccess) return status;
  if (cluster_size > 8) status = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  return status;
}

inline cudaLaunchConfig_t cluster_config(unsigned clusters, unsigned cluster_size, unsigned threads,
                                         size_t shared_bytes, cudaStream_t stream, cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(clusters * cluster_size, 1, 1);
  config.blockDim = dim3(threads, 1, 1);
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = cluster_size;
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

// Launches `clusters` clusters of `cluster_size` blocks of `threads` threads.
template <class Kernel, class... Args>
cudaError_t launch_clusters(Kernel kernel, unsigned clusters, unsigned cluster_size, unsigned threads,
                            size_t shared_bytes, cudaStream_t stream, Args... args) {
  cudaError_t status = prepare_cluster_kernel(kernel, cluster_size, shared_bytes);
  if (status != cudaSuccess) return status;
  cudaLaunchAttribute attribute;
  cudaLaunchConfig_t config = cluster_config(clusters, cluster_size, threads, shared_bytes, stream, &attribute);
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// As launch_clusters, without setting the kernel's attributes (call prepare_cluster_kernel once first): what a
// loop of back-to-back launches should time, with no host-side attribute calls between them.
template <class Kernel, class... Args>
cudaError_t launch_prepared_clusters(Kernel kernel, unsigned clusters, unsigned cluster_size, unsigned threads,
                                     size_t shared_bytes, cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attribute;
  cudaLaunchConfig_t config = cluster_config(clusters, cluster_size, threads, shared_bytes, stream, &attribute);
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// cudaOccupancyMaxActiveClusters for this kernel and configuration (0 when it cannot run).
template <class Kernel>
int max_active_clusters(Kernel kernel, unsigned cluster_size, unsigned threads, size_t shared_bytes) {
  if (prepare_cluster_kernel(kernel, cluster_size, shared_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  cudaLaunchAttribute attribute;
  cudaLaunchConfig_t config = cluster_config(cluster_size, cluster_size, threads, shared_bytes, nullptr, &attribute);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return clusters;
}

// Watchdog for a launch on the default stream: waits until its work has finished and returns true, or returns
// false once it has run for `limit` (a protocol bug shows up as a hang; the caller reports it and exits instead
// of waiting forever).
inline bool finished_within(std::chrono::seconds limit) {
  const auto started = std::chrono::steady_clock::now();
  while (cudaStreamQuery(nullptr) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() - started > limit) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}
