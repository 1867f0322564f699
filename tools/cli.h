// Command-line plumbing shared by the `solder` commands: option parsing with per-command help,
// loading a program with the size options, and the exit codes.
//
// Exit codes: 0 success, 1 verification failure, 2 bad input or usage, 3 internal error.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "driver/compile.h"
#include "fusion/group_plan.h"
#include "ir/program.h"
#include "ir/verifier.h"
#include "support/refusal.h"

namespace solder::cli {

constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;  // a bug in Solder, never the user's input

struct Option {
  std::string name;        // "--dim"
  std::string value_name;  // "NAME=VALUE"; empty for flags
  std::string help;
  std::function<void(const std::string&)> apply;  // value ("" for flags)
};

struct Command {
  std::string name;
  std::string synopsis;     // "solder check FILE [options]"
  std::string description;  // a paragraph
  std::vector<Option> options;
  int min_files = 1, max_files = 1;
};

// Parses argv for `command`; returns false after printing help (--help). Throws Error on bad usage.
bool parse_arguments(const Command& command, const std::vector<std::string>& args, std::vector<std::string>& files);
std::string help_text(const Command& command);

// Options every command that takes a program shares.
struct ProgramOptions {
  SizeChoice sizes;
  uint64_t seed = 1;
  bool json = false;
};
void add_program_options(Command& command, ProgramOptions& options, bool with_seed);

// Tile choices that override the planner's GPU defaults (bench and run, so a timed choice can be
// verified with the same tiles). Unset fields keep the defaults.
struct TilingOptions {
  int64_t grid_tile = 0;           // --tile-rows
  int64_t stream_tile = 0;         // --tile-cols
  int64_t streaming_elements = 0;  // --streaming-elements
  bool no_skeleton = false;        // --no-skeleton
  void apply(FusionParams& params) const;
  void apply(CompileOptions& options) const;  // the tiles, and --no-skeleton
};
void add_tiling_options(Command& command, TilingOptions& tiling);

// A bug in Solder found while compiling or running a program that verified: `solder` prints it with
// "please report" and exits 3 (solder_main.cpp).
class InternalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs one step of the compiler or a backend on a verified program. A solder::Error thrown from it is
// rethrown as InternalError naming the step, except a Refusal (a hardware or machine limit: exit 2).
// $SOLDER_TEST_INTERNAL_ERROR=STEP makes that step fail (the tests of the exit codes).
template <class F>
decltype(auto) compiler_step(const char* step, F&& f) {
  try {
    if (const char* inject = std::getenv("SOLDER_TEST_INTERNAL_ERROR"); inject && std::string_view(inject) == step)
      throw Error("an internal error injected by SOLDER_TEST_INTERNAL_ERROR");
    return f();
  } catch (const Refusal&) {
    throw;
  } catch (const Error& e) {
    std::string what = e.file().empty() && !e.loc().known() ? e.message() : e.formatted();
    throw InternalError(what.rfind(step, 0) == 0 ? what : std::string(step) + ": " + what);
  }
}

// Strict number parsing for options: the whole text must be a number in [min, max], otherwise
// Error("OPTION expects WHAT, found 'TEXT'") (exit 2).
int64_t parse_integer_option(const std::string& text, const std::string& option, int64_t min, int64_t max);
double parse_real_option(const std::string& text, const std::string& option, double min, double max);

// Parses FILE and binds it to the chosen sizes.
BoundProgram load_program(const std::string& path, const SizeChoice& sizes);

// Writes `text` to `path` through write_file_atomically (support/atomic_file.h: a fresh temporary
// file renamed into place; a target that is not a regular file is refused), or to stdout for "-".
// Throws Error with the system's reason on failure.
void write_output(const std::string& path, const std::string& text);

}  // namespace solder::cli
