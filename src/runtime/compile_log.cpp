// Quoting the source lines NVRTC's errors point at.
#include "runtime/compile_log.h"

#include <regex>
#include <sstream>
#include <vector>

namespace solder::runtime::detail {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// "    41 | text" (or "  > 42 | text" for the offending line).
std::string numbered(const std::vector<std::string>& lines, int line, bool marked) {
  std::string number = std::to_string(line);
  std::string out = marked ? "  > " : "    ";
  out += std::string(number.size() < 5 ? 5 - number.size() : 0, ' ') + number + " | " + lines[line - 1] + "\n";
  return out;
}

}  // namespace

std::string quote_compile_errors(const std::string& log, const std::map<std::string, const std::string*>& texts,
                                 int max_errors) {
  static const std::regex diagnostic(R"(^(.+)\((\d+)\): (catastrophic error|error)(.*)$)");
  std::map<std::string, std::vector<std::string>> split;  // file → lines, split on first use
  std::string out;
  int quoted = 0, skipped = 0;
  for (const std::string& log_line : split_lines(log)) {
    std::smatch match;
    if (!std::regex_match(log_line, match, diagnostic)) continue;
    auto text = texts.find(match[1].str());
    if (text == texts.end()) continue;
    if (quoted == max_errors) {
      ++skipped;
      continue;
    }
    auto [entry, inserted] = split.try_emplace(text->first);
    if (inserted) entry->second = split_lines(*text->second);
    const std::vector<std::string>& lines = entry->second;
    int line = std::stoi(match[2].str());
    out += text->first + ":" + match[2].str() + ": " + match[3].str() + match[4].str() + "\n";
    if (line >= 1 && line <= static_cast<int>(lines.size())) {
      if (line > 1) out += numbered(lines, line - 1, false);
      out += numbered(lines, line, true);
      if (line < static_cast<int>(lines.size())) out += numbered(lines, line + 1, false);
    }
    ++quoted;
  }
  if (skipped) out += "(" + std::to_string(skipped) + " more errors; see the log)\n";
  return out;
}

}  // namespace solder::runtime::detail
