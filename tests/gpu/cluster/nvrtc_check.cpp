// Compiles a kernel that uses every cluster collective with NVRTC for sm_90a, the way the Solder runtime
// will (include paths <cuda>/include, <cuda>/include/cccl and the device library). No GPU needed.
// Usage: nvrtc_check <device library dir> <cuda root>
#include <nvrtc.h>

#include <cstdio>
#include <string>
#include <vector>

static const char* kernel_source = R"(
#include <solder/cluster/cluster.cuh>
namespace sc = solder::cluster;
template <sc::reduce_op Op, class T>
__global__ void __cluster_dims__(4, 1, 1) every_collective(T* global, unsigned n) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto comm = sc::communicator::setup(smem, 4096);
  T* tile = reinterpret_cast<T*>(smem + sc::mailbox_bytes(4, 4096));
  sc::cluster_reduce<Op>(comm, tile, n);
  sc::cluster_gather(comm, tile, global, n);
  sc::reduce_scatter<Op>(comm, global, tile, n);
  sc::dsm_shuffle_start(comm, tile, n, 2);
  sc::dsm_shuffle_wait(comm, tile, tile + n, n, 2);
  sc::all_exchange<sc::exchange_op::mul>(comm, tile, n, 4);
  sc::inter_cluster_reduce<Op>(tile, n, global);
  comm.teardown();
}
template __global__ void every_collective<sc::reduce_op::sum, float>(float*, unsigned);
template __global__ void every_collective<sc::reduce_op::max, __nv_bfloat16>(__nv_bfloat16*, unsigned);
template __global__ void every_collective<sc::reduce_op::min, __half>(__half*, unsigned);
)";

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nvrtc_check <device library dir> <cuda root>\n");
    return 2;
  }
  std::string device = std::string("--include-path=") + argv[1];
  std::string cuda_include = std::string("--include-path=") + argv[2] + "/include";
  std::string cccl_include = std::string("--include-path=") + argv[2] + "/include/cccl";
  std::vector<const char*> options = {"--gpu-architecture=sm_90a", "-std=c++20", device.c_str(),
                                      cuda_include.c_str(), cccl_include.c_str()};
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, kernel_source, "every_collective.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    std::fprintf(stderr, "nvrtcCreateProgram failed\n");
    return 1;
  }
  nvrtcResult result = nvrtcCompileProgram(program, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(program, log.data());
  if (result != NVRTC_SUCCESS) {
    std::fprintf(stderr, "NVRTC failed: %s\n%s\n", nvrtcGetErrorString(result), log.c_str());
    return 1;
  }
  size_t cubin_size = 0;
  nvrtcGetCUBINSize(program, &cubin_size);
  std::printf("NVRTC compiled the cluster collectives for sm_90a (%zu-byte cubin)\n", cubin_size);
  nvrtcDestroyProgram(&program);
  return 0;
}
