#include "backend/cuda/fusion_params.h"

#include <cstdlib>
#include <cstring>

namespace solder {

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
  return params;
}

}  // namespace solder
