// Pass: a whole 3xtf32 contraction (an all-f32 product, contract/canonicalize.h) runs as the split of its
// two operands into tf32 parts, then one tf32 GEMM over K' = 3K on the GEMM skeleton.
//
// The rule, on the compiled Kernel IR, for a kernel W that is one whole `contract` of T = 3xtf32 that the
// skeleton takes (fit_gemm_skeleton: one product term of two f32 operands over one reduced axis k < K, each
// a load in any layout and pitch or a computed expression over its row axis and k): two kernels before W
// write the scratch globals
//
//   A3[b…?, m, j] over j < tf32x3_split_ld(K):  [hi(A) | lo(A) | hi(A)] along j (parts of K columns each)
//   B3[b…?, n, j]:                              [lo(B) | hi(B) | hi(B)]
//
// (hi(x) = round_tf32(x), lo(x) = round_tf32(x − hi(x)); b… the batch axes of an operand that has them;
// the pitch 3K rounded up to 4 elements so that TMA reads 16-byte rows; the columns past 3K are never
// read), and W becomes the tf32 contract Σ_{j < 3K} A3[…, m, j] · B3[…, n, j], which the skeleton runs on
// K-major f32 operands whose values are tf32 already. Its meaning is the 3xtf32 contract's (kernel_ir.h):
// the three products hi·lo, lo·hi, hi·hi of every k, summed in another order (the corrections first: the
// tensor cores' accumulation rounds toward zero, so the large products go last; bench/NOTES.md, twentieth
// session, "tf32").
//
// Each split kernel takes 32 rows × 32 k of its operand per block: a copy into a shared tile, read along
// whichever index is contiguous in the operand (an operand stored [K, rows], a weight b[k, n], is
// transposed here), then a map writing the three parts of each element along j. It reads the operand once
// and writes it three times: 16 bytes an element (f32mm at 4096³: 2 × 67 MB + 2 × 201 MB). A computed
// operand (GemmSkeletonOperand::computed: x[m, k] · s[k], silu(x + bias[k])) has a map instead of the copy:
// its expression evaluated at each element of the tile, the same value the contract's operand is.
//
// A 3xtf32 contraction that is not a whole skeleton kernel (tiled in a fused kernel) is left as it is: the
// CUDA backend's scalar view computes the same three products (backend/cuda/contract_view.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

struct Tf32Split {
  KernelProgram program;
  std::vector<std::string> notes;  // per split contraction, for the report
};

// The rows and k of one split block's tile.
constexpr int64_t kTf32SplitTile = 32;

Tf32Split split_tf32x3_operands(const KernelProgram& program);

// One split kernel of this pass, read back from its Kernel IR (for the CUDA writer, which runs it as
// gemm/tf32_split.cuh's tile): element (r, kk) of batch b is src[b · src_batch_stride + r · row_stride +
// kk · k_stride], written to dst[b · rows · ld + r · ld + p · k + kk], part p lo where p == lo_part.
// A computed operand's split has no src: its `value` is the expression of the tile's element (i, j) in
// the grid variables (batch_var when batched, row_var, k_var) and i, j, evaluated where `guard` holds
// (none: everywhere), i fastest across threads when `along_rows`.
struct Tf32SplitKernel {
  std::string src, dst;
  int64_t rows = 0, k = 0, ld = 0;
  int64_t row_stride = 0, k_stride = 0, src_batch_stride = 0;
  int64_t batch = 1, row_tiles = 1, k_tiles = 1;  // the grid: batch × row tiles × k tiles, k fastest
  int lo_part = 0;
  Expr value, guard;
  bool along_rows = false;
  std::string batch_var, row_var, k_var;
};
// The kernel's split when `kernel` is exactly one that split_tf32x3_operands builds; nothing otherwise.
std::optional<Tf32SplitKernel> tf32_split_kernel_of(const KernelProgram& program, const Kernel& kernel);

}  // namespace solder
