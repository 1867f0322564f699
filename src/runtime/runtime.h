// Solder's runtime: compiles generated CUDA with NVRTC, caches the CUBINs on disk, and launches
// kernels (with thread-block clusters) through the CUDA driver API.
//
// Nothing here needs CUDA to build or to load: libcuda.so.1 and libnvrtc are opened with dlopen the
// first time they are needed, so the same `solder` binary runs on a machine without a GPU. There,
// query_device() says why no device is available (and the caller falls back to the CPU executor), and
// every call that needs the GPU throws solder::Error with the same reason. NVRTC needs no GPU: where
// the toolkit is installed, compile_cuda() works on a CPU-only machine too.
//
// Pieces, in the order a caller uses them:
//   query_device()        what GPU there is (never throws)
//   compile_cuda()        generated CUDA source → CUBIN for sm_90a, through the on-disk cache
//   Module, Function      cuModuleLoadData / cuModuleGetFunction
//   launch()              cuLaunchKernelEx with grid, block, cluster and dynamic shared memory
//   DeviceBuffer, ...     device memory (allocate, copy, fill)
//   Stream, Event, Graph  streams, event timing, CUDA-graph capture and replay (for benchmarks)
//
// Errors: every failing CUDA call becomes a solder::Error naming the call and the driver's error
// (name and string); launch errors also name the kernel and its grid/block/cluster/shared-memory
// configuration; compile errors quote the offending lines of the generated source.
//
// Threads: the runtime uses the primary context of device 0 (select another GPU with
// CUDA_VISIBLE_DEVICES) and makes it current on each thread that calls in. SOLDER_NO_GPU=1 makes the
// runtime behave as if there were no GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// The driver's opaque handle types (the same tags as in cuda.h, so handles pass to and from code that
// includes cuda.h unchanged).
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;

namespace solder::runtime {

// ---- The device ---------------------------------------------------------------------------------

// What the planner and the launcher need to know about GPU 0.
struct DeviceInfo {
  bool available = false;       // a usable GPU and driver were found
  std::string name;             // "NVIDIA H100 80GB HBM3"
  std::string why_unavailable;  // when !available: what was missing ("libcuda.so.1 could not be loaded: ...")
  int sm_count = 0;
  int major = 0, minor = 0;     // compute capability (9.0 on Hopper)
  int max_shared_per_block_optin = 0;  // bytes of shared memory a block may opt into (227 KB on H100)
  int64_t l2_bytes = 0;
  int64_t global_bytes = 0;
  int max_cluster_portable = 8;  // Hopper also runs 16 with the non-portable attribute (launch() sets it)
  int driver_version = 0;        // cuDriverGetVersion, e.g. 13000

  // Whether CUBINs compiled for sm_90a (the only target Solder generates) run on this device.
  bool runs_sm90a() const { return available && major == 9 && minor == 0; }
};

// Queries GPU 0. Never throws: without a driver or a GPU, available=false and why_unavailable says why.
DeviceInfo query_device();

// Waits until all work on the device has finished (cuCtxSynchronize).
void synchronize_device();

// ---- Device headers -------------------------------------------------------------------------------

// One of Solder's device headers (device/**/*.cuh), named as generated code includes it:
// path "solder/cluster/cluster.cuh" for device/solder/cluster/cluster.cuh.
struct DeviceHeader {
  std::string path;
  std::string text;
};

struct DeviceHeaderSet {
  std::vector<DeviceHeader> headers;  // sorted by path
  std::string origin;                 // "embedded in the binary", or the directory they were read from
  std::string digest;                 // hash of every path and text: part of the compile-cache key
};

// The device headers compile_cuda() gives NVRTC. They are embedded in the binary when the build
// includes src/runtime/embed_headers.cmake; otherwise they are read from the source tree:
// $SOLDER_SOURCE_DIR/device, or the first `device` folder beside the executable or one of its parents.
// Headers added with register_embedded_header() are included either way (and replace a header of the
// same path).
DeviceHeaderSet device_headers();

// Adds (or replaces) a header available to compile_cuda() as `#include <path>`.
void register_embedded_header(const std::string& path, const std::string& text);

// ---- Compiling ---------------------------------------------------------------------------------

struct CompileFlags {
  std::string arch = "sm_90a";               // a real architecture: NVRTC then returns a CUBIN
  bool fast_math = false;                    // --use_fast_math
  bool line_info = false;                    // -lineinfo (source lines in profiles)
  bool debug = false;                        // -G
  int max_registers = 0;                     // --maxrregcount when > 0
  std::vector<std::string> defines;          // "NAME" or "NAME=VALUE", passed as -D
  std::vector<std::string> extra_options;    // passed to NVRTC as they are
  // The cache (not part of the key): off, or a directory; empty = $SOLDER_CACHE_DIR or ~/.cache/solder.
  bool use_cache = true;
  std::string cache_dir;
  // Translation units compiled at once (not part of the key): a source of several kernels, as the CUDA
  // backend writes them, is split into at most this many units, each the shared prelude and some of the
  // kernels, compiled in child processes (fork) at the same time. 0 = $SOLDER_COMPILE_JOBS, else
  // set_default_compile_jobs (1 unless the host set it); 1 = one unit, in this process.
  int jobs = 0;
};

// A compiled module: its CUBINs (one per translation unit) and what produced them.
struct CompiledModule {
  std::string name;                      // the source's name, e.g. "attention_fused.cu"
  std::vector<std::vector<char>> cubins; // ELF images for cuModuleLoadData, one per translation unit
  std::string log;                       // NVRTC's log (warnings), empty for a cache hit
  bool from_cache = false;               // every unit came from the cache
  std::string cache_path;                // the first unit's cache entry ("" when the cache was not used)
  double compile_seconds = 0;            // wall time spent in NVRTC (0 when every unit came from the cache)
};

// Compiles CUDA C++ with NVRTC for flags.arch with -std=c++20 -default-device, the CUDA toolkit's
// include and include/cccl folders (found from $CUDA_HOME, $CUDA_PATH, the folder NVRTC was loaded
// from, or /usr/local/cuda) and Solder's device headers. Looks in the on-disk cache first (per
// translation unit). A source with several "// ---- kernel" sections (the CUDA backend's) and no
// namespace-scope variable is split per flags.jobs and its units compiled in child processes at
// once; a split that does not compile is compiled whole. Throws solder::Error when NVRTC is missing or the source does not
// compile; the message holds NVRTC's log with each offending line of `source` (or of a device header)
// quoted.
CompiledModule compile_cuda(const std::string& source, const std::string& name, const CompileFlags& flags = {});

// The jobs of a compile whose flags.jobs is 0 and $SOLDER_COMPILE_JOBS unset (1 to 16; 1 at start).
// Compiling several units forks the process: only a host that forks safely at compile time (the
// solder command does, with its hardware threads) should raise it.
void set_default_compile_jobs(int jobs);

namespace detail {
// The translation units compile_cuda() compiles for `source` given at most `parts` of them: the source
// itself, or the text before the first "// ---- kernel" line followed by contiguous runs of the kernel
// sections, in order. Only sections that include a skeleton header (solder/gemm/, solder/attention/:
// seconds of NVRTC each) are spread over units; a plain section goes with the skeleton section before
// it. The source stays whole when it has fewer than four skeleton sections (a unit re-parses the CuTe
// headers: the split pays only for many skeleton kernels, docs/runtime.md), or defines a
// namespace-scope variable (`__device__ T x[3];`), which each unit would otherwise get its own copy of.
std::vector<std::string> split_by_kernel(const std::string& source, int parts);
}  // namespace detail

// Whether NVRTC can be loaded; *why says why not. "13.0" style version string, "" when missing.
bool nvrtc_available(std::string* why = nullptr);
std::string nvrtc_version();

// The NVRTC options compile_cuda() passes for these flags (for logs and tests). When the CUTLASS/CuTe
// headers are found (cutlass_include_dir), their folder is one of the include paths.
std::vector<std::string> nvrtc_options(const CompileFlags& flags);

// The folder holding cute/ and cutlass/ (CUTLASS 4.2 headers from PyPI nvidia-cutlass, which
// scripts/setup.sh installs), for the sm_90a GEMM skeleton (device/solder/gemm). They are not embedded
// (15 MB): NVRTC reads them from here. $SOLDER_CUTLASS_INCLUDE wins; else the folder CMake found at
// configure time (python3 -c 'import cutlass_library'). "" when neither holds cute/tensor.hpp; *why
// then says where it looked. Generated code that includes solder/gemm/sm90_gemm.cuh should also pass
// the define NDEBUG (CuTe's device asserts).
std::string cutlass_include_dir(std::string* why = nullptr);

// ---- The compile cache -----------------------------------------------------------------------------
//
// One file per CUBIN, <dir>/<key>.cubin, holding a magic line, the full key text, the CUBIN and a
// checksum. Writes go to a temporary file renamed into place, so readers never see half an entry;
// entries that are truncated, corrupt, or hold another key text (a hash collision) are ignored.

// Everything a CUBIN depends on, as one text: source, name, options (arch included), NVRTC version and
// the digest of the device headers.
std::string compile_key_text(const std::string& source, const std::string& name,
                             const std::vector<std::string>& options, const std::string& nvrtc_version,
                             const std::string& headers_digest);
// The entry's file stem: 16 hex digits of a 64-bit hash of the key text.
std::string cache_key(const std::string& key_text);
// $SOLDER_CACHE_DIR, else $HOME/.cache/solder ("" when neither is set). flags.cache_dir wins.
std::string cache_directory(const CompileFlags& flags = {});
// The CUBIN stored under this key text, if a valid entry exists.
std::optional<std::vector<char>> cache_load(const std::string& dir, const std::string& key_text);
// Stores atomically; returns the entry's path, or "" when the directory cannot be written (never throws).
std::string cache_store(const std::string& dir, const std::string& key_text, const std::vector<char>& cubin);

// ---- Modules, functions, launches -------------------------------------------------------------

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

struct LaunchConfig {
  Dim3 grid;                          // blocks (a multiple of the cluster shape in each dimension)
  Dim3 block;                         // threads per block
  Dim3 cluster;                       // blocks per cluster; 1x1x1 = no cluster attribute
  unsigned dynamic_shared_bytes = 0;  // per block
  CUstream_st* stream = nullptr;      // nullptr = the default stream
  // Programmatic dependent launch (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): the kernel may
  // start before the previous kernel in the stream completes. Only for kernels that execute
  // griddepcontrol.wait before touching global memory (device/solder/gemm/sm90_gemm.cuh does).
  bool programmatic = false;
};

// "kernel 'name' (grid 8x1x1, block 128x1x1, cluster 2x1x1, dynamic shared memory 0 bytes)".
std::string describe_launch(const std::string& kernel, const LaunchConfig& config);

// Static facts about a kernel (cuFuncGetAttribute).
struct FunctionInfo {
  int registers = 0;
  int static_shared_bytes = 0;
  int local_bytes = 0;  // spills and stack per thread
  int max_threads_per_block = 0;
};

class Module;

// A kernel of a loaded module. Copies share the module (which stays loaded while any copy lives).
class Function {
 public:
  const std::string& name() const { return name_; }
  CUfunc_st* handle() const { return handle_; }
  FunctionInfo info() const;

 private:
  friend class Module;
  friend void launch(const Function&, const LaunchConfig&, void**);
  struct State;
  std::string name_;
  CUfunc_st* handle_ = nullptr;
  std::shared_ptr<CUmod_st> module_;    // keeps the module loaded
  std::shared_ptr<State> state_;        // attributes already set on the kernel
};

// CUBINs loaded into the device (cuModuleLoadData), one per translation unit of a compiled source;
// each is unloaded when the last Module/Function copy using it goes.
class Module {
 public:
  explicit Module(const CompiledModule& compiled);
  Module(const std::vector<char>& cubin, std::string name);
  // The kernel of this (unmangled: declare kernels extern "C") name, from whichever unit defines it;
  // throws naming the module if absent.
  Function get_function(const std::string& name) const;
  // Reads the bytes of the __device__ variable `name` (unmangled: declare it at global scope);
  // throws naming the module if it is absent or not `bytes` long. Synchronous (cuMemcpyDtoH).
  void read_global(const std::string& name, void* host, size_t bytes) const;
  const std::string& name() const { return name_; }

 private:
  void load(const std::vector<char>& cubin);
  std::string name_;
  std::vector<std::shared_ptr<CUmod_st>> units_;
};

// Launches through cuLaunchKernelEx. `args` points at each kernel parameter in order, as for
// cuLaunchKernel. With a cluster of more than one block the launch carries
// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; clusters of more than 8 blocks first set
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, and more than 48 KB of dynamic shared memory
// first raises CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. Errors name the kernel and config.
void launch(const Function& function, const LaunchConfig& config, void** args);

// launch() with the arguments given as values: launch_with(f, config, out_pointer, n).
template <class... Args>
void launch_with(const Function& function, const LaunchConfig& config, const Args&... args) {
  void* pointers[sizeof...(Args) + 1] = {const_cast<void*>(static_cast<const void*>(&args))...};
  launch(function, config, pointers);
}

// ---- Device memory -----------------------------------------------------------------------------

using DevicePtr = unsigned long long;  // CUdeviceptr

// The synchronous calls return when their transfer is complete. They are ordered after work on the
// default stream only: synchronize a Stream (or the device) before reading what its kernels wrote.
DevicePtr device_alloc(size_t bytes);  // cuMemAlloc
void device_free(DevicePtr pointer);   // cuMemFree (0 is ignored)
void copy_to_device(DevicePtr dst, const void* src, size_t bytes);  // cuMemcpyHtoD
void copy_to_host(void* dst, DevicePtr src, size_t bytes);          // cuMemcpyDtoH
void fill_u32(DevicePtr dst, uint32_t value, size_t count);         // cuMemsetD32 (count words)
// cuMemsetD32Async: queued on `stream` (and captured into a graph when the stream is capturing).
void fill_u32_async(DevicePtr dst, uint32_t value, size_t count, CUstream_st* stream);

// An owned device allocation, freed by the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : pointer_(device_alloc(bytes)), bytes_(bytes) {}
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  DevicePtr pointer() const { return pointer_; }
  size_t bytes() const { return bytes_; }

  template <class T>
  void upload(const std::vector<T>& values) { copy_to_device(pointer_, values.data(), checked(values.size() * sizeof(T))); }
  template <class T>
  std::vector<T> download(size_t count) const {
    std::vector<T> values(count);
    copy_to_host(values.data(), pointer_, checked(count * sizeof(T)));
    return values;
  }

 private:
  size_t checked(size_t bytes) const;  // throws when bytes > bytes_
  DevicePtr pointer_ = 0;
  size_t bytes_ = 0;
};

// ---- Streams, events, graphs ----------------------------------------------------------------------

// A non-blocking stream (cuStreamCreate with CU_STREAM_NON_BLOCKING), destroyed with the object.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream_st* handle() const { return stream_; }
  void synchronize() const;  // cuStreamSynchronize; reports a faulting kernel with its launch

 private:
  CUstream_st* stream_ = nullptr;
};

// A timing event (cuEventCreate).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(CUstream_st* stream) const;  // cuEventRecord
  void synchronize() const;                // cuEventSynchronize
  CUevent_st* handle() const { return event_; }

 private:
  CUevent_st* event_ = nullptr;
};

// cuStreamWaitEvent: work queued on `stream` after this call waits for the work `event` last recorded.
// When the event was recorded on a capturing stream, this joins `stream` to that capture (a fork in the
// graph); recording an event on the joined stream and waiting for it on the capturing one is the join.
void wait_event(CUstream_st* stream, const Event& event);

// Milliseconds between two recorded events (cuEventElapsedTime), after waiting for `end`.
float elapsed_ms(const Event& start, const Event& end);

// An instantiated CUDA graph (cuGraphInstantiate), replayed with launch().
class Graph {
 public:
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();
  void launch(const Stream& stream) const;  // cuGraphLaunch

 private:
  friend Graph end_capture(const Stream&);
  Graph(CUgraph_st* graph, CUgraphExec_st* exec) : graph_(graph), exec_(exec) {}
  CUgraph_st* graph_ = nullptr;
  CUgraphExec_st* exec_ = nullptr;
};

// Starts capturing the work queued on `stream` (cuStreamBeginCapture, thread-local mode).
void begin_capture(const Stream& stream);
// Ends the capture and instantiates the graph (cuStreamEndCapture, cuGraphInstantiate).
Graph end_capture(const Stream& stream);
// begin_capture, `work` (which queues launches on `stream`), end_capture. If `work` throws, the
// capture is ended and discarded and the exception propagates.
Graph capture_graph(const Stream& stream, const std::function<void()>& work);

// Per-replay GPU time of a graph: events around each replay after `warmup` untimed replays.
struct ReplayTiming {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int replays = 0;
};
ReplayTiming time_replays(const Graph& graph, const Stream& stream, int warmup = 3, int replays = 20);

}  // namespace solder::runtime
