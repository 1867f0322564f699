// Whether a contract runs as one launch of the sm_90a GEMM skeleton (device/solder/gemm), and as
// which problem: the skeleton choice, asked by the lowering (which then emits the contract whole, as
// a kernel of its own, instead of tiling it) and by the CUDA code generator (which instantiates the
// skeleton for it).
//
// A contract fits when it is one product term C[b, m, n] = scale · Σ_k A[b, m, k] · B[b, k, n] + bias
// whose operands are plain loads of global tensors, exact in T ∈ {bf16, f16, e4m3, e5m2} (16-bit:
// both of T; fp8: both fp8), over one reduced axis or several that both operands name consecutively
// in one order (flattened into one K, row-major in A's order: einsum 'mkr,krn->mn'), with
//   A stored [b…?, m…, k…] (K-major) or [b…?, k…, m…] (M-major, 16-bit only),
//   B stored [b…?, n…, k…] (K-major) or [b…?, k…, n…] (N-major, 16-bit only),
// where b… are the batch axes (every kept axis that is neither a row nor a column, leading in the
// domain's order: flattened into one batch; an operand without them is shared by every batch; a row
// (column) axis that A (B) alone names before K while naming others after it, [i, k, n], is a batch
// axis too when its extent is over 1: torch.matmul of a [M, K] by b [Bt, K, N], a shared; the two
// operands then exchange sides when the destination's first axis after the batch is a column, as the
// canonical form orders them: c[i, m, n] = Σ b[i, k, n] · a[m, k] runs as A = a [M, K], B = b N-major,
// batch i, so c's contiguous n runs along the tile's columns),
// where m… are the row axes (one or more, consecutive in A: flattened into one M in A's order) and
// n… the column axes (likewise in B),
// rows of 16 bytes multiples (what the
// tensor memory accelerator needs), no `where`, no guard and no accumulation. The scale, the bias and
// the destination's index are any expressions of the domain's axes (the epilogue computes them).
//
// K ranges (a concatenation along K, the canonicalizer's split_k_ranges form: nerf_mlp's cat([x, h4]) · w5)
// fit (unless SOLDER_GEMM_K_RANGES=0: gemm_k_ranges_enabled()): a contract of two product terms over one reduced axis k < K,
//   select(k < K1, A1[…, k], 0) · B[…, k, …]   and   select(k < K1, 0, A2[…, k − K1]) · B[…, k, …]
// (in either order, B the same load in both, K1 an integer constant: padded_operands.cpp binds the dims),
// runs as the skeleton's two-range kernel (sm90_gemm.cuh, gemm_ranges_kernel): A1 with B's rows k < K1,
// then A2 with B's rows from K1 on, a second tensor map of B starting there (GemmSkeletonOperand::offset;
// its address must stay 16-byte aligned: any K1 for an N-major B, K1 · |T| a multiple of 16 for a
// K-major one). Each range's A fits as a one-range A does (its own dtype, layout and pitch: A1 and A2
// of one dtype and layout); the problem's a and b are the first range's (k = K1), `second` the other's.
//
// tf32 (T = tf32) fits with two K-major f32 operands (their values already tf32: the split's copies).
// 3xtf32 (an all-f32 product, canonicalize.h) fits with two f32 loads of one product term in any layout and
// pitch (no K ranges, no pair; one row, one column and one reduced axis): fusion/tf32_split.h splits each operand into a K-major copy of three parts,
// [rows, tf32x3_split_ld(K)], and the skeleton runs the tf32 product over K' = 3K of the copies
// (tf32x3_gemm_problem: the problem the writer instantiates and the cost model prices, with the split).
// A 3xtf32 operand that is not a plain load fits as a computed one (computed_split_operand: the split
// evaluates it), when it is a pointwise expression of global loads over its own row axis, the reduced
// axis and all or none of the batch axes.
//
// A paired contract (kernel_ir.h: pair_terms, a dual-B product) fits when its one paired term reads the
// same A (structurally equal) and a second B, B2, of B's dtype, layout, shape and batch: the skeleton's
// dual-B configuration (BOperands = 2) reads A once for both products.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

struct GemmSkeletonOperand {
  std::string tensor;    // the global it loads
  DType dtype = DType::bf16;
  bool k_major = true;   // K contiguous ([rows][K]); false: rows contiguous ([K][rows])
  int64_t rows = 1;      // M (A) or N (B)
  int64_t k = 1;
  int64_t ld = 1;        // elements between consecutive rows (K-major) or consecutive k (MN-major)
  int64_t batch = 1;     // 1: shared by every batch
  int64_t batch_stride = 0;
  int64_t offset = 0;    // elements from the tensor's first: a K range's B starts at its first row
  // 3xtf32 only: the operand is an expression the split evaluates (computed_split_operand), not a load;
  // `tensor` is empty, the layout K-major (the split's copy is).
  bool computed = false;
};

// The second K range of a two-range problem: its operands (k = its K) and its K.
struct GemmSkeletonKRange {
  GemmSkeletonOperand a, b;
  int64_t k = 0;
};

struct GemmSkeletonProblem {
  GemmSkeletonOperand a, b;
  std::optional<GemmSkeletonOperand> b2;  // a paired contract's second B (dual-B)
  std::optional<GemmSkeletonKRange> second;  // K ranges: a and b are the first range's, k the whole K
  int64_t m = 1, n = 1, k = 1, batch = 1;
  int64_t first_k() const { return second ? k - second->k : k; }  // the first range's K (the launch's shape.k)
  std::vector<std::string> row_axes, column_axes;  // in A's (B's) order: the flattened index
  std::vector<int64_t> row_extents, column_extents;
  std::string reduce_axis;                // the first of reduce_axes
  std::vector<std::string> reduce_axes;   // the reduced axes flattened into K, in A's order
  std::vector<std::string> batch_axes;  // the domain's other axes, flattened in domain order
  std::vector<int64_t> batch_extents;
};

struct GemmSkeletonFit {
  std::optional<GemmSkeletonProblem> problem;
  std::string refusal;
};

// One operand as the skeleton stages it: `e` a load of a global indexed [batch?, side…, k] or
// [batch?, k, side…] by plain variables (the side axes flattened in that order into `order`); why not.
std::optional<GemmSkeletonOperand> operand_of(const Expr& e, const std::vector<std::string>& side_axes, const std::string& k_axis,
                                              const std::vector<std::string>& batch_axes, const std::vector<GlobalTensor>& globals,
                                              const char* what, std::vector<std::string>& order, std::string& why);
// The same over several reduced axes, named consecutively in this order (K-major: last; MN-major: first
// after the batch) and flattened into one K.
std::optional<GemmSkeletonOperand> operand_of(const Expr& e, const std::vector<std::string>& side_axes, const std::vector<std::string>& k_axes,
                                              const std::vector<std::string>& batch_axes, const std::vector<GlobalTensor>& globals,
                                              const char* what, std::vector<std::string>& order, std::string& why, bool tma = true);

GemmSkeletonFit fit_gemm_skeleton(const ContractNode& contract, const std::vector<GlobalTensor>& globals);

// A 3xtf32 operand the split evaluates (fusion/tf32_split.h): `e` an f32 expression whose variables are
// `side_axis`, `k_axis` and either every one of `batch_axes` or none, whose loads are of global tensors; an
// operand of `rows` × `k` (× the batch when it names it), K-major (GemmSkeletonOperand::computed). Why not.
std::optional<GemmSkeletonOperand> computed_split_operand(const Expr& e, const std::string& side_axis, const std::string& k_axis,
                                                          const std::vector<std::string>& batch_axes, int64_t rows, int64_t k, int64_t batch,
                                                          const std::vector<GlobalTensor>& globals, const char* what, std::string& why);

// One product term's A as a K range over k < extent: select(k < c, L, 0) is [0, c), select(k < c, 0, L)
// is [c, extent) (c an integer constant inside (0, extent)), L a load whose K index is k − lo (k for the
// first range); `a` is L read at the range's own k (its K index made k). Nothing for any other form.
struct GemmKRangeTerm {
  int64_t lo = 0, hi = 0;
  Expr a;
};
std::optional<GemmKRangeTerm> gemm_k_range_term(const Expr& a, const std::string& k, int64_t extent);

// Whether the skeleton takes two K ranges (fit_gemm_skeleton) and the padded operands pass copies only the
// ranges the skeleton cannot stage (fusion/padded_operands.h): unset or anything but "0". $SOLDER_GEMM_K_RANGES=0
// keeps the plan before it (two product terms refused, the whole A copied) for A/B runs.
bool gemm_k_ranges_enabled();

// Whether the one-operand batch's fit exchanges the operands as above: unset or anything but "0".
// $SOLDER_GEMM_BATCH_EXCHANGE=0 keeps the contract's sides (c[i, m, n] with A = b M-major, B = a, its
// output stored down the tile's columns, element pairs) for A/B runs.
bool gemm_batch_exchange_enabled();

// Whether the skeleton can store the product's result by rows (sm90_gemm.cuh's value() and row_pointer():
// 16 bytes of a row per lane, the registers-first or staged epilogue): a single product (no second B)
// whose 16-bit destination (`dst`: its dtype) is written, not accumulated, with the column axis as its
// last (contiguous) index, named nowhere else in it. The writer emits the hooks and the cost model prices
// the epilogue by this rule (SOLDER_GEMM_ROW_STORE=0 turns the writer's use off for A/B runs).
// The row pitch of a 3xTF32 split copy of K columns: 3K rounded up to 4 elements (16-byte rows for TMA).
int64_t tf32x3_split_ld(int64_t k);
// The tf32 product the skeleton runs for a 3xtf32 problem: K' = 3K, both operands K-major with the split
// copies' pitch (their batch strides rows · pitch).
GemmSkeletonProblem tf32x3_gemm_problem(const GemmSkeletonProblem& problem);

bool gemm_row_stores(const ContractNode& contract, const GemmSkeletonProblem& problem, DType dst);

}  // namespace solder
