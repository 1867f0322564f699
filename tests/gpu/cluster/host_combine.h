// The collectives' element-wise operators on the host, for the device tests' references (test_collectives.cu,
// test_channels.cu). Host code in a .cu file; needs reduce_op from <solder/cluster/packet.cuh>.
#pragma once

#include <solder/cluster/packet.cuh>

#include <cmath>

// acc op value in fp32, as the device combines (packet.cuh, combine): max and min propagate NaN and order -0
// below +0 (PTX max.NaN / min.NaN), whatever the operands' order.
inline float host_combine(solder::cluster::reduce_op op, float a, float b) {
  using solder::cluster::reduce_op;
  switch (op) {
    case reduce_op::sum: return a + b;
    case reduce_op::max:
      if (std::isnan(a) || std::isnan(b)) return NAN;
      return a == b ? (std::signbit(a) ? b : a) : std::fmax(a, b);
    case reduce_op::min:
      if (std::isnan(a) || std::isnan(b)) return NAN;
      return a == b ? (std::signbit(a) ? a : b) : std::fmin(a, b);
    default: return a * b;
  }
}
