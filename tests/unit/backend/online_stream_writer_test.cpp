// The online-state stream (contract/decode_attention_fit.h, backend/cuda/online_stream_writer.h): which
// fused kernels it takes (llama_decode's split-KV attention), what it reads them as, what it refuses and
// why, and the generated kernel's shape. The plan's result on the CPU executor is checked by
// CompileSteps.LlamaDecodeSplitKvAttentionVerifies and Fuse.DecodeAttentionSplitsKvOneRowPerBlock.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/online_stream_writer.h"
#include "contract/decode_attention_fit.h"
#include "driver/compile.h"
#include "ir/printer.h"
#include "support/refusal.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

using testing::ScopedEnv;

KernelProgram gpu_kernels(const std::string& name, bool small, std::vector<std::pair<std::string, int64_t>> dims = {}) {
  auto source = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/examples/" + name + ".sol"));
  return compile_program(bind_program(source, SizeChoice{small, std::move(dims)}), CompileOptions::for_gpu()).kernels;
}

const Kernel* kernel_computing(const KernelProgram& program, const std::string& definition) {
  for (auto& k : program.kernels)
    for (auto& d : k.definitions)
      if (d == definition) return &k;
  return nullptr;
}

TEST(OnlineStream, TakesLlamaDecodeAttention) {
  // KV 1024: s, m, z, a in one kernel of one head per block, 8 segments in a cluster.
  KernelProgram program = gpu_kernels("llama_decode", false);
  const Kernel* attention = kernel_computing(program, "a");
  ASSERT_NE(attention, nullptr);
  DecodeAttentionFit fit = fit_decode_attention(*attention, program);
  ASSERT_TRUE(fit.problem.has_value()) << fit.refusal;
  const DecodeAttentionProblem& p = *fit.problem;
  EXPECT_TRUE(fit.recognized);
  EXPECT_EQ(p.segments, 8);
  EXPECT_EQ(p.columns, 128);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].extent, 32);
  EXPECT_GE(p.key_tiles * p.key_tile, 1025);
  EXPECT_LT((p.key_tiles - 1) * p.key_tile, 1025);
  EXPECT_EQ(p.type, MmaType::f16);
  EXPECT_EQ(p.dst.name, "a");
  // K and V: the cache, or the new token's row at the ragged last key
  ASSERT_TRUE(p.key.cond.defined());
  EXPECT_EQ(p.key.when_true.as<LoadNode>()->tensor, "k_cache");
  EXPECT_EQ(p.key.when_false.as<LoadNode>()->tensor, "k_new");
  ASSERT_TRUE(p.value.cond.defined());
  EXPECT_EQ(p.value.when_true.as<LoadNode>()->tensor, "v_cache");
  EXPECT_EQ(p.value.when_false.as<LoadNode>()->tensor, "v_new");
  EXPECT_EQ(print_expr(p.query), "q[0, h_t + 0, column_]");
  EXPECT_EQ(print_expr(p.score_scale), "rsqrt(D)");
  ASSERT_TRUE(p.key_where.defined());
  EXPECT_NE(print_expr(p.key_where).find("< 1025"), std::string::npos) << print_expr(p.key_where);
}

TEST(OnlineStream, GeneratedKernelShape) {
  KernelProgram program = gpu_kernels("llama_decode", false, {{"KV", 16384}});
  const Kernel* attention = kernel_computing(program, "a");
  ASSERT_NE(attention, nullptr);
  std::string why;
  auto k = write_online_stream_kernel(program, *attention, &why);
  ASSERT_TRUE(k.has_value()) << why;
  EXPECT_EQ(k->info.blocks, 32 * 8);
  EXPECT_EQ(k->info.cluster, 8);
  EXPECT_EQ(k->info.threads, 128) << "4 warps: every cluster of 8 in one wave";
  EXPECT_EQ(k->info.shared_bytes, (4 * 128 + 128 + 2 * 4 + 2) * 4) << "each warp's O, the segment's O, m and z";
  const std::string& s = k->source;
  EXPECT_NE(s.find("uint4 k_raw_[U_], v_raw_[U_];"), std::string::npos) << "K and V go straight into registers";
  EXPECT_NE(s.find("__ldg("), std::string::npos);
  EXPECT_NE(s.find("LK_ = 16, KW_ = 2"), std::string::npos) << "D 128: 16 lanes per key, 2 keys per warp load";
  EXPECT_NE(s.find("solder::cluster::ptx::map_to_rank(&block_o_[e_], r_)"), std::string::npos) << "the DSM merge";
  EXPECT_EQ(s.find("__shared__ __align__(16) float k_"), std::string::npos) << "no staging of K";
  // the whole module names the writer in the schedule
  GeneratedModule m = generate_cuda(program);
  int online = 0;
  for (auto& c : m.contractions) online += c.skeleton == kOnlineStreamSkeleton;
  EXPECT_EQ(online, 2) << "the scores and the output";
}

TEST(OnlineStream, SmallSizeTakesFewerColumns) {
  // llama_decode --small keeps its 33 keys resident (no stream loop): the generic writer runs it.
  {
    KernelProgram program = gpu_kernels("llama_decode", true);
    const Kernel* attention = kernel_computing(program, "a");
    ASSERT_NE(attention, nullptr);
    DecodeAttentionFit fit = fit_decode_attention(*attention, program);
    EXPECT_FALSE(fit.problem.has_value());
    EXPECT_EQ(fit.refusal, "no stream loop");
  }
  // At KV 300 it streams: D 16 is 2 lanes per key, 16 keys per warp load; 4 heads x 5 segments, a cluster of 5.
  KernelProgram program = gpu_kernels("llama_decode", true, {{"KV", 300}});
  const Kernel* attention = kernel_computing(program, "a");
  ASSERT_NE(attention, nullptr);
  std::string why;
  auto k = write_online_stream_kernel(program, *attention, &why);
  ASSERT_TRUE(k.has_value()) << why;
  EXPECT_NE(k->source.find("LK_ = 2, KW_ = 16"), std::string::npos);
  EXPECT_EQ(k->info.cluster, 5);
  EXPECT_EQ(k->info.blocks, 4 * 5);
}

TEST(OnlineStream, WarpsKnob) {
  // 4 warps by default: 128 threads, 4 blocks per SM at 128 registers; SOLDER_ONLINE_STREAM_WARPS=8 gives
  // 256 threads, 2 blocks per SM, each warp half the keys.
  KernelProgram program = gpu_kernels("llama_decode", false, {{"KV", 16384}});
  const Kernel* attention = kernel_computing(program, "a");
  ASSERT_NE(attention, nullptr);
  {
    ScopedEnv eight("SOLDER_ONLINE_STREAM_WARPS", "8");
    auto k = write_online_stream_kernel(program, *attention, nullptr);
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(k->info.threads, 256);
    EXPECT_NE(k->source.find("__launch_bounds__(256, 2)"), std::string::npos);
    EXPECT_NE(k->source.find("W_ = 8;"), std::string::npos);
  }
  {
    ScopedEnv bad("SOLDER_ONLINE_STREAM_WARPS", "5");
    EXPECT_THROW(write_online_stream_kernel(program, *attention, nullptr), Refusal);
  }
  auto k = write_online_stream_kernel(program, *attention, nullptr);
  ASSERT_TRUE(k.has_value());
  EXPECT_NE(k->source.find("__launch_bounds__(128, 4)"), std::string::npos) << "4 warps by default";
  EXPECT_NE(k->source.find("W_ = 4;"), std::string::npos);
}

TEST(OnlineStream, PrefetchKnobLoadsOneStepAhead) {
  // By default each step loads all of its keys, then computes. SOLDER_ONLINE_STREAM_PREFETCH=1 loads
  // each slot's K and V for the next step as soon as this step has used them (the first step's before the
  // loop): the A/B of decode16k, not faster on the H200.
  KernelProgram program = gpu_kernels("llama_decode", false, {{"KV", 16384}});
  const Kernel* attention = kernel_computing(program, "a");
  ASSERT_NE(attention, nullptr);
  auto whole = write_online_stream_kernel(program, *attention, nullptr);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->source.find("next_"), std::string::npos);
  EXPECT_NE(whole->source.find("const int key_ = base_ + u_ * KW_ + slot_;"), std::string::npos) << "each step loads its own keys";

  ScopedEnv on("SOLDER_ONLINE_STREAM_PREFETCH", "1");
  auto ahead = write_online_stream_kernel(program, *attention, nullptr);
  ASSERT_TRUE(ahead.has_value());
  const std::string& s = ahead->source;
  const size_t first = s.find("// the first step's keys"), loop = s.find("for (int base_ = key0_;");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(loop, std::string::npos);
  EXPECT_LT(first, loop) << "the first step's loads come before the loop";
  const size_t next_k = s.find("// this slot's K for the next step"), max = s.find("float m_new_ = m_;");
  const size_t next_v = s.find("// this slot's V for the next step"), pv = s.find("o_[2 * j_] = fmaf(p_, v2_.x");
  ASSERT_NE(next_k, std::string::npos);
  ASSERT_NE(next_v, std::string::npos);
  EXPECT_LT(next_k, max) << "K for the next step is issued in the dot products' loop";
  EXPECT_GT(next_v, pv) << "V for the next step is issued after its P·V";
  EXPECT_NE(s.find("const int key_ = next_ + u_ * KW_ + slot_;"), std::string::npos);
  EXPECT_EQ(s.find("const int key_ = base_ + u_ * KW_ + slot_;"), std::string::npos);
  EXPECT_EQ(ahead->info.shared_bytes, whole->info.shared_bytes) << "no staging: the same shared memory";
}

TEST(OnlineStream, StrideKnobLoadsFullStepsThroughPointers) {
  // SOLDER_ONLINE_STREAM_STRIDE=1: the keys before the new token's (where and selects true) have K and V
  // at 8 KB per key (H 32 x D 128 halves: 512 vectors of 16 bytes); a full step of them loads through
  // per-warp pointers advanced by that stride, the other steps as before. On by default; 0 turns it off.
  KernelProgram program = gpu_kernels("llama_decode", false, {{"KV", 16384}});
  const Kernel* attention = kernel_computing(program, "a");
  ASSERT_NE(attention, nullptr);
  std::optional<OnlineStreamKernel> plain;
  {
    ScopedEnv off("SOLDER_ONLINE_STREAM_STRIDE", "0");
    plain = write_online_stream_kernel(program, *attention, nullptr);
  }
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->source.find("STRIDED_"), std::string::npos);
  {
    auto k = write_online_stream_kernel(program, *attention, nullptr);
    ASSERT_TRUE(k.has_value());
    const std::string& s = k->source;
    EXPECT_NE(s.find("constexpr int STRIDED_ = 16384;"), std::string::npos) << "the cache's keys; the new token's is the select's other side";
    EXPECT_NE(s.find("constexpr long long KSTRIDE_ = 512LL, VSTRIDE_ = 512LL;"), std::string::npos);
    EXPECT_NE(s.find("if (base_ + KW_ * U_ <= key1_ && base_ + KW_ * U_ <= STRIDED_) {"), std::string::npos);
    EXPECT_NE(s.find("k_raw_[u_] = __ldg(kp_ + u_ * KW_ * KSTRIDE_);"), std::string::npos);
    EXPECT_NE(s.find("kp_ += KW_ * U_ * KSTRIDE_"), std::string::npos) << "the pointers advance with the steps";
    EXPECT_NE(s.find("const int key_ = base_ + u_ * KW_ + slot_;"), std::string::npos) << "the other steps compute each key's address";
    EXPECT_EQ(k->info.shared_bytes, plain->info.shared_bytes);
  }
  {
    // the prefetch keeps every load's own address
    ScopedEnv ahead("SOLDER_ONLINE_STREAM_PREFETCH", "1");
    auto k = write_online_stream_kernel(program, *attention, nullptr);
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(k->source.find("STRIDED_"), std::string::npos);
  }
  // --small at KV 300: D 16, H 4: a key is 64 halves, 8 vectors; the 300 cache keys are strided
  KernelProgram small = gpu_kernels("llama_decode", true, {{"KV", 300}});
  const Kernel* small_attention = kernel_computing(small, "a");
  ASSERT_NE(small_attention, nullptr);
  auto k = write_online_stream_kernel(small, *small_attention, nullptr);
  ASSERT_TRUE(k.has_value());
  EXPECT_NE(k->source.find("constexpr int STRIDED_ = 300;"), std::string::npos);
  EXPECT_NE(k->source.find("KSTRIDE_ = 8LL, VSTRIDE_ = 8LL;"), std::string::npos);
}

TEST(OnlineStream, KnobTurnsItOff) {
  ScopedEnv off("SOLDER_ONLINE_STREAM", "0");
  KernelProgram program = gpu_kernels("llama_decode", false);
  const Kernel* attention = kernel_computing(program, "a");
  ASSERT_NE(attention, nullptr);
  DecodeAttentionFit fit = fit_decode_attention(*attention, program);
  EXPECT_FALSE(fit.problem.has_value());
  EXPECT_TRUE(fit.recognized);
  EXPECT_EQ(fit.refusal, "off by SOLDER_ONLINE_STREAM=0");
  GeneratedModule m = generate_cuda(program);
  EXPECT_NE(m.source.find("// online-state stream not used for fused_a: off by SOLDER_ONLINE_STREAM=0"), std::string::npos);
}

TEST(OnlineStream, RefusesKernelsWithoutTheShape) {
  // The previous plan (SOLDER_SPLIT_KV=0): the scores, m/z and the output in separate kernels; none is
  // the attention's one stream with two contracts. The GEMV kernels have no stream loop.
  ScopedEnv off("SOLDER_SPLIT_KV", "0");
  KernelProgram program = gpu_kernels("llama_decode", false);
  for (auto& k : program.kernels) {
    DecodeAttentionFit fit = fit_decode_attention(k, program);
    EXPECT_FALSE(fit.problem.has_value()) << k.name;
    EXPECT_FALSE(fit.refusal.empty()) << k.name;
  }
}

TEST(OnlineStream, LeavesOtherDecodeExamplesAlone) {
  // mla_decode (heads share one latent KV) and paged_decode (GQA, K at h // G) keep their plans.
  for (const char* name : {"mla_decode", "paged_decode"}) {
    KernelProgram program = gpu_kernels(name, false);
    for (auto& k : program.kernels) EXPECT_FALSE(fit_decode_attention(k, program).problem.has_value()) << name << " " << k.name;
  }
}

}  // namespace
}  // namespace solder
