// The `solder` command line as a user meets it (runs build/solder): safe output files, validated
// numbers, exit codes (0 ok, 1 mismatch, 2 bad input or a refused limit, 3 internal error), NaN
// reporting, the tolerance of long f32 chains, the memory estimate and the progress line.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Result {
  int status;
  std::string output;
};

Result run(const std::string& command) {
  std::string text;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::array<char, 512> buffer;
  while (pipe && fgets(buffer.data(), buffer.size(), pipe)) text += buffer.data();
  int status = pipe ? pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

std::string solder() { return std::string("SOLDER_NO_GPU=1 ") + SOLDER_BINARY; }
std::string data(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/tests/data/cli/" + name; }
std::string example(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/examples/" + name; }

struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/solder-cli-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CliOutputFiles, EmitDoesNotFollowASymlinkAtTheOldTemporaryName) {
  TempDir dir;
  { std::ofstream(dir / "victim") << "precious"; }
  fs::create_symlink(dir / "victim", dir / "out.cu.tmp-solder");
  Result r = run(solder() + " emit " + example("softmax.sol") + " --cuda --small -o " + (dir / "out.cu"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read(dir / "victim"), "precious");
  EXPECT_TRUE(contains(read(dir / "out.cu"), "__global__"));
}

TEST(CliOutputFiles, AFifoOrDirectoryAsOutIsRefusedWithExitTwo) {
  TempDir dir;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  for (std::string command : {" print ", " emit "}) {
    std::string extra = command == " emit " ? " --cuda --small" : "";
    Result r = run(solder() + command + example("softmax.sol") + extra + " -o " + (dir / "fifo"));
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "is a FIFO, not a regular file")) << r.output;
    struct stat st;
    ASSERT_EQ(lstat((dir / "fifo").c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
  }
  Result r = run(solder() + " print " + example("softmax.sol") + " -o " + dir.path.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "is a directory")) << r.output;
}

TEST(CliOutputFiles, IoErrorsCarryTheSystemReason) {
  TempDir dir;
  Result r = run(solder() + " print " + example("softmax.sol") + " -o " + (dir / "no/such/dir/out.txt"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "No such file or directory")) << r.output;
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(CliOutputFiles, NothingIsWrittenWhenTheCommandFails) {
  TempDir dir;
  Result r = run(solder() + " emit " + data("grid_beyond_limit.sol") + " --cuda --streaming-elements 16 -o " + (dir / "out.cu"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(CliNumbers, EveryNumberIsValidatedWithExitTwo) {
  const std::string softmax = example("softmax.sol");
  struct Case {
    std::string args, option;
  };
  const Case cases[] = {
      {"bench " + softmax + " --bandwidth abc", "--bandwidth"},
      {"bench " + softmax + " --bandwidth -1", "--bandwidth"},
      {"bench " + softmax + " --bandwidth inf", "--bandwidth"},
      {"bench " + softmax + " --bandwidth 3.0x", "--bandwidth"},
      {"bench " + softmax + " --tensor-rate nan", "--tensor-rate"},
      {"bench " + softmax + " --replays 0", "--replays"},
      {"bench " + softmax + " --replays -1", "--replays"},
      {"bench " + softmax + " --replays 1.5", "--replays"},
      {"bench " + softmax + " --replays 99999999999999999999", "--replays"},
      {"bench " + softmax + " --calls-per-replay 0", "--calls-per-replay"},
      {"bench " + softmax + " --calls-per-replay 2.5", "--calls-per-replay"},
      {"run " + softmax + " --seed x", "--seed"},
      {"run " + softmax + " --seed -1", "--seed"},
      {"run " + softmax + " --dim N=abc", "--dim N="},
      {"run " + softmax + " --dim N=", "--dim N="},
      {"run " + softmax + " --dim N=-3", "--dim N="},
      {"check " + softmax + " --dim N=1e3", "--dim N="},
      {"run " + softmax + " --tile-rows 0", "--tile-rows"},
      {"emit " + softmax + " --cuda --tile-cols abc", "--tile-cols"},
      {"bench " + softmax + " --streaming-elements 99999999999", "--streaming-elements"},
  };
  for (auto& c : cases) {
    Result r = run(solder() + " " + c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.option + " expects")) << c.args << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << c.args << "\n" << r.output;
  }
  Result ok = run(solder() + " check " + softmax + " --dim N=64");
  EXPECT_EQ(ok.status, 0) << ok.output;
}

TEST(CliExitCodes, InternalErrorsExitThreeAndAskForAReport) {
  const std::string softmax = example("softmax.sol");
  const std::pair<std::string, std::string> cases[] = {
      {"compile", "emit " + softmax + " --cuda --small"},
      {"CUDA code generation", "emit " + softmax + " --cuda --small"},
      {"fusion", "fuse " + softmax + " --small"},
      {"compile", "print " + softmax + " --small --after fuse"},
      {"CPU executor", "run " + softmax + " --small --backend cpu"},
      {"float64 reference", "run " + softmax + " --small --backend ref"},
  };
  for (auto& [step, args] : cases) {
    Result r = run("SOLDER_TEST_INTERNAL_ERROR='" + step + "' " + solder() + " " + args);
    EXPECT_EQ(r.status, 3) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "internal error in solder (please report it")) << r.output;
    EXPECT_TRUE(contains(r.output, step + ": ")) << r.output;
  }
  // Bad input stays 2; a clean run is 0.
  EXPECT_EQ(run(solder() + " run /no/such/file.sol").status, 2);
  EXPECT_EQ(run(solder() + " run " + softmax + " --small --backend cpu").status, 0);
}

TEST(CliRun, ReportsNaNsAndInfinitiesEvenWhenTheyMatch) {
  Result r = run(solder() + " run " + data("nan_outputs.sol") + " --backend cpu");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "    NaN in ")) << r.output;
  EXPECT_TRUE(contains(r.output, " of 64 elements, first at [")) << r.output;
  EXPECT_TRUE(contains(r.output, "infinite in 64 of 64 elements (+inf 64, -inf 0), first at [0], [1], [2], [3], ...")) << r.output;
  EXPECT_TRUE(contains(r.output, "NaN in 1 of 1 elements, at []; the reference agrees")) << r.output;
  Result ref = run(solder() + " run " + data("nan_outputs.sol") + " --backend ref");
  EXPECT_TRUE(contains(ref.output, "infinite in 64 of 64 elements")) << ref.output;
  Result json = run(solder() + " run " + data("nan_outputs.sol") + " --backend cpu --json");
  EXPECT_TRUE(contains(json.output, "\"inf_count\":64")) << json.output;
  EXPECT_TRUE(contains(json.output, "\"nan_first\":[\"[")) << json.output;
}

TEST(CliRun, ALongFloat32ChainVerifiesWithItsTolerance) {
  // 1000 additions in f32 (error ~1e-5) pass the length-aware tolerance.
  Result r = run(solder() + " run " + data("false_mismatch_1000_term_sum.sol") + " --backend cpu");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tolerance 3.0e-05  ok")) << r.output;
}

TEST(CliRun, AProgramTooLargeForTheMachineIsRefusedBeforeAllocating) {
  Result r = run(solder() + " run " + data("resource_terabytes.sol") + " --backend cpu");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "needs about 24.00 TB of memory")) << r.output;
  EXPECT_TRUE(contains(r.output, "--small")) << r.output;
  EXPECT_TRUE(contains(r.output, "--backend cuda")) << r.output;
  EXPECT_FALSE(contains(r.output, "bad_alloc")) << r.output;
  Result ref = run(solder() + " run " + data("resource_terabytes.sol") + " --backend ref");
  EXPECT_EQ(ref.status, 2) << ref.output;
  EXPECT_TRUE(contains(ref.output, "float64 reference 16.00 TB")) << ref.output;
  // A machine with 1 KB available refuses even a small program.
  Result tiny = run("SOLDER_AVAILABLE_MEMORY=1000 " + solder() + " run " + example("softmax.sol") + " --small --backend cpu");
  EXPECT_EQ(tiny.status, 2) << tiny.output;
  EXPECT_TRUE(contains(tiny.output, "this machine has 1.0 KB available")) << tiny.output;
  EXPECT_EQ(run(solder() + " run " + data("resource_terabytes.sol") + " --backend cpu --small").status, 0);
}

TEST(CliRun, ALongRunWarnsAndShowsProgressWithAnEta) {
  // vanilla attention with 4 heads of 1024 positions: ~1e9 evaluations, minutes on the executor. Stop
  // it after a few progress lines.
  Result r = run("SOLDER_PROGRESS_SECONDS=0.5 SOLDER_NO_GPU=1 timeout 4 " + std::string(SOLDER_BINARY) + " run " + example("vanilla.sol") +
                 " --backend cpu --dim B=1 --dim H=4");
  EXPECT_EQ(r.status, 124) << r.output;
  EXPECT_TRUE(contains(r.output, "scalar evaluations on ")) << r.output;
  EXPECT_TRUE(contains(r.output, "the CPU executor about ")) << r.output;
  EXPECT_TRUE(contains(r.output, "CPU executor: ")) << r.output;
  EXPECT_TRUE(contains(r.output, " elapsed")) << r.output;
  EXPECT_TRUE(contains(r.output, "kernel 1 of 1: fused_o")) << r.output;
}

TEST(CliEmit, AGridBeyondTheHardwareLimitIsRefused) {
  Result r = run(solder() + " emit " + data("grid_beyond_limit.sol") + " --cuda --streaming-elements 16");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "needs a grid of 68719476736 blocks; the limit is 2^31 - 1")) << r.output;
  EXPECT_FALSE(contains(r.output, "__global__")) << r.output;
}

// --report lists every launch: the contractions, then the kernels without one (linear_relu_backward's
// g = dy · (z > 0), 16 rows of 256 per block on the GPU's tiles: 4096 blocks).
TEST(CliEmit, TheReportListsKernelsWithoutAContraction) {
  Result r = run(solder() + " emit " + example("linear_relu_backward.sol") + " --cuda --report");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dx_kernel dx: sm90 GEMM skeleton")) << r.output;
  EXPECT_TRUE(contains(r.output, "dw_kernel dw: sm90 GEMM skeleton")) << r.output;
  EXPECT_TRUE(contains(r.output, "g_kernel: no contraction (generic writer), 4096 blocks of 256 threads, 0 bytes of shared memory\n"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "__global__")) << r.output;
}

}  // namespace
