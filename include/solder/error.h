// solder::Error — the one exception type every failure of Solder's public API (and of its compiler)
// is reported with.
//
// An Error carries the file, line and column it refers to (for a program's text: the .sol file or the
// name given to Program::from_text), or names the API call that was wrong, and a message that says what
// was expected and what was found. formatted() gives "file:line:column: error: message".
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

}  // namespace solder
