// Pass: fuse a program into as few kernels as the rules allow (the entry point of src/fusion).
//
// 1. Inline pointwise definitions into their consumers (inline_pointwise.h).
// 2. Group the remaining definitions greedily in program order: a definition joins the current
//    group when the group with it still plans (group_plan.h) — dims align, cascades over the
//    streamed dim decompose (src/algebra), phases are consistent. A definition that cannot join
//    starts a new group; the rule that refused it is recorded.
// 3. Lower each group (lower_fused.h) and check its on-chip footprint; a group over the budget
//    gives back its last definitions to the next group until it fits (the refusal names the
//    capacity limit). Pure reduction dims held whole are retried as inner loops first.
//
// What is not fused into a larger kernel still runs: every definition ends up in some group.
#pragma once

#include <string>
#include <vector>

#include "contract/contract_pass.h"
#include "fusion/group_plan.h"
#include "fusion/whole_contractions.h"
#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct FusedGroupInfo {
  std::string name;                 // the kernel's name (and the merge kernel's prefix)
  GroupPlan plan;
  std::vector<std::string> kernels; // kernel names (two for multi-segment)
};

struct FusionResult {
  KernelProgram kernels;
  std::vector<std::string> inlined;    // pointwise definitions substituted into consumers
  std::vector<FusedGroupInfo> groups;
  std::vector<std::string> refusals;   // each fusion refused, with its rule
  std::vector<std::string> whole;      // kernels of whole contractions (whole_contractions.h), in order
  std::vector<std::string> whole_notes;  // per contraction the skeleton takes: whole or fused, with the figures
};

// A definition that does not fit the on-chip budget in one kernel even at the smallest tiles tried
// (compile_program retries the whole fusion at half the row tile).
class OnChipCapacityError : public Error {
 public:
  explicit OnChipCapacityError(std::string message) : Error(std::move(message)) {}
};

// With `whole`, the contractions it names run as its kernels, in program order, and the rest fuses
// around them: a group never spans a whole contraction, and the pointwise definitions they absorb or
// read are not inlined away.
FusionResult fuse_program(const BoundProgram& program, const FusionParams& params = {}, const WholeContractionPlan* whole = nullptr);

// The fusion report (`solder fuse`): kernels, what each holds, the online forms, refusals, and (when
// given) the contractions the canonicalizer found in the fused kernels.
std::string fusion_report_text(const BoundProgram& program, const FusionResult& result, const ContractPassResult* contracts = nullptr);
std::string fusion_report_json(const BoundProgram& program, const FusionResult& result, const ContractPassResult* contracts = nullptr);

}  // namespace solder
