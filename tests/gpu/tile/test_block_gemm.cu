// Device tests of solder::tile::BlockGemm (device/solder/tile/block_gemm.cuh) against a float64 host reference.
//
// Each case computes C[M,N] = C0 + Σ_chunks A_chunk · B_chunk in one block: the K dimension is staged in
// `chunks` pieces of K (cp_async_16 into Swizzle tiles for the 16-bit operands, or stored as float for the
// Float operands), BlockGemm::accumulate once per piece (the accumulators stay in registers across pieces,
// as the generated loop keeps them), then write(accumulate = true) into a float C tile initialised from C0.
// Outputs are poisoned with 0xFF bytes (NaN) before the kernel, shared memory inside it; NaN never passes.
// Sweep: bf16, f16 × B k-major ([n][k], ldmatrix) and n-major ([k][n], ldmatrix.trans) × shapes M ∈ {1, 5, 16,
// 32, 64, 128} (M < 16: one padded m-tile), N ∈ {16 … 128}, K ∈ {16 … 256}, 1–8 warps (warp grids with
// split K); Float operands on a subset with a ragged depth (the last k-step padded with zeros).
// Data: "exact" (small integers: every output must equal the reference bit for bit) and "real" (uniform
// reals rounded to the 16-bit type; bound (2 Kt + 2) 2^-23 (Σ|a||b| + |c0|)).
// Flags: --verbose (names each case on stderr before running it).
#include <solder/tile/block_gemm.cuh>
#include <solder/tile/cp_async.cuh>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace st = solder::tile;

static std::string current_case = "startup";
static bool verbose = false;
static int passed = 0, failed = 0;

#define GEMM_CHECK_CUDA(call)                                                                                 \
  do {                                                                                                        \
    cudaError_t status_ = (call);                                                                             \
    if (status_ != cudaSuccess) {                                                                             \
      std::printf("%s:%d: %s failed: %s (case %s)\n%d passed, %d failed\n", __FILE__, __LINE__, #call,       \
                  cudaGetErrorString(status_), current_case.c_str(), passed, failed + 1);                     \
      std::exit(2);                                                                                           \
    }                                                                                                         \
  } while (0)

// ---- device side ----------------------------------------------------------------------------------------------

__device__ void poison_shared(unsigned char* smem, int bytes) {
  for (int i = threadIdx.x * 16; i < bytes; i += blockDim.x * 16)
    *reinterpret_cast<uint4*>(smem + i) = make_uint4(~0u, ~0u, ~0u, ~0u);
  __syncthreads();
}

// A: [M][chunks·K] row-major; B: k_major ? [N][chunks·K] : [chunks·K][N]; c0, c: [M][N].
// float_operands: A and B held as float tiles, A with `depth` valid columns per piece (the rest must read 0).
template <class T, int M, int N, int K, int WARPS, bool k_major, bool float_operands>
__global__ void block_gemm_kernel(const T* a, const T* b, const float* c0, float* c, int chunks, int depth) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int a_bytes = (M * K * (float_operands ? 4 : 2) + 127) / 128 * 128;
  constexpr int b_bytes = (K * N * (float_operands ? 4 : 2) + 127) / 128 * 128;
  float* const c_tile = reinterpret_cast<float*>(smem + a_bytes + b_bytes);
  poison_shared(smem, a_bytes + b_bytes + M * N * 4);
  const int KT = chunks * K;
  st::BlockGemm<T, M, N, K, WARPS> gemm;
  for (int piece = 0; piece < chunks; ++piece) {
    if constexpr (!float_operands) {
      T* const a_tile = reinterpret_cast<T*>(smem);
      T* const b_tile = reinterpret_cast<T*>(smem + a_bytes);
      for (int v = threadIdx.x; v < M * K / 8; v += blockDim.x) {
        const int row = v / (K / 8), col = v % (K / 8) * 8;
        st::cp_async_16(a_tile + st::Swizzle<K>::offset(row, col), a + row * KT + piece * K + col);
      }
      if constexpr (k_major) {
        for (int v = threadIdx.x; v < N * K / 8; v += blockDim.x) {
          const int row = v / (K / 8), col = v % (K / 8) * 8;
          st::cp_async_16(b_tile + st::Swizzle<K>::offset(row, col), b + row * KT + piece * K + col);
        }
      } else {
        for (int v = threadIdx.x; v < K * N / 8; v += blockDim.x) {
          const int row = v / (N / 8), col = v % (N / 8) * 8;
          st::cp_async_16(b_tile + st::Swizzle<N>::offset(row, col), b + (piece * K + row) * N + col);
        }
      }
      st::cp_async_commit();
      st::cp_async_wait<0>();
      __syncthreads();
      gemm.accumulate(st::SwizzledA<T, M, K>{a_tile}, st::SwizzledB<T, K, N, k_major>{b_tile});
    } else {
      float* const a_tile = reinterpret_cast<float*>(smem);
      float* const b_tile = reinterpret_cast<float*>(smem + a_bytes);
      // Only the first `depth` columns of A are written (the rest stay poisoned: FloatA must not read them).
      for (int i = threadIdx.x; i < M * K; i += blockDim.x)
        if (i % K < depth) a_tile[i] = static_cast<float>(a[i / K * KT + piece * K + i % K]);
      for (int i = threadIdx.x; i < K * N; i += blockDim.x)
        b_tile[i] = k_major ? static_cast<float>(b[i / K * KT + piece * K + i % K]) : static_cast<float>(b[(piece * K + i / N) * N + i % N]);
      __syncthreads();
      st::FloatA<T> fa{a_tile, M, depth, K, 1};
      st::FloatB<T> fb{b_tile, depth, k_major ? 1 : N, k_major ? K : 1};
      gemm.accumulate(fa, fb);
    }
    __syncthreads();  // the tiles are restaged next
  }
  for (int i = threadIdx.x; i < M * N; i += blockDim.x) c_tile[i] = c0[i];
  __syncthreads();
  gemm.write(c_tile, N, 1, true);
  __syncthreads();
  for (int i = threadIdx.x; i < M * N; i += blockDim.x) c[i] = c_tile[i];
}

// ---- host side ------------------------------------------------------------------------------------------------

template <class T> float to_float(T v) { return static_cast<float>(v); }
template <class T> T from_float(float v) { return T(v); }

template <class T, int M, int N, int K, int WARPS, bool k_major, bool float_operands>
void run_case(const char* type_name, bool exact, int chunks, int depth, unsigned seed) {
  using Gemm = st::BlockGemm<T, M, N, K, WARPS>;
  char name[200];
  std::snprintf(name, sizeof name, "%s %s B %s M=%d N=%d K=%d x%d warps=%d (grid %dx%dx%d)%s depth=%d", type_name,
                float_operands ? "float" : "swizzled", k_major ? "k-major" : "n-major", M, N, K, chunks, WARPS, Gemm::WM, Gemm::WN,
                Gemm::WK, exact ? " exact" : " real", depth);
  current_case = name;
  if (verbose) std::fprintf(stderr, "%s\n", name);
  const int KT = chunks * K;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-4, 4);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  auto draw = [&]() { return exact ? static_cast<float>(small(rng)) : real(rng); };
  std::vector<T> a(M * KT), b(KT * N);
  for (auto& v : a) v = from_float<T>(draw());
  for (auto& v : b) v = from_float<T>(draw());
  std::vector<float> c0(M * N);
  for (auto& v : c0) v = exact ? static_cast<float>(small(rng) * 8) : real(rng);
  // Reference: float64 over the 16-bit inputs (only the first `depth` of each piece's K).
  auto bv = [&](int k, int n) { return to_float(k_major ? b[n * KT + k] : b[k * N + n]); };
  std::vector<double> ref(M * N), magnitude(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = c0[m * N + n], mag = std::fabs(c0[m * N + n]);
      for (int k = 0; k < KT; ++k) {
        if (k % K >= depth) continue;
        const double p = static_cast<double>(to_float(a[m * KT + k])) * bv(k, n);
        s += p;
        mag += std::fabs(p);
      }
      ref[m * N + n] = s;
      magnitude[m * N + n] = mag;
    }
  T *da, *db;
  float *dc0, *dc;
  GEMM_CHECK_CUDA(cudaMalloc(&da, a.size() * sizeof(T)));
  GEMM_CHECK_CUDA(cudaMalloc(&db, b.size() * sizeof(T)));
  GEMM_CHECK_CUDA(cudaMalloc(&dc0, c0.size() * 4));
  GEMM_CHECK_CUDA(cudaMalloc(&dc, c0.size() * 4));
  GEMM_CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * sizeof(T), cudaMemcpyHostToDevice));
  GEMM_CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * sizeof(T), cudaMemcpyHostToDevice));
  GEMM_CHECK_CUDA(cudaMemcpy(dc0, c0.data(), c0.size() * 4, cudaMemcpyHostToDevice));
  GEMM_CHECK_CUDA(cudaMemset(dc, 0xFF, c0.size() * 4));
  const int bytes = (M * K * (float_operands ? 4 : 2) + 127) / 128 * 128 + (K * N * (float_operands ? 4 : 2) + 127) / 128 * 128 + M * N * 4;
  auto kernel = block_gemm_kernel<T, M, N, K, WARPS, k_major, float_operands>;
  GEMM_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  kernel<<<1, WARPS * 32, bytes>>>(da, db, dc0, dc, chunks, depth);
  GEMM_CHECK_CUDA(cudaGetLastError());
  GEMM_CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> out(M * N);
  GEMM_CHECK_CUDA(cudaMemcpy(out.data(), dc, out.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc0);
  cudaFree(dc);
  int bad = 0;
  double worst = 0;
  std::string first;
  for (int i = 0; i < M * N; ++i) {
    const double err = std::fabs(out[i] - ref[i]);
    const double bound = exact ? 0.0 : (2.0 * KT + 2.0) * std::ldexp(1.0, -23) * magnitude[i];
    if (std::isnan(out[i]) || err > bound) {
      if (!bad) first = "element (" + std::to_string(i / N) + ", " + std::to_string(i % N) + "): " + std::to_string(out[i]) + " vs " +
                        std::to_string(ref[i]);
      ++bad;
    }
    if (magnitude[i] > 0) worst = std::fmax(worst, err / magnitude[i]);
  }
  if (bad) {
    ++failed;
    std::printf("FAIL %s: %d of %d elements wrong, first %s\n", name, bad, M * N, first.c_str());
  } else {
    ++passed;
    if (verbose) std::printf("ok   %s (worst error / Σ|a||b| = %.2e)\n", name, worst);
  }
}

template <class T, int M, int N, int K, int WARPS, int CHUNKS = 2>
void sweep_swizzled(const char* type_name) {
  for (bool exact : {true, false}) {
    run_case<T, M, N, K, WARPS, false, false>(type_name, exact, CHUNKS, K, 1234u + M * 7 + N * 13 + K);
    run_case<T, M, N, K, WARPS, true, false>(type_name, exact, CHUNKS, K, 4321u + M * 7 + N * 13 + K);
  }
}

template <class T, int M, int N, int K, int WARPS>
void sweep_float(const char* type_name) {
  for (bool exact : {true, false})
    for (int depth : {K, K - 5}) {
      run_case<T, M, N, K, WARPS, false, true>(type_name, exact, 2, depth, 99u + M + N + K + depth);
      run_case<T, M, N, K, WARPS, true, true>(type_name, exact, 2, depth, 77u + M + N + K + depth);
    }
}

template <class T>
void sweep(const char* type_name) {
  sweep_swizzled<T, 16, 16, 16, 1, 3>(type_name);
  sweep_swizzled<T, 1, 64, 128, 8>(type_name);
  sweep_swizzled<T, 5, 128, 64, 8>(type_name);
  sweep_swizzled<T, 16, 64, 128, 8, 4>(type_name);  // the MoE router's tiles
  sweep_swizzled<T, 16, 128, 64, 8>(type_name);
  sweep_swizzled<T, 32, 64, 32, 4>(type_name);
  sweep_swizzled<T, 64, 64, 64, 8>(type_name);
  sweep_swizzled<T, 64, 128, 128, 8>(type_name);
  sweep_swizzled<T, 128, 128, 64, 8>(type_name);
  sweep_swizzled<T, 16, 32, 256, 8>(type_name);
  sweep_float<T, 1, 128, 64, 8>(type_name);
  sweep_float<T, 16, 64, 64, 8>(type_name);
  sweep_float<T, 64, 64, 32, 8>(type_name);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--verbose")) verbose = true;
  sweep<__nv_bfloat16>("bf16");
  sweep<__half>("f16");
  std::printf("block_gemm: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
