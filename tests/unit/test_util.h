// Helpers shared by the unit tests.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/host_tensor.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace solder::testing {

// Sets an environment variable for one scope (a knob under test) and unsets it after.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) { setenv(name.c_str(), value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

inline BoundProgram bind_text(const std::string& text, bool small = false,
                              std::vector<std::pair<std::string, int64_t>> overrides = {}) {
  auto program = std::make_shared<Program>(parse_program(text, "test.sol"));
  return bind_program(program, SizeChoice{small, std::move(overrides)});
}

// Every example program shipped in examples/.
inline std::vector<std::string> example_files() {
  std::vector<std::string> files;
  for (auto& entry : std::filesystem::directory_iterator(std::string(SOLDER_SOURCE_DIR) + "/examples"))
    if (entry.path().extension() == ".sol") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Runs a shell command; returns its exit status and captures stdout+stderr.
int run_command(const std::string& command, std::string* output);

}  // namespace solder::testing
