#include "backend/cuda/fusion_params.h"

#include <cstdlib>
#include <cstring>
#include <exception>

#include "backend/cuda/contract_view.h"
#include "backend/cuda/cuda_names.h"
#include "backend/cuda/kernel_writer.h"
#include "contract/contract_pass.h"

namespace solder {

std::optional<int64_t> generic_writer_shared_bytes(const KernelProgram& context, const Kernel& kernel) {
  try {
    // The kernel as the generic writer meets it in generate_cuda (cuda_codegen.cpp): its contractions
    // canonicalized (compile_program), its names spelled for C++, its contracts the writer's reduces.
    KernelProgram one = context;
    one.kernels = {kernel};
    const KernelProgram named = with_cuda_names(canonicalize_contractions(one).program);
    const KernelProgram view = contracts_as_reduces(named);
    return generic::KernelWriter(view, view.kernels.front()).info().shared_bytes;
  } catch (const std::exception&) {
    return std::nullopt;  // a kernel the generic writer refuses
  }
}

FusionParams gpu_fusion_params() {
  FusionParams params;
  params.grid_tile = 128;
  params.stream_tile = 64;
  params.hold_whole_up_to = 128;
  params.inner_tile = 128;  // head dims up to 128 held whole
  params.score_depth_whole_up_to = 256;  // attention's Q·Kᵀ at head dim 256: one wgmma K loop in the skeleton
  params.stream_one_tile_keys = true;     // attention at S = 64: one key tile on the skeleton
  params.streaming_tiles = true;
  params.product_rows_from_cost_model = true;
  params.split_k_to_fill = true;
  // Split-KV for decode-like streams (group_plan.h); SOLDER_SPLIT_KV=0: the previous plan (the A/B).
  const char* split_kv = std::getenv("SOLDER_SPLIT_KV");
  params.split_unshared_streams = !(split_kv && std::strcmp(split_kv, "0") == 0);
  params.register_pass = register_pass_fit;
  params.register_floats_target = kRegisterFloatsTarget;
  params.writer_shared_bytes = generic_writer_shared_bytes;
  return params;
}

}  // namespace solder
