#include "cli.h"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "ir/parser.h"
#include "support/atomic_file.h"

namespace solder::cli {

std::string help_text(const Command& command) {
  std::string text = "usage: " + command.synopsis + "\n\n" + command.description + "\n";
  if (!command.options.empty()) {
    text += "\noptions:\n";
    for (auto& o : command.options) {
      std::string left = "  " + o.name + (o.value_name.empty() ? "" : " " + o.value_name);
      if (left.size() < 24) left.resize(24, ' ');
      else left += "\n" + std::string(24, ' ');
      text += left + o.help + "\n";
    }
  }
  text += "  --help                print this help\n";
  return text;
}

bool parse_arguments(const Command& command, const std::vector<std::string>& args, std::vector<std::string>& files) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << help_text(command);
      return false;
    }
    if (a.size() > 1 && a[0] == '-' && a != "-") {
      std::string name = a, value;
      bool inline_value = false;
      if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
      const Option* option = nullptr;
      for (auto& o : command.options) if (o.name == name) option = &o;
      if (!option)
        throw Error("unknown option '" + a + "' for 'solder " + command.name + "' (see 'solder " + command.name + " --help')");
      if (option->value_name.empty()) {
        if (inline_value) throw Error("option '" + name + "' takes no value, found '" + value + "'");
      } else if (!inline_value) {
        if (i + 1 >= args.size()) throw Error("option '" + name + "' expects " + option->value_name + ", found the end of the command line");
        value = args[++i];
      }
      option->apply(value);
      continue;
    }
    files.push_back(a);
  }
  if (static_cast<int>(files.size()) < command.min_files)
    throw Error("'solder " + command.name + "' expects a program file (usage: " + command.synopsis + ")");
  if (static_cast<int>(files.size()) > command.max_files)
    throw Error("'solder " + command.name + "' takes " + std::to_string(command.max_files) + " file(s), found " +
                std::to_string(files.size()) + ": " + files.back());
  return true;
}

int64_t parse_integer_option(const std::string& text, const std::string& option, int64_t min, int64_t max) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string range = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (text.empty() || error == std::errc::invalid_argument || end != text.data() + text.size())
    throw Error(option + " expects " + range + ", found '" + text + "'");
  if (error == std::errc::result_out_of_range || value < min || value > max)
    throw Error(option + " expects " + range + ", found " + text + " (out of range)");
  return value;
}

double parse_real_option(const std::string& text, const std::string& option, double min, double max) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  char range[128];
  std::snprintf(range, sizeof range, "a number from %g to %g", min, max);
  if (text.empty() || error == std::errc::invalid_argument || end != text.data() + text.size())
    throw Error(option + " expects " + range + ", found '" + text + "'");
  if (error == std::errc::result_out_of_range || !std::isfinite(value) || value < min || value > max)
    throw Error(option + " expects " + std::string(range) + ", found " + text + " (out of range)");
  return value;
}

namespace {
// The largest dim a --dim override may ask for; the verifier checks products of dims.
constexpr int64_t kMaxDimOption = int64_t(1) << 62;
// Tiles beyond a million elements fit no GPU's on-chip memory.
constexpr int64_t kMaxTileOption = int64_t(1) << 20;
}  // namespace

void add_program_options(Command& command, ProgramOptions& options, bool with_seed) {
  command.options.push_back({"--small", "", "use the program's small size set (tests, CPU runs)",
                             [&options](const std::string&) { options.sizes.small = true; }});
  command.options.push_back({"--dim", "NAME=VALUE", "override a dim's size (repeatable)", [&options](const std::string& v) {
                               auto eq = v.find('=');
                               if (eq == std::string::npos || eq == 0)
                                 throw Error("--dim expects NAME=VALUE, found '" + v + "'");
                               options.sizes.overrides.emplace_back(
                                   v.substr(0, eq), parse_integer_option(v.substr(eq + 1), "--dim " + v.substr(0, eq) + "=", 1, kMaxDimOption));
                             }});
  if (with_seed)
    command.options.push_back({"--seed", "S", "seed of the random inputs (default 1)", [&options](const std::string& v) {
                                 options.seed = static_cast<uint64_t>(parse_integer_option(v, "--seed", 0, INT64_MAX));
                               }});
  command.options.push_back({"--json", "", "print one JSON object instead of text",
                             [&options](const std::string&) { options.json = true; }});
}

void TilingOptions::apply(FusionParams& params) const {
  if (grid_tile > 0) params.grid_tile = grid_tile;
  if (stream_tile > 0) params.stream_tile = stream_tile;
  if (streaming_elements > 0) params.streaming_tile_elements = streaming_elements;
}

void TilingOptions::apply(CompileOptions& options) const {
  apply(options.fusion);
  if (no_skeleton) options.gemm_skeleton = false;
}

void add_tiling_options(Command& command, TilingOptions& tiling) {
  auto positive = [](const std::string& v, const std::string& option) { return parse_integer_option(v, option, 1, kMaxTileOption); };
  command.options.push_back({"--tile-rows", "N", "rows of the innermost grid dim per block (GPU default 128)",
                             [&tiling, positive](const std::string& v) { tiling.grid_tile = positive(v, "--tile-rows"); }});
  command.options.push_back({"--tile-cols", "N", "elements of the streamed dim per step, kernels with a contraction (GPU default 64)",
                             [&tiling, positive](const std::string& v) { tiling.stream_tile = positive(v, "--tile-cols"); }});
  command.options.push_back({"--streaming-elements", "N",
                             "elements staged per block and step, kernels without a contraction (GPU default 4096)",
                             [&tiling, positive](const std::string& v) { tiling.streaming_elements = positive(v, "--streaming-elements"); }});
  command.options.push_back({"--no-skeleton", "",
                             "GPU: no contraction runs whole on the sm_90a GEMM skeleton (by default those the rule in\n"
                             "docs/gemm-skeleton.md picks do, and with --no-fuse every one it takes)",
                             [&tiling](const std::string&) { tiling.no_skeleton = true; }});
}

BoundProgram load_program(const std::string& path, const SizeChoice& sizes) {
  auto program = std::make_shared<Program>(parse_program_file(path));
  return bind_program(program, sizes);
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-" || path.empty()) {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) throw Error("cannot write the output to standard output: " + std::string(std::strerror(errno)));
    return;
  }
  write_file_atomically_or_throw(path, text);
}

}  // namespace solder::cli
