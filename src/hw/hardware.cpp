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
#include "support/json_reader.h"

namespace solder {

namespace {

// Field access with errors that name the field, what was expected and what was found.
class Fields {
 public:
  Fields(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void fail(const JsonValue& at, const std::string& what, const std::string& found) const {
    throw Error(std::string(origin_) + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                ": expected " + what + ", found " + found);
  }
  const JsonValue& require(const JsonValue& object, const char* name, JsonValue::Kind kind, const char* context) const {
    const JsonValue* value = object.member(name);
    if (!value) fail(object, std::string("member \"") + name + "\" (" + json_kind_name(kind) + ") in " + context, "none");
    if (value->kind != kind)
      fail(*value, std::string("\"") + name + "\" to be " + json_kind_name(kind), json_kind_name(value->kind));
    return *value;
  }
  int integer(const JsonValue& object, const char* name, const char* context) const {
    const JsonValue& value = require(object, name, JsonValue::number, context);
    if (value.number_value != std::floor(value.number_value) || value.number_value < 0)
      fail(value, std::string("\"") + name + "\" to be a non-negative integer", std::to_string(value.number_value));
    return static_cast<int>(value.number_value);
  }
  std::optional<double> optional_number(const JsonValue& object, const char* name) const {
    const JsonValue* value = object.member(name);
    if (!value || value->kind == JsonValue::null) return std::nullopt;
    if (value->kind != JsonValue::number) fail(*value, std::string("\"") + name + "\" to be a number or null", json_kind_name(value->kind));
    return value->number_value;
  }
  double positive_number(const JsonValue& object, const char* name, const char* context) const {
    const JsonValue& value = require(object, name, JsonValue::number, context);
    if (!(value.number_value > 0))
      fail(value, std::string("\"") + name + "\" to be a positive number", std::to_string(value.number_value));
    return value.number_value;
  }
  int key_integer(const JsonValue& at, const std::string& key, const char* what) const {
    char* end = nullptr;
    long n = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || n <= 0) fail(at, std::string(what) + " as a positive integer key", "\"" + key + "\"");
    return static_cast<int>(n);
  }

 private:
  std::string_view origin_;
};

Rates read_rates(const JsonValue& object, const Fields& fields) {
  const char* context = "\"rates\"";
  if (object.kind != JsonValue::object) fields.fail(object, "\"rates\" to be an object", json_kind_name(object.kind));
  Rates rates;
  const JsonValue& tensor = fields.require(object, "tensor_tflops", JsonValue::object, context);
  for (const auto& [type, rate] : tensor.members) {
    if (rate.kind != JsonValue::number || !(rate.number_value > 0))
      fields.fail(rate, "a positive TFLOP/s for \"" + type + "\"", rate.kind == JsonValue::number ? std::to_string(rate.number_value) : json_kind_name(rate.kind));
    rates.tensor_tflops[type] = rate.number_value;
  }
  if (rates.tensor_tflops.empty()) fields.fail(tensor, "at least one MMA input type in \"tensor_tflops\"", "none");
  if (const JsonValue* peak = object.member("tensor_peak_tflops"); peak && peak->kind == JsonValue::object)
    for (const auto& [type, rate] : peak->members)
      if (rate.kind == JsonValue::number) rates.tensor_peak_tflops[type] = rate.number_value;
  rates.hbm_tbps = fields.positive_number(object, "hbm_tbps", context);
  rates.l2_tbps = fields.positive_number(object, "l2_tbps", context);
  rates.l2_bytes = static_cast<int64_t>(fields.positive_number(object, "l2_bytes", context));
  rates.sm_load_gbps = fields.positive_number(object, "sm_load_gbps", context);
  rates.memory_latency_ns = fields.positive_number(object, "memory_latency_ns", context);
  rates.smem_per_sm_bytes = fields.integer(object, "smem_per_sm_bytes", context);
  rates.registers_per_sm = fields.integer(object, "registers_per_sm", context);
  rates.launch_us = fields.positive_number(object, "launch_us", context);
  const JsonValue& cluster = fields.require(object, "cluster_launch_us", JsonValue::number, context);
  rates.cluster_launch_us = cluster.number_value;
  if (const JsonValue* source = object.member("source"); source && source->kind == JsonValue::string) rates.source = source->text;
  return rates;
}

}  // namespace

double Rates::tensor(std::string_view type) const {
  if (type.substr(0, 2) == "f8") type.remove_prefix(2);  // the Kernel IR's f8e4m3 is the table's e4m3
  auto it = tensor_tflops.find(std::string(type));
  return it == tensor_tflops.end() ? 0 : it->second;
}

Rates parse_rates(std::string_view text, std::string_view origin) {
  JsonValue root = parse_json(text, origin);
  return read_rates(root, Fields(origin));
}

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
  JsonValue root = parse_json(text, origin);
  Fields fields(origin);
  if (root.kind != JsonValue::object) fields.fail(root, "a JSON object (a hardware description)", json_kind_name(root.kind));
  HardwareDescription hw;
  const char* top = "the hardware description";
  hw.name = fields.require(root, "device", JsonValue::string, top).text;
  hw.sm_count = fields.integer(root, "sm_count", top);
  hw.sm_clock_mhz = fields.integer(root, "sm_clock_mhz", top);
  hw.smem_per_block_bytes = fields.integer(root, "smem_per_block_bytes", top);
  hw.max_cluster_size = fields.integer(root, "max_cluster_size", top);
  if (const JsonValue* date = root.member("date"); date && date->kind == JsonValue::string) hw.measured = date->text;
  if (const JsonValue* commit = root.member("commit"); commit && commit->kind == JsonValue::string) hw.commit = commit->text;
  const JsonValue& sizes = fields.require(root, "cluster_sizes", JsonValue::object, top);
  for (const auto& [key, entry_value] : sizes.members) {
    if (entry_value.kind != JsonValue::object)
      fields.fail(entry_value, "cluster size \"" + key + "\" to be an object", json_kind_name(entry_value.kind));
    DsmEntry entry;
    entry.cluster_size = fields.key_integer(entry_value, key, "a cluster size");
    const std::string context = "cluster size " + key;
    const JsonValue& pull = fields.require(entry_value, "pull_tbps", JsonValue::number, context.c_str());
    entry.pull_tbps = pull.number_value;
    entry.push_tbps = fields.optional_number(entry_value, "push_tbps");
    entry.latency_cycles = fields.optional_number(entry_value, "one_way_latency_cycles");
    entry.latency_ns = fields.optional_number(entry_value, "one_way_latency_ns");
    const JsonValue& active = fields.require(entry_value, "max_active_clusters", JsonValue::object, context.c_str());
    for (const auto& [bytes, count] : active.members) {
      if (count.kind != JsonValue::number) fields.fail(count, "a cluster count for " + bytes + " bytes", json_kind_name(count.kind));
      entry.max_active_clusters[fields.key_integer(count, bytes, "shared-memory bytes")] = static_cast<int>(count.number_value);
    }
    hw.dsm.push_back(std::move(entry));
  }
  if (hw.dsm.empty()) fields.fail(sizes, "at least one cluster size in \"cluster_sizes\"", "none");
  if (const JsonValue* rates = root.member("rates"); rates && rates->kind != JsonValue::null) {
    hw.rates = read_rates(*rates, fields);
    hw.has_rates = true;
  }
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

HardwareDescription hardware_for(const char* path) {
  if (path && *path) {
    HardwareDescription h;
    try {
      h = load_hardware_description(path);
    } catch (const Error& e) {
      throw Error(std::string("SOLDER_HARDWARE: ") + e.what());
    }
    if (!h.has_rates)
      throw Error(std::string("SOLDER_HARDWARE: ") + path + ": expected a hardware description with \"rates\" (the cost " +
                  "model's constants, as `solder probe -o FILE` writes them), found none");
    return h;
  }
  HardwareDescription h = parse_hardware_description(default_dsm_table_json(), "<compiled-in dsm-table.json>");
  h.rates = parse_rates(default_rates_json(), "<compiled-in rates.json>");
  h.has_rates = true;
  return h;
}

const HardwareDescription& default_hardware() {
  static const HardwareDescription hw = hardware_for(std::getenv("SOLDER_HARDWARE"));
  return hw;
}

std::string hardware_mismatch_note(const std::string& gpu_name) {
  const HardwareDescription& hw = default_hardware();
  if (gpu_name.empty() || gpu_name == hw.name) return "";
  const char* path = std::getenv("SOLDER_HARDWARE");
  return "note: the planner's hardware description is " + hw.name + " (" +
         (path && *path ? std::string("SOLDER_HARDWARE=") + path : std::string("compiled in")) + "), this GPU is " + gpu_name +
         ": tiles are chosen with the other GPU's rates; `solder probe -o FILE` measures this one and "
         "SOLDER_HARDWARE=FILE plans with it (docs/hardware.md)";
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
  out += "  }";
  if (hw.has_rates) {
    const Rates& r = hw.rates;
    out += ",\n  \"rates\": {\n    \"tensor_tflops\": {";
    bool first = true;
    for (const auto& [type, rate] : r.tensor_tflops) {
      out += (first ? "" : ", ") + json_escape(type) + ": " + number(rate);
      first = false;
    }
    out += "},\n";
    if (!r.tensor_peak_tflops.empty()) {
      out += "    \"tensor_peak_tflops\": {";
      first = true;
      for (const auto& [type, rate] : r.tensor_peak_tflops) {
        out += (first ? "" : ", ") + json_escape(type) + ": " + number(rate);
        first = false;
      }
      out += "},\n";
    }
    out += "    \"hbm_tbps\": " + number(r.hbm_tbps) + ", \"l2_tbps\": " + number(r.l2_tbps) +
           ", \"l2_bytes\": " + std::to_string(r.l2_bytes) + ", \"sm_load_gbps\": " + number(r.sm_load_gbps) +
           ", \"memory_latency_ns\": " + number(r.memory_latency_ns) + ",\n";
    out += "    \"smem_per_sm_bytes\": " + std::to_string(r.smem_per_sm_bytes) +
           ", \"registers_per_sm\": " + std::to_string(r.registers_per_sm) + ", \"launch_us\": " + number(r.launch_us) +
           ", \"cluster_launch_us\": " + number(r.cluster_launch_us) + ",\n";
    out += "    \"source\": " + json_escape(r.source) + "\n  }";
  }
  out += "\n}\n";
  return out;
}

}  // namespace solder
