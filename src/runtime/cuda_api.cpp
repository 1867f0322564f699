// Opening libcuda and libnvrtc at run time (dlopen/dlsym), the primary context, and the error helpers
// shared by the runtime's files.
#include "runtime/cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <mutex>

#include "ir/diagnostics.h"

namespace solder::runtime::cuda {
namespace {

// Stores the address of the first of `names` that the library exports in `slot`; remembers the first
// name of an entry point it lacks in *missing.
template <class Pointer>
void bind(void* library, Pointer& slot, std::initializer_list<const char*> names, std::string* missing) {
  for (const char* name : names) {
    if (void* address = dlsym(library, name)) {
      slot = reinterpret_cast<Pointer>(address);
      return;
    }
  }
  if (missing->empty()) *missing = *names.begin();
}

struct DriverLibrary {
  DriverApi api{};
  std::string error;  // empty when loaded
};

const DriverLibrary& driver_library() {
  static const DriverLibrary library = [] {
    DriverLibrary lib;
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* reason = dlerror();
      lib.error = std::string("libcuda.so.1 could not be loaded (") + (reason ? reason : "unknown reason") +
                  "): no NVIDIA driver on this machine";
      return lib;
    }
    std::string missing;
    DriverApi& a = lib.api;
    bind(handle, a.init, {"cuInit"}, &missing);
    bind(handle, a.driver_get_version, {"cuDriverGetVersion"}, &missing);
    bind(handle, a.get_error_name, {"cuGetErrorName"}, &missing);
    bind(handle, a.get_error_string, {"cuGetErrorString"}, &missing);
    bind(handle, a.device_get, {"cuDeviceGet"}, &missing);
    bind(handle, a.device_get_count, {"cuDeviceGetCount"}, &missing);
    bind(handle, a.device_get_name, {"cuDeviceGetName"}, &missing);
    bind(handle, a.device_get_attribute, {"cuDeviceGetAttribute"}, &missing);
    bind(handle, a.device_total_mem, {"cuDeviceTotalMem_v2"}, &missing);
    bind(handle, a.primary_ctx_retain, {"cuDevicePrimaryCtxRetain"}, &missing);
    bind(handle, a.ctx_set_current, {"cuCtxSetCurrent"}, &missing);
    bind(handle, a.ctx_synchronize, {"cuCtxSynchronize"}, &missing);
    bind(handle, a.module_load_data, {"cuModuleLoadData"}, &missing);
    bind(handle, a.module_unload, {"cuModuleUnload"}, &missing);
    bind(handle, a.module_get_function, {"cuModuleGetFunction"}, &missing);
    bind(handle, a.module_get_global, {"cuModuleGetGlobal_v2"}, &missing);
    bind(handle, a.func_get_attribute, {"cuFuncGetAttribute"}, &missing);
    bind(handle, a.func_set_attribute, {"cuFuncSetAttribute"}, &missing);
    bind(handle, a.launch_kernel_ex, {"cuLaunchKernelEx"}, &missing);
    bind(handle, a.mem_alloc, {"cuMemAlloc_v2"}, &missing);
    bind(handle, a.mem_free, {"cuMemFree_v2"}, &missing);
    bind(handle, a.memcpy_htod, {"cuMemcpyHtoD_v2"}, &missing);
    bind(handle, a.memcpy_dtoh, {"cuMemcpyDtoH_v2"}, &missing);
    bind(handle, a.memset_d32, {"cuMemsetD32_v2"}, &missing);
    bind(handle, a.memset_d32_async, {"cuMemsetD32Async"}, &missing);
    bind(handle, a.stream_create, {"cuStreamCreate"}, &missing);
    bind(handle, a.stream_destroy, {"cuStreamDestroy_v2"}, &missing);
    bind(handle, a.stream_synchronize, {"cuStreamSynchronize"}, &missing);
    bind(handle, a.stream_wait_event, {"cuStreamWaitEvent"}, &missing);
    bind(handle, a.stream_begin_capture, {"cuStreamBeginCapture_v2"}, &missing);
    bind(handle, a.stream_end_capture, {"cuStreamEndCapture"}, &missing);
    bind(handle, a.graph_instantiate, {"cuGraphInstantiateWithFlags"}, &missing);
    bind(handle, a.graph_launch, {"cuGraphLaunch"}, &missing);
    bind(handle, a.graph_destroy, {"cuGraphDestroy"}, &missing);
    bind(handle, a.graph_exec_destroy, {"cuGraphExecDestroy"}, &missing);
    bind(handle, a.event_create, {"cuEventCreate"}, &missing);
    bind(handle, a.event_destroy, {"cuEventDestroy_v2"}, &missing);
    bind(handle, a.event_record, {"cuEventRecord"}, &missing);
    bind(handle, a.event_synchronize, {"cuEventSynchronize"}, &missing);
    // _v2 from CUDA 12.8 on; the older symbol has the same signature.
    bind(handle, a.event_elapsed_time, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, &missing);
    bind(handle, a.tensor_map_encode_tiled, {"cuTensorMapEncodeTiled"}, &missing);
    if (!missing.empty())
      lib.error = "libcuda.so.1 has no " + missing + ": the driver is too old for Solder (it needs CUDA 12.0 or newer)";
    return lib;
  }();
  return library;
}

struct NvrtcLibrary {
  NvrtcApi api{};
  std::string error;  // empty when loaded
};

// Where NVRTC may be: an explicit $SOLDER_NVRTC, the loader's search path, then the toolkit folders.
std::vector<std::string> nvrtc_candidates() {
  std::vector<std::string> candidates;
  if (const char* explicit_path = std::getenv("SOLDER_NVRTC"); explicit_path && *explicit_path)
    candidates.push_back(explicit_path);
  for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) candidates.push_back(name);
  std::vector<std::string> roots;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(variable); root && *root) roots.push_back(root);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots)
    for (const char* folder : {"/lib64/", "/lib/", "/targets/x86_64-linux/lib/"})
      for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"})
        candidates.push_back(root + folder + name);
  return candidates;
}

const NvrtcLibrary& nvrtc_library() {
  static const NvrtcLibrary library = [] {
    NvrtcLibrary lib;
    void* handle = nullptr;
    std::string tried;
    for (const std::string& candidate : nvrtc_candidates()) {
      handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
      // Report the loader's words once for a bare name, and only paths that exist otherwise.
      const char* reason = dlerror();
      if (candidate.find('/') == std::string::npos || std::filesystem::exists(candidate))
        tried += "\n  " + candidate + ": " + (reason ? reason : "not loadable");
    }
    if (!handle) {
      lib.error = "NVRTC (libnvrtc.so) could not be loaded; set CUDA_HOME or SOLDER_NVRTC. Tried:" + tried;
      return lib;
    }
    std::string missing;
    NvrtcApi& a = lib.api;
    bind(handle, a.version, {"nvrtcVersion"}, &missing);
    bind(handle, a.get_error_string, {"nvrtcGetErrorString"}, &missing);
    bind(handle, a.create_program, {"nvrtcCreateProgram"}, &missing);
    bind(handle, a.destroy_program, {"nvrtcDestroyProgram"}, &missing);
    bind(handle, a.compile_program, {"nvrtcCompileProgram"}, &missing);
    bind(handle, a.get_program_log_size, {"nvrtcGetProgramLogSize"}, &missing);
    bind(handle, a.get_program_log, {"nvrtcGetProgramLog"}, &missing);
    bind(handle, a.get_cubin_size, {"nvrtcGetCUBINSize"}, &missing);
    bind(handle, a.get_cubin, {"nvrtcGetCUBIN"}, &missing);
    if (!missing.empty()) {
      lib.error = "the NVRTC library found has no " + missing + " (NVRTC 12.0 or newer is needed)";
      return lib;
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(a.version), &info) && info.dli_fname) {
      std::error_code ignored;
      auto path = std::filesystem::weakly_canonical(info.dli_fname, ignored);
      a.library_path = path.empty() ? info.dli_fname : path.string();
    }
    return lib;
  }();
  return library;
}

bool gpu_disabled() {
  const char* value = std::getenv("SOLDER_NO_GPU");
  return value && *value && std::string(value) != "0";
}

// The primary context of device 0, retained once for the life of the process.
struct ContextState {
  const DriverApi* api = nullptr;
  CUcontext context = nullptr;
  std::string error;  // why there is no context
};

const ContextState& context_state() {
  static const ContextState state = [] {
    ContextState s;
    std::string why;
    const DriverApi* api = try_driver(&why);
    if (!api) {
      s.error = why;
      return s;
    }
    CUresult result = api->init(0);
    if (result != CUDA_SUCCESS) {
      s.error = "cuInit failed: " + describe_result(*api, result);
      return s;
    }
    CUdevice device = 0;
    if ((result = api->device_get(&device, 0)) != CUDA_SUCCESS) {
      s.error = "cuDeviceGet(0) failed: " + describe_result(*api, result);
      return s;
    }
    if ((result = api->primary_ctx_retain(&s.context, device)) != CUDA_SUCCESS) {
      s.error = "cuDevicePrimaryCtxRetain failed: " + describe_result(*api, result);
      return s;
    }
    s.api = api;
    return s;
  }();
  return state;
}

std::mutex last_launch_mutex;
std::string last_launch_text;

}  // namespace

const DriverApi* try_driver(std::string* why) {
  if (gpu_disabled()) {
    if (why) *why = "the GPU is disabled by SOLDER_NO_GPU";
    return nullptr;
  }
  const DriverLibrary& lib = driver_library();
  if (!lib.error.empty()) {
    if (why) *why = lib.error;
    return nullptr;
  }
  return &lib.api;
}

const NvrtcApi* try_nvrtc(std::string* why) {
  const NvrtcLibrary& lib = nvrtc_library();
  if (!lib.error.empty()) {
    if (why) *why = lib.error;
    return nullptr;
  }
  return &lib.api;
}

std::string describe_result(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.get_error_name(result, &name) != CUDA_SUCCESS || !name) name = nullptr;
  if (api.get_error_string(result, &text) != CUDA_SUCCESS || !text) text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void check(const DriverApi& api, CUresult result, const char* call, const std::string& context) {
  if (result == CUDA_SUCCESS) return;
  std::string message = std::string(call) + " failed: " + describe_result(api, result);
  if (!context.empty()) message += " for " + context;
  throw Error(message);
}

const DriverApi& ensure_context() {
  if (gpu_disabled()) throw Error("no usable GPU: the GPU is disabled by SOLDER_NO_GPU");
  const ContextState& state = context_state();
  if (!state.api) throw Error("no usable GPU: " + state.error);
  thread_local CUcontext current = nullptr;
  if (current != state.context) {
    check(*state.api, state.api->ctx_set_current(state.context), "cuCtxSetCurrent");
    current = state.context;
  }
  return *state.api;
}

void note_launch(const std::string& description) {
  std::lock_guard lock(last_launch_mutex);
  last_launch_text = description;
}

std::string last_launch() {
  std::lock_guard lock(last_launch_mutex);
  return last_launch_text;
}

}  // namespace solder::runtime::cuda
