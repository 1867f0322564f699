#include "plan/skeleton_choice.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace solder {

bool split_k_offered(const GemmProblem& p, const GemmConfig& c, int sm_count) {
  if (c.split_k == 1) return true;
  if ((c.split_k & (c.split_k - 1)) != 0) return false;  // 2, 4, 8, 16
  if (c.bn % 64 != 0) return false;  // the merge path run on the GPU so far (8 float4 per split and lane)
  if (c.cluster_size() > 2) return false;  // 4-block clusters with a split: ptxas spills (64x128, 2026-11-26)
  const int64_t tiles = p.batch * ((p.m + c.bm - 1) / c.bm) * ((p.n + c.bn - 1) / c.bn);
  const int64_t k_tiles = p.k_tiles(c.bk);
  return tiles < sm_count && k_tiles >= static_cast<int64_t>(kMinSplitKTiles) * c.split_k;
}

std::optional<bool> forced_skeleton_schedule() {
  const char* text = std::getenv("SOLDER_GEMM_SCHEDULE");
  if (!text || !*text) return std::nullopt;
  const std::string v(text);
  if (v == "pingpong") return true;
  if (v == "cooperative") return false;
  std::fprintf(stderr, "solder: SOLDER_GEMM_SCHEDULE='%s' is not pingpong or cooperative; ignored\n", text);
  return std::nullopt;
}

std::optional<std::pair<int, int>> forced_skeleton_cluster() {
  const char* text = std::getenv("SOLDER_GEMM_CLUSTER");
  if (!text || !*text) return std::nullopt;
  int m = 0, n = 0;
  char tail = 0;
  if (std::sscanf(text, "%dx%d%c", &m, &n, &tail) != 2) return std::nullopt;
  return std::pair{m, n};
}

namespace {

// One tile "BMxBNsSTAGESkSPLIT[cMxN]"; nullopt when malformed.
std::optional<ForcedTile> parse_forced_tile(const std::string& text) {
  ForcedTile t;
  char tail = 0;
  const int fields = std::sscanf(text.c_str(), "%dx%ds%dk%dc%dx%d%c", &t.bm, &t.bn, &t.stages, &t.split_k, &t.cluster_m, &t.cluster_n, &tail);
  if (fields == 4) {
    t.cluster_m = t.cluster_n = 1;
    if (std::sscanf(text.c_str(), "%dx%ds%dk%d%c", &t.bm, &t.bn, &t.stages, &t.split_k, &tail) == 4) return t;
  }
  if (fields == 6) return t;
  return std::nullopt;
}

}  // namespace

std::optional<ForcedTile> forced_skeleton_tile(std::string* why, const std::optional<std::array<int64_t, 3>>& shape) {
  const char* env = std::getenv("SOLDER_GEMM_TILE");
  if (!env || !*env) return std::nullopt;
  const std::string text = env;
  auto malformed = [&](const std::string& entry) {
    if (why)
      *why = "SOLDER_GEMM_TILE='" + text + "': '" + entry +
             "' is not BMxBNsSTAGESkSPLIT[cMxN][@M,N,K] (e.g. 128x64s8k2, 128x64s6k1c1x2 or 64x64s8k4@128,1024,3072)";
    return ForcedTile{};  // matches nothing: the choice refuses with `why`
  };
  // Entries separated by ';': "TILE" for every product, "TILE@M,N,K" for products of that shape only;
  // the first entry that applies wins.
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::string entry = text.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    const size_t at = entry.find('@');
    const std::optional<ForcedTile> tile = parse_forced_tile(entry.substr(0, at));
    if (!tile) return malformed(entry);
    if (at == std::string::npos) return tile;
    long long m = 0, n = 0, k = 0;
    char tail = 0;
    if (std::sscanf(entry.c_str() + at + 1, "%lld,%lld,%lld%c", &m, &n, &k, &tail) != 3) return malformed(entry);
    if (shape && (*shape)[0] == m && (*shape)[1] == n && (*shape)[2] == k) return tile;
  }
  return std::nullopt;  // no entry for this product: the cost model chooses
}

double tf32x3_split_us(const GemmSkeletonProblem& p, const HardwareDescription& hw) {
  const double elements = static_cast<double>(p.a.batch * p.m + p.b.batch * p.n) * static_cast<double>(p.k);
  return elements * (4.0 + 12.0) / (hw.rates.hbm_tbps * 1e6) + 2 * hw.rates.launch_us;
}

SkeletonChoice choose_skeleton_config(const GemmSkeletonProblem& p, MmaType type, DType output, bool row_store, int row_store_mode,
                                      int64_t whole_rows) {
  if (type == MmaType::tf32x3) {
    // The split (two memory-bound launches) and the tf32 product over K' = 3K of its copies.
    SkeletonChoice gemm = choose_skeleton_config(tf32x3_gemm_problem(p), MmaType::tf32, output, row_store, row_store_mode, whole_rows);
    if (!gemm.chosen) return gemm;
    const double split = tf32x3_split_us(p, default_hardware()), product = gemm.chosen->cost.total_us;
    gemm.chosen->cost.total_us += split;
    char text[160];
    std::snprintf(text, sizeof text, "3xTF32: split %.1f us (read %.1f MB, write %.1f MB) + tf32 GEMM over K' = 3K %.1f us; ", split,
                  static_cast<double>(p.a.batch * p.m + p.b.batch * p.n) * p.k * 4 / 1e6,
                  static_cast<double>(p.a.batch * p.m + p.b.batch * p.n) * p.k * 12 / 1e6, product);
    gemm.why = text + gemm.why;
    return gemm;
  }
  GemmProblem problem;
  problem.row_store = row_store && !p.b2;
  problem.row_store_mode = row_store_mode;
  problem.batch = p.batch;
  problem.m = p.m;
  const int operands = p.b2 ? 2 : 1;
  problem.n = p.n * operands;
  problem.k = p.k;
  problem.k_first = p.second ? p.first_k() : 0;
  problem.type = type;
  problem.output = output;
  problem.a_k_major = p.a.k_major;
  problem.b_k_major = p.b.k_major;
  problem.a_shared = p.batch > 1 && p.a.batch == 1;
  problem.b_shared = p.batch > 1 && p.b.batch == 1;
  problem.a_ld = p.a.ld;
  problem.b_ld = p.b.ld;
  PlanOptions options;
  options.top = 1;
  const HardwareDescription& hw = default_hardware();
  std::string forced_why;
  const std::optional<ForcedTile> forced = forced_skeleton_tile(&forced_why, std::array<int64_t, 3>{p.m, p.n, p.k});
  const std::optional<std::pair<int, int>> cluster = forced ? std::nullopt : forced_skeleton_cluster();
  const std::optional<bool> schedule = forced_skeleton_schedule();
  std::vector<GemmConfig> with_cluster;  // the offered configurations of that cluster shape
  for (const GemmConfig& c : gemm_catalogue(type)) {
    if (whole_rows > 0 && (c.bn < whole_rows || c.cluster_n != 1 || operands != 1)) continue;  // a row per tile
    if (forced) {  // A/B runs: exactly this tile, when the skeleton has it (split-K offered or not)
      if (c.bm != forced->bm || c.bn != forced->bn * operands || c.stages != forced->stages || c.split_k != forced->split_k ||
          c.cluster_m != forced->cluster_m || c.cluster_n != forced->cluster_n || !in_device_skeleton(c) ||
          !skeleton_cluster_fits(problem, c) || (operands == 2 && (c.split_k != 1 || c.cluster_m != 1 || c.pingpong)) ||
          (schedule && *schedule != c.pingpong))
        continue;
      options.only.push_back(c);
      continue;
    }
    if (!in_device_skeleton(c) || !split_k_offered(problem, c, hw.sm_count)) continue;
    // Clusters: the operand slices must fit the layouts; the cost model charges the cluster launch and
    // credits the multicast (fewer L2 -> SM bytes).
    GemmConfig per_operand = c;
    per_operand.bn = c.bn / operands;
    if (!skeleton_cluster_fits(problem, operands == 2 ? per_operand : c)) continue;
    // Dual-B: BN' = 2·BN with BN a multiple of 16 (64 when B is N-major), at most 128; no split-K and
    // no cluster along M (B multicast); a cluster along N shares A as in the single-B kernel.
    if (operands == 2 && (c.split_k != 1 || c.cluster_m != 1 || c.pingpong || c.bn % (p.b.k_major ? 32 : 128) != 0)) continue;
    if (schedule && *schedule != c.pingpong) continue;
    options.only.push_back(c);
    if (cluster && c.cluster_m == cluster->first && c.cluster_n == cluster->second) with_cluster.push_back(c);
  }
  // A forced tile the skeleton does not offer for this product (not in the catalogue, a split the catalogue
  // has no axis for, a cluster that does not fit) refuses: an empty offer would let the cost model choose
  // from the whole catalogue, and the report would call its choice forced.
  if (forced && options.only.empty()) {
    SkeletonChoice refused;
    refused.why = forced_why.empty() ? "SOLDER_GEMM_TILE forces a tile the GEMM skeleton does not offer for " + describe(problem) +
                                           " (BN a multiple of 64 for an N-major B, a split and stages of the catalogue: `solder plan` lists them)"
                                     : forced_why;
    return refused;
  }
  // A/B runs: $SOLDER_GEMM_CLUSTER restricts the offer to one cluster shape where it has any.
  if (cluster && !with_cluster.empty()) options.only = with_cluster;
  GemmPlan plan = plan_gemm(problem, hw, options);
  SkeletonChoice choice;
  if (!plan.chosen()) {
    std::string rules;
    for (auto& [rule, example] : plan.example) rules += (rules.empty() ? "" : "; ") + example;
    choice.why = "no configuration of the GEMM skeleton is feasible for " + describe(problem) + (rules.empty() ? "" : " (" + rules + ")");
    if (forced) choice.why += forced_why.empty() ? " (SOLDER_GEMM_TILE forces one tile)" : " (" + forced_why + ")";
    return choice;
  }
  choice.chosen = *plan.chosen();
  choice.chosen->config.bn /= operands;
  char text[200];
  std::snprintf(text, sizeof text, "cost model: %.1f us predicted, bound by %s%s", choice.chosen->cost.total_us,
                std::string(resource_name(choice.chosen->cost.binding)).c_str(),
                operands == 2 ? " (dual-B, modelled as one product of twice the columns)" : "");
  choice.why = text;
  if (forced) choice.why += " (forced by SOLDER_GEMM_TILE)";
  return choice;
}

}  // namespace solder
