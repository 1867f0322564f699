#include "driver/compile.h"

#include <optional>
#include <string>

#include "ir/diagnostics.h"

#include "contract/contract_pass.h"
#include "fusion/fuse.h"
#include "kernel/kernel_verifier.h"
#include "lower/lower_unfused.h"

namespace solder {

FusionResult fuse_for(const BoundProgram& program, const CompileOptions& options) {
  // fuse: inline pointwise definitions, group, decompose cascades, lower each group. A definition
  // too large for the on-chip budget at the requested row tile is retried with half the tile, down
  // to the CPU executor's default tile.
  std::optional<WholeContractionPlan> whole;
  if (options.gemm_skeleton) whole = plan_whole_contractions(program);
  FusionParams params = options.fusion;
  while (true) {
    try {
      return fuse_program(program, params, whole ? &*whole : nullptr);
    } catch (const OnChipCapacityError&) {
      if (params.grid_tile <= FusionParams{}.grid_tile) throw;
      params.grid_tile /= 2;
    }
  }
}

CompileResult compile_program(const BoundProgram& program, const CompileOptions& options) {
  CompileResult result;
  if (!options.fuse) {
    // lower: one kernel per definition
    result.kernels = lower_unfused(program, UnfusedOptions{options.gemm_skeleton});
  } else {
    FusionResult fused = fuse_for(program, options);
    result.kernels = std::move(fused.kernels);
    result.report = fusion_report_text(program, fused);
  }
  // canonicalize contractions: every `reduce sum` that is a matrix product becomes a `contract`
  if (options.contractions) {
    ContractPassResult contracts = canonicalize_contractions(result.kernels);
    result.kernels = std::move(contracts.program);
    std::string text = contract_report_text(contracts);
    if (!text.empty()) result.report += (result.report.empty() ? "" : "\n") + text;
  }
  // verify the Kernel IR before anything runs it
  verify_kernel_program(result.kernels);
  return result;
}

}  // namespace solder
