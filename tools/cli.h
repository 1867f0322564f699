// Command-line plumbing shared by the `solder` commands: option parsing with per-command help,
// loading a program with the size options, and the exit codes.
//
// Exit codes: 0 success, 1 verification failure, 2 bad input or usage, 3 internal error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fusion/group_plan.h"
#include "ir/program.h"
#include "ir/verifier.h"

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
  void apply(FusionParams& params) const;
};
void add_tiling_options(Command& command, TilingOptions& tiling);

// Parses FILE and binds it to the chosen sizes.
BoundProgram load_program(const std::string& path, const SizeChoice& sizes);

// Writes `text` to `path` atomically (a temporary file renamed into place), or to stdout for "-".
void write_output(const std::string& path, const std::string& text);

}  // namespace solder::cli
