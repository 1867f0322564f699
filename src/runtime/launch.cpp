// Loading CUBINs (Module), finding kernels (Function) and launching them with cluster dimensions.
#include <atomic>
#include <string>

#include "ir/diagnostics.h"
#include "runtime/cuda_api.h"
#include "runtime/runtime.h"

namespace solder::runtime {

using namespace cuda;

// What launch() has already set on a kernel, so that each attribute is set once, not per launch
// (cuFuncSetAttribute is a driver call; a graph capture should hold launches only).
struct Function::State {
  std::atomic<unsigned> max_dynamic_shared{0};
  std::atomic<bool> non_portable_cluster{false};
};

namespace {

constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;  // above this a kernel must opt in
constexpr uint64_t kMaxClusterBlocks = 16;                   // Hopper, with the non-portable attribute

std::string shape(const Dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

// Rejects configurations the driver would refuse with a vague error, saying what is wrong.
void validate(const std::string& kernel, const LaunchConfig& c) {
  auto fail_with = [&](const std::string& problem) {
    throw Error("cannot launch " + describe_launch(kernel, c) + ": " + problem);
  };
  if (c.grid.count() == 0 || c.block.count() == 0 || c.cluster.count() == 0)
    fail_with("every grid, block and cluster dimension must be at least 1");
  if (c.block.count() > 1024) fail_with("a block has at most 1024 threads");
  if (c.cluster.count() > kMaxClusterBlocks)
    fail_with("a cluster has at most " + std::to_string(kMaxClusterBlocks) + " blocks on Hopper");
  if (c.grid.x % c.cluster.x || c.grid.y % c.cluster.y || c.grid.z % c.cluster.z)
    fail_with("the grid must be a multiple of the cluster shape in every dimension");
}

}  // namespace

std::string describe_launch(const std::string& kernel, const LaunchConfig& c) {
  return "kernel '" + kernel + "' (grid " + shape(c.grid) + ", block " + shape(c.block) + ", cluster " +
         shape(c.cluster) + ", dynamic shared memory " + std::to_string(c.dynamic_shared_bytes) + " bytes)";
}

// ---- Module -----------------------------------------------------------------------------------

Module::Module(const CompiledModule& compiled) : name_(compiled.name) {
  if (compiled.cubins.empty()) throw Error("cannot load module '" + name_ + "': it has no CUBIN");
  for (const std::vector<char>& cubin : compiled.cubins) load(cubin);
}

Module::Module(const std::vector<char>& cubin, std::string name) : name_(std::move(name)) { load(cubin); }

void Module::load(const std::vector<char>& cubin) {
  const DriverApi& api = ensure_context();
  if (cubin.empty()) throw Error("cannot load module '" + name_ + "': the CUBIN is empty");
  CUmodule module = nullptr;
  check(api, api.module_load_data(&module, cubin.data()), "cuModuleLoadData", "module '" + name_ + "'");
  units_.emplace_back(module, [](CUmod_st* m) {
    try {
      ensure_context().module_unload(m);
    } catch (const Error&) {
    }
  });
}

Function Module::get_function(const std::string& name) const {
  const DriverApi& api = ensure_context();
  Function function;
  CUresult result = CUDA_ERROR_NOT_FOUND;
  for (const std::shared_ptr<CUmod_st>& unit : units_) {
    result = api.module_get_function(&function.handle_, unit.get(), name.c_str());
    if (result != CUDA_ERROR_NOT_FOUND) {
      function.module_ = unit;
      break;
    }
  }
  check(api, result, "cuModuleGetFunction",
        "kernel '" + name + "' in module '" + name_ + "' (is it declared extern \"C\" __global__?)");
  function.name_ = name;
  function.state_ = std::make_shared<Function::State>();
  return function;
}

void Module::read_global(const std::string& name, void* host, size_t bytes) const {
  const DriverApi& api = ensure_context();
  CUdeviceptr pointer = 0;
  size_t size = 0;
  CUresult result = CUDA_ERROR_NOT_FOUND;
  for (const std::shared_ptr<CUmod_st>& unit : units_) {
    result = api.module_get_global(&pointer, &size, unit.get(), name.c_str());
    if (result != CUDA_ERROR_NOT_FOUND) break;
  }
  check(api, result, "cuModuleGetGlobal", "variable '" + name + "' in module '" + name_ + "'");
  if (size != bytes)
    throw Error("variable '" + name + "' in module '" + name_ + "' has " + std::to_string(size) + " bytes, expected " +
                std::to_string(bytes));
  check(api, api.memcpy_dtoh(host, pointer, bytes), "cuMemcpyDtoH", "variable '" + name + "' in module '" + name_ + "'");
}

FunctionInfo Function::info() const {
  const DriverApi& api = ensure_context();
  FunctionInfo info;
  auto read = [&](int attribute, const char* what) {
    int value = 0;
    check(api, api.func_get_attribute(&value, attribute, handle_), "cuFuncGetAttribute",
          std::string(what) + " of kernel '" + name_ + "'");
    return value;
  };
  info.registers = read(CU_FUNC_ATTRIBUTE_NUM_REGS, "NUM_REGS");
  info.static_shared_bytes = read(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "SHARED_SIZE_BYTES");
  info.local_bytes = read(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "LOCAL_SIZE_BYTES");
  info.max_threads_per_block = read(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK");
  return info;
}

// ---- launch -----------------------------------------------------------------------------------

void launch(const Function& function, const LaunchConfig& config, void** args) {
  if (!function.handle_ || !function.state_) throw Error("launch of a Function that was not taken from a Module");
  const DriverApi& api = ensure_context();
  validate(function.name_, config);
  std::string description = describe_launch(function.name_, config);
  Function::State& state = *function.state_;

  // Kernel attributes the configuration needs, set once per Function.
  uint64_t cluster_blocks = config.cluster.count();
  if (cluster_blocks > 8 && !state.non_portable_cluster.load()) {
    check(api, api.func_set_attribute(function.handle_, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
          "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)", description);
    state.non_portable_cluster = true;
  }
  unsigned shared = config.dynamic_shared_bytes;
  if (shared > kDefaultDynamicSharedLimit && shared > state.max_dynamic_shared.load()) {
    check(api,
          api.func_set_attribute(function.handle_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(shared)),
          "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)", description);
    state.max_dynamic_shared = shared;
  }

  CUlaunchAttribute attributes[2]{};
  unsigned attribute_count = 0;
  CUlaunchConfig launch_config{};
  launch_config.grid_dim_x = config.grid.x;
  launch_config.grid_dim_y = config.grid.y;
  launch_config.grid_dim_z = config.grid.z;
  launch_config.block_dim_x = config.block.x;
  launch_config.block_dim_y = config.block.y;
  launch_config.block_dim_z = config.block.z;
  launch_config.shared_mem_bytes = shared;
  launch_config.stream = config.stream;
  if (cluster_blocks > 1) {
    CUlaunchAttribute& cluster = attributes[attribute_count++];
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.cluster_dim = {config.cluster.x, config.cluster.y, config.cluster.z};
  }
  if (config.programmatic) {
    CUlaunchAttribute& programmatic = attributes[attribute_count++];
    programmatic.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    programmatic.value.programmatic_stream_serialization_allowed = 1;
  }
  if (attribute_count > 0) {
    launch_config.attrs = attributes;
    launch_config.num_attrs = attribute_count;
  }
  check(api, api.launch_kernel_ex(&launch_config, function.handle_, args, nullptr), "cuLaunchKernelEx", description);
  note_launch(description);
}

}  // namespace solder::runtime
