#include "ir/lexer.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "ir/limits.h"

namespace solder {

std::string Token::describe() const {
  switch (kind) {
    case TokenKind::newline: return "end of line";
    case TokenKind::end: return "end of file";
    case TokenKind::integer:
    case TokenKind::real: return "number " + text;
    default: return "'" + text + "'";
  }
}

namespace {

// Tokens after which a newline does not end the statement.
bool continues_line(const Token& t) {
  if (t.kind != TokenKind::symbol) return false;
  return t.text != ")" && t.text != "]";
}

const char* const kSymbols[] = {"//", "<=", ">=", "==", "!=", "&&", "||", "[", "]", "(", ")", ",",
                                ":",  "=",  "~",  "+",  "-",  "*",  "/",  "%", "<", ">", "!"};

}  // namespace

std::vector<Token> tokenize(std::string_view text, const std::string& file) {
  std::vector<Token> tokens;
  std::vector<Token> open_brackets;
  int line = 1, column = 1;
  size_t i = 0;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n; ++k) {
      if (text[i] == '\n') { ++line; column = 1; } else { ++column; }
      ++i;
    }
  };
  while (i < text.size()) {
    char c = text[i];
    SourceLoc loc{line, column};
    if (c == '\n') {
      bool open = !tokens.empty() && continues_line(tokens.back());
      if (!open && !tokens.empty() && tokens.back().kind != TokenKind::newline) {
        if (!open_brackets.empty()) {
          const Token& b = open_brackets.back();
          fail(file, loc,
               "expected '" + std::string(b.text == "(" ? ")" : "]") + "' to close '" + b.text +
                   "' opened at " + std::to_string(b.loc.line) + ":" + std::to_string(b.loc.column) +
                   ", found end of line");
        }
        tokens.push_back({TokenKind::newline, "\n", loc});
      }
      advance(1);
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') { advance(1); continue; }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') advance(1);
      continue;
    }
    // A name; '$' starts the names of the parser's temporaries (docs/language.md, "Reductions
    // inside expressions"), which 'solder print' writes and which therefore parse again.
    bool temporary = c == '$' && i + 1 < text.size() &&
                     (std::isalnum(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '_');
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' || temporary) {
      size_t j = temporary ? i + 1 : i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      if (j - i > static_cast<size_t>(kMaxNameLength))
        fail(file, loc, "name '" + std::string(text.substr(i, 16)) + "...' is " + std::to_string(j - i) +
                            " characters long; names have at most " + std::to_string(kMaxNameLength));
      tokens.push_back({TokenKind::name, std::string(text.substr(i, j - i)), loc});
      advance(j - i);
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      size_t j = i;
      bool real = false;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      if (j < text.size() && text[j] == '.') {
        real = true;
        ++j;
        while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      }
      if (j < text.size() && (text[j] == 'e' || text[j] == 'E')) {
        size_t k = j + 1;
        if (k < text.size() && (text[k] == '+' || text[k] == '-')) ++k;
        if (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]))) {
          real = true;
          j = k;
          while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
        } else {
          fail(file, {line, column + static_cast<int>(j - i)},
               "expected digits after the exponent of a number, found '" + std::string(text.substr(i, k - i + (k < text.size()))) + "'");
        }
      }
      if (j < text.size() && (std::isalpha(static_cast<unsigned char>(text[j])) || text[j] == '_')) {
        fail(file, loc, "expected a number, found '" + std::string(text.substr(i, j - i + 1)) + "'");
      }
      std::string spelling(text.substr(i, j - i));
      double value = std::strtod(spelling.c_str(), nullptr);
      if (!real && value > 9007199254740992.0) {
        fail(file, loc, "integer literal " + spelling + " is too large (at most 2^53)");
      }
      if (!std::isfinite(value)) fail(file, loc, "number " + spelling + " is out of range");
      tokens.push_back({real ? TokenKind::real : TokenKind::integer, spelling, loc, value});
      advance(j - i);
      continue;
    }
    bool matched = false;
    for (const char* symbol : kSymbols) {
      std::string_view s(symbol);
      if (text.substr(i, s.size()) == s) {
        Token t{TokenKind::symbol, std::string(s), loc};
        if (s == "(" || s == "[") open_brackets.push_back(t);
        if (s == ")" || s == "]") {
          std::string opener = s == ")" ? "(" : "[";
          if (open_brackets.empty() || open_brackets.back().text != opener) {
            fail(file, loc,
                 open_brackets.empty()
                     ? "found '" + std::string(s) + "' with no matching '" + opener + "'"
                     : "expected '" + std::string(open_brackets.back().text == "(" ? ")" : "]") +
                           "' to close '" + open_brackets.back().text + "' opened at " +
                           std::to_string(open_brackets.back().loc.line) + ":" +
                           std::to_string(open_brackets.back().loc.column) + ", found '" +
                           std::string(s) + "'");
          }
          open_brackets.pop_back();
        }
        tokens.push_back(t);
        advance(s.size());
        matched = true;
        break;
      }
    }
    if (!matched) {
      std::string shown = std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c)
                                                                        : "\\x" + std::to_string(static_cast<unsigned char>(c));
      fail(file, loc, "unexpected character '" + shown + "'");
    }
  }
  SourceLoc end{line, column};
  if (!open_brackets.empty()) {
    const Token& b = open_brackets.back();
    fail(file, end,
         "expected '" + std::string(b.text == "(" ? ")" : "]") + "' to close '" + b.text +
             "' opened at " + std::to_string(b.loc.line) + ":" + std::to_string(b.loc.column) +
             ", found end of file");
  }
  if (!tokens.empty() && tokens.back().kind != TokenKind::newline) tokens.push_back({TokenKind::newline, "\n", end});
  tokens.push_back({TokenKind::end, "", end});
  return tokens;
}

}  // namespace solder
