// The top-k order of the Kernel IR (docs/kernel-ir.md, "topk"): NaN before numbers, then larger
// values, then lower indices; and the group step of the code generator's cooperative top-k, where a
// group of G lanes (a power of two, at most 32, aligned within a warp) picks the first candidate in
// that order, k times. Per thread; topk_group_best is called by all 32 lanes of the warp together.
#pragma once

namespace solder::reduce {

// Whether (v, vi) comes before (w, wi) in the top-k order.
__device__ __forceinline__ bool topk_before(float v, float vi, float w, float wi) {
  const bool v_nan = v != v, w_nan = w != w;
  if (v_nan != w_nan) return v_nan;
  if (!v_nan && v != w) return v > w;
  return vi < wi;
}

// A candidate of the group step: `owner` names the lane and slot holding it (ties of equal value and
// index, possible only when the reduce has no index, go to the lower owner; either order writes the
// same values).
struct TopkCandidate {
  bool live;
  float value, index;
  int owner;
};

__device__ __forceinline__ bool topk_first(const TopkCandidate& a, const TopkCandidate& b) {
  if (a.live != b.live) return a.live;
  if (!a.live) return false;
  if (topk_before(a.value, a.index, b.value, b.index)) return true;
  if (topk_before(b.value, b.index, a.value, a.index)) return false;
  return a.owner < b.owner;
}

// The first candidate of the G lanes of this lane's group (every lane gets it).
template <int G>
__device__ __forceinline__ TopkCandidate topk_group_best(TopkCandidate c) {
#pragma unroll
  for (int o = 1; o < G; o <<= 1) {
    TopkCandidate other;
    other.live = __shfl_xor_sync(0xffffffffu, static_cast<int>(c.live), o) != 0;
    other.value = __shfl_xor_sync(0xffffffffu, c.value, o);
    other.index = __shfl_xor_sync(0xffffffffu, c.index, o);
    other.owner = __shfl_xor_sync(0xffffffffu, c.owner, o);
    if (topk_first(other, c)) c = other;
  }
  return c;
}

}  // namespace solder::reduce
