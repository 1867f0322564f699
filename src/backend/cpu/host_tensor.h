// Tensor values on the host, as every backend exchanges them: row-major, held in float64 whatever
// the dtype (each value already rounded to the dtype).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace solder {

struct HostTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  std::vector<double> values;

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

using TensorSet = std::map<std::string, HostTensor>;

}  // namespace solder
