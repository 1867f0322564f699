#include "backend/cpu/compare.h"

#include <algorithm>
#include <cmath>

namespace solder {

double tolerance_for(const BoundProgram& program) {
  double tolerance = 1e-5;
  for (auto& t : program.tensors) {
    if (t.dtype == DType::bf16 || t.dtype == DType::f16) tolerance = std::max(tolerance, 1e-2);
    if (t.dtype == DType::f8e4m3 || t.dtype == DType::f8e5m2) tolerance = std::max(tolerance, 5e-2);
  }
  for (auto& d : program.defs) {
    int64_t r = 1;
    for (int64_t e : d.r_extents) r *= e;
    if (r > (1 << 16)) tolerance = std::max(tolerance, 1e-4);
  }
  return tolerance;
}

OutputCheck compare_output(const HostTensor& got, const HostTensor& reference, double tolerance) {
  OutputCheck check;
  check.name = reference.name;
  check.tolerance = tolerance;
  if (got.shape != reference.shape || got.values.size() != reference.values.size()) {
    check.reason = "shape differs from the reference";
    check.error = INFINITY;
    return check;
  }
  bool integer = reference.dtype == DType::i32 || reference.dtype == DType::boolean;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < reference.values.size(); ++i) {
    double r = reference.values[i], g = got.values[i];
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) != std::isnan(g)) ++check.nan_mismatches;
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (r != g) ++check.inf_mismatches;
      continue;
    }
    if (integer) {
      if (r != g) ++check.index_mismatches;
      continue;
    }
    diff2 += (g - r) * (g - r);
    ref2 += r * r;
  }
  check.error = std::sqrt(diff2) / (ref2 > 0 ? std::sqrt(ref2) : 1.0);
  auto allowed_index_mismatches = static_cast<int64_t>(0.001 * static_cast<double>(reference.values.size()));
  if (check.nan_mismatches)
    check.reason = std::to_string(check.nan_mismatches) + " element(s) NaN in one and not the other";
  else if (check.inf_mismatches)
    check.reason = std::to_string(check.inf_mismatches) + " element(s) with different infinities";
  else if (check.index_mismatches > allowed_index_mismatches)
    check.reason = std::to_string(check.index_mismatches) + " integer element(s) differ";
  else if (!(check.error <= tolerance))
    check.reason = "relative error above tolerance";
  check.ok = check.reason.empty();
  return check;
}

}  // namespace solder
