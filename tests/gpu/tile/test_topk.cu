// Device test of solder/reduce/topk.cuh, the group step of the code generator's cooperative top-k
// (src/backend/cuda/kernel_writer_topk.cpp): groups of G lanes, each lane holding SLOTS candidates,
// pick their k first candidates in the top-k order (NaN first, larger values, lower indices), one
// candidate per round, exactly as the generated code does. Checked against a host sort in the same
// order, on random data rich in ties, NaN, ±0 and ±inf, with some slots empty. Outputs are poisoned
// first. Exit status 0 only when every case matches bit for bit.
// Build: nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Idevice tests/gpu/tile/test_topk.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <solder/reduce/topk.cuh>

namespace {

constexpr int kSlots = 5, kThreads = 256, kMaxK = 12;

template <int G>
__global__ void pick(const float* value, const float* index, const int* live, int k, float* out_value, float* out_index) {
  const int t = threadIdx.x, slice = t % G;
  float cv[kSlots], ci[kSlots];
  bool cl[kSlots];
  for (int c = 0; c < kSlots; ++c) {
    cv[c] = value[t * kSlots + c];
    ci[c] = index[t * kSlots + c];
    cl[c] = live[t * kSlots + c] != 0;
  }
  for (int r = 0; r < k; ++r) {
    solder::reduce::TopkCandidate mine{false, 0.0f, 0.0f, 0};
    for (int c = 0; c < kSlots; ++c) {
      const solder::reduce::TopkCandidate here{cl[c], cv[c], ci[c], slice * kSlots + c};
      if (solder::reduce::topk_first(here, mine)) mine = here;
    }
    const solder::reduce::TopkCandidate best = solder::reduce::topk_group_best<G>(mine);
    for (int c = 0; c < kSlots; ++c)
      if (best.live && best.owner == slice * kSlots + c) cl[c] = false;
    if (slice == 0) {
      out_value[(t / G) * kMaxK + r] = best.live ? best.value : -INFINITY;
      out_index[(t / G) * kMaxK + r] = best.live ? best.index : -1.0f;
    }
  }
}

bool before(float v, float vi, float w, float wi) {
  const bool vn = std::isnan(v), wn = std::isnan(w);
  if (vn != wn) return vn;
  if (!vn && v != w) return v > w;
  return vi < wi;
}

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, 4) == 0;
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); std::exit(2); } } while (0)

template <int G>
bool run_case(std::mt19937& rng, int k, int pattern, int* failures) {
  const int n = kThreads * kSlots, groups = kThreads / G;
  std::vector<float> value(n), index(n);
  std::vector<int> live(n);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f};
  for (int e = 0; e < n; ++e) {
    const int r = static_cast<int>(rng() % 100);
    value[e] = pattern == 0 ? std::normal_distribution<float>(0, 1)(rng)
             : pattern == 1 ? static_cast<float>(rng() % 4)  // many ties
             : (r < 30 ? specials[rng() % 6] : static_cast<float>(static_cast<int>(rng() % 7) - 3));
    index[e] = static_cast<float>(rng() % (pattern == 1 ? 8 : 1000));  // pattern 1: equal (value, index) pairs too
    live[e] = (rng() % 100) < (pattern == 2 ? 40 : 90);
  }
  float *dv, *di, *ov, *oi;
  int* dl;
  CHECK(cudaMalloc(&dv, n * 4)); CHECK(cudaMalloc(&di, n * 4)); CHECK(cudaMalloc(&dl, n * 4));
  CHECK(cudaMalloc(&ov, groups * kMaxK * 4)); CHECK(cudaMalloc(&oi, groups * kMaxK * 4));
  CHECK(cudaMemcpy(dv, value.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(di, index.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dl, live.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(ov, 0x7f, groups * kMaxK * 4));  // poison
  CHECK(cudaMemset(oi, 0x7f, groups * kMaxK * 4));
  pick<G><<<1, kThreads>>>(dv, di, dl, k, ov, oi);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> got_v(groups * kMaxK), got_i(groups * kMaxK);
  CHECK(cudaMemcpy(got_v.data(), ov, groups * kMaxK * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got_i.data(), oi, groups * kMaxK * 4, cudaMemcpyDeviceToHost));
  cudaFree(dv); cudaFree(di); cudaFree(dl); cudaFree(ov); cudaFree(oi);
  bool ok = true;
  for (int g = 0; g < groups; ++g) {
    std::vector<std::pair<float, float>> c;
    for (int e = g * G * kSlots; e < (g + 1) * G * kSlots; ++e)
      if (live[e]) c.push_back({value[e], index[e]});
    std::stable_sort(c.begin(), c.end(), [](auto& a, auto& b) { return before(a.first, a.second, b.first, b.second); });
    for (int r = 0; r < k; ++r) {
      float wv = r < static_cast<int>(c.size()) ? c[r].first : -INFINITY, wi = r < static_cast<int>(c.size()) ? c[r].second : -1.0f;
      if (!same_bits(wv, got_v[g * kMaxK + r]) || !same_bits(wi, got_i[g * kMaxK + r])) {
        if (++*failures <= 5)
          std::printf("FAIL G=%d k=%d pattern=%d group %d rank %d: want (%g, %g) got (%g, %g)\n", G, k, pattern, g, r, wv, wi,
                      got_v[g * kMaxK + r], got_i[g * kMaxK + r]);
        ok = false;
      }
    }
  }
  return ok;
}

}  // namespace

int main() {
  std::mt19937 rng(20261122);
  int cases = 0, passed = 0, failures = 0;
  for (int pattern = 0; pattern < 3; ++pattern)
    for (int k : {1, 2, 5, 8, 12})
      for (int rep = 0; rep < 4; ++rep) {
        passed += run_case<4>(rng, k, pattern, &failures);
        passed += run_case<8>(rng, k, pattern, &failures);
        passed += run_case<16>(rng, k, pattern, &failures);
        passed += run_case<32>(rng, k, pattern, &failures);
        cases += 4;
      }
  std::printf("topk group step: %d of %d cases passed\n", passed, cases);
  return passed == cases ? 0 : 1;
}
