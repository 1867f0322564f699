// Tensor-core matrix multiply-accumulate on register fragments (mma.sync, sm_80+).
//
// One warp computes C[16x8] += A[16x16] · B[16x8] with 16-bit inputs and float32 accumulation.
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = threadIdx.x % 32,
// g = lane / 4, t = lane % 4:
//   A (row-major 16x16, 4 registers of two 16-bit values): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..],
//     a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16x8, 2 registers): b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16x8 float, 4 registers): c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
// Called by all 32 lanes of a warp together.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace solder::tile {

// C += A · B, bf16 inputs.
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// C += A · B, f16 inputs.
__device__ __forceinline__ void mma_f16_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <typename T> struct is_half { static constexpr bool value = false; };
template <> struct is_half<__half> { static constexpr bool value = true; };

// Dispatch on the element type (T is __nv_bfloat16 or __half).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (is_half<T>::value) mma_f16_16816(c, a, b0, b1);
  else mma_bf16_16816(c, a, b0, b1);
}

// Two floats as one register of two 16-bit values (lo in the low half), rounded to nearest.
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  if constexpr (is_half<T>::value) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
  }
}

// The A fragment of a 16x16 block whose values sit in two adjacent C fragments (columns 0-7 in
// `left`, 8-15 in `right`): the layout FlashAttention-2 uses to feed P = softmax(S) to the second
// GEMM without leaving registers.
template <typename T>
__device__ __forceinline__ void c_fragments_to_a(unsigned (&a)[4], const float (&left)[4], const float (&right)[4]) {
  a[0] = pack2<T>(left[0], left[1]);
  a[1] = pack2<T>(left[2], left[3]);
  a[2] = pack2<T>(right[0], right[1]);
  a[3] = pack2<T>(right[2], right[3]);
}

}  // namespace solder::tile
