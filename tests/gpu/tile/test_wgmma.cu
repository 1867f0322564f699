// Device tests of the warpgroup mma wrappers (device/solder/tile/wgmma.cuh) against a float64 host reference.
// One block = one warpgroup (128 threads) per case.
//
// Forms:
//   SS     D[64][N] = A[64][K] · B[K][N], A and B staged by cp.async into Swizzle128 tiles, mma_ss per k-step.
//   RS     the same with A read from global memory straight into ARegisters (tests the A fragment layout).
//   SS+C0, RS+C0   D starts from C0 (loaded into the accumulator by the documented D layout), accumulate from
//          the first k-step (tests the D layout on input and the fence after ordinary register writes).
//   CHAIN  S[64][NS] = A[64][K] · B[K][NS] (SS, B k-major), P = bf16(S) by to_a_registers, O[64][N] = P · V[NS][N]
//          (RS, V k-major or MN-major): attention's two GEMMs (tests the accumulator → A register conversion).
// B (and V) stored k-major ([n][k], transpose_b = false) or MN-major ([k][n], transpose_b = true);
// N ∈ {64, 128}, K ∈ {16, 64, 128} (1, 4 and 8 k-steps accumulating in one commit group).
// Accumulators start as NaN when the first k-step does not accumulate (scale-d = 0 must ignore them);
// outputs are poisoned with 0xFF bytes (NaN) before each kernel and shared memory inside it; NaN never passes.
// Data: "exact" (integers in [-4, 4]: every sum exact in float, outputs must match bit for bit) and "real"
// (uniform in [-1, 1] rounded to bf16; bound 2^-12 · Σ|a||b|: loose, as the tensor cores' float accumulation
// order and rounding are not documented, yet far below a misplaced element's error, of order Σ|a||b| / √K).
// On failure the case prints its first wrong elements, where in the reference each wrong value does occur
// (a misplaced row/column shows up as a permutation), and a map of wrong elements by 8x8 block.
#include <solder/tile/cp_async.cuh>
#include <solder/tile/wgmma.cuh>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace st = solder::tile;
namespace wg = solder::tile::warpgroup;
using bf16 = __nv_bfloat16;

static int passed = 0, failed = 0;
static std::string current_case = "startup";
static std::vector<std::string> failures;

#define WGMMA_CHECK_CUDA(call)                                                                                   \
  do {                                                                                                           \
    cudaError_t status_ = (call);                                                                                \
    if (status_ != cudaSuccess) {                                                                                \
      std::printf("%s:%d: %s failed: %s (case %s)\n%d passed, %d failed (CUDA error)\n", __FILE__, __LINE__,     \
                  #call, cudaGetErrorString(status_), current_case.c_str(), passed, failed + 1);                 \
      std::exit(2);                                                                                              \
    }                                                                                                            \
  } while (0)

enum Form { SS, RS, SS_C0, RS_C0, CHAIN };
static const char* form_name(Form f) {
  const char* names[] = {"SS", "RS", "SS+C0", "RS+C0", "CHAIN"};
  return names[f];
}

// ---- device side --------------------------------------------------------------------------------------------

template <int COLS>
__host__ __device__ constexpr int padded_cols() { return (COLS + 63) / 64 * 64; }

// Stages a [ROWS][COLS] row-major bf16 matrix into a Swizzle128<ROWS> tile (COLS a multiple of 8).
template <int ROWS, int COLS>
__device__ void stage(unsigned char* tile, const bf16* src) {
  for (int v = threadIdx.x; v < ROWS * COLS / 8; v += blockDim.x) {
    const int row = v / (COLS / 8), col = v % (COLS / 8) * 8;
    st::cp_async_16(tile + st::Swizzle128<ROWS>::byte_offset(row, col), src + row * COLS + col);
  }
}

// Shared-memory bytes of a Swizzle128<ROWS> tile of COLS columns.
template <int ROWS, int COLS>
__host__ __device__ constexpr int tile_bytes() { return ROWS * padded_cols<COLS>() * 2; }

// Row and column of accumulator register i of this thread (the documented D layout).
__device__ __forceinline__ int d_row(int i) { return (threadIdx.x / 32) % 4 * 16 + (threadIdx.x % 32) / 4 + (i % 4) / 2 * 8; }
__device__ __forceinline__ int d_col(int i) { return i / 4 * 8 + (threadIdx.x % 4) * 2 + i % 2; }

// The A registers of k-step `step` read from a row-major [64][K] global matrix (the documented A layout).
template <int K>
__device__ wg::ARegisters load_a_registers(const bf16* a, int step) {
  const int row = (threadIdx.x / 32) % 4 * 16 + (threadIdx.x % 32) / 4, col = step * 16 + (threadIdx.x % 4) * 2;
  auto pair = [&](int r, int c) { return *reinterpret_cast<const unsigned*>(a + r * K + c); };
  return wg::ARegisters{{pair(row, col), pair(row + 8, col), pair(row, col + 8), pair(row + 8, col + 8)}};
}

// B (or V) of a product with `depth` rows of k and N columns: stored [N][depth] when !transpose_b, else [depth][N].
template <int DEPTH, int N, bool transpose_b>
struct BTile {
  static constexpr int bytes = transpose_b ? tile_bytes<DEPTH, N>() : tile_bytes<N, DEPTH>();
  static __device__ void stage_from(unsigned char* tile, const bf16* src) {
    if constexpr (transpose_b) stage<DEPTH, N>(tile, src);
    else stage<N, DEPTH>(tile, src);
  }
  static __device__ std::uint64_t descriptor(const unsigned char* tile, int step) {
    if constexpr (transpose_b) return wg::mn_major_descriptor<DEPTH>(tile, step);
    else return wg::k_major_descriptor<N>(tile, step);
  }
};

// a: [64][K]; b: B of depth K and width NS (CHAIN) or N; v: [NS][N] or [N][NS] (CHAIN only); c0, out: [64][N].
template <Form form, int N, int K, bool transpose_b, int NS>
__global__ void wgmma_kernel(const bf16* a, const bf16* b, const bf16* v, const float* c0, float* out) {
  extern __shared__ unsigned char raw_smem[];
  // The swizzle is a function of the address: tiles start 1024-byte aligned.
  unsigned char* smem = raw_smem + ((1024 - static_cast<unsigned>(__cvta_generic_to_shared(raw_smem)) % 1024) % 1024);
  constexpr int b_width = form == CHAIN ? NS : N;
  constexpr bool b_transposed = form == CHAIN ? false : transpose_b;  // CHAIN: B k-major as K in Q·Kᵀ
  using TileB = BTile<K, b_width, b_transposed>;
  using TileV = BTile<NS, N, transpose_b>;
  constexpr int a_bytes = tile_bytes<64, K>();
  unsigned char* tile_a = smem;
  unsigned char* tile_b = smem + a_bytes;
  unsigned char* tile_v = tile_b + TileB::bytes;
  constexpr int total = a_bytes + TileB::bytes + (form == CHAIN ? TileV::bytes : 0);
  for (int i = threadIdx.x * 16; i < total; i += blockDim.x * 16) *reinterpret_cast<uint4*>(smem + i) = make_uint4(~0u, ~0u, ~0u, ~0u);
  __syncthreads();
  if constexpr (form != RS && form != RS_C0) stage<64, K>(tile_a, a);
  TileB::stage_from(tile_b, b);
  if constexpr (form == CHAIN) TileV::stage_from(tile_v, v);
  st::cp_async_commit();
  st::cp_async_wait<0>();
  wg::fence_proxy_async();
  __syncthreads();

  constexpr int steps = K / 16;
  constexpr bool from_c0 = form == SS_C0 || form == RS_C0;
  wg::Accumulator<b_width> d;
#pragma unroll
  for (int i = 0; i < b_width / 2; ++i) d.reg[i] = from_c0 ? c0[d_row(i) * N + d_col(i)] : __int_as_float(0x7fffffff);
  wg::ARegisters a_regs[steps];
  if constexpr (form == RS || form == RS_C0) {
#pragma unroll
    for (int s = 0; s < steps; ++s) a_regs[s] = load_a_registers<K>(a, s);
  }
  wg::fence_operand(d);
  wg::fence();
#pragma unroll
  for (int s = 0; s < steps; ++s) {
    if constexpr (form == RS || form == RS_C0) wg::mma_rs<b_width, b_transposed>(d, a_regs[s], TileB::descriptor(tile_b, s), from_c0 || s > 0);
    else wg::mma_ss<b_width, b_transposed>(d, wg::k_major_descriptor<64>(tile_a, s), TileB::descriptor(tile_b, s), from_c0 || s > 0);
  }
  wg::commit_group();
  wg::wait_group<0>();
  wg::fence_operand(d);
  if constexpr (form == CHAIN) {
    wg::Accumulator<N> o;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) o.reg[i] = __int_as_float(0x7fffffff);
    wg::ARegisters p[NS / 16];
#pragma unroll
    for (int s = 0; s < NS / 16; ++s) p[s] = wg::to_a_registers(d, s);
    wg::fence_operand(o);
    wg::fence();
#pragma unroll
    for (int s = 0; s < NS / 16; ++s) wg::mma_rs<N, transpose_b>(o, p[s], TileV::descriptor(tile_v, s), s > 0);
    wg::commit_group();
    wg::wait_group<0>();
    wg::fence_operand(o);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) out[d_row(i) * N + d_col(i)] = o.reg[i];
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) out[d_row(i) * N + d_col(i)] = d.reg[i];
  }
}

// ---- host side ------------------------------------------------------------------------------------------------

static float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

// Reports where wrong elements are: first few with the reference positions holding the same value, and a
// map of 8x8 blocks ('.' all right, 'X' some wrong).
static void diagnose(const std::vector<float>& out, const std::vector<double>& ref, const std::vector<double>& bound, int n) {
  int shown = 0;
  for (int i = 0; i < 64 * n && shown < 4; ++i) {
    const double err = std::fabs(out[i] - ref[i]);
    if (!(std::isnan(out[i]) || err > bound[i])) continue;
    ++shown;
    std::printf("    D[%d][%d] = %.6g, reference %.6g;", i / n, i % n, out[i], ref[i]);
    int found = 0;
    for (int j = 0; j < 64 * n && found < 3; ++j)
      if (j != i && std::fabs(out[i] - ref[j]) <= bound[j] + 1e-6 * std::fabs(ref[j])) {
        std::printf(" matches reference [%d][%d]", j / n, j % n);
        ++found;
      }
    std::printf("%s\n", found ? "" : " matches no reference element");
  }
  std::printf("    wrong elements by 8x8 block (rows down, columns across):\n");
  for (int rb = 0; rb < 8; ++rb) {
    std::printf("      ");
    for (int cb = 0; cb < n / 8; ++cb) {
      bool bad = false;
      for (int r = rb * 8; r < rb * 8 + 8; ++r)
        for (int c = cb * 8; c < cb * 8 + 8; ++c) {
          const int i = r * n + c;
          bad |= std::isnan(out[i]) || std::fabs(out[i] - ref[i]) > bound[i];
        }
      std::printf("%c", bad ? 'X' : '.');
    }
    std::printf("\n");
  }
}

template <Form form, int N, int K, bool transpose_b, int NS = N>
void run_case(bool exact, unsigned seed) {
  constexpr int b_width = form == CHAIN ? NS : N;
  char name[160];
  std::snprintf(name, sizeof name, "%-6s N=%-3d K=%-3d %s%s %s", form_name(form), N, K, transpose_b ? "B mn-major (transpose_b)" : "B k-major               ",
                form == CHAIN ? (" NS=" + std::to_string(NS)).c_str() : "", exact ? "exact" : "real");
  current_case = name;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-4, 4);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  auto draw = [&]() { return bf16_round(exact ? static_cast<float>(small(rng)) : real(rng)); };
  std::vector<float> a(64 * K), b(K * b_width), v(form == CHAIN ? NS * N : 1, 0.0f), c0(64 * N, 0.0f);
  for (auto& x : a) x = draw();
  for (auto& x : b) x = draw();
  for (auto& x : v) x = draw();
  if (form == SS_C0 || form == RS_C0)
    for (auto& x : c0) x = exact ? static_cast<float>(small(rng) * 8) : real(rng);
  // Element (k, n) of a B of depth `depth` and width `width` as stored.
  auto stored = [&](const std::vector<float>& m, int depth, int width, int k, int n, bool transposed) {
    return transposed ? m[k * width + n] : m[n * depth + k];
  };
  const bool b_transposed = form == CHAIN ? false : transpose_b;
  // D = C0 + A·B (or S = A·B for CHAIN) in double, with Σ|terms|.
  std::vector<double> d(64 * b_width), d_mag(64 * b_width);
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < b_width; ++n) {
      double s = form == CHAIN ? 0.0 : c0[m * N + n], mag = std::fabs(s);
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(a[m * K + k]) * stored(b, K, b_width, k, n, b_transposed);
        s += p;
        mag += std::fabs(p);
      }
      d[m * b_width + n] = s;
      d_mag[m * b_width + n] = mag;
    }
  std::vector<double> ref(64 * N), bound(64 * N);
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      if (form != CHAIN) {
        ref[m * N + n] = d[m * N + n];
        bound[m * N + n] = exact ? 0.0 : std::ldexp(1.0, -12) * d_mag[m * N + n];
        continue;
      }
      // P = bf16(S): the device rounds its float S, which may differ from S in the last bit and so round to
      // the neighbouring bf16 (relative 2^-7); plus the float accumulation of both products.
      double s = 0, mag = 0;
      for (int k = 0; k < NS; ++k) {
        const double p = bf16_round(static_cast<float>(d[m * NS + k]));
        const double w = stored(v, NS, N, k, n, transpose_b);
        s += p * w;
        mag += (std::ldexp(1.0, -7) * std::fabs(p) + std::ldexp(1.0, -12) * d_mag[m * NS + k]) * std::fabs(w);
      }
      ref[m * N + n] = s;
      bound[m * N + n] = mag + std::ldexp(1.0, -12) * mag;
    }

  auto to_device = [](const std::vector<float>& host) {
    std::vector<bf16> h(host.size());
    for (size_t i = 0; i < host.size(); ++i) h[i] = __float2bfloat16(host[i]);
    bf16* p;
    WGMMA_CHECK_CUDA(cudaMalloc(&p, h.size() * sizeof(bf16)));
    WGMMA_CHECK_CUDA(cudaMemcpy(p, h.data(), h.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    return p;
  };
  bf16 *da = to_device(a), *db = to_device(b), *dv = to_device(v);
  float *dc0, *dout;
  WGMMA_CHECK_CUDA(cudaMalloc(&dc0, c0.size() * 4));
  WGMMA_CHECK_CUDA(cudaMalloc(&dout, 64 * N * 4));
  WGMMA_CHECK_CUDA(cudaMemcpy(dc0, c0.data(), c0.size() * 4, cudaMemcpyHostToDevice));
  WGMMA_CHECK_CUDA(cudaMemset(dout, 0xFF, 64 * N * 4));
  auto kernel = wgmma_kernel<form, N, K, transpose_b, NS>;
  const int bytes = 1024 + 64 * padded_cols<K>() * 2 + 64 * 128 * 2 * 4;  // generous: A + B + V + alignment
  WGMMA_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  kernel<<<1, 128, bytes>>>(da, db, dv, dc0, dout);
  WGMMA_CHECK_CUDA(cudaGetLastError());
  WGMMA_CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> out(64 * N);
  WGMMA_CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dv);
  cudaFree(dc0);
  cudaFree(dout);

  int bad = 0;
  double worst = 0;
  for (int i = 0; i < 64 * N; ++i) {
    const double err = std::fabs(out[i] - ref[i]);
    if (std::isnan(out[i]) || err > bound[i]) ++bad;
    if (bound[i] > 0) worst = std::fmax(worst, err / bound[i]);
  }
  if (bad) {
    ++failed;
    failures.push_back(name);
    std::printf("FAIL %s: %d of %d elements wrong\n", name, bad, 64 * N);
    diagnose(out, ref, bound, N);
  } else {
    ++passed;
    std::printf("PASS %s (worst error / bound %.2e)\n", name, worst);
  }
  std::fflush(stdout);
}

template <Form form, int N, int K, bool transpose_b>
void sweep_data(unsigned seed) {
  run_case<form, N, K, transpose_b>(true, seed);
  run_case<form, N, K, transpose_b>(false, seed + 1);
}

template <Form form, int N, bool transpose_b>
void sweep_k(unsigned seed) {
  sweep_data<form, N, 16, transpose_b>(seed);
  sweep_data<form, N, 64, transpose_b>(seed + 10);
  sweep_data<form, N, 128, transpose_b>(seed + 20);
}

template <Form form>
void sweep_form(unsigned seed) {
  sweep_k<form, 64, false>(seed);
  sweep_k<form, 64, true>(seed + 100);
  sweep_k<form, 128, false>(seed + 200);
  sweep_k<form, 128, true>(seed + 300);
}

int main() {
  int device = 0;
  cudaDeviceProp prop;
  WGMMA_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  sweep_form<SS>(1000);
  sweep_form<RS>(2000);
  run_case<SS_C0, 64, 64, false>(true, 3001);
  run_case<SS_C0, 128, 128, true>(false, 3002);
  run_case<RS_C0, 64, 64, true>(true, 3003);
  run_case<RS_C0, 128, 128, false>(false, 3004);
  run_case<CHAIN, 64, 64, false, 64>(false, 4001);
  run_case<CHAIN, 64, 64, true, 64>(false, 4002);
  run_case<CHAIN, 64, 64, true, 128>(false, 4003);
  run_case<CHAIN, 128, 64, true, 128>(false, 4004);
  run_case<CHAIN, 128, 64, false, 64>(false, 4005);
  run_case<CHAIN, 64, 128, true, 128>(false, 4006);
  std::printf("%d passed, %d failed\n", passed, failed);
  for (const auto& f : failures) std::printf("  failed: %s\n", f.c_str());
  return failed ? 1 : 0;
}
