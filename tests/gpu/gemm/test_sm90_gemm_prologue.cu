// Device test of the GEMM skeleton's operand-A prologue path (device/solder/gemm/sm90_gemm_prologue.cuh)
// against a float64 host reference of the rounded operands, in the two families the code generator
// writes:
//   quant  per-row amax side reduction with a pre-sweep, A = x / (amax / 448) rounded to e4m3 into the
//          converted shared-memory tile (fp8 SS wgmma), B e4m3 K-major, out = acc · amax / 448; once
//          through operand() alone and once with the row-divisor path (RowDivisor: x · RN(1/d) where
//          row_divide.h proves the same e4m3 value, else the IEEE division), and with the epilogue's
//          optional per-row factor and column pairs (RowFactor, Pairs);
//   rms    Σx² side reduction during the one sweep, A = x · g[k] rounded to bf16 (bf16 SS wgmma), B bf16
//          K- or N-major, out = acc · rsqrt(Σx² / K + 1e-5).
// The quantised operand is also checked bit for bit (exact cases: B the identity, so acc = aq): rows
// of random data and rows whose divisor is 1 (amax = 448), where many quotients are e4m3 ties and the
// row-divisor path must fall back to the division to round them to even.
// Each case also checks the side values the epilogue receives (written for column 0) and runs ragged
// M, N and K (K < BK, K not a multiple of BK, M and N not multiples of the tile), one block per tile
// and persistent blocks, and 2-block clusters along N that share A's tile (ClusterN 2); then the same
// families on the converter-warpgroup schedule (ConverterWarpgroup true, the last cases). Outputs
// are poisoned with NaN; operand padding holds NaN. Exit 0 when every case passes, 1 on a failure, 3
// on a CUDA error. Build and run: tests/gpu/gemm/run.sh.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <solder/gemm/sm90_gemm_prologue.cuh>

#include "gemm_test_util.h"

using namespace gemm_test;
using solder::gemm::PrologueConfig;

namespace {

int failures = 0, cases = 0;

struct QuantPrologue {
  static constexpr int Sides = 1;
  static constexpr bool PreSweep = true;
  __device__ void side_init(float* s) const { s[0] = 0.0f; }
  __device__ void side_step(float* s, int, int, float x) const { s[0] = fmaxf(s[0], fabsf(x)); }
  __device__ void side_merge(float* s, const float* o) const { s[0] = fmaxf(s[0], o[0]); }
  __device__ float operand(int, int, float x, const float* s) const { return x / (s[0] / 448.0f); }
};
struct QuantDividePrologue : QuantPrologue {
  static constexpr bool RowDivisor = true;
  __device__ float numerator(int, int, float x, const float*) const { return x; }
  __device__ float divisor(int, const float* s) const { return s[0] / 448.0f; }
};
struct RmsPrologue {
  const float* g;
  static constexpr int Sides = 1;
  static constexpr bool PreSweep = false;
  __device__ void side_init(float* s) const { s[0] = 0.0f; }
  __device__ void side_step(float* s, int, int, float x) const { s[0] += x * x; }
  __device__ void side_merge(float* s, const float* o) const { s[0] += o[0]; }
  __device__ float operand(int, int k, float x, const float*) const { return x * g[k]; }
};
struct QuantEpilogue {
  float* out;
  float* sides;
  int ld;
  bool raw = false;  // store acc itself (the exact cases)
  __device__ void operator()(int, int row, int col, float acc, const float* s) const {
    out[(long long)row * ld + col] = raw ? acc : acc * (s[0] / 448.0f);
    if (col == 0) sides[row] = s[0];
  }
};
// The same with the optional per-row factor and column pairs (the generated epilogues' fast path).
struct QuantFactorEpilogue : QuantEpilogue {
  static constexpr bool RowFactor = true;
  static constexpr bool Pairs = true;
  __device__ float row_factor(int row, const float* s) const {
    if (row < 0) return 0.0f;
    return s[0] / 448.0f;
  }
  __device__ void scaled(int, int row, int col, float acc, float factor) const {
    out[(long long)row * ld + col] = acc * factor;
    if (col == 0) sides[row] = factor * 448.0f;
  }
  __device__ void scaled_pair(int b, int row, int col, float acc0, float acc1, float factor) const {
    scaled(b, row, col, acc0, factor);
    scaled(b, row, col + 1, acc1, factor);
  }
};
struct RmsEpilogue {
  float* out;
  float* sides;
  int ld, k;
  __device__ void operator()(int, int row, int col, float acc, const float* s) const {
    out[(long long)row * ld + col] = acc * rsqrtf(s[0] / k + 1e-5f);
    if (col == 0) sides[row] = s[0];
  }
};

template <class C, class P, class E>
void launch_prologue(const TensorMap& a, const TensorMap& b, const solder::gemm::GemmShape& shape, const P& p, const E& e,
                     int persistent_blocks) {
  launch_on(solder::gemm::gemm_prologue_kernel<C, P, E>, solder::gemm::prologue_launch_config(C{}, shape, persistent_blocks),
            C::SmemBytes, cudaStream_t{}, false, a, b, shape, p, e);
  CUDA_CHECK(cudaDeviceSynchronize());
}

float round_bf16(float x) { return decode16(Dtype::bf16, encode16(Dtype::bf16, x)); }
float round_e4m3(float x) { return decode8(Dtype::e4m3, encode8(Dtype::e4m3, x)); }

// quant = true: the quant family (prologue QP); false: rms.
template <class C, bool quant, class QP = QuantPrologue, class QE = QuantEpilogue>
void run_case(const char* name, int m, int n, int k, int persistent, std::mt19937& rng) {
  ++cases;
  Operand A = make_operand(Dtype::bf16, true, m, k, 1, rng, 3.0f);
  Operand B = make_operand(C::TB, C::BKMajor, n, k, 1, rng);
  TensorMap map_a = make_map(A, C::BM, C::ABoxK, "A");
  TensorMap map_b = make_map(B, C::BBoxRows, C::BK, "B");
  std::vector<float> g(std::max(k, 1));
  std::uniform_real_distribution<float> gd(0.5f, 1.5f);
  for (float& x : g) x = round_bf16(gd(rng));
  float *d_g = nullptr, *d_out = nullptr, *d_sides = nullptr;
  CUDA_CHECK(cudaMalloc(&d_g, g.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_g, g.data(), g.size() * sizeof(float), cudaMemcpyHostToDevice));
  const int ld = n + 3;
  CUDA_CHECK(cudaMalloc(&d_out, size_t(m) * ld * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_sides, size_t(m) * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_out, 0xFF, size_t(m) * ld * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_sides, 0xFF, size_t(m) * sizeof(float)));
  solder::gemm::GemmShape shape;
  shape.m = m;
  shape.n = n;
  shape.k = k;
  if constexpr (quant) {
    QE e;
    e.out = d_out;
    e.sides = d_sides;
    e.ld = ld;
    launch_prologue<C>(map_a, map_b, shape, QP{}, e, persistent);
  } else {
    launch_prologue<C>(map_a, map_b, shape, RmsPrologue{d_g}, RmsEpilogue{d_out, d_sides, ld, k}, persistent);
  }
  std::vector<float> out(size_t(m) * ld), sides(m);
  CUDA_CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(sides.data(), d_sides, sides.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  double worst = 0;
  for (int r = 0; r < m; ++r) {
    // The side reduction and the rounded operand row, as the device computes them (f32 ops).
    float side = 0.0f;
    double side_ref = 0;
    for (int kk = 0; kk < k; ++kk) {
      const float x = A.at(0, r, kk);
      if (quant) side = std::max(side, std::fabs(x));
      side_ref += quant ? 0 : double(x) * x;
    }
    if (quant) side_ref = side;
    std::vector<double> arow(k);
    for (int kk = 0; kk < k; ++kk) {
      const float x = A.at(0, r, kk);
      arow[kk] = quant ? round_e4m3(x / (side / 448.0f)) : round_bf16(x * g[kk]);
    }
    const double scale = quant ? side_ref / 448.0 : 1.0 / std::sqrt(side_ref / std::max(k, 1) + 1e-5);
    if (!(std::fabs(sides[r] - side_ref) <= 1e-5 * std::fabs(side_ref) + 1e-6)) {
      if (bad++ < 5) std::printf("  %s: side of row %d: %g, expected %g\n", name, r, sides[r], side_ref);
    }
    for (int col = 0; col < n; ++col) {
      double dot = 0, mag = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double p = arow[kk] * B.at(0, col, kk);
        dot += p;
        mag += std::fabs(p);
      }
      const double ref = dot * scale;
      const double tol = ((quant ? 2e-3 : 1e-4) * mag + 1e-6) * std::fabs(scale) + 1e-5 * std::fabs(ref);
      const double got = out[size_t(r) * ld + col];
      const double err = std::fabs(got - ref);
      if (!(err <= tol)) {
        if (bad++ < 5) std::printf("  %s: (%d, %d): %g, expected %g (tolerance %g)\n", name, r, col, got, ref, tol);
      }
      worst = std::max(worst, err / (tol > 0 ? tol : 1));
    }
  }
  std::printf("%s %s M %d N %d K %d%s: %s (worst error / tolerance %.3f)\n", bad ? "FAIL" : "ok  ", name, m, n, k,
              persistent ? " persistent" : "", bad ? "mismatch" : "matches", worst);
  failures += bad > 0;
  free_operand(A);
  free_operand(B);
  CUDA_CHECK(cudaFree(d_g));
  CUDA_CHECK(cudaFree(d_out));
  CUDA_CHECK(cudaFree(d_sides));
}

template <class C, bool quant, class QP = QuantPrologue, class QE = QuantEpilogue>
void run_family(const char* name, std::mt19937& rng) {
  const int shapes[][3] = {{1, 17, 100}, {100, 129, 1000}, {256, 256, 512}, {129, 64, 64}, {77, 300, 200}, {50, 40, 30}, {300, 520, 777}};
  for (auto& s : shapes) run_case<C, quant, QP, QE>(name, s[0], s[1], s[2], 0, rng);
  run_case<C, quant, QP, QE>(name, 700, 900, 1100, 5, rng);  // persistent: 5 blocks loop over the tiles
  // Fewer blocks than tile-rows and at most two K tiles: each block meets several tile-rows, and the
  // converter runs a whole tile ahead of the consumers' epilogue (the side values' hand-over).
  run_case<C, quant, QP, QE>(name, 1000, 300, 200, 3, rng);
}

// An operand from explicit values f(row, k) (K-major, rounded to dtype, padding NaN).
template <class F>
Operand make_operand_from(Dtype dtype, int rows, int k, F f) {
  std::mt19937 unused(0);
  Operand op = make_operand(dtype, true, rows, k, 1, unused);
  const int esize = solder::gemm::dtype_bytes(dtype);
  std::vector<uint8_t> storage(op.bytes, 0xFF);
  for (int r = 0; r < rows; ++r)
    for (int kk = 0; kk < k; ++kk) {
      const int64_t index = int64_t(r) * op.ld + kk;
      const float x = f(r, kk);
      if (esize == 2) {
        const uint16_t bits = encode16(dtype, x);
        std::memcpy(&storage[index * 2], &bits, 2);
        op.values[size_t(r) * k + kk] = decode16(dtype, bits);
      } else {
        storage[index] = encode8(dtype, x);
        op.values[size_t(r) * k + kk] = decode8(dtype, storage[index]);
      }
    }
  CUDA_CHECK(cudaMemcpy(op.device, storage.data(), op.bytes, cudaMemcpyHostToDevice));
  return op;
}

// The quantised operand bit for bit: B is the identity (N = K), so acc(m, n) = aq(m, n) exactly.
// Rows with r % 3 == 0 hold 448 at k = r % K (divisor 1: quotients on e4m3 ties), the others random
// data of magnitude up to 3 (with zeros and tiny values).
template <class C, class QP>
void run_exact(const char* name, int m, int k, int persistent, std::mt19937& rng) {
  ++cases;
  std::uniform_real_distribution<float> wide(-448.0f, 448.0f), narrow(-3.0f, 3.0f), unit(0.0f, 1.0f);
  std::vector<float> raw(size_t(m) * k);
  for (int r = 0; r < m; ++r)
    for (int kk = 0; kk < k; ++kk) {
      float x = r % 3 == 0 ? wide(rng) : narrow(rng);
      const float u = unit(rng);
      if (u < 0.02f) x = 0.0f;
      else if (u < 0.04f) x *= 1e-6f;
      raw[size_t(r) * k + kk] = x;
    }
  for (int r = 0; r < m; r += 3) raw[size_t(r) * k + r % k] = 448.0f;
  Operand A = make_operand_from(Dtype::bf16, m, k, [&](int r, int kk) { return raw[size_t(r) * k + kk]; });
  Operand B = make_operand_from(C::TB, k, k, [](int r, int kk) { return r == kk ? 1.0f : 0.0f; });
  TensorMap map_a = make_map(A, C::BM, C::ABoxK, "A");
  TensorMap map_b = make_map(B, C::BBoxRows, C::BK, "B");
  float *d_out = nullptr, *d_sides = nullptr;
  const int ld = k;
  CUDA_CHECK(cudaMalloc(&d_out, size_t(m) * ld * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_sides, size_t(m) * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_out, 0xFF, size_t(m) * ld * sizeof(float)));
  solder::gemm::GemmShape shape;
  shape.m = m;
  shape.n = k;
  shape.k = k;
  QuantEpilogue e{d_out, d_sides, ld};
  e.raw = true;
  launch_prologue<C>(map_a, map_b, shape, QP{}, e, persistent);
  std::vector<float> out(size_t(m) * ld);
  CUDA_CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0, ties = 0;
  for (int r = 0; r < m; ++r) {
    float side = 0.0f;
    for (int kk = 0; kk < k; ++kk) side = std::max(side, std::fabs(A.at(0, r, kk)));
    const float d = side / 448.0f;
    for (int kk = 0; kk < k; ++kk) {
      const float q = A.at(0, r, kk) / d;  // the IEEE f32 quotient the program writes
      const float expected = round_e4m3(q);
      uint32_t bits;
      std::memcpy(&bits, &q, 4);
      ties += std::fabs(q) >= 0.015625f && (bits & 0xfffffu) == 0x80000u;
      const float got = out[size_t(r) * ld + kk];
      if (!(got == expected)) {
        if (bad++ < 5) std::printf("  %s exact: aq(%d, %d) = %g, expected %g (x %g, amax %g)\n", name, r, kk, got, expected, A.at(0, r, kk), side);
      }
    }
  }
  std::printf("%s %s exact M %d K %d%s: %s (%d e4m3 ties)\n", bad ? "FAIL" : "ok  ", name, m, k, persistent ? " persistent" : "",
              bad ? "mismatch" : "bit-identical aq", ties);
  failures += bad > 0;
  free_operand(A);
  free_operand(B);
  CUDA_CHECK(cudaFree(d_out));
  CUDA_CHECK(cudaFree(d_sides));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each case's line survives a timeout (the cluster cases run last)
  std::mt19937 rng(argc > 1 ? std::atoi(argv[1]) : 2026);
  using solder::gemm::Dtype;
  run_family<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 128, 3>, true>("quant e4m3 128x128 s3", rng);
  run_family<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3>, true>("quant e4m3 128x256 s3", rng);
  run_family<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 64, 128, 4>, true>("quant e4m3 64x128 s4", rng);
  run_family<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3>, true, QuantDividePrologue>("quant-divide e4m3 128x256 s3", rng);
  run_family<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 64, 128, 4>, true, QuantDividePrologue, QuantFactorEpilogue>(
      "quant-divide-factor e4m3 64x128 s4", rng);
  run_exact<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3>, QuantDividePrologue>("quant-divide e4m3 128x256 s3", 300, 512, 0, rng);
  run_exact<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3>, QuantDividePrologue>("quant-divide e4m3 128x256 s3", 257, 300, 3, rng);
  run_exact<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 128, 3>, QuantPrologue>("quant e4m3 128x128 s3", 200, 384, 0, rng);
  // Clusters of two blocks along N sharing the A tile (each loads one K box and multicasts it).
  using Cluster256 = PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3, true, 16, 1, 2>;
  using Cluster192 = PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 192, 3, true, 16, 1, 2>;
  run_family<Cluster256, true, QuantDividePrologue, QuantFactorEpilogue>("quant-divide-factor e4m3 128x256 s3 cluster 1x2", rng);
  run_family<Cluster192, true, QuantDividePrologue>("quant-divide e4m3 128x192 s3 cluster 1x2", rng);
  run_case<Cluster256, true, QuantDividePrologue>("quant-divide e4m3 128x256 s3 cluster 1x2", 1000, 2900, 700, 6, rng);  // 3 clusters, rows shared
  run_exact<Cluster256, QuantDividePrologue>("quant-divide e4m3 128x256 s3 cluster 1x2", 300, 600, 4, rng);
  run_family<PrologueConfig<Dtype::bf16, Dtype::bf16, Dtype::bf16, 128, 256, 4, false>, false>("rms bf16 128x256 s4 B N-major", rng);
  run_family<PrologueConfig<Dtype::bf16, Dtype::bf16, Dtype::bf16, 128, 128, 4, true>, false>("rms bf16 128x128 s4 B K-major", rng);
  // BM 64: two converter threads per row (each half of the row's chunks), 16-bit MMA type.
  run_family<PrologueConfig<Dtype::bf16, Dtype::bf16, Dtype::bf16, 64, 128, 4, true>, false>("rms bf16 64x128 s4 B K-major", rng);
  // Two ring stages only (each load waits for the stage read one K tile earlier).
  run_family<PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 2>, true, QuantDividePrologue, QuantFactorEpilogue>(
      "quant-divide-factor e4m3 128x256 s2", rng);
  // The converter-warpgroup schedule (ConverterWarpgroup true): a dedicated converter warpgroup
  // loads and converts A, the consumers load B and run the wgmma.
  using ConvQ256 = PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3, true, 16, 1, 1, true>;
  using ConvQ64 = PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 64, 128, 4, true, 16, 1, 1, true>;
  using ConvQ256S2 = PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 2, true, 16, 1, 1, true>;
  using ConvCluster = PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3, true, 16, 1, 2, true>;
  using ConvRmsN = PrologueConfig<Dtype::bf16, Dtype::bf16, Dtype::bf16, 128, 256, 4, false, 16, 1, 1, true>;
  using ConvRms64 = PrologueConfig<Dtype::bf16, Dtype::bf16, Dtype::bf16, 64, 128, 4, true, 16, 1, 1, true>;
  run_family<ConvQ256, true, QuantDividePrologue, QuantFactorEpilogue>("converter quant-divide-factor e4m3 128x256 s3", rng);
  run_family<ConvQ64, true>("converter quant e4m3 64x128 s4", rng);
  run_family<ConvQ256S2, true, QuantDividePrologue>("converter quant-divide e4m3 128x256 s2", rng);
  run_exact<ConvQ256, QuantDividePrologue>("converter quant-divide e4m3 128x256 s3", 257, 300, 3, rng);
  run_family<ConvCluster, true, QuantDividePrologue>("converter quant-divide e4m3 128x256 s3 cluster 1x2", rng);
  run_family<ConvRmsN, false>("converter rms bf16 128x256 s4 B N-major", rng);
  run_family<ConvRms64, false>("converter rms bf16 64x128 s4 B K-major", rng);
  std::printf("%d of %d prologue cases passed\n", cases - failures, cases);
  return failures ? 1 : 0;
}
