// solder print FILE — the canonical text of a program (later stages: --after).
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace solder::cli {

int command_print(const std::vector<std::string>& args) {
  ProgramOptions options;
  std::string after = "parse";
  std::string output = "-";
  Command command{"print", "solder print FILE [--after STAGE] [-o OUT] [--small] [--dim NAME=VALUE]...",
                  "Print a program in canonical form (docs/language.md). The program is verified first,\n"
                  "at the chosen sizes."};
  add_program_options(command, options, false);
  command.options.pop_back();  // no --json for print
  command.options.push_back({"--after", "STAGE", "the stage whose IR to print: parse (default)",
                             [&after](const std::string& v) { after = v; }});
  command.options.push_back({"-o", "OUT", "write to OUT instead of standard output",
                             [&output](const std::string& v) { output = v; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  BoundProgram program = load_program(files[0], options.sizes);
  if (after == "parse") {
    write_output(output, print_program(*program.program));
    return kExitOk;
  }
  throw Error("--after expects one of: parse; found '" + after + "'");
}

}  // namespace solder::cli
