// Element types of Solder tensors and the rounding that writing a value of each type performs.
//
// Every tensor has one dtype. A value written to a tensor is rounded to that dtype, by round to
// nearest even, with the saturation behaviour the format defines:
//   f32     IEEE binary32.
//   f16     IEEE binary16; overflow rounds to +-inf.
//   bf16    bfloat16 (binary32 with 8 mantissa bits); overflow rounds to +-inf.
//   f8e4m3  OCP FP8 E4M3 "fn": no infinities, max 448; out-of-range values saturate to +-448
//           (the saturating conversion cuda_fp8 performs), NaN stays NaN.
//   f8e5m2  OCP FP8 E5M2: IEEE-like, max 57344; overflow rounds to +-inf.
//   i32     integers; a real value is rounded to nearest (ties to even) and clamped to int32.
//   boolean 0 or 1; any non-zero value is 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace solder {

enum class DType { f32, f16, bf16, f8e4m3, f8e5m2, i32, boolean };

std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);
int dtype_bytes(DType dtype);
bool is_float_dtype(DType dtype);

// Rounds a real value to the nearest value representable in `dtype` (see above).
double round_to_dtype(double value, DType dtype);
// Rounds to tf32: float32's exponent range with 10 fraction bits, nearest even (cvt.rn.tf32.f32); a
// value past the largest float becomes infinity. The expression round_tf32(x).
double round_to_tf32(double value);
float round_to_dtype(float value, DType dtype);

}  // namespace solder
