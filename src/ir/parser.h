// The .sol parser: text → Program (docs/language.md).
//
// Parsing resolves names as it goes — a name is a dim, a tensor (input or earlier target), or an
// index variable — and reports every malformed construct as an Error at file:line:column with
// what was expected and what was found. It checks only what the text itself decides; sizes,
// extents and index ranges are checked by `bind` (verifier.h).
#pragma once

#include <string>
#include <string_view>

#include "ir/program.h"

namespace solder {

// `file` is used in messages and recorded in Program::file.
Program parse_program(std::string_view text, const std::string& file);
// Reads and parses a file; a file that cannot be read is an Error naming it.
Program parse_program_file(const std::string& path);

}  // namespace solder
