// The tensor-core emitter: Kernel IR of a streamed two-contraction kernel → CUDA C++ on mma.sync.
//
// The fused lowering turns attention and its variants (causal, sliding window, soft-capping, ALiBi,
// prefix and document masks, GQA) into one kernel of this shape:
//
//   stage A (a 16-bit tile [.., BM, D]) from global memory
//   fill the row states (one value per row i of the block) and the wide accumulators [.., BM, DV]
//   for j_t in begin .. end {
//     stage B [.., BN, D] and V [.., BN, DV]
//     S[.., i, j] = sum(d) A[.., i, d] * B[.., j, d] * scalars        (the scores)
//     row statements: maps of row states, reductions over j of expressions of S and row states
//     wide maps: O[.., i, d] = f(O[.., i, d], row states)               (online rescaling)
//     O[.., i, dv] += sum(j) P(S[.., i, j], row states) * V[.., j, dv]  (the second contraction)
//   }
//   maps of row states and wide tiles; stores to global memory
//
// This emitter keeps S, P, the row states and the wide tiles in registers in the mma.sync m16n8k16
// fragment layout (one warp per 16 rows, BM / 16 warps), loads A once into fragments, streams B and
// V through swizzled shared memory with cp.async (B of the next tile in flight during P·V), and
// evaluates every other statement of the kernel, as written, per fragment element. These choices
// differ from the Kernel IR's float32 arithmetic and are FlashAttention-2's: P is rounded to the
// inputs' 16-bit type before the second contraction; exp is the hardware ex2.approx, and exp(a - b)
// one FFMA into it (CudaExprPrinter::fast_math; tanh is tanh.approx, sigmoid rcp.approx of 1 + ex2.approx); a division by a row-uniform
// value is a product with its reciprocal. The end-to-end checks against the float64 reference cover
// them (bf16-level error). One rewrite is exact: a power-of-two scale of bf16 scores multiplies A's
// fragments once instead of every score (MmaStreamWriter::scale_in_a_).
//
// On Hopper the same kernels take a wgmma path where the shape allows it (bf16, row tile a multiple
// of 64, 64-key tiles, depth and width 64 or 128; mma_stream_wgmma.cpp): one warpgroup per 64 rows,
// A, B and V in 128-byte-swizzled shared memory read through descriptors, a 4-stage ring (3 at width
// 128), the next tile's scores and row statements overlapping P · V where that keeps the meaning. Its
// accumulators are the mma.sync fragments register for register, so every other statement is printed
// as above. SOLDER_MMA_PATH=sync|wgmma-serial forces mma.sync or wgmma without the overlap
// (docs/runtime.md); the kernel's comment names the path and the rules that refused the others.
//
// Tiles that a mask makes empty are skipped (the masked-identity rule, mma_stream_writer.h): the mask
// condition is evaluated over the whole tile in interval arithmetic at run time, from the index
// expressions and the per-tile minimum and maximum of the integer tensors it compares, without
// building a mask tensor (TileMaskRule below; docs/architecture.md, "Tile skipping and block order").
//
// Kernels of any other shape are refused with the rule that refused them; the generic writer of
// cuda_codegen.cpp then handles them.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct MmaStreamKernel {
  std::string source;   // one __global__ function
  GeneratedKernel info;
  std::string summary;  // one line: tiles, warps, tile skipping
};

// The per-tile decision of a mask select(C, S, -inf) over a (row block, key tile) pair. Every name
// below is a variable of `live` and `full`, which hold over the whole tile as interval arithmetic
// (mma_stream_expr.h, IntervalBuilder) decides them:
//   live  false only when C is false at every element of the tile: the tile is skipped
//   full  true only when C is true at every element: the tile runs without mask code (nullopt: never)
// Their variables: the grid variables (the block), `loop_var` (the key tile j_t), and for each data
// range k `lo`/`hi`, the minimum and maximum of an integer tensor's values over the block's rows
// (computed once per block) or over the key tile's columns (per key tile; out-of-bounds columns read
// 0, as the kernel's staging does).
struct TileMaskRule {
  Expr mask;                     // C, over the statement's row and column variables
  std::string row_var, col_var;  // C's row (i) and column (j) variables; other axes of C's statement are 0
  std::vector<std::string> lead_vars;
  std::string loop_var;          // the key tile
  int64_t rows = 0, cols = 0;    // the tile: rows of the block (BM), columns of a key tile (BN)
  Expr loop_begin, loop_end;     // the key tiles of a block: loop_var in [begin, end)
  struct DataRange {
    std::string lo, hi;          // their names in live and full
    bool per_key_tile = false;   // over the key tile's columns (else over the block's rows)
    Expr value;                  // the tensor's value at the row (row_var) or column (col_var), loads of
                                 // inputs 0 out of bounds; undefined when not an expression of the inputs
  };
  std::vector<DataRange> ranges;
  Expr live;
  std::optional<Expr> full;
  // C with the row states and column tiles it reads replaced by `value` (defined when every range's
  // value is): the mask of one element in terms of the inputs.
  Expr mask_of_inputs;
};

// A kernel on the sm_90a attention skeleton (device/solder/attention, docs/attention-skeleton.md):
// the skeleton owns the schedule (TMA producer warp, K/V rings, SS and RS wgmma, ping-pong consumer
// warpgroups); the source holds the generated score, mask and epilogue functors and the instantiation.
struct AttentionSkeletonKernel {
  std::string source;
  GeneratedKernel info;  // with info.attention set
  std::string summary;   // one line: configuration, tiles, the skipping rule
  // For `solder emit --report` / --json (the contractions' reason): the work tiles and which key tiles
  // are skipped by what rule.
  std::string tiles_and_skipping;
  // What the dual mode (attention_dual.h) pairs by: the global the epilogue stores, the tile, and
  // whether the epilogue has combine() (MmaStreamWriter::set_dual_first).
  std::string output;
  bool combine = false;
  // whether it has staged_combine() and staged_row() too (functors.cuh, kStagedCombine).
  bool staged_combine = false;
  bool plain_epilogue = false;  // the stored value is o / Σp itself (no post map, no input read)
  int head_dim = 0, bn = 0;
  bool f16 = false;
};

// The key columns a mask may reach on the skeleton (mma_stream_skeleton.cpp): `mask` over the global
// row `row_` and column `col_` (variables of those names), solved from its linear bounds for the rows
// [row_lo, row_hi]: {lo, hi} (−inf / +inf where a side is not bounded; lo > hi: no column). Every
// column where the mask holds for some of the rows lies in [lo, hi]. *exact (optional): the mask is a
// conjunction of solved bounds, so on a single row (row_lo = row_hi) it holds exactly on [lo, hi].
std::pair<double, double> attention_mask_reach(const Expr& mask, const std::map<std::string, int64_t>& dims, int64_t row_lo, int64_t row_hi,
                                               bool* exact = nullptr);

// The kernel on the attention skeleton, or nothing with *refusal saying which rule refused it (the
// streamed two-contraction emitter below is then the fallback). `contracts` / `contract_kernel` are
// the same kernel before its contracts became reduces (their MMA types).
std::optional<AttentionSkeletonKernel> generate_attention_skeleton_kernel(const KernelProgram& program, const Kernel& kernel,
                                                                          const Kernel& contract_kernel, std::string* refusal);

// The mask rule of an attention-shaped kernel; nullopt when no tile is skipped, with *refusal saying why.
std::optional<TileMaskRule> tile_mask_rule(const KernelProgram& program, const Kernel& kernel, std::string* refusal);

// The kernel's CUDA source when it has the shape above; otherwise std::nullopt and *refusal names
// the rule that refused it.
std::optional<MmaStreamKernel> generate_mma_stream_kernel(const KernelProgram& program, const Kernel& kernel,
                                                          std::string* refusal);

}  // namespace solder
