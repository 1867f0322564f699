// Whether the GEMM skeleton's operand-prologue path (device/solder/gemm/sm90_gemm_prologue.cuh) takes a
// prologue contraction (lower/lower_prologue.h: side reduces of register buffers, then one contract
// whose A is computed from one staged global X[m, k]), and the problem it runs: X as A's staged
// source (16-bit, K-major), B a load as for the plain skeleton, one row axis, no batch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "contract/gemm_skeleton_fit.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct GemmPrologueProblem {
  GemmSkeletonProblem problem;             // problem.a: the staged source X
  const ContractNode* contract = nullptr;  // the kernel's contract
  std::vector<const ReduceNode*> sides;    // the side reductions, in order
  bool pre_sweep = false;                  // A reads a side value: sweep the A stripe first
};

struct GemmPrologueFit {
  std::optional<GemmPrologueProblem> problem;
  std::string refusal;
};

GemmPrologueFit fit_gemm_prologue(const Kernel& kernel, const std::vector<GlobalTensor>& globals);

// One kernel or two (issue 15, sixth session). A prologue contraction whose A reads its side values
// (quant_gemm's a / (amax/448)) needs each row's whole K before its first rounding: the one-kernel
// form sweeps the block's A stripe before its main loop and converts every staged tile in the
// consumers. The alternative is the program's own plan without the prologue: the row definitions
// fused into one memory-bound kernel that stores A's operand in its declared type (which must be T:
// the MMA then reads exactly the values the prologue would have rounded), then the plain skeleton with
// the scale after the dot. Costs:
//   one kernel: per block ceil(tiles / SMs) tiles × K/BK K tiles, each max(MMA at the tensor rate,
//     its A (source type) and B bytes at the per-SM L2 rate) + the conversion of BM × BK elements at
//     kConvertNsPerElement (calibrated on the H100's inline schedule, fourth session: Q5 355 µs in
//     7 × 16 K tiles of 128 × 256 × 128 = 2.8 µs per K tile against 0.96 µs of L2 reads; below), plus
//     the pre-sweep of one BM × K stripe at the per-SM L2 rate;
//   two kernels: the row kernel's bytes (X read, A written in T) at kRowKernelCopyFraction of the HBM
//     copy rate (predicted for the register pass; kRowKernelSharedCopyFraction, measured, for rows it
//     does not take), plus a launch, plus the plain skeleton's predicted time (its own cost model,
//     which underpredicts these short-K products: Q5 143 µs predicted, 202 measured alone).
// With these figures the choice matches the measured faster plan in all twelve suite cases (sixth
// session: two kernels at Q2-Q6, Q9, Q10 and L2; one kernel at Q1, Q7, Q8 and L1).
// `forced` (SOLDER_PROLOGUE_PLAN=one|split, A/B runs) overrides the comparison.
struct ProloguePlanChoice {
  bool split = false;
  double one_us = 0, split_us = 0;
  std::string why;  // the figures and the decision, for `solder fuse --report`
};
// Conversion per SM and staged element, inline schedule, from the fourth session's H100 times: A reading
// its side values (quant_gemm: a division by the row's amax / 448, e4m3 rounding) 0.112 ns (Q5, above);
// A without them (rmsnorm_gemm: x · g[k], bf16 rounding) 0.044 ns (L1 203 µs in 3 × 64 K tiles of
// 128 × 256 × 64: 1.06 µs each against 0.70 µs of MMA and L2 reads).
constexpr double kConvertNsPerElement = 0.112;
constexpr double kConvertNsPerElementNoSides = 0.044;
// The row kernel against a plain copy. Its rows run on the generic writer's register pass
// (kernel_writer_registers.cpp, seventh session): a warp or more per row, the row's bf16 elements
// held in registers as loaded (16-byte loads), warp-shuffle reductions, vector stores of the operand
// (8 e4m3 or 8 bf16 elements per store), 2 blocks per SM (89-94 registers). Predicted, before the
// device call (bench/NOTES.md, "the row kernel in registers"): 60 % of the 3.0 TB/s copy, 1.8 TB/s,
// i.e. Q5 (25.2 MB) 14 us and L1 (33.6 MB) 19 us, against 0.39-0.47 TB/s measured for the
// shared-memory form (sixth session: Q5 64.3 us, L1 71.4 us, ncu). Measured on the merged tree
// (seventh session, call 2): Q5 16.1 us (52 %), L1 16.3 (69 %), Q1 20.0 (52 %), two blocks of 256
// threads per SM (89-113 registers), latency-bound. Eighth session (branch quant-tiler): the operand
// tile kept packed as stored (e4m3: 16 words per thread at Q5, was 64 floats) and the rows per block
// chosen for at most 64 tile registers per thread (backend/cuda/fusion_params.h): Q5 60 registers, 4 blocks
// per SM; the long rows (K 3584-8192, HID 4096 at T 4096) one row kernel instead of a statistics and a
// map kernel. Predicted, before the device call: 70 % (2.1 TB/s). The register pass needs the row
// (K) a whole number of 16-byte vectors and at most 16 vectors per thread (K <= 16384 kept here, at
// one row per block); other rows keep the shared-memory form and its measured 13 %.
constexpr double kRowKernelCopyFraction = 0.70;
constexpr double kRowKernelSharedCopyFraction = 0.13;
// Whether a row of k elements of `source_bytes` each (the staged source X) runs on the register pass.
constexpr bool row_kernel_in_registers(int64_t k, int64_t source_bytes) {
  return source_bytes > 0 && (k * source_bytes) % 16 == 0 && k * source_bytes <= 16384 * 2;
}
ProloguePlanChoice choose_prologue_plan(const GemmPrologueProblem& pp, int bm, int bn, int bk, double split_gemm_us, int64_t a_t_bytes);
// $SOLDER_PROLOGUE_PLAN: "one" or "split" force that plan, unset/"" or "cost" leave it to the costs;
// anything else is the user's error (a Refusal, exit 2).
std::optional<bool> forced_prologue_split();

}  // namespace solder
