// Validation of the cost model against measured times: `solder plan --validate SWEEP.json`.
//
// A sweep is the JSON the skeleton's benchmark writes (bench/gemm/README.md, "Sweep JSON format"):
//   {"device": ..., "results": [ {"dtype": "bf16", "m": M, "n": N, "k": K, "batch": 1,
//      "config": {"bm", "bn", "bk", "stages", "consumers", "a_k_major", "b_k_major", "split_k",
//                 "cluster_m", "cluster_n"}, "ms": time per launch, ...}, ... ]}
// Also accepted per result: "time_us" instead of "ms"; "output" (dtype, default bf16); "a_k_major" and
// "b_k_major" at the result's level; "epilogue_bytes_per_output" (default: 0, and for fp8 the f32 row and
// column scales the benchmark's epilogue reads, 4/N + 4/M).
//
// Also read per result: config "blocks" (the grid). The model times the skeleton's persistent launch (at most
// one block per SM), so results with more blocks than SMs (one block per tile) are left out and counted.
// The same (problem, configuration) measured several times (several files, repeated runs) counts once, at
// the median of its times.
//
// For every problem (results with equal shape, type, output and majorness) with at least two configurations,
// the report gives the Spearman rank correlation of predicted and measured times, the configuration the
// model ranks first among the measured ones, its measured time, the best measured time and the gap
// between the two (model's choice / best - 1), and the ratio of predicted to measured time of the best;
// the choice of the skeleton path (choose_skeleton_config: the best of the device skeleton's whole
// catalogue) and, when that configuration was measured, its gap too; and a table of every configuration
// (measured and predicted times and ranks, binding resource). Overall: the mean of the per-problem
// correlations, the correlation of all (problem, configuration) pairs pooled, and the pooled correlation
// of times relative to each problem's best (measured / best measured against predicted / best predicted),
// which compares rankings within problems without the problems' sizes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hw/hardware.h"
#include "plan/catalogue.h"
#include "plan/gemm_problem.h"

namespace solder {

struct SweepRecord {
  GemmProblem problem;
  GemmConfig config;
  double time_us = 0;
  int64_t blocks = 0;  // the grid, 0 when the sweep does not say
  int repeats = 1;     // measurements merged into this record (the median of their times)
};

// Parses a sweep; errors name the file, line and column ("sweep.json:4:12: expected ..., found ...").
std::vector<SweepRecord> parse_sweep(std::string_view text, std::string_view origin);
std::vector<SweepRecord> load_sweep(const std::string& path);
// Several sweeps, concatenated (`solder plan --validate A.json --validate B.json`).
std::vector<SweepRecord> load_sweeps(const std::vector<std::string>& paths);

// Spearman's rank correlation of two equally long samples (ties get their average rank); 0 when either
// sample is constant or shorter than 2.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

struct ConfigValidation {
  std::string config;
  double measured_us = 0, predicted_us = 0;
  double measured_rank = 0, predicted_rank = 0;  // 1 = fastest (ties share the average rank)
  std::string binding;
  int repeats = 1;
};

struct ProblemValidation {
  GemmProblem problem;
  int configurations = 0;
  std::vector<ConfigValidation> table;  // in the sweep's order
  double spearman = 0;
  std::string model_choice, best_measured;
  double model_choice_measured_us = 0, best_measured_us = 0;
  double gap = 0;               // model_choice_measured_us / best_measured_us - 1
  double predicted_best_us = 0; // the model's time for the best measured configuration
  // The skeleton path's choice over the device skeleton's catalogue (choose_skeleton_config), and its
  // measured time and gap when the sweep measured it (0 otherwise).
  std::string skeleton_choice;
  double skeleton_choice_measured_us = 0, skeleton_gap = 0;
  bool skeleton_choice_measured = false;
  // When it was not: the measured configuration with the same tile, consumers, cluster and split whose
  // stage count is nearest (fewer stages on a tie), its time and gap ("" when there is none).
  std::string skeleton_nearest;
  double skeleton_nearest_measured_us = 0, skeleton_nearest_gap = 0;
  std::vector<std::string> infeasible;  // measured configurations the pruning rules would refuse: "name: rule"
};

struct Validation {
  std::vector<ProblemValidation> problems;  // problems with at least two configurations
  int records = 0;           // results read
  int block_per_tile = 0;    // left out: more blocks than SMs
  int merged = 0;            // repeated measurements merged into one record
  int pairs = 0;             // (problem, configuration) pairs of the problems validated
  double mean_spearman = 0, mean_gap = 0, max_gap = 0;
  double pooled_spearman = 0;    // all pairs' predicted and measured times
  double relative_spearman = 0;  // all pairs' times relative to their problem's best
  int skeleton_measured = 0;     // problems whose skeleton choice was measured
  double skeleton_max_gap = 0;   // the worst gap among those
  int skeleton_nearest = 0;      // problems with only a stage variant of it measured
  double skeleton_nearest_max_gap = 0;
};

Validation validate_cost_model(const std::vector<SweepRecord>& sweep, const HardwareDescription& hw);

std::string validation_text(const Validation& validation);
std::string validation_json(const Validation& validation);

}  // namespace solder
