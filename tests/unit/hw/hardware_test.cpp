// Hardware description: the compiled-in H100 table, the JSON reader's errors, and the writer round trip.
#include "hw/hardware.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ir/diagnostics.h"

namespace solder {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_hardware_description(text, "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Hardware, DefaultIsTheMeasuredH100Table) {
  const HardwareDescription& hw = default_hardware();
  EXPECT_EQ(hw.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(hw.sm_count, 132);
  EXPECT_EQ(hw.max_cluster_size, 16);
  EXPECT_GT(hw.smem_per_block_bytes, 200 * 1024);
  ASSERT_EQ(hw.dsm.size(), 5u);
  for (int c : {2, 4, 8, 16}) {
    const DsmEntry* e = hw.dsm_at(c);
    ASSERT_NE(e, nullptr) << c;
    ASSERT_TRUE(e->push_tbps.has_value());
    EXPECT_GT(*e->push_tbps, e->pull_tbps) << "push above pull at cluster size " << c;
    EXPECT_GT(e->latency_cycles.value_or(0), 0);
  }
  EXPECT_FALSE(hw.dsm_at(1)->push_tbps.has_value());
  EXPECT_EQ(hw.dsm_at(3), nullptr);
}

TEST(Hardware, CompiledInTableEqualsTheResultsFile) {
  std::ifstream file(std::string(SOLDER_SOURCE_DIR) + "/bench/results/h100/dsm-table.json");
  ASSERT_TRUE(file);
  std::stringstream text;
  text << file.rdbuf();
  std::string on_disk = text.str();
  while (!on_disk.empty() && (on_disk.back() == '\n' || on_disk.back() == ' ')) on_disk.pop_back();
  std::string compiled_in(default_dsm_table_json());
  while (!compiled_in.empty() && (compiled_in.back() == '\n' || compiled_in.back() == ' ')) compiled_in.pop_back();
  EXPECT_EQ(compiled_in, on_disk) << "run src/hw/embed_dsm_table.sh";
}

TEST(Hardware, MaxActiveClustersRoundsTheFootprintUp) {
  const HardwareDescription& hw = default_hardware();
  EXPECT_EQ(hw.max_active_clusters(4, 65536), hw.dsm_at(4)->max_active_clusters.at(65536));
  EXPECT_EQ(hw.max_active_clusters(4, 40000), hw.dsm_at(4)->max_active_clusters.at(65536));
  EXPECT_EQ(hw.max_active_clusters(4, 1 << 20), 0);
  EXPECT_EQ(hw.max_active_clusters(5, 1024), 0);
}

TEST(Hardware, WriterRoundTrips) {
  const HardwareDescription& hw = default_hardware();
  HardwareDescription again = parse_hardware_description(to_json(hw), "round-trip");
  EXPECT_EQ(again.name, hw.name);
  EXPECT_EQ(again.commit, hw.commit);
  ASSERT_EQ(again.dsm.size(), hw.dsm.size());
  for (size_t i = 0; i < hw.dsm.size(); ++i) {
    EXPECT_EQ(again.dsm[i].cluster_size, hw.dsm[i].cluster_size);
    EXPECT_NEAR(again.dsm[i].pull_tbps, hw.dsm[i].pull_tbps, 1e-4);
    EXPECT_EQ(again.dsm[i].max_active_clusters, hw.dsm[i].max_active_clusters);
  }
}

TEST(Hardware, ErrorsNamePlaceExpectedAndFound) {
  EXPECT_EQ(error_of("{\"device\": 3}"), "t.json:1:12: expected \"device\" to be a string, found a number");
  EXPECT_EQ(error_of("[1]"), "t.json:1:1: expected a JSON object (a hardware description), found an array");
  EXPECT_EQ(error_of("{\"device\": \"x\",\n \"sm_count\": 1 2}"), "t.json:2:16: expected ',' or '}' in an object, found '2'");
  EXPECT_EQ(error_of("{\"device\": \"x\""), "t.json:1:15: expected ',' or '}' in an object, found the end of the file");
  const std::string missing = error_of(R"({"device": "x", "sm_count": 1, "sm_clock_mhz": 1, "smem_per_block_bytes": 1,
    "max_cluster_size": 16, "cluster_sizes": {"2": {"push_tbps": 1, "max_active_clusters": {}}}})");
  EXPECT_NE(missing.find("expected member \"pull_tbps\" (a number) in cluster size 2, found none"), std::string::npos) << missing;
  const std::string bad_key = error_of(R"({"device": "x", "sm_count": 1, "sm_clock_mhz": 1, "smem_per_block_bytes": 1,
    "max_cluster_size": 16, "cluster_sizes": {"two": {"pull_tbps": 1, "max_active_clusters": {}}}})");
  EXPECT_NE(bad_key.find("expected a cluster size as a positive integer key, found \"two\""), std::string::npos) << bad_key;
}

TEST(Hardware, LoadNamesAMissingFile) {
  try {
    load_hardware_description("/nonexistent/dsm.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/dsm.json: expected a readable hardware description (JSON), found no such file or no permission");
  }
}


TEST(Hardware, DefaultHasTheMeasuredRates) {
  const Rates& r = default_hardware().rates;
  ASSERT_TRUE(default_hardware().has_rates);
  EXPECT_NEAR(r.tensor("bf16"), 785, 25);   // cuBLAS 8192^3, bench/results/h100/raw ceilings
  EXPECT_NEAR(r.tensor("e4m3"), 1665, 75);  // the skeleton's 128x256 fp8 tiles at quant_gemm Q3-Q9 (quant-fp8)
  EXPECT_GT(r.tensor("tf32"), 0);
  EXPECT_EQ(r.tensor("int8"), 0);
  EXPECT_NEAR(r.hbm_tbps, 3.0, 0.05);
  EXPECT_EQ(r.l2_bytes, 50 * 1024 * 1024);
  EXPECT_NEAR(r.launch_us, 1.03, 0.01);
  EXPECT_GT(r.l2_tbps, r.hbm_tbps);
  EXPECT_EQ(r.registers_per_sm, 65536);
  EXPECT_GT(r.smem_per_sm_bytes, default_hardware().smem_per_block_bytes);
}

TEST(Hardware, CompiledInRatesEqualTheResultsFile) {
  std::ifstream file(std::string(SOLDER_SOURCE_DIR) + "/bench/results/h100/rates.json");
  ASSERT_TRUE(file);
  std::stringstream text;
  text << file.rdbuf();
  std::string on_disk = text.str();
  while (!on_disk.empty() && (on_disk.back() == '\n' || on_disk.back() == ' ')) on_disk.pop_back();
  std::string compiled_in(default_rates_json());
  while (!compiled_in.empty() && (compiled_in.back() == '\n' || compiled_in.back() == ' ')) compiled_in.pop_back();
  EXPECT_EQ(compiled_in, on_disk) << "run src/hw/embed_dsm_table.sh";
}

TEST(Hardware, RatesRoundTripAndAreOptional) {
  const HardwareDescription& hw = default_hardware();
  HardwareDescription again = parse_hardware_description(to_json(hw), "round-trip");
  ASSERT_TRUE(again.has_rates);
  EXPECT_EQ(again.rates.tensor_tflops.size(), hw.rates.tensor_tflops.size());
  EXPECT_NEAR(again.rates.tensor("e4m3"), hw.rates.tensor("e4m3"), 1e-3);
  EXPECT_NEAR(again.rates.l2_tbps, hw.rates.l2_tbps, 1e-6);
  EXPECT_EQ(again.rates.l2_bytes, hw.rates.l2_bytes);
  EXPECT_EQ(again.rates.smem_per_sm_bytes, hw.rates.smem_per_sm_bytes);
  EXPECT_NEAR(again.rates.cluster_launch_us, hw.rates.cluster_launch_us, 1e-6);
  EXPECT_EQ(again.rates.source, hw.rates.source);
  // A DSM table without rates (the format before the cost model) still loads.
  EXPECT_FALSE(parse_hardware_description(default_dsm_table_json(), "dsm.json").has_rates);
  HardwareDescription bare = hw;
  bare.has_rates = false;
  EXPECT_EQ(to_json(bare).find("\"rates\""), std::string::npos);
}

TEST(Hardware, RatesErrorsNameTheField) {
  std::string text(default_rates_json());
  auto without = [&](const std::string& member) {
    std::string t = text;
    const size_t at = t.find("\"" + member + "\"");
    t.erase(at, t.find(",", at) - at + 1);
    try {
      parse_rates(t, "r.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(without("hbm_tbps").find("expected member \"hbm_tbps\" (a number) in \"rates\", found none"), std::string::npos);
  EXPECT_NE(without("launch_us").find("r.json:1:1: expected member \"launch_us\""), std::string::npos);
  std::string negative = text;
  const size_t l2 = negative.find("\"l2_tbps\": ");
  ASSERT_NE(l2, std::string::npos);
  negative.replace(l2, negative.find(',', l2) - l2, "\"l2_tbps\": -1.0");
  try {
    parse_rates(negative, "r.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected \"l2_tbps\" to be a positive number"), std::string::npos) << e.what();
  }
}

// $SOLDER_HARDWARE: a `solder probe` output replaces the compiled-in description; one without rates is refused.
TEST(Hardware, EnvironmentFileReplacesTheCompiledInDescription) {
  EXPECT_EQ(hardware_for(nullptr).name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(hardware_for("").name, "NVIDIA H100 80GB HBM3");
  HardwareDescription other = default_hardware();
  other.name = "NVIDIA H200";
  other.rates.hbm_tbps = 4.3;
  const std::string with_rates = ::testing::TempDir() + "/solder_hw_h200.json";
  std::ofstream(with_rates) << to_json(other);
  HardwareDescription read = hardware_for(with_rates.c_str());
  EXPECT_EQ(read.name, "NVIDIA H200");
  ASSERT_TRUE(read.has_rates);
  EXPECT_NEAR(read.rates.hbm_tbps, 4.3, 1e-9);
  other.has_rates = false;
  const std::string without_rates = ::testing::TempDir() + "/solder_hw_norates.json";
  std::ofstream(without_rates) << to_json(other);
  try {
    hardware_for(without_rates.c_str());
    FAIL() << "a description without rates was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SOLDER_HARDWARE: " + without_rates + ": expected a hardware description with \"rates\""),
              std::string::npos) << e.what();
  }
  try {
    hardware_for("/nonexistent/h.json");
    FAIL() << "a missing file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SOLDER_HARDWARE: /nonexistent/h.json: expected a readable"), std::string::npos) << e.what();
  }
}

TEST(Hardware, MismatchNoteNamesBothGpusAndTheProbe) {
  const std::string planned = default_hardware().name;
  EXPECT_EQ(hardware_mismatch_note(planned), "");
  EXPECT_EQ(hardware_mismatch_note(""), "");
  const std::string note = hardware_mismatch_note("NVIDIA H200");
  EXPECT_NE(note.find(planned), std::string::npos) << note;
  EXPECT_NE(note.find("this GPU is NVIDIA H200"), std::string::npos) << note;
  EXPECT_NE(note.find("solder probe -o FILE"), std::string::npos) << note;
  EXPECT_NE(note.find("SOLDER_HARDWARE=FILE"), std::string::npos) << note;
}

}  // namespace
}  // namespace solder
