// The tensor-core emitter's writer, shared by its three source files (internal to src/backend/cuda):
//   mma_stream_analysis.cpp    does the kernel have the shape? roles of the buffers, the mask rule, the
//                              score modifier (every refusal names its rule)
//   mma_stream_statements.cpp  each Kernel IR statement over register fragments, and the two
//                              contractions on tensor cores
//   mma_stream_codegen.cpp     the kernel: prologue, the pipelined stream loop, staging, the entry point
//   mma_stream_wgmma.cpp       the Hopper path: the two contractions on wgmma and its stream loop
// The shape and the choices are described in mma_stream_codegen.h.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_expr.h"
#include "backend/cuda/mma_stream_codegen.h"
#include "backend/cuda/mma_stream_expr.h"
#include "ir/interval.h"

namespace solder::mma_stream {

struct Refusal {
  std::string why;
};
[[noreturn]] inline void refuse(const std::string& why) { throw Refusal{why}; }

inline bool is_16bit(DType t) { return t == DType::bf16 || t == DType::f16; }
// The tile types of the attention shape's analysis: 16-bit, or e4m3 (the attention skeleton's fp8 path;
// the stream writer of mma_stream_codegen.cpp refuses it).
inline bool is_tile_type(DType t) { return is_16bit(t) || t == DType::f8e4m3; }

// score_input: a [BM, BN] tile staged from an input each step and read by the score (evoformer's pair
// bias); only the attention skeleton reads it (from global memory, where it is); the emitter's own
// schedule refuses it.
enum class Role { row, wide, scores, tile_a, tile_b, tile_v, column, scalar, score_input };

// How the variables of one statement map onto a thread's fragment elements.
struct Binding {
  std::vector<std::string> lead;  // extent-1 axes: 0
  std::string row;                // the row axis i: this thread's row (slot rs)
  std::string col;                // the column axis (j over S, or d over a wide tile); empty for rows
  bool col_is_scores = false;     // col ranges over S's columns (BN) rather than a wide tile's (DV)
};

class MmaStreamWriter {
 public:
  MmaStreamWriter(const KernelProgram& program, const Kernel& kernel) : program_(program), kernel_(kernel) {
    printer_.dims = program.dims;
    printer_.fast_math = true;
    intervals_.dims = program.dims;
    printer_.array = [this](const std::string& name) -> const CudaArray* {
      auto it = arrays_.find(name);
      return it == arrays_.end() ? nullptr : &it->second;
    };
    for (size_t p = 0; p < program.globals.size(); ++p) {
      const GlobalTensor& g = program.globals[p];
      arrays_[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, static_cast<int>(p)};
    }
  }

  MmaStreamKernel write();
  // The kernel on the sm_90a attention skeleton (mma_stream_skeleton.cpp): the same analysis, then
  // the functors; throws Refusal (the reason is stated in the source of the fallback) when the
  // kernel is not exactly the online softmax the skeleton computes. `contracts` is the kernel with
  // its contract statements (their MMA type: P rounded to T).
  AttentionSkeletonKernel write_skeleton(const Kernel& contracts);
  // The dual mode (attention_dual.h): write_skeleton also writes the epilogue's combine(), the stored
  // value with the reads of `tensor` (an f32 intermediate of the output's shape, read at the stored
  // element) taken from the first half's o / Σp. AttentionSkeletonKernel::combine says whether it did.
  void set_dual_first(const std::string& tensor) { dual_first_ = tensor; }
  // The analysis alone: the mask rule (nullopt when no tile is skipped: *refusal says why).
  std::optional<TileMaskRule> mask_rule(std::string* refusal);

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  std::string dual_first_;     // set_dual_first
  bool dual_combine_ = false;  // combine() written
  bool dual_staged_combine_ = false;  // staged_combine() and staged_row() written too
  bool plain_epilogue_ = false;  // the epilogue stores o / Σp itself
  CudaExprPrinter printer_;
  IntervalBuilder intervals_;
  std::map<std::string, CudaArray> arrays_;
  std::map<std::string, Role> roles_;
  const ForNode* loop_ = nullptr;
  const ReduceNode* scores_ = nullptr;
  const ReduceNode* pv_ = nullptr;
  std::string S_, A_, B_, V_;
  int64_t BM_ = 0, BN_ = 0, D_ = 0, DV_ = 0;
  int warps_ = 0;
  int G_ = 1;  // 16-row groups per warp: each B and V fragment loaded from shared memory feeds G mma
  // The Hopper path (mma_stream_wgmma.cpp): one warpgroup per 64 rows, both contractions on wgmma,
  // A, B and V in 128-byte-swizzled shared memory, B and V in a ring of `stages_`. Chosen when
  // wgmma_refusal() is empty; otherwise the mma.sync path, and the summary names the rule.
  bool wgmma_ = false;
  std::string wgmma_refused_;
  int stages_ = 2;
  std::string wgmma_refusal() const;
  DType in_dtype_ = DType::bf16;
  std::optional<Expr> live_condition_;         // "the tile j_t may hold an unmasked score"
  std::optional<Expr> full_condition_;         // "the tile j_t holds no masked score" (nullopt: never known)
  std::vector<std::string> row_ranges_;        // row states whose block-wide min/max bound the mask
  int64_t exchange_offset_ = 0;                // where in shared memory their warps meet
  std::vector<const LoadNode*> column_ranges_; // column tiles whose min/max per tile bound the mask
  // With column ranges, every key tile is classified once per block into a table in shared memory
  // (class_tiles_ entries: the most key tiles a block streams; 0 = classified lazily per tile).
  int64_t class_tiles_ = 0, class_offset_ = 0, next_offset_ = 0;
  int64_t class_table_bytes() const { return class_tiles_ ? (class_tiles_ + 7) / 8 * 8 + 8 * (class_tiles_ + 1) : 0; }
  std::optional<Expr> mask_;                   // the mask C of select(C, S, -inf)
  std::string mask_row_var_, mask_col_var_;    // C's row and column variables
  std::vector<std::string> mask_lead_vars_;    // C's other axes (extent 1)
  Expr row_state_value(const std::string& name, const Expr& row) const;
  bool mask_true_ = false;                     // emitting the full-tile version: select(C, S, -inf) is S

  // The score modifier: when every read of S outside its contraction sits inside one subexpression
  // G(S) (soft-capping's CAP * tanh(S / CAP), ALiBi's S + slope * (j - i); the mask select itself
  // excluded), G is applied to S once, in place, after the contraction, and the statements read S.
  // The values are the same float32 computations done once instead of once per statement.
  std::optional<Expr> modifier_;
  bool modifier_in_place_ = false;  // while emitting G itself
  void find_score_modifier();

  Expr apply_modifier(const Expr& e) const;

  // x / y as x * (1 / y) where y holds no fragment value (a constant or a row state): the reciprocal
  // is computed once (folded at compile time for constants) and each element costs one multiply
  // (within 1.5 ulp of the division, far below the 16-bit inputs' rounding).
  Expr divisions_as_products(const Expr& e) const;

  Expr strip_mask(const Expr& e) const;

  std::string summary_;
  std::map<std::string, std::set<std::string>> cached_;  // P values computed by a reduction: text → buffers it reads

  static std::string pad(int n) { return std::string(static_cast<size_t>(n) * 2, ' '); }
  static std::string when(const std::string& guard) { return guard.empty() ? "" : "if (" + guard + ") "; }
  int64_t rows_of(const std::string& tile) const { auto& s = kernel_.find_buffer(tile)->shape; return s[s.size() - 2]; }
  int64_t cols_of(const std::string& tile) const { return kernel_.find_buffer(tile)->shape.back(); }

  static bool leading_ones(const std::vector<int64_t>& shape, size_t keep);
  // The one unguarded copy in the stream loop (none outside it) that stages the tile `name` from an
  // input, its destination indexed by its own axes; nullptr when there is no such copy.
  const CopyNode* staged_input_copy(const std::string& name) const;
  // A [.., BM, BN] tile staged once per stream step from an input (the copy is remembered in
  // score_copies_): a bias over the scores' rows and columns.
  bool score_source(const std::string& name);
  std::map<std::string, const CopyNode*> score_copies_;

  // ---- Analysis ---------------------------------------------------------------------------------
  void analyze();

  // Longest-first grid order (plan_grid_order): when the live key tiles of a block depend on one grid
  // variable only (the row tile of causal-like masks; decided at compile time from the mask rule) and
  // grow with it, the blocks run in groups of `order_group_` values of the other grid variables (their
  // K and V fit in half of L2), and within a group the row tiles with the most live key tiles first.
  int order_var_ = -1;          // index into kernel_.grid; -1: the plain order (last grid variable fastest)
  int64_t order_group_ = 1;
  std::string order_refusal_;   // why the plain order (for the summary)
  void plan_grid_order();
  std::string skip_rule() const;
  void emit_block_decode(std::ostringstream& out) const;

  // The indices before the last two are 0 or variables of extent-1 axes.
  static bool leading_indices_trivial(const std::vector<Expr>& index, const std::vector<Axis>& axes);

  // A column tile [.., BN] staged once per step from an input: its loads read the input directly.
  std::map<std::string, const CopyNode*> column_copies_;
  bool column_source(const std::string& name);

  // Ranges of the kernel's variables wherever the emitter prints them: grid variables, the stream
  // variable over its tiles, every statement axis over [0, its largest extent). An index these bound
  // inside its global needs no check.
  RangeFacts index_facts_;
  void collect_index_facts();
  bool provably_inside(const Expr& index, int64_t extent) const;

  // A load of a global, 0 where an index is out of bounds (the Kernel IR's rule for global reads).
  Expr bounded(const LoadNode& l, const Expr& self) const;

  // The input element a column tile holds at `at` (its copy's axes bound to expressions); 0 out of
  // bounds, as the copy would have staged it.
  Expr column_source_load(const CopyNode* c, const std::map<std::string, Expr>& at) const;

  // S[.., i, j] = sum(d) A[.., i, d] * B[.., j, d] * scalars
  bool is_scores_contraction(const ReduceNode& r);
  Expr score_scale_;
  bool has_scale_ = false;
  // The scale is a power of two and the inputs bf16: it multiplies Q's A fragments once instead of
  // every score (bit-identical: bf16 products are exact in f32 and scaling by 2^k commutes with
  // every rounding of the f32 sum, barring subnormal results; see scale_bf16_fragment).
  bool scale_in_a_ = false;
  Expr p_value_;  // P of the second contraction (its factors without the V load)

  // O[.., i, dv] (+)= sum(j) P * V[.., j, dv]
  bool is_second_contraction(const ReduceNode& r);

  // The masked-identity rule. Every read of S outside its contraction is select(C, S, -inf) with one
  // condition C, and sits either as the whole value of a `reduce max` or inside exp(· - R) (R reading
  // row states only) as the value of a `reduce sum`, or that times the V load of the second
  // contraction. On a tile where C is false everywhere each of these contributes its identity: max
  // gets -inf; exp(-inf - R) is 0 for a finite R, and for R = -inf (every score of the row masked so
  // far) the row's running values are reset by the online update's "not invertible" branch at the
  // row's first unmasked tile, or stay NaN-producing (0 / 0) to the end, exactly as without skipping.
  // The row maps of the loop (the online rescaling) see the same states with or without the tile.
  std::string skip_refusal_;
  void find_live_condition();

  // ---- Printing expressions per fragment element ------------------------------------------------
  // Binds a statement's axes: the lead axes are 0, the row is this thread's row of slot rs, the
  // column is the fragment element's column.
  std::string bind(const Binding& b) const;

  bool index_matches(const std::vector<Expr>& index, const Binding& b, bool with_col) const;

  // P of the second contraction ranges over the rows and the score columns (its reduce axis).
  Binding p_binding() const;

  // The expression over registers: row states read slot rs, fragments element [nt][e] (loads of
  // pseudo arrays whose "pointer" is the register's address).
  Expr to_registers(const Expr& in, const Binding& b);

  std::string element_text_bool(const Expr& e, const Binding& b) { return printer_.print_bool(to_registers(e, b)); }
  std::string element_text(const Expr& e, const Binding& b) { return printer_.print_float(to_registers(e, b)); }


  Binding binding_of(const Domain& domain, const std::vector<Axis>& reduce_axes, bool wide_cols) const;

  // The domain's guard as C++ under the binding ("" when there is none).
  std::string guard_of(const Domain& domain, const Binding& b);

  void invalidate(const std::string& written);

  // `statement` for each of this thread's elements of a score tile (scores) or a wide tile, with the
  // binding's variables and the element's row slot rs declared.
  void for_each_element(std::ostringstream& out, int ind, bool scores, const Binding& b, const std::string& statement);

  // ---- Statements -------------------------------------------------------------------------------
  void emit_body(std::ostringstream& out);

  void emit_statement(std::ostringstream& out, const Stmt& s, int ind);

  // Subexpressions of an element-wise statement that depend on the row only (the online rescaling's
  // exp(old_m - m) and its condition) are computed once per row, before the loop over the elements.
  int hoisted_ = 0;
  Expr hoist_row_invariants(std::ostringstream& out, const Expr& e, const Binding& b, int ind);
  std::map<std::string, std::string> pseudo_rows_;  // hoisted row values: pseudo array → C++ array

  void emit_map(std::ostringstream& out, const Domain& domain, const Access& dst, const Expr& value, int ind);

  // A row state combined over the columns of the scores (or, for the scores, the contraction).
  void emit_row_reduce(std::ostringstream& out, const ReduceNode& r, int ind);

  // S = A · Bᵀ on tensor cores, then the scalar factors.
  void emit_scores(std::ostringstream& out, int ind);
  void emit_scores_mma_sync(std::ostringstream& out, int ind);

  // O (+)= P · V on tensor cores, P evaluated per score element (or reused from a reduction).
  void emit_second_contraction(std::ostringstream& out, int ind);

  // A global ← register store: rows or wide fragments.
  void emit_store(std::ostringstream& out, const Domain& domain, const Access& dst, const Expr& value, int ind);

  // ---- Staging and the loop ---------------------------------------------------------------------
  // copy tile[.., r, c] = global[...] → cp.async of 16-byte chunks into the swizzled layout.
  // On the wgmma path the layout is Swizzle128 (byte offsets) and the commit is left to the caller.
  void emit_stage(std::ostringstream& out, const CopyNode& c, const std::string& tile, int ind);

  // ---- The wgmma path (mma_stream_wgmma.cpp) ------------------------------------------------------
  // A staged and published to the async proxy; the warpgroup's descriptors of A, once.
  void emit_a_wgmma(std::ostringstream& out, int ind);
  void emit_scores_wgmma(std::ostringstream& out, int ind);
  // P (fragments p_frag) → A registers; O += P · V.
  void emit_pv_wgmma(std::ostringstream& out, int ind);
  // The stream loop over a ring of stages_ B and V tiles, one barrier per tile.
  void emit_loop_wgmma(std::ostringstream& out);
  // The overlapped schedule (the prototype's): S of the next tile and P · V of this one are issued
  // together, and the next tile's row statements run while P · V is on the tensor cores; those that
  // touch the P · V accumulator run after it retired. Taken when overlap_refusal() is empty.
  bool overlap_ = false;
  bool scores_issued_ = false;  // emit_scores_wgmma: the loop issued and waited for S already
  bool pv_pack_only_ = false;   // emit_pv_wgmma: pack P into p_next; the loop issues the mma later
  // The loop's statements split around the contractions (shared by both loops).
  struct LoopParts {
    const CopyNode* stage_b = nullptr;
    const CopyNode* stage_v = nullptr;
    std::vector<const Stmt*> statements;  // in order, staging removed
  };
  LoopParts loop_parts() const;
  std::string overlap_refusal(const LoopParts& parts) const;
  void emit_loop_wgmma_overlapped(std::ostringstream& out, const LoopParts& parts);
  void emit_tile_bodies(std::ostringstream& out, const std::vector<const Stmt*>& statements, int ind);
  // "T* const B = B_stages + b_stage * ..; T* const V = V_stages + v_stage * ..;"
  std::string stage_pointers(const std::string& b_stage, const std::string& v_stage) const;
  // The classification lambdas tile_live / tile_full / next_live (shared by both loops).
  void emit_tile_classes(std::ostringstream& out, const std::string& jt);

  // Run-time bounds of the data a mask reads: block-wide min/max of row states (once), and a function
  // giving a column tile's min/max for tile j_t (each warp computes it alone: no barrier).
  void emit_data_ranges(std::ostringstream& out, const std::string& jt);

  void emit_a_fragments(std::ostringstream& out, int ind);

  // The stream loop, software-pipelined over two stages: B and V of the next live tile load while
  // this tile computes.
  void emit_loop(std::ostringstream& out);
};

}  // namespace solder::mma_stream
