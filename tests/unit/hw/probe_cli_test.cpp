// `solder probe` without a GPU: exits 2 with a message that says why (SOLDER_NO_GPU=1 stands in for a machine
// without a driver); --help works anywhere.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace {

struct Result {
  int status;
  std::string output;
};

Result run(const std::string& command) {
  std::string text;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::array<char, 256> buffer;
  while (pipe && fgets(buffer.data(), buffer.size(), pipe)) text += buffer.data();
  int status = pipe ? pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

TEST(ProbeCommand, WithoutAGpuExitsTwoAndSaysWhy) {
  Result r = run(std::string("SOLDER_NO_GPU=1 ") + SOLDER_BINARY + " probe -o /tmp/solder-probe-never-written.json");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("solder probe needs a GPU: "), std::string::npos) << r.output;
  EXPECT_EQ(std::fopen("/tmp/solder-probe-never-written.json", "r"), nullptr);
}

TEST(ProbeCommand, HelpAndRegistration) {
  Result help = run(std::string(SOLDER_BINARY) + " probe --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("usage: solder probe [-o FILE]"), std::string::npos) << help.output;
  Result usage = run(std::string(SOLDER_BINARY) + " --help");
  EXPECT_NE(usage.output.find("probe"), std::string::npos) << usage.output;
  Result extra = run(std::string("SOLDER_NO_GPU=1 ") + SOLDER_BINARY + " probe extra.sol");
  EXPECT_EQ(extra.status, 2) << extra.output;
}

}  // namespace
