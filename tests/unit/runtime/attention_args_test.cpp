// runtime::AttentionLaunchArgs and pack_staged_bias_score: the attention skeleton's parameters as the
// CUDA backend and the C++ API both pack them (runtime/attention_args.h), and the backend's
// AttentionSkeletonLaunch → AttentionShape mapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "runtime/attention_args.h"

namespace solder::runtime {
namespace {

TensorMapBytes filled(unsigned long long first) {
  TensorMapBytes m;
  for (int i = 0; i < 16; ++i) m.words[i] = first + static_cast<unsigned long long>(i);
  return m;
}

bool same(const TensorMapBytes& a, const TensorMapBytes& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::vector<DevicePtr> pointers(size_t n) {
  std::vector<DevicePtr> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = 0x7f0000000000ull + 256 * i;
  return p;
}

TEST(AttentionArgs, ShapeHasTheDeviceLayout) {
  // solder::attention::AttentionShape: eleven ints in this order (device/solder/attention/config.cuh).
  AttentionShapeArg s{2, 32, 8, 2048, 2047, 3, 1, 4, 2, 5, 3};
  int words[11];
  std::memcpy(words, &s, sizeof words);
  const int expected[11] = {2, 32, 8, 2048, 2047, 3, 1, 4, 2, 5, 3};
  for (int i = 0; i < 11; ++i) EXPECT_EQ(words[i], expected[i]) << "field " << i;
}

TEST(AttentionArgs, StagedBiasScoreIsTileColumnThenPointers) {
  auto p = pointers(17);  // 136 bytes of pointers: two 128-byte words
  auto score = pack_staged_bias_score(filled(100), filled(200), p);
  ASSERT_EQ(score.size(), 2u + 2u);
  EXPECT_TRUE(same(score[0], filled(100)));
  EXPECT_TRUE(same(score[1], filled(200)));
  EXPECT_EQ(std::memcmp(&score[2], p.data(), p.size() * sizeof(DevicePtr)), 0);
  // The padding past the pointers is zero.
  const auto* bytes = reinterpret_cast<const unsigned char*>(&score[2]);
  for (size_t i = p.size() * sizeof(DevicePtr); i < 2 * sizeof(TensorMapBytes); ++i) EXPECT_EQ(bytes[i], 0) << i;
}

TEST(AttentionArgs, AbsentMapIsZeros) {
  auto p = pointers(16);  // exactly one word of pointers
  auto tile_only = pack_staged_bias_score(filled(7), std::nullopt, p);
  ASSERT_EQ(tile_only.size(), 3u);
  EXPECT_TRUE(same(tile_only[0], filled(7)));
  EXPECT_TRUE(same(tile_only[1], TensorMapBytes{}));
  auto column_only = pack_staged_bias_score(std::nullopt, filled(9), p);
  EXPECT_TRUE(same(column_only[0], TensorMapBytes{}));
  EXPECT_TRUE(same(column_only[1], filled(9)));
  EXPECT_EQ(std::memcmp(&column_only[2], p.data(), 128), 0);
}

TEST(AttentionArgs, ParametersWithoutBiasPassThePointers) {
  auto p = pointers(5);
  AttentionShapeArg shape{1, 4, 2, 128, 256};
  AttentionLaunchArgs args(filled(1), filled(2), filled(3), shape, std::nullopt, std::nullopt, p);
  EXPECT_FALSE(args.staged_bias());
  auto params = args.parameters(p.data());
  EXPECT_TRUE(same(*static_cast<TensorMapBytes*>(params[0]), filled(1)));
  EXPECT_TRUE(same(*static_cast<TensorMapBytes*>(params[1]), filled(2)));
  EXPECT_TRUE(same(*static_cast<TensorMapBytes*>(params[2]), filled(3)));
  EXPECT_EQ(static_cast<AttentionShapeArg*>(params[3])->seq_k, 256);
  EXPECT_EQ(static_cast<AttentionShapeArg*>(params[3])->heads_kv, 2);
  EXPECT_EQ(params[4], p.data());  // score, mask, epilogue: the pointers
  EXPECT_EQ(params[5], p.data());
  EXPECT_EQ(params[6], p.data());
  // The maps are 128-byte aligned, as the kernel's __grid_constant__ TensorMap parameters.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(reinterpret_cast<uintptr_t>(params[i]) % 128, 0u);
}

TEST(AttentionArgs, ParametersWithBiasPassTheScoreFunctor) {
  auto p = pointers(3);
  AttentionLaunchArgs args(filled(1), filled(2), filled(3), AttentionShapeArg{}, filled(50), std::nullopt, p);
  ASSERT_TRUE(args.staged_bias());
  auto params = args.parameters(p.data());
  const auto* score = static_cast<const TensorMapBytes*>(params[4]);
  EXPECT_EQ(score, args.score().data());
  EXPECT_TRUE(same(score[0], filled(50)));
  EXPECT_EQ(std::memcmp(&score[2], p.data(), p.size() * sizeof(DevicePtr)), 0);
  EXPECT_EQ(params[5], p.data());
  EXPECT_EQ(params[6], p.data());
}

TEST(AttentionArgs, TmaStoreEpilogueIsPointersThenTheMap) {
  // functors.cuh kTmaStore: every pointer, zeros to the next multiple of 64 bytes, then out_map (the device
  // TensorMap's alignment), as the generated epilogue declares them (its sizeof checked in the source).
  EXPECT_EQ(epilogue_out_map_offset(0), 0u);
  EXPECT_EQ(epilogue_out_map_offset(8), 64u);
  EXPECT_EQ(epilogue_out_map_offset(9), 128u);
  auto p = pointers(5);
  auto epilogue = pack_tma_store_epilogue(filled(70), p);
  ASSERT_EQ(epilogue.size(), 64u + 128u);
  EXPECT_EQ(std::memcmp(epilogue.data(), p.data(), 40), 0);
  for (size_t i = 40; i < 64; ++i) EXPECT_EQ(epilogue[i], 0) << i;
  TensorMapBytes map;
  std::memcpy(&map, epilogue.data() + 64, sizeof map);
  EXPECT_TRUE(same(map, filled(70)));
  // The launch passes it as the epilogue functor; score and mask stay the pointers.
  AttentionLaunchArgs args(filled(1), filled(2), filled(3), AttentionShapeArg{}, std::nullopt, std::nullopt, p, filled(70));
  ASSERT_TRUE(args.tma_store());
  auto params = args.parameters(p.data());
  EXPECT_EQ(params[4], p.data());
  EXPECT_EQ(params[5], p.data());
  EXPECT_EQ(params[6], static_cast<const void*>(args.epilogue().data()));
  EXPECT_EQ(std::memcmp(params[6], epilogue.data(), epilogue.size()), 0);
  AttentionLaunchArgs plain(filled(1), filled(2), filled(3), AttentionShapeArg{}, std::nullopt, std::nullopt, p);
  EXPECT_FALSE(plain.tma_store());
}

TEST(AttentionArgs, BackendShapeFromTheLaunch) {
  AttentionSkeletonLaunch launch;
  launch.batch = 3, launch.heads = 16, launch.heads_kv = 4, launch.seq_q = 100, launch.seq_k = 300;
  launch.q_heads = 32, launch.q_head0 = 16, launch.k_heads = 8, launch.k_head0 = 4, launch.v_heads = 6, launch.v_head0 = 2;
  AttentionShapeArg s = attention_shape_arg(launch);
  EXPECT_EQ(s.batch, 3);
  EXPECT_EQ(s.heads, 16);
  EXPECT_EQ(s.heads_kv, 4);
  EXPECT_EQ(s.seq_q, 100);
  EXPECT_EQ(s.seq_k, 300);
  EXPECT_EQ(s.q_heads, 32);
  EXPECT_EQ(s.q_head0, 16);
  EXPECT_EQ(s.k_heads, 8);
  EXPECT_EQ(s.k_head0, 4);
  EXPECT_EQ(s.v_heads, 6);
  EXPECT_EQ(s.v_head0, 2);
}

}  // namespace
}  // namespace solder::runtime
