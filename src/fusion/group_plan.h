// Planning one fused kernel: which dims become the grid, which one is streamed, which are held
// whole on chip, and in which phase each definition runs.
//
// DIMS. The index variables of the group's definitions fall into classes that always take the same
// value: a consumer that reads a producer (or an input another member also reads) with a plain
// variable at some position shares that dim with it. Each class gets one role:
//   grid      tiled across blocks (the logical grid, Flashlight §3.6);
//   stream    the one dim walked tile by tile in a loop, with cascaded reductions over it updated
//             online (demotion of the producers' p-dim into an r-dim, §3.2; RedFuser's incremental
//             form);
//   resident  held whole in one tile (tiling-aware dimension elimination, §3.5): every definition
//             can use all of it, in any order;
//   inner     a reduction dim of one definition only, looped over inside the kernel (a GEMM's k).
// A dim read at computed indices (i − IN, h // G of a member) must be resident.
//
// PHASES. pre (before the stream loop, no stream dim), per_tile (has the stream dim as a p-dim:
// computed for each tile), cascade (reduces over the stream dim: updated online), post (after the
// loop). With no stream dim everything is pre, in program order. A cascade member reads no post
// member, and reads an earlier cascade member's running value only at indices that do not use its
// own reduced variables (one D per element; a polynomial state may index D by a reduced dim held
// whole, one centre per value): otherwise the stream is refused.
//
// The plan refuses — with the rule that refused it — when the dims do not align, a cascade is not
// decomposable and its dim cannot be held whole, or the on-chip buffers exceed the budget.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "algebra/decompose.h"
#include "ir/verifier.h"

namespace solder {

struct KernelProgram;
struct Kernel;

// A kernel as a backend's register pass holds it (FusionParams::register_pass).
struct RegisterPassFit {
  int64_t shared_bytes = 0;  // the block's dynamic shared memory
  int64_t floats = 0;        // tile registers per thread (packed 16-bit pairs half, packed 8-bit a quarter)
};

struct FusionParams {
  int64_t grid_tile = 16;         // tile of the innermost grid dim (others: 1; a tensor-core product's rows: below)
  int64_t stream_tile = 16;       // tile of the streamed dim
  int64_t hold_whole_up_to = 0;   // a cascade dim this short is held whole, not streamed (0: one stream tile)
  int64_t inner_tile = 16;        // tile of inner reduction loops
  // A streamed score contraction's reduced dim (attention's head dim in S = Q·Kᵀ: a contraction over one
  // dim whose kept dims include the stream, in a group that takes the scores' maximum over the stream and
  // reduces the stream by a second contraction) up to this extent is held whole, not an inner loop of
  // inner_tile (0: never). The GPU: 256, the attention skeleton's widest head dim, whose Q·Kᵀ is one wgmma
  // K loop over the whole depth.
  int64_t score_depth_whole_up_to = 0;
  // Attention's key dim (softmax_keys_depth in group_plan.cpp) of exactly one stream tile is streamed,
  // one key tile, where it is not held whole (hold_whole_up_to 0: fuse.cpp's second attempt, after
  // holding it whole left the grid too few blocks) and the scores' depth spans two stream tiles or more,
  // instead of held whole with that depth split across blocks (split_k_to_fill: a cluster merging
  // partial score tiles, over 227 KB of shared memory for fp8 at head dim 128): the attention
  // skeleton's form at S = stream_tile, as at every longer S. The GPU sets it.
  bool stream_one_tile_keys = false;
  int64_t resident_limit = 512;   // largest extent held whole when streaming is possible
  int64_t on_chip_budget = 192 * 1024;  // bytes of tiles, states and staged inputs per block
  int min_blocks_for_single_segment = 64;  // below this, split the stream across blocks
  // The row tile of a matrix product on tensor cores (the grid dim next to the innermost one): false,
  // grid_tile (the CPU executor's small tiles); true (the GPU), the cost model's choice of BM, 64 or
  // 128 rows (src/plan, plan_gemm over the sm_90a catalogue at the column tile), never fewer rows to
  // fill the grid: a kernel with few blocks splits its stream across blocks instead (segments).
  bool product_rows_from_cost_model = false;
  // A kernel with a contraction, no stream and fewer blocks than the streaming tiles aim at (two per SM)
  // streams the contraction's K and splits it into segments across blocks (the GPU: decode GEMVs).
  bool split_k_to_fill = false;
  // Split-KV (flash-decoding, issue 17 / 15): a group with a contraction whose streamed tiles no two
  // rows of its grid share -- every streamed input is indexed by every grid dim, as decode's K and V
  // caches are by (b, h): one query row per block -- runs one row per block (the tiler, fuse.cpp,
  // sets the innermost grid tile to 1 instead of splitting the group for capacity: rows that share no
  // tile gain nothing from sharing a block), and its stream is split into segments until the grid
  // has fill_blocks() blocks (streaming_blocks_per_sm per SM), rounded down to one cluster of
  // segments (merged through DSM, one launch) when that keeps 90 % of them. The GPU sets it
  // (SOLDER_SPLIT_KV=0 turns it off: the previous plan, three kernels s, fused_z, a for
  // llama_decode's attention); the CPU executor's tests set it to check the plan's result.
  bool split_unshared_streams = false;

  // Memory-bound tiles for groups without a contraction (no sum over a product of two loads that
  // each lack a kept dim of the other; those keep the tiles above, for the tensor-core emitter). When
  // `streaming_tiles` is set, such a group gets few rows per block and a long stream tile: about
  // `streaming_tile_elements` staged elements per block and step, the innermost grid dim tiled to at
  // least one 32-byte sector where it is contiguous in an input, and the stream split into segments
  // only when the grid has fewer than `streaming_blocks_per_sm` blocks per SM of the hardware
  // description (src/hw, default_hardware(): 132 SMs on the H100).
  bool streaming_tiles = false;
  int64_t streaming_tile_elements = 4096;
  int64_t streaming_blocks_per_sm = 2;

  // A backend that keeps a row kernel's point tiles in registers (the CUDA generic writer's register
  // pass) says so here, and the tiler (fuse.cpp, fit_in_registers) counts such a kernel's on-chip need
  // as the pass holds it: its shared memory alone, not the sum of its tiles. `register_pass` answers
  // for one lowered kernel (nullopt: the pass does not take it); `register_floats_target` is the tile
  // registers per thread the tiler aims at for a row kernel (fewer rows per block above it). Empty
  // (the CPU executor, and the default): every tile is counted as a tile.
  std::function<std::optional<RegisterPassFit>(const KernelProgram& context, const Kernel& kernel)> register_pass;
  int64_t register_floats_target = 64;

  // A backend whose writer asks a kernel without a stream for more shared memory than its tiles (the
  // CUDA generic writer: a contraction loop's 16-bit operand buffers, two to four stages deep, beside
  // the other tiles as words; the reduce scratch) says how much here, and the tiler (fuse.cpp) takes a
  // tile only if that fits `shared_memory_limit`: otherwise the tile is over capacity, and smaller
  // tiles are tried as for the budget above (evoformer at head dim 256: the score kernel's 128 × 128
  // tile over a depth of 128 asks for 266240 bytes). A kernel with a stream is not asked: the attention
  // writers choose its tiles and staging themselves. nullopt: the writer does not take the kernel.
  // Empty (the CPU executor, and the default): nothing beyond the budget is counted.
  std::function<std::optional<int64_t>(const KernelProgram& context, const Kernel& kernel)> writer_shared_bytes;
  int64_t shared_memory_limit = 227 * 1024;  // the largest dynamic shared memory of one block (sm_90)
};

// The CUDA backend's parameters: gpu_fusion_params (backend/cuda/fusion_params.h).

enum class DimRole { grid, stream, resident, inner };
std::string_view dim_role_name(DimRole role);

struct GroupDim {
  std::string name;      // for messages and variable names (unique in the group)
  int64_t extent = 1;
  DimRole role = DimRole::resident;
  int64_t tile = 1;      // grid/stream/inner: tile size; resident: extent
  bool whole = false;    // read at computed indices: must be resident
  int64_t tiles() const { return (extent + tile - 1) / tile; }
  bool ragged() const { return extent % tile != 0; }
};

enum class Phase { pre, per_tile, cascade, post };
std::string_view phase_name(Phase phase);

struct GroupMember {
  Definition def;                  // with pointwise producers inlined
  Phase phase = Phase::pre;
  std::vector<int> p_dims, r_dims; // dim of each p-/r-variable
  bool exported = false;           // written to global memory (its value, its indices or both)
  bool value_exported = false;     // the value is written to global memory
  bool index_exported = false;     // topk: the indices are written to global memory
  bool recomputed = false;         // lacks a grid dim: every block computes it again
  Decomposition decomposition;     // cascade members
  std::optional<std::string> d_extensive;  // polynomial: its D is a plain sum (centre extrapolated)
  DType dtype = DType::f32;
  int dim_of(const std::string& var) const;  // -1 when not a variable of this member
};

struct GroupPlan {
  std::vector<GroupMember> members;
  std::vector<GroupDim> dims;
  int stream = -1;       // the streamed dim, or -1
  int segments = 1;      // >1: the stream is split across blocks (multi-segment), merged after
  // With a stream: some grid dim is absent from a streamed input's indices, so the blocks (or rows of
  // a block) along it read the same streamed tiles (prefill's query rows). false: every streamed
  // input is indexed by every grid dim (decode's one query row per (b, h)).
  bool grid_shares_stream = true;
  std::vector<std::string> notes;  // decisions, for the fusion report
  int64_t on_chip_bytes = 0;

  const GroupMember* member(const std::string& name) const;
  std::vector<int> grid_dims() const;
};

struct PlanAttempt {
  std::optional<GroupPlan> plan;
  std::string refusal;  // why not, when plan is empty
  bool over_capacity = false;  // refused for the on-chip budget alone (smaller tiles may fit)
};

// Plans a kernel for `defs` (inlined definitions in program order). `exported` names the results
// needed outside the group.
PlanAttempt plan_group(const BoundProgram& program, const std::vector<Definition>& defs,
                       const std::vector<std::string>& exported, const FusionParams& params);

}  // namespace solder
