// Solder's public C++ API: compile a .sol program and call it on your own tensors.
//
//   #include <solder/solder.h>
//
//   solder::Program program = solder::Program::from_file("softmax.sol");
//   solder::Kernel kernel = program.compile({.dims = {{"N", 64}, {"L", 1024}}});
//   // caller-owned memory: device pointers on the GPU, host pointers on the CPU executor
//   kernel({solder::TensorArg(x, solder::DType::f32, {64, 1024})},
//          {solder::TensorArg(y, solder::DType::f32, {64, 1024})},
//          /*workspace=*/nullptr, /*stream=*/nullptr);
//
// Where it runs. A Kernel is compiled for one device: Device::cuda (an sm_90a GPU, generated CUDA
// compiled by NVRTC through the on-disk cache, launched on the caller's stream) or Device::cpu (the CPU
// executor, which runs the same Kernel IR in float32 with the GPU's rounding points). Device::automatic
// picks cuda where a Hopper GPU, its driver and NVRTC are present, else cpu.
//
// Calls. A call takes one TensorArg per input and per output, in the program's order (inputs(),
// outputs()). Every tensor must have exactly the dtype and shape the kernel was compiled for and be
// contiguous row-major (strides, when given, are checked; Solder's kernels do not take strided tensors
// yet). On cuda the pointers are device pointers (16-byte aligned); on cpu they are host pointers.
//
// CUDA graphs. A cuda call launches the kernels on `stream` (nullptr = the legacy default stream) and
// does nothing else: no device allocation, no memset, no copy, no host synchronization, so it can be
// captured into a CUDA graph. Intermediate global tensors live in a workspace of workspace_bytes(),
// sized at compile time: pass your own (device memory, 256-byte aligned), or pass nullptr and the
// Kernel uses one it allocated once when it was compiled (then two calls must not run concurrently on
// different streams). Kernels on the GEMM skeleton get their TMA tensor maps encoded on the host in
// each call (kernel parameters, which a graph captures); a split-K GEMM's partials and counters are
// sized at compile time and owned by the Kernel (allocated and zeroed once; each launch leaves its
// counters zero again), and so does a persistent attention kernel's work-tile counter (a module global
// its last block resets), so calls of such a Kernel must not run concurrently either.
//
// Errors. Every failure throws solder::Error (solder/error.h): a program's errors carry
// file:line:column; a bad call names the tensor and says what was expected and what was found.
//
// Names. The types below live in solder::api and are also visible as solder::Program, solder::Kernel,
// ... (Solder's own compiler sources, which have internal types of those names, define
// SOLDER_API_IMPLEMENTATION and use solder::api:: directly).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "solder/error.h"

#define SOLDER_VERSION_MAJOR 0
#define SOLDER_VERSION_MINOR 1

namespace solder::api {

// Element types (docs/language.md): f32, f16, bf16, f8e4m3, f8e5m2, i32, bool (1 byte, 0 or 1).
enum class DType { f32, f16, bf16, f8e4m3, f8e5m2, i32, boolean };
std::string_view dtype_name(DType dtype);  // "f32", ..., "bool"
int dtype_size(DType dtype);               // bytes per element

enum class Device { automatic, cpu, cuda };
std::string_view device_name(Device device);  // "auto", "cpu", "cuda"

// Whether compiled kernels can run on the GPU here; *why says why not (no driver, not sm_90, no NVRTC).
bool cuda_available(std::string* why = nullptr);

// One tensor of a compiled kernel: its name in the program, shape (row-major) and dtype.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  int64_t elements() const;
  int64_t bytes() const { return elements() * dtype_size(dtype); }
};

// A caller-owned tensor handed to a call: data pointer, dtype, shape, and strides in elements (none =
// contiguous row-major). Holds its shape inline (rank at most kMaxRank), so building one allocates nothing.
struct TensorArg {
  static constexpr int kMaxRank = 8;
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  bool has_strides = false;
  int64_t strides[kMaxRank] = {};

  TensorArg() = default;
  TensorArg(const void* data, DType dtype, std::initializer_list<int64_t> shape)
      : TensorArg(data, dtype, std::span<const int64_t>(shape.begin(), shape.size())) {}
  // A rank over kMaxRank is an Error.
  TensorArg(const void* data, DType dtype, std::span<const int64_t> shape, std::span<const int64_t> strides = {});
};

struct CompileOptions {
  std::map<std::string, int64_t> dims;  // dim overrides (as `solder --dim NAME=VALUE`), applied last
  bool small = false;                   // start from the program's `small` sizes
  bool fuse = true;                     // false: one kernel per definition (the unfused lowering)
  Device device = Device::automatic;
  // cuda: run whole matrix products on the sm_90a GEMM skeleton (TMA + wgmma), as the `solder` command
  // does by default; false keeps every contraction in the fused kernels (`solder run --no-skeleton`).
  // Needs the CUTLASS/CuTe headers (SOLDER_CUTLASS_INCLUDE): without them the kernel is compiled as
  // with false, and report_text() says so.
  bool gemm_skeleton = true;
};

class Kernel;

// A parsed .sol program (not yet bound to sizes). Cheap to copy.
class Program {
 public:
  // Parses `text`; `file` names it in error messages ("file:line:column: error: ...").
  static Program from_text(std::string_view text, const std::string& file = "<program>");
  // Reads and parses a .sol file (an unreadable file is an Error naming it).
  static Program from_file(const std::string& path);

  const std::string& name() const;  // the `program NAME` line
  std::string text() const;         // the canonical text (solder print)
  // The dims with their values under `options` (defaults, small, overrides), after verification.
  std::map<std::string, int64_t> dims(const CompileOptions& options = {}) const;

  // Binds the sizes, verifies, fuses and compiles for options.device. Errors: Error (file:line:column
  // for the program, the option's name for a bad option).
  Kernel compile(const CompileOptions& options = {}) const;

  struct State;

 private:
  explicit Program(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// A compiled program, callable. Cheap to copy (copies share the compiled code and the workspace).
class Kernel {
 public:
  Device device() const;
  const std::string& name() const;
  const std::map<std::string, int64_t>& dims() const;
  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  const std::vector<TensorSpec>& workspace_tensors() const;  // intermediate globals
  size_t workspace_bytes() const;  // bytes of a caller-given workspace (0 when none is needed)
  int kernel_count() const;        // kernels launched per call

  // Runs one call. `inputs` and `outputs` in program order. `workspace`: see the header comment (only
  // used on cuda; may be nullptr). `stream`: a CUstream / cudaStream_t (only used on cuda; nullptr =
  // the legacy default stream). Throws Error on a bad argument or a failed launch.
  void operator()(std::span<const TensorArg> inputs, std::span<const TensorArg> outputs,
                  void* workspace = nullptr, void* stream = nullptr) const;
  void operator()(std::initializer_list<TensorArg> inputs, std::initializer_list<TensorArg> outputs,
                  void* workspace = nullptr, void* stream = nullptr) const {
    (*this)(std::span<const TensorArg>(inputs.begin(), inputs.size()),
            std::span<const TensorArg>(outputs.begin(), outputs.size()), workspace, stream);
  }

  std::string report_text() const;  // the fusion report (solder fuse)
  std::string report_json() const;  // the same as one JSON object (solder fuse --json)
  std::string kernel_ir() const;    // the Kernel IR that runs (solder print --after fuse)
  // Where each contraction runs on the GPU, one line per contraction as `solder emit --cuda --report`
  // prints it (its kernel; the sm90 GEMM or attention skeleton with its configuration, work tiles and
  // staged bias, the tensor-core emitter, or scalar code and why). On cuda: the kernels this Kernel
  // launches. On cpu: the plan the CUDA backend would make for the same program and options, with the
  // skeletons on (computed on the first call, no GPU needed); "" for a program without contractions.
  std::string schedule_text() const;
  std::string cuda_source() const;  // the generated CUDA C++ (Device::cuda only; "" on cpu)

  struct State;

 private:
  friend class Program;
  explicit Kernel(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace solder::api

#ifndef SOLDER_API_IMPLEMENTATION
namespace solder {
using api::CompileOptions;
using api::cuda_available;
using api::Device;
using api::device_name;
using api::DType;
using api::dtype_name;
using api::dtype_size;
using api::Kernel;
using api::Program;
using api::TensorArg;
using api::TensorSpec;
}  // namespace solder
#endif
