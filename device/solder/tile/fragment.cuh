// Row-wise operations on mma C fragments (see mma.cuh for the layout): a warp owns 16 rows; lane l
// holds rows l / 4 and l / 4 + 8, and the four lanes of a quad together hold every column of them.
// So a row reduction is the lane's own columns combined, then two shuffles within the quad.
// Called by all 32 lanes of a warp together.
#pragma once

#include <cuda_bf16.h>

#include <solder/runtime.cuh>

namespace solder::tile {

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

__device__ __forceinline__ float quad_max(float v) {
  v = solder::max_nan(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return solder::max_nan(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float quad_min(float v) {
  v = solder::min_nan(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return solder::min_nan(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// Row (0..15 within the warp's 16) and column (0..7 within an n-tile) of C-fragment element e.
__device__ __forceinline__ int fragment_row(int lane, int e) { return (lane >> 2) + ((e >> 1) << 3); }
__device__ __forceinline__ int fragment_col(int lane, int e) { return ((lane & 3) << 1) + (e & 1); }

// Multiplies the eight bf16 values of an mma A fragment (four registers of bf16 pairs) by `scale`, a
// power of two: exact for every result that is a normal bf16 (bf16 has float's exponent range, so
// only magnitudes below 2^-126 · 2^k for scale = 2^k, i.e. subnormal results, would round).
// Per thread.
__device__ __forceinline__ void scale_bf16_fragment(unsigned (&frag)[4], float scale) {
  const __nv_bfloat162 s2 = __floats2bfloat162_rn(scale, scale);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    __nv_bfloat162 v = *reinterpret_cast<__nv_bfloat162*>(&frag[r]);
    v = __hmul2(v, s2);
    frag[r] = *reinterpret_cast<unsigned*>(&v);
  }
}

}  // namespace solder::tile
