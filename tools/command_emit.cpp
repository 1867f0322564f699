// solder emit FILE --cuda [-o OUT] — the generated CUDA C++ of a program.
#include <iostream>
#include <set>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "cli.h"
#include "commands.h"
#include "driver/compile.h"
#include "backend/cuda/tf32_split_writer.h"
#include "fusion/tf32_split.h"
#include "support/json.h"

namespace solder::cli {

namespace {

// `--report`'s line for each kernel that holds no contraction (an element-wise or reduction kernel of
// the generic writer), so that the report lists every launch: linear_relu_backward's g = dy · (z > 0)
// kernel moved more bytes than either GEMM, and a report of the contractions alone left it out.
// A conversion copy before the skeleton (fusion/padded_operands.h, convert_*) says so: its map's comment.
// A 3xTF32 split kernel (fusion/tf32_split.h) names the tile it runs on.
std::string other_kernels_text(const GeneratedModule& module, const KernelProgram& kernels) {
  std::set<std::string> with_contraction;
  for (auto& c : module.contractions) with_contraction.insert(c.kernel);
  std::string text;
  for (auto& k : module.kernels) {
    if (with_contraction.count(k.name) || k.gemm || k.attention) continue;
    std::string what, writer = "generic writer";
    for (auto& ir : kernels.kernels) {
      if (ir.name != k.name) continue;
      if (ir.name.rfind("convert_", 0) == 0 && ir.body.size() == 1)
        if (auto map = ir.body[0].as<MapNode>()) what = ": " + map->comment;
      if (tf32_split_writer_enabled() && tf32_split_kernel_of(kernels, ir))
        writer = "3xTF32 split on gemm/tf32_split.cuh's 32 x 32 tile, static shared memory";
    }
    text += k.name + ": no contraction (" + writer + "), " + std::to_string(k.blocks) + (k.blocks == 1 ? " block" : " blocks") + " of " +
            std::to_string(k.threads) + " threads" + (k.cluster > 1 ? " in clusters of " + std::to_string(k.cluster) : std::string()) + ", " +
            std::to_string(k.shared_bytes) + " bytes of shared memory" + what + "\n";
  }
  return text;
}

}  // namespace

int command_emit(const std::vector<std::string>& args) {
  ProgramOptions options;
  bool cuda = false, no_fuse = false, report = false;
  std::string output = "-";
  Command command{"emit", "solder emit FILE --cuda [-o OUT] [--report | --json] [--no-fuse] [--small] [--dim NAME=VALUE]... [--tile-rows N] [--tile-cols N] [--streaming-elements N] [--no-skeleton]",
                  "Compile a program and write the generated CUDA C++ (one __global__ function per kernel,\n"
                  "named after the program's tensors, one comment per fused stage). The file compiles with\n"
                  "nvcc or NVRTC for sm_90a given the include paths device/ and the CUDA toolkit's.\n"
                  "Each kernel opens with a comment header naming, per contraction, the skeleton that runs it\n"
                  "(sm90 GEMM skeleton, attention wgmma, attention mma.sync, mma.sync or scalar), the tile, the\n"
                  "MMA input type T, the reason when scalar, and the cost model's figures."};
  add_program_options(command, options, false);
  command.options.back().help = "print one JSON object: the program, each contraction's schedule (kernel, contraction,\n"
                                "                        skeleton, tile, type, batch, m, n, k, blocks, steps, scalar, reason, figures) and the source";
  command.options.push_back({"--cuda", "", "emit CUDA C++ (the only target for now)", [&cuda](const std::string&) { cuda = true; }});
  command.options.push_back({"--report", "", "print one line per contraction (its kernel, skeleton, tile, T, M N K, why scalar,\n"
                             "                        cost-model figures), then one per kernel without a contraction (blocks, threads,\n"
                             "                        shared memory), instead of the source", [&report](const std::string&) { report = true; }});
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
  if (options.json) {
    JsonWriter json;
    json.begin_object().key("program").value(kernels.name).key("contractions");
    std::string text = json.str() + contraction_schedule_json(module.contractions);
    JsonWriter rest;
    rest.begin_object().key("source").value(module.source).end_object();
    text += "," + rest.str().substr(1) + "\n";  // the source after the contractions, in the same object
    write_output(output, text);
  } else if (report) {
    write_output(output, contraction_schedule_text(module.contractions) + other_kernels_text(module, kernels));
  } else {
    write_output(output, module.source);
  }
  return kExitOk;
}

}  // namespace solder::cli
