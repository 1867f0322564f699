// The epilogue's store in the cost model (src/plan/epilogue_cost.h): which schedule a configuration runs
// (the staging buffer beside the ring), what the staged term prices, and the planner's choice with the term
// on and off (SOLDER_GEMM_EPILOGUE_TERM), before / expected.
#include "plan/epilogue_cost.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "plan/cost_model.h"
#include "plan/skeleton_choice.h"

namespace solder {
namespace {

// Sets $SOLDER_GEMM_EPILOGUE_TERM for one scope ("" unsets it).
class TermSetting {
 public:
  explicit TermSetting(const char* value) {
    if (const char* old = std::getenv("SOLDER_GEMM_EPILOGUE_TERM")) old_ = old, had_ = true;
    if (*value) setenv("SOLDER_GEMM_EPILOGUE_TERM", value, 1);
    else unsetenv("SOLDER_GEMM_EPILOGUE_TERM");
  }
  ~TermSetting() {
    if (had_) setenv("SOLDER_GEMM_EPILOGUE_TERM", old_.c_str(), 1);
    else unsetenv("SOLDER_GEMM_EPILOGUE_TERM");
  }

 private:
  std::string old_;
  bool had_ = false;
};

GemmConfig tile(MmaType type, int bm, int bn, int stages, bool pingpong = false) {
  GemmConfig c;
  c.type = type;
  c.bm = bm;
  c.bn = bn;
  c.bk = 128 / mma_type_bytes(type);
  c.stages = stages;
  c.consumers = pingpong ? 2 : bm / 64;
  c.pingpong = pingpong;
  return c;
}

// A 16-bit row-store product as the skeleton writer plans it (the staged schedule by default).
GemmProblem row_store_problem(int64_t m, int64_t n, int64_t k, MmaType type = MmaType::f16) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.type = type;
  p.output = type == MmaType::f16 ? DType::f16 : DType::bf16;
  p.row_store = true;
  return p;
}

GemmSkeletonProblem skeleton_problem(int64_t m, int64_t n, int64_t k) {
  GemmSkeletonProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = GemmSkeletonOperand{"a", DType::f16, true, m, k, k, 1, 0};
  p.b = GemmSkeletonOperand{"b", DType::f16, true, n, k, k, 1, 0};
  return p;
}

// config.cuh's gemm_smem_bytes: the whole tile of 16-bit results beside the ring, or nothing.
TEST(EpilogueCost, TheStagingBufferFitsBesideTheRingOrNotAtAll) {
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f16, 128, 256, 4)), 0);  // 4 × 48 KB + 64 KB > 227 KB
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f16, 128, 256, 3)), 128 * 256 * 2);
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f8e4m3, 128, 256, 4)), 0);  // fp8: the same 48 KB a stage
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f8e4m3, 128, 256, 3)), 128 * 256 * 2);
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f16, 128, 128, 5)), 128 * 128 * 2);
  // The ping-pong block's buffer holds both warpgroups' 64 rows.
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f16, 64, 256, 4, true)), 128 * 256 * 2);
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f16, 64, 128, 9, true)), 0);
  EXPECT_EQ(epilogue_staging_bytes(tile(MmaType::f16, 128, 48, 4)), 0);  // BN not a multiple of 32: no row stores
}

TEST(EpilogueCost, TheScheduleFollowsTheProblemAndTheBuffer) {
  GemmProblem p = row_store_problem(16384, 1024, 1024);
  const GemmConfig s3 = tile(MmaType::f16, 128, 256, 3), s4 = tile(MmaType::f16, 128, 256, 4);
  EXPECT_EQ(epilogue_schedule(p, s3), EpilogueSchedule::staged);
  EXPECT_EQ(epilogue_schedule(p, s4), EpilogueSchedule::registers_first);
  GemmConfig split = s3;
  split.split_k = 2;  // the merge is per warp: registers first
  EXPECT_EQ(epilogue_schedule(p, split), EpilogueSchedule::registers_first);
  p.row_store_mode = 1;
  EXPECT_EQ(epilogue_schedule(p, s3), EpilogueSchedule::registers_first);
  p.row_store_mode = 0;
  EXPECT_EQ(epilogue_schedule(p, s3), EpilogueSchedule::direct);
  EXPECT_EQ(epilogue_schedule(p, split), EpilogueSchedule::pairs);
  p.row_store = false;
  EXPECT_EQ(epilogue_schedule(p, s3), EpilogueSchedule::pairs);
  EXPECT_EQ(epilogue_schedule_name(EpilogueSchedule::staged), "staged");
  EXPECT_EQ(epilogue_schedule_name(EpilogueSchedule::registers_first), "registers");
}

// Off (the default), a staged tile is priced exactly as before the term: its store wholly on the
// consumers' path. On, every tile but a block's last keeps kEpilogueStagedExposedFraction of it.
TEST(EpilogueCost, TheStagedTermHidesTheDrainOfEveryTileButTheLast) {
  const GemmProblem p = row_store_problem(16384, 1024, 1024);  // lrb wide's dx: 512 tiles, 4 per block
  const GemmConfig s3 = tile(MmaType::f16, 128, 256, 3);
  GemmCost off, on;
  {
    TermSetting unset("");
    EXPECT_FALSE(epilogue_staging_term_enabled());
    off = predict_gemm(p, s3, default_hardware());
  }
  {
    TermSetting set("1");
    on = predict_gemm(p, s3, default_hardware());
  }
  EXPECT_EQ(off.epilogue, EpilogueSchedule::staged);
  EXPECT_EQ(on.epilogue, EpilogueSchedule::staged);
  ASSERT_EQ(off.waves, 4);
  const double store_us = off.store_us;  // off: exposed = the whole store
  EXPECT_NEAR(on.store_us, kEpilogueStagedExposedFraction * store_us, 1e-9);
  EXPECT_NEAR(off.tensor_us - on.tensor_us, (off.waves - 1) * (1 - kEpilogueStagedExposedFraction) * store_us, 1e-9);
  EXPECT_LT(on.total_us, off.total_us);
  // A registers-first tile is priced the same either way.
  const GemmConfig s4 = tile(MmaType::f16, 128, 256, 4);
  double s4_off, s4_on;
  {
    TermSetting set("0");
    s4_off = predict_gemm(p, s4, default_hardware()).total_us;
  }
  {
    TermSetting set("1");
    s4_on = predict_gemm(p, s4, default_hardware()).total_us;
  }
  EXPECT_EQ(s4_off, s4_on);
}

// One unit per block (ffn's M = 128 up projection: 76 tiles): the last tile is the only one, so staged
// and registers first cost the same, to the bit (the planner's ties then fall to the smaller ring).
TEST(EpilogueCost, OneUnitPerBlockPricesBothSchedulesAlike) {
  GemmProblem p = row_store_problem(128, 9728, 2560);
  p.b_k_major = false;
  const GemmConfig s5 = tile(MmaType::f16, 128, 128, 5);
  double off, on;
  {
    TermSetting set("0");
    off = predict_gemm(p, s5, default_hardware()).total_us;
  }
  {
    TermSetting set("1");
    on = predict_gemm(p, s5, default_hardware()).total_us;
  }
  EXPECT_EQ(predict_gemm(p, s5, default_hardware()).waves, 1);
  EXPECT_EQ(off, on);
}

// Before / expected: the planner's choice for lrb wide's dx (16384 x 1024 x 1024 f16, B K-major) and
// quant_gemm Q7 (fp8 4096 x 2048 x 768). Without the term (main's model, the default) 128 x 256 on 4
// stages, registers first; with it 128 x 256 on 3 stages, staged — the plans the H200 A/B found slower.
TEST(EpilogueCost, ThePlannerTradesAStageForTheBufferOnlyWithTheTerm) {
  struct Case {
    GemmSkeletonProblem problem;
    MmaType type;
    DType output;
  };
  GemmSkeletonProblem q7 = skeleton_problem(4096, 2048, 768);
  q7.a.dtype = q7.b.dtype = DType::f8e4m3;
  for (const Case& c : {Case{skeleton_problem(16384, 1024, 1024), MmaType::f16, DType::f16},
                        Case{q7, MmaType::f8e4m3, DType::bf16}}) {
    SCOPED_TRACE(std::to_string(c.problem.m) + "x" + std::to_string(c.problem.n) + "x" + std::to_string(c.problem.k));
    {
      TermSetting unset("");
      const SkeletonChoice before = choose_skeleton_config(c.problem, c.type, c.output, true, 2);
      ASSERT_TRUE(before.chosen) << before.why;
      EXPECT_EQ(before.chosen->config.bm, 128);
      EXPECT_EQ(before.chosen->config.bn, 256);
      EXPECT_EQ(before.chosen->config.stages, 4);
      EXPECT_EQ(before.chosen->cost.epilogue, EpilogueSchedule::registers_first);
    }
    {
      TermSetting set("1");
      const SkeletonChoice after = choose_skeleton_config(c.problem, c.type, c.output, true, 2);
      ASSERT_TRUE(after.chosen) << after.why;
      EXPECT_EQ(after.chosen->config.bm, 128);
      EXPECT_EQ(after.chosen->config.bn, 256);
      EXPECT_EQ(after.chosen->config.stages, 3);
      EXPECT_EQ(after.chosen->cost.epilogue, EpilogueSchedule::staged);
      // Registers first (row_store_mode 1) has no buffer to buy: the term changes nothing.
      const SkeletonChoice registers = choose_skeleton_config(c.problem, c.type, c.output, true, 1);
      ASSERT_TRUE(registers.chosen);
      EXPECT_EQ(registers.chosen->config.stages, 4);
    }
  }
}

}  // namespace
}  // namespace solder
