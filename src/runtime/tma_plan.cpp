// The arguments of cuTensorMapEncodeTiled for a GEMM operand: pure arithmetic, no driver and no other
// Solder source, so that the nvcc device tests (tests/gpu/gemm) compile this file as it is.
#include "runtime/tma.h"

namespace solder::runtime {

int gemm_dtype_bytes(GemmDtype dtype) {
  return dtype == GemmDtype::tf32 ? 4 : (dtype == GemmDtype::bf16 || dtype == GemmDtype::f16) ? 2 : 1;
}

const char* gemm_dtype_name(GemmDtype dtype) {
  switch (dtype) {
    case GemmDtype::bf16: return "bf16";
    case GemmDtype::f16: return "f16";
    case GemmDtype::e4m3: return "e4m3";
    case GemmDtype::e5m2: return "e5m2";
    case GemmDtype::tf32: return "tf32";
  }
  return "?";
}

namespace {
// CUtensorMapDataType values (cuda.h).
constexpr int kUint8 = 0, kFloat16 = 6, kFloat32 = 7, kBfloat16 = 9;

std::string num(int64_t v) { return std::to_string(v); }
}  // namespace

std::string plan_gemm_operand(const GemmOperand& op, const char* what, TmaEncodeArgs* args) {
  const std::string name = what ? what : "operand";
  const int bytes = gemm_dtype_bytes(op.dtype);
  if (op.dtype != GemmDtype::bf16 && op.dtype != GemmDtype::f16 && op.dtype != GemmDtype::e4m3 &&
      op.dtype != GemmDtype::e5m2 && op.dtype != GemmDtype::tf32)
    return name + ": unknown dtype " + num(static_cast<int>(op.dtype));
  if (bytes == 1 && !op.k_major)
    return name + ": an fp8 (" + gemm_dtype_name(op.dtype) + ") operand must be K-major (wgmma reads fp8 only K-major)";
  if (op.dtype == GemmDtype::tf32 && !op.k_major)
    return name + ": a tf32 operand must be K-major (wgmma reads tf32 only K-major)";
  if (op.rows < 1) return name + ": rows must be at least 1, got " + num(op.rows);
  if (op.k < 0) return name + ": K must not be negative, got " + num(op.k);
  if (op.batch < 1) return name + ": batch must be at least 1, got " + num(op.batch);
  // A swizzled box row spans 128 bytes; a K-major 1-byte operand may take 64 (the 64-byte swizzle: fp8
  // attention at head dim 64).
  const bool sw64 = op.swizzle && op.k_major && bytes == 1 && op.tile_k == 64;
  if (op.tile_k * bytes != 128 && !sw64)
    return name + ": the K tile must span 128 bytes (" + num(128 / bytes) + " " + gemm_dtype_name(op.dtype) +
           " elements; 64 for a K-major 1-byte operand), got " + num(op.tile_k);
  if (op.tile_rows < 1 || op.tile_rows > 256)
    return name + ": the row tile must be in [1, 256], got " + num(op.tile_rows);
  if (op.box_k != 0 && (op.k_major || op.box_k < 8 || op.box_k > op.tile_k || op.tile_k % op.box_k != 0 || op.box_k % 8 != 0))
    return name + ": box_k (" + num(op.box_k) + ") must divide the K tile in whole 8-row swizzle atoms, MN-major only";
  if (!op.k_major && op.tile_rows % 64 != 0)
    return name + ": an MN-major operand needs a row tile that is a multiple of 64, got " + num(op.tile_rows);
  const int64_t k = op.k > 0 ? op.k : 1;
  const int64_t inner = op.k_major ? k : op.rows;
  const int64_t outer = op.k_major ? op.rows : k;
  if (op.ld < inner)
    return name + ": ld (" + num(op.ld) + ") is smaller than the contiguous extent (" + num(inner) + ")";
  if ((op.ld * bytes) % 16 != 0)
    return name + ": ld (" + num(op.ld) + " elements = " + num(op.ld * bytes) +
           " bytes) must be a multiple of 16 bytes for TMA; pad the rows";
  if (op.base % 16 != 0) return name + ": the base address must be 16-byte aligned";
  if (op.base == 0) return name + ": the base address is null";
  int64_t batch_stride_bytes = op.batch_stride * bytes;
  if (op.batch > 1) {
    if (op.batch_stride < op.ld * outer)
      return name + ": the batch stride (" + num(op.batch_stride) + ") is smaller than one matrix (" +
             num(op.ld * outer) + " elements)";
    if (batch_stride_bytes % 16 != 0)
      return name + ": the batch stride (" + num(batch_stride_bytes) + " bytes) must be a multiple of 16 bytes";
  } else {
    batch_stride_bytes = op.ld * outer * bytes;
    batch_stride_bytes = (batch_stride_bytes + 15) / 16 * 16;
  }
  if (op.ld * bytes >= (int64_t(1) << 40) || batch_stride_bytes >= (int64_t(1) << 40))
    return name + ": strides must be under 2^40 bytes";
  if (inner > (int64_t(1) << 32) || outer > (int64_t(1) << 32) || op.batch > (int64_t(1) << 32))
    return name + ": extents must be at most 2^32";

  TmaEncodeArgs a;
  a.data_type = op.dtype == GemmDtype::bf16  ? kBfloat16
                : op.dtype == GemmDtype::f16 ? kFloat16
                : op.dtype == GemmDtype::tf32 ? kFloat32
                                              : kUint8;
  a.rank = 3;
  a.dims[0] = static_cast<uint64_t>(inner);
  a.dims[1] = static_cast<uint64_t>(outer);
  a.dims[2] = static_cast<uint64_t>(op.batch);
  a.strides[0] = static_cast<uint64_t>(op.ld * bytes);
  a.strides[1] = static_cast<uint64_t>(batch_stride_bytes);
  if (op.k_major) {
    a.box[0] = static_cast<uint32_t>(op.tile_k);
    a.box[1] = static_cast<uint32_t>(op.tile_rows);
  } else {
    a.box[0] = 64;
    a.box[1] = static_cast<uint32_t>(op.box_k != 0 ? op.box_k : op.tile_k);
  }
  a.box[2] = 1;
  if (!op.swizzle) a.swizzle = 0;  // CU_TENSOR_MAP_SWIZZLE_NONE
  else if (sw64) a.swizzle = 2;    // CU_TENSOR_MAP_SWIZZLE_64B
  *args = a;
  return "";
}

}  // namespace solder::runtime
