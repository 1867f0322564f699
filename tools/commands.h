// The `solder` commands; each takes the arguments after its name and returns the exit code.
#pragma once

#include <string>
#include <vector>

namespace solder::cli {

int command_check(const std::vector<std::string>& args);
int command_print(const std::vector<std::string>& args);
int command_run(const std::vector<std::string>& args);
int command_fuse(const std::vector<std::string>& args);
int command_emit(const std::vector<std::string>& args);
int command_bench(const std::vector<std::string>& args);
int command_probe(const std::vector<std::string>& args);
int command_plan(const std::vector<std::string>& args);

}  // namespace solder::cli
