#include "backend/cuda/host_encoding.h"

#include <cmath>
#include <cstring>

#include "ir/diagnostics.h"
#include "support/parallel.h"

namespace solder {
namespace {

// Encodes a finite or special value of a binary format with `exponent_bits` and `mantissa_bits`.
// The value is already representable (round_to_dtype), so this only lays out the bits.
uint32_t encode_binary(double v, int exponent_bits, int mantissa_bits, bool has_inf) {
  uint32_t sign = std::signbit(v) ? 1u : 0u;
  int bias = (1 << (exponent_bits - 1)) - 1;
  uint32_t exp_all_ones = (1u << exponent_bits) - 1;
  uint32_t shift_sign = static_cast<uint32_t>(exponent_bits + mantissa_bits);
  if (std::isnan(v)) return (sign << shift_sign) | (exp_all_ones << mantissa_bits) | ((1u << mantissa_bits) - 1);
  if (std::isinf(v)) {
    if (!has_inf) return (sign << shift_sign) | (exp_all_ones << mantissa_bits) | ((1u << mantissa_bits) - 2);
    return (sign << shift_sign) | (exp_all_ones << mantissa_bits);
  }
  double a = std::fabs(v);
  if (a == 0) return sign << shift_sign;
  int e = std::ilogb(a);
  int min_exponent = 1 - bias;
  uint32_t exponent_field, mantissa;
  if (e < min_exponent) {  // subnormal
    exponent_field = 0;
    mantissa = static_cast<uint32_t>(std::llround(std::ldexp(a, mantissa_bits - min_exponent)));
  } else {
    exponent_field = static_cast<uint32_t>(e + bias);
    mantissa = static_cast<uint32_t>(std::llround(std::ldexp(a / std::ldexp(1.0, e) - 1.0, mantissa_bits)));
  }
  return (sign << shift_sign) | (exponent_field << mantissa_bits) | mantissa;
}

double decode_binary(uint32_t bits, int exponent_bits, int mantissa_bits, bool has_inf, bool e4m3) {
  int bias = (1 << (exponent_bits - 1)) - 1;
  uint32_t sign = (bits >> (exponent_bits + mantissa_bits)) & 1u;
  uint32_t exponent_field = (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
  uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
  double s = sign ? -1.0 : 1.0;
  uint32_t exp_all_ones = (1u << exponent_bits) - 1;
  if (e4m3) {
    if (exponent_field == exp_all_ones && mantissa == (1u << mantissa_bits) - 1) return NAN;
  } else if (exponent_field == exp_all_ones) {
    if (mantissa != 0) return NAN;
    return has_inf ? s * INFINITY : NAN;
  }
  if (exponent_field == 0) return s * std::ldexp(static_cast<double>(mantissa), 1 - bias - mantissa_bits);
  return s * std::ldexp(1.0 + std::ldexp(static_cast<double>(mantissa), -mantissa_bits), static_cast<int>(exponent_field) - bias);
}

}  // namespace

uint32_t poison_bits(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::i32: return 0x7fdead00u;
    case DType::f16: return 0x7e01u;
    case DType::bf16: return 0x7fc1u;
    case DType::f8e4m3: case DType::f8e5m2: return 0x7fu;
    case DType::boolean: return 0xa5u;
  }
  return 0;
}

uint32_t poison_fill_word(DType dtype) {
  uint32_t p = poison_bits(dtype);
  switch (dtype_bytes(dtype)) {
    case 2: return p | (p << 16);
    case 1: return p | (p << 8) | (p << 16) | (p << 24);
    default: return p;
  }
}

std::vector<uint8_t> encode_values(const std::vector<double>& values, DType dtype) {
  int size = dtype_bytes(dtype);
  std::vector<uint8_t> bytes(values.size() * static_cast<size_t>(size));
  parallel_for(static_cast<int64_t>(values.size()), [&](int64_t begin, int64_t end) {
    for (size_t i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
      double v = values[i];
      uint32_t bits = 0;
      switch (dtype) {
        case DType::f32: { float f = static_cast<float>(v); std::memcpy(&bits, &f, 4); break; }
        case DType::i32: { int32_t x = static_cast<int32_t>(v); std::memcpy(&bits, &x, 4); break; }
        case DType::f16: bits = encode_binary(v, 5, 10, true); break;
        case DType::bf16: bits = encode_binary(v, 8, 7, true); break;
        case DType::f8e4m3: bits = encode_binary(v, 4, 3, false); break;
        case DType::f8e5m2: bits = encode_binary(v, 5, 2, true); break;
        case DType::boolean: bits = v != 0 ? 1u : 0u; break;
      }
      std::memcpy(&bytes[i * static_cast<size_t>(size)], &bits, static_cast<size_t>(size));  // little endian
    }
  }, 1 << 16);
  return bytes;
}

std::vector<double> decode_values(const std::vector<uint8_t>& bytes, DType dtype, int64_t count) {
  int size = dtype_bytes(dtype);
  std::vector<double> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &bytes[static_cast<size_t>(i * size)], static_cast<size_t>(size));
    double v = 0;
    switch (dtype) {
      case DType::f32: { float f; std::memcpy(&f, &bits, 4); v = f; break; }
      case DType::i32: { int32_t x; std::memcpy(&x, &bits, 4); v = x; break; }
      case DType::f16: v = decode_binary(bits, 5, 10, true, false); break;
      case DType::bf16: v = decode_binary(bits, 8, 7, true, false); break;
      case DType::f8e4m3: v = decode_binary(bits, 4, 3, false, true); break;
      case DType::f8e5m2: v = decode_binary(bits, 5, 2, true, false); break;
      case DType::boolean: v = bits != 0 ? 1 : 0; break;
    }
    values[static_cast<size_t>(i)] = v;
  }
  return values;
}

int64_t count_poison(const std::vector<uint8_t>& bytes, DType dtype, int64_t count) {
  int size = dtype_bytes(dtype);
  uint32_t p = poison_bits(dtype);
  int64_t n = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &bytes[static_cast<size_t>(i * size)], static_cast<size_t>(size));
    n += bits == p;
  }
  return n;
}

}  // namespace solder
