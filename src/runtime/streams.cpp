// Streams, events, CUDA-graph capture and replay, and replay timing (what benchmarks measure with).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/diagnostics.h"
#include "runtime/cuda_api.h"
#include "runtime/runtime.h"

namespace solder::runtime {

using namespace cuda;

namespace {

// Errors of calls that wait for the GPU also name the most recent launch: a kernel that faults is
// reported by the next synchronising call, not by its launch.
std::string after_last_launch() {
  std::string launch = last_launch();
  return launch.empty() ? "" : "work ending with " + launch;
}

}  // namespace

// ---- Stream -----------------------------------------------------------------------------------

Stream::Stream() {
  const DriverApi& api = ensure_context();
  check(api, api.stream_create(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

Stream::~Stream() {
  try {
    ensure_context().stream_destroy(stream_);
  } catch (const Error&) {
  }
}

void Stream::synchronize() const {
  const DriverApi& api = ensure_context();
  check(api, api.stream_synchronize(stream_), "cuStreamSynchronize", after_last_launch());
}

// ---- Event ------------------------------------------------------------------------------------

Event::Event() {
  const DriverApi& api = ensure_context();
  check(api, api.event_create(&event_, CU_EVENT_DEFAULT), "cuEventCreate");
}

Event::~Event() {
  try {
    ensure_context().event_destroy(event_);
  } catch (const Error&) {
  }
}

void Event::record(CUstream_st* stream) const {
  const DriverApi& api = ensure_context();
  check(api, api.event_record(event_, stream), "cuEventRecord");
}

void Event::synchronize() const {
  const DriverApi& api = ensure_context();
  check(api, api.event_synchronize(event_), "cuEventSynchronize", after_last_launch());
}

void wait_event(CUstream_st* stream, const Event& event) {
  const DriverApi& api = ensure_context();
  check(api, api.stream_wait_event(stream, event.handle(), 0), "cuStreamWaitEvent");
}

float elapsed_ms(const Event& start, const Event& end) {
  end.synchronize();
  const DriverApi& api = ensure_context();
  float milliseconds = 0;
  check(api, api.event_elapsed_time(&milliseconds, start.handle(), end.handle()), "cuEventElapsedTime");
  return milliseconds;
}

// ---- Graph ------------------------------------------------------------------------------------

Graph::Graph(Graph&& other) noexcept : graph_(other.graph_), exec_(other.exec_) {
  other.graph_ = nullptr;
  other.exec_ = nullptr;
}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    Graph old(std::move(*this));
    graph_ = other.graph_;
    exec_ = other.exec_;
    other.graph_ = nullptr;
    other.exec_ = nullptr;
  }
  return *this;
}

Graph::~Graph() {
  if (!graph_ && !exec_) return;
  try {
    const DriverApi& api = ensure_context();
    if (exec_) api.graph_exec_destroy(exec_);
    if (graph_) api.graph_destroy(graph_);
  } catch (const Error&) {
  }
}

void Graph::launch(const Stream& stream) const {
  const DriverApi& api = ensure_context();
  check(api, api.graph_launch(exec_, stream.handle()), "cuGraphLaunch");
}

void begin_capture(const Stream& stream) {
  const DriverApi& api = ensure_context();
  check(api, api.stream_begin_capture(stream.handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
}

Graph end_capture(const Stream& stream) {
  const DriverApi& api = ensure_context();
  CUgraph graph = nullptr;
  check(api, api.stream_end_capture(stream.handle(), &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  CUresult result = api.graph_instantiate(&exec, graph, 0);
  if (result != CUDA_SUCCESS) {
    api.graph_destroy(graph);
    check(api, result, "cuGraphInstantiate");
  }
  return Graph(graph, exec);
}

Graph capture_graph(const Stream& stream, const std::function<void()>& work) {
  begin_capture(stream);
  try {
    work();
  } catch (...) {
    // Leave the stream usable: end the (possibly invalidated) capture and drop what it recorded.
    const DriverApi& api = ensure_context();
    CUgraph graph = nullptr;
    if (api.stream_end_capture(stream.handle(), &graph) == CUDA_SUCCESS && graph) api.graph_destroy(graph);
    throw;
  }
  return end_capture(stream);
}

ReplayTiming time_replays(const Graph& graph, const Stream& stream, int warmup, int replays) {
  if (replays < 1) throw Error("time_replays needs at least one replay, got " + std::to_string(replays));
  for (int i = 0; i < warmup; ++i) graph.launch(stream);
  // An event between consecutive replays, all queued before any is read, so the host does not pace the GPU.
  std::vector<Event> events(static_cast<size_t>(replays) + 1);
  events[0].record(stream.handle());
  for (int i = 0; i < replays; ++i) {
    graph.launch(stream);
    events[i + 1].record(stream.handle());
  }
  stream.synchronize();
  std::vector<double> times;
  for (int i = 0; i < replays; ++i) times.push_back(elapsed_ms(events[i], events[i + 1]));
  std::sort(times.begin(), times.end());
  ReplayTiming timing;
  timing.replays = replays;
  timing.min_ms = times.front();
  timing.max_ms = times.back();
  size_t middle = times.size() / 2;
  timing.median_ms = times.size() % 2 ? times[middle] : (times[middle - 1] + times[middle]) / 2;
  return timing;
}

}  // namespace solder::runtime
