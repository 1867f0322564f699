// The names of the generated CUDA (cuda_names.h): the mapping keeps plain names, mangles the rest one
// to one into names that are neither reserved nor the generator's; the reserved words cover every
// local the generator writes and every macro nvcc defines; and programs whose tensors, dims and index
// variables use every C++ and CUDA reserved word and every internal name pattern compile with nvcc
// (sm_90a, -c) and NVRTC. The compile tests skip with a message when nvcc or NVRTC is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <set>
#include <sstream>

#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/cuda_names.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
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

// Names a lowering or the generator derives, spelled as a program might spell them.
const std::vector<std::string> kInternalPatterns = {
    "x_tile", "y_tile", "x_tile2", "y_tile_2", "acc", "acc_y", "acc_y_index", "acc_index", "center_y", "center_y_new",
    "B0_y", "B1_y", "old_y", "segment_y", "seg", "seg_part", "r_in", "e0", "e1", "block", "T_t", "t_tile", "fused_y",
    "fused_y_kernel", "y_kernel", "y_merge", "y_part_acc_y", "dsm_acc_y", "gathered_acc_y", "x_tile_stage0",
    "x_tile_stage1", "x_stages", "first_", "vec_", "u_", "staged_", "rest_", "acc0_", "point_", "slice_", "flat_",
    "slot_", "i_", "prefetch0_", "gemm_a_", "gemm_b_", "row_", "depth_", "channel_0", "int__", "u_int__",
    "u___global____", "QQ", "b_t", "t_t", "block_linear", "reduce_scratch", "smem", "to_float", "round_i32",
    "max_nan", "solder", "__global__", "__device__", "__shared__", "__restrict__", "__launch_bounds__",
    "__syncthreads", "__half", "__nv_bfloat16", "__CUDACC__", "__LINE__", "__FILE__", "_Pragma", "__x", "_X",
    "NULL", "INFINITY", "NAN", "EOF", "errno", "assert", "stdin", "stdout", "M_PIf", "CUDART_INF_F", "linux"};

// Every reserved word that is not a macro (keywords, CUDA names, the generator's locals), the internal
// patterns, and the names the language itself reserves removed.
std::vector<std::string> hostile_names() {
  std::set<std::string> language = {"program", "dim", "small", "in", "out", "inf", "cast", "f32", "f16", "bf16",
                                    "f8e4m3", "f8e5m2", "i32", "bool"};
  std::ifstream macros_file(std::string(SOLDER_SOURCE_DIR) + "/src/backend/cuda/cuda_macro_names.inc");
  std::set<std::string> macros;
  for (std::string line; std::getline(macros_file, line);)
    if (line.size() > 3 && line[0] == '"') macros.insert(line.substr(1, line.size() - 3));
  std::set<std::string> names;
  for (auto& w : reserved_cuda_words())
    if (!macros.count(w)) names.insert(w);
  for (auto& p : kInternalPatterns) names.insert(p);
  std::vector<std::string> out;
  for (auto& n : names)
    if (!language.count(n)) out.push_back(n);
  return out;
}

// Program 1: every hostile name as an input tensor, summed in groups into outputs (each kernel takes
// every global as a parameter named after it).
std::string tensors_program(const std::vector<std::string>& names) {
  std::ostringstream s;
  s << "program hostile_tensors\ndim Rows = 64, Cols = 32\nsmall Rows = 8, Cols = 16\n";
  for (auto& n : names) s << "in " << n << "[Rows, Cols] : f32\n";
  const size_t group = 40;
  for (size_t g = 0; g * group < names.size(); ++g) {
    s << "out o" << g << "[rr, cc] =";
    for (size_t k = g * group; k < std::min(names.size(), (g + 1) * group); ++k) s << (k == g * group ? " " : " + ") << names[k] << "[rr, cc]";
    s << "\n";
  }
  return s.str();
}

// Program 2: hostile names as dims, index variables and tensors of reductions (sum, max, softmax's
// cascade, argmax, topk) and pointwise definitions, so that they meet the generator's locals in every
// writer.
std::string variables_program(const std::vector<std::string>& all_names) {
  std::vector<std::string> names;  // the dims and the input keep their names
  for (auto& n : all_names)
    if (n != "int" && n != "float" && n != "K" && n != "x") names.push_back(n);
  std::ostringstream s;
  s << "program hostile_variables\ndim int = 64, float = 48, K = 2\nsmall int = 8, float = 16\n";
  s << "in x[int, float] : f32\n";
  size_t next = 0;
  auto name = [&] { return names[next++ % names.size()]; };
  for (size_t d = 0; next < names.size(); ++d) {
    const std::string p = name(), r = name(), t1 = name(), t2 = name();
    if (p == r) continue;
    switch (d % 5) {
      case 0: s << "out " << t1 << "_s" << d << "[" << p << "] = sum(" << r << ") x[" << p << ", " << r << "] * 2\n"; break;
      case 1:
        s << t1 << "_m" << d << "[" << p << "] = max(" << r << ") x[" << p << ", " << r << "]\n";
        s << "out " << t2 << "_z" << d << "[" << p << "] = sum(" << r << ") exp(x[" << p << ", " << r << "] - " << t1 << "_m" << d << "[" << p << "])\n";
        break;
      case 2: s << "out " << t1 << "_a" << d << "[" << p << "] = argmax(" << r << ") x[" << p << ", " << r << "]\n"; break;
      case 3: {
        const std::string rank = name();
        if (rank == p || rank == r) break;
        s << "out " << t1 << "_v" << d << "[" << p << ", " << rank << "], " << t2 << "_i" << d << "[" << p << ", " << rank << "] = topk(K, " << r << ") x[" << p << ", " << r << "]\n";
        break;
      }
      case 4: s << "out " << t1 << "_p" << d << "[" << p << ", " << r << "] = x[" << p << ", " << r << "] * 3 + 1\n"; break;
    }
  }
  return s.str();
}

// Program 3: vanilla attention with hostile tensor and index-variable names, at sizes where the
// tensor-core emitter takes it (on wgmma).
std::string attention_program() {
  return "program hostile_attention\n"
         "dim B = 4, H = 8, S = 1024, D = 64\n"
         "in int[B, H, S, D] : bf16\nin threadIdx[B, H, S, D] : bf16\nin first_[B, H, S, D] : bf16\n"
         "x_tile[e, nt, i, j] = sum(n) int[e, nt, i, n] * threadIdx[e, nt, j, n] * rsqrt(D)\n"
         "acc_y[e, nt, i] = max(j) x_tile[e, nt, i, j]\n"
         "__global__[e, nt, i, j] = exp(x_tile[e, nt, i, j] - acc_y[e, nt, i])\n"
         "NULL[e, nt, i] = sum(j) __global__[e, nt, i, j]\n"
         "out j_tile[e, nt, i, n] : bf16 = sum(j) __global__[e, nt, i, j] / NULL[e, nt, i] * first_[e, nt, j, n]\n";
}

struct Source {
  std::string what, text;
};

std::vector<Source> hostile_sources() {
  std::vector<std::string> names = hostile_names();
  std::vector<Source> sources;
  for (auto& [what, text, small] : std::vector<std::tuple<std::string, std::string, bool>>{
           {"tensors", tensors_program(names), true},
           {"variables (small)", variables_program(names), true},
           {"variables", variables_program(names), false},
           {"attention", attention_program(), false}}) {
    auto program = std::make_shared<Program>(parse_program(text, what + ".sol"));
    BoundProgram bound = bind_program(program, SizeChoice{small, {}});
    sources.push_back({what, generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels).source});
  }
  // Not names, but compiled here too: the exact i32 path (int tiles, saturate_i32).
  auto i32 = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/tests/data/reproducers/wrong_i32_through_float.sol"));
  sources.push_back({"i32", generate_cuda(compile_program(bind_program(i32, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels).source});
  return sources;
}

TEST(CudaNames, PlainNamesAreKept) {
  for (const char* n : {"q", "x_tile", "acc_y", "T_t", "W1", "logits", "out2d"}) EXPECT_EQ(cuda_name(n), n);
}

TEST(CudaNames, ReservedAndOddNamesAreMangled) {
  EXPECT_EQ(cuda_name("int"), "int__");
  EXPECT_EQ(cuda_name("threadIdx"), "threadIdx__");
  EXPECT_EQ(cuda_name("NULL"), "NULL__");
  EXPECT_EQ(cuda_name("i"), "i");
  EXPECT_EQ(cuda_name("n"), "n__");  // a local of the generator
  EXPECT_EQ(cuda_name("x_stage0"), "x_stage0__");
  EXPECT_EQ(cuda_name("__global__"), "u___global____");
  EXPECT_EQ(cuda_name("first_"), "u_first___");
  EXPECT_EQ(cuda_name("a__b"), "u_a__b__");
}

// One to one, never reserved, never a leading underscore, never ending in a single underscore (the
// generator's locals) and never of a derived shape.
TEST(CudaNames, MappingIsOneToOneAndLeavesTheGeneratorItsNames) {
  std::set<std::string> inputs(reserved_cuda_words().begin(), reserved_cuda_words().end());
  for (auto& p : kInternalPatterns) inputs.insert(p);
  for (const char* numbered : {"row_value0", "row_value7", "row_value12"}) inputs.insert(numbered);
  for (auto w : std::vector<std::string>(inputs.begin(), inputs.end()))
    for (const std::string& v : {w + "_", w + "__", "_" + w, "u_" + w, w + "_stage0", "u_" + w + "__", w + "__u"}) inputs.insert(v);
  std::map<std::string, std::string> seen;
  for (auto& n : inputs) {
    std::string c = cuda_name(n);
    auto [it, fresh] = seen.emplace(c, n);
    EXPECT_TRUE(fresh) << "'" << n << "' and '" << it->second << "' both become '" << c << "'";
    EXPECT_FALSE(reserved_cuda_words().count(c)) << n << " -> " << c;
    EXPECT_NE(c[0], '_') << n << " -> " << c;
    EXPECT_FALSE(c.back() == '_' && c[c.size() - 2] != '_') << n << " -> " << c;
    EXPECT_FALSE(reserved_cuda_name(c)) << n << " -> " << c;
  }
}

// Every identifier the generator writes itself (the program's names marked) either ends in one
// underscore, starts with one (a name no program name becomes), or is a reserved word.
TEST(CudaNames, GeneratorLocalsAreReserved) {
  mark_cuda_names_for_testing(true);
  std::set<std::string> unreserved;
  try {
    std::vector<std::string> texts;
    for (auto& file : testing::example_files())
      for (bool small : {true, false}) {
        auto program = std::make_shared<Program>(parse_program_file(file));
        texts.push_back(generate_cuda(compile_program(bind_program(program, SizeChoice{small, {}}), CompileOptions::for_gpu()).kernels).source);
      }
    const std::regex identifier(R"((\.|->|::)?\b[A-Za-z_][A-Za-z0-9_]*\b)");
    for (auto& text : texts) {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        line = std::regex_replace(line, std::regex(R"(//.*|"([^"\\]|\\.)*")"), "");
        if (line.find_first_not_of(' ') != std::string::npos && line[line.find_first_not_of(' ')] == '#') continue;
        for (std::sregex_iterator it(line.begin(), line.end(), identifier), end; it != end; ++it) {
          std::string id = it->str();
          if (id[0] == '.' || id[0] == '-' || id[0] == ':') continue;
          if (id.find("QQ") != std::string::npos || id[0] == '_' || id.back() == '_') continue;
          if (!reserved_cuda_name(id)) unreserved.insert(id);
        }
      }
    }
  } catch (...) {
    mark_cuda_names_for_testing(false);
    throw;
  }
  mark_cuda_names_for_testing(false);
  std::string list;
  for (auto& id : unreserved) list += " " + id;
  EXPECT_TRUE(unreserved.empty()) << "the generated code declares or uses names that a program name could shadow; add them to "
                                     "reserved_cuda_words() (src/backend/cuda/cuda_names.cpp):" << list;
}

TEST(CudaNames, EveryNvccMacroIsReserved) {
  if (find_nvcc().empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX): the macros were not listed";
  std::string output;
  ASSERT_EQ(testing::run_command("bash " + std::string(SOLDER_SOURCE_DIR) + "/scripts/cuda_macro_names.sh", &output), 0) << output;
  std::istringstream lines(output);
  std::string missing;
  for (std::string m; std::getline(lines, m);)
    if (!m.empty() && !reserved_cuda_words().count(m)) missing += " " + m;
  EXPECT_TRUE(missing.empty()) << "macros missing from src/backend/cuda/cuda_macro_names.inc (run scripts/cuda_macro_names.sh --write):" << missing;
}

TEST(CudaNames, HostileNamesCompileWithNvcc) {
  std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX): the generated CUDA of hostile names was not compiled";
  std::string cuda_root = std::filesystem::path(nvcc).parent_path().parent_path().string();
  std::string dir = ::testing::TempDir() + "/solder_cuda_names";
  std::filesystem::create_directories(dir);
  std::vector<Source> sources = hostile_sources();
  std::vector<std::future<std::pair<int, std::string>>> jobs;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::string path = dir + "/hostile" + std::to_string(i) + ".cu";
    std::ofstream(path) << sources[i].text;
    // skeleton kernels (the attention program) include CuTe and build with NDEBUG, as the launcher does
    const bool skeleton = sources[i].text.find("#include <solder/attention/sm90_attention.cuh>") != std::string::npos ||
                          sources[i].text.find("#include <solder/gemm/sm90_gemm.cuh>") != std::string::npos;
    std::string why;
    const std::string cutlass = skeleton ? runtime::cutlass_include_dir(&why) : std::string();
    if (skeleton && cutlass.empty()) ADD_FAILURE() << sources[i].what << ": CuTe headers not found (" << why << ")";
    std::string command = nvcc + " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" + std::string(SOLDER_SOURCE_DIR) +
                          "/device -I" + cuda_root + "/include/cccl" + (skeleton ? " -DNDEBUG -I" + cutlass : std::string("")) + " -c " + path +
                          " -o " + path + ".o";
    jobs.push_back(std::async(std::launch::async, [command] {
      std::string output;
      int status = testing::run_command(command, &output);
      return std::make_pair(status, output);
    }));
    if (jobs.size() == 2 || i + 1 == sources.size()) {
      for (size_t j = 0; j < jobs.size(); ++j) {
        auto [status, output] = jobs[j].get();
        const Source& s = sources[i + 1 - jobs.size() + j];
        EXPECT_EQ(status, 0) << s.what << " (" << dir << "):\n" << output.substr(0, 4000);
      }
      jobs.clear();
    }
  }
}

TEST(CudaNames, HostileNamesCompileWithNvrtc) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (auto& s : hostile_sources()) {
    runtime::CompileFlags flags;
    flags.use_cache = false;
    runtime::CompiledModule compiled = runtime::compile_cuda(s.text, "hostile.cu", flags);
    EXPECT_FALSE(compiled.cubins.front().empty()) << s.what;
  }
}

}  // namespace
}  // namespace solder
