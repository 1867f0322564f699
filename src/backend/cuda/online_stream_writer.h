// The CUDA code generator's writer for decode attention on the online-state stream
// (src/contract/decode_attention_fit.h): one query row per (batch, head), the keys split over a cluster.
//
// The kernel: 128 threads, 4 warps W (8 by SOLDER_ONLINE_STREAM_WARPS=8); block (row, rank) of a cluster of S
// blocks streams the rank-th S-th of the row's keys, each of its warps one contiguous run of them (the keys
// the where leaves, split evenly over the cluster's W S warps). A key of D columns is D / 8 lanes of 16 bytes (D 128: 16 lanes, two keys per
// warp load), so a warp's load instruction covers 32 / (D / 8) keys; each warp takes U such loads of K and
// U of V per step (2 U independent 16-byte loads in flight per lane, straight from global memory into
// registers, no shared-memory staging; U = 8, or 9 where that saves a step: decode's ragged last key
// would otherwise cost a whole step at KV 1k / 4k / 16k), q in registers (8 columns per lane); a step issues
// all of its loads, then computes (SOLDER_ONLINE_STREAM_PREFETCH=1, an A/B: the loads one step ahead, a
// slot's next K issued after its dot product, its next V after its P·V; SOLDER_ONLINE_STREAM_STRIDE=1, an A/B
// not yet run on a GPU: where the where and the selects hold at the leading keys and K's and V's addresses
// are affine in the key there (checked at every such key), a full step of them loads through two per-warp
// pointers advanced by the constant stride, without each key's address, select and guard: 644 instead of
// 983 SASS instructions per step at llama_decode KV 16k). Per key: 8 FMAs and log2(D / 8) shuffles
// for the dot product, one exp for its probability (computed once per key in each lane group, not per
// column), 8 FMAs into the lane's 8 columns of O. Each lane group keeps its online state (m, z and 8
// columns of the unnormalized O) over its keys; at the end the lane groups of a warp merge by shuffles,
// the warps through shared memory, and the cluster's ranks through distributed shared memory (each rank
// finishes D / S columns, solder::cluster::ptx::map_to_rank), which store O = Σ p·V / z rounded to the
// destination's dtype once. The ragged last key (decode's new token) is one more key whose address
// comes from the select's other side.
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "kernel/kernel_ir.h"

namespace solder {

// The skeleton's name in ContractionSchedule::skeleton (emit --report, the kernel's comment header).
inline constexpr const char* kOnlineStreamSkeleton = "online-state stream";

struct OnlineStreamKernel {
  std::string source;
  GeneratedKernel info;
  std::string tile;      // for the schedule: "one row per block, 8 warps x ..."
  std::string scores, output;  // the contracts it runs (their destinations)
};

// The online-state stream kernel for `kernel`, or nothing (with `why`, and `recognized` when the kernel
// had the attention's shape) when fit_decode_attention refuses it.
std::optional<OnlineStreamKernel> write_online_stream_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why,
                                                             bool* recognized = nullptr);

}  // namespace solder
