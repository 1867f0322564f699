// Checked integer arithmetic for sizes: element counts, byte counts, tile and block counts.
//
// `checked_mul` / `checked_add` return nullopt when the exact result does not fit in int64_t;
// `product_or_throw` multiplies a shape and throws std::overflow_error (an internal error: the
// verifier's limits, ir/limits.h, keep every size of a bound program far below the wrap).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace solder {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a * b for non-negative sizes, saturating at INT64_MAX (a count that only has to compare with limits).
inline int64_t saturating_mul(int64_t a, int64_t b) {
  auto r = checked_mul(a, b);
  return r ? *r : INT64_MAX;
}

// a * b; throws std::overflow_error naming `what` when it does not fit.
inline int64_t mul_or_throw(int64_t a, int64_t b, const char* what) {
  auto r = checked_mul(a, b);
  if (!r) throw std::overflow_error(std::string(what) + ": size " + std::to_string(a) + " x " + std::to_string(b) +
                                    " overflows 64 bits");
  return *r;
}

// The product of `shape`; throws std::overflow_error naming `what` when it does not fit.
inline int64_t product_or_throw(const std::vector<int64_t>& shape, const char* what) {
  int64_t n = 1;
  for (int64_t s : shape) n = mul_or_throw(n, s, what);
  return n;
}

}  // namespace solder
