// The pruning pass: named rules that remove GEMM configurations the hardware or the problem rules out,
// before the cost model looks at them (FlashFuser §IV-C2: prune early, and say by which rule).
//
// Rules, in the order they are checked (the first that fails names the refusal):
//   tma_alignment      the problem: every row of A, B and D is a multiple of 16 bytes (TMA strides)
//   operand_major      the problem: e4m3, e5m2 and tf32 wgmma read K-major A and B only; an M-major A
//                      needs BM, an N-major B needs BN, a multiple of 64 (checked after wgmma_shape)
//   bk_swizzle         BK × bytes(T) = 128: one 128-byte swizzled row per K step
//   wgmma_shape        BN a multiple of 8 in [8, 256]; BM / consumers a multiple of 64 (m64 instructions)
//   accumulator_registers  BM × BN / (128 × consumers) ≤ 168 f32 per consumer thread (after setmaxnreg)
//   smem_capacity      stages × (BM + BN) × BK × bytes + epilogue staging + barriers ≤ the per-block limit
//   cluster_limit      cluster_m × cluster_n ≤ the hardware's largest cluster (16 on Hopper)
//   cluster_portable   cluster_m × cluster_n ≤ 8 unless non-portable clusters are allowed
//   oversized_tile     BM ≥ 2 × M rounded up to 64, or BN ≥ 2 × N rounded up to 16: a tile half as large
//                      covers the problem with less waste (dominated)
//   cluster_divides_grid  cluster_m divides the M tiles and cluster_n the N tiles
//   split_k_divides    split_k divides the K tiles (ceil(K / BK)) and is at most their number
//   occupancy          no CTA fits on an SM (shared memory + 1 KB, registers), or no cluster is co-resident
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw/hardware.h"
#include "plan/catalogue.h"
#include "plan/gemm_problem.h"

namespace solder {

#define SOLDER_PRUNE_RULES(X) \
  X(tma_alignment)            \
  X(operand_major)            \
  X(bk_swizzle)               \
  X(wgmma_shape)              \
  X(accumulator_registers)    \
  X(smem_capacity)            \
  X(cluster_limit)            \
  X(cluster_portable)         \
  X(oversized_tile)           \
  X(cluster_divides_grid)     \
  X(split_k_divides)          \
  X(occupancy)

enum class PruneRule {
#define SOLDER_DECLARE_RULE(name) name,
  SOLDER_PRUNE_RULES(SOLDER_DECLARE_RULE)
#undef SOLDER_DECLARE_RULE
};
constexpr int kPruneRuleCount = 0
#define SOLDER_COUNT_RULE(name) +1
    SOLDER_PRUNE_RULES(SOLDER_COUNT_RULE)
#undef SOLDER_COUNT_RULE
    ;

std::string_view prune_rule_name(PruneRule rule);  // "smem_capacity"
std::vector<PruneRule> all_prune_rules();

struct PruneRefusal {
  PruneRule rule;
  std::string detail;  // "213 KB > 227 KB": the numbers behind it
};

struct FeasibilityOptions {
  bool allow_nonportable_clusters = false;  // clusters of 9-16 CTAs
};

// The first rule `config` breaks for `problem` on `hw`, or nothing when it is feasible.
std::optional<PruneRefusal> check_feasibility(const GemmProblem& problem, const GemmConfig& config,
                                         const HardwareDescription& hw, const FeasibilityOptions& options = {});

// CTAs of `config` co-resident on one SM (shared memory with 1 KB reserved per block, registers, 2048
// threads), 0 when none fits. Needs hw.has_rates (for the per-SM sizes).
int ctas_per_sm(const GemmConfig& config, DType output, const HardwareDescription& hw);

// CTAs of `config` running at once on the whole GPU: SMs × ctas_per_sm without clusters; with clusters,
// co-resident clusters × cluster size from the measured DSM table at the config's shared memory (a
// footprint above the largest measured one uses that one: both leave one CTA per SM).
int64_t concurrent_ctas(const GemmConfig& config, DType output, const HardwareDescription& hw);

}  // namespace solder
