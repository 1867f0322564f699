// solder run FILE — evaluate a program on random inputs; with an executing backend, verify every
// output against the float64 reference.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>

#include "backend/cpu/compare.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "cli.h"
#include "commands.h"
#include "support/json.h"

namespace solder::cli {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Prints reference progress to stderr at most every two seconds, for runs long enough to need it.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(const BoundProgram& program) : program_(program) {}
  void operator()(int def_index, double fraction) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    std::fprintf(stderr, "reference: %3.0f%% (definition %d of %zu: %s)\n", fraction * 100, def_index + 1,
                 program_.defs.size(), program_.defs[static_cast<size_t>(def_index)].def->target.name.c_str());
  }

 private:
  const BoundProgram& program_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

int command_run(const std::vector<std::string>& args) {
  ProgramOptions options;
  std::string backend = "ref";
  Command command{"run", "solder run FILE [--backend ref] [--small] [--dim NAME=VALUE]... [--seed S] [--json]",
                  "Evaluate a program on random inputs drawn from its declared distributions and report\n"
                  "each output's shape and checksums.\n\n"
                  "backends:\n"
                  "  ref   the float64 reference interpreter (the definition of the program's meaning)"};
  add_program_options(command, options, true);
  command.options.push_back({"--backend", "NAME", "ref (default)", [&backend](const std::string& v) { backend = v; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  if (backend != "ref") throw Error("--backend expects one of: ref; found '" + backend + "'");

  BoundProgram program = load_program(files[0], options.sizes);
  TensorSet inputs = make_inputs(program, options.seed);
  ReferenceOptions reference_options;
  ProgressPrinter progress(program);
  double work = reference_work(program);
  if (work > 5e7) {
    std::fprintf(stderr, "reference: %.3g scalar evaluations in float64; this may take a while (--small is faster)\n", work);
    reference_options.progress = [&progress](int d, double f) { progress(d, f); };
  }
  TensorSet reference = run_reference(program, inputs, reference_options);

  struct Row { std::string name; std::vector<int64_t> shape; std::string dtype; double sum, abs_sum; int64_t nans; };
  std::vector<Row> rows;
  for (const TensorInfo* out : program.outputs()) {
    const HostTensor& t = reference.at(out->name);
    Row row{out->name, t.shape, std::string(dtype_name(t.dtype)), 0, 0, 0};
    for (double v : t.values) {
      if (std::isnan(v)) { ++row.nans; continue; }
      row.sum += v;
      row.abs_sum += std::fabs(v);
    }
    rows.push_back(row);
  }

  if (options.json) {
    JsonWriter json;
    json.begin_object().key("program").value(program.program->name).key("file").value(files[0]);
    json.key("backend").value(backend).key("seed").value(static_cast<int64_t>(options.seed));
    json.key("sizes").value(options.sizes.small ? "small" : "default");
    json.key("dims").begin_object();
    for (auto& [name, value] : program.dims) json.key(name).value(value);
    json.end_object().key("outputs").begin_array();
    for (auto& r : rows) {
      json.begin_object().key("name").value(r.name).key("shape").begin_array();
      for (int64_t s : r.shape) json.value(s);
      json.end_array().key("dtype").value(r.dtype);
      json.key("checksum").value(r.sum).key("abs_sum").value(r.abs_sum).key("nan_count").value(r.nans).end_object();
    }
    json.end_array().end_object();
    std::cout << json.str() << "\n";
    return kExitOk;
  }
  std::ostringstream out;
  out << "program " << program.program->name << "  backend " << backend << "  seed " << options.seed << "  sizes "
      << (options.sizes.small ? "small" : "default") << "\n  dims:";
  for (auto& d : program.program->dims) out << " " << d.name << "=" << program.dims.at(d.name);
  out << "\n";
  char line[512];
  for (auto& r : rows) {
    std::snprintf(line, sizeof line, "  output %-10s %-18s %-6s checksum %.9g  abs-sum %.9g%s\n", r.name.c_str(),
                  shape_text(r.shape).c_str(), r.dtype.c_str(), r.sum, r.abs_sum,
                  r.nans ? ("  NaN " + std::to_string(r.nans)).c_str() : "");
    out << line;
  }
  std::cout << out.str();
  return kExitOk;
}

}  // namespace solder::cli
