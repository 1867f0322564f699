#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include "ir/diagnostics.h"
#include "plan/epilogue_cost.h"
#include "plan/feasibility.h"

namespace solder {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Tiles of one wave when the scheduler walks the grid in near-square blocks: r rows × c columns of tiles,
// r × c ≈ tiles_per_wave, with the shape that minimises the bytes of A and B panels it touches.
std::pair<int64_t, int64_t> wave_block(int64_t tiles_per_wave, int64_t tiles_m, int64_t tiles_n, int bm, int bn) {
  double ideal = std::sqrt(static_cast<double>(tiles_per_wave) * bn / bm);
  int64_t r = std::clamp<int64_t>(std::llround(ideal), 1, tiles_m);
  int64_t c = std::clamp<int64_t>(ceil_div(tiles_per_wave, r), 1, tiles_n);
  r = std::clamp<int64_t>(ceil_div(tiles_per_wave, c), 1, tiles_m);
  return {r, c};
}

}  // namespace

std::string_view resource_name(Resource r) {
  switch (r) {
    case Resource::tensor: return "tensor";
    case Resource::smem: return "smem";
    case Resource::l2: return "l2";
    case Resource::hbm: return "hbm";
    case Resource::load: return "load";
    case Resource::fill: return "fill";
    case Resource::launch: return "launch";
    case Resource::split_merge: return "split_merge";
  }
  return "?";
}

double GemmCost::tflops() const { return total_us > 0 ? flops / (total_us * 1e-6) / 1e12 : 0; }

int wgmma_instruction_n(int bn) {
  for (int n = 256; n >= 8; n -= 8)
    if (bn % n == 0) return n;
  return bn;
}

double wgmma_efficiency(int bn) {
  auto raw = [](double n) { return (n / 2) / (n / 2 + kWgmmaIssueCycles); };
  return raw(wgmma_instruction_n(bn)) / raw(256);
}

GemmCost predict_gemm(const GemmProblem& p, const GemmConfig& c, const HardwareDescription& hw) {
  if (!hw.has_rates)
    throw Error("the hardware description '" + hw.name + "' has no \"rates\" (the cost model's constants); re-run solder probe");
  const Rates& rates = hw.rates;
  const double tensor_tflops = rates.tensor(mma_type_name(p.type));
  if (tensor_tflops <= 0)
    throw Error("the hardware description '" + hw.name + "' has no tensor rate for " + std::string(mma_type_name(p.type)));
  // Shared memory: kSmemBytesPerClock per SM at the SM clock (above the DSM table's cluster-size-1 "pull"
  // figure, which the sweep exceeds); the table's figure when the clock is unknown.
  const DsmEntry* own = hw.dsm_at(1);
  const double smem_tbps = hw.sm_clock_mhz > 0 ? kSmemBytesPerClock * hw.sm_clock_mhz * 1e6 * hw.sm_count / 1e12
                           : own && own->pull_tbps > 0 ? own->pull_tbps : 0;

  GemmCost cost;
  cost.flops = p.flops();
  const double bytes = mma_type_bytes(p.type), out_bytes = dtype_bytes(p.output);
  const int64_t tiles_m = ceil_div(p.m, c.bm), tiles_n = ceil_div(p.n, c.bn);
  const int64_t k_tiles = p.k_tiles(c.bk), k_tiles_per_cta = ceil_div(k_tiles, c.split_k);
  const int64_t tiles = p.batch * tiles_m * tiles_n;
  const int64_t ctas = tiles * c.split_k;  // work units: one output tile (one K range of it with split-K)
  const int sms = hw.sm_count;
  cost.ctas = ctas;
  cost.ctas_per_sm = std::max(1, ctas_per_sm(c, p.output, hw));
  // The persistent grid (gemm_skeleton_writer, bench/gemm): at most one block per SM (clusters: the clusters
  // co-resident at one block per SM), never more blocks than work units; block b runs units b, b + grid, ...
  const int64_t resident = std::max<int64_t>(c.cluster_size(), std::min<int64_t>(concurrent_ctas(c, p.output, hw), sms));
  const int64_t blocks = std::min<int64_t>(ctas, resident / c.cluster_size() * c.cluster_size());
  cost.concurrent_ctas = std::max<int64_t>(1, blocks);
  const int64_t units = ceil_div(ctas, blocks);  // units of the busiest block
  cost.waves = static_cast<double>(units);

  // One unit on one SM. Tensor cores: the padded tile's FLOPs at the SM's rate, its share of the chip's
  // measured rate, raised towards kIdleSmTensorBoost × that share as more SMs idle (clock headroom); then the epilogue stores the tile from the consumers' registers, at the chip's
  // epilogue store rate shared by the busy SMs (at most one SM's port).
  cost.wgmma_efficiency = wgmma_efficiency(c.bn);
  const double unit_flops = 2.0 * c.bm * c.bn * c.bk * static_cast<double>(k_tiles_per_cta);
  const double idle_fraction = std::max(0.0, 1.0 - static_cast<double>(blocks) / sms);
  const double sm_tflops = tensor_tflops / sms * (1.0 + (kIdleSmTensorBoost - 1.0) * idle_fraction);
  double unit_tensor_us = unit_flops / (sm_tflops * 1e6 * cost.wgmma_efficiency);
  // One consumer warpgroup waits for each K step's stage and for its previous wgmma batch with nothing
  // else to issue; a second consumer's wgmma fill those gaps. The ping-pong schedule's block with a single
  // unit runs one warpgroup alone, the same way.
  const double clock_mhz = hw.sm_clock_mhz > 0 ? hw.sm_clock_mhz : 1500;
  if (c.consumers == 1 || (c.pingpong && units < 2))
    unit_tensor_us += static_cast<double>(k_tiles_per_cta) * one_consumer_step_cycles(c.bn) / clock_mhz;
  else if (c.pingpong)
    unit_tensor_us += static_cast<double>(k_tiles_per_cta) * kPingpongStepCycles / clock_mhz;
  // The epilogue's store after each unit (epilogue_cost.h): all of it on the consumers' path; with the staged
  // term (a staged tile, SOLDER_GEMM_EPILOGUE_TERM=1), the part that stays there for every unit but the
  // block's last, which pays its whole store.
  const EpilogueStore store = epilogue_store(p, c, blocks, unit_tensor_us, rates);
  const double store_us = store.store_us;
  const bool staged = store.overlapped;
  cost.epilogue = store.schedule;
  cost.store_us = store.exposed_us;
  cost.tensor_us = staged ? static_cast<double>(units) * unit_tensor_us + static_cast<double>(units - 1) * store.exposed_us + store_us
                          : static_cast<double>(units) * (unit_tensor_us + store_us);
  if (c.pingpong) {
    // Ping-pong: the block's units alternate between two warpgroups and the ring orders their main loops,
    // so each epilogue but the last runs under the other warpgroup's main loop: units main loops and one
    // store, unless a store outlasts a main loop (then each warpgroup's own units, back to back, bind).
    const double own_units = static_cast<double>((units + 1) / 2);
    const double own_us = staged ? (own_units - 1) * (unit_tensor_us + store.exposed_us) + unit_tensor_us + store_us
                                 : own_units * (unit_tensor_us + store_us);
    cost.tensor_us = std::max(static_cast<double>(units) * unit_tensor_us + store_us, own_us);
  }
  // A cluster's ring advances at its slowest block's pace.
  cost.tensor_us *= 1.0 + kClusterPacing * (c.cluster_size() - 1);

  // Shared memory: TMA writes (BM + BN) × BK per stage; wgmma reads A once and B once per m64 block.
  const double k_elems = static_cast<double>(c.bk) * k_tiles_per_cta;
  cost.smem_bytes_per_cta = k_elems * bytes * ((c.bm + c.bn) + (c.bm + (c.bm / 64.0) * c.bn));
  if (smem_tbps > 0) cost.smem_us = static_cast<double>(units) * cost.smem_bytes_per_cta / (smem_tbps * 1e6 / sms);

  // Loads into one SM: its port (sm_load_gbps), or the memory latency over the stages - 1 loads in flight
  // (Little's law: (stages - 1) × stage bytes / latency), whichever is slower; with one consumer the
  // latency grows with the SMs streaming at once and the two blend (kLoadedLatencyGrowth).
  const double unit_load_bytes = k_elems * bytes * (c.bm + c.bn);
  const bool one_consumer = c.consumers == 1 || (c.pingpong && units < 2);
  const double busy_fraction = one_consumer ? std::min(1.0, static_cast<double>(blocks) / sms) : 0.0;
  const double loaded_latency_ns = rates.memory_latency_ns * (1.0 + kLoadedLatencyGrowth * busy_fraction);
  // A ring deeper than the block's K tiles (all its units': the producer runs on into the next unit)
  // has no more loads to keep in flight.
  const double block_k_tiles = static_cast<double>(k_tiles_per_cta) * static_cast<double>(units);
  const double in_flight = std::max(1.0, std::min(static_cast<double>(c.stages - 1), block_k_tiles));
  const double in_flight_gbps = in_flight * c.stage_bytes() / loaded_latency_ns;
  // One consumer warpgroup drains the ring in bursts (a batch, then its wait), so its ring keeps paying
  // past the port's rate: the kOneConsumerLoadNorm soft minimum of the two; two consumers, the minimum.
  const double load_gbps =
      one_consumer ? std::pow(std::pow(rates.sm_load_gbps, -kOneConsumerLoadNorm) + std::pow(in_flight_gbps, -kOneConsumerLoadNorm),
                              -1.0 / kOneConsumerLoadNorm)
                   : std::min(rates.sm_load_gbps, in_flight_gbps);
  cost.load_us = static_cast<double>(units) * unit_load_bytes / (load_gbps * 1e3);

  // L2 -> SM traffic.
  const double outputs = static_cast<double>(p.batch) * p.m * p.n;
  const double partial_bytes = c.split_k > 1 ? static_cast<double>(c.split_k) * outputs * 4 : 0;
  const double store_bytes = c.split_k > 1 ? partial_bytes : outputs * out_bytes;
  const double epilogue_bytes = outputs * p.epilogue_bytes_per_output;
  // A multicast divides A's bytes by cluster_n; B multicast B's by cluster_m, in a split-K launch only.
  const double operand_l2 = static_cast<double>(ctas) * k_elems * bytes *
                            (static_cast<double>(c.bm) / c.cluster_n + static_cast<double>(c.bn) / b_multicast_l2_factor(c));
  cost.l2_bytes = operand_l2 + store_bytes + epilogue_bytes;
  cost.l2_us = cost.l2_bytes / (rates.l2_tbps * 1e6);

  // HBM traffic.
  const double a_bytes = static_cast<double>(p.m) * p.k * bytes, b_bytes = static_cast<double>(p.k) * p.n * bytes;
  const double l2_resident = kL2ResidentFraction * static_cast<double>(rates.l2_bytes);
  // A shared operand (no batch axis) is read from HBM once while it stays in L2 across the batches, once
  // per batch otherwise.
  auto reads = [&](bool shared, double operand_bytes) { return shared && operand_bytes <= l2_resident ? 1.0 : static_cast<double>(p.batch); };
  double operand_hbm = reads(p.a_shared, a_bytes) * a_bytes + reads(p.b_shared, b_bytes) * b_bytes;
  if (a_bytes + b_bytes > l2_resident) {
    // Rounds of tiles_per_wave tiles, then a last round of the rest, each reading the panels of its block.
    const int64_t tiles_per_wave = std::max<int64_t>(1, blocks / c.split_k);
    auto round_bytes = [&](int64_t round_tiles) {
      auto [r, cols] = wave_block(round_tiles, tiles_m, tiles_n, c.bm, c.bn);
      return std::min((static_cast<double>(r) * c.bm + static_cast<double>(cols) * c.bn) * p.k * bytes, a_bytes + b_bytes);
    };
    const int64_t full_rounds = tiles / tiles_per_wave, rest = tiles % tiles_per_wave;
    const double rounds_bytes = static_cast<double>(full_rounds) * round_bytes(tiles_per_wave) + (rest > 0 ? round_bytes(rest) : 0);
    operand_hbm = std::max(operand_hbm, rounds_bytes);
  }
  const bool partials_in_l2 = partial_bytes <= l2_resident;
  cost.hbm_bytes = operand_hbm + (c.split_k > 1 ? (partials_in_l2 ? 0 : partial_bytes) : store_bytes) +
                   (c.split_k > 1 ? 0 : epilogue_bytes);
  cost.hbm_us = cost.hbm_bytes / (rates.hbm_tbps * 1e6);

  // The pipeline fill: the first stage arrives one memory latency after the start (later units' loads
  // overlap the previous unit's epilogue, in the persistent loop).
  cost.fill_us = rates.memory_latency_ns * 1e-3 + c.stage_bytes() / (rates.sm_load_gbps * 1e3);

  // A cluster's launch: the probe's empty cluster kernel, plus the skeleton's own cost, measured for A
  // multicast (kSkeletonClusterUs) and fitted for B multicast alone (kSkeletonBMulticastClusterUs).
  const double skeleton_cluster_us = c.cluster_n > 1 ? kSkeletonClusterUs : kSkeletonBMulticastClusterUs;
  cost.launch_us = rates.launch_us + (c.cluster_size() > 1 ? rates.cluster_launch_us + skeleton_cluster_us : 0);
  if (c.split_k > 1) {
    // The skeleton's serial split-K: the last CTA of each tile reads the other split_k - 1 partials and
    // writes D, after its own main loop; no second launch. The larger of the whole launch's merge bytes
    // at L2 (HBM) speed and one merging CTA's reads (through its SM's load port, one partial after the
    // other: kSplitKPartialReadLatencies), plus the merge's dependent memory round trips in every round
    // of CTAs (kSplitKMergeLatencies).
    const double merge_bytes = (c.split_k - 1.0) * outputs * 4 + outputs * (out_bytes + p.epilogue_bytes_per_output);
    const double merge_tbps = partials_in_l2 ? rates.l2_tbps : rates.hbm_tbps;
    // The 64 x 64 f32 blocks of every other split's partial, read one after the other.
    const double partial_blocks = (c.split_k - 1.0) * c.bm * c.bn / (64.0 * 64.0);
    const double tile_merge_us = (c.split_k - 1.0) * c.bm * c.bn * 4 / (rates.sm_load_gbps * 1e3) +
                                 partial_blocks * kSplitKPartialReadLatencies * rates.memory_latency_ns * 1e-3;
    const double tiles_64 = static_cast<double>(p.batch) * static_cast<double>(ceil_div(p.m, 64)) * static_cast<double>(ceil_div(p.n, 64));
    const double latencies = tiles_64 <= kFewTilesFraction * sms ? kSplitKMergeLatenciesFewTiles : kSplitKMergeLatencies;
    cost.merge_us = std::max(merge_bytes / (merge_tbps * 1e6), tile_merge_us) +
                    static_cast<double>(units) * latencies * rates.memory_latency_ns * 1e-3;  // per round of units
  }

  // The tensor cores, one SM's loads and HBM overlap, but not perfectly: an SM whose loads barely keep
  // up with HBM leaves HBM idle between them, and a wgmma waiting for its stage leaves the port idle.
  // Their kMainloopNorm-norm is the slowest when one dominates and up to 3^(1/p) of it when all three
  // are equal; shared memory and L2 bound it from below (the maximum).
  double mainloop = 0;
  for (double t : {cost.tensor_us, cost.load_us, cost.hbm_us}) mainloop += std::pow(t, kMainloopNorm);
  mainloop = std::max({std::pow(mainloop, 1.0 / kMainloopNorm), cost.smem_us, cost.l2_us});
  cost.total_us = cost.launch_us + mainloop + cost.fill_us + cost.merge_us;
  std::pair<double, Resource> terms[] = {{cost.tensor_us, Resource::tensor}, {cost.smem_us, Resource::smem},
                                         {cost.load_us, Resource::load},     {cost.l2_us, Resource::l2},
                                         {cost.hbm_us, Resource::hbm},       {cost.fill_us, Resource::fill},
                                         {cost.launch_us, Resource::launch}, {cost.merge_us, Resource::split_merge}};
  cost.binding = std::max_element(std::begin(terms), std::end(terms),
                                  [](const auto& a, const auto& b) { return a.first < b.first; })->second;
  return cost;
}

}  // namespace solder
