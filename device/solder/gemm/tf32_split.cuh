// The operand split of 3xTF32: an f32 matrix product on tf32 tensor cores at f32 accuracy.
//
// Each f32 operand value x is split into two tf32 values (the Kernel IR's round_tf32: 10 fraction bits,
// nearest even),
//     hi(x) = round_tf32(x),   lo(x) = round_tf32(x − hi(x))     (x − hi(x) is exact in f32),
// and the product is taken as three tf32 products, the small lo·lo term dropped:
//     Σ_k a·b ≈ Σ_k hi(a)·hi(b) + hi(a)·lo(b) + lo(a)·hi(b).
// The three products are one tf32 GEMM over K' = 3K when the operands are written side by side along
// K, both K-major (rows × 3K), so the skeleton (sm90_gemm.cuh, Dtype::tf32) runs it unchanged:
//     A3 = [hi(a) | lo(a) | hi(a)],  B3 = [lo(b) | hi(b) | hi(b)]:
//     k' < K: hi(a)·lo(b),  K ≤ k' < 2K: lo(a)·hi(b),  2K ≤ k' < 3K: hi(a)·hi(b).
// The corrections come first and the large product last: the tensor cores' f32 accumulation truncates
// (rounds toward zero), so every addition into an accumulator of magnitude |S| may lose up to one unit
// of its last place and the error grows with the additions made at full magnitude: K of them in this
// order, against 3K with hi·hi first (measured on the H200: bench/NOTES.md, twentieth session, "tf32").
// The split is a memory-bound pass before the GEMM (reads the operand once, writes it three times) that
// also transposes an operand stored K-outer ([K, rows], a weight b[k, n]) to K-major.
//
//   template <int LoParts> __global__ void tf32_split_kernel(Tf32SplitArgs args)
//
// Launch: tf32_split_grid(args) blocks of kTf32SplitThreads threads, no dynamic shared memory. LoParts:
// bit p set when part p is lo(x), else hi(x): kTf32SplitA and kTf32SplitB above; kTf32SplitABigFirst and
// kTf32SplitBBigFirst put hi·hi first (A3 = [hi | hi | lo], B3 = [hi | lo | hi]), for comparison. Every
// thread of the block takes part.
#pragma once

#include "config.cuh"

namespace solder::gemm {

// The parts written side by side along K: part p of row r at dst[r · dst_ld + p · k + kk], lo(x) where
// bit p of LoParts is set, hi(x) elsewhere.
inline constexpr int kTf32SplitA = 0b010;          // hi, lo, hi
inline constexpr int kTf32SplitB = 0b001;          // lo, hi, hi
inline constexpr int kTf32SplitABigFirst = 0b100;  // hi, hi, lo
inline constexpr int kTf32SplitBBigFirst = 0b010;  // hi, lo, hi
inline constexpr int kTf32SplitTile = 32;    // a block's tile: 32 rows × 32 k
inline constexpr int kTf32SplitThreads = 256;  // 32 × 8 threads, 4 rows each

struct Tf32SplitArgs {
  const float* src = nullptr;
  long long row_stride = 0;  // elements between rows of src (the M or N index)
  long long k_stride = 1;    // elements between consecutive k (1: K-major; else the rows are contiguous)
  int rows = 0, k = 0;
  float* dst = nullptr;      // rows × dst_ld, dst_ld ≥ 3k (a multiple of 4 for TMA: 16-byte rows)
  long long dst_ld = 0;
};

struct Tf32SplitGrid {
  unsigned x = 1, y = 1;
};
SOLDER_GEMM_HD constexpr Tf32SplitGrid tf32_split_grid(const Tf32SplitArgs& a) {
  return Tf32SplitGrid{static_cast<unsigned>((a.k + kTf32SplitTile - 1) / kTf32SplitTile),
                       static_cast<unsigned>((a.rows + kTf32SplitTile - 1) / kTf32SplitTile)};
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// round_tf32 by integer arithmetic on the bits: add half of the dropped 13 bits' unit, minus one unless
// the kept last bit is odd (ties to even), then clear them. Infinity and NaN pass unchanged; a value that
// rounds past the largest float becomes infinity, as the IR's rounding does.
__device__ __forceinline__ float round_tf32(float x) {
  unsigned bits = __float_as_uint(x);
  if ((bits & 0x7F800000u) != 0x7F800000u) bits = (bits + 0x0FFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
  return __uint_as_float(bits);
}

// A block's tile of operand values in shared memory: [row][k], padded against bank conflicts.
using Tf32SplitTileValues = float[kTf32SplitTile][kTf32SplitTile + 1];

// The three parts of the block's tile `tile` (rows [row_tile · 32, +32) × k [k_tile · 32, +32), its values
// written and made visible to the block before), stored along K into a.dst (a.src unused). Every thread of
// the block calls it; the code generator's split kernels of computed operands (backend/cuda/tf32_split_writer.h)
// fill the tile with the operand's expression, then call it.
template <int LoParts>
__device__ __forceinline__ void tf32_split_store_parts(const Tf32SplitTileValues& tile, const Tf32SplitArgs& a, int k_tile, int row_tile) {
  static_assert(LoParts > 0 && LoParts < 8, "three parts, at least one lo");
  const int k0 = k_tile * kTf32SplitTile, r0 = row_tile * kTf32SplitTile;
  const int tx = threadIdx.x % kTf32SplitTile, ty = threadIdx.x / kTf32SplitTile;
  // Write the three parts of each row, coalesced along k.
#pragma unroll
  for (int i = 0; i < kTf32SplitTile; i += kTf32SplitThreads / kTf32SplitTile) {
    const int r = r0 + ty + i, kk = k0 + tx;
    if (r >= a.rows || kk >= a.k) continue;
    const float x = tile[ty + i][tx];
    const float hi = round_tf32(x), lo = round_tf32(x - hi);
    float* row = a.dst + r * a.dst_ld + kk;
    row[0] = LoParts & 1 ? lo : hi;
    row[a.k] = LoParts & 2 ? lo : hi;
    row[2LL * a.k] = LoParts & 4 ? lo : hi;
  }
}

// One block's tile: rows [row_tile · 32, +32) × k [k_tile · 32, +32) of src, all three parts. Every thread of
// the block (kTf32SplitThreads) calls it; the code generator's split kernels (backend/cuda/tf32_split_writer.h)
// call it with the tile of their linear block index.
template <int LoParts>
__device__ __forceinline__ void tf32_split_tile(const Tf32SplitArgs& a, int k_tile, int row_tile) {
  __shared__ Tf32SplitTileValues tile;
  const int k0 = k_tile * kTf32SplitTile, r0 = row_tile * kTf32SplitTile;
  const int tx = threadIdx.x % kTf32SplitTile, ty = threadIdx.x / kTf32SplitTile;
  // Load the 32 × 32 tile coalesced along whichever index is contiguous in src.
  if (a.k_stride == 1) {
#pragma unroll
    for (int i = 0; i < kTf32SplitTile; i += kTf32SplitThreads / kTf32SplitTile) {
      const int r = r0 + ty + i, kk = k0 + tx;
      tile[ty + i][tx] = r < a.rows && kk < a.k ? a.src[r * a.row_stride + kk] : 0.0f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kTf32SplitTile; i += kTf32SplitThreads / kTf32SplitTile) {
      const int kk = k0 + ty + i, r = r0 + tx;
      tile[tx][ty + i] = r < a.rows && kk < a.k ? a.src[kk * a.k_stride + r * a.row_stride] : 0.0f;
    }
  }
  __syncthreads();
  tf32_split_store_parts<LoParts>(tile, a, k_tile, row_tile);
}

template <int LoParts>
__global__ void __launch_bounds__(kTf32SplitThreads) tf32_split_kernel(Tf32SplitArgs a) {
  tf32_split_tile<LoParts>(a, blockIdx.x, blockIdx.y);
}
#endif

}  // namespace solder::gemm
