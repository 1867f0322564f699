// Device test of the combining operators of solder/reduce/vector.cuh (Sum, Prod, Max, Min), which the
// code generator's cooperative reduces apply through warp_combine. Max and Min must be the Kernel IR's
// max/min (docs/kernel-ir.md): NaN in either operand gives NaN, and -0 orders below +0 in either operand
// order (max(+0, -0) = +0, min(+0, -0) = -0). Every pair of a set of special values (±0, ±inf, NaN,
// denormals, ties) is combined in both orders and compared bit for bit with a host reference (any NaN
// matches any NaN); then warp_combine over 32 lanes holding mixes of +0 and -0 must give the same bits
// whatever lane holds which. Exit status 0 only when every case matches.
// Build: nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Idevice tests/gpu/tile/test_reduce_combine.cu
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include <solder/reduce/vector.cuh>

namespace {

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); std::exit(2); } } while (0)

// out[4 * i + op] = op(a[i], b[i]) for op = Sum, Prod, Max, Min.
__global__ void combine_pairs(const float* a, const float* b, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[4 * i + 0] = solder::reduce::Sum()(a[i], b[i]);
  out[4 * i + 1] = solder::reduce::Prod()(a[i], b[i]);
  out[4 * i + 2] = solder::reduce::Max()(a[i], b[i]);
  out[4 * i + 3] = solder::reduce::Min()(a[i], b[i]);
}

// One warp per pattern: lane l of warp w holds lanes[32 * w + l]; out[2 * w] is Max over the warp
// (as lane 0 sees it), out[2 * w + 1] is Min.
__global__ void combine_warps(const float* lanes, float* out) {
  const int warp = blockIdx.x, lane = threadIdx.x;
  const float v = lanes[32 * warp + lane];
  const float max = solder::reduce::warp_combine(v, 1, 32, solder::reduce::Max());
  const float min = solder::reduce::warp_combine(v, 1, 32, solder::reduce::Min());
  if (lane == 0) { out[2 * warp] = max; out[2 * warp + 1] = min; }
}

// The Kernel IR's max and min (the CPU executor's max_nan / min_nan in src/ir/expr_eval.cpp).
float host_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
float host_min(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

bool same(float want, float got) {
  if (std::isnan(want)) return std::isnan(got);
  return std::memcmp(&want, &got, sizeof want) == 0;
}

}  // namespace

int main() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float denorm = std::numeric_limits<float>::denorm_min();
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, nan, -nan, denorm, -denorm, 3.5f, 3.5f, -2.25f};
  std::vector<float> a, b;
  for (float x : values)
    for (float y : values) { a.push_back(x); b.push_back(y); }
  const int n = static_cast<int>(a.size());

  // Warp patterns: all +0, all -0, one -0 among +0 at each of a few lanes, alternating, halves.
  std::vector<std::vector<float>> patterns;
  patterns.push_back(std::vector<float>(32, 0.0f));
  patterns.push_back(std::vector<float>(32, -0.0f));
  for (int lane : {0, 1, 15, 16, 31}) {
    std::vector<float> p(32, 0.0f), q(32, -0.0f);
    p[lane] = -0.0f;
    q[lane] = 0.0f;
    patterns.push_back(p);
    patterns.push_back(q);
  }
  std::vector<float> alternate(32), halves(32);
  for (int l = 0; l < 32; ++l) { alternate[l] = l % 2 ? -0.0f : 0.0f; halves[l] = l < 16 ? -0.0f : 0.0f; }
  patterns.push_back(alternate);
  patterns.push_back(halves);
  std::vector<float> lanes;
  for (auto& p : patterns) lanes.insert(lanes.end(), p.begin(), p.end());
  const int warps = static_cast<int>(patterns.size());

  float *da, *db, *dout, *dlanes, *dwarp;
  CHECK(cudaMalloc(&da, n * sizeof(float)));
  CHECK(cudaMalloc(&db, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, 4 * n * sizeof(float)));
  CHECK(cudaMalloc(&dlanes, lanes.size() * sizeof(float)));
  CHECK(cudaMalloc(&dwarp, 2 * warps * sizeof(float)));
  CHECK(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dlanes, lanes.data(), lanes.size() * sizeof(float), cudaMemcpyHostToDevice));
  combine_pairs<<<(n + 127) / 128, 128>>>(da, db, n, dout);
  combine_warps<<<warps, 32>>>(dlanes, dwarp);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> out(4 * n), warp_out(2 * warps);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(warp_out.data(), dwarp, warp_out.size() * sizeof(float), cudaMemcpyDeviceToHost));

  int cases = 0, passed = 0;
  auto check = [&](const char* what, float x, float y, float want, float got) {
    ++cases;
    if (same(want, got)) { ++passed; return; }
    std::printf("FAIL %s(%g [%08x], %g [%08x]): want %g [%08x] got %g [%08x]\n", what, x, *reinterpret_cast<unsigned*>(&x), y,
                *reinterpret_cast<unsigned*>(&y), want, *reinterpret_cast<unsigned*>(&want), got, *reinterpret_cast<unsigned*>(&got));
  };
  for (int i = 0; i < n; ++i) {
    check("Sum", a[i], b[i], a[i] + b[i], out[4 * i + 0]);
    check("Prod", a[i], b[i], a[i] * b[i], out[4 * i + 1]);
    check("Max", a[i], b[i], host_max(a[i], b[i]), out[4 * i + 2]);
    check("Min", a[i], b[i], host_min(a[i], b[i]), out[4 * i + 3]);
  }
  for (int w = 0; w < warps; ++w) {
    float want_max = patterns[w][0], want_min = patterns[w][0];
    for (float v : patterns[w]) { want_max = host_max(want_max, v); want_min = host_min(want_min, v); }
    check("warp Max", patterns[w][0], patterns[w][31], want_max, warp_out[2 * w]);
    check("warp Min", patterns[w][0], patterns[w][31], want_min, warp_out[2 * w + 1]);
  }
  std::printf("reduce combine operators: %d of %d cases passed\n", passed, cases);
  return passed == cases ? 0 : 1;
}
