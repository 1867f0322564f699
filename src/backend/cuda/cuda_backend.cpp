#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <map>
#include <memory>
#include <optional>

#include "backend/cuda/cuda_expr.h"
#include "backend/cuda/device_inputs.h"
#include "backend/cuda/host_encoding.h"
#include "backend/cuda/tma_operand.h"
#include "hw/hardware.h"
#include "ir/diagnostics.h"
#include "runtime/attention_args.h"
#include "runtime/runtime.h"
#include "runtime/tma.h"

namespace solder {
namespace {


// A split-K skeleton kernel's workspace (solder::gemm::SplitKWorkspace): f32 partials and counters,
// allocated and zeroed once per loaded module, one per kernel. A call's launches of one kernel never
// overlap (the join orders consecutive calls), and each launch leaves its counters zero again.
struct SplitKBuffers {
  runtime::DeviceBuffer partials, counters;
};

// $SOLDER_CONCURRENT=0 launches a program's kernels one after another on one stream (the A/B of the
// concurrent schedule); unset (or another value), independent kernels run on up to kMaxStreams streams.
constexpr int kMaxStreams = 4;
int max_streams() {
  static const int streams = [] {
    const char* text = std::getenv("SOLDER_CONCURRENT");
    return text && std::string(text) == "0" ? 1 : kMaxStreams;
  }();
  return streams;
}

// How a call's launches reach the GPU (kernel_dependencies.h): the schedule, the streams besides the
// caller's, an event per launch that another stream waits for, the fork (recorded on the caller's stream
// before the first launch) and a join event per extra stream. Created with the loaded program, outside
// any capture; a call records and waits for them again (in a captured graph: its edges).
struct ConcurrentLaunches {
  LaunchSchedule schedule;
  std::vector<std::unique_ptr<runtime::Stream>> streams;  // streams 1, 2, ... of the schedule
  std::vector<std::unique_ptr<runtime::Event>> done;      // per launch; null unless waited for
  std::unique_ptr<runtime::Event> fork;
  std::vector<std::unique_ptr<runtime::Event>> joins;     // per extra stream
};

ConcurrentLaunches concurrent_launches(const GeneratedModule& generated) {
  std::vector<GlobalUse> uses;
  for (auto& k : generated.kernels) uses.push_back(k.globals);
  ConcurrentLaunches c;
  c.schedule = schedule_launches(kernel_dependencies(uses), max_streams());
  c.done.resize(generated.kernels.size());
  if (c.schedule.streams == 1) return c;
  for (int s = 1; s < c.schedule.streams; ++s) {
    c.streams.push_back(std::make_unique<runtime::Stream>());
    c.joins.push_back(std::make_unique<runtime::Event>());
  }
  c.fork = std::make_unique<runtime::Event>();
  for (auto& step : c.schedule.steps)
    for (size_t w : step.waits)
      if (!c.done[w]) c.done[w] = std::make_unique<runtime::Event>();
  return c;
}

struct LoadedProgram {
  runtime::Module module;
  std::vector<runtime::Function> functions;
  GeneratedModule generated;
  double compile_seconds = 0;
  bool from_cache = false;
  std::vector<SplitKBuffers> split_k;  // per kernel (empty buffers unless it runs split-K)
  ConcurrentLaunches concurrent;
};

// NVRTC flags for a generated module: the GEMM skeleton's CuTe code is built with NDEBUG (no device
// asserts, no pipeline role checks: docs/gemm-skeleton.md).
runtime::CompileFlags compile_flags(const GeneratedModule& generated) {
  runtime::CompileFlags flags;
  for (auto& k : generated.kernels)
    if (k.gemm || k.attention) {
      flags.defines.push_back("NDEBUG");
      break;
    }
  return flags;
}

LoadedProgram load(const KernelProgram& program, const CudaCodegenOptions& codegen) {
  GeneratedModule generated = generate_cuda(program, codegen);
  runtime::CompiledModule compiled = runtime::compile_cuda(generated.source, program.name + ".cu", compile_flags(generated));
  LoadedProgram loaded{runtime::Module(compiled), {}, generated, compiled.compile_seconds, compiled.from_cache};
  for (auto& k : generated.kernels) {
    loaded.functions.push_back(loaded.module.get_function(k.name));
    SplitKBuffers buffers;
    if (k.gemm && (k.gemm->split_k > 1 || k.gemm->tail_split > 1)) {
      buffers.partials = runtime::DeviceBuffer(static_cast<size_t>(k.gemm->workspace_floats) * 4);
      buffers.counters = runtime::DeviceBuffer(static_cast<size_t>(k.gemm->counters) * 4);
      runtime::fill_u32(buffers.counters.pointer(), 0, static_cast<size_t>(k.gemm->counters));
    }
    loaded.split_k.push_back(std::move(buffers));
  }
  loaded.concurrent = concurrent_launches(loaded.generated);
  return loaded;
}

// A data-dependent index out of range in the last launches (cuda_expr.h, solder_checked_index)
// fails the run with the message the CPU executor gives. Call after the stream is synchronized.
void check_indices(const LoadedProgram& loaded, const KernelProgram& program) {
  if (!loaded.generated.checks_indices) return;
  long long record[3] = {0, 0, 0};
  loaded.module.read_global(kIndexErrorVariable, record, sizeof record);
  if (record[0] == 0) return;
  auto parameter = static_cast<size_t>(record[0] - 1);
  auto dim = static_cast<size_t>(record[1]);
  if (parameter >= program.globals.size() || dim >= program.globals[parameter].shape.size())
    throw Error("GPU run: a data-dependent index was out of range (unreadable record; please report)");
  const GlobalTensor& g = program.globals[parameter];
  throw Error("load out of range on the GPU: index " + std::to_string(record[2]) + " of dim " + std::to_string(dim + 1) +
              " of '" + g.name + "' is outside [0, " + std::to_string(g.shape[dim]) + ")");
}

size_t padded_bytes(const GlobalTensor& g) { return static_cast<size_t>((g.bytes() + 3) / 4 * 4); }

// The inputs' bytes in the device encoding, by global index (encoded once, uploaded per copy), except
// the inputs in `drawn` (drawn on the GPU by allocate()).
std::map<size_t, std::vector<uint8_t>> encode_inputs(const KernelProgram& program, const TensorSet& inputs,
                                                     const std::map<std::string, InputDraw>& drawn = {}) {
  std::map<size_t, std::vector<uint8_t>> encoded;
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    if (g.role != GlobalRole::input || drawn.count(g.name)) continue;
    auto it = inputs.find(g.name);
    if (it == inputs.end()) throw Error("GPU run: input '" + g.name + "' was not provided");
    encoded[i] = encode_values(it->second.values, g.dtype);
  }
  return encoded;
}

// Device memory for every global, inputs uploaded (or drawn on the GPU, the padding zero) and the rest
// poisoned.
std::vector<runtime::DeviceBuffer> allocate(const KernelProgram& program, const std::map<size_t, std::vector<uint8_t>>& encoded,
                                            const std::map<std::string, InputDraw>& drawn = {}) {
  std::vector<runtime::DeviceBuffer> buffers;
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    buffers.emplace_back(std::max<size_t>(4, padded_bytes(g)));
    auto draw = g.role == GlobalRole::input ? drawn.find(g.name) : drawn.end();
    if (draw != drawn.end()) {
      runtime::fill_u32(buffers.back().pointer(), 0, buffers.back().bytes() / 4);
      draw_input_on_gpu(buffers.back().pointer(), g.elements(), draw->second);
    } else if (g.role == GlobalRole::input) {
      std::vector<uint8_t> bytes = encoded.at(i);
      bytes.resize(buffers.back().bytes(), 0);
      buffers.back().upload(bytes);
    } else {
      runtime::fill_u32(buffers.back().pointer(), poison_fill_word(g.dtype), buffers.back().bytes() / 4);
    }
  }
  if (!drawn.empty()) runtime::synchronize_device();  // (the draws run on the default stream; the timed stream may not wait for it)
  return buffers;
}

// A kernel on the GEMM skeleton (GemmSkeletonLaunch): the operands' tensor maps, encoded for this
// call's pointers, the shape, and the epilogue functor, whose members are every global's pointer.
void launch_gemm_skeleton(const runtime::Function& function, const GemmSkeletonLaunch& g, const runtime::LaunchConfig& config,
                          std::vector<runtime::DevicePtr>& pointers, const SplitKBuffers& split_k) {
  auto map = [&](const GemmSkeletonLaunch::Operand& o, const char* what) {
    return runtime::encode_gemm_operand(tma_operand(o, pointers.at(o.global)), what);
  };
  runtime::TensorMapBytes a = map(g.a, "A"), b = map(g.b, "B");
  struct {  // solder::gemm::GemmShape
    int m, n, k, batch, broadcast_a, broadcast_b;
  } shape{g.m, g.n, g.k, g.batch, g.broadcast_a ? 1 : 0, g.broadcast_b ? 1 : 0};
  struct {  // solder::gemm::SplitKWorkspace
    runtime::DevicePtr partials, counters;
  } workspace{split_k.partials.pointer(), split_k.counters.pointer()};
  if ((g.split_k > 1 || g.tail_split > 1) && (!workspace.partials || !workspace.counters))
    throw Error("GPU run: the split-K kernel has no workspace (please report)");
  if (g.b2) {
    runtime::TensorMapBytes b2 = map(*g.b2, "B2");
    void* args[] = {&a, &b, &b2, &shape, pointers.data(), &workspace};
    runtime::launch(function, config, args);
    return;
  }
  if (g.a_second) {  // K ranges: (a, b, a2, b2, shape, k2, epilogue, workspace)
    runtime::TensorMapBytes a2 = map(*g.a_second, "A (second K range)"), b2 = map(*g.b_second, "B (second K range)");
    int k2 = g.k_second;
    void* args[] = {&a, &b, &a2, &b2, &shape, &k2, pointers.data(), &workspace};
    runtime::launch(function, config, args);
    return;
  }
  if (g.prologue) {
    void* args[] = {&a, &b, &shape, pointers.data(), pointers.data()};
    runtime::launch(function, config, args);
    return;
  }
  void* args[] = {&a, &b, &shape, pointers.data(), &workspace};
  runtime::launch(function, config, args);
}

// A kernel on the attention skeleton (AttentionSkeletonLaunch): q, k and v (and a staged bias's tile and
// column) as tensor maps encoded for this call's pointers, packed with the shape and the functors by
// runtime::AttentionLaunchArgs.
void launch_attention_skeleton(const runtime::Function& function, const AttentionSkeletonLaunch& g, const runtime::LaunchConfig& config,
                               std::vector<runtime::DevicePtr>& pointers) {
  auto map = [&](const GemmSkeletonLaunch::Operand& o, const char* what) {
    return runtime::encode_gemm_operand(tma_operand(o, pointers.at(o.global)), what);
  };
  runtime::TensorMapBytes q = map(g.q, "Q"), k = map(g.k, "K"), v = map(g.v, "V");
  std::optional<runtime::TensorMapBytes> bias_tile, bias_column;
  if (g.bias_tile) bias_tile = map(*g.bias_tile, "bias tile");
  if (g.bias_column) bias_column = map(*g.bias_column, "bias column");
  std::optional<runtime::TensorMapBytes> out;
  if (g.out) out = map(*g.out, "O");
  runtime::AttentionLaunchArgs packed(q, k, v, attention_shape_arg(g), bias_tile, bias_column, pointers, out);
  auto args = packed.parameters(pointers.data());
  runtime::launch(function, config, args.data());
}

// Programmatic dependent launch (A/B runs): $SOLDER_PDL=0 launches every kernel without it; =all gives
// it to every GEMM-skeleton kernel, whatever its predicted time (kProgrammaticLaunchMaxUs); unset (or
// another value), the kernels the writers marked (GeneratedKernel::programmatic) take it.
enum class ProgrammaticLaunch { off, marked, every_gemm };
ProgrammaticLaunch programmatic_launch_mode() {
  static const ProgrammaticLaunch mode = [] {
    const char* text = std::getenv("SOLDER_PDL");
    if (text && std::string(text) == "0") return ProgrammaticLaunch::off;
    if (text && std::string(text) == "all") return ProgrammaticLaunch::every_gemm;
    return ProgrammaticLaunch::marked;
  }();
  return mode;
}

// One call of the program: its launches on the streams of loaded.concurrent's schedule, forked from and
// joined back into `stream` (with one stream: in order on `stream`, nothing recorded).
void launch_all(const LoadedProgram& loaded, std::vector<runtime::DevicePtr>& pointers, CUstream_st* stream) {
  std::vector<void*> args;
  for (auto& p : pointers) args.push_back(&p);
  const ConcurrentLaunches& c = loaded.concurrent;
  auto stream_of = [&](int s) { return s == 0 ? stream : c.streams[static_cast<size_t>(s - 1)]->handle(); };
  std::vector<bool> started(static_cast<size_t>(c.schedule.streams), false);
  if (c.fork) c.fork->record(stream);
  for (size_t k = 0; k < loaded.functions.size(); ++k) {
    const GeneratedKernel& info = loaded.generated.kernels[k];
    const LaunchStep& step = c.schedule.steps[k];
    CUstream_st* on = stream_of(step.stream);
    const bool opens_stream = step.stream > 0 && !started[static_cast<size_t>(step.stream)];
    if (opens_stream) runtime::wait_event(on, *c.fork);
    started[static_cast<size_t>(step.stream)] = true;
    for (size_t w : step.waits) runtime::wait_event(on, *c.done[w]);
    runtime::LaunchConfig config;
    config.grid.x = static_cast<unsigned>(info.blocks);
    config.block.x = static_cast<unsigned>(info.threads);
    config.cluster.x = static_cast<unsigned>(info.cluster);
    config.dynamic_shared_bytes = static_cast<unsigned>(info.shared_bytes);
    config.stream = on;
    // (a launch that waits for another stream, or opens one, keeps full dependencies: no programmatic launch)
    const ProgrammaticLaunch pdl = programmatic_launch_mode();
    config.programmatic = pdl != ProgrammaticLaunch::off && step.waits.empty() && !opens_stream &&
                          (info.programmatic || (pdl == ProgrammaticLaunch::every_gemm && info.gemm));
    if (info.gemm) launch_gemm_skeleton(loaded.functions[k], *info.gemm, config, pointers, loaded.split_k[k]);
    else if (info.attention) launch_attention_skeleton(loaded.functions[k], *info.attention, config, pointers);
    else runtime::launch(loaded.functions[k], config, args.data());
    if (c.done[k]) c.done[k]->record(config.stream);
  }
  for (int s = 1; s < c.schedule.streams; ++s) {
    if (!started[static_cast<size_t>(s)]) continue;
    c.joins[static_cast<size_t>(s - 1)]->record(stream_of(s));
    runtime::wait_event(stream, *c.joins[static_cast<size_t>(s - 1)]);
  }
}

// Calls per timed graph replay when time_on_gpu picks (as bench/peers.py does for the peers).
constexpr double kTargetReplayUs = 2000.0;
constexpr int kMaxCallsPerReplay = 1000;

}  // namespace

runtime::AttentionShapeArg attention_shape_arg(const AttentionSkeletonLaunch& g) {
  return {g.batch, g.heads, g.heads_kv, g.seq_q, g.seq_k, g.q_heads, g.q_head0, g.k_heads, g.k_head0, g.v_heads, g.v_head0};
}

bool gpu_available(std::string* why) {
  runtime::DeviceInfo device = runtime::query_device();
  if (!device.available) {
    if (why) *why = device.why_unavailable;
    return false;
  }
  if (!device.runs_sm90a()) {
    if (why) *why = "the GPU (" + device.name + ", compute capability " + std::to_string(device.major) + "." +
                    std::to_string(device.minor) + ") is not a Hopper sm_90 device, the only target Solder generates";
    return false;
  }
  std::string nvrtc_why;
  if (!runtime::nvrtc_available(&nvrtc_why)) {
    if (why) *why = nvrtc_why;
    return false;
  }
  return true;
}

CudaCodegenOptions skeletons_here(bool& gemm_skeleton, std::string* note) {
  CudaCodegenOptions codegen;
  std::string why;
  if (!runtime::cutlass_include_dir(&why).empty()) return codegen;
  codegen.attention_skeleton_off = "the CUTLASS/CuTe headers were not found (" + why + ")";
  gemm_skeleton = false;
  if (note)
    *note = "note: the sm_90a GEMM and attention skeletons are off: " + codegen.attention_skeleton_off +
            "; every contraction runs in the fused kernels' own tensor-core or scalar code";
  return codegen;
}

std::string gpu_hardware_note() {
  runtime::DeviceInfo device = runtime::query_device();
  return device.available ? hardware_mismatch_note(device.name) : "";
}

GpuRunResult run_on_gpu(const KernelProgram& program, const TensorSet& inputs, const CudaCodegenOptions& codegen) {
  GpuRunResult result;
  result.device = runtime::query_device().name;
  LoadedProgram loaded = load(program, codegen);
  result.compile_seconds = loaded.compile_seconds;
  result.from_cache = loaded.from_cache;
  std::vector<runtime::DeviceBuffer> buffers = allocate(program, encode_inputs(program, inputs));
  std::vector<runtime::DevicePtr> pointers;
  for (auto& b : buffers) pointers.push_back(b.pointer());
  runtime::Stream stream;
  launch_all(loaded, pointers, stream.handle());
  stream.synchronize();
  check_indices(loaded, program);
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    if (g.role != GlobalRole::output) continue;
    std::vector<uint8_t> bytes = buffers[i].download<uint8_t>(buffers[i].bytes());
    result.unwritten[g.name] = count_poison(bytes, g.dtype, g.elements());
    result.outputs[g.name] = HostTensor{g.name, g.shape, g.dtype, decode_values(bytes, g.dtype, g.elements())};
  }
  return result;
}

GpuCompileReport compile_for_gpu(const KernelProgram& program, const CudaCodegenOptions& codegen) {
  GeneratedModule generated = generate_cuda(program, codegen);
  runtime::CompiledModule compiled = runtime::compile_cuda(generated.source, program.name + ".cu", compile_flags(generated));
  GpuCompileReport report;
  report.kernels = static_cast<int>(generated.kernels.size());
  report.compile_seconds = compiled.compile_seconds;
  report.from_cache = compiled.from_cache;
  report.cache_path = compiled.cache_path;
  return report;
}

GpuTiming time_on_gpu(const KernelProgram& program, const TimedInputs& inputs, int input_sets, int replays, const CudaCodegenOptions& codegen,
                      int calls_per_replay) {
  auto say = [&](const std::string& step) {
    if (inputs.progress) inputs.progress(step);
  };
  GpuTiming timing;
  timing.device = runtime::query_device().name;
  say("loading the kernels (NVRTC compile unless cached)");
  LoadedProgram loaded = load(program, codegen);
  runtime::Stream stream;
  // `calls` calls in one graph, call c on input copy c % sets (calls 0: one per copy).
  auto capture = [&](std::vector<std::vector<runtime::DeviceBuffer>>& sets, size_t calls = 0) {
    if (calls == 0) calls = sets.size();
    return runtime::capture_graph(stream, [&] {
      for (size_t c = 0; c < calls; ++c) {
        std::vector<runtime::DevicePtr> pointers;
        for (auto& b : sets[c % sets.size()]) pointers.push_back(b.pointer());
        launch_all(loaded, pointers, stream.handle());
      }
    });
  };
  say(inputs.drawn.empty() ? "uploading the inputs" : inputs.host.empty() ? "drawing the inputs on the GPU" : "drawing the inputs on the GPU and uploading the rest");
  const std::map<size_t, std::vector<uint8_t>> encoded = encode_inputs(program, inputs.host, inputs.drawn);
  std::vector<std::vector<runtime::DeviceBuffer>> sets;
  sets.push_back(allocate(program, encoded, inputs.drawn));
  say("calibrating the replays");
  // A slow program (a call over 2 ms) gains nothing from rotated inputs and would spend minutes in
  // replays: one copy of the inputs, and replays capped at about 2 s of GPU time (at least 5).
  {
    runtime::Graph probe = capture(sets);
    double call_ms = runtime::time_replays(probe, stream, 1, 3).median_ms;
    if (call_ms > 2.0) {
      input_sets = 1;
      replays = std::clamp(static_cast<int>(2000.0 / call_ms), 5, std::max(5, replays));
    }
  }
  for (int s = 1; s < std::max(1, input_sets); ++s) sets.push_back(allocate(program, encoded, inputs.drawn));
  // One graph holds `calls` calls, a multiple of the copies, call c on copy c % sets.
  size_t calls = sets.size();
  if (calls_per_replay > 0) {
    calls = static_cast<size_t>(calls_per_replay);
  } else {
    runtime::Graph one_round = capture(sets);
    const double round_us = 1000.0 * runtime::time_replays(one_round, stream, 1, 3).median_ms;
    const double call_us = std::max(round_us / static_cast<double>(sets.size()), 1.0);
    calls = static_cast<size_t>(std::clamp(std::ceil(kTargetReplayUs / call_us), 1.0, static_cast<double>(kMaxCallsPerReplay)));
  }
  calls = std::max(sets.size(), (calls + sets.size() - 1) / sets.size() * sets.size());
  runtime::Graph graph = capture(sets, calls);
  say("timing " + std::to_string(replays) + " replays of " + std::to_string(calls) + " call(s)");
  const auto epoch_seconds = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  timing.timed_from = epoch_seconds();
  runtime::ReplayTiming t = runtime::time_replays(graph, stream, 5, replays);
  timing.timed_to = epoch_seconds();
  double per_call = 1000.0 / static_cast<double>(calls);
  timing.median_us = t.median_ms * per_call;
  timing.min_us = t.min_ms * per_call;
  timing.max_us = t.max_ms * per_call;
  timing.replays = t.replays;
  timing.input_sets = static_cast<int>(sets.size());
  timing.calls_per_replay = static_cast<int>(calls);
  return timing;
}

}  // namespace solder
