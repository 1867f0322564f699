// canonicalize_contractions: the pass that turns every `reduce sum` that is a matrix product into a
// `contract` statement (kernel_ir.h), through the canonicalizer (canonicalize.h). It runs in the
// compile driver after fusion (or the unfused lowering), before the Kernel IR is verified, for
// every backend: the CPU executor and the CUDA backend run the same contracts.
#pragma once

#include <string>
#include <vector>

#include "contract/canonicalize.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct ContractReportEntry {
  std::string kernel;
  std::string destination;             // the statement's destination tensor
  bool canonical = false;
  std::vector<std::string> notes;      // what was factored out, T and why
  std::string refusal;                 // why it stays a reduce
  std::string text;                    // the contract as printed, when canonical
};

struct ContractPassResult {
  KernelProgram program;
  ContractPolicy policy;
  std::vector<ContractReportEntry> entries;  // every sum of products the pass looked at
};

ContractPassResult canonicalize_contractions(const KernelProgram& program);

// The report section for people ("Contractions: ..."), one paragraph per entry.
std::string contract_report_text(const ContractPassResult& result);

}  // namespace solder
