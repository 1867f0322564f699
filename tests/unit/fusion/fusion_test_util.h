// Helpers shared by the fusion tests: bind an example or a text, fuse it, run the fused kernels on
// the CPU executor and compare every output with the float64 reference.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "driver/compile.h"
#include "fusion/fuse.h"
#include "kernel/kernel_verifier.h"
#include "../test_util.h"

namespace solder::testing {

inline std::string example_path(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"; }

inline BoundProgram bind_example(const std::string& name, bool small = true,
                                 std::vector<std::pair<std::string, int64_t>> overrides = {}) {
  auto program = std::make_shared<Program>(parse_program_file(example_path(name)));
  return bind_program(program, SizeChoice{small, std::move(overrides)});
}

struct Verified {
  ExecutionResult exec;
  TensorSet reference;
  std::vector<OutputCheck> checks;  // one per output, in program order

  bool ok() const {
    for (auto& c : checks)
      if (!c.ok) return false;
    return true;
  }
  std::string failures() const {
    std::ostringstream s;
    for (auto& c : checks)
      if (!c.ok)
        s << c.name << ": " << c.reason << " (error " << c.error << ", tolerance " << c.tolerance << ", NaN mismatches "
          << c.nan_mismatches << ", unwritten " << c.unwritten << ")\n";
    return s.str();
  }
  const OutputCheck& check(const std::string& name) const {
    for (auto& c : checks)
      if (c.name == name) return c;
    throw std::out_of_range("no output " + name);
  }
};

// Runs `kernels` on `inputs` and compares every output of `bound` with the reference.
inline Verified verify_kernels(const BoundProgram& bound, const KernelProgram& kernels, const TensorSet& inputs,
                               const TensorSet* reference = nullptr) {
  Verified v;
  v.exec = execute_kernel_program(kernels, inputs);
  v.reference = reference ? *reference : run_reference(bound, inputs);
  double tolerance = tolerance_for(bound);
  for (const TensorInfo* out : bound.outputs()) {
    OutputCheck c = compare_output(v.exec.outputs.at(out->name), v.reference.at(out->name), tolerance);
    c.unwritten = v.exec.unwritten.count(out->name) ? v.exec.unwritten.at(out->name) : 0;
    if (c.unwritten > 0 && c.ok) {
      c.ok = false;
      c.reason = std::to_string(c.unwritten) + " element(s) never written";
    }
    v.checks.push_back(c);
  }
  return v;
}

struct FusedRun {
  FusionResult fused;
  Verified verified;
};

// The two compilations the canonicalizer's property tests compare, fused or not: contractions off
// (every product stays a plain reduce) and on (canonical contract statements).
struct ContractForms {
  KernelProgram reduce_form, contract_form;
};
inline ContractForms compile_both_forms(const BoundProgram& bound, bool fuse) {
  CompileOptions plain;
  plain.fuse = fuse;
  plain.contractions = false;
  CompileOptions canonical = plain;
  canonical.contractions = true;
  return {compile_program(bound, plain).kernels, compile_program(bound, canonical).kernels};
}

// Fuses `bound` with `params`, verifies the Kernel IR, runs it and compares with the reference.
inline FusedRun run_fused(const BoundProgram& bound, const FusionParams& params = {}, uint64_t seed = 1) {
  FusedRun r;
  r.fused = fuse_program(bound, params);
  verify_kernel_program(r.fused.kernels);
  TensorSet inputs = make_inputs(bound, seed);
  r.verified = verify_kernels(bound, r.fused.kernels, inputs);
  return r;
}

// The number of kernels, and the groups, as "name[defs...]" lines.
inline std::string groups_text(const FusionResult& r) {
  std::string s;
  for (auto& g : r.groups) {
    s += g.name + "[";
    for (size_t i = 0; i < g.plan.members.size(); ++i) s += (i ? " " : "") + g.plan.members[i].def.target.name;
    s += "]";
    if (g.plan.segments > 1) s += " x" + std::to_string(g.plan.segments);
    s += "\n";
  }
  return s;
}

inline std::string refusals_text(const FusionResult& r) {
  std::string s;
  for (auto& x : r.refusals) s += x + "\n";
  return s;
}

}  // namespace solder::testing
