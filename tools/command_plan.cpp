// solder plan FILE | --gemm M,N,K[,batch][,dtype] | --validate SWEEP.json | --catalogue — the GEMM tile
// planner (src/plan): the candidates, the counts pruned by each rule, the chosen configuration, its predicted
// time and binding resource.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "commands.h"
#include "hw/hardware.h"
#include "ir/diagnostics.h"
#include "lower/lower_unfused.h"
#include "plan/catalogue.h"
#include "plan/plan.h"
#include "plan/problems.h"
#include "plan/validate.h"

namespace solder::cli {
namespace {

int64_t parse_size(const std::string& text, const std::string& what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (text.empty() || used != text.size() || v < 1 || v > (int64_t{1} << 40))
    throw Error("--gemm " + what + ": expected " + (what == "batch" ? "a positive batch" : "a positive size") + ", found '" + text + "'");
  return v;
}

GemmProblem parse_gemm(const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream stream(spec);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  if (!spec.empty() && spec.back() == ',') parts.push_back("");
  if (parts.size() < 3 || parts.size() > 5)
    throw Error("--gemm expects M,N,K[,batch][,dtype], found '" + spec + "'");
  GemmProblem p;
  p.m = parse_size(parts[0], "M");
  p.n = parse_size(parts[1], "N");
  p.k = parse_size(parts[2], "K");
  size_t next = 3;
  if (parts.size() > next && !parts[next].empty() && std::isdigit(static_cast<unsigned char>(parts[next][0])))
    p.batch = parse_size(parts[next++], "batch");
  if (parts.size() > next) {
    auto type = parse_mma_type(parts[next]);
    if (!type) throw Error("--gemm dtype: expected bf16, f16, e4m3, e5m2 or tf32, found '" + parts[next] + "'");
    p.type = *type;
    ++next;
  }
  if (next != parts.size()) throw Error("--gemm expects M,N,K[,batch][,dtype], found '" + spec + "'");
  p.name = spec;
  return p;
}

}  // namespace

int command_plan(const std::vector<std::string>& args) {
  ProgramOptions options;
  std::string gemm, hardware_file, output_dtype;
  std::vector<std::string> validate;
  bool catalogue = false, b_n_major = false, skeleton_only = false, nonportable = false, row_store = false;
  int top = 5;
  Command command{"plan",
                  "solder plan FILE [--small] [--dim NAME=VALUE]... [--json] | --gemm M,N,K[,batch][,dtype] [--json] | "
                  "--validate SWEEP.json [--validate SWEEP.json]... [--json] | --catalogue [--json]",
                  "Choose GEMM skeleton tiles with the cost model (docs/planner.md). For each matrix product of the\n"
                  "program (or the one given by --gemm), print how many configurations of the catalogue each\n"
                  "feasibility rule pruned, the best candidates by predicted time with the time of each level\n"
                  "(tensor cores, shared memory, SM loads, L2, HBM), and the chosen one with its predicted time and\n"
                  "binding resource. --validate compares the model with measured times (bench/gemm/README.md)."};
  add_program_options(command, options, false);
  command.min_files = 0;
  command.options.push_back({"--gemm", "M,N,K[,batch][,dtype]",
                             "plan one product D = A·B, A stored [M, K], B stored [N, K] "
                             "(both K-major; --b-n-major: B stored [K, N]); dtype bf16 (default), "
                             "f16, e4m3, e5m2 or tf32",
                             [&gemm](const std::string& v) { gemm = v; }});
  command.options.push_back({"--output", "DTYPE", "output dtype of --gemm (default bf16)", [&output_dtype](const std::string& v) { output_dtype = v; }});
  command.options.push_back({"--b-n-major", "", "--gemm: B stored [K, N] (N contiguous)", [&b_n_major](const std::string&) { b_n_major = true; }});
  command.options.push_back({"--row-store", "",
                             "price the epilogue as the generated kernels store a 16-bit output: the skeleton's "
                             "staged row stores (GemmProblem::row_store), as `solder emit --report` does",
                             [&row_store](const std::string&) { row_store = true; }});
  command.options.push_back({"--top", "N", "candidates to list (default 5)", [&top](const std::string& v) {
                               size_t used = 0;
                               int n = 0;
                               try {
                                 n = std::stoi(v, &used);
                               } catch (...) {
                                 used = 0;
                               }
                               if (used != v.size() || n < 1 || n > 1000) throw Error("--top expects an integer in [1, 1000], found '" + v + "'");
                               top = n;
                             }});
  command.options.push_back({"--hardware", "FILE", "hardware description with \"rates\" (solder probe's output); "
                                                  "default: $SOLDER_HARDWARE, else the H100 shipped",
                             [&hardware_file](const std::string& v) { hardware_file = v; }});
  command.options.push_back({"--skeleton-only", "", "only configurations device/solder/gemm instantiates today",
                             [&skeleton_only](const std::string&) { skeleton_only = true; }});
  command.options.push_back({"--allow-nonportable-clusters", "", "allow clusters of 9-16 CTAs",
                             [&nonportable](const std::string&) { nonportable = true; }});
  command.options.push_back({"--validate", "SWEEP.json",
                             "compare predictions with measured times, per problem: Spearman "
                             "rank correlation, and the gap between the model's choice and the best "
                             "(repeat to read several sweeps together)",
                             [&validate](const std::string& v) { validate.push_back(v); }});
  command.options.push_back({"--catalogue", "", "print the catalogue's axes", [&catalogue](const std::string&) { catalogue = true; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  const int modes = static_cast<int>(!files.empty()) + !gemm.empty() + !validate.empty() + catalogue;
  if (modes != 1)
    throw Error("'solder plan' expects exactly one of FILE, --gemm, --validate or --catalogue, found " +
                std::string(modes == 0 ? "none" : "several") + " (usage: " + command.synopsis + ")");

  if (catalogue) {
    std::cout << (options.json ? catalogue_json() + "\n" : catalogue_text());
    return kExitOk;
  }
  const HardwareDescription hw = hardware_file.empty() ? default_hardware() : load_hardware_description(hardware_file);
  if (!hw.has_rates)
    throw Error(hardware_file + ": expected a hardware description with \"rates\" (the cost model's constants), found none; "
                "re-run solder probe");
  if (!validate.empty()) {
    Validation v = validate_cost_model(load_sweeps(validate), hw);
    std::cout << (options.json ? validation_json(v) + "\n" : validation_text(v));
    return kExitOk;
  }

  PlanOptions plan_options;
  plan_options.top = top;
  plan_options.feasibility.allow_nonportable_clusters = nonportable;
  auto start = std::chrono::steady_clock::now();
  std::vector<GemmProblem> problems;
  if (!gemm.empty()) {
    GemmProblem p = parse_gemm(gemm);
    p.b_k_major = !b_n_major;
    if (!output_dtype.empty()) {
      auto d = parse_dtype(output_dtype);
      if (!d) throw Error("--output expects a dtype (f32, bf16, f16, f8e4m3, f8e5m2), found '" + output_dtype + "'");
      p.output = *d;
    }
    problems.push_back(p);
  } else {
    if (!output_dtype.empty() || b_n_major) throw Error("--output and --b-n-major apply to --gemm only");
    problems = gemm_problems(lower_unfused(load_program(files[0], options.sizes), UnfusedOptions{true, false}));
  }
  std::vector<GemmPlan> plans;
  for (GemmProblem& p : problems) {
    p.row_store = row_store && dtype_bytes(p.output) == 2;
    if (skeleton_only) {
      plan_options.only.clear();
      for (const GemmConfig& c : gemm_catalogue(p.type))
        if (in_device_skeleton(c) && skeleton_cluster_fits(p, c)) plan_options.only.push_back(c);
    }
    plans.push_back(plan_gemm(p, hw, plan_options));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (options.json) {
    std::cout << plan_json(plans, hw) << "\n";
  } else {
    char line[96];
    std::snprintf(line, sizeof line, "\nplanned %zu product(s) in %.0f ms\n", plans.size(), ms);
    std::cout << plan_text(plans, hw) << line;
  }
  return kExitOk;
}

}  // namespace solder::cli
