// solder run FILE — run a program on random inputs. With the cpu backend (and cuda, later) every
// output is verified against the float64 reference; with ref the reference itself is reported.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "backend/cpu/sampled_reference.h"
#include "backend/cuda/cuda_backend.h"
#include "cli.h"
#include "commands.h"
#include "driver/compile.h"
#include "support/json.h"

namespace solder::cli {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string bytes_text(double bytes) {
  char buffer[32];
  if (bytes >= 1e9) std::snprintf(buffer, sizeof buffer, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(buffer, sizeof buffer, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1e3) std::snprintf(buffer, sizeof buffer, "%.1f KB", bytes / 1e3);
  else std::snprintf(buffer, sizeof buffer, "%.0f B", bytes);
  return buffer;
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

struct OutputRow {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  double sum = 0, abs_sum = 0;
  int64_t nans = 0;
  bool verified = false;  // a backend output compared with the reference
  int64_t sampled = 0;    // elements compared when the reference was sampled (0: all)
  OutputCheck check;
};

OutputRow summarize(const HostTensor& t) {
  OutputRow row{t.name, t.shape, t.dtype};
  for (double v : t.values) {
    if (std::isnan(v)) { ++row.nans; continue; }
    row.sum += v;
    row.abs_sum += std::fabs(v);
  }
  return row;
}

}  // namespace

// Above this many scalar evaluations the reference checks a sample of each output instead.
constexpr double kFullReferenceLimit = 3e8;

int command_run(const std::vector<std::string>& args) {
  ProgramOptions options;
  std::string backend = "default";
  bool no_fuse = false, full_reference = false;
  Command command{"run", "solder run FILE [--backend cuda|cpu|ref] [--no-fuse] [--small] [--dim NAME=VALUE]... [--seed S] [--tile-rows N] [--tile-cols N] [--streaming-elements N] [--json]",
                  "Run a program on random inputs drawn from its declared distributions. With an executing\n"
                  "backend, compile it, run it, and verify every output against the float64 reference:\n"
                  "per output the relative error and its tolerance, then 'verified' or 'MISMATCH'\n"
                  "(exit status 1). Outputs are poisoned before the run, so unwritten elements fail. When the\n"
                  "full reference would be slow, a sample of each output is checked (at least 1024 elements\n"
                  "and every masked-boundary row). The cpu backend also prints the global-memory traffic of\n"
                  "each kernel beside the floor (each input read once, each output written once).\n\n"
                  "backends:\n"
                  "  cuda  generated CUDA on the GPU (the default when an sm_90 GPU and NVRTC are present)\n"
                  "  cpu   the CPU executor of the Kernel IR, in float32 (the default otherwise)\n"
                  "  ref   the float64 reference interpreter alone: checksums of the outputs"};
  add_program_options(command, options, true);
  command.options.push_back({"--backend", "NAME", "cuda, cpu or ref (default: cuda when a GPU is present, else cpu)",
                             [&backend](const std::string& v) { backend = v; }});
  command.options.push_back({"--no-fuse", "", "run the unfused lowering (one kernel per definition)",
                             [&no_fuse](const std::string&) { no_fuse = true; }});
  command.options.push_back({"--full-reference", "", "verify every output element, however long the reference takes",
                             [&full_reference](const std::string&) { full_reference = true; }});
  TilingOptions tiling;
  add_tiling_options(command, tiling);
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  BoundProgram program = load_program(files[0], options.sizes);
  if (backend == "default") {
    std::string why;
    if (gpu_available(&why)) {
      backend = "cuda";
    } else {
      backend = "cpu";
      std::fprintf(stderr, "note: no GPU backend (%s); running on the CPU executor\n", why.c_str());
    }
  }
  if (backend != "ref" && backend != "cpu" && backend != "cuda")
    throw Error("--backend expects one of: cuda, cpu, ref; found '" + backend + "'");
  if (backend == "cuda") {
    std::string why;
    if (!gpu_available(&why)) throw Error("--backend cuda: " + why);
  }

  TensorSet inputs = make_inputs(program, options.seed);
  ReferenceOptions reference_options;
  ProgressPrinter progress(program);
  double work = reference_work(program);
  bool sampled = backend != "ref" && !full_reference && work > kFullReferenceLimit;
  if (work > 5e7 && !sampled) {
    std::fprintf(stderr, "reference: %.3g scalar evaluations in float64; this may take a while (--small is faster)\n", work);
    reference_options.progress = [&progress](int d, double f) { progress(d, f); };
  }

  std::vector<OutputRow> rows;
  ExecutionResult execution;
  KernelProgram kernels;
  std::string device;
  bool all_ok = true;
  if (backend == "ref") {
    TensorSet reference = run_reference(program, inputs, reference_options);
    for (const TensorInfo* out : program.outputs()) rows.push_back(summarize(reference.at(out->name)));
  } else {
    CompileOptions compile_options = backend == "cpu" ? CompileOptions{} : CompileOptions::for_gpu();
    compile_options.fuse = !no_fuse;
    tiling.apply(compile_options.fusion);
    kernels = compile_program(program, compile_options).kernels;
    TensorSet outputs;
    std::map<std::string, int64_t> unwritten;
    if (backend == "cpu") {
      execution = execute_kernel_program(kernels, inputs);
      outputs = execution.outputs;
      unwritten = execution.unwritten;
    } else {
      GpuRunResult gpu = run_on_gpu(kernels, inputs);
      outputs = gpu.outputs;
      unwritten = gpu.unwritten;
      device = gpu.device;
    }
    double tolerance = tolerance_for(program);
    TensorSet reference;
    std::vector<SampledOutput> samples;
    if (sampled) {
      SampleOptions sample_options;
      sample_options.seed = options.seed;
      std::fprintf(stderr, "reference: checking a sample of each output (the full reference needs %.3g evaluations)\n", work);
      samples = run_sampled_reference(program, inputs, sample_options);
    } else {
      reference = run_reference(program, inputs, reference_options);
    }
    for (size_t o = 0; o < program.outputs().size(); ++o) {
      const TensorInfo* out = program.outputs()[o];
      const HostTensor& got = outputs.at(out->name);
      OutputRow row = summarize(got);
      row.verified = true;
      if (sampled) {
        const SampledOutput& s = samples[o];
        HostTensor got_sample{out->name, {static_cast<int64_t>(s.flat_indices.size())}, out->dtype, {}};
        for (int64_t i : s.flat_indices) got_sample.values.push_back(got.values[static_cast<size_t>(i)]);
        HostTensor ref_sample{out->name, got_sample.shape, out->dtype, s.values};
        row.check = compare_output(got_sample, ref_sample, tolerance);
        row.sampled = static_cast<int64_t>(s.flat_indices.size());
      } else {
        row.check = compare_output(got, reference.at(out->name), tolerance);
      }
      if (unwritten[out->name] > 0) {
        row.check.ok = false;
        row.check.unwritten = unwritten[out->name];
        row.check.reason = std::to_string(unwritten[out->name]) + " element(s) never written";
      }
      all_ok &= row.check.ok;
      rows.push_back(row);
    }
  }

  int64_t floor_bytes = 0;
  for (const TensorInfo* t : program.inputs()) floor_bytes += t->bytes();
  for (const TensorInfo* t : program.outputs()) floor_bytes += t->bytes();
  int64_t total_read = 0, total_written = 0;
  for (auto& k : execution.traffic) { total_read += k.bytes_read; total_written += k.bytes_written; }

  if (options.json) {
    JsonWriter json;
    json.begin_object().key("program").value(program.program->name).key("file").value(files[0]);
    json.key("backend").value(backend).key("fused").value(backend != "ref" && !no_fuse);
    if (!device.empty()) json.key("device").value(device);
    json.key("seed").value(static_cast<int64_t>(options.seed));
    json.key("sizes").value(options.sizes.small ? "small" : "default");
    json.key("dims").begin_object();
    for (auto& [name, value] : program.dims) json.key(name).value(value);
    json.end_object().key("outputs").begin_array();
    for (auto& r : rows) {
      json.begin_object().key("name").value(r.name).key("shape").begin_array();
      for (int64_t s : r.shape) json.value(s);
      json.end_array().key("dtype").value(dtype_name(r.dtype));
      json.key("checksum").value(r.sum).key("abs_sum").value(r.abs_sum).key("nan_count").value(r.nans);
      if (r.verified) {
        json.key("rel_error").value(r.check.error).key("tolerance").value(r.check.tolerance).key("ok").value(r.check.ok);
        if (r.sampled) json.key("sampled_elements").value(r.sampled);
        if (!r.check.ok) json.key("reason").value(r.check.reason);
      }
      json.end_object();
    }
    json.end_array();
    if (backend == "cuda") json.key("verified").value(all_ok);
    if (backend == "cpu") {
      json.key("kernels").begin_array();
      for (auto& k : execution.traffic)
        json.begin_object().key("name").value(k.kernel).key("blocks").value(k.blocks).key("bytes_read").value(k.bytes_read)
            .key("bytes_written").value(k.bytes_written).end_object();
      json.end_array().key("floor_bytes").value(floor_bytes).key("bytes_moved").value(total_read + total_written);
      json.key("verified").value(all_ok);
    }
    json.end_object();
    std::cout << json.str() << "\n";
    return all_ok ? kExitOk : kExitMismatch;
  }

  std::ostringstream out;
  out << "program " << program.program->name << "  backend " << backend;
  if (backend != "ref") out << " (" << (no_fuse ? "unfused" : "fused") << ", " << kernels.kernels.size() << " kernel" << (kernels.kernels.size() == 1 ? "" : "s") << ")";
  out << "  seed " << options.seed << "  sizes " << (options.sizes.small ? "small" : "default");
  if (!device.empty()) out << "  device " << device;
  out << "\n  dims:";
  for (auto& d : program.program->dims) out << " " << d.name << "=" << program.dims.at(d.name);
  out << "\n";
  char line[512];
  for (auto& r : rows) {
    if (r.verified) {
      std::string sample = r.sampled ? "  (" + std::to_string(r.sampled) + " sampled)" : "";
      std::snprintf(line, sizeof line, "  output %-10s %-18s %-6s error %.2e  tolerance %.0e  %s%s\n", r.name.c_str(),
                    shape_text(r.shape).c_str(), std::string(dtype_name(r.dtype)).c_str(), r.check.error, r.check.tolerance,
                    r.check.ok ? "ok" : ("MISMATCH: " + r.check.reason).c_str(), sample.c_str());
    } else {
      std::snprintf(line, sizeof line, "  output %-10s %-18s %-6s checksum %.9g  abs-sum %.9g%s\n", r.name.c_str(),
                    shape_text(r.shape).c_str(), std::string(dtype_name(r.dtype)).c_str(), r.sum, r.abs_sum,
                    r.nans ? ("  NaN " + std::to_string(r.nans)).c_str() : "");
    }
    out << line;
  }
  if (backend == "cpu") {
    out << "  global memory: " << bytes_text(static_cast<double>(total_read)) << " read, "
        << bytes_text(static_cast<double>(total_written)) << " written; floor " << bytes_text(static_cast<double>(floor_bytes))
        << " (inputs read once, outputs written once)";
    if (floor_bytes > 0) {
      std::snprintf(line, sizeof line, ": %.2fx the floor\n", static_cast<double>(total_read + total_written) / static_cast<double>(floor_bytes));
      out << line;
    }
    for (auto& k : execution.traffic) {
      std::snprintf(line, sizeof line, "    kernel %-16s %6lld blocks  read %-10s written %s\n", k.kernel.c_str(),
                    static_cast<long long>(k.blocks), bytes_text(static_cast<double>(k.bytes_read)).c_str(),
                    bytes_text(static_cast<double>(k.bytes_written)).c_str());
      out << line;
    }
  }
  if (backend != "ref") out << (all_ok ? "verified" : "MISMATCH") << "\n";
  std::cout << out.str();
  return all_ok ? kExitOk : kExitMismatch;
}

}  // namespace solder::cli
