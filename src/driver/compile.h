// The compile driver: one readable function from a bound Program to a KernelProgram.
//
//   Program ──verify/bind──► BoundProgram ──fuse (inline, group, decompose, lower)──► KernelProgram
//           ──canonicalize contractions──► ──verify──► backend
//
// With fuse off, the unfused lowering gives one kernel per definition instead.
#pragma once

#include <string>

#include "fusion/fuse.h"
#include "fusion/group_plan.h"
#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct CompileOptions {
  bool fuse = true;        // false: the unfused lowering, one kernel per definition
  FusionParams fusion;     // tile sizes and budgets of the fusion passes
  bool contractions = true;  // canonicalize matrix products into `contract` statements
  // Contractions the sm_90a GEMM skeleton takes run whole, one launch each: unfused, every one; fused,
  // those that the rule of fusion/whole_contractions.h picks (long K: a GEMM, not attention's scores).
  bool gemm_skeleton = false;

  // The options for the CUDA backend (gpu_fusion_params); the defaults suit the CPU executor.
  static CompileOptions for_gpu(bool fuse = true) {
    CompileOptions options;
    options.fuse = fuse;
    options.fusion = gpu_fusion_params();
    options.gemm_skeleton = true;
    return options;
  }
};

struct CompileResult {
  KernelProgram kernels;
  std::string report;      // what the passes decided, for people
};

CompileResult compile_program(const BoundProgram& program, const CompileOptions& options);

// The fusion step of compile_program (options.fuse): the whole contractions when
// options.gemm_skeleton, then fuse_program, retried at half the row tile while a definition is over
// the on-chip budget.
FusionResult fuse_for(const BoundProgram& program, const CompileOptions& options);

}  // namespace solder
