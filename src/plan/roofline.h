// The roofline floor of one contraction: the least time its FLOPs take at the tensor rate of its MMA
// input type, and the least time its unique bytes take through device memory, on a hardware
// description (src/hw). The CUDA backend prints it beside each contraction's schedule (`solder emit`),
// so that a kernel's tile can be judged against what the contraction cannot avoid.
#pragma once

#include <string>

#include "hw/hardware.h"
#include "plan/gemm_problem.h"

namespace solder {

struct ContractionFloor {
  double tensor_us = 0;  // problem.flops() at the tensor rate for problem.type (tf32's for f32)
  double hbm_us = 0;     // problem.unique_bytes() at the device-memory bandwidth
  double floor_us() const { return tensor_us > hbm_us ? tensor_us : hbm_us; }
  bool tensor_bound() const { return tensor_us >= hbm_us; }
};

ContractionFloor contraction_floor(const GemmProblem& problem, const HardwareDescription& hw);

// "floor 1.23 us (tensor 1.23 us, HBM 0.45 us)".
std::string floor_text(const ContractionFloor& floor);

}  // namespace solder
