#include "run_resources.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/refusal.h"

namespace solder::cli {

std::string bytes_text(double bytes) {
  char buffer[32];
  if (bytes >= 1e12) std::snprintf(buffer, sizeof buffer, "%.2f TB", bytes / 1e12);
  else if (bytes >= 1e9) std::snprintf(buffer, sizeof buffer, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(buffer, sizeof buffer, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1e3) std::snprintf(buffer, sizeof buffer, "%.1f KB", bytes / 1e3);
  else std::snprintf(buffer, sizeof buffer, "%.0f B", bytes);
  return buffer;
}

std::string duration_text(double seconds) {
  char buffer[48];
  if (seconds < 60) std::snprintf(buffer, sizeof buffer, "%.0f s", seconds);
  else if (seconds < 3600) std::snprintf(buffer, sizeof buffer, "%dm%02ds", int(seconds / 60), int(seconds) % 60);
  else if (seconds < 86400 * 3) std::snprintf(buffer, sizeof buffer, "%dh%02dm", int(seconds / 3600), int(seconds / 60) % 60);
  else std::snprintf(buffer, sizeof buffer, "%.0f days", seconds / 86400);
  return buffer;
}

MemoryEstimate estimate_memory(const BoundProgram& program, const KernelProgram* kernels, bool cpu, bool full_reference) {
  // Element counts in double: a count too large for int64 is still an estimate, not an overflow.
  auto elements = [](const std::vector<int64_t>& shape) {
    double n = 1;
    for (int64_t s : shape) n *= static_cast<double>(s);
    return n;
  };
  MemoryEstimate m;
  for (auto& t : program.tensors) {
    double n = elements(t.shape);
    if (t.role == TensorRole::input) m.inputs += 8 * n;
    if (t.role == TensorRole::output && kernels) m.outputs += 8 * n;
    if (full_reference) m.reference += 8 * n;
  }
  if (kernels && cpu)
    for (auto& g : kernels->globals) m.executor += 4 * elements(g.shape);
  return m;
}

double available_memory() {
  if (const char* forced = std::getenv("SOLDER_AVAILABLE_MEMORY"); forced && *forced) return std::strtod(forced, nullptr);
  double available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double value;
  std::string unit;
  while (meminfo >> key >> value) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") available = value * 1024;
  }
  // cgroup v2: the limit of this process's group, less what it already uses.
  std::ifstream limit_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::string limit_text;
  double current = 0;
  if (limit_file >> limit_text && limit_text != "max" && current_file >> current) {
    double room = std::strtod(limit_text.c_str(), nullptr) - current;
    if (room > 0 && (available == 0 || room < available)) available = room;
  }
  return available;
}

void refuse_if_too_large(const BoundProgram& program, const MemoryEstimate& estimate, const std::string& backend) {
  double available = available_memory();
  if (available <= 0 || estimate.peak() <= available) return;
  std::ostringstream message;
  message << "'" << program.program->name << "' at these sizes (";
  bool first = true;
  for (auto& d : program.program->dims) {
    message << (first ? "" : ", ") << d.name << "=" << program.dims.at(d.name);
    first = false;
  }
  message << ") needs about " << bytes_text(estimate.peak()) << " of memory for `solder run --backend " << backend
          << "`, and this machine has " << bytes_text(available) << " available: inputs " << bytes_text(estimate.inputs);
  if (estimate.executor > 0) message << ", CPU executor " << bytes_text(estimate.executor);
  if (estimate.outputs > 0) message << ", outputs " << bytes_text(estimate.outputs);
  if (estimate.reference > 0) message << ", float64 reference " << bytes_text(estimate.reference);
  message << ". Run it smaller: ";
  if (!program.program->small.empty() && !program.sizes.small) message << "--small (the program's small sizes), ";
  message << "--dim NAME=VALUE to shrink a dim";
  if (backend != "cuda") message << ", or on a GPU with --backend cuda";
  message << ".";
  throw Refusal(message.str());
}

ProgressLine::ProgressLine(std::string label, std::function<double()> fraction, std::function<std::string()> detail)
    : label_(std::move(label)), fraction_(std::move(fraction)), detail_(std::move(detail)), terminal_(isatty(2) == 1) {
  thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (printed_ && terminal_) std::fprintf(stderr, "\n");
}

std::string ProgressLine::line(double elapsed) const {
  double f = std::clamp(fraction_(), 0.0, 1.0);
  char percent[32];
  std::snprintf(percent, sizeof percent, "%3.0f%%", f * 100);
  std::string text = label_ + ": " + percent;
  if (detail_) text += " (" + detail_() + ")";
  text += ", " + duration_text(elapsed) + " elapsed";
  if (f > 0.01) text += ", about " + duration_text(elapsed * (1 - f) / f) + " left";
  return text;
}

void ProgressLine::loop() {
  std::chrono::milliseconds period(terminal_ ? 1000 : 10000);
  if (const char* seconds = std::getenv("SOLDER_PROGRESS_SECONDS"); seconds && std::atof(seconds) > 0)  // tests
    period = std::chrono::milliseconds(static_cast<int64_t>(std::atof(seconds) * 1000));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string text = line(elapsed);
    if (terminal_) std::fprintf(stderr, "\r%-100s", text.c_str());
    else std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
    printed_ = true;
  }
}

}  // namespace solder::cli
