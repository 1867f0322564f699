// A matrix product as the planner sees it (the cost model's input):
//
//   D[b, m, n] = epilogue( Σ_k round_T(A[b, m, k]) · round_T(B[b, k, n]) )   for b < batch, m < M, n < N
//
// with operands of MMA input type T (bf16, f16, e4m3, e5m2, tf32), an f32 accumulator, an output of
// `output` dtype, and an epilogue that reads `epilogue_bytes_per_output` bytes per output element from
// global memory (a bias, row or column scales: the amortised bytes, e.g. a per-row f32 scale over N
// columns is 4 / N). A is K-major when k is its fastest-varying index (row-major [M, K]); B is K-major when
// k is its fastest-varying index (stored [N, K], as nn.Linear weights are), N-major when stored [K, N].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/dtype.h"
#include "kernel/kernel_ir.h"

namespace solder {

// The operand type a tensor-core instruction reads (PTX wgmma .atype/.btype) is the Kernel IR's
// MmaType (kernel/kernel_ir.h: parse_mma_type also reads "e4m3" and "e5m2"; f32 there means CUDA
// cores, which the planner does not plan).
int mma_type_bytes(MmaType type);                              // 2, 2, 1, 1, 4 (tf32, f32)
// The MMA type an operand of this storage dtype runs as without changing its value (f32 -> tf32 is a
// rounding, which the caller must have chosen; i32/bool have none).
std::optional<MmaType> mma_type_for(DType dtype);

struct GemmProblem {
  std::string name;            // for reports: "c = a·b (kernel c)", "8192x8192x8192"
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MmaType type = MmaType::bf16;
  DType output = DType::bf16;
  bool a_k_major = true;       // A stored [M, K]
  bool b_k_major = true;       // B stored [N, K] (true, as cuBLAS "TN") or [K, N] (false)
  // An operand without the batch axis, read by every batch (torch.matmul of a [M, K] by b [Bt, K, N]: a):
  // its bytes count once, not once per batch, while they stay in L2 across the batch-major grid.
  bool a_shared = false, b_shared = false;
  // Elements between consecutive rows of A and B as stored (their pitch); 0: packed (K for a K-major
  // operand, M or N otherwise). A padded copy (fusion/padded_operands.h) has K 63 in rows of 64.
  int64_t a_ld = 0, b_ld = 0;
  // K ranges (the skeleton's two-range kernel): the first range's K, 0 for one range. Each range takes
  // whole K tiles: ⌈k_first / BK⌉ + ⌈(k − k_first) / BK⌉ of them.
  int64_t k_first = 0;
  double epilogue_bytes_per_output = 0;
  // The epilogue stores through the skeleton's row-store hooks (16-byte vectors of a 16-bit output's
  // rows: sm90_gemm.cuh) where the tile's BN is a multiple of 32; the cost model charges that store rate
  // (kEpilogueRowStoreTbps) instead of the element-pair one.
  bool row_store = false;
  // Which row-store schedule (sm90_gemm.cuh, row_store_mode_of): 0 direct (loads and stores
  // interleaved: kEpilogueRowStoreTbps), 1 registers first or 2 staged in shared memory with bulk copies
  // (the skeleton's default: kEpilogueRowStagedTbps).
  int row_store_mode = 2;

  double flops() const { return 2.0 * static_cast<double>(batch) * m * n * k; }
  // The K tiles of BK elements one output tile's K loop runs (each K range in whole tiles).
  int64_t k_tiles(int64_t bk) const {
    return k_first > 0 ? (k_first + bk - 1) / bk + (k - k_first + bk - 1) / bk : (k + bk - 1) / bk;
  }
  // Bytes of A, B and D once each (a shared operand once for every batch), plus the epilogue's reads:
  // the floor of the memory traffic.
  double unique_bytes() const;
};

// "M=128 N=3072 K=8192 bf16 -> bf16" (plus "batch=4", a shared operand and majorness when they are not
// the defaults).
std::string describe(const GemmProblem& problem);

}  // namespace solder
