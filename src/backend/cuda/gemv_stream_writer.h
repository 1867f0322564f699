// The CUDA code generator's writer for whole contracts on the GEMV stream (src/contract/gemv_fit.h):
// matrix-vector products, decode's projections, C[n] = Σ_k V(k) · W(k, n) with W contiguous along n.
//
// The kernel: 256 threads; each owns 8 contiguous outputs (one 16-byte load of W per k) and one slice
// of the block's K rows (the block: NV column vectors × 256 / NV slices). A thread-block cluster of S
// blocks splits K: rank r takes the r-th S-th of K. Each block first puts its K range of V (as float)
// and of W's row offsets into shared memory; the main loop then issues U = 8 independent 16-byte loads
// of W per thread (with the matching V from shared memory) before their 64 FMAs, accumulating in f32
// registers. The block sums its slices through shared memory, the cluster sums its ranks through
// distributed shared memory (each rank 1/S of the block's outputs), and the epilogue applies the
// contract's scale, bias and epilogue and stores, rounded to the destination's dtype once. NV and S:
// the widest NV (32, 16, 8) with the smallest S (1, 2, 4, 8) that gives 1.5 blocks per SM (one wave
// of two or three per SM, each thread 128 bytes of W in flight: 64-96 KB per SM) and each thread at
// least 8 rows of K; else NV 8 with the largest S that keeps 8 rows per thread. SOLDER_GEMV_SHAPE=NV,S
// overrides the choice (tuning).
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "kernel/kernel_ir.h"

namespace solder {

// The skeleton's name in ContractionSchedule::skeleton (emit --report, the kernel's comment header).
inline constexpr const char* kGemvStreamSkeleton = "GEMV stream";

struct GemvStreamKernel {
  std::string source;
  GeneratedKernel info;
  int vectors = 0;  // NV: column vectors (8 outputs each) per block
  int split = 1;    // S: the cluster's ranks along K
};

// The GEMV-stream kernel for `kernel`, or nothing (with `why`) when its body is not one whole contract
// that fit_gemv takes.
std::optional<GemvStreamKernel> write_gemv_stream_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

}  // namespace solder
