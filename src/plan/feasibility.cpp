#include "plan/feasibility.h"

#include <algorithm>

namespace solder {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
std::string kb(int64_t bytes) { return std::to_string((bytes + 1023) / 1024) + " KB"; }

std::optional<PruneRefusal> problem_refusal(const GemmProblem& p) {
  const int bytes = mma_type_bytes(p.type);
  auto row = [](int64_t elements, int size) { return elements * size % 16 == 0; };
  const int64_t a_row = p.a_ld > 0 ? p.a_ld : p.a_k_major ? p.k : p.m, b_row = p.b_ld > 0 ? p.b_ld : p.b_k_major ? p.k : p.n;
  if (!row(a_row, bytes))
    return PruneRefusal{PruneRule::tma_alignment, "a row of A is " + std::to_string(a_row * bytes) + " bytes, not a multiple of 16"};
  if (!row(b_row, bytes))
    return PruneRefusal{PruneRule::tma_alignment, "a row of B is " + std::to_string(b_row * bytes) + " bytes, not a multiple of 16"};
  if (!row(p.n, dtype_bytes(p.output)))
    return PruneRefusal{PruneRule::tma_alignment, "a row of D is " + std::to_string(p.n * dtype_bytes(p.output)) + " bytes, not a multiple of 16"};
  if (p.type != MmaType::bf16 && p.type != MmaType::f16 && (!p.a_k_major || !p.b_k_major))
    return PruneRefusal{PruneRule::operand_major, std::string(mma_type_name(p.type)) + " wgmma reads K-major operands only; " +
                                                 (!p.a_k_major ? "A is M-major" : "B is N-major")};
  return std::nullopt;
}

}  // namespace

std::string_view prune_rule_name(PruneRule rule) {
  switch (rule) {
#define SOLDER_RULE_NAME(name) \
  case PruneRule::name: return #name;
    SOLDER_PRUNE_RULES(SOLDER_RULE_NAME)
#undef SOLDER_RULE_NAME
  }
  return "?";
}

std::vector<PruneRule> all_prune_rules() {
  return {
#define SOLDER_RULE_ITEM(name) PruneRule::name,
      SOLDER_PRUNE_RULES(SOLDER_RULE_ITEM)
#undef SOLDER_RULE_ITEM
  };
}

int ctas_per_sm(const GemmConfig& c, DType output, const HardwareDescription& hw) {
  const int by_smem = hw.rates.smem_per_sm_bytes / (c.smem_bytes(output) + 1024);
  const int by_registers = hw.rates.registers_per_sm / (c.threads() * c.launch_registers());
  const int by_threads = 2048 / c.threads();
  return std::max(0, std::min({by_smem, by_registers, by_threads}));
}

int64_t concurrent_ctas(const GemmConfig& c, DType output, const HardwareDescription& hw) {
  const int per_sm = ctas_per_sm(c, output, hw);
  if (per_sm == 0) return 0;
  const int size = c.cluster_size();
  if (size == 1) return static_cast<int64_t>(hw.sm_count) * per_sm;
  const DsmEntry* entry = hw.dsm_at(size);
  if (!entry || entry->max_active_clusters.empty()) {
    // No measurement at this size: whole clusters of the SMs' CTAs (no loss to GPC boundaries).
    return static_cast<int64_t>(hw.sm_count) * per_sm / size * size;
  }
  int clusters = hw.max_active_clusters(size, c.smem_bytes(output));
  if (clusters == 0) clusters = entry->max_active_clusters.rbegin()->second;
  return std::min<int64_t>(static_cast<int64_t>(clusters) * size, static_cast<int64_t>(hw.sm_count) * per_sm / size * size);
}

std::optional<PruneRefusal> check_feasibility(const GemmProblem& p, const GemmConfig& c, const HardwareDescription& hw,
                                         const FeasibilityOptions& options) {
  if (auto refusal = problem_refusal(p)) return refusal;
  const int bytes = mma_type_bytes(c.type);
  if (c.bk * bytes != 128)
    return PruneRefusal{PruneRule::bk_swizzle, "BK " + std::to_string(c.bk) + " × " + std::to_string(bytes) + " bytes = " +
                                              std::to_string(c.bk * bytes) + ", not 128"};
  if (c.bn % 8 != 0 || c.bn < 8 || c.bn > 256)
    return PruneRefusal{PruneRule::wgmma_shape, "BN " + std::to_string(c.bn) + " is not a multiple of 8 in [8, 256]"};
  if (!c.pingpong && (c.bm % c.consumers != 0 || (c.bm / c.consumers) % 64 != 0))
    return PruneRefusal{PruneRule::wgmma_shape, "BM " + std::to_string(c.bm) + " over " + std::to_string(c.consumers) +
                                               " consumer warpgroups is not a multiple of 64 rows each"};
  if ((!p.b_k_major && c.bn % 64 != 0) || (!p.a_k_major && c.bm % 64 != 0))
    return PruneRefusal{PruneRule::operand_major, std::string(!p.b_k_major ? "an N-major B needs BN" : "an M-major A needs BM") +
                                                 " a multiple of 64 (one 128-byte swizzle atom)"};
  if (c.accumulator_registers() > kMaxAccumulatorRegisters)
    return PruneRefusal{PruneRule::accumulator_registers, std::to_string(c.accumulator_registers()) + " f32 accumulators per thread > " +
                                                         std::to_string(kMaxAccumulatorRegisters)};
  const int smem = c.smem_bytes(p.output);
  if (smem > hw.smem_per_block_bytes)
    return PruneRefusal{PruneRule::smem_capacity, kb(smem) + " > " + kb(hw.smem_per_block_bytes)};
  if (c.cluster_size() > hw.max_cluster_size)
    return PruneRefusal{PruneRule::cluster_limit, "cluster of " + std::to_string(c.cluster_size()) + " > " + std::to_string(hw.max_cluster_size)};
  if (c.cluster_size() > 8 && !options.allow_nonportable_clusters)
    return PruneRefusal{PruneRule::cluster_portable, "cluster of " + std::to_string(c.cluster_size()) + " > 8 (non-portable)"};
  if (c.bm >= 2 * round_up(p.m, 64) || c.bn >= 2 * round_up(p.n, 16))
    return PruneRefusal{PruneRule::oversized_tile, std::to_string(c.bm) + "x" + std::to_string(c.bn) + " tile for M=" +
                                                  std::to_string(p.m) + " N=" + std::to_string(p.n)};
  const int64_t tiles_m = ceil_div(p.m, c.bm), tiles_n = ceil_div(p.n, c.bn), k_tiles = p.k_tiles(c.bk);
  if (tiles_m % c.cluster_m != 0 || tiles_n % c.cluster_n != 0)
    return PruneRefusal{PruneRule::cluster_divides_grid, std::to_string(c.cluster_m) + "x" + std::to_string(c.cluster_n) +
                                                        " cluster over " + std::to_string(tiles_m) + "x" + std::to_string(tiles_n) + " tiles"};
  if (c.split_k > k_tiles || k_tiles % c.split_k != 0)
    return PruneRefusal{PruneRule::split_k_divides, "split " + std::to_string(c.split_k) + " of " + std::to_string(k_tiles) + " K tiles"};
  if (hw.has_rates && concurrent_ctas(c, p.output, hw) == 0)
    return PruneRefusal{PruneRule::occupancy, "no CTA (" + kb(smem) + ", " + std::to_string(c.threads()) + " threads × " +
                                             std::to_string(c.launch_registers()) + " registers) fits on an SM"};
  return std::nullopt;
}

}  // namespace solder
