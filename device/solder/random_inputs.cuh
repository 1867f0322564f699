// Program inputs drawn where they are stored: the host generator's values (src/backend/cpu/inputs.h),
// computed on the GPU for `solder bench`, whose inputs need no host copy.
//
// Element n of an input takes draws n·k … n·k + k − 1 of a splitmix64 counter started at the input's
// stream (a hash of the seed and the input's name; k = 2 for normal, 1 otherwise), maps them to its
// distribution (normal by Box–Muller, uniform, randint, bernoulli), rounds the value to its dtype (round
// to nearest even; e4m3 saturates at ±448, the others overflow to ±inf; i32 rounds to the nearest
// integer and clamps) and stores the dtype's bytes, little endian, as the GPU stores them. A counter
// needs no state between elements, so every thread computes its elements alone.
//
// The same functions compile for the host (C++20) and under NVRTC / nvcc. On the host they give
// make_inputs() + encode_values() bit for bit (tests/unit/backend/random_inputs_test.cpp checks it);
// on the GPU the double-precision log and cos may differ from the host library's by an ulp of a
// double, which changes a stored 16-bit value only when the double lies within that ulp of a rounding
// tie (about one element in 10^13). Sums and products are written with explicit rounding (no fused
// multiply-add), so that nothing else differs.
//
// Scope: every function here is per thread; draw_input_elements() is called by any number of threads,
// each with its own range of elements.
#pragma once

#if defined(__CUDACC__)
#define SOLDER_RANDOM_FN __host__ __device__ __forceinline__
#else
#include <math.h>
#define SOLDER_RANDOM_FN inline
#endif

namespace solder::random_inputs {

using u64 = unsigned long long;
using u32 = unsigned int;

// Distributions and dtypes by number (the host's InputDistribution::Kind and DType map onto these:
// src/backend/cpu/inputs.cpp, draw_spec()).
enum Distribution : int { kNormal = 0, kUniform = 1, kRandint = 2, kBernoulli = 3 };
enum Dtype : int { kF32 = 0, kF16 = 1, kBF16 = 2, kE4M3 = 3, kE5M2 = 4, kI32 = 5, kBool = 6 };

// One input's draw: its distribution, two parameters (normal: mean, deviation; uniform: low, high;
// randint: low, high (exclusive); bernoulli: p), its counter's start, and its dtype.
struct DrawSpec {
  int distribution;
  int dtype;
  double p0, p1;
  u64 stream;
};

SOLDER_RANDOM_FN int draws_per_element(int distribution) { return distribution == kNormal ? 2 : 1; }
SOLDER_RANDOM_FN int dtype_bytes(int dtype) { return dtype == kF32 || dtype == kI32 ? 4 : dtype == kE4M3 || dtype == kE5M2 || dtype == kBool ? 1 : 2; }

// splitmix64 at counter position `state` (the state after the draw).
SOLDER_RANDOM_FN u64 splitmix64(u64& state) {
  u64 z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

SOLDER_RANDOM_FN double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
SOLDER_RANDOM_FN double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
SOLDER_RANDOM_FN u64 double_bits(double v) {
#if defined(__CUDA_ARCH__)
  return static_cast<u64>(__double_as_longlong(v));
#else
  u64 bits;
  __builtin_memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}

SOLDER_RANDOM_FN double uniform01(u64& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }  // [0, 1)

// The element's value before rounding (the host's Random::normal / uniform / integer).
SOLDER_RANDOM_FN double draw_value(const DrawSpec& spec, u64& state) {
  switch (spec.distribution) {
    case kNormal: {
      double u1 = uniform01(state), u2 = uniform01(state);
      if (u1 < 1e-300) u1 = 1e-300;
      const double n = mul_rn(sqrt(mul_rn(-2.0, log(u1))), cos(mul_rn(6.283185307179586, u2)));
      return add_rn(spec.p0, mul_rn(spec.p1, n));
    }
    case kUniform: return add_rn(spec.p0, mul_rn(add_rn(spec.p1, -spec.p0), uniform01(state)));
    case kRandint: {
      const long long lo = static_cast<long long>(spec.p0), hi = static_cast<long long>(spec.p1);
      return static_cast<double>(lo + static_cast<long long>(splitmix64(state) % static_cast<u64>(hi - lo)));
    }
    default: return uniform01(state) < spec.p0 ? 1.0 : 0.0;  // kBernoulli
  }
}

// The bits of `v` rounded to nearest even in a binary format of `exponent_bits` and `mantissa_bits`
// (subnormals kept). `saturate`: no infinity, finite overflow goes to the largest value `max_bits`
// (e4m3's 448); otherwise overflow gives infinity. NaN gives the format's NaN with every mantissa bit set.
SOLDER_RANDOM_FN u32 round_binary_bits(double v, int exponent_bits, int mantissa_bits, bool saturate, u32 max_bits) {
  const u64 b = double_bits(v);
  const u32 sign = static_cast<u32>(b >> 63) << (exponent_bits + mantissa_bits);
  const int exponent_field = static_cast<int>((b >> 52) & 0x7ff);
  const u64 fraction = b & ((1ull << 52) - 1);
  const u32 all_ones = (1u << exponent_bits) - 1;
  const u32 infinity = saturate ? max_bits : all_ones << mantissa_bits;
  if (exponent_field == 0x7ff) {
    if (fraction != 0) return sign | (all_ones << mantissa_bits) | ((1u << mantissa_bits) - 1);
    return sign | infinity;
  }
  if (exponent_field == 0) return sign;  // zero, or a double subnormal: far under every format's quantum
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int e = exponent_field - 1023;
  const u64 significand = (1ull << 52) | fraction;  // value = significand · 2^(e − 52)
  // the format's quantum at this binade (subnormals: at the smallest normal exponent)
  const int shift = 52 - mantissa_bits + (e < 1 - bias ? 1 - bias - e : 0);
  u64 q = 0;
  if (shift < 60) {
    q = significand >> shift;
    const u64 rest = significand & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rest > half || (rest == half && (q & 1))) ++q;
  }
  // Normal: the exponent field plus the fraction, where a carry out of the fraction moves the exponent
  // up; subnormal: q itself (a carry to 2^mantissa_bits is the smallest normal's bits).
  const u64 bits = e < 1 - bias ? q : (static_cast<u64>(e + bias) << mantissa_bits) + (q - (1ull << mantissa_bits));
  if (saturate) return sign | static_cast<u32>(bits > max_bits ? max_bits : bits);
  return sign | static_cast<u32>(bits >= (static_cast<u64>(all_ones) << mantissa_bits) ? infinity : bits);
}

// The dtype's bits of `v` (the host's round_to_dtype() followed by encode_values()).
SOLDER_RANDOM_FN u32 encode(double v, int dtype) {
  switch (dtype) {
    case kF32: {
      const u64 b = double_bits(v);
      if (((b >> 52) & 0x7ff) == 0x7ff && (b & ((1ull << 52) - 1)) != 0)  // NaN: a float conversion's quiet NaN
        return static_cast<u32>(b >> 63) << 31 | 0x7fc00000u | static_cast<u32>((b & ((1ull << 52) - 1)) >> 29);
      return round_binary_bits(v, 8, 23, false, 0);
    }
    case kF16: return round_binary_bits(v, 5, 10, false, 0);
    case kBF16: return round_binary_bits(v, 8, 7, false, 0);
    case kE4M3: return round_binary_bits(v, 4, 3, true, 0x7e);
    case kE5M2: return round_binary_bits(v, 5, 2, false, 0);
    case kI32: {
      if (v != v) return 0;
      double r = rint(v);
      if (r > 2147483647.0) r = 2147483647.0;
      if (r < -2147483648.0) r = -2147483648.0;
      return static_cast<u32>(static_cast<int>(r));
    }
    default: return v != 0.0 ? 1u : 0u;  // kBool
  }
}

// The bits of element n.
SOLDER_RANDOM_FN u32 element_bits(const DrawSpec& spec, u64 n) {
  u64 state = spec.stream + static_cast<u64>(draws_per_element(spec.distribution)) * n * 0x9E3779B97F4A7C15ull;
  return encode(draw_value(spec, state), spec.dtype);
}

// Stores elements [begin, end) into `out`, the input's first byte (dtype_bytes(spec.dtype) per element).
SOLDER_RANDOM_FN void draw_input_elements(const DrawSpec& spec, u64 begin, u64 end, unsigned char* out) {
  const int size = dtype_bytes(spec.dtype);
  for (u64 n = begin; n < end; ++n) {
    const u32 bits = element_bits(spec, n);
    unsigned char* p = out + n * static_cast<u64>(size);
    if (size == 4) *reinterpret_cast<u32*>(p) = bits;
    else if (size == 2) *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(bits);
    else *p = static_cast<unsigned char>(bits);
  }
}

#if defined(__CUDACC__)
// Every thread of the grid draws the elements i, i + stride, …: `count` elements into `out`.
__device__ __forceinline__ void draw_input_grid(const DrawSpec& spec, u64 count, unsigned char* out) {
  const u64 stride = static_cast<u64>(gridDim.x) * blockDim.x;
  for (u64 n = static_cast<u64>(blockIdx.x) * blockDim.x + threadIdx.x; n < count; n += stride) draw_input_elements(spec, n, n + 1, out);
}
#endif

}  // namespace solder::random_inputs
