// Warpgroup MMA (wgmma) by plain index arithmetic: shared-memory matrix descriptors for the 128-byte
// swizzle, accumulator and A-operand fragments as register arrays, and the issue of one instruction
// through CuTe's instruction wrappers (cute/arch/mma_sm90_gmma.hpp: `MMA_64xNx16_*::fma`, one inline-asm
// `wgmma.mma_async` each).
//
// Why not CuTe's TiledMMA partitioning: under NVRTC, instantiating `partition_A/B`, `make_fragment_A/B`,
// `partition_fragment_C` and `cute::gemm` for one attention kernel costs about 8 of the 16 s of the
// C++ front end (`nvcc --fdevice-time-trace` of vanilla, 2026-11-27); the descriptors and fragments
// they build are the few lines below. The register order of a fragment is the instruction's own, the
// order CuTe's fragments have for a single 64 × N atom:
//   accumulator register i of a 64 × N tile ↔ row 16·warp + lane/4 + 8·((i/2) % 2),
//                                              column 8·(i/4) + 2·(lane % 4) + i % 2   (i < N/2);
//   A-operand register j of k-block kb (16-bit types) ↔ the pair of accumulator-layout elements
//   8·kb + 2·(j % 4), 8·kb + 2·(j % 4) + 1, low half first (RS: P from registers).
//
// Tile layouts (what one TMA box {64 elements of 16 bits, rows} with the 128-byte swizzle writes):
//   K-major operand: `rows` rows of 128 bytes per 64-element column chunk, the chunks one after
//     another; a k-block (16 elements of 16 bits, 32 of 8 bits: 32 bytes) starts at chunk kb / 4,
//     byte 32·(kb % 4) of the row. Leading offset unused by the swizzle (16), stride offset 1024 (8 rows).
//   MN-major operand (16-bit only): the K rows of a 64-element MN chunk are 128-byte rows, the chunks
//     `rows` rows apart; a k-block is 16 rows (2048 bytes). Leading offset = the chunk stride, stride
//     offset 1024 (8 K rows).
#pragma once

// CuTe's instruction selector offers every wgmma width N = 8 … 256 in steps of 8 only with this macro;
// without it a tile like BN 224 or 160 is issued as 7 or 5 narrower instructions (n32), about 0.72× the
// rate of one wide one (bench/NOTES.md, quant-fp8). Set before any CuTe header, in every Solder header
// that includes one, so that the first inclusion in a translation unit decides it the same way.
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cuda/std/cstdint>

#include <cuda/std/utility>
#include <cute/arch/mma_sm90_gmma.hpp>

namespace solder::wgmma {

using ScaleOut = cute::SM90::GMMA::ScaleOut;

// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading and
// stride byte offsets in 16-byte units, base offset 0 (tiles 1024-byte aligned), layout 1 = 128B swizzle.
__device__ __forceinline__ uint64_t sw128_descriptor(uint32_t address, uint32_t leading_bytes, uint32_t stride_bytes) {
  return static_cast<uint64_t>((address & 0x3FFFFu) >> 4) | (static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32) | (uint64_t{1} << 62);
}

// The descriptor of a tile without swizzle (layout 0): core matrices of 8 rows × 16 bytes, each 128
// contiguous bytes (row r at byte 16·r); `leading_bytes` apart along K, `stride_bytes` apart along M / N.
// 16-byte aligned.
__device__ __forceinline__ uint64_t plain_descriptor(uint32_t address, uint32_t leading_bytes, uint32_t stride_bytes) {
  return static_cast<uint64_t>((address & 0x3FFFFu) >> 4) | (static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32);
}

// The descriptor of a K-major tile at shared address `tile` (its first k-block).
__device__ __forceinline__ uint64_t k_major(uint32_t tile) { return sw128_descriptor(tile, 16, 1024); }

// The same for a K-major tile of 64-byte rows with the 64-byte swizzle (layout 2; what a TMA box {64 one-byte
// elements, rows} with CU_TENSOR_MAP_SWIZZLE_64B writes: 16-byte chunk c of row r at chunk c XOR (r / 2) % 4,
// 8-row atoms of 512 bytes, so the stride offset is 512), tiles 512-byte aligned. A k-block (32 bytes) starts
// at byte 32·(kb % 2) of the row, chunk kb / 2 of the rows (k_major_block with row_bytes 64).
__device__ __forceinline__ uint64_t k_major_sw64(uint32_t tile) {
  return static_cast<uint64_t>((tile & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) | (uint64_t{512 >> 4} << 32) | (uint64_t{2} << 62);
}

// The descriptor of an MN-major tile (16-bit types) whose 64-element MN chunks hold `rows` K rows each.
__device__ __forceinline__ uint64_t mn_major(uint32_t tile, int rows) {
  return sw128_descriptor(tile, static_cast<uint32_t>(rows * 128), 1024);
}

// A descriptor moved by `bytes` (a multiple of 16, the tile staying below 256 KB): the start address is
// the low field, so this is one 64-bit add, as CuTe's descriptor iterator does.
__device__ __forceinline__ uint64_t advance(uint64_t descriptor, uint32_t bytes) { return descriptor + (bytes >> 4); }

// Where k-block kb starts, in bytes from the tile: K-major of `rows` rows (of 128-byte chunks; or 64-byte ones
// with the 64-byte swizzle), and MN-major (16 K rows of 128 bytes).
__host__ __device__ constexpr uint32_t k_major_block(int rows, int kb, int row_bytes = 128) {
  return static_cast<uint32_t>((kb / (row_bytes / 32)) * rows * row_bytes + (kb % (row_bytes / 32)) * 32);
}
__host__ __device__ constexpr uint32_t mn_major_block(int kb) { return static_cast<uint32_t>(kb * 16 * 128); }

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A fragment: N registers of type R, indexed as CuTe's fragments are (f(i)).
template <class R, int N>
struct Fragment {
  R v[N];
  __device__ __forceinline__ R& operator()(int i) { return v[i]; }
  __device__ __forceinline__ const R& operator()(int i) const { return v[i]; }
};

template <int N>
__device__ __forceinline__ void fence(Fragment<float, N>& f) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(f.v[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence(Fragment<uint32_t, N>& f) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(f.v[i])::"memory");
}
template <int N>
__device__ __forceinline__ void clear(Fragment<float, N>& f) {
#pragma unroll
  for (int i = 0; i < N; ++i) f.v[i] = 0.0f;
}

__device__ __forceinline__ void arrive() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

namespace detail {
template <class Op, int... I>
__device__ __forceinline__ void ss(uint64_t a, uint64_t b, float* d, ScaleOut scale, cuda::std::integer_sequence<int, I...>) {
  Op::fma(a, b, d[I]..., scale);
}
template <class Op, int... I>
__device__ __forceinline__ void rs(const uint32_t* a, uint64_t b, float* d, ScaleOut scale,
                                   cuda::std::integer_sequence<int, I...>) {
  Op::fma(a[0], a[1], a[2], a[3], b, d[I]..., scale);
}
}  // namespace detail

// The accumulator registers one instruction of Op writes per thread (N / 2 of a 64 × N instruction).
template <class Op>
inline constexpr int op_registers = static_cast<int>(sizeof(typename Op::CRegisters) / sizeof(float));

// One wgmma with both operands in shared memory: D (+)= A·B (Op: a CuTe MMA_64xNxK_*_SS wrapper whose N is
// the fragment's).
template <class Op, int N>
__device__ __forceinline__ void mma_ss(uint64_t a, uint64_t b, Fragment<float, N>& d, bool accumulate) {
  static_assert(op_registers<Op> == N, "one instruction per fragment: use mma_ss_columns for several");
  detail::ss<Op>(a, b, d.v, accumulate ? ScaleOut::One : ScaleOut::Zero, cuda::std::make_integer_sequence<int, N>{});
}

// A 64 × 2N fragment computed by instructions of Op side by side along N (CuTe's selector picks a
// narrower instruction for a tile like 160 = 5 × 32 columns): instruction t writes registers
// t·R .. t·R + R − 1 (R = op_registers<Op>), i.e. columns 2R·t .., which keeps the fragment's register
// order that of one wide instruction; `b_columns(c)` is the byte offset of B's column c from `b`.
template <class Op, int N, class BColumns>
__device__ __forceinline__ void mma_ss_columns(uint64_t a, uint64_t b, Fragment<float, N>& d, bool accumulate,
                                               BColumns b_columns) {
  constexpr int R = op_registers<Op>;
  static_assert(N % R == 0, "the fragment is a whole number of instructions wide");
#pragma unroll
  for (int t = 0; t < N / R; ++t)
    detail::ss<Op>(a, advance(b, b_columns(2 * R * t)), d.v + t * R, accumulate ? ScaleOut::One : ScaleOut::Zero,
                   cuda::std::make_integer_sequence<int, R>{});
}

// One wgmma with A from registers (four 32-bit registers of k-block kb: a.v + 4·kb) and B in shared memory.
template <class Op, int N, int NA>
__device__ __forceinline__ void mma_rs(const Fragment<uint32_t, NA>& a, int kb, uint64_t b, Fragment<float, N>& d,
                                       bool accumulate) {
  static_assert(op_registers<Op> == N, "one instruction per fragment");
  detail::rs<Op>(a.v + 4 * kb, b, d.v, accumulate ? ScaleOut::One : ScaleOut::Zero,
                 cuda::std::make_integer_sequence<int, N>{});
}

}  // namespace solder::wgmma
