#include "ir/diagnostics.h"

namespace solder {

Error::Error(std::string file, SourceLoc loc, std::string message)
    : std::runtime_error(message), file_(std::move(file)), loc_(loc), message_(std::move(message)) {}

Error::Error(std::string message) : std::runtime_error(message), message_(std::move(message)) {}

std::string Error::formatted() const {
  std::string out;
  if (!file_.empty()) out += file_ + ":";
  if (loc_.known()) out += std::to_string(loc_.line) + ":" + std::to_string(loc_.column) + ":";
  if (!out.empty()) out += " ";
  out += "error: " + message_;
  return out;
}

void fail(const std::string& file, SourceLoc loc, const std::string& message) {
  throw Error(file, loc, message);
}

}  // namespace solder
