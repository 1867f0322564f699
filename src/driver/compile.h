// The compile driver: one readable function from a bound Program to a KernelProgram.
//
//   Program ──verify/bind──► BoundProgram ──choose skeletons──► ──fuse (inline, group, tiles, lower)──►
//           KernelProgram ──canonicalize contractions──► ──verify──► backend (──schedule──► CUDA)
//
// With fuse off, the unfused lowering gives one kernel per definition instead.
//
// The steps, in order (compile_steps()): each has one entry point and a dump, `solder print --after
// STEP` (print_after in tools/command_print.cpp), and a golden file of that dump for a few examples
// (tests/golden, tests/unit/driver/steps_test.cpp).
//
//   parse      parse_program + bind_program    the canonical program text
//   lower      lower_unfused                   the unfused Kernel IR (one kernel per definition)
//   skeletons  choose_skeletons                which contractions run whole on the sm_90a GEMM skeleton,
//                                              with the figures of the rule (GPU only)
//   tiles      fuse_for                        each fused kernel's dims: role, extent, tile; the stream,
//                                              its segments, the blocks (GPU tiles with --gpu)
//   fuse       compile_program                 the compiled Kernel IR, contractions as `contract`s
//   schedule   generate_cuda                   per contraction: the skeleton (sm90 GEMM skeleton, attention
//                                              wgmma or mma.sync, mma.sync, scalar), tile and pipelining
//                                              (stages), T, the reason when scalar, the cost model's
//                                              figures; per kernel its launch and shared memory (GPU only)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/fusion_params.h"
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

enum class CompileStep { parse, lower, skeletons, tiles, fuse, schedule };
struct CompileStepInfo {
  CompileStep step;
  std::string_view name;         // as `--after` spells it
  std::string_view entry_point;
  std::string_view dump;         // what `solder print --after STEP` prints
  bool gpu_only = false;         // a decision of the CUDA backend: always with its options
};
const std::vector<CompileStepInfo>& compile_steps();
std::optional<CompileStep> compile_step_named(std::string_view name);
// "parse, lower, skeletons, tiles, fuse, schedule"
std::string compile_step_names();

// Step skeletons: the contractions that run whole, one launch each (the sm_90a GEMM skeleton or the GEMV stream)
// (plan_whole_contractions), when options.gemm_skeleton; nothing otherwise.
WholeContractionPlan choose_skeletons(const BoundProgram& program, const CompileOptions& options);
// Its dump: the rule's figures per contraction the skeleton takes, whole or fused.
std::string skeletons_text(const BoundProgram& program, const WholeContractionPlan& plan);

// Steps tiles and fuse (options.fuse): fuse_program around the whole contractions of `whole`, retried
// at half the row tile while a definition is over the on-chip budget (OnChipCapacityError).
FusionResult fuse_for(const BoundProgram& program, const CompileOptions& options, const WholeContractionPlan& whole);
FusionResult fuse_for(const BoundProgram& program, const CompileOptions& options);  // choose_skeletons first
// The tiles step's dump: per kernel, its dims (role, extent, tile), stream and segments, and blocks.
std::string tiles_text(const FusionResult& fused);

}  // namespace solder
