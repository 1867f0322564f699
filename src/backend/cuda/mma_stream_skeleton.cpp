// The tensor-core emitter's skeleton path: an attention kernel instantiates the sm_90a attention
// skeleton (device/solder/attention, docs/attention-skeleton.md) and this file writes only its functors.
//
// The skeleton computes, per query row, o = Σ_j p_j·v_j / Σ_j p_j with p_j = exp(x_j − max x) over the
// keys the mask lets the row see, in the online form (running max, rescaled sum and accumulator), P
// rounded to the inputs' type before P·V. The kernel is taken when its Kernel IR is exactly that
// computation, checked statement by statement against the fused lowering's online softmax:
//
//   before the stream   stage Q; fill the running max with −inf, the sum and the accumulator with 0
//   per key tile        stage K and V; S = scale · Q·Kᵀ (the contraction, from zero)
//                       old = m;  m_acc max= X;  m = m_acc
//                       z_acc = rescale(z_acc);  z_acc += Σ exp(X − m);  z = z_acc
//                       o_acc = rescale(o_acc);  o_acc += Σ exp(X − m) · V   (P·V, MMA type T)
//   after the stream    o_tile = o_acc · (1 / z) (or / z); store o_tile to the output
//
// where X is G(S) or select(C, G(S), −inf): G (the score modifier of the analysis, or S itself) becomes
// the score functor, C the mask functor, the store the epilogue functor. Anything else (another
// statement, another rescaling, a ragged tile, a mask that reads staged tiles) is refused with the
// rule, and the emitter's own schedule (mma_stream_wgmma.cpp) runs the kernel instead.
//
// Tile skipping: C is decided over a block's rows and a key tile's columns by the analysis's interval
// arithmetic (IntervalBuilder), after the row and column indices `i_t * BM + i` and `j_t * BN + j` are
// recognised as the global row and column. The mask functor's key_tiles() is the first to the last
// tile where C may hold (tiles outside are neither loaded nor computed); partial() is "C may be false
// somewhere on the tile" (only those tiles evaluate C per element).
#include <cmath>
#include <functional>
#include <set>

#include "algebra/normal_form.h"
#include "backend/cuda/mma_stream_writer.h"
#include "ir/expr_eval.h"
#include "ir/printer.h"

namespace solder::mma_stream {

namespace {

const char* skeleton_dtype_name(DType t) { return t == DType::f16 ? "solder::gemm::Dtype::f16" : "solder::gemm::Dtype::bf16"; }

// `var * extent + other` (either order of the sum's terms and of the product's factors).
bool is_tile_index(const Expr& e, const std::string& tile_var, int64_t extent, const std::string& var) {
  if (e.kind() != ExprKind::Binary || e.as<BinaryNode>()->op != BinaryOp::add) return false;
  auto product = [&](const Expr& p) {
    if (p.kind() != ExprKind::Binary || p.as<BinaryNode>()->op != BinaryOp::mul) return false;
    auto b = p.as<BinaryNode>();
    auto is_extent = [&](const Expr& c) { return c.kind() == ExprKind::Const && c.as<ConstNode>()->value == static_cast<double>(extent); };
    return (is_var(b->lhs, tile_var) && is_extent(b->rhs)) || (is_var(b->rhs, tile_var) && is_extent(b->lhs));
  };
  auto b = e.as<BinaryNode>();
  return (product(b->lhs) && is_var(b->rhs, var)) || (product(b->rhs) && is_var(b->lhs, var));
}

// e with every `tile_var * extent + var` replaced by `to`.
Expr replace_tile_index(const Expr& e, const std::string& tile_var, int64_t extent, const std::string& var, const Expr& to) {
  if (is_tile_index(e, tile_var, extent, var)) return to;
  if (e.kind() == ExprKind::Load || e.kind() == ExprKind::Var || e.kind() == ExprKind::Const || e.kind() == ExprKind::DimRef) return e;
  return map_children(e, [&](const Expr& c) { return replace_tile_index(c, tile_var, extent, var, to); });
}

bool mentions(const Expr& e, const std::string& var) {
  for (auto& v : vars_used(e))
    if (v == var) return true;
  return false;
}

}  // namespace

AttentionSkeletonKernel MmaStreamWriter::write_skeleton(const Kernel& contracts) {
  analyze();
  const std::string name = cuda_identifier(kernel_.name);
  // ---- The operands and the tile configuration ----
  if (!is_16bit(in_dtype_)) refuse("the inputs are " + std::string(dtype_name(in_dtype_)) + " (the skeleton takes bf16 and f16)");
  if (D_ != DV_) refuse("the head dims of Q·Kᵀ (" + std::to_string(D_) + ") and P·V (" + std::to_string(DV_) + ") differ");
  if (D_ != 64 && D_ != 128 && D_ != 256) refuse("head dim " + std::to_string(D_) + " (the skeleton takes 64, 128 and 256)");
  {
    const MmaType want = in_dtype_ == DType::bf16 ? MmaType::bf16 : MmaType::f16;
    int contract_count = 0;
    std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) {
      for (auto& s : body) {
        if (s.kind() == StmtKind::For) walk(s.as<ForNode>()->body);
        if (s.kind() != StmtKind::Contract) continue;
        ++contract_count;
        if (s.as<ContractNode>()->type != want)
          refuse("a contraction runs in " + std::string(mma_type_name(s.as<ContractNode>()->type)) + " (the skeleton rounds P to " + std::string(dtype_name(in_dtype_)) + ")");
      }
    };
    walk(contracts.body);
    if (contract_count != 2) refuse("the kernel has " + std::to_string(contract_count) + " contract statements, not Q·Kᵀ and P·V");
  }
  if (scores_->where.defined() || scores_->domain.guard.defined() || pv_->where.defined() || pv_->domain.guard.defined())
    refuse("a contraction has a where-condition or a guard (ragged tiles)");

  // ---- The statements: the online softmax, one by one ----
  std::vector<const Stmt*> before, after;
  bool seen_loop = false;
  for (auto& s : kernel_.body) {
    if (s.kind() == StmtKind::For) { seen_loop = true; continue; }
    (seen_loop ? after : before).push_back(&s);
  }
  auto guarded = [](const Domain& d) { return d.guard.defined(); };
  auto load_of = [](const Expr& e, const std::string& tensor) { return e.kind() == ExprKind::Load && e.as<LoadNode>()->tensor == tensor; };
  std::vector<const Stmt*> body;
  const CopyNode *stage_b = nullptr, *stage_v = nullptr;
  std::vector<std::string> column_staged;
  for (auto& s : loop_->body) {
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == B_ && !stage_b && body.empty()) { stage_b = s.as<CopyNode>(); continue; }
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == V_ && !stage_v && body.empty()) { stage_v = s.as<CopyNode>(); continue; }
    if (s.kind() == StmtKind::Copy && roles_.count(s.as<CopyNode>()->dst.name) && roles_.at(s.as<CopyNode>()->dst.name) == Role::column && body.empty()) {
      column_staged.push_back(s.as<CopyNode>()->dst.name);  // an input tile over the keys (a mask's ids): read where it is
      continue;
    }
    body.push_back(&s);
  }
  if (!stage_b || !stage_v) refuse("K and V are not both staged at the start of the stream step");
  size_t at = 0;
  auto next = [&](StmtKind kind, const char* what) -> const Stmt& {
    if (at >= body.size() || body[at]->kind() != kind) refuse(std::string("the stream step is not the online softmax (expected ") + what + " at statement " + std::to_string(at + 1) + ")");
    return *body[at++];
  };
  const auto& fill_s = *next(StmtKind::Fill, "the scores' zero fill").as<FillNode>();
  if (fill_s.buffer != S_ || fill_s.value != 0) refuse("the scores are not filled with zero before the contraction");
  if (next(StmtKind::Reduce, "the scores").as<ReduceNode>() != scores_) refuse("the scores' contraction is not the first statement after the zero fill");
  const auto& save = *next(StmtKind::Copy, "old = m").as<CopyNode>();
  const std::string old_m = save.dst.name, m = save.src.name;
  const auto& max = *next(StmtKind::Reduce, "the running max").as<ReduceNode>();
  const std::string acc_m = max.dst.name;
  if (max.op != ReduceOp::max || max.where.defined() || guarded(max.domain) || guarded(save.domain)) refuse("the running max is not a plain max over the key tile");
  const auto& set_m = *next(StmtKind::Map, "m = m_acc").as<MapNode>();
  if (set_m.dst.name != m || !load_of(set_m.value, acc_m)) refuse("the running max is not copied to " + m + " after the tile");
  const auto& rescale_z = *next(StmtKind::Map, "the sum's rescaling").as<MapNode>();
  const auto& sum = *next(StmtKind::Reduce, "the running sum").as<ReduceNode>();
  const std::string acc_z = sum.dst.name;
  if (sum.op != ReduceOp::sum || sum.where.defined() || guarded(sum.domain) || rescale_z.dst.name != acc_z) refuse("the running sum is not a plain sum over the key tile");
  const auto& set_z = *next(StmtKind::Map, "z = z_acc").as<MapNode>();
  const std::string z = set_z.dst.name;
  if (!load_of(set_z.value, acc_z)) refuse("the running sum is not copied after the tile");
  const auto& rescale_o = *next(StmtKind::Map, "the accumulator's rescaling").as<MapNode>();
  const std::string acc_o = pv_->dst.name;
  if (rescale_o.dst.name != acc_o || !pv_->accumulate) refuse("the accumulator is not rescaled before P·V accumulates");
  if (next(StmtKind::Reduce, "P·V").as<ReduceNode>() != pv_) refuse("P·V is not the last statement of the stream step");
  if (at != body.size()) refuse("the stream step holds statements after P·V");
  // The rescaling of the fused lowering: by exp(old − m), reset where it is not invertible and m moved.
  auto index_text = [](const std::vector<Expr>& index, size_t count) {
    std::string t = "[";
    for (size_t k = 0; k < count; ++k) t += (k ? ", " : "") + print_expr(index[k]);
    return t + "]";
  };
  auto check_rescale = [&](const MapNode& map, const std::string& acc) {
    if (guarded(map.domain)) refuse("the rescaling of " + acc + " is guarded");
    const size_t row_rank = kernel_.find_buffer(m)->shape.size();
    if (map.dst.index.size() < row_rank) refuse("the rescaling of " + acc + " has fewer axes than the row state");
    const std::string row = index_text(map.dst.index, row_rank), all = index_text(map.dst.index, map.dst.index.size());
    const std::string factor = "exp(-" + m + row + " + " + old_m + row + ")";
    // (kept where the running max has not moved: a row still fully masked; every row sees a key
    // before the end, which the mask check below requires, so the reset drops what was kept)
    const std::string want = "select(abs(" + old_m + row + ") < inf && abs(" + factor + ") < inf, " + acc + all + " * " + factor +
                             ", select(" + m + row + " == " + old_m + row + ", " + acc + all + ", 0.0))";
    if (print_expr(map.value) != want) refuse("the rescaling of " + acc + " is not the online softmax's (" + print_expr(map.value) + ")");
  };
  check_rescale(rescale_z, acc_z);
  check_rescale(rescale_o, acc_o);
  // X, then exp(X − m) in the sum and in P·V.
  const Expr x = max.value;
  auto is_exp_of_x = [&](const Expr& e) {
    if (e.kind() != ExprKind::Unary || e.as<UnaryNode>()->op != UnaryOp::exp) return false;
    const Expr& d = e.as<UnaryNode>()->operand;
    if (d.kind() != ExprKind::Binary || d.as<BinaryNode>()->op != BinaryOp::sub) return false;
    const Expr& r = d.as<BinaryNode>()->rhs;
    return structurally_equal(d.as<BinaryNode>()->lhs, x) && load_of(r, m) && index_text(r.as<LoadNode>()->index, r.as<LoadNode>()->index.size()) ==
                                                                                    index_text(max.dst.index, max.dst.index.size());
  };
  if (!is_exp_of_x(sum.value)) refuse("the running sum is not Σ exp(X − m) with X the running max's value");
  if (!is_exp_of_x(p_value_)) refuse("P of P·V is not exp(X − m) with X the running max's value");
  std::optional<Expr> cond;
  Expr g = x;
  if (x.kind() == ExprKind::Select && is_neg_infinity(x.as<SelectNode>()->if_false)) {
    cond = x.as<SelectNode>()->cond;
    g = x.as<SelectNode>()->if_true;
  }
  const auto& max_axes = max.domain.axes;
  const std::string row_var = max_axes.back().var, col_var = max.reduce_axes[0].var;
  std::vector<std::string> lead_vars;
  for (size_t k = 0; k + 1 < max_axes.size(); ++k) {
    if (max_axes[k].extent != 1) refuse("the running max runs over a lead axis of extent " + std::to_string(max_axes[k].extent));
    lead_vars.push_back(max_axes[k].var);
  }
  bool reads_s = false;
  std::string bad_read;
  std::function<void(const Expr&)> scan = [&](const Expr& e) {
    if (e.kind() == ExprKind::Load) {
      auto l = e.as<LoadNode>();
      if (l->tensor == S_) {
        reads_s = true;
        const size_t n = l->index.size();
        bool plain = n >= 2 && is_var(l->index[n - 2], row_var) && is_var(l->index[n - 1], col_var);
        for (size_t k = 0; k + 2 < n && plain; ++k)
          plain = (l->index[k].kind() == ExprKind::Const && l->index[k].as<ConstNode>()->value == 0) ||
                  (l->index[k].kind() == ExprKind::Var && std::find(lead_vars.begin(), lead_vars.end(), l->index[k].as<VarNode>()->name) != lead_vars.end());
        if (!plain) bad_read = "the scores are read at another element";
        return;
      }
      if (!program_.find_global(l->tensor) || program_.find_global(l->tensor)->role != GlobalRole::input) bad_read = "the scores' function reads tile " + l->tensor;
      for (auto& i : l->index) scan(i);
      return;
    }
    switch (e.kind()) {
      case ExprKind::Unary: scan(e.as<UnaryNode>()->operand); break;
      case ExprKind::Binary: scan(e.as<BinaryNode>()->lhs); scan(e.as<BinaryNode>()->rhs); break;
      case ExprKind::Select: scan(e.as<SelectNode>()->cond); scan(e.as<SelectNode>()->if_true); scan(e.as<SelectNode>()->if_false); break;
      case ExprKind::Cast: scan(e.as<CastNode>()->operand); break;
      default: break;
    }
  };
  scan(g);
  if (!bad_read.empty()) refuse(bad_read);
  if (!reads_s) refuse("the running max does not read the scores");
  if (cond) {
    if (uses_tensor(*cond, S_)) refuse("the mask reads the scores");
    for (auto& t : tensors_used(*cond))
      if (!program_.find_global(t) || program_.find_global(t)->role != GlobalRole::input)
        refuse("the mask reads staged tile " + t + " (data-dependent bounds: the emitter's per-tile min/max classification, not on the skeleton yet)");
  }

  // ---- Q, K, V and the output: [lead..., seq, head dim], the lead dims flattened into bh ----
  const CopyNode* stage_a = nullptr;
  for (auto* s : before) {
    if (s->kind() == StmtKind::Copy && s->as<CopyNode>()->dst.name == A_ && !stage_a) { stage_a = s->as<CopyNode>(); continue; }
    if (s->kind() == StmtKind::Fill) continue;
    refuse("a statement before the stream other than staging Q and fills");
  }
  if (!stage_a) refuse("Q is not staged before the stream");
  for (auto* s : before) {
    if (s->kind() != StmtKind::Fill) continue;
    auto f = s->as<FillNode>();
    if (f->buffer == acc_m && !(std::isinf(f->value) && f->value < 0)) refuse("the running max does not start at -inf");
    if ((f->buffer == acc_z || f->buffer == acc_o) && f->value != 0) refuse("the running sum or accumulator does not start at 0");
  }
  const GlobalTensor* q = program_.find_global(stage_a->src.name);
  if (!q || q->role != GlobalRole::input || q->dtype != in_dtype_) refuse("Q is not staged from an input of the tiles' type");
  const size_t rank = q->shape.size();
  if (rank < 3) refuse("Q has " + std::to_string(rank) + " dims (the skeleton takes [lead..., seq, head dim] with a head dim)");
  auto copy_var = [](const CopyNode& c, const Expr& e, int64_t* extent) -> std::string {
    if (e.kind() != ExprKind::Var) return "";
    for (auto& a : c.domain.axes)
      if (a.var == e.as<VarNode>()->name) { *extent = a.extent; return a.var; }
    return "";
  };
  auto grid_extent = [&](const std::string& v) -> int64_t {
    for (auto& gd : kernel_.grid)
      if (gd.var == v) return gd.extent;
    return -1;
  };
  // A lead index: a grid variable (plus an extent-1 axis), an extent-1 axis, or 0; returns the grid
  // variable ("" for none) or refuses.
  auto lead_index = [&](const CopyNode& c, const Expr& e, int64_t extent, const char* what) -> std::string {
    int64_t ext = 0;
    if (e.kind() == ExprKind::Const && e.as<ConstNode>()->value == 0 && extent == 1) return "";
    if (!copy_var(c, e, &ext).empty() && ext == 1 && extent == 1) return "";
    std::string gv;
    if (e.kind() == ExprKind::Var && grid_extent(e.as<VarNode>()->name) == extent) gv = e.as<VarNode>()->name;
    if (e.kind() == ExprKind::Binary && e.as<BinaryNode>()->op == BinaryOp::add) {
      auto b = e.as<BinaryNode>();
      for (auto [p, o] : {std::pair{b->lhs, b->rhs}, std::pair{b->rhs, b->lhs}})
        if (p.kind() == ExprKind::Var && grid_extent(p.as<VarNode>()->name) == extent && !copy_var(c, o, &ext).empty() && ext == 1) gv = p.as<VarNode>()->name;
    }
    if (gv.empty()) refuse(std::string(what) + " is read at lead index " + print_expr(e) + " (the skeleton takes one block row per lead index)");
    return gv;
  };
  auto check_tail = [&](const CopyNode& c, const GlobalTensor& t, const std::string& tile_var, int64_t tile, const char* what) {
    int64_t ext = 0;
    const std::string d = copy_var(c, c.src.index[rank - 1], &ext);
    if (d.empty() || ext != t.shape[rank - 1]) refuse(std::string(what) + "'s head-dim index is not the whole row");
    const Expr& seq = c.src.index[rank - 2];
    bool ok = false;
    for (auto& a : c.domain.axes) ok |= a.extent == tile && is_tile_index(seq, tile_var, tile, a.var);
    if (!ok) refuse(std::string(what) + " is read at sequence index " + print_expr(seq) + ", not " + tile_var + " * " + std::to_string(tile) + " + its row");
    if (t.shape[rank - 2] % tile != 0) refuse(std::string(what) + "'s sequence (" + std::to_string(t.shape[rank - 2]) + ") is not a multiple of the tile (" + std::to_string(tile) + ": ragged)");
    if (c.domain.guard.defined()) refuse(std::string(what) + "'s staging is guarded");
  };
  if (stage_a->src.index.size() != rank) refuse("Q's staging index");
  std::vector<std::string> lead_grid(rank - 2);
  for (size_t k = 0; k + 2 < rank; ++k) lead_grid[k] = lead_index(*stage_a, stage_a->src.index[k], q->shape[k], "Q");
  // The row-tile grid variable: the one in Q's sequence index.
  std::string row_grid;
  for (auto& gd : kernel_.grid)
    for (auto& a : stage_a->domain.axes)
      if (a.extent == BM_ && is_tile_index(stage_a->src.index[rank - 2], gd.var, BM_, a.var)) row_grid = gd.var;
  if (row_grid.empty()) refuse("Q's sequence index is not a row tile of the grid");
  check_tail(*stage_a, *q, row_grid, BM_, "Q");
  const int64_t seq_q = q->shape[rank - 2];
  if (grid_extent(row_grid) * BM_ != seq_q) refuse("the row tiles do not cover Q's sequence exactly");
  for (auto& gd : kernel_.grid)
    if (gd.var != row_grid && std::find(lead_grid.begin(), lead_grid.end(), gd.var) == lead_grid.end())
      refuse("grid variable " + gd.var + " indexes no lead dim of Q");
  // K and V: the same lead indices, except the head (the last lead dim) may be `head // G` (GQA).
  const std::string key_tile = loop_->var;
  int64_t heads_kv = q->shape[rank - 3], kv_rows = 0;
  auto check_kv = [&](const CopyNode& c, const char* what) -> const GlobalTensor* {
    const GlobalTensor* t = program_.find_global(c.src.name);
    if (!t || t->role != GlobalRole::input || t->dtype != in_dtype_ || t->shape.size() != rank || c.src.index.size() != rank) refuse(std::string(what) + " is not an input of Q's rank and type");
    for (size_t k = 0; k + 3 < rank; ++k)
      if (print_expr(c.src.index[k]) != print_expr(stage_a->src.index[k]) || t->shape[k] != q->shape[k]) refuse(std::string(what) + "'s batch index differs from Q's");
    const Expr& h = c.src.index[rank - 3];
    const std::string qh = print_expr(stage_a->src.index[rank - 3]);
    int64_t kv = q->shape[rank - 3];
    if (print_expr(h) != qh || t->shape[rank - 3] != q->shape[rank - 3]) {
      bool gqa = false;
      if (h.kind() == ExprKind::Binary && h.as<BinaryNode>()->op == BinaryOp::floordiv) {
        auto b = h.as<BinaryNode>();
        const std::string lhs = print_expr(b->lhs);
        // Q's head index, or its grid variable alone (the extent-1 axis dropped from the tile)
        bool same = lhs == qh || lhs == lead_grid[rank - 3];
        double group = evaluate_with(b->rhs, {}, {}, program_.dims);
        if (same && group >= 1 && group == std::floor(group) && static_cast<int64_t>(group) * t->shape[rank - 3] == q->shape[rank - 3]) {
          gqa = true;
          kv = t->shape[rank - 3];
        }
      }
      if (!gqa) refuse(std::string(what) + "'s head index " + print_expr(h) + " is neither Q's nor Q's // (heads / kv heads)");
    }
    heads_kv = kv;
    check_tail(c, *t, key_tile, BN_, what);
    if (kv_rows && t->shape[rank - 2] != kv_rows) refuse("K and V differ in length");
    kv_rows = t->shape[rank - 2];
    return t;
  };
  const GlobalTensor* k = check_kv(*stage_b, "K");
  const int64_t heads_k = heads_kv;
  const GlobalTensor* v = check_kv(*stage_v, "V");
  if (heads_kv != heads_k || v->shape != k->shape) refuse("K and V differ in shape");
  const int64_t seq_k = kv_rows;
  {
    RangeFacts facts;
    facts.dims = program_.dims;
    auto b = facts.bound(loop_->begin), e = facts.bound(loop_->end);
    if (!b || !e || b->lo != 0 || b->hi != 0 || e->lo != e->hi || e->lo * BN_ != seq_k) refuse("the stream does not run over every key tile (" + print_expr(loop_->begin) + " .. " + print_expr(loop_->end) + ")");
  }
  // After the stream: o_tile = o_acc · (1 / z) and its store.
  const CopyNode* store = nullptr;
  const MapNode* finish = nullptr;
  for (auto* s : after) {
    if (s->kind() == StmtKind::Copy && !store) { store = s->as<CopyNode>(); continue; }
    if (s->kind() == StmtKind::Map && !store) {
      auto mp = s->as<MapNode>();
      if (guarded(mp->domain)) refuse("a guarded statement after the stream");
      if ((mp->dst.name == m && load_of(mp->value, acc_m)) || (mp->dst.name == z && load_of(mp->value, acc_z))) continue;
      if (!finish) { finish = mp; continue; }
    }
    refuse("the statements after the stream are not o = o_acc / z and its store");
  }
  if (!finish || !store) refuse("no o = o_acc / z stored after the stream");
  {
    const size_t row_rank = kernel_.find_buffer(m)->shape.size();
    const std::string row = index_text(finish->dst.index, row_rank), all = index_text(finish->dst.index, finish->dst.index.size());
    const std::string text = print_expr(finish->value);
    if (text != acc_o + all + " * (1.0 / " + z + row + ")" && text != acc_o + all + " / " + z + row) refuse("the result is " + text + ", not o_acc / z");
  }
  const GlobalTensor* o = program_.find_global(store->dst.name);
  if (!o || o->role != GlobalRole::output || store->src.name != finish->dst.name || o->shape.size() != rank || store->domain.guard.defined())
    refuse("the result is not stored whole to an output");
  for (size_t k2 = 0; k2 < rank; ++k2)
    if (o->shape[k2] != q->shape[k2]) refuse("the output's shape differs from Q's");
  for (size_t k2 = 0; k2 + 2 < rank; ++k2)
    if (print_expr(store->dst.index[k2]) != print_expr(stage_a->src.index[k2])) refuse("the output's lead index differs from Q's");
  {
    CopyNode as_read = *store;  // the store's destination index read like a staging index
    as_read.src = store->dst;
    check_tail(as_read, *o, row_grid, BM_, "the output");
  }
  const DType tile_type = kernel_.find_buffer(finish->dst.name)->dtype;
  if (tile_type != o->dtype && tile_type != DType::f32) refuse("the result is rounded to " + std::string(dtype_name(tile_type)) + " before its " + std::string(dtype_name(o->dtype)) + " store");

  // ---- Every query row sees a key ----
  // The skeleton gives a row that sees no key zeros; the program's softmax gives it 0/0. The skeleton
  // is taken only where C holds for some key of every row (of every head C depends on), checked here
  // on the diagonal, the first and the last key, then every key of a row that fails those.
  if (cond) {
    if (!tensors_used(*cond).empty()) refuse("the mask reads a tensor: that every query row sees a key is not known at compile time");
    std::map<std::string, Expr> zeros;
    for (auto& lv : lead_vars) zeros[lv] = make_int(0);
    const Expr c0 = substitute_vars(*cond, zeros);
    const std::vector<std::string> used = vars_used(c0);
    auto uses = [&](const std::string& v) { return std::find(used.begin(), used.end(), v) != used.end(); };
    CompiledExpr::Bindings bindings;
    bindings.dims = program_.dims;
    std::vector<size_t> lead_slots;  // q dims whose grid variable C reads
    for (size_t k2 = 0; k2 + 2 < rank; ++k2)
      if (!lead_grid[k2].empty() && uses(lead_grid[k2])) {
        lead_slots.push_back(k2);
        bindings.vars.push_back(lead_grid[k2]);
      }
    const size_t at_row = bindings.vars.size();
    bindings.vars.push_back(row_grid);
    bindings.vars.push_back(row_var);
    bindings.vars.push_back(key_tile);
    bindings.vars.push_back(col_var);
    for (auto& v : used)
      if (std::find(bindings.vars.begin(), bindings.vars.end(), v) == bindings.vars.end()) refuse("the mask uses variable " + v);
    CompiledExpr visible(c0, bindings, Arithmetic::float64);
    int64_t heads_checked = 1;
    for (size_t k2 : lead_slots) heads_checked *= q->shape[k2];
    int64_t budget = 50'000'000;  // evaluations
    if (heads_checked * seq_q * 3 > budget) refuse("too many rows to check that every query row sees a key");
    std::vector<int64_t> at(bindings.vars.size(), 0);
    for (int64_t hc = 0; hc < heads_checked; ++hc) {
      int64_t rest = hc;
      for (size_t s2 = lead_slots.size(); s2-- > 0;) {
        at[s2] = rest % q->shape[lead_slots[s2]];
        rest /= q->shape[lead_slots[s2]];
      }
      for (int64_t r = 0; r < seq_q; ++r) {
        at[at_row] = r / BM_;
        at[at_row + 1] = r % BM_;
        auto sees = [&](int64_t col) {
          at[at_row + 2] = col / BN_;
          at[at_row + 3] = col % BN_;
          --budget;
          return visible.eval(at.data()) != 0;
        };
        if (sees(std::min(r, seq_k - 1)) || sees(0) || sees(seq_k - 1)) continue;
        bool any = false;
        for (int64_t col = 0; col < seq_k && !any && budget > 0; ++col) any = sees(col);
        if (!any && budget <= 0) refuse("too many rows to check that every query row sees a key");
        if (!any) refuse("query row " + std::to_string(r) + " sees no key under the mask (the skeleton would write zeros where the program's softmax is 0/0)");
      }
    }
  }

  // ---- The configuration ----
  const double scale = has_scale_ ? evaluate_with(score_scale_, {}, {}, program_.dims) : 1.0;
  if (!std::isfinite(scale)) refuse("the scores' scale is not finite");
  const bool identity = g.kind() == ExprKind::Load && scale > 0;
  // The configuration per cell, from the skeleton's own sweep (bench/results/h100/attention-skeleton.md):
  // hd64 192 x 128 with 4 stages (3 consumers: only with the identity score, 160 registers each);
  // hd128 128 x 128 with 2 stages; under a mask that skips tiles (causal-like) at short sequences
  // (≤ 1k) persistent blocks, one per SM, 128 x 128 with 4 (hd64) or 3 stages (hd128).
  const bool short_masked = cond && seq_q <= 1024 && D_ <= 128;  // hd128 S 4k: 546 µs persistent, 505 not
  const int consumers = D_ == 64 && identity && !short_masked ? 3 : 2;
  const int bn = D_ == 256 ? 64 : 128, stages = D_ == 64 ? 4 : short_masked ? 3 : 2;
  const bool persistent = short_masked;
  const int bm = 64 * consumers;
  const std::string config = std::string("solder::attention::Config<") + skeleton_dtype_name(in_dtype_) + ", " + std::to_string(D_) + ", " + std::to_string(bn) + ", " +
                             std::to_string(stages) + ", " + std::to_string(consumers) + (persistent ? ", true" : "") + ">";
  constexpr int64_t kSmCount = 132;  // H100 SXM: persistent blocks, one per SM
  int64_t heads = q->shape[rank - 3], batch = 1;
  for (size_t k2 = 0; k2 + 3 < rank; ++k2) batch *= q->shape[k2];
  const int64_t tiles = (seq_q + bm - 1) / bm * batch * heads;

  // ---- The functors ----
  std::ostringstream out;
  std::ostringstream members;
  for (auto& gl : program_.globals)
    members << "  " << (gl.role == GlobalRole::input ? "const " : "") << cuda_element_type(gl.dtype) << "* " << cuda_identifier(gl.name) << ";\n";
  // The grid variables from bh_ (the lead dims flattened), the tile-local variables from row_ / col_.
  auto decode = [&](bool with_row, bool with_col) {
    std::string s;
    int64_t stride = 1;
    std::vector<std::string> lines;
    for (size_t k2 = rank - 2; k2-- > 0;) {
      if (!lead_grid[k2].empty())
        lines.push_back("    const long long " + cuda_identifier(lead_grid[k2]) + " = (static_cast<long long>(bh_) / " + std::to_string(stride) + "LL) % " +
                        std::to_string(q->shape[k2]) + "LL; (void)" + cuda_identifier(lead_grid[k2]) + ";\n");
      stride *= q->shape[k2];
    }
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) s += *it;
    for (auto& lv : lead_vars) s += "    const long long " + cuda_identifier(lv) + " = 0; (void)" + cuda_identifier(lv) + ";\n";
    if (with_row)
      s += "    const long long " + cuda_identifier(row_grid) + " = row_ / " + std::to_string(BM_) + "LL, " + cuda_identifier(row_var) + " = row_ % " + std::to_string(BM_) +
           "LL; (void)" + cuda_identifier(row_grid) + "; (void)" + cuda_identifier(row_var) + ";\n";
    if (with_col)
      s += "    const long long " + cuda_identifier(key_tile) + " = col_ / " + std::to_string(BN_) + "LL, " + cuda_identifier(col_var) + " = col_ % " + std::to_string(BN_) +
           "LL; (void)" + cuda_identifier(key_tile) + "; (void)" + cuda_identifier(col_var) + ";\n";
    return s;
  };
  auto globals_bounded = [&](const Expr& e) { return rewrite_loads(e, [&](const LoadNode& l, const Expr& self) -> Expr { return l.tensor == S_ ? self : bounded(l, self); }); };
  const std::string score = name + "_score_", mask = name + "_mask_", epilogue = name + "_epilogue_";
  out << "struct " << score << " {\n" << members.str();
  constexpr double kLog2e = 1.4426950408889634;
  std::string score_text;
  if (identity) {
    score_text = "the dot product (scale " + std::to_string(scale) + " folded into exp2)";
    out << "  // the logit is the dot product: its scale " << print_expr(score_scale_) << " is folded into the exponent\n";
    out << "  static constexpr float scale_log2 = " << cuda_float_literal(kLog2e * scale) << ";\n";
    out << "  static constexpr bool kIdentity = true;\n";
    out << "  __device__ float operator()(int, int, int, float dot_) const { return dot_; }\n";
  } else {
    score_text = print_expr(g) + " with " + S_ + " = " + (has_scale_ ? print_expr(score_scale_) + " · " : std::string("")) + "dot";
    arrays_["(&s_)"] = CudaArray{"(&s_)", {}, DType::f32, false};
    // As for the mask: the global row and column where the IR writes i_t * BM + i and j_t * BN + j
    // (int arithmetic instead of 64-bit divisions per score), and x / c as x * (1 / c).
    std::map<std::string, Expr> zeros;
    for (auto& lv : lead_vars) zeros[lv] = make_int(0);
    Expr g2 = substitute_vars(g, zeros);
    g2 = replace_tile_index(g2, row_grid, BM_, row_var, make_var("row_"));
    g2 = replace_tile_index(g2, key_tile, BN_, col_var, make_var("col_"));
    g2 = divisions_as_products(g2);
    const Expr gs = rewrite_loads(globals_bounded(g2), [&](const LoadNode& l, const Expr& self) -> Expr { return l.tensor == S_ ? make_load("(&s_)", {}) : self; });
    out << "  // the logit: " << print_expr(g) << ", " << S_ << " = " << (has_scale_ ? print_expr(score_scale_) : std::string("1")) << " · the dot product\n";
    out << "  static constexpr float scale_log2 = " << cuda_float_literal(kLog2e) << ";\n";
    out << "  static constexpr bool kIdentity = false;\n";
    out << "  __device__ float operator()(int bh_, int row_, int col_, float dot_) const {\n" << decode(true, true);
    out << "    const float s_ = dot_ * " << cuda_float_literal(scale) << ";\n";
    out << "    return " << printer_.print_float(gs) << ";\n  }\n";
  }
  out << "};\n";
  std::string skip_text = "none (no mask: every key tile of the sequence)";
  out << "struct " << mask << " {\n" << members.str();
  if (!cond) {
    out << "  // no mask: every key tile, no element masked (keys past the sequence: the skeleton's own mask)\n";
    out << "  __device__ void key_tiles(int, int, int, int seq_k_, int bn_, int* begin_, int* end_) const { *begin_ = 0; *end_ = (seq_k_ + bn_ - 1) / bn_; }\n";
    out << "  __device__ bool partial(int, int, int, int, int) const { return false; }\n";
    out << "  __device__ bool visible(int, int, int) const { return true; }\n";
  } else {
    // The interval decision over rows [row_lo_, row_hi_] and columns [col_lo_, col_hi_].
    Expr c = *cond;
    std::map<std::string, Expr> zeros;
    for (auto& lv : lead_vars) zeros[lv] = make_int(0);
    c = substitute_vars(c, zeros);
    c = replace_tile_index(c, row_grid, BM_, row_var, make_var("row_"));
    c = replace_tile_index(c, key_tile, BN_, col_var, make_var("col_"));
    std::optional<Expr> live, may_fail;
    if (!mentions(c, row_grid) && !mentions(c, row_var) && !mentions(c, key_tile) && !mentions(c, col_var)) {
      IntervalBuilder ib;
      ib.dims = program_.dims;
      ib.vars["row_"] = {make_var("row_lo_"), make_var("row_hi_")};
      ib.vars["col_"] = {make_var("col_lo_"), make_var("col_hi_")};
      ib.load_range = [](const LoadNode&) -> std::optional<IntervalExpr> { return std::nullopt; };
      live = ib.may_be_true(c);
      may_fail = ib.may_be_false(c);
    }
    std::string lead_decode = decode(false, false);
    out << "  // mask " << print_expr(*cond) << "; as rows row_ and columns col_: " << print_expr(c) << "\n";
    out << "  // may it hold somewhere on rows [row_lo_, row_hi_] x columns [col_lo_, col_hi_]? (interval bounds)\n";
    out << "  __device__ bool live_(int bh_, long long row_lo_, long long row_hi_, long long col_lo_, long long col_hi_) const {\n" << lead_decode;
    out << "    (void)row_lo_; (void)row_hi_; (void)col_lo_; (void)col_hi_;\n";
    out << "    return " << (live ? printer_.print_bool(*live) : std::string("true")) << ";\n  }\n";
    out << "  // the key tiles from the first to the last that may hold an unmasked score; those outside are skipped\n";
    out << "  __device__ void key_tiles(int bh_, int row0_, int rows_, int seq_k_, int bn_, int* begin_, int* end_) const {\n";
    out << "    const int tiles_ = (seq_k_ + bn_ - 1) / bn_;\n";
    out << "    int b_ = 0, e_ = tiles_;\n";
    out << "    while (b_ < tiles_ && !live_(bh_, row0_, row0_ + rows_ - 1, static_cast<long long>(b_) * bn_, static_cast<long long>(b_) * bn_ + bn_ - 1)) ++b_;\n";
    out << "    while (e_ > b_ && !live_(bh_, row0_, row0_ + rows_ - 1, static_cast<long long>(e_ - 1) * bn_, static_cast<long long>(e_) * bn_ - 1)) --e_;\n";
    out << "    *begin_ = b_; *end_ = e_;\n  }\n";
    out << "  // a boundary tile: the mask may be false somewhere on it (only these evaluate visible() per element)\n";
    out << "  __device__ bool partial(int bh_, int row0_, int rows_, int col0_, int bn_) const {\n" << lead_decode;
    out << "    const long long row_lo_ = row0_, row_hi_ = row0_ + rows_ - 1, col_lo_ = col0_, col_hi_ = col0_ + bn_ - 1;\n";
    out << "    (void)row_lo_; (void)row_hi_; (void)col_lo_; (void)col_hi_;\n";
    out << "    return " << (may_fail ? printer_.print_bool(*may_fail) : std::string("true")) << ";\n  }\n";
    out << "  __device__ bool visible(int bh_, int row_, int col_) const {\n" << (live ? lead_decode : decode(true, true));
    if (live) out << "    return " << printer_.print_bool(globals_bounded(c)) << ";  // on global rows and columns\n  }\n";
    else out << "    return " << printer_.print_bool(globals_bounded(*cond)) << ";\n  }\n";
    if (live)
      skip_text = "key tiles outside [first, last] tile where " + print_expr(c) + " may hold (interval bounds over the block's rows and the tile's columns) are skipped; tiles where it may fail (" +
                  (may_fail ? std::string("interval bounds") : std::string("every tile")) + ") evaluate the mask per element";
    else
      skip_text = "none: the mask " + print_expr(*cond) + " has no interval bound over rows and columns (every tile computed, the mask per element)";
  }
  out << "};\n";
  out << "struct " << epilogue << " {\n" << members.str();
  {
    const std::string op = cuda_identifier(o->name);
    out << "  // " << o->name << "[.., row, col], [.., row, col + 1] = o / Σp, rounded to " << dtype_name(o->dtype) << "\n";
    out << "  __device__ void operator()(int bh_, int row_, int col_, float o0_, float o1_) const {\n";
    out << "    const long long at_ = (static_cast<long long>(bh_) * " << seq_q << "LL + row_) * " << D_ << "LL + col_;\n";
    if (o->dtype == DType::bf16) out << "    *reinterpret_cast<__nv_bfloat162*>(&" << op << "[at_]) = __floats2bfloat162_rn(o0_, o1_);\n";
    else if (o->dtype == DType::f16) out << "    *reinterpret_cast<__half2*>(&" << op << "[at_]) = __floats2half2_rn(o0_, o1_);\n";
    else out << "    solder::store(&" << op << "[at_], o0_);\n    solder::store(&" << op << "[at_ + 1], o1_);\n";
    out << "  }\n};\n";
  }
  out << "using " << name << "_config_ = " << config << ";\n";
  out << "SOLDER_ATTENTION_KERNEL(" << name << ", " << name << "_config_, " << score << ", " << mask << ", " << epilogue << ")\n";

  AttentionSkeletonKernel result;
  std::ostringstream head;
  const std::string summary = config + " (" + std::to_string(bm) + " query rows x " + std::to_string(bn) + " keys per tile, " + std::to_string(stages) + "-stage K/V ring, " +
                              std::to_string(consumers) + " consumer warpgroups in ping-pong + 1 TMA producer warp), " + std::to_string(tiles) + " work tiles" +
                              (persistent ? " on " + std::to_string(std::min<int64_t>(tiles, kSmCount)) + " persistent blocks (longest first, snake order)" : std::string("")) + ", " +
                              (heads_kv != heads ? "GQA " + std::to_string(heads) + " heads on " + std::to_string(heads_kv) + " KV heads, " : std::string("")) +
                              "score: " + score_text + "; skipped tiles: " + skip_text + "; block order: the query tiles of a head last to first (the longest causal rows first)";
  head << "#include <solder/attention/sm90_attention.cuh>\n";
  head << "// kernel " << kernel_.name << ": computes";
  for (auto& d : kernel_.definitions) head << " " << d;
  head << "\n// on the sm_90a attention skeleton: " << summary << "\n";
  head << "// the Kernel IR's online softmax (running max " << acc_m << ", sum " << acc_z << ", accumulator " << acc_o << ") is the skeleton's row state; Q = " << q->name
       << ", K = " << k->name << ", V = " << v->name << ", O = " << o->name << "\n";
  result.source = head.str() + out.str();
  result.summary = summary;
  result.info.name = name;
  result.info.threads = 128 * (consumers + 1);
  result.info.cluster = 1;
  result.info.blocks = persistent ? std::min<int64_t>(tiles, kSmCount) : tiles;
  result.info.shared_bytes = static_cast<int64_t>(bm) * D_ * 2 + 2LL * stages * bn * D_ * 2 + 8 * (2 + 4 * stages) + 1024;
  AttentionSkeletonLaunch launch;
  auto global_index = [&](const std::string& n) {
    for (size_t i = 0; i < program_.globals.size(); ++i)
      if (program_.globals[i].name == n) return i;
    return size_t{0};
  };
  auto operand = [&](const GlobalTensor& t, int64_t rows, int64_t lead, int tile_rows) {
    GemmSkeletonLaunch::Operand r;
    r.global = global_index(t.name);
    r.dtype = in_dtype_ == DType::f16 ? 1 : 0;
    r.k_major = true;
    r.rows = rows;
    r.k = D_;
    r.ld = D_;
    r.batch = lead;
    r.batch_stride = rows * D_;
    r.tile_rows = tile_rows;
    r.tile_k = 64;
    return r;
  };
  launch.q = operand(*q, seq_q, batch * heads, 64);
  launch.k = operand(*k, seq_k, batch * heads_kv, bn);
  launch.v = operand(*v, seq_k, batch * heads_kv, bn);
  launch.batch = static_cast<int>(batch);
  launch.heads = static_cast<int>(heads);
  launch.heads_kv = static_cast<int>(heads_kv);
  launch.seq_q = static_cast<int>(seq_q);
  launch.seq_k = static_cast<int>(seq_k);
  launch.config = config;
  result.info.attention = launch;
  return result;
}

}  // namespace solder::mma_stream

namespace solder {

std::optional<AttentionSkeletonKernel> generate_attention_skeleton_kernel(const KernelProgram& program, const Kernel& kernel, const Kernel& contract_kernel,
                                                                          std::string* refusal) {
  if (const char* forced = std::getenv("SOLDER_MMA_PATH"); forced && *forced && std::string(forced) != "skeleton") {
    if (refusal) *refusal = std::string("SOLDER_MMA_PATH=") + forced;
    return std::nullopt;
  }
  try {
    mma_stream::MmaStreamWriter writer(program, kernel);
    return writer.write_skeleton(contract_kernel);
  } catch (const mma_stream::Refusal& r) {
    if (refusal) *refusal = r.why;
    return std::nullopt;
  }
}

}  // namespace solder
