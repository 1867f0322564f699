// Pass: which contractions run whole, on the sm_90a GEMM skeleton, instead of inside fused kernels.
//
// Fusion keeps a contraction's result on chip, which pays when writing it out and reading it back
// would cost more than the product itself: attention's scores (K = the head dim, 64–256) are the
// case. A contraction with a long K (an FFN's projections, a router's logits) does much more
// arithmetic per byte of its result; it runs best as one GEMM over the whole problem, on the skeleton,
// with its result in global memory. The rule, per definition of the program:
//
//   whole  ⇔  the skeleton takes it (lower_whole_contraction: canonical, fits, a tile is feasible)
//             and  M ≥ 64 and N ≥ 64 (one tile of the skeleton; a matrix-vector product streams its
//                  weights through many blocks of a fused kernel instead)
//             and  FLOPs / bytes materialised  ≥  balance / 3,
//
// where the FLOPs are 2·M·N·K·batch; the bytes materialised are what running it whole adds to the
// traffic: its result written once and read back once (nothing for a program output, written
// anyway), and the same round trip for each operand that is an intermediate not yet stored by an
// earlier whole contraction (except a pointwise function of another matrix product's result, stored
// anyway: an MLP's previous layer h = relu(z + b), whose z cannot stay on chip across this product);
// (and, where that alone would keep it fused, not its result either when the result is such a
// pointwise function of this product read only by matrix products: conv_chain's h = relu(y1), read by
// the 1×1 convolution, or nerf_mlp's h0 = relu(z0 + b0))
// and the balance is the machine's tensor rate over its memory bandwidth
// for the contraction's type (H100, f16: 785 TFLOP/s / 3.0 TB/s ≈ 262 FLOP/B). Attention's score
// product (K = 64, f32 scores: 16 FLOP/B) stays fused; ffn's first product (K = 3072, its f16
// epilogue h: 1536 FLOP/B) runs whole, and so does its second (an output; h is stored already).
//
// A whole contraction c absorbs its pointwise consumer p as the contract's epilogue (h = gelu(c) is
// computed as the skeleton stores, and c is never stored) when p is c's only reader, c is not an
// output, and p reads c at its own index and otherwise only program inputs and tensors that earlier
// kernels store (absorbable_epilogue): gated_ffn's h = silu(gate) · up is the epilogue of `up`, reading
// the `gate` that the kernel before stored.
//
// Two contractions c1 and c2 (c1 first) that are read only by one pointwise definition p, which reads
// nothing else computed but tensors already stored, neither an output, run as ONE paired launch when
// the skeleton's dual-B configuration takes them (the same A, a second B of the same dtype, layout and
// shape: gemm_skeleton_fit.h): the kernel is c2's contract with p as its epilogue and c1's terms as its
// paired terms (kernel_ir.h, pair_terms), so A is read once and neither c1 nor c2 is stored. gated_ffn's
// gate and up with h = silu(gate) · up are the case. Refused pairs fall back to the rule above, and the
// report says why.
// Two whole contractions c1 then c2 that both run on the gathered GEMM (no skeleton stages them) run as
// ONE chained kernel when c2's A is c1's result h (after c1's epilogue, stored in T) at c2's rows and K,
// h is read by c2 only and is not an output, and the chained grid still gives at least half the SMs a
// block: one block per 32 rows computes h's row tile (all of N1 ≤ 256 columns) on chip and then c2's
// rows from it (fit_gathered_chain). That saves a launch, h's round trip and the second kernel's tail,
// and costs the first product's parallelism along N1 (its column tiles run in one block), so a chain
// with fewer row tiles than half the SMs stays two kernels (conv_chain at 28 × 28 and 14 × 14 pixels:
// 25 and 7 blocks). conv_chain's y1 (3×3 or 1×1, h = relu(y1) as its epilogue, h f16) and y2 (1×1) at
// 56 × 56 pixels are the case. The report gives the figures either way.
// Tensors a whole contraction reads stay materialised (the inliner keeps them).
//
// The prologue form (lower/lower_prologue.h) is tried first: a contraction whose A operand is computed
// from one input X[m, k] through pointwise definitions and row reductions over X (quant_gemm's amax,
// rmsnorm_gemm's Σx²) runs whole too, with those definitions absorbed: the skeleton stages X, folds the
// row reductions over the staged tiles (side reductions; a pre-sweep of the A stripe when A reads
// them), converts A into shared memory (wgmma SS) and applies the scale after the dot. One kernel, and the
// computed operand never goes through memory (the bytes materialised are only the result's).
// Unless two kernels cost less (contract/gemm_prologue_fit.h, choose_prologue_plan): then the
// prologue is not taken, the row definitions fuse into one memory-bound kernel that stores A's
// operand in T (its declared type, or store_in_t below), and the plain skeleton runs the product.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct WholeContraction {
  size_t def = 0;                   // the contraction, an index into program.defs
  std::optional<size_t> epilogue;   // the pointwise consumer computed by its epilogue
  std::optional<size_t> pair;       // the contraction paired with it in one dual-B launch (never stored)
  Kernel kernel;                    // one `contract` (lower_whole_contraction), or side reductions and
                                    // a contract whose A is computed (lower_prologue_contraction)
  std::string why;                  // the rule's figures, for the report
  std::vector<size_t> absorbed;     // prologue form: the definitions it computes besides (reductions
                                    // as side reductions, pointwise ones inlined into A or the scale)
  std::vector<std::string> notes;   // prologue form: what runs where (fusion report)
  // A chain: the whole contraction before this one (and its epilogue) computed in the same kernel, its
  // result kept on chip as this one's A (gathered_gemm_fit.h, fit_gathered_chain). The kernel's body is
  // that contract, then this one's.
  std::vector<size_t> chained;
};

struct WholeContractionPlan {
  std::vector<WholeContraction> whole;  // in program order
  std::set<std::string> kept;           // tensors that must stay materialised (operands of whole contractions)
  std::vector<std::string> fused;       // contractions the skeleton takes that stay fused, with the figures
  // Intermediates to store in the MMA input type T instead of their declared f32 (issue 15, sixth
  // session): the A operand of a prologue contraction whose two-kernel form costs less, read by that
  // contraction alone, which rounds it to T anyway, so storing it rounded changes no value. Non-empty:
  // fuse_for plans again on the program with those dtypes (with_storage_dtypes), where the plain
  // skeleton then takes the contraction.
  std::map<std::string, DType> store_in_t;

  // The whole contraction that computes definition `target` (directly or as its epilogue), or nullptr.
  const WholeContraction* computing(const BoundProgram& program, const std::string& target) const;
};

WholeContractionPlan plan_whole_contractions(const BoundProgram& program);

// `program` with the intermediates of `dtypes` declared in those types (a copy of the program text,
// bound at the same sizes).
BoundProgram with_storage_dtypes(const BoundProgram& program, const std::map<std::string, DType>& dtypes);

// The report lines (`solder fuse`), empty when there is nothing to say.
std::string whole_contractions_text(const BoundProgram& program, const WholeContractionPlan& plan);

}  // namespace solder
