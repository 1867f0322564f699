// Analysis of the tensor-core emitter: whether a kernel has the streamed two-contraction shape
// (mma_stream_codegen.h), the roles of its buffers, the masked-identity rule and the score modifier.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>

#include "backend/cuda/mma_stream_writer.h"
#include "algebra/normal_form.h"
#include "ir/diagnostics.h"
#include "ir/expr_eval.h"
#include "ir/interval.h"
#include "ir/printer.h"

namespace solder::mma_stream {

void MmaStreamWriter::find_score_modifier() {
  std::vector<const ReduceNode*> readers;
  for (auto& s : loop_->body) {
    if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() != scores_ && uses_tensor(s.as<ReduceNode>()->value, S_)) readers.push_back(s.as<ReduceNode>());
    if (s.kind() == StmtKind::Map && uses_tensor(s.as<MapNode>()->value, S_)) return;
  }
  if (readers.size() < 2) return;
  Expr g = readers[0] == pv_ ? p_value_ : readers[0]->value;
  if (g.kind() == ExprKind::Select && mask_ && structurally_equal(g.as<SelectNode>()->cond, *mask_) && is_neg_infinity(g.as<SelectNode>()->if_false))
    g = g.as<SelectNode>()->if_true;
  if (g.kind() == ExprKind::Load || !uses_tensor(g, S_)) return;
  for (auto& t : tensors_used(g))
    if (t != S_ && roles_.count(t)) return;  // G reads S, constants, indices and inputs only
  // every read of S must be inside G
  std::function<bool(const Expr&)> covered = [&](const Expr& e) -> bool {
    if (structurally_equal(e, g)) return true;
    if (e.kind() == ExprKind::Load) return e.as<LoadNode>()->tensor != S_;
    switch (e.kind()) {
      case ExprKind::Unary: return covered(e.as<UnaryNode>()->operand);
      case ExprKind::Binary: return covered(e.as<BinaryNode>()->lhs) && covered(e.as<BinaryNode>()->rhs);
      case ExprKind::Select: return covered(e.as<SelectNode>()->cond) && covered(e.as<SelectNode>()->if_true) && covered(e.as<SelectNode>()->if_false);
      case ExprKind::Cast: return covered(e.as<CastNode>()->operand);
      default: return true;
    }
  };
  for (auto* r : readers)
    if (!covered(r == pv_ ? p_value_ : r->value) || (r->where.defined() && uses_tensor(r->where, S_))) return;
  modifier_ = g;
}

bool MmaStreamWriter::leading_ones(const std::vector<int64_t>& shape, size_t keep) {
  for (size_t k = 0; k + keep < shape.size(); ++k)
    if (shape[k] != 1) return false;
  return shape.size() >= keep;
}

// ---- Analysis ---------------------------------------------------------------------------------
void MmaStreamWriter::analyze() {
  if (kernel_.cluster != 1) refuse("the kernel runs in clusters of " + std::to_string(kernel_.cluster));
  for (auto& s : kernel_.body) {
    if (s.kind() == StmtKind::For) {
      if (loop_) refuse("more than one stream loop");
      loop_ = s.as<ForNode>();
    } else if (s.kind() != StmtKind::Copy && s.kind() != StmtKind::Fill && s.kind() != StmtKind::Map) {
      refuse("a top-level statement other than copy, fill, map and one loop");
    }
  }
  if (!loop_) refuse("no stream loop");
  collect_index_facts();
  for (auto& s : loop_->body) {
    if (s.kind() != StmtKind::Copy && s.kind() != StmtKind::Fill && s.kind() != StmtKind::Map && s.kind() != StmtKind::Reduce)
      refuse("the stream loop holds a statement other than copy, fill, map and reduce");
    if (s.kind() != StmtKind::Reduce) continue;
    auto r = s.as<ReduceNode>();
    if (!scores_ && is_scores_contraction(*r)) scores_ = r;
    else if (scores_ && !pv_ && is_second_contraction(*r)) pv_ = r;
  }
  if (!scores_) refuse("no contraction S = sum(d) A[i, d] * B[j, d] of two 16-bit tiles in the loop");
  if (!pv_) refuse("no second contraction O += sum(j) P[i, j] * V[j, dv] after the scores");
  if (BM_ % 16 || BM_ < 16 || BM_ > 128) refuse("the row tile (" + std::to_string(BM_) + ") is not 16 to 128 rows in steps of 16");
  if (BN_ % 16 || D_ % 16 || DV_ % 16) refuse("tiles of " + std::to_string(BN_) + " columns, depth " + std::to_string(D_) + ", width " + std::to_string(DV_) + " are not multiples of 16");
  if (D_ > 256 || DV_ > 256 || BN_ > 128) refuse("the fragments would not fit in registers (depth and width up to 256, 128 columns)");
  wgmma_refused_ = wgmma_refusal();
  wgmma_ = wgmma_refused_.empty();
  if (wgmma_) {
    // One warpgroup per 64 rows, each warp 16 of them (G = 1); a power-of-two scale multiplies A
    // in shared memory once (emit_a_wgmma).
    G_ = 1;
  } else {
    // Two row groups per warp halve the shared-memory reads per mma (FlashAttention-2's layout)
    // where the doubled score, accumulator and A fragments still fit in registers.
    G_ = (BM_ % 32 == 0 && BM_ >= 64 && D_ <= 64 && DV_ <= 64 && BN_ <= 64) ? 2 : 1;
    if (const char* forced = std::getenv("SOLDER_MMA_ROW_GROUPS"))  // tuning experiments (docs/runtime.md)
      if ((forced[0] == '1' || forced[0] == '2') && BM_ % (16 * (forced[0] - '0')) == 0) G_ = forced[0] - '0';
  }
  warps_ = static_cast<int>(BM_ / (16 * G_));
  // Every buffer gets a role.
  for (auto& b : kernel_.buffers) {
    if (b.name == S_) roles_[b.name] = Role::scores;
    else if (b.name == A_) roles_[b.name] = Role::tile_a;
    else if (b.name == B_) roles_[b.name] = Role::tile_b;
    else if (b.name == V_) roles_[b.name] = Role::tile_v;
    else if (b.scope != Scope::shared && b.scope != Scope::register_file) refuse("buffer " + b.name + " is not a register or shared tile");
    else if (b.elements() == 1) roles_[b.name] = Role::scalar;
    // a tile staged from an input each step is a column tile, also where BN == BM
    else if (leading_ones(b.shape, 1) && b.shape.back() == BN_ && column_source(b.name)) roles_[b.name] = Role::column;
    else if (leading_ones(b.shape, 2) && b.shape[b.shape.size() - 2] == BM_ && b.shape.back() == BN_ && score_source(b.name)) roles_[b.name] = Role::score_input;
    else if (leading_ones(b.shape, 1) && b.shape.back() == BM_) roles_[b.name] = Role::row;
    else if (leading_ones(b.shape, 2) && b.shape[b.shape.size() - 2] == BM_ && b.shape.back() == DV_) roles_[b.name] = Role::wide;
    else refuse("buffer " + b.name + " is neither a row state [" + std::to_string(BM_) + "] nor a [" + std::to_string(BM_) + ", " + std::to_string(DV_) + "] tile");
  }
  if (kernel_.find_buffer(B_)->dtype != in_dtype_ || kernel_.find_buffer(V_)->dtype != in_dtype_) refuse("the contraction tiles differ in type");
  if (kernel_.find_buffer(S_)->dtype != DType::f32) refuse("the scores are rounded to " + std::string(dtype_name(kernel_.find_buffer(S_)->dtype)));
  if (scores_->accumulate) {  // the tensor-core contraction starts from zero: the IR must too
    bool zeroed = false;
    for (auto& s : loop_->body) {
      if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() == scores_) break;
      if (s.kind() == StmtKind::Fill && s.as<FillNode>()->buffer == S_) zeroed = s.as<FillNode>()->value == 0;
    }
    if (!zeroed) refuse("the scores accumulate onto values other than zero");
  }
  find_live_condition();
  find_score_modifier();
  const char* classes = std::getenv("SOLDER_TILE_CLASSES");  // A/B runs against per-tile classification (docs/runtime.md)
  if (live_condition_ && !column_ranges_.empty() && !(classes && std::string(classes) == "lazy")) {
    // The table of key-tile classes holds the most tiles a block streams (bounded over the grid).
    RangeFacts facts;
    facts.dims = program_.dims;
    for (const GridDim& g : kernel_.grid) facts.vars[g.var] = {0, g.extent - 1};
    auto begin = facts.bound(loop_->begin), end = facts.bound(loop_->end);
    if (begin && end && end->hi - begin->lo > 0 && end->hi - begin->lo <= 8192) class_tiles_ = end->hi - begin->lo;
  }
  if (wgmma_) {
    // The deepest ring (4, 3 or 2 stages) that leaves room for two blocks per SM (2 x (bytes + 1 KB
    // reserved) <= 228 KB): at head dim 128 a fourth stage would cost the second block.
    auto bytes = [&](int stages) { return 2 * BM_ * D_ + stages * 2 * BN_ * (D_ + DV_) + 1024 + (row_ranges_.empty() ? 0 : 16 * warps_) + class_table_bytes(); };
    stages_ = bytes(4) <= 115712 ? 4 : bytes(3) <= 115712 ? 3 : 2;
  }
  plan_grid_order();
  const std::string path =
      wgmma_ ? std::to_string(warps_ / 4) + (warps_ == 4 ? " warpgroup" : " warpgroups") + " of 64 rows, wgmma m64n" + std::to_string(BN_) + "k16 and m64n" + std::to_string(DV_) + "k16 " +
                   std::string(dtype_name(in_dtype_)) + ", " + std::to_string(stages_) + "-stage ring of " + B_ + " and " + V_
             : std::to_string(warps_) + " warps of " + std::to_string(16 * G_) + " rows, mma.sync m16n8k16 " + std::string(dtype_name(in_dtype_)) +
                   " (wgmma refused: " + wgmma_refused_ + ")";
  summary_ = std::to_string(BM_) + " rows x " + std::to_string(BN_) + " columns per step, " + path + "; " + (live_condition_ ? "tiles the mask empties are skipped (" + skip_rule() + ")" : "no tile skipping (" + skip_refusal_ + ")") +
             (modifier_ ? "; score modifier applied once: " + print_expr(*modifier_) : "") +
             (order_var_ >= 0 ? "; longest rows first: " + kernel_.grid[order_var_].var + " by live key tiles, descending, in groups of " + std::to_string(order_group_)
                              : "");
}

// The rule that classifies the tiles, in words (for the summary the kernel's comment and `solder emit` show).
std::string MmaStreamWriter::skip_rule() const {
  std::string rule = "interval bounds of " + print_expr(*mask_) + " over each tile";
  if (row_ranges_.empty() && column_ranges_.empty()) return rule + ", from its index expressions";
  rule += ", with the min/max of";
  for (auto& r : row_ranges_) rule += " " + r + " over the block's rows,";
  for (auto* c : column_ranges_) rule += " " + c->tensor + " over each key tile,";
  rule.pop_back();
  return rule + (class_tiles_ ? "; every key tile classified once per block into shared memory" : "; each tile classified when the loop reaches it");
}

void MmaStreamWriter::plan_grid_order() {
  const char* forced = std::getenv("SOLDER_GRID_ORDER");  // A/B runs (docs/runtime.md)
  if (forced && std::string(forced) == "plain") { order_refusal_ = "SOLDER_GRID_ORDER=plain"; return; }
  if (!live_condition_ || !row_ranges_.empty() || !column_ranges_.empty()) { order_refusal_ = "no mask decided at compile time"; return; }
  // The grid variables the key tiles of a block depend on.
  std::set<std::string> used;
  for (const Expr* e : std::initializer_list<const Expr*>{&*live_condition_, &loop_->begin, &loop_->end})
    for (auto& v : vars_used(*e)) used.insert(v);
  used.erase(loop_->var);
  int var = -1;
  for (size_t g = 0; g < kernel_.grid.size(); ++g)
    if (used.count(kernel_.grid[g].var)) {
      if (var >= 0) { order_refusal_ = "the live tiles depend on two grid variables"; return; }
      var = static_cast<int>(g);
    }
  for (auto& v : used) {
    bool grid = false;
    for (auto& g : kernel_.grid) grid |= g.var == v;
    if (!grid) { order_refusal_ = "the live tiles depend on " + v; return; }
  }
  if (var < 0) { order_refusal_ = "every block streams the same tiles"; return; }
  const int64_t extent = kernel_.grid[var].extent;
  RangeFacts facts;
  facts.dims = program_.dims;
  for (const GridDim& g : kernel_.grid) facts.vars[g.var] = {0, g.extent - 1};
  auto begin_bound = facts.bound(loop_->begin), end_bound = facts.bound(loop_->end);
  if (!begin_bound || !end_bound || (end_bound->hi - begin_bound->lo) * extent > 4'000'000) { order_refusal_ = "too many tiles to count"; return; }
  // Live key tiles per value of the variable, counted with the very expressions the kernel evaluates.
  CompiledExpr::Bindings bindings;
  bindings.vars = {kernel_.grid[var].var, loop_->var};
  bindings.dims = program_.dims;
  CompiledExpr live(*live_condition_, bindings, Arithmetic::float64), begin(loop_->begin, bindings, Arithmetic::float64),
      end(loop_->end, bindings, Arithmetic::float64);
  std::vector<int64_t> counts;
  for (int64_t x = 0; x < extent; ++x) {
    int64_t at[2] = {x, 0}, count = 0;
    const auto b = static_cast<int64_t>(begin.eval(at)), e = static_cast<int64_t>(end.eval(at));
    for (int64_t t = b; t < e; ++t) {
      at[1] = t;
      count += live.eval(at) != 0;
    }
    counts.push_back(count);
  }
  if (!std::is_sorted(counts.begin(), counts.end()) || counts.front() == counts.back()) {
    order_refusal_ = "the live tiles do not grow with " + kernel_.grid[var].var;
    return;
  }
  // Groups of the other grid variables whose K and V (every key tile of a block) fit in half of L2
  // (50 MB on the H100): consecutive blocks share them.
  int64_t others = 1;
  for (size_t g = 0; g < kernel_.grid.size(); ++g)
    if (static_cast<int>(g) != var) others *= kernel_.grid[g].extent;
  const int64_t kv_bytes = std::max<int64_t>(1, (end_bound->hi - begin_bound->lo) * BN_ * (D_ + DV_) * 2);
  order_group_ = std::clamp<int64_t>(25'000'000 / kv_bytes, 1, others);
  order_var_ = var;
}

// blockIdx.x → the grid variables: the plain order (the last grid variable fastest) or the
// longest-first order of plan_grid_order.
void MmaStreamWriter::emit_block_decode(std::ostringstream& out) const {
  if (order_var_ < 0) {
    out << "  long long block_linear = blockIdx.x;\n";
  } else {
    const GridDim& row = kernel_.grid[order_var_];
    int64_t others = 1;
    for (size_t g = 0; g < kernel_.grid.size(); ++g)
      if (static_cast<int>(g) != order_var_) others *= kernel_.grid[g].extent;
    const std::string group = std::to_string(order_group_) + "LL", n = std::to_string(row.extent) + "LL";
    std::string other_vars;
    for (size_t g = 0; g < kernel_.grid.size(); ++g)
      if (static_cast<int>(g) != order_var_) other_vars += (other_vars.empty() ? "" : ", ") + kernel_.grid[g].var;
    out << "  // longest rows first: groups of " << order_group_ << " values of (" << other_vars << ") (their K and V fit in half of L2); within a\n";
    out << "  // group, " << row.var << " from the most live key tiles (the last) to the fewest\n";
    out << "  const long long order_group_ = static_cast<long long>(blockIdx.x) / (" << group << " * " << n << "), order_in_group_ = static_cast<long long>(blockIdx.x) % (" << group
        << " * " << n << ");\n";
    out << "  const long long order_size_ = solder::min_int(" << group << ", " << others << "LL - order_group_ * " << group << ");\n";
    out << "  const long long " << cuda_identifier(row.var) << " = " << row.extent - 1 << "LL - order_in_group_ / order_size_;\n";
    out << "  long long block_linear = order_group_ * " << group << " + order_in_group_ % order_size_;\n";
  }
  for (size_t d = kernel_.grid.size(); d-- > 0;) {
    if (static_cast<int>(d) == order_var_) continue;
    const GridDim& g = kernel_.grid[d];
    out << "  const long long " << cuda_identifier(g.var) << " = block_linear % " << g.extent << "LL; block_linear /= " << g.extent << "LL;\n";
  }
}

// The rules of the wgmma path; "" when the kernel takes it. Its schedule (mma_stream_wgmma.cpp) is
// the prototype tests/gpu/tile/attention_wgmma_proto.cu's "n64 s4 2/SM" without the overlap of one
// warpgroup's softmax with its own P·V (other warpgroups on the SM fill the tensor cores meanwhile).
std::string MmaStreamWriter::wgmma_refusal() const {
  const char* forced = std::getenv("SOLDER_MMA_PATH");  // A/B runs (docs/runtime.md)
  if (forced && std::string(forced) == "sync") return "SOLDER_MMA_PATH=sync";
  if (in_dtype_ != DType::bf16) return std::string(dtype_name(in_dtype_)) + " inputs (tile/wgmma.cuh wraps the bf16 wgmma only)";
  if (BM_ % 64) return "a row tile of " + std::to_string(BM_) + " rows (a warpgroup holds 64)";
  if (BN_ != 64) return "stream tiles of " + std::to_string(BN_) + " columns (the schedule takes 64)";
  if ((D_ != 64 && D_ != 128) || (DV_ != 64 && DV_ != 128))
    return "depth " + std::to_string(D_) + " and width " + std::to_string(DV_) + " (the schedule takes 64 or 128)";
  return "";
}

// The indices before the last two are 0 or variables of extent-1 axes.
bool MmaStreamWriter::leading_indices_trivial(const std::vector<Expr>& index, const std::vector<Axis>& axes) {
  for (size_t k = 0; k + 2 < index.size(); ++k) {
    if (index[k].kind() == ExprKind::Const && index[k].as<ConstNode>()->value == 0) continue;
    if (index[k].kind() != ExprKind::Var) return false;
    bool unit = false;
    for (auto& a : axes) unit |= a.var == index[k].as<VarNode>()->name && a.extent == 1;
    if (!unit) return false;
  }
  return true;
}

const CopyNode* MmaStreamWriter::staged_input_copy(const std::string& name) const {
  const CopyNode* found = nullptr;
  for (auto& s : loop_->body)
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == name) {
      if (found) return nullptr;
      found = s.as<CopyNode>();
    }
  for (auto& s : kernel_.body)
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == name) return nullptr;
  if (!found || found->domain.guard.defined()) return nullptr;
  const GlobalTensor* g = program_.find_global(found->src.name);
  if (!g || g->role != GlobalRole::input) return nullptr;
  for (size_t k = 0; k < found->domain.axes.size(); ++k)
    if (k >= found->dst.index.size() || !is_var(found->dst.index[k], found->domain.axes[k].var)) return nullptr;
  return found;
}

bool MmaStreamWriter::column_source(const std::string& name) {
  const CopyNode* found = staged_input_copy(name);
  if (!found) return false;
  column_copies_[name] = found;
  return true;
}

bool MmaStreamWriter::score_source(const std::string& name) {
  const Buffer* buf = kernel_.find_buffer(name);
  if (!buf || buf->shape.size() < 2 || buf->shape[buf->shape.size() - 2] != BM_ || buf->shape.back() != BN_ || !leading_ones(buf->shape, 2)) return false;
  const CopyNode* found = staged_input_copy(name);
  if (!found) return false;
  // rows from the block's row tile, columns from the key tile (K and V, staged at the key tile's rows,
  // are not: where BN equals the head dim they have the same shape)
  const size_t n = found->src.index.size();
  if (n < 2 || uses_var(found->src.index[n - 2], loop_->var) || !uses_var(found->src.index[n - 1], loop_->var)) return false;
  score_copies_[name] = found;
  return true;
}

// S[.., i, j] = sum(d) A[.., i, d] * B[.., j, d] * scalars
bool MmaStreamWriter::is_scores_contraction(const ReduceNode& r) {
  if (r.op != ReduceOp::sum || r.reduce_axes.size() != 1 || r.domain.axes.size() < 2 || r.where.defined()) return false;
  const Buffer* dst = kernel_.find_buffer(r.dst.name);
  if (!dst) return false;
  const auto& axes = r.domain.axes;
  size_t n = axes.size();
  for (size_t k = 0; k + 2 < n; ++k) if (axes[k].extent != 1) return false;
  for (size_t k = 0; k < n; ++k) if (!is_var(r.dst.index[k], axes[k].var)) return false;
  std::string i = axes[n - 2].var, j = axes[n - 1].var, d = r.reduce_axes[0].var;
  std::vector<Expr> factors, rest;
  product_factors(r.value, factors);
  const LoadNode *a = nullptr, *b = nullptr;
  for (auto& f : factors) {
    if (f.kind() == ExprKind::Load && kernel_.find_buffer(f.as<LoadNode>()->tensor)) {
      auto l = f.as<LoadNode>();
      const Buffer* buf = kernel_.find_buffer(l->tensor);
      size_t m = l->index.size();
      if (buf->scope != Scope::shared || !is_tile_type(buf->dtype) || m < 2 || !leading_indices_trivial(l->index, axes)) return false;
      if (is_var(l->index[m - 2], i) && is_var(l->index[m - 1], d) && !a) a = l;
      else if (is_var(l->index[m - 2], j) && is_var(l->index[m - 1], d) && !b) b = l;
      else return false;
    } else {
      if (!tensors_used(f).empty() || !vars_used(f).empty()) return false;
      rest.push_back(f);
    }
  }
  if (!a || !b || a->tensor == b->tensor) return false;
  S_ = r.dst.name;
  A_ = a->tensor;
  B_ = b->tensor;
  BM_ = axes[n - 2].extent;
  BN_ = axes[n - 1].extent;
  D_ = r.reduce_axes[0].extent;
  in_dtype_ = kernel_.find_buffer(A_)->dtype;
  score_scale_ = product_of(rest);
  has_scale_ = !rest.empty();
  if (has_scale_ && in_dtype_ == DType::bf16) {
    double value = evaluate_with(score_scale_, {}, {}, program_.dims);
    int exponent = 0;
    scale_in_a_ = std::isfinite(value) && value > 0 && std::frexp(value, &exponent) == 0.5 && exponent > -100 && exponent < 100;
  }
  if (kernel_.find_buffer(A_)->shape.back() != D_ || rows_of(A_) != BM_ || cols_of(B_) != D_ || rows_of(B_) != BN_) return false;
  return true;
}

// O[.., i, dv] (+)= sum(j) P * V[.., j, dv]
bool MmaStreamWriter::is_second_contraction(const ReduceNode& r) {
  if (r.op != ReduceOp::sum || r.reduce_axes.size() != 1) return false;
  const auto& axes = r.domain.axes;
  size_t n = axes.size();
  if (n < 2 || r.reduce_axes[0].extent != BN_ || axes[n - 2].extent != BM_) return false;
  std::string j = r.reduce_axes[0].var, dv = axes[n - 1].var;
  std::vector<Expr> factors, rest;
  product_factors(r.value, factors);
  const LoadNode* v = nullptr;
  for (auto& f : factors) {
    bool tile = false;
    for (auto& t : tensors_used(f)) {
      const Buffer* buf = kernel_.find_buffer(t);
      tile |= buf && buf->scope == Scope::shared && t != S_ && is_tile_type(buf->dtype) && !leading_ones(buf->shape, 1) && !score_source(t);
    }
    if (f.kind() == ExprKind::Load && tile && !v) {
      auto l = f.as<LoadNode>();
      const Buffer* buf = kernel_.find_buffer(l->tensor);
      size_t m = l->index.size();
      if (!is_tile_type(buf->dtype) || m < 2 || !leading_indices_trivial(l->index, axes) || !is_var(l->index[m - 2], j) || !is_var(l->index[m - 1], dv)) return false;
      v = l;
    } else if (tile) {
      return false;
    } else {
      if (uses_var(f, dv)) return false;  // P must not depend on the output column
      rest.push_back(f);
    }
  }
  if (!v || v->tensor == A_ || v->tensor == B_) return false;
  V_ = v->tensor;
  DV_ = axes[n - 1].extent;
  if (rows_of(V_) != BN_ || cols_of(V_) != DV_) return false;
  p_value_ = product_of(rest);
  return true;
}

void MmaStreamWriter::find_live_condition() {
  std::optional<Expr> cond;
  bool ok = true;
  std::function<bool(const Expr&)> only_masked = [&](const Expr& e) -> bool {
    if (e.kind() == ExprKind::Select) {
      auto s = e.as<SelectNode>();
      if (s->if_true.kind() == ExprKind::Load && s->if_true.as<LoadNode>()->tensor == S_ && is_neg_infinity(s->if_false)) {
        if (uses_tensor(s->cond, S_)) return false;
        if (cond && !structurally_equal(*cond, s->cond)) return false;
        cond = s->cond;
        return true;
      }
    }
    if (e.kind() == ExprKind::Load) return e.as<LoadNode>()->tensor != S_;
    bool good = true;
    switch (e.kind()) {
      case ExprKind::Unary: good = only_masked(e.as<UnaryNode>()->operand); break;
      case ExprKind::Binary: good = only_masked(e.as<BinaryNode>()->lhs) && only_masked(e.as<BinaryNode>()->rhs); break;
      case ExprKind::Select: good = only_masked(e.as<SelectNode>()->cond) && only_masked(e.as<SelectNode>()->if_true) && only_masked(e.as<SelectNode>()->if_false); break;
      case ExprKind::Cast: good = only_masked(e.as<CastNode>()->operand); break;
      default: break;
    }
    return good;
  };
  auto exp_of_masked = [&](const Expr& e) {
    if (e.kind() != ExprKind::Unary || e.as<UnaryNode>()->op != UnaryOp::exp) return false;
    const Expr& x = e.as<UnaryNode>()->operand;
    if (x.kind() != ExprKind::Binary || x.as<BinaryNode>()->op != BinaryOp::sub) return false;
    for (auto& t : tensors_used(x.as<BinaryNode>()->rhs))
      if (roles_.count(t) == 0 || roles_.at(t) != Role::row) return false;
    return x.as<BinaryNode>()->lhs.kind() == ExprKind::Select && only_masked(x.as<BinaryNode>()->lhs);
  };
  for (auto& s : loop_->body) {
    if (s.kind() != StmtKind::Reduce) continue;
    auto r = s.as<ReduceNode>();
    if (r == scores_ || !uses_tensor(r->value, S_)) continue;
    // A where-condition (the ragged end's j_t * BN + j < S) only removes elements from the reduction:
    // where every element is masked each remaining one still contributes its identity.
    if (r->where.defined() && uses_tensor(r->where, S_)) { ok = false; skip_refusal_ = "a reduction over the scores has a where-condition on the scores"; break; }
    const Expr& value = r == pv_ ? p_value_ : r->value;
    bool fits = (r->op == ReduceOp::max && value.kind() == ExprKind::Select && only_masked(value)) ||
                (r->op == ReduceOp::sum && exp_of_masked(value));
    if (!fits) { ok = false; skip_refusal_ = "the scores reach a reduction other than max(select(C, s, -inf)) or sum(exp(select(C, s, -inf) - m))"; break; }
  }
  for (auto& s : loop_->body)
    if (s.kind() == StmtKind::Map && uses_tensor(s.as<MapNode>()->value, S_)) { ok = false; skip_refusal_ = "a map reads the scores"; }
  if (!cond) { skip_refusal_ = "no mask: no score is selected against -inf"; return; }
  if (!ok) return;
  // The ranges of the tile-local variables of C: those of the `reduce max` over the scores.
  for (auto& s : loop_->body) {
    if (s.kind() != StmtKind::Reduce || s.as<ReduceNode>() == scores_ || !uses_tensor(s.as<ReduceNode>()->value, S_)) continue;
    auto r = s.as<ReduceNode>();
    const auto& axes = r->domain.axes;
    for (size_t k = 0; k + 1 < axes.size(); ++k) {
      intervals_.vars[axes[k].var] = {make_int(0), make_int(0)};
      mask_lead_vars_.push_back(axes[k].var);
    }
    intervals_.vars[axes.back().var] = {make_int(0), make_int(BM_ - 1)};
    intervals_.vars[r->reduce_axes[0].var] = {make_int(0), make_int(BN_ - 1)};
    mask_row_var_ = axes.back().var;
    mask_col_var_ = r->reduce_axes[0].var;
    for (auto& v : vars_used(*cond))
      if (v != axes.back().var && v != r->reduce_axes[0].var) {
        bool known = v == loop_->var;
        for (auto& g : kernel_.grid) known |= g.var == v;
        for (size_t k = 0; k + 1 < axes.size(); ++k) known |= axes[k].var == v;
        if (!known) { skip_refusal_ = "the mask uses variable " + v; return; }
      }
    break;
  }
  // Data-dependent bounds (document ids): an integer row state that the stream does not change ranges
  // over its block-wide min and max; a column tile staged from an input ranges over its min and max on
  // the key tile. Any other load leaves the comparisons that read it unknown.
  intervals_.load_range = [&](const LoadNode& l) -> std::optional<IntervalExpr> {
    auto role = roles_.find(l.tensor);
    if (role == roles_.end()) return std::nullopt;
    const Buffer* buf = kernel_.find_buffer(l.tensor);
    if (!buf || buf->dtype != DType::i32) return std::nullopt;
    if (role->second == Role::row) {
      for (auto& st : loop_->body)
        if ((st.kind() == StmtKind::Copy && st.as<CopyNode>()->dst.name == l.tensor) || (st.kind() == StmtKind::Map && st.as<MapNode>()->dst.name == l.tensor) ||
            (st.kind() == StmtKind::Reduce && st.as<ReduceNode>()->dst.name == l.tensor))
          return std::nullopt;  // changes during the stream
      size_t k = std::find(row_ranges_.begin(), row_ranges_.end(), l.tensor) - row_ranges_.begin();
      if (k == row_ranges_.size()) row_ranges_.push_back(l.tensor);
      std::string n = std::to_string(k);
      return IntervalExpr{make_var("row_lo" + n), make_var("row_hi" + n)};
    }
    if (role->second == Role::column && l.index.size() >= 1 && l.index.back().kind() == ExprKind::Var && intervals_.vars.count(l.index.back().as<VarNode>()->name)) {
      for (size_t a = 0; a + 1 < l.index.size(); ++a)  // the lead indices: 0 or a lead variable (0 in the tile)
        if (!(l.index[a].kind() == ExprKind::Const && l.index[a].as<ConstNode>()->value == 0) &&
            !(l.index[a].kind() == ExprKind::Var && std::find(mask_lead_vars_.begin(), mask_lead_vars_.end(), l.index[a].as<VarNode>()->name) != mask_lead_vars_.end()))
          return std::nullopt;
      if (l.index.back().as<VarNode>()->name != mask_col_var_) return std::nullopt;
      size_t k = 0;
      while (k < column_ranges_.size() && !(column_ranges_[k]->tensor == l.tensor && column_ranges_[k]->index.size() == l.index.size() &&
                                            std::equal(l.index.begin(), l.index.end(), column_ranges_[k]->index.begin(), structurally_equal)))
        ++k;
      if (k == column_ranges_.size()) column_ranges_.push_back(&l);
      std::string n = std::to_string(k);
      return IntervalExpr{make_var("col_lo" + n), make_var("col_hi" + n)};
    }
    return std::nullopt;
  };
  live_condition_ = intervals_.may_be_true(*cond);
  full_condition_ = intervals_.may_be_false(*cond);  // the tile may hold a masked score
  if (full_condition_)
    full_condition_ = full_condition_->kind() == ExprKind::Unary && full_condition_->as<UnaryNode>()->op == UnaryOp::logical_not
                          ? full_condition_->as<UnaryNode>()->operand
                          : make_unary(UnaryOp::logical_not, *full_condition_);
  mask_ = cond;
  if (!live_condition_) {
    skip_refusal_ = "the mask " + print_expr(*cond) + " has no interval bound (it reads tensors or real values)";
    row_ranges_.clear();
    column_ranges_.clear();
  }
}

// The value a row state holds at row `row` (lead axes 0) when a top-level copy or map computes it from
// inputs alone; undefined otherwise.
Expr MmaStreamWriter::row_state_value(const std::string& name, const Expr& row) const {
  for (auto& st : kernel_.body) {
    std::map<std::string, Expr> at;
    auto bind_axes = [&](const Domain& d) {
      for (size_t k = 0; k < d.axes.size(); ++k) at[d.axes[k].var] = k + 1 == d.axes.size() ? row : make_int(0);
    };
    if (st.kind() == StmtKind::Copy && st.as<CopyNode>()->dst.name == name) {
      auto c = st.as<CopyNode>();
      const GlobalTensor* g = program_.find_global(c->src.name);
      if (!g || g->role != GlobalRole::input || c->domain.guard.defined()) return Expr();
      for (size_t k = 0; k < c->domain.axes.size(); ++k)
        if (k >= c->dst.index.size() || !is_var(c->dst.index[k], c->domain.axes[k].var)) return Expr();
      bind_axes(c->domain);
      return column_source_load(c, at);
    }
    if (st.kind() == StmtKind::Map && st.as<MapNode>()->dst.name == name) {
      auto m = st.as<MapNode>();
      if (m->domain.guard.defined()) return Expr();
      for (size_t k = 0; k < m->domain.axes.size(); ++k)
        if (k >= m->dst.index.size() || !is_var(m->dst.index[k], m->domain.axes[k].var)) return Expr();
      for (auto& t : tensors_used(m->value)) {
        const GlobalTensor* g = program_.find_global(t);
        if (!g || g->role != GlobalRole::input) return Expr();
      }
      bind_axes(m->domain);
      return rewrite_loads(substitute_vars(m->value, at), [&](const LoadNode& l, const Expr& self) { return bounded(l, self); });
    }
  }
  return Expr();
}

std::optional<TileMaskRule> MmaStreamWriter::mask_rule(std::string* refusal) {
  analyze();
  if (!live_condition_) {
    if (refusal) *refusal = skip_refusal_;
    return std::nullopt;
  }
  TileMaskRule rule;
  rule.mask = *mask_;
  rule.row_var = mask_row_var_;
  rule.col_var = mask_col_var_;
  rule.lead_vars = mask_lead_vars_;
  rule.loop_var = loop_->var;
  rule.rows = BM_;
  rule.cols = BN_;
  rule.loop_begin = loop_->begin;
  rule.loop_end = loop_->end;
  rule.live = *live_condition_;
  rule.full = full_condition_;
  bool inputs_only = true;
  for (size_t k = 0; k < row_ranges_.size(); ++k) {
    TileMaskRule::DataRange r{"row_lo" + std::to_string(k), "row_hi" + std::to_string(k), false, row_state_value(row_ranges_[k], make_var(mask_row_var_))};
    inputs_only &= r.value.defined();
    rule.ranges.push_back(r);
  }
  for (size_t k = 0; k < column_ranges_.size(); ++k) {
    const LoadNode& l = *column_ranges_[k];
    const CopyNode* c = column_copies_.at(l.tensor);
    std::map<std::string, Expr> at;
    for (size_t a = 0; a < c->domain.axes.size(); ++a) at[c->domain.axes[a].var] = a + 1 == c->domain.axes.size() ? make_var(mask_col_var_) : make_int(0);
    rule.ranges.push_back({"col_lo" + std::to_string(k), "col_hi" + std::to_string(k), true, column_source_load(c, at)});
  }
  if (inputs_only) {
    rule.mask_of_inputs = rewrite_loads(*mask_, [&](const LoadNode& l, const Expr& self) -> Expr {
      auto role = roles_.find(l.tensor);
      if (role == roles_.end()) return bounded(l, self);
      if (role->second == Role::row) return row_state_value(l.tensor, l.index.back());
      if (role->second == Role::column) {
        const CopyNode* c = column_copies_.at(l.tensor);
        std::map<std::string, Expr> at;
        for (size_t a = 0; a < c->domain.axes.size(); ++a) at[c->domain.axes[a].var] = l.index[a];
        return column_source_load(c, at);
      }
      return self;
    });
    for (auto& t : tensors_used(rule.mask_of_inputs))
      if (!program_.find_global(t)) rule.mask_of_inputs = Expr();  // reads a tile with no input form
  }
  return rule;
}

}  // namespace solder::mma_stream
