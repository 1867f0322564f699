// A small JSON reader: values remember the line and column they start at, so that callers can name the place
// of a bad field ("file.json:3:14: expected X, found Y"). The hardware description and the planner's sweep
// files use it. Strings keep \" \\ \/ \n \t; other escapes are kept verbatim (\uXXXX is not decoded).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace solder {

// A parsed JSON value with the position it started at (for errors).
struct JsonValue {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  double number_value = 0;
  bool bool_value = false;
  std::string text;
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;
  int line = 1, column = 1;

  const JsonValue* member(std::string_view name) const {
    for (const auto& [key, value] : members)
      if (key == name) return &value;
    return nullptr;
  }
};


// "null", "a boolean", "a number", "a string", "an array", "an object".
const char* json_kind_name(JsonValue::Kind kind);

// Parses one JSON document. Throws solder::Error "origin:line:column: expected X, found Y".
JsonValue parse_json(std::string_view text, std::string_view origin);

}  // namespace solder
