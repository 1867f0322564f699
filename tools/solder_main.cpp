// The `solder` command-line program: dispatches to one command per subcommand (commands.h).
#include <cstdio>
#include <iostream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "ir/diagnostics.h"
#include "runtime/runtime.h"

namespace {

struct Entry {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* summary;
};

const Entry kCommands[] = {
    {"check", solder::cli::command_check, "parse and verify a program; print its definitions"},
    {"print", solder::cli::command_print, "print a program's canonical text"},
    {"fuse", solder::cli::command_fuse, "fuse a program and report the kernels, online forms and refusals"},
    {"emit", solder::cli::command_emit, "write the generated CUDA C++ of a program"},
    {"bench", solder::cli::command_bench, "time a compiled program on the GPU (CUDA-graph replays) against its floor"},
    {"run", solder::cli::command_run, "run a program on random inputs and verify it against the reference"},
    {"probe", solder::cli::command_probe, "measure the GPU's DSM table and the cost model's rates as JSON"},
    {"plan", solder::cli::command_plan, "choose GEMM tiles with the cost model; list candidates, pruning and the choice"},
};

void print_usage(std::FILE* to) {
  std::fprintf(to, "usage: solder COMMAND FILE [options]\n\nSolder compiles tensor programs (.sol) into fused GPU kernels.\n\ncommands:\n");
  for (auto& c : kCommands) std::fprintf(to, "  %-8s %s\n", c.name, c.summary);
  std::fprintf(to, "\n'solder COMMAND --help' describes a command's options. Exit status: 0 success,\n"
                   "1 verification failure, 2 bad input or usage, 3 internal error.\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(stderr);
    return solder::cli::kExitBadInput;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(stdout);
    return solder::cli::kExitOk;
  }
  // The command forks safely while it compiles: a program of several kernels compiles them in child
  // processes at once, one per hardware thread ($SOLDER_COMPILE_JOBS overrides; docs/runtime.md).
  solder::runtime::set_default_compile_jobs(static_cast<int>(std::thread::hardware_concurrency()));
  for (auto& c : kCommands) {
    if (args[0] != c.name) continue;
    try {
      return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
    } catch (const solder::cli::InternalError& e) {
      std::cout.flush();
      std::fprintf(stderr, "error: internal error in solder (please report it, with the program and the command): %s\n", e.what());
      return solder::cli::kExitInternal;
    } catch (const solder::Error& e) {  // the user's input, options or machine (a Refusal included)
      std::cout.flush();
      std::fprintf(stderr, "%s\n", e.formatted().c_str());
      return solder::cli::kExitBadInput;
    } catch (const std::bad_alloc&) {
      std::cout.flush();
      std::fprintf(stderr, "error: internal error in solder (please report it): out of memory, which the estimate made before "
                           "running did not foresee\n");
      return solder::cli::kExitInternal;
    } catch (const std::exception& e) {
      std::cout.flush();
      std::fprintf(stderr, "error: internal error in solder (please report it, with the program and the command): %s\n", e.what());
      return solder::cli::kExitInternal;
    } catch (...) {
      std::cout.flush();
      std::fprintf(stderr, "error: internal error in solder (please report it, with the program and the command): an unknown exception\n");
      return solder::cli::kExitInternal;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", args[0].c_str());
  print_usage(stderr);
  return solder::cli::kExitBadInput;
}
