// The functors the attention skeleton (sm90_attention.cuh) is instantiated with: what the code
// generator writes for one attention variant, and the defaults.
//
// ---- Score functor (the score modifier; template parameter Score) -------------------------------
//
//   struct Score {
//     float scale_log2;                         // log2(e) · the softmax scale, applied after score()
//     static constexpr bool kIdentity = ...;    // true: score() returns `dot` (the skeleton skips it)
//     // The logit of query row `row` and key `col` of head bh = b·heads + h, from the f32 dot product.
//     __device__ float operator()(int bh, int row, int col, float dot) const;
//   };
//
// p = exp2(scale_log2 · (score − max)) = exp(scale · (score − max)): the scale is folded into one FFMA
// per score with the running maximum. Softcap, ALiBi-style biases (indexed by i − j and head), per-row
// or per-column factors go into operator(); it is called once per computed score (masked ones
// included) and must be a pure function of its arguments.
//
// An affine score (optional: `static constexpr bool kAffine = true;`, then operator() is never called):
//
//     // score(bh, row, col, dot) = a·dot + u·(col − row) + w·row + c, the four factors of head bh
//     __device__ void affine(int bh, float* a, float* u, float* w, float* c) const;
//
// With two consumer warpgroups (and no kAffinePositiveA) the skeleton asks for the factors once per work
// tile and splits the bias into a column term and a row shift. The column term u·k, for each of the thread's BN / 4 constant column
// offsets k inside a key tile, is formed once per work tile and kept in registers; the row shift
// u·(col0 + lane's column − row) + w·row + c (an exact integer times u, so no precision is lost at large
// rows or columns) once per key tile and row. Per score one FFMA forms s' = a·dot + u·k; the row state
// takes the shift per row (OnlineSoftmax::update_shifted): the row's maximum is max(s') + shift, and each
// weight is exp2(scale_log2 · s' − scale_log2 · (max − shift)), so the score a·dot + u·(col − row) + w·row
// + c is never formed per element (ALiBi: a = scale, u = the head's slope, w = c = 0).
//
// With three consumers (a 128-register cap: the BN / 4 column terms do not fit; no kAffinePositiveA), or with
// `static constexpr bool kAffineTwoFfma = true;`, the skeleton adds the whole bias per score: the row base
// u·(col0 + lane's column − row) + w·row + c once per key tile and row, u times the element's constant
// column offset added to it by one FFMA (which does not wait for S), then a·dot by another. (Forming the
// column terms per key tile instead, after S, measured 2–3 % slower there: bench/NOTES.md, attn-alibi.)
//
// With `static constexpr bool kAffinePositiveA = true;` (the functor promises a > 0 for every head: ALiBi's
// a is the softmax scale; two or three consumers) the skeleton takes the scaled row shift instead: it divides
// the score by a, s'' = dot + (u / a)·k by one FFMA per score whose column offset k is the instruction's
// immediate operand (so no column terms in registers), the row shift (u·(col0 + lane's column − row) + w·row
// + c) / a once per key tile and row, and the row state's scale a·scale_log2: the weights are those of the
// score a·s'' + shift, up to rounding (u / a, and the shift's division, one rounding each).
//
// The column term by the tensor cores (optional, with kAffinePositiveA: `static constexpr bool
// kAffineColumnMma = true;`; bf16 / f16 Configs with BN 128): the scaled row shift's s'' = dot + (u / a)·n, n
// the key's offset in its tile (0 … 127), is formed by the S = Q·Kᵀ accumulation itself instead of by one FFMA
// per score. Before the tile's Q·Kᵀ k-blocks one m64n128k16 bf16 wgmma writes (u / a)·n into the accumulator:
// A in registers (four per thread) holds u / a as three bf16 pieces (hi + mid + lo = u / a exactly) at k = 0, 1,
// 2, B is a constant 2176-byte shared tile of the offsets (rows n = 0 … 135 holding n at k = 0, 1, 2). The
// products are exact; the sums round as the accumulation of S does. Per key tile and row the row shift
// (u·(col0 − row) + w·row + c) / a, as in the scaled form. Costs a quarter more tensor work for S at head dim
// 64 (one k-block of 16 beside four) and no instruction per score. Skipped (the FFMA form) where the tile
// does not fit beside the Config's shared memory (the short-row hd64 kernel's six stages).
//
// A score with a bias (optional: `static constexpr bool kBias = true;`, then operator() is never called):
//
//     // score(bh, row, col, dot) = dot_factor(bh) · dot + bias(bh, row, col)
//     __device__ float dot_factor(int bh) const;
//     __device__ float bias(int bh, int row, int col) const;   // any pure function: a pair bias read
//                                                             // from global memory, a column mask bias
//
// The skeleton reads the bias of a key tile (one call per score) right after issuing that tile's
// S = Q·Kᵀ, so that the loads (from L2 or HBM) overlap the tensor cores, and adds it with one FFMA per
// score once S is there. dot_factor() is asked once per work tile.
//
// A staged bias (optional, with kBias: `static constexpr int kStagedBias = 1, 2 or 3;` and the Config's
// StagedBias the same): the bias is a function of one element of a 16-bit tile tensor at [row][col]
// (bit 1: a pair bias) and one byte of a column vector at [col] (bit 2: a key mask), which the producer
// loads by TMA into each K stage, on K's mbarrier; the consumers read them from shared memory in the
// accumulator layout (one 4-byte load per two scores of the tile, one 2-byte load per two columns),
// right after issuing S = Q·Kᵀ, and bias() is never called:
//
//     using BiasTile = __nv_bfloat16;      // the tile's element type (2 bytes)
//     using BiasColumn = unsigned char;    // the column vector's element type (1 byte)
//     TensorMap bias_tile;                 // bit 1: K-major rank 3 {keys, rows, batches}, box {64, 64, 1},
//                                          //        128-byte swizzle (a GEMM operand, tile_rows = tile_k = 64)
//     TensorMap bias_column;               // bit 2: rank 3 {keys, rows, 1}, box {128, 1, 1}, no swizzle
//     __device__ int bias_tile_batch(int bh) const;    // the tile map's batch of head bh
//     __device__ int bias_column_row(int bh) const;    // the column map's row of head bh
//     // the bias from the staged elements (t: tile[bh][row][col], c: column[bh][col]; 0 when not staged)
//     __device__ float staged_bias(int bh, int row, int col, BiasTile t, BiasColumn c) const;
//
// Rows and keys past the tensors' extents read zeros (TMA fill); keys ≥ seq_k are masked as always. The
// kernel takes the functor as a __grid_constant__ parameter, so the maps are read in parameter space.
//
// A staged bias that is a sum (optional, with kStagedBias = 3: `static constexpr bool kStagedSum = true;`):
// staged_bias(bh, row, col, t, c) is float(t) + staged_column(bh, col, c), one f32 addition, the column
// term independent of the row. The skeleton then forms staged_column() once per key column (BN / 4 per
// thread and key tile, shared by the thread's two rows), converts the tile's 16-bit pairs to f32 by one
// integer operation each and adds the two by one FADD per score; staged_bias() is not called. Same
// values as staged_bias(), with fewer instructions per score.
//
//     __device__ float staged_column(int bh, int col, BiasColumn c) const;
//
// The row state's instruction order (optional: `static constexpr int kSoftmaxSchedule = 0, 1 or 2;`, the
// same values in every order): 0 has OnlineSoftmax keep one running maximum per row; 1 takes each row's
// maximum from partial maxima (a shorter dependent chain); 2 also ends ptxas's instruction block after the
// weights, so that the wait for the previous P·V, which the skeleton writes after the row state's update,
// stays after the exponentials and that P·V runs beside them (with 0 or 1 ptxas places that wait before the
// softmax). Without the member the skeleton takes 0 (the dual mode, sm90_attention_dual.cuh, always). Level
// 2 spills where 168 registers are tight: three consumers, head dim 128, fp8, and many hd64 two-consumer
// kernels with a mask, a bias, softcap or the dual mode; the emitted vanilla / alibi S 1k kernels fit.
//
// The weights' exponentials on the FMA pipe (optional: `static constexpr int kExp2Emulated = K;`, 0 ≤ K ≤ 16):
// K of every 16 weights a thread computes per key tile are solder::tile::exp2_poly (tile/exp2_poly.cuh: range
// reduction and a degree-4 polynomial, ten FMA- and ALU-pipe instructions, relative error ≤ 3.0e-6) instead
// of ex2.approx (one MUFU.EX2), so that the MUFU (XU) pipe carries 16 − K of 16 and the issue slots the rest.
// Weight i of the fragment is emulated when ⌊(i + 1)·K / 16⌋ > ⌊i·K / 16⌋ (K spread evenly over the tile);
// the rows' correction factors stay on ex2.approx. Both give +0 for −inf and NaN for NaN; the values differ
// by the two approximations' errors (≤ 3.0e-6 and ≈ 2^-22 relative), far under the weights' rounding to
// 16 bits. Without the member the skeleton takes SOLDER_ATTN_EXP2_EMULATED_DEFAULT (a macro, 0 unless the
// includer defines it: the device tests' builds with the emulation on; sm90_attention_dual.cuh likewise).
//
// ---- Mask functor (the tile range; template parameter Mask) ------------------------------------------
//
//   struct Mask {
//     // The key tiles [*begin, *end) that query rows [row0, row0 + rows) of head bh may see at all (the
//     // skeleton clamps them to the tiles of seq_k). Tiles outside are never loaded nor computed.
//     __device__ void key_tiles(int bh, int row0, int rows, int seq_k, int bn, int* begin, int* end) const;
//     // Whether key tile [col0, col0 + bn) has keys that some of rows [row0, row0 + rows) may not see:
//     // only such boundary tiles call visible() (and the last tile, for keys ≥ seq_k).
//     __device__ bool partial(int bh, int row0, int rows, int col0, int bn) const;
//     __device__ bool visible(int bh, int row, int col) const;
//   };
//
// Optional (`static constexpr bool kRowInterval = true;`): the keys row `row` sees are exactly one
// interval [*lo, *hi] (a conjunction of linear bounds: causal, sliding windows). Boundary tiles then
// compare each score's constant column offset with the row's two ends instead of calling visible():
//
//     __device__ void row_columns(int bh, int row, int* lo, int* hi) const;
//
// Optional (`static constexpr bool kDataTiles = true;`): a mask that depends on data, an integer id per
// query row and per key compared across them (document ids: row_id == col_id). Every key tile of
// [begin, end) of a work tile is classified from the ids' minimum and maximum over the work tile's rows
// and over the key tile's keys, into a list in shared memory that both sides walk in the same order:
// tiles of class 0 are skipped (no loads, no MMA), class 1 run without mask code, class 2 (boundary)
// compare ids per score with match() (the keys' ids loaded once per tile right after S is issued and
// shared by shuffles). One block per work tile: classified once before the roles split. With
// Config::Persistent: the first tile's likewise, then the producer warpgroup's idle warps classify
// the next work tile while the consumers run the current one (a double-buffered list).
// kMaxKeyTiles bounds ceil(seq_k / BN) (the list's size; ≤ 16383).
//
//     static constexpr int kMaxKeyTiles = ...;
//     __device__ int row_id(int bh, int row) const;    // row < seq_q
//     __device__ int col_id(int bh, int col) const;    // col < seq_k
//     __device__ bool match(int bh, int row_id, int col_id) const;   // visible(bh, row, col) of the ids
//     // 0: match() is false for every pair of ids in [row_lo, row_hi] × [col_lo, col_hi]; 1: true for
//     // every pair; 2: either (sound: 0 and 1 only when certain)
//     __device__ int tile_class(int bh, int row_lo, int row_hi, int col_lo, int col_hi) const;
//
// Optional with kDataTiles (`static constexpr bool kOneIdTiles = true;`): a boundary tile whose keys all
// carry one id v (col_lo == col_hi, every key inside seq_k) is marked as such in the list, and its
// consumers compare each row's id with v once (match(bh, row_id, v), the same value for every key of the
// row) instead of per score, and load no key id. Same bits as the per-score compare.
//
// Optional with kDataTiles (`static constexpr int kColGroups = G;`, G ≥ 1): the keys' ids depend on bh
// only through a group (document ids [batch][key]: the batch; every head of it reads the same ids), so
// the key tiles' id ranges are the same for every work tile of a group. Persistent blocks then reduce
// them once per block into a table in shared memory (G · kMaxKeyTiles entries, at most 2048) and
// classify a work tile from its rows' ids and that table, instead of reading every key's id per work
// tile. col_id(group_bh(g), col) must equal col_id(bh, col) for every bh with col_group(bh) == g.
//
//     static constexpr int kColGroups = ...;            // an upper bound of col_groups()
//     __device__ int col_groups() const;                 // the groups of this launch (≤ kColGroups)
//     __device__ int col_group(int bh) const;            // in [0, col_groups())
//     __device__ int group_bh(int group) const;          // a bh of that group
//
// Optional (`static constexpr bool kEmptyRowNaN = true;`): a row that sees no key gets NaN (what the
// program's softmax gives it: max = −inf, exp(−inf − (−inf)) = NaN) instead of zeros; for masks where
// that is not known at compile time.
//
// ---- Epilogue preload (optional, template parameter Epilogue) ---------------------------------------
//
// An epilogue that reads inputs at the stored element (a gate: o = sigmoid(g) · a) may declare
// `static constexpr bool kPreload = true;` with a value type Preload (a few registers: the 4-byte words
// of the pairs of input elements a pair of output columns needs):
//
//     __device__ Preload preload(int bh, int row, int col) const;    // row < seq_q, col even
//     __device__ void operator()(int bh, int row, int col, float o0, float o1, const Preload& pre) const;
//
// The skeleton calls preload() for every pair of columns a thread stores (HeadDim / 4 of them) when it
// starts a work tile, before its first key tile, and keeps the values in registers until the
// epilogue: the loads of the whole tile are in flight together and their latency is hidden behind the
// tile's MMAs (a plain epilogue that loads at the store issues them one after another: the stores
// may alias the inputs).
//
// ---- Row state (template parameter State, a template over the fragment size) ----------------------
//
//   template <int N> struct State {                 // N = BN / 2 scores per thread per tile, 2 rows
//     __device__ void init();
//     // s(i), i < N: the tile's logits of row (i / 2) % 2 (−inf where masked), rewritten in place to
//     // the weights p that multiply V; correction[r]: the factor the accumulated O rows are scaled by.
//     // Schedule: the instruction order (kSoftmaxSchedule above: 0, 1 or 2); it must not change the values.
//     // Emulated: the weights per 16 whose exponential is exp2_poly (kExp2Emulated above).
//     template <int Schedule, int Emulated, class Fragment>
//     __device__ void update(Fragment& s, float scale_log2, float (&correction)[2]);
//     // After the last tile: the factor each output row is multiplied by (1 / Σ p, quad-reduced).
//     __device__ void finish(float (&inverse)[2]);
//   };
//
// A thread holds rows (lane / 4) and (lane / 4 + 8) of its warp's 16; the 4 lanes of a quad share them.
#pragma once

#include "../tile/exp2_poly.cuh"
#include "config.cuh"

// The weights per 16 computed on the FMA pipe when the score functor does not say (kExp2Emulated).
#ifndef SOLDER_ATTN_EXP2_EMULATED_DEFAULT
#define SOLDER_ATTN_EXP2_EMULATED_DEFAULT 0
#endif

namespace solder::attention {

// −inf without <cmath> (NVRTC has no INFINITY).
__device__ __forceinline__ float negative_infinity() { return __int_as_float(static_cast<int>(0xff800000u)); }

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- Score functors ---------------------------------------------------------------------------------

// The default: softmax of scale · (q · k).
struct PlainScore {
  float scale_log2;
  static constexpr bool kIdentity = true;
  __device__ float operator()(int, int, int, float dot) const { return dot; }
};

// cap · tanh(scale · dot / cap) (Gemma-style logit softcapping); scale_log2 = log2(e).
struct SoftcapScore {
  float scale_log2;
  float scale_over_cap;  // scale / cap
  float cap;
  static constexpr bool kIdentity = false;
  __device__ float operator()(int, int, int, float dot) const { return cap * tanhf(dot * scale_over_cap); }
};

// Whether Score has the affine form above (kAffine true); functors without the member are not affine.
template <class S>
__host__ __device__ constexpr auto score_is_affine(int) -> decltype(S::kAffine, true) {
  return S::kAffine;
}
template <class S>
__host__ __device__ constexpr bool score_is_affine(long) {
  return false;
}

// Whether an affine Score asks for the whole bias per score (kAffineTwoFfma true) instead of the row shift.
template <class S>
__host__ __device__ constexpr auto score_affine_two_ffma(int) -> decltype(S::kAffineTwoFfma, true) {
  return S::kAffineTwoFfma;
}
template <class S>
__host__ __device__ constexpr bool score_affine_two_ffma(long) {
  return false;
}

// Whether an affine Score declares a > 0 for every head (kAffinePositiveA true: the scaled row-shift form).
template <class S>
__host__ __device__ constexpr auto score_affine_positive_a(int) -> decltype(S::kAffinePositiveA, true) {
  return S::kAffinePositiveA;
}
template <class S>
__host__ __device__ constexpr bool score_affine_positive_a(long) {
  return false;
}

// Whether an affine Score asks for the column term by the tensor cores (kAffineColumnMma true).
template <class S>
__host__ __device__ constexpr auto score_affine_column_mma(int) -> decltype(S::kAffineColumnMma, true) {
  return S::kAffineColumnMma;
}
template <class S>
__host__ __device__ constexpr bool score_affine_column_mma(long) {
  return false;
}

// Whether Score has the bias form above (kBias true).
template <class S>
__host__ __device__ constexpr auto score_has_bias(int) -> decltype(S::kBias, true) {
  return S::kBias;
}
template <class S>
__host__ __device__ constexpr bool score_has_bias(long) {
  return false;
}

// The bits of Score's staged bias (kStagedBias; 0 without the member).
template <class S>
__host__ __device__ constexpr auto score_staged_bias(int) -> decltype(S::kStagedBias, 0) {
  return S::kStagedBias;
}
template <class S>
__host__ __device__ constexpr int score_staged_bias(long) {
  return 0;
}

// Whether Score's staged bias is a sum of the tile element and a column term (kStagedSum true).
template <class S>
__host__ __device__ constexpr auto score_staged_sum(int) -> decltype(S::kStagedSum, true) {
  return S::kStagedSum;
}
template <class S>
__host__ __device__ constexpr bool score_staged_sum(long) {
  return false;
}

// The row state's instruction order a Score asks for (kSoftmaxSchedule; `otherwise` without the member).
template <class S>
__host__ __device__ constexpr auto score_softmax_schedule(int, int) -> decltype(S::kSoftmaxSchedule, 0) {
  return S::kSoftmaxSchedule;
}
template <class S>
__host__ __device__ constexpr int score_softmax_schedule(long, int otherwise) {
  return otherwise;
}

// The weights per 16 a Score has computed by exp2_poly (kExp2Emulated; `otherwise` without the member).
template <class S>
__host__ __device__ constexpr auto score_exp2_emulated(int, int) -> decltype(S::kExp2Emulated, 0) {
  return S::kExp2Emulated;
}
template <class S>
__host__ __device__ constexpr int score_exp2_emulated(long, int otherwise) {
  return otherwise;
}

// Whether Mask declares its rows' visible keys one interval (kRowInterval true, row_columns()).
template <class M>
__host__ __device__ constexpr auto mask_has_row_interval(int) -> decltype(M::kRowInterval, true) {
  return M::kRowInterval;
}
template <class M>
__host__ __device__ constexpr bool mask_has_row_interval(long) {
  return false;
}

// Whether Mask decides key tiles from data (kDataTiles true: row_id, col_id, match, tile_class).
template <class M>
__host__ __device__ constexpr auto mask_has_data_tiles(int) -> decltype(M::kDataTiles, true) {
  return M::kDataTiles;
}
template <class M>
__host__ __device__ constexpr bool mask_has_data_tiles(long) {
  return false;
}
// The size of the key-tile list of a data mask (1 for the others).
template <class M>
__host__ __device__ constexpr auto mask_max_key_tiles(int) -> decltype(M::kMaxKeyTiles, 1) {
  return M::kMaxKeyTiles > 0 ? M::kMaxKeyTiles : 1;
}
template <class M>
__host__ __device__ constexpr int mask_max_key_tiles(long) {
  return 1;
}
// The key-id groups of a data mask whose key tiles' id ranges go in a table (kColGroups; 0 without).
template <class M>
__host__ __device__ constexpr auto mask_col_groups(int) -> decltype(M::kColGroups, 1) {
  return M::kColGroups > 0 ? M::kColGroups : 0;
}
template <class M>
__host__ __device__ constexpr int mask_col_groups(long) {
  return 0;
}
// Whether a data mask's boundary tiles of one key id take the per-row compare (kOneIdTiles; default off).
template <class M>
__host__ __device__ constexpr auto mask_one_id_tiles(int) -> decltype(M::kOneIdTiles, true) {
  return M::kOneIdTiles;
}
template <class M>
__host__ __device__ constexpr bool mask_one_id_tiles(long) {
  return false;
}
// Whether a row that sees no key gets NaN (kEmptyRowNaN true) instead of zeros.
template <class M>
__host__ __device__ constexpr auto mask_empty_row_nan(int) -> decltype(M::kEmptyRowNaN, true) {
  return M::kEmptyRowNaN;
}
template <class M>
__host__ __device__ constexpr bool mask_empty_row_nan(long) {
  return false;
}

// Whether Epilogue preloads its inputs (kPreload true: Preload, preload(), the six-argument operator()).
template <class E>
__host__ __device__ constexpr auto epilogue_preloads(int) -> decltype(E::kPreload, true) {
  return E::kPreload;
}
template <class E>
__host__ __device__ constexpr bool epilogue_preloads(long) {
  return false;
}

// Whether Epilogue offers the dual mode's staged combine (kStagedCombine true; sm90_attention_dual.cuh,
// "Staged combine"): staged_combine(bh, row, col, x0, x0', x1, x1'), the word combine() would store at
// o[bh][row][col], [col + 1] (no store, no side effect), and staged_row(bh, row) as for kStaged.
template <class E>
__host__ __device__ constexpr auto epilogue_staged_combine(int) -> decltype(E::kStagedCombine, true) {
  return E::kStagedCombine;
}
template <class E>
__host__ __device__ constexpr bool epilogue_staged_combine(long) {
  return false;
}

// Whether a staged Epilogue stores its rows by TMA (kTmaStore true, with kStaged): a member
// `TensorMap out_map`, o as rank 3 {HeadDim, seq_q rows, heads} (the element type the output's 16-bit
// dtype, box {64, 16, 1}, 128-byte swizzle: one 16-row panel of a consumer warp's staged slice), so that
// each consumer warp writes its staged rows with one cp.async.bulk.tensor store per 64 columns instead of
// 16-byte stores (sm90_attention.cuh, "Staged epilogue"). The map's row extent clips rows past seq_q.
// Launched through attention_kernel_tma_store (SOLDER_ATTENTION_KERNEL_TMA_STORE), whose epilogue is a
// __grid_constant__ parameter, so the map's address is the parameter's.
template <class E>
__host__ __device__ constexpr auto epilogue_tma_store(int) -> decltype(E::kTmaStore, true) {
  return E::kTmaStore;
}
template <class E>
__host__ __device__ constexpr bool epilogue_tma_store(long) {
  return false;
}

// Whether Epilogue offers the staged epilogue's interface (kStaged true; sm90_attention.cuh, "Staged
// epilogue"): staged_pack(bh, row, col, o0, o1), the stored pair o[bh][row][col], [col + 1] as one 4-byte word
// (the element-wise tail applied and rounded to the output's 16-bit dtype), and staged_row(bh, row), the address
// of o[bh][row][0] (HeadDim contiguous elements, 16-byte aligned for every row: checked at run time).
template <class E>
__host__ __device__ constexpr auto epilogue_staged(int) -> decltype(E::kStaged, true) {
  return E::kStaged;
}
template <class E>
__host__ __device__ constexpr bool epilogue_staged(long) {
  return false;
}

// ---- Mask functors ----------------------------------------------------------------------------------

// Every key j < seq_k is visible.
struct NoMask {
  __device__ void key_tiles(int, int, int, int seq_k, int bn, int* begin, int* end) const {
    *begin = 0;
    *end = ceil_div(seq_k, bn);
  }
  __device__ bool partial(int, int, int, int, int) const { return false; }
  __device__ bool visible(int, int, int) const { return true; }
};

// Key j is visible from query row i when j ≤ i + offset (offset 0: the top-left aligned causal mask
// of torch's is_causal; offset = seq_k − seq_q: bottom-right aligned). Tiles past the block's last row
// are skipped; only tiles crossing the diagonal are masked element by element. A row that sees no key
// (offset < 0) gets zeros.
struct CausalMask {
  int offset = 0;
  __device__ void key_tiles(int, int row0, int rows, int seq_k, int bn, int* begin, int* end) const {
    *begin = 0;
    const int last_key = row0 + rows - 1 + offset;  // the last key any of the rows sees
    const int tiles = last_key < 0 ? 0 : last_key / bn + 1;
    const int all = ceil_div(seq_k, bn);
    *end = tiles < all ? tiles : all;
  }
  __device__ bool partial(int, int row0, int, int col0, int bn) const { return col0 + bn - 1 > row0 + offset; }
  __device__ bool visible(int, int row, int col) const { return col <= row + offset; }
};

// ---- Row state --------------------------------------------------------------------------------------

// Ends ptxas's instruction block here: a branch on `value` to a trap. Callers pass a value that is ≥ 0 or
// NaN, for which the branch is never taken. ptxas schedules each block on its own and places a
// wgmma.wait_group as early as its block allows, so a wait written after this call stays after the
// instructions that `value` depends on.
__device__ __forceinline__ void block_boundary(float value) {
  if (value < 0.0f) __trap();
}

// The maximum of a row's scores s(i), i ≡ 2r or 2r + 1 (mod 4), and `start`: one running maximum per row
// (Schedule 0), or four partial maxima combined at the end (Schedule ≥ 1: a dependent chain of N / 8 + 2
// instead of N / 2). The same value either way: max.f32 is exact, and the order does not matter.
template <int Schedule, int N, class Fragment>
__device__ __forceinline__ float row_max(const Fragment& s, int r, float start) {
  if constexpr (Schedule == 0 || N % 16 != 0) {
    float m = start;
#pragma unroll
    for (int i = 0; i < N; ++i)
      if ((i / 2) % 2 == r) m = fmaxf(m, s(i));
    return m;
  } else {
    // the row's j-th score is s(4·(j / 2) + 2r + j % 2); part k takes the j ≡ k (mod 4)
    float part[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) part[k] = s(4 * (k / 2) + 2 * r + k % 2);
#pragma unroll
    for (int j = 4; j < N / 2; ++j) part[j % 4] = fmaxf(part[j % 4], s(4 * (j / 2) + 2 * r + j % 2));
    return fmaxf(fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3])), start);
  }
}

// 2^x for weight i of a thread's fragment: exp2_poly on the FMA pipe for Emulated of every 16 weights
// (⌊(i + 1)·Emulated / 16⌋ > ⌊i·Emulated / 16⌋, spread evenly), ex2.approx on the MUFU for the others.
// i is a constant once the caller's loop is unrolled, so each weight compiles to one of the two.
template <int Emulated>
__device__ __forceinline__ float weight_exp2(int i, float x) {
  static_assert(Emulated >= 0 && Emulated <= 16, "kExp2Emulated counts weights per 16");
  if (Emulated > 0 && (i + 1) * Emulated / 16 > i * Emulated / 16) return tile::exp2_poly(x);
  return fast_exp2(x);
}

// The online softmax: running maximum and (per thread, partial) sum of two rows, base-2 scaled.
// A row whose scores so far are all −inf keeps max −inf; its weights are 0 and its correction 1.
template <int N>
struct OnlineSoftmax {
  float max[2];
  float sum[2];

  __device__ __forceinline__ void init() {
    max[0] = max[1] = negative_infinity();
    sum[0] = sum[1] = 0.0f;
  }

  // Schedule (the same values in every order; kSoftmaxSchedule above): 0 one running maximum per row,
  // 1 partial maxima (row_max), 2 partial maxima and the end of ptxas's block after the weights, so that
  // the caller's wait for the previous P·V, written after update(), lets that P·V run beside the
  // exponentials (with 0 or 1 ptxas places that wait before the softmax). Emulated: the weights per 16
  // whose exponential is exp2_poly (weight_exp2; kExp2Emulated above).
  template <int Schedule = 0, int Emulated = 0, class Fragment>
  __device__ __forceinline__ void update(Fragment& s, float scale_log2, float (&correction)[2]) {
    float m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) m[r] = row_max<Schedule, N>(s, r, max[r]);
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 1));
      m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 2));
      const bool none = m[r] == negative_infinity();
      correction[r] = none ? 1.0f : fast_exp2((max[r] - m[r]) * scale_log2);
      base[r] = none ? 0.0f : m[r] * scale_log2;
      max[r] = m[r];
      sum[r] *= correction[r];
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int r = (i / 2) % 2;
      const float p = weight_exp2<Emulated>(i, fmaf(s(i), scale_log2, -base[r]));
      s(i) = p;
      sum[r] += p;
    }
    if constexpr (Schedule == 2) block_boundary(sum[0] + sum[1]);
  }

  // The same update for the scores s(i) + shift[(i / 2) % 2], given as s(i) and the thread's two row
  // shifts (an affine score's row term): the maximum and the weights are those of the shifted scores,
  // max is kept shifted, and each weight costs what update()'s does.
  template <int Schedule = 0, int Emulated = 0, class Fragment>
  __device__ __forceinline__ void update_shifted(Fragment& s, float scale_log2, float (&correction)[2], const float (&shift)[2]) {
    float m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) m[r] = row_max<Schedule, N>(s, r, negative_infinity());
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m[r] = fmaxf(max[r], m[r] + shift[r]);
      m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 1));
      m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 2));
      const bool none = m[r] == negative_infinity();
      correction[r] = none ? 1.0f : fast_exp2((max[r] - m[r]) * scale_log2);
      base[r] = none ? 0.0f : (m[r] - shift[r]) * scale_log2;
      max[r] = m[r];
      sum[r] *= correction[r];
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int r = (i / 2) % 2;
      const float p = weight_exp2<Emulated>(i, fmaf(s(i), scale_log2, -base[r]));
      s(i) = p;
      sum[r] += p;
    }
    if constexpr (Schedule == 2) block_boundary(sum[0] + sum[1]);
  }

  __device__ __forceinline__ void finish(float (&inverse)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = sum[r];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      inverse[r] = total > 0.0f ? 1.0f / total : 0.0f;
    }
  }
};

}  // namespace solder::attention
