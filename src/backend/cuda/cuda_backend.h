// Running a compiled program on the GPU: generate CUDA, compile it with NVRTC (cached), allocate the
// globals, upload the inputs, poison everything else, launch the kernels in order, and read the
// outputs back (counting elements that still hold the poison). Timing for benchmarks captures every
// launch of one call into a CUDA graph and times its replays with events.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/host_tensor.h"
#include "backend/cpu/inputs.h"
#include "backend/cuda/cuda_codegen.h"
#include "kernel/kernel_ir.h"
#include "runtime/attention_args.h"

namespace solder {

struct GpuRunResult {
  TensorSet outputs;
  std::map<std::string, int64_t> unwritten;
  std::string device;          // the GPU's name
  double compile_seconds = 0;  // NVRTC time (0 when every module came from the cache)
  bool from_cache = false;
};

// The attention skeleton's AttentionShape parameter for a launch (runtime/attention_args.h packs it with
// the rest of the launch's parameters; the backend and the C++ API both take it from here).
runtime::AttentionShapeArg attention_shape_arg(const AttentionSkeletonLaunch& launch);

// Whether the GPU backend can run here; *why says why not.
bool gpu_available(std::string* why = nullptr);

// The sm_90a skeletons (GEMM and attention) are CuTe code that NVRTC compiles from the CUTLASS/CuTe
// headers (runtime::cutlass_include_dir). The one switch for both: where the headers are found, returns
// options with the attention skeleton on and leaves `gemm_skeleton` as asked; where they are missing,
// sets `gemm_skeleton` false, returns options with the attention skeleton off (and why), and *note
// (when given) says so in one line, for standard error or a report.
CudaCodegenOptions skeletons_here(bool& gemm_skeleton, std::string* note = nullptr);

// hardware_mismatch_note() (src/hw/hardware.h) for the GPU here: empty on the GPU the planner describes, or
// with no GPU.
std::string gpu_hardware_note();

GpuRunResult run_on_gpu(const KernelProgram& program, const TensorSet& inputs, const CudaCodegenOptions& codegen = {});

struct GpuTiming {
  double median_us = 0, min_us = 0, max_us = 0;
  int replays = 0;
  int input_sets = 1;  // copies of the inputs rotated among (1 for a call over 2 ms)
  int calls_per_replay = 1;  // calls captured in the timed graph, cycling over the input copies
  // Wall clock (seconds since the epoch) when the timed replays were queued and when the last one ended:
  // joins the timing with a clock log sampled beside it (bench/merged_call.sh's clocks.csv).
  double timed_from = 0, timed_to = 0;
  std::string device;
};

// Generates and compiles the program's CUDA (NVRTC, through the on-disk cache) without a GPU: what a
// later run or bench of the same program loads from the cache.
struct GpuCompileReport {
  int kernels = 0;
  double compile_seconds = 0;  // 0 for a cache hit
  bool from_cache = false;
  std::string cache_path;      // "" when the cache was not used
};
GpuCompileReport compile_for_gpu(const KernelProgram& program, const CudaCodegenOptions& codegen = {});

// Times one call of the program (all its kernels) as a CUDA-graph replay; `input_sets` > 1 rotates
// among that many copies of the inputs (each replay reads a different copy), so inputs larger than
// L2 are read cold as they would be in a model. A program whose call takes over 2 ms runs on one copy
// with replays capped at about 2 s of GPU time (timing.replays and timing.input_sets say what ran).
// One graph holds `calls_per_replay` calls (a multiple of the input copies, cycling over them); 0 picks
// as bench/peers.py does for the peers: enough calls that a replay lasts about 2 ms, at most 1000, so
// the graph launch's own latency is shared by many calls. Times are per call (replay / calls).
//
// The inputs: values from the host (encoded and uploaded), and inputs drawn on the GPU from their
// draws (backend/cuda/device_inputs.h: no host copy, no upload), by global name; every copy holds the
// same values. `progress`, when set, is told each long step before it starts (module load and compile,
// inputs, calibration, the timed replays).
struct TimedInputs {
  TensorSet host;
  std::map<std::string, InputDraw> drawn;
  std::function<void(const std::string&)> progress;
};
GpuTiming time_on_gpu(const KernelProgram& program, const TimedInputs& inputs, int input_sets = 1, int replays = 50,
                      const CudaCodegenOptions& codegen = {}, int calls_per_replay = 0);

}  // namespace solder
