// The device query and device memory (allocation, copies, fills).
#include <string>

#include "ir/diagnostics.h"
#include "runtime/cuda_api.h"
#include "runtime/runtime.h"

namespace solder::runtime {

using namespace cuda;

DeviceInfo query_device() {
  DeviceInfo info;
  try {
    std::string why;
    const DriverApi* api = try_driver(&why);
    if (!api) {
      info.why_unavailable = why;
      return info;
    }
    CUresult result = api->init(0);
    if (result == CUDA_ERROR_STUB_LIBRARY) {
      info.why_unavailable = "libcuda.so.1 is the toolkit's stub library, not an NVIDIA driver";
      return info;
    }
    if (result != CUDA_SUCCESS) {
      info.why_unavailable = "cuInit failed: " + describe_result(*api, result);
      if (result == CUDA_ERROR_NO_DEVICE) info.why_unavailable += ": the driver sees no GPU";
      return info;
    }
    api->driver_get_version(&info.driver_version);
    int count = 0;
    if ((result = api->device_get_count(&count)) != CUDA_SUCCESS || count == 0) {
      info.why_unavailable = result != CUDA_SUCCESS ? "cuDeviceGetCount failed: " + describe_result(*api, result)
                                                    : "the driver reports no GPU";
      return info;
    }
    CUdevice device = 0;
    if ((result = api->device_get(&device, 0)) != CUDA_SUCCESS) {
      info.why_unavailable = "cuDeviceGet(0) failed: " + describe_result(*api, result);
      return info;
    }
    char name[256] = {};
    api->device_get_name(name, sizeof(name) - 1, device);
    info.name = name;
    // Reads one attribute; the query fails as a whole if any read fails.
    auto attribute = [&](int id, const char* what) {
      int value = 0;
      CUresult status = api->device_get_attribute(&value, id, device);
      if (status != CUDA_SUCCESS)
        throw Error(std::string("cuDeviceGetAttribute(") + what + ") failed: " + describe_result(*api, status));
      return value;
    };
    info.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT");
    info.major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR");
    info.minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR");
    info.max_shared_per_block_optin =
        attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
    info.l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2_CACHE_SIZE");
    size_t total = 0;
    if ((result = api->device_total_mem(&total, device)) != CUDA_SUCCESS)
      throw Error("cuDeviceTotalMem failed: " + describe_result(*api, result));
    info.global_bytes = static_cast<int64_t>(total);
    info.available = true;
  } catch (const std::exception& e) {
    info.available = false;
    info.why_unavailable = e.what();
  }
  return info;
}

void synchronize_device() {
  const DriverApi& api = ensure_context();
  std::string context = last_launch();
  check(api, api.ctx_synchronize(), "cuCtxSynchronize", context.empty() ? "" : "work ending with " + context);
}

// ---- Memory -----------------------------------------------------------------------------------

DevicePtr device_alloc(size_t bytes) {
  const DriverApi& api = ensure_context();
  CUdeviceptr pointer = 0;
  check(api, api.mem_alloc(&pointer, bytes == 0 ? 1 : bytes), "cuMemAlloc",
        std::to_string(bytes) + " bytes");
  return pointer;
}

void device_free(DevicePtr pointer) {
  if (pointer == 0) return;
  const DriverApi& api = ensure_context();
  check(api, api.mem_free(pointer), "cuMemFree");
}

void copy_to_device(DevicePtr dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const DriverApi& api = ensure_context();
  check(api, api.memcpy_htod(dst, src, bytes), "cuMemcpyHtoD", std::to_string(bytes) + " bytes");
  // From pageable memory the call may return before the DMA lands: finish it, so that work queued
  // next on any stream sees the data.
  check(api, api.stream_synchronize(nullptr), "cuStreamSynchronize", "after cuMemcpyHtoD");
}

void copy_to_host(void* dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return;
  const DriverApi& api = ensure_context();
  // A synchronous copy also reports an earlier kernel's fault: name the last launch.
  std::string context = std::to_string(bytes) + " bytes";
  if (std::string launch = last_launch(); !launch.empty()) context += ", after " + launch;
  check(api, api.memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH", context);
}

void fill_u32(DevicePtr dst, uint32_t value, size_t count) {
  const DriverApi& api = ensure_context();
  check(api, api.memset_d32(dst, value, count), "cuMemsetD32", std::to_string(count) + " words");
  check(api, api.stream_synchronize(nullptr), "cuStreamSynchronize", "after cuMemsetD32");  // see copy_to_device
}

void fill_u32_async(DevicePtr dst, uint32_t value, size_t count, CUstream_st* stream) {
  const DriverApi& api = ensure_context();
  check(api, api.memset_d32_async(dst, value, count, stream), "cuMemsetD32Async", std::to_string(count) + " words");
}

DeviceBuffer::~DeviceBuffer() {
  if (pointer_ == 0) return;
  // Destructors do not throw: a failing free (after a device fault, say) is dropped.
  try {
    ensure_context().mem_free(pointer_);
  } catch (const Error&) {
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : pointer_(other.pointer_), bytes_(other.bytes_) {
  other.pointer_ = 0;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    pointer_ = other.pointer_;
    bytes_ = other.bytes_;
    other.pointer_ = 0;
    other.bytes_ = 0;
  }
  return *this;
}

size_t DeviceBuffer::checked(size_t bytes) const {
  if (bytes > bytes_)
    throw Error("a copy of " + std::to_string(bytes) + " bytes does not fit the device buffer of " +
                std::to_string(bytes_) + " bytes");
  return bytes;
}

}  // namespace solder::runtime
