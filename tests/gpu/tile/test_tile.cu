// Device tests of the tile primitives (device/solder/tile) against host references.
//
// Tests (each case: fixed-seed random inputs, outputs poisoned with 0xFF bytes — NaN in f32, f16 and bf16 —
// before the kernel runs, shared memory poisoned the same way inside the kernel; NaN never passes):
//   gemm A·Bᵀ   C[M,N] = A[M,K]·B[N,K]ᵀ as the generated attention code computes S: A and B staged by
//               cp_async_16 into Swizzle<K> tiles, A fragments by ldmatrix_x4, B by ldmatrix_x4 through the
//               generated code's b_row/b_xor addressing, mma_16816<T>. bf16, f16 × M ∈ {16,64,128} (1-8 warps)
//               × N ∈ {16,64,128} × K ∈ {16,32,48,64,96,128,256} (Swizzle masks 1, 3, 7). Two data sets:
//               "exact" (small integers, ragged: the last rows of A and B zero-filled by cp_async_16(valid =
//               false); every output must equal the reference bit for bit) and "real" (uniform reals; error
//               bound 2 K 2^-23 Σ|a||b| against a float64 reference on the 16-bit inputs).
//   gemm P·V    O[M,DV] = P[M,N]·V[N,DV] as the generated code's second contraction: P in C-fragment
//               registers (float, loaded at fragment_row/fragment_col), converted by c_fragments_to_a<T>; V
//               staged into Swizzle<DV> and read by ldmatrix_x4_trans through v_xor. Same sweeps (DV for K);
//               "real" P is not representable in T, so pack2's rounding is part of what is checked.
//   cp.async    wait<N> ladder (4 groups in flight, each group's data checked right after wait<3..0> and a
//               barrier, read by other threads than the copying ones); an S-stage pipeline (S = 1..4,
//               wait<S-1>) with zero-filled chunks landing on stale stage data; zero fill with a null source.
//   swizzle     Swizzle<C>::offset for C ∈ {8,...,256} (masks 0, 1, 3, 7): bijection on [rows][C], rows kept,
//               16-byte chunks contiguous and aligned, mask as documented; a cp.async → offset round trip;
//               and (reported, not checked) the bank-group ways of one ldmatrix phase.
//   fragments   quad_sum/max/min per lane on data with NaN, ±inf, ±0 (bit-exact against the same float order;
//               max/min must propagate NaN); row reductions over C fragments; fragment_row/col against the
//               PTX layout; mma_bf16_16816/mma_f16_16816 on hand-built fragments; ldmatrix_x4(.trans) layout.
//   pack2       bf16 and f16, round to nearest even against the host conversion: ties, near-ties, overflow,
//               subnormals, ±0, ±inf, NaN; low half = first argument.
//   fast_tanh   against tanh in float64, relative error ≤ 2^-10 (documented: about 2^-11); ±inf, NaN.
// Flags: --verbose (names each case on stderr before running it), --filter=TEXT (rows whose name contains TEXT),
// --subset (GEMMs at M = N = 64 only, the smaller cp.async cases: for compute-sanitizer).
#include <solder/tile/tile.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace st = solder::tile;

#define TILE_CHECK_CUDA(call)                                                                                    \
  do {                                                                                                           \
    cudaError_t status_ = (call);                                                                                \
    if (status_ != cudaSuccess) {                                                                                \
      std::fprintf(stderr, "%s:%d: %s failed: %s (case %s)\n", __FILE__, __LINE__, #call,                        \
                   cudaGetErrorString(status_), current_case.c_str());                                           \
      print_table_and_exit(2);                                                                                   \
    }                                                                                                            \
  } while (0)

static std::string current_case = "startup";
static bool verbose = false;
// Prints the table of the cases run so far and "N passed, M failed", then exits (a CUDA error ends the run).
[[noreturn]] static void print_table_and_exit(int status);
static bool subset = false;

// ---- device side ----------------------------------------------------------------------------------------------

// Fills `bytes` (a multiple of 16) of shared memory with 0xFF, then a block barrier.
__device__ void poison_shared(unsigned char* smem, int bytes) {
  for (int i = threadIdx.x * 16; i < bytes; i += blockDim.x * 16)
    *reinterpret_cast<uint4*>(smem + i) = make_uint4(~0u, ~0u, ~0u, ~0u);
  __syncthreads();
}

// Stages rows [0, rows) of a row-major [rows][C] global tile of 16-bit values into the swizzled layout, as the
// generated code does (one 16-byte cp.async per chunk; rows ≥ valid_rows zero-filled, source the base
// pointer), and commits the group.
template <int C, class T>
__device__ void stage_tile(T* tile, const T* global, int rows, int valid_rows) {
  constexpr int chunks = C / 8;
  for (int chunk = threadIdx.x; chunk < rows * chunks; chunk += blockDim.x) {
    const int row = chunk / chunks, col = (chunk % chunks) * 8;
    const bool inside = row < valid_rows;
    st::cp_async_16(&tile[st::Swizzle<C>::offset(row, col)], inside ? global + row * C + col : global, inside);
  }
  st::cp_async_commit();
}

// C[M,N] = A[M,K]·B[N,K]ᵀ in one block of M / 16 warps; warp w owns rows 16w..16w+15.
template <class T, int N, int K>
__global__ void gemm_abt_kernel(const T* a, const T* b, float* c, int a_valid_rows, int b_valid_rows) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int M = blockDim.x / 32 * 16;
  T* const a_tile = reinterpret_cast<T*>(smem);
  T* const b_tile = a_tile + M * K;
  poison_shared(smem, (M + N) * K * 2);
  stage_tile<K>(a_tile, a, M, a_valid_rows);
  stage_tile<K>(b_tile, b, N, b_valid_rows);
  st::cp_async_wait<0>();
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // The generated code's ldmatrix addressing (src/backend/cuda/mma_stream_codegen.cpp).
  const int b_row = ((lane >> 4) << 3) + (lane & 7);
  const int b_xor = (((lane >> 3) & 1) ^ (b_row & st::Swizzle<K>::mask)) << 3;
  unsigned a_frag[K / 16][4];
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks)
    st::ldmatrix_x4(a_frag[ks], &a_tile[st::Swizzle<K>::offset(warp * 16 + (lane & 15), ks * 16 + ((lane >> 4) << 3))]);
  float s[N / 8][4];
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
    for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
#pragma unroll
    for (int np = 0; np < N / 16; ++np) {
      unsigned bf[4];
      st::ldmatrix_x4(bf, &b_tile[(np * 16 + b_row) * K + ((ks * 16) ^ b_xor)]);
      st::mma_16816<T>(s[2 * np], a_frag[ks], bf[0], bf[1]);
      st::mma_16816<T>(s[2 * np + 1], a_frag[ks], bf[2], bf[3]);
    }
  }
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      c[(warp * 16 + st::fragment_row(lane, e)) * N + nt * 8 + st::fragment_col(lane, e)] = s[nt][e];
}

// O[M,DV] = P[M,N]·V[N,DV]; P (float) is loaded into C fragments, V staged into Swizzle<DV>.
template <class T, int N, int DV>
__global__ void gemm_pv_kernel(const float* p, const T* v, float* o, int v_valid_rows) {
  extern __shared__ __align__(128) unsigned char smem[];
  T* const v_tile = reinterpret_cast<T*>(smem);
  poison_shared(smem, N * DV * 2);
  stage_tile<DV>(v_tile, v, N, v_valid_rows);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float p_frag[N / 8][4];
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      p_frag[nt][e] = p[(warp * 16 + st::fragment_row(lane, e)) * N + nt * 8 + st::fragment_col(lane, e)];
  st::cp_async_wait<0>();
  __syncthreads();
  const int v_xor = ((lane >> 4) ^ (lane & st::Swizzle<DV>::mask)) << 3;
  float acc[DV / 8][4];
#pragma unroll
  for (int nt = 0; nt < DV / 8; ++nt)
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    unsigned pa[4];
    st::c_fragments_to_a<T>(pa, p_frag[2 * kk], p_frag[2 * kk + 1]);
#pragma unroll
    for (int np = 0; np < DV / 16; ++np) {
      unsigned bf[4];
      st::ldmatrix_x4_trans(bf, &v_tile[(kk * 16 + (lane & 15)) * DV + ((np * 16) ^ v_xor)]);
      st::mma_16816<T>(acc[2 * np], pa, bf[0], bf[1]);
      st::mma_16816<T>(acc[2 * np + 1], pa, bf[2], bf[3]);
    }
  }
#pragma unroll
  for (int nt = 0; nt < DV / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o[(warp * 16 + st::fragment_row(lane, e)) * DV + nt * 8 + st::fragment_col(lane, e)] = acc[nt][e];
}

// Four groups in flight, each copying its own region; after wait<3-g> and a barrier, group g's region is copied
// out by other threads than the ones that issued its copies (reversed chunk order).
__global__ void wait_ladder_kernel(const uint4* src, uint4* dst, int chunks_per_group) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint4* const stage = reinterpret_cast<uint4*>(smem);
  poison_shared(smem, 4 * chunks_per_group * 16);
  for (int g = 0; g < 4; ++g) {
    for (int c = threadIdx.x; c < chunks_per_group; c += blockDim.x) {
      const int i = g * chunks_per_group + c;
      st::cp_async_16(&stage[i], &src[i]);
    }
    st::cp_async_commit();
  }
  auto copy_out = [&](int g) {
    __syncthreads();
    for (int c = threadIdx.x; c < chunks_per_group; c += blockDim.x) {
      const int i = g * chunks_per_group + (chunks_per_group - 1 - c);
      dst[i] = stage[i];
    }
  };
  st::cp_async_wait<3>();
  copy_out(0);
  st::cp_async_wait<2>();
  copy_out(1);
  st::cp_async_wait<1>();
  copy_out(2);
  st::cp_async_wait<0>();
  copy_out(3);
}

// An S-stage pipeline over `tiles` tiles: tile i is copied into stage i % S (S groups ahead, an empty group
// past the end), consumed after wait<S-1> and a barrier. Chunks with (chunk + tile) % 7 == 0 are zero-filled
// (valid = false), over the stage's previous tile.
template <int S>
__global__ void pipeline_kernel(const uint4* src, uint4* dst, int tiles, int chunks) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint4* const stage = reinterpret_cast<uint4*>(smem);
  poison_shared(smem, S * chunks * 16);
  auto issue = [&](int tile) {
    if (tile < tiles)
      for (int c = threadIdx.x; c < chunks; c += blockDim.x)
        st::cp_async_16(&stage[(tile % S) * chunks + c], &src[tile * chunks + c], (c + tile) % 7 != 0);
    st::cp_async_commit();
  };
  for (int t = 0; t < S; ++t) issue(t);
  for (int t = 0; t < tiles; ++t) {
    st::cp_async_wait<S - 1>();
    __syncthreads();
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      const int r = chunks - 1 - c;
      dst[t * chunks + r] = stage[(t % S) * chunks + r];
    }
    __syncthreads();  // the stage is refilled next
    issue(t + S);
  }
  st::cp_async_wait<0>();
}

// Every chunk zero-filled from a null source: cp_async_16(valid = false) must not read it.
__global__ void zero_fill_null_kernel(uint4* dst, int chunks) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint4* const stage = reinterpret_cast<uint4*>(smem);
  poison_shared(smem, chunks * 16);
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) st::cp_async_16(&stage[c], nullptr, false);
  st::cp_async_commit();
  st::cp_async_wait<0>();
  __syncthreads();
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) dst[c] = stage[chunks - 1 - c];
}

// table[r * C + c] = Swizzle<C>::offset(r, c).
template <int C>
__global__ void swizzle_table_kernel(int* table, int rows) {
  for (int i = threadIdx.x; i < rows * C; i += blockDim.x) table[i] = st::Swizzle<C>::offset(i / C, i % C);
}

// dst = src through a swizzled tile: staged by cp.async at Swizzle<C>::offset, read back through it.
template <int C>
__global__ void swizzle_round_trip_kernel(const unsigned short* src, unsigned short* dst, int rows) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned short* const tile = reinterpret_cast<unsigned short*>(smem);
  poison_shared(smem, rows * C * 2);
  stage_tile<C>(tile, src, rows, rows);
  st::cp_async_wait<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < rows * C; i += blockDim.x) dst[i] = tile[st::Swizzle<C>::offset(i / C, i % C)];
}

// Per lane: quad_sum, quad_max, quad_min of the lane's value.
__global__ void quad_kernel(const float* in, float* sum, float* max, float* min) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float v = in[i];
  sum[i] = st::quad_sum(v);
  max[i] = st::quad_max(v);
  min[i] = st::quad_min(v);
}

// Row reductions of an [16 warps][NT*8] float tile held as C fragments (as the generated softmax does): the
// lane's own columns in order (n-tile, then e), then the quad. Lane t of each quad writes its rows.
template <int NT>
__global__ void row_reduce_kernel(const float* x, float* sum, float* max, float* min) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float f[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) f[nt][e] = x[(warp * 16 + st::fragment_row(lane, e)) * NT * 8 + nt * 8 + st::fragment_col(lane, e)];
#pragma unroll
  for (int rs = 0; rs < 2; ++rs) {
    float s = 0.0f, hi = f[0][2 * rs], lo = f[0][2 * rs];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        s += f[nt][2 * rs + k];
        hi = solder::max_nan(hi, f[nt][2 * rs + k]);
        lo = solder::min_nan(lo, f[nt][2 * rs + k]);
      }
    s = st::quad_sum(s);
    hi = st::quad_max(hi);
    lo = st::quad_min(lo);
    if ((lane & 3) == 0) {
      const int row = warp * 16 + st::fragment_row(lane, 2 * rs);
      sum[row] = s;
      max[row] = hi;
      min[row] = lo;
    }
  }
}

// One warp: C[16x8] = A[16x16]·B[16x8] with fragments built from the layout documented in mma.cuh (no ldmatrix),
// through the named instruction wrappers; C written at fragment_row/col. Also writes the (row, col) of every
// (lane, e) pair.
template <class T>
__global__ void mma_layout_kernel(const unsigned short* a, const unsigned short* b, float* c, int* rows, int* cols) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  auto pair = [](unsigned short lo, unsigned short hi) { return static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16); };
  const unsigned af[4] = {pair(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]), pair(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]),
                          pair(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]), pair(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9])};
  const unsigned b0 = pair(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]), b1 = pair(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g]);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if constexpr (std::is_same_v<T, __half>) st::mma_f16_16816(acc, af, b0, b1);
  else st::mma_bf16_16816(acc, af, b0, b1);
  for (int e = 0; e < 4; ++e) {
    c[st::fragment_row(lane, e) * 8 + st::fragment_col(lane, e)] = acc[e];
    rows[lane * 4 + e] = st::fragment_row(lane, e);
    cols[lane * 4 + e] = st::fragment_col(lane, e);
  }
}

// One warp: four 8x8 matrices of 16-bit values, matrix m at elements [64 m, 64 m + 64) row-major (unswizzled);
// lane L points ldmatrix at row L % 8 of matrix L / 8. out[0][lane][m] (plain), out[1][lane][m] (.trans).
__global__ void ldmatrix_layout_kernel(const unsigned short* in, unsigned* out) {
  __shared__ __align__(128) unsigned short tile[256];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) tile[i] = in[i];
  __syncwarp();
  unsigned r[4], rt[4];
  st::ldmatrix_x4(r, &tile[(lane >> 3) * 64 + (lane & 7) * 8]);
  st::ldmatrix_x4_trans(rt, &tile[(lane >> 3) * 64 + (lane & 7) * 8]);
  for (int m = 0; m < 4; ++m) {
    out[lane * 4 + m] = r[m];
    out[128 + lane * 4 + m] = rt[m];
  }
}

__global__ void fast_tanh_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = st::fast_tanh(in[i]);
}

template <class T>
__global__ void pack2_kernel(const float* in, unsigned* out, int pairs) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < pairs) out[i] = st::pack2<T>(in[2 * i], in[2 * i + 1]);
}

// ---- host side ------------------------------------------------------------------------------------------------

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t random_bits() {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static float random_uniform(float lo, float hi) {
  return lo + (hi - lo) * static_cast<float>((random_bits() >> 40) * (1.0 / 16777216.0));
}
static int random_int(int lo, int hi) { return lo + static_cast<int>(random_bits() % static_cast<uint64_t>(hi - lo + 1)); }

template <class T> static const char* dtype_name() { return std::is_same_v<T, __half> ? "f16" : "bf16"; }
// Host conversions (cuda_fp16.h / cuda_bf16.h host code: round to nearest even).
template <class T> static unsigned short to_bits(float x) {
  T h;
  if constexpr (std::is_same_v<T, __half>) h = __float2half_rn(x);
  else h = __float2bfloat16_rn(x);
  unsigned short bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
template <class T> static float from_bits(unsigned short bits) {
  T h;
  std::memcpy(&h, &bits, 2);
  if constexpr (std::is_same_v<T, __half>) return __half2float(h);
  else return __bfloat162float(h);
}
static uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
static float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// A device buffer of n elements; poisoned with 0xFF bytes on creation and by poison().
template <class E>
struct device_buffer {
  E* ptr = nullptr;
  size_t n = 0;
  explicit device_buffer(size_t count) : n(count) {
    TILE_CHECK_CUDA(cudaMalloc(&ptr, n * sizeof(E) + 16));
    poison();
  }
  device_buffer(const std::vector<E>& host) : device_buffer(host.size()) { upload(host); }
  ~device_buffer() { cudaFree(ptr); }
  device_buffer(const device_buffer&) = delete;
  void poison() { TILE_CHECK_CUDA(cudaMemset(ptr, 0xFF, n * sizeof(E))); }
  void upload(const std::vector<E>& host) { TILE_CHECK_CUDA(cudaMemcpy(ptr, host.data(), n * sizeof(E), cudaMemcpyHostToDevice)); }
  std::vector<E> download() const {
    std::vector<E> host(n);
    TILE_CHECK_CUDA(cudaMemcpy(host.data(), ptr, n * sizeof(E), cudaMemcpyDeviceToHost));
    return host;
  }
};

// Synchronizes after a launch; any launch or execution error ends the run (the context is unusable after one).
static void finish_launch() {
  TILE_CHECK_CUDA(cudaGetLastError());
  TILE_CHECK_CUDA(cudaDeviceSynchronize());
}

template <class Kernel>
static void allow_shared(Kernel kernel, size_t bytes) {
  TILE_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// One table row: cases passed / run, the worst error metric seen, its bound, and a note.
struct table_row {
  int passed = 0, run = 0;
  double worst = 0.0, bound = 0.0;
  bool has_metric = false;
  std::string note;
};
static std::vector<std::string> row_order;
static std::map<std::string, table_row> table;
static std::string filter;
static int failures = 0;

static bool wanted(const std::string& row) { return filter.empty() || row.find(filter) != std::string::npos; }

static void begin_case(const std::string& name) {
  current_case = name;
  if (verbose) std::fprintf(stderr, "running %s\n", name.c_str());
}

static void record(const std::string& row, const std::string& name, bool ok, const std::string& detail = "",
                   double metric = -1.0, double bound = 0.0) {
  if (!table.count(row)) row_order.push_back(row);
  table_row& r = table[row];
  r.run += 1;
  r.passed += ok ? 1 : 0;
  if (metric >= 0.0) {
    r.has_metric = true;
    if (metric > r.worst || std::isnan(metric)) r.worst = metric;
    if (bound > r.bound) r.bound = bound;
  }
  if (!ok) {
    ++failures;
    std::printf("FAIL  %s: %s\n", name.c_str(), detail.c_str());
  }
}

// ---- GEMMs -----------------------------------------------------------------------------------------------------

enum class data_kind { exact, real };

// Compares a float output against a float64 reference: exact (bit-equal value) or within
// bound_factor · Σ|a||b| per element. Returns a failure description, empty when it passes; *worst gets the
// largest |error| / Σ|a||b|.
static std::string compare_gemm(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& abs_sum,
                                int cols, data_kind kind, double bound_factor, double* worst) {
  size_t bad = 0, first = SIZE_MAX;
  *worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    bool ok = !std::isnan(got[i]);
    if (kind == data_kind::exact) ok = ok && err == 0.0;
    else ok = ok && err <= bound_factor * abs_sum[i];
    if (abs_sum[i] > 0.0 && !std::isnan(err)) *worst = std::max(*worst, err / abs_sum[i]);
    if (!ok) {
      if (first == SIZE_MAX) first = i;
      ++bad;
    }
  }
  if (!bad) return "";
  char text[256];
  std::snprintf(text, sizeof text, "%zu/%zu elements wrong; first [%zu][%zu] got %.9g want %.9g (Σ|a||b| %.3g)", bad, got.size(),
                first / cols, first % cols, got[first], ref[first], abs_sum[first]);
  return text;
}

template <class T, int N, int K>
static void gemm_abt_case(int M, data_kind kind) {
  const std::string row = std::string("gemm A·Bᵀ ") + dtype_name<T>() + (kind == data_kind::exact ? " exact" : " real");
  if (!wanted(row)) return;
  char name[160];
  std::snprintf(name, sizeof name, "%s M=%d N=%d K=%d", row.c_str(), M, N, K);
  begin_case(name);
  // exact: ragged rows (zero-filled by cp.async), small integers, every sum exact in float.
  const int a_valid = kind == data_kind::exact ? M - 3 : M, b_valid = kind == data_kind::exact ? N - 5 : N;
  std::vector<unsigned short> a(M * K), b(N * K);
  for (auto* v : {&a, &b})
    for (auto& x : *v) x = to_bits<T>(kind == data_kind::exact ? static_cast<float>(random_int(-4, 4)) : random_uniform(-2.0f, 2.0f));
  std::vector<double> ref(M * N), abs_sum(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0.0, s_abs = 0.0;
      if (m < a_valid && n < b_valid)
        for (int k = 0; k < K; ++k) {
          const double p = static_cast<double>(from_bits<T>(a[m * K + k])) * from_bits<T>(b[n * K + k]);
          s += p;
          s_abs += std::fabs(p);
        }
      ref[m * N + n] = s;
      abs_sum[m * N + n] = s_abs;
    }
  device_buffer<unsigned short> a_dev(a), b_dev(b);
  device_buffer<float> c_dev(M * N);
  const size_t smem = static_cast<size_t>(M + N) * K * 2;
  allow_shared(gemm_abt_kernel<T, N, K>, smem);
  gemm_abt_kernel<T, N, K><<<1, M * 2, smem>>>(reinterpret_cast<const T*>(a_dev.ptr), reinterpret_cast<const T*>(b_dev.ptr),
                                                c_dev.ptr, a_valid, b_valid);
  finish_launch();
  const double bound_factor = 2.0 * K * std::ldexp(1.0, -23);
  double worst = 0.0;
  const std::string detail = compare_gemm(c_dev.download(), ref, abs_sum, N, kind, bound_factor, &worst);
  record(row, name, detail.empty(), detail, worst, kind == data_kind::exact ? 0.0 : bound_factor);
}

template <class T, int N, int DV>
static void gemm_pv_case(int M, data_kind kind) {
  const std::string row = std::string("gemm P·V ") + dtype_name<T>() + (kind == data_kind::exact ? " exact" : " real");
  if (!wanted(row)) return;
  char name[160];
  std::snprintf(name, sizeof name, "%s M=%d N=%d DV=%d", row.c_str(), M, N, DV);
  begin_case(name);
  const int v_valid = kind == data_kind::exact ? N - 5 : N;
  std::vector<float> p(M * N);
  std::vector<unsigned short> v(N * DV);
  // real: P in [0, 1) as a softmax's probabilities, not representable in T (c_fragments_to_a rounds it).
  for (auto& x : p) x = kind == data_kind::exact ? static_cast<float>(random_int(-4, 4)) : random_uniform(0.0f, 1.0f);
  for (auto& x : v) x = to_bits<T>(kind == data_kind::exact ? static_cast<float>(random_int(-4, 4)) : random_uniform(-2.0f, 2.0f));
  std::vector<double> ref(M * DV), abs_sum(M * DV);
  for (int m = 0; m < M; ++m)
    for (int d = 0; d < DV; ++d) {
      double s = 0.0, s_abs = 0.0;
      for (int n = 0; n < v_valid; ++n) {
        const double q = static_cast<double>(from_bits<T>(to_bits<T>(p[m * N + n]))) * from_bits<T>(v[n * DV + d]);
        s += q;
        s_abs += std::fabs(q);
      }
      ref[m * DV + d] = s;
      abs_sum[m * DV + d] = s_abs;
    }
  device_buffer<float> p_dev(p), o_dev(M * DV);
  device_buffer<unsigned short> v_dev(v);
  const size_t smem = static_cast<size_t>(N) * DV * 2;
  allow_shared(gemm_pv_kernel<T, N, DV>, smem);
  gemm_pv_kernel<T, N, DV><<<1, M * 2, smem>>>(p_dev.ptr, reinterpret_cast<const T*>(v_dev.ptr), o_dev.ptr, v_valid);
  finish_launch();
  const double bound_factor = 2.0 * N * std::ldexp(1.0, -23);
  double worst = 0.0;
  const std::string detail = compare_gemm(o_dev.download(), ref, abs_sum, DV, kind, bound_factor, &worst);
  record(row, name, detail.empty(), detail, worst, kind == data_kind::exact ? 0.0 : bound_factor);
}

template <int... Values> struct int_list {};

template <class T, int N, int... Ks>
static void gemm_sweep_widths(int_list<Ks...>) {
  if (subset && N != 64) return;
  for (int M : {16, 64, 128})
    for (data_kind kind : {data_kind::exact, data_kind::real}) {
      if (subset && M != 64) continue;
      (gemm_abt_case<T, N, Ks>(M, kind), ...);
      (gemm_pv_case<T, N, Ks>(M, kind), ...);
    }
}

// K (A·Bᵀ) and DV (P·V): the swizzled row widths; 16 → mask 1, 48 → 1, 32 → 3, 96 → 3, 64/128/256 → 7.
using gemm_widths = int_list<16, 32, 48, 64, 96, 128, 256>;

template <class T>
static void gemm_tests() {
  gemm_sweep_widths<T, 16>(gemm_widths{});
  gemm_sweep_widths<T, 64>(gemm_widths{});
  gemm_sweep_widths<T, 128>(gemm_widths{});
}

// ---- cp.async ------------------------------------------------------------------------------------------------

static std::vector<uint32_t> random_words(size_t n) {
  std::vector<uint32_t> w(n);
  for (auto& x : w) x = static_cast<uint32_t>(random_bits() >> 32);
  return w;
}

// Counts the 4-byte words of got that differ from want; describes the first.
static std::string compare_words(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      if (!bad) first = i;
      ++bad;
    }
  if (!bad) return "";
  char text[160];
  std::snprintf(text, sizeof text, "%zu/%zu words wrong; first word %zu got %08x want %08x", bad, got.size(), first, got[first], want[first]);
  return text;
}

static void cp_async_tests() {
  const std::string ladder_row = "cp.async wait<N> ladder";
  if (wanted(ladder_row))
    for (int threads : {32, 128, 256})
      for (int chunks : {64, 1024, 3072}) {  // 1, 16, 48 KB per group
        if (subset && chunks > 1024) continue;
        char name[96];
        std::snprintf(name, sizeof name, "%s threads=%d group=%d KB", ladder_row.c_str(), threads, chunks / 64);
        begin_case(name);
        const std::vector<uint32_t> src = random_words(4 * chunks * 4);
        device_buffer<uint32_t> src_dev(src), dst_dev(src.size());
        const size_t smem = 4 * static_cast<size_t>(chunks) * 16;
        allow_shared(wait_ladder_kernel, smem);
        wait_ladder_kernel<<<1, threads, smem>>>(reinterpret_cast<const uint4*>(src_dev.ptr), reinterpret_cast<uint4*>(dst_dev.ptr), chunks);
        finish_launch();
        const std::string detail = compare_words(dst_dev.download(), src);
        record(ladder_row, name, detail.empty(), detail);
      }
  auto pipeline = [&](auto stages_constant) {
    constexpr int S = decltype(stages_constant)::value;
    const std::string row = "cp.async pipeline S=" + std::to_string(S) + " wait<" + std::to_string(S - 1) + ">";
    if (!wanted(row)) return;
    for (int threads : {64, 256})
      for (int chunks : {256, 1024}) {  // 4, 16 KB per stage
        const int tiles = 9;
        char name[96];
        std::snprintf(name, sizeof name, "%s threads=%d stage=%d KB", row.c_str(), threads, chunks / 64);
        begin_case(name);
        const std::vector<uint32_t> src = random_words(static_cast<size_t>(tiles) * chunks * 4);
        std::vector<uint32_t> want = src;
        for (int t = 0; t < tiles; ++t)
          for (int c = 0; c < chunks; ++c)
            if ((c + t) % 7 == 0)
              for (int w = 0; w < 4; ++w) want[(static_cast<size_t>(t) * chunks + c) * 4 + w] = 0;
        device_buffer<uint32_t> src_dev(src), dst_dev(src.size());
        const size_t smem = S * static_cast<size_t>(chunks) * 16;
        allow_shared(pipeline_kernel<S>, smem);
        pipeline_kernel<S><<<1, threads, smem>>>(reinterpret_cast<const uint4*>(src_dev.ptr), reinterpret_cast<uint4*>(dst_dev.ptr), tiles, chunks);
        finish_launch();
        const std::string detail = compare_words(dst_dev.download(), want);
        record(row, name, detail.empty(), detail);
      }
  };
  pipeline(std::integral_constant<int, 1>{});
  pipeline(std::integral_constant<int, 2>{});
  pipeline(std::integral_constant<int, 3>{});
  pipeline(std::integral_constant<int, 4>{});
}

// Last: a fault here would end the run.
static void zero_fill_null_test() {
  const std::string row = "cp.async zero fill, null source";
  if (!wanted(row)) return;
  begin_case(row);
  const int chunks = 512;
  device_buffer<uint32_t> dst_dev(chunks * 4);
  zero_fill_null_kernel<<<1, 128, chunks * 16>>>(reinterpret_cast<uint4*>(dst_dev.ptr), chunks);
  finish_launch();
  const std::string detail = compare_words(dst_dev.download(), std::vector<uint32_t>(chunks * 4, 0u));
  record(row, row, detail.empty(), detail);
}

// ---- swizzle ---------------------------------------------------------------------------------------------------

template <int C>
static void swizzle_case() {
  const std::string row = "swizzle C=" + std::to_string(C);
  if (!wanted(row)) return;
  const int rows = 64;
  int chunks = C / 8, expected_mask = 0;
  for (int p = 8; p >= 1; p /= 2)
    if (chunks % p == 0) {
      expected_mask = p - 1;
      break;
    }
  begin_case(row + " table");
  device_buffer<int> table_dev(rows * C);
  swizzle_table_kernel<C><<<1, 256>>>(table_dev.ptr, rows);
  finish_launch();
  const std::vector<int> offsets = table_dev.download();
  std::string detail;
  auto fail = [&](const char* what, int r, int c, int value) {
    if (detail.empty()) {
      char text[160];
      std::snprintf(text, sizeof text, "%s at (%d, %d): offset %d", what, r, c, value);
      detail = text;
    }
  };
  if (st::Swizzle<C>::mask != expected_mask) fail("mask differs from the documented rule", -1, -1, st::Swizzle<C>::mask);
  std::vector<int> hits(rows * C, 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) {
      const int o = offsets[r * C + c];
      if (o < 0 || o >= rows * C) {
        fail("out of the tile", r, c, o);
        continue;
      }
      if (hits[o]++) fail("offset taken twice", r, c, o);
      if (o / C != r) fail("leaves its row", r, c, o);
      if (c % 8 == 0 && o % 8 != 0) fail("chunk not 16-byte aligned", r, c, o);
      if (c % 8 != 0 && o != offsets[r * C + c - 1] + 1) fail("chunk not contiguous", r, c, o);
    }
  record(row, row + " table", detail.empty(), detail);
  // Bank-group ways of one ldmatrix phase: eight consecutive rows (from a multiple of 8), one logical chunk.
  int ways = 1;
  for (int r0 = 0; r0 < rows; r0 += 8)
    for (int k = 0; k < chunks; ++k) {
      int count[8] = {};
      for (int r = r0; r < r0 + 8; ++r) ways = std::max(ways, ++count[(offsets[r * C + k * 8] / 8) % 8]);
    }
  table[row].note = "mask " + std::to_string(st::Swizzle<C>::mask) + ", ldmatrix phase " + std::to_string(ways) + "-way";

  begin_case(row + " round trip");
  std::vector<unsigned short> src(rows * C);
  for (auto& x : src) x = static_cast<unsigned short>(random_bits() >> 48);
  device_buffer<unsigned short> src_dev(src), dst_dev(src.size());
  allow_shared(swizzle_round_trip_kernel<C>, rows * C * 2);
  swizzle_round_trip_kernel<C><<<1, 128, rows * C * 2>>>(src_dev.ptr, dst_dev.ptr, rows);
  finish_launch();
  const std::vector<unsigned short> got = dst_dev.download();
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != src[i];
  record(row, row + " round trip", bad == 0, std::to_string(bad) + " elements differ");
}

static void swizzle_tests() {
  swizzle_case<8>();
  swizzle_case<24>();
  swizzle_case<40>();
  swizzle_case<16>();
  swizzle_case<48>();
  swizzle_case<80>();
  swizzle_case<32>();
  swizzle_case<96>();
  swizzle_case<64>();
  swizzle_case<128>();
  swizzle_case<192>();
  swizzle_case<256>();
}

// ---- fragments -------------------------------------------------------------------------------------------------

static const float nan_value = std::numeric_limits<float>::quiet_NaN();
static const float inf_value = std::numeric_limits<float>::infinity();

static float host_max(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? nan_value : (a > b ? a : b); }
static float host_min(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? nan_value : (a < b ? a : b); }
// Same value: both NaN, or equal (a zero's sign is not checked: max(+0, -0) may give either).
static bool same_value(float got, float want) { return std::isnan(want) ? std::isnan(got) : got == want; }
// Same value and, for sums, the same bits (the reference follows the device's order).
static bool same_bits(float got, float want) { return std::isnan(want) ? std::isnan(got) : float_bits(got) == float_bits(want); }

// A value for lane `i` of a quad of pattern `p`: special values in the first patterns, reals after.
static float quad_input(int p, int i) {
  const float specials[][4] = {
      {nan_value, 1.0f, 2.0f, 3.0f},     {1.0f, nan_value, -2.0f, 3.0f},   {1.0f, 2.0f, nan_value, 3.0f},
      {1.0f, 2.0f, 3.0f, nan_value},     {inf_value, 1.0f, -1.0f, 0.0f},   {-inf_value, 1.0f, -1.0f, 0.0f},
      {inf_value, -inf_value, 1.0f, 2.0f}, {nan_value, inf_value, -inf_value, 0.0f}, {-inf_value, -inf_value, -inf_value, -inf_value},
      {0.0f, -0.0f, -0.0f, 0.0f},        {-0.0f, -0.0f, -0.0f, -0.0f},     {-inf_value, nan_value, -inf_value, -inf_value},
      {3e38f, 3e38f, 3e38f, 3e38f},      {-1e-45f, 1e-45f, 0.0f, -0.0f},   {nan_value, nan_value, nan_value, nan_value},
      {1.0f, 1e-8f, -1.0f, 1e-8f},
  };
  constexpr int count = sizeof specials / sizeof specials[0];
  if (p < count) return specials[p][i];
  return random_uniform(-100.0f, 100.0f);
}

static void quad_tests() {
  const std::string row = "quad_sum/max/min";
  if (!wanted(row)) return;
  for (int blocks : {1, 4}) {
    const int lanes = blocks * 256;
    char name[64];
    std::snprintf(name, sizeof name, "%s lanes=%d", row.c_str(), lanes);
    begin_case(name);
    std::vector<float> in(lanes);
    for (int q = 0; q < lanes / 4; ++q)
      for (int i = 0; i < 4; ++i) in[q * 4 + i] = quad_input(q % 64 < 32 ? q % 64 : 1000, i);
    device_buffer<float> in_dev(in), sum_dev(lanes), max_dev(lanes), min_dev(lanes);
    quad_kernel<<<blocks, 256>>>(in_dev.ptr, sum_dev.ptr, max_dev.ptr, min_dev.ptr);
    finish_launch();
    const auto sum = sum_dev.download(), max = max_dev.download(), min = min_dev.download();
    std::string detail;
    for (int l = 0; l < lanes; ++l) {
      const float* v = &in[l / 4 * 4];
      const int j = l % 4;
      // Lane j: (v_j + v_{j^1}) + (v_{j^2} + v_{j^3}); the same for every lane (addition commutes).
      const float want_sum = (v[j] + v[j ^ 1]) + (v[j ^ 2] + v[j ^ 3]);
      const float want_max = host_max(host_max(v[0], v[1]), host_max(v[2], v[3]));
      const float want_min = host_min(host_min(v[0], v[1]), host_min(v[2], v[3]));
      if (detail.empty() && (!same_bits(sum[l], want_sum) || !same_value(max[l], want_max) || !same_value(min[l], want_min))) {
        char text[256];
        std::snprintf(text, sizeof text, "lane %d of (%g %g %g %g): sum %g max %g min %g, want %g %g %g", l, v[0], v[1], v[2], v[3], sum[l],
                      max[l], min[l], want_sum, want_max, want_min);
        detail = text;
      }
    }
    record(row, name, detail.empty(), detail);
  }
}

template <int NT>
static void row_reduce_case(int warps) {
  const std::string row = "row reductions over C fragments";
  if (!wanted(row)) return;
  char name[96];
  std::snprintf(name, sizeof name, "%s warps=%d cols=%d", row.c_str(), warps, NT * 8);
  begin_case(name);
  const int rows = warps * 16, cols = NT * 8;
  std::vector<float> x(rows * cols);
  for (auto& v : x) v = random_uniform(-10.0f, 10.0f);
  // Specials in some rows: one NaN (at varying columns), +inf, -inf, both infinities, a whole row of -inf.
  for (int r = 0; r < rows; ++r) {
    const int c = (r * 5) % cols;
    switch (r % 8) {
      case 1: x[r * cols + c] = nan_value; break;
      case 2: x[r * cols + c] = inf_value; break;
      case 3: x[r * cols + c] = -inf_value; break;
      case 4: x[r * cols + c] = inf_value; x[r * cols + (c + 3) % cols] = -inf_value; break;
      case 5: for (int k = 0; k < cols; ++k) x[r * cols + k] = -inf_value; break;
      default: break;
    }
  }
  device_buffer<float> x_dev(x), sum_dev(rows), max_dev(rows), min_dev(rows);
  row_reduce_kernel<NT><<<1, warps * 32>>>(x_dev.ptr, sum_dev.ptr, max_dev.ptr, min_dev.ptr);
  finish_launch();
  const auto sum = sum_dev.download(), max = max_dev.download(), min = min_dev.download();
  std::string detail;
  for (int r = 0; r < rows; ++r) {
    // The device's order: lane t holds columns 8 nt + 2 t + {0, 1}; its partial sum runs over them in order.
    float partial[4];
    for (int t = 0; t < 4; ++t) {
      partial[t] = 0.0f;
      for (int nt = 0; nt < NT; ++nt)
        for (int k = 0; k < 2; ++k) partial[t] += x[r * cols + nt * 8 + 2 * t + k];
    }
    const float want_sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    float want_max = x[r * cols], want_min = x[r * cols];
    for (int k = 0; k < cols; ++k) {
      want_max = host_max(want_max, x[r * cols + k]);
      want_min = host_min(want_min, x[r * cols + k]);
    }
    if (detail.empty() && (!same_bits(sum[r], want_sum) || !same_value(max[r], want_max) || !same_value(min[r], want_min))) {
      char text[200];
      std::snprintf(text, sizeof text, "row %d: sum %g max %g min %g, want %g %g %g", r, sum[r], max[r], min[r], want_sum, want_max, want_min);
      detail = text;
    }
  }
  record(row, name, detail.empty(), detail);
}

template <class T>
static void mma_layout_case() {
  const std::string row = std::string("mma layout + fragment_row/col ") + dtype_name<T>();
  if (!wanted(row)) return;
  for (int rep = 0; rep < 4; ++rep) {
    const std::string name = row + " #" + std::to_string(rep);
    begin_case(name);
    std::vector<unsigned short> a(16 * 16), b(16 * 8);
    for (auto& x : a) x = to_bits<T>(static_cast<float>(random_int(-8, 8)));
    for (auto& x : b) x = to_bits<T>(static_cast<float>(random_int(-8, 8)));
    device_buffer<unsigned short> a_dev(a), b_dev(b);
    device_buffer<float> c_dev(16 * 8);
    device_buffer<int> rows_dev(128), cols_dev(128);
    mma_layout_kernel<T><<<1, 32>>>(a_dev.ptr, b_dev.ptr, c_dev.ptr, rows_dev.ptr, cols_dev.ptr);
    finish_launch();
    const auto c = c_dev.download();
    const auto rows = rows_dev.download(), cols = cols_dev.download();
    std::string detail;
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e) {
        const int want_row = lane / 4 + (e >= 2 ? 8 : 0), want_col = 2 * (lane % 4) + (e & 1);
        if (detail.empty() && (rows[lane * 4 + e] != want_row || cols[lane * 4 + e] != want_col))
          detail = "fragment_row/col(" + std::to_string(lane) + ", " + std::to_string(e) + ") = (" + std::to_string(rows[lane * 4 + e]) + ", " +
                   std::to_string(cols[lane * 4 + e]) + "), PTX layout (" + std::to_string(want_row) + ", " + std::to_string(want_col) + ")";
      }
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        float want = 0.0f;
        for (int k = 0; k < 16; ++k) want += from_bits<T>(a[m * 16 + k]) * from_bits<T>(b[k * 8 + n]);
        if (detail.empty() && !same_value(c[m * 8 + n], want))
          detail = "C[" + std::to_string(m) + "][" + std::to_string(n) + "] = " + std::to_string(c[m * 8 + n]) + ", want " + std::to_string(want);
      }
    record(row, name, detail.empty(), detail);
  }
}

static void ldmatrix_layout_test() {
  const std::string row = "ldmatrix_x4 / _trans layout";
  if (!wanted(row)) return;
  begin_case(row);
  std::vector<unsigned short> in(256);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<unsigned short>(i * 251 + 7);  // distinct
  device_buffer<unsigned short> in_dev(in);
  device_buffer<unsigned> out_dev(256);
  ldmatrix_layout_kernel<<<1, 32>>>(in_dev.ptr, out_dev.ptr);
  finish_launch();
  const auto out = out_dev.download();
  std::string detail;
  auto element = [&](int m, int r, int c) { return static_cast<unsigned>(in[m * 64 + r * 8 + c]); };
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < 4; ++m) {
      const int g = lane / 4, t = lane % 4;
      const unsigned plain = element(m, g, 2 * t) | (element(m, g, 2 * t + 1) << 16);
      const unsigned trans = element(m, 2 * t, g) | (element(m, 2 * t + 1, g) << 16);
      if (detail.empty() && out[lane * 4 + m] != plain) detail = "ldmatrix_x4 lane " + std::to_string(lane) + " register " + std::to_string(m);
      if (detail.empty() && out[128 + lane * 4 + m] != trans) detail = "ldmatrix_x4_trans lane " + std::to_string(lane) + " register " + std::to_string(m);
    }
  record(row, row, detail.empty(), detail);
}

// ---- pack2 -----------------------------------------------------------------------------------------------------

// Inputs that probe round to nearest even: the bits below the 16-bit type's last mantissa bit set to exact
// ties, just below and above them, and random; exponents across the type's range and beyond; specials.
template <class T>
static std::vector<float> pack2_inputs() {
  constexpr bool half = std::is_same_v<T, __half>;
  const int dropped = half ? 13 : 16;  // float mantissa bits below the type's last
  const uint32_t tie = 1u << (dropped - 1), low_mask = (1u << dropped) - 1;
  const uint32_t lows[] = {0u, tie, tie - 1, tie + 1, low_mask, 1u};
  std::vector<float> v = {0.0f, -0.0f, inf_value, -inf_value, nan_value, 1.0f, -1.0f, 3e38f, -3e38f, 1e-45f, -1e-45f,
                          65504.0f, 65519.0f, 65520.0f, -65520.0f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
                          8.940697e-08f, 1.0000001f, 1.00390625f, 1.01171875f, 0.00048828125f};
  for (int i = 0; i < 8192; ++i) {
    uint32_t bits = static_cast<uint32_t>(random_bits() >> 32);
    if (half) {  // biased float exponent 97..145: f16 subnormals (from 2^-24) to past its largest value
      bits = (bits & 0x807fffffu) | (static_cast<uint32_t>(97 + random_int(0, 48)) << 23);
    }
    if (i % 8 != 7) bits = (bits & ~low_mask) | lows[i % 6];
    v.push_back(bits_float(bits));
  }
  if (v.size() % 2) v.push_back(2.0f);
  return v;
}

template <class T>
static void pack2_test() {
  const std::string row = std::string("pack2 ") + dtype_name<T>();
  if (!wanted(row)) return;
  begin_case(row);
  const std::vector<float> in = pack2_inputs<T>();
  const int pairs = static_cast<int>(in.size() / 2);
  device_buffer<float> in_dev(in);
  device_buffer<unsigned> out_dev(pairs);
  pack2_kernel<T><<<(pairs + 255) / 256, 256>>>(in_dev.ptr, out_dev.ptr, pairs);
  finish_launch();
  const auto out = out_dev.download();
  size_t bad = 0;
  std::string detail;
  const unsigned short exponent_mask = std::is_same_v<T, __half> ? 0x7c00 : 0x7f80;
  auto is_nan = [&](unsigned short h) { return (h & exponent_mask) == exponent_mask && (h & ~exponent_mask & 0x7fff) != 0; };
  for (int i = 0; i < pairs; ++i)
    for (int half = 0; half < 2; ++half) {
      const float x = in[2 * i + half];
      const unsigned short got = static_cast<unsigned short>(out[i] >> (16 * half)), want = to_bits<T>(x);
      const bool ok = std::isnan(x) ? is_nan(got) : got == want;
      if (!ok) {
        if (detail.empty()) {
          char text[160];
          std::snprintf(text, sizeof text, "%.9g (0x%08x) -> 0x%04x, host 0x%04x", x, float_bits(x), got, want);
          detail = text;
        }
        ++bad;
      }
    }
  if (bad) detail = std::to_string(bad) + " of " + std::to_string(in.size()) + " values differ; first " + detail;
  record(row, row + " (" + std::to_string(in.size()) + " values)", bad == 0, detail);
  table[row].note = std::to_string(in.size()) + " values, bit-exact";
}

// ---- fast_tanh --------------------------------------------------------------------------------------------------

// Against tanh in float64: |y - tanh x| ≤ 2^-10 |tanh x| + 2^-126 (tanh.approx.f32: relative error about 2^-11;
// the absolute term lets subnormal inputs flush to zero); tanh(±inf) = ±1, NaN stays NaN.
static void fast_tanh_test() {
  const std::string row = "fast_tanh";
  if (!wanted(row)) return;
  begin_case(row);
  std::vector<float> in = {0.0f, -0.0f, inf_value, -inf_value, nan_value, 1e-45f, -1e-45f, 1e-38f, 1e-20f, 1e-5f, 0.5f, 1.0f,
                           -1.0f, 9.0f, 10.0f, 20.0f, -20.0f, 3e38f, -3e38f};
  for (int i = 0; i < 16384; ++i) {
    // Uniform on [-10, 10], and log-uniform magnitudes 2^-30 .. 2^5 with both signs.
    if (i % 2) in.push_back(random_uniform(-10.0f, 10.0f));
    else in.push_back((i % 4 ? 1.0f : -1.0f) * std::ldexp(1.0f, random_int(-30, 4)) * random_uniform(1.0f, 2.0f));
  }
  const int n = static_cast<int>(in.size());
  device_buffer<float> in_dev(in), out_dev(n);
  fast_tanh_kernel<<<(n + 255) / 256, 256>>>(in_dev.ptr, out_dev.ptr, n);
  finish_launch();
  const auto out = out_dev.download();
  size_t bad = 0;
  double worst = 0.0;
  std::string detail;
  for (int i = 0; i < n; ++i) {
    const double want = std::tanh(static_cast<double>(in[i]));
    bool ok;
    if (std::isnan(in[i])) ok = std::isnan(out[i]);
    else {
      const double err = std::fabs(out[i] - want);
      ok = !std::isnan(out[i]) && err <= std::ldexp(std::fabs(want), -10) + std::ldexp(1.0, -126);
      if (std::fabs(want) >= std::ldexp(1.0, -126)) worst = std::max(worst, err / std::fabs(want));
    }
    if (!ok && bad++ == 0) {
      char text[160];
      std::snprintf(text, sizeof text, "fast_tanh(%.9g) = %.9g, tanh %.9g", in[i], out[i], want);
      detail = text;
    }
  }
  if (bad) detail = std::to_string(bad) + " of " + std::to_string(n) + " values out of bound; first " + detail;
  record(row, row, bad == 0, detail);
  char note[96];
  std::snprintf(note, sizeof note, "%d values, worst relative error 2^%.2f (bound 2^-10)", n, std::log2(worst));
  table[row].note = note;
}

[[noreturn]] static void print_table_and_exit(int status) {
  std::printf("\n| test | passed / run | worst error / Σ abs(a b) | bound | note |\n|---|---|---|---|---|\n");
  int passed = 0, run = 0;
  for (const auto& name : row_order) {
    const table_row& r = table[name];
    passed += r.passed;
    run += r.run;
    char worst[32] = "-", bound[32] = "-";
    if (r.has_metric) std::snprintf(worst, sizeof worst, "%.2e", r.worst);
    if (r.has_metric) std::snprintf(bound, sizeof bound, r.bound > 0 ? "%.2e" : "exact", r.bound);
    std::printf("| %s | %s%d/%d%s | %s | %s | %s |\n", name.c_str(), r.passed == r.run ? "" : "**", r.passed, r.run,
                r.passed == r.run ? "" : "**", worst, bound, r.note.c_str());
  }
  if (status == 2) {  // the case a CUDA error stopped counts as failed
    std::printf("| %s | **aborted** | | | CUDA error |\n", current_case.c_str());
    run += 1;
  }
  std::printf("\n%d passed, %d failed\n", passed, run - passed);
  std::fflush(stdout);
  std::exit(status >= 0 ? status : (run == passed && run > 0 ? 0 : 1));
}

// ---- main ------------------------------------------------------------------------------------------------------

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--verbose")) verbose = true;
    else if (!std::strncmp(argv[i], "--filter=", 9)) filter = argv[i] + 9;
    else if (!std::strcmp(argv[i], "--subset")) subset = true;
    else {
      std::fprintf(stderr, "usage: test_tile [--verbose] [--filter=TEXT] [--subset]\n");
      return 2;
    }
  }
  cudaDeviceProp prop;
  TILE_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("device: %s (%d SMs, sm_%d%d), runtime %d, driver %d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor,
              runtime, driver);

  gemm_tests<__nv_bfloat16>();
  gemm_tests<__half>();
  cp_async_tests();
  swizzle_tests();
  quad_tests();
  for (int warps : {1, 4, 8}) {
    row_reduce_case<2>(warps);
    row_reduce_case<8>(warps);
    row_reduce_case<16>(warps);
  }
  mma_layout_case<__nv_bfloat16>();
  mma_layout_case<__half>();
  ldmatrix_layout_test();
  pack2_test<__nv_bfloat16>();
  pack2_test<__half>();
  fast_tanh_test();
  zero_fill_null_test();

  print_table_and_exit(-1);
}
