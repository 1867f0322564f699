// Whether a fused kernel is decode's attention with one query row per block, and as which problem:
// the input of the online-state stream (the CUDA backend's online_stream_writer.h).
//
// The fusion planner's split-KV rule (group_plan.h, FusionParams::split_unshared_streams) puts a
// decode attention — s = scale · Σ_d q·K, m = max_j s, z = Σ_j exp(s − m), o = Σ_j p·V / z — into one
// kernel with one query row per block and the key stream split into segments merged through DSM. The
// generic writer runs that kernel as staged tiles and per-statement loops; this fit reads it back as
//     out[row, d] = Σ_j round_T(exp(s_j − m)) · round_T(V(j, d)) / Σ_j exp(s_j − m),
//     s_j = scale · Σ_d round_T(q(d)) · round_T(K(j, d)),   over the keys j where `key_where` holds,
// with m the running maximum (the online form the kernel's statements compute), so that a dedicated
// writer can stream K and V straight from global memory into registers.
//
// It fits when: the kernel has one stream loop over key tiles holding exactly two contracts (the
// scores, whose destination the second one's probabilities read, and the output), one max and one sum
// reduce of the scores; the scores' contract has one product term, one reduced axis (the columns D)
// and one kept axis of more than one point (the key in the tile); the output's contract has one kept
// axis of more than one point (the columns) and the key as its one reduced axis; each of its terms is
// exp(s − m) times a piece of V; K and V are, per key, one load of a global (or a select on a
// condition of the key between two globals: decode's concatenated new token, the ragged last key)
// whose last index is the column, of T's dtype, rows a multiple of 8 elements; D is a multiple of 8
// and D / 8 divides 32 (a key is D / 8 lanes of 16 bytes); the kernel's one global write stores the
// normalized output; the segments are the grid's last dim and one cluster (the DSM merge). The
// refusal names the first rule that failed; `recognized` says whether the kernel had the attention's
// shape at all (a stream with two contracts), so that the report states refusals only there.
//
// SOLDER_ONLINE_STREAM=0 turns it off (refused "off by SOLDER_ONLINE_STREAM=0": the generic writer
// runs the kernel, the A/B knob).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

// The variables the problem's expressions use besides the row grid variables and the stream loop's:
// the key's index inside its tile, and the column.
inline constexpr const char* kKeyInTileVar = "key_in_tile_";
inline constexpr const char* kColumnVar = "column_";

// K(j, d) or V(j, d): `when_true` at every key, or select(cond, when_true, when_false) with cond an
// expression of the key (kKeyInTileVar and the tile variable). Each side is a LoadNode of a global whose
// last index is kColumnVar.
struct KeyOperand {
  Expr cond;
  Expr when_true, when_false;
};

struct DecodeAttentionProblem {
  std::vector<GridDim> rows;  // the grid dims but the segment dim: one query row per block
  int segments = 1;           // the cluster's blocks along the key stream (the grid's last dim; 1: none)
  std::string tile_var;       // the stream loop's variable: key = tile_var · key_tile + kKeyInTileVar
  int64_t key_tile = 1;
  int64_t key_tiles = 0;      // the tiles over all segments: keys [0, key_tiles · key_tile)
  Expr key_where;             // keys where it is false do not contribute (undefined: all)
  int64_t columns = 0;        // D
  Expr query;                 // q at (row, kColumnVar): an expression of globals
  KeyOperand key, value;
  Expr score_scale;           // applied after the dot product (undefined: 1)
  MmaType type = MmaType::f16;  // T of both products
  Access dst;                 // the global output at (row, kColumnVar)
  std::string scores, output; // the two contracts' destinations (for the schedule)
};

struct DecodeAttentionFit {
  std::optional<DecodeAttentionProblem> problem;
  std::string refusal;
  bool recognized = false;  // the kernel has a stream loop with two contracts (the attention's shape)
};

DecodeAttentionFit fit_decode_attention(const Kernel& kernel, const KernelProgram& program);

// Whether SOLDER_ONLINE_STREAM leaves the online-state stream on (unset or any value but "0").
bool online_stream_enabled();

}  // namespace solder
