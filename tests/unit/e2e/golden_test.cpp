// Golden files of the generated code: `solder emit --cuda --small` and `solder print --after fuse
// --small` for a handful of examples, checked into tests/golden/ and compared byte for byte. A change
// to the code generator or the passes shows up as a diff of whole files (like Triton's lit tests)
// rather than as a substring check. After an intended change, regenerate them with
// scripts/update_golden.sh and review the diff.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../test_util.h"

namespace solder {
namespace {

// The examples whose generated code is pinned, and what is pinned of each.
const char* kGoldenExamples[] = {"ffn", "quant_gemm", "rmsnorm_gemm", "softmax", "vanilla", "llama_decode"};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void expect_golden(const std::string& command, const std::string& golden) {
  const std::string path = std::string(SOLDER_SOURCE_DIR) + "/tests/golden/" + golden;
  std::string output;
  int status = testing::run_command(command + " 2>/dev/null", &output);
  ASSERT_EQ(status, 0) << command << "\n" << output;
  std::string expected = read_file(path);
  ASSERT_FALSE(expected.empty()) << "missing golden file " << path << " (scripts/update_golden.sh writes it)";
  if (output != expected) {
    // The first differing line, for the failure message.
    std::istringstream a(output), b(expected);
    std::string la, lb;
    int line = 0;
    while (true) {
      ++line;
      bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
      if (!ga && !gb) break;
      if (la != lb || ga != gb) {
        ADD_FAILURE() << golden << " differs at line " << line << ":\n  golden: " << lb << "\n  now:    " << la
                      << "\n(regenerate with scripts/update_golden.sh if the change is intended)";
        return;
      }
    }
  }
}

TEST(Golden, GeneratedCudaOfTheSmallExamples) {
  for (const char* name : kGoldenExamples) {
    std::string file = std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol";
    expect_golden(std::string(SOLDER_BINARY) + " emit --cuda --small " + file, std::string(name) + ".cu");
  }
}

// Masked attention streamed over several key tiles (S = 256 at the small sizes' batch and heads, 128-row
// tiles on wgmma): the per-tile skip decision in the generated code (docs/architecture.md, "Tile
// skipping and block order"), from the ids' per-tile min/max (document_mask) and from index expressions
// with the longest-first block order (causal); on the attention skeleton, the key range solved from the
// mask's linear bounds (causal, sliding_window, prefix_lm) and the affine score (alibi); and the skeleton's
// fp8 path (attention_fp8: e4m3 q, k, v, head dim 64 in 64-byte rows).
const char* kGoldenMaskedExamples[] = {"document_mask", "causal", "sliding_window", "prefix_lm", "alibi", "attention_fp8"};

TEST(Golden, GeneratedCudaOfMaskedAttentionOverSeveralTiles) {
  for (const char* name : kGoldenMaskedExamples) {
    std::string file = std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol";
    expect_golden(std::string(SOLDER_BINARY) + " emit --cuda --small --dim S=256 --dim D=64 " + file, std::string(name) + ".s256.cu");
  }
}

// Examples whose generated CUDA is pinned at the default sizes: conv_chain's two convolutions chained in
// one gathered kernel (at the small sizes the chained grid is too narrow and they stay two kernels), and
// diff_attn's two attention kernels as one on the skeleton's dual mode (at the small sizes they are not
// skeleton kernels).
const char* kGoldenDefaultExamples[] = {"conv_chain", "diff_attn"};

TEST(Golden, GeneratedCudaAtDefaultSizes) {
  for (const char* name : kGoldenDefaultExamples) {
    std::string file = std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol";
    expect_golden(std::string(SOLDER_BINARY) + " emit --cuda " + file, std::string(name) + ".default.cu");
  }
}

TEST(Golden, FusedKernelIrOfTheSmallExamples) {
  for (const char* name : kGoldenExamples) {
    std::string file = std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol";
    expect_golden(std::string(SOLDER_BINARY) + " print --after fuse --small " + file, std::string(name) + ".kir");
  }
}

}  // namespace
}  // namespace solder
