// solder fuse FILE — the fusion report: the kernels, which definitions each holds, which reductions
// became online (with G, H and the update), and every fusion refused with the rule that refused it.
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "contract/contract_pass.h"
#include "driver/compile.h"
#include "fusion/fuse.h"
#include "fusion/padded_operands.h"
#include "fusion/row_epilogue.h"

namespace solder::cli {

int command_fuse(const std::vector<std::string>& args) {
  ProgramOptions options;
  bool gpu = false;
  Command command{"fuse", "solder fuse FILE [--small] [--dim NAME=VALUE]... [--json] [--gpu]",
                  "Fuse a program and report what happened: for each kernel, the definitions it holds, its\n"
                  "grid, streamed, held-whole and inner-loop dims, each reduction's phase, the online form of\n"
                  "every cascaded reduction (G, H, the update formula and how it was confirmed), and every\n"
                  "fusion that was refused with the rule that refused it; then every contraction in canonical\n"
                  "form (operands, scale, bias, the MMA input type T and why) or the rule that kept it a reduce.\n"
                  "With --gpu, the CUDA backend's plan: its tiles, and the contractions that run whole on the\n"
                  "sm_90a GEMM skeleton (each with the figures of the rule that chose it)."};
  add_program_options(command, options, false);
  command.options.push_back({"--gpu", "", "fuse as the CUDA backend does (GPU tiles, whole contractions)", [&gpu](const std::string&) { gpu = true; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  BoundProgram program = load_program(files[0], options.sizes);
  FusionResult result = compiler_step("fusion", [&] { return gpu ? fuse_for(program, CompileOptions::for_gpu()) : fuse_program(program); });
  ContractPassResult contracts = compiler_step("contractions", [&] { return canonicalize_contractions(result.kernels); });
  std::cout << (options.json ? fusion_report_json(program, result, &contracts) + "\n" : fusion_report_text(program, result, &contracts));
  if (gpu && !options.json) {
    // Row epilogues (fusion/row_epilogue.h): which products the rule would reduce in the GEMM epilogue.
    RowEpilogueFusion rows = fuse_row_epilogues(contracts.program);
    if (!rows.notes.empty()) {
      std::cout << "\nrow epilogues (fusion/row_epilogue.h; SOLDER_ROW_EPILOGUE=1 takes them):\n";
      for (auto& note : rows.notes) std::cout << "  " << note << "\n";
    }
    // Padded operands (fusion/padded_operands.h): which products run on the skeleton after a copy of A.
    PaddedOperands padded = pad_gathered_operands(rows.program);
    if (!padded.notes.empty()) {
      std::cout << "\npadded operands (fusion/padded_operands.h; SOLDER_PADDED_OPERANDS=0 turns them off):\n";
      for (auto& note : padded.notes) std::cout << "  " << note << "\n";
    }
  }
  return kExitOk;
}

}  // namespace solder::cli
