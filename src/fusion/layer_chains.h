// Pass (analysis, reported only): runs of whole contractions that the layer chain kernel
// (device/solder/gemm/sm90_chain.cuh) would compute in one launch, each layer's result kept on chip as
// the next layer's A operand (issue 15, nerf_mlp's square layers).
//
// The rule, over consecutive whole contractions c1, c2 of the plan (program order):
//
//   c2 chains after c1  ⇔  both are plain contractions on the sm_90a GEMM skeleton (one contract, no
//                           pair, no operand prologue, no earlier chain) in one batch
//                      and c2's A operand is c1's stored result h (its epilogue's target) at c2's rows,
//                           with c1's rows (M1 = M2) and K2 = N1
//                      and N1 = N2 ∈ {64, 128, 192, 256} (the chain's width: the accumulator, N/2
//                           registers, and the A fragment, N/4, fit one thread)
//                      and T is f16 or bf16 for both, W (B) N-major (K × N, N contiguous) for both,
//                           c1's A K-major.
//
// A chain is a maximal run of such pairs. Its layers' meaning does not change: each layer's result is
// rounded to its declared dtype as its store rounds it, so the Kernel IR, the CPU executor and the
// float64 check are those of the separate layers. A layer result with another reader than the next
// layer (or an output) is also stored by the chain (nerf_mlp's h7, read by sigma); the last layer's is
// stored always.
//
// Reported by `solder fuse --gpu` under SOLDER_LAYER_CHAIN=1 only, as what the chain kernel would take:
// the code generator does not form these kernels yet. On the H200 (bench/NOTES.md, 2026-11-28,
// nerf-chain) the chain kernel ran as fast as the separate layers (h1..h4: 102.8 µs against 4 × 25.8),
// not faster, so the plan keeps one launch per layer.
#pragma once

#include <string>
#include <vector>

#include "fusion/whole_contractions.h"

namespace solder {

struct LayerChain {
  std::vector<size_t> layers;       // indices into WholeContractionPlan::whole, in order (≥ 2)
  std::vector<std::string> results; // each layer's result tensor (the stored one: its epilogue's target)
  std::vector<bool> stored;         // per layer: also written to global memory (another reader, an output, or the last)
  int64_t m = 0, k0 = 0, n = 0;     // rows, the first layer's K, the width
};

struct LayerChainPlan {
  std::vector<LayerChain> chains;
  std::vector<std::string> refused;  // pairs where c2 reads c1's result as A but does not chain, with the reason
};

LayerChainPlan find_layer_chains(const BoundProgram& program, const WholeContractionPlan& plan);

// The report lines (`solder fuse --gpu` under SOLDER_LAYER_CHAIN=1), empty when there is nothing to say.
std::vector<std::string> layer_chains_text(const BoundProgram& program, const WholeContractionPlan& plan,
                                           const LayerChainPlan& chains);

// Whether `solder fuse --gpu` reports the chains ($SOLDER_LAYER_CHAIN=1).
bool layer_chain_report_on();

}  // namespace solder
