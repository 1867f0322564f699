#include "plan/epilogue_cost.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "plan/cost_model.h"

namespace solder {

// config.cuh's kGemmSmemLimit: the dynamic shared memory a block of the skeleton may use.
constexpr int kSkeletonSmemLimit = 232448;

std::string_view epilogue_schedule_name(EpilogueSchedule schedule) {
  switch (schedule) {
    case EpilogueSchedule::pairs: return "pairs";
    case EpilogueSchedule::direct: return "direct";
    case EpilogueSchedule::registers_first: return "registers";
    case EpilogueSchedule::staged: return "staged";
  }
  return "?";
}

int epilogue_staging_bytes(const GemmConfig& c) {
  // Config::RingSmemBytes: the stages, two 8-byte mbarriers per stage, 1 KB of alignment slack.
  const int ring = c.stages * c.stage_bytes() + 16 * c.stages + 1024;
  const int rows = c.pingpong ? 128 : c.bm;
  const int buffer = rows * c.bn * 2;
  return c.bn % 32 == 0 && ring + buffer <= kSkeletonSmemLimit ? buffer : 0;
}

bool epilogue_staging_term_enabled() {
  const char* text = std::getenv("SOLDER_GEMM_EPILOGUE_TERM");
  if (!text || !*text) return kEpilogueStagingTermDefault;
  return std::string(text) != "0";
}

EpilogueSchedule epilogue_schedule(const GemmProblem& p, const GemmConfig& c) {
  if (!p.row_store || c.bn % 32 != 0) return EpilogueSchedule::pairs;
  if (p.row_store_mode == 0) return c.split_k == 1 ? EpilogueSchedule::direct : EpilogueSchedule::pairs;
  // Split-K's merge is per warp: the staged schedule needs the whole warpgroup at its barriers.
  if (p.row_store_mode == 2 && c.split_k == 1 && epilogue_staging_bytes(c) > 0)
    return EpilogueSchedule::staged;
  return EpilogueSchedule::registers_first;
}

EpilogueStore epilogue_store(const GemmProblem& p, const GemmConfig& c, int64_t blocks, double unit_main_loop_us, const Rates& rates) {
  EpilogueStore store;
  store.schedule = epilogue_schedule(p, c);
  const double tbps = store.schedule == EpilogueSchedule::pairs    ? kEpilogueStoreTbps
                      : store.schedule == EpilogueSchedule::direct ? kEpilogueRowStoreTbps
                                                                   : kEpilogueRowStagedTbps;
  const double tile_bytes = static_cast<double>(c.bm) * c.bn * (c.split_k > 1 ? 4 : dtype_bytes(p.output));
  // The busy SMs share the chip's store rate; one SM stores at most at its load port's rate.
  const double gbps = std::min(rates.sm_load_gbps, tbps * 1e3 / static_cast<double>(std::max<int64_t>(1, blocks)));
  store.store_us = tile_bytes / (gbps * 1e3);
  store.exposed_us = store.store_us;
  if (store.schedule == EpilogueSchedule::staged && epilogue_staging_term_enabled()) {
    store.overlapped = true;
    // The rest of the store, the bulk copies, drains behind the next tile's main loop, which waits for
    // it only before it rewrites the buffer. (A block's last tile has no next one: it pays store_us.)
    const double drain_us = (1.0 - kEpilogueStagedExposedFraction) * store.store_us;
    store.exposed_us = kEpilogueStagedExposedFraction * store.store_us + std::max(0.0, drain_us - unit_main_loop_us);
  }
  return store;
}

}  // namespace solder
