// Private to src/runtime: the slice of the CUDA driver API and of NVRTC that the runtime calls.
//
// Solder builds and runs without CUDA: no CUDA header is included and neither libcuda nor libnvrtc is
// linked. Both libraries are opened on first use with dlopen, and the functions below are looked up
// with dlsym. The types, enum values and structs are copied from cuda.h / nvrtc.h (CUDA 13.0); the
// test tests/unit/runtime/cuda_abi_test.cpp checks them against the toolkit headers where those exist.
//
// Versioned entry points: cuda.h maps some names onto newer symbols (cuMemAlloc → cuMemAlloc_v2, ...);
// the loader asks for the symbol cuda.h would have used, so the behaviour matches a program linked
// against libcuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/runtime.h"

// Opaque handle types, with cuda.h's tag names so that they are the same types as there.
struct CUctx_st;
struct _nvrtcProgram;
struct CUtensorMap_st;  // CUtensorMap: 128 bytes, 128-byte aligned (tma.h TensorMapBytes)

namespace solder::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUgraph = CUgraph_st*;
using CUgraphExec = CUgraphExec_st*;
using nvrtcProgram = _nvrtcProgram*;
using nvrtcResult = int;

// CUresult values the runtime tests for.
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

// CUdevice_attribute values.
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute values.
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14;

// CUlaunchAttributeID, CUstreamCaptureMode and creation flags.
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DEFAULT = 0x0;

constexpr nvrtcResult NVRTC_SUCCESS = 0;

// CUlaunchAttribute: an id, padding to 8 bytes, and a 64-byte value union of which the runtime uses
// the cluster dimension and programmaticStreamSerializationAllowed (an int at offset 0).
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster_dim;
    int programmatic_stream_serialization_allowed;
  } value;
};

// CUlaunchConfig: the argument of cuLaunchKernelEx.
struct CUlaunchConfig {
  unsigned grid_dim_x, grid_dim_y, grid_dim_z;
  unsigned block_dim_x, block_dim_y, block_dim_z;
  unsigned shared_mem_bytes;
  CUstream stream;
  CUlaunchAttribute* attrs;
  unsigned num_attrs;
};

static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute layout differs from cuda.h");
static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig layout differs from cuda.h");

// The driver entry points, named after their cuda.h names in snake_case. The comment names the symbol.
struct DriverApi {
  CUresult (*init)(unsigned flags);                                          // cuInit
  CUresult (*driver_get_version)(int* version);                              // cuDriverGetVersion
  CUresult (*get_error_name)(CUresult error, const char** text);             // cuGetErrorName
  CUresult (*get_error_string)(CUresult error, const char** text);           // cuGetErrorString
  CUresult (*device_get)(CUdevice* device, int ordinal);                     // cuDeviceGet
  CUresult (*device_get_count)(int* count);                                  // cuDeviceGetCount
  CUresult (*device_get_name)(char* name, int length, CUdevice device);      // cuDeviceGetName
  CUresult (*device_get_attribute)(int* value, int attribute, CUdevice device);  // cuDeviceGetAttribute
  CUresult (*device_total_mem)(size_t* bytes, CUdevice device);              // cuDeviceTotalMem_v2
  CUresult (*primary_ctx_retain)(CUcontext* context, CUdevice device);       // cuDevicePrimaryCtxRetain
  CUresult (*ctx_set_current)(CUcontext context);                            // cuCtxSetCurrent
  CUresult (*ctx_synchronize)();                                             // cuCtxSynchronize
  CUresult (*module_load_data)(CUmodule* module, const void* image);         // cuModuleLoadData
  CUresult (*module_unload)(CUmodule module);                                // cuModuleUnload
  CUresult (*module_get_function)(CUfunction* function, CUmodule module, const char* name);  // cuModuleGetFunction
  CUresult (*module_get_global)(CUdeviceptr* pointer, size_t* bytes, CUmodule module, const char* name);  // cuModuleGetGlobal_v2
  CUresult (*func_get_attribute)(int* value, int attribute, CUfunction function);  // cuFuncGetAttribute
  CUresult (*func_set_attribute)(CUfunction function, int attribute, int value);   // cuFuncSetAttribute
  CUresult (*launch_kernel_ex)(const CUlaunchConfig* config, CUfunction function, void** params,
                               void** extra);                                // cuLaunchKernelEx
  CUresult (*mem_alloc)(CUdeviceptr* pointer, size_t bytes);                 // cuMemAlloc_v2
  CUresult (*mem_free)(CUdeviceptr pointer);                                 // cuMemFree_v2
  CUresult (*memcpy_htod)(CUdeviceptr dst, const void* src, size_t bytes);   // cuMemcpyHtoD_v2
  CUresult (*memcpy_dtoh)(void* dst, CUdeviceptr src, size_t bytes);         // cuMemcpyDtoH_v2
  CUresult (*memset_d32)(CUdeviceptr dst, unsigned value, size_t count);     // cuMemsetD32_v2
  CUresult (*memset_d32_async)(CUdeviceptr dst, unsigned value, size_t count, CUstream stream);  // cuMemsetD32Async
  CUresult (*stream_create)(CUstream* stream, unsigned flags);               // cuStreamCreate
  CUresult (*stream_destroy)(CUstream stream);                               // cuStreamDestroy_v2
  CUresult (*stream_synchronize)(CUstream stream);                           // cuStreamSynchronize
  CUresult (*stream_wait_event)(CUstream stream, CUevent event, unsigned flags);  // cuStreamWaitEvent
  CUresult (*stream_begin_capture)(CUstream stream, int mode);               // cuStreamBeginCapture_v2
  CUresult (*stream_end_capture)(CUstream stream, CUgraph* graph);           // cuStreamEndCapture
  CUresult (*graph_instantiate)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);  // cuGraphInstantiateWithFlags
  CUresult (*graph_launch)(CUgraphExec exec, CUstream stream);               // cuGraphLaunch
  CUresult (*graph_destroy)(CUgraph graph);                                  // cuGraphDestroy
  CUresult (*graph_exec_destroy)(CUgraphExec exec);                          // cuGraphExecDestroy
  CUresult (*event_create)(CUevent* event, unsigned flags);                  // cuEventCreate
  CUresult (*event_destroy)(CUevent event);                                  // cuEventDestroy_v2
  CUresult (*event_record)(CUevent event, CUstream stream);                  // cuEventRecord
  CUresult (*event_synchronize)(CUevent event);                              // cuEventSynchronize
  CUresult (*event_elapsed_time)(float* milliseconds, CUevent start, CUevent end);  // cuEventElapsedTime_v2
  // cuTensorMapEncodeTiled (CUDA 12.0+): tensorMap, dataType, rank, globalAddress, globalDim,
  // globalStrides, boxDim, elementStrides, interleave, swizzle, l2Promotion, oobFill.
  CUresult (*tensor_map_encode_tiled)(CUtensorMap_st* tensor_map, int data_type, unsigned rank, void* global_address,
                                      const uint64_t* global_dim, const uint64_t* global_strides,
                                      const uint32_t* box_dim, const uint32_t* element_strides, int interleave,
                                      int swizzle, int l2_promotion, int oob_fill);
};

// The NVRTC entry points.
struct NvrtcApi {
  nvrtcResult (*version)(int* major, int* minor);
  const char* (*get_error_string)(nvrtcResult result);
  nvrtcResult (*create_program)(nvrtcProgram* program, const char* source, const char* name, int header_count,
                                const char* const* headers, const char* const* include_names);
  nvrtcResult (*destroy_program)(nvrtcProgram* program);
  nvrtcResult (*compile_program)(nvrtcProgram program, int option_count, const char* const* options);
  nvrtcResult (*get_program_log_size)(nvrtcProgram program, size_t* size);
  nvrtcResult (*get_program_log)(nvrtcProgram program, char* log);
  nvrtcResult (*get_cubin_size)(nvrtcProgram program, size_t* size);
  nvrtcResult (*get_cubin)(nvrtcProgram program, char* cubin);
  std::string library_path;  // the file that was opened, e.g. /usr/local/cuda-13.0/lib/libnvrtc.so.13
};

// libcuda.so.1, opened once. Null when it cannot be loaded; *why then says why.
const DriverApi* try_driver(std::string* why);
// NVRTC, opened once. Null when it cannot be loaded; *why then says why (every path tried).
const NvrtcApi* try_nvrtc(std::string* why);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a CUresult.
std::string describe_result(const DriverApi& api, CUresult result);

// Throws solder::Error "<call> failed: <error name> (<error string>)[ for <context>]" unless `result`
// is CUDA_SUCCESS. `context` names what the call was for (a kernel and its configuration, say).
void check(const DriverApi& api, CUresult result, const char* call, const std::string& context = "");

// The driver with the primary context of device 0 current on the calling thread (initialised on the
// first call). Throws solder::Error saying why when there is no usable GPU.
const DriverApi& ensure_context();

// The most recent kernel launch ("kernel 'k' (grid ...)"), appended to errors of synchronising calls,
// since a kernel that faults is reported there rather than at its launch.
void note_launch(const std::string& description);
std::string last_launch();

}  // namespace solder::runtime::cuda
