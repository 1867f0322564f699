// Pass: a whole contraction that the sm_90a GEMM skeleton does not stage only because of its A operand
// runs as a padded copy of A, then the skeleton, instead of the gathered GEMM on mma.sync.
//
// The tensor memory accelerator reads rows whose pitch is a multiple of 16 bytes. nerf_mlp's x ([N, 63]
// f16, 126-byte rows) is not one, and its concatenations cat([x, h4]) (K 319, split at 63) and
// cat([feature, dir]) (K 283, dir 54-byte rows) are computed operands: the skeleton takes none of the
// three, and they run on the gathered GEMM (gathered_gemm_fit.h), at 7-8 % of the tensor rate.
//
// The rule, on the compiled Kernel IR (after the contractions are canonical), for a kernel W that is one
// whole `contract` (its only statement):
//
//   padded  ⇔  the skeleton refuses W's contract as written (fit_gemm_skeleton)
//              and the gathered GEMM takes it (fit_gathered_gemm: one product term after merging K
//                  ranges, A a tree of zero-filled selects over loads, exact in T), with one row axis,
//                  one reduced axis and no batch
//              and the copy is no larger than what A reads: M · Kp · |T| ≤ 1.25 × the bytes the copy
//                  reads of A's tensors (contract/operand_reads.h: each tensor at most whole, at most
//                  M · K elements per load of it), so a concatenation or a re-pitched input, not an
//                  im2col (whose M · K elements re-read a tensor KH · KW times smaller)
//              and the skeleton takes the contract with A = P[m, k] (its B as written),
//
// where Kp is K rounded up to 16 bytes of T. Then a kernel before W copies A into a new intermediate
// P[M, Kp] of type T:
//
//   map P[m_t · R + m, k] = (k < K ? A(m_t · R + m, k) : 0)  over m < R, k < Kp  (guard m_t · R + m < M
//                                                              when ragged)
//
// and W's contract reads A as P[m, k] over k < K. The copy writes whole rows (the generic writer then
// stores them in 16-byte vectors: kernel_writer_row_copy.cpp); P's last Kp − K columns hold zeros and
// are never read: the skeleton's tensor map has K columns with a row pitch of Kp, and TMA fills the
// columns past K with zeros, as it does B's rows past K. The program's meaning is unchanged: A is exact in T (the
// gathered GEMM's condition), so storing it in T changes no value, and the product is Σ over the same
// k < K. The copy reads A's tensors once and writes P once (nerf_mlp at its paper size: x 8.3 MB →
// 8.4 MB for h0; x and h4 41.8 MB → 41.9 MB for h5; feature and dir 37.1 MB → 37.7 MB for hv).
//
// K ranges (contract/gemm_skeleton_fit.h; SOLDER_GEMM_K_RANGES=0 turns them off): a contract of two K-range terms
// (a concatenation, select(k < K1, A1, 0) · B + select(k < K1, 0, A2[k − K1]) · B) is tried first as the
// skeleton's two-range kernel, with the dims of its terms bound to integers. Each range whose A the skeleton
// stages as it is (h4, feat) is read in place; each other range (x, dir: pitches of 126 and 54 bytes) from
// a copy of that range alone, P[m, j] = (j < K_r ? A_r(m, j) : 0) over j < K_r rounded up to 16 bytes, and
// a copy that computes the same tensor as an earlier one of this pass is not made again (h5's x range
// reads h0's copy h0_a_padded). The copies together are at most kPaddedCopyMaxRatio × the bytes of the
// ranges' tensors. Where that does not fit, the whole A is copied as above. nerf_mlp at its paper size:
// the copies write 8.4 + 4.2 MB instead of 8.4 + 41.9 + 37.7 MB.
//
// Conversion and gathered copies (contract/operand_copy_fit.h): a contract this rule does not take, whose
// operand the skeleton cannot stage as written (another dtype, a computed operand, or rows gathered by an
// integer tensor: an embedding's A = emb[tok[t], c], selected weight rows' B = w[idx[n], k]), runs as a
// copy of that operand into T, K-major, then the skeleton, where the price says it pays: the copy's bytes
// at the copy rate (plan/copy_cost.h; a gather reads the M · K elements it selects, at most its table,
// not the table: operand_reads.h) plus the skeleton's prediction, under the gathered GEMM's. The report
// says "gathered copy of A (emb[tok]) to bf16 into ..." with the price, or why not ("no gathered copy of
// A (emb[tok]): copy ... >= gathered GEMM ..."). Why not through the rule above: an index-gathered A is
// not a tree of selects over loads with load-free indices (gathered_gemm_fit.h's leaves), and its
// ratio says nothing about whether it pays — the price does. With V ≥ M table rows the copy writes what
// it reads (ratio 1); with V < M it writes M / V times the table, and still pays at LLM sizes (4096
// tokens, C 4096: 33.6 MB read and 33.6 MB written at the copy rate, about 16 µs, against a product of
// about 1 ms on the gathered GEMM).
//
// Conversion copies (contract/operand_copy_fit.h): a copy whose operand X is read along the side axis (its
// loads' last, contiguous index is the row or column axis, not k: a weight b[k, n] copied into P[n, k])
// transposes through shared memory, one tile of kTransposeCopyTile sides × kTransposeCopyTile k per block:
//
//   map  tile[s, k] = (k_g < K ? X(s_g, k_g) : 0)   over k < 64, s < 64, s fastest (reads along X's rows)
//   barrier
//   map  P[s_g, k_g] = tile[s, k]                    over s < 64, k < 64, k fastest (writes along P's rows)
//
// (s_g = s_t · 64 + s, k_g = k_t · 64 + k, both guarded on a ragged edge; the tile of P's dtype, so its
// store rounds as P's would). SOLDER_TRANSPOSE_COPIES=0 keeps the row copy above for those too (reads
// X column by column; main's form before the tiles), for A/B runs.
//
// SOLDER_PADDED_OPERANDS=0 turns the pass off (main's plan before it: the gathered GEMM), for A/B runs
// and for the gathered GEMM's own tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

// Rows of P per block of the copy kernel: R = 256 / gcd(256, Kp / V), at most kPaddedCopyMaxRows, so that
// the block's 16-byte vectors of P (R · Kp / V, V = 16 / |T|) are a whole number per thread of the
// generic writer's 256 (kernel_writer_row_copy.cpp): nerf_mlp's h0 and h5 32 rows (one and five vectors
// per thread), hv 64 (nine).
constexpr int64_t kPaddedCopyMaxRows = 64;
int64_t padded_copy_rows(int64_t vectors_per_row);
// The largest copy, as a fraction of the bytes A's loads read, that the rule takes.
constexpr double kPaddedCopyMaxRatio = 1.25;

struct PaddedOperands {
  KernelProgram program;
  std::vector<std::string> notes;  // per padded contraction (and per refused candidate), for the report
};

PaddedOperands pad_gathered_operands(const KernelProgram& program);

// The side and k extent of a transposing conversion copy's shared tile.
constexpr int64_t kTransposeCopyTile = 64;

// Whether $SOLDER_TRANSPOSE_COPIES leaves transposing conversion copies on shared tiles (unset or anything but "0").
bool transposing_copies_enabled();

// A transposing copy of this pass read back from its Kernel IR, for the CUDA writer
// (backend/cuda/transpose_copy_writer.h) where X is one load src[k, s] of a global of shape [K, S]:
// P[s, k] = (k < K ? src[k, s] : 0) over s < S, k < Kp, block b the tile (b / k_tiles, b % k_tiles).
struct TransposingCopy {
  std::string src, dst;
  int64_t sides = 0, k = 0, kp = 0;
  int64_t side_tiles = 0, k_tiles = 0;
};
// The copy when `kernel` is exactly one that transposing_copy_kernel builds from such a load; nothing otherwise.
std::optional<TransposingCopy> transposing_copy_of(const KernelProgram& program, const Kernel& kernel);

// Whether $SOLDER_PADDED_OPERANDS leaves the pass on (unset or anything but "0").
bool padded_operands_enabled();

}  // namespace solder
