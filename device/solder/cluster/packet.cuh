// Element types, reduction operators and 16-byte packets for the cluster collectives.
//
// Collectives move 16-byte packets (4 floats or 8 16-bit values). Reductions unpack a packet to fp32,
// combine in fp32 and round once to the element type (round to nearest even) when the result is written.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

#include "ptx.cuh"

namespace solder::cluster {

using cuda::std::uint32_t;

// Element-wise combining operators. prod serves all_exchange(mul).
enum class reduce_op : uint32_t { sum, max, min, prod };

// max and min propagate NaN and order -0 below +0 (PTX max.NaN / min.NaN): the Kernel IR's rule, which the
// CPU executor and the generated code follow too (docs/kernel-ir.md). Unlike fmaxf/fminf, a NaN is never
// dropped, and max(+0, -0) = +0, min(+0, -0) = -0 in either order.
template <reduce_op Op>
__device__ inline float combine(float accumulator, float value) {
  if constexpr (Op == reduce_op::sum) return accumulator + value;
  if constexpr (Op == reduce_op::max) return ptx::max_nan(accumulator, value);
  if constexpr (Op == reduce_op::min) return ptx::min_nan(accumulator, value);
  if constexpr (Op == reduce_op::prod) return accumulator * value;
}

template <class T>
inline constexpr bool is_collective_element = false;
template <>
inline constexpr bool is_collective_element<float> = true;
template <>
inline constexpr bool is_collective_element<__nv_bfloat16> = true;
template <>
inline constexpr bool is_collective_element<__half> = true;

// Number of T in one 16-byte packet.
template <class T>
inline constexpr uint32_t elements_per_packet = 16 / sizeof(T);

// A packet unpacked to fp32 values.
template <class T>
struct unpacked {
  float value[elements_per_packet<T>];
};

namespace detail {
__device__ inline uint32_t word(const uint4& packet, int index) {
  return index == 0 ? packet.x : index == 1 ? packet.y : index == 2 ? packet.z : packet.w;
}
__device__ inline void set_word(uint4& packet, int index, uint32_t value) {
  if (index == 0) packet.x = value;
  else if (index == 1) packet.y = value;
  else if (index == 2) packet.z = value;
  else packet.w = value;
}
}  // namespace detail

template <class T>
__device__ inline unpacked<T> unpack(uint4 packet) {
  static_assert(is_collective_element<T>, "element type must be float, __nv_bfloat16 or __half");
  unpacked<T> out;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    uint32_t bits = detail::word(packet, w);
    if constexpr (sizeof(T) == 4) {
      out.value[w] = __uint_as_float(bits);
    } else if constexpr (cuda::std::is_same_v<T, __nv_bfloat16>) {
      __nv_bfloat162 pair = *reinterpret_cast<__nv_bfloat162*>(&bits);
      float2 f = __bfloat1622float2(pair);
      out.value[2 * w] = f.x;
      out.value[2 * w + 1] = f.y;
    } else {
      __half2 pair = *reinterpret_cast<__half2*>(&bits);
      float2 f = __half22float2(pair);
      out.value[2 * w] = f.x;
      out.value[2 * w + 1] = f.y;
    }
  }
  return out;
}

// Rounds each fp32 value once to T (round to nearest even) and packs.
template <class T>
__device__ inline uint4 pack(const unpacked<T>& in) {
  uint4 packet;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    uint32_t bits;
    if constexpr (sizeof(T) == 4) {
      bits = __float_as_uint(in.value[w]);
    } else if constexpr (cuda::std::is_same_v<T, __nv_bfloat16>) {
      __nv_bfloat162 pair = __floats2bfloat162_rn(in.value[2 * w], in.value[2 * w + 1]);
      bits = *reinterpret_cast<uint32_t*>(&pair);
    } else {
      __half2 pair = __floats2half2_rn(in.value[2 * w], in.value[2 * w + 1]);
      bits = *reinterpret_cast<uint32_t*>(&pair);
    }
    detail::set_word(packet, w, bits);
  }
  return packet;
}

// accumulator = accumulator op value, element-wise in fp32.
template <reduce_op Op, class T>
__device__ inline void combine_into(unpacked<T>& accumulator, const unpacked<T>& value) {
#pragma unroll
  for (uint32_t i = 0; i < elements_per_packet<T>; ++i)
    accumulator.value[i] = combine<Op>(accumulator.value[i], value.value[i]);
}

// 16-byte load and store through generic pointers (the tile may be in shared or global memory).
__device__ inline uint4 load_packet(const uint4* source) { return *source; }
__device__ inline void store_packet(uint4* destination, uint4 value) { *destination = value; }

}  // namespace solder::cluster
