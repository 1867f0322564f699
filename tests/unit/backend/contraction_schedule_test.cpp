// The per-contraction schedule of the CUDA backend (GeneratedModule::contractions, `solder emit
// --report`): which skeleton runs each contract, with which tile and MMA input type, and why a scalar
// one is scalar; the comment header of every kernel says the same. And the no-scalar check: no
// contraction with M and N of at least 16 runs scalar in any example, at default or small sizes,
// except the known cases listed below with their reason.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "../test_util.h"

namespace solder {
namespace {

GeneratedModule generate(const std::string& file, bool small, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto program = std::make_shared<Program>(parse_program_file(file));
  BoundProgram bound = bind_program(program, SizeChoice{small, std::move(dims)});
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
}

std::string example(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"; }

std::string stem(const std::string& file) {
  std::string name = file.substr(file.find_last_of('/') + 1);
  return name.substr(0, name.size() - 4);
}

// Contractions with M and N of at least 16 that still run scalar, and why: (example, small sizes,
// contraction) -> reason. Empty: nerf_mlp's two concatenated-K products (its skip connection and
// view-direction input), the last entries, run on tensor cores since the canonicalizer splits a
// concatenation along K into K ranges (contract/canonicalize.h) and the generic writer zero-fills a
// ragged last K tile. A case added here must say why.
struct KnownScalar {
  const char* example;
  bool small;
  const char* contraction;
  const char* reason;
};
const std::vector<KnownScalar> kKnownScalar = {};

TEST(ContractionSchedule, NoContractionWithMAndNOf16RunsScalar) {
  std::set<std::tuple<std::string, bool, std::string>> known, seen;
  for (auto& k : kKnownScalar) known.insert({k.example, k.small, k.contraction});
  int contractions = 0;
  for (auto& file : testing::example_files())
    for (bool small : {true, false}) {
      GeneratedModule m = generate(file, small);
      for (auto& c : m.contractions) {
        ++contractions;
        if (!c.scalar() || c.m < 16 || c.n < 16) continue;
        std::tuple<std::string, bool, std::string> key{stem(file), small, c.contraction};
        seen.insert(key);
        EXPECT_TRUE(known.count(key)) << stem(file) << (small ? " (small)" : " (default sizes)") << ", kernel " << c.kernel << ": contraction "
                                      << c.contraction << " (M " << c.m << ", N " << c.n << ", K " << c.k << ") runs scalar: " << c.reason;
      }
    }
  EXPECT_GT(contractions, 40);
  // A known case that no longer runs scalar leaves the list.
  for (auto& k : known) EXPECT_TRUE(seen.count(k)) << std::get<0>(k) << " " << std::get<2>(k) << " is no longer scalar: remove it from kKnownScalar";
}

TEST(ContractionSchedule, ConvChainOfTwoImagesKeepsItsGatheredChain) {
  // conv_chain's y2 = h[n, o, r, col] · w2[o2, o]: at N 2 the skeleton takes it by running n as a batch
  // (gemm_skeleton_fit.h), but the chain with h on chip is faster (whole_contractions.cpp): one kernel.
  GeneratedModule m = generate(example("conv_chain"), false, {{"N", 2}});
  ASSERT_EQ(m.contractions.size(), 2u) << contraction_schedule_text(m.contractions);
  for (auto& c : m.contractions) {
    EXPECT_EQ(c.skeleton, ContractionSchedule::kGatheredGemm) << contraction_schedule_text(m.contractions);
    EXPECT_EQ(c.kernel, m.contractions[0].kernel);
  }
}

TEST(ContractionSchedule, ConcatenatedKRunsOnTensorCores) {
  // nerf_mlp's skip connection cat([x, h4]) and view input cat([feature, dir]) feed z5 and zv: K ranges
  // merged into one f16 operand (small sizes, fused), and at the default sizes whole contractions on
  // the GEMM skeleton after a padded copy of the concatenation (fusion/padded_operands.h; h5 and hv
  // their epilogues), as its 256 x 256 layers and h0 (x copied into rows of 64): ten in all.
  for (bool small : {true, false}) {
    GeneratedModule m = generate(example("nerf_mlp"), small);
    int concatenated = 0, skeleton = 0;
    for (auto& c : m.contractions) {
      skeleton += c.skeleton == ContractionSchedule::kGemmSkeleton;
      const bool fused = c.contraction == "z5_tile" || c.contraction == "zv_tile";
      const bool whole = c.contraction == "h5" || c.contraction == "hv";
      if (!fused && !whole) continue;
      ++concatenated;
      EXPECT_FALSE(c.scalar()) << c.contraction << ": " << c.reason;
      EXPECT_EQ(c.type, "f16") << c.contraction;
      if (whole) EXPECT_EQ(c.skeleton, ContractionSchedule::kGemmSkeleton) << c.contraction;
    }
    EXPECT_EQ(concatenated, 2) << contraction_schedule_text(m.contractions);
    if (!small) EXPECT_EQ(skeleton, 10) << contraction_schedule_text(m.contractions);
  }
}

TEST(ContractionSchedule, EveryContractIsScheduledOnce) {
  for (auto& file : testing::example_files()) {
    auto program = std::make_shared<Program>(parse_program_file(file));
    BoundProgram bound = bind_program(program, SizeChoice{true, {}});
    KernelProgram kernels = compile_program(bound, CompileOptions::for_gpu()).kernels;
    size_t contracts = 0;
    struct Count : StmtVisitor {
      size_t n = 0;
      using StmtVisitor::visit;
      void visit(const ContractNode&) override { ++n; }
    };
    for (auto& k : kernels.kernels) {
      Count count;
      count.visit(k.body);
      contracts += count.n;
    }
    GeneratedModule m = generate_cuda(kernels);
    EXPECT_EQ(m.contractions.size(), contracts) << file;
    for (auto& c : m.contractions) {
      EXPECT_FALSE(c.skeleton.empty()) << file << " " << c.contraction;
      EXPECT_EQ(c.scalar(), c.tile.empty()) << file << " " << c.contraction;
      EXPECT_EQ(c.scalar(), !c.reason.empty()) << file << " " << c.contraction << ": " << c.reason;
      EXPECT_NE(c.figures.find("floor "), std::string::npos) << c.figures;
    }
  }
}

TEST(ContractionSchedule, GemmSkeletonKernelNamesConfigAndPrediction) {
  // ffn at its default sizes: the long-K products run whole on the skeleton, tiled by the cost model.
  GeneratedModule m = generate(example("ffn"), false);
  int skeleton = 0;
  for (auto& c : m.contractions) {
    if (c.skeleton != ContractionSchedule::kGemmSkeleton) continue;
    ++skeleton;
    EXPECT_EQ(c.tile.rfind("BM ", 0), 0u) << c.tile;
    EXPECT_NE(c.figures.find("us predicted, bound by"), std::string::npos) << c.figures;
    EXPECT_NE(m.source.find("// contraction " + c.contraction + " (M " + std::to_string(c.m) + ", N " + std::to_string(c.n)), std::string::npos);
  }
  EXPECT_GT(skeleton, 0) << contraction_schedule_text(m.contractions);
  EXPECT_NE(m.source.find("//   cost model: "), std::string::npos);
}

TEST(ContractionSchedule, AttentionRunsOnTheSkeletonAtDefaultSizes) {
  GeneratedModule m = generate(example("vanilla"), false);
  ASSERT_EQ(m.contractions.size(), 2u) << contraction_schedule_text(m.contractions);
  for (auto& c : m.contractions) {
    EXPECT_EQ(c.skeleton, ContractionSchedule::kAttentionSkeleton) << contraction_schedule_text(m.contractions);
    EXPECT_EQ(c.type, "bf16");
    EXPECT_NE(c.tile.find("solder::attention::Config<"), std::string::npos) << c.tile;
  }
}

// document_mask: on the attention skeleton, its key tiles classified from the doc ids' min/max; the
// report says by what rule (solder emit --report).
TEST(ContractionSchedule, DataMaskedAttentionRunsOnTheSkeleton) {
  GeneratedModule m = generate(example("document_mask"), false);
  ASSERT_EQ(m.contractions.size(), 2u) << contraction_schedule_text(m.contractions);
  for (auto& c : m.contractions) {
    EXPECT_EQ(c.skeleton, ContractionSchedule::kAttentionSkeleton) << contraction_schedule_text(m.contractions);
    EXPECT_NE(c.tile.find("solder::attention::Config<"), std::string::npos) << c.tile;
    EXPECT_NE(c.reason.find("2048 work tiles of 128 query rows x 64 keys on 132 persistent blocks; skipped tiles: a data mask: key tiles where rid_ == cid_ holds for no pair of ids"), std::string::npos) << c.reason;
    EXPECT_NE(c.reason.find("each next one by the producer warpgroup's three idle warps"), std::string::npos) << c.reason;
  }
  EXPECT_EQ(m.source.find("// attention skeleton not used for "), std::string::npos);
}

// evoformer: on the skeleton at head dim 64; at head dim 16 (which it does not take) the generic
// writer's mma.sync, with the skeleton's reason in the report and the source.
TEST(ContractionSchedule, EvoformerRunsOnTheSkeletonOrSaysWhyNot) {
  GeneratedModule m = generate(example("evoformer"), false);
  ASSERT_EQ(m.contractions.size(), 2u) << contraction_schedule_text(m.contractions);
  for (auto& c : m.contractions) EXPECT_EQ(c.skeleton, ContractionSchedule::kAttentionSkeleton) << contraction_schedule_text(m.contractions);
  GeneratedModule d16 = generate(example("evoformer"), false, {{"D", 16}});
  ASSERT_EQ(d16.contractions.size(), 2u) << contraction_schedule_text(d16.contractions);
  for (auto& c : d16.contractions) {
    EXPECT_EQ(c.skeleton, ContractionSchedule::kMmaSync) << contraction_schedule_text(d16.contractions);
    EXPECT_NE(c.reason.find("attention skeleton not used: head dim 16"), std::string::npos) << c.reason;
  }
  EXPECT_NE(d16.source.find("// attention skeleton not used for fused_o: head dim 16"), std::string::npos);
}

TEST(ContractionSchedule, TextAndJsonNameEveryField) {
  ContractionSchedule s;
  s.kernel = "k";
  s.contraction = "c";
  s.skeleton = ContractionSchedule::kScalar;
  s.type = "f32";
  s.m = 32;
  s.n = 48;
  s.k = 7;
  s.reason = "an f32 operand";
  s.figures = "floor 1 us (tensor 1 us, HBM 0.5 us)";
  EXPECT_EQ(contraction_schedule_text({s}), "k c: scalar, T f32, M 32 N 48 K 7 (1 block); scalar because an f32 operand; floor 1 us (tensor 1 us, HBM 0.5 us)\n");
  const std::string json = contraction_schedule_json({s});
  for (const char* field : {"\"kernel\":\"k\"", "\"skeleton\":\"scalar\"", "\"m\":32", "\"n\":48", "\"k\":7", "\"scalar\":true", "\"reason\":\"an f32 operand\""})
    EXPECT_NE(json.find(field), std::string::npos) << field << " in " << json;
}

}  // namespace
}  // namespace solder
