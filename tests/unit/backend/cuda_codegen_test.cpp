// The CUDA code generator: the generated source of every example (small and default sizes) compiles
// with nvcc for sm_90a (nothing runs here), and the source reads as the program (names, comments).
// Skipped with a message when no nvcc is installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include <unistd.h>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
#include "../test_util.h"

namespace solder {
namespace {

std::string find_nvcc() {
  for (const char* candidate : std::initializer_list<const char*>{std::getenv("CUDACXX"), "/usr/local/cuda/bin/nvcc"})
    if (candidate && std::filesystem::exists(candidate)) return candidate;
  std::string out;
  if (testing::run_command("command -v nvcc", &out) == 0 && !out.empty()) return out.substr(0, out.find('\n'));
  return "";
}

GeneratedModule generate(const std::string& file, bool small) {
  auto program = std::make_shared<Program>(parse_program_file(file));
  BoundProgram bound = bind_program(program, SizeChoice{small, {}});
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
}

TEST(CudaCodegen, GeneratedSourceNamesTheProgram) {
  // The generic writer (vanilla at its small sizes: one tile of keys, no stream loop).
  GeneratedModule m = generate(std::string(SOLDER_SOURCE_DIR) + "/examples/vanilla.sol", true);
  EXPECT_NE(m.source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(m.source.find("const __nv_bfloat16* __restrict__ q"), std::string::npos);
  EXPECT_NE(m.source.find("// tensor-core emitter not used for fused_o: "), std::string::npos) << m.source;
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_GT(m.kernels[0].shared_bytes, 0);
}

// The launch declares the dynamic shared memory a kernel uses and opts in above 48 KB; static shared
// arrays would count against that limit unseen (a launch failure on the GPU), so there are none.
TEST(CudaCodegen, NoStaticSharedMemory) {
  for (auto& file : testing::example_files())
    for (bool small : {true, false}) {
      std::string source = generate(file, small).source;
      for (size_t at = source.find("__shared__"); at != std::string::npos; at = source.find("__shared__", at + 1))
        EXPECT_EQ(source.compare(at - 7, 7, "extern "), 0) << file << (small ? " (small)" : "") << ": " << source.substr(at - 7, 60);
    }
}

TEST(CudaCodegen, KernelNamedLikeAGlobalIsRenamed) {
  GeneratedModule m = generate(std::string(SOLDER_SOURCE_DIR) + "/examples/conv_chain.sol", false);
  for (auto& k : m.kernels) EXPECT_EQ(std::count(m.parameters.begin(), m.parameters.end(), k.name), 0) << k.name;
}

TEST(CudaCodegen, EveryExampleCompilesWithNvccForSm90a) {
  std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX): the generated CUDA was not compiled";
  std::string cuda_root = std::filesystem::path(nvcc).parent_path().parent_path().string();
  // One folder per process: test runs of several checkouts on one machine share TempDir().
  std::string dir = ::testing::TempDir() + "/solder_cuda_compile_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  // Modules with GEMM-skeleton kernels (the default path's whole contractions) include CuTe, and are
  // compiled with NDEBUG as the launcher compiles them (cuda_backend.cpp).
  std::string why;
  const std::string cutlass = runtime::cutlass_include_dir(&why);
  struct Job { std::string name, path; bool skeleton; };
  std::vector<Job> jobs;
  std::vector<std::string> without_cute;
  for (auto& file : testing::example_files()) {
    std::string name = std::filesystem::path(file).stem().string();
    for (bool small : {true, false}) {
      std::string path = dir + "/" + name + (small ? "_small" : "_default") + ".cu";
      std::string source = generate(file, small).source;
      const bool skeleton = source.find("#include <solder/gemm/sm90_gemm") != std::string::npos ||  // sm90_gemm.cuh or sm90_gemm_prologue.cuh
                            source.find("#include <solder/attention/sm90_attention") != std::string::npos;  // or _dual.cuh
      std::string job_name = name + (small ? " (small)" : " (default sizes)");
      if (skeleton && cutlass.empty()) {
        without_cute.push_back(job_name);
        continue;
      }
      std::ofstream(path) << source;
      jobs.push_back({job_name, path, skeleton});
    }
  }
  auto compile = [&](const Job& job) {
    std::string output;
    std::string command = nvcc + " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" + std::string(SOLDER_SOURCE_DIR) +
                          "/device -I" + cuda_root + "/include/cccl" + (job.skeleton ? " -DNDEBUG -I" + cutlass : std::string("")) +
                          " -c " + job.path + " -o " + job.path + ".o";
    int status = testing::run_command(command, &output);
    return std::make_pair(status, output);
  };
  // Two at a time: nvcc is the slow part.
  for (size_t i = 0; i < jobs.size(); i += 2) {
    auto first = std::async(std::launch::async, compile, jobs[i]);
    std::pair<int, std::string> second{0, ""};
    if (i + 1 < jobs.size()) second = compile(jobs[i + 1]);
    auto a = first.get();
    EXPECT_EQ(a.first, 0) << jobs[i].name << ":\n" << a.second;
    if (i + 1 < jobs.size()) EXPECT_EQ(second.first, 0) << jobs[i + 1].name << ":\n" << second.second;
  }
  std::error_code ignored;
  if (!HasFailure()) std::filesystem::remove_all(dir, ignored);  // kept for reading when a compile failed
  if (!without_cute.empty()) {
    std::string list;
    for (auto& n : without_cute) list += (list.empty() ? "" : ", ") + n;
    GTEST_SKIP() << "CuTe headers not found (" << why << "): not compiled: " << list;
  }
}

}  // namespace
}  // namespace solder

namespace solder {
namespace {

// The runtime compiles generated code with NVRTC (with the embedded device headers); check a few
// examples that way too, when NVRTC can be loaded (it needs no GPU).
TEST(CudaCodegen, NvrtcCompilesGeneratedKernels) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (const char* name : {"vanilla", "llama_decode", "moe_routing", "variance"}) {
    GeneratedModule m = generate(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol", true);
    runtime::CompileFlags flags;
    flags.use_cache = false;
    runtime::CompiledModule compiled = runtime::compile_cuda(m.source, std::string(name) + ".cu", flags);
    EXPECT_FALSE(compiled.cubins.front().empty()) << name;
  }
  // At their paper sizes the attention kernels take the attention skeleton (device/solder/attention,
  // CuTe), data-dependent masks included (document_mask: kDataTiles).
  for (const char* name : {"vanilla", "document_mask"}) {
    GeneratedModule m = generate(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol", false);
    ASSERT_NE(m.source.find("// on the sm_90a attention skeleton: "), std::string::npos) << name;
    runtime::CompileFlags flags;
    flags.use_cache = false;
    flags.defines.push_back("NDEBUG");  // as the launcher compiles skeleton kernels (cuda_backend.cpp)
    runtime::CompiledModule compiled = runtime::compile_cuda(m.source, std::string(name) + "_mma.cu", flags);
    EXPECT_FALSE(compiled.cubins.front().empty()) << name;
  }
}

}  // namespace
}  // namespace solder
