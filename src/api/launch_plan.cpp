// The API's launch plan for GEMM-skeleton kernels (launch_plan.h): split-K layout and TMA operands.
#define SOLDER_API_IMPLEMENTATION
#include "api/launch_plan.h"

#include "backend/cuda/tma_operand.h"

#include "ir/diagnostics.h"

namespace solder::api::detail {
namespace {
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

SplitKLayout plan_split_k(const GeneratedModule& module) {
  SplitKLayout layout;
  layout.kernels.resize(module.kernels.size());
  size_t offset = 0;
  for (size_t k = 0; k < module.kernels.size(); ++k) {
    const auto& gemm = module.kernels[k].gemm;
    if (!gemm || (gemm->split_k <= 1 && gemm->tail_split <= 1)) continue;
    if (gemm->workspace_floats <= 0 || gemm->counters <= 0)
      throw Error("compile: internal error: split-K kernel '" + module.kernels[k].name +
                  "' has no workspace size (please report)");
    SplitKSlot& slot = layout.kernels[k];
    slot.partial_floats = gemm->workspace_floats;
    slot.counter_words = gemm->counters;
    slot.partials_offset = static_cast<int64_t>(offset);
    offset = align_up(offset + static_cast<size_t>(gemm->workspace_floats) * 4, kSplitKAlignment);
  }
  layout.counters_begin = offset;
  for (auto& slot : layout.kernels) {
    if (slot.partials_offset < 0) continue;
    slot.counters_offset = static_cast<int64_t>(offset);
    offset += static_cast<size_t>(slot.counter_words) * 4;
  }
  layout.counter_words = (offset - layout.counters_begin) / 4;
  layout.bytes = layout.counter_words > 0 ? align_up(offset, kSplitKAlignment) : 0;
  return layout;
}

bool uses_gemm_skeleton(const GeneratedModule& module) {
  for (const auto& k : module.kernels)
    if (k.gemm || k.attention) return true;
  return false;
}

runtime::GemmOperand gemm_operand(const GemmSkeletonLaunch::Operand& o, std::span<const unsigned long long> pointers) {
  if (o.global >= pointers.size())
    throw Error("internal error: a GEMM operand names global " + std::to_string(o.global) + " of " +
                std::to_string(pointers.size()) + " (please report)");
  return tma_operand(o, pointers[o.global]);
}

std::string check_gemm_operands(const GemmSkeletonLaunch& launch, std::span<const unsigned long long> pointers) {
  runtime::TmaEncodeArgs args;
  std::string a = runtime::plan_gemm_operand(gemm_operand(launch.a, pointers), "A", &args);
  if (!a.empty()) return a;
  std::string b = runtime::plan_gemm_operand(gemm_operand(launch.b, pointers), "B", &args);
  if (!b.empty()) return b;
  if (launch.a_second) {
    std::string a2 = runtime::plan_gemm_operand(gemm_operand(*launch.a_second, pointers), "A (second K range)", &args);
    if (!a2.empty()) return a2;
    std::string b2 = runtime::plan_gemm_operand(gemm_operand(*launch.b_second, pointers), "B (second K range)", &args);
    if (!b2.empty()) return b2;
  }
  if (!launch.b2) return b;
  return runtime::plan_gemm_operand(gemm_operand(*launch.b2, pointers), "B2", &args);
}

std::string check_attention_operands(const AttentionSkeletonLaunch& launch, std::span<const unsigned long long> pointers) {
  runtime::TmaEncodeArgs args;
  std::string q = runtime::plan_gemm_operand(gemm_operand(launch.q, pointers), "Q", &args);
  if (!q.empty()) return q;
  std::string k = runtime::plan_gemm_operand(gemm_operand(launch.k, pointers), "K", &args);
  if (!k.empty()) return k;
  std::string v = runtime::plan_gemm_operand(gemm_operand(launch.v, pointers), "V", &args);
  if (!v.empty()) return v;
  if (launch.bias_tile) {
    std::string t = runtime::plan_gemm_operand(gemm_operand(*launch.bias_tile, pointers), "bias tile", &args);
    if (!t.empty()) return t;
  }
  if (launch.bias_column) {
    std::string c = runtime::plan_gemm_operand(gemm_operand(*launch.bias_column, pointers), "bias column", &args);
    if (!c.empty()) return c;
  }
  if (launch.out) return runtime::plan_gemm_operand(gemm_operand(*launch.out, pointers), "O", &args);
  return "";
}

}  // namespace solder::api::detail
