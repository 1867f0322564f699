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
// For every problem (results with equal shape, type, output and majorness) with at least two configurations,
// the report gives the Spearman rank correlation of predicted and measured times, the configuration the
// model ranks first among the measured ones, its measured time, the best measured time and the gap
// between the two (model's choice / best - 1), and the ratio of predicted to measured time of the best.
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
};

// Parses a sweep; errors name the file, line and column ("sweep.json:4:12: expected ..., found ...").
std::vector<SweepRecord> parse_sweep(std::string_view text, std::string_view origin);
std::vector<SweepRecord> load_sweep(const std::string& path);

// Spearman's rank correlation of two equally long samples (ties get their average rank); 0 when either
// sample is constant or shorter than 2.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

struct ProblemValidation {
  GemmProblem problem;
  int configurations = 0;
  double spearman = 0;
  std::string model_choice, best_measured;
  double model_choice_measured_us = 0, best_measured_us = 0;
  double gap = 0;               // model_choice_measured_us / best_measured_us - 1
  double predicted_best_us = 0; // the model's time for the best measured configuration
  std::vector<std::string> infeasible;  // measured configurations the pruning rules would refuse: "name: rule"
};

struct Validation {
  std::vector<ProblemValidation> problems;  // problems with at least two configurations
  int records = 0;
  double mean_spearman = 0, mean_gap = 0, max_gap = 0;
};

Validation validate_cost_model(const std::vector<SweepRecord>& sweep, const HardwareDescription& hw);

std::string validation_text(const Validation& validation);
std::string validation_json(const Validation& validation);

}  // namespace solder
