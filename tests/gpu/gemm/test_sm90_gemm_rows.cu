// Device test of the GEMM skeleton's row-reduction epilogue (device/solder/gemm/row_epilogue.cuh):
// logits = A·B (f32 accumulator, never stored), then per row softmax (max, Σ exp, divide) and the top-K
// of the probabilities, descending, ties to the lower expert — moe_routing's router as the code
// generator writes it — against a float64 host reference of the rounded operands. Cases: E = 64, 128
// and ragged (100, 200) with the tile covering all columns (BN 64 / 128 / 256), K = 1, 4, 6, 8, ragged
// M (300, 1000, 17), one and two consumer warpgroups, ping-pong, split-K 2 and 4 (the merge runs before
// the row epilogue), one block per tile and persistent blocks; and exact ties (B's columns in equal
// pairs, so every probability ties with its neighbour's) where the lower index must come first.
// Outputs poisoned with NaN first. Exit 0 when every case passes, 1 on a failure, 3 on a CUDA error.
// Build and run: tests/gpu/gemm/run.sh (compile_check.sh rows).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "gemm_test_util.h"

using namespace gemm_test;
using solder::gemm::Config;

namespace {

int failures = 0, cases = 0;

// The router's epilogue, as the code generator writes it (gemm_row_epilogue_writer.cpp): softmax over
// the row, then the top TopK probabilities and their experts.
template <int TopK>
struct RouterEpilogue {
  static constexpr bool row_reduction = true;
  float* weight;
  int* expert;
  template <class Row>
  __device__ void row(int, int row_, bool row_in_, const Row& x) const {
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < Row::Count; ++i)
      if (x.in(i)) m = solder::gemm::max_nan(m, x.v[i]);
    m = solder::gemm::quad_max(m);
    float z = 0.0f;
#pragma unroll
    for (int i = 0; i < Row::Count; ++i)
      if (x.in(i)) z += expf(x.v[i] - m);
    z = solder::gemm::quad_sum(z);
    float key[Row::Count];
    int index[Row::Count];
    bool valid[Row::Count];
#pragma unroll
    for (int i = 0; i < Row::Count; ++i) {
      valid[i] = x.in(i);
      key[i] = expf(x.v[i] - m) / z;
      index[i] = x.col(i);
    }
    float w[TopK];
    int e[TopK];
    solder::gemm::quad_topk<TopK>(key, index, valid, w, e);
    if (row_in_ && threadIdx.x % 4 == 0) {
#pragma unroll
      for (int r = 0; r < TopK; ++r) {
        weight[(long long)row_ * TopK + r] = w[r];
        expert[(long long)row_ * TopK + r] = e[r];
      }
    }
  }
};

struct Case {
  int m, n, k;
  bool ties = false;  // B's columns 2j and 2j + 1 equal
};

template <class C, int TopK>
void run_case(const char* name, const Case& c, std::mt19937& rng) {
  Operand A = make_operand(C::TA, C::AKMajor, c.m, c.k, 1, rng);
  Operand B = make_operand(C::TB, C::BKMajor, c.n, c.k, 1, rng, 0.25f);
  if (c.ties) {
    // Column 2j + 1 := column 2j, on the device (re-encoded) and in the host values.
    std::vector<uint16_t> raw(B.bytes / 2);
    CUDA_CHECK(cudaMemcpy(raw.data(), B.device, B.bytes, cudaMemcpyDeviceToHost));
    for (int col = 1; col < c.n; col += 2)
      for (int kk = 0; kk < c.k; ++kk) {
        auto at = [&](int r) { return B.k_major ? int64_t(r) * B.ld + kk : int64_t(kk) * B.ld + r; };
        raw[at(col)] = raw[at(col - 1)];
        B.values[size_t(col) * c.k + kk] = B.values[size_t(col - 1) * c.k + kk];
      }
    CUDA_CHECK(cudaMemcpy(B.device, raw.data(), B.bytes, cudaMemcpyHostToDevice));
  }
  TensorMap map_a = make_map(A, C::ABoxRows, C::BK, "A");
  TensorMap map_b = make_map(B, C::BBoxRows, C::BK, "B", C::BBoxKRows);

  // The float64 reference: probabilities and the top-K with the IR's order (ties to the lower index).
  std::vector<double> prob(size_t(c.m) * c.n);
  std::vector<int> ref_expert(size_t(c.m) * TopK);
#pragma omp parallel for schedule(static)
  for (int r = 0; r < c.m; ++r) {
    std::vector<double> logit(c.n);
    double mx = -INFINITY;
    for (int col = 0; col < c.n; ++col) {
      double dot = 0;
      for (int kk = 0; kk < c.k; ++kk) dot += double(A.at(0, r, kk)) * double(B.at(0, col, kk));
      logit[col] = dot;
      mx = std::max(mx, dot);
    }
    double z = 0;
    for (int col = 0; col < c.n; ++col) z += std::exp(logit[col] - mx);
    for (int col = 0; col < c.n; ++col) prob[size_t(r) * c.n + col] = std::exp(logit[col] - mx) / z;
    std::vector<int> order(c.n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[size_t(r) * c.n + a] > prob[size_t(r) * c.n + b]; });
    for (int q = 0; q < TopK; ++q) ref_expert[size_t(r) * TopK + q] = q < c.n ? order[q] : -1;
  }

  float* d_weight = nullptr;
  int* d_expert = nullptr;
  const size_t outputs = size_t(c.m) * TopK;
  CUDA_CHECK(cudaMalloc(&d_weight, outputs * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_expert, outputs * sizeof(int)));
  GemmShape shape;
  shape.m = c.m;
  shape.n = c.n;
  shape.k = c.k;
  shape.batch = 1;
  RouterEpilogue<TopK> epilogue{d_weight, d_expert};
  solder::gemm::SplitKWorkspace workspace = make_workspace<C>(shape);
  for (int mode = 0; mode < 2; ++mode) {
    ++cases;
    CUDA_CHECK(cudaMemset(d_weight, 0xFF, outputs * sizeof(float)));  // NaN
    CUDA_CHECK(cudaMemset(d_expert, 0x7F, outputs * sizeof(int)));
    launch<C>(map_a, map_b, shape, epilogue, 0, mode == 0 ? 0 : 3, workspace);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> weight(outputs);
    std::vector<int> expert(outputs);
    CUDA_CHECK(cudaMemcpy(weight.data(), d_weight, outputs * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(expert.data(), d_expert, outputs * sizeof(int), cudaMemcpyDeviceToHost));
    // Each rank: the expert must be the reference's, or one whose reference probability is within the
    // f32 error of it (a near-tie that float32 orders the other way); an exact tie in float64 must be
    // the reference's (the lower index). The weight must be the reference probability of the expert.
    long long bad = 0, flips = 0, tie_checks = 0;
    double worst = 0;
    int first_row = -1;
    for (int r = 0; r < c.m; ++r)
      for (int q = 0; q < TopK; ++q) {
        const int want = ref_expert[size_t(r) * TopK + q], got = expert[size_t(r) * TopK + q];
        const float w = weight[size_t(r) * TopK + q];
        bool ok = got >= 0 && got < c.n;
        if (ok && got != want) {
          const double pw = prob[size_t(r) * c.n + want], pg = prob[size_t(r) * c.n + got];
          ok = pw != pg && std::fabs(pw - pg) <= 1e-5 * pw;
          flips += ok;
        }
        if (c.ties && q + 1 < TopK && want % 2 == 0 && ref_expert[size_t(r) * TopK + q + 1] == want + 1) ++tie_checks;
        if (ok) {
          const double err = std::fabs(double(w) - prob[size_t(r) * c.n + got]) / std::max(prob[size_t(r) * c.n + got], 1e-30);
          worst = std::max(worst, err);
          ok = err <= 1e-4;
        }
        if (!ok) {
          ++bad;
          if (first_row < 0) first_row = r;
        }
      }
    const bool ok = bad == 0 && (!c.ties || tie_checks > 0);
    if (!ok) ++failures;
    std::printf("%s %-30s %-12s M=%-5d E=%-4d HID=%-5d top-%d%s  worst_rel=%.2e near_tie_flips=%lld%s", ok ? "PASS" : "FAIL", name,
                mode == 0 ? "block/unit" : "persistent:3", c.m, c.n, c.k, TopK, c.ties ? " ties" : "", worst, flips,
                c.ties ? (" tie_pairs=" + std::to_string(tie_checks)).c_str() : "");
    if (bad) {
      std::printf("  bad=%lld first row %d: got", bad, first_row);
      for (int q = 0; q < TopK; ++q) std::printf(" %d:%.6g", expert[size_t(first_row) * TopK + q], weight[size_t(first_row) * TopK + q]);
      std::printf(" want");
      for (int q = 0; q < TopK; ++q) {
        const int want = ref_expert[size_t(first_row) * TopK + q];
        std::printf(" %d:%.6g", want, prob[size_t(first_row) * c.n + want]);
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  free_workspace(workspace);
  CUDA_CHECK(cudaFree(d_weight));
  CUDA_CHECK(cudaFree(d_expert));
  free_operand(A);
  free_operand(B);
}

}  // namespace

int main(int argc, char** argv) {
  std::mt19937 rng(argc > 1 ? std::atoi(argv[1]) : 2026);
  using solder::gemm::Dtype;
  // A [M, HID] K-major (x), B [HID, E] N-major (the router's wg), as moe_routing stores them.
  using C64 = Config<Dtype::bf16, Dtype::bf16, 64, 64, 8, true, false>;
  using C64x128 = Config<Dtype::bf16, Dtype::bf16, 64, 128, 6, true, false>;
  using C128x128 = Config<Dtype::bf16, Dtype::bf16, 128, 128, 4, true, false>;
  using C64x256 = Config<Dtype::bf16, Dtype::bf16, 64, 256, 4, true, false>;
  using C64Split2 = Config<Dtype::bf16, Dtype::bf16, 64, 128, 6, true, false, 1, 16, 2>;
  using C64x64Split4 = Config<Dtype::bf16, Dtype::bf16, 64, 64, 8, true, false, 1, 16, 4>;
  using C64Pingpong = Config<Dtype::bf16, Dtype::bf16, 64, 128, 6, true, false, 1, 16, 1, 1, 1, true>;
  run_case<C64, 6>("64x64 s8", {300, 64, 2560}, rng);
  run_case<C64, 1>("64x64 s8", {1000, 64, 512}, rng);
  run_case<C64, 8>("64x64 s8", {17, 64, 64, true}, rng);
  run_case<C64x128, 8>("64x128 s6", {300, 128, 2048}, rng);
  run_case<C64x128, 1>("64x128 s6", {1000, 128, 768}, rng);
  run_case<C64x128, 8>("64x128 s6", {300, 100, 1000}, rng);
  run_case<C64x128, 8>("64x128 s6", {200, 128, 512, true}, rng);
  run_case<C128x128, 6>("128x128 s4", {300, 128, 1024}, rng);
  run_case<C128x128, 8>("128x128 s4", {129, 100, 320, true}, rng);
  run_case<C64x256, 4>("64x256 s4", {300, 200, 512}, rng);
  run_case<C64Split2, 8>("64x128 s6 split-K 2", {300, 128, 2048}, rng);
  run_case<C64Split2, 8>("64x128 s6 split-K 2", {130, 128, 1024, true}, rng);
  run_case<C64x64Split4, 6>("64x64 s8 split-K 4", {300, 64, 4096}, rng);
  run_case<C64Pingpong, 8>("64x128 s6 ping-pong", {1000, 128, 1024}, rng);
  std::printf("%s: %d of %d cases passed\n", failures ? "FAILED" : "OK", cases - failures, cases);
  return failures ? 1 : 0;
}
