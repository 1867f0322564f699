// The fusion parameters of the CUDA backend, and its register pass as the fusion tiler sees it.
//
// The fusion layer (src/fusion) knows no backend: it takes a FusionParams (fusion/group_plan.h). This
// header gives the CUDA backend's: larger tiles than the CPU executor's, and the generic writer's
// register pass (kernel_writer_registers.cpp), which keeps a row kernel's point tiles in registers, so
// that the block's on-chip need is its shared memory alone (reduce scratch, per-row values), not the
// sum of its tiles. The tiler (fusion/fuse.cpp, fit_in_registers) asks it when a group's tiles exceed
// the shared-memory budget: quant_gemm's amax, scale and aq at K 8192 then stay one kernel instead of a
// statistics kernel and a map kernel (issue 15, eighth session).
#pragma once

#include <cstdint>
#include <optional>

#include "fusion/group_plan.h"
#include "kernel/kernel_ir.h"

namespace solder {

// What the generic writer gives `kernel` when its register pass takes it, or nullopt when the pass
// does not take it (or the writer refuses the kernel). `context` holds the program's dims and
// globals (the kernel's loads and stores name them).
std::optional<RegisterPassFit> register_pass_fit(const KernelProgram& context, const Kernel& kernel);

// The dynamic shared memory per block that the generic writer asks for `kernel` (its tiles, a
// contraction loop's staging buffers, the reduce scratch, the collectives' mailbox), or nullopt when
// it refuses the kernel. FusionParams::writer_shared_bytes: the tiler counts it for kernels without a
// stream, which the generic writer writes.
std::optional<int64_t> generic_writer_shared_bytes(const KernelProgram& context, const Kernel& kernel);

// Tile registers per thread the tiler aims at for a row kernel: Q5's rows at 8 per block (8 vectors of
// 8 per thread, bf16 source pairs and packed e4m3 aq: 48) compile to 60 registers, 4 blocks of 256
// threads per SM; 96 (the seventh session's f32 aq) took 89 registers and 2 blocks, 23 % of warps
// active, latency-bound (ncu). Fewer rows per block bring a long row's tiles down to this.
constexpr int64_t kRegisterFloatsTarget = 64;

// The parameters for the CUDA backend: tiles that fill a block of 8 warps (128 rows of the innermost
// grid dim, one 16-row tensor-core fragment per warp; a product's rows from the cost model) and stream
// 64 elements per step for groups with a contraction, holding a cascade dim of up to 128 whole (two
// steps of a stream would re-stage the other operands of its contraction: moe_routing R7, E = 128,
// 46 -> 39 us on the H100, session 4); streaming tiles (few rows, ~4K elements per step) for the
// memory-bound rest; the register pass above. The CPU defaults (FusionParams) stay small so that the
// executor's tests stay fast. Split-KV for decode-like streams is on (FusionParams::split_unshared_streams)
// unless the environment sets SOLDER_SPLIT_KV=0.
FusionParams gpu_fusion_params();

}  // namespace solder
