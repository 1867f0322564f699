// Tokens of the .sol language (docs/language.md).
//
// A statement ends at a newline, except after a token that cannot end a statement — an open
// bracket, a comma, an operator, '=', '~' or ':' — where the line continues. `#` starts a comment.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/diagnostics.h"

namespace solder {

enum class TokenKind { name, integer, real, symbol, newline, end };

struct Token {
  TokenKind kind;
  std::string text;  // the spelling; for symbols the operator ("//", "<=", "[", ...)
  SourceLoc loc;
  double number = 0;  // value of integer and real literals

  bool is(std::string_view symbol_or_name) const {
    return (kind == TokenKind::symbol || kind == TokenKind::name) && text == symbol_or_name;
  }
  // How messages name the token: 'foo', end of line, end of file.
  std::string describe() const;
};

// Splits `text` into tokens; throws Error (with `file`) on a character the language does not use,
// a malformed number or a closing bracket with no opening one.
std::vector<Token> tokenize(std::string_view text, const std::string& file);

}  // namespace solder
