// solder print FILE — the canonical text of a program (later stages: --after).
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "ir/parser.h"
#include "driver/compile.h"
#include "ir/printer.h"
#include "kernel/kernel_printer.h"
#include "lower/lower_unfused.h"

namespace solder::cli {

int command_print(const std::vector<std::string>& args) {
  ProgramOptions options;
  std::string after = "parse";
  bool gpu = false;
  std::string output = "-";
  Command command{"print", "solder print FILE [--after STAGE] [-o OUT] [--small] [--dim NAME=VALUE]...",
                  "Print a program in canonical form (docs/language.md). The program is verified first,\n"
                  "at the chosen sizes."};
  add_program_options(command, options, false);
  command.options.pop_back();  // no --json for print
  command.options.push_back({"--after", "STAGE", "the stage whose IR to print: parse (the canonical program text, default),\n"
                             "                        lower (the unfused Kernel IR), fuse (the compiled Kernel IR)",
                             [&after](const std::string& v) { after = v; }});
  command.options.push_back({"--gpu", "", "with --after fuse: the tiles chosen for the CUDA backend (default: the CPU executor's)",
                             [&gpu](const std::string&) { gpu = true; }});
  command.options.push_back({"-o", "OUT", "write to OUT instead of standard output",
                             [&output](const std::string& v) { output = v; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  BoundProgram program = load_program(files[0], options.sizes);
  if (after == "parse") {
    write_output(output, print_program(*program.program));
    return kExitOk;
  }
  if (after == "lower") {
    write_output(output, print_kernel_program(compiler_step("unfused lowering", [&] { return lower_unfused(program); })));
    return kExitOk;
  }
  if (after == "fuse") {
    KernelProgram kernels = compiler_step("compile", [&] { return compile_program(program, gpu ? CompileOptions::for_gpu() : CompileOptions{}).kernels; });
    write_output(output, print_kernel_program(kernels));
    return kExitOk;
  }
  throw Error("--after expects one of: parse, lower, fuse; found '" + after + "'");
}

}  // namespace solder::cli
