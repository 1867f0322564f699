// A block-wide tensor-core contraction on shared-memory tiles: C[M,N] (+)= A[M,K] · B[K,N], 16-bit
// operands (bf16 or f16), float32 accumulation with mma.sync m16n8k16 (mma.cuh).
//
// Scope: the whole block (WARPS warps, blockDim.x == 32 * WARPS) calls every member together.
// The warps form a grid WM x WN x WK over (16-row m-tiles, 16-column n-pairs, 16-deep k-steps):
// warp w owns m-tiles [wm·MW, wm·MW + MW), n-pairs [wn·NW, wn·NW + NW) and the k-steps ks with
// ks % WK == wk. Each warp keeps its partial C in registers (`acc`), so a caller can accumulate over
// a whole loop of staged tiles and write C once (`write`), where the WK partials of each element
// are added in turn (a fixed order: the result does not depend on timing).
//
// Operands (the `load` member a warp calls to get a fragment; every lane calls it):
//   SwizzledA<T, M, K>     A[m][k] in a Swizzle<K> tile (swizzle.cuh) of 16-bit values. M a multiple
//                          of 16: ldmatrix; M < 16 (one padded m-tile): rows ≥ M read as 0.
//   SwizzledB<T, K, N, k_major>   B in a 16-bit Swizzle tile: k_major = false, B[k][n] in Swizzle<N>
//                          (ldmatrix.trans); k_major = true, B stored as [n][k] in Swizzle<K> (ldmatrix).
//   FloatA<T>, FloatB<T>   A or B held as float in shared memory at any strides, each value already
//                          representable in T (a tile rounded to T): packed by pack2<T>, exact.
//                          Elements past the operand's rows / depth read as 0.
// Shapes: M ≤ 16 or a multiple of 16; N a multiple of 16; K a multiple of 16 (a Float operand may
// stop short of K: its `depth` bound pads the last k-step with zeros).
#pragma once

#include <solder/tile/fragment.cuh>
#include <solder/tile/ldmatrix.cuh>
#include <solder/tile/mma.cuh>
#include <solder/tile/swizzle.cuh>

namespace solder::tile {

// ---- Operands ---------------------------------------------------------------------------------------

// Lane (g = lane / 4, t = lane % 4) holds A rows g, g + 8 and columns 2t.., 2t + 8.. of the 16 x 16
// block at (m0, k0) (mma.cuh).
template <class T, int M, int K>
struct SwizzledA {
  static_assert(M % 16 == 0 || M < 16, "A rows: a multiple of 16, or fewer than 16");
  const T* data;
  __device__ __forceinline__ void load(unsigned (&a)[4], int m0, int k0, int lane) const {
    if constexpr (M % 16 == 0) {
      ldmatrix_x4(a, data + Swizzle<K>::offset(m0 + (lane & 15), k0 + ((lane >> 4) << 3)));
    } else {
      const int g = lane >> 2, t = lane & 3;
      auto pair = [&](int row, int col) -> unsigned {
        return row < M ? *reinterpret_cast<const unsigned*>(data + Swizzle<K>::offset(row, col)) : 0u;
      };
      a[0] = pair(m0 + g, k0 + 2 * t);
      a[1] = pair(m0 + g + 8, k0 + 2 * t);
      a[2] = pair(m0 + g, k0 + 2 * t + 8);
      a[3] = pair(m0 + g + 8, k0 + 2 * t + 8);
    }
  }
};

// b[0], b[1]: the B fragment of n-tile n0; b[2], b[3]: of n-tile n0 + 8 (both 16 deep from k0).
template <class T, int K, int N, bool k_major>
struct SwizzledB {
  const T* data;
  __device__ __forceinline__ void load(unsigned (&b)[4], int n0, int k0, int lane) const {
    const int j = lane >> 3, r = lane & 7;  // lane supplies row r of 8x8 matrix j
    if constexpr (k_major)
      ldmatrix_x4(b, data + Swizzle<K>::offset(n0 + ((j >> 1) << 3) + r, k0 + ((j & 1) << 3)));
    else
      ldmatrix_x4_trans(b, data + Swizzle<N>::offset(k0 + ((j & 1) << 3) + r, n0 + ((j >> 1) << 3)));
  }
};

// A[m][k] = data[m * row_stride + k * depth_stride] for m < rows, k < depth; 0 elsewhere.
template <class T>
struct FloatA {
  const float* data;
  int rows, depth;
  long long row_stride, depth_stride;
  __device__ __forceinline__ float at(int m, int k) const {
    return (m < rows && k < depth) ? data[m * row_stride + k * depth_stride] : 0.0f;
  }
  __device__ __forceinline__ void load(unsigned (&a)[4], int m0, int k0, int lane) const {
    const int g = lane >> 2, t = lane & 3;
    a[0] = pack2<T>(at(m0 + g, k0 + 2 * t), at(m0 + g, k0 + 2 * t + 1));
    a[1] = pack2<T>(at(m0 + g + 8, k0 + 2 * t), at(m0 + g + 8, k0 + 2 * t + 1));
    a[2] = pack2<T>(at(m0 + g, k0 + 2 * t + 8), at(m0 + g, k0 + 2 * t + 9));
    a[3] = pack2<T>(at(m0 + g + 8, k0 + 2 * t + 8), at(m0 + g + 8, k0 + 2 * t + 9));
  }
};

// B[k][n] = data[k * depth_stride + n * column_stride] for k < depth; 0 past it.
template <class T>
struct FloatB {
  const float* data;
  int depth;
  long long depth_stride, column_stride;
  __device__ __forceinline__ float at(int k, int n) const { return k < depth ? data[k * depth_stride + n * column_stride] : 0.0f; }
  __device__ __forceinline__ void load(unsigned (&b)[4], int n0, int k0, int lane) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + 8 * h + g;
      b[2 * h] = pack2<T>(at(k0 + 2 * t, n), at(k0 + 2 * t + 1, n));
      b[2 * h + 1] = pack2<T>(at(k0 + 2 * t + 8, n), at(k0 + 2 * t + 9, n));
    }
  }
};

// ---- The contraction ---------------------------------------------------------------------------------

namespace block_gemm_detail {
// The largest power of two ≤ limit that divides n (1 when none larger does).
constexpr int pow2_divisor(int n, int limit) {
  int p = 1;
  while (p * 2 <= limit && n % (p * 2) == 0) p *= 2;
  return p;
}
}  // namespace block_gemm_detail

template <class T, int M, int N, int K, int WARPS>
struct BlockGemm {
  static_assert(M % 16 == 0 || M < 16, "M: a multiple of 16, or fewer than 16 (one padded m-tile)");
  static_assert(N % 16 == 0, "N: a multiple of 16 (n-tiles go in pairs)");
  static_assert(K % 16 == 0, "K: a multiple of 16 (pad a Float operand's depth)");
  static constexpr int m_tiles = (M + 15) / 16, n_pairs = N / 16, k_steps = K / 16;
  static constexpr int WM = block_gemm_detail::pow2_divisor(m_tiles, WARPS);
  static constexpr int WN = block_gemm_detail::pow2_divisor(n_pairs, WARPS / WM);
  static constexpr int WK = WARPS / (WM * WN);
  static constexpr int MW = m_tiles / WM, NW = n_pairs / WN;  // m-tiles and n-pairs per warp

  float acc[MW][2 * NW][4];
  int lane, wm, wn, wk;

  __device__ __forceinline__ BlockGemm() {
    lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    wm = warp % WM;
    wn = (warp / WM) % WN;
    wk = warp / (WM * WN);
    zero();
  }

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mi = 0; mi < MW; ++mi)
#pragma unroll
      for (int nj = 0; nj < 2 * NW; ++nj)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][nj][e] = 0.0f;
  }

  // acc += A · B over all K (this warp's k-steps). Reads shared memory only: the caller puts a
  // barrier between the writes of the operand tiles and this call.
  template <class AOperand, class BOperand>
  __device__ __forceinline__ void accumulate(const AOperand& a, const BOperand& b) {
#pragma unroll
    for (int ks = 0; ks < k_steps; ++ks) {
      if (ks % WK != wk) continue;
      unsigned af[MW][4];
#pragma unroll
      for (int mi = 0; mi < MW; ++mi) a.load(af[mi], (wm * MW + mi) * 16, ks * 16, lane);
#pragma unroll
      for (int ni = 0; ni < NW; ++ni) {
        unsigned bf[4];
        b.load(bf, (wn * NW + ni) * 16, ks * 16, lane);
#pragma unroll
        for (int mi = 0; mi < MW; ++mi) {
          mma_16816<T>(acc[mi][2 * ni], af[mi], bf[0], bf[1]);
          mma_16816<T>(acc[mi][2 * ni + 1], af[mi], bf[2], bf[3]);
        }
      }
    }
  }

  // C[m][n] = acc (accumulate: C[m][n] += acc) for m < M, C[m][n] at c[m * row_stride + n *
  // column_stride]. The WK partials of an element are added in turn, split by block barriers (so the
  // caller needs none before this call when nothing else touched C since its last barrier, and one
  // after it before C is read).
  __device__ __forceinline__ void write(float* c, long long row_stride, long long column_stride, bool accumulate) const {
#pragma unroll
    for (int s = 0; s < WK; ++s) {
      if (s) __syncthreads();
      if (wk != s) continue;
#pragma unroll
      for (int mi = 0; mi < MW; ++mi)
#pragma unroll
        for (int nj = 0; nj < 2 * NW; ++nj)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int m = (wm * MW + mi) * 16 + fragment_row(lane, e);
            const int n = (wn * NW * 2 + nj) * 8 + fragment_col(lane, e);
            if (m >= M) continue;
            float* element = c + m * row_stride + n * column_stride;
            *element = (accumulate || s) ? *element + acc[mi][nj][e] : acc[mi][nj][e];
          }
    }
  }
};

}  // namespace solder::tile
