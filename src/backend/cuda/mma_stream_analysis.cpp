// Analysis of the tensor-core emitter: whether a kernel has the streamed two-contraction shape
// (mma_stream_codegen.h), the roles of its buffers, the masked-identity rule and the score modifier.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "backend/cuda/mma_stream_writer.h"
#include "algebra/normal_form.h"
#include "ir/diagnostics.h"
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
    else if (leading_ones(b.shape, 1) && b.shape.back() == BM_) roles_[b.name] = Role::row;
    else if (leading_ones(b.shape, 1) && b.shape.back() == BN_ && column_source(b.name)) roles_[b.name] = Role::column;
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
  if (wgmma_) {
    // The deepest ring (4, 3 or 2 stages) that leaves room for two blocks per SM (2 x (bytes + 1 KB
    // reserved) <= 228 KB): at head dim 128 a fourth stage would cost the second block.
    auto bytes = [&](int stages) { return 2 * BM_ * D_ + stages * 2 * BN_ * (D_ + DV_) + 1024 + (row_ranges_.empty() ? 0 : 16 * warps_); };
    stages_ = bytes(4) <= 115712 ? 4 : bytes(3) <= 115712 ? 3 : 2;
  }
  const std::string path =
      wgmma_ ? std::to_string(warps_ / 4) + (warps_ == 4 ? " warpgroup" : " warpgroups") + " of 64 rows, wgmma m64n" + std::to_string(BN_) + "k16 and m64n" + std::to_string(DV_) + "k16 " +
                   std::string(dtype_name(in_dtype_)) + ", " + std::to_string(stages_) + "-stage ring of " + B_ + " and " + V_
             : std::to_string(warps_) + " warps of " + std::to_string(16 * G_) + " rows, mma.sync m16n8k16 " + std::string(dtype_name(in_dtype_)) +
                   " (wgmma refused: " + wgmma_refused_ + ")";
  summary_ = std::to_string(BM_) + " rows x " + std::to_string(BN_) + " columns per step, " + path + "; " + (live_condition_ ? "tiles the mask empties are skipped" : "no tile skipping (" + skip_refusal_ + ")") +
             (modifier_ ? "; score modifier applied once: " + print_expr(*modifier_) : "");
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

bool MmaStreamWriter::column_source(const std::string& name) {
  const CopyNode* found = nullptr;
  for (auto& s : loop_->body)
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == name) {
      if (found) return false;
      found = s.as<CopyNode>();
    }
  for (auto& s : kernel_.body)
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == name) return false;
  if (!found || found->domain.guard.defined()) return false;
  const GlobalTensor* g = program_.find_global(found->src.name);
  if (!g || g->role != GlobalRole::input) return false;
  for (size_t k = 0; k < found->domain.axes.size(); ++k)
    if (k >= found->dst.index.size() || !is_var(found->dst.index[k], found->domain.axes[k].var)) return false;
  column_copies_[name] = found;
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
      if (buf->scope != Scope::shared || !is_16bit(buf->dtype) || m < 2 || !leading_indices_trivial(l->index, axes)) return false;
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
      tile |= buf && buf->scope == Scope::shared && t != S_ && is_16bit(buf->dtype) && !leading_ones(buf->shape, 1);
    }
    if (f.kind() == ExprKind::Load && tile && !v) {
      auto l = f.as<LoadNode>();
      const Buffer* buf = kernel_.find_buffer(l->tensor);
      size_t m = l->index.size();
      if (!is_16bit(buf->dtype) || m < 2 || !leading_indices_trivial(l->index, axes) || !is_var(l->index[m - 2], j) || !is_var(l->index[m - 1], dv)) return false;
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
    if (r->where.defined()) { ok = false; skip_refusal_ = "a reduction over the scores has a where-condition"; break; }
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
    for (size_t k = 0; k + 1 < axes.size(); ++k) intervals_.vars[axes[k].var] = {"0LL", "0LL"};
    intervals_.vars[axes.back().var] = {"0LL", std::to_string(BM_ - 1) + "LL"};
    intervals_.vars[r->reduce_axes[0].var] = {"0LL", std::to_string(BN_ - 1) + "LL"};
    for (auto& v : vars_used(*cond))
      if (v != axes.back().var && v != r->reduce_axes[0].var) {
        bool known = v == loop_->var;
        for (auto& g : kernel_.grid) known |= g.var == v;
        for (size_t k = 0; k + 1 < axes.size(); ++k) known |= axes[k].var == v;
        if (!known) { skip_refusal_ = "the mask uses variable " + v; return; }
      }
    break;
  }
  // Data-dependent bounds (document ids): an integer row state staged before the loop ranges over its
  // block-wide min and max; a column tile read from an input ranges over its min and max on the tile.
  intervals_.load_range = [&](const LoadNode& l) -> std::optional<IntervalText> {
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
      return IntervalText{"row_lo" + n, "row_hi" + n};
    }
    if (role->second == Role::column && l.index.size() >= 1 && l.index.back().kind() == ExprKind::Var && intervals_.vars.count(l.index.back().as<VarNode>()->name)) {
      size_t k = 0;
      while (k < column_ranges_.size() && !(column_ranges_[k]->tensor == l.tensor && column_ranges_[k]->index.size() == l.index.size() &&
                                            std::equal(l.index.begin(), l.index.end(), column_ranges_[k]->index.begin(), structurally_equal)))
        ++k;
      if (k == column_ranges_.size()) column_ranges_.push_back(&l);
      std::string n = std::to_string(k);
      return IntervalText{"col_lo" + n, "col_hi" + n};
    }
    return std::nullopt;
  };
  live_condition_ = intervals_.may_be_true(*cond);
  auto may_be_false = intervals_.may_be_false(*cond);
  full_condition_ = may_be_false.value_or("true");  // unknown: never assume the tile full
  mask_ = cond;
  if (!live_condition_) skip_refusal_ = "the mask " + print_expr(*cond) + " has no interval bound (it reads tensors or real values)";
}

}  // namespace solder::mma_stream
