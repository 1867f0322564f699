// Cold NVRTC compile time of GEMM skeleton instantiations, with the options Solder's runtime passes
// (src/runtime/compile.cpp: --gpu-architecture=sm_90a -std=c++20 -default-device, the toolkit's include
// and include/cccl folders, the CUTLASS include folder) plus -DNDEBUG. No cache: every compile is cold.
// Usage: nvrtc_time CUDA_HOME CUTLASS_INCLUDE DEVICE_DIR   (build: g++ -O2 nvrtc_time.cpp -lnvrtc)
#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

static const char* kConfigs[] = {
    "solder::gemm::Config<solder::gemm::Dtype::bf16, solder::gemm::Dtype::bf16, 128, 128, 6>",
    "solder::gemm::Config<solder::gemm::Dtype::bf16, solder::gemm::Dtype::bf16, 128, 256, 4>",
    "solder::gemm::Config<solder::gemm::Dtype::bf16, solder::gemm::Dtype::bf16, 64, 128, 6, false, false>",
    "solder::gemm::Config<solder::gemm::Dtype::e4m3, solder::gemm::Dtype::e4m3, 128, 256, 4>",
};

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: nvrtc_time CUDA_HOME CUTLASS_INCLUDE DEVICE_DIR\n");
    return 2;
  }
  const std::string cuda = argv[1], cutlass = argv[2], device = argv[3];
  int failures = 0;
  for (const char* config : kConfigs) {
    std::string source = std::string("#include <solder/gemm/sm90_gemm.cuh>\n") +
                         "struct Epilogue { float* out; int ld; float* row_scale;\n"
                         "  __device__ void operator()(int b, int r, int c, float acc) const {\n"
                         "    out[(long long)r * ld + c] = row_scale ? acc * row_scale[r] : acc; } };\n"
                         "using Cfg = " + config + ";\n" + "SOLDER_GEMM_KERNEL(gemm_entry, Cfg, Epilogue)\n";
    std::vector<std::string> options = {"--gpu-architecture=sm_90a", "-std=c++20", "-default-device", "-DNDEBUG",
                                        "--include-path=" + cuda + "/include", "--include-path=" + cuda + "/include/cccl",
                                        "--include-path=" + cutlass, "--include-path=" + device};
    std::vector<const char*> pointers;
    for (const std::string& o : options) pointers.push_back(o.c_str());
    nvrtcProgram program;
    nvrtcCreateProgram(&program, source.c_str(), "gemm.cu", 0, nullptr, nullptr);
    auto start = std::chrono::steady_clock::now();
    nvrtcResult result = nvrtcCompileProgram(program, int(pointers.size()), pointers.data());
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    size_t log_size = 0, cubin_size = 0;
    nvrtcGetProgramLogSize(program, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(program, log.data());
    if (result == NVRTC_SUCCESS) nvrtcGetCUBINSize(program, &cubin_size);
    std::printf("nvrtc %-100s %s %.2f s cubin %zu bytes\n", config, result == NVRTC_SUCCESS ? "ok" : "FAILED", seconds,
                cubin_size);
    if (result != NVRTC_SUCCESS || log.find("warning") != std::string::npos) std::printf("%s\n", log.c_str());
    if (result != NVRTC_SUCCESS) ++failures;
    nvrtcDestroyProgram(&program);
  }
  return failures ? 1 : 0;
}
