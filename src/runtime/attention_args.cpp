#include "runtime/attention_args.h"

#include <cstring>

namespace solder::runtime {

std::vector<TensorMapBytes> pack_staged_bias_score(const std::optional<TensorMapBytes>& bias_tile,
                                                   const std::optional<TensorMapBytes>& bias_column,
                                                   std::span<const DevicePtr> pointers) {
  const size_t pointer_bytes = pointers.size() * sizeof(DevicePtr);
  std::vector<TensorMapBytes> score(2 + (pointer_bytes + sizeof(TensorMapBytes) - 1) / sizeof(TensorMapBytes));
  if (bias_tile) score[0] = *bias_tile;
  if (bias_column) score[1] = *bias_column;
  if (pointer_bytes > 0) std::memcpy(&score[2], pointers.data(), pointer_bytes);
  return score;
}

AttentionLaunchArgs::AttentionLaunchArgs(const TensorMapBytes& q, const TensorMapBytes& k, const TensorMapBytes& v,
                                         const AttentionShapeArg& shape, const std::optional<TensorMapBytes>& bias_tile,
                                         const std::optional<TensorMapBytes>& bias_column, std::span<const DevicePtr> pointers)
    : q_(q), k_(k), v_(v), shape_(shape) {
  if (bias_tile || bias_column) score_ = pack_staged_bias_score(bias_tile, bias_column, pointers);
}

std::array<void*, 7> AttentionLaunchArgs::parameters(DevicePtr* pointers) {
  void* score = score_.empty() ? static_cast<void*>(pointers) : static_cast<void*>(score_.data());
  return {&q_, &k_, &v_, &shape_, score, pointers, pointers};
}

}  // namespace solder::runtime
