// Device test of the GEMM skeleton's K ranges (device/solder/gemm/sm90_gemm.cuh, gemm_ranges_kernel):
// acc = Σ_{k < K1} A1(m, k) · B(k, n) + Σ_{k < K2} A2(m, k) · B(K1 + k, n), A1 and A2 two tensors, B one
// tensor read through two tensor maps (the second starting at row K1), as nerf_mlp's cat([x, h4]) · w5
// runs. Against a float64 host reference of the rounded operands: bf16, f16 and e4m3; B N-major with
// ragged boundaries (K1 = 1, 63, 130: the first range's last K tile zero-filled by its maps' bounds, so a
// read past K1 would add B's second-range rows, and A1's padding holds NaN) and K-major (K1 a multiple of
// 16 bytes, where the second map's base stays aligned); ragged M / N / K2, a batch; the cooperative and
// ping-pong schedules, split-K 3, clusters along M (B multicast) and N (A multicast); f32 element stores
// and the row stores; one block per work unit, then 3 persistent blocks (2 clusters with a cluster).
// Outputs poisoned with NaN first. Exit 0 when every case passes, 1 on a failure, 3 on a CUDA error.
// Build and run: tests/gpu/gemm/compile_check.sh ranges (OUT_BIN=1), then test_sm90_gemm_ranges [SEED].
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gemm_test_util.h"

using namespace gemm_test;
using solder::gemm::Config;

namespace {

int failures = 0, cases = 0;

struct RangeCase {
  int m, n, k1, k2, batch;
};

// Launches gemm_ranges_kernel<C, E>, as gemm_test::launch does gemm_kernel.
template <class C, class E>
void launch_ranges(const TensorMap& a, const TensorMap& b, const TensorMap& a2, const TensorMap& b2, const GemmShape& shape, int k2,
                   const E& epilogue, int persistent_blocks, const solder::gemm::SplitKWorkspace& workspace) {
  launch_on(solder::gemm::gemm_ranges_kernel<C, E>, solder::gemm::launch_config(C{}, shape, persistent_blocks), C::SmemBytes,
            cudaStream_t{}, false, a, b, a2, b2, shape, k2, epilogue, workspace);
}

// B's rows [k0, k0 + k) as an operand of its own: the same storage from row k0 on (N-major: k0 rows of
// ld elements in; K-major: k0 elements in, which must keep the base 16-byte aligned).
Operand k_slice(const Operand& b, int k0, int k) {
  Operand s = b;
  s.k = k;
  const int64_t offset = b.k_major ? k0 : int64_t(k0) * b.ld;
  s.device = static_cast<char*>(b.device) + offset * solder::gemm::dtype_bytes(b.dtype);
  s.values.clear();
  return s;
}

template <class C, class E>
void run_case(const char* config_name, const RangeCase& c, bool bf16_out, std::mt19937& rng) {
  if (!selected(config_name)) return;
  const bool fp8 = solder::gemm::dtype_is_fp8(C::TA);
  if (C::BKMajor && (int64_t(c.k1) * solder::gemm::dtype_bytes(C::TB)) % 16 != 0) {
    std::printf("FAIL %s: K1 %d leaves the K-major second map unaligned (a test-case error)\n", config_name, c.k1);
    ++failures;
    return;
  }
  Operand A1 = make_operand(C::TA, C::AKMajor, c.m, c.k1, c.batch, rng);
  Operand A2 = make_operand(C::TA, C::AKMajor, c.m, c.k2, c.batch, rng);
  Operand B = make_operand(C::TB, C::BKMajor, c.n, c.k1 + c.k2, c.batch, rng);
  TensorMap map_a1 = make_map(A1, C::ABoxRows, C::BK, "A1");
  TensorMap map_a2 = make_map(A2, C::ABoxRows, C::BK, "A2");
  TensorMap map_b1 = make_map(k_slice(B, 0, c.k1), C::BBoxRows, C::BK, "B rows 0..K1", C::BBoxKRows);
  TensorMap map_b2 = make_map(k_slice(B, c.k1, c.k2), C::BBoxRows, C::BK, "B rows K1..", C::BBoxKRows);

  const int ld = (c.n + 7) / 8 * 8;
  const long long batch_stride = (long long)ld * c.m;
  const size_t count = size_t(batch_stride) * c.batch;
  const size_t out_bytes = count * (bf16_out ? 2 : 4);
  void* out = nullptr;
  CUDA_CHECK(cudaMalloc(&out, out_bytes));

  const double rel_acc = fp8 ? 2e-3 : 1e-4;
  const double rel_out = bf16_out ? 1.0 / 128 : 0.0;
  std::vector<double> ref(size_t(c.batch) * c.m * c.n), tol(ref.size());
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < c.batch; ++b)
    for (int r = 0; r < c.m; ++r)
      for (int col = 0; col < c.n; ++col) {
        double dot = 0, sum_abs = 0;
        for (int kk = 0; kk < c.k1; ++kk) {
          const double p = double(A1.at(b, r, kk)) * double(B.at(b, col, kk));
          dot += p;
          sum_abs += std::fabs(p);
        }
        for (int kk = 0; kk < c.k2; ++kk) {
          const double p = double(A2.at(b, r, kk)) * double(B.at(b, col, c.k1 + kk));
          dot += p;
          sum_abs += std::fabs(p);
        }
        const size_t i = (size_t(b) * c.m + r) * c.n + col;
        ref[i] = dot;
        tol[i] = rel_acc * sum_abs + 1e-6 + rel_out * std::fabs(dot);
      }

  GemmShape shape;
  shape.m = c.m;
  shape.n = c.n;
  shape.k = c.k1;
  shape.batch = c.batch;
  E epilogue{static_cast<decltype(E::out)>(out), ld, batch_stride, nullptr, nullptr};
  solder::gemm::SplitKWorkspace workspace = make_workspace<C>(shape);
  const long long counters = solder::gemm::splitk_counters(C{}, shape);
  const int persistent_blocks = C::ClusterSize == 1 ? 3 : 2 * C::ClusterSize;
  std::vector<float> got(count);
  for (int mode = 0; mode < 2; ++mode) {
    ++cases;
    CUDA_CHECK(cudaMemset(out, 0xFF, out_bytes));  // NaN
    launch_ranges<C>(map_a1, map_b1, map_a2, map_b2, shape, c.k2, epilogue, mode ? persistent_blocks : 0, workspace);
    CUDA_CHECK(cudaDeviceSynchronize());
    const long long dirty = dirty_counters(workspace, counters);  // split-K counters not reset by the launch
    read_output(out, bf16_out, got);
    long long bad = 0, nan = 0;
    double err2 = 0, ref2 = 0;
    size_t first = size_t(-1);
    for (int b = 0; b < c.batch; ++b)
      for (int r = 0; r < c.m; ++r)
        for (int col = 0; col < c.n; ++col) {
          const size_t i = (size_t(b) * c.m + r) * c.n + col;
          const double g = got[size_t(b) * batch_stride + size_t(r) * ld + col];
          err2 += (g - ref[i]) * (g - ref[i]);
          ref2 += ref[i] * ref[i];
          if (std::isnan(g)) ++nan;
          if (!(std::fabs(g - ref[i]) <= tol[i])) {
            ++bad;
            if (first == size_t(-1)) first = i;
          }
        }
    const bool ok = bad == 0 && nan == 0 && dirty == 0;
    if (!ok) ++failures;
    std::printf("%s %-40s %-13s M=%-5d N=%-5d K1=%-4d K2=%-4d batch=%d%s  rel_l2=%.2e", ok ? "PASS" : "FAIL", config_name,
                mode == 0 ? "block/unit" : "persistent", c.m, c.n, c.k1, c.k2, c.batch, bf16_out ? " ->bf16" : " ->f32",
                ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2));
    if (!ok) {
      std::printf("  bad=%lld nan=%lld dirty_counters=%lld", bad, nan, dirty);
      if (first != size_t(-1)) {
        const int fb = int(first / (size_t(c.m) * c.n)), fr = int(first / c.n % c.m), fc = int(first % c.n);
        std::printf(" first at b=%d r=%d c=%d got %.6g want %.6g", fb, fr, fc, got[size_t(fb) * batch_stride + size_t(fr) * ld + fc],
                    ref[first]);
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  free_workspace(workspace);
  CUDA_CHECK(cudaFree(out));
  free_operand(A1);
  free_operand(A2);
  free_operand(B);
}

template <class C, class E = StoreF32>
void run_config(const char* name, const std::vector<RangeCase>& list, std::mt19937& rng, bool bf16_out = false) {
  for (const RangeCase& c : list) run_case<C, E>(name, c, bf16_out, rng);
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0) {
    std::printf("SKIP: %s is sm_%d%d, the skeleton needs sm_90a\n", prop.name, prop.major, prop.minor);
    return 0;
  }
  std::printf("device: %s\n", prop.name);
  std::mt19937 rng(argc > 1 ? std::atoi(argv[1]) : 2026);

  // B N-major: any boundary (nerf_mlp's h5: K1 63, K2 256; hv: K1 256, K2 27).
  const std::vector<RangeCase> ragged = {
      {1000, 256, 63, 256, 1}, {129, 257, 63, 200, 1}, {17, 100, 1, 129, 1}, {300, 130, 64, 64, 2},
      {100, 129, 256, 27, 1},  {64, 200, 130, 5, 1},   {1, 17, 100, 3, 1},
  };
  // B K-major (and fp8): K1 · |T| a multiple of 16 bytes.
  const std::vector<RangeCase> aligned = {
      {129, 257, 48, 100, 1}, {300, 130, 64, 64, 2}, {100, 129, 208, 27, 1}, {17, 100, 16, 129, 1},
  };

  using H_64x256_KN_pp = Config<Dtype::f16, Dtype::f16, 64, 256, 4, true, false, 1, 16, 1, 1, 1, true>;  // nerf_mlp's h5
  using H_128x128_KN = Config<Dtype::f16, Dtype::f16, 128, 128, 5, true, false>;
  using H_64x128_KK = Config<Dtype::f16, Dtype::f16, 64, 128, 6>;
  using Bf_128x128_KN = Config<Dtype::bf16, Dtype::bf16, 128, 128, 5, true, false>;
  using Bf_128x256_KK = Config<Dtype::bf16, Dtype::bf16, 128, 256, 4>;
  using Bf_64x128_KN_k3 = Config<Dtype::bf16, Dtype::bf16, 64, 128, 6, true, false, 1, 16, 3>;
  using H_128x128_KN_c2 = Config<Dtype::f16, Dtype::f16, 128, 128, 5, true, false, 2>;
  using Bf_128x64_KK_n2 = Config<Dtype::bf16, Dtype::bf16, 128, 64, 6, true, true, 1, 16, 1, 1, 2>;
  using E4_128x128 = Config<Dtype::e4m3, Dtype::e4m3, 128, 128, 6>;
  using E4_64x256_pp = Config<Dtype::e4m3, Dtype::e4m3, 64, 256, 4, true, true, 1, 16, 1, 1, 1, true>;
  run_config<H_64x256_KN_pp>("f16 64x256x64 s4 A:K B:N pingpong", ragged, rng);
  run_config<H_64x256_KN_pp, RowStoreBf16>("f16 64x256x64 s4 A:K B:N pingpong rows", ragged, rng, true);
  run_config<H_128x128_KN>("f16 128x128x64 s5 A:K B:N", ragged, rng);
  run_config<H_64x128_KK>("f16 64x128x64 s6 A:K B:K", aligned, rng);
  run_config<Bf_128x128_KN, RowStoreBf16>("bf16 128x128x64 s5 A:K B:N rows", ragged, rng, true);
  run_config<Bf_128x256_KK>("bf16 128x256x64 s4 A:K B:K", aligned, rng);
  run_config<Bf_64x128_KN_k3>("bf16 64x128x64 s6 A:K B:N k3", ragged, rng);
  run_config<H_128x128_KN_c2>("f16 128x128x64 s5 A:K B:N c2", ragged, rng);
  run_config<Bf_128x64_KK_n2>("bf16 128x64x64 s6 A:K B:K n2", aligned, rng);
  run_config<E4_128x128>("e4m3 128x128x128 s6", aligned, rng);
  run_config<E4_64x256_pp, RowStoreBf16>("e4m3 64x256x128 s4 pingpong rows", aligned, rng, true);

  std::printf("%s: %d of %d cases passed\n", failures ? "FAILED" : "OK", cases - failures, cases);
  return failures ? 1 : 0;
}
