// The skeleton choice's tile: the cost model's best configuration among those the device skeleton
// instantiates (in_device_skeleton), for a contraction that fit_gemm_skeleton accepted. Asked by the
// unfused lowering (a contraction with no feasible configuration is tiled instead of kept whole) and
// by the CUDA writer (which instantiates the chosen configuration).
#pragma once

#include <optional>
#include <string>

#include "contract/gemm_skeleton_fit.h"
#include "plan/plan.h"

namespace solder {

struct SkeletonChoice {
  std::optional<GemmCandidate> chosen;
  std::string why;  // the prediction and binding resource, or why nothing fits
};

SkeletonChoice choose_skeleton_config(const GemmSkeletonProblem& problem, MmaType type, DType output);

}  // namespace solder
