// The generic writer's register pass (kernel_writer_registers.cpp): memory-bound kernels without a
// stream loop or a contraction (SiLU·up, RMSNorm: bench/programs/) keep the tiles that each thread
// touches only at its own elements in registers, with 16-byte loads and stores and no shared-memory
// staging; everything else keeps the shared-memory tiles. Results on the H100: bench/NOTES.md
// ("Pointwise speed"); compilation of the source here with NVRTC when it is available.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "runtime/runtime.h"
#include "backend/cpu/compare.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cpu/reference.h"
#include "ir/parser.h"
#include "../test_util.h"

namespace solder {
namespace {

GeneratedModule generate_file(const std::string& file, bool small, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto program = std::make_shared<Program>(parse_program_file(file));
  BoundProgram bound = bind_program(program, SizeChoice{small, dims});
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels);
}
std::string bench_program(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/bench/programs/" + name + ".sol"; }
std::string example(const std::string& name) { return std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"; }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct EnvScope {  // an environment variable for the life of a scope
  EnvScope(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvScope() { unsetenv(name_); }
  const char* name_;
};

TEST(RegisterPass, SiluMulLoadsComputesAndStoresInRegisters) {
  GeneratedModule m = generate_file(bench_program("silu_mul"), false);
  ASSERT_EQ(m.kernels.size(), 1u);
  // F = 11008 in four tiles of 2752 (group_plan.cpp divisor_tile), not 4096, 4096 and a ragged 2816:
  // no element guard anywhere.
  EXPECT_NE(m.source.find("// the register pass: 2752 elements of each point tile per block, 2 vectors of 8 per thread"), std::string::npos)
      << m.source;
  EXPECT_EQ(m.source.find("whole_ = whole_ && "), std::string::npos) << m.source;
  EXPECT_EQ(m.kernels[0].blocks, 512 * 4);
  // Two 16-byte loads (g, u, kept as loaded bf16 pairs) and one 16-byte store per vector; nothing
  // staged in shared memory.
  EXPECT_EQ(count(m.source, "solder::reduce::load_packed("), 2);
  EXPECT_EQ(count(m.source, "solder::reduce::store_vector("), 1);
  EXPECT_EQ(count(m.source, "__syncthreads"), 0);
  EXPECT_EQ(count(m.source, "store_tile"), 0);
  EXPECT_EQ(m.kernels[0].shared_bytes, 0);
  // The map reads its operands from the registers, element by element.
  EXPECT_NE(m.source.find("solder::reduce::unpack(reg_g_tile[u_], i_)"), std::string::npos);
  EXPECT_NE(m.source.find("reg_y_tile[u_][i_] = solder::round_bf16("), std::string::npos);
}

TEST(RegisterPass, RaggedTileStoresElementByElementWhereTheGuardFails) {
  // F = 5000: tiles of 1024 along F, the fifth 904 long; the store's guard is checked per element of
  // each vector, a vector store where all of them hold.
  GeneratedModule m = generate_file(bench_program("silu_mul"), false, {{"T", 64}, {"F", 5000}});
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_NE(m.source.find("the register pass"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("whole_ = whole_ && "), std::string::npos);
  EXPECT_NE(m.source.find("solder::store(&y["), std::string::npos);
}

TEST(RegisterPass, RmsNormReducesTheRowFromRegisters) {
  GeneratedModule m = generate_file(bench_program("rmsnorm"), false);
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_NE(m.source.find("the register pass"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("reduce into ms_tile from registers"), std::string::npos);
  // x and w once each, y once; the statistic (one float) and the 8 warp partials in shared memory.
  EXPECT_EQ(count(m.source, "solder::reduce::load_packed("), 2);
  EXPECT_EQ(count(m.source, "solder::reduce::store_vector("), 1);
  EXPECT_LE(count(m.source, "__syncthreads"), 3);
  EXPECT_LT(m.kernels[0].shared_bytes, 5000);
  EXPECT_GE(m.kernels[0].blocks, 512);
}

TEST(RegisterPass, StreamLoopsAndSharedReadsKeepTheSharedTiles) {
  // Stream loops (variance), reduces over many points (softmax at its small size: 8 rows of 64) and
  // contractions (rmsnorm_gemm's one-kernel forms at its small size) keep their tiles.
  for (const char* name : {"variance", "softmax", "inertia", "rmsnorm_gemm"}) {
    SCOPED_TRACE(name);
    for (bool small : {true, false}) {
      if (!small && (std::string(name) == "softmax" || std::string(name) == "rmsnorm_gemm")) continue;  // below
      GeneratedModule m = generate_file(example(name), small);
      EXPECT_EQ(m.source.find("the register pass"), std::string::npos);
    }
  }
}

TEST(RegisterPass, NvrtcCompilesTheRegisterKernels) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (const char* name : {"silu_mul", "rmsnorm"})
    for (bool small : {true, false}) {
      SCOPED_TRACE(std::string(name) + (small ? " small" : " default"));
      GeneratedModule m = generate_file(bench_program(name), small);
      runtime::CompileFlags flags;
      flags.use_cache = false;
      runtime::CompiledModule compiled = runtime::compile_cuda(m.source, std::string(name) + ".cu", flags);
      EXPECT_FALSE(compiled.cubins.front().empty());
    }
}

// ---- Several rows per block (seventh session): the row kernels of quant_gemm and rmsnorm_gemm's
// two-kernel plans (SOLDER_PROLOGUE_PLAN=split), a reduce over each of R rows then a map of the row.

using Dims = std::vector<std::pair<std::string, int64_t>>;
const Dims kQ1{{"M", 4096}, {"N", 1536}, {"K", 2560}};
const Dims kQ5{{"M", 4096}, {"N", 7168}, {"K", 2048}};
const Dims kL1{{"T", 2048}, {"HID", 4096}, {"N", 6144}};

// The first kernel's section of a module's source (the includes before it, its own text).
std::string first_kernel(const std::string& source) {
  const std::string marker = "// ---- kernel ";
  const size_t first = source.find(marker);
  const size_t second = first == std::string::npos ? first : source.find(marker, first + 1);
  return second == std::string::npos ? source : source.substr(0, second);
}

TEST(RegisterPass, QuantRowKernelHoldsTwoLongRowsPerBlock) {
  // Rows of at least 1024 elements: 2 per block (kLongRowsPerBlock), 128 threads per row; Q5's 4096
  // rows of 2048 as 2048 blocks of 2 vectors per thread (bench/NOTES.md, quant-lrb3).
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  GeneratedModule m = generate_file(example("quant_gemm"), false, kQ5);
  ASSERT_EQ(m.kernels.size(), 2u);
  EXPECT_EQ(m.kernels[0].blocks, 2048);
  const std::string row = first_kernel(m.source);
  EXPECT_NE(row.find("// the register pass: 2 rows of 2048 elements per block, one row per 128 threads, 2 vectors of 8 per thread"),
            std::string::npos)
      << row;
  // Q7's rows of 768 are short: 8 per block, one per warp, as before.
  const std::string q7 = first_kernel(generate_file(example("quant_gemm"), false, {{"M", 4096}, {"N", 2048}, {"K", 768}}).source);
  EXPECT_NE(q7.find("// the register pass: 8 rows of 768 elements per block, one row per 32 threads"), std::string::npos) << q7;
}

TEST(RegisterPass, QuantRowKernelHoldsEightRowsOnePerWarp) {
  // SOLDER_ROW_TILE=8: the form before quant-lrb3, 8 rows per block, one per warp.
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  EnvScope rows8("SOLDER_ROW_TILE", "8");
  GeneratedModule m = generate_file(example("quant_gemm"), false, kQ5);
  ASSERT_EQ(m.kernels.size(), 2u);
  const std::string row = first_kernel(m.source);
  ASSERT_NE(row.find("// kernel fused_aq"), std::string::npos) << row;
  EXPECT_NE(row.find("// the register pass: 8 rows of 2048 elements per block, one row per 32 threads, 8 vectors of 8 per thread"),
            std::string::npos)
      << row;
  // a is read once, as 16-byte vectors kept as bf16 pairs; aq is held as the e4m3 bytes its store
  // writes (2 words per vector of 8: the map converts each value once, with the store's saturating
  // round to nearest even, which is the IR's rounding to e4m3) and stored as 8-byte vectors.
  EXPECT_EQ(count(row, "solder::reduce::load_packed(a + "), 1);
  EXPECT_NE(row.find("__nv_bfloat162 reg_a_tile[8][4];"), std::string::npos) << row;
  EXPECT_NE(row.find("unsigned int reg_aq_tile[8][2] = {};  // aq_tile, as stored (8-bit, 4 per word)"), std::string::npos) << row;
  EXPECT_EQ(count(row, "solder::reduce::store_packed_fp8(reinterpret_cast<unsigned char*>(aq + "), 1);
  EXPECT_EQ(count(row, "solder::reduce::store_vector(aq + "), 0);
  EXPECT_NE(row.find("copy aq = aq_tile: 8-byte vectors, from registers"), std::string::npos) << row;
  EXPECT_NE(row.find("v_[i_] = (solder::reduce::unpack(reg_a_tile[u_], i_) / scale_tile[(m)]);"), std::string::npos) << row;
  EXPECT_NE(row.find("solder::reduce::pack_fp8<8>(v_, reg_aq_tile[u_], __NV_SATFINITE, __NV_E4M3);"), std::string::npos) << row;
  EXPECT_EQ(row.find("round_f8e4m3"), std::string::npos) << row;  // converted once, not rounded then converted
  // One warp per row: the max combines by shuffles alone; amax and scale (8 floats each) in shared
  // memory, written by the reduce and the per-row map, each followed by a barrier.
  EXPECT_NE(row.find("reduce into amax_tile from registers: per thread, across the warp\n"), std::string::npos) << row;
  EXPECT_EQ(row.find("reduce_scratch[threadIdx.x / 32] = acc_"), std::string::npos) << row;
  EXPECT_EQ(count(row, "__syncthreads"), 3);  // after the fill, the reduce and the per-row map
  EXPECT_LT(m.kernels[0].shared_bytes, 5000);
  EXPECT_EQ(m.kernels[0].blocks, 512);
  EXPECT_EQ(row.find("store_tile("), std::string::npos) << row;  // nothing staged into shared memory
}

TEST(RegisterPass, QuantRowKernelTakesTenVectorsPerThreadAtQ1) {
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  EnvScope rows8("SOLDER_ROW_TILE", "8");  // by default 2 rows of 2560: 3 vectors per thread
  GeneratedModule m = generate_file(example("quant_gemm"), false, kQ1);
  const std::string row = first_kernel(m.source);
  EXPECT_NE(row.find("// the register pass: 8 rows of 2560 elements per block, one row per 32 threads, 10 vectors of 8 per thread"),
            std::string::npos)
      << row;
}

// ---- The row kernel pipelined over row blocks (eleventh session, issue 15; SOLDER_ROW_BLOCKS_PER_SM,
// off by default): N blocks per SM walk the row blocks b, b + gridDim.x, ... and issue the next one's
// loads before this one's reduce, maps and stores.

TEST(RegisterPass, RowKernelsAreOneRowBlockPerBlockByDefault) {
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  GeneratedModule m = generate_file(example("quant_gemm"), false, kQ5);
  EXPECT_EQ(m.kernels[0].blocks, 2048);
  EXPECT_EQ(m.source.find("pipelined"), std::string::npos);
  EXPECT_EQ(m.source.find("next_a_tile"), std::string::npos);
}

// The row kernel lets the GEMM that follows it (a programmatic launch where the GEMM is short: Q8's)
// start on the SMs its blocks leave: one launch_dependents per thread, before the loads, in the row
// kernel only; the GEMM keeps its wait (griddepcontrol.wait) before its first load.
// SOLDER_ROW_LAUNCH_DEPENDENTS=0 leaves it out.
TEST(RegisterPass, RowKernelLetsTheNextKernelLaunchEarly) {
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  const Dims q8{{"M", 4096}, {"N", 768}, {"K", 2048}};
  GeneratedModule m = generate_file(example("quant_gemm"), false, q8);
  ASSERT_EQ(m.kernels.size(), 2u);
  const std::string row = first_kernel(m.source);
  EXPECT_EQ(count(row, "solder::reduce::launch_dependents();"), 1) << row;
  EXPECT_LT(row.find("solder::reduce::launch_dependents();"), row.find("load_packed(a + ")) << row;
  EXPECT_EQ(count(m.source, "launch_dependents();"), 1);  // the GEMM skeleton's own is in its header
  EXPECT_TRUE(m.kernels[1].programmatic);  // the short GEMM (kProgrammaticLaunchMaxUs) takes the early start
  {
    EnvScope off("SOLDER_ROW_LAUNCH_DEPENDENTS", "0");
    EXPECT_EQ(generate_file(example("quant_gemm"), false, q8).source.find("launch_dependents"), std::string::npos);
  }
  // A map without a reduce (SiLU·up) does not.
  EXPECT_EQ(generate_file(bench_program("silu_mul"), false).source.find("launch_dependents"), std::string::npos);
}

TEST(RegisterPass, QuantRowKernelWalksItsRowBlocksWithTheNextLoadsInFlight) {
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  EnvScope rows8("SOLDER_ROW_TILE", "8");  // the row blocks of 8 rows the knob was measured on
  EnvScope one("SOLDER_ROW_BLOCKS_PER_SM", "1");
  GeneratedModule m = generate_file(example("quant_gemm"), false, kQ5);
  ASSERT_EQ(m.kernels.size(), 2u);
  const std::string row = first_kernel(m.source);
  // 512 row blocks of 8 rows on 128 blocks (132 SMs, one block each: 4 row blocks per block).
  EXPECT_EQ(m.kernels[0].blocks, 128);
  EXPECT_NE(row.find("// pipelined: 128 blocks walk the 512 row blocks"), std::string::npos) << row;
  EXPECT_NE(row.find("__launch_bounds__(256) fused_aq("), std::string::npos) << row;
  // a's registers and the next row block's: the first row block's loads before the loop, the next
  // one's at the top of each iteration (guarded by the last), the in-place copy left out.
  EXPECT_NE(row.find("__nv_bfloat162 next_a_tile[8][4];  // a_tile of the next row block"), std::string::npos) << row;
  EXPECT_EQ(count(row, "solder::reduce::load_packed(a + "), 2);
  EXPECT_EQ(count(row, ", next_a_tile[u_]);"), 2);
  EXPECT_NE(row.find("for (long long tile_ = blockIdx.x; tile_ < 512LL; tile_ += gridDim.x) {\n    long long block_linear = tile_;\n"
                     "    const long long m_t = block_linear % 512LL;"),
            std::string::npos)
      << row;
  EXPECT_NE(row.find("reg_a_tile[u_][w_] = next_a_tile[u_][w_];"), std::string::npos) << row;
  EXPECT_NE(row.find("if (tile_ + gridDim.x < 512LL) {  // the next row block's loads\n      long long block_linear = tile_ + gridDim.x;"),
            std::string::npos)
      << row;
  EXPECT_NE(row.find("// copy a_tile = a: loaded before (the next row block's loads)"), std::string::npos) << row;
  // The same statements inside the loop; the map reads the per-row scale after its barrier, so a
  // fourth barrier frees the shared tiles for the next row block.
  EXPECT_NE(row.find("      v_[i_] = (solder::reduce::unpack(reg_a_tile[u_], i_) / scale_tile[(m)]);"), std::string::npos) << row;
  EXPECT_EQ(count(row, "__syncthreads"), 4);
  EXPECT_NE(row.find("  __syncthreads();  // the shared tiles free for the next row block\n  }\n}"), std::string::npos) << row;
  // The GEMM after it is not a row kernel of the pass.
  EXPECT_EQ(m.source.substr(row.size()).find("pipelined"), std::string::npos);
}

TEST(RegisterPass, RowBlocksPerSmComeFromTheKnob) {
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  EnvScope rows8("SOLDER_ROW_TILE", "8");  // Q5's 512 row blocks of 8 rows
  {
    EnvScope two("SOLDER_ROW_BLOCKS_PER_SM", "2");  // 264 blocks: 2 row blocks each, 256 blocks
    GeneratedModule m = generate_file(example("quant_gemm"), false, kQ5);
    const std::string row = first_kernel(m.source);
    EXPECT_EQ(m.kernels[0].blocks, 256);
    EXPECT_NE(row.find("__launch_bounds__(256, 2) fused_aq("), std::string::npos) << row;
  }
  {
    EnvScope four("SOLDER_ROW_BLOCKS_PER_SM", "4");  // 528 blocks for 512 row blocks: nothing to overlap
    GeneratedModule m = generate_file(example("quant_gemm"), false, kQ5);
    EXPECT_EQ(m.kernels[0].blocks, 512);
    EXPECT_EQ(first_kernel(m.source).find("pipelined"), std::string::npos);
  }
  EnvScope one("SOLDER_ROW_BLOCKS_PER_SM", "1");
  // Q3's rows of 8192, 2 per block: 2048 row blocks on 128 blocks.
  GeneratedModule q3 = generate_file(example("quant_gemm"), false, {{"M", 4096}, {"N", 3584}, {"K", 8192}});
  EXPECT_EQ(q3.kernels[0].blocks, 128);
  EXPECT_NE(first_kernel(q3.source).find("// pipelined: 128 blocks walk the 2048 row blocks"), std::string::npos);
  // No more row blocks than SMs (M 128: 128 row blocks of one row): one each, as before.
  GeneratedModule few = generate_file(example("quant_gemm"), false, {{"M", 128}, {"N", 768}, {"K", 2048}});
  EXPECT_EQ(few.kernels[0].blocks, 128);
  EXPECT_EQ(first_kernel(few.source).find("pipelined"), std::string::npos);
}

TEST(RegisterPass, RmsnormRowKernelLoadsTheWeightOnceAndPrefetchesTheRows) {
  // L1: 1024 row blocks of 2 rows on 128 blocks; x loaded a row block early; the weight g (a column
  // tile no grid coordinate moves) once, before the loop.
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  EnvScope one("SOLDER_ROW_BLOCKS_PER_SM", "1");
  GeneratedModule m = generate_file(example("rmsnorm_gemm"), false, kL1);
  const std::string row = first_kernel(m.source);
  EXPECT_EQ(m.kernels[0].blocks, 128);
  EXPECT_NE(row.find("__nv_bfloat162 next_x_tile[4][4];"), std::string::npos) << row;
  EXPECT_EQ(row.find("next_g_tile"), std::string::npos) << row;
  EXPECT_EQ(count(row, "solder::reduce::load_packed(g + (c__), reg_g_tile[u_])"), 1);
  EXPECT_LT(row.find("// g_tile: the same for every row block, loaded once"), row.find("for (long long tile_ = "));
  EXPECT_NE(row.find("// copy g_tile = g: loaded before (once, before the row blocks)"), std::string::npos) << row;
  EXPECT_EQ(count(row, ", next_x_tile[u_]);"), 2);
}

TEST(RegisterPass, RmsnormRowKernelHoldsTheWeightInEveryRow) {
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  GeneratedModule m = generate_file(example("rmsnorm_gemm"), false, kL1);
  ASSERT_EQ(m.kernels.size(), 2u);
  const std::string row = first_kernel(m.source);
  // 2 rows per block (eighth session): at 4, x and g as pairs and xn as floats are 128 tile registers
  // per thread; the tiler halves the rows to the target of 64 (backend/cuda/fusion_params.h).
  EXPECT_NE(row.find("// the register pass: 2 rows of 4096 elements per block, one row per 128 threads, 4 vectors of 8 per thread"),
            std::string::npos)
      << row;
  // g: one row's elements, loaded by every group at its own vectors (a column tile); x packed; xn
  // stored in bf16 as 16-byte vectors.
  EXPECT_NE(row.find("__nv_bfloat162 reg_g_tile[4][4];  // g_tile: one row's elements, the same in every row"), std::string::npos) << row;
  EXPECT_NE(row.find("copy g_tile = g: 16-byte vectors, into registers (in every row)"), std::string::npos) << row;
  EXPECT_NE(row.find("solder::reduce::load_packed(g + (c__), reg_g_tile[u_])"), std::string::npos) << row;
  EXPECT_EQ(count(row, "solder::reduce::store_vector(xn + "), 1);
  // Four warps per row: shuffles, then the row's 4 partials through shared memory.
  EXPECT_NE(row.find("then the row's 4 warps through shared memory"), std::string::npos) << row;
  EXPECT_NE(row.find("acc_ = reduce_scratch[row_ * 4];"), std::string::npos) << row;
  EXPECT_NE(row.find("solder::rsqrt_exact((ms_tile[(t__)] + 9.99999975e-06f))"), std::string::npos) << row;
  EXPECT_LT(m.kernels[0].shared_bytes, 5000);
}

TEST(RegisterPass, RaggedRowsWriteOnlyTheRowsInside) {
  // T = 2045 rows in tiles of 2 (the last block holds one row outside), rows of 2056 = 257 vectors
  // (3 per thread, the third of one thread in 128; at 4 rows, 5 per thread: 80 tile registers).
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  GeneratedModule m = generate_file(example("rmsnorm_gemm"), false, {{"T", 2045}, {"HID", 2056}, {"N", 264}});
  const std::string row = first_kernel(m.source);
  ASSERT_NE(row.find("the register pass: 2 rows of 2056 elements per block, one row per 128 threads, 3 vectors of 8"), std::string::npos) << row;
  EXPECT_NE(row.find("if (j_ >= 257) continue;"), std::string::npos) << row;
  EXPECT_NE(row.find("    if ((((t_t * 2LL) + t__) < 2045LL)) {\n      acc_ = solder::reduce::Sum()(ms_tile[(t__)], acc_);"), std::string::npos)
      << row;
}

TEST(RegisterPass, SoftmaxNormalisationReadsItsRowStatisticsFromSharedMemory) {
  // softmax at its default size: the last kernel (y = exp(x - m) / z over one row's slice) loads m
  // and z per row (generic copies, then a barrier) and keeps x and y in registers.
  GeneratedModule m = generate_file(example("softmax"), false);
  ASSERT_EQ(count(m.source, "// the register pass"), 1) << m.source;
  const size_t at = m.source.find("// the register pass");
  const std::string pass = m.source.substr(at);
  EXPECT_NE(pass.find("m_tile[(t__)] = solder::round_f32("), std::string::npos) << pass;
  EXPECT_NE(pass.find("__syncthreads();  // the per-row values for every thread"), std::string::npos) << pass;
  EXPECT_NE(pass.find("reg_y_tile[u_][i_] = solder::round_f32((expf((reg_x_tile[u_][i_] - m_tile[(t__)])) / z_tile[(t__)]))"), std::string::npos)
      << pass;
  // 4 vectors per thread: the IEEE division per element (kReciprocalMinBatch); the reciprocal form
  // when asked for (z[t] is the same for the block's one row).
  EnvScope reciprocal("SOLDER_ROW_DIVIDE", "reciprocal");
  const std::string forced = generate_file(example("softmax"), false).source;
  EXPECT_NE(forced.find("reg_y_tile[u_][i_] = solder::round_f32(solder::reduce::divide_by_row(expf((reg_x_tile[u_][i_] - m_tile[(t__)])), divisor0_))"),
            std::string::npos)
      << forced;
  EXPECT_EQ(count(forced, "divisor0_ = solder::reduce::row_divisor(z_tile[(t__)]);"), 1) << forced;
}

// ---- Divisions by a row value through one reciprocal per row (twelfth session, issue 15;
// device/solder/reduce/row_divide.h, the IEEE quotient bit for bit: tests/unit/backend/row_divide_exact_test.cpp).

TEST(RegisterPass, RowDivisionsTakeOneReciprocalPerRow) {
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  // Q1's rows of 2560 at 8 rows per block: 10 vectors per thread, the reciprocal form
  // (kReciprocalMinBatch); at the default 2 rows per block, 3 vectors and the IEEE division.
  {
    const std::string two = first_kernel(generate_file(example("quant_gemm"), false, kQ1).source);
    EXPECT_EQ(two.find("divide_by_row"), std::string::npos) << two;
  }
  EnvScope rows8("SOLDER_ROW_TILE", "8");
  GeneratedModule m = generate_file(example("quant_gemm"), false, kQ1);
  const std::string row = first_kernel(m.source);
  // The scale is read and inverted once per thread (each thread's vectors lie in its row), before the
  // map's vector loop, at the row's first element; the map divides through it.
  EXPECT_EQ(count(row, "solder::reduce::RowDivisor divisor0_;  // scale_tile[(m)]: the same for the whole row"), 1) << row;
  EXPECT_EQ(count(row, "    divisor0_ = solder::reduce::row_divisor(scale_tile[(m)]);\n"), 1) << row;
  EXPECT_NE(row.find("    const int vec_ = row_ * 320;\n"), std::string::npos) << row;
  EXPECT_EQ(count(row, "divide_by_row("), 1) << row;
  EXPECT_EQ(row.find("/ scale_tile[(m)])"), std::string::npos) << row;
  // The per-row statement scale = amax / 448 is not a register-tile map: the plain division.
  EXPECT_NE(row.find("(amax_tile[(m)] / static_cast<float>(448LL))"), std::string::npos) << row;
  // Q5's rows of 2048: 8 vectors per thread, the IEEE division per element; SOLDER_ROW_DIVIDE forces
  // either form (A/B runs).
  const std::string q5 = first_kernel(generate_file(example("quant_gemm"), false, kQ5).source);
  EXPECT_EQ(q5.find("divide_by_row"), std::string::npos) << q5;
  {
    EnvScope reciprocal("SOLDER_ROW_DIVIDE", "reciprocal");
    EXPECT_EQ(count(first_kernel(generate_file(example("quant_gemm"), false, kQ5).source), "divide_by_row("), 1);
  }
  EnvScope ieee("SOLDER_ROW_DIVIDE", "ieee");
  const std::string plain = first_kernel(generate_file(example("quant_gemm"), false, kQ1).source);
  EXPECT_EQ(plain.find("divide_by_row"), std::string::npos) << plain;
  EXPECT_NE(plain.find("v_[i_] = (solder::reduce::unpack(reg_a_tile[u_], i_) / scale_tile[(m)]);"), std::string::npos) << plain;
}


TEST(RegisterPass, RowKernelPlansVerifyOnTheExecutor) {
  // The Kernel IR that the pass compiles, at sizes where it takes the row kernel, against the float64
  // reference on the CPU executor (a row of 1040 = 130 vectors: the last thread group part-used).
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  for (auto& [name, dims] : std::vector<std::pair<std::string, Dims>>{{"quant_gemm", {{"M", 64}, {"N", 192}, {"K", 1024}}},
                                                                    {"rmsnorm_gemm", {{"T", 64}, {"HID", 1040}, {"N", 192}}}}) {
    SCOPED_TRACE(name + " " + std::to_string(dims[2].second));
    auto program = std::make_shared<Program>(parse_program_file(example(name)));
    BoundProgram bound = bind_program(program, SizeChoice{false, dims});
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    GeneratedModule m = generate_cuda(compiled.kernels);
    EXPECT_EQ(count(m.source, "// the register pass"), 1) << m.source;
    TensorSet inputs = make_inputs(bound, 7);
    ExecutionResult result = execute_kernel_program(compiled.kernels, inputs);
    TensorSet reference = run_reference(bound, inputs);
    for (const TensorInfo* out : bound.outputs()) {
      OutputCheck check = compare_output(result.outputs.at(out->name), reference.at(out->name), tolerance_for(bound));
      EXPECT_TRUE(check.ok) << out->name << ": " << check.reason;
    }
  }
}

// Evoformer's two LayerNorms and its gate, as the torch backend writes them (bench/NOTES.md, eighth
// session): rows of 256 / 128 over two grid dims, and a gate written [S, R, H, C] from [S, H, R, C].
constexpr const char* kLayerNorm = R"(program layer_norm
dim S = 128, R = 256, C = 256
in x[S, R, C] : bf16
in w[C] : bf16
in b[C] : bf16
mu[s : S, r : R] : f32 = sum(c : C) (x[s, r, c]) / 256
var[s : S, r : R] : f32 = sum(c : C) (x[s, r, c] - mu[s, r]) * (x[s, r, c] - mu[s, r])
out y[s : S, r : R, c : C] : bf16 = ((((x[s, r, c] - mu[s, r]) * rsqrt(((var[s, r]) / 256 + 1e-05))) * w[c]) + b[c])
)";
constexpr const char* kGate = R"(program gate
dim S = 128, H = 8, R = 256, C = 32, SR = 32768, HC = 256
in a[S, H, R, C] : bf16
in g[SR, HC] : bf16
out y[s : S, r : R, h : H, c : C] : bf16 = (a[s, h, r, c] * sigmoid(g[s * 256 + r, h * 32 + c]))
)";

CompileResult compile_text(const char* text, const Dims& dims, BoundProgram& bound) {
  auto program = std::make_shared<Program>(parse_program(text, "test.sol"));
  bound = bind_program(program, SizeChoice{false, dims});
  return compile_program(bound, CompileOptions::for_gpu());
}

void expect_verified(const CompileResult& compiled, const BoundProgram& bound) {
  TensorSet inputs = make_inputs(bound, 11);
  ExecutionResult result = execute_kernel_program(compiled.kernels, inputs);
  TensorSet reference = run_reference(bound, inputs);
  for (const TensorInfo* out : bound.outputs()) {
    OutputCheck check = compare_output(result.outputs.at(out->name), reference.at(out->name), tolerance_for(bound));
    EXPECT_TRUE(check.ok) << out->name << ": " << check.reason;
  }
}

constexpr const char* kDivisions = R"(program divisions
dim M = 64, K = 1024
in a[M, K] : f32
in b[M, K] : f32
in c[M] : f32
s[m] = sum(k) a[m, k]
out y[m, k] : f32 = a[m, k] / s[m] + a[m, k] / b[m, k] + b[m, k] / c[m] + a[m, k] / (s[m] * 2)
)";

TEST(RegisterPass, RowTileKnobGivesFewerRowsPerBlock) {
  // SOLDER_ROW_TILE=N (A/B runs): at most N rows per row-kernel block, whatever the row's length, so
  // Q8's 4096 rows of 2048 run as 2048 blocks of 2 rows (the default), 512 of 8 (N = 8) or 4096 of one
  // (N = 1); what each row computes is unchanged.
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  const Dims q8{{"M", 4096}, {"N", 768}, {"K", 2048}};
  {
    EnvScope rows("SOLDER_ROW_TILE", "4");
    const std::string row = first_kernel(generate_file(example("quant_gemm"), false, q8).source);
    EXPECT_NE(row.find("// the register pass: 4 rows of 2048 elements per block, one row per 64 threads, 4 vectors of 8 per thread"),
              std::string::npos) << row;
    EXPECT_NE(row.find("(1024 blocks)"), std::string::npos) << row;
    // On the executor: the same results as the float64 reference.
    auto program = std::make_shared<Program>(parse_program_file(example("quant_gemm")));
    BoundProgram bound = bind_program(program, SizeChoice{false, {{"M", 64}, {"N", 192}, {"K", 1024}}});
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    TensorSet inputs = make_inputs(bound, 11);
    ExecutionResult result = execute_kernel_program(compiled.kernels, inputs);
    TensorSet reference = run_reference(bound, inputs);
    for (const TensorInfo* out : bound.outputs()) {
      OutputCheck check = compare_output(result.outputs.at(out->name), reference.at(out->name), tolerance_for(bound));
      EXPECT_TRUE(check.ok) << out->name << ": " << check.reason;
    }
  }
  {
    EnvScope rows("SOLDER_ROW_TILE", "8");  // above the long rows' default of 2
    const std::string row = first_kernel(generate_file(example("quant_gemm"), false, q8).source);
    EXPECT_NE(row.find("// the register pass: 8 rows of 2048 elements per block"), std::string::npos) << row;
  }
  for (const char* ignored : {"3", "16", "0", "x"}) {  // not a power of two in [1, 8]: the default, 2 long rows
    EnvScope rows("SOLDER_ROW_TILE", ignored);
    const std::string row = first_kernel(generate_file(example("quant_gemm"), false, q8).source);
    EXPECT_NE(row.find("// the register pass: 2 rows of 2048 elements per block"), std::string::npos) << ignored;
  }
}

TEST(RegisterPass, OnlyDivisorsOfTheRowTakeTheReciprocal) {
  // s[m], c[m] (staged per row) and s[m] * 2 are the same along the row; b[m, k] moves along it: that
  // one keeps the IEEE division per element. (4 vectors per thread: the reciprocal form asked for.)
  EnvScope reciprocal("SOLDER_ROW_DIVIDE", "reciprocal");
  BoundProgram bound;
  CompileResult compiled = compile_text(kDivisions, {}, bound);
  GeneratedModule m = generate_cuda(compiled.kernels);
  const size_t at = m.source.find("// the register pass");
  ASSERT_NE(at, std::string::npos) << m.source;
  const std::string pass = m.source.substr(at);
  EXPECT_EQ(count(pass, "= solder::reduce::row_divisor("), 3) << pass;
  EXPECT_EQ(count(pass, "divide_by_row("), 3) << pass;
  EXPECT_EQ(count(pass, "(reg_a_tile[u_][i_] / reg_b_tile[u_][i_])"), 1) << pass;
  EXPECT_EQ(count(pass, "divisor2_ = solder::reduce::row_divisor((s_tile[(m)] * static_cast<float>(2LL)));"), 1) << pass;
  expect_verified(compiled, bound);
}

TEST(RegisterPass, LayerNormOverTwoGridDimsHoldsEightRowsOnePerWarp) {
  // Before: 64 rows of 256 per block through 137 KB of shared memory (512 blocks, one per SM at a
  // time); the tiler now gives a row-statistics group at most 8 rows per block (group_plan.cpp).
  BoundProgram bound;
  CompileResult compiled = compile_text(kLayerNorm, {}, bound);
  GeneratedModule m = generate_cuda(compiled.kernels);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_NE(m.source.find("// the register pass: 8 rows of 256 elements per block, one row per 32 threads, 1 vectors of 8 per thread"),
            std::string::npos) << m.source;
  EXPECT_EQ(m.kernels[0].blocks, 128 * 256 / 8);
  EXPECT_LT(m.kernels[0].shared_bytes, 5000);
  // Rows of 128 (the second LayerNorm's [R, R, 128]): 8 rows too, half a vector batch per lane pair.
  BoundProgram bound2;
  CompileResult c2 = compile_text(kLayerNorm, {{"S", 256}, {"C", 128}}, bound2);
  GeneratedModule m2 = generate_cuda(c2.kernels);
  EXPECT_NE(m2.source.find("// the register pass: 8 rows of 128 elements per block"), std::string::npos) << m2.source;
  // The plan the pass compiles, smaller, on the executor against the float64 reference.
  BoundProgram small;
  CompileResult c3 = compile_text(kLayerNorm, {{"S", 2}, {"R", 1024}}, small);
  EXPECT_NE(generate_cuda(c3.kernels).source.find("// the register pass: 4 rows of 256"), std::string::npos);  // 512 blocks
  expect_verified(c3, small);
}

TEST(RegisterPass, TransposingGateStagesABoxOfItsInputPerBlock) {
  // Before: one block per 32 elements (the short whole inner dim C alone), 262144 blocks; the tiler
  // now widens the grid tiles out from C (H whole, 16 of R): 4096 elements a block, the [H, 16, C]
  // box of a staged with 16-byte loads, the result stored as whole [16, H, C] rows.
  BoundProgram bound;
  CompileResult compiled = compile_text(kGate, {}, bound);
  GeneratedModule m = generate_cuda(compiled.kernels);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_EQ(m.kernels[0].blocks, 128 * 16);
  EXPECT_NE(m.source.find("shared bf16 [1, 8, 16, 32]"), std::string::npos) << m.source;
  EXPECT_EQ(count(m.source, "solder::reduce::store_vector("), 1);
  // Smaller (the grid keeps two blocks per SM: 8 of R per block), on the executor.
  BoundProgram small;
  CompileResult c2 = compile_text(kGate, {{"S", 16}, {"SR", 4096}}, small);
  GeneratedModule m2 = generate_cuda(c2.kernels);
  EXPECT_EQ(m2.kernels[0].blocks, 16 * 32) << m2.source;
  expect_verified(c2, small);
}

TEST(RegisterPass, NvrtcCompilesTheRowKernels) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  EnvScope split("SOLDER_PROLOGUE_PLAN", "split");
  for (const char* per_sm : {"1", "2", "0"})
  // (Q1: the reciprocal row division, kReciprocalMinBatch.)
  for (auto& [name, dims] : std::vector<std::pair<std::string, Dims>>{{"quant_gemm", kQ5}, {"quant_gemm", kQ1}, {"rmsnorm_gemm", kL1},
                                                                    {"rmsnorm_gemm", {{"T", 2045}, {"HID", 2056}, {"N", 264}}}}) {
    SCOPED_TRACE(name + " " + std::to_string(dims[0].second) + " blocks per SM " + per_sm);
    EnvScope blocks("SOLDER_ROW_BLOCKS_PER_SM", per_sm);
    GeneratedModule m = generate_file(example(name), false, dims);
    const std::string row = first_kernel(m.source);
    ASSERT_NE(row.find("the register pass"), std::string::npos) << row;
    runtime::CompileFlags flags;
    flags.use_cache = false;
    runtime::CompiledModule compiled = runtime::compile_cuda(row, name + "_rows.cu", flags);
    EXPECT_FALSE(compiled.cubins.front().empty());
  }
}

// ---- The fusion tiler knows the register pass (eighth session, issue 15): the long rows that were a
// statistics kernel and a map kernel (their tiles as shared memory: 513 KB at Q3) are one row kernel.

const Dims kQ3{{"M", 4096}, {"N", 3584}, {"K", 8192}};
const Dims kQ10{{"M", 4096}, {"N", 1536}, {"K", 4096}};
const Dims kL2{{"T", 4096}, {"HID", 4096}, {"N", 14336}};

CompileResult compile_file(const std::string& file, const Dims& dims) {
  auto program = std::make_shared<Program>(parse_program_file(file));
  BoundProgram bound = bind_program(program, SizeChoice{false, dims});
  return compile_program(bound, CompileOptions::for_gpu());
}

TEST(RegisterPass, LongRowsAreOneRowKernelAndTheGemm) {
  struct Case {
    std::string name;
    Dims dims;
    std::string pass;  // the row kernel's register pass comment
  };
  for (const Case& c : std::vector<Case>{
           {"quant_gemm", kQ3, "2 rows of 8192 elements per block, one row per 128 threads, 8 vectors of 8 per thread"},
           {"quant_gemm", kQ10, "2 rows of 4096 elements per block, one row per 128 threads, 4 vectors of 8 per thread"},
           {"quant_gemm", {{"M", 4096}, {"N", 8192}, {"K", 3584}}, "2 rows of 3584 elements per block, one row per 128 threads, 4 vectors of 8 per thread"},
           {"quant_gemm", {{"M", 4096}, {"N", 2048}, {"K", 7168}}, "2 rows of 7168 elements per block, one row per 128 threads, 7 vectors of 8 per thread"},
           {"rmsnorm_gemm", kL2, "2 rows of 4096 elements per block, one row per 128 threads, 4 vectors of 8 per thread"}}) {
    SCOPED_TRACE(c.name + " " + std::to_string(c.dims[2].second));
    CompileResult compiled = compile_file(example(c.name), c.dims);
    ASSERT_EQ(compiled.kernels.kernels.size(), 2u) << compiled.report;
    GeneratedModule m = generate_cuda(compiled.kernels);
    ASSERT_EQ(m.kernels.size(), 2u);
    const std::string row = first_kernel(m.source);
    EXPECT_NE(row.find("// the register pass: " + c.pass), std::string::npos) << row;
    EXPECT_LT(m.kernels[0].shared_bytes, 5000);
    EXPECT_TRUE(m.kernels[1].gemm.has_value());
    // The statistics, the per-row value and the operand in the one kernel; the report says why.
    const std::vector<std::string>& defs = compiled.kernels.kernels[0].definitions;
    EXPECT_EQ(defs.size(), c.name == "quant_gemm" ? 3u : 2u);
  }
  // From 8 rows per block (SOLDER_ROW_TILE=8), the tiler halves the rows until they fit the register
  // pass, and the report says why.
  EnvScope rows8("SOLDER_ROW_TILE", "8");
  CompileResult q3 = compile_file(example("quant_gemm"), kQ3);
  EXPECT_NE(q3.report.find("rows in registers at "), std::string::npos) << q3.report;
  EXPECT_NE(q3.report.find("over the 192 KB budget"), std::string::npos) << q3.report;
  EXPECT_NE(first_kernel(generate_cuda(q3.kernels).source).find("// the register pass: 2 rows of 8192 elements per block"), std::string::npos);
}

TEST(RegisterPass, RowKernelsAimAtSixtyFourTileRegistersPerThread) {
  // From 8 rows per block (SOLDER_ROW_TILE=8; long rows start at 2 by default): Q5's rows stay 8 per
  // block (a as pairs, aq packed: 32 + 16); Q1's too (40 + 20). L1's halve to 2.
  EnvScope rows8("SOLDER_ROW_TILE", "8");
  struct Case {
    std::string name;
    Dims dims;
    int rows;
  };
  for (const Case& c : std::vector<Case>{{"quant_gemm", kQ5, 8}, {"quant_gemm", kQ1, 8}, {"rmsnorm_gemm", kL1, 2}}) {
    SCOPED_TRACE(c.name + " " + std::to_string(c.dims[2].second));
    GeneratedModule m = generate_file(example(c.name), false, c.dims);
    const std::string row = first_kernel(m.source);
    EXPECT_NE(row.find("// the register pass: " + std::to_string(c.rows) + " rows of "), std::string::npos) << row;
  }
}

TEST(RegisterPass, LongRowPlansVerifyOnTheExecutor) {
  // The Kernel IR of the long-row plans (the row kernel at 2 or 4 rows per block) against the float64
  // reference on the CPU executor: the row kernels alone at Q3's and L2's rows (M 4096 is what makes
  // the tiler take 8 rows first) and at ragged rows (M 4093, K 7176: 897 vectors per row).
  struct Case {
    std::string file;
    Dims dims;
  };
  for (const Case& c : std::vector<Case>{{bench_program("quant_rows"), {{"M", 4096}, {"K", 8192}}},
                                          {bench_program("quant_rows"), {{"M", 4093}, {"K", 7176}}},
                                          {bench_program("rmsnorm_rows"), {{"T", 4096}, {"HID", 4096}}}}) {
    SCOPED_TRACE(c.file + " " + std::to_string(c.dims[1].second));
    auto program = std::make_shared<Program>(parse_program_file(c.file));
    BoundProgram bound = bind_program(program, SizeChoice{false, c.dims});
    CompileResult compiled = compile_program(bound, CompileOptions::for_gpu());
    GeneratedModule m = generate_cuda(compiled.kernels);
    EXPECT_EQ(count(m.source, "// the register pass"), 1) << compiled.report;
    expect_verified(compiled, bound);
  }
}

TEST(RegisterPass, NvrtcCompilesTheLongRowKernels) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (auto& [name, dims] : std::vector<std::pair<std::string, Dims>>{{"quant_gemm", kQ3}, {"quant_gemm", kQ10}, {"rmsnorm_gemm", kL2}}) {
    SCOPED_TRACE(name + " " + std::to_string(dims[2].second));
    GeneratedModule m = generate_file(example(name), false, dims);
    const std::string row = first_kernel(m.source);
    ASSERT_NE(row.find("the register pass"), std::string::npos) << row;
    runtime::CompileFlags flags;
    flags.use_cache = false;
    runtime::CompiledModule compiled = runtime::compile_cuda(row, name + "_long_rows.cu", flags);
    EXPECT_FALSE(compiled.cubins.front().empty());
  }
}

TEST(RegisterPass, NvrtcCompilesTheEightBitVectorStores) {
  // store_vector for e4m3 / e5m2 at 4, 8 and 16 elements, and the packed 16-bit loads.
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const std::string source = R"(#include <solder/runtime.cuh>
#include <solder/reduce/vector.cuh>
extern "C" __global__ void stores(const __nv_bfloat16* a, const __half* h, __nv_fp8_e4m3* e4, __nv_fp8_e5m2* e5) {
  __nv_bfloat162 pa[4];
  __half2 ph[4];
  solder::reduce::load_packed(a + 8 * threadIdx.x, pa);
  solder::reduce::load_packed(h + 8 * threadIdx.x, ph);
  float v[16];
  for (int i = 0; i < 16; ++i) v[i] = solder::reduce::unpack(pa, i % 8) + solder::reduce::unpack(ph, i % 8);
  float v4[4] = {v[0], v[1], v[2], v[3]}, v8[8] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  solder::reduce::store_vector(e4 + 16 * threadIdx.x, v);
  solder::reduce::store_vector(e4 + 8 * threadIdx.x, v8);
  solder::reduce::store_vector(e5 + 4 * threadIdx.x, v4);
  solder::reduce::store_vector(e5 + 16 * threadIdx.x, v);
  unsigned int w[4];  // the register pass's packed 8-bit tiles
  solder::reduce::pack_fp8<16>(v, w, __NV_SATFINITE, __NV_E4M3);
  solder::reduce::store_packed_fp8<4>(reinterpret_cast<unsigned char*>(e4 + 32 * threadIdx.x), w);
  solder::reduce::store_packed_fp8_element<4>(reinterpret_cast<unsigned char*>(e5 + 3), w, threadIdx.x % 16);
}
)";
  runtime::CompileFlags flags;
  flags.use_cache = false;
  runtime::CompiledModule compiled = runtime::compile_cuda(source, "fp8_stores.cu", flags);
  EXPECT_FALSE(compiled.cubins.front().empty());
}

}  // namespace
}  // namespace solder
