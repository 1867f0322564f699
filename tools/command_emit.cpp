// solder emit FILE --cuda [-o OUT] — the generated CUDA C++ of a program.
#include <iostream>

#include "backend/cuda/cuda_codegen.h"
#include "cli.h"
#include "commands.h"
#include "driver/compile.h"

namespace solder::cli {

int command_emit(const std::vector<std::string>& args) {
  ProgramOptions options;
  bool cuda = false, no_fuse = false;
  std::string output = "-";
  Command command{"emit", "solder emit FILE --cuda [-o OUT] [--no-fuse] [--small] [--dim NAME=VALUE]... [--tile-rows N] [--tile-cols N] [--streaming-elements N] [--no-skeleton]",
                  "Compile a program and write the generated CUDA C++ (one __global__ function per kernel,\n"
                  "named after the program's tensors, one comment per fused stage). The file compiles with\n"
                  "nvcc or NVRTC for sm_90a given the include paths device/ and the CUDA toolkit's."};
  add_program_options(command, options, false);
  command.options.pop_back();  // no --json
  command.options.push_back({"--cuda", "", "emit CUDA C++ (the only target for now)", [&cuda](const std::string&) { cuda = true; }});
  command.options.push_back({"--no-fuse", "", "emit the unfused lowering", [&no_fuse](const std::string&) { no_fuse = true; }});
  command.options.push_back({"-o", "OUT", "write to OUT (atomically) instead of standard output", [&output](const std::string& v) { output = v; }});
  std::vector<std::string> files;
  TilingOptions tiling;
  add_tiling_options(command, tiling);
  if (!parse_arguments(command, args, files)) return kExitOk;
  if (!cuda) throw Error("solder emit needs a target: --cuda");
  BoundProgram program = load_program(files[0], options.sizes);
  CompileOptions compile_options = CompileOptions::for_gpu(!no_fuse);
  tiling.apply(compile_options);
  KernelProgram kernels = compiler_step("compile", [&] { return compile_program(program, compile_options).kernels; });
  GeneratedModule module = compiler_step("CUDA code generation", [&] { return generate_cuda(kernels); });
  write_output(output, module.source);
  return kExitOk;
}

}  // namespace solder::cli
