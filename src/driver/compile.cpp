#include "driver/compile.h"

#include <string>

#include "ir/diagnostics.h"

#include "fusion/fuse.h"
#include "kernel/kernel_verifier.h"
#include "lower/lower_unfused.h"

namespace solder {

CompileResult compile_program(const BoundProgram& program, const CompileOptions& options) {
  CompileResult result;
  if (!options.fuse) {
    // lower: one kernel per definition
    result.kernels = lower_unfused(program);
  } else {
    // fuse: inline pointwise definitions, group, decompose cascades, lower each group. A definition
    // too large for the on-chip budget at the requested row tile is retried with half the tile, down
    // to the CPU executor's default tile.
    FusionParams params = options.fusion;
    FusionResult fused;
    while (true) {
      try {
        fused = fuse_program(program, params);
        break;
      } catch (const Error& e) {
        bool capacity = std::string(e.what()).find("on-chip capacity") != std::string::npos;
        if (!capacity || params.grid_tile <= FusionParams{}.grid_tile) throw;
        params.grid_tile /= 2;
      }
    }
    result.kernels = std::move(fused.kernels);
    result.report = fusion_report_text(program, fused);
  }
  // verify the Kernel IR before anything runs it
  verify_kernel_program(result.kernels);
  return result;
}

}  // namespace solder
