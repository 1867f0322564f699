// How the public API launches a compiled module (src/api/solder_api.cpp): the plain kernels take every
// global's pointer; kernels on the sm_90a GEMM skeleton (GeneratedKernel::gemm) take two TMA tensor
// maps (three for a dual-B kernel: A, B, B2), the shape, the epilogue (every global's pointer) and a
// split-K workspace; those on its operand-prologue path take A's and B's maps, the shape, the
// prologue and the epilogue (each every global's pointer); kernels on the attention skeleton
// (GeneratedKernel::attention) take Q's, K's and V's maps, the shape, and the score, mask and epilogue
// functors (each every global's pointer), as the CLI's runtime launches them. Pure host arithmetic,
// no driver: unit-tested on machines without a GPU (tests/unit/api/launch_plan_test.cpp).
//
// Capturable calls. A call only encodes the tensor maps on the host (cuTensorMapEncodeTiled reads no
// device state) and launches; the maps are kernel parameters (__grid_constant__), so a CUDA graph
// captures their values. The split-K state (f32 partials and unsigned counters) is sized here at
// compile time, allocated once when the Kernel is created and its counters zeroed once then; every
// split-K launch leaves its counters zero again (device/solder/gemm), so calls and graph replays need
// no memset. That state belongs to the Kernel: calls of one Kernel must run one after another (one
// stream, or ordered), like the Kernel-owned workspace.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_codegen.h"
#include "runtime/tma.h"

namespace solder::api::detail {

constexpr size_t kSplitKAlignment = 256;

// Where one kernel's split-K partials and counters live in the Kernel's split-K buffer (byte offsets;
// -1 when the kernel does not split K).
struct SplitKSlot {
  int64_t partials_offset = -1, counters_offset = -1;
  int64_t partial_floats = 0, counter_words = 0;
};

// The split-K buffer of a module: every kernel's partials first, then every kernel's counters in one
// contiguous range [counters_begin, counters_begin + 4 * counter_words), zeroed once at creation.
struct SplitKLayout {
  std::vector<SplitKSlot> kernels;  // one per GeneratedModule::kernels
  size_t bytes = 0;                 // 0: no kernel splits K
  size_t counters_begin = 0;
  size_t counter_words = 0;
};

SplitKLayout plan_split_k(const GeneratedModule& module);

// Whether the module has kernels on the GEMM or the attention skeleton (they need NVRTC's -DNDEBUG and
// the CuTe headers).
bool uses_gemm_skeleton(const GeneratedModule& module);

// The TMA operand of a skeleton kernel for this call: its plan from the launch, its base address from
// the call's pointer of that global.
runtime::GemmOperand gemm_operand(const GemmSkeletonLaunch::Operand& operand, std::span<const unsigned long long> pointers);

// The problems the tensor maps of this call would have ("" when none): plan_gemm_operand of A, B and
// (dual-B kernels) B2.
std::string check_gemm_operands(const GemmSkeletonLaunch& launch, std::span<const unsigned long long> pointers);

// The same for an attention-skeleton kernel's Q, K and V maps.
std::string check_attention_operands(const AttentionSkeletonLaunch& launch, std::span<const unsigned long long> pointers);

}  // namespace solder::api::detail
