// The matrix-product census (issue 15): the programs of tests/census/ (written by bench/census/census.py,
// what a user of torch.matmul / einsum writes: dtypes, operand layouts, batches, several reduced axes,
// ragged and decode sizes, epilogues, chains, transposed outputs, mixed dtypes, gathers), compiled for
// the GPU at their default sizes. Every contraction runs on a wgmma skeleton (the GEMM skeleton, its
// operand prologue, the attention skeleton or the attention emitter's wgmma) unless it is listed below,
// with the reason it stays off; a listed one that reaches wgmma must leave the list. docs/census.md is
// the same table for people (census.py table).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

struct OffTensorCores {
  const char* program;
  const char* contraction;
  const char* reason;
};

// (program, contraction) -> why it does not run on wgmma. Sizes below 64 in M or N are the GEMV stream's
// family (design.md, "Contractions"), not the skeleton's.
const std::vector<OffTensorCores> kOffWgmma = {
    {"bmm_gqa", "s", "K's head index is h // G: split into rows only with SOLDER_GROUPED_AXES=1 (not yet measured faster)"},
    {"bmm_gqa_pv", "o__", "V's head index is h // G: split into rows only with SOLDER_GROUPED_AXES=1 (not yet measured faster)"},
    {"ragged_n8", "c_tile_f32", "N 8: a few-column product, the scalar loop reads each operand once"},
    {"decode_m1", "c_tile_f32", "M 1 (decode): the scalar loop reads each operand once"},
    {"decode_m4", "c_tile_f32", "M 4 (decode): the scalar loop reads each operand once"},
    {"decode_m16", "c_tile_f32", "M 16 (decode): 16-row mma.sync"},
    {"decode_m16_nn", "c_tile_f32", "M 16 (decode): 16-row mma.sync"},
    {"mixed_f16_e4m3w", "c__", "B is e4m3: at 512^3 the gathered GEMM is predicted faster than its f16 copy and the skeleton"},
    {"mixed_cast_bf16", "c__", "B = cast(w, bf16): at 512^3 the gathered GEMM is predicted faster than its copy and the skeleton"},
};

bool on_wgmma(const ContractionSchedule& c) {
  return c.skeleton == ContractionSchedule::kGemmSkeleton || c.skeleton == ContractionSchedule::kGemmPrologue ||
         c.skeleton == ContractionSchedule::kAttentionSkeleton || c.skeleton == ContractionSchedule::kAttentionWgmma;
}

std::vector<std::string> census_files() {
  std::vector<std::string> files;
  for (auto& entry : std::filesystem::directory_iterator(std::string(SOLDER_SOURCE_DIR) + "/tests/census"))
    if (entry.path().extension() == ".sol") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string stem(const std::string& file) {
  std::string name = file.substr(file.find_last_of('/') + 1);
  return name.substr(0, name.size() - 4);
}

TEST(Census, EveryProductReachesWgmmaOrSaysWhyNot) {
  std::set<std::pair<std::string, std::string>> known, seen;
  for (auto& k : kOffWgmma) known.insert({k.program, k.contraction});
  int contractions = 0, programs = 0;
  for (auto& file : census_files()) {
    ++programs;
    auto program = std::make_shared<Program>(parse_program_file(file));
    BoundProgram bound = bind_program(program, SizeChoice{false, {}});
    GeneratedModule m = generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
    EXPECT_FALSE(m.contractions.empty()) << file;
    for (auto& c : m.contractions) {
      ++contractions;
      if (on_wgmma(c)) continue;
      std::pair<std::string, std::string> key{stem(file), c.contraction};
      seen.insert(key);
      EXPECT_TRUE(known.count(key)) << stem(file) << ", kernel " << c.kernel << ": contraction " << c.contraction << " (M " << c.m << ", N "
                                    << c.n << ", K " << c.k << ") runs on " << c.skeleton << (c.reason.empty() ? "" : ": " + c.reason);
    }
  }
  EXPECT_GE(programs, 50);
  EXPECT_GT(contractions, programs);
  for (auto& k : known) EXPECT_TRUE(seen.count(k)) << k.first << " " << k.second << " now runs on wgmma: remove it from kOffWgmma";
}

// The products whose operands' dtype or form keeps them off the skeleton as written reach it at 4096^3,
// where their conversion copies pay (contract/operand_copy_fit.h): one copy kernel each before it (mixed_bf16_f16:
// two, both operands into f32 for the tf32 skeleton; chain_f32_mid: none, its f32 h is stored in bf16 by h's own
// kernel at every size).
TEST(Census, OtherDtypeOperandsReachTheSkeletonWhereTheirCopyPays) {
  for (const char* name : {"mixed_bf16_f32w", "mixed_cast_bf16", "mixed_f16_e4m3w", "mm_e4m3_nn", "chain_f32_mid", "mixed_bf16_f16"}) {
    SCOPED_TRACE(name);
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/tests/census/" + name + ".sol"));
    std::vector<std::pair<std::string, int64_t>> dims = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
    if (std::string(name) == "chain_f32_mid") dims.push_back({"L", 4096});
    KernelProgram kernels = compile_program(bind_program(program, SizeChoice{false, dims}), CompileOptions::for_gpu()).kernels;
    int copies = 0;
    for (auto& k : kernels.kernels) copies += k.name.rfind("convert_", 0) == 0;
    EXPECT_EQ(copies, std::string(name) == "chain_f32_mid" ? 0 : std::string(name) == "mixed_bf16_f16" ? 2 : 1);
    GeneratedModule m = generate_cuda(kernels);
    for (auto& c : m.contractions) EXPECT_TRUE(on_wgmma(c)) << c.contraction << " runs on " << c.skeleton;
  }
}

// The gathers (an embedding's A, selected weight rows' B) reach the skeleton through a gathered copy
// (fusion/padded_operands.h), one copy kernel before it, at the census's size (where the gathered GEMM,
// evaluating the gathered operand element by element, measured 16.2 µs against 4.9 for the copy and the
// skeleton on the H200) and at an LLM-like size (4096 tokens, C 4096, V 32000).
TEST(Census, GathersReachTheSkeletonWhereTheirCopyPays) {
  const std::vector<std::pair<std::string, int64_t>> embed = {{"T", 4096}, {"C", 4096}, {"N", 4096}, {"V", 32000}};
  const std::vector<std::pair<std::string, int64_t>> rows = {{"M", 4096}, {"K", 4096}, {"N", 11008}, {"V", 32000}};
  const std::vector<std::pair<std::string, int64_t>> census = {};
  for (auto& [name, dims] : {std::pair{"embed_matmul", embed}, std::pair{"embed_matmul_inline", embed}, std::pair{"gather_weight_rows", rows},
                             std::pair{"embed_matmul", census}, std::pair{"gather_weight_rows", census}}) {
    SCOPED_TRACE(name);
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/tests/census/" + name + ".sol"));
    KernelProgram kernels = compile_program(bind_program(program, SizeChoice{false, dims}), CompileOptions::for_gpu()).kernels;
    int copies = 0;
    for (auto& k : kernels.kernels) copies += k.name.rfind("convert_", 0) == 0;
    EXPECT_EQ(copies, 1);
    GeneratedModule m = generate_cuda(kernels);
    for (auto& c : m.contractions) EXPECT_TRUE(on_wgmma(c)) << c.contraction << " runs on " << c.skeleton;
  }
}

}  // namespace
}  // namespace solder
