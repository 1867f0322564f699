// A small writer for the JSON that `--json` prints (objects, arrays, strings, numbers, booleans).
// Non-finite numbers are written as the strings "nan", "inf" and "-inf".
#pragma once

#include <string>
#include <string_view>

namespace solder {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(double number);
  JsonWriter& value(int64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(bool flag);
  const std::string& str() const { return out_; }

 private:
  std::string out_;
  bool need_comma_ = false;
  void separate();
};

std::string json_escape(std::string_view text);

}  // namespace solder
