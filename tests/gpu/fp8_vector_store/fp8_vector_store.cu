// Device test of the generic writer's 8-bit vector stores and packed 16-bit loads (issue 15, seventh
// session; device/solder/reduce/vector.cuh): store_vector for e4m3 and e5m2 at 4, 8 and 16 elements
// must write exactly the bytes that solder::store writes element by element (round to nearest even;
// e4m3 saturating to ±448, e5m2 unsaturated), and load_packed + unpack must read exactly what
// load_vector reads. Inputs: every bf16 bit pattern as a float, the f32 neighbours of every e4m3 and
// e5m2 rounding midpoint, and pseudo-random floats. Also the register pass's packed 8-bit tiles
// (pack_fp8 of the value against store_vector of the value rounded first), every f32 bit pattern.
// Prints one line per check; exit 1 on a mismatch.
//   nvcc -std=c++17 -arch=sm_90a -O2 -I device tests/gpu/fp8_vector_store/fp8_vector_store.cu -o fp8_vector_store
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>

#include <solder/runtime.cuh>
#include <solder/reduce/vector.cuh>

template <int N>
__global__ void stores(const float* x, int n, unsigned char* scalar4, unsigned char* vector4, unsigned char* scalar5,
                       unsigned char* vector5) {
  const int first = (blockIdx.x * blockDim.x + threadIdx.x) * N;
  if (first + N > n) return;
  float v[N];
  for (int i = 0; i < N; ++i) v[i] = x[first + i];
  for (int i = 0; i < N; ++i) {
    solder::store(reinterpret_cast<__nv_fp8_e4m3*>(scalar4 + first + i), v[i]);
    solder::store(reinterpret_cast<__nv_fp8_e5m2*>(scalar5 + first + i), v[i]);
  }
  solder::reduce::store_vector(reinterpret_cast<__nv_fp8_e4m3*>(vector4 + first), v);
  solder::reduce::store_vector(reinterpret_cast<__nv_fp8_e5m2*>(vector5 + first), v);
}

__global__ void loads(const __nv_bfloat16* a, const __half* h, int vectors, float* direct, float* packed) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= vectors) return;
  float va[8], vh[8];
  solder::reduce::load_vector(a + 8 * t, va);
  solder::reduce::load_vector(h + 8 * t, vh);
  __nv_bfloat162 pa[4];
  __half2 ph[4];
  solder::reduce::load_packed(a + 8 * t, pa);
  solder::reduce::load_packed(h + 8 * t, ph);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    direct[16 * t + i] = va[i];
    direct[16 * t + 8 + i] = vh[i];
    packed[16 * t + i] = solder::reduce::unpack(pa, i);
    packed[16 * t + 8 + i] = solder::reduce::unpack(ph, i);
  }
}

// The register pass's packed 8-bit tiles (issue 15, eighth session): pack_fp8 of the unrounded value
// must give the bytes that store_vector writes for the value first rounded by round_f8e4m3 /
// round_f8e5m2 (the map's rounding, then the store's conversion): every f32 bit pattern, 8 per thread.
__global__ void packed_all(unsigned long long first, unsigned long long count, unsigned long long* bad4, unsigned long long* bad5,
                           unsigned int* example) {
  const unsigned long long t = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  if (t * 8 >= count) return;
  float v[8], r4[8], r5[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[i] = __uint_as_float(static_cast<unsigned int>(first + t * 8 + i));
    r4[i] = solder::round_f8e4m3(v[i]);
    r5[i] = solder::round_f8e5m2(v[i]);
  }
  unsigned int p4[2], p5[2];
  solder::reduce::pack_fp8<8>(v, p4, __NV_SATFINITE, __NV_E4M3);
  solder::reduce::pack_fp8<8>(v, p5, __NV_NOSAT, __NV_E5M2);
  unsigned char s4[8], s5[8];
  solder::reduce::store_vector(reinterpret_cast<__nv_fp8_e4m3*>(s4), r4);
  solder::reduce::store_vector(reinterpret_cast<__nv_fp8_e5m2*>(s5), r5);
  unsigned char e4[8], e5[8];
  solder::reduce::store_packed_fp8<2>(e4, p4);
  solder::reduce::store_packed_fp8<2>(e5, p5);
  for (int i = 0; i < 8; ++i) {
    unsigned char one4, one5;  // the element-by-element path of a ragged edge
    solder::reduce::store_packed_fp8_element<2>(&one4, p4, i);
    solder::reduce::store_packed_fp8_element<2>(&one5, p5, i);
    if (e4[i] != s4[i] || one4 != s4[i]) { atomicAdd(bad4, 1ULL); atomicExch(example, __float_as_uint(v[i])); }
    if (e5[i] != s5[i] || one5 != s5[i]) { atomicAdd(bad5, 1ULL); atomicExch(example, __float_as_uint(v[i])); }
  }
}

static float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

int main() {
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {
    std::printf("fp8_vector_store: FAILED (no device: %s)\n", cudaGetErrorString(e));
    return 1;
  }
  std::vector<float> x;
  for (uint32_t b = 0; b < 65536; ++b) x.push_back(bits_to_float(b << 16));  // every bf16 pattern
  // Neighbours of rounding midpoints: for every 16-bit prefix, the f32 values just around the midpoint
  // between consecutive e4m3 (3 mantissa bits) and e5m2 (2) values, and around ±448, ±464, ±57344.
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t m = 0; m < 16; ++m)
      for (uint32_t s = 0; s < 2; ++s) {
        const uint32_t base = (s << 31) | (e << 23) | (m << 19);
        for (uint32_t mid : {1u << 18, 1u << 19})
          for (int d = -1; d <= 1; ++d) x.push_back(bits_to_float(base + mid + static_cast<uint32_t>(d)));
      }
  for (float f : {448.0f, 449.0f, 464.0f, 465.0f, 480.0f, 57344.0f, 61440.0f, 1e30f, 1e-30f, 0.0f, -0.0f}) {
    x.push_back(f);
    x.push_back(-f);
  }
  uint64_t state = 2026;
  for (int i = 0; i < 1 << 20; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x.push_back(bits_to_float(static_cast<uint32_t>(state >> 32)));
  }
  while (x.size() % 16) x.push_back(1.0f);
  const int n = static_cast<int>(x.size());
  float* dx;
  unsigned char *s4, *v4, *s5, *v5;
  cudaMalloc(&dx, n * 4);
  cudaMalloc(&s4, n);
  cudaMalloc(&v4, n);
  cudaMalloc(&s5, n);
  cudaMalloc(&v5, n);
  cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice);
  int failures = 0;
  auto check = [&](int width) {
    cudaMemset(v4, 0xAA, n);
    cudaMemset(v5, 0xAA, n);
    const int threads = 256, blocks = (n / width + threads - 1) / threads;
    if (width == 4) stores<4><<<blocks, threads>>>(dx, n, s4, v4, s5, v5);
    if (width == 8) stores<8><<<blocks, threads>>>(dx, n, s4, v4, s5, v5);
    if (width == 16) stores<16><<<blocks, threads>>>(dx, n, s4, v4, s5, v5);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("fp8 vector store x%d: CUDA error %s\n", width, cudaGetErrorString(cudaGetLastError()));
      ++failures;
      return;
    }
    std::vector<unsigned char> a(n), b(n), c(n), d(n);
    cudaMemcpy(a.data(), s4, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), v4, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(c.data(), s5, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(d.data(), v5, n, cudaMemcpyDeviceToHost);
    int bad4 = 0, bad5 = 0, first = -1;
    for (int i = 0; i < n; ++i) {
      if (a[i] != b[i]) { ++bad4; if (first < 0) first = i; }
      if (c[i] != d[i]) { ++bad5; if (first < 0) first = i; }
    }
    std::printf("fp8 vector store x%-2d: e4m3 %d of %d bytes equal, e5m2 %d of %d: %s", width, n - bad4, n, n - bad5, n,
                bad4 || bad5 ? "FAIL" : "pass");
    if (first >= 0) std::printf(" (first at %d: x %a, e4m3 %02x / %02x, e5m2 %02x / %02x)", first, x[first], a[first], b[first], c[first], d[first]);
    std::printf("\n");
    failures += bad4 || bad5;
  };
  check(4);
  check(8);
  check(16);
  // Packed loads: every bf16 and f16 bit pattern.
  const int vectors = 65536 / 8;
  std::vector<uint16_t> patterns(65536);
  for (int i = 0; i < 65536; ++i) patterns[i] = static_cast<uint16_t>(i);
  __nv_bfloat16* da;
  __half* dh;
  float *direct, *packed;
  cudaMalloc(&da, 65536 * 2);
  cudaMalloc(&dh, 65536 * 2);
  cudaMalloc(&direct, vectors * 16 * 4);
  cudaMalloc(&packed, vectors * 16 * 4);
  cudaMemcpy(da, patterns.data(), 65536 * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dh, patterns.data(), 65536 * 2, cudaMemcpyHostToDevice);
  loads<<<(vectors + 255) / 256, 256>>>(da, dh, vectors, direct, packed);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    std::printf("packed 16-bit loads: CUDA error %s: FAIL\n", cudaGetErrorString(e));
    return 1;
  }
  std::vector<uint32_t> p(vectors * 16), q(vectors * 16);
  cudaMemcpy(p.data(), direct, vectors * 64, cudaMemcpyDeviceToHost);
  cudaMemcpy(q.data(), packed, vectors * 64, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < vectors * 16; ++i) bad += p[i] != q[i];  // bit-exact (NaN payloads included)
  std::printf("packed 16-bit loads: %d of %d floats equal: %s\n", vectors * 16 - bad, vectors * 16, bad ? "FAIL" : "pass");
  failures += bad > 0;
  {
    unsigned long long* counts;
    unsigned int* example;
    cudaMalloc(&counts, 16);
    cudaMalloc(&example, 4);
    cudaMemset(counts, 0, 16);
    cudaMemset(example, 0, 4);
    const unsigned long long all = 1ULL << 32, chunk = 1ULL << 30;
    for (unsigned long long first = 0; first < all; first += chunk)
      packed_all<<<static_cast<unsigned int>(chunk / 8 / 256), 256>>>(first, chunk, counts, counts + 1, example);
    unsigned long long host[2] = {0, 0};
    unsigned int ex = 0;
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      std::printf("packed 8-bit tiles: CUDA error %s: FAIL\n", cudaGetErrorString(e));
      return 1;
    }
    cudaMemcpy(host, counts, 16, cudaMemcpyDeviceToHost);
    cudaMemcpy(&ex, example, 4, cudaMemcpyDeviceToHost);
    std::printf("packed 8-bit tiles (every f32): e4m3 %llu, e5m2 %llu bytes differ from round + store_vector: %s", host[0], host[1],
                host[0] || host[1] ? "FAIL" : "pass");
    if (host[0] || host[1]) std::printf(" (e.g. x bits %08x)", ex);
    std::printf("\n");
    failures += host[0] || host[1] ? 1 : 0;
  }
  std::printf("fp8_vector_store: %s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
