// What `solder run` checks and shows around a run: the memory it will need, measured against the
// machine's, before anything is allocated; the time the CPU work will take; and a progress line
// with an ETA on stderr while a long run goes on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder::cli {

// Host memory of one `solder run`, in bytes (HostTensor values are float64; the CPU executor holds
// every global in float32).
struct MemoryEstimate {
  double inputs = 0;     // the random inputs
  double outputs = 0;    // the backend's outputs, as HostTensors
  double executor = 0;   // the CPU executor's globals (inputs, intermediates, outputs)
  double reference = 0;  // the float64 reference: every tensor (0 when it is sampled)
  // The executor's globals are freed before the reference runs.
  double peak() const { return inputs + outputs + std::max(executor, reference); }
};

// `kernels` is null for the ref backend; `cpu` says whether the CPU executor runs them.
MemoryEstimate estimate_memory(const BoundProgram& program, const KernelProgram* kernels, bool cpu, bool full_reference);

// Bytes this process may still allocate: MemAvailable of /proc/meminfo, lowered by a cgroup limit;
// $SOLDER_AVAILABLE_MEMORY (bytes) overrides both (tests). 0 when unknown.
double available_memory();

// Throws Refusal (exit 2) when `estimate` exceeds the available memory, with the parts of the
// estimate and what to change (--small, --dim, --backend cuda).
void refuse_if_too_large(const BoundProgram& program, const MemoryEstimate& estimate, const std::string& backend);

std::string bytes_text(double bytes);
std::string duration_text(double seconds);

// Core-seconds per scalar evaluation of the reference's work count (reference_work), measured on the
// project's 2-core machine (2026-11-26, vanilla.sol: ~20 minutes for 3.5e10 evaluations on the CPU
// executor); the up-front estimate is rough, the progress line's ETA comes from the observed rate.
constexpr double kReferenceSecondsPerEvaluation = 5e-8;
constexpr double kExecutorSecondsPerEvaluation = 7e-8;
// Runs estimated above this get a warning and a progress line.
constexpr double kLongRunSeconds = 5;

// A progress line on stderr, from a thread of its own, while a long step runs: on a terminal one line
// rewritten in place (\r) every second; otherwise a new line every 10 seconds. `fraction` returns
// the part done (0..1), `detail` what is running now. Stops (and ends its line) when destroyed.
// $SOLDER_PROGRESS_SECONDS overrides the period (tests).
class ProgressLine {
 public:
  ProgressLine(std::string label, std::function<double()> fraction, std::function<std::string()> detail = {});
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

 private:
  void loop();
  std::string line(double elapsed) const;

  std::string label_;
  std::function<double()> fraction_;
  std::function<std::string()> detail_;
  bool terminal_ = false;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace solder::cli
