// The GEMM epilogue's store as the cost model prices it: which schedule a configuration's epilogue runs
// (sm90_gemm.cuh, row_store_mode_of) and how much of each tile's store stays on the consumers' path.
//
// A configuration's epilogue is one of:
//   pairs            no row-store hooks (an f32 output, BN not a multiple of 32, a dual-B product): pairs of
//                    outputs from registers at kEpilogueStoreTbps; a split-K merge with row stores too
//   direct           row stores, value() and 16-byte global stores interleaved (row_store_mode 0)
//   registers_first  row stores, every value() first, then 16-byte global stores from registers
//                    (row_store_mode 1, or 2 where no staging buffer fits beside the ring)
//   staged           row_store_mode 2 with the whole BM × BN tile in a shared-memory buffer beside the ring
//                    (config.cuh, epilogue_staging_columns): the consumers write their rows there and
//                    bulk copies drain them to global memory during the next tile's main loop
//
// The staged term: of a registers-first store (the tile's bytes at kEpilogueRowStagedTbps shared by the
// busy SMs) a staged tile keeps kEpilogueStagedExposedFraction on the consumers' path (value(), the quad
// exchange, the shared-memory writes and the warpgroup's barrier); the rest, the global stores, drains
// behind the next tile's main loop and shows only where it outlasts that main loop; a block's last tile,
// with no next one, pays its whole store. So a configuration with fewer stages can win by the buffer its shared memory
// leaves room for (128 × 256 on 3 stages of 16-bit or fp8 operands: 3 × 48 KB + the 64 KB tile).
#pragma once

#include <string_view>

#include "hw/hardware.h"
#include "plan/catalogue.h"
#include "plan/gemm_problem.h"

namespace solder {

enum class EpilogueSchedule { pairs, direct, registers_first, staged };
// "pairs", "direct", "registers", "staged"
std::string_view epilogue_schedule_name(EpilogueSchedule schedule);

// Bytes of the staged epilogue's buffer for `config` (config.cuh's gemm_smem_bytes less the ring): the
// whole tile of 16-bit results (128 rows for the ping-pong schedule) where it fits beside the ring in
// kGemmSmemLimit, else 0. Only the row-store hooks with one B operand use it.
int epilogue_staging_bytes(const GemmConfig& config);

// Which schedule the skeleton runs for `config` on `problem` (GemmProblem::row_store, row_store_mode).
EpilogueSchedule epilogue_schedule(const GemmProblem& problem, const GemmConfig& config);

// $SOLDER_GEMM_EPILOGUE_TERM: "1" prices a staged tile by the staged term below, "0" prices it as a
// registers-first store (the model before the term); unset: kEpilogueStagingTermDefault, off: the H200 A/B of
// every plan the term moved found each slower (bench/NOTES.md, wide-epi), the stage it gives up costing
// more than the model's load term says.
bool epilogue_staging_term_enabled();
inline constexpr bool kEpilogueStagingTermDefault = false;

// The share of a registers-first store that a staged tile keeps on its consumers' path. Fitted on the
// one committed pair of a tile with and without the buffer (the H100, bench/NOTES.md, gemm-epilogue, call 2):
// fp8 quant_gemm Q5 (4096 x 7168 x 2048) on 128 x 256, 3 stages staged 109.2 µs against 4 stages registers
// first 110.1 µs (−0.82 %); with 0.87 the model prices the pair −0.80 % (98.41 against 99.20 µs).
// The drain, the remaining 0.13, is hidden where the next tile's main loop outlasts it.
inline constexpr double kEpilogueStagedExposedFraction = 0.87;

struct EpilogueStore {
  EpilogueSchedule schedule = EpilogueSchedule::pairs;
  double store_us = 0;    // one tile's store at the schedule's rate, all of it on the consumers' path
  double exposed_us = 0;  // what a tile followed by another of its block adds: store_us, or the staged part
  bool overlapped = false;  // staged and priced by the staged term (epilogue_staging_term_enabled)
};

// One tile's epilogue store on a grid of `blocks` busy blocks whose units each run `unit_main_loop_us`
// of main loop (the tensor term of one unit, without its store).
EpilogueStore epilogue_store(const GemmProblem& problem, const GemmConfig& config, int64_t blocks, double unit_main_loop_us,
                             const Rates& rates);

}  // namespace solder
