// Two attention kernels of one program as one launch of the attention skeleton's dual mode
// (device/solder/attention/sm90_attention_dual.cuh): differential attention's halves, one per consumer
// warpgroup, combined in f32 before the output's one rounding.
//
// The fusion plan of differential attention has two kernels: the first computes a0 = softmax(q0·k0ᵀ)·v
// and stores it in f32, the second computes a1 = softmax(q1·k1ᵀ)·v and stores o = a0 − λ·a1, reading a0
// at the stored element. Both are the skeleton's online softmax (mma_stream_skeleton.cpp). The pair runs
// as one kernel when
//   - both kernels are taken by the skeleton, with the same score and mask functors (text, up to the
//     kernels' names), no bias, affine score, data mask or epilogue preload;
//   - the first stores its o / Σp unchanged to an f32 intermediate of the output's shape that no kernel
//     but the second reads, and the second reads it only at the stored element (its epilogue's
//     combine(), MmaStreamWriter::set_dual_first);
//   - Q and K are the same tensors read at a fixed lead block, the second at the first's index + 1
//     (AttentionShape's q_head0 + heads, k_head0 + heads_kv), V the same tensor at the same index, and
//     the batch, heads and sequence lengths agree.
// The dual kernel computes the same values as the pair: each half is the skeleton's attention of the
// same tiles and key order, and the combine reads the first half's f32 o / Σp where the second kernel
// read the stored a0 (f32, unrounded), so the CPU executor's two kernels are its meaning.
// Only rows of at most 32 key tiles (S ≤ 4096 at BN 128) take it: on longer rows the two kernels are
// faster (bench/NOTES.md, tenth session, diff-one). $SOLDER_ATTN_DUAL=0 keeps the two kernels, =1 takes the
// dual kernel at any length (A/B runs).
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/mma_stream_codegen.h"

namespace solder {

// Kernels `first` and `first + 1` of `program` (the attention view: contracts as reduces, P unrounded)
// as one dual kernel named after the second; `named` is the same program with its contracts. nullopt
// with *refusal naming the rule otherwise.
std::optional<AttentionSkeletonKernel> generate_attention_dual_kernel(const KernelProgram& program, const KernelProgram& named, size_t first,
                                                                      std::string* refusal);

}  // namespace solder
