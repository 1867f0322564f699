// The CUDA code generator's writer for kernels that run on the sm_90a GEMM skeleton
// (device/solder/gemm, docs/gemm-skeleton.md): a kernel whose body is one whole `contract` that
// fit_gemm_skeleton (src/contract/gemm_skeleton_fit.h) accepts. The skeleton owns the schedule (TMA
// ring, wgmma, setmaxnreg); this writer chooses the tile configuration and writes the epilogue
// functor — scale, bias, rounding to the destination's dtype and the store — named after the
// program's tensors, plus the launch (tensor maps, shape, grid) the runtime needs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "contract/gemm_skeleton_fit.h"
#include "kernel/kernel_ir.h"

namespace solder {

// Skeleton kernels whose predicted time (the cost model's, for the chosen tile) is at most this take
// programmatic dependent launch (GeneratedKernel::programmatic); longer ones are launched plainly.
// Measured on the H100 (2026-11-26 23:15 UTC, bench/results/h100/gemm-chains3/solder-ab.jsonl, many
// calls per graph replay): with every skeleton kernel launched programmatically, the six gemm_chains
// cases whose kernels are predicted at 3-12 µs ran 0.3-1.2 µs faster per call (ffn S8 17.51 -> 16.44,
// G2 8.68 -> 7.99, G4 17.12 -> 16.08; gated_ffn S8, G2, G4 likewise), and the four whose kernels are
// predicted at 21-59 µs ran 0.5-2.7 µs slower (ffn S1 50.07 -> 51.17, S3 77.93 -> 80.63, G5
// 109.78 -> 110.27, gated_ffn S1 65.72 -> 66.83); why the long kernels lose is not profiled yet
// (bench/NOTES.md, gemm-chains3).
constexpr double kProgrammaticLaunchMaxUs = 16.0;

struct GemmSkeletonKernel {
  std::string source;
  GeneratedKernel info;  // with info.gemm set
};

// The skeleton kernel for `kernel`, or nothing (with `why`) when its body is not one contract the
// skeleton takes.
std::optional<GemmSkeletonKernel> write_gemm_skeleton_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

// The launch plan of one skeleton operand (shared with the prologue path, gemm_prologue_writer.h): its
// global (index in program.globals), solder::gemm::Dtype, layout, and its TMA box (tile_rows rows of
// 128 bytes along K).
GemmSkeletonLaunch::Operand skeleton_launch_operand(const KernelProgram& program, const GemmSkeletonOperand& o, int tile_rows);

// $SOLDER_GEMM_EPILOGUE as the skeleton's row-store mode (sm90_gemm.cuh, row_store_mode_of): "direct"
// 0, "registers" 1, "staged" 2; -1 when unset (the skeleton's default, staged) or not one of those
// (with a warning on stderr).
int gemm_row_store_mode_from_env();

// The tail split (Config::TailSplit, config.cuh) for a persistent launch of `tile_units` tile units on
// `clusters` clusters with `k_tiles` K tiles per tile, as `setting` ($SOLDER_GEMM_TAIL_SPLIT) asks: empty
// or "0", 1 (main's behaviour: no split); "auto", the S in 2 … 8 that ends the partial last wave soonest
// (ceil(tail · S / clusters) / S of a whole tile's time, tail = tile_units % clusters), where that is at
// most 0.8 of a tile and every split keeps at least 4 K tiles, else 1; an integer S in 2 … 16, that S
// where a partial wave exists and K has 4 · S tiles, else 1. No split without a full wave before the tail
// (tile_units <= clusters: split-K's case). Anything else: a warning on stderr, 1.
int gemm_tail_split(int64_t tile_units, int clusters, int k_tiles, const std::string& setting);

// The solder::gemm::Dtype enumerator of a narrow float dtype ("solder::gemm::Dtype::bf16", ...).
const char* skeleton_dtype_name(DType t);

}  // namespace solder
