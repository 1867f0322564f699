// Device test of the register pass's division by a row divisor (issue 15, twelfth session;
// device/solder/reduce/row_divide.h): divide_by_row(n, row_divisor(d)) must give the bits of the IEEE
// quotient __fdiv_rn(n, d) for every f32 bit pattern n (NaN for NaN), against divisors that the
// generated kernels form (quant_gemm's scales amax / 448, softmax's row sums), the ends of the
// reciprocal path's range, negative and out-of-range divisors, and pseudo-random ones. Also counts
// how many elements took the reciprocal path. Prints one line per divisor; exit 1 on a mismatch.
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -O2 -I device tests/gpu/row_divide/row_divide.cu -o row_divide
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <solder/runtime.cuh>
#include <solder/reduce/vector.cuh>

__global__ void check(float d, unsigned long long* wrong, unsigned long long* fast, unsigned int* first) {
  const solder::reduce::RowDivisor row = solder::reduce::row_divisor(d);
  unsigned long long bad = 0, quick = 0;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    const float n = __uint_as_float(static_cast<unsigned int>(i));
    const float want = __fdiv_rn(n, d);
    const float got = solder::reduce::divide_by_row(n, row);
    const bool same = (want != want) ? (got != got) : (__float_as_uint(got) == __float_as_uint(want));
    if (!same) {
      ++bad;
      atomicCAS(first, 0u, static_cast<unsigned int>(i));
    }
    const float q = fabsf(solder::reduce::row_fma(n, row.reciprocal, solder::reduce::row_mul(n, row.low)));
    if (row.exact && q >= 0x1p-74f && q <= 0x1p100f) ++quick;
  }
  atomicAdd(wrong, bad);
  atomicAdd(fast, quick);
}

static bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

int main() {
  std::vector<float> divisors;
  for (float amax : {1.0f, 3.0f, 0.0078125f, 7.5f, 1.75f, 448.0f, 13.37f, 1e-4f}) divisors.push_back(amax / 448.0f);
  for (float sum : {1.0f, 1.5f, 17.25f, 2048.0f, 1234.5678f}) divisors.push_back(sum);
  for (float d : {-3.0f, 0x1p-26f, 0x1p26f, 0x1.fffffep25f, 0x1p27f, 0.0f}) divisors.push_back(d);
  unsigned int state = 12345u;
  for (int i = 0; i < 4; ++i) {  // random significands, exponents within the reciprocal path's range
    state = state * 1664525u + 1013904223u;
    const unsigned int bits = (state & 0x807fffffu) | ((127u - 20u + (state >> 27)) << 23);
    float d;
    std::memcpy(&d, &bits, 4);
    divisors.push_back(d);
  }
  unsigned long long *wrong, *fast;
  unsigned int* first;
  if (!ok(cudaMalloc(&wrong, 8), "cudaMalloc") || !ok(cudaMalloc(&fast, 8), "cudaMalloc") || !ok(cudaMalloc(&first, 4), "cudaMalloc")) return 1;
  int failures = 0;
  for (float d : divisors) {
    cudaMemset(wrong, 0, 8);
    cudaMemset(fast, 0, 8);
    cudaMemset(first, 0, 4);
    check<<<132 * 8, 256>>>(d, wrong, fast, first);
    if (!ok(cudaGetLastError(), "launch") || !ok(cudaDeviceSynchronize(), "kernel")) return 1;
    unsigned long long w = 0, f = 0;
    unsigned int at = 0;
    cudaMemcpy(&w, wrong, 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(&f, fast, 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(&at, first, 4, cudaMemcpyDeviceToHost);
    std::printf("row_divide d %-15a every f32 n: %s (%llu mismatches, first n bits 0x%08x; %llu of 2^32 on the reciprocal path)\n", d,
                w == 0 ? "ok" : "FAILED", w, at, f);
    if (w) ++failures;
  }
  std::printf("row_divide: %s, %zu divisors x 2^32 numerators\n", failures ? "FAILED" : "ok", divisors.size());
  return failures ? 1 : 0;
}
