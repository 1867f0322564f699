#include "driver/compile.h"

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
    // fuse: inline pointwise definitions, group, decompose cascades, lower each group
    FusionResult fused = fuse_program(program, options.fusion);
    result.kernels = std::move(fused.kernels);
    result.report = fusion_report_text(program, fused);
  }
  // verify the Kernel IR before anything runs it
  verify_kernel_program(result.kernels);
  return result;
}

}  // namespace solder
