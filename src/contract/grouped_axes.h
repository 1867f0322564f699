// A kept axis read as h // G (grouped-query attention's shared heads: bmm_gqa's k[b, h // G, j, d]) split
// into h = h_kv · G + h_g, so that the GEMM skeleton's batch has one stride.
//
// The skeleton reads each operand's batch at one stride (gemm_skeleton_fit.h). q[b, h, i, d] · k[b, h // G,
// j, d] over the batch (b, h) has none for k: consecutive heads h read the same k head G times. With
//   h_kv = h // G  (extent H / G)  and  h_g = h mod G  (extent G),  h = h_kv · G + h_g,
// k reads [b, h_kv, j, d] (batch (b, h_kv), one stride) and q reads [b, h_kv · G + h_g, i, d], which is q
// viewed as [B, H / G, G, S, D] at [b, h_kv, h_g, i, d]: h_g is a row axis beside i (q's G · S rows of one
// KV head are consecutive), the batch (b, h_kv) has one stride, and the product is one batched GEMM of
// M = G · S rows per KV head (operand_of reads an index x · C + y as two dims of extents shape / C and C).
// The change of variables is exact (a bijection of the domain), so the program's meaning is unchanged.
//
// Taken when one kept axis h (not reduced) is read somewhere as h // G with G an integer or a dim of the
// program that divides h's extent, G > 1, and h is not the destination's last index. Nothing otherwise.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "kernel/kernel_ir.h"

namespace solder {

std::optional<ReduceNode> split_grouped_axis(const ReduceNode& reduce, const std::map<std::string, int64_t>& dims);

// Whether lower_whole_contraction tries the split: $SOLDER_GROUPED_AXES=1. Off by default: on the H200
// (opcopy's call, 2026-11-29) bmm_gqa's scores at B 2, H 32, HKV 8, S 1024, D 128 ran 270.1 µs split against
// main's implicit GEMM's 261.4 (torch.compile 57.7): the skeleton then stored element by element, its
// destination's head index h_kv · G + h_g no plain variable. The row-store rule since takes such an index
// (gemm_row_stores); that form is not yet measured on the GPU.
bool grouped_axes_enabled();

}  // namespace solder
