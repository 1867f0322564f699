// Benchmark of the sm_90a GEMM skeleton (device/solder/gemm/sm90_gemm.cuh).
//
//   bench_gemm headline [JSON]   bf16 and fp8 e4m3 at 8192³ (A: M×K, B: N×K, both K-major; bf16 out;
//                                fp8 with per-row and per-column f32 scales), a few tile configurations.
//   bench_gemm sweep JSON        ≥ 50 (shape, configuration) pairs for the cost model (bench/gemm/README.md).
//   bench_gemm diag [JSON]       epilogue and raster diagnostics (no-store and no-scale epilogues, GroupM 8/32).
//   bench_gemm profile           bf16 128x256 s3 and e4m3 128x256 s4 at 8192³, a few launches each (for ncu).
//   bench_gemm pingpong [JSON]   e4m3 and bf16 8192³: the cooperative 128x256 tiles against the ping-pong
//                                schedule's 64xBN tiles (Config::Pingpong), pair-store and row-store
//                                epilogues, two rounds (peer: peer.py in the same call).
//   bench_gemm pingpong-profile  one launch each of the fastest cooperative and ping-pong e4m3 kernels (ncu).
//   bench_gemm tf32 [JSON]       3xTF32 end to end at 4096³ and 8192³ (f32 A, B stored [K, N]: the split of
//                                both and the tf32 GEMM over 3K in one graph, f32 out; the split alone; the
//                                accuracy of 256 sampled outputs against float64): 128x256 s4 c2 with the
//                                corrections first (the split's default) and hi·hi first, s3, split-K 2; two
//                                rounds; then the tf32 GEMM alone (values rounded to tf32, bf16 out) at K = N
//                                and K = 3N in five tiles, one round (peer: peer.py JSON f32, cuBLAS SGEMM and
//                                1xTF32, same accuracy check).
//   bench_gemm splitk [JSON]     f16 M = 128 GEMMs of ffn (N 3072 K 8192, N 4096 K 11008, N 8192 K 3072)
//                                without and with split-K; each split-K output is compared with the
//                                split-1 output of the same tile (peer: peer.py splitk).
//
// Timing: a CUDA graph of `per_graph` launches, replayed after a warm-up; CUDA events around each
// replay; the median replay divided by per_graph. Inputs are random (never zeros). The peers (cuBLAS via
// torch.matmul, torch._scaled_mm) are timed the same way by peer.py in the same run (run.sh).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include <solder/gemm/tf32_split.cuh>

#include "../../tests/gpu/gemm/gemm_test_util.h"
#include "../common/graph_timer.h"

using namespace gemm_test;
using solder::gemm::Config;

namespace {

struct Result {
  std::string dtype, config;
  int m, n, k, batch;
  int bm, bn, bk, stages, consumers, cluster_m, blocks;
  double ms, tflops;
  int split_k = 1;
  bool pingpong = false;
};

std::vector<Result> results;

template <class C, class E>
double time_ms(const TensorMap& a, const TensorMap& b, const GemmShape& shape, const E& epi, int per_graph, int replays,
               int persistent, const solder::gemm::SplitKWorkspace& ws = {}) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  launch<C>(a, b, shape, epi, stream, persistent, ws);  // first launch outside the capture (sets attributes, loads)
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const double ms =
      graph_timing::graph_median_ms(stream, per_graph, replays, [&](cudaStream_t s) { launch<C>(a, b, shape, epi, s, persistent, ws); });
  CUDA_CHECK(cudaStreamDestroy(stream));
  return ms;
}

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::bf16: return "bf16";
    case Dtype::f16: return "f16";
    case Dtype::e4m3: return "e4m3";
    case Dtype::e5m2: return "e5m2";
    case Dtype::tf32: return "tf32";
  }
  return "?";
}

// Uniform values in [-1, 1) from a hash of the index, stored as `dtype` (padding included: ld = K).
__global__ void fill_random(unsigned char* data, size_t count, int dtype, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    const float x = float(h & 0xFFFFFF) / float(1 << 23) - 1.0f;
    if (dtype == int(Dtype::bf16)) reinterpret_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(x);
    else if (dtype == int(Dtype::f16)) reinterpret_cast<__half*>(data)[i] = __float2half_rn(x);
    else if (dtype == int(Dtype::e4m3)) data[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    else if (dtype == int(Dtype::tf32)) reinterpret_cast<float*>(data)[i] = solder::gemm::round_tf32(x);
    else data[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  }
}

// A K-major rows × k operand filled on the device (the benchmark needs no host copy).
Operand device_operand(Dtype dtype, int rows, int k, unsigned seed) {
  Operand op;
  op.dtype = dtype;
  op.k_major = true;
  op.rows = rows;
  op.k = k;
  op.ld = k;
  op.batch_stride = int64_t(rows) * k;
  op.bytes = size_t(op.batch_stride) * solder::gemm::dtype_bytes(dtype);
  CUDA_CHECK(cudaMalloc(&op.device, op.bytes));
  fill_random<<<1024, 256>>>(static_cast<unsigned char*>(op.device), size_t(op.batch_stride), int(dtype), seed);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return op;
}

int sm_count = 132;
std::vector<uint16_t> last_output;  // the last bench()'s bf16 output (splitk mode compares them)

// Diagnostics only: an epilogue that stores nothing (unless the dot product is exactly 1e30, which
// random inputs never give; the test keeps the compiler from removing the main loop).
struct NoStore {
  __nv_bfloat16* out;
  int ld;
  long long batch_stride;
  const float* row_scale;
  const float* col_scale;
  __device__ void operator()(int b, int row, int col, float acc) const {
    if (acc == 1e30f) out[0] = __float2bfloat16_rn(acc);
  }
};

// Times configuration C on A (M×K) and B (N×K) with a bf16 output (fp8: row and column scales too).
// persistent: as many blocks as are resident at once, looping over the tiles; else one block per tile.
template <class C, class E = StoreBf16>
void bench(const Operand& A, const Operand& B, int replays, bool persistent = true, bool scales = true,
           const char* note = "") {
  const int m = A.rows, n = B.rows, k = A.k;
  TensorMap ma = make_map(A, C::ABoxRows, C::BK, "A"), mb = make_map(B, C::BBoxRows, C::BK, "B");
  __nv_bfloat16* out = nullptr;
  float *rs = nullptr, *cs = nullptr;
  CUDA_CHECK(cudaMalloc(&out, size_t(m) * n * 2));
  const bool fp8 = solder::gemm::dtype_is_fp8(C::TA);
  if (fp8 && scales) {
    std::vector<float> r(m, 0.5f), c(n, 0.25f);
    CUDA_CHECK(cudaMalloc(&rs, m * 4));
    CUDA_CHECK(cudaMalloc(&cs, n * 4));
    CUDA_CHECK(cudaMemcpy(rs, r.data(), m * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cs, c.data(), n * 4, cudaMemcpyHostToDevice));
  }
  GemmShape shape;
  shape.m = m;
  shape.n = n;
  shape.k = k;
  E epi{out, n, (long long)m * n, rs, cs};
  const double flops = 2.0 * m * n * double(k);
  const int per_graph = std::max(2, std::min(50, int(2e12 / flops)));
  const int blocks = persistent ? resident_blocks<C, E>() : 0;
  solder::gemm::SplitKWorkspace ws = make_workspace<C>(shape);
  const double ms = time_ms<C>(ma, mb, shape, epi, per_graph, replays, blocks, ws);
  last_output.assign(size_t(m) * n, 0);
  CUDA_CHECK(cudaMemcpy(last_output.data(), out, size_t(m) * n * 2, cudaMemcpyDeviceToHost));
  free_workspace(ws);
  char name[96];
  char split[16] = "";
  if (C::SplitK > 1) std::snprintf(split, sizeof split, " k%d", C::SplitK);
  std::snprintf(name, sizeof name, "%dx%dx%d s%d%s%s%s%s%s", C::BM, C::BN, C::BK, C::Stages, C::ClusterM > 1 ? " c2" : "", split,
                C::Pingpong ? " pp" : "", persistent ? " pers" : "", note);
  Result r{dtype_name(C::TA), name, m, n, k, 1, C::BM, C::BN, C::BK, C::Stages, C::Consumers, C::ClusterM,
           int(solder::gemm::launch_config(C{}, shape, blocks).grid[0]), ms, flops / ms / 1e9, C::SplitK, C::Pingpong};
  results.push_back(r);
  std::printf("solder %-5s %-18s M=%-6d N=%-6d K=%-6d %9.4f ms %7.1f TFLOP/s\n", r.dtype.c_str(), name, m, n, k, ms, r.tflops);
  std::fflush(stdout);
  CUDA_CHECK(cudaFree(out));
  if (rs) CUDA_CHECK(cudaFree(rs));
  if (cs) CUDA_CHECK(cudaFree(cs));
}

void write_json(const char* path) {
  if (!path) return;
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    std::exit(1);
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"kernel\": \"solder::gemm::gemm_kernel (sm90_gemm.cuh)\",\n  \"results\": [\n", prop.name, date);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"dtype\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"batch\": %d, \"config\": {\"bm\": %d, \"bn\": %d, "
                 "\"bk\": %d, \"stages\": %d, \"consumers\": %d, \"a_k_major\": true, \"b_k_major\": true, \"split_k\": %d, "
                 "\"cluster_m\": %d, \"cluster_n\": 1, \"pingpong\": %s, \"blocks\": %d}, \"ms\": %.6f, \"tflops\": %.2f}%s\n",
                 r.dtype.c_str(), r.m, r.n, r.k, r.batch, r.bm, r.bn, r.bk, r.stages, r.consumers, r.split_k, r.cluster_m, r.pingpong ? "true" : "false", r.blocks, r.ms, r.tflops,
                 i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

// The catalogue the sweep times (bf16, K-major operands).
using B_64x128_s6 = Config<Dtype::bf16, Dtype::bf16, 64, 128, 6>;
using B_64x256_s4 = Config<Dtype::bf16, Dtype::bf16, 64, 256, 4>;
using B_128x64_s8 = Config<Dtype::bf16, Dtype::bf16, 128, 64, 8>;
using B_128x128_s4 = Config<Dtype::bf16, Dtype::bf16, 128, 128, 4>;
using B_128x128_s6 = Config<Dtype::bf16, Dtype::bf16, 128, 128, 6>;
using B_128x256_s3 = Config<Dtype::bf16, Dtype::bf16, 128, 256, 3>;
using B_128x256_s4 = Config<Dtype::bf16, Dtype::bf16, 128, 256, 4>;
using B_128x256_s4_c2 = Config<Dtype::bf16, Dtype::bf16, 128, 256, 4, true, true, 2>;
using B_128x128_s6_c2 = Config<Dtype::bf16, Dtype::bf16, 128, 128, 6, true, true, 2>;
using B_128x256_s3_c2 = Config<Dtype::bf16, Dtype::bf16, 128, 256, 3, true, true, 2>;
using B_128x256_s3_c2_g8 = Config<Dtype::bf16, Dtype::bf16, 128, 256, 3, true, true, 2, 8>;
using B_128x256_s3_c2_g32 = Config<Dtype::bf16, Dtype::bf16, 128, 256, 3, true, true, 2, 32>;
using T_128x128_s6 = Config<Dtype::tf32, Dtype::tf32, 128, 128, 6>;
using T_128x256_s4 = Config<Dtype::tf32, Dtype::tf32, 128, 256, 4>;
using T_128x256_s4_c2 = Config<Dtype::tf32, Dtype::tf32, 128, 256, 4, true, true, 2>;
using T_128x256_s3_c2 = Config<Dtype::tf32, Dtype::tf32, 128, 256, 3, true, true, 2>;
using T_128x256_s4_c2_k2 = Config<Dtype::tf32, Dtype::tf32, 128, 256, 4, true, true, 2, 16, 2>;
using F8_128x256_s4_c2_g8 = Config<Dtype::e4m3, Dtype::e4m3, 128, 256, 4, true, true, 2, 8>;
using F8_128x128_s6 = Config<Dtype::e4m3, Dtype::e4m3, 128, 128, 6>;
using F8_128x256_s4_c2 = Config<Dtype::e4m3, Dtype::e4m3, 128, 256, 4, true, true, 2>;
using F8_128x256_s4 = Config<Dtype::e4m3, Dtype::e4m3, 128, 256, 4>;
using F8_64x256_s4 = Config<Dtype::e4m3, Dtype::e4m3, 64, 256, 4>;
// The ping-pong schedule (Config::Pingpong): BM 64, two consumer warpgroups on alternate tiles.
template <Dtype T, int BN, int S, int CM>
using PP = Config<T, T, 64, BN, S, true, true, CM, 16, 1, 1, 1, true>;

// Split-K at M = 128 (f16; ffn's GEMMs): the split-1 tiles and split 2/4/8.
template <int BM, int BN, int S, int Split>
using Hk = Config<Dtype::f16, Dtype::f16, BM, BN, S, true, true, 1, 16, Split>;

int splitk_failures = 0;

// Compares last_output with `reference` (bf16 values): max |difference| over max |reference|.
void compare_to(const std::vector<uint16_t>& reference, const char* what) {
  double worst = 0, scale = 0;
  bool nan = false;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double r = decode16(Dtype::bf16, reference[i]), g = decode16(Dtype::bf16, last_output[i]);
    if (std::isnan(g) || std::isnan(r)) nan = true;
    worst = std::max(worst, std::fabs(g - r));
    scale = std::max(scale, std::fabs(r));
  }
  const bool ok = !nan && worst <= 2e-2 * scale;
  if (!ok) ++splitk_failures;
  std::printf("  check %-24s vs split 1: max|diff| / max|ref| = %.2e%s %s\n", what, scale > 0 ? worst / scale : worst,
              nan ? " (NaN)" : "", ok ? "ok" : "MISMATCH");
}

template <int BM, int BN, int S, int... Splits>
void splitk_family(const Operand& A, const Operand& B) {
  bench<Hk<BM, BN, S, 1>>(A, B, 15);
  const std::vector<uint16_t> reference = last_output;
  ((bench<Hk<BM, BN, S, Splits>>(A, B, 15), compare_to(reference, "split")), ...);
}

void splitk_shape(int m, int n, int k) {
  Operand A = device_operand(Dtype::f16, m, k, 5), B = device_operand(Dtype::f16, n, k, 6);
  splitk_family<128, 128, 6, 2, 4, 8>(A, B);
  splitk_family<64, 128, 4, 2, 4>(A, B);
  splitk_family<128, 64, 4, 2, 4>(A, B);
  splitk_family<64, 256, 4, 2, 4>(A, B);
  free_operand(A);
  free_operand(B);
}

// 3xTF32 end to end (tf32_split.cuh): C[n, n] = A·B of f32 A [M, K] (K-major) and B stored [K, N] (a
// weight b[k, n]), as f32: the split of A and of B (B transposed; part p lo where bit p of ALo / BLo is
// set) and the tf32 GEMM over K' = 3K, in one CUDA graph; the split alone; and the accuracy of the f32
// output on 256 sampled elements against float64 of the f32 operands (max |error| / Σ|a·b|, and the
// relative L2 error over the samples: the verifier's measure); with hi·hi first (the BigFirst masks) also
// of the hi·hi product alone (1xTF32, K' = K).
__global__ void fill_f32(float* data, size_t count, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    data[i] = float(h) / 2147483648.0f - 1.0f;  // all 32 bits of the hash: the low 13 fraction bits are set
  }
}

template <class C, int ALo = solder::gemm::kTf32SplitA, int BLo = solder::gemm::kTf32SplitB>
void bench_3xtf32(int n, int replays) {
  namespace g = solder::gemm;
  const int m = n, k = n;
  const long long ld3 = 3LL * k;
  float *a, *b, *a3, *b3, *out;
  CUDA_CHECK(cudaMalloc(&a, size_t(m) * k * 4));
  CUDA_CHECK(cudaMalloc(&b, size_t(k) * n * 4));
  CUDA_CHECK(cudaMalloc(&a3, size_t(m) * ld3 * 4));
  CUDA_CHECK(cudaMalloc(&b3, size_t(n) * ld3 * 4));
  CUDA_CHECK(cudaMalloc(&out, size_t(m) * n * 4));
  fill_f32<<<1024, 256>>>(a, size_t(m) * k, 11);
  fill_f32<<<1024, 256>>>(b, size_t(k) * n, 12);
  CUDA_CHECK(cudaGetLastError());
  g::Tf32SplitArgs sa{a, k, 1, m, k, a3, ld3}, sb{b, 1, n, n, k, b3, ld3};
  const g::Tf32SplitGrid ga = g::tf32_split_grid(sa), gb = g::tf32_split_grid(sb);
  auto split = [&](cudaStream_t s) {
    g::tf32_split_kernel<ALo><<<dim3(ga.x, ga.y), g::kTf32SplitThreads, 0, s>>>(sa);
    g::tf32_split_kernel<BLo><<<dim3(gb.x, gb.y), g::kTf32SplitThreads, 0, s>>>(sb);
  };
  const Operand A3 = tf32x3_operand(m, k, ld3, a3), B3 = tf32x3_operand(n, k, ld3, b3);
  const TensorMap ma = make_map(A3, C::ABoxRows, C::BK, "A3"), mb = make_map(B3, C::BBoxRows, C::BK, "B3");
  GemmShape shape;
  shape.m = m;
  shape.n = n;
  shape.k = 3 * k;
  const StoreF32 epi{out, n, (long long)m * n, nullptr, nullptr};
  const int blocks = resident_blocks<C, StoreF32>();
  solder::gemm::SplitKWorkspace ws = make_workspace<C>(shape, blocks);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  split(stream);
  launch<C>(ma, mb, shape, epi, stream, blocks, ws);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const double flops = 2.0 * m * n * double(k);  // the f32 product's FLOPs (the GEMM does 3x)
  const int per_graph = std::max(2, std::min(20, int(2e12 / (3 * flops))));
  const double ms_all = graph_timing::graph_median_ms(stream, per_graph, replays, [&](cudaStream_t s) {
    split(s);
    launch<C>(ma, mb, shape, epi, s, blocks, ws);
  });
  const double ms_split = graph_timing::graph_median_ms(stream, per_graph, replays, split);
  // Accuracy on 256 sampled elements: 3xTF32 (the output of the timed graph), then hi·hi alone.
  std::vector<float> ha(size_t(m) * k), hb(size_t(k) * n), got3(size_t(m) * n), got1(size_t(m) * n);
  CUDA_CHECK(cudaMemcpy(ha.data(), a, ha.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hb.data(), b, hb.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got3.data(), out, got3.size() * 4, cudaMemcpyDeviceToHost));
  constexpr bool kBigFirst = (ALo & 1) == 0 && (BLo & 1) == 0;  // the first K of K' is hi·hi
  if (kBigFirst) {
    GemmShape one = shape;
    one.k = k;
    launch<C>(ma, mb, one, epi, stream, blocks, ws);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(got1.data(), out, got1.size() * 4, cudaMemcpyDeviceToHost));
  }
  std::mt19937 rng(7);
  double worst3 = 0, worst1 = 0, err3 = 0, err1 = 0, ref2 = 0;  // err, ref2: the relative L2 error's sums
  bool nan = false;
  for (int s = 0; s < 256; ++s) {
    const int r = int(rng() % m), c = int(rng() % n);
    double dot = 0, mag = 0;
    for (int kk = 0; kk < k; ++kk) {
      const double p = double(ha[size_t(r) * k + kk]) * double(hb[size_t(kk) * n + c]);
      dot += p;
      mag += std::fabs(p);
    }
    const float g3 = got3[size_t(r) * n + c], g1 = got1[size_t(r) * n + c];
    nan |= std::isnan(g3);
    worst3 = std::max(worst3, std::fabs(double(g3) - dot) / mag);
    worst1 = std::max(worst1, std::fabs(double(g1) - dot) / mag);
    err3 += (double(g3) - dot) * (double(g3) - dot);
    err1 += (double(g1) - dot) * (double(g1) - dot);
    ref2 += dot * dot;
  }
  char name[96];
  std::snprintf(name, sizeof name, "3xTF32 %dx%dx%d s%d%s%s%s%s", C::BM, C::BN, C::BK, C::Stages, C::ClusterM > 1 ? " c2" : "",
                C::SplitK > 1 ? (" k" + std::to_string(C::SplitK)).c_str() : "", C::Pingpong ? " pp" : "", kBigFirst ? " big-first" : "");
  char one_text[64] = "";
  if (kBigFirst) std::snprintf(one_text, sizeof one_text, "; 1xTF32 %.2e rel_l2 %.2e", worst1, std::sqrt(err1 / ref2));
  std::printf("solder f32   %-36s M=%-6d N=%-6d K=%-6d %9.4f ms %7.1f TFLOP/s (f32 FLOPs; split %.4f ms)  3xTF32 worst/sum|ab| %.2e "
              "rel_l2 %.2e%s%s\n",
              name, m, n, k, ms_all, flops / ms_all / 1e9, ms_split, worst3, std::sqrt(err3 / ref2), one_text, nan ? " NaN" : "");
  std::fflush(stdout);
  Result res{kBigFirst ? "f32-3xtf32-big-first" : "f32-3xtf32", name, m, n, k, 1, C::BM, C::BN, C::BK, C::Stages, C::Consumers,
             C::ClusterM, blocks, ms_all, flops / ms_all / 1e9, C::SplitK, C::Pingpong};
  results.push_back(res);
  Result split_only{"f32-split", "tf32 split A and B", m, n, k, 1, 0, 0, 0, 0, 0, 1, 0, ms_split, 0, 1, false};
  results.push_back(split_only);
  CUDA_CHECK(cudaStreamDestroy(stream));
  free_workspace(ws);
  for (float* p : {a, b, a3, b3, out}) CUDA_CHECK(cudaFree(p));
}

void sweep_shape(int m, int n, int k) {
  const int replays = 5;
  Operand A = device_operand(Dtype::bf16, m, k, 1), B = device_operand(Dtype::bf16, n, k, 2);
  bench<B_64x128_s6>(A, B, replays);
  bench<B_64x256_s4>(A, B, replays);
  bench<B_128x64_s8>(A, B, replays);
  bench<B_128x128_s4>(A, B, replays);
  bench<B_128x128_s6>(A, B, replays);
  bench<B_128x256_s3>(A, B, replays);
  bench<B_128x256_s4>(A, B, replays);
  bench<B_128x256_s4_c2>(A, B, replays);
  free_operand(A);
  free_operand(B);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "headline";
  const char* json = argc > 2 ? argv[2] : nullptr;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  sm_count = prop.multiProcessorCount;
  if (mode == "headline") {
    const int n = 8192;
    Operand A = device_operand(Dtype::bf16, n, n, 1), B = device_operand(Dtype::bf16, n, n, 2);
    bench<B_128x256_s4>(A, B, 15);
    bench<B_128x256_s4>(A, B, 15, false);
    bench<B_128x256_s4_c2>(A, B, 15);
    bench<B_128x256_s4_c2>(A, B, 15, false);
    bench<B_128x128_s6_c2>(A, B, 15);
    bench<B_128x256_s3_c2>(A, B, 15);
    bench<B_128x256_s3>(A, B, 15);
    bench<B_128x128_s6>(A, B, 15);
    free_operand(A);
    free_operand(B);
    Operand A8 = device_operand(Dtype::e4m3, n, n, 3), B8 = device_operand(Dtype::e4m3, n, n, 4);
    bench<F8_128x256_s4>(A8, B8, 15);
    bench<F8_128x256_s4>(A8, B8, 15, false);
    bench<F8_128x256_s4_c2>(A8, B8, 15);
    bench<F8_128x256_s4_c2>(A8, B8, 15, false);
    bench<F8_128x128_s6>(A8, B8, 15);
    bench<F8_64x256_s4>(A8, B8, 15);
    free_operand(A8);
    free_operand(B8);
  } else if (mode == "diag") {  // what the epilogue and the raster cost (not part of the headline)
    const int n = 8192;
    Operand A = device_operand(Dtype::bf16, n, n, 1), B = device_operand(Dtype::bf16, n, n, 2);
    for (int rep = 0; rep < 2; ++rep) {
      bench<B_128x256_s3_c2>(A, B, 15);
      bench<B_128x256_s3_c2, NoStore>(A, B, 15, true, true, " no-store");
      bench<B_128x256_s3_c2_g8>(A, B, 15, true, true, " group8");
      bench<B_128x256_s3_c2_g32>(A, B, 15, true, true, " group32");
      bench<B_128x256_s4_c2>(A, B, 15);
    }
    free_operand(A);
    free_operand(B);
    Operand A8 = device_operand(Dtype::e4m3, n, n, 3), B8 = device_operand(Dtype::e4m3, n, n, 4);
    for (int rep = 0; rep < 2; ++rep) {
      bench<F8_128x256_s4_c2>(A8, B8, 15);
      bench<F8_128x256_s4_c2>(A8, B8, 15, true, false, " no-scales");
      bench<F8_128x256_s4_c2, NoStore>(A8, B8, 15, true, false, " no-store");
      bench<F8_128x256_s4_c2_g8>(A8, B8, 15, true, true, " group8");
    }
    free_operand(A8);
    free_operand(B8);
  } else if (mode == "profile") {  // one launch each of the two headline kernels (for ncu)
    const int n = 8192;
    Operand A = device_operand(Dtype::bf16, n, n, 1), B = device_operand(Dtype::bf16, n, n, 2);
    bench<B_128x256_s3>(A, B, 1);
    free_operand(A);
    free_operand(B);
    Operand A8 = device_operand(Dtype::e4m3, n, n, 3), B8 = device_operand(Dtype::e4m3, n, n, 4);
    bench<F8_128x256_s4>(A8, B8, 1);
    free_operand(A8);
    free_operand(B8);
  } else if (mode == "pingpong" || mode == "pingpong-profile") {
    const int n = 8192;
    const bool profile = mode == "pingpong-profile";
    const int replays = profile ? 1 : 15;
    Operand A8 = device_operand(Dtype::e4m3, n, n, 3), B8 = device_operand(Dtype::e4m3, n, n, 4);
    for (int rep = 0; rep < (profile ? 1 : 2); ++rep) {
      bench<F8_128x256_s4_c2>(A8, B8, replays);
      bench<PP<Dtype::e4m3, 256, 5, 2>>(A8, B8, replays);
      if (profile) break;
      bench<F8_128x256_s4_c2, RowStoreBf16>(A8, B8, replays, true, true, " rows");
      bench<PP<Dtype::e4m3, 256, 4, 1>>(A8, B8, replays);
      bench<PP<Dtype::e4m3, 256, 4, 2>, RowStoreBf16>(A8, B8, replays, true, true, " rows");
      bench<PP<Dtype::e4m3, 128, 8, 2>>(A8, B8, replays);
      bench<PP<Dtype::e4m3, 192, 6, 2>>(A8, B8, replays);
    }
    free_operand(A8);
    free_operand(B8);
    if (!profile) {
      Operand A = device_operand(Dtype::bf16, n, n, 1), B = device_operand(Dtype::bf16, n, n, 2);
      for (int rep = 0; rep < 2; ++rep) {
        bench<B_128x256_s4_c2>(A, B, replays);
        bench<PP<Dtype::bf16, 256, 4, 1>>(A, B, replays);
        bench<PP<Dtype::bf16, 256, 5, 2>>(A, B, replays);
        bench<PP<Dtype::bf16, 256, 4, 2>, RowStoreBf16>(A, B, replays, true, true, " rows");
      }
      free_operand(A);
      free_operand(B);
    }
  } else if (mode == "tf32") {
    for (int n : {4096, 8192})
      for (int rep = 0; rep < 2; ++rep) {
        bench_3xtf32<T_128x256_s4_c2>(n, 15);
        bench_3xtf32<T_128x256_s4_c2, solder::gemm::kTf32SplitABigFirst, solder::gemm::kTf32SplitBBigFirst>(n, 15);
        bench_3xtf32<T_128x256_s3_c2>(n, 15);
        bench_3xtf32<T_128x256_s4_c2_k2>(n, 15);
      }
    for (int n : {4096, 8192}) {
      for (int k : {n, 3 * n}) {
        Operand A = device_operand(Dtype::tf32, n, k, 5), B = device_operand(Dtype::tf32, n, k, 6);
        for (int rep = 0; rep < 1; ++rep) {
          bench<T_128x256_s4_c2>(A, B, 15);
          bench<T_128x256_s3_c2>(A, B, 15);
          bench<T_128x256_s4>(A, B, 15);
          bench<T_128x128_s6>(A, B, 15);
          bench<PP<Dtype::tf32, 256, 4, 2>>(A, B, 15);
        }
        free_operand(A);
        free_operand(B);
      }
    }
  } else if (mode == "splitk") {
    splitk_shape(128, 3072, 8192);
    splitk_shape(128, 4096, 11008);
    splitk_shape(128, 8192, 3072);
    std::printf("splitk checks: %s\n", splitk_failures ? "FAILED" : "all ok");
  } else if (mode == "sweep") {
    const int shapes[][3] = {{8192, 8192, 8192}, {4096, 4096, 4096}, {2048, 2048, 2048}, {1024, 1024, 1024},
                             {128, 3072, 8192},  {512, 4096, 4096},  {4096, 1024, 4096}, {16384, 4096, 1024}};
    for (const auto& s : shapes) sweep_shape(s[0], s[1], s[2]);
  } else {
    std::fprintf(stderr, "usage: bench_gemm headline|sweep|diag|profile|pingpong|pingpong-profile|splitk|tf32 [JSON]\n");
    return 2;
  }
  write_json(json);
  return splitk_failures ? 1 : 0;
}
