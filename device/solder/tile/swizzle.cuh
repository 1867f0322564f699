// The shared-memory layout of 16-bit tiles read by ldmatrix: row-major rows of C elements, whose
// 16-byte chunks are permuted per row (chunk c of row r is stored at chunk c ^ (r & mask)), so that
// the eight rows one ldmatrix phase reads fall in eight different bank groups. mask + 1 is the
// largest power of two ≤ 8 dividing C / 8 (C a multiple of 8).
#pragma once

namespace solder::tile {

template <int C>
struct Swizzle {
  static_assert(C % 8 == 0, "swizzled tiles need rows of whole 16-byte chunks");
  static constexpr int chunks = C / 8;
  static constexpr int mask = (chunks % 8 == 0) ? 7 : (chunks % 4 == 0) ? 3 : (chunks % 2 == 0) ? 1 : 0;
  // Element offset of (row, col).
  static __device__ __forceinline__ int offset(int row, int col) {
    return row * C + ((((col >> 3) ^ (row & mask))) << 3) + (col & 7);
  }
};

}  // namespace solder::tile
