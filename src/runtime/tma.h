// Host-side TMA tensor maps (CUtensorMap) for the sm_90a GEMM skeleton (device/solder/gemm).
//
// CuTe cannot encode tensor maps under NVRTC, so the runtime does it with the driver's
// cuTensorMapEncodeTiled (opened lazily, like every other driver call: cuda_api.cpp). Two layers:
//   plan_gemm_operand()   pure arithmetic, no driver: the arguments of cuTensorMapEncodeTiled for one
//                         operand of one tile configuration, or why the operand cannot be described
//                         (tested on any machine; also used by the nvcc device tests, so the GPU tests
//                         exercise exactly this code);
//   encode_gemm_operand() plan + the driver call; throws solder::Error on a bad operand or a driver error.
//
// The contract with the kernel (sm90_gemm.cuh), per operand (A: rows = M, tile_rows = BM; B: rows = N,
// tile_rows = BN), all with 128-byte swizzle, zero fill out of bounds, 3 dimensions (the last = batch):
//   K-major  (rows × K, K contiguous):  dims {K, rows, batch},  box {BK, tile_rows, 1}
//   MN-major (K × rows, rows contiguous): dims {rows, K, batch}, box {64, BK, 1} (box_k: {64, box_k, 1})
// where BK × element size = 128 bytes (tf32: 32 elements of 4 bytes, K-major only; a K-major 1-byte operand may also take BK = 64 with the 64-byte
// swizzle: the fp8 attention skeleton's Q, K and V at head dim 64). TMA needs: the base address 16-byte aligned, the leading
// dimension `ld` (elements between consecutive rows, resp. consecutive k) and the batch stride times
// the element size multiples of 16 bytes. So a K-major bf16 operand with K = 17 needs ld ≥ 24 (padding
// that is never read: TMA zero-fills past K).
#pragma once

#include <cstdint>
#include <string>

namespace solder::runtime {

// The same values as solder::gemm::Dtype (device/solder/gemm/config.cuh).
// tf32: 32-bit floats (the map's FLOAT32, a plain 4-byte copy: the values are rounded before they are stored).
enum class GemmDtype : int { bf16 = 0, f16 = 1, e4m3 = 2, e5m2 = 3, tf32 = 4 };

int gemm_dtype_bytes(GemmDtype dtype);
const char* gemm_dtype_name(GemmDtype dtype);

// One GEMM operand in device memory, and the tile it is read in.
struct GemmOperand {
  GemmDtype dtype = GemmDtype::bf16;
  bool k_major = true;         // K contiguous (rows × K); false: rows contiguous (K × rows)
  int64_t rows = 0;            // M for A, N for B (≥ 1)
  int64_t k = 0;               // the reduced extent (≥ 1; a K of 0 is encoded as 1 and never read)
  int64_t ld = 0;              // elements between consecutive rows (K-major) or consecutive k (MN-major)
  int64_t batch = 1;           // batch extent of this operand (1 for a broadcast operand)
  int64_t batch_stride = 0;    // elements between batches (ignored when batch == 1)
  int tile_rows = 0;           // BM (A) or BN (B)
  int tile_k = 0;              // BK
  int box_k = 0;               // an MN-major box's K rows when not tile_k (0: tile_k; Config::BBoxKRows)
  unsigned long long base = 0; // device address
  bool swizzle = true;         // 128-byte swizzle (the skeletons' operands; 64-byte for a K-major 1-byte
                               // operand with tile_k 64); false: none (a staged bias column)
};

// cuTensorMapEncodeTiled's arguments (cuda.h enum values).
struct TmaEncodeArgs {
  int data_type = 0;  // CUtensorMapDataType
  unsigned rank = 3;
  uint64_t dims[3] = {};
  uint64_t strides[2] = {};  // bytes, dims 1 and 2
  uint32_t box[3] = {};
  uint32_t element_strides[3] = {1, 1, 1};
  int interleave = 0;    // CU_TENSOR_MAP_INTERLEAVE_NONE
  int swizzle = 3;       // CU_TENSOR_MAP_SWIZZLE_128B
  int l2_promotion = 2;  // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
  int oob_fill = 0;      // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE (zeros)
};

// Fills *args for `operand`; returns "" on success, else what is wrong ("ld (17 elements = 34 bytes)
// must be a multiple of 16 bytes"). `what` names the operand in the message ("A").
std::string plan_gemm_operand(const GemmOperand& operand, const char* what, TmaEncodeArgs* args);

// A CUtensorMap: 128 bytes, 128-byte aligned like cuda.h's (solder::gemm::TensorMap has the same 128 bytes).
struct alignas(128) TensorMapBytes {
  unsigned long long words[16] = {};
};
static_assert(sizeof(TensorMapBytes) == 128, "CUtensorMap is 128 bytes");

// plan_gemm_operand + cuTensorMapEncodeTiled. Throws solder::Error naming the operand and the problem,
// or the driver's error and the arguments it was given.
TensorMapBytes encode_gemm_operand(const GemmOperand& operand, const char* what = "operand");

}  // namespace solder::runtime
