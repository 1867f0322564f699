// Hopper warpgroup matrix multiply (wgmma.mma_async, sm_90a only: build with
// -gencode=arch=compute_90a,code=sm_90a).
//
// One warpgroup (4 consecutive warps, the first warp index divisible by 4) computes
//   D[64 x N] (+)= A[64 x 16] · B[16 x N]      bf16 inputs, float32 accumulation, N ∈ {64, 128}
// asynchronously: mma issues the product, commit_group closes the products issued so far into a group,
// wait_group<G> blocks until at most G groups are still running. Every wrapper here is called by all
// 128 threads of the warpgroup together (".sync.aligned": same instruction, no divergence).
//
// Operands.
//   A from shared memory (the "SS" form) or from registers ("RS"); B always from shared memory; D in
//   registers. Shared-memory operands are named by a 64-bit matrix descriptor (PTX ISA, "Matrix
//   Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading-dimension byte offset (LBO) >> 4,
//   32-45 stride-dimension byte offset (SBO) >> 4, 49-51 base offset (0 here), 62-63 swizzle mode
//   (1 = 128-byte swizzle, the only mode used here).
//
// The 128-byte-swizzled layout (Swizzle128 below). A tile is stored as rows of 64 bf16 (128 bytes); the
// 16-byte chunk c (elements 8c..8c+7) of row r sits at chunk c ^ (r % 8). Eight rows form a 1024-byte
// atom and the swizzle is applied by the hardware to address bits [4,7) ^ [7,10), so every tile must
// start 1024-byte aligned. This is Swizzle<64> of swizzle.cuh in bytes. A tile wider than 64 elements is
// stored as 64-wide column blocks one after the other (block b of a tile of R rows starts at b·R·128).
//   K-major operand (the 16 elements of one k-step contiguous in a row, i.e. A[m][k] row-major or B
//     stored [n][k]): row = m or n, column = k. SBO = 1024 (from one 8-row group to the next), LBO
//     unused; the k-step s of a 64-wide block starts 32·s bytes into the block.
//   MN-major operand (B stored [k][n], n contiguous: V[key][d] as the B of P·V, with transpose_b):
//     row = k, column = n. SBO = 1024 (from 8 k-rows to the next 8), LBO = the column-block stride R·128
//     (used only when N > 64); the k-step s starts 16·s rows = 2048·s bytes into the tile.
//   (CUTLASS cute/arch/mma_sm90_desc.hpp writes the same canonical forms as ((8,m),(T,2)):((8T,SBO),(1,T))
//   and ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), T = 8 bf16.)
//
// Register fragments (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma .m64nNk16).
// Warp w = (threadIdx.x / 32) % 4 of the warpgroup owns rows 16w..16w+15; lane l, g = l / 4, t = l % 4:
//   D (Accumulator<N>, N/2 floats): reg[4j + 0..1] = D[16w + g][8j + 2t + 0..1],
//                                   reg[4j + 2..3] = D[16w + g + 8][8j + 2t + 0..1],  j = 0..N/8-1
//     (the mma.m16n8k16 C fragment of mma.cuh, repeated over the N/8 column blocks).
//   A (ARegisters, 4 registers of two bf16, the low half the lower column): a0 = A[16w + g][2t..2t+1],
//     a1 = A[16w + g + 8][2t..], a2 = A[16w + g][2t + 8..], a3 = A[16w + g + 8][2t + 8..]
//     (the mma.m16n8k16 A fragment).
//   So columns 16s..16s+15 of an accumulator are registers 8s..8s+7 and become the A operand of k-step s
//   by packing neighbours, a_i = (reg[8s + 2i], reg[8s + 2i + 1]), with no shuffles (to_a_registers).
//
// Ordering. Registers of D and A must not be touched between mma and the wait_group that retires it, and
// the compiler must not reuse them either: it sees an asm that reads A once, not an asynchronous read, and may
// give a value computed before the wait the registers of an A still in flight (ptxas then serializes the
// wgmma, warning C7513). So after wait_group, fence_operand() the retired mma's A registers and accumulator;
// fence() must precede the first mma of a batch whenever D or A registers were written by ordinary
// instructions since the last wgmma. wgmma reads shared memory through the "async proxy": data written
// by ordinary stores or by cp.async (both generic-proxy writes; TMA writes are not) needs, in each writing
// thread, cp_async_wait (for cp.async) then fence_proxy_async(), then a barrier, before an mma reads it.
#pragma once

#include <cuda_bf16.h>

#include <cuda/std/cstdint>  // NVRTC has no <cstdint>

namespace solder::tile {

// Byte offsets in a 128-byte-swizzled bf16 tile of ROWS rows (see the top of this file).
template <int ROWS>
struct Swizzle128 {
  static_assert(ROWS % 8 == 0, "128-byte swizzle atoms are 8 rows");
  static constexpr int block_bytes = ROWS * 128;  // one 64-element-wide column block
  static __host__ __device__ __forceinline__ int byte_offset(int row, int col) {
    return (col >> 6) * block_bytes + row * 128 + ((((col >> 3) & 7) ^ (row & 7)) << 4) + ((col & 7) << 1);
  }
};

namespace warpgroup {

// ---- shared-memory matrix descriptors (per thread; any thread may build one) ----------------------------
// Build a batch's descriptors before its fence(), from values the compiler knows to be warp-uniform (a
// warpgroup index read through __shfl_sync(…, 0)): ptxas injects an extra warpgroup.arrive (C7519) or
// serializes the batch (C7513) when ordinary instructions define mma operands between fence and mma.

__device__ __forceinline__ cuda::std::uint64_t descriptor(const void* smem, unsigned lbo_bytes, unsigned sbo_bytes) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  return static_cast<cuda::std::uint64_t>((address >> 4) & 0x3FFF) | static_cast<cuda::std::uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<cuda::std::uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32 | cuda::std::uint64_t{1} << 62;
}

// K-major Swizzle128<ROWS> tile (row = m or n, column = k): the operand of k-step `step` (columns
// 16·step .. 16·step + 15), rows starting at `row0` (a multiple of 8).
template <int ROWS>
__device__ __forceinline__ cuda::std::uint64_t k_major_descriptor(const void* tile, int step, int row0 = 0) {
  const char* start = static_cast<const char*>(tile) + (step >> 2) * Swizzle128<ROWS>::block_bytes + row0 * 128 + (step & 3) * 32;
  return descriptor(start, 16, 1024);
}

// MN-major Swizzle128<ROWS> tile (row = k, column = n, ROWS = the tile's k extent): the B operand of
// k-step `step` (rows 16·step .. 16·step + 15), with transpose_b = true.
template <int ROWS>
__device__ __forceinline__ cuda::std::uint64_t mn_major_descriptor(const void* tile, int step) {
  return descriptor(static_cast<const char*>(tile) + step * 16 * 128, Swizzle128<ROWS>::block_bytes, 1024);
}

// ---- fragments -------------------------------------------------------------------------------------------

template <int N>
struct Accumulator {
  static_assert(N == 64 || N == 128, "wgmma wrappers exist for N = 64 and 128");
  float reg[N / 2];
};

struct ARegisters {
  unsigned reg[4];
};

// An accumulator seen as the mma.sync m16n8 C fragments it equals register for register (fragment j =
// columns 8j..8j+7, see the top of this file): code that indexes fragments [j][e] (Solder's tensor-core
// emitter) hands them to the mma through this view. Per thread.
template <int N>
__device__ __forceinline__ Accumulator<N>& as_accumulator(float (&fragments)[N / 8][4]) {
  return *reinterpret_cast<Accumulator<N>*>(&fragments[0][0]);
}

// Keeps the compiler from moving reads or writes of these registers across the asm statements around
// it (use before fence/mma and after wait_group, as CUTLASS's warpgroup_fence_operand). Per thread.
template <int N>
__device__ __forceinline__ void fence_operand(Accumulator<N>& d) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(d.reg[i])::"memory");
}
__device__ __forceinline__ void fence_operand(ARegisters& a) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a.reg[i])::"memory");
}

// Columns 16·step .. 16·step + 15 of an accumulator, rounded to bf16, as the A registers of an RS mma
// (see the top of this file: the two layouts line up register for register). Per thread.
template <int N>
__device__ __forceinline__ ARegisters to_a_registers(const Accumulator<N>& s, int step) {
  ARegisters a;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(s.reg[8 * step + 2 * i], s.reg[8 * step + 2 * i + 1]);
    a.reg[i] = *reinterpret_cast<unsigned*>(&pair);
  }
  return a;
}

// ---- synchronisation (the whole warpgroup) ----------------------------------------------------------------

// wgmma.fence: orders earlier register writes (D, A) and shared-memory accesses before the mma that follow.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// Closes the mma issued since the last commit into one group.
__device__ __forceinline__ void commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Waits until at most G committed groups are still running.
template <int G>
__device__ __forceinline__ void wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(G) : "memory");
}

// Makes generic-proxy shared-memory writes (st.shared, cp.async) of the calling thread visible to the
// async proxy (wgmma, TMA). Per thread, before the barrier that publishes the data.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- the mma (the whole warpgroup) ------------------------------------------------------------------------

#define SOLDER_WGMMA_D8(d, i)                                                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define SOLDER_WGMMA_D32(d) SOLDER_WGMMA_D8(d, 0), SOLDER_WGMMA_D8(d, 8), SOLDER_WGMMA_D8(d, 16), SOLDER_WGMMA_D8(d, 24)
#define SOLDER_WGMMA_REGS32 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define SOLDER_WGMMA_REGS64                                                                                          \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30," \
  "%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,"   \
  "%59,%60,%61,%62,%63}"

// D = A·B + (accumulate ? D : 0), A and B from shared memory (descriptors). transpose_b: B is MN-major.
template <int N, bool transpose_b>
__device__ __forceinline__ void mma_ss(Accumulator<N>& d, cuda::std::uint64_t a_desc, cuda::std::uint64_t b_desc, bool accumulate) {
  if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " SOLDER_WGMMA_REGS32 ", %32, %33, p, 1, 1, 0, %35;\n}\n"
        : SOLDER_WGMMA_D32(d.reg)
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)), "n"(static_cast<int>(transpose_b)));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " SOLDER_WGMMA_REGS64 ", %64, %65, p, 1, 1, 0, %67;\n}\n"
        : SOLDER_WGMMA_D32(d.reg), SOLDER_WGMMA_D32((d.reg + 32))
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)), "n"(static_cast<int>(transpose_b)));
  }
}

// D = A·B + (accumulate ? D : 0), A from registers, B from shared memory. transpose_b: B is MN-major.
template <int N, bool transpose_b>
__device__ __forceinline__ void mma_rs(Accumulator<N>& d, const ARegisters& a, cuda::std::uint64_t b_desc, bool accumulate) {
  if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " SOLDER_WGMMA_REGS32 ", {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
        : SOLDER_WGMMA_D32(d.reg)
        : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "l"(b_desc), "r"(static_cast<int>(accumulate)),
          "n"(static_cast<int>(transpose_b)));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " SOLDER_WGMMA_REGS64 ", {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n"
        : SOLDER_WGMMA_D32(d.reg), SOLDER_WGMMA_D32((d.reg + 32))
        : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "l"(b_desc), "r"(static_cast<int>(accumulate)),
          "n"(static_cast<int>(transpose_b)));
  }
}

#undef SOLDER_WGMMA_D8
#undef SOLDER_WGMMA_D32
#undef SOLDER_WGMMA_REGS32
#undef SOLDER_WGMMA_REGS64

}  // namespace warpgroup
}  // namespace solder::tile
