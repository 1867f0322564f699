// Fuzzing the front end: hundreds of mutated example files must each either parse and verify, or
// fail with a solder::Error (exit code 2 on the command line) — never crash, hang or throw
// anything else.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "../test_util.h"

namespace solder {
namespace {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : state_(seed * 2654435761u + 1) {}
  uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }
  size_t below(size_t n) { return n == 0 ? 0 : next() % n; }

  std::string mutate(const std::string& text) {
    std::string s = text;
    static const char* kFragments[] = {"(", ")", "[", "]", ",", ":", "=", "-", "*", "//", "%", "<=", "&&", "!", "~",
                                       "sum(", "max(", "topk(", "select(", "cast(", "inf", "0", "-1", "1e99", "2.5",
                                       "out ", "in ", "dim ", "small ", "i", "j", "\n", " ", "#", "f8e4m3", "bool", "i32"};
    int edits = 1 + static_cast<int>(below(3));
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = below(s.size());
      switch (below(6)) {
        case 0: s.erase(at, 1 + below(4)); break;
        case 1: s.insert(at, kFragments[below(std::size(kFragments))]); break;
        case 2: s[at] = static_cast<char>(32 + below(95)); break;
        case 3: {  // duplicate a line
          size_t start = s.rfind('\n', at);
          start = start == std::string::npos ? 0 : start + 1;
          size_t end = s.find('\n', at);
          if (end == std::string::npos) end = s.size();
          s.insert(start, s.substr(start, end - start) + "\n");
          break;
        }
        case 4: s.resize(at); break;  // truncate
        case 5: {  // swap two characters
          size_t other = below(s.size());
          std::swap(s[at], s[other]);
          break;
        }
      }
    }
    return s;
  }

 private:
  uint64_t state_;
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Corpus: the examples, or a built-in program when none are present yet.
std::vector<std::string> corpus() {
  std::vector<std::string> texts;
  for (auto& f : testing::example_files()) texts.push_back(read(f));
  texts.push_back(
      "program attn\ndim B = 1, H = 2, S = 16, D = 8\nsmall S = 8\nin q[B,H,S,D] : bf16\nin k[B,H,S,D] : bf16\n"
      "in v[B,H,S,D] : bf16\ns[b,h,i,j] = sum(d) q[b,h,i,d] * k[b,h,j,d] * rsqrt(D)\n"
      "sm[b,h,i,j] = select(j <= i, s[b,h,i,j], -inf)\nm[b,h,i] = max(j) sm[b,h,i,j]\n"
      "e[b,h,i,j] = exp(sm[b,h,i,j] - m[b,h,i])\nz[b,h,i] = sum(j) e[b,h,i,j]\n"
      "out o[b,h,i,d] : bf16 = sum(j) e[b,h,i,j] / z[b,h,i] * v[b,h,j,d]\n");
  return texts;
}

TEST(Fuzz, MutatedProgramsParseOrFailWithAnError) {
  auto texts = corpus();
  int parsed = 0, rejected = 0;
  const int kMutations = 1200;
  for (int n = 0; n < kMutations; ++n) {
    Mutator m(static_cast<uint64_t>(n));
    const std::string& base = texts[static_cast<size_t>(n) % texts.size()];
    std::string text = m.mutate(base);
    try {
      auto program = std::make_shared<Program>(parse_program(text, "fuzz.sol"));
      // Round trip must hold for whatever parses.
      std::string once = print_program(*program);
      EXPECT_EQ(once, print_program(parse_program(once, "fuzz.sol"))) << text;
      auto bound = bind_program(program, SizeChoice{true, {}});
      ++parsed;
    } catch (const Error& e) {
      EXPECT_FALSE(e.message().empty());
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-Error exception '" << e.what() << "' for:\n" << text;
    }
  }
  EXPECT_EQ(parsed + rejected, kMutations);
  EXPECT_GT(rejected, kMutations / 4);  // the mutations really do break programs
}

TEST(Fuzz, CommandLineExitsTwoOnMutatedFiles) {
  auto texts = corpus();
  int checked = 0;
  for (int n = 0; n < 60; ++n) {
    Mutator m(static_cast<uint64_t>(10000 + n));
    std::string text = m.mutate(texts[static_cast<size_t>(n) % texts.size()]);
    std::string file = ::testing::TempDir() + "/fuzz_" + std::to_string(n) + ".sol";
    {
      std::ofstream out(file);
      out << text;
    }
    std::string output;
    int status = testing::run_command(std::string(SOLDER_BINARY) + " check --small " + file, &output);
    EXPECT_TRUE(status == 0 || status == 2) << "status " << status << " for:\n" << text << "\noutput:\n" << output;
    if (status == 2) EXPECT_NE(output.find("error: "), std::string::npos) << output;
    ++checked;
  }
  EXPECT_EQ(checked, 60);
}

}  // namespace
}  // namespace solder
