// solder run FILE — run a program on random inputs. With the cpu backend (and cuda, later) every
// output is verified against the float64 reference; with ref the reference itself is reported.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <atomic>
#include <optional>
#include <thread>
#include <sstream>

#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "backend/cpu/sampled_reference.h"
#include "backend/cuda/cuda_backend.h"
#include "cli.h"
#include "run_resources.h"
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

struct OutputRow {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  double sum = 0, abs_sum = 0;
  int64_t nans = 0;
  NonFinite non_finite;   // NaN and infinities of the output, and where
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
  row.non_finite = find_non_finite(t);
  return row;
}

// "NaN in 64 of 64 elements, first at [0], [1], [2], [3]" (and the same for infinities); "" when
// the output is finite everywhere.
std::string non_finite_text(const OutputRow& r) {
  const NonFinite& f = r.non_finite;
  int64_t elements = 1;
  for (int64_t s : r.shape) elements *= s;
  auto where = [&](const std::vector<int64_t>& first, int64_t count) {
    std::string text;
    for (size_t i = 0; i < first.size(); ++i) text += (i ? ", " : "") + index_text(r.shape, first[i]);
    return (count > 1 ? ", first at " : ", at ") + text + (count > static_cast<int64_t>(first.size()) ? ", ..." : "");
  };
  std::string text;
  if (f.nans)
    text += "NaN in " + std::to_string(f.nans) + " of " + std::to_string(elements) + " elements" + where(f.first_nans, f.nans);
  int64_t infinities = f.positive_infinities + f.negative_infinities;
  if (infinities) {
    if (!text.empty()) text += "; ";
    text += "infinite in " + std::to_string(infinities) + " of " + std::to_string(elements) + " elements (+inf " +
            std::to_string(f.positive_infinities) + ", -inf " + std::to_string(f.negative_infinities) + ")" +
            where(f.first_infinities, infinities);
  }
  if (!text.empty() && r.verified && r.check.nan_mismatches == 0 && r.check.inf_mismatches == 0)
    text += r.sampled ? "; the sampled reference elements agree" : "; the reference agrees";
  return text;
}

}  // namespace

// Above this many scalar evaluations the reference checks a sample of each output instead.
constexpr double kFullReferenceLimit = 3e8;

int command_run(const std::vector<std::string>& args) {
  ProgramOptions options;
  std::string backend = "default";
  bool no_fuse = false, full_reference = false;
  Command command{"run", "solder run FILE [--backend cuda|cpu|ref] [--no-fuse] [--small] [--dim NAME=VALUE]... [--seed S] [--tile-rows N] [--tile-cols N] [--streaming-elements N] [--no-skeleton] [--json]",
                  "Run a program on random inputs drawn from its declared distributions. With an executing\n"
                  "backend, compile it, run it, and verify every output against the float64 reference:\n"
                  "per output the relative error and its tolerance, then 'verified' or 'MISMATCH'\n"
                  "(exit status 1). Outputs are poisoned before the run, so unwritten elements fail. When the\n"
                  "full reference would be slow, a sample of each output is checked (at least 1024 elements\n"
                  "and every masked-boundary row). The cpu backend also prints the global-memory traffic of\n"
                  "each kernel beside the floor (each input read once, each output written once).\n"
                  "Each output's tolerance follows its dtypes and the length of its float32 chain (docs/\n"
                  "architecture.md); NaNs and infinities are counted and located even when they match. Before\n"
                  "allocating, the memory the run needs is compared with the machine's available memory (exit 2\n"
                  "with a suggestion when it does not fit); a run estimated above 5 s prints the estimate and a\n"
                  "progress line with an ETA on stderr.\n\n"
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

  // Compile first (no tensor data yet), then estimate the memory and the time before allocating.
  KernelProgram kernels;
  CudaCodegenOptions codegen;
  if (backend != "ref") {
    CompileOptions compile_options = backend == "cpu" ? CompileOptions{} : CompileOptions::for_gpu();
    compile_options.fuse = !no_fuse;
    tiling.apply(compile_options);
    if (backend == "cuda") {
      std::string note;
      codegen = skeletons_here(compile_options.gemm_skeleton, &note);
      if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
      if (std::string hw = gpu_hardware_note(); !hw.empty()) std::fprintf(stderr, "%s\n", hw.c_str());
    }
    kernels = compiler_step("compile", [&] { return compile_program(program, compile_options).kernels; });
  }
  double work = reference_work(program);
  bool sampled = backend != "ref" && !full_reference && work > kFullReferenceLimit;
  refuse_if_too_large(program, estimate_memory(program, backend == "ref" ? nullptr : &kernels, backend == "cpu", !sampled), backend);
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  double executor_seconds = backend == "cpu" ? work * kExecutorSecondsPerEvaluation / cores : 0;
  double reference_seconds = sampled ? 0 : work * kReferenceSecondsPerEvaluation / cores;
  if (executor_seconds + reference_seconds > kLongRunSeconds) {
    std::string parts;
    if (executor_seconds > 0) parts += "the CPU executor about " + duration_text(executor_seconds);
    if (reference_seconds > 0) parts += std::string(parts.empty() ? "" : ", ") + "the float64 reference about " + duration_text(reference_seconds);
    std::fprintf(stderr, "note: %.3g scalar evaluations on %u core(s): %s; --small, a smaller --dim%s is faster\n", work, cores,
                 parts.c_str(), backend == "cuda" ? "" : " or --backend cuda");
  }

  TensorSet inputs = compiler_step("inputs", [&] { return make_inputs(program, options.seed); });
  std::atomic<double> reference_done{0};
  std::atomic<int> reference_def{0};
  ReferenceOptions reference_options;
  reference_options.progress = [&](int d, double f) {
    reference_done.store(f, std::memory_order_relaxed);
    reference_def.store(d, std::memory_order_relaxed);
  };
  auto reference_detail = [&] {
    size_t d = static_cast<size_t>(reference_def.load());
    return "definition " + std::to_string(d + 1) + " of " + std::to_string(program.defs.size()) + ": " +
           program.defs[std::min(d, program.defs.size() - 1)].def->target.name;
  };
  auto run_full_reference = [&] {
    std::optional<ProgressLine> line;
    if (reference_seconds > kLongRunSeconds)
      line.emplace("reference", [&] { return reference_done.load(); }, reference_detail);
    return compiler_step("float64 reference", [&] { return run_reference(program, inputs, reference_options); });
  };

  std::vector<OutputRow> rows;
  ExecutionResult execution;
  std::string device;
  bool all_ok = true;
  if (backend == "ref") {
    TensorSet reference = run_full_reference();
    for (const TensorInfo* out : program.outputs()) rows.push_back(summarize(reference.at(out->name)));
  } else {
    TensorSet outputs;
    std::map<std::string, int64_t> unwritten;
    if (backend == "cpu") {
      ExecutionProgress progress;
      {
        std::optional<ProgressLine> line;
        if (executor_seconds > kLongRunSeconds) {
          // Each kernel counts equally; within a kernel, by blocks finished.
          double kernel_count = static_cast<double>(std::max<size_t>(kernels.kernels.size(), 1));
          auto fraction = [&] {
            size_t k = static_cast<size_t>(progress.kernel.load());
            if (k >= kernels.kernels.size()) return 1.0;
            double blocks = std::max<double>(static_cast<double>(kernels.kernels[k].blocks()), 1);
            return (static_cast<double>(k) + static_cast<double>(progress.blocks_done.load()) / blocks) / kernel_count;
          };
          auto detail = [&] {
            if (kernels.kernels.empty()) return std::string();
            size_t k = std::min(static_cast<size_t>(progress.kernel.load()), kernels.kernels.size() - 1);
            return "kernel " + std::to_string(k + 1) + " of " + std::to_string(kernels.kernels.size()) + ": " +
                   kernels.kernels[k].name + ", " + std::to_string(progress.blocks_done.load()) + " of " +
                   std::to_string(kernels.kernels[k].blocks()) + " blocks";
          };
          line.emplace("CPU executor", fraction, detail);
        }
        execution = compiler_step("CPU executor", [&] { return execute_kernel_program(kernels, inputs, &progress); });
      }
      outputs = execution.outputs;
      unwritten = execution.unwritten;
    } else {
      GpuRunResult gpu = compiler_step("GPU run", [&] { return run_on_gpu(kernels, inputs, codegen); });
      outputs = gpu.outputs;
      unwritten = gpu.unwritten;
      device = gpu.device;
    }
    TensorSet reference;
    std::vector<SampledOutput> samples;
    if (sampled) {
      SampleOptions sample_options;
      sample_options.seed = options.seed;
      std::fprintf(stderr, "reference: checking a sample of each output (the full reference needs %.3g evaluations)\n", work);
      samples = compiler_step("sampled reference", [&] { return run_sampled_reference(program, inputs, sample_options); });
    } else {
      reference = run_full_reference();
    }
    for (size_t o = 0; o < program.outputs().size(); ++o) {
      const TensorInfo* out = program.outputs()[o];
      const HostTensor& got = outputs.at(out->name);
      double tolerance = output_tolerance(program, out->name).value;
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
      json.key("inf_count").value(r.non_finite.positive_infinities + r.non_finite.negative_infinities);
      json.key("nan_first").begin_array();
      for (int64_t i : r.non_finite.first_nans) json.value(index_text(r.shape, i));
      json.end_array().key("inf_first").begin_array();
      for (int64_t i : r.non_finite.first_infinities) json.value(index_text(r.shape, i));
      json.end_array();
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
      std::snprintf(line, sizeof line, "  output %-10s %-18s %-6s error %.2e  tolerance %.1e  %s%s\n", r.name.c_str(),
                    shape_text(r.shape).c_str(), std::string(dtype_name(r.dtype)).c_str(), r.check.error, r.check.tolerance,
                    r.check.ok ? "ok" : ("MISMATCH: " + r.check.reason).c_str(), sample.c_str());
    } else {
      std::snprintf(line, sizeof line, "  output %-10s %-18s %-6s checksum %.9g  abs-sum %.9g%s\n", r.name.c_str(),
                    shape_text(r.shape).c_str(), std::string(dtype_name(r.dtype)).c_str(), r.sum, r.abs_sum,
                    r.nans ? ("  NaN " + std::to_string(r.nans)).c_str() : "");
    }
    out << line;
    if (std::string where = non_finite_text(r); !where.empty()) out << "    " << where << "\n";
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
