// The CUDA code generator's writer for whole contracts that run as an implicit GEMM with gathered
// operands on mma.sync (src/contract/gathered_gemm_fit.h): convolutions (im2col with padding as
// zero-fill), concatenations along K, operands whose rows are not TMA-aligned — whole contractions
// the sm_90a GEMM skeleton does not stage.
//
// The kernel: 128 threads (256 when the grid has fewer blocks than SMs), one BM × BN output tile per
// block (BM, BN from {128 × 64, 64 × 64, 64 × 32, 32 × 32}: the largest that still gives every SM a
// block, four blocks where K ≤ 128; the column tiles of a row tile run together, so A is read from L2
// once), K in steps of BK = 64 (K ≥ 256 or K ≤ 128, and BM ≤ 64) or 32, two swizzled shared-memory buffers. Per step, in two phases: issue_(kt+1)
// starts the next step's loads into registers — each element of an operand that is a tree of
// zero-filled selects over loads (GatheredGemmProblem's leaves) as a predicated load, indices 32-bit
// where the fit proved them, the thread's row decode hoisted out of the K loop; B rows that are whole
// 16-byte chunks of one tensor go by cp.async straight into the buffer — then the tensor cores
// (block_gemm.cuh: mma.sync m16n8k16, accumulators in registers) run the current step, then commit_
// stores the registers as T (exact: the operands are exact in T) into the other buffer; one barrier per
// step. Another operand is evaluated element by element as written. Where the grid leaves SMs idle and
// K is deep, S blocks of a thread-block cluster split the K steps (split-K) and each sums 1/S of the C
// tile over the cluster's shared memory before the epilogue. The epilogue goes through shared memory as
// float: scale, bias and the absorbed consumer (as the skeleton's epilogue), rounded to the
// destination's dtype by the store; threads run along the destination's contiguous axis.
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct GatheredGemmKernel {
  std::string source;
  GeneratedKernel info;
  int bm = 0, bn = 0, bk = 0;  // SOLDER_GATHERED_TILE=BM,BN,BK,THREADS overrides the choice (tuning);
                               // SOLDER_GATHERED_SPLIT=S the split-K cluster size (info.cluster)
  int chain_bn = 0;            // a chain's second product: its column tile (BK 64)
  int chain_cluster = 1;       // a chain's ranks per row tile (1: one block; GatheredChainForm)
};

// The gathered-GEMM kernel for `kernel`, or nothing (with `why`) when its body is not one whole
// contract that fit_gathered_gemm takes.
std::optional<GatheredGemmKernel> write_gathered_gemm_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

// A chain (gathered_gemm_fit.h, fit_gathered_chain): a kernel whose body is two whole contracts, the
// second reading the first's result as its A, in the form choose_gathered_chain_form picks (the planner's
// choice). One block per 32 rows (256 threads): the first product over all of N1 (≤ 256) as above, its
// epilogue into h's row tile in shared memory, rounded to T (never stored), then the second product over
// every column tile of N2 (128 wide) with K = N1 from that tile and B (≤ 64 KB) copied whole by cp.async
// at the kernel's start, stored by the second's epilogue. Or a cluster of S such blocks per 32 rows: each
// takes 1/S of the first product's K steps (split-K), the partial tiles are summed over distributed
// shared memory (each rank 1/S of the chunks, written rounded into every rank's h tile), and each rank
// computes its 1/S of N2's columns from its slice of B. The one-contract writer's gathers, main loop and
// store epilogue, unchanged. Nothing (with `why`) when fit_gathered_chain or the form refuses.
std::optional<GatheredGemmKernel> write_gathered_chain_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

}  // namespace solder
