// The operand-prologue path's configuration (device/solder/gemm/prologue_config.cuh), which the code
// generator sizes launches with: three warpgroups for BM 128 (converter and two consumers, no producer
// warpgroup), the shared-memory formula the writer uses agrees with the config's, and the tiles the
// planner picks for quant_gemm (fp8, A in bf16) and rmsnorm_gemm (bf16) keep their ring depth.
#include <gtest/gtest.h>

#include "../../../device/solder/gemm/prologue_config.cuh"

namespace solder {
namespace {

using gemm::Dtype;
using gemm::PrologueConfig;

TEST(PrologueConfig, ThreeWarpgroupsAndTheWritersSharedMemoryFormula) {
  using Q5 = PrologueConfig<Dtype::bf16, Dtype::e4m3, Dtype::e4m3, 128, 256, 3>;
  using L1 = PrologueConfig<Dtype::bf16, Dtype::bf16, Dtype::bf16, 128, 256, 4, false>;
  using Small = PrologueConfig<Dtype::bf16, Dtype::bf16, Dtype::bf16, 64, 128, 4>;
  EXPECT_EQ(Q5::Threads, 384);  // a fourth warpgroup would cap every thread at 128 registers
  EXPECT_EQ(Small::Threads, 256);
  EXPECT_EQ(gemm::prologue_threads(128), Q5::Threads);
  EXPECT_EQ(gemm::prologue_threads(64), Small::Threads);
  EXPECT_EQ(Q5::ConvStages, 2);
  EXPECT_EQ(gemm::prologue_smem_bytes(128, 256, 2, 1, 3), Q5::SmemBytes);
  EXPECT_EQ(gemm::prologue_smem_bytes(128, 256, 2, 2, 4), L1::SmemBytes);
  EXPECT_EQ(gemm::prologue_smem_bytes(64, 128, 2, 2, 4), Small::SmemBytes);
  EXPECT_LE(Q5::SmemBytes, 232448);
}

TEST(PrologueConfig, RingDepthsOfTheQuantAndRmsnormTiles) {
  EXPECT_EQ(gemm::prologue_stages(128, 256, 2, 1, 4), 3);  // quant_gemm Q5: 64 KB per stage
  EXPECT_EQ(gemm::prologue_stages(128, 192, 2, 1, 4), 3);  // Q1
  EXPECT_EQ(gemm::prologue_stages(128, 256, 2, 2, 4), 4);  // rmsnorm_gemm L1: 48 KB per stage
  EXPECT_EQ(gemm::prologue_stages(128, 128, 2, 2, 8), 6);  // L2: 32 KB per stage
}

}  // namespace
}  // namespace solder
