// Loading mma fragments from shared memory with ldmatrix (sm_75+).
//
// ldmatrix.x4 loads four 8x8 matrices of 16-bit values; lane L supplies the shared-memory address
// of row L % 8 of matrix L / 8 (16 contiguous bytes). Lane l receives, from each matrix m, the two
// values at row l / 4, columns 2 (l % 4) .. +1 in register m (.trans: the transposed matrix).
// Called by all 32 lanes of a warp together; addresses must be 16-byte aligned.
#pragma once


namespace solder::tile {

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row_address)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row_address)));
}

}  // namespace solder::tile
