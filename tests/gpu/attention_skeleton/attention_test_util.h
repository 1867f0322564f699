// Host helpers shared by the attention skeleton's device test and benchmark (tests/gpu/attention_skeleton,
// bench/attention): Q/K/V/O tensors in device memory, their TMA maps through the runtime's
// plan_gemm_operand (src/runtime/tma.h), the output epilogue, and launching.
#pragma once

#include <solder/attention/sm90_attention.cuh>

#include "../gemm/gemm_test_util.h"  // CUDA_CHECK, encode16/decode16, encode_fn

namespace attention_test {

using gemm_test::decode16;
using gemm_test::decode8;
using gemm_test::encode16;
using gemm_test::encode8;
using solder::attention::AttentionShape;
using solder::attention::Dtype;
using solder::attention::TensorMap;
namespace rt = solder::runtime;

// One [batch·heads][seq][D] tensor with rows ld ≥ D elements apart (16-bit, or e4m3: 1 byte); the
// padding holds NaN (a kernel that reads past D gets NaN into its results). `values` holds the decoded
// values, [bh][row][d].
struct Tensor {
  Dtype dtype = Dtype::bf16;
  int bh = 0, seq = 0, dim = 0;
  int64_t ld = 0;
  std::vector<float> values;
  void* device = nullptr;
  size_t bytes = 0;
  float at(int b, int r, int d) const { return values[(size_t(b) * seq + r) * dim + d]; }
};

inline Tensor make_tensor(Dtype dtype, int bh, int seq, int dim, int64_t ld, std::mt19937* rng, float range) {
  Tensor t;
  t.dtype = dtype;
  t.bh = bh;
  t.seq = seq;
  t.dim = dim;
  t.ld = ld;
  const bool byte = solder::gemm::dtype_bytes(dtype) == 1;
  t.bytes = size_t(bh) * seq * ld * (byte ? 1 : 2);
  std::vector<uint16_t> storage(byte ? 0 : t.bytes / 2, 0xFFFF);  // NaN in bf16 and f16
  std::vector<uint8_t> storage8(byte ? t.bytes : 0, 0x7F);         // NaN in e4m3 (and e5m2)
  t.values.assign(size_t(bh) * seq * dim, 0.0f);
  if (rng) {
    std::uniform_real_distribution<float> dist(-range, range);
    for (int b = 0; b < bh; ++b)
      for (int r = 0; r < seq; ++r)
        for (int d = 0; d < dim; ++d) {
          const size_t at = (size_t(b) * seq + r) * ld + d;
          float value;
          if (byte) {
            storage8[at] = encode8(dtype, dist(*rng));
            value = decode8(dtype, storage8[at]);
          } else {
            storage[at] = encode16(dtype, dist(*rng));
            value = decode16(dtype, storage[at]);
          }
          t.values[(size_t(b) * seq + r) * dim + d] = value;
        }
  }
  CUDA_CHECK(cudaMalloc(&t.device, t.bytes));
  CUDA_CHECK(cudaMemcpy(t.device, byte ? static_cast<const void*>(storage8.data()) : storage.data(), t.bytes, cudaMemcpyHostToDevice));
  return t;
}

inline void free_tensor(Tensor& t) {
  if (t.device) CUDA_CHECK(cudaFree(t.device));
  t.device = nullptr;
}

// The tensor map of q (tile_rows = Config::QBoxRows) or k, v (Config::KVBoxRows): a K-major GEMM
// operand with rows = seq, k = D, batch = batch · heads.
// tile_k: the box's row in elements (0: one 128-byte swizzle row; e4m3 at head dim 64: 64, the 64-byte swizzle).
inline TensorMap make_map(const Tensor& t, int tile_rows, const char* what, int tile_k = 0) {
  rt::GemmOperand g;
  g.dtype = static_cast<rt::GemmDtype>(static_cast<int>(t.dtype));
  g.k_major = true;
  g.rows = t.seq;
  g.k = t.dim;
  g.ld = t.ld;
  g.batch = t.bh;
  g.batch_stride = t.ld * t.seq;
  g.tile_rows = tile_rows;
  g.tile_k = tile_k > 0 ? tile_k : 128 / solder::gemm::dtype_bytes(t.dtype);
  g.base = reinterpret_cast<uintptr_t>(t.device);
  rt::TmaEncodeArgs args;
  const std::string problem = rt::plan_gemm_operand(g, what, &args);
  if (!problem.empty()) {
    std::fprintf(stderr, "plan_gemm_operand: %s\n", problem.c_str());
    std::exit(3);
  }
  TensorMap map;
  static_assert(sizeof(TensorMap) == sizeof(CUtensorMap), "TensorMap must match CUtensorMap");
  CUresult r = gemm_test::encode_fn()(
      reinterpret_cast<CUtensorMap*>(&map), CUtensorMapDataType(args.data_type), args.rank, t.device,
      reinterpret_cast<const cuuint64_t*>(args.dims), reinterpret_cast<const cuuint64_t*>(args.strides), args.box,
      args.element_strides, CUtensorMapInterleave(args.interleave), CUtensorMapSwizzle(args.swizzle),
      CUtensorMapL2promotion(args.l2_promotion), CUtensorMapFloatOOBfill(args.oob_fill));
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d) for %s\n", int(r), what);
    std::exit(3);
  }
  return map;
}

// o[bh][row][col] as bf16 or f16 pairs (ld even).
template <Dtype T>
struct Store16 {
  void* out;
  int ld;
  int seq;
  __device__ void operator()(int bh, int row, int col, float o0, float o1) const {
    const size_t at = (size_t(bh) * seq + row) * ld + col;
    if constexpr (T == Dtype::bf16) {
      *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(out) + at) = __floats2bfloat162_rn(o0, o1);
    } else {
      *reinterpret_cast<__half2*>(static_cast<__half*>(out) + at) = __floats2half2_rn(o0, o1);
    }
  }
};

template <class C, class Score, class Mask, class E>
void launch(const TensorMap& q, const TensorMap& k, const TensorMap& v, const AttentionShape& shape, const Score& score,
            const Mask& mask, const E& epilogue, cudaStream_t stream, int persistent_blocks = 0) {
  static bool configured = false;
  // (an Epilogue of kTmaStore: the kernel whose epilogue is a __grid_constant__ parameter)
  auto kernel = [] {
    if constexpr (solder::attention::epilogue_tma_store<E>(0) && C::StagedEpilogue) return solder::attention::attention_kernel_tma_store<C, Score, Mask, E>;
    else return solder::attention::attention_kernel<C, Score, Mask, E>;
  }();
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SmemBytes));
    configured = true;
  }
  const solder::attention::LaunchGeometry g = solder::attention::launch_config(C{}, shape, persistent_blocks);
  kernel<<<dim3(g.grid[0], g.grid[1], g.grid[2]), dim3(g.block[0]), g.smem_bytes, stream>>>(q, k, v, shape, score, mask,
                                                                                          epilogue);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace attention_test
