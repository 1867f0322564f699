// The runtime declares the slice of the CUDA driver API and NVRTC it uses itself (src/runtime/cuda_api.h)
// so that Solder builds without CUDA. Where the toolkit's headers are installed, this test compiles
// them next to those declarations and checks, at compile time, that every enum value and struct layout
// agrees, and that each function pointer has the type of the symbol the loader asks dlsym for.
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#if __has_include("/usr/local/cuda/include/cuda.h") && __has_include("/usr/local/cuda/include/nvrtc.h")
#define SOLDER_HAVE_CUDA_HEADERS 1
#include "/usr/local/cuda/include/cuda.h"
#include "/usr/local/cuda/include/nvrtc.h"
#endif

#include "runtime/cuda_api.h"
#include "runtime/tma.h"

namespace solder::runtime {
namespace {

#ifdef SOLDER_HAVE_CUDA_HEADERS

namespace ours = cuda;

static_assert(ours::CUDA_SUCCESS == ::CUDA_SUCCESS);
static_assert(ours::CUDA_ERROR_STUB_LIBRARY == ::CUDA_ERROR_STUB_LIBRARY);
static_assert(ours::CUDA_ERROR_NO_DEVICE == ::CUDA_ERROR_NO_DEVICE);
static_assert(ours::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == ::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(ours::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE == ::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
static_assert(ours::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(ours::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(ours::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ==
              ::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(ours::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK == ::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(ours::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES == ::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
static_assert(ours::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES == ::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
static_assert(ours::CU_FUNC_ATTRIBUTE_NUM_REGS == ::CU_FUNC_ATTRIBUTE_NUM_REGS);
static_assert(ours::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == ::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(ours::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED ==
              ::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
static_assert(ours::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == ::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
static_assert(ours::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == ::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(ours::CU_STREAM_NON_BLOCKING == ::CU_STREAM_NON_BLOCKING);
static_assert(ours::CU_EVENT_DEFAULT == ::CU_EVENT_DEFAULT);
static_assert(ours::NVRTC_SUCCESS == ::NVRTC_SUCCESS);

// Handle types are the very same types.
static_assert(std::is_same_v<ours::CUmodule, ::CUmodule>);
static_assert(std::is_same_v<ours::CUfunction, ::CUfunction>);
static_assert(std::is_same_v<ours::CUstream, ::CUstream>);
static_assert(std::is_same_v<ours::CUevent, ::CUevent>);
static_assert(std::is_same_v<ours::CUgraph, ::CUgraph>);
static_assert(std::is_same_v<ours::CUgraphExec, ::CUgraphExec>);
static_assert(std::is_same_v<ours::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<ours::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<ours::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<ours::nvrtcProgram, ::nvrtcProgram>);

// Struct layouts.
static_assert(sizeof(ours::CUlaunchAttribute) == sizeof(::CUlaunchAttribute));
static_assert(offsetof(ours::CUlaunchAttribute, value) == offsetof(::CUlaunchAttribute, value));
static_assert(offsetof(ours::CUlaunchAttribute, value.cluster_dim.z) == offsetof(::CUlaunchAttribute, value.clusterDim.z));
static_assert(sizeof(ours::CUlaunchConfig) == sizeof(::CUlaunchConfig));
static_assert(offsetof(ours::CUlaunchConfig, shared_mem_bytes) == offsetof(::CUlaunchConfig, sharedMemBytes));
static_assert(offsetof(ours::CUlaunchConfig, stream) == offsetof(::CUlaunchConfig, hStream));
static_assert(offsetof(ours::CUlaunchConfig, attrs) == offsetof(::CUlaunchConfig, attrs));
static_assert(offsetof(ours::CUlaunchConfig, num_attrs) == offsetof(::CUlaunchConfig, numAttrs));

// Our function pointer types equal the real ones up to enums declared as int (CUresult, the
// attribute enums) and our copies of the launch structs (whose layouts are checked above).
template <class A, class B>
constexpr bool compatible() {
  using a = std::remove_cv_t<A>;
  using b = std::remove_cv_t<B>;
  if constexpr (std::is_same_v<a, b>) return true;
  else if constexpr ((std::is_integral_v<a> || std::is_enum_v<a>) && (std::is_integral_v<b> || std::is_enum_v<b>))
    return sizeof(a) == sizeof(b);
  else if constexpr (std::is_pointer_v<a> && std::is_pointer_v<b>)
    return (std::is_class_v<std::remove_pointer_t<a>> && std::is_class_v<std::remove_pointer_t<b>>) ||
           compatible<std::remove_pointer_t<a>, std::remove_pointer_t<b>>();
  else return false;
}
template <class Ours, class Theirs>
constexpr bool same_signature = false;
template <class R1, class... A1, class R2, class... A2>
constexpr bool same_signature<R1 (*)(A1...), R2 (*)(A2...)> = [] {
  if constexpr (sizeof...(A1) != sizeof...(A2)) return false;
  else return compatible<R1, R2>() && (compatible<A1, A2>() && ...);
}();
#define SAME_SIGNATURE(api, member, symbol) \
  static_assert(same_signature<decltype(ours::api::member), decltype(&::symbol)>, #symbol)
SAME_SIGNATURE(DriverApi, init, cuInit);
SAME_SIGNATURE(DriverApi, driver_get_version, cuDriverGetVersion);
SAME_SIGNATURE(DriverApi, get_error_name, cuGetErrorName);
SAME_SIGNATURE(DriverApi, get_error_string, cuGetErrorString);
SAME_SIGNATURE(DriverApi, device_get, cuDeviceGet);
SAME_SIGNATURE(DriverApi, device_get_count, cuDeviceGetCount);
SAME_SIGNATURE(DriverApi, device_get_name, cuDeviceGetName);
SAME_SIGNATURE(DriverApi, device_get_attribute, cuDeviceGetAttribute);
SAME_SIGNATURE(DriverApi, device_total_mem, cuDeviceTotalMem_v2);
SAME_SIGNATURE(DriverApi, primary_ctx_retain, cuDevicePrimaryCtxRetain);
SAME_SIGNATURE(DriverApi, ctx_set_current, cuCtxSetCurrent);
SAME_SIGNATURE(DriverApi, ctx_synchronize, cuCtxSynchronize);
SAME_SIGNATURE(DriverApi, module_load_data, cuModuleLoadData);
SAME_SIGNATURE(DriverApi, module_unload, cuModuleUnload);
SAME_SIGNATURE(DriverApi, module_get_function, cuModuleGetFunction);
SAME_SIGNATURE(DriverApi, func_get_attribute, cuFuncGetAttribute);
SAME_SIGNATURE(DriverApi, func_set_attribute, cuFuncSetAttribute);
SAME_SIGNATURE(DriverApi, launch_kernel_ex, cuLaunchKernelEx);
SAME_SIGNATURE(DriverApi, mem_alloc, cuMemAlloc_v2);
SAME_SIGNATURE(DriverApi, mem_free, cuMemFree_v2);
SAME_SIGNATURE(DriverApi, memcpy_htod, cuMemcpyHtoD_v2);
SAME_SIGNATURE(DriverApi, memcpy_dtoh, cuMemcpyDtoH_v2);
SAME_SIGNATURE(DriverApi, memset_d32, cuMemsetD32_v2);
SAME_SIGNATURE(DriverApi, memset_d32_async, cuMemsetD32Async);
SAME_SIGNATURE(DriverApi, stream_create, cuStreamCreate);
SAME_SIGNATURE(DriverApi, stream_destroy, cuStreamDestroy_v2);
SAME_SIGNATURE(DriverApi, stream_synchronize, cuStreamSynchronize);
SAME_SIGNATURE(DriverApi, stream_wait_event, cuStreamWaitEvent);
SAME_SIGNATURE(DriverApi, tensor_map_encode_tiled, cuTensorMapEncodeTiled);
static_assert(sizeof(solder::runtime::TensorMapBytes) == sizeof(::CUtensorMap));
static_assert(alignof(solder::runtime::TensorMapBytes) == alignof(::CUtensorMap));
SAME_SIGNATURE(DriverApi, stream_begin_capture, cuStreamBeginCapture_v2);
SAME_SIGNATURE(DriverApi, stream_end_capture, cuStreamEndCapture);
SAME_SIGNATURE(DriverApi, graph_instantiate, cuGraphInstantiateWithFlags);
SAME_SIGNATURE(DriverApi, graph_launch, cuGraphLaunch);
SAME_SIGNATURE(DriverApi, graph_destroy, cuGraphDestroy);
SAME_SIGNATURE(DriverApi, graph_exec_destroy, cuGraphExecDestroy);
SAME_SIGNATURE(DriverApi, event_create, cuEventCreate);
SAME_SIGNATURE(DriverApi, event_destroy, cuEventDestroy_v2);
SAME_SIGNATURE(DriverApi, event_record, cuEventRecord);
SAME_SIGNATURE(DriverApi, event_synchronize, cuEventSynchronize);
SAME_SIGNATURE(DriverApi, event_elapsed_time, cuEventElapsedTime_v2);
SAME_SIGNATURE(NvrtcApi, version, nvrtcVersion);
SAME_SIGNATURE(NvrtcApi, get_error_string, nvrtcGetErrorString);
SAME_SIGNATURE(NvrtcApi, create_program, nvrtcCreateProgram);
SAME_SIGNATURE(NvrtcApi, destroy_program, nvrtcDestroyProgram);
SAME_SIGNATURE(NvrtcApi, compile_program, nvrtcCompileProgram);
SAME_SIGNATURE(NvrtcApi, get_program_log_size, nvrtcGetProgramLogSize);
SAME_SIGNATURE(NvrtcApi, get_program_log, nvrtcGetProgramLog);
SAME_SIGNATURE(NvrtcApi, get_cubin_size, nvrtcGetCUBINSize);
SAME_SIGNATURE(NvrtcApi, get_cubin, nvrtcGetCUBIN);

TEST(RuntimeCudaAbi, DeclarationsMatchTheToolkitHeaders) {
  std::printf("checked against cuda.h of CUDA %d.%d\n", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
}

#else

TEST(RuntimeCudaAbi, DeclarationsMatchTheToolkitHeaders) {
  GTEST_SKIP() << "/usr/local/cuda/include/cuda.h is not installed: nothing to compare with";
}

#endif

}  // namespace
}  // namespace solder::runtime
