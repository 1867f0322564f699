// solder print FILE — the canonical text of a program, or the dump after a step of the compile
// (--after STEP: the steps of src/driver/compile.h, compile_steps()).
#include <iostream>
#include <sstream>

#include "backend/cuda/cuda_codegen.h"
#include "cli.h"
#include "commands.h"
#include "ir/parser.h"
#include "driver/compile.h"
#include "ir/printer.h"
#include "kernel/kernel_printer.h"
#include "lower/lower_unfused.h"

namespace solder::cli {
namespace {

// The schedule step's dump: each kernel's launch, then each contraction's schedule.
std::string schedule_text(const GeneratedModule& module) {
  std::ostringstream out;
  for (auto& k : module.kernels) {
    out << "kernel " << k.name << ": " << k.blocks << " block(s) x " << k.threads << " threads";
    if (k.cluster > 1) out << ", clusters of " << k.cluster;
    out << ", " << k.shared_bytes << " bytes of shared memory";
    if (k.gemm) out << ", " << k.gemm->config;
    out << "\n";
  }
  out << contraction_schedule_text(module.contractions);
  return out.str();
}

std::string steps_help() {
  std::string help = "the step after which to print (src/driver/compile.h):";
  for (auto& s : compile_steps())
    help += "\n                          " + std::string(s.name) + std::string(12 - s.name.size(), ' ') + std::string(s.dump) +
            (s.gpu_only ? " (the CUDA backend's)" : "");
  return help;
}

}  // namespace

int command_print(const std::vector<std::string>& args) {
  ProgramOptions options;
  std::string after = "parse";
  bool gpu = false;
  std::string output = "-";
  Command command{"print", "solder print FILE [--after STEP] [--gpu] [-o OUT] [--small] [--dim NAME=VALUE]...",
                  "Print a program in canonical form (docs/language.md), or what a step of the compile\n"
                  "produced or decided (--after STEP). The program is verified first, at the chosen sizes."};
  add_program_options(command, options, false);
  command.options.pop_back();  // no --json for print
  command.options.push_back({"--after", "STEP", steps_help(), [&after](const std::string& v) { after = v; }});
  command.options.push_back({"--gpu", "", "with --after tiles or fuse: the tiles chosen for the CUDA backend, around the\n"
                             "                        contractions it runs whole (default: the CPU executor's)",
                             [&gpu](const std::string&) { gpu = true; }});
  command.options.push_back({"-o", "OUT", "write to OUT instead of standard output",
                             [&output](const std::string& v) { output = v; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  std::optional<CompileStep> step = compile_step_named(after);
  if (!step) throw Error("--after expects one of: " + compile_step_names() + "; found '" + after + "'");
  BoundProgram program = load_program(files[0], options.sizes);
  const CompileOptions compile_options = gpu ? CompileOptions::for_gpu() : CompileOptions{};
  switch (*step) {
    case CompileStep::parse:
      write_output(output, print_program(*program.program));
      break;
    case CompileStep::lower:
      write_output(output, print_kernel_program(compiler_step("unfused lowering", [&] { return lower_unfused(program); })));
      break;
    case CompileStep::skeletons: {
      WholeContractionPlan whole = compiler_step("skeletons", [&] { return choose_skeletons(program, CompileOptions::for_gpu()); });
      write_output(output, skeletons_text(program, whole));
      break;
    }
    case CompileStep::tiles: {
      FusionResult fused = compiler_step("fusion", [&] { return fuse_for(program, compile_options); });
      write_output(output, tiles_text(fused));
      break;
    }
    case CompileStep::fuse:
      write_output(output, print_kernel_program(compiler_step("compile", [&] { return compile_program(program, compile_options).kernels; })));
      break;
    case CompileStep::schedule: {
      KernelProgram kernels = compiler_step("compile", [&] { return compile_program(program, CompileOptions::for_gpu()).kernels; });
      GeneratedModule module = compiler_step("CUDA code generation", [&] { return generate_cuda(kernels); });
      write_output(output, schedule_text(module));
      break;
    }
  }
  return kExitOk;
}

}  // namespace solder::cli
