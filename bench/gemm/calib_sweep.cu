// The calibration sweep of the GEMM skeleton for the cost model (bench/gemm/sweep_calibration.sh).
//
//   calib_sweep OUT.json [--quick]
//
// Times every configuration linked in (calib_config.cu, one object each) on the shapes of the
// gemm_chains suite (bench/suites.py FLASHFUSER: ffn and gated_ffn's up and down projections at M = 128)
// and on the same N, K at M = 512, 2048, 8192. Operands as in the suite: f16, A [M, K] K-major,
// B [K, N] N-major; bf16 output; persistent grids as the generated kernels launch. Every timed launch
// is checked on 32 sampled outputs against a float64 host dot product (the operands are a hash of the
// index, computed the same way on both sides); a configuration that fails the check is left out of the
// results and listed under "failures" (exit 1). Writes the sweep JSON of bench/gemm/README.md.
// Stops starting new shapes after CALIB_DEADLINE_S seconds (default 50) and writes what it has.
#include <chrono>
#include <cmath>
#include <ctime>
#include <string>
#include <tuple>

#include "calib_sweep.h"

namespace calib {
std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}
}  // namespace calib

namespace {

using gemm_test::Operand;

// Uniform in [-1, 1) from a hash of the index and seed, rounded to f16: the same on host and device.
__host__ __device__ inline float hashed(size_t i, unsigned seed) {
  unsigned h = unsigned(i) * 2654435761u ^ seed;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  return __half2float(__float2half_rn(float(h & 0xFFFFFF) / float(1 << 23) - 1.0f));
}

__global__ void fill(__half* data, size_t count, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    data[i] = __float2half_rn(hashed(i, seed));
}

// rows × k operand: K-major (element (r, k) at r·k_extent + k) or MN-major (at k·rows + r).
Operand operand(bool k_major, int rows, int k, unsigned seed) {
  Operand op;
  op.dtype = gemm_test::Dtype::f16;
  op.k_major = k_major;
  op.rows = rows;
  op.k = k;
  op.ld = k_major ? k : rows;
  op.batch_stride = int64_t(rows) * k;
  op.bytes = size_t(op.batch_stride) * 2;
  CUDA_CHECK(cudaMalloc(&op.device, op.bytes));
  fill<<<1024, 256>>>(static_cast<__half*>(op.device), size_t(op.batch_stride), seed);
  CUDA_CHECK(cudaGetLastError());
  return op;
}
size_t index_of(const Operand& op, int row, int k) {
  return op.k_major ? size_t(row) * op.ld + k : size_t(k) * op.ld + row;
}

struct Result {
  int m, n, k, bm, bn, stages, blocks;
  double ms;
};

struct Shape {
  int m, n, k;
  const char* what;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: calib_sweep OUT.json [--quick]\n");
    return 2;
  }
  const bool quick = argc > 2 && std::string(argv[2]) == "--quick";
  const char* deadline_env = std::getenv("CALIB_DEADLINE_S");
  const double deadline_s = deadline_env ? std::atof(deadline_env) : 50;
  const auto start = std::chrono::steady_clock::now();
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), %zu configurations linked in\n", prop.name, prop.multiProcessorCount,
              calib::registry().size());
  std::vector<calib::Entry> entries = calib::registry();
  std::sort(entries.begin(), entries.end(), [](const calib::Entry& a, const calib::Entry& b) {
    return std::tie(a.bm, a.bn, a.stages) < std::tie(b.bm, b.bn, b.stages);
  });
  // (M, N, K): the up projection x·W1 is M × N × K, the down projection h·W2 is M × L × N.
  std::vector<Shape> shapes = {
      {128, 8192, 3072, "S1 up"},   {128, 3072, 8192, "S1 down"}, {128, 11008, 4096, "S3 up"},
      {128, 4096, 11008, "S3 down"}, {128, 16384, 4096, "G5 up"},  {128, 4096, 16384, "G5 down"},
      {128, 5632, 2048, "S2 up"},   {128, 3072, 1024, "S8 up"},   {128, 1024, 3072, "S8 down"},
      {128, 768, 768, "G7"},        {512, 8192, 3072, "S1 up"},   {512, 4096, 11008, "S3 down"},
      {2048, 8192, 3072, "S1 up"},  {2048, 4096, 11008, "S3 down"}, {8192, 8192, 3072, "S1 up"},
      {8192, 11008, 4096, "S3 up"},
  };
  if (quick) shapes = {{128, 11008, 4096, "S3 up"}, {128, 4096, 11008, "S3 down"}, {2048, 8192, 3072, "S1 up"}};
  std::vector<Result> results;
  std::vector<std::string> failures;
  for (const Shape& s : shapes) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > deadline_s) {
      std::printf("deadline: %.0f s elapsed, skipping M=%d N=%d K=%d and the rest\n", elapsed, s.m, s.n, s.k);
      break;
    }
    Operand a = operand(true, s.m, s.k, 11), b = operand(false, s.n, s.k, 23);
    __nv_bfloat16* out = nullptr;
    CUDA_CHECK(cudaMalloc(&out, size_t(s.m) * s.n * 2));
    CUDA_CHECK(cudaDeviceSynchronize());
    // Sampled outputs and their float64 references.
    std::vector<std::pair<int, int>> samples;
    std::vector<double> reference;
    for (int i = 0; i < 32; ++i) {
      const int row = int((i * 7919u + 13) % unsigned(s.m)), col = int((i * 104729u + 7) % unsigned(s.n));
      double sum = 0;
      for (int kk = 0; kk < s.k; ++kk) sum += double(hashed(index_of(a, row, kk), 11)) * hashed(index_of(b, col, kk), 23);
      samples.push_back({row, col});
      reference.push_back(sum);
    }
    for (const calib::Entry& e : entries) {
      CUDA_CHECK(cudaMemset(out, 0xFF, size_t(s.m) * s.n * 2));  // NaN: an unwritten output fails the check
      int blocks = 0;
      const double ms = e.time(a, b, out, s.m * double(s.n) * s.k < 1e10 ? 9 : 5, &blocks);
      double worst = 0;
      for (size_t i = 0; i < samples.size(); ++i) {
        __nv_bfloat16 v;
        CUDA_CHECK(cudaMemcpy(&v, out + size_t(samples[i].first) * s.n + samples[i].second, 2, cudaMemcpyDeviceToHost));
        const double got = __bfloat162float(v), want = reference[i];
        const double error = std::fabs(got - want) / (std::fabs(want) + 0.05 * std::sqrt(double(s.k)) / 3);
        worst = std::isnan(got) ? INFINITY : std::max(worst, error);
      }
      char line[200];
      std::snprintf(line, sizeof line, "M=%-5d N=%-6d K=%-6d %3dx%-3d s%d  %9.4f ms %7.1f TFLOP/s  blocks %4d  error %.1e%s",
                    s.m, s.n, s.k, e.bm, e.bn, e.stages, ms, 2.0 * s.m * s.n * double(s.k) / ms / 1e9, blocks, worst,
                    worst > 1e-2 ? "  FAILED" : "");
      std::printf("%s  (%s)\n", line, s.what);
      std::fflush(stdout);
      if (worst > 1e-2) failures.push_back(line);
      else results.push_back({s.m, s.n, s.k, e.bm, e.bn, e.stages, blocks, ms});
    }
    CUDA_CHECK(cudaFree(out));
    gemm_test::free_operand(a);
    gemm_test::free_operand(b);
  }
  FILE* f = std::fopen(argv[1], "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 2;
  }
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"kernel\": \"solder::gemm::gemm_kernel (sm90_gemm.cuh), "
                  "bench/gemm/calib_sweep.cu\",\n  \"results\": [\n", prop.name, date);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"dtype\": \"f16\", \"m\": %d, \"n\": %d, \"k\": %d, \"batch\": 1, \"output\": \"bf16\", \"config\": {\"bm\": %d, "
                 "\"bn\": %d, \"bk\": 64, \"stages\": %d, \"consumers\": %d, \"a_k_major\": true, \"b_k_major\": false, \"split_k\": 1, "
                 "\"cluster_m\": 1, \"cluster_n\": 1, \"blocks\": %d}, \"ms\": %.6f, \"tflops\": %.2f}%s\n",
                 r.m, r.n, r.k, r.bm, r.bn, r.stages, r.bm / 64, r.blocks, r.ms, 2.0 * r.m * r.n * double(r.k) / r.ms / 1e9,
                 i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"failures\": [");
  for (size_t i = 0; i < failures.size(); ++i) std::fprintf(f, "%s\n    \"%s\"", i ? "," : "", failures[i].c_str());
  std::fprintf(f, "%s]\n}\n", failures.empty() ? "" : "\n  ");
  std::fclose(f);
  std::printf("%zu measured, %zu failed the check, %.1f s\n", results.size(), failures.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return failures.empty() ? 0 : 1;
}
