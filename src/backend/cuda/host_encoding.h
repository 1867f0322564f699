// Host-side encoding of tensor values into their dtype's bytes (and back), and the poison patterns
// written into non-input globals before a GPU run (a NaN with a recognisable payload where the dtype
// has NaN; an out-of-range value otherwise).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/host_tensor.h"

namespace solder {

// Bytes of `values` (each already representable in `dtype`) laid out as the GPU stores them.
std::vector<uint8_t> encode_values(const std::vector<double>& values, DType dtype);
std::vector<double> decode_values(const std::vector<uint8_t>& bytes, DType dtype, int64_t count);
// The poison element's bit pattern, and the 32-bit word that fills memory with it.
uint32_t poison_bits(DType dtype);
uint32_t poison_fill_word(DType dtype);
// How many elements of `bytes` still hold the poison pattern.
int64_t count_poison(const std::vector<uint8_t>& bytes, DType dtype, int64_t count);

}  // namespace solder
