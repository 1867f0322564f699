// solder bench FILE — GPU time of one call of a compiled program, from CUDA events around CUDA-graph
// replays (warm-up, median of many), with TFLOP/s, GB/s and the ratios to the floor.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include "backend/cpu/inputs.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_inputs.h"
#include "backend/cuda/host_encoding.h"
#include "cli.h"
#include "commands.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
#include "support/json.h"

namespace solder::cli {
namespace {

// Matrix-multiply FLOPs by the usual convention: 2·p·r for every sum reduction whose body multiplies
// at least two loads (masking is not discounted).
double nominal_flops(const BoundProgram& program) {
  double flops = 0;
  for (auto& bd : program.defs) {
    if (bd.def->reduce != ReduceOp::sum) continue;
    if (tensors_used(bd.def->body).size() < 2) continue;
    double p = 1, r = 1;
    for (int64_t e : bd.p_extents) p *= static_cast<double>(e);
    for (int64_t e : bd.r_extents) r *= static_cast<double>(e);
    flops += 2 * p * r;
  }
  return flops;
}

// Progress on standard error (standard output holds the result, or the JSON line): each long step as
// it starts, with the seconds since the command started.
class Progress {
 public:
  void operator()(const std::string& step) const {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "solder bench: %s (%.1f s)\n", step.c_str(), seconds);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The inputs: drawn on the GPU where the generator can draw them (every distribution but
// sorted_randint), else (or with --host-inputs) drawn on the host and uploaded; the same values either way.
TimedInputs bench_inputs(const BoundProgram& program, uint64_t seed, bool host_inputs) {
  TimedInputs inputs;
  for (const TensorInfo* info : program.inputs()) {
    std::optional<InputDraw> draw = host_inputs ? std::nullopt : input_draw(*info, seed);
    if (draw) inputs.drawn[info->name] = *draw;
    else inputs.host[info->name] = make_input(*info, seed);
  }
  return inputs;
}

// --check-inputs: every input the GPU draws, drawn there and compared byte for byte with the host's
// make_input(); prints one line per input and returns whether all are equal.
bool check_drawn_inputs(const BoundProgram& program, uint64_t seed) {
  bool all_equal = true;
  for (const TensorInfo* info : program.inputs()) {
    std::optional<InputDraw> draw = input_draw(*info, seed);
    if (!draw) {
      std::printf("  %-12s drawn on the host (its distribution is not drawn on the GPU)\n", info->name.c_str());
      continue;
    }
    const size_t bytes = static_cast<size_t>(info->elements()) * static_cast<size_t>(dtype_bytes(info->dtype));
    runtime::DeviceBuffer buffer(std::max<size_t>(bytes, 4));
    draw_input_on_gpu(buffer.pointer(), info->elements(), *draw);
    runtime::synchronize_device();
    const std::vector<uint8_t> gpu = buffer.download<uint8_t>(bytes);
    const std::vector<uint8_t> host = encode_values(make_input(*info, seed).values, info->dtype);
    const int64_t size = dtype_bytes(info->dtype);
    int64_t differ = 0;
    for (int64_t e = 0; e < info->elements(); ++e)
      if (std::memcmp(&gpu[static_cast<size_t>(e * size)], &host[static_cast<size_t>(e * size)], static_cast<size_t>(size)) != 0) ++differ;
    std::printf("  %-12s %lld of %lld elements as the host draws them\n", info->name.c_str(), static_cast<long long>(info->elements() - differ),
                static_cast<long long>(info->elements()));
    all_equal = all_equal && differ == 0;
  }
  return all_equal;
}

}  // namespace

int command_bench(const std::vector<std::string>& args) {
  ProgramOptions options;
  int replays = 50;
  int calls_per_replay = 0;  // 0: enough that a replay lasts about 2 ms, as bench/peers.py
  bool compile_only = false, host_inputs = false, check_inputs = false;
  double bandwidth_tbs = 3.0, tensor_tflops = 710;
  CompileOptions compile_options = CompileOptions::for_gpu();
  Command command{"bench", "solder bench FILE [--dim NAME=VALUE]... [--tile-rows N] [--tile-cols N] [--streaming-elements N] [--no-skeleton] [--replays N] [--calls-per-replay N] [--bandwidth TB/s] [--tensor-rate TFLOP/s] [--json] [--compile-only] [--no-fuse] [--host-inputs] [--check-inputs]",
                  "Time one call of the compiled program on the GPU: every kernel launch of a call is captured\n"
                  "in a CUDA graph, replayed after a warm-up, and timed with CUDA events; the median of the\n"
                  "replays is reported, with the minimum and maximum, per call: one replay holds as many calls\n"
                  "as last about 2 ms (at most 1000; --calls-per-replay N sets it), as bench/peers.py captures\n"
                  "the peers, so the graph launch's latency is shared by many calls. Inputs are rotated among\n"
                  "several copies when one copy fits in L2 (50 MB), so each call reads cold data. The floor is the larger of\n"
                  "bytes / bandwidth (each input read once, each output written once) and FLOPs / tensor rate\n"
                  "(matrix-multiply FLOPs of sum reductions of products); the defaults are the H100 ceilings\n"
                  "measured in shared/reference (3.0 TB/s copy, 710 TFLOP/s bf16). With --json, $SOLDER_COMMIT (when set)\n"
                  "is recorded as the commit measured. A call over 2 ms runs on one input copy with replays\n"
                  "capped at about 2 s. --compile-only needs no GPU: it fills the compile cache (NVRTC) for a\n"
                  "later bench of the same program and options, so many benches can compile in parallel.\n"
                  "The inputs are drawn on the GPU from the seed (the values `solder run` draws on the host, in\n"
                  "milliseconds at any size); --host-inputs draws them on the host and uploads them, and\n"
                  "--check-inputs compares the two, input by input, and exits with status 1 if they differ.\n"
                  "Each long step is said on standard error as it starts."};
  add_program_options(command, options, true);
  TilingOptions tiling;
  add_tiling_options(command, tiling);
  command.options.push_back({"--replays", "N", "timed replays (default 50)", [&replays](const std::string& v) { replays = static_cast<int>(parse_integer_option(v, "--replays", 1, 1000000)); }});
  command.options.push_back({"--calls-per-replay", "N",
                             "calls captured in one timed graph, cycling over the input copies (default: enough for about 2 ms, at most 1000; "
                             "rounded up to a multiple of the copies)",
                             [&calls_per_replay](const std::string& v) { calls_per_replay = static_cast<int>(parse_integer_option(v, "--calls-per-replay", 1, 100000)); }});
  command.options.push_back({"--bandwidth", "TB/s", "memory bandwidth for the floor (default 3.0)", [&bandwidth_tbs](const std::string& v) { bandwidth_tbs = parse_real_option(v, "--bandwidth", 1e-6, 1e6); }});
  command.options.push_back({"--tensor-rate", "TFLOP/s", "tensor-core rate for the floor (default 710)", [&tensor_tflops](const std::string& v) { tensor_tflops = parse_real_option(v, "--tensor-rate", 1e-6, 1e9); }});
  command.options.push_back({"--compile-only", "", "compile through the cache and stop (no GPU needed)",
                             [&compile_only](const std::string&) { compile_only = true; }});
  command.options.push_back({"--host-inputs", "", "draw the inputs on the host and upload them (default: drawn on the GPU, the same values)",
                             [&host_inputs](const std::string&) { host_inputs = true; }});
  command.options.push_back({"--check-inputs", "", "draw each input on the GPU and on the host, compare them, and stop (exit 1 if any differ)",
                             [&check_inputs](const std::string&) { check_inputs = true; }});
  command.options.push_back({"--no-fuse", "", "time the unfused lowering (one kernel per definition; contractions on the GEMM skeleton)",
                             [&compile_options](const std::string&) { compile_options.fuse = false; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  tiling.apply(compile_options);
  std::string why, skeleton_note;
  const CudaCodegenOptions codegen = skeletons_here(compile_options.gemm_skeleton, &skeleton_note);
  if (!skeleton_note.empty()) std::fprintf(stderr, "%s\n", skeleton_note.c_str());
  if (compile_only) {
    if (!runtime::nvrtc_available(&why)) throw Error("solder bench --compile-only needs NVRTC: " + why);
    BoundProgram program = load_program(files[0], options.sizes);
    KernelProgram kernels = compiler_step("compile", [&] { return compile_program(program, compile_options).kernels; });
    GpuCompileReport report = compiler_step("NVRTC compile", [&] { return compile_for_gpu(kernels, codegen); });
    if (report.from_cache)
      std::printf("%s: %d kernel(s), already in the compile cache\n", files[0].c_str(), report.kernels);
    else
      std::printf("%s: %d kernel(s), compiled in %.1f s\n", files[0].c_str(), report.kernels, report.compile_seconds);
    return kExitOk;
  }
  if (!gpu_available(&why)) throw Error("solder bench needs a GPU: " + why);
  if (std::string hw = gpu_hardware_note(); !hw.empty()) std::fprintf(stderr, "%s\n", hw.c_str());
  BoundProgram program = load_program(files[0], options.sizes);
  if (check_inputs) {
    std::printf("inputs of %s, seed %llu: drawn on the GPU against the host\n", files[0].c_str(), static_cast<unsigned long long>(options.seed));
    return compiler_step("inputs", [&] { return check_drawn_inputs(program, options.seed); }) ? kExitOk : kExitMismatch;
  }
  const Progress progress;
  if (host_inputs) progress("drawing the inputs on the host");
  TimedInputs inputs = compiler_step("inputs", [&] { return bench_inputs(program, options.seed, host_inputs); });
  inputs.progress = progress;
  progress("compiling the program");
  KernelProgram kernels = compiler_step("compile", [&] { return compile_program(program, compile_options).kernels; });
  double bytes = 0;
  for (const TensorInfo* t : program.inputs()) bytes += static_cast<double>(t->bytes());
  for (const TensorInfo* t : program.outputs()) bytes += static_cast<double>(t->bytes());
  int sets = bytes < 50e6 ? static_cast<int>(std::min(8.0, std::ceil(100e6 / std::max(bytes, 1.0)))) : 1;
  GpuTiming t = compiler_step("GPU run", [&] { return time_on_gpu(kernels, inputs, sets, replays, codegen, calls_per_replay); });
  sets = t.input_sets;
  double flops = nominal_flops(program);
  double floor_us = std::max(bytes / (bandwidth_tbs * 1e12), flops / (tensor_tflops * 1e12)) * 1e6;
  double tflops = flops / (t.median_us * 1e-6) / 1e12, gbs = bytes / (t.median_us * 1e-6) / 1e9;
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  if (options.json) {
    JsonWriter json;
    json.begin_object().key("program").value(program.program->name).key("file").value(files[0]).key("dims").begin_object();
    for (auto& [name, value] : program.dims) json.key(name).value(value);
    json.end_object().key("kernels").value(static_cast<int64_t>(kernels.kernels.size()));
    json.key("median_us").value(t.median_us).key("min_us").value(t.min_us).key("max_us").value(t.max_us).key("replays").value(t.replays);
    json.key("input_sets").value(sets).key("calls_per_replay").value(t.calls_per_replay).key("flops").value(flops).key("bytes").value(bytes).key("floor_us").value(floor_us);
    json.key("tflops").value(tflops).key("gbs").value(gbs).key("device").value(t.device).key("date").value(date);
    // when the timed replays ran, epoch milliseconds (integers: the writer's %.9g would round seconds to 10 s)
    json.key("timed_span_ms").begin_array().value(static_cast<int64_t>(t.timed_from * 1e3))
        .value(static_cast<int64_t>(t.timed_to * 1e3)).end_array();
    // the commit measured, when the caller says (a device copy of the tree has no .git)
    if (const char* commit = std::getenv("SOLDER_COMMIT"); commit && *commit) json.key("commit").value(std::string(commit));
    json.end_object();
    std::cout << json.str() << "\n";
    return kExitOk;
  }
  std::printf("program %s on %s (%s), %zu kernel(s), %d input set(s), %d call(s) per replay\n", program.program->name.c_str(),
              t.device.c_str(), date, kernels.kernels.size(), sets, t.calls_per_replay);
  std::printf("  time    median %.2f us  (min %.2f, max %.2f, %d replays)\n", t.median_us, t.min_us, t.max_us, t.replays);
  std::printf("  rate    %.1f TFLOP/s, %.0f GB/s\n", tflops, gbs);
  std::printf("  floor   %.2f us (%.3g bytes at %.1f TB/s, %.3g FLOPs at %.0f TFLOP/s): %.2fx the floor\n", floor_us, bytes,
              bandwidth_tbs, flops, tensor_tflops, t.median_us / std::max(floor_us, 1e-9));
  return kExitOk;
}

}  // namespace solder::cli
