// Device test of solder::tile::exp2_poly (device/solder/tile/exp2_poly.cuh), the attention row state's
// exponential on the FMA pipe (functors.cuh, kExp2Emulated), on every one of the 2^32 f32 bit patterns:
//   - −126 ≤ x ≤ 127: relative error against exp2 in double ≤ 3.0e-6 (the header's bound);
//   - x < −126 (−inf included): +0 exactly (ex2.approx.ftz flushes those results to zero as well);
//   - NaN: NaN;
//   - the same bits as the host's exp2_poly (compiled from the same header) on 2^24 patterns spread over
//     the whole range.
// It prints the worst relative error and where, next to ex2.approx.ftz's (the MUFU) over the same range.
// Exit 0 when every check passes, 1 on a failure, 3 on a CUDA error.
// Build: tests/gpu/attention_skeleton/compile_check.sh exp2 (OUT_BIN=1 for the executable, bin/test_sm90_exp2_poly).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "solder/tile/exp2_poly.cuh"

namespace {

#define CHECK_CUDA(call)                                                               \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(3);                                                                    \
    }                                                                                  \
  } while (0)

constexpr double kBound = 3.0e-6;

struct Result {
  unsigned long long checked;          // patterns with −126 ≤ x ≤ 127
  unsigned long long over_bound;       // of those, relative error above kBound
  unsigned long long not_zero;         // x < −126 whose result is not +0
  unsigned long long not_nan;          // NaN x whose result is not NaN
  unsigned long long worst_poly;       // (relative error as double bits: positive doubles order as integers)
  unsigned long long worst_poly_x;     // the pattern where it is reached (low 32 bits)
  unsigned long long worst_mufu;       // ex2.approx.ftz's worst relative error over the same x
};

__device__ float mufu_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__global__ void sweep(uint64_t first, uint64_t count, Result* result) {
  unsigned long long checked = 0, over = 0, not_zero = 0, not_nan = 0;
  double worst = 0.0, worst_mufu = 0.0;
  uint32_t worst_x = 0;
  for (uint64_t k = first + blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; k < first + count; k += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t u = uint32_t(k);
    const float x = __uint_as_float(u);
    const float y = solder::tile::exp2_poly(x);
    if (x != x) {
      not_nan += y == y;
    } else if (x < -126.0f) {
      not_zero += __float_as_uint(y) != 0u;
    } else if (x <= 127.0f) {
      const double ref = exp2(double(x));
      const double rel = fabs(double(y) - ref) / ref;
      const double rel_mufu = fabs(double(mufu_exp2(x)) - ref) / ref;
      ++checked;
      over += !(rel <= kBound);
      if (rel > worst) worst = rel, worst_x = u;
      if (rel_mufu > worst_mufu) worst_mufu = rel_mufu;
    }
  }
  atomicAdd(&result->checked, checked);
  atomicAdd(&result->over_bound, over);
  atomicAdd(&result->not_zero, not_zero);
  atomicAdd(&result->not_nan, not_nan);
  const unsigned long long w = __double_as_longlong(worst);
  if (atomicMax(&result->worst_poly, w) < w) result->worst_poly_x = worst_x;  // the x of a tie may be another thread's
  atomicMax(&result->worst_mufu, (unsigned long long)__double_as_longlong(worst_mufu));
}

// exp2_poly of the patterns u = k · 257 (mod 2^32), k < n, for the comparison with the host.
__global__ void sample(uint32_t n, uint32_t* out) {
  for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    out[k] = __float_as_uint(solder::tile::exp2_poly(__uint_as_float(k * 257u)));
}

double as_double(unsigned long long bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

int main() {
  Result* d_result;
  CHECK_CUDA(cudaMalloc(&d_result, sizeof(Result)));
  CHECK_CUDA(cudaMemset(d_result, 0, sizeof(Result)));
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));
  CHECK_CUDA(cudaEventRecord(t0));
  // 2^32 patterns in 16 launches of 2^28
  for (uint64_t first = 0; first < (uint64_t(1) << 32); first += uint64_t(1) << 28) {
    sweep<<<132 * 16, 256>>>(first, uint64_t(1) << 28, d_result);
    CHECK_CUDA(cudaGetLastError());
  }
  CHECK_CUDA(cudaEventRecord(t1));
  CHECK_CUDA(cudaDeviceSynchronize());
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
  Result r;
  CHECK_CUDA(cudaMemcpy(&r, d_result, sizeof r, cudaMemcpyDeviceToHost));

  int failures = 0;
  const double worst = as_double(r.worst_poly), worst_mufu = as_double(r.worst_mufu);
  std::printf("%s every f32 in [-126, 127]: %llu patterns, worst relative error %.3g (2^%.2f) at x = %a; ex2.approx.ftz's %.3g (2^%.2f); %llu over %.1e (%.0f ms)\n",
              r.over_bound == 0 && r.checked > 0 ? "OK  " : "FAIL", r.checked, worst, std::log2(worst), as_float(uint32_t(r.worst_poly_x)), worst_mufu,
              std::log2(worst_mufu), r.over_bound, kBound, ms);
  failures += r.over_bound != 0 || r.checked == 0;
  std::printf("%s every x < -126 and -inf gives +0: %llu do not\n", r.not_zero == 0 ? "OK  " : "FAIL", r.not_zero);
  failures += r.not_zero != 0;
  std::printf("%s every NaN gives NaN: %llu do not\n", r.not_nan == 0 ? "OK  " : "FAIL", r.not_nan);
  failures += r.not_nan != 0;

  const uint32_t n = 1u << 24;
  uint32_t* d_out;
  CHECK_CUDA(cudaMalloc(&d_out, n * sizeof(uint32_t)));
  sample<<<132 * 8, 256>>>(n, d_out);
  CHECK_CUDA(cudaGetLastError());
  std::vector<uint32_t> device(n);
  CHECK_CUDA(cudaMemcpy(device.data(), d_out, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  uint32_t differ = 0, first_differ = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const float x = as_float(k * 257u);
    const float host = solder::tile::exp2_poly(x);
    uint32_t host_bits;
    std::memcpy(&host_bits, &host, sizeof host_bits);
    const bool both_nan = host != host && as_float(device[k]) != as_float(device[k]);
    if (host_bits != device[k] && !both_nan && (x != x || x <= 127.0f)) {
      if (differ++ == 0) first_differ = k * 257u;
    }
  }
  std::printf("%s the host's bits on %u patterns: %u differ%s\n", differ == 0 ? "OK  " : "FAIL", n, differ,
              differ ? (" (first at x = " + std::to_string(as_float(first_differ)) + ")").c_str() : "");
  failures += differ != 0;
  CHECK_CUDA(cudaFree(d_out));
  CHECK_CUDA(cudaFree(d_result));
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
