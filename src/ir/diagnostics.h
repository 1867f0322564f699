// Source positions and the one error type every user-facing failure is reported with.
//
// An Error carries the file, line and column it refers to (or the API call that was wrong), and a
// message that says what was expected and what was found. `solder` prints it as
//   file:line:column: error: message
// and exits with status 2.
#pragma once

#include <string>

// SourceLoc and Error are part of the public API (include/solder/error.h).
#include "solder/error.h"

namespace solder {

// Throws Error(file, loc, message) — a convenience for passes that hold the file name.
[[noreturn]] void fail(const std::string& file, SourceLoc loc, const std::string& message);

}  // namespace solder
