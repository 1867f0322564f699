// Whether a whole contract that the sm_90a GEMM skeleton refuses as written runs as conversion copies of
// its operands into T, then the skeleton; the copies, and what they cost against the mma.sync kernels
// that run it otherwise.
//
// The skeleton stages plain loads of global tensors of one 16-bit type or of fp8, fp8 K-major
// (gemm_skeleton_fit.h). The census (docs/census.md) found user-written products it refuses only
// because of an operand's dtype or form: x.bf16 @ w.f32 (w rounded to bf16 by the contract), x @
// w.to(bf16) (a computed operand), f16 x e4m3 (w widened to f16), (a @ b) @ d with the intermediate h
// left f32 (h rounded to bf16), e4m3 a @ b with b stored [K, N] (fp8 wgmma reads K-major operands).
// The contract's meaning already rounds each operand to T (kernel_ir.h: round_T(A) · round_T(B)), so
// a copy that stores the operand in T's storage dtype changes no value:
//
//   P_X[s, k] = (k < K ? X(s, k) : 0)   over s < S (X's rows: M for A, N for B), k < Kp,  P_X of dtype T
//
// (Kp: K rounded up to 16 bytes of T), its store rounding to T exactly as round_T does (nearest even),
// and the contract reads P_X[s, k] over k < K. A K-major copy is also the transposition fp8 needs.
//
// It fits when: the contract is one product term over one row axis, one column axis and one reduced
// axis (no batch), with no where, guard, accumulation or paired term; T is bf16, f16, e4m3, e5m2 or tf32;
// each operand the skeleton cannot stage as it is (a computed expression, a load of another dtype
// than T, an fp8 load that is not K-major, rows not 16-byte aligned) uses only its side axis and the
// reduced axis; the skeleton takes the contract with those operands read from their copies and its
// cost model finds a tile; and it pays:
//
//   copy_us + skeleton_us  <  mma_sync_us,
//
// copy_us: each copy's bytes (what it reads of its operand's tensors, once: contract/operand_reads.h, the
// rows a gather selects rather than the whole table; and P_X written once) at the
// device-to-device copy rate (Rates::hbm_tbps), plus one launch each (plan/copy_cost.h); skeleton_us:
// the cost model's prediction for the copied problem; mma_sync_us: one launch and the product's FLOPs at
// the fraction of T's tensor rate that the kernel running it otherwise reaches (the gathered GEMM where it
// takes the contract, the fused kernels' scalar loop for T = tf32, else the fused mma.sync kernel: the
// constants below).
//
// bf16 x f16 (the canonicalizer's T = tf32: tf32 holds every bf16 and f16 value, subnormals included,
// exactly) copies both operands into f32, K-major (tf32 wgmma reads K-major operands), then the tf32
// skeleton: the copies change no value and round_tf32 of each is the value itself. T = tf32 takes only
// such loads of bf16 or f16.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

// The fraction of T's tensor rate that the kernels running such a product otherwise reach, measured on the
// H200 (opcopy's call, 2026-11-29, bench/NOTES.md): the gathered GEMM (a computed or e4m3 operand it takes
// exactly: mixed_cast_bf16 at 4096³, 1243.5 µs, 14 %) and the fused mma.sync kernel (an operand the policy
// rounds: mixed_bf16_f32w at 4096³ with 64-row tiles, 6957 µs, 2.5 %; 0.7 % at 512³, 46.6 µs).
constexpr double kGatheredGemmTensorFraction = 0.14;
constexpr double kFusedMmaSyncTensorFraction = 0.025;
// The gathered GEMM where it evaluates an operand element by element (no tree of selects over load-free
// loads, gathered_gemm_fit.h's leaves: a row gather, emb[tok[t], c] or w[idx[n], k]), measured on the H200
// (gather-copy's call, 2026-11-29, bench/NOTES.md): embed_matmul at 4096 tokens, C 4096, N 4096, 7040 µs
// (2.5 %); x @ w[idx].T at 4096 x 11008 x 4096, 13.1 ms (3.6 %); 1.0 % at the census's 512 x 512 x 256.
constexpr double kGatheredGemmElementWiseTensorFraction = 0.025;
// T = tf32 (bf16 x f16), which neither takes: the fused kernels' scalar loop, mixed_bf16_f16 at 4096³ with the
// copies off, 21261 µs (6.46 TFLOP/s against the compiled-in 392 of tf32; opcopy2's call, 2026-11-29).
constexpr double kScalarLoopTensorFraction = 0.0165;

struct OperandCopy {
  std::string operand;   // "A" or "B"
  GlobalTensor copy;     // P_X [S, Kp] of T's dtype (its name left empty: the pass names it)
  Expr value;            // X(s, k), of the side axis and the reduced axis
  std::string side;      // the side axis (row for A, column for B)
  std::string depth;     // the reduced axis
  int64_t k = 0;         // K (the copy's columns past it are zeros)
  int64_t bytes_read = 0;  // what the copy reads of X's tensors (operand_reads.h)
  std::string why;       // why the skeleton does not stage X as it is
};

struct OperandCopies {
  std::vector<OperandCopy> copies;
  double copy_us = 0, skeleton_us = 0, mma_sync_us = 0;
  bool gathered = false;         // the alternative is the gathered GEMM (else the fused mma.sync kernel)
  bool element_wise = false;     // ... evaluating an operand element by element (a row gather)
  bool scalar = false;           // the alternative is the fused kernels' scalar loop (T = tf32)
  double alternative_fraction() const;  // the alternative's fraction of T's tensor rate (the constants above)
  bool pays() const;             // the rule above, or SOLDER_OPERAND_COPIES=force
  std::string figures() const;  // "copy 4.1 us + skeleton 9.0 us < mma.sync 80.2 us"
};

// The dtype a copy stores for T (bf16, f16, f8e4m3, f8e5m2; f32 for tf32); nullopt for f32 and 3xtf32.
std::optional<DType> copy_dtype(MmaType type);

// The copies that bring `contract` onto the skeleton (rule above, pricing included; `pays()` says whether
// they are taken), or why not. The copies are named "<dst>_a_<dtype>" / "<dst>_b_<dtype>" (the pass may
// rename them); `with_copies` is the contract reading them.
std::optional<OperandCopies> fit_operand_copies(const ContractNode& contract, const std::vector<GlobalTensor>& globals, std::string* why);

// `contract` reading each copy (its P_X named by `copies[i].copy.name`) as P_X[s, k] in place of its operand.
ContractNode with_copies(const ContractNode& contract, const std::vector<OperandCopy>& copies);

// Whether $SOLDER_OPERAND_COPIES leaves conversion copies on (unset or anything but "0"); "0" keeps
// main's plan before them (the mma.sync kernels), for A/B runs; "force" takes every copy that fits,
// paying or not (A/B runs of the price).
bool operand_copies_enabled();
bool operand_copies_forced();

}  // namespace solder
