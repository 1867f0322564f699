// The calibration sweep of the GEMM skeleton (bench/gemm/sweep_calibration.sh): shared by its main
// program (calib_sweep.cu) and the translation units that each instantiate one configuration
// (calib_config.cu, compiled once per configuration so that the instantiations compile in parallel).
//
// Operands as the gemm_chains suite (examples/ffn.sol, gated_ffn.sol) has them: f16, A stored [M, K]
// (K-major), B stored [K, N] (N-major, as `b[k, n]`); a bf16 output; persistent blocks (the SM count,
// capped by the tiles), as the generated kernels launch (src/backend/cuda/gemm_skeleton_writer.cpp).
#pragma once

#include <algorithm>
#include <vector>

#include "../../tests/gpu/gemm/gemm_test_util.h"
#include "../common/graph_timer.h"

namespace calib {

using gemm_test::Operand;

// One instantiated configuration: times D = A·B (B N-major) per launch in ms, fills `blocks` (the grid)
// and `out` (the bf16 output, M × N, row-major; the caller checks samples of it).
struct Entry {
  int bm, bn, stages;
  double (*time)(const Operand& a, const Operand& b, __nv_bfloat16* out, int replays, int* blocks);
};

std::vector<Entry>& registry();

// Median time per launch (ms) of `per_graph` launches captured in a CUDA graph (as bench_gemm.cu).
template <class C, class E>
double time_ms(const gemm_test::TensorMap& a, const gemm_test::TensorMap& b, const solder::gemm::GemmShape& shape,
               const E& epi, int per_graph, int replays, int persistent) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  gemm_test::launch<C>(a, b, shape, epi, stream, persistent);  // outside the capture (attributes, module load)
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const double ms =
      graph_timing::graph_median_ms(stream, per_graph, replays, [&](cudaStream_t s) { gemm_test::launch<C>(a, b, shape, epi, s, persistent); });
  CUDA_CHECK(cudaStreamDestroy(stream));
  return ms;
}

}  // namespace calib
