// The public C++ API (include/solder/solder.h) over the compile driver, the CPU executor and the CUDA
// runtime. Compile = parse → bind → fuse (the driver's steps) → for cuda: generate CUDA, NVRTC (cached
// on disk), load; a call = check the arguments, then launch (cuda) or execute (cpu).
#define SOLDER_API_IMPLEMENTATION
#include "solder/solder.h"

#include "api/launch_plan.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "backend/cpu/executor.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/host_encoding.h"
#include "contract/contract_pass.h"
#include "driver/compile.h"
#include "fusion/fuse.h"
#include "ir/diagnostics.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kernel/kernel_printer.h"
#include "kernel/kernel_verifier.h"
#include "lower/lower_unfused.h"
#include "runtime/attention_args.h"
#include "runtime/runtime.h"
#include "runtime/tma.h"

namespace solder::api {
namespace {

constexpr size_t kWorkspaceAlignment = 256;

solder::DType to_internal(DType d) {
  switch (d) {
    case DType::f32: return solder::DType::f32;
    case DType::f16: return solder::DType::f16;
    case DType::bf16: return solder::DType::bf16;
    case DType::f8e4m3: return solder::DType::f8e4m3;
    case DType::f8e5m2: return solder::DType::f8e5m2;
    case DType::i32: return solder::DType::i32;
    case DType::boolean: return solder::DType::boolean;
  }
  return solder::DType::f32;
}

DType from_internal(solder::DType d) {
  switch (d) {
    case solder::DType::f32: return DType::f32;
    case solder::DType::f16: return DType::f16;
    case solder::DType::bf16: return DType::bf16;
    case solder::DType::f8e4m3: return DType::f8e4m3;
    case solder::DType::f8e5m2: return DType::f8e5m2;
    case solder::DType::i32: return DType::i32;
    case solder::DType::boolean: return DType::boolean;
  }
  return DType::f32;
}

std::string shape_text(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

TensorSpec spec_of(const GlobalTensor& g) { return TensorSpec{g.name, g.shape, from_internal(g.dtype)}; }

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

// ---- Small functions ------------------------------------------------------------------------------

std::string_view dtype_name(DType dtype) {
  return dtype == DType::boolean ? std::string_view("bool") : solder::dtype_name(to_internal(dtype));
}
int dtype_size(DType dtype) { return solder::dtype_bytes(to_internal(dtype)); }

std::string_view device_name(Device device) {
  switch (device) {
    case Device::automatic: return "auto";
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
  }
  return "auto";
}

bool cuda_available(std::string* why) { return solder::gpu_available(why); }

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

TensorArg::TensorArg(const void* data_, DType dtype_, std::span<const int64_t> shape_, std::span<const int64_t> strides_)
    : data(const_cast<void*>(data_)), dtype(dtype_) {
  if (shape_.size() > static_cast<size_t>(kMaxRank))
    throw Error("TensorArg: a tensor of rank " + std::to_string(shape_.size()) + " was given; Solder tensors have rank at most " +
                std::to_string(kMaxRank));
  if (!strides_.empty() && strides_.size() != shape_.size())
    throw Error("TensorArg: " + std::to_string(strides_.size()) + " strides were given for a tensor of rank " +
                std::to_string(shape_.size()));
  rank = static_cast<int>(shape_.size());
  std::copy(shape_.begin(), shape_.end(), shape);
  has_strides = !strides_.empty();
  std::copy(strides_.begin(), strides_.end(), strides);
}

// ---- Program ------------------------------------------------------------------------------------

struct Program::State {
  std::shared_ptr<const solder::Program> program;
};

Program Program::from_text(std::string_view text, const std::string& file) {
  auto state = std::make_shared<State>();
  state->program = std::make_shared<solder::Program>(parse_program(text, file));
  return Program(state);
}

Program Program::from_file(const std::string& path) {
  auto state = std::make_shared<State>();
  state->program = std::make_shared<solder::Program>(parse_program_file(path));
  return Program(state);
}

const std::string& Program::name() const { return state_->program->name; }
std::string Program::text() const { return print_program(*state_->program); }

namespace {

SizeChoice size_choice(const solder::Program& program, const CompileOptions& options) {
  SizeChoice sizes;
  sizes.small = options.small;
  if (options.small && program.small.empty())
    throw Error(program.file, {}, "compile option small=true, but program '" + program.name + "' declares no `small` sizes");
  for (const auto& [name, value] : options.dims) {
    if (!program.find_dim(name)) {
      std::string known;
      for (const auto& d : program.dims) known += (known.empty() ? "" : ", ") + d.name;
      throw Error(program.file, {}, "compile option dims: program '" + program.name + "' has no dim '" + name +
                                        "' (its dims: " + known + ")");
    }
    if (value < 1)
      throw Error(program.file, {}, "compile option dims: " + name + "=" + std::to_string(value) +
                                        " — a dim's size must be at least 1");
    sizes.overrides.emplace_back(name, value);
  }
  return sizes;
}

}  // namespace

std::map<std::string, int64_t> Program::dims(const CompileOptions& options) const {
  return bind_program(state_->program, size_choice(*state_->program, options)).dims;
}

// ---- Kernel -------------------------------------------------------------------------------------

struct Kernel::State {
  Device device = Device::cpu;
  std::string name;
  std::map<std::string, int64_t> dims;
  KernelProgram program;
  std::vector<TensorSpec> inputs, outputs, workspace;
  std::vector<int> input_global, output_global;  // index into program.globals, per input / output
  std::vector<int64_t> workspace_offset;          // per global: byte offset in the workspace, -1 if none
  size_t workspace_bytes = 0;
  std::string report_text, report_json;
  // schedule_text() of a cpu kernel: the CUDA backend's plan, made on the first call from these
  std::shared_ptr<const solder::Program> source;
  SizeChoice sizes;
  bool fuse = true, gemm_skeleton = true;
  std::once_flag schedule_once;
  std::string schedule;
  // cuda only
  GeneratedModule generated;
  std::optional<runtime::Module> module;
  std::vector<runtime::Function> functions;
  std::optional<runtime::DeviceBuffer> own_workspace;  // allocated once at compile time
  detail::SplitKLayout split_k;                        // GEMM-skeleton split-K state (launch_plan.h)
  std::optional<runtime::DeviceBuffer> split_k_state;  // allocated and its counters zeroed once
};

Kernel Program::compile(const CompileOptions& options) const {
  const solder::Program& source = *state_->program;
  Device device = options.device;
  if (device == Device::automatic) device = cuda_available() ? Device::cuda : Device::cpu;
  if (device == Device::cuda) {
    std::string why;
    if (!cuda_available(&why)) throw Error("compile: device=cuda was requested, but the GPU backend cannot run here: " + why);
  }

  BoundProgram bound = bind_program(state_->program, size_choice(source, options));
  auto st = std::make_shared<Kernel::State>();
  st->device = device;
  st->name = source.name;
  st->dims = bound.dims;
  st->source = state_->program;
  st->sizes = size_choice(source, options);
  st->fuse = options.fuse;
  st->gemm_skeleton = options.gemm_skeleton;

  // The driver's steps (driver/compile.cpp), keeping the fusion result for the JSON report.
  solder::CompileOptions driver = device == Device::cuda ? solder::CompileOptions::for_gpu(options.fuse) : solder::CompileOptions{};
  driver.fuse = options.fuse;
  // Whole matrix products on the sm_90a GEMM skeleton and attention on the attention skeleton, as the
  // `solder` command runs them (operator() encodes their tensor maps per call), where the CuTe headers
  // are there for NVRTC: both off together otherwise (skeletons_here).
  std::string skeleton_note;
  driver.gemm_skeleton = device == Device::cuda && options.gemm_skeleton;
  CudaCodegenOptions codegen;
  if (device == Device::cuda) {
    codegen = skeletons_here(driver.gemm_skeleton, &skeleton_note);
    if (!skeleton_note.empty()) skeleton_note += "\n";
  }
  if (!options.fuse) {
    st->program = lower_unfused(bound, UnfusedOptions{driver.gemm_skeleton});
    st->report_text = skeleton_note + "unfused: one kernel per definition\n";
    st->report_json = "{\"program\":\"" + source.name + "\",\"fused\":false}";
  } else {
    FusionResult fused = fuse_for(bound, driver);
    st->report_text = skeleton_note + fusion_report_text(bound, fused);
    st->report_json = fusion_report_json(bound, fused);
    st->program = std::move(fused.kernels);
  }
  // Step fuse's last part, as compile_program (driver/compile.cpp) and so every `solder` command runs
  // it: each `reduce sum` that is a matrix product becomes a `contract`, which the CUDA backend's
  // writers take on tensor cores (without it a fused product stays a scalar reduce loop).
  if (driver.contractions) {
    ContractPassResult contracts = canonicalize_contractions(st->program);
    st->program = std::move(contracts.program);
    if (options.fuse) {
      std::string text = contract_report_text(contracts);
      if (!text.empty()) st->report_text += "\n" + text;
    }
  }
  verify_kernel_program(st->program);

  // Inputs and outputs in the program's order; every other global goes into the workspace.
  auto global_index = [&](const std::string& name) {
    for (size_t i = 0; i < st->program.globals.size(); ++i)
      if (st->program.globals[i].name == name) return static_cast<int>(i);
    throw Error("compile: internal error: tensor '" + name + "' has no global in the compiled program (please report)");
  };
  for (const TensorInfo* t : bound.inputs()) {
    int g = global_index(t->name);
    st->input_global.push_back(g);
    st->inputs.push_back(spec_of(st->program.globals[g]));
  }
  for (const TensorInfo* t : bound.outputs()) {
    int g = global_index(t->name);
    st->output_global.push_back(g);
    st->outputs.push_back(spec_of(st->program.globals[g]));
  }
  st->workspace_offset.assign(st->program.globals.size(), -1);
  for (size_t i = 0; i < st->program.globals.size(); ++i) {
    const GlobalTensor& g = st->program.globals[i];
    if (g.role == GlobalRole::input || g.role == GlobalRole::output) continue;
    st->workspace_offset[i] = static_cast<int64_t>(st->workspace_bytes);
    st->workspace.push_back(spec_of(g));
    st->workspace_bytes = align_up(st->workspace_bytes + static_cast<size_t>(std::max<int64_t>(4, g.bytes())), kWorkspaceAlignment);
  }

  if (device == Device::cuda) {
    st->generated = generate_cuda(st->program, codegen);
    runtime::CompileFlags flags;
    if (detail::uses_gemm_skeleton(st->generated)) flags.defines.push_back("NDEBUG");  // CuTe's device asserts
    runtime::CompiledModule compiled = runtime::compile_cuda(st->generated.source, st->program.name + ".cu", flags);
    st->module.emplace(compiled);
    for (const auto& k : st->generated.kernels) st->functions.push_back(st->module->get_function(k.name));
    if (st->workspace_bytes > 0) st->own_workspace.emplace(st->workspace_bytes);
    st->split_k = detail::plan_split_k(st->generated);
    if (st->split_k.bytes > 0) {
      st->split_k_state.emplace(st->split_k.bytes);
      // Once, here (synchronous): the launches leave the counters zero again, so calls need no memset.
      runtime::fill_u32(st->split_k_state->pointer() + st->split_k.counters_begin, 0, st->split_k.counter_words);
    }
  }
  return Kernel(st);
}

Device Kernel::device() const { return state_->device; }
const std::string& Kernel::name() const { return state_->name; }
const std::map<std::string, int64_t>& Kernel::dims() const { return state_->dims; }
const std::vector<TensorSpec>& Kernel::inputs() const { return state_->inputs; }
const std::vector<TensorSpec>& Kernel::outputs() const { return state_->outputs; }
const std::vector<TensorSpec>& Kernel::workspace_tensors() const { return state_->workspace; }
size_t Kernel::workspace_bytes() const { return state_->workspace_bytes; }
int Kernel::kernel_count() const { return static_cast<int>(state_->program.kernels.size()); }
std::string Kernel::report_text() const { return state_->report_text; }
std::string Kernel::report_json() const { return state_->report_json; }
std::string Kernel::kernel_ir() const { return print_kernel_program(state_->program); }

std::string Kernel::schedule_text() const {
  State& st = *state_;
  std::call_once(st.schedule_once, [&st] {
    if (st.device == Device::cuda) {
      st.schedule = contraction_schedule_text(st.generated.contractions);
      return;
    }
    // As `solder emit --cuda --report` plans it: the GPU's fusion and tiles, the skeletons on.
    BoundProgram bound = bind_program(st.source, st.sizes);
    solder::CompileOptions driver = solder::CompileOptions::for_gpu(st.fuse);
    driver.gemm_skeleton = st.gemm_skeleton;
    st.schedule = contraction_schedule_text(generate_cuda(compile_program(bound, driver).kernels).contractions);
  });
  return st.schedule;
}
std::string Kernel::cuda_source() const { return state_->device == Device::cuda ? state_->generated.source : std::string(); }

namespace {

// Checks one argument against its spec: dtype, shape, contiguity, pointer.
void check_argument(const std::string& kernel, const char* what, size_t index, const TensorSpec& spec,
                    const TensorArg& arg, Device device) {
  std::string who = "call of kernel '" + kernel + "': " + what + " " + std::to_string(index) + " ('" + spec.name + "')";
  std::span<const int64_t> shape(arg.shape, static_cast<size_t>(std::max(0, arg.rank)));
  if (arg.dtype != spec.dtype)
    throw Error(who + ": expected dtype " + std::string(dtype_name(spec.dtype)) + ", found " + std::string(dtype_name(arg.dtype)));
  if (!std::equal(shape.begin(), shape.end(), spec.shape.begin(), spec.shape.end()))
    throw Error(who + ": expected shape " + shape_text(spec.shape) + ", found " + shape_text(shape) +
                " (the kernel was compiled for these dims; compile another for new sizes)");
  if (arg.has_strides) {
    int64_t expected = 1;
    for (int d = arg.rank - 1; d >= 0; --d) {
      if (arg.shape[d] != 1 && arg.strides[d] != expected)
        throw Error(who + ": the tensor is not contiguous (stride " + std::to_string(arg.strides[d]) + " at dim " +
                    std::to_string(d) + ", expected " + std::to_string(expected) +
                    "); Solder's kernels take contiguous row-major tensors: make it contiguous first");
      expected *= arg.shape[d];
    }
  }
  if (arg.data == nullptr && spec.elements() > 0) throw Error(who + ": the data pointer is null");
  if (device == Device::cuda && reinterpret_cast<uintptr_t>(arg.data) % 16 != 0)
    throw Error(who + ": the device pointer is not 16-byte aligned");
}

}  // namespace

void Kernel::operator()(std::span<const TensorArg> inputs, std::span<const TensorArg> outputs, void* workspace, void* stream) const {
  const State& st = *state_;
  if (inputs.size() != st.inputs.size() || outputs.size() != st.outputs.size())
    throw Error("call of kernel '" + st.name + "': expected " + std::to_string(st.inputs.size()) + " inputs and " +
                std::to_string(st.outputs.size()) + " outputs, found " + std::to_string(inputs.size()) + " inputs and " +
                std::to_string(outputs.size()) + " outputs");
  for (size_t i = 0; i < inputs.size(); ++i) check_argument(st.name, "input", i, st.inputs[i], inputs[i], st.device);
  for (size_t i = 0; i < outputs.size(); ++i) check_argument(st.name, "output", i, st.outputs[i], outputs[i], st.device);

  if (st.device == Device::cuda) {
    runtime::DevicePtr base = 0;
    if (st.workspace_bytes > 0) {
      if (workspace) {
        if (reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment != 0)
          throw Error("call of kernel '" + st.name + "': the workspace is not 256-byte aligned");
        base = reinterpret_cast<runtime::DevicePtr>(workspace);
      } else {
        base = st.own_workspace->pointer();
      }
    }
    std::vector<runtime::DevicePtr> pointers(st.program.globals.size(), 0);
    for (size_t i = 0; i < inputs.size(); ++i) pointers[st.input_global[i]] = reinterpret_cast<runtime::DevicePtr>(inputs[i].data);
    for (size_t i = 0; i < outputs.size(); ++i) pointers[st.output_global[i]] = reinterpret_cast<runtime::DevicePtr>(outputs[i].data);
    for (size_t g = 0; g < pointers.size(); ++g)
      if (st.workspace_offset[g] >= 0) pointers[g] = base + static_cast<runtime::DevicePtr>(st.workspace_offset[g]);
    // The skeleton kernels' tensor maps for this call's pointers, all checked before anything launches.
    struct Maps {
      runtime::TensorMapBytes a, b, b2, a_second, b_second;  // the last two: a second K range's
      std::optional<runtime::AttentionLaunchArgs> attention;  // q, k, v, shape and score functor
    };
    std::vector<Maps> maps(st.functions.size());
    for (size_t k = 0; k < st.functions.size(); ++k) {
      if (const auto& attention = st.generated.kernels[k].attention) {
        std::string problem = detail::check_attention_operands(*attention, pointers);
        if (!problem.empty())
          throw Error("call of kernel '" + st.name + "': attention kernel '" + st.generated.kernels[k].name +
                      "' cannot read its operand " + problem);
        runtime::TensorMapBytes q = runtime::encode_gemm_operand(detail::gemm_operand(attention->q, pointers), "Q");
        runtime::TensorMapBytes kk = runtime::encode_gemm_operand(detail::gemm_operand(attention->k, pointers), "K");
        runtime::TensorMapBytes v = runtime::encode_gemm_operand(detail::gemm_operand(attention->v, pointers), "V");
        std::optional<runtime::TensorMapBytes> bias_tile, bias_column;
        if (attention->bias_tile) bias_tile = runtime::encode_gemm_operand(detail::gemm_operand(*attention->bias_tile, pointers), "bias tile");
        if (attention->bias_column) bias_column = runtime::encode_gemm_operand(detail::gemm_operand(*attention->bias_column, pointers), "bias column");
        std::optional<runtime::TensorMapBytes> out;
        if (attention->out) out = runtime::encode_gemm_operand(detail::gemm_operand(*attention->out, pointers), "O");
        maps[k].attention.emplace(q, kk, v, attention_shape_arg(*attention), bias_tile, bias_column, pointers, out);
        continue;
      }
      const auto& gemm = st.generated.kernels[k].gemm;
      if (!gemm) continue;
      std::string problem = detail::check_gemm_operands(*gemm, pointers);
      if (!problem.empty())
        throw Error("call of kernel '" + st.name + "': GEMM kernel '" + st.generated.kernels[k].name +
                    "' cannot read its operand " + problem);
      maps[k].a = runtime::encode_gemm_operand(detail::gemm_operand(gemm->a, pointers), "A");
      maps[k].b = runtime::encode_gemm_operand(detail::gemm_operand(gemm->b, pointers), "B");
      if (gemm->b2) maps[k].b2 = runtime::encode_gemm_operand(detail::gemm_operand(*gemm->b2, pointers), "B2");
      if (gemm->a_second) {
        maps[k].a_second = runtime::encode_gemm_operand(detail::gemm_operand(*gemm->a_second, pointers), "A (second K range)");
        maps[k].b_second = runtime::encode_gemm_operand(detail::gemm_operand(*gemm->b_second, pointers), "B (second K range)");
      }
    }
    std::vector<void*> args;
    args.reserve(pointers.size());
    for (auto& p : pointers) args.push_back(&p);
    for (size_t k = 0; k < st.functions.size(); ++k) {
      const GeneratedKernel& info = st.generated.kernels[k];
      runtime::LaunchConfig config;
      config.grid.x = static_cast<unsigned>(info.blocks);
      config.block.x = static_cast<unsigned>(info.threads);
      config.cluster.x = static_cast<unsigned>(info.cluster);
      config.dynamic_shared_bytes = static_cast<unsigned>(info.shared_bytes);
      config.stream = static_cast<CUstream_st*>(stream);
      if (info.attention) {
        // (TensorMap q, k, v, AttentionShape, score, mask and epilogue functors): runtime/attention_args.h.
        auto attention_args = maps[k].attention->parameters(pointers.data());
        runtime::launch(st.functions[k], config, attention_args.data());
        continue;
      }
      if (!info.gemm) {
        runtime::launch(st.functions[k], config, args.data());
        continue;
      }
      // (TensorMap a, TensorMap b[, TensorMap b2 | a2, b2 of a second K range], GemmShape[, its K], epilogue = every global's pointer,
      // SplitKWorkspace), or on the prologue path (a, b, GemmShape, prologue, epilogue).
      const GemmSkeletonLaunch& g = *info.gemm;
      struct {  // solder::gemm::GemmShape
        int m, n, k, batch, broadcast_a, broadcast_b;
      } shape{g.m, g.n, g.k, g.batch, g.broadcast_a ? 1 : 0, g.broadcast_b ? 1 : 0};
      struct {  // solder::gemm::SplitKWorkspace
        runtime::DevicePtr partials, counters;
      } split{0, 0};
      const detail::SplitKSlot& slot = st.split_k.kernels[k];
      if (slot.partials_offset >= 0) {
        split.partials = st.split_k_state->pointer() + static_cast<runtime::DevicePtr>(slot.partials_offset);
        split.counters = st.split_k_state->pointer() + static_cast<runtime::DevicePtr>(slot.counters_offset);
      }
      if (g.prologue) {
        void* prologue_args[] = {&maps[k].a, &maps[k].b, &shape, pointers.data(), pointers.data()};
        runtime::launch(st.functions[k], config, prologue_args);
      } else if (g.b2) {
        void* dual_args[] = {&maps[k].a, &maps[k].b, &maps[k].b2, &shape, pointers.data(), &split};
        runtime::launch(st.functions[k], config, dual_args);
      } else if (g.a_second) {
        int k2 = g.k_second;
        void* range_args[] = {&maps[k].a, &maps[k].b, &maps[k].a_second, &maps[k].b_second, &shape, &k2, pointers.data(), &split};
        runtime::launch(st.functions[k], config, range_args);
      } else {
        void* gemm_args[] = {&maps[k].a, &maps[k].b, &shape, pointers.data(), &split};
        runtime::launch(st.functions[k], config, gemm_args);
      }
    }
    return;
  }

  // cpu: the executor works on float64 host values; decode the caller's bytes, run, encode the outputs.
  TensorSet values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GlobalTensor& g = st.program.globals[st.input_global[i]];
    const auto* bytes = static_cast<const uint8_t*>(inputs[i].data);
    std::vector<uint8_t> copy(bytes, bytes + g.bytes());
    values[g.name] = HostTensor{g.name, g.shape, g.dtype, decode_values(copy, g.dtype, g.elements())};
  }
  ExecutionResult result = execute_kernel_program(st.program, values);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const GlobalTensor& g = st.program.globals[st.output_global[i]];
    auto unwritten = result.unwritten.find(g.name);
    if (unwritten != result.unwritten.end() && unwritten->second > 0)
      throw Error("call of kernel '" + st.name + "': internal error: " + std::to_string(unwritten->second) + " elements of output '" +
                  g.name + "' were never written (please report)");
    std::vector<uint8_t> bytes = encode_values(result.outputs.at(g.name).values, g.dtype);
    std::memcpy(outputs[i].data, bytes.data(), static_cast<size_t>(g.bytes()));
  }
}

}  // namespace solder::api
