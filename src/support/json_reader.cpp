#include "support/json_reader.h"

#include <cstdlib>

#include "ir/diagnostics.h"

namespace solder {

const char* json_kind_name(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::null: return "null";
    case JsonValue::boolean: return "a boolean";
    case JsonValue::number: return "a number";
    case JsonValue::string: return "a string";
    case JsonValue::array: return "an array";
    case JsonValue::object: return "an object";
  }
  return "?";
}

namespace {

class JsonReader {
 public:
  JsonReader(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  JsonValue document() {
    JsonValue value = parse_value();
    skip_space();
    if (position_ != text_.size()) fail("end of the document", describe_here());
    return value;
  }

  [[noreturn]] void fail(const std::string& expected, const std::string& found) const {
    throw Error(std::string(origin_) + ":" + std::to_string(line_) + ":" + std::to_string(column_) + ": expected " +
                expected + ", found " + found);
  }

 private:
  std::string describe_here() const {
    if (position_ >= text_.size()) return "the end of the file";
    return "'" + std::string(1, text_[position_]) + "'";
  }
  void advance() {
    if (text_[position_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++position_;
  }
  void skip_space() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\n' ||
                                        text_[position_] == '\t' || text_[position_] == '\r'))
      advance();
  }
  bool take(char c) {
    skip_space();
    if (position_ < text_.size() && text_[position_] == c) {
      advance();
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!take(c)) fail(what, describe_here());
  }
  bool take_word(std::string_view word) {
    if (text_.substr(position_, word.size()) != word) return false;
    for (size_t i = 0; i < word.size(); ++i) advance();
    return true;
  }

  JsonValue parse_value() {
    skip_space();
    JsonValue value;
    value.line = line_;
    value.column = column_;
    if (position_ >= text_.size()) fail("a value", "the end of the file");
    char c = text_[position_];
    if (c == '{') {
      advance();
      value.kind = JsonValue::object;
      if (take('}')) return value;
      do {
        skip_space();
        if (position_ >= text_.size() || text_[position_] != '"') fail("a member name in quotes", describe_here());
        std::string key = parse_string();
        expect(':', "':' after a member name");
        value.members.emplace_back(std::move(key), parse_value());
      } while (take(','));
      expect('}', "',' or '}' in an object");
    } else if (c == '[') {
      advance();
      value.kind = JsonValue::array;
      if (take(']')) return value;
      do value.items.push_back(parse_value());
      while (take(','));
      expect(']', "',' or ']' in an array");
    } else if (c == '"') {
      value.kind = JsonValue::string;
      value.text = parse_string();
    } else if (take_word("null")) {
      value.kind = JsonValue::null;
    } else if (take_word("true")) {
      value.kind = JsonValue::boolean;
      value.bool_value = true;
    } else if (take_word("false")) {
      value.kind = JsonValue::boolean;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = position_;
      while (position_ < text_.size() && std::string_view("+-.eE0123456789").find(text_[position_]) != std::string_view::npos)
        advance();
      std::string digits(text_.substr(start, position_ - start));
      char* end = nullptr;
      value.kind = JsonValue::number;
      value.number_value = std::strtod(digits.c_str(), &end);
      if (end != digits.c_str() + digits.size()) fail("a number", "'" + digits + "'");
    } else {
      fail("a value (object, array, string, number, true, false or null)", describe_here());
    }
    return value;
  }

  std::string parse_string() {
    advance();  // opening quote
    std::string out;
    while (position_ < text_.size() && text_[position_] != '"') {
      char c = text_[position_];
      if (c == '\\') {
        advance();
        if (position_ >= text_.size()) break;
        char e = text_[position_];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;  // \" \\ \/ and the rest verbatim; \uXXXX not needed here
      } else {
        out += c;
      }
      advance();
    }
    if (position_ >= text_.size()) fail("'\"' closing a string", "the end of the file");
    advance();
    return out;
  }

  std::string_view text_, origin_;
  size_t position_ = 0;
  int line_ = 1, column_ = 1;
};

}  // namespace

JsonValue parse_json(std::string_view text, std::string_view origin) {
  JsonReader reader(text, origin);
  return reader.document();
}

}  // namespace solder
