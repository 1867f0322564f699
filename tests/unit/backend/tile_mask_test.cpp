// The per-tile mask decision of the tensor-core emitter (tile_mask_rule, mma_stream_codegen.h): for
// masks that compare integer tensors across the row and the column index, a (row block, key tile) is
// skipped only when every element of it is masked, and runs without mask code only when none is.
// Checked exhaustively on the host: the decision expressions the kernel prints are evaluated here
// (CompiledExpr) from the per-tile min/max of random id arrays, and compared with the mask of every
// element. The emitted CUDA of the same kernels is compiled by CudaCodegen tests and, below, with nvcc.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <cstdlib>
#include <random>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/mma_stream_codegen.h"
#include "driver/compile.h"
#include "ir/expr_eval.h"
#include "../test_util.h"

namespace solder {
namespace {

// Attention over ids compared by `predicate` (over b, i, j and the inputs doc[B, S], kdoc[B, S]).
std::string masked_attention(const std::string& predicate, int64_t batch, int64_t seq) {
  return "program masked\n"
         "dim B = " + std::to_string(batch) + ", H = 2, S = " + std::to_string(seq) + ", D = 16\n"
         "in q[B, H, S, D] : bf16\n"
         "in k[B, H, S, D] : bf16\n"
         "in v[B, H, S, D] : bf16\n"
         "in doc[B, S] : i32\n"
         "in kdoc[B, S] : i32\n"
         "s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)\n"
         "sm[b, h, i, j] = select(" + predicate + ", s[b, h, i, j], -inf)\n"
         "m[b, h, i] = max(j) sm[b, h, i, j]\n"
         "e[b, h, i, j] = exp(sm[b, h, i, j] - m[b, h, i])\n"
         "z[b, h, i] = sum(j) e[b, h, i, j]\n"
         "out o[b, h, i, d] : bf16 = sum(j) e[b, h, i, j] / z[b, h, i] * v[b, h, j, d]\n";
}

KernelProgram attention_kernels(const std::string& text, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  BoundProgram bound = testing::bind_text(text, false, std::move(dims));
  return contracts_as_reduces(compile_program(bound, CompileOptions::for_gpu()).kernels, false);  // what the emitter sees
}

// Id arrays [B, S] of several kinds: sorted documents, few values in random order, one value, and
// wide random values (negative too).
std::vector<std::vector<double>> id_arrays(int64_t batch, int64_t seq, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<std::vector<double>> arrays;
  auto make = [&](auto value) {
    std::vector<double> a(static_cast<size_t>(batch * seq));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) a[static_cast<size_t>(b * seq + s)] = value(b, s);
    return a;
  };
  for (int documents : {3, 12, 40}) {
    std::uniform_int_distribution<int> id(0, documents - 1);
    auto a = make([&](int64_t, int64_t) { return static_cast<double>(id(random)); });
    for (int64_t b = 0; b < batch; ++b) std::sort(a.begin() + b * seq, a.begin() + (b + 1) * seq);
    arrays.push_back(a);
  }
  std::uniform_int_distribution<int> few(0, 2), wide(-1000, 1000);
  arrays.push_back(make([&](int64_t, int64_t) { return static_cast<double>(few(random)); }));
  arrays.push_back(make([&](int64_t, int64_t) { return 5.0; }));
  arrays.push_back(make([&](int64_t, int64_t) { return static_cast<double>(wide(random)); }));
  return arrays;
}

struct Counts {
  int64_t tiles = 0, skipped = 0, full = 0, unmasked_elements = 0;
};

// Every (block, key tile) of the kernel: the rule's decision from the data's per-tile min/max, and
// the mask of each of its elements. A skipped tile with an unmasked element, or a full tile with a
// masked one, fails.
Counts check_rule(const KernelProgram& kp, const TileMaskRule& rule, const std::vector<double>& doc, const std::vector<double>& kdoc) {
  const Kernel& kernel = kp.kernels.front();
  const GlobalTensor* doc_global = kp.find_global("doc");
  const GlobalTensor* kdoc_global = kp.find_global("kdoc");
  TensorStorage doc_storage{"doc", doc_global->shape, doc.data(), nullptr, DType::i32};
  TensorStorage kdoc_storage{"kdoc", kdoc_global->shape, kdoc.data(), nullptr, DType::i32};
  // One variable table for every expression: grid variables, the key tile, the row, the column, the
  // lead axes (0), then the range names.
  CompiledExpr::Bindings bindings;
  for (auto& g : kernel.grid) bindings.vars.push_back(g.var);
  const size_t grid = bindings.vars.size(), loop = grid, row = grid + 1, col = grid + 2;
  bindings.vars.push_back(rule.loop_var);
  bindings.vars.push_back(rule.row_var);
  bindings.vars.push_back(rule.col_var);
  for (auto& v : rule.lead_vars) bindings.vars.push_back(v);
  const size_t first_range = bindings.vars.size();
  for (auto& r : rule.ranges) {
    bindings.vars.push_back(r.lo);
    bindings.vars.push_back(r.hi);
  }
  bindings.tensor = [&](const std::string& name) -> const TensorStorage* {
    if (name == "doc") return &doc_storage;
    if (name == "kdoc") return &kdoc_storage;
    return nullptr;
  };
  bindings.dims = kp.dims;
  auto compile = [&](const Expr& e) { return CompiledExpr(e, bindings, Arithmetic::float64); };
  CompiledExpr live = compile(rule.live), mask = compile(rule.mask_of_inputs), begin = compile(rule.loop_begin), end = compile(rule.loop_end);
  std::optional<CompiledExpr> full;
  if (rule.full) full = compile(*rule.full);
  std::vector<CompiledExpr> values;
  for (auto& r : rule.ranges) values.push_back(compile(r.value));

  Counts counts;
  std::vector<int64_t> at(bindings.vars.size(), 0);
  const int64_t blocks = kernel.blocks();
  for (int64_t block = 0; block < blocks; ++block) {
    int64_t linear = block;
    for (size_t g = grid; g-- > 0;) {
      at[g] = linear % kernel.grid[g].extent;
      linear /= kernel.grid[g].extent;
    }
    auto bound_over = [&](size_t k, size_t var, int64_t extent) {  // min/max of range k's value over var in [0, extent)
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
      for (int64_t x = 0; x < extent; ++x) {
        at[var] = x;
        auto v = static_cast<int64_t>(values[k].eval(at.data()));
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      at[first_range + 2 * k] = lo;
      at[first_range + 2 * k + 1] = hi;
    };
    for (size_t k = 0; k < rule.ranges.size(); ++k)
      if (!rule.ranges[k].per_key_tile) bound_over(k, row, rule.rows);
    const auto tiles_begin = static_cast<int64_t>(begin.eval(at.data())), tiles_end = static_cast<int64_t>(end.eval(at.data()));
    for (int64_t t = tiles_begin; t < tiles_end; ++t) {
      at[loop] = t;
      for (size_t k = 0; k < rule.ranges.size(); ++k)
        if (rule.ranges[k].per_key_tile) bound_over(k, col, rule.cols);
      const bool is_live = live.eval(at.data()) != 0, is_full = full && full->eval(at.data()) != 0;
      int64_t unmasked = 0;
      for (int64_t r = 0; r < rule.rows; ++r)
        for (int64_t c = 0; c < rule.cols; ++c) {
          at[row] = r;
          at[col] = c;
          unmasked += mask.eval(at.data()) != 0;
        }
      ++counts.tiles;
      counts.unmasked_elements += unmasked;
      if (!is_live) {
        ++counts.skipped;
        EXPECT_EQ(unmasked, 0) << "block " << block << ", key tile " << t << " is skipped but holds " << unmasked << " unmasked elements";
      }
      if (is_full) {
        ++counts.full;
        EXPECT_EQ(unmasked, rule.rows * rule.cols) << "block " << block << ", key tile " << t << " runs without the mask but holds masked elements";
      }
      if (::testing::Test::HasFailure()) return counts;
    }
  }
  return counts;
}

// The mask's unmasked (b, h, i, j) counted from the program's meaning, for sizes without ragged tiles.
int64_t program_unmasked(int64_t batch, int64_t heads, int64_t seq, const std::vector<double>& doc, const std::vector<double>& kdoc,
                         const std::function<bool(double, double, double, double, int64_t, int64_t)>& predicate) {
  int64_t count = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < seq; ++i)
      for (int64_t j = 0; j < seq; ++j)
        count += predicate(doc[b * seq + i], doc[b * seq + j], kdoc[b * seq + i], kdoc[b * seq + j], i, j);
  return count * heads;
}

struct Case {
  std::string predicate;
  std::function<bool(double di, double dj, double ki, double kj, int64_t i, int64_t j)> meaning;
};

std::vector<Case> cases() {
  return {
      {"doc[b, i] == doc[b, j]", [](double di, double dj, double, double, int64_t, int64_t) { return di == dj; }},
      {"doc[b, i] != doc[b, j]", [](double di, double dj, double, double, int64_t, int64_t) { return di != dj; }},
      {"doc[b, j] <= doc[b, i]", [](double di, double dj, double, double, int64_t, int64_t) { return dj <= di; }},
      {"doc[b, j] < doc[b, i]", [](double di, double dj, double, double, int64_t, int64_t) { return dj < di; }},
      {"doc[b, i] > doc[b, j]", [](double di, double dj, double, double, int64_t, int64_t) { return di > dj; }},
      {"doc[b, i] >= doc[b, j] + 2", [](double di, double dj, double, double, int64_t, int64_t) { return di >= dj + 2; }},
      {"doc[b, i] == doc[b, j] && j <= i", [](double di, double dj, double, double, int64_t i, int64_t j) { return di == dj && j <= i; }},
      {"doc[b, i] == doc[b, j] || j < 8", [](double di, double dj, double, double, int64_t, int64_t j) { return di == dj || j < 8; }},
      {"!(doc[b, i] != doc[b, j])", [](double di, double dj, double, double, int64_t, int64_t) { return di == dj; }},
      {"doc[b, i] - doc[b, j] <= 1 && doc[b, j] - doc[b, i] <= 1", [](double di, double dj, double, double, int64_t, int64_t) { return di - dj <= 1 && dj - di <= 1; }},
      {"doc[b, i] * 2 == kdoc[b, j]", [](double di, double, double, double kj, int64_t, int64_t) { return di * 2 == kj; }},
      {"kdoc[b, j] <= doc[b, i]", [](double di, double, double, double kj, int64_t, int64_t) { return kj <= di; }},
  };
}

TEST(TileMask, SkippedTilesHoldNoUnmaskedElementOnRandomIds) {
  // Sizes: ragged (200: the last row block and key tile part out of range) and exact (256); the
  // planner's row tiles for these grids (16 to 64 rows), 64-key tiles.
  for (int64_t seq : {200, 256}) {
    for (const Case& c : cases()) {
      KernelProgram kp = attention_kernels(masked_attention(c.predicate, 2, seq));
      ASSERT_EQ(kp.kernels.size(), 1u) << c.predicate;
      std::string refusal;
      auto rule = tile_mask_rule(kp, kp.kernels.front(), &refusal);
      ASSERT_TRUE(rule) << c.predicate << ": " << refusal;
      ASSERT_TRUE(rule->mask_of_inputs.defined()) << c.predicate;
      ASSERT_FALSE(rule->ranges.empty()) << c.predicate << ": the rule reads no data bounds";
      uint32_t seed = 17;
      for (auto& doc : id_arrays(2, seq, seed++)) {
        auto kdocs = id_arrays(2, seq, seed++);
        const std::vector<double>& kdoc = kdocs[seed % kdocs.size()];
        Counts n = check_rule(kp, *rule, doc, kdoc);
        ASSERT_FALSE(HasFailure()) << c.predicate << " at S = " << seq;
        EXPECT_GT(n.tiles, 0);
        if (seq % 256 == 0)  // every element in range: the kernel's mask is the program's
          EXPECT_EQ(n.unmasked_elements, program_unmasked(2, 2, seq, doc, kdoc, c.meaning)) << c.predicate;
      }
    }
  }
}

// The decision is not vacuous: sorted documents skip tiles, and long documents run tiles without the
// mask; with one id everywhere no tile is skipped and, for ==, every tile is full.
TEST(TileMask, SortedDocumentsSkipAndFillTiles) {
  KernelProgram kp = attention_kernels(masked_attention("doc[b, i] == doc[b, j]", 2, 1024));
  std::string refusal;
  auto rule = tile_mask_rule(kp, kp.kernels.front(), &refusal);
  ASSERT_TRUE(rule) << refusal;
  std::vector<double> doc(2 * 1024), flat(2 * 1024, 3.0);
  for (int64_t s = 0; s < 2 * 1024; ++s) doc[s] = static_cast<double>((s % 1024) / 300);  // documents of 300 tokens
  Counts n = check_rule(kp, *rule, doc, doc);
  EXPECT_GT(n.skipped, n.tiles / 3) << n.skipped << " of " << n.tiles;
  EXPECT_GT(n.full, 0);
  Counts one = check_rule(kp, *rule, flat, flat);
  EXPECT_EQ(one.skipped, 0);
  EXPECT_EQ(one.full, one.tiles);
}

// Masks the interval test cannot bound soundly skip nothing, and say why.
TEST(TileMask, RefusesMasksWithoutASoundBound) {
  for (const char* predicate : {"doc[b, i] % 3 == doc[b, j] % 3", "doc[b, i] + 0.5 > doc[b, j]"}) {
    KernelProgram kp = attention_kernels(masked_attention(predicate, 2, 256));
    std::string refusal;
    EXPECT_FALSE(tile_mask_rule(kp, kp.kernels.front(), &refusal)) << predicate;
    EXPECT_FALSE(refusal.empty()) << predicate;
  }
}

// Index-expression masks keep their compile-time rule (no data bounds), and the causal ones order the
// grid longest-first: the row tile with the most live key tiles starts first.
TEST(TileMask, CausalMasksRunLongestRowsFirst) {
  for (const char* name : {"causal", "sliding_window", "prefix_lm"}) {
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
    KernelProgram kp = contracts_as_reduces(compile_program(bind_program(program, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels, false);
    std::string refusal;
    auto rule = tile_mask_rule(kp, kp.kernels.front(), &refusal);
    ASSERT_TRUE(rule) << name << ": " << refusal;
    EXPECT_TRUE(rule->ranges.empty()) << name;
    auto k = generate_mma_stream_kernel(kp, kp.kernels.front(), &refusal);
    ASSERT_TRUE(k) << refusal;
    EXPECT_NE(k->summary.find("longest rows first: i_t by live key tiles, descending"), std::string::npos) << name << ": " << k->summary;
    EXPECT_NE(k->source.find("const long long i_t = 7LL - order_in_group_ / order_size_;"), std::string::npos) << name;
  }
  // vanilla and document masks keep the plain order
  for (const char* name : {"vanilla", "document_mask"}) {
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
    KernelProgram kp = contracts_as_reduces(compile_program(bind_program(program, SizeChoice{false, {}}), CompileOptions::for_gpu()).kernels, false);
    std::string refusal;
    auto k = generate_mma_stream_kernel(kp, kp.kernels.front(), &refusal);
    ASSERT_TRUE(k) << refusal;
    EXPECT_EQ(k->summary.find("longest rows first"), std::string::npos) << name;
    EXPECT_NE(k->source.find("long long block_linear = blockIdx.x;"), std::string::npos) << name;
  }
}

// The emitted kernel of a data-dependent mask classifies every key tile once per block into shared
// memory, and its loops read that table (no per-tile reads of the ids on the critical path).
TEST(TileMask, DocumentMaskClassifiesKeyTilesOncePerBlock) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/document_mask.sol"));
  for (auto dims : std::vector<std::vector<std::pair<std::string, int64_t>>>{{}, {{"S", 16384}, {"B", 1}}, {{"S", 1000}, {"B", 2}}}) {
    KernelProgram kp = contracts_as_reduces(compile_program(bind_program(program, SizeChoice{false, dims}), CompileOptions::for_gpu()).kernels, false);
    std::string refusal;
    auto k = generate_mma_stream_kernel(kp, kp.kernels.front(), &refusal);
    ASSERT_TRUE(k) << refusal;
    EXPECT_NE(k->summary.find("every key tile classified once per block into shared memory"), std::string::npos) << k->summary;
    EXPECT_NE(k->source.find("tile_class_[round_ + u_] = ((row_lo0 <= col_hi0) && (col_lo0 <= row_hi0)) ? ((((row_lo0 == row_hi0) && (col_lo0 == col_hi0)) && (row_lo0 == col_lo0)) ? 2 : 1) : 0;"),
              std::string::npos);
    EXPECT_NE(k->source.find("auto next_live = [&](long long t) -> long long { return t < stream_end ? next_live_tile_[t - stream_begin_] : t; };"), std::string::npos);
    EXPECT_NE(k->source.find("if (tile_full(j_t)) {"), std::string::npos);
    EXPECT_EQ(k->source.find("column_range0("), std::string::npos);  // no per-tile warp reduction in the loop
    EXPECT_EQ(k->source.find("__shared__ long long"), std::string::npos);  // all shared memory is the launch's
  }
}

std::string find_nvcc() {
  for (const char* candidate : std::initializer_list<const char*>{std::getenv("CUDACXX"), "/usr/local/cuda/bin/nvcc"})
    if (candidate && std::filesystem::exists(candidate)) return candidate;
  std::string out;
  if (testing::run_command("command -v nvcc", &out) == 0 && !out.empty()) return out.substr(0, out.find('\n'));
  return "";
}

// nvcc compiles the emitted kernels for sm_90a, without warnings: document masks (wgmma at paper size,
// 16k tokens, 64-row tiles at a ragged size, the per-tile classification of SOLDER_TILE_CLASSES=lazy),
// the causal grid order, two id tensors on mma.sync's small tiles.
TEST(TileMask, EmittedKernelsCompileWithNvccForSm90a) {
  std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX): the generated CUDA was not compiled";
  std::string cuda_root = std::filesystem::path(nvcc).parent_path().parent_path().string();
  std::string dir = ::testing::TempDir() + "/solder_tile_mask_compile";
  std::filesystem::create_directories(dir);
  std::string source = "#include <cooperative_groups.h>\n#include <solder/runtime.cuh>\n#include <solder/tile/tile.cuh>\n\n";
  auto add = [&](const KernelProgram& kp, const std::string& rename) {
    std::string refusal;
    auto k = generate_mma_stream_kernel(kp, kp.kernels.front(), &refusal);
    ASSERT_TRUE(k) << refusal;
    std::string text = k->source;
    const std::string name = " " + kp.kernels.front().name + "(";
    text.replace(text.find(name), name.size(), " " + rename + "(");
    source += text + "\n";
  };
  auto example = [&](const char* name, std::vector<std::pair<std::string, int64_t>> dims) {
    auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
    return contracts_as_reduces(compile_program(bind_program(program, SizeChoice{false, dims}), CompileOptions::for_gpu()).kernels, false);
  };
  add(example("document_mask", {}), "document_paper");
  add(example("document_mask", {{"S", 16384}, {"B", 1}}), "document_long");
  add(example("document_mask", {{"S", 1000}, {"B", 2}}), "document_ragged");
  setenv("SOLDER_TILE_CLASSES", "lazy", 1);  // the per-tile classification kept for A/B runs
  add(example("document_mask", {}), "document_lazy");
  unsetenv("SOLDER_TILE_CLASSES");
  add(example("causal", {}), "causal_paper");
  add(attention_kernels(masked_attention("doc[b, i] == kdoc[b, j] && j <= i", 2, 200)), "two_ids_small");
  std::string path = dir + "/tile_mask.cu";
  std::ofstream(path) << source;
  std::string output;
  std::string command = nvcc + " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I" + std::string(SOLDER_SOURCE_DIR) + "/device -I" + cuda_root +
                        "/include/cccl -c " + path + " -o " + path + ".o";
  EXPECT_EQ(testing::run_command(command, &output), 0) << output;
  EXPECT_EQ(output.find("warning"), std::string::npos) << output;
}

}  // namespace
}  // namespace solder
