// Token-level mutation fuzzer over the examples (issue 16): every mutant must parse and verify, or
// fail with a solder::Error that carries a file:line:column — never crash, hang, throw anything
// else, or break the print → parse → print round trip. Mutants that verify are also fused (at their
// small sizes) and the Kernel IR verified: fusion may refuse with an Error, nothing else.
//
// Mutations (several per mutant, seeded): delete, duplicate or swap tokens; change a number to 0,
// -1 or a huge value; rename a name (to another name of the file, a keyword or a fresh name);
// truncate; insert a symbol; deepen an operand (hundreds of parentheses, calls or unary minus) or
// lengthen a sum (thousands of terms).
//
// CI runs kDefaultMutants mutants; scripts/fuzz_mutants.sh runs more with SOLDER_FUZZ_MUTANTS and
// SOLDER_FUZZ_SEED, and this test prints its counts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "fusion/fuse.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kernel/kernel_verifier.h"
#include "../test_util.h"

namespace solder {
namespace {

constexpr int kDefaultMutants = 3000;

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strtoull(v, nullptr, 10);
}

struct Piece {
  enum Kind { name, number, symbol, space, newline } kind;
  std::string text;
};

// Splits a program into pieces that concatenate back to the text (comments stay in `space`).
std::vector<Piece> split(const std::string& s) {
  std::vector<Piece> out;
  size_t i = 0;
  auto is_name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  while (i < s.size()) {
    char c = s[i];
    size_t j = i + 1;
    Piece::Kind kind;
    if (c == '\n') {
      kind = Piece::newline;
    } else if (c == '#') {
      while (j < s.size() && s[j] != '\n') ++j;
      kind = Piece::space;
    } else if (c == ' ' || c == '\t') {
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      kind = Piece::space;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == 'e')) ++j;
      kind = Piece::number;
    } else if (is_name_char(c)) {
      while (j < s.size() && is_name_char(s[j])) ++j;
      kind = Piece::name;
    } else {
      if (j < s.size() && (std::string("/<>=!&|").find(c) != std::string::npos) && std::string("/=&|").find(s[j]) != std::string::npos) ++j;
      kind = Piece::symbol;
    }
    out.push_back({kind, s.substr(i, j - i)});
    i = j;
  }
  return out;
}

class TokenMutator {
 public:
  explicit TokenMutator(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 2685821657736338717ull;
  }
  size_t below(size_t n) { return n == 0 ? 0 : next() % n; }

  // Applies 1-3 mutations (mostly one); `kind` reports the last one applied.
  std::string mutate(const std::string& text, std::string* kind) {
    std::vector<Piece> p = split(text);
    size_t r = below(20);
    int edits = r < 13 ? 1 : r < 18 ? 2 : 3;
    for (int e = 0; e < edits && !p.empty(); ++e) apply(p, kind);
    std::string s;
    for (auto& x : p) s += x.text;
    return s;
  }

 private:
  uint64_t state_;

  std::vector<size_t> of_kind(const std::vector<Piece>& p, std::initializer_list<Piece::Kind> kinds) {
    std::vector<size_t> r;
    for (size_t i = 0; i < p.size(); ++i)
      for (auto k : kinds) if (p[i].kind == k) r.push_back(i);
    return r;
  }
  size_t pick(const std::vector<size_t>& v) { return v[below(v.size())]; }

  void apply(std::vector<Piece>& p, std::string* kind) {
    static const char* kNumbers[] = {"0", "-1", "1", "2147483647", "2147483648", "4294967296", "9007199254740992",
                                     "9007199254740993", "1e308", "1e-320", "0.0", "65536", "3"};
    static const char* kNames[] = {"program", "dim", "small", "in", "out", "inf", "cast", "f32", "i32", "bool", "sum",
                                   "max", "topk", "argmax", "select", "exp", "x", "zz", "_", "__global__", "int"};
    static const char* kSymbols[] = {"(", ")", "[", "]", ",", ":", "=", "-", "+", "*", "/", "//", "%", "<", "<=", "==",
                                     "!=", "&&", "||", "!", "~", "\n"};
    auto tokens = of_kind(p, {Piece::name, Piece::number, Piece::symbol});
    if (tokens.empty()) return;
    switch (below(10)) {
      case 0: *kind = "delete"; p.erase(p.begin() + static_cast<std::ptrdiff_t>(pick(tokens))); break;
      case 1: { *kind = "duplicate"; size_t i = pick(tokens); p.insert(p.begin() + static_cast<std::ptrdiff_t>(i), p[i]); break; }
      case 2: { *kind = "swap"; size_t a = pick(tokens), b = pick(tokens); std::swap(p[a].text, p[b].text); break; }
      case 3: {
        *kind = "number";
        auto numbers = of_kind(p, {Piece::number});
        if (numbers.empty()) return;
        p[pick(numbers)].text = kNumbers[below(std::size(kNumbers))];
        break;
      }
      case 4: {
        *kind = "rename";
        auto names = of_kind(p, {Piece::name});
        if (names.empty()) return;
        size_t i = pick(names);
        p[i].text = below(2) ? p[pick(names)].text : std::string(kNames[below(std::size(kNames))]);
        break;
      }
      case 5: { *kind = "truncate"; p.resize(pick(tokens)); break; }
      case 6: {
        *kind = "insert";
        p.insert(p.begin() + static_cast<std::ptrdiff_t>(pick(tokens)), Piece{Piece::symbol, kSymbols[below(std::size(kSymbols))]});
        break;
      }
      case 7:
      case 8: {  // deepen: wrap a name (with its brackets, when it is a load) in many levels
        *kind = "deepen";
        auto names = of_kind(p, {Piece::name});
        if (names.empty()) return;
        size_t i = pick(names), end = i + 1;
        if (end < p.size() && p[end].text == "[") {
          int depth = 0;
          for (; end < p.size(); ++end) {
            if (p[end].text == "[") ++depth;
            if (p[end].text == "]" && --depth == 0) { ++end; break; }
          }
        }
        static const char* kOpen[] = {"(", "exp(", "-", "abs(", "max(0, "};
        size_t which = below(std::size(kOpen));
        size_t levels = 1 + below(below(2) ? 40 : 600);
        std::string open, close;
        for (size_t k = 0; k < levels; ++k) {
          open += kOpen[which];
          if (which != 2) close += ")";
        }
        p.insert(p.begin() + static_cast<std::ptrdiff_t>(std::min(end, p.size())), Piece{Piece::symbol, close});
        p.insert(p.begin() + static_cast<std::ptrdiff_t>(i), Piece{Piece::symbol, open});
        break;
      }
      case 9: {  // lengthen: `t` becomes `t + t + ... + t` (or with - or *)
        *kind = "lengthen";
        auto names = of_kind(p, {Piece::name});
        if (names.empty()) return;
        size_t i = pick(names), end = i + 1;
        if (end < p.size() && p[end].text == "[") {
          int depth = 0;
          for (; end < p.size(); ++end) {
            if (p[end].text == "[") ++depth;
            if (p[end].text == "]" && --depth == 0) { ++end; break; }
          }
        }
        std::string term;
        for (size_t k = i; k < std::min(end, p.size()); ++k) term += p[k].text;
        static const char* kOps[] = {" + ", " * ", " - ", " && "};
        const char* op = kOps[below(std::size(kOps))];
        size_t terms = 2 + below(below(2) ? 100 : 3000);
        std::string chain = term;
        for (size_t k = 1; k < terms; ++k) chain += op + term;
        p.erase(p.begin() + static_cast<std::ptrdiff_t>(i), p.begin() + static_cast<std::ptrdiff_t>(std::min(end, p.size())));
        p.insert(p.begin() + static_cast<std::ptrdiff_t>(i), Piece{Piece::symbol, chain});
        break;
      }
    }
  }
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Counts {
  int verified = 0, parse_errors = 0, verify_errors = 0, failures = 0;
  int fused = 0, fusion_errors = 0;  // of the verified
  std::vector<std::string> fusion_messages;  // the first few refusals, for the log
  std::map<std::string, int> by_kind;
};

TEST(MutationFuzz, EveryMutantVerifiesOrFailsWithALocatedError) {
  auto files = testing::example_files();
  ASSERT_FALSE(files.empty());
  std::vector<std::string> texts;
  for (auto& f : files) texts.push_back(read(f));
  const uint64_t mutants = env_number("SOLDER_FUZZ_MUTANTS", kDefaultMutants);
  const uint64_t seed = env_number("SOLDER_FUZZ_SEED", 1);
  const uint64_t first = env_number("SOLDER_FUZZ_FIRST", 0);  // to replay one mutant: FIRST=n MUTANTS=n+1
  const char* last_path = std::getenv("SOLDER_FUZZ_LAST");
  Counts counts;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t n = first; n < mutants; ++n) {
    TokenMutator m(seed * 1000003 + n);
    size_t which = static_cast<size_t>(n % texts.size());
    std::string kind;
    std::string text = m.mutate(texts[which], &kind);
    ++counts.by_kind[kind];
    std::string label = "mutant " + std::to_string(n) + " (seed " + std::to_string(seed) + ", " + kind + ") of " + files[which];
    if (last_path) {  // for scripts/fuzz_mutants.sh: the mutant being tried, should it crash
      std::ofstream last(last_path);
      last << "# " << label << "\n" << text;
    }
    std::shared_ptr<Program> program;
    try {
      program = std::make_shared<Program>(parse_program(text, "mutant.sol"));
    } catch (const Error& e) {
      ++counts.parse_errors;
      if (!e.loc().known() || e.file() != "mutant.sol") {
        ++counts.failures;
        ADD_FAILURE() << label << ": parse error without a location: " << e.formatted() << "\n" << text.substr(0, 3000);
      }
      continue;
    } catch (const std::exception& e) {
      ++counts.failures;
      ADD_FAILURE() << label << ": non-Error exception from the parser: " << e.what() << "\n" << text.substr(0, 3000);
      continue;
    }
    try {
      std::string once = print_program(*program);
      std::string twice = print_program(parse_program(once, "mutant.sol"));
      if (once != twice) {
        ++counts.failures;
        ADD_FAILURE() << label << ": print -> parse -> print differs\n" << once.substr(0, 3000) << "\n---\n" << twice.substr(0, 3000);
      }
      BoundProgram bound = bind_program(program, SizeChoice{!program->small.empty(), {}});
      ++counts.verified;
      // What verifies goes on through fusion (the passes that recurse over expressions), which may
      // refuse with an Error but must not fail otherwise.
      try {
        FusionResult fused = fuse_program(bound);
        verify_kernel_program(fused.kernels);
        ++counts.fused;
      } catch (const Error& e) {
        if (e.message().rfind("Kernel IR verifier", 0) == 0) {  // fusion produced invalid Kernel IR: a bug
          ++counts.failures;
          ADD_FAILURE() << label << ": fusion produced invalid Kernel IR: " << e.formatted() << "\n" << text.substr(0, 3000);
        } else {
          ++counts.fusion_errors;
          if (counts.fusion_messages.size() < 5) counts.fusion_messages.push_back(label + ": " + e.formatted());
        }
      } catch (const std::exception& e) {
        ++counts.failures;
        ADD_FAILURE() << label << ": internal error in fusion: " << e.what() << "\n" << text.substr(0, 3000);
      }
    } catch (const Error& e) {
      ++counts.verify_errors;
      if (!e.loc().known() || e.file() != "mutant.sol") {
        ++counts.failures;
        ADD_FAILURE() << label << ": verifier error without a location: " << e.formatted() << "\n" << text.substr(0, 3000);
      }
    } catch (const std::exception& e) {
      ++counts.failures;
      ADD_FAILURE() << label << ": non-Error exception from the verifier: " << e.what() << "\n" << text.substr(0, 3000);
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("mutation fuzz: seed %llu, %llu mutants of %zu examples in %.1f s: %d verified (%d fused, %d fusion "
              "errors), %d parse errors, %d verifier errors, %d failures\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(mutants - first), files.size(), seconds,
              counts.verified, counts.fused, counts.fusion_errors, counts.parse_errors, counts.verify_errors, counts.failures);
  std::printf("mutation fuzz: last mutation kinds:");
  for (auto& [k, v] : counts.by_kind) std::printf(" %s=%d", k.c_str(), v);
  std::printf("\n");
  for (auto& m : counts.fusion_messages) std::printf("mutation fuzz: fusion refused %s\n", m.c_str());
  EXPECT_EQ(counts.failures, 0);
  EXPECT_EQ(static_cast<uint64_t>(counts.verified + counts.parse_errors + counts.verify_errors), mutants - first);
  if (mutants - first >= 100) {
    EXPECT_GT(counts.verified, 0);                                                                 // some stay valid
    EXPECT_GT(counts.parse_errors + counts.verify_errors, static_cast<int>((mutants - first) / 4));  // most break
  }
}

// The command line: exit 0, or exit 2 with "FILE:LINE:COLUMN: error: ..." (a sample of mutants).
TEST(MutationFuzz, CommandLineReportsLocatedErrorsWithExitTwo) {
  auto files = testing::example_files();
  const std::regex located(R"(mutant_\d+\.sol:\d+:\d+: error: )");
  for (uint64_t n = 0; n < 40; ++n) {
    TokenMutator m(777000 + n);
    std::string kind;
    std::string text = m.mutate(read(files[n % files.size()]), &kind);
    std::string path = ::testing::TempDir() + "/mutant_" + std::to_string(n) + ".sol";
    {
      std::ofstream out(path);
      out << text;
    }
    std::string output;
    int status = testing::run_command(std::string(SOLDER_BINARY) + " check " + path, &output);
    EXPECT_TRUE(status == 0 || status == 2) << "status " << status << " (" << kind << ")\n" << output;
    if (status == 2) EXPECT_TRUE(std::regex_search(output, located)) << kind << ": " << output;
  }
}

}  // namespace
}  // namespace solder
