// Hardware description: a small JSON reader for the DSM table format (hardware.h), the compiled-in default,
// and the writer `solder probe` uses.
#include "hw/hardware.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "ir/diagnostics.h"
#include "support/json.h"

namespace solder {

namespace {

// A parsed JSON value with the position it started at (for errors).
struct Value {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  double number_value = 0;
  bool bool_value = false;
  std::string text;
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> members;
  int line = 1, column = 1;

  const Value* member(std::string_view name) const {
    for (const auto& [key, value] : members)
      if (key == name) return &value;
    return nullptr;
  }
};

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::null: return "null";
    case Value::boolean: return "a boolean";
    case Value::number: return "a number";
    case Value::string: return "a string";
    case Value::array: return "an array";
    case Value::object: return "an object";
  }
  return "?";
}

class Reader {
 public:
  Reader(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  Value document() {
    Value value = parse_value();
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

  Value parse_value() {
    skip_space();
    Value value;
    value.line = line_;
    value.column = column_;
    if (position_ >= text_.size()) fail("a value", "the end of the file");
    char c = text_[position_];
    if (c == '{') {
      advance();
      value.kind = Value::object;
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
      value.kind = Value::array;
      if (take(']')) return value;
      do value.items.push_back(parse_value());
      while (take(','));
      expect(']', "',' or ']' in an array");
    } else if (c == '"') {
      value.kind = Value::string;
      value.text = parse_string();
    } else if (take_word("null")) {
      value.kind = Value::null;
    } else if (take_word("true")) {
      value.kind = Value::boolean;
      value.bool_value = true;
    } else if (take_word("false")) {
      value.kind = Value::boolean;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = position_;
      while (position_ < text_.size() && std::string_view("+-.eE0123456789").find(text_[position_]) != std::string_view::npos)
        advance();
      std::string digits(text_.substr(start, position_ - start));
      char* end = nullptr;
      value.kind = Value::number;
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

// Field access with errors that name the field, what was expected and what was found.
class Fields {
 public:
  Fields(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void fail(const Value& at, const std::string& what, const std::string& found) const {
    throw Error(std::string(origin_) + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                ": expected " + what + ", found " + found);
  }
  const Value& require(const Value& object, const char* name, Value::Kind kind, const char* context) const {
    const Value* value = object.member(name);
    if (!value) fail(object, std::string("member \"") + name + "\" (" + kind_name(kind) + ") in " + context, "none");
    if (value->kind != kind)
      fail(*value, std::string("\"") + name + "\" to be " + kind_name(kind), kind_name(value->kind));
    return *value;
  }
  int integer(const Value& object, const char* name, const char* context) const {
    const Value& value = require(object, name, Value::number, context);
    if (value.number_value != std::floor(value.number_value) || value.number_value < 0)
      fail(value, std::string("\"") + name + "\" to be a non-negative integer", std::to_string(value.number_value));
    return static_cast<int>(value.number_value);
  }
  std::optional<double> optional_number(const Value& object, const char* name) const {
    const Value* value = object.member(name);
    if (!value || value->kind == Value::null) return std::nullopt;
    if (value->kind != Value::number) fail(*value, std::string("\"") + name + "\" to be a number or null", kind_name(value->kind));
    return value->number_value;
  }
  int key_integer(const Value& at, const std::string& key, const char* what) const {
    char* end = nullptr;
    long n = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || n <= 0) fail(at, std::string(what) + " as a positive integer key", "\"" + key + "\"");
    return static_cast<int>(n);
  }

 private:
  std::string_view origin_;
};

}  // namespace

const DsmEntry* HardwareDescription::dsm_at(int cluster_size) const {
  for (const DsmEntry& entry : dsm)
    if (entry.cluster_size == cluster_size) return &entry;
  return nullptr;
}

int HardwareDescription::max_active_clusters(int cluster_size, int smem_bytes) const {
  const DsmEntry* entry = dsm_at(cluster_size);
  if (!entry) return 0;
  auto it = entry->max_active_clusters.lower_bound(smem_bytes);
  return it == entry->max_active_clusters.end() ? 0 : it->second;
}

HardwareDescription parse_hardware_description(std::string_view text, std::string_view origin) {
  Reader reader(text, origin);
  Value root = reader.document();
  Fields fields(origin);
  if (root.kind != Value::object) fields.fail(root, "a JSON object (a hardware description)", kind_name(root.kind));
  HardwareDescription hw;
  const char* top = "the hardware description";
  hw.name = fields.require(root, "device", Value::string, top).text;
  hw.sm_count = fields.integer(root, "sm_count", top);
  hw.sm_clock_mhz = fields.integer(root, "sm_clock_mhz", top);
  hw.smem_per_block_bytes = fields.integer(root, "smem_per_block_bytes", top);
  hw.max_cluster_size = fields.integer(root, "max_cluster_size", top);
  if (const Value* date = root.member("date"); date && date->kind == Value::string) hw.measured = date->text;
  if (const Value* commit = root.member("commit"); commit && commit->kind == Value::string) hw.commit = commit->text;
  const Value& sizes = fields.require(root, "cluster_sizes", Value::object, top);
  for (const auto& [key, entry_value] : sizes.members) {
    if (entry_value.kind != Value::object)
      fields.fail(entry_value, "cluster size \"" + key + "\" to be an object", kind_name(entry_value.kind));
    DsmEntry entry;
    entry.cluster_size = fields.key_integer(entry_value, key, "a cluster size");
    const std::string context = "cluster size " + key;
    const Value& pull = fields.require(entry_value, "pull_tbps", Value::number, context.c_str());
    entry.pull_tbps = pull.number_value;
    entry.push_tbps = fields.optional_number(entry_value, "push_tbps");
    entry.latency_cycles = fields.optional_number(entry_value, "one_way_latency_cycles");
    entry.latency_ns = fields.optional_number(entry_value, "one_way_latency_ns");
    const Value& active = fields.require(entry_value, "max_active_clusters", Value::object, context.c_str());
    for (const auto& [bytes, count] : active.members) {
      if (count.kind != Value::number) fields.fail(count, "a cluster count for " + bytes + " bytes", kind_name(count.kind));
      entry.max_active_clusters[fields.key_integer(count, bytes, "shared-memory bytes")] = static_cast<int>(count.number_value);
    }
    hw.dsm.push_back(std::move(entry));
  }
  if (hw.dsm.empty()) fields.fail(sizes, "at least one cluster size in \"cluster_sizes\"", "none");
  std::sort(hw.dsm.begin(), hw.dsm.end(), [](const DsmEntry& a, const DsmEntry& b) { return a.cluster_size < b.cluster_size; });
  return hw;
}

HardwareDescription load_hardware_description(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": expected a readable hardware description (JSON), found no such file or no permission");
  std::stringstream buffer;
  buffer << file.rdbuf();
  return parse_hardware_description(buffer.str(), path);
}

const HardwareDescription& default_hardware() {
  static const HardwareDescription hw = parse_hardware_description(default_dsm_table_json(), "<compiled-in dsm-table.json>");
  return hw;
}

std::string to_json(const HardwareDescription& hw) {
  auto number = [](const std::optional<double>& v) {
    if (!v) return std::string("null");
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", *v);
    return std::string(text);
  };
  std::string out = "{\n";
  out += "  \"device\": " + json_escape(hw.name) + ",\n";
  out += "  \"date\": " + json_escape(hw.measured) + ",\n";
  out += "  \"commit\": " + json_escape(hw.commit) + ",\n";
  out += "  \"sm_count\": " + std::to_string(hw.sm_count) + ",\n";
  out += "  \"sm_clock_mhz\": " + std::to_string(hw.sm_clock_mhz) + ",\n";
  out += "  \"smem_per_block_bytes\": " + std::to_string(hw.smem_per_block_bytes) + ",\n";
  out += "  \"max_cluster_size\": " + std::to_string(hw.max_cluster_size) + ",\n";
  out += "  \"cluster_sizes\": {\n";
  for (size_t i = 0; i < hw.dsm.size(); ++i) {
    const DsmEntry& e = hw.dsm[i];
    out += "    \"" + std::to_string(e.cluster_size) + "\": {\"pull_tbps\": " + number(e.pull_tbps) +
           ", \"push_tbps\": " + number(e.push_tbps) + ", \"one_way_latency_cycles\": " + number(e.latency_cycles) +
           ", \"one_way_latency_ns\": " + number(e.latency_ns) + ", \"max_active_clusters\": {";
    bool first = true;
    for (const auto& [bytes, count] : e.max_active_clusters) {
      out += (first ? "\"" : ", \"") + std::to_string(bytes) + "\": " + std::to_string(count);
      first = false;
    }
    out += "}}";
    out += i + 1 < hw.dsm.size() ? ",\n" : "\n";
  }
  out += "  }\n}\n";
  return out;
}

}  // namespace solder
