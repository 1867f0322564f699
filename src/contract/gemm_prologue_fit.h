// Whether the GEMM skeleton's operand-prologue path (device/solder/gemm/sm90_gemm_prologue.cuh) takes a
// prologue contraction (lower/lower_prologue.h: side reduces of register buffers, then one contract
// whose A is computed from one staged global X[m, k]), and the problem it runs: X as A's staged
// source (16-bit, K-major), B a load as for the plain skeleton, one row axis, no batch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "contract/gemm_skeleton_fit.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct GemmPrologueProblem {
  GemmSkeletonProblem problem;             // problem.a: the staged source X
  const ContractNode* contract = nullptr;  // the kernel's contract
  std::vector<const ReduceNode*> sides;    // the side reductions, in order
  bool pre_sweep = false;                  // A reads a side value: sweep the A stripe first
};

struct GemmPrologueFit {
  std::optional<GemmPrologueProblem> problem;
  std::string refusal;
};

GemmPrologueFit fit_gemm_prologue(const Kernel& kernel, const std::vector<GlobalTensor>& globals);

}  // namespace solder
