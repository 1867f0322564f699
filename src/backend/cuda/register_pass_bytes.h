// The generic writer's register pass as the fusion tiler sees it (issue 15, eighth session).
//
// The register pass (kernel_writer_registers.cpp) keeps a row kernel's point tiles in registers, so
// the block's on-chip need is its shared memory alone (reduce scratch, per-row values), not the sum
// of its tiles. The fusion tiler (fusion/fuse.cpp, fit_in_registers) asks this when a group's tiles
// exceed the shared-memory budget with the CUDA backend's parameters (FusionParams::streaming_tiles,
// gpu_fusion_params): quant_gemm's amax, scale and aq at K 8192 then stay one kernel instead of a
// statistics kernel and a map kernel.
#pragma once

#include <cstdint>
#include <optional>

#include "kernel/kernel_ir.h"

namespace solder {

struct RegisterPassFit {
  int64_t shared_bytes = 0;  // the block's dynamic shared memory
  int64_t floats = 0;        // tile registers per thread (packed 16-bit pairs half, packed 8-bit a quarter)
};

// What the generic writer gives `kernel` when its register pass takes it, or nullopt when the pass
// does not take it (or the writer refuses the kernel). `context` holds the program's dims and
// globals (the kernel's loads and stores name them).
std::optional<RegisterPassFit> register_pass_fit(const KernelProgram& context, const Kernel& kernel);

// Tile registers per thread the tiler aims at for a row kernel: Q5's rows at 8 per block (8 vectors of
// 8 per thread, bf16 source pairs and packed e4m3 aq: 48) compile to 60 registers, 4 blocks of 256
// threads per SM; 96 (the seventh session's f32 aq) took 89 registers and 2 blocks, 23 % of warps
// active, latency-bound (ncu). Fewer rows per block bring a long row's tiles down to this.
constexpr int64_t kRegisterFloatsTarget = 64;

}  // namespace solder
