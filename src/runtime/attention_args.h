// The host side of one launch of the sm_90a attention skeleton (device/solder/attention): the kernel's
// parameters packed in the order and layout it declares them,
//
//     (TensorMap q, TensorMap k, TensorMap v, AttentionShape shape, Score score, Mask mask, Epilogue epi)
//
// where the mask and epilogue functors, and the score functor of a program without a staged bias, are a
// struct of every global's device pointer (the generated code's `Globals`), and the score functor of a
// staged bias (functors.cuh, "A staged bias") is (TensorMap bias_tile, TensorMap bias_column, every
// global's pointer), and the epilogue functor of a TMA-stored epilogue (functors.cuh, kTmaStore) is every
// global's pointer, then TensorMap out_map at the next multiple of 64 bytes. Both callers (the CUDA backend's run and bench, and solder::Kernel's call on
// caller-owned pointers) pack through this one helper, so the layout lives in one place.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "runtime/runtime.h"
#include "runtime/tma.h"

namespace solder::runtime {

// solder::attention::AttentionShape (device/solder/attention/config.cuh), field for field.
struct AttentionShapeArg {
  int batch = 1, heads = 1, heads_kv = 1, seq_q = 0, seq_k = 0;
  int q_heads = 0, q_head0 = 0, k_heads = 0, k_head0 = 0, v_heads = 0, v_head0 = 0;
};
static_assert(sizeof(AttentionShapeArg) == 11 * sizeof(int), "AttentionShape is eleven ints");

// The score functor of a staged bias: the tile map (zeros when absent), the column map (zeros when
// absent), then every global's pointer, padded to whole 128-byte words (the maps' alignment).
std::vector<TensorMapBytes> pack_staged_bias_score(const std::optional<TensorMapBytes>& bias_tile,
                                                   const std::optional<TensorMapBytes>& bias_column,
                                                   std::span<const DevicePtr> pointers);

// The byte offset of a TMA-stored epilogue's out_map: past `pointers` pointers, rounded up to the device
// TensorMap's 64-byte alignment.
constexpr size_t epilogue_out_map_offset(size_t pointers) { return (pointers * sizeof(DevicePtr) + 63) / 64 * 64; }

// The epilogue functor of a TMA-stored epilogue: every global's pointer, zeros up to
// epilogue_out_map_offset, then the output's map (sizeof: that offset + 128).
std::vector<unsigned char> pack_tma_store_epilogue(const TensorMapBytes& out, std::span<const DevicePtr> pointers);

// One attention launch's parameters. Holds the bytes the parameter array points to (maps, shape, a
// staged bias's score functor), so that every call's maps can be encoded and checked before anything
// launches; the pointers of the mask, epilogue and plain score functors are the caller's.
class AttentionLaunchArgs {
 public:
  AttentionLaunchArgs() = default;
  // bias_tile / bias_column: the staged bias's maps (both absent: no staged bias, the score functor is
  // the pointers). `pointers` are copied into a staged bias's score functor. out: the output's map of a
  // TMA-stored epilogue (absent: the epilogue functor is the pointers).
  AttentionLaunchArgs(const TensorMapBytes& q, const TensorMapBytes& k, const TensorMapBytes& v, const AttentionShapeArg& shape,
                      const std::optional<TensorMapBytes>& bias_tile, const std::optional<TensorMapBytes>& bias_column,
                      std::span<const DevicePtr> pointers, const std::optional<TensorMapBytes>& out = std::nullopt);

  bool staged_bias() const { return !score_.empty(); }
  const AttentionShapeArg& shape() const { return shape_; }
  std::span<const TensorMapBytes> score() const { return score_; }
  bool tma_store() const { return !epilogue_.empty(); }
  std::span<const unsigned char> epilogue() const { return epilogue_; }

  // The parameter array for runtime::launch: valid while *this is neither moved nor destroyed and
  // `pointers` (the same globals' pointers as at construction) lives.
  std::array<void*, 7> parameters(DevicePtr* pointers);

 private:
  TensorMapBytes q_{}, k_{}, v_{};
  AttentionShapeArg shape_{};
  std::vector<TensorMapBytes> score_;  // empty: no staged bias
  std::vector<unsigned char> epilogue_;  // empty: no TMA-stored epilogue
};

}  // namespace solder::runtime
