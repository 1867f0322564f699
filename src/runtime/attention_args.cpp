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

std::vector<unsigned char> pack_tma_store_epilogue(const TensorMapBytes& out, std::span<const DevicePtr> pointers) {
  const size_t at = epilogue_out_map_offset(pointers.size());
  std::vector<unsigned char> epilogue(at + sizeof(TensorMapBytes), 0);
  if (!pointers.empty()) std::memcpy(epilogue.data(), pointers.data(), pointers.size() * sizeof(DevicePtr));
  std::memcpy(epilogue.data() + at, &out, sizeof out);
  return epilogue;
}

AttentionLaunchArgs::AttentionLaunchArgs(const TensorMapBytes& q, const TensorMapBytes& k, const TensorMapBytes& v,
                                         const AttentionShapeArg& shape, const std::optional<TensorMapBytes>& bias_tile,
                                         const std::optional<TensorMapBytes>& bias_column, std::span<const DevicePtr> pointers,
                                         const std::optional<TensorMapBytes>& out)
    : q_(q), k_(k), v_(v), shape_(shape) {
  if (bias_tile || bias_column) score_ = pack_staged_bias_score(bias_tile, bias_column, pointers);
  if (out) epilogue_ = pack_tma_store_epilogue(*out, pointers);
}

std::array<void*, 7> AttentionLaunchArgs::parameters(DevicePtr* pointers) {
  void* score = score_.empty() ? static_cast<void*>(pointers) : static_cast<void*>(score_.data());
  void* epilogue = epilogue_.empty() ? static_cast<void*>(pointers) : static_cast<void*>(epilogue_.data());
  return {&q_, &k_, &v_, &shape_, score, pointers, epilogue};
}

}  // namespace solder::runtime
