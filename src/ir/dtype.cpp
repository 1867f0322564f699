#include "ir/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace solder {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f8e4m3: return "f8e4m3";
    case DType::f8e5m2: return "f8e5m2";
    case DType::i32: return "i32";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2, DType::i32,
                  DType::boolean}) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::f8e4m3: case DType::f8e5m2: case DType::boolean: return 1;
  }
  return 4;
}

bool is_float_dtype(DType dtype) { return dtype != DType::i32 && dtype != DType::boolean; }

namespace {

// Rounds `value` to a binary floating-point format with `mantissa_bits` explicit fraction bits and
// normal exponents in [min_exponent, max_exponent] (values below are subnormal with the spacing of
// 2^(min_exponent - mantissa_bits)). Round to nearest, ties to even. Returns +-inf on overflow past
// the largest finite value `max_finite` (rounded as if the exponent range were unbounded).
double round_binary(double value, int mantissa_bits, int min_exponent, double max_finite) {
  if (!std::isfinite(value) || value == 0.0) return value;
  double magnitude = std::fabs(value);
  int exponent = std::ilogb(magnitude);
  if (exponent < min_exponent) exponent = min_exponent;
  double quantum = std::ldexp(1.0, exponent - mantissa_bits);
  double rounded = std::nearbyint(magnitude / quantum) * quantum;  // default mode: ties to even
  if (rounded > max_finite) {
    // The first value past max_finite that a wider exponent range would have is max_finite plus
    // half a quantum at the top binade; rounding reaches it only by overflowing.
    rounded = std::numeric_limits<double>::infinity();
  }
  return std::copysign(rounded, value);
}

}  // namespace

double round_to_dtype(double value, DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<double>(static_cast<float>(value));
    case DType::f16: return round_binary(value, 10, -14, 65504.0);
    case DType::bf16: {
      // bf16 shares f32's exponent range: round through f32 first would double-round, so round
      // the double directly with 7 fraction bits.
      return round_binary(value, 7, -126, 3.3895313892515355e38);
    }
    case DType::f8e4m3: {
      if (std::isnan(value)) return value;
      double r = round_binary(value, 3, -6, 448.0);
      if (std::isinf(r)) r = std::copysign(448.0, value);  // saturating conversion
      return r;
    }
    case DType::f8e5m2: return round_binary(value, 2, -14, 57344.0);
    case DType::i32: {
      if (std::isnan(value)) return 0.0;
      double r = std::nearbyint(value);
      if (r > 2147483647.0) r = 2147483647.0;
      if (r < -2147483648.0) r = -2147483648.0;
      return r;
    }
    case DType::boolean: return value != 0.0 ? 1.0 : 0.0;
  }
  return value;
}

float round_to_dtype(float value, DType dtype) {
  if (dtype == DType::f32) return value;
  return static_cast<float>(round_to_dtype(static_cast<double>(value), dtype));
}

double round_to_tf32(double value) {
  const double v = round_to_dtype(value, DType::f32);
  if (!std::isfinite(v) || v == 0.0) return v;
  const int exponent = std::max(std::ilogb(std::fabs(v)), -126);
  const double quantum = std::ldexp(1.0, exponent - 10);
  const double r = std::nearbyint(std::fabs(v) / quantum) * quantum;
  return std::copysign(r > static_cast<double>(std::numeric_limits<float>::max()) ? std::numeric_limits<double>::infinity() : r, v);
}

}  // namespace solder
