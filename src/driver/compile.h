// The compile driver: one readable function from a bound Program to a KernelProgram.
//
//   Program ──verify/bind──► (BoundProgram) ──fuse──► groups ──lower──► KernelProgram ──verify──►
//
// Each step is a named pass; `dump_after` names a pass whose output is kept in the result for
// printing (`solder print --after STAGE`).
#pragma once

#include <string>

#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct CompileOptions {
  bool fuse = true;        // false: the unfused lowering, one kernel per definition
};

struct CompileResult {
  KernelProgram kernels;
  std::string report;      // what the passes decided, for people
};

CompileResult compile_program(const BoundProgram& program, const CompileOptions& options);

}  // namespace solder
