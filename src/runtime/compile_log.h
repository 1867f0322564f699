// Private to src/runtime: NVRTC's log made readable — each error quoted with the line it points at.
#pragma once

#include <map>
#include <string>

namespace solder::runtime::detail {

// For every error in `log` ("file(line): error: ..." or "catastrophic error") whose file is a key of
// `texts` (the generated source and the device headers, by the names NVRTC knows them by), the error
// as "file:line: error: ..." followed by that line and its neighbours, the offending one marked '>'.
// At most `max_errors` are quoted; "" when none can be.
std::string quote_compile_errors(const std::string& log, const std::map<std::string, const std::string*>& texts,
                                 int max_errors = 10);

}  // namespace solder::runtime::detail
