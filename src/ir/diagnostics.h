// Source positions and the one error type every user-facing failure is reported with.
//
// An Error carries the file, line and column it refers to (or the API call that was wrong), and a
// message that says what was expected and what was found. `solder` prints it as
//   file:line:column: error: message
// and exits with status 2.
#pragma once

#include <stdexcept>
#include <string>

namespace solder {

struct SourceLoc {
  int line = 0;    // 1-based; 0 means "no position"
  int column = 0;  // 1-based
  bool known() const { return line > 0; }
};

class Error : public std::runtime_error {
 public:
  Error(std::string file, SourceLoc loc, std::string message);
  // An error that refers to no source text, e.g. a bad command-line option or API argument.
  explicit Error(std::string message);

  const std::string& file() const { return file_; }
  SourceLoc loc() const { return loc_; }
  const std::string& message() const { return message_; }
  // "file:line:column: error: message" (the parts that are known).
  std::string formatted() const;

 private:
  std::string file_;
  SourceLoc loc_;
  std::string message_;
};

// Throws Error(file, loc, message) — a convenience for passes that hold the file name.
[[noreturn]] void fail(const std::string& file, SourceLoc loc, const std::string& message);

}  // namespace solder
