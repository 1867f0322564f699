// The padded-operand pass (fusion/padded_operands.h): nerf_mlp's h0 (x, K 63), h5 (cat([x, h4]), K 319)
// and hv (cat([feature, dir]), K 283) run as a copy of A into 16-byte rows, then the GEMM skeleton; the
// plan computes the program (CPU executor against the float64 reference); conv_chain's im2col operand
// is not copied; SOLDER_PADDED_OPERANDS=0 keeps the gathered GEMM. By default h5 and hv run as two K ranges
// on the skeleton, only x (h0's copy, shared) and dir copied; SOLDER_GEMM_K_RANGES=0 copies their whole A.
#include <gtest/gtest.h>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_codegen.h"
#include "contract/gemm_skeleton_fit.h"
#include "fusion/padded_operands.h"
#include "kernel/kernel_printer.h"
#include "fusion_test_util.h"

namespace solder {
namespace {

using testing::ScopedEnv;

KernelProgram gpu_plan(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  return compile_program(testing::bind_example(name, false, std::move(dims)), CompileOptions::for_gpu()).kernels;
}

const Kernel* kernel_named(const KernelProgram& p, const std::string& name) {
  for (auto& k : p.kernels)
    if (k.name == name) return &k;
  return nullptr;
}

int count_skeleton(const GeneratedModule& m, const char* skeleton) {
  int n = 0;
  for (auto& c : m.contractions) n += c.skeleton == skeleton;
  return n;
}

// At the paper size, whole A copied (SOLDER_GEMM_K_RANGES=0): three copies, each before its contraction,
// of the planned shapes; the contracts read them over the program's K; the skeleton takes all three.
TEST(PaddedOperands, NerfMlpsGatheredProductsRunOnTheSkeleton) {
  ScopedEnv whole("SOLDER_GEMM_K_RANGES", "0");
  KernelProgram p = gpu_plan("nerf_mlp");
  const std::vector<std::tuple<std::string, int64_t, int64_t>> expected = {{"h0", 63, 64}, {"h5", 319, 320}, {"hv", 283, 288}};
  for (auto& [dst, k, kp] : expected) {
    SCOPED_TRACE(dst);
    const GlobalTensor* padded = p.find_global(dst + "_a_padded");
    ASSERT_NE(padded, nullptr);
    EXPECT_EQ(padded->shape, (std::vector<int64_t>{65536, kp}));
    EXPECT_EQ(padded->dtype, DType::f16);
    EXPECT_EQ(padded->role, GlobalRole::intermediate);
    size_t copy = p.kernels.size(), product = p.kernels.size();
    for (size_t i = 0; i < p.kernels.size(); ++i) {
      if (p.kernels[i].name == "pad_" + dst) copy = i;
      if (p.kernels[i].name == dst) product = i;
    }
    ASSERT_LT(copy, p.kernels.size());
    ASSERT_EQ(product, copy + 1);
    const auto* map = p.kernels[copy].body[0].as<MapNode>();
    ASSERT_NE(map, nullptr);
    EXPECT_EQ(map->dst.name, dst + "_a_padded");
    EXPECT_EQ(map->domain.axes[1].extent, kp);  // whole rows: zeros past K
    EXPECT_EQ(map->domain.axes[0].extent, padded_copy_rows(kp / 8));
    EXPECT_EQ(map->domain.axes[0].extent * kp / 8 % 256, 0);  // whole vectors per thread
    EXPECT_FALSE(map->domain.guard);  // 65536 rows: whole blocks
    const auto* c = p.kernels[product].body[0].as<ContractNode>();
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->terms.size(), 1u);
    EXPECT_EQ(c->reduce_axes[0].extent, k);
    GemmSkeletonFit fit = fit_gemm_skeleton(*c, p.globals);
    ASSERT_TRUE(fit.problem) << fit.refusal;
    EXPECT_EQ(fit.problem->a.tensor, dst + "_a_padded");
    EXPECT_EQ(fit.problem->a.k, k);
    EXPECT_EQ(fit.problem->a.ld, kp);
  }
  GeneratedModule m = generate_cuda(p);
  EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGatheredGemm), 0) << contraction_schedule_text(m.contractions);
  EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGemmSkeleton), 10) << contraction_schedule_text(m.contractions);
}

// The padded plan computes the program: on the CPU executor (through the backend's view of the
// contracts), against the float64 reference, also with a ragged row count (the copy's guard, the
// skeleton's last tile). Whole A copied (SOLDER_GEMM_K_RANGES=0).
TEST(PaddedOperands, NerfMlpsPaddedPlanVerifiesOnTheExecutor) {
  ScopedEnv whole("SOLDER_GEMM_K_RANGES", "0");
  const std::vector<std::vector<std::pair<std::string, int64_t>>> cases = {
      {{"N", 256}, {"H", 256}, {"IN", 15}, {"DIN", 9}},    // h5 and hv copied (h0 fused)
      {{"N", 333}, {"H", 256}, {"IN", 21}, {"DIN", 11}}};  // all three, 333 rows: a ragged copy and tile
  for (auto& dims : cases) {
    SCOPED_TRACE(std::to_string(dims[0].second) + " points, H " + std::to_string(dims[1].second));
    BoundProgram bound = testing::bind_example("nerf_mlp", false, dims);
    KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
    int copies = 0;
    for (auto& k : kernels.kernels) copies += k.name.rfind("pad_", 0) == 0;
    EXPECT_GE(copies, 2);
    KernelProgram view = contracts_as_reduces(kernels);
    verify_kernel_program(view);
    TensorSet inputs = make_inputs(bound, 5);
    auto v = testing::verify_kernels(bound, view, inputs);
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

// K ranges (the default) at the paper size: h5 reads x's range from h0's copy (no copy of its
// own) and h4 as it is; hv reads feat as it is and dir from a copy of dir alone ([N, 32], before hv);
// the skeleton takes both as two-range problems (B's second map from w5's row 63, w_view's row 256).
TEST(PaddedOperands, KRangesCopyOnlyTheRangesTheSkeletonCannotStage) {
  ASSERT_TRUE(gemm_k_ranges_enabled());
  KernelProgram p = gpu_plan("nerf_mlp");
  EXPECT_EQ(p.find_global("h5_a_padded"), nullptr);
  EXPECT_EQ(p.find_global("hv_a_padded"), nullptr);
  EXPECT_EQ(kernel_named(p, "pad_h5"), nullptr);
  ASSERT_NE(p.find_global("h0_a_padded"), nullptr);
  const GlobalTensor* dir = p.find_global("dir_padded");
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(dir->shape, (std::vector<int64_t>{65536, 32}));
  size_t copy = p.kernels.size(), hv = p.kernels.size();
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    if (p.kernels[i].name == "pad_hv_dir") copy = i;
    if (p.kernels[i].name == "hv") hv = i;
  }
  ASSERT_LT(copy, p.kernels.size());
  EXPECT_EQ(hv, copy + 1);
  const std::vector<std::tuple<std::string, std::string, std::string, int64_t, int64_t>> expected = {
      {"h5", "h0_a_padded", "h4", 63, 63 * 256}, {"hv", "feat", "dir_padded", 256, 256 * 128}};
  for (auto& [dst, first, second, k1, offset] : expected) {
    SCOPED_TRACE(dst);
    const Kernel* k = kernel_named(p, dst);
    ASSERT_NE(k, nullptr);
    const auto* c = k->body[0].as<ContractNode>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->terms.size(), 2u);
    GemmSkeletonFit fit = fit_gemm_skeleton(*c, p.globals);
    ASSERT_TRUE(fit.problem) << fit.refusal;
    ASSERT_TRUE(fit.problem->second);
    EXPECT_EQ(fit.problem->a.tensor, first);
    EXPECT_EQ(fit.problem->second->a.tensor, second);
    EXPECT_EQ(fit.problem->first_k(), k1);
    EXPECT_EQ(fit.problem->second->b.offset, offset);
  }
  GeneratedModule m = generate_cuda(p);
  EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGatheredGemm), 0) << contraction_schedule_text(m.contractions);
  EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGemmSkeleton), 10) << contraction_schedule_text(m.contractions);
  int ranges = 0;
  for (auto& k : m.kernels)
    if (k.gemm && k.gemm->a_second) {
      ++ranges;
      EXPECT_TRUE(k.gemm->b_second.has_value());
      EXPECT_NE(m.source.find("SOLDER_GEMM_RANGES_KERNEL(" + k.name), std::string::npos) << k.name;
    }
  EXPECT_EQ(ranges, 2);
}

// The K-range plan computes the program on the CPU executor against the float64 reference, with ragged
// row counts and ranges (h5 at IN 21, hv at DIN 11).
TEST(PaddedOperands, KRangesPlanVerifiesOnTheExecutor) {
  const std::vector<std::vector<std::pair<std::string, int64_t>>> cases = {
      {{"N", 256}, {"H", 256}, {"IN", 15}, {"DIN", 9}}, {{"N", 333}, {"H", 256}, {"IN", 21}, {"DIN", 11}}};
  for (auto& dims : cases) {
    SCOPED_TRACE(std::to_string(dims[0].second) + " points");
    BoundProgram bound = testing::bind_example("nerf_mlp", false, dims);
    KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
    int two_range = 0;
    for (auto& k : kernels.kernels)
      if (auto c = k.body.size() == 1 ? k.body[0].as<ContractNode>() : nullptr) {
        GemmSkeletonFit fit = fit_gemm_skeleton(*c, kernels.globals);
        two_range += fit.problem && fit.problem->second;
      }
    EXPECT_EQ(two_range, 2);
    KernelProgram view = contracts_as_reduces(kernels);
    verify_kernel_program(view);
    TensorSet inputs = make_inputs(bound, 5);
    auto v = testing::verify_kernels(bound, view, inputs);
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

// SOLDER_PADDED_OPERANDS=0: main's plan before the pass (the gathered GEMM, no copy).
TEST(PaddedOperands, OffKeepsTheGatheredGemm) {
  ScopedEnv off("SOLDER_PADDED_OPERANDS", "0");
  EXPECT_FALSE(padded_operands_enabled());
  KernelProgram p = gpu_plan("nerf_mlp");
  EXPECT_EQ(p.find_global("h5_a_padded"), nullptr);
  EXPECT_EQ(kernel_named(p, "pad_h5"), nullptr);
  GeneratedModule m = generate_cuda(p);
  EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGatheredGemm), 3) << contraction_schedule_text(m.contractions);
}

// A convolution's operands are not copied: its rows are three axes (n, r, c) and its im2col A reads
// each input element up to nine times.
TEST(PaddedOperands, ConvolutionsStayGathered) {
  ScopedEnv unchained("SOLDER_GATHERED_CHAIN", "0");
  KernelProgram p = gpu_plan("conv_chain");
  for (auto& k : p.kernels) EXPECT_NE(k.name.rfind("pad_", 0), 0u) << k.name;
  PaddedOperands padded = pad_gathered_operands(p);
  EXPECT_EQ(padded.program.kernels.size(), p.kernels.size());
  bool said = false;
  for (auto& note : padded.notes) said |= note.find("stays on the gathered GEMM") != std::string::npos;
  EXPECT_TRUE(said);
}

// Conversion copies (contract/operand_copy_fit.h) of the census's other-dtype operands.
BoundProgram bind_census(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/tests/census/" + name + ".sol"));
  return bind_program(program, SizeChoice{false, std::move(dims)});
}

// At 4096³ x.bf16 @ w.f32 runs as a copy of w into bf16 [N, K] (convert_c_b_bf16, just before c), then
// the skeleton reading it; the fusion report says so with the price.
TEST(PaddedOperands, AnF32WeightIsConvertedBeforeTheSkeleton) {
  BoundProgram bound = bind_census("mixed_bf16_f32w", {{"M", 4096}, {"N", 4096}, {"K", 4096}});
  CompileResult r = compile_program(bound, CompileOptions::for_gpu());
  const KernelProgram& p = r.kernels;
  const GlobalTensor* copy = p.find_global("c_b_bf16");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->dtype, DType::bf16);
  EXPECT_EQ(copy->shape, (std::vector<int64_t>{4096, 4096}));
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].name, "convert_c_b_bf16");
  const auto* map = p.kernels[0].body[0].as<MapNode>();
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(map->dst.name, "c_b_bf16");
  const auto* c = p.kernels[1].body[0].as<ContractNode>();
  ASSERT_NE(c, nullptr);
  GemmSkeletonFit fit = fit_gemm_skeleton(*c, p.globals);
  ASSERT_TRUE(fit.problem) << fit.refusal;
  EXPECT_EQ(fit.problem->b.tensor, "c_b_bf16");
  EXPECT_NE(r.report.find("conversion copy of B = w[n, k] to bf16"), std::string::npos) << r.report;
  GeneratedModule m = generate_cuda(p);
  EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGemmSkeleton), 1) << contraction_schedule_text(m.contractions);
}

// Every census product a copy brings onto the skeleton computes the program on the CPU executor against
// the float64 reference, with the copies forced at a small ragged size (K 40: the fp8 copy's rows padded
// to 48 with zeros; M 100 and N 72: ragged copy blocks and skeleton tiles). chain_f32_mid's h, an f32
// intermediate that only e reads, is stored in bf16 by its own kernel instead of copied (store_in_t).
TEST(PaddedOperands, ConvertedPlansVerifyOnTheExecutor) {
  ScopedEnv force("SOLDER_OPERAND_COPIES", "force");
  for (const char* name : {"mixed_bf16_f32w", "mixed_cast_bf16", "mixed_f16_e4m3w", "mm_e4m3_nn", "chain_f32_mid", "mixed_bf16_f16"}) {
    SCOPED_TRACE(name);
    std::vector<std::pair<std::string, int64_t>> dims = {{"M", 100}, {"N", 72}, {"K", 40}};
    // chain_f32_mid: h whole needs K ≥ 348 (FLOPs per byte of h's round trip, K / 4, ≥ balance / 3)
    if (std::string(name) == "chain_f32_mid") dims = {{"M", 100}, {"N", 72}, {"K", 400}, {"L", 80}};
    BoundProgram bound = bind_census(name, dims);
    CompileResult r = compile_program(bound, CompileOptions::for_gpu());
    int copies = 0;
    for (auto& k : r.kernels.kernels) copies += k.name.rfind("convert_", 0) == 0;
    if (std::string(name) == "chain_f32_mid") {  // h stored in bf16 by its own kernel instead (no copy)
      EXPECT_EQ(copies, 0) << r.report;
      ASSERT_NE(r.kernels.find_global("h"), nullptr);
      EXPECT_EQ(r.kernels.find_global("h")->dtype, DType::bf16);
    } else if (std::string(name) == "mm_e4m3_nn" || std::string(name) == "mixed_bf16_f16") {
      EXPECT_EQ(copies, 2) << r.report;  // fp8: A's 40-byte rows padded to 48, B transposed; bf16 x f16: both into f32
    } else {
      EXPECT_EQ(copies, 1) << r.report;
    }
    KernelProgram view = contracts_as_reduces(r.kernels);
    verify_kernel_program(view);
    TensorSet inputs = make_inputs(bound, 7);
    auto v = testing::verify_kernels(bound, view, inputs);
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

// SOLDER_OPERAND_COPIES=0 keeps main's plan (no copy); at the census's default 512³ the copy of
// mixed_cast_bf16's B does not pay against the gathered GEMM, and the report says why; at 128 x 128 x 64 the
// f32 weight's copy does not pay against the fused mma.sync kernel either.
TEST(PaddedOperands, ConversionCopiesOffOrUnpaid) {
  {
    ScopedEnv off("SOLDER_OPERAND_COPIES", "0");
    KernelProgram p = compile_program(bind_census("mixed_bf16_f32w", {{"M", 4096}, {"N", 4096}, {"K", 4096}}), CompileOptions::for_gpu()).kernels;
    EXPECT_EQ(p.find_global("c_b_bf16"), nullptr);
  }
  CompileResult r = compile_program(bind_census("mixed_cast_bf16", {}), CompileOptions::for_gpu());
  EXPECT_EQ(r.kernels.find_global("c_b_bf16"), nullptr);
  EXPECT_NE(r.report.find("no conversion copy: copy "), std::string::npos) << r.report;
  CompileResult small = compile_program(bind_census("mixed_bf16_f32w", {{"M", 128}, {"N", 128}, {"K", 64}}), CompileOptions::for_gpu());
  EXPECT_EQ(small.kernels.find_global("c_b_bf16"), nullptr);
  EXPECT_NE(small.report.find("stays fused: no conversion copy: copy "), std::string::npos) << small.report;
}

// At the census's 512³ the f32 weight's copy pays against the fused mma.sync kernel (measured on the H200:
// 5.06 against 46.6 µs, bench/NOTES.md, opcopy).
TEST(PaddedOperands, AnF32WeightIsConvertedAtTheCensusSize) {
  CompileResult r = compile_program(bind_census("mixed_bf16_f32w", {}), CompileOptions::for_gpu());
  EXPECT_NE(r.kernels.find_global("c_b_bf16"), nullptr) << r.report;
}

// The census's gathers at an LLM-like size (4096 tokens, C 4096, V 32000; N 4096 or 11008): the embedding's
// A (written in two statements or in one) and the selected weight rows' B run as a gathered copy into bf16
// rows, then the skeleton; the report names the gather, and its price counts the rows the copy reads
// (33.6 MB of A; 90.2 MB of B), not the whole table (262 MB).
TEST(PaddedOperands, GatheredRowsAreCopiedBeforeTheSkeleton) {
  struct Case {
    const char* program;
    std::vector<std::pair<std::string, int64_t>> dims;
    const char* copy;
    std::vector<int64_t> shape;
    const char* report;
  };
  const std::vector<Case> cases = {
      {"embed_matmul", {{"T", 4096}, {"C", 4096}, {"N", 4096}, {"V", 32000}}, "y_a_bf16", {4096, 4096},
       "y: gathered copy of A (emb[tok]) to bf16 into y_a_bf16[4096, 4096] ("},
      {"embed_matmul_inline", {{"T", 4096}, {"C", 4096}, {"N", 11008}, {"V", 32000}}, "y_a_bf16", {4096, 4096},
       "y: gathered copy of A (emb[tok]) to bf16 into y_a_bf16[4096, 4096] ("},
      {"gather_weight_rows", {{"M", 4096}, {"K", 4096}, {"N", 11008}, {"V", 32000}}, "c_b_bf16", {11008, 4096},
       "c: gathered copy of B (w[idx]) to bf16 into c_b_bf16[11008, 4096] ("},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.program);
    CompileResult r = compile_program(bind_census(c.program, c.dims), CompileOptions::for_gpu());
    const GlobalTensor* copy = r.kernels.find_global(c.copy);
    ASSERT_NE(copy, nullptr) << r.report;
    EXPECT_EQ(copy->dtype, DType::bf16);
    EXPECT_EQ(copy->shape, c.shape);
    ASSERT_EQ(r.kernels.kernels.size(), 2u);
    EXPECT_EQ(r.kernels.kernels[0].name, std::string("convert_") + c.copy);
    EXPECT_NE(r.report.find(c.report), std::string::npos) << r.report;
    const std::string reads = c.shape[0] == 4096 ? "; reads 33.6 MB)" : "; reads 90.2 MB)";
    EXPECT_NE(r.report.find(reads), std::string::npos) << r.report;
    GeneratedModule m = generate_cuda(r.kernels);
    EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGemmSkeleton), 1) << contraction_schedule_text(m.contractions);
  }
}

// The gathered copies compute the program on the CPU executor against the float64 reference, forced at a
// small ragged size (K 36: rows of 72 bytes, padded to 80 with zeros, the table read element by element;
// 100 and 72 rows: ragged copy blocks and tiles). The other operand (w[n, c] or a[m, k], rows of 72
// bytes) is copied too.
TEST(PaddedOperands, GatheredCopiesVerifyOnTheExecutor) {
  ScopedEnv force("SOLDER_OPERAND_COPIES", "force");
  for (auto [name, dims] : {std::pair<const char*, std::vector<std::pair<std::string, int64_t>>>{"embed_matmul", {{"T", 100}, {"C", 36}, {"N", 72}}},
                            {"embed_matmul_inline", {{"T", 72}, {"C", 36}, {"N", 104}}},
                            {"gather_weight_rows", {{"M", 100}, {"K", 36}, {"N", 72}}}}) {
    SCOPED_TRACE(name);
    BoundProgram bound = bind_census(name, dims);
    CompileResult r = compile_program(bound, CompileOptions::for_gpu());
    int copies = 0;
    for (auto& k : r.kernels.kernels) copies += k.name.rfind("convert_", 0) == 0;
    EXPECT_EQ(copies, 2) << r.report;
    EXPECT_NE(r.report.find("gathered copy of "), std::string::npos) << r.report;
    for (auto& g : r.kernels.globals)
      if (g.name.find("_bf16") != std::string::npos) EXPECT_EQ(g.shape[1], 40) << g.name;
    KernelProgram view = contracts_as_reduces(r.kernels);
    verify_kernel_program(view);
    TensorSet inputs = make_inputs(bound, 7);
    auto v = testing::verify_kernels(bound, view, inputs);
    EXPECT_TRUE(v.ok()) << v.failures();
  }
}

// bf16 x f16 at the census's 512³: both operands copied into f32 (a's rows as they are; b [K, N]
// transposed through shared tiles), then the tf32 skeleton; the report says why.
TEST(PaddedOperands, Bf16TimesF16RunsOnTheTf32Skeleton) {
  CompileResult r = compile_program(bind_census("mixed_bf16_f16", {}), CompileOptions::for_gpu());
  const KernelProgram& p = r.kernels;
  for (const char* name : {"c_a_f32", "c_b_f32"}) {
    const GlobalTensor* copy = p.find_global(name);
    ASSERT_NE(copy, nullptr) << name << "\n" << r.report;
    EXPECT_EQ(copy->dtype, DType::f32);
    EXPECT_EQ(copy->shape, (std::vector<int64_t>{512, 512}));
  }
  ASSERT_EQ(p.kernels.size(), 3u) << r.report;
  EXPECT_EQ(p.kernels[0].name, "convert_c_a_f32");
  EXPECT_EQ(p.kernels[0].body.size(), 1u);  // a[m, k] is read along k: the row copy
  EXPECT_EQ(p.kernels[1].name, "convert_c_b_f32");
  EXPECT_EQ(p.kernels[1].body.size(), 3u);  // b[k, n] is read along n: the tiled transpose
  const auto* c = p.kernels[2].body[0].as<ContractNode>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, MmaType::tf32);
  EXPECT_NE(r.report.find("bf16 x f16: both operands exact in tf32; conversion copies to f32, tf32 skeleton"), std::string::npos)
      << r.report;
  EXPECT_NE(r.report.find("transposed through 64 x 64 shared tiles"), std::string::npos) << r.report;
  GeneratedModule m = generate_cuda(p);
  EXPECT_EQ(count_skeleton(m, ContractionSchedule::kGemmSkeleton), 1) << contraction_schedule_text(m.contractions);
  EXPECT_NE(m.source.find("16-byte reads along s, 16-byte writes along k"), std::string::npos);
}

// The transposing copy of mm_e4m3_nn's b [K, N] (ragged: N 72, K 40 padded to 48) against the kernel
// expected: a 64 x 64 tile of e4m3 (one padding column), the map into it with n fastest, a barrier, the map
// out of it with k fastest, both guarded on the ragged edges; it reads back as the writer's copy.
// SOLDER_TRANSPOSE_COPIES=0 keeps the row copy.
TEST(PaddedOperands, TransposingCopyThroughASharedTile) {
  ScopedEnv force("SOLDER_OPERAND_COPIES", "force");
  CompileResult r = compile_program(bind_census("mm_e4m3_nn", {{"M", 100}, {"N", 72}, {"K", 40}}), CompileOptions::for_gpu());
  const Kernel* copy = kernel_named(r.kernels, "convert_c_b_f8e4m3");
  ASSERT_NE(copy, nullptr) << r.report;
  EXPECT_EQ(print_kernel(*copy), R"(kernel convert_c_b_f8e4m3
  grid n_t < 2, k_t < 1  (2 blocks)  threads 256
  shared convert_c_b_f8e4m3_tile[64, 65] : f8e4m3
  # conversion copy of B = b[k, n] to f8e4m3 before the skeleton's c (K-major rows of 48 bytes): 64 x 64 tiles, read along n
  map convert_c_b_f8e4m3_tile[n, k] = select(k_t * 64 + k < 40, b[k_t * 64 + k, n_t * 64 + n], 0.0)  over k < 64, n < 64 where n_t * 64 + n < 72 && k_t * 64 + k < 48
  barrier block
  # the tile into c_b_f8e4m3's rows, written along k
  map c_b_f8e4m3[n_t * 64 + n, k_t * 64 + k] = convert_c_b_f8e4m3_tile[n, k]  over n < 64, k < 64 where n_t * 64 + n < 72 && k_t * 64 + k < 48
)");
  std::optional<TransposingCopy> t = transposing_copy_of(r.kernels, *copy);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->src, "b");
  EXPECT_EQ(t->dst, "c_b_f8e4m3");
  EXPECT_EQ(t->sides, 72);
  EXPECT_EQ(t->k, 40);
  EXPECT_EQ(t->kp, 48);
  EXPECT_EQ(t->side_tiles, 2);
  EXPECT_EQ(t->k_tiles, 1);
  // A's copy (a[m, k], read along k) is no transposing copy.
  const Kernel* a_copy = kernel_named(r.kernels, "convert_c_a_f8e4m3");
  ASSERT_NE(a_copy, nullptr);
  EXPECT_FALSE(transposing_copy_of(r.kernels, *a_copy));
  ScopedEnv rows("SOLDER_TRANSPOSE_COPIES", "0");
  CompileResult row = compile_program(bind_census("mm_e4m3_nn", {{"M", 100}, {"N", 72}, {"K", 40}}), CompileOptions::for_gpu());
  const Kernel* row_copy = kernel_named(row.kernels, "convert_c_b_f8e4m3");
  ASSERT_NE(row_copy, nullptr);
  EXPECT_EQ(row_copy->body.size(), 1u);
  EXPECT_TRUE(row_copy->buffers.empty());
}

// The writer takes the transposing copy where b's rows are whole 16-byte vectors (N 512), and leaves N 72
// (72 bytes) to the generic writer; SOLDER_TRANSPOSE_COPIES=generic leaves all to it. e4m3 into e4m3 is a bit
// copy: unset or SOLDER_TRANSPOSE_COPIES=byte takes the byte form (256 s x 64 k a block, 4 rows of 16 bytes a
// thread byte-permuted into words of 4 k, the word tile's rows s ^ ((s >> 4) & 1), 16-byte rows out); =tile:
// opcopy2's float tile (16 e4m3 a vector in and out through a float [64][65]).
TEST(PaddedOperands, TransposingCopyWriter) {
  for (int64_t n : {512, 72}) {
    SCOPED_TRACE(n);
    ScopedEnv force("SOLDER_OPERAND_COPIES", "force");
    CompileResult r = compile_program(bind_census("mm_e4m3_nn", {{"M", 128}, {"N", n}, {"K", 64}}), CompileOptions::for_gpu());
    {
      GeneratedModule t = generate_cuda(r.kernels);  // unset: the byte form
      EXPECT_EQ(t.source.find("1-byte elements copied bit for bit") != std::string::npos, n == 512) << t.source;
      EXPECT_EQ(t.source.find("16-byte reads along s, 16-byte writes along k"), std::string::npos) << t.source;
    }
    ScopedEnv byte("SOLDER_TRANSPOSE_COPIES", "byte");
    GeneratedModule m = generate_cuda(r.kernels);
    const bool written = m.source.find("1-byte elements copied bit for bit") != std::string::npos;
    EXPECT_EQ(written, n == 512) << m.source;
    EXPECT_EQ(m.source.find("16-byte reads along s, 16-byte writes along k"), std::string::npos) << m.source;
    if (n != 512) continue;
    for (const char* part : {"grid 2 s tiles x 1 k tiles", "const long long side0_ = (static_cast<long long>(blockIdx.x) / 1LL) * 256;",
                             "const int lane_ = threadIdx.x & 31, kq_ = lane_ >> 1, sl_ = (threadIdx.x >> 5) * 32 + (lane_ & 1) * 16;",
                             "*reinterpret_cast<uint4*>(r_[i_]) = (k_ < 64LL && side_ < 512LL)",
                             "reinterpret_cast<const unsigned char*>(b) + k_ * 512LL + side_)",
                             "__byte_perm(r_[0][w_], r_[1][w_], 0x5140u)", "__byte_perm(r_[0][w_], r_[1][w_], 0x7362u)",
                             "__byte_perm(lo01_, lo23_, 0x5410u), __byte_perm(lo01_, lo23_, 0x7632u)",
                             "tile_[(ss_ ^ ((ss_ >> 4) & 1)) * 16 + kq_] = col_[b_];", "for (int it_ = 0; it_ < 4; ++it_) {",
                             "if (so_ >= 512LL || k_ >= 64LL) continue;",
                             "*reinterpret_cast<const uint4*>(tile_ + (ss_ ^ ((ss_ >> 4) & 1)) * 16 + kk_ / 4);",
                             "reinterpret_cast<unsigned char*>(c_b_f8e4m3) + so_ * 64LL + k_) = v4_;"})
      EXPECT_NE(m.source.find(part), std::string::npos) << part << "\n" << m.source;
    EXPECT_EQ(m.source.find("  __shared__"), std::string::npos) << m.source;  // dynamic shared memory only
    int found = 0;
    for (auto& k : m.kernels)
      if (k.name == "convert_c_b_f8e4m3") {
        ++found;
        EXPECT_EQ(k.shared_bytes, 256 * 64);
        EXPECT_EQ(k.blocks, 2);
        EXPECT_EQ(k.threads, 256);
      }
    EXPECT_EQ(found, 1);
    {
      ScopedEnv tile("SOLDER_TRANSPOSE_COPIES", "tile");
      GeneratedModule t = generate_cuda(r.kernels);
      EXPECT_NE(t.source.find("16-byte reads along s, 16-byte writes along k"), std::string::npos) << t.source;
      EXPECT_EQ(t.source.find("1-byte elements copied bit for bit"), std::string::npos);
      EXPECT_NE(t.source.find("alignas(16) __nv_fp8_e4m3 in_[16];"), std::string::npos) << t.source;
      EXPECT_NE(t.source.find("alignas(16) __nv_fp8_e4m3 packed_[16];"), std::string::npos) << t.source;
      for (auto& k : t.kernels)
        if (k.name == "convert_c_b_f8e4m3") {
          EXPECT_EQ(k.shared_bytes, 64 * 65 * 4);
          EXPECT_EQ(k.blocks, 8);
        }
    }
    ScopedEnv generic("SOLDER_TRANSPOSE_COPIES", "generic");
    GeneratedModule g = generate_cuda(r.kernels);
    EXPECT_EQ(g.source.find("1-byte elements copied bit for bit"), std::string::npos);
    EXPECT_EQ(g.source.find("16-byte reads along s, 16-byte writes along k"), std::string::npos);
  }
}

}  // namespace
}  // namespace solder
