#include "plan/roofline.h"

#include <cstdio>

namespace solder {

ContractionFloor contraction_floor(const GemmProblem& problem, const HardwareDescription& hw) {
  ContractionFloor floor;
  // 3xtf32: three tf32 products, and the split's bytes (each operand read once, written three times).
  const bool three = problem.type == MmaType::tf32x3;
  const MmaType type = problem.type == MmaType::f32 || three ? MmaType::tf32 : problem.type;
  const double tflops = hw.rates.tensor(mma_type_name(type));
  if (tflops > 0) floor.tensor_us = (three ? 3 : 1) * problem.flops() / (tflops * 1e12) * 1e6;
  const double split_bytes = three ? 16.0 * problem.batch * static_cast<double>(problem.m + problem.n) * problem.k : 0.0;
  if (hw.rates.hbm_tbps > 0) floor.hbm_us = (problem.unique_bytes() + split_bytes) / (hw.rates.hbm_tbps * 1e12) * 1e6;
  return floor;
}

std::string floor_text(const ContractionFloor& floor) {
  char text[128];
  std::snprintf(text, sizeof text, "floor %.3g us (tensor %.3g us, HBM %.3g us)", floor.floor_us(), floor.tensor_us, floor.hbm_us);
  return text;
}

}  // namespace solder
