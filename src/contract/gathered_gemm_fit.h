// Whether a whole contract runs as an implicit GEMM with gathered operands on mma.sync (the CUDA
// backend's gathered-GEMM writer, src/backend/cuda/gathered_gemm_writer.h), and as which problem.
//
// The sm_90a GEMM skeleton stages its operands with TMA, so it takes only plain loads of global
// tensors over one reduced axis, rows of whole 16-byte multiples (gemm_skeleton_fit.h). A
// convolution's A operand is not one: conv_chain's y1[n, o, r, c] = Σ_{ci, kr, kc} select(inside,
// x[n, ci, r + kr − 1, c + kc − 1], 0) · w1[o, ci, kr, kc] reads x at an affine index of a row and a
// reduced axis (im2col), zero-filled at the padding, over three reduced axes. Here the contract is
// read as the implicit GEMM
//     C[b, m, n] = scale · Σ_k A(b, m, k) · B(b, n, k) + bias,  then the epilogue,
// with m the row axes flattened in the destination's order (M = N·H·W output pixels for a
// convolution), n the column axes likewise (C_out), k the reduced axes flattened in the contract's
// order (K = C_in·KH·KW), b the other kept axes (the batch), and A and B any expressions of them —
// each element evaluated where the writer gathers it into shared memory, out-of-range rows, columns
// and depth (ragged edges) read as 0, so they contribute 0 · 0.
//
// It fits when: T is bf16 or f16; the terms are one product after merging K ranges that share their
// other operand (a concatenation along K, nerf_mlp's cat([x, h]): one operand select(c, P, Q));
// each operand is exact in T as written (a load of a T or fp8 tensor, a cast to one, a zero-filled
// select of such values: exact_mma_type), so converting it to T changes nothing; A uses only row,
// reduced and batch axes and B only column, reduced and batch axes; every load reads a global tensor
// (the kernel holds nothing else) and no global is both read and written; there is no `where`, no
// guard, no accumulation and no paired product; it has a row and a column axis and M, N ≥ 16 (a
// matrix-vector or decode product is not one). The scale, the bias, the epilogue and the
// destination's index are any expressions of the domain's axes (and the epilogue of `value`).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

// One leaf of an operand the writer gathers in two phases (issue the loads of a K step into registers
// before the mma of the previous one, store them to shared memory after it): the operand is a tree of
// zero-filled selects over loads of globals, each maybe under casts (conv_chain's select(inside,
// x[..], 0), nerf_mlp's cat: select(c, x[..], h4[..])). Exactly one leaf, or none, is taken at every
// point (its guards: the select conditions along its path, each with the side it takes), so the
// operand's value is the taken leaf's load, cast outermost-last, or 0 where none is.
struct GatherLeaf {
  Expr load;                                         // a LoadNode of a global, its index free of loads
  std::vector<std::pair<Expr, bool>> guards;         // (condition, holds) along the path
  std::vector<DType> casts;                          // outermost first
};

struct GatheredGemmProblem {
  Expr a, b;                                       // A(b, m, k), B(b, n, k): the one product term
  std::vector<Axis> row_axes, column_axes, batch_axes;  // in the destination's order
  std::vector<Axis> reduce_axes;                   // K, flattened in the contract's order
  int64_t m = 1, n = 1, k = 1, batch = 1;
  // Which index runs fastest across a warp's threads when the operand is gathered: its rows (M or N)
  // when the innermost index of its first load uses the innermost row (column) axis — NCHW's pixel
  // column, contiguous in memory — otherwise its depth (K).
  bool a_rows_fastest = false, b_columns_fastest = false;
  // The operand's leaves (GatherLeaf), or empty when it is another expression (the writer evaluates it
  // element by element as written, one load round trip at a time).
  std::vector<GatherLeaf> a_leaves, b_leaves;
  // Whether every integer the operand's gather computes (each index and condition sub-expression,
  // each load's row-major offset) provably stays within ±2^31 over the axes' ranges, the outermost
  // row / reduced axis widened by one tile for the ragged edge (interval analysis, ir/interval.h): the
  // writer then computes indices as 32-bit int; otherwise as the printer's 64-bit long long.
  bool a_index32 = false, b_index32 = false;
  // Whether B is one plain load of a T tensor whose index is exactly the column axes then the reduced
  // axes, in order, with the tensor's shape their extents (a weight w[o, ci, kr, kc] read as
  // B(n, k) = w's row n, element k), K a multiple of 8 and N·K < 2^31: each row of a K step is then
  // whole 16-byte chunks in memory, and the writer copies them with cp.async (no registers, no
  // index decode).
  bool b_rows_contiguous = false;
};

// The operand's GatherLeafs, or nullopt when it is not a tree of selects over (cast) loads of globals
// with load-free indices and conditions, and zeros.
std::optional<std::vector<GatherLeaf>> gather_leaves(const Expr& operand);

struct GatheredGemmFit {
  std::optional<GatheredGemmProblem> problem;
  std::string refusal;
};

// SOLDER_GATHERED_GEMM=0 turns the gathered GEMM off (every whole contraction it would take stays in
// the fused kernels, as before it existed): refused with the reason "off by SOLDER_GATHERED_GEMM=0".
// Any other value, or none, leaves it on.
// `dims` (the program's dim values) bound the operands' DimRefs for the 32-bit proof; without them an
// operand that uses one keeps 64-bit indices.
GatheredGemmFit fit_gathered_gemm(const ContractNode& contract, const std::vector<GlobalTensor>& globals,
                                  const std::map<std::string, int64_t>* dims = nullptr);

// Two whole contracts run as ONE gathered kernel (a chain): the first's result h = epilogue(Σ A1·B1),
// rounded to its declared dtype, stays on chip in shared memory and is the second's A operand.
// conv_chain's two convolutions are the case: y1 (3×3, ReLU as its epilogue, h in f16), then y2 (1×1)
// with K = OC1. Two forms (GatheredChainForm):
// - one block per 32 rows: the block computes h's whole row tile [32 × N1] (the first product's K
//   steps, gathered as in the one-contract kernel), applies the first's scale, bias and epilogue,
//   rounds to T into shared memory, then runs the second product over every column tile of N2 with its
//   K = N1 read from that tile and its B (≤ 64 KB) staged whole in shared memory at the kernel's start;
// - a thread-block cluster of S ranks per 32 rows: rank r takes the r-th S-th of the first product's K
//   steps for the whole row tile (split-K), the partial tiles are summed over distributed shared
//   memory — each rank sums 1/S of the tile, applies the epilogue, rounds to T and writes its part of
//   h into every rank's shared memory (st.shared::cluster) — and then rank r runs the second product
//   over its S-th of N2's columns, with only that slice of B (≤ 64 KB) staged. Nothing of h leaves the
//   cluster; the arithmetic per element of h is the one-block form's up to the order of the K sum.
//
// It fits when each contract fits the gathered GEMM alone; both have T bf16 or f16, the same T;
// the first's destination is a global of exactly T's type (storing it rounds to T, which the tile
// does too); the second's A is exactly a load of that destination whose index is the first's
// destination index with the first's row, batch and column axes replaced by the second's row, batch
// and reduced axes (by position, equal extents), so h's row tile is the second's A row tile and h's
// columns its K; nothing else of the second reads the first's destination; N1 ≤ 256 (h's row tile
// of 32 rows fits in 16 KB); the second's B is a contiguous row load (cp.async) of at most 64 KB per
// block with some cluster of ≤ 8 ranks; the batch is the same.
struct GatheredChainProblem {
  GatheredGemmProblem first, second;
};

// Why fit_gathered_chain or the form choice refuses a chain (typed: the planner and the tests switch
// on it; GatheredChainFit::refusal says the same in words, with the figures).
enum class GatheredChainRefusal {
  none,
  off,                  // SOLDER_GATHERED_CHAIN=0
  first_not_gathered,   // the first product is not a gathered GEMM
  second_not_gathered,  // nor the second
  mixed_types,          // the products round to different T
  h_not_in_t,           // h is not stored in T
  a_not_h,              // the second's A is not a plain load of h at the first's index
  h_read_elsewhere,     // the second reads h outside its A
  h_too_wide,           // N1 over the 256 columns a row tile holds
  b2_not_rows,          // the second's B is not contiguous rows (cp.async)
  b2_too_large,         // the second's B over 64 KB even split over 8 ranks
  form_refused,         // the form forced by SOLDER_GATHERED_CHAIN does not take it (B over 64 KB one-block)
  grid_too_narrow,      // the planner's rule: neither form's grid is wide enough
};
const char* gathered_chain_refusal_name(GatheredChainRefusal r);

struct GatheredChainFit {
  std::optional<GatheredChainProblem> problem;
  std::string refusal;
  GatheredChainRefusal reason = GatheredChainRefusal::none;
};

// SOLDER_GATHERED_CHAIN=0 turns chains off (refused with reason `off`); =1 chains every pair that fits,
// whatever the planner's grid rule says (gathered_chain_forced; tests, tuning), in the form the rule
// prefers; =block and =cluster force that form (a pair the form cannot take stays two kernels).
GatheredChainFit fit_gathered_chain(const ContractNode& first, const ContractNode& second, const std::vector<GlobalTensor>& globals,
                                    const std::map<std::string, int64_t>* dims = nullptr);

// The chained kernel's figures, shared by the planner's rule and the writer: rows per block, and the
// grid (row tiles × batch).
constexpr int kGatheredChainRows = 32;
constexpr int kGatheredChainMaxN1 = 256;
constexpr int64_t kGatheredChainMaxB2Bytes = 64 * 1024;
constexpr int kGatheredChainMaxCluster = 8;
int64_t gathered_chain_blocks(const GatheredChainProblem& p);  // row tiles × batch (one block each)
bool gathered_chain_forced();
// The second product's column tile (N2 rounded to 16 up to 128, else tiles of 128) times their count:
// the rows of its B staged on chip.
int64_t gathered_chain_b2_rows(int64_t n2);

// Which form a chain runs in (the planner's rule and the writer read the same choice).
//   one block per row tile where its B fits (≤ 64 KB), its grid gives at least half the SMs a block
//   and the cluster form below would leave a rank under two K steps or is not taken (C1: 98 blocks, one
//   K step);
//   else a cluster of S ranks per row tile (C5 too: clusters of 2 measured 12.48 µs on the H100 against
//   13.39 for one block per row tile; C1 in clusters 8.45 against 5.56): S the smallest of 2, 4, 8 whose B slice fits in 64 KB,
//   doubled (up to 8) while the doubled grid (row tiles × 2S) still gives each block an SM of its own
//   and every rank keeps at least 2 of the first product's K steps of 64 (C6: 25 row tiles, S 4, 100
//   blocks — 200 blocks of S 8 measured 16.2 µs against 11.7; C7: 7 row tiles, S 8 — its 512 KB B needs
//   8 — 56 blocks), taken where its grid gives at least a quarter of the SMs a block;
//   else none (grid_too_narrow, or b2_too_large).
// SOLDER_GATHERED_CHAIN=1 takes the preferred form whatever the grid; =block / =cluster force a form;
// SOLDER_GATHERED_CHAIN_CLUSTER=2|4|8 sets S for the cluster form (its B slice must still fit).
enum class GatheredChainFormKind { one_block, cluster };
struct GatheredChainForm {
  std::optional<GatheredChainFormKind> kind;  // nothing: refused
  int cluster = 1;                            // ranks per row tile (1 for one_block)
  GatheredChainRefusal reason = GatheredChainRefusal::none;
  int64_t grid = 0;                           // blocks: row tiles × batch × cluster
  std::string why;                            // the figures, for the fusion report
};
// whatever_the_grid: as SOLDER_GATHERED_CHAIN=1 (the writer, for a pair the planner already chained).
GatheredChainForm choose_gathered_chain_form(const GatheredChainProblem& p, int64_t sms, bool whatever_the_grid = false);
// The cluster form's B slice per rank: its columns of N2 (a multiple of 16, or of 128 above 128).
int64_t gathered_chain_rank_columns(int64_t n2, int cluster);

}  // namespace solder
