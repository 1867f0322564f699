#include "support/json.h"

#include <cmath>
#include <cstdio>

namespace solder {

std::string json_escape(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonWriter::separate() {
  if (need_comma_) out_ += ",";
  need_comma_ = true;
}
JsonWriter& JsonWriter::begin_object() { separate(); out_ += "{"; need_comma_ = false; return *this; }
JsonWriter& JsonWriter::end_object() { out_ += "}"; need_comma_ = true; return *this; }
JsonWriter& JsonWriter::begin_array() { separate(); out_ += "["; need_comma_ = false; return *this; }
JsonWriter& JsonWriter::end_array() { out_ += "]"; need_comma_ = true; return *this; }
JsonWriter& JsonWriter::key(std::string_view name) {
  separate();
  out_ += json_escape(name) + ":";
  need_comma_ = false;
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view text) { separate(); out_ += json_escape(text); return *this; }
JsonWriter& JsonWriter::value(double number) {
  separate();
  if (std::isnan(number)) out_ += "\"nan\"";
  else if (std::isinf(number)) out_ += number > 0 ? "\"inf\"" : "\"-inf\"";
  else {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.9g", number);
    out_ += buffer;
  }
  return *this;
}
JsonWriter& JsonWriter::value(int64_t number) { separate(); out_ += std::to_string(number); return *this; }
JsonWriter& JsonWriter::value(bool flag) { separate(); out_ += flag ? "true" : "false"; return *this; }

}  // namespace solder
