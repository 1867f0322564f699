#include "driver/compile.h"

#include "kernel/kernel_verifier.h"
#include "lower/lower_unfused.h"

namespace solder {

CompileResult compile_program(const BoundProgram& program, const CompileOptions& options) {
  CompileResult result;
  // Fusion arrives with the fusion passes; until then every definition is its own kernel.
  result.kernels = lower_unfused(program);
  verify_kernel_program(result.kernels);
  return result;
}

}  // namespace solder
