// Device test of the attention skeleton's dual mode (device/solder/attention/sm90_attention_dual.cuh):
// differential attention o = x0 − λ·x1, x_c = softmax(q_c·k_cᵀ · scale)·v, with q and k of layout
// [batch][2][heads][seq][D] (the halves at a fixed lead index) and v [batch][heads_kv][seq][D], against
// a float64 host reference of the rounded inputs. bf16 and f16, head dims 64 and 128, 2 to 4 stages, BN
// 64 and 128; ragged sequence lengths (1, 17, 100, 129, 257, 300, 1000, 2048), seq_q ≠ seq_k,
// grouped-query heads, padded rows; no mask, causal (and an offset that leaves rows with no key: zeros),
// and a softcap score. The combine runs in f32 (the generated code's o = a0 − λ·a1 before the one
// rounding): the output's bound is the skeleton test's for each half.
//
// The staged combine (DualConfig::StagedCombine: each consumer half of the columns, 16-byte row stores)
// and persistent blocks (7 blocks, several rounds; one or two Q buffers) must also give the bits of the
// pair-by-pair combine on one block per tile, run on the same inputs; an epilogue whose rows are not
// 16-byte aligned takes the pair-by-pair fallback. Argument 2 filters the cases by label.
//
// Every output is poisoned with NaN before each run and NaN never passes; row padding of Q, K and V
// holds NaN. Each case runs twice and must give the same bits. Exit 0 when every case passes, 1 on a
// failure, 3 on a CUDA error. Build and run: tests/gpu/attention_skeleton/run.sh dual.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <solder/attention/sm90_attention_dual.cuh>

#include "attention_test_util.h"

using namespace attention_test;
using solder::attention::CausalMask;
using solder::attention::DualConfig;
using solder::attention::NoMask;
using solder::attention::PlainScore;
using solder::attention::SoftcapScore;

namespace {

int failures = 0, cases = 0;
const char* filter = nullptr;  // argv[2]: run only the cases whose label contains it
bool selected(const char* label) { return !filter || std::strstr(label, filter); }

// o[bh][row][col] = x0 − lambda · x1 (one fma: __fmaf_rn, so that the compiler cannot contract the kernel's
// x0 = O·(1/Σp) into it instead, a choice that differs between kernels), rounded once to T.
template <Dtype T>
struct DiffStore {
  void* out;
  int seq;
  int dim;
  float lambda;
  __device__ void combine(int bh, int row, int col, float x00, float x01, float x10, float x11) const {
    Store16<T>{out, dim, seq}(bh, row, col, __fmaf_rn(-lambda, x10, x00), __fmaf_rn(-lambda, x11, x01));
  }
};

// The same value through the staged combine (kStagedCombine): the word combine() would store, λ read from
// device memory (a 0-d tensor, as the generated epilogue reads it). With `misalign` its staged_row(0, 0) is
// not 16-byte aligned, which makes the kernel take each consumer's pair-by-pair combine() instead.
template <Dtype T>
struct DiffStaged {
  void* out;
  int seq;
  int dim;
  const float* lambda;
  bool misalign;
  static constexpr bool kStagedCombine = true;
  __device__ void combine(int bh, int row, int col, float x00, float x01, float x10, float x11) const {
    Store16<T>{out, dim, seq}(bh, row, col, __fmaf_rn(-lambda[0], x10, x00), __fmaf_rn(-lambda[0], x11, x01));
  }
  __device__ unsigned staged_combine(int, int, int, float x00, float x01, float x10, float x11) const {
    if constexpr (T == Dtype::bf16) {
      const __nv_bfloat162 w = __floats2bfloat162_rn(__fmaf_rn(-lambda[0], x10, x00), __fmaf_rn(-lambda[0], x11, x01));
      return *reinterpret_cast<const unsigned*>(&w);
    } else {
      const __half2 w = __floats2half2_rn(__fmaf_rn(-lambda[0], x10, x00), __fmaf_rn(-lambda[0], x11, x01));
      return *reinterpret_cast<const unsigned*>(&w);
    }
  }
  __device__ void* staged_row(int bh, int row) const {
    return static_cast<unsigned char*>(out) + (size_t(bh) * seq + row) * dim * 2 + (misalign ? 2 : 0);
  }
};

struct Case {
  int batch, heads, heads_kv, seq_q, seq_k, pad;
};

double host_logit(const PlainScore&, double dot, double scale) { return dot * scale; }
double host_logit(const SoftcapScore& s, double dot, double scale) { return double(s.cap) * std::tanh(dot * scale / double(s.cap)); }
bool host_visible(const NoMask&, int, int) { return true; }
bool host_visible(const CausalMask& m, int row, int col) { return col <= row + m.offset; }

// Persistent blocks: 7 of them by default, so that every shape but the smallest runs several rounds (with
// clusters of two: 3 clusters); 0 launches one block (cluster) per work tile (pair).
int persistent_blocks = 7;

template <class C, class Score, class Mask, class E>
void launch_dual(const TensorMap& q, const TensorMap& k, const TensorMap& v, const AttentionShape& shape, const Score& score, const Mask& mask,
                 const E& epilogue) {
  auto kernel = solder::attention::attention_dual_kernel<C, Score, Mask, E>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SmemBytes));
  const solder::attention::LaunchGeometry g = solder::attention::dual_launch_config(C{}, shape, C::Persistent ? persistent_blocks : 0);
  if constexpr (C::Cluster > 1) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(g.grid[0]);
    config.blockDim = dim3(g.block[0]);
    config.dynamicSmemBytes = g.smem_bytes;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = C::Cluster;
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, q, k, v, shape, score, mask, epilogue));
  } else {
    kernel<<<dim3(g.grid[0]), dim3(g.block[0]), g.smem_bytes>>>(q, k, v, shape, score, mask, epilogue);
  }
  CUDA_CHECK(cudaGetLastError());
}

template <class C, class Score, class Mask>
void run_case(const char* name, const Case& c, const Score& score, const Mask& mask, std::mt19937& rng, bool misalign = false) {
  if (!selected(name)) return;
  constexpr int D = C::HeadDim;
  const int bh = c.batch * c.heads, bh_kv = c.batch * c.heads_kv;
  // q: [batch][2][heads], k: [batch][2][heads_kv] (the halves at lead index 0 and 1), v: [batch][heads_kv]
  Tensor q = make_tensor(C::T, 2 * bh, c.seq_q, D, D + c.pad, &rng, 2.0f);
  Tensor k = make_tensor(C::T, 2 * bh_kv, c.seq_k, D, D + c.pad, &rng, 2.0f);
  Tensor v = make_tensor(C::T, bh_kv, c.seq_k, D, D + c.pad, &rng, 1.0f);
  Tensor o = make_tensor(C::T, bh, c.seq_q, D, D, nullptr, 0.0f);
  auto q_of = [&](int b, int half) { return (b / c.heads) * 2 * c.heads + half * c.heads + b % c.heads; };
  auto k_of = [&](int g, int half) { return (g / c.heads_kv) * 2 * c.heads_kv + half * c.heads_kv + g % c.heads_kv; };
  TensorMap mq = make_map(q, C::QBoxRows, "q"), mk = make_map(k, C::KVBoxRows, "k"), mv = make_map(v, C::KVBoxRows, "v");
  AttentionShape shape;
  shape.batch = c.batch;
  shape.heads = c.heads;
  shape.heads_kv = c.heads_kv;
  shape.q_heads = 2 * c.heads, shape.q_head0 = 0;
  shape.k_heads = 2 * c.heads_kv, shape.k_head0 = 0;
  shape.seq_q = c.seq_q;
  shape.seq_k = c.seq_k;
  std::uniform_real_distribution<float> lam_dist(0.1f, 0.9f);
  const float lambda = lam_dist(rng);
  const DiffStore<C::T> epilogue{o.device, c.seq_q, D, lambda};

  const double scale = 1.0 / std::sqrt(double(D));
  const size_t count = size_t(bh) * c.seq_q * D;
  std::vector<double> ref(count), mag(count);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int b = 0; b < bh; ++b)
    for (int i = 0; i < c.seq_q; ++i) {
      const int g = (b / c.heads) * c.heads_kv + (b % c.heads) / (c.heads / c.heads_kv);
      double x[2][D], m[2][D];
      for (int half = 0; half < 2; ++half) {
        std::vector<double> w(c.seq_k, 0.0);
        double mx = -INFINITY;
        for (int j = 0; j < c.seq_k; ++j) {
          if (!host_visible(mask, i, j)) continue;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(q.at(q_of(b, half), i, d)) * double(k.at(k_of(g, half), j, d));
          w[j] = host_logit(score, dot, scale);
          mx = std::max(mx, w[j]);
        }
        double total = 0;
        for (int j = 0; j < c.seq_k; ++j) {
          w[j] = host_visible(mask, i, j) ? std::exp(w[j] - mx) : 0.0;
          total += w[j];
        }
        for (int d = 0; d < D; ++d) {
          double acc = 0, a = 0;
          for (int j = 0; j < c.seq_k; ++j) {
            acc += w[j] * double(v.at(g, j, d));
            a += w[j] * std::fabs(double(v.at(g, j, d)));
          }
          x[half][d] = total > 0 ? acc / total : 0.0;
          m[half][d] = total > 0 ? a / total : 0.0;
        }
      }
      for (int d = 0; d < D; ++d) {
        const size_t at = (size_t(b) * c.seq_q + i) * D + d;
        ref[at] = x[0][d] - double(lambda) * x[1][d];
        mag[at] = m[0][d] + double(lambda) * m[1][d];
      }
    }

  std::vector<uint16_t> first(count), got(count), pairs;
  float* lambda_device = nullptr;
  CUDA_CHECK(cudaMalloc(&lambda_device, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(lambda_device, &lambda, sizeof(float), cudaMemcpyHostToDevice));
  for (int run = 0; run < 2; ++run) {
    CUDA_CHECK(cudaMemset(o.device, 0xFF, o.bytes));
    if constexpr (C::StagedCombine)
      launch_dual<C>(mq, mk, mv, shape, score, mask, DiffStaged<C::T>{o.device, c.seq_q, D, lambda_device, misalign});
    else
      launch_dual<C>(mq, mk, mv, shape, score, mask, epilogue);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(run == 0 ? first.data() : got.data(), o.device, o.bytes, cudaMemcpyDeviceToHost));
  }
  // The staged combine computes what consumer 0's pair-by-pair combine() stores: the same bits.
  long long unlike = 0;
  if constexpr (C::StagedCombine) {
    pairs.resize(count);
    CUDA_CHECK(cudaMemset(o.device, 0xFF, o.bytes));
    launch_dual<DualConfig<C::T, C::HeadDim, C::BN, C::Stages>>(mq, mk, mv, shape, score, mask, epilogue);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(pairs.data(), o.device, o.bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) unlike += got[i] != pairs[i];
  }
  // Clusters of two (K/V multicast) compute what the same Config on single blocks computes: the same bits.
  long long unlike_single = 0;
  if constexpr (C::Cluster > 1) {
    std::vector<uint16_t> single(count);
    CUDA_CHECK(cudaMemset(o.device, 0xFF, o.bytes));
    launch_dual<DualConfig<C::T, C::HeadDim, C::BN, C::Stages, C::StagedCombine, C::Persistent, C::QBuffers>>(
        mq, mk, mv, shape, score, mask, DiffStaged<C::T>{o.device, c.seq_q, D, lambda_device, misalign});
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(single.data(), o.device, o.bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) unlike_single += got[i] != single[i];
  }
  CUDA_CHECK(cudaFree(lambda_device));
  ++cases;
  const double unit = C::T == Dtype::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  long long bad = 0, nan = 0, moved = 0;
  double worst = 0, err2 = 0, ref2 = 0;
  size_t first_bad = size_t(-1);
  for (size_t i = 0; i < count; ++i) {
    const double g = decode16(C::T, got[i]);
    const double err = std::fabs(g - ref[i]);
    const double bound = 2 * unit * mag[i] + unit * std::fabs(ref[i]) + 1e-5;
    if (std::isnan(g)) ++nan;
    if (got[i] != first[i]) ++moved;
    if (!(err <= bound)) {
      ++bad;
      if (first_bad == size_t(-1)) first_bad = i;
    }
    worst = std::max(worst, err / bound);
    err2 += (g - ref[i]) * (g - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  const bool ok = bad == 0 && nan == 0 && moved == 0 && unlike == 0 && unlike_single == 0;
  if (!ok) ++failures;
  std::printf("%s %-30s D%-3d B%d H%d/%d Sq%-5d Sk%-5d pad%d: %lld wrong, %lld NaN, %lld differ run to run, worst err/bound %.3f, rel L2 %.2e",
              ok ? "OK  " : "FAIL", name, D, c.batch, c.heads, c.heads_kv, c.seq_q, c.seq_k, c.pad, bad, nan, moved, worst,
              std::sqrt(err2 / (ref2 + 1e-300)));
  if constexpr (C::StagedCombine) std::printf(", %lld differ from the pair-by-pair combine", unlike);
  if constexpr (C::Cluster > 1) std::printf(", %lld differ from single blocks", unlike_single);
  std::printf("\n");
  if (!ok && first_bad != size_t(-1)) {
    const size_t row = first_bad / D;
    std::printf("     first wrong: bh %zu row %zu d %zu: got %.6f, expected %.6f\n", row / c.seq_q, row % c.seq_q, first_bad % D,
                decode16(C::T, got[first_bad]), ref[first_bad]);
  }
  std::fflush(stdout);
  free_tensor(q);
  free_tensor(k);
  free_tensor(v);
  free_tensor(o);
}

const Case kShapes[] = {
    {1, 1, 1, 1, 1, 0},     {1, 2, 2, 17, 17, 8},   {2, 3, 3, 100, 100, 0},   {1, 2, 1, 129, 300, 8},
    {1, 2, 2, 300, 129, 0}, {2, 4, 2, 257, 257, 0}, {1, 2, 2, 1000, 1000, 0}, {1, 1, 1, 2048, 2048, 0},
};

template <class C>
void run_config(const char* name, std::mt19937& rng, bool functors) {
  const float log2e = 1.4426950408889634f;
  const float scale = 1.0f / std::sqrt(float(C::HeadDim));
  const PlainScore plain{log2e * scale};
  char label[96];
  for (const Case& c : kShapes) {
    std::snprintf(label, sizeof label, "%s plain", name);
    run_case<C>(label, c, plain, NoMask{}, rng);
  }
  if (!functors) return;
  for (const Case& c : {Case{2, 3, 3, 100, 100, 0}, Case{1, 2, 1, 129, 300, 8}, Case{1, 2, 2, 1000, 1000, 0}}) {
    std::snprintf(label, sizeof label, "%s causal", name);
    run_case<C>(label, c, plain, CausalMask{0}, rng);
    std::snprintf(label, sizeof label, "%s softcap 3", name);
    run_case<C>(label, c, SoftcapScore{log2e, scale / 3.0f, 3.0f}, NoMask{}, rng);
  }
  std::snprintf(label, sizeof label, "%s causal offset -5", name);
  run_case<C>(label, Case{2, 3, 3, 100, 100, 0}, plain, CausalMask{-5}, rng);
  if constexpr (C::StagedCombine) {
    // the pair-by-pair fallback (rows not 16-byte aligned)
    for (const Case& c : {Case{2, 3, 3, 100, 100, 0}, Case{1, 2, 1, 129, 300, 8}}) {
      std::snprintf(label, sizeof label, "%s unaligned", name);
      run_case<C>(label, c, plain, NoMask{}, rng, true);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned seed = argc > 1 ? unsigned(std::strtoul(argv[1], nullptr, 10)) : 2026u;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), seed %u\n", prop.name, prop.multiProcessorCount, seed);
  if (argc > 2) filter = argv[2];
  std::mt19937 rng(seed);
  // the emitter's dual configurations (hd64: 4 stages, hd128: 2), then other tiles and f16
  // the staged combine (the emitter's default), each case also against the pair-by-pair combine's bits
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true>>("dual bf16 d64 64x128 s4 staged", rng, true);
  run_config<DualConfig<Dtype::bf16, 128, 128, 2, true>>("dual bf16 d128 64x128 s2 staged", rng, true);
  run_config<DualConfig<Dtype::f16, 64, 64, 3, true>>("dual f16 d64 64x64 s3 staged", rng, false);
  // persistent blocks (7) with the staged combine: two Q buffers at hd64, one at hd128
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true, true, 2>>("dual bf16 d64 64x128 s4 persistent q2", rng, true);
  run_config<DualConfig<Dtype::bf16, 128, 128, 2, true, true, 1>>("dual bf16 d128 64x128 s2 persistent q1", rng, true);
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true, true, 1>>("dual bf16 d64 64x128 s4 persistent q1", rng, false);
  // clusters of two with K/V multicast (hd64 only), each case also against the same Config on single
  // blocks: on 3 clusters (7 blocks asked), 1 cluster and one cluster per pair of work tiles (0)
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true, true, 2, 2>>("dual bf16 d64 64x128 s4 persistent q2 cluster2 b7", rng, true);
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true, true, 1, 2>>("dual bf16 d64 64x128 s4 persistent q1 cluster2 b7", rng, true);
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true, false, 1, 2>>("dual bf16 d64 64x128 s4 staged cluster2", rng, false);
  persistent_blocks = 2;
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true, true, 2, 2>>("dual bf16 d64 64x128 s4 persistent q2 cluster2 b2", rng, false);
  persistent_blocks = 0;
  run_config<DualConfig<Dtype::bf16, 64, 128, 4, true, true, 2, 2>>("dual bf16 d64 64x128 s4 persistent q2 cluster2 b0", rng, false);
  persistent_blocks = 7;
  run_config<DualConfig<Dtype::bf16, 64, 128, 4>>("dual bf16 d64 64x128 s4", rng, true);
  run_config<DualConfig<Dtype::bf16, 128, 128, 2>>("dual bf16 d128 64x128 s2", rng, true);
  run_config<DualConfig<Dtype::bf16, 64, 64, 3>>("dual bf16 d64 64x64 s3", rng, false);
  run_config<DualConfig<Dtype::f16, 64, 128, 4>>("dual f16 d64 64x128 s4", rng, false);
  run_config<DualConfig<Dtype::bf16, 128, 64, 4>>("dual bf16 d128 64x64 s4", rng, false);
  std::printf("%s: %d of %d cases passed\n", failures ? "FAILED" : "OK", cases - failures, cases);
  return failures ? 1 : 0;
}
