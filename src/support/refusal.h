// A refusal: the program is valid, but running or compiling it would exceed a limit of the hardware
// or of this machine (grid size, shared memory, cluster size, available memory). It is the user's
// input that cannot be served, not a bug, so `solder` reports it with exit status 2, whereas any other
// solder::Error thrown after a program has verified is an internal error (exit 3, "please report").
// The message says which limit, the value asked for, and what to change.
#pragma once

#include "ir/diagnostics.h"

namespace solder {

class Refusal : public Error {
 public:
  explicit Refusal(std::string message) : Error(std::move(message)) {}
};

}  // namespace solder
