// `solder plan`: the modes, the JSON output, and usage errors (exit 2).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "support/json_reader.h"
#include "../test_util.h"

namespace solder {
namespace {

struct Result {
  int status;
  std::string output;
};

Result plan(const std::string& arguments) {
  Result r;
  r.status = testing::run_command(std::string(SOLDER_BINARY) + " plan " + arguments, &r.output);
  return r;
}

TEST(PlanCommand, GemmTextNamesTheChoice) {
  Result r = plan("--gemm 8192,8192,8192");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("M=8192 N=8192 K=8192 bf16 -> bf16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chosen: bf16 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bound by tensor"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pruned: bk_swizzle"), std::string::npos) << r.output;
}

TEST(PlanCommand, GemmJsonParses) {
  Result r = plan("--gemm 128,3072,8192,1,bf16 --json --top 3");
  ASSERT_EQ(r.status, 0) << r.output;
  JsonValue root = parse_json(r.output, "stdout");
  const JsonValue& first = root.member("plans")->items.at(0);
  EXPECT_EQ(first.member("candidates")->items.size(), 3u);
  EXPECT_EQ(first.member("problem")->member("k")->number_value, 8192);
  EXPECT_EQ(first.member("chosen")->member("config")->member("type")->text, "bf16");
  Result fp8 = plan("--gemm 4096,7168,2048,e4m3 --json");
  ASSERT_EQ(fp8.status, 0) << fp8.output;
  EXPECT_EQ(parse_json(fp8.output, "stdout").member("plans")->items.at(0).member("problem")->member("type")->text, "f8e4m3");
}

TEST(PlanCommand, ProgramFile) {
  Result r = plan(std::string(SOLDER_SOURCE_DIR) + "/examples/ffn.sol");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("M=128 N=8192 K=3072 f16 -> f32 (A K-major, B N-major)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("planned 2 product(s)"), std::string::npos) << r.output;
  Result small = plan(std::string(SOLDER_SOURCE_DIR) + "/examples/ffn.sol --small --json");
  ASSERT_EQ(small.status, 0) << small.output;
  EXPECT_EQ(parse_json(small.output, "stdout").member("plans")->items.size(), 2u);
  Result none = plan(std::string(SOLDER_SOURCE_DIR) + "/examples/softmax.sol");
  ASSERT_EQ(none.status, 0) << none.output;
  EXPECT_NE(none.output.find("no contraction found"), std::string::npos) << none.output;
}

// The programs' products as the backend plans them (--row-store): ffn-S3's down projection and quant_gemm
// Q7 on their tiles from before lrb-plan (which had moved them to B multicast, measured slower on the H200),
// linear_relu_backward's dw on its split-K B-multicast form (bench/NOTES.md, bmc-term).
TEST(PlanCommand, ProgramsKeepBMulticastForSplitKOnly) {
  auto chosen = [](const std::string& arguments, const std::string& kernel) {
    Result r = plan(std::string(SOLDER_SOURCE_DIR) + "/examples/" + arguments + " --json --row-store");
    EXPECT_EQ(r.status, 0) << r.output;
    const JsonValue root = parse_json(r.output, "stdout");
    for (const JsonValue& p : root.member("plans")->items)
      if (p.member("problem")->member("name")->text == kernel) return p.member("chosen")->member("config")->member("name")->text;
    return std::string("no product ") + kernel;
  };
  EXPECT_EQ(chosen("ffn.sol --dim M=128 --dim N=11008 --dim K=4096 --dim L=4096", "e (kernel e)"), "f16 64x64x64 s9 w1 c1x1 k1");
  EXPECT_EQ(chosen("gated_ffn.sol --dim M=128 --dim N=11008 --dim K=4096 --dim L=4096", "e (kernel e)"), "f16 64x64x64 s9 w1 c1x1 k1");
  EXPECT_EQ(chosen("quant_gemm.sol --dim M=4096 --dim N=2048 --dim K=768", "c (kernel c)"), "f8e4m3 128x256x128 s4 w2 c1x1 k1");
  EXPECT_EQ(chosen("linear_relu_backward.sol", "dw (kernel dw)"), "f16 64x64x64 s14 w1 c2x1 k8");
}

TEST(PlanCommand, BadGemmExitsTwo) {
  for (const char* bad : {"--gemm 1,2", "--gemm 8192,8192,x", "--gemm 0,8,8", "--gemm 8,8,8,int8", "--gemm 8,8,8,1,bf16,3",
                          "--gemm -4,8,8", "--gemm 8,8,8,", "--gemm"}) {
    Result r = plan(bad);
    EXPECT_EQ(r.status, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--gemm"), std::string::npos) << bad << "\n" << r.output;
  }
}

TEST(PlanCommand, UsageErrorsExitTwo) {
  EXPECT_EQ(plan("").status, 2);
  EXPECT_EQ(plan("--gemm 8,8,8 --catalogue").status, 2);
  EXPECT_EQ(plan("--gemm 64,64,64 --top 0").status, 2);
  EXPECT_EQ(plan("--gemm 64,64,64 --output int9").status, 2);
  EXPECT_EQ(plan("--gemm 64,64,64 --hardware /nonexistent.json").status, 2);
  EXPECT_EQ(plan("/nonexistent.sol").status, 2);
  Result old = plan("--gemm 64,64,64 --hardware " + std::string(SOLDER_SOURCE_DIR) + "/bench/results/h100/probe-h100.json");
  EXPECT_EQ(old.status, 2);
  EXPECT_NE(old.output.find("\"rates\""), std::string::npos) << old.output;
}

TEST(PlanCommand, CatalogueAndSkeletonOnly) {
  Result text = plan("--catalogue");
  ASSERT_EQ(text.status, 0);
  EXPECT_NE(text.output.find("BM "), std::string::npos) << text.output;
  Result json = plan("--catalogue --json");
  ASSERT_EQ(json.status, 0);
  EXPECT_GT(parse_json(json.output, "stdout").member("configurations_per_type")->number_value, 1000);
  Result skeleton = plan("--gemm 8192,8192,8192 --skeleton-only --json");
  ASSERT_EQ(skeleton.status, 0) << skeleton.output;
  const JsonValue& chosen = *parse_json(skeleton.output, "stdout").member("plans")->items.at(0).member("chosen")->member("config");
  EXPECT_EQ(chosen.member("split_k")->number_value, 1);
  EXPECT_EQ(chosen.member("cluster_m")->number_value, 1);
}

TEST(PlanCommand, Validate) {
  const std::string path = ::testing::TempDir() + "solder-plan-sweep.json";
  {
    std::ofstream out(path);
    out << R"({"results": [
      {"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "config": {"bm": 128, "bn": 256, "bk": 64, "stages": 4, "consumers": 2}, "ms": 0.2},
      {"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "config": {"bm": 64, "bn": 64, "bk": 64, "stages": 4, "consumers": 1}, "ms": 0.5},
      {"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "config": {"bm": 128, "bn": 128, "bk": 64, "stages": 6, "consumers": 2}, "ms": 0.25}
    ]})";
  }
  Result r = plan("--validate " + path);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Spearman 1.000"), std::string::npos) << r.output;
  Result json = plan("--validate " + path + " --json");
  ASSERT_EQ(json.status, 0) << json.output;
  EXPECT_DOUBLE_EQ(parse_json(json.output, "stdout").member("mean_spearman")->number_value, 1.0);
  // Repeated: the sweeps are read together (the same three measured again count once each, at the median).
  Result twice = plan("--validate " + path + " --validate " + path + " --json");
  ASSERT_EQ(twice.status, 0) << twice.output;
  const JsonValue both = parse_json(twice.output, "stdout");
  EXPECT_EQ(both.member("records")->number_value, 6);
  EXPECT_EQ(both.member("merged")->number_value, 3);
  EXPECT_EQ(both.member("pairs")->number_value, 3);
  {
    std::ofstream out(path);
    out << "{\"results\": [{\"dtype\": \"bf16\"}]}";
  }
  Result bad = plan("--validate " + path);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find(path + ":1:14: expected member \"m\""), std::string::npos) << bad.output;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace solder
