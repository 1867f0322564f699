// Host helpers shared by the GEMM skeleton's device test and benchmark (tests/gpu/gemm, bench/gemm):
// checked CUDA calls, operands in device memory with their TMA maps (through the runtime's
// plan_gemm_operand, src/runtime/tma.h), element conversions, and launching.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <solder/gemm/sm90_gemm.cuh>

#include "runtime/tma.h"

#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(3);                                                                                   \
    }                                                                                                 \
  } while (0)

namespace gemm_test {

using solder::gemm::Dtype;
using solder::gemm::GemmShape;
using solder::gemm::TensorMap;
namespace rt = solder::runtime;

inline rt::GemmDtype to_rt(Dtype d) { return static_cast<rt::GemmDtype>(static_cast<int>(d)); }

// Float → storage bits (round to nearest even; e4m3 saturates) and back.
inline uint16_t encode16(Dtype d, float x) {
  if (d == Dtype::bf16) {
    __nv_bfloat16 v = __float2bfloat16_rn(x);
    uint16_t bits;
    std::memcpy(&bits, &v, 2);
    return bits;
  }
  __half v = __float2half_rn(x);
  uint16_t bits;
  std::memcpy(&bits, &v, 2);
  return bits;
}
inline float decode16(Dtype d, uint16_t bits) {
  if (d == Dtype::bf16) {
    __nv_bfloat16 v;
    std::memcpy(&v, &bits, 2);
    return __bfloat162float(v);
  }
  __half v;
  std::memcpy(&v, &bits, 2);
  return __half2float(v);
}
inline uint8_t encode8(Dtype d, float x) {
  return d == Dtype::e4m3 ? __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) : __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
}
inline float decode8(Dtype d, uint8_t bits) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(bits, d == Dtype::e4m3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(h));
}

// A float rounded to tf32 as the Kernel IR's round_tf32 does (10 fraction bits, nearest even: cvt.rn),
// and cut to tf32 (the low 13 bits dropped: round toward zero); NaN and infinity unchanged.
inline float round_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7F800000u) != 0x7F800000u) bits = (bits + 0x0FFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
  std::memcpy(&x, &bits, 4);
  return x;
}
inline float truncate_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7F800000u) != 0x7F800000u) bits &= ~0x1FFFu;
  std::memcpy(&x, &bits, 4);
  return x;
}

// cuTensorMapEncodeTiled through the runtime API's driver entry point (no -lcuda needed).
using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline EncodeFn encode_fn() {
  static EncodeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !p) {
      std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
      std::exit(3);
    }
    return reinterpret_cast<EncodeFn>(p);
  }();
  return fn;
}

// One operand: host values (decoded, as the MMA sees them), device storage with padded rows (the
// padding holds NaN: a kernel that reads past the extent gets NaN into its results). tf32: f32 storage
// holding values rounded to tf32 (round_tf32), as the code generator stages them; unrounded_tf32 keeps
// the random f32 values whole (values then hold the f32 values; the hardware's treatment of the low
// 13 bits is what the tf32 test measures).
struct Operand {
  Dtype dtype = Dtype::bf16;
  bool k_major = true;
  int rows = 0, k = 0, batch = 1;
  int64_t ld = 0, batch_stride = 0;
  std::vector<float> values;  // [b][row][k], decoded
  void* device = nullptr;
  size_t bytes = 0;

  float at(int b, int r, int kk) const { return values[(size_t(b) * rows + r) * k + kk]; }
};

inline Operand make_operand(Dtype dtype, bool k_major, int rows, int k, int batch, std::mt19937& rng, float range = 1.0f,
                            bool unrounded_tf32 = false) {
  Operand op;
  op.dtype = dtype;
  op.k_major = k_major;
  op.rows = rows;
  op.k = k;
  op.batch = batch;
  const int esize = solder::gemm::dtype_bytes(dtype);
  const int align = 16 / esize;
  const int64_t inner = k_major ? k : rows, outer = k_major ? rows : k;
  op.ld = (std::max<int64_t>(inner, 1) + align - 1) / align * align;
  if (op.ld == inner && inner % (2 * align) == 0) op.ld += align;  // some padding even for round sizes
  op.batch_stride = op.ld * std::max<int64_t>(outer, 1);
  op.bytes = size_t(op.batch_stride) * batch * esize;
  std::vector<uint8_t> storage(op.bytes, 0xFF);  // NaN in every format
  op.values.assign(size_t(batch) * rows * k, 0.0f);
  std::uniform_real_distribution<float> dist(-range, range);
  for (int b = 0; b < batch; ++b)
    for (int r = 0; r < rows; ++r)
      for (int kk = 0; kk < k; ++kk) {
        const float x = dist(rng);
        const int64_t index = b * op.batch_stride + (k_major ? int64_t(r) * op.ld + kk : int64_t(kk) * op.ld + r);
        float decoded;
        if (esize == 4) {
          decoded = unrounded_tf32 ? x : round_tf32(x);
          std::memcpy(&storage[index * 4], &decoded, 4);
        } else if (esize == 2) {
          uint16_t bits = encode16(dtype, x);
          std::memcpy(&storage[index * 2], &bits, 2);
          decoded = decode16(dtype, bits);
        } else {
          uint8_t bits = encode8(dtype, x);
          storage[index] = bits;
          decoded = decode8(dtype, bits);
        }
        op.values[(size_t(b) * rows + r) * k + kk] = decoded;
      }
  CUDA_CHECK(cudaMalloc(&op.device, op.bytes));
  CUDA_CHECK(cudaMemcpy(op.device, storage.data(), op.bytes, cudaMemcpyHostToDevice));
  return op;
}

inline void free_operand(Operand& op) {
  if (op.device) CUDA_CHECK(cudaFree(op.device));
  op.device = nullptr;
}

// A 3xTF32 operand written by tf32_split_kernel: `rows` K-major rows of 3k tf32 values ([hi | lo | hi] or
// [lo | hi | hi] along K), leading dimension ld3, at `device` (owned by the caller; values left empty).
inline Operand tf32x3_operand(int rows, int k, int64_t ld3, void* device) {
  Operand op;
  op.dtype = Dtype::tf32;
  op.k_major = true;
  op.rows = rows;
  op.k = 3 * k;
  op.ld = ld3;
  op.batch_stride = ld3 * rows;
  op.device = device;
  return op;
}

// The tensor map for an operand read in tiles of tile_rows × tile_k (the runtime's plan, then the driver);
// box_k: an MN-major box's K rows when not tile_k (Config::BBoxKRows).
inline TensorMap make_map(const Operand& op, int tile_rows, int tile_k, const char* what, int box_k = 0) {
  rt::GemmOperand g;
  g.dtype = to_rt(op.dtype);
  g.k_major = op.k_major;
  g.rows = op.rows;
  g.k = op.k;
  g.ld = op.ld;
  g.batch = op.batch;
  g.batch_stride = op.batch_stride;
  g.tile_rows = tile_rows;
  g.tile_k = tile_k;
  g.box_k = box_k == tile_k ? 0 : box_k;
  g.base = reinterpret_cast<uintptr_t>(op.device);
  rt::TmaEncodeArgs args;
  std::string problem = rt::plan_gemm_operand(g, what, &args);
  if (!problem.empty()) {
    std::fprintf(stderr, "plan_gemm_operand: %s\n", problem.c_str());
    std::exit(3);
  }
  TensorMap map;
  static_assert(sizeof(TensorMap) == sizeof(CUtensorMap), "TensorMap must match CUtensorMap");
  CUresult r = encode_fn()(reinterpret_cast<CUtensorMap*>(&map), CUtensorMapDataType(args.data_type), args.rank, op.device,
                           reinterpret_cast<const cuuint64_t*>(args.dims), reinterpret_cast<const cuuint64_t*>(args.strides),
                           args.box, args.element_strides, CUtensorMapInterleave(args.interleave),
                           CUtensorMapSwizzle(args.swizzle), CUtensorMapL2promotion(args.l2_promotion),
                           CUtensorMapFloatOOBfill(args.oob_fill));
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d) for %s: dims %llu %llu %llu strides %llu %llu box %u %u\n", int(r),
                 what, (unsigned long long)args.dims[0], (unsigned long long)args.dims[1], (unsigned long long)args.dims[2],
                 (unsigned long long)args.strides[0], (unsigned long long)args.strides[1], args.box[0], args.box[1]);
    std::exit(3);
  }
  return map;
}

// How many blocks of gemm_kernel<C, E> are resident at once: the SM count, or for clusters the
// clusters that fit at once (not every GPC holds an even number of free SMs) times the cluster size.
template <class C, class E>
int resident_blocks() {
  static int blocks = [] {
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (C::ClusterSize == 1) return sms;
    auto kernel = solder::gemm::gemm_kernel<C, E>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SmemBytes));
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(sms / C::ClusterSize * C::ClusterSize);
    config.blockDim = dim3(C::Threads);
    config.dynamicSmemBytes = C::SmemBytes;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = C::ClusterSize;
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    int clusters = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
    std::printf("note: %d clusters of %d blocks fit at once (%d SMs)\n", clusters, C::ClusterSize, sms);
    return clusters > 0 ? clusters * C::ClusterSize : sms;
  }();
  return blocks;
}

// $GEMM_TEST_FILTER: run only the configurations whose name contains it (e.g. " rows": the row-store
// families); unset or empty: every case.
inline bool selected(const char* config_name) {
  const char* filter = std::getenv("GEMM_TEST_FILTER");
  return !filter || !*filter || std::strstr(config_name, filter) != nullptr;
}

// Launches `kernel` on the geometry `g` with `smem_limit` bytes of dynamic shared memory allowed and g's
// cluster shape as a launch attribute (without it a multicast kernel traps: illegal instruction, H100
// 2026-11-26 20:26 UTC, the first dual-B 1x2 case); programmatic: with the programmatic stream
// serialization attribute too (programmatic dependent launch: the kernel may start before the previous
// one in the stream completes; gemm_body waits for it).
template <class Kernel, class... Args>
void launch_on(Kernel kernel, const solder::gemm::LaunchGeometry& g, int smem_limit, cudaStream_t stream, bool programmatic,
               const Args&... args) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_limit));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(g.grid[0], g.grid[1], g.grid[2]);
  config.blockDim = dim3(g.block[0], g.block[1], g.block[2]);
  config.dynamicSmemBytes = g.smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[2];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = g.cluster[0];
  attribute[0].val.clusterDim.y = g.cluster[1];
  attribute[0].val.clusterDim.z = g.cluster[2];
  attribute[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic ? 2 : 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
  CUDA_CHECK(cudaGetLastError());
}

// Launches gemm_kernel<C, E> on `stream`; persistent_blocks > 0: at most that many blocks, each looping
// over tiles; < 0: resident_blocks(). SplitK > 1 needs `workspace` (config.cuh: splitk_workspace_floats /
// splitk_counters, counters zeroed). programmatic: see launch_on.
template <class C, class E>
void launch(const TensorMap& a, const TensorMap& b, const GemmShape& shape, const E& epilogue, cudaStream_t stream,
            int persistent_blocks = 0, const solder::gemm::SplitKWorkspace& workspace = {}, bool programmatic = false) {
  if (persistent_blocks < 0) persistent_blocks = resident_blocks<C, E>();
  launch_on(solder::gemm::gemm_kernel<C, E>, solder::gemm::launch_config(C{}, shape, persistent_blocks), C::SmemBytes, stream,
            programmatic, a, b, shape, epilogue, workspace);
}

// Launches gemm_dual_kernel<C, E> (C::BOperands == 2: B2's tensor map after B's), as launch() does.
template <class C, class E>
void launch_dual(const TensorMap& a, const TensorMap& b, const TensorMap& b2, const GemmShape& shape, const E& epilogue,
                 cudaStream_t stream, int persistent_blocks = 0) {
  launch_on(solder::gemm::gemm_dual_kernel<C, E>, solder::gemm::launch_config(C{}, shape, persistent_blocks), C::SmemBytes,
            stream, false, a, b, b2, shape, epilogue, solder::gemm::SplitKWorkspace{});
}

// How many of split-K's `counters` tile counters the launch left non-zero (each must be back at 0).
inline long long dirty_counters(const solder::gemm::SplitKWorkspace& workspace, long long counters) {
  long long dirty = 0;
  if (counters <= 0) return 0;
  std::vector<unsigned> raw(counters);
  CUDA_CHECK(cudaMemcpy(raw.data(), workspace.counters, counters * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (unsigned v : raw) dirty += v != 0;
  return dirty;
}

// The output `out` as floats into `got` (its size: the element count): bf16 elements decoded, or f32.
inline void read_output(const void* out, bool bf16_out, std::vector<float>& got) {
  if (bf16_out) {
    std::vector<uint16_t> raw(got.size());
    CUDA_CHECK(cudaMemcpy(raw.data(), out, raw.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < got.size(); ++i) got[i] = decode16(Dtype::bf16, raw[i]);
  } else {
    CUDA_CHECK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
  }
}

// The tail split's tail (Config::TailSplit) of C on `shape` looped over by `persistent_blocks` blocks: the
// tile units of the partial last wave (0 without persistent blocks or without a tail split).
template <class C>
int tail_units_of(const GemmShape& shape, int persistent_blocks) {
  if (C::TailSplit <= 1 || persistent_blocks <= 0) return 0;
  return solder::gemm::tail_tile_units(solder::gemm::total_units(C{}, shape), persistent_blocks / C::ClusterSize);
}
// Split-K's workspace for C on `shape`, counters zeroed (nothing allocated when SplitK is 1); with a
// tail split, the tail's workspace for `persistent_blocks` blocks (config.cuh, tail_split_workspace_floats).
template <class C>
long long workspace_counters(const GemmShape& shape, int persistent_blocks = 0) {
  if constexpr (C::TailSplit > 1)
    return solder::gemm::tail_split_counters(C::BM, C::ClusterSize, C::TailSplit, tail_units_of<C>(shape, persistent_blocks));
  else
    return solder::gemm::splitk_counters(C{}, shape);
}
template <class C>
solder::gemm::SplitKWorkspace make_workspace(const GemmShape& shape, int persistent_blocks = 0) {
  solder::gemm::SplitKWorkspace w;
  long long floats = solder::gemm::splitk_workspace_floats(C{}, shape);
  if constexpr (C::TailSplit > 1)
    floats = solder::gemm::tail_split_workspace_floats(C::BM, C::BN, C::ClusterSize, C::TailSplit, tail_units_of<C>(shape, persistent_blocks));
  const long long counters = workspace_counters<C>(shape, persistent_blocks);
  if (floats > 0) CUDA_CHECK(cudaMalloc(&w.partials, size_t(floats) * sizeof(float)));
  if (counters > 0) {
    CUDA_CHECK(cudaMalloc(&w.counters, size_t(counters) * sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(w.counters, 0, size_t(counters) * sizeof(unsigned)));
  }
  return w;
}
inline void free_workspace(solder::gemm::SplitKWorkspace& w) {
  if (w.partials) CUDA_CHECK(cudaFree(w.partials));
  if (w.counters) CUDA_CHECK(cudaFree(w.counters));
  w = {};
}

// ---- Epilogues used by the test and the benchmark -------------------------------------------------

// out[b][row][col] = acc · row_scale[row] · col_scale[col] as f32 (scales optional).
struct StoreF32 {
  float* out;
  int ld;
  long long batch_stride;
  const float* row_scale;
  const float* col_scale;
  __device__ void operator()(int b, int row, int col, float acc) const {
    float v = acc;
    if (row_scale) v *= __ldg(row_scale + row);
    if (col_scale) v *= __ldg(col_scale + col);
    out[b * batch_stride + (long long)row * ld + col] = v;
  }
};

// The same, rounded to bf16, with the pair() hook (ld even: 4-byte stores).
struct StoreBf16 {
  __nv_bfloat16* out;
  int ld;
  long long batch_stride;
  const float* row_scale;
  const float* col_scale;
  __device__ float scaled(int row, int col, float acc) const {
    if (row_scale) acc *= __ldg(row_scale + row);
    if (col_scale) acc *= __ldg(col_scale + col);
    return acc;
  }
  __device__ void operator()(int b, int row, int col, float acc) const {
    out[b * batch_stride + (long long)row * ld + col] = __float2bfloat16_rn(scaled(row, col, acc));
  }
  __device__ void pair(int b, int row, int col, float a0, float a1) const {
    __nv_bfloat162 v = __floats2bfloat162_rn(scaled(row, col, a0), scaled(row, col + 1, a1));
    *reinterpret_cast<__nv_bfloat162*>(out + b * batch_stride + (long long)row * ld + col) = v;
  }
};

// The same values through the row-store hooks (value(), row_pointer(), element): the skeleton stores
// 16 bytes of a row per lane, or one element at a time where a row is not 16-byte aligned (ld not a
// multiple of 8) or the 8 columns run past N.
struct RowStoreBf16 {
  __nv_bfloat16* out;
  int ld;
  long long batch_stride;
  const float* row_scale;
  const float* col_scale;
  using element = __nv_bfloat16;
  __device__ float value(int, int row, int col, float acc) const {
    if (row_scale) acc *= __ldg(row_scale + row);
    if (col_scale) acc *= __ldg(col_scale + col);
    return acc;
  }
  __device__ element* row_pointer(int b, int row) const { return out + b * batch_stride + (long long)row * ld; }
  // Never called when the hooks are taken (BN a multiple of 32); the fallback for other tiles.
  __device__ void operator()(int b, int row, int col, float acc) const {
    out[b * batch_stride + (long long)row * ld + col] = __float2bfloat16_rn(value(b, row, col, acc));
  }
};

// The same hooks with the skeleton's row-store schedule named (sm90_gemm.cuh, row_store_mode_of): 0
// direct, 1 registers first; RowStoreBf16 itself (no member) takes the default, 2 (staged in shared
// memory, bulk copies) where the Config has a buffer.
template <int Mode>
struct RowStoreBf16Mode : RowStoreBf16 {
  static constexpr int row_store_mode = Mode;
};

// Dual-B epilogues: out[b][row][col] = acc and out2[...] = acc2 as f32 (each product checked alone).
struct StoreDualF32 {
  float* out;
  float* out2;
  int ld;
  long long batch_stride;
  __device__ void operator()(int b, int row, int col, float acc, float acc2) const {
    out[b * batch_stride + (long long)row * ld + col] = acc;
    out2[b * batch_stride + (long long)row * ld + col] = acc2;
  }
};

// out = silu(acc) · acc2 rounded to bf16 (gated FFN's gate and up), with the dual pair() hook.
struct SwiGluBf16 {
  __nv_bfloat16* out;
  int ld;
  long long batch_stride;
  __device__ static float gated(float gate, float up) { return gate / (1.0f + __expf(-gate)) * up; }
  __device__ void operator()(int b, int row, int col, float acc, float acc2) const {
    out[b * batch_stride + (long long)row * ld + col] = __float2bfloat16_rn(gated(acc, acc2));
  }
  __device__ void pair(int b, int row, int col, float a0, float a1, float g0, float g1) const {
    *reinterpret_cast<__nv_bfloat162*>(out + b * batch_stride + (long long)row * ld + col) =
        __floats2bfloat162_rn(gated(a0, g0), gated(a1, g1));
  }
};

}  // namespace gemm_test
