// Readable text of the Kernel IR (`solder print --after lower|fuse FILE`), in the spirit of
// RedFuser Figure 12b: one line per statement, nested bodies indented. It is for people; nothing
// parses it back.
#pragma once

#include <string>

#include "kernel/kernel_ir.h"

namespace solder {

std::string print_kernel_program(const KernelProgram& program);
std::string print_kernel(const Kernel& kernel);
std::string print_stmt(const Stmt& stmt, int indent = 0);

}  // namespace solder
