// The catalogue of GEMM skeleton configurations the planner chooses from.
//
// A configuration is one instantiation of the sm_90a GEMM skeleton (device/solder/gemm): a CTA computes a
// BM × BN tile of D, streaming K in steps of BK through a ring of `stages` shared-memory buffers filled by
// a TMA producer warp(group), consumed by `consumers` warpgroups issuing wgmma (each owns BM / consumers
// rows, in m64 instructions of N = BN). CTAs form clusters of cluster_m × cluster_n: the CTAs of a cluster
// that share a row of tiles (same m) receive A by TMA multicast, those that share a column receive B.
// split_k > 1 splits the K tiles over that many CTAs whose f32 partial tiles meet in a global workspace;
// the last CTA of each tile adds them and runs the epilogue (the skeleton's serial split-K, config.cuh).
//
// The catalogue is data: the product of the axes below (kGemmCatalogueAxes in catalogue.cpp), for the
// problem's MMA type. The feasibility rules (feasibility.h) then remove what the hardware or the problem
// rules out. `solder plan --catalogue [--json]` prints it, so the planner's list and the skeleton's
// instantiations can be compared; to restrict the planner to what a skeleton provides, filter with
// PlanOptions::only (plan.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "plan/gemm_problem.h"

namespace solder {

struct GemmConfig {
  MmaType type = MmaType::bf16;
  int bm = 128, bn = 128, bk = 64;
  int stages = 4;
  int consumers = 2;               // consumer warpgroups; the producer adds one more warpgroup
  int cluster_m = 1, cluster_n = 1;
  int split_k = 1;
  // The ping-pong schedule (config.cuh Config::Pingpong): BM 64 and two consumer warpgroups that take
  // whole tiles in turn, one's epilogue overlapping the other's main loop. In the catalogue it is the
  // (BM 64, 2 consumers) point of the axes, which the cooperative schedule cannot use (32 rows each).
  bool pingpong = false;

  int threads() const { return 128 * (consumers + 1); }
  int cluster_size() const { return cluster_m * cluster_n; }
  // Bytes of one stage: a BM × BK tile of A and a BN × BK tile of B.
  int stage_bytes() const;
  // The CTA's shared memory: the stage ring, two mbarriers per stage, and 1 KB to align the ring to 1024
  // bytes (the 128-byte swizzle); the epilogue stores from registers. `output` is for a staged epilogue.
  int smem_bytes(DType output) const;
  // Rows of a tile each consumer warpgroup computes: BM / consumers (cooperative) or BM (ping-pong).
  int rows_per_consumer() const { return pingpong ? bm : bm / consumers; }
  // f32 accumulators per consumer thread: rows_per_consumer × BN / 128.
  int accumulator_registers() const;
  // Registers per thread the CTA launches with (setmaxnreg moves them between warpgroups): producers keep
  // kProducerRegisters, consumers hold the accumulators plus kConsumerOverheadRegisters.
  int launch_registers() const;

  bool operator==(const GemmConfig&) const = default;
};

constexpr int kProducerRegisters = 40;
constexpr int kConsumerOverheadRegisters = 56;
constexpr int kMaxAccumulatorRegisters = 168;  // f32 accumulators a consumer thread may hold

// Whether device/solder/gemm (config.cuh, 2026-11-26) instantiates `config`: bf16/f16/e4m3/e5m2, BM 64
// or 128 with one consumer warpgroup per 64 rows (or the ping-pong schedule: BM 64, two consumer
// warpgroups on alternate tiles, split-K 1), BN a multiple of 16 in [16, 256], BK = 128 bytes,
// 2-16 stages, split-K 1-16 (merged in the kernel through a global workspace), clusters 1x1, 2x1 (B
// multicast along M: ClusterM), 1x2 and 1x4 (A multicast along N: ClusterN), and 2x2 / 2x4 (both). What also depends on the
// operands' layout (a cluster's slices of the shared tile) is skeleton_cluster_fits (skeleton_choice.h).
// `solder plan --skeleton-only` keeps these.
bool in_device_skeleton(const GemmConfig& config);

// Whether the skeleton's cluster slicing fits `problem`'s operand layouts (config.cuh's static_asserts):
// a 2x1 cluster loads B in halves (K-major: BN/2 a multiple of 8 rows; N-major: BN/64 even), a 1xN
// cluster loads A in N slices (K-major: BM/N a multiple of 8 rows; M-major: BM/64 a multiple of N).
// True for 1x1. With in_device_skeleton, what the skeleton path may choose.
bool skeleton_cluster_fits(const GemmProblem& problem, const GemmConfig& config);

// "bf16 128x256x64 s4 w2 c2x1 k1": type, BM×BN×BK, stages, consumer warpgroups, cluster, split-K; the
// ping-pong schedule adds " pingpong" ("f8e4m3 64x256x128 s4 w2 c2x1 k1 pingpong").
std::string config_name(const GemmConfig& config);

// The axes whose product is the catalogue.
struct GemmCatalogueAxes {
  std::vector<int> bm, bn, bk, stages, consumers;
  std::vector<std::pair<int, int>> clusters;  // (cluster_m, cluster_n)
  std::vector<int> split_k;                   // runtime choices
};
const GemmCatalogueAxes& gemm_catalogue_axes();

// Every configuration of the catalogue for `type` (split_k expanded), before feasibility.
std::vector<GemmConfig> gemm_catalogue(MmaType type);

// The catalogue's axes and the count per MMA type, as JSON (for `solder plan --catalogue --json`).
std::string catalogue_json();
std::string catalogue_text();

}  // namespace solder
