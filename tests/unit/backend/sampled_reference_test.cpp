// The sampled float64 reference (src/backend/cpu/sampled_reference.h): bit-for-bit agreement with
// the full reference at every sampled element of every example (small dims), NaN rows, topk and
// argmax tie rules, which elements are chosen (boundary rows, determinism, distinctness), and the
// time one sample of vanilla attention at paper dims takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "backend/cpu/compare.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "backend/cpu/sampled_reference.h"
#include "ir/parser.h"
#include "support/parallel.h"
#include "../test_util.h"

namespace solder {
namespace {

BoundProgram bind_file(const std::string& path, bool small, std::vector<std::pair<std::string, int64_t>> overrides = {}) {
  auto program = std::make_shared<Program>(parse_program_file(path));
  return bind_program(program, SizeChoice{small, std::move(overrides)});
}

std::string example(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"; }

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// Every sampled value equals the full reference's value at its index, bit for bit. Returns the
// number of elements compared.
int64_t expect_matches_reference(const BoundProgram& p, const TensorSet& inputs, const SampleOptions& options,
                                 const std::string& what) {
  TensorSet full = run_reference(p, inputs);
  auto sampled = run_sampled_reference(p, inputs, options);
  auto outputs = p.outputs();
  EXPECT_EQ(sampled.size(), outputs.size()) << what;
  int64_t compared = 0;
  for (size_t o = 0; o < sampled.size() && o < outputs.size(); ++o) {
    const SampledOutput& s = sampled[o];
    EXPECT_EQ(s.name, outputs[o]->name) << what;
    const HostTensor& ref = full.at(s.name);
    EXPECT_EQ(s.flat_indices.size(), s.values.size()) << what;
    EXPECT_GE(static_cast<int64_t>(s.flat_indices.size()), std::min<int64_t>(options.samples_per_output, ref.elements()))
        << what << " " << s.name;
    EXPECT_TRUE(std::is_sorted(s.flat_indices.begin(), s.flat_indices.end())) << what;
    EXPECT_TRUE(std::adjacent_find(s.flat_indices.begin(), s.flat_indices.end()) == s.flat_indices.end()) << what;
    int mismatches = 0;
    for (size_t i = 0; i < s.flat_indices.size(); ++i) {
      double want = ref.values[static_cast<size_t>(s.flat_indices[i])];
      if (!same_bits(s.values[i], want) && ++mismatches <= 5)
        ADD_FAILURE() << what << ": " << s.name << "[" << s.flat_indices[i] << "] sampled " << s.values[i]
                      << ", reference " << want;
      ++compared;
    }
    EXPECT_EQ(mismatches, 0) << what << " " << s.name;
  }
  return compared;
}

// ---- Agreement with the full reference ----------------------------------------------------------

TEST(SampledReference, EveryExampleMatchesTheFullReferenceBitForBit) {
  for (const std::string& file : testing::example_files()) {
    SCOPED_TRACE(file);
    BoundProgram p = bind_file(file, /*small=*/true);
    TensorSet inputs = make_inputs(p, 11);
    // A sample smaller than most outputs, and then every element of every output.
    SampleOptions few;
    few.samples_per_output = 37;
    few.seed = 5;
    expect_matches_reference(p, inputs, few, file + " (37 samples)");
    SampleOptions all;
    all.samples_per_output = int64_t{1} << 40;
    all.allow_full_reference = false;  // this evaluator, not the full reference it may defer to
    int64_t compared = expect_matches_reference(p, inputs, all, file + " (all)");
    int64_t total = 0;
    for (auto* out : p.outputs()) total += out->elements();
    EXPECT_EQ(compared, total);
  }
}

TEST(SampledReference, MediumCausalAndDocumentMaskMatch) {
  // Larger than small so that sampling is really partial and rows have many masked keys.
  for (std::string name : {"causal", "document_mask", "sliding_window", "prefix_lm", "gqa"}) {
    SCOPED_TRACE(name);
    BoundProgram p = bind_file(example(name), true, {{"S", 192}, {"H", 4}, {"B", 2}});
    TensorSet inputs = make_inputs(p, 3);
    SampleOptions options;
    options.samples_per_output = 200;
    options.seed = 9;
    expect_matches_reference(p, inputs, options, name);
  }
}

TEST(SampledReference, FullyMaskedRowIsNaNAsInTheReference) {
  // Strictly causal (j < i): query 0 sees no key, its max is -inf and its row is NaN.
  auto p = testing::bind_text(
      "program strict\ndim B = 2, S = 40, D = 8\nin q[B, S, D] : f32\nin k[B, S, D] : f32\nin v[B, S, D] : f32\n"
      "s[b, i, j] = sum(d) q[b, i, d] * k[b, j, d]\nsm[b, i, j] = select(j < i, s[b, i, j], -inf)\n"
      "m[b, i] = max(j) sm[b, i, j]\ne[b, i, j] = exp(sm[b, i, j] - m[b, i])\nz[b, i] = sum(j) e[b, i, j]\n"
      "out o[b, i, d] = sum(j) e[b, i, j] / z[b, i] * v[b, j, d]\nout mm[b, i] = m[b, i]\n");
  TensorSet inputs = make_inputs(p, 1);
  SampleOptions options;
  options.samples_per_output = 10;
  expect_matches_reference(p, inputs, options, "strict causal");
  auto sampled = run_sampled_reference(p, inputs, options);
  const SampledOutput& o = sampled[0];
  int nan_rows = 0;
  for (size_t i = 0; i < o.flat_indices.size(); ++i) {
    int64_t row = o.flat_indices[i] / 8;
    if (row % 40 == 0) {  // i == 0 in either batch
      EXPECT_TRUE(std::isnan(o.values[i])) << o.flat_indices[i];
      ++nan_rows;
    } else {
      EXPECT_FALSE(std::isnan(o.values[i])) << o.flat_indices[i];
    }
  }
  EXPECT_EQ(nan_rows, 16);  // both batches' row 0 (first 8 rows of b and of i include them), whole rows
  const SampledOutput& mm = sampled[1];
  auto at = std::find(mm.flat_indices.begin(), mm.flat_indices.end(), 0);
  ASSERT_NE(at, mm.flat_indices.end());
  EXPECT_EQ(mm.values[static_cast<size_t>(at - mm.flat_indices.begin())], -INFINITY);
}

TEST(SampledReference, TopkAndArgTiesAndNaN) {
  auto p = testing::bind_text(
      "program top\ndim T = 3, E = 6, K = 3\nin l[T, E] : f32\nw[t, e] = l[t, e] * 1\n"
      "out v[t, r], out ix[t, r] = topk(K, e) w[t, e]\n"
      "out a[t] = argmax(e) w[t, e]\nout b[t] = argmin(e) w[t, e]\n"
      "out both[t, r] = v[t, r] + ix[t, r]\n");
  TensorSet in;
  in["l"] = HostTensor{"l", {3, 6}, DType::f32, {0.5, 2, -1, 2, 7, -1,  //
                                                  NAN, 1, NAN, 3, 3, 0,   //
                                                  -0.0, 0.0, -1, -1, 0.0, -0.0}};
  SampleOptions options;
  options.samples_per_output = 4;  // fewer than v's 9 elements: partial samples of topk targets
  for (uint64_t seed = 0; seed < 8; ++seed) {
    options.seed = seed;
    expect_matches_reference(p, in, options, "topk seed " + std::to_string(seed));
  }
  options.samples_per_output = 100;
  auto s = run_sampled_reference(p, in, options);
  EXPECT_EQ(s[1].name, "ix");
  EXPECT_EQ(s[1].values, (std::vector<double>{4, 1, 3, 0, 2, 3, 0, 1, 4}));
  EXPECT_EQ(s[2].values, (std::vector<double>{4, 0, 0}));  // argmax: first maximum; NaN wins; -0 == 0
  EXPECT_EQ(s[3].values, (std::vector<double>{2, 0, 2}));
}

TEST(SampledReference, EvaluatesIntermediatesAndMatchesCompare) {
  BoundProgram p = bind_file(example("vanilla"), true);
  TensorSet inputs = make_inputs(p, 2);
  TensorSet full = run_reference(p, inputs);
  std::vector<int64_t> idx = {0, 5, 4095, 17 * 64 + 3, 2 * 64 * 64 - 1};
  for (std::string t : {"s", "m", "e", "z", "p"}) {
    std::vector<int64_t> in_range;
    for (int64_t i : idx)
      if (i < full.at(t).elements()) in_range.push_back(i);
    auto values = evaluate_reference_elements(p, inputs, t, in_range);
    for (size_t i = 0; i < in_range.size(); ++i)
      EXPECT_TRUE(same_bits(values[i], full.at(t).values[static_cast<size_t>(in_range[i])])) << t << "[" << in_range[i] << "]";
  }
  EXPECT_THROW(evaluate_reference_elements(p, inputs, "o", {-1}), Error);
  SampleOptions options;
  options.samples_per_output = 50;
  auto sampled = run_sampled_reference(p, inputs, options);
  auto [got, ref] = gather_sampled(full.at("o"), sampled[0]);
  EXPECT_TRUE(compare_output(got, ref, 1e-5).ok);
  got.values[3] += 1;
  EXPECT_FALSE(compare_output(got, ref, 1e-5).ok);
}

TEST(SampledReference, WholeOutputsMayDeferToTheFullReference) {
  BoundProgram p = bind_file(example("llama_decode"), true);
  TensorSet inputs = make_inputs(p, 6);
  SampleOptions options;
  options.samples_per_output = 16;  // y has 1 x HID elements, all in its one (corner) row
  std::vector<double> fractions;
  options.progress = [&](double f) { fractions.push_back(f); };
  auto deferred = run_sampled_reference(p, inputs, options);
  ASSERT_FALSE(fractions.empty());
  EXPECT_EQ(fractions.back(), 1.0);
  EXPECT_TRUE(std::is_sorted(fractions.begin(), fractions.end()));
  options.allow_full_reference = false;
  options.progress = {};
  auto own = run_sampled_reference(p, inputs, options);
  ASSERT_EQ(deferred.size(), 1u);
  EXPECT_EQ(deferred[0].flat_indices.size(), static_cast<size_t>(p.tensor("y").elements()));
  EXPECT_EQ(deferred[0].flat_indices, own[0].flat_indices);
  for (size_t i = 0; i < own[0].values.size(); ++i) EXPECT_TRUE(same_bits(deferred[0].values[i], own[0].values[i])) << i;
}

TEST(SampledReference, MissingInputIsAnError) {
  BoundProgram p = bind_file(example("softmax"), true);
  EXPECT_THROW(run_sampled_reference(p, TensorSet{}, SampleOptions{}), Error);
}

// ---- Which elements -----------------------------------------------------------------------------

std::set<int64_t> rows_of(const std::vector<int64_t>& flat, int64_t row_length) {
  std::set<int64_t> rows;
  for (int64_t i : flat) rows.insert(i / row_length);
  return rows;
}

bool has_whole_row(const std::vector<int64_t>& flat, int64_t row, int64_t row_length) {
  for (int64_t c = 0; c < row_length; ++c)
    if (!std::binary_search(flat.begin(), flat.end(), row * row_length + c)) return false;
  return true;
}

TEST(SampledReference, CornerRowsAreAlwaysIncluded) {
  // vanilla at paper-like but cheap dims: o[B, H, S, D], corners over (b, h, i).
  BoundProgram p = bind_file(example("vanilla"), false, {{"B", 3}, {"H", 5}, {"S", 100}, {"D", 16}});
  TensorSet inputs = make_inputs(p, 1);
  const TensorInfo& o = p.tensor("o");
  SampleOptions options;
  options.samples_per_output = 64;
  auto chosen = sample_indices(p, inputs, o, options);
  for (int64_t b : {0, 2})
    for (int64_t h : {0, 4})
      for (int64_t i : {0, 99}) EXPECT_TRUE(has_whole_row(chosen, (b * 5 + h) * 100 + i, 16)) << b << h << i;
  // No mask in vanilla: the diagonal rows are not required.
  auto required = required_sample_indices(p, inputs, o);
  EXPECT_EQ(rows_of(required, 16).size(), 8u);
  EXPECT_EQ(required.size(), 8u * 16);
  EXPECT_GE(chosen.size(), 64u);
  EXPECT_TRUE(std::includes(chosen.begin(), chosen.end(), required.begin(), required.end()));
}

TEST(SampledReference, CausalIncludesTheFirstRowsOfEveryDim) {
  BoundProgram p = bind_file(example("causal"), false, {{"B", 3}, {"H", 10}, {"S", 100}, {"D", 16}});
  TensorSet inputs = make_inputs(p, 1);
  const TensorInfo& o = p.tensor("o");
  SampleOptions options;
  options.samples_per_output = 16;
  auto chosen = sample_indices(p, inputs, o, options);
  for (int64_t i = 0; i < 8; ++i) EXPECT_TRUE(has_whole_row(chosen, i, 16)) << "row i=" << i;  // b = h = 0
  for (int64_t h = 0; h < 8; ++h) EXPECT_TRUE(has_whole_row(chosen, h * 100, 16)) << "head " << h;
  for (int64_t b = 0; b < 3; ++b) EXPECT_TRUE(has_whole_row(chosen, b * 1000, 16)) << "batch " << b;
  EXPECT_TRUE(has_whole_row(chosen, (2 * 10 + 9) * 100 + 99, 16));  // last corner
}

TEST(SampledReference, DocumentMaskIncludesDocumentBoundaries) {
  BoundProgram p = bind_file(example("document_mask"), false, {{"B", 2}, {"H", 3}, {"S", 200}, {"D", 8}});
  TensorSet inputs = make_inputs(p, 4);
  const TensorInfo& o = p.tensor("o");
  SampleOptions options;
  options.samples_per_output = 8;
  auto chosen = sample_indices(p, inputs, o, options);
  const auto& doc = inputs.at("doc").values;
  int boundaries = 0;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 1; i < 200; ++i) {
      if (doc[static_cast<size_t>(b * 200 + i)] == doc[static_cast<size_t>(b * 200 + i - 1)]) continue;
      ++boundaries;
      EXPECT_TRUE(has_whole_row(chosen, (b * 3 + 0) * 200 + i, 8)) << "b " << b << " i " << i;
      EXPECT_TRUE(has_whole_row(chosen, (b * 3 + 0) * 200 + i - 1, 8)) << "b " << b << " i " << i - 1;
    }
  }
  EXPECT_GT(boundaries, 4);
  for (int64_t i = 0; i < 8; ++i) EXPECT_TRUE(has_whole_row(chosen, i, 8));
  // And the values there are right.
  options.samples_per_output = 100;
  expect_matches_reference(p, inputs, options, "document_mask");
}

TEST(SampledReference, SamplesAreDeterministicDistinctAndCoverSmallOutputs) {
  BoundProgram p = bind_file(example("softmax"), false, {{"T", 50}, {"N", 300}});
  TensorSet inputs = make_inputs(p, 1);
  const TensorInfo& y = p.tensor("y");
  SampleOptions a;
  a.samples_per_output = 500;
  a.seed = 1;
  SampleOptions b = a;
  b.seed = 2;
  auto ia = sample_indices(p, inputs, y, a);
  EXPECT_EQ(ia, sample_indices(p, inputs, y, a));
  EXPECT_NE(ia, sample_indices(p, inputs, y, b));
  EXPECT_GE(ia.size(), 500u + 0);
  EXPECT_TRUE(std::adjacent_find(ia.begin(), ia.end()) == ia.end());
  EXPECT_TRUE(has_whole_row(ia, 0, 300));
  EXPECT_TRUE(has_whole_row(ia, 49, 300));
  auto ra = run_sampled_reference(p, inputs, a);
  auto rb = run_sampled_reference(p, inputs, a);
  EXPECT_EQ(ra[0].flat_indices, rb[0].flat_indices);
  for (size_t i = 0; i < ra[0].values.size(); ++i) EXPECT_TRUE(same_bits(ra[0].values[i], rb[0].values[i]));
  // Fewer elements than samples: all of them.
  SampleOptions big;
  big.samples_per_output = 15000;
  auto all = sample_indices(p, inputs, y, big);
  ASSERT_EQ(all.size(), 15000u);
  for (int64_t i = 0; i < 15000; ++i) EXPECT_EQ(all[static_cast<size_t>(i)], i);
  // Progress reaches 1.
  double last = 0;
  a.progress = [&](double f) { EXPECT_GE(f, last); last = f; };
  run_sampled_reference(p, inputs, a);
  EXPECT_EQ(last, 1.0);
}

// ---- Time at paper dims ---------------------------------------------------------------------------

TEST(SampledReference, VanillaAtPaperDimsTakesSeconds) {
  // B = 16, H = 16, S = 1024, D = 64 (the full reference is ~4e10 scalar evaluations). Timing is
  // printed, and asserted only against a bound far above what any machine should need.
  BoundProgram p = bind_file(example("vanilla"), false);
  ASSERT_EQ(p.dims.at("S"), 1024);
  TensorSet inputs = make_inputs(p, 1);
  SampleOptions options;
  options.samples_per_output = 1024;
  options.seed = 1;
  auto start = std::chrono::steady_clock::now();
  auto sampled = run_sampled_reference(p, inputs, options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ timing   ] vanilla B=16 H=16 S=1024 D=64: %zu sampled elements in %.2f s (%d threads)\n",
              sampled[0].flat_indices.size(), seconds, worker_count());
  ASSERT_EQ(sampled.size(), 1u);
  EXPECT_GE(sampled[0].flat_indices.size(), 1024u);
  for (double v : sampled[0].values) EXPECT_TRUE(std::isfinite(v));
  // Spot check one element against a direct computation in the same arithmetic.
  {
    const SampledOutput& o = sampled[0];
    int64_t flat = o.flat_indices[o.flat_indices.size() / 2];
    auto values = evaluate_reference_elements(p, inputs, "o", {flat});
    EXPECT_TRUE(same_bits(values[0], o.values[o.flat_indices.size() / 2]));
  }
  EXPECT_LT(seconds, 600.0);
}

// Not run by default (minutes on a 2-core machine): the time a 1024-element sample takes at the
// paper dims the GPU tests use. Run with --gtest_also_run_disabled_tests
// --gtest_filter='*PaperDimsTimings'; SOLDER_SAMPLED_ONLY=name restricts it to one program,
// SOLDER_SAMPLED_COUNT=n sets samples_per_output.
TEST(SampledReference, DISABLED_PaperDimsTimings) {
  struct Case { std::string file; std::vector<std::pair<std::string, int64_t>> dims; };
  std::vector<Case> cases = {
      {"vanilla", {{"B", 4}, {"S", 4096}}},
      {"causal", {{"B", 4}, {"S", 4096}}},
      {"document_mask", {{"B", 4}, {"S", 4096}}},
      {"sliding_window", {{"B", 4}, {"S", 4096}}},
      {"gqa", {{"B", 4}, {"S", 4096}}},
      {"llama_decode", {{"KV", 16384}}},
      {"mla_decode", {}},
      {"ffn", {}},
      {"gated_ffn", {}},
      {"moe_routing", {}},
      {"softmax", {}},
  };
  const char* only = std::getenv("SOLDER_SAMPLED_ONLY");
  const char* count = std::getenv("SOLDER_SAMPLED_COUNT");
  for (const Case& c : cases) {
    if (only && c.file != only) continue;
    BoundProgram p = bind_file(example(c.file), false, c.dims);
    auto t0 = std::chrono::steady_clock::now();
    TensorSet inputs = make_inputs(p, 1);
    auto t1 = std::chrono::steady_clock::now();
    SampleOptions options;
    options.samples_per_output = count ? std::atoll(count) : 1024;
    options.seed = 1;
    auto sampled = run_sampled_reference(p, inputs, options);
    auto t2 = std::chrono::steady_clock::now();
    size_t n = 0;
    for (auto& s : sampled) n += s.flat_indices.size();
    std::printf("[ timing   ] %-15s %zu elements: inputs %.1f s, sampled reference %.1f s (%d threads; full reference %.3g evaluations)\n",
                c.file.c_str(), n, std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count(), worker_count(), reference_work(p));
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace solder
