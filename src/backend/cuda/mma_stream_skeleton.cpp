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
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>
#include <tuple>

#include "algebra/normal_form.h"
#include "backend/cuda/mma_stream_writer.h"
#include "ir/expr_eval.h"
#include "ir/printer.h"
#include "runtime/attention_args.h"

namespace solder::mma_stream {

namespace {

// The row-tile grid variable of a kernel of one row tile (write_skeleton's one_row_tile): no statement uses it.
constexpr const char* kOneRowTile = "row_tile_";

const char* skeleton_dtype_name(DType t) {
  return t == DType::f16 ? "solder::gemm::Dtype::f16" : t == DType::f8e4m3 ? "solder::gemm::Dtype::e4m3" : "solder::gemm::Dtype::bf16";
}

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

// ---- An affine score: G = a·S + u·(col_ − row_) + w·row_ + c ----
// The factors a, u, w, c are expressions of the head (grid variables, dims, inputs at head indices):
// they mention neither the row, nor the column, nor the scores. Constants are folded as the form is
// built (1 − 1 of col_ − row_'s row part is 0), so ALiBi's S + slope·(j − i) is a = 1, u = slope,
// w = c = 0.
struct AffineForm {
  Expr a, u, w, c;
};

bool is_const_value(const Expr& e, double v) { return e.kind() == ExprKind::Const && e.as<ConstNode>()->value == v; }

Expr fold_add(const Expr& x, const Expr& y) {
  if (is_const_value(x, 0)) return y;
  if (is_const_value(y, 0)) return x;
  if (x.kind() == ExprKind::Const && y.kind() == ExprKind::Const) return make_const(x.as<ConstNode>()->value + y.as<ConstNode>()->value);
  return make_binary(BinaryOp::add, x, y);
}
Expr fold_neg(const Expr& x) {
  if (x.kind() == ExprKind::Const) return make_const(-x.as<ConstNode>()->value);
  return make_unary(UnaryOp::neg, x);
}
Expr fold_mul(const Expr& x, const Expr& y) {
  if (is_const_value(x, 0) || is_const_value(y, 0)) return make_const(0);
  if (is_const_value(x, 1)) return y;
  if (is_const_value(y, 1)) return x;
  if (x.kind() == ExprKind::Const && y.kind() == ExprKind::Const) return make_const(x.as<ConstNode>()->value * y.as<ConstNode>()->value);
  return make_binary(BinaryOp::mul, x, y);
}

std::optional<AffineForm> affine_score(const Expr& e, const std::string& scores) {
  auto pure = [&](const Expr& x) { return !mentions(x, "row_") && !mentions(x, "col_") && !uses_tensor(x, scores); };
  const Expr zero = make_const(0), one = make_const(1);
  if (pure(e)) return AffineForm{zero, zero, zero, e};
  if (e.kind() == ExprKind::Load && e.as<LoadNode>()->tensor == scores) return AffineForm{one, zero, zero, zero};
  if (is_var(e, "row_")) return AffineForm{zero, zero, one, zero};
  if (is_var(e, "col_")) return AffineForm{zero, one, one, zero};  // col = (col − row) + row
  auto scaled = [](const AffineForm& f, const std::function<Expr(const Expr&)>& by) { return AffineForm{by(f.a), by(f.u), by(f.w), by(f.c)}; };
  if (e.kind() == ExprKind::Unary && e.as<UnaryNode>()->op == UnaryOp::neg) {
    auto f = affine_score(e.as<UnaryNode>()->operand, scores);
    if (!f) return std::nullopt;
    return scaled(*f, fold_neg);
  }
  if (e.kind() == ExprKind::Cast) {
    if (e.as<CastNode>()->dtype != DType::f32) return std::nullopt;
    return affine_score(e.as<CastNode>()->operand, scores);
  }
  if (e.kind() != ExprKind::Binary) return std::nullopt;
  auto b = e.as<BinaryNode>();
  if (b->op == BinaryOp::add || b->op == BinaryOp::sub) {
    auto l = affine_score(b->lhs, scores), r = affine_score(b->rhs, scores);
    if (!l || !r) return std::nullopt;
    if (b->op == BinaryOp::sub) r = scaled(*r, fold_neg);
    return AffineForm{fold_add(l->a, r->a), fold_add(l->u, r->u), fold_add(l->w, r->w), fold_add(l->c, r->c)};
  }
  if (b->op == BinaryOp::mul) {
    const bool pl = pure(b->lhs), pr = pure(b->rhs);
    if (!pl && !pr) return std::nullopt;
    auto f = affine_score(pl ? b->rhs : b->lhs, scores);
    if (!f) return std::nullopt;
    const Expr k = pl ? b->lhs : b->rhs;
    return scaled(*f, [&](const Expr& x) { return fold_mul(k, x); });
  }
  if (b->op == BinaryOp::div && pure(b->rhs)) {
    auto f = affine_score(b->lhs, scores);
    if (!f) return std::nullopt;
    return scaled(*f, [&](const Expr& x) { return is_const_value(x, 0) ? x : make_binary(BinaryOp::div, x, b->rhs); });
  }
  return std::nullopt;
}

// ---- A score linear in S: G = a·S + bias, a a factor of the head, bias free of S ----
// (evoformer: S + pair_bias[h, row, col] + 1e9 · (mask[r, col] − 1)). The skeleton loads the bias of a
// key tile while its S = Q·Kᵀ runs and adds it with one FFMA per score (functors.cuh, "A score with a bias").
struct LinearForm {
  Expr a, bias;
};

std::optional<LinearForm> linear_score(const Expr& e, const std::string& scores) {
  auto pure = [&](const Expr& x) { return !mentions(x, "row_") && !mentions(x, "col_") && !uses_tensor(x, scores); };
  const Expr zero = make_const(0), one = make_const(1);
  if (!uses_tensor(e, scores)) return LinearForm{zero, e};
  if (e.kind() == ExprKind::Load && e.as<LoadNode>()->tensor == scores) return LinearForm{one, zero};
  if (e.kind() == ExprKind::Unary && e.as<UnaryNode>()->op == UnaryOp::neg) {
    auto f = linear_score(e.as<UnaryNode>()->operand, scores);
    if (!f) return std::nullopt;
    return LinearForm{fold_neg(f->a), fold_neg(f->bias)};
  }
  if (e.kind() == ExprKind::Cast) {
    if (e.as<CastNode>()->dtype != DType::f32) return std::nullopt;
    return linear_score(e.as<CastNode>()->operand, scores);
  }
  if (e.kind() != ExprKind::Binary) return std::nullopt;
  auto b = e.as<BinaryNode>();
  if (b->op == BinaryOp::add || b->op == BinaryOp::sub) {
    auto l = linear_score(b->lhs, scores), r = linear_score(b->rhs, scores);
    if (!l || !r) return std::nullopt;
    if (b->op == BinaryOp::sub) r = LinearForm{fold_neg(r->a), fold_neg(r->bias)};
    return LinearForm{fold_add(l->a, r->a), fold_add(l->bias, r->bias)};
  }
  if (b->op == BinaryOp::mul) {
    const bool pl = pure(b->lhs), pr = pure(b->rhs);
    if (!pl && !pr) return std::nullopt;
    auto f = linear_score(pl ? b->rhs : b->lhs, scores);
    if (!f) return std::nullopt;
    const Expr k = pl ? b->lhs : b->rhs;
    return LinearForm{fold_mul(k, f->a), fold_mul(k, f->bias)};
  }
  if (b->op == BinaryOp::div && pure(b->rhs)) {
    auto f = linear_score(b->lhs, scores);
    if (!f) return std::nullopt;
    auto over = [&](const Expr& x) { return is_const_value(x, 0) ? x : make_binary(BinaryOp::div, x, b->rhs); };
    return LinearForm{over(f->a), over(f->bias)};
  }
  return std::nullopt;
}

// ---- The key columns a mask may reach, solved from its linear bounds ----
// For a mask over global rows row_ and columns col_ made of comparisons of integer-linear terms
// (col_ with coefficient ±1, row_ with an integer one, compile-time constants) under && and ||, the
// columns where it may hold for some row of [row_lo_, row_hi_] lie in [lo, hi], each bound the max / min
// of linear functions of row_lo_ or row_hi_: && intersects, || takes the hull, any other leaf leaves
// the side open. Sound (a superset of the live columns) and, for sliding windows, causal and prefix
// masks, exact to the tile.
struct ColBound {
  std::string text;                                 // C++ over row_lo_, row_hi_ (long long)
  std::function<double(double, double)> at;         // the same on the host
};
struct ColRange {
  std::optional<ColBound> lo, hi;
  // The mask is exactly lo ≤ col ≤ hi on a single row: its visible columns on each row are one
  // interval. Solved comparisons are exact; && of exact sides is (an intersection of intervals), and so
  // is || of exact sides that share an open end (both without lo, or both without hi: two intervals
  // reaching the same end overlap, so their union is their hull; prefix masks `col < PRE || col <= row`).
  bool exact = false;
};

struct LinearIndex {
  double kc = 0, kr = 0, k0 = 0;
};

std::optional<LinearIndex> linear_index(const Expr& e, const std::map<std::string, int64_t>& dims) {
  if (is_var(e, "row_")) return LinearIndex{0, 1, 0};
  if (is_var(e, "col_")) return LinearIndex{1, 0, 0};
  if (vars_used(e).empty() && tensors_used(e).empty()) {
    const double v = evaluate_with(e, {}, {}, dims);
    if (!std::isfinite(v)) return std::nullopt;
    return LinearIndex{0, 0, v};
  }
  if (e.kind() == ExprKind::Cast) return linear_index(e.as<CastNode>()->operand, dims);
  if (e.kind() == ExprKind::Unary && e.as<UnaryNode>()->op == UnaryOp::neg) {
    auto f = linear_index(e.as<UnaryNode>()->operand, dims);
    if (!f) return std::nullopt;
    return LinearIndex{-f->kc, -f->kr, -f->k0};
  }
  if (e.kind() != ExprKind::Binary) return std::nullopt;
  auto b = e.as<BinaryNode>();
  auto l = linear_index(b->lhs, dims), r = linear_index(b->rhs, dims);
  if (!l || !r) return std::nullopt;
  if (b->op == BinaryOp::add) return LinearIndex{l->kc + r->kc, l->kr + r->kr, l->k0 + r->k0};
  if (b->op == BinaryOp::sub) return LinearIndex{l->kc - r->kc, l->kr - r->kr, l->k0 - r->k0};
  if (b->op == BinaryOp::mul) {
    if (l->kc == 0 && l->kr == 0) return LinearIndex{l->k0 * r->kc, l->k0 * r->kr, l->k0 * r->k0};
    if (r->kc == 0 && r->kr == 0) return LinearIndex{r->k0 * l->kc, r->k0 * l->kr, r->k0 * l->k0};
  }
  return std::nullopt;
}

std::string ll_literal(double v) { return "(" + std::to_string(static_cast<long long>(v)) + "LL)"; }

// m·row + q at the row end that makes it largest (hi) or smallest (lo).
ColBound linear_bound(double m, double q, bool largest) {
  const bool at_hi = (m >= 0) == largest;
  const std::string row = at_hi ? "row_hi_" : "row_lo_";
  ColBound b;
  b.text = m == 0 ? ll_literal(q) : ll_literal(m) + " * " + row + " + " + ll_literal(q);
  b.at = [m, q, at_hi](double lo, double hi) { return m * (at_hi ? hi : lo) + q; };
  return b;
}

ColBound combine(const ColBound& x, const ColBound& y, bool take_max) {
  ColBound b;
  b.text = std::string(take_max ? "max_ll_(" : "min_ll_(") + x.text + ", " + y.text + ")";
  auto fx = x.at, fy = y.at;
  b.at = [fx, fy, take_max](double lo, double hi) { return take_max ? std::max(fx(lo, hi), fy(lo, hi)) : std::min(fx(lo, hi), fy(lo, hi)); };
  return b;
}

ColRange column_range(const Expr& c, const std::map<std::string, int64_t>& dims) {
  if (c.kind() != ExprKind::Binary) return {};
  auto b = c.as<BinaryNode>();
  if (b->op == BinaryOp::logical_and || b->op == BinaryOp::logical_or) {
    ColRange l = column_range(b->lhs, dims), r = column_range(b->rhs, dims), out;
    const bool conj = b->op == BinaryOp::logical_and;
    out.exact = l.exact && r.exact && (conj || (!l.lo && !r.lo) || (!l.hi && !r.hi));
    if (conj) {
      out.lo = l.lo && r.lo ? combine(*l.lo, *r.lo, true) : l.lo ? l.lo : r.lo;
      out.hi = l.hi && r.hi ? combine(*l.hi, *r.hi, false) : l.hi ? l.hi : r.hi;
    } else {
      if (l.lo && r.lo) out.lo = combine(*l.lo, *r.lo, false);
      if (l.hi && r.hi) out.hi = combine(*l.hi, *r.hi, true);
    }
    return out;
  }
  BinaryOp op = b->op;
  if (op != BinaryOp::lt && op != BinaryOp::le && op != BinaryOp::gt && op != BinaryOp::ge && op != BinaryOp::eq) return {};
  auto l = linear_index(b->lhs, dims), r = linear_index(b->rhs, dims);
  if (!l || !r) return {};
  // col·kc + row·kr + k0 OP 0
  double kc = l->kc - r->kc, kr = l->kr - r->kr, k0 = l->k0 - r->k0;
  if (kc != 1 && kc != -1) return {};
  if (kr != std::floor(kr) || std::abs(kr) > 1e6 || std::abs(k0) > 1e15) return {};
  if (kc == -1) {
    kc = 1, kr = -kr, k0 = -k0;
    op = op == BinaryOp::lt ? BinaryOp::gt : op == BinaryOp::le ? BinaryOp::ge : op == BinaryOp::gt ? BinaryOp::lt : op == BinaryOp::ge ? BinaryOp::le : op;
  }
  const double m = -kr, q = -k0;  // col OP m·row + q
  ColRange out;
  out.exact = true;
  if (op == BinaryOp::le || op == BinaryOp::eq) out.hi = linear_bound(m, std::floor(q), true);
  if (op == BinaryOp::lt) out.hi = linear_bound(m, std::ceil(q) - 1, true);
  if (op == BinaryOp::ge || op == BinaryOp::eq) out.lo = linear_bound(m, std::ceil(q), false);
  if (op == BinaryOp::gt) out.lo = linear_bound(m, std::floor(q) + 1, false);
  return out;
}

}  // namespace

AttentionSkeletonKernel MmaStreamWriter::write_skeleton(const Kernel& contracts) {
  analyze();
  const std::string name = cuda_identifier(kernel_.name);
  // ---- The operands and the tile configuration ----
  if (!is_16bit(in_dtype_) && in_dtype_ != DType::f8e4m3)
    refuse("the inputs are " + std::string(dtype_name(in_dtype_)) + " (the skeleton takes bf16, f16 and f8e4m3)");
  // FP8 (e4m3 Q, K, V; Config's T = e4m3): S and P·V on fp8 wgmma, P rounded to e4m3 (the contracts'
  // T, which the precision policy states), V transposed in shared memory (docs/attention-skeleton.md).
  const bool fp8 = in_dtype_ == DType::f8e4m3;
  if (D_ != DV_) refuse("the head dims of Q·Kᵀ (" + std::to_string(D_) + ") and P·V (" + std::to_string(DV_) + ") differ");
  if (D_ != 32 && D_ != 64 && D_ != 128 && D_ != 256) refuse("head dim " + std::to_string(D_) + " (the skeleton takes 32, 64, 128 and 256)");
  {
    const MmaType want = in_dtype_ == DType::bf16 ? MmaType::bf16 : in_dtype_ == DType::f8e4m3 ? MmaType::f8e4m3 : MmaType::f16;
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
    if (s.kind() == StmtKind::Copy && roles_.count(s.as<CopyNode>()->dst.name) && roles_.at(s.as<CopyNode>()->dst.name) == Role::score_input && body.empty())
      continue;  // an input tile over the rows and keys (a pair bias): read where it is, by the score functor
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
  // Input tiles staged per step over the keys (Role::column: a per-column bias) or over the rows and
  // keys (Role::score_input: a pair bias) are read where they are: their loads become the global
  // loads the copies make (the score functor reads them from global memory / L2, no extra pass).
  auto staged_as_global = [&](const Expr& e) {
    return rewrite_loads(e, [&](const LoadNode& l, const Expr& self) -> Expr {
      const CopyNode* c = nullptr;
      if (auto it = score_copies_.find(l.tensor); it != score_copies_.end() && roles_.count(l.tensor) && roles_.at(l.tensor) == Role::score_input) c = it->second;
      if (auto it = column_copies_.find(l.tensor); it != column_copies_.end() && roles_.count(l.tensor) && roles_.at(l.tensor) == Role::column) c = it->second;
      if (!c || l.index.size() != c->domain.axes.size()) return self;
      std::map<std::string, Expr> at;
      for (size_t k2 = 0; k2 < c->domain.axes.size(); ++k2) at[c->domain.axes[k2].var] = l.index[k2];
      std::vector<Expr> index;
      for (auto& i : c->src.index) index.push_back(substitute_vars(i, at));
      return make_load(c->src.name, index);
    });
  };
  g = staged_as_global(g);
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
  // A data mask (C reads tensors: document ids): its tiles' loads become the global loads of their
  // copies, an input staged over the rows before the stream (row_state_value) or over the keys each step
  // (column_source_load); the skeleton then classifies key tiles from the ids' min/max (kDataTiles).
  std::optional<Expr> cond_in;             // C on inputs (data masks only)
  std::set<std::string> mask_row_tiles;    // row tiles C reads, staged before the stream
  if (cond) {
    if (uses_tensor(*cond, S_)) refuse("the mask reads the scores");
    if (!tensors_used(*cond).empty()) {
      std::string why;
      Expr in = rewrite_loads(*cond, [&](const LoadNode& l, const Expr& self) -> Expr {
        const GlobalTensor* gl = program_.find_global(l.tensor);
        if (gl && gl->role == GlobalRole::input) return self;
        auto role = roles_.find(l.tensor);
        if (role != roles_.end() && role->second == Role::row) {
          Expr v = row_state_value(l.tensor, l.index.back());
          if (v.defined()) {
            mask_row_tiles.insert(l.tensor);
            return v;
          }
        }
        if (role != roles_.end() && role->second == Role::column && column_copies_.count(l.tensor)) {
          const CopyNode* c = column_copies_.at(l.tensor);
          if (l.index.size() == c->domain.axes.size()) {
            std::map<std::string, Expr> at;
            for (size_t a = 0; a < c->domain.axes.size(); ++a) at[c->domain.axes[a].var] = l.index[a];
            return column_source_load(c, at);
          }
        }
        if (why.empty()) why = "the mask reads tile " + l.tensor + ", neither an input staged over the rows before the stream nor one staged over the keys";
        return self;
      });
      if (!why.empty()) refuse(why + " (data masks: the skeleton reads ids of inputs)");
      cond_in = in;
    }
  }

  // ---- Q, K, V and the output: [lead..., seq, head dim], the lead dims flattened into bh ----
  const CopyNode* stage_a = nullptr;
  std::map<std::string, const CopyNode*> row_staged;  // [BM, head dim] input tiles staged once (a gate): read by the epilogue
  for (auto* s : before) {
    if (s->kind() == StmtKind::Copy && s->as<CopyNode>()->dst.name == A_ && !stage_a) { stage_a = s->as<CopyNode>(); continue; }
    if (s->kind() == StmtKind::Fill) continue;
    if (s->kind() == StmtKind::Copy) {
      auto c = s->as<CopyNode>();
      const GlobalTensor* src = program_.find_global(c->src.name);
      // (an input, or an intermediate an earlier kernel wrote: differential attention's a0)
      const bool readable = src && (src->role == GlobalRole::input || src->role == GlobalRole::intermediate);
      if (readable && c->domain.axes.empty() && src->shape.empty() && roles_.count(c->dst.name) && roles_.at(c->dst.name) == Role::scalar && !row_staged.count(c->dst.name)) {
        row_staged[c->dst.name] = c;  // a 0-d input (differential attention's lambda), read at the stored element
        continue;
      }
      bool plain = readable && !c->domain.guard.defined() && roles_.count(c->dst.name) && roles_.at(c->dst.name) == Role::wide &&
                   c->dst.index.size() == c->domain.axes.size() && !row_staged.count(c->dst.name);
      for (size_t k2 = 0; plain && k2 < c->domain.axes.size(); ++k2) plain = is_var(c->dst.index[k2], c->domain.axes[k2].var);
      if (plain) { row_staged[c->dst.name] = c; continue; }
    }
    // a data mask's row ids (read where they are by its row_id())
    if ((s->kind() == StmtKind::Copy && mask_row_tiles.count(s->as<CopyNode>()->dst.name)) || (s->kind() == StmtKind::Map && mask_row_tiles.count(s->as<MapNode>()->dst.name))) continue;
    refuse("a statement before the stream other than staging Q, fills and input tiles of the output's shape");
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
  // One row tile (Q's sequence of BM_ rows, S = 64): the lowering keeps no grid variable for a dim of one
  // tile, and Q and the output are read at the row alone (`i`, not `i_t * BM + i`). The rows are then
  // the tile's: row_grid is a name no statement uses, of extent 1, and the row is row_ itself.
  bool one_row_tile = false;
  auto check_tail = [&](const CopyNode& c, const GlobalTensor& t, const std::string& tile_var, int64_t tile, const char* what) {
    int64_t ext = 0;
    const size_t r = t.shape.size();
    if (r < 3 || c.src.index.size() != r) refuse(std::string(what) + " has " + std::to_string(r) + " dims (the skeleton takes [lead..., seq, head dim])");
    const std::string d = copy_var(c, c.src.index[r - 1], &ext);
    if (d.empty() || ext != t.shape[r - 1]) refuse(std::string(what) + "'s head-dim index is not the whole row");
    const Expr& seq = c.src.index[r - 2];
    bool ok = false;
    for (auto& a : c.domain.axes)
      ok |= a.extent == tile && (is_tile_index(seq, tile_var, tile, a.var) || (one_row_tile && tile_var == kOneRowTile && is_var(seq, a.var)));
    if (!ok) refuse(std::string(what) + " is read at sequence index " + print_expr(seq) + ", not " + tile_var + " * " + std::to_string(tile) + " + its row");
    if (t.shape[r - 2] % tile != 0) refuse(std::string(what) + "'s sequence (" + std::to_string(t.shape[r - 2]) + ") is not a multiple of the tile (" + std::to_string(tile) + ": ragged)");
    if (c.domain.guard.defined()) refuse(std::string(what) + "'s staging is guarded");
  };
  if (stage_a->src.index.size() != rank) refuse("Q's staging index");
  // The lead dims of an operand: grid variables (or extent-1 axes), and possibly a block of fixed
  // indices right before the head dim (differential attention's q[b, 1, h] of [B, 2, H, S, D]): the
  // skeleton's heads are the grid's, the operand's batch coordinate b · (C · H) + c · H + h
  // (AttentionShape's X_heads = C · H, X_head0 = c · H; C the block's extent, c its flat index).
  struct Lead {
    std::vector<std::string> grid;   // per lead dim: its grid variable ("" for none or a fixed index)
    std::vector<bool> fixed;         // per lead dim: a fixed index
    int64_t block = 1, at = 0;       // the fixed block's extent C and flat index c
  };
  auto lead_of = [&](const CopyNode& c, const GlobalTensor& t, const char* what) {
    const size_t r = t.shape.size();
    Lead l;
    l.grid.assign(r - 2, "");
    l.fixed.assign(r - 2, false);
    for (size_t k = 0; k + 2 < r; ++k) {
      const Expr& e = c.src.index[k];
      if (k + 3 < r && t.shape[k] > 1 && e.kind() == ExprKind::Const) {
        const double x = e.as<ConstNode>()->value;
        if (x >= 0 && x < static_cast<double>(t.shape[k]) && x == std::floor(x)) {
          l.fixed[k] = true;
          l.at = l.at * t.shape[k] + static_cast<int64_t>(x);
          l.block *= t.shape[k];
          continue;
        }
      }
      if (k + 3 == r) continue;  // the head dim: checked by the caller (Q's variable, or GQA's h // G)
      l.grid[k] = lead_index(c, e, t.shape[k], what);
    }
    for (size_t k = 0; k + 3 < r; ++k)
      if (l.fixed[k])
        for (size_t k2 = k + 1; k2 + 3 < r; ++k2)
          if (!l.fixed[k2]) refuse(std::string(what) + "'s fixed lead index " + print_expr(c.src.index[k]) + " is not next to the head dim (the skeleton takes b · (C · H) + c · H + h)");
    return l;
  };
  Lead q_lead = lead_of(*stage_a, *q, "Q");
  std::vector<std::string> lead_grid = q_lead.grid;
  lead_grid[rank - 3] = lead_index(*stage_a, stage_a->src.index[rank - 3], q->shape[rank - 3], "Q");
  // Q's batch grid variables (with their extents), in order: K, V and the output share them.
  auto batch_vars = [&](const Lead& l, const GlobalTensor& t) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (size_t k = 0; k + 3 < t.shape.size(); ++k)
      if (!l.fixed[k] && t.shape[k] > 1) out.push_back({l.grid[k], t.shape[k]});
    return out;
  };
  const auto q_batch = batch_vars(q_lead, *q);
  // The row-tile grid variable: the one in Q's sequence index.
  std::string row_grid;
  for (auto& gd : kernel_.grid)
    for (auto& a : stage_a->domain.axes)
      if (a.extent == BM_ && is_tile_index(stage_a->src.index[rank - 2], gd.var, BM_, a.var)) row_grid = gd.var;
  if (row_grid.empty() && q->shape[rank - 2] == BM_)
    for (auto& a : stage_a->domain.axes)
      if (a.extent == BM_ && is_var(stage_a->src.index[rank - 2], a.var)) one_row_tile = true;
  if (one_row_tile) row_grid = kOneRowTile;
  if (row_grid.empty()) refuse("Q's sequence index is not a row tile of the grid");
  check_tail(*stage_a, *q, row_grid, BM_, "Q");
  const int64_t seq_q = q->shape[rank - 2];
  if ((one_row_tile ? 1 : grid_extent(row_grid)) * BM_ != seq_q) refuse("the row tiles do not cover Q's sequence exactly");
  for (auto& gd : kernel_.grid)
    if (gd.var != row_grid && std::find(lead_grid.begin(), lead_grid.end(), gd.var) == lead_grid.end())
      refuse("grid variable " + gd.var + " indexes no lead dim of Q");
  // K and V: the same lead indices, except the head (the last lead dim) may be `head // G` (GQA).
  const std::string key_tile = loop_->var;
  int64_t heads_kv = q->shape[rank - 3], kv_rows = 0;
  std::map<std::string, Lead> kv_leads;
  auto check_kv = [&](const CopyNode& c, const char* what) -> const GlobalTensor* {
    const GlobalTensor* t = program_.find_global(c.src.name);
    if (!t || t->role != GlobalRole::input || t->dtype != in_dtype_ || t->shape.size() < 3 || c.src.index.size() != t->shape.size()) refuse(std::string(what) + " is not an input of Q's type with a sequence and a head dim");
    const size_t r = t->shape.size();
    const Lead l = lead_of(c, *t, what);
    if (batch_vars(l, *t) != q_batch) refuse(std::string(what) + "'s batch index differs from Q's");
    kv_leads[what] = l;
    const Expr& h = c.src.index[r - 3];
    const std::string qh = print_expr(stage_a->src.index[rank - 3]);
    int64_t kv = q->shape[rank - 3];
    if (print_expr(h) != qh || t->shape[r - 3] != q->shape[rank - 3]) {
      bool gqa = false;
      if (h.kind() == ExprKind::Binary && h.as<BinaryNode>()->op == BinaryOp::floordiv) {
        auto b = h.as<BinaryNode>();
        const std::string lhs = print_expr(b->lhs);
        // Q's head index, or its grid variable alone (the extent-1 axis dropped from the tile)
        bool same = lhs == qh || lhs == lead_grid[rank - 3];
        double group = evaluate_with(b->rhs, {}, {}, program_.dims);
        if (same && group >= 1 && group == std::floor(group) && static_cast<int64_t>(group) * t->shape[r - 3] == q->shape[rank - 3]) {
          gqa = true;
          kv = t->shape[r - 3];
        }
      }
      if (!gqa) refuse(std::string(what) + "'s head index " + print_expr(h) + " is neither Q's nor Q's // (heads / kv heads)");
    }
    heads_kv = kv;
    check_tail(c, *t, key_tile, BN_, what);
    if (kv_rows && t->shape[r - 2] != kv_rows) refuse("K and V differ in length");
    if (t->shape[r - 1] != q->shape[rank - 1]) refuse(std::string(what) + "'s head dim differs from Q's");
    kv_rows = t->shape[r - 2];
    return t;
  };
  const GlobalTensor* k = check_kv(*stage_b, "K");
  const int64_t heads_k = heads_kv;
  const GlobalTensor* v = check_kv(*stage_v, "V");
  if (heads_kv != heads_k || v->shape[v->shape.size() - 2] != k->shape[k->shape.size() - 2]) refuse("K and V differ in shape");
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
  std::vector<const MapNode*> post;  // pointwise maps of o_acc / z before the store (a gate): the epilogue's
  for (auto* s : after) {
    if (s->kind() == StmtKind::Copy && !store) { store = s->as<CopyNode>(); continue; }
    if (s->kind() == StmtKind::Map && !store) {
      auto mp = s->as<MapNode>();
      if (guarded(mp->domain)) refuse("a guarded statement after the stream");
      if ((mp->dst.name == m && load_of(mp->value, acc_m)) || (mp->dst.name == z && load_of(mp->value, acc_z))) continue;
      if (!finish) { finish = mp; continue; }
      post.push_back(mp);
      continue;
    }
    refuse("the statements after the stream are not o = o_acc / z, pointwise maps of it and its store");
  }
  if (!finish || !store) refuse("no o = o_acc / z stored after the stream");
  {
    const size_t row_rank = kernel_.find_buffer(m)->shape.size();
    const std::string row = index_text(finish->dst.index, row_rank), all = index_text(finish->dst.index, finish->dst.index.size());
    const std::string text = print_expr(finish->value);
    if (text != acc_o + all + " * (1.0 / " + z + row + ")" && text != acc_o + all + " / " + z + row) refuse("the result is " + text + ", not o_acc / z");
  }
  const GlobalTensor* o = program_.find_global(store->dst.name);
  const std::string stored = post.empty() ? finish->dst.name : post.back()->dst.name;
  // (an intermediate too: a later kernel reads it, as differential attention's second pass reads a0)
  if (!o || (o->role != GlobalRole::output && o->role != GlobalRole::intermediate) || store->src.name != stored || o->shape.size() < 3 || store->domain.guard.defined())
    refuse("the result is not stored whole to an output");
  // The value stored, as an expression of o_acc / z (the load "(&a_)") and of global inputs read at
  // the store's element: the post maps composed (each map's tile reads substituted by its definition).
  arrays_["(&a_)"] = CudaArray{"(&a_)", {}, DType::f32, false};
  std::function<Expr(const std::string&, const std::vector<Expr>&)> value_of = [&](const std::string& tile, const std::vector<Expr>& index) -> Expr {
    if (tile == finish->dst.name) return make_load("(&a_)", {});
    auto substituted = [&](const Domain& d, const std::vector<Expr>& dst, const Expr& e) {
      if (dst.size() != index.size() || d.axes.size() != dst.size()) refuse("tile " + tile + " is read at another rank than it is written");
      std::map<std::string, Expr> at;
      for (size_t k2 = 0; k2 < d.axes.size(); ++k2) {
        if (!is_var(dst[k2], d.axes[k2].var)) refuse("tile " + tile + " is written at index " + print_expr(dst[k2]));
        at[d.axes[k2].var] = index[k2];
      }
      return substitute_vars(e, at);
    };
    if (auto it = row_staged.find(tile); it != row_staged.end()) {
      const CopyNode* c = it->second;
      if (c->domain.axes.empty()) return make_load(c->src.name, c->src.index);  // a 0-d input
      std::vector<Expr> src;
      for (auto& i : c->src.index) src.push_back(substituted(c->domain, c->dst.index, i));
      return make_load(c->src.name, src);
    }
    for (auto* mp : post)
      if (mp->dst.name == tile) {
        const DType t = kernel_.find_buffer(tile)->dtype;
        if (mp != post.back() && t != DType::f32) refuse("the epilogue rounds tile " + tile + " to " + std::string(dtype_name(t)) + " before it is stored");
        const Expr inner = rewrite_loads(mp->value, [&](const LoadNode& l, const Expr& self) -> Expr {
          if (program_.find_global(l.tensor)) return self;
          return value_of(l.tensor, l.index);
        });
        return substituted(mp->domain, mp->dst.index, inner);
      }
    refuse("the epilogue reads tile " + tile + " (neither o_acc / z, a post map, nor an input staged before the stream)");
  };
  for (auto* mp : post) {
    if (kernel_.find_buffer(mp->dst.name)->shape != kernel_.find_buffer(finish->dst.name)->shape) refuse("post map " + mp->dst.name + " is not of the output tile's shape");
    if (uses_tensor(mp->value, acc_o) || uses_tensor(mp->value, acc_z) || uses_tensor(mp->value, acc_m) || uses_tensor(mp->value, m) || uses_tensor(mp->value, z))
      refuse("post map " + mp->dst.name + " reads the row state");
  }
  const Expr stored_value = value_of(store->src.name, store->src.index);
  {
    // [batch..., heads, seq_q, head dim] with Q's batch variables and head, no fixed index: the epilogue
    // stores at (bh · seq_q + row) · D + col
    const size_t r = o->shape.size();
    if (o->shape[r - 1] != q->shape[rank - 1] || o->shape[r - 2] != q->shape[rank - 2] || o->shape[r - 3] != q->shape[rank - 3]) refuse("the output's shape differs from Q's");
    CopyNode as_read = *store;  // the store's destination index read like a staging index
    as_read.src = store->dst;
    const Lead l = lead_of(as_read, *o, "the output");
    for (bool f : l.fixed)
      if (f) refuse("the output is stored at a fixed lead index");
    if (batch_vars(l, *o) != q_batch || print_expr(store->dst.index[r - 3]) != print_expr(stage_a->src.index[rank - 3])) refuse("the output's lead index differs from Q's");
    check_tail(as_read, *o, row_grid, BM_, "the output");
  }
  const DType tile_type = kernel_.find_buffer(stored)->dtype;
  if (!post.empty() && kernel_.find_buffer(finish->dst.name)->dtype != DType::f32) refuse("o_acc / z is rounded before the epilogue's maps");
  if (tile_type != o->dtype && tile_type != DType::f32) refuse("the result is rounded to " + std::string(dtype_name(tile_type)) + " before its " + std::string(dtype_name(o->dtype)) + " store");

  // ---- Every query row sees a key ----
  // The skeleton gives a row that sees no key zeros; the program's softmax gives it 0/0. The skeleton
  // is taken only where C holds for some key of every row (of every head C depends on), checked here
  // on the diagonal, the first and the last key, then every key of a row that fails those.
  // A data mask cannot be checked at compile time: a row that sees no key gets NaN there, the program's
  // 0/0 (kEmptyRowNaN).
  if (cond && !cond_in) {
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

  // ---- The score and the mask on global rows row_ and columns col_ ----
  // The IR writes them i_t * BM + i and j_t * BN + j; the functors take the global row and column
  // (int arithmetic instead of 64-bit divisions per score).
  std::map<std::string, Expr> lead_zeros;
  for (auto& lv : lead_vars) lead_zeros[lv] = make_int(0);
  std::function<Expr(const Expr&)> on_rows_and_columns = [&](const Expr& e) {
    Expr r = substitute_vars(e, lead_zeros);
    r = replace_tile_index(r, row_grid, BM_, row_var, make_var("row_"));
    if (one_row_tile) r = substitute_vars(r, {{row_var, make_var("row_")}});
    r = replace_tile_index(r, key_tile, BN_, col_var, make_var("col_"));
    // and inside the indices of global loads (a pair bias read at [.., row, col])
    return rewrite_loads(r, [&](const LoadNode& l, const Expr& self) -> Expr {
      if (l.tensor == S_ || !program_.find_global(l.tensor)) return self;
      std::vector<Expr> index;
      for (auto& i : l.index) index.push_back(on_rows_and_columns(i));
      return make_load(l.tensor, index);
    });
  };
  auto tile_free = [&](const Expr& e) { return !mentions(e, row_grid) && !mentions(e, row_var) && !mentions(e, key_tile) && !mentions(e, col_var); };
  std::optional<Expr> mask_rc;  // C on row_ and col_ (nullopt: no mask, or C reads the tile indices otherwise)
  ColRange reach;               // the columns C may reach from rows [row_lo_, row_hi_]
  if (cond) {
    const Expr c = on_rows_and_columns(cond_in ? *cond_in : *cond);
    if (tile_free(c)) {
      mask_rc = c;
      if (!cond_in) reach = column_range(c, program_.dims);
    }
  }
  // ---- A data mask: C(row id, column id) ----
  // C on rows and columns reads at most one integer id per query row (a load whose index mentions row_
  // and not col_) and one per key, and mentions row_ and col_ nowhere else: match(rid_, cid_) is C
  // with those loads replaced, tile_class() its interval decision over the ids' ranges.
  struct DataMask {
    Expr row_id = make_const(0), col_id = make_const(0), match;
    std::optional<Expr> live, may_fail;
    std::string row_text = "none", col_text = "none";
  };
  std::optional<DataMask> data;
  if (cond_in) {
    if (!mask_rc) refuse("the data mask reads the tile indices otherwise than as the global row and column");
    DataMask dm;
    std::vector<Expr> row_loads, col_loads;
    std::string why;
    std::function<void(const Expr&)> walk = [&](const Expr& e) {
      if (e.kind() == ExprKind::Load) {
        auto l = e.as<LoadNode>();
        const bool r = mentions(e, "row_"), c = mentions(e, "col_");
        for (auto& i : l->index)
          if (!tensors_used(i).empty()) why = "the data mask indexes " + l->tensor + " by a tensor";
        if (!r && !c) return;  // a value of the head
        if (r && c) { why = "the data mask reads " + print_expr(e) + " at both the row and the column"; return; }
        if (program_.find_global(l->tensor)->dtype != DType::i32) { why = "the data mask's ids " + print_expr(e) + " are " + std::string(dtype_name(program_.find_global(l->tensor)->dtype)) + ", not i32"; return; }
        auto& list = r ? row_loads : col_loads;
        bool known = false;
        for (auto& x : list) known |= structurally_equal(x, e);
        if (!known) list.push_back(e);
        return;
      }
      switch (e.kind()) {
        case ExprKind::Unary: walk(e.as<UnaryNode>()->operand); break;
        case ExprKind::Binary: walk(e.as<BinaryNode>()->lhs); walk(e.as<BinaryNode>()->rhs); break;
        case ExprKind::Select: walk(e.as<SelectNode>()->cond); walk(e.as<SelectNode>()->if_true); walk(e.as<SelectNode>()->if_false); break;
        case ExprKind::Cast: walk(e.as<CastNode>()->operand); break;
        default: break;
      }
    };
    walk(*mask_rc);
    if (!why.empty()) refuse(why);
    if (row_loads.size() > 1 || col_loads.size() > 1) refuse("the data mask reads more than one id per query row or per key");
    if (!row_loads.empty()) dm.row_id = row_loads[0], dm.row_text = print_expr(row_loads[0]);
    if (!col_loads.empty()) dm.col_id = col_loads[0], dm.col_text = print_expr(col_loads[0]);
    dm.match = rewrite_loads(*mask_rc, [&](const LoadNode&, const Expr& self) -> Expr {
      if (!row_loads.empty() && structurally_equal(self, row_loads[0])) return make_var("rid_");
      if (!col_loads.empty() && structurally_equal(self, col_loads[0])) return make_var("cid_");
      return self;
    });
    if (mentions(dm.match, "row_") || mentions(dm.match, "col_")) refuse("the data mask reads the row or the column outside its ids (" + print_expr(*mask_rc) + ")");
    IntervalBuilder ib;
    ib.dims = program_.dims;
    ib.vars["rid_"] = {make_var("rid_lo_"), make_var("rid_hi_")};
    ib.vars["cid_"] = {make_var("cid_lo_"), make_var("cid_hi_")};
    ib.load_range = [](const LoadNode&) -> std::optional<IntervalExpr> { return std::nullopt; };
    dm.live = ib.may_be_true(dm.match);
    dm.may_fail = ib.may_be_false(dm.match);
    data = dm;
  }
  // Key tiles per 128-row work tile on average, from the reach (−1: not known at compile time).
  double mean_key_tiles = -1;
  if (reach.lo || reach.hi) {
    const int64_t row_tiles = (seq_q + 127) / 128;
    double sum = 0;
    for (int64_t t = 0; t < row_tiles; ++t) {
      const double rlo = static_cast<double>(t * 128), rhi = static_cast<double>(std::min<int64_t>(seq_q, t * 128 + 128) - 1);
      const double lo = std::max(0.0, reach.lo ? reach.lo->at(rlo, rhi) : 0.0);
      const double hi = std::min(static_cast<double>(seq_k - 1), reach.hi ? reach.hi->at(rlo, rhi) : static_cast<double>(seq_k - 1));
      if (hi >= lo) sum += std::floor(hi / 128) - std::floor(lo / 128) + 1;
    }
    mean_key_tiles = sum / static_cast<double>(row_tiles);
  }

  // ---- The configuration ----
  const double scale = has_scale_ ? evaluate_with(score_scale_, {}, {}, program_.dims) : 1.0;
  if (!std::isfinite(scale)) refuse("the scores' scale is not finite");
  const bool identity = g.kind() == ExprKind::Load && scale > 0;
  const Expr g_rc = divisions_as_products(on_rows_and_columns(g));
  std::optional<AffineForm> affine;  // the score as a·S + u·(col − row) + w·row + c (ALiBi)
  std::optional<LinearForm> linear;  // else a·S + bias(row, col) (evoformer's pair bias and mask bias)
  if (!identity) {
    // (S itself is read at the tile's own row and column, checked above)
    const Expr g_s = rewrite_loads(g_rc, [&](const LoadNode& l, const Expr& self) -> Expr { return l.tensor == S_ ? make_load(S_, {}) : self; });
    if (tile_free(g_s)) affine = affine_score(g_s, S_);
    if (!affine && tile_free(g_s)) linear = linear_score(g_s, S_);
  }
  // The configuration per cell, from the skeleton's own sweep (bench/results/h100/attention-skeleton.md):
  // hd64 192 x 128 with 4 stages (3 consumers: with the identity or an affine score, 160 registers
  // each); hd128 128 x 128 with 2 stages; under a mask that leaves a work tile few key tiles (at most 8
  // on average: causal at S ≤ 1k, sliding windows at any length; without the mask's reach, S ≤ 1k)
  // persistent blocks, one per SM, 128 x 128 with 4 (hd64) or 3 stages (hd128).
  // (A data mask: persistent blocks too, below: the producer warpgroup's idle warps classify the next
  // work tile's key tiles while the consumers run this one.)
  const bool short_masked = cond && !data && D_ <= 128 && (mean_key_tiles >= 0 ? mean_key_tiles <= 8 : seq_q <= 1024);  // hd128 S 4k: 546 µs persistent, 505 not
  auto comparison = [](const Expr& e) {
    if (e.kind() != ExprKind::Binary) return false;
    const BinaryOp op = e.as<BinaryNode>()->op;
    return op == BinaryOp::lt || op == BinaryOp::le || op == BinaryOp::gt || op == BinaryOp::ge;
  };
  // A mask of one comparison of row and column (causal's col <= row + c).
  const bool one_comparison = cond && comparison(*cond);
  // A mask of two comparisons of row and column joined by && or || (sliding_window's col <= row && row -
  // col <= W, prefix_lm's col < P || col <= row).
  bool two_comparisons = false;
  if (cond && cond->kind() == ExprKind::Binary) {
    const BinaryNode* both = cond->as<BinaryNode>();
    two_comparisons = (both->op == BinaryOp::logical_and || both->op == BinaryOp::logical_or) && comparison(both->lhs) && comparison(both->rhs);
  }
  // Short unmasked rows at hd64 (vanilla, gqa: at most 8 key tiles of 128 per work tile) run like short
  // masked ones: persistent blocks, 128 x 128, instead of one 192-row block per work tile (at S 1k a
  // 192-row block streams 8 key tiles and a sixth of its rows are past seq_q: 1024 = 5·192 + 64):
  // vanilla S 1k 187.0 → 173.7 µs, gqa 187.2 → 177.6 (H100, 2026-11-27, same call). At hd128 persistent
  // blocks measured slower (vanilla 282.4 → 301.6 µs): hd128 keeps one block per tile.
  // Operands at a fixed lead index (diff_attn's two passes over q[b, c, h]) keep one block per tile: not
  // measured on persistent blocks. $SOLDER_ATTN_SHORT=old restores the previous choice (one block per
  // tile unmasked; one Q buffer under a mask), =all takes this schedule at every length and head dim
  // (A/B runs).
  const std::string short_knob = std::getenv("SOLDER_ATTN_SHORT") ? std::getenv("SOLDER_ATTN_SHORT") : "";
  const bool short_old = short_knob == "old";
  const bool short_all = short_knob == "all" && identity && !data && D_ <= 128;
  const bool plain_layout = q_lead.block == 1 && kv_leads.at("K").block == 1 && kv_leads.at("V").block == 1;
  // An affine score (ALiBi) takes the same short-row schedule, where its 2 consumers form it by one FFMA
  // per score (the row shift, functors.cuh): alibi S 1k 214.4 → 188.9 µs (H100, 2026-11-27, same call;
  // the previous kernel: one 192-row block per work tile, two FFMA per score).
  const bool short_plain = !short_old && (identity || affine) && !cond && !data && plain_layout && D_ <= 64 && seq_k <= 1024;
  // Causal's rows (one comparison, the plain score, plain operand layouts) on the short rows' schedule past
  // 8 key tiles per work tile as well: persistent blocks of 128 rows on 2 consumers, two Q buffers, work
  // tiles claimed from a counter, free consumers, the staged epilogue and the posted work-tile setup
  // (below) — at hd64 up to 32 key tiles per work tile on average (S 4k: 371.1 -> 328.5 us, against the
  // 192-row 3-consumer kernel with one block per tile; at S 16k 1227.6 against 1217.6, one round: that
  // one keeps 3 consumers, with the staged epilogue below), at hd128 at every length (S 4k 513.4 ->
  // 462.8 us, S 16k 1940.5 -> 1861.5, one round; S 1k, where its rows were already persistent on one Q
  // buffer, with Dynamic, free consumers and the posted setup: 182.0 -> 162.5, one round; H100,
  // 2026-11-28, same call as cuDNN SDPA's 340.8 / 530.5 / 1949.6 / 167.1 µs). $SOLDER_ATTN_CAUSAL=old keeps
  // the previous choice (A/B runs).
  const char* causal_knob = std::getenv("SOLDER_ATTN_CAUSAL");
  const bool causal_rows = one_comparison && identity && !data && plain_layout && D_ <= 128 && !short_old &&
                           !(causal_knob && std::string(causal_knob) == "old");
  const bool causal_long = causal_rows && !short_masked && (D_ > 64 || (mean_key_tiles >= 0 && mean_key_tiles <= 32));  // (D_ > 64: hd128)
  // A mask of two comparisons (above) past 8 key tiles per work tile on the same schedule at hd64, up to 32
  // key tiles per work tile on average (prefix_lm S 4k: 16.6; sliding_window is short at every length):
  // the Dynamic two-Q-buffer kernel with free consumers and the staged epilogue that prefix_lm takes at S
  // <= 1k (the rule of two comparisons below), instead of the 192-row 3-consumer kernel with one block
  // per work tile: prefix_lm S 4k 371.7 -> 332.4 us (-10.6 %; 372.4 / 371.0 -> 332.0 / 332.8), and with the
  // posted work-tile setup (below) 326.6 (324.6 / 328.6), 0.767x FlexAttention max-autotune's 425.9 (H100,
  // 2026-11-28, same call, two rounds). $SOLDER_ATTN_TWO_LONG=0 keeps the previous choice (A/B runs), as
  // does $SOLDER_ATTN_CAUSAL=old.
  const bool two_long_default = true;
  const char* two_long_knob = std::getenv("SOLDER_ATTN_TWO_LONG");
  const bool two_long = (two_long_knob && *two_long_knob ? std::string(two_long_knob) == "1" : two_long_default) && two_comparisons && identity && !data &&
                        plain_layout && D_ <= 64 && !short_old && !short_masked && !(causal_knob && std::string(causal_knob) == "old") && mean_key_tiles >= 0 &&
                        mean_key_tiles <= 32;
  const bool short_rows = short_masked || short_plain || short_all || causal_long || two_long;
  // Head dim 32 runs in the hd64 configuration: TMA zero-fills Q's and K's columns 32..63 (their dot
  // products are exact) and V's (those output columns are 0 and not stored).
  // FP8: head dim 64 (and 32, zero-filled alike) in rows of 64 bytes (the 64-byte swizzle: S over K 64, P·V
  // over N 64), 128 in rows of 128 bytes. $SOLDER_ATTN_FP8_HD64=padded runs head dim ≤ 64 in the HeadDim 128
  // configuration instead (TMA zero-fills columns 64..127: twice the MMA work), as before the 64-byte rows
  // (A/B runs).
  const bool fp8_padded = fp8 && D_ <= 64 && [] {
    const char* e = std::getenv("SOLDER_ATTN_FP8_HD64");
    return e && std::string(e) == "padded";
  }();
  const int64_t kHeadDim = fp8 ? (D_ <= 64 && !fp8_padded ? 64 : D_ <= 128 ? 128 : D_) : D_ < 64 ? 64 : D_;
  // A data mask: 2 consumers (128 query rows per work tile: a block's rows span fewer documents, so more
  // key tiles are skipped, and the per-score id compares of boundary tiles fit in 240 registers).
  // $SOLDER_ATTN_CONSUMERS=2|3 overrides the count for long rows at hd64 with the identity or an affine
  // score (A/B runs; alibi S 4k / 16k on 2 consumers with one FFMA per score: 712 / 2688 µs against 659 /
  // 2486 on 3 with two, H100, 2026-11-27).
  int consumers = kHeadDim == 64 && (identity || affine) && !short_rows && !data ? 3 : 2;
  if (const char* forced = std::getenv("SOLDER_ATTN_CONSUMERS"); forced && *forced && kHeadDim == 64 && (identity || affine) && !short_rows && !data)
    consumers = std::string(forced) == "2" ? 2 : 3;
  // A score with a per-element bias keeps the key tile's bias in registers while S runs (BN / 2 floats
  // per thread): 64 keys per tile, so that it fits beside S, P and O without spilling, and 4 stages.
  const bool with_bias = linear && !affine && !identity;
  // A staged bias (functors.cuh): the bias reads at most one 16-bit input at [lead.., row, col] (a pair
  // bias: a [BM x BN] tile per key tile) and one byte input at [lead.., col] (a key mask: BN bytes),
  // every lead index fixed per head; the producer loads both by TMA into the K stage, the consumers
  // read them from shared memory. Any other read in the bias (other inputs, indices of another form,
  // rows not 16-byte multiples) stays a per-score global read; with nothing staged, the bias() path.
  struct StagedInput {
    const GlobalTensor* g = nullptr;
    std::vector<Expr> index;
  };
  StagedInput staged_tile, staged_column;
  Expr staged_expr;  // the bias with the two loads as the staged elements (&bt_)[0], (&bc_)[0]
  std::string staged_refusal;
  if (with_bias && !std::getenv("SOLDER_ATTN_BIAS_GLOBAL")) {
    auto is_var = [](const Expr& e, const char* n) { return e.kind() == ExprKind::Var && e.as<VarNode>()->name == n; };
    auto same = [](const std::vector<Expr>& a, const std::vector<Expr>& b) {
      if (a.size() != b.size()) return false;
      for (size_t d = 0; d < a.size(); ++d)
        if (print_expr(a[d]) != print_expr(b[d])) return false;
      return true;
    };
    staged_expr = rewrite_loads(linear->bias, [&](const LoadNode& l, const Expr& self) -> Expr {
      const GlobalTensor* gt = program_.find_global(l.tensor);
      if (l.tensor == S_ || !gt) return self;
      const size_t n = l.index.size();
      bool lead_ok = n >= 1;
      const size_t lead_end = n >= 2 && is_var(l.index[n - 2], "row_") ? n - 2 : n - 1;
      for (size_t d = 0; d < lead_end && lead_ok; ++d)
        lead_ok = !mentions(l.index[d], "row_") && !mentions(l.index[d], "col_") && tensors_used(l.index[d]).empty() &&
                  (l.index[d].kind() == ExprKind::Const || provably_inside(l.index[d], gt->shape[d]));
      if (lead_ok && n >= 2 && is_var(l.index[n - 1], "col_") && is_var(l.index[n - 2], "row_") &&
          (gt->dtype == DType::bf16 || gt->dtype == DType::f16) && gt->shape[n - 1] % 8 == 0 && (!staged_tile.g || (staged_tile.g == gt && same(staged_tile.index, l.index)))) {
        staged_tile = StagedInput{gt, l.index};
        return make_load("(&bt_)", {});
      }
      if (lead_ok && is_var(l.index[n - 1], "col_") && lead_end == n - 1 && gt->dtype == DType::boolean && gt->shape[n - 1] % 16 == 0 &&
          (!staged_column.g || (staged_column.g == gt && same(staged_column.index, l.index)))) {
        staged_column = StagedInput{gt, l.index};
        return make_load("(&bc_)", {});
      }
      if (staged_refusal.empty()) staged_refusal = "the bias reads " + l.tensor + " in a form the producer does not stage (not a 16-bit [.., row, col] tile with rows of 8k elements nor a bool [.., col] vector of 16k)";
      return self;
    });
    // (an input it does not stage stays a global read inside staged_bias(), bounded as before)
  }
  const int staged_bits = (staged_tile.g ? 1 : 0) | (staged_column.g ? 2 : 0);
  // A staged bias that is the tile element plus a term of the column byte alone (evoformer's pair bias +
  // 1e9 · (mask − 1)): the skeleton forms the column term once per key column (BN / 4 per thread and key
  // tile, shared by the thread's two rows) and adds it to the tile element by one FADD per score
  // (functors.cuh, kStagedSum): the same f32 sum, in the same order, as staged_bias().
  std::optional<Expr> staged_column_term;
  if (staged_bits == 3 && staged_expr.kind() == ExprKind::Binary && staged_expr.as<BinaryNode>()->op == BinaryOp::add) {
    auto is_tile_element = [](const Expr& e) { return e.kind() == ExprKind::Load && e.as<LoadNode>()->tensor == "(&bt_)"; };
    auto column_only = [&](const Expr& e) {
      const std::vector<std::string> used = tensors_used(e);
      return !mentions(e, "row_") && std::find(used.begin(), used.end(), "(&bt_)") == used.end() && std::find(used.begin(), used.end(), "(&bc_)") != used.end() &&
             std::all_of(used.begin(), used.end(), [](const std::string& t) { return t == "(&bc_)"; });
    };
    const BinaryNode* sum = staged_expr.as<BinaryNode>();
    if (is_tile_element(sum->lhs) && column_only(sum->rhs)) staged_column_term = sum->rhs;
    else if (is_tile_element(sum->rhs) && column_only(sum->lhs)) staged_column_term = sum->lhs;
    if (const char* e = std::getenv("SOLDER_ATTN_STAGED_SUM"); e && std::string(e) == "0") staged_column_term.reset();
  }
  // A data mask at hd64 with at most 1024 keys runs on 64-key tiles: at S 1k a 128-key tile almost
  // always spans two documents (≈ 85 tokens each in the suite), and 64-key tiles skip or fully see
  // more of the score area (4.1 live 64-key tiles per work tile against 2.75 of 128: 25 % less MMA
  // area): document_mask S 1k 119.9 against 127.9 µs (H100, 2026-11-27, the eleventh session's fourth
  // merged call; docmask3's call −3 %). Longer rows keep 128 keys (not measured on 64).
  // $SOLDER_ATTN_DATA_BN=64|128 overrides it for every data mask (A/B runs).
  const bool data_bn64 = data && [&] {
    const char* e = std::getenv("SOLDER_ATTN_DATA_BN");
    if (e && *e) return std::string(e) == "64";
    return kHeadDim == 64 && seq_k <= 1024;
  }();
  int bn = kHeadDim == 256 || with_bias || data_bn64 ? 64 : 128;
  // $SOLDER_ATTN_BIAS_BN=128 (A/B runs): a staged bias at hd64 on 2 consumers in the column-sum form
  // (evoformer's pair bias + 1e9 · (mask − 1); head dim 32 padded to 64) on 128-key tiles: at S2 = 256 a
  // work tile is 2 key tiles instead of 4, half the consumers' per-key-tile hand-offs (K / V waits and
  // releases, the issue of S and P·V, the row maxima and the rescale of O); the stage is then K + V + the
  // 128 x 128 bf16 bias tile + 128 mask bytes (64.1 KB): 3 stages beside two Q buffers (the ring rule
  // below). Not by default: 11.9 % fewer instructions (ncu, B1), but more stalls on the MIO queue per
  // issue (mio_throttle + short_scoreboard 0.67 -> 0.93: the bias tile's shared-memory reads, twice as many
  // per key-tile step), and the time did not move: B1 98.7 against 99.3 us, B8 753.7 against 750.1, B32 3054.2 against 3019.5 (H200,
  // 2026-11-28, same call, two rounds; bench/NOTES.md, evo128). The per-score forms (the pair tile or the
  // mask alone, $SOLDER_ATTN_STAGED_SUM=0) and one block per work tile keep 64 keys under the knob too: at
  // 128 they spill 40-80 bytes under nvcc's ptxas (the device test's first build).
  const bool staged_bn128 = staged_column_term.has_value() && kHeadDim == 64 && consumers == 2 && !data && [] {
    const char* e = std::getenv("SOLDER_ATTN_BIAS_BN");
    const char* p = std::getenv("SOLDER_ATTN_PERSISTENT");
    return e && std::string(e) == "128" && !(p && std::string(p) == "0");
  }();
  if (staged_bn128) bn = 128;
  // Two Q buffers on persistent short rows with the plain score at hd64 (vanilla, gqa, causal, and the
  // short masked rows of sliding_window and prefix_lm): the producer loads the next work tile's Q, then
  // its K and V, while the consumers still run this tile, instead of waiting until every consumer has
  // issued this tile's last S (causal S 1k 134.6 → 130.9 µs, vanilla 180.9 → 173.7, sliding_window S 1k
  // 93.5 → 91.2 on persistent blocks, same calls). At hd128 the second Q buffer leaves shared
  // memory for 2 K/V stages instead of 3 (2 x 32 KB of Q + 2 x 64 KB), and causal S 1k measured 199.0 µs
  // with one buffer and 3 stages against 208.4: hd128 keeps one ($SOLDER_ATTN_SHORT=all takes two).
  // $SOLDER_ATTN_QBUFFERS=1 keeps one Q buffer (A/B runs).
  const bool two_q = short_rows && (identity || (affine && short_plain)) && !data && !with_bias && !short_old && (kHeadDim == 64 || short_all || causal_long) && [] {
    const char* e = std::getenv("SOLDER_ATTN_QBUFFERS");
    return !(e && std::string(e) == "1");
  }();
  int q_buffers = two_q ? 2 : 1;
  int stages = kHeadDim == 64 || with_bias ? 4 : two_q ? 2 : short_rows ? 3 : 2;
  // Staggered consumers (Config's Stagger) on the unmasked two-Q-buffer kernels at hd64 (vanilla, gqa at
  // S <= 1k): consumer 1 runs 2 turns behind consumer 0, so that one consumer's work-tile boundary (last
  // P·V, epilogue, first S and its softmax) overlaps the other's full products instead of the other's
  // boundary; each K/V stage then stays 2 turns longer in the ring, which gets 6 stages (2 x 16 KB of Q +
  // 6 x 32 KB). Measured (H100, 2026-11-27, same call, two rounds): vanilla S 1k 175.7 → 167.0 µs, gqa
  // 172.7 → 165.7; under a mask no gain (causal S 1k 131.2 → 132.0, sliding_window and prefix_lm within
  // ± 2 %), so masked kernels keep the previous Config. Causal S 1k's schedule in its place (stagger 0,
  // Dynamic, free consumers, the staged epilogue, PostedWork, 4 stages) measured 171.8 / 170.3 µs against
  // the stagger's 173.2 / 163.7 on vanilla / gqa S 1k (H100, 2026-11-28, same call, four rounds; vanilla
  // inside the stagger's 12 µs round-to-round spread), Dynamic with turns and the staged epilogue 177.8 /
  // 173.5, free consumers with it on 5 stages 182.8 / 179.8: the stagger stays. With the staged epilogue in
  // the Q rows on its 6 stages ($SOLDER_ATTN_EPIQ=1) 172.4 / 166.0 against 167.8 / 165.5 (H100, 2026-11-28,
  // same call, six rounds): the per-pair stores stay. $SOLDER_ATTN_STAGGER=N
  // (0..3; 0: the previous Config, 4 stages, no stagger; masked two-Q-buffer kernels too) and
  // $SOLDER_ATTN_STAGES=N (where N stages fit) override them (A/B runs).
  int stagger = 0;
  if (two_q && kHeadDim == 64 && consumers == 2) {
    stagger = cond ? 0 : 2;
    if (const char* e = std::getenv("SOLDER_ATTN_STAGGER"); e && *e) stagger = std::clamp(std::atoi(e), 0, 3);
    const int64_t q_bytes = 2LL * 128 * kHeadDim * 2, stage_bytes = 2LL * bn * kHeadDim * 2;
    auto fits = [&](int n) { return q_bytes + n * stage_bytes + 8 * (4 + 4 * n) + 1024 <= 232448; };
    if (stagger > 0) {
      stages = 6;
      while (stages > 2 && !fits(stages)) --stages;
    }
    if (const char* forced = std::getenv("SOLDER_ATTN_STAGES"); forced && *forced) {
      const int n = std::atoi(forced);
      if (n >= 2 && n <= 8 && fits(n)) stages = n;
    }
    stagger = std::min(stagger, stages - 1);
  }
  // Free consumers (Config's FreeConsumers: no turn ring, each consumer issues as soon as its own operands
  // are there): by default on causal's kernel and evoformer's staged bias at hd64 below; $SOLDER_ATTN_FREE=1 takes it on every two-consumer
  // kernel without a data mask, in place of a stagger (the ring keeps its depth), =0 nowhere (A/B runs).
  bool free_consumers = false;
  if (const char* e = std::getenv("SOLDER_ATTN_FREE"); e && std::string(e) == "1" && !data && consumers == 2) {
    free_consumers = true;
    stagger = 0;
  }
  if (staged_bits) {
    // A staged bias: as deep a ring as shared memory holds, up to 6 stages (hd64 on 64-key tiles: Q 16 KB
    // + 6 x 32.1 KB of K, V, bias tile and column bytes; on 128-key tiles 3 x 64.1 KB; hd128: 4), so that
    // the producer runs a work tile (4 or 2 key tiles at S2 = 256) ahead of the consumers. Then a second Q
    // buffer where it fits beside that ring without taking a stage (hd64: 2 x 16 KB + 6 x 32.1 KB = 226 KB,
    // or + 3 x 64.1 KB = 224 KB; hd128 keeps one): the producer
    // loads the next work tile's Q as soon as the ring has room, not only once both consumers have issued
    // this tile's last S. $SOLDER_ATTN_STAGES=N (2..8) overrides the depth where N stages fit, and
    // $SOLDER_ATTN_QBUFFERS=1 keeps one Q buffer (A/B runs).
    const int bm_ = 64 * consumers;
    auto fits = [&](int n, int q) {
      return q * static_cast<int64_t>(bm_) * kHeadDim * 2 + n * (2LL * bn * kHeadDim * 2 + (staged_bits & 1 ? bm_ * bn * 2 : 0) + (staged_bits & 2 ? 128 : 0)) + 8 * (2 * q + 4 * n) +
                 1024 <=
             232448;
    };
    stages = 6;
    while (stages > 2 && !fits(stages, 1)) --stages;
    if (const char* forced = std::getenv("SOLDER_ATTN_STAGES"); forced && *forced) {
      const int n = std::atoi(forced);
      if (n >= 2 && n <= 8 && fits(n, 1)) stages = n;
    }
    const char* one_q = std::getenv("SOLDER_ATTN_QBUFFERS");
    if (fits(stages, 2) && !(one_q && std::string(one_q) == "1")) q_buffers = 2;
  }
  // A staged bias runs on persistent blocks too: evoformer's work tiles have few key tiles (4 of 64 at
  // S2 = 256), and the producer then loads the next tile's Q, K and bias while the consumers finish
  // this one. $SOLDER_ATTN_PERSISTENT=0|1 overrides it for a score with a bias (A/B runs).
  // A data mask runs on persistent blocks, one per SM, when a work tile has at most 32 key tiles to
  // classify (seq_k ≤ 4096 at BN 128): there one block per tile left a fixed ≈ 8-10 µs per block (ids,
  // classification, Q load, pipeline fill, epilogue) that nothing overlapped, and persistent blocks
  // measured 126.9 / 207.3 µs against 204.2 / 226.9 at S 1k / 4k (H100, 2026-11-27, same call). At
  // 128 key tiles (S 16k) one block per tile measured faster (464.9 against 518.3 µs): the three
  // classifier warps' 128 tiles per work tile no longer hide under the consumers' 30 µs per tile, and
  // the fixed latency is a small share there. With the id table below (the classification reads no key
  // id) a data mask runs on persistent blocks at any number of key tiles. $SOLDER_ATTN_PERSISTENT=0|1
  // overrides it for data masks too.
  constexpr int64_t kDataPersistentMaxKeyTiles = 32;
  // The keys' ids of a data mask in groups (Mask::kColGroups, functors.cuh): when they depend on the
  // lead dims only through some of them (document ids doc[b, j]: the batch, not the head), every work
  // tile of a group sees the same key tiles' id ranges, and persistent blocks reduce those once per
  // block into a table in shared memory (groups x key tiles, at most 2048 entries) instead of reading
  // every key's id per work tile (16 k id loads per work tile at S 16k). From 16 key tiles per work tile:
  // document_mask 188.5 / 380.3 µs with the table against 214.0 / 469.3 without at S 4k / 16k, but at
  // S 1k (8 key tiles, one batch of id loads per classifier warp, nothing to take off) 135.8 against
  // 128.8, the table's reduction before a block's first work tile being all it adds there (H100,
  // 2026-11-27, same call, two rounds). With the table a data mask runs on persistent blocks at every
  // length. $SOLDER_ATTN_ID_TABLE=0 leaves it out, =1 takes it at any number of key tiles (A/B runs; 0:
  // the previous kernel, persistent only up to 32 key tiles per work tile).
  constexpr int64_t kIdTableMinKeyTiles = 16;
  const char* id_table_knob = std::getenv("SOLDER_ATTN_ID_TABLE");
  const std::string id_table_mode = id_table_knob ? id_table_knob : "";
  struct ColGroups {
    int64_t count = 0;             // 0: no table
    std::string group, group_bh;   // col_group(bh_) and group_bh(group_) as C++ expressions
  } col_groups;
  if (data && id_table_mode != "0" && (id_table_mode == "1" || (seq_k + bn - 1) / bn >= kIdTableMinKeyTiles)) {
    // the lead dims of bh_ (as decode() below takes them apart) that the keys' ids read
    bool known = true;
    std::vector<size_t> used;
    for (auto& var : vars_used(data->col_id)) {
      if (var == "col_" || std::find(lead_vars.begin(), lead_vars.end(), var) != lead_vars.end()) continue;
      size_t at = rank;
      for (size_t k2 = 0; k2 + 2 < rank; ++k2)
        if (!q_lead.fixed[k2] && lead_grid[k2] == var) at = k2;
      if (at == rank) { known = false; break; }
      if (std::find(used.begin(), used.end(), at) == used.end()) used.push_back(at);
    }
    int64_t count = 1, stride = 1, group_stride = 1;
    std::string group = "0", group_bh = "0";
    for (size_t k2 = rank - 2; known && k2-- > 0;) {
      if (q_lead.fixed[k2]) continue;
      if (std::find(used.begin(), used.end(), k2) != used.end()) {
        const std::string extent = std::to_string(q->shape[k2]);
        group += " + " + cuda_identifier(lead_grid[k2]) + " * " + std::to_string(group_stride) + "LL";
        group_bh += " + ((static_cast<long long>(group_) / " + std::to_string(group_stride) + "LL) % " + extent + "LL) * " + std::to_string(stride) + "LL";
        group_stride *= q->shape[k2];
        count *= q->shape[k2];
      }
      stride *= q->shape[k2];
    }
    if (known && count * ((seq_k + bn - 1) / bn) <= 2048) col_groups = ColGroups{count, group, group_bh};
  }
  const bool data_persistent = data && ((seq_k + bn - 1) / bn <= kDataPersistentMaxKeyTiles || col_groups.count > 0);
  bool persistent = short_rows || staged_bits != 0 || data_persistent;
  if (const char* forced = std::getenv("SOLDER_ATTN_PERSISTENT"); (with_bias || data) && forced && *forced) persistent = std::string(forced) == "1";
  if (!persistent) q_buffers = 1;  // (a second Q buffer serves the next work tile of a persistent block)
  // Head dim 256 runs a Config its device test covers (one block per work tile, 2 stages, 2 consumers): a
  // data mask's persistent blocks and a bias's staged tiles are not device-tested there. The key tile is
  // 80 (m64n80k16 for S, 64 KB of Q + 2 x 80 KB of K and V), measured 4-8 % faster than 64 at vanilla and
  // causal S 4k and 16k on the H200 (seventeenth session, bench/NOTES.md). $SOLDER_ATTN_HD256 picks
  // another device-tested candidate for A/B runs: "bn64", the 64-key tiles (the former default); "dyn",
  // persistent blocks (one per SM, one Q buffer: 2 x 64 KB of Q do not fit beside the ring) that claim
  // the work tiles longest first from a counter, free consumers and the posted work-tile setup, as
  // causal hd128, on 64-key tiles; "dyn80", the same on 80-key tiles; unset or any other value: "bn80".
  // A deeper ring does not fit at 128 query rows (64 KB of Q + 3 x 64 KB of 64-key K and V stages is
  // 256 KB). Only the plain score's kernels without a bias or a data mask.
  // A mask of one comparison of row and column (causal) up to 4096 query rows takes "dyn80": causal S 4k
  // 1008.2 / 1005.0 us against 1035.4 / 1026.5 on "bn80" (H200, 2026-11-28, two rounds, same call; cuDNN
  // 947.3 / 967.9). At S 16k the two were within the rounds' spread (3490 / 3426 against 3422 / 3433), and
  // vanilla was slower on it (S 4k 1751 / 1733 against 1676 / 1684): those keep "bn80". $SOLDER_ATTN_HD256=bn80
  // forces the one-block-per-tile kernel there too.
  std::string hd256_mode;
  if (kHeadDim == 256 && !fp8 && !data && !with_bias && !staged_bits && !persistent && dual_first_.empty()) {
    const char* e = std::getenv("SOLDER_ATTN_HD256");
    hd256_mode = e ? e : "";
    if (hd256_mode != "bn64" && hd256_mode != "bn80" && hd256_mode != "dyn" && hd256_mode != "dyn80")
      hd256_mode = one_comparison && identity && plain_layout && seq_q <= 4096 ? "dyn80" : "bn80";
  }
  const bool hd256_bn80 = hd256_mode == "bn80" || hd256_mode == "dyn80";
  const bool hd256_dynamic = hd256_mode == "dyn" || hd256_mode == "dyn80";
  if (hd256_bn80) bn = 80;
  if (kHeadDim == 256 && (data || with_bias || staged_bits || persistent))
    refuse(std::string("head dim 256 with ") + (data ? "a data mask" : with_bias || staged_bits ? "a score bias" : "persistent blocks") +
           " (the device test covers head dim 256 on one block per work tile, without a bias or a data mask)");
  // A data mask keeps one Q buffer; $SOLDER_ATTN_QBUFFERS=2 takes two on its persistent kernel (A/B runs:
  // the producer loads the next work tile's Q, then its K and V, before this tile's last S is issued).
  if (const char* e = std::getenv("SOLDER_ATTN_QBUFFERS"); data && persistent && e && std::string(e) == "2") q_buffers = 2;
  // One block per work tile without a bias (vanilla / gqa at hd64 from S 4k, and at hd128): the stages
  // above. $SOLDER_ATTN_STAGES=N (2..8) overrides them where N stages fit (A/B runs).
  if (const char* forced = std::getenv("SOLDER_ATTN_STAGES"); forced && *forced && !persistent && !with_bias && !staged_bits) {
    const int n = std::atoi(forced);
    const int64_t q_bytes = static_cast<int64_t>(64 * consumers) * kHeadDim * 2, stage_bytes = 2LL * bn * kHeadDim * 2;
    if (n >= 2 && n <= 8 && q_bytes + n * stage_bytes + 8 * (2 + 4 * n) + 1024 <= 232448) stages = n;
  }
  // Work tiles claimed from a counter (Config's Dynamic) on the masked two-Q-buffer kernels at hd64
  // (causal S <= 1k, sliding_window, prefix_lm S 1k): their work tiles differ in key tiles (causal: 1 ... 8
  // per tile at S 1k), and the snake's fixed rounds leave the block with the most key tiles at 83 where
  // the mean is 69.8 (causal hd64 S 1k, 2048 tiles on 132 blocks), while the unmasked rows' tiles are all
  // alike. $SOLDER_ATTN_DYNAMIC=0|1 overrides it on every persistent kernel without a staged bias or a
  // data mask at hd128 (A/B runs; the device test has no Dynamic case with either). A persistent data
  // mask at hd64 takes it too: its work tiles differ in live key tiles by the documents' layout, which the
  // snake cannot know (document_mask, simulated on its ids: the slowest block 4 / 16 / 1-8 % over what a
  // counter leaves at S 1k / 4k / 16k; measured 126.1 / 177.2 / 345.8 µs against 128.5 / 188.4 / 377.3
  // with the snake, H100, 2026-11-27, the eleventh session's second merged call, where the device test's
  // Dynamic data-mask cases passed bit for bit; docmask4's first version hung on a register split).
  // Never with a stagger (Config's static_assert: the work ring deadlocks on tiles with no key tile).
  bool dynamic = persistent && stagger == 0 && !staged_bits &&
                 ((kHeadDim == 64 && ((two_q && consumers == 2 && cond && !data) || data)) || (causal_rows && consumers == 2));
  if (const char* forced = std::getenv("SOLDER_ATTN_DYNAMIC"); forced && *forced)
    dynamic = persistent && !staged_bits && !(data && kHeadDim != 64) && stagger == 0 && std::string(forced) == "1";
  // By default free consumers on the Dynamic two-Q-buffer kernel at hd64 of a mask that is one comparison
  // of row and column (causal's col <= row + c at S <= 1k): 122.3 / 122.4 -> 119.4 / 119.0 us (H100,
  // 2026-11-27, same call, two rounds), and on causal's persistent kernels at hd128 and long rows
  // (causal_rows above). The masks of two comparisons take them by the rule below, and vanilla / gqa
  // measured slower than with their stagger: they keep the turns.
  // A mask of two comparisons of row and column joined by && or || (sliding_window's col <= row && row -
  // col <= W, prefix_lm's col < P || col <= row) on the same kernel (sliding_window at every length,
  // prefix_lm at S <= 1k, and up to 32 key tiles per work tile: two_long above) takes free consumers and
  // the staged epilogue together (below): sliding_window S
  // 16k 99.2 / 99.1 -> 89.1 / 88.6 us, prefix_lm S 1k 122.5 / 121.6 -> 110.9 / 111.0 (H100, 2026-11-28,
  // same call, two rounds; sliding_window S 1k / 4k 90.8 -> 81.7, 96.1 -> 87.1, one round). Either alone
  // gains less: free consumers 92.8 / 114.6 us, the staged epilogue with the turns 103.5 / 119.4 (at S 16k
  // slower than the turns alone).
  const bool two_comparisons_free_staged = dynamic && !data && consumers == 2 && kHeadDim == 64 && two_comparisons;
  // A staged bias at hd64 (evoformer's pair bias and mask; head dim 32 padded to 64 too) takes free
  // consumers on its persistent two-Q-buffer kernel: B1 104.0 / 103.7 -> 101.2 / 101.5 us, B8 774.7 ->
  // 741.9 (H100, 2026-11-28, same call, B1 in two rounds). hd128's staged kernel keeps the turns (not
  // measured).
  const bool staged_free = staged_bits != 0 && !data && consumers == 2 && kHeadDim == 64 && stagger == 0 && persistent;
  if (const char* e = std::getenv("SOLDER_ATTN_FREE"); !(e && *e)) {
    free_consumers = dynamic && !data && consumers == 2 && (kHeadDim == 64 || causal_rows) && one_comparison;
    if (two_comparisons_free_staged || staged_free) free_consumers = true;
  }
  // The work tile's setup posted with its entry (Config's PostedWork: the producer locates each claimed
  // work tile once and posts head, rows and key-tile range with it; each consumer takes the next entry
  // before its epilogue's stores): causal's Dynamic kernels (one comparison of row and column, no data
  // mask). With a data mask the classifier warps post it with each work tile's list. $SOLDER_ATTN_POSTED=1
  // takes it on every Dynamic kernel, data masks included, =0 nowhere (A/B runs).
  bool posted_work = false;
  {
    const char* e = std::getenv("SOLDER_ATTN_POSTED");
    // causal hd64 S 1k 108.2 / 108.9 -> 106.3 / 107.6 us (H100, 2026-11-28, same call, two rounds)
    const bool causal_posted = true;
    // and on the kernel of two comparisons past 8 key tiles (two_long: prefix_lm S 4k 332.4 -> 326.6 us,
    // 332.0 / 332.8 -> 324.6 / 328.6, same call as above); not measured on the short ones (sliding_window,
    // prefix_lm S 1k), which keep it off
    const bool two_long_posted = true;
    if (e && *e) posted_work = dynamic && std::string(e) == "1";
    else posted_work = causal_posted && dynamic && !data && (one_comparison || (two_long_posted && two_long));
  }
  // $SOLDER_ATTN_HD128_Q2=st1|bn64|bn64f (A/B runs): the unmasked plain-score kernels at head dim 128 (vanilla,
  // gqa; one block per work tile by default) on persistent blocks, one per SM, with two Q buffers (the
  // producer loads the next work tile's Q during this one), as fp8 hd128 by default; each a device-tested
  // Config that fits 227 KB beside 2 x 32 KB of Q: "st1", 128-key tiles on 2 stages (2 x 64 KB) with
  // consumer 1 one turn behind consumer 0; "bn64", 64-key tiles on 5 stages (5 x 32 KB) with a stagger of 2
  // turns (vanilla hd64 S 1k's schedule); "bn64f", 64-key tiles on 5 stages, work tiles claimed from a
  // counter, free consumers and the posted work-tile setup (causal's schedule). Each with the staged
  // epilogue in the consumers' own Q rows (below; an epilogue that the staged one does not take is
  // refused). Unset or any other value: the default. None is taken by default: each measured slower than one
  // block per work tile at vanilla hd128 S 1k / 4k / 16k (st1 319.2 / 1161.8 / 4490.5 us, bn64 291.7 / 1067.0 /
  // 4073.9, bn64f 292.0 / 1078.0 / 4135.1, against 268.8 / 907.2 / 3500.4; H200, 2026-11-28, same call, two
  // rounds): the 64-key tiles cost 16-18 % in the steady state, and a stagger on 2 stages of 128 keys more.
  // $SOLDER_ATTN_O_STORE=tma: every staged epilogue stores each consumer warp's 16 rows by one TMA store per 64
  // columns (functors.cuh kTmaStore; sm90_attention.cuh, "Staged epilogue"), and vanilla / gqa hd64 S 1k's
  // staggered kernel takes the staged epilogue in its Q rows for it (as $SOLDER_ATTN_EPIQ=1), so that its
  // registers are free after the shared-memory writes. =regs or unset: main's stores. (A/B runs.)
  bool tma_store_o = false;
  if (const char* e = std::getenv("SOLDER_ATTN_O_STORE"); e && *e) {
    if (std::string(e) == "tma") tma_store_o = true;
    else if (std::string(e) != "regs") refuse("$SOLDER_ATTN_O_STORE=" + std::string(e) + " (tma or regs)");
  }
  std::string hd128_q2_mode;
  if (!fp8 && kHeadDim == 128 && D_ == 128 && identity && !cond && !data && !with_bias && !staged_bits && plain_layout && dual_first_.empty() &&
      (o->dtype == DType::bf16 || o->dtype == DType::f16)) {
    const char* e = std::getenv("SOLDER_ATTN_HD128_Q2");
    hd128_q2_mode = e ? e : "";
    if (hd128_q2_mode != "st1" && hd128_q2_mode != "bn64" && hd128_q2_mode != "bn64f") hd128_q2_mode.clear();
  }
  if (!hd128_q2_mode.empty()) {
    persistent = true;
    q_buffers = 2;
    consumers = 2;
    bn = hd128_q2_mode == "st1" ? 128 : 64;
    stages = hd128_q2_mode == "st1" ? 2 : 5;
    stagger = hd128_q2_mode == "st1" ? 1 : hd128_q2_mode == "bn64" ? 2 : 0;
    dynamic = hd128_q2_mode == "bn64f";
    free_consumers = dynamic;
    posted_work = dynamic;
  }
  if (hd256_dynamic) {
    // $SOLDER_ATTN_HD256=dyn|dyn80 (above): causal hd128's persistent schedule on one Q buffer
    persistent = true;
    q_buffers = 1;
    stages = 2;
    stagger = 0;
    dynamic = true;
    free_consumers = true;
    posted_work = true;
  }
  if (fp8) {
    // The fp8 Config: 128-key tiles (one 128-byte Vᵀ row), 4 stages of K, V and Vᵀ (16 KB each at hd128;
    // 8 KB each at hd64) on one Q buffer, or 3 stages on two at hd128 (persistent blocks, below). Two
    // consumers at hd128 (S 64, P 16 and O 64 registers per thread); three at hd64 (192 query rows: S 64, P
    // 16, O 32 fit in 152 registers without spills, each K/V tile and its transpose serve 1.5× the rows of
    // two consumers, and three warpgroups overlap their exponentials, which bound the fp8 kernel, with the
    // others' products), at every length: at S 1k too, where a third of the last 192-row tile is padding
    // (191.4 against 200.9 µs on two consumers, S 4k / 16k 575 / 2157 against 648 / 2406; H200, 2026-11-28,
    // same call; $SOLDER_ATTN_CONSUMERS=2|3 forces the count at hd64, A/B runs).
    if (staged_bits || with_bias || data) refuse("an fp8 kernel with a staged or global bias or a data mask (the fp8 path takes none yet)");
    if (!dual_first_.empty()) refuse("the dual mode in fp8 (not built)");
    if (kHeadDim > 128) refuse("fp8 at head dim " + std::to_string(D_) + " (the fp8 path is built for 64 and 128)");
    consumers = kHeadDim == 64 ? 3 : 2;
    if (const char* forced = std::getenv("SOLDER_ATTN_CONSUMERS"); forced && *forced && kHeadDim == 64) consumers = std::string(forced) == "2" ? 2 : 3;
    // Head dim 64 on three consumers runs persistent blocks, one per SM, with two Q buffers (the producer
    // loads the next work tile's Q during this one), the device-tested Config<e4m3, 64, 128, 4, 3, true,
    // 0, 2>: 160.5 / 532.2 / 2066.3 us against 191.3 / 575.6 / 2167.2 on one block per work tile at S 1k /
    // 4k / 16k (H200, 2026-11-28, two rounds, same call). $SOLDER_ATTN_FP8_PERSISTENT=0 (A/B runs): one
    // block per work tile.
    const char* fp8_persistent = std::getenv("SOLDER_ATTN_FP8_PERSISTENT");
    persistent = kHeadDim == 64 && consumers == 3 && !(fp8_persistent && std::string(fp8_persistent) == "0");
    q_buffers = persistent ? 2 : 1;
    stages = 4;
    // Head dim 128 runs persistent blocks too, on the device-tested <e4m3, 128, 128, 3, 2, true, 0, 2> (two Q
    // buffers, 3 stages: 4 do not fit beside them): 220.0 / 737.6 / 2923.8 us against 253.6 / 777.2 /
    // 2929.0 on one block per work tile at S 1k / 4k / 16k (H200, 2026-11-28, two rounds, same call; one Q
    // buffer on 4 stages, <e4m3, 128, 128, 4, 2, true>, took 228.4 / 778.5 / 3025.6).
    // $SOLDER_ATTN_FP8_PERSISTENT128=s4|tile (A/B runs): that one-Q-buffer Config, or one block per work tile.
    if (kHeadDim == 128) {
      const char* e = std::getenv("SOLDER_ATTN_FP8_PERSISTENT128");
      const std::string mode = e ? e : "";
      persistent = mode != "tile";
      q_buffers = persistent && mode != "s4" ? 2 : 1;
      stages = q_buffers == 2 ? 3 : 4;
    }
    stagger = 0;
    dynamic = false;
    free_consumers = false;
    posted_work = false;
  }
  const int bm = 64 * consumers;
  // The staged epilogue (Config's StagedEpilogue: O through a shared-memory buffer, 16-byte coalesced
  // stores) is decided with the epilogue below (it needs a plain store of 16-bit words, no preload), so
  // the Config is printed after it.
  bool staged_epilogue = false;
  bool column_mma = false;  // the functor's kAffineColumnMma (below, with the score)
  bool q_rows_epilogue = false;  // Config's QRowsEpilogue (below, with the staged epilogue)
  auto config_text = [&] {
    const bool past_dynamic = free_consumers || staged_epilogue || posted_work || q_rows_epilogue;  // (a template argument after Dynamic's)
    return std::string("solder::attention::Config<") + skeleton_dtype_name(in_dtype_) + ", " + std::to_string(kHeadDim) + ", " + std::to_string(bn) + ", " +
                               std::to_string(stages) + ", " + std::to_string(consumers) +
                               (staged_bits || q_buffers > 1 || dynamic || past_dynamic ? std::string(persistent ? ", true, " : ", false, ") + std::to_string(staged_bits) : std::string(persistent ? ", true" : "")) +
                               (q_buffers > 1 || stagger > 0 || dynamic || past_dynamic ? ", " + std::to_string(q_buffers) : std::string("")) +
                               (stagger > 0 || dynamic || past_dynamic ? ", " + std::to_string(stagger) : std::string("")) +
                               (dynamic || past_dynamic ? (dynamic ? ", true" : ", false") : "") +
                               (past_dynamic ? (free_consumers ? ", true" : ", false") : "") +
                               (staged_epilogue || posted_work || q_rows_epilogue ? (staged_epilogue ? ", true" : ", false") : "") +
                               (posted_work || q_rows_epilogue ? (posted_work ? ", true" : ", false") : "") + (q_rows_epilogue ? ", true" : "") + ">";
  };
  constexpr int64_t kSmCount = 132;  // H100 SXM: persistent blocks, one per SM
  int64_t heads = q->shape[rank - 3], batch = 1;
  for (size_t k2 = 0; k2 + 3 < rank; ++k2)
    if (!q_lead.fixed[k2]) batch *= q->shape[k2];
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
      if (q_lead.fixed[k2]) continue;  // not a dim of bh_
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
  out << "struct " << score << " {\n";
  if (staged_bits)
    out << "  // the staged bias's tensor maps (encoded by the launcher for each call), then every global's pointer\n"
           "  solder::attention::TensorMap bias_tile;\n  solder::attention::TensorMap bias_column;\n";
  out << members.str();
  // $SOLDER_ATTN_SOFTMAX_SCHEDULE=0|1|2: the row state's instruction order instead of the skeleton's default,
  // 0 (functors.cuh, kSoftmaxSchedule; A/B runs).
  if (const char* e = std::getenv("SOLDER_ATTN_SOFTMAX_SCHEDULE"); e && (std::string(e) == "0" || std::string(e) == "1" || std::string(e) == "2"))
    out << "  static constexpr int kSoftmaxSchedule = " << e << ";  // the row state's instruction order (SOLDER_ATTN_SOFTMAX_SCHEDULE)\n";
  // $SOLDER_ATTN_EXP2_EMU=K (0..16): K of every 16 softmax weights by exp2_poly on the FMA pipe instead of
  // ex2.approx on the MUFU (functors.cuh, kExp2Emulated; A/B runs). Unset or 0: no member (the skeleton's default, 0).
  if (const char* e = std::getenv("SOLDER_ATTN_EXP2_EMU"); e && *e) {
    char* end = nullptr;
    const long k = std::strtol(e, &end, 10);
    if (*end == '\0' && k > 0 && k <= 16)
      out << "  static constexpr int kExp2Emulated = " << k << ";  // weights per 16 on the FMA pipe (SOLDER_ATTN_EXP2_EMU)\n";
  }
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
    // On global rows and columns (g_rc), x / c as x * (1 / c).
    const Expr gs = rewrite_loads(globals_bounded(g_rc), [&](const LoadNode& l, const Expr& self) -> Expr { return l.tensor == S_ ? make_load("(&s_)", {}) : self; });
    out << "  // the logit: " << print_expr(g) << ", " << S_ << " = " << (has_scale_ ? print_expr(score_scale_) : std::string("1")) << " · the dot product\n";
    out << "  static constexpr float scale_log2 = " << cuda_float_literal(kLog2e) << ";\n";
    out << "  static constexpr bool kIdentity = false;\n";
    if (affine) {
      // The head's factors once per work tile; the skeleton adds u·(col − row) + w·row + c by one FFMA
      // per score from a per-tile row base, and a·dot by another (functors.cuh, "An affine score").
      const std::string a = print_expr(affine->a), u = print_expr(affine->u), w = print_expr(affine->w), c = print_expr(affine->c);
      // $SOLDER_ATTN_AFFINE=two: the whole bias per score (two FFMA; the previous form, A/B runs).
      const bool two_ffma = [] {
        const char* e = std::getenv("SOLDER_ATTN_AFFINE");
        return e && std::string(e) == "two";
      }();
      // A positive constant a (ALiBi's: the softmax scale): the functor declares kAffinePositiveA, and the
      // 3-consumer kernel divides the score by a (functors.cuh): s / a = dot + (u / a)·(column offset) by one
      // FFMA per score with the offset as its immediate, the row term divided by a added to the row
      // state's maximum, the state's scale times a; the two-FFMA form spent one FFMA per score more
      // (SASS: 585 -> 527 instructions per key tile). alibi S 4k 657.9 -> 638.2 us (-3.0 %), S 16k 2560.5
      // -> 2401.2 (-6.2 %), 0.830 / 0.830x FlexAttention max-autotune's 768.6 / 2894.6 (H100, 2026-11-28,
      // same call, two rounds).
      // With 2 consumers (alibi S <= 1k) the scaled form would replace the row shift's 32 column terms, which
      // ptxas re-forms by one FMUL per column and key tile at 168 registers (SASS: 677 -> 648 instructions per
      // key tile), but it measured within the rounds' spread: 187.7 against 190.2 us by medians, 186.1 against
      // 185.3 by the fastest replays (H200, 2026-11-29, same call, two rounds); with the column term by wgmma
      // on five stages (its tile fits there) 186.1 (fastest 182.8). So 2 consumers keep the column terms;
      // $SOLDER_ATTN_AFFINE=scaled takes the scaled form with the column term by wgmma there (where it fits:
      // SOLDER_ATTN_STAGES=5 at S 1k), =scaled-ffma the scaled FFMA form (A/B runs).
      // $SOLDER_ATTN_AFFINE=unscaled leaves the declaration out (A/B runs: the two-FFMA form with 3 consumers).
      const std::string affine_knob = std::getenv("SOLDER_ATTN_AFFINE") ? std::getenv("SOLDER_ATTN_AFFINE") : "";
      const bool positive_a = [&] {
        if (two_ffma || affine_knob == "unscaled") return false;
        if (consumers == 2 && affine_knob != "scaled" && affine_knob != "scaled-ffma") return false;  // (the column terms)
        if (!vars_used(affine->a).empty() || !tensors_used(affine->a).empty()) return false;
        const double v = evaluate_with(affine->a, {}, {}, program_.dims) * scale;
        return std::isfinite(v) && v > 0;
      }();
      // The scaled form's column term (u / a)·(key offset) by the tensor cores (kAffineColumnMma): one more
      // m64n128k16 wgmma per key tile on a constant 2176-byte tile of offsets, no FFMA per score (SASS of alibi
      // S 4k: 654 -> 594 instructions per key tile, vanilla's 578): alibi S 4k / 16k 651.9 / 2433.3 -> 598.7 /
      // 2307.7 us by medians (-8.2 / -5.2 %), 630.1 / 2374.6 -> 576.4 / 2155.6 by the fastest replays; vanilla
      // 558.4 / 2207.6 (H200, 2026-11-29, same call, two rounds). 16-bit operands, head dim 64, 128-key tiles;
      // the skeleton keeps the FFMA form where the tile does not fit (the short-row kernel's six stages).
      // $SOLDER_ATTN_AFFINE=ffma (=scaled-ffma with 2 consumers) leaves it out (A/B runs).
      column_mma = positive_a && !fp8 && bn == 128 && kHeadDim == 64 && affine_knob != "ffma" && affine_knob != "scaled-ffma";
      score_text += "; affine: a·dot + u·(col − row) + w·row + c with a = (" + a + ") · " + std::to_string(scale) + ", u = " + u + ", w = " + w + ", c = " + c +
                    " per head, once per work tile" +
                    (two_ffma || (consumers != 2 && !positive_a)
                         ? std::string(" (one FFMA per score for the bias, one for a·dot)")
                     : positive_a
                         ? std::string(" (a > 0, the score divided by a: dot + (u / a)·(column offset in the tile), ") +
                               (column_mma ? "the column term by one more m64n128k16 wgmma per key tile on a tile of offsets where it fits beside the K/V ring, else "
                                           : "") +
                               "one FFMA per score with the offset as its immediate; the row term (u·(col0 − row) + w·row + c) / a once per key tile and row, added to the row state's maximum, whose scale is a·log2(e))"
                         : std::string(" (one FFMA per score: a·dot + u·(column offset in the tile), the offsets' u-multiples in registers; the row term u·(col0 − row) + w·row + c once per key tile and row, added to the row state's maximum)"));
      out << "  // affine in the row and column: a = (" << a << ") * scale, u = " << u << " (per col - row), w = " << w << " (per row), c = " << c << "\n";
      out << "  static constexpr bool kAffine = true;\n";
      if (two_ffma) out << "  static constexpr bool kAffineTwoFfma = true;\n";
      if (positive_a) out << "  static constexpr bool kAffinePositiveA = true;  // a > 0 (a constant): the score divided by a\n";
      if (column_mma) out << "  static constexpr bool kAffineColumnMma = true;  // (u / a)·(key offset) by the tensor cores\n";
      out << "  __device__ void affine(int bh_, float* a_, float* u_, float* w_, float* c_) const {\n" << decode(false, false);
      out << "    *a_ = " << printer_.print_float(globals_bounded(affine->a)) << " * " << cuda_float_literal(scale) << ";\n";
      out << "    *u_ = " << printer_.print_float(globals_bounded(affine->u)) << ";\n";
      out << "    *w_ = " << printer_.print_float(globals_bounded(affine->w)) << ";\n";
      out << "    *c_ = " << printer_.print_float(globals_bounded(affine->c)) << ";\n  }\n";
    }
    if (linear && !affine) {
      // a·dot + bias(row, col): the skeleton loads a key tile's bias while its S = Q·Kᵀ runs
      const std::string a = print_expr(linear->a), bias = print_expr(linear->bias);
      score_text += "; linear: a·dot + bias with a = (" + a + ") · " + std::to_string(scale) + " per head, bias = " + bias +
                    " per score, loaded while the key tile's Q·Kᵀ runs (one FFMA per score)";
      out << "  // linear in the dot product: a = (" << a << ") * scale per head, bias = " << bias << " per score\n";
      out << "  static constexpr bool kBias = true;\n";
      out << "  __device__ float dot_factor(int bh_) const {\n" << decode(false, false);
      out << "    return " << printer_.print_float(globals_bounded(linear->a)) << " * " << cuda_float_literal(scale) << ";\n  }\n";
      out << "  __device__ float bias(int bh_, int row_, int col_) const {\n" << decode(true, true);
      out << "    return " << printer_.print_float(globals_bounded(linear->bias)) << ";\n  }\n";
      if (staged_bits) {
        // The flattened lead index of a staged input (its tensor map's batch or row) for head bh_.
        auto flat_lead = [&](const StagedInput& in, size_t lead_end) {
          Expr flat = make_int(0);
          for (size_t d = 0; d < lead_end; ++d)
            flat = make_binary(BinaryOp::add, make_binary(BinaryOp::mul, flat, make_int(in.g->shape[d])), in.index[d]);
          return printer_.print_int(flat);
        };
        arrays_["(&bt_)"] = CudaArray{"(&bt_)", {}, staged_tile.g ? staged_tile.g->dtype : DType::bf16, true, -1};
        arrays_["(&bc_)"] = CudaArray{"(&bc_)", {}, DType::boolean, true, -1};
        std::string staged_text;
        out << "  // the bias staged by the producer into each K stage (TMA, on K's mbarrier) and read from shared memory:\n";
        out << "  static constexpr int kStagedBias = " << staged_bits << ";\n";
        out << "  using BiasTile = " << (staged_tile.g ? std::string(cuda_element_type(staged_tile.g->dtype)) : std::string("unsigned short")) << ";\n";
        out << "  using BiasColumn = unsigned char;\n";
        out << "  __device__ int bias_tile_batch(int bh_) const {\n" << decode(false, false);
        out << "    return static_cast<int>(" << (staged_tile.g ? flat_lead(staged_tile, staged_tile.index.size() - 2) : std::string("0")) << ");\n  }\n";
        out << "  __device__ int bias_column_row(int bh_) const {\n" << decode(false, false);
        out << "    return static_cast<int>(" << (staged_column.g ? flat_lead(staged_column, staged_column.index.size() - 1) : std::string("0")) << ");\n  }\n";
        out << "  __device__ float staged_bias(int bh_, int row_, int col_, BiasTile bt_, BiasColumn bc_) const {\n" << decode(true, true);
        out << "    (void)bt_; (void)bc_;\n    return " << printer_.print_float(globals_bounded(staged_expr)) << ";\n  }\n";
        if (staged_column_term) {
          out << "  // the bias is the tile element plus a term of the column byte alone: that term once per key column\n";
          out << "  static constexpr bool kStagedSum = true;\n";
          out << "  __device__ float staged_column(int bh_, int col_, BiasColumn bc_) const {\n" << decode(false, true);
          out << "    (void)bc_;\n    return " << printer_.print_float(globals_bounded(*staged_column_term)) << ";\n  }\n";
        }
        if (staged_tile.g)
          staged_text += " the " + std::string(dtype_name(staged_tile.g->dtype)) + " tile " + staged_tile.g->name + "[.., row, col] of the work tile's " + std::to_string(bm) + " rows x " + std::to_string(bn) +
                         " keys (" + std::to_string(bm * bn * 2) + " bytes, 128-byte swizzle; tensor map batch = its lead index per head)";
        if (staged_column.g)
          staged_text += std::string(staged_tile.g ? " and" : "") + " the " + std::to_string(bn) + " bytes of " + staged_column.g->name + "[.., col] (one 128-byte box, map row = its lead index per head)";
        score_text += "; staged bias: the producer TMA-loads" + staged_text + " into each K stage on K's mbarrier; the consumers read them from shared memory in the accumulator layout right after issuing Q·Kᵀ (one 4-byte load per two scores" +
                      (staged_column.g ? std::string(", one 2-byte load per two keys") : std::string("")) + ") and form the bias " + print_expr(staged_expr) + " with bt_ = the tile element, bc_ = the column byte" +
                      (staged_column_term ? "; the column term " + print_expr(*staged_column_term) + " once per key column, added to the tile element by one FADD per score" : std::string(""));
      }
      if (!staged_refusal.empty()) score_text += std::string(staged_bits ? "; still" : "; bias") + " read per score from global memory: " + staged_refusal;
    }
    out << "  __device__ float operator()(int bh_, int row_, int col_, float dot_) const {\n" << decode(true, true);
    out << "    const float s_ = dot_ * " << cuda_float_literal(scale) << ";\n";
    out << "    return " << printer_.print_float(gs) << ";\n  }\n";
  }
  out << "};\n";
  std::string skip_text = "none (no mask: every key tile of the sequence)";
  // A data mask's boundary tiles whose keys all carry one id compare once per row (Mask::kOneIdTiles):
  // document_mask 128.6 / 173.0 / 330.0 µs against 128.5 / 188.4 / 377.3 per score at S 1k / 4k / 16k (H100,
  // 2026-11-27, the eleventh session's second merged call; every data-mask case of the device test runs
  // both forms, bit for bit). $SOLDER_ATTN_ONE_ID=0 compares per score (A/B runs).
  const bool one_id_tiles = [] {
    const char* e = std::getenv("SOLDER_ATTN_ONE_ID");
    return !(e && std::string(e) == "0");
  }();
  out << "struct " << mask << " {\n" << members.str();
  if (data) {
    const std::string lead_decode = decode(false, false);
    out << "  // mask " << print_expr(*cond) << "; on inputs, rows row_ and columns col_: " << print_expr(*mask_rc) << "\n";
    out << "  // a data mask: the id of each query row " << data->row_text << " and of each key " << data->col_text << ", compared by match(rid_, cid_);\n";
    out << "  // the skeleton classifies every key tile of a work tile from the ids' min/max over the tile's rows and the key tile's keys" << (persistent ? " (persistent blocks: the next work tile's while this one runs)" : "") << "\n";
    out << "  static constexpr bool kDataTiles = true;\n";
    out << "  static constexpr bool kEmptyRowNaN = true;  // a row that sees no key: the program's 0/0\n";
    out << "  static constexpr int kMaxKeyTiles = " << (seq_k + bn - 1) / bn << ";\n";
    if (one_id_tiles) out << "  static constexpr bool kOneIdTiles = true;  // boundary tiles of one key id: one compare per row\n";
    out << "  __device__ void key_tiles(int, int, int, int seq_k_, int bn_, int* begin_, int* end_) const { *begin_ = 0; *end_ = (seq_k_ + bn_ - 1) / bn_; }\n";
    out << "  __device__ bool partial(int, int, int, int, int) const { return true; }\n";
    out << "  __device__ int row_id(int bh_, int row_) const {\n" << lead_decode << "    (void)row_;\n    return static_cast<int>(" << printer_.print_int(globals_bounded(data->row_id)) << ");\n  }\n";
    out << "  __device__ int col_id(int bh_, int col_) const {\n" << lead_decode << "    (void)col_;\n    return static_cast<int>(" << printer_.print_int(globals_bounded(data->col_id)) << ");\n  }\n";
    out << "  __device__ bool match(int bh_, int rid_, int cid_) const {\n" << lead_decode << "    (void)rid_; (void)cid_;\n    return " << printer_.print_bool(globals_bounded(data->match)) << ";\n  }\n";
    out << "  // 0: no pair of ids in [rid_lo_, rid_hi_] x [cid_lo_, cid_hi_] matches (skipped); 1: every pair (no mask code); 2: a boundary tile\n";
    out << "  __device__ int tile_class(int bh_, int rid_lo_, int rid_hi_, int cid_lo_, int cid_hi_) const {\n" << lead_decode;
    out << "    (void)rid_lo_; (void)rid_hi_; (void)cid_lo_; (void)cid_hi_;\n";
    if (data->live) out << "    if (!(" << printer_.print_bool(*data->live) << ")) return 0;\n";
    if (data->may_fail) out << "    if (!(" << printer_.print_bool(*data->may_fail) << ")) return 1;\n";
    out << "    return 2;\n  }\n";
    out << "  __device__ bool visible(int bh_, int row_, int col_) const { return match(bh_, row_id(bh_, row_), col_id(bh_, col_)); }\n";
    if (col_groups.count > 0 && persistent) {
      out << "  // the keys' ids in groups of bh_ (" << data->col_text << " reads the same ids for every bh_ of a group): persistent blocks reduce the key tiles' id ranges once per group into a table\n";
      out << "  static constexpr int kColGroups = " << col_groups.count << ";\n";
      out << "  __device__ int col_groups() const { return kColGroups; }\n";
      out << "  __device__ int col_group(int bh_) const {\n" << lead_decode << "    return static_cast<int>(" << col_groups.group << ");\n  }\n";
      out << "  __device__ int group_bh(int group_) const { return static_cast<int>(" << col_groups.group_bh << "); }\n";
    }
    skip_text = data->live ? "a data mask: key tiles where " + print_expr(data->match) + " holds for no pair of ids (rid_ = " + data->row_text + " over the work tile's rows, cid_ = " + data->col_text +
                                 " over the tile's keys: interval bounds of their min and max) are skipped (no loads, no MMA); tiles where it holds for every pair run without mask code; boundary tiles compare the ids per score (the keys' ids loaded once per tile right after S is issued, shared by shuffles)" +
                                 std::string(one_id_tiles ? ", or once per row where all the tile's keys carry one id" : "") + "; the key tiles of every work tile classified in the kernel, " +
                                 std::string(persistent ? "per work tile: the first by every warp, each next one by the producer warpgroup's three idle warps while the consumers run the current one (double-buffered list), so the next tile's Q, K and V loads start during this tile's epilogue" +
                                                              (col_groups.count > 0 ? std::string(dynamic ? "; the key tiles' id ranges reduced per block and id group" : "; the key tiles' id ranges reduced once per block") + " into a table of " + std::to_string(col_groups.count) + " id groups x " + std::to_string((seq_k + bn - 1) / bn) + " key tiles" + (dynamic ? ", a group when the block's first work tile in it is classified" : "") + " (a work tile's classification reads only its rows' ids)" : std::string(""))
                                                        : "once per block by every warp before the loads") +
                                 ", a list in shared memory that the producer and the consumers walk in the same order; a row that sees no key gets NaN (the program's 0/0)"
                           : "none: the data mask " + print_expr(data->match) + " has no interval bound over its ids (every tile computed, the ids compared per score)";
  } else if (!cond) {
    out << "  // no mask: every key tile, no element masked (keys past the sequence: the skeleton's own mask)\n";
    out << "  __device__ void key_tiles(int, int, int, int seq_k_, int bn_, int* begin_, int* end_) const { *begin_ = 0; *end_ = (seq_k_ + bn_ - 1) / bn_; }\n";
    out << "  __device__ bool partial(int, int, int, int, int) const { return false; }\n";
    out << "  __device__ bool visible(int, int, int) const { return true; }\n";
  } else {
    // The interval decision over rows [row_lo_, row_hi_] and columns [col_lo_, col_hi_].
    const Expr c = mask_rc ? *mask_rc : on_rows_and_columns(*cond);
    std::optional<Expr> live, may_fail;
    if (mask_rc) {
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
    const bool solved = reach.lo || reach.hi;
    out << "  // the key tiles from the first to the last that may hold an unmasked score; those outside are skipped\n";
    if (solved) {
      out << "  // (first the columns the mask may reach from the block's rows, solved from its linear bounds:\n";
      out << "  // [" << (reach.lo ? reach.lo->text : std::string("0")) << ", " << (reach.hi ? reach.hi->text : std::string("seq_k - 1")) << "];\n";
      out << "  // then the interval test of the end tiles, which holds at once where the bounds are exact)\n";
      out << "  static __device__ long long max_ll_(long long a_, long long b_) { return a_ > b_ ? a_ : b_; }\n";
      out << "  static __device__ long long min_ll_(long long a_, long long b_) { return a_ < b_ ? a_ : b_; }\n";
    }
    out << "  __device__ void key_tiles(int bh_, int row0_, int rows_, int seq_k_, int bn_, int* begin_, int* end_) const {\n";
    out << "    const int tiles_ = (seq_k_ + bn_ - 1) / bn_;\n";
    if (solved) {
      out << "    const long long row_lo_ = row0_, row_hi_ = row0_ + rows_ - 1; (void)tiles_; (void)row_lo_; (void)row_hi_;\n";
      out << "    const long long lo_ = max_ll_(0LL, " << (reach.lo ? reach.lo->text : std::string("0LL")) << ");\n";
      out << "    const long long hi_ = min_ll_(static_cast<long long>(seq_k_) - 1, " << (reach.hi ? reach.hi->text : std::string("static_cast<long long>(seq_k_) - 1")) << ");\n";
      out << "    int b_ = hi_ < lo_ ? 0 : static_cast<int>(lo_ / bn_), e_ = hi_ < lo_ ? 0 : static_cast<int>(hi_ / bn_) + 1;\n";
      out << "    while (b_ < e_ && !live_(bh_, row0_, row0_ + rows_ - 1, static_cast<long long>(b_) * bn_, static_cast<long long>(b_) * bn_ + bn_ - 1)) ++b_;\n";
    } else {
      out << "    int b_ = 0, e_ = tiles_;\n";
      out << "    while (b_ < tiles_ && !live_(bh_, row0_, row0_ + rows_ - 1, static_cast<long long>(b_) * bn_, static_cast<long long>(b_) * bn_ + bn_ - 1)) ++b_;\n";
    }
    out << "    while (e_ > b_ && !live_(bh_, row0_, row0_ + rows_ - 1, static_cast<long long>(e_ - 1) * bn_, static_cast<long long>(e_) * bn_ - 1)) --e_;\n";
    out << "    *begin_ = b_; *end_ = e_;\n  }\n";
    out << "  // a boundary tile: the mask may be false somewhere on it (only these evaluate visible() per element)\n";
    out << "  __device__ bool partial(int bh_, int row0_, int rows_, int col0_, int bn_) const {\n" << lead_decode;
    out << "    const long long row_lo_ = row0_, row_hi_ = row0_ + rows_ - 1, col_lo_ = col0_, col_hi_ = col0_ + bn_ - 1;\n";
    out << "    (void)row_lo_; (void)row_hi_; (void)col_lo_; (void)col_hi_;\n";
    out << "    return " << (may_fail ? printer_.print_bool(*may_fail) : std::string("true")) << ";\n  }\n";
    const bool row_interval = live && solved && reach.exact;
    if (row_interval) {
      // The mask is exact (ColRange::exact): on one row it holds exactly on [lo, hi], so a
      // boundary tile compares each element's constant column offset with the row's two ends.
      out << "  // on one row the mask holds exactly on the columns [lo, hi] of the bounds above (row_lo_ = row_hi_ = the row):\n";
      out << "  // boundary tiles compare each score's column with the two ends instead of evaluating visible()\n";
      out << "  static constexpr bool kRowInterval = true;\n";
      out << "  __device__ void row_columns(int bh_, int row_, int* lo_, int* hi_) const {\n";
      out << "    const long long row_lo_ = row_, row_hi_ = row_; (void)row_lo_; (void)row_hi_;\n";
      out << "    const long long l_ = " << (reach.lo ? reach.lo->text : std::string("-1073741824LL")) << ", h_ = " << (reach.hi ? reach.hi->text : std::string("1073741824LL")) << ";\n";
      out << "    *lo_ = static_cast<int>(min_ll_(max_ll_(l_, -1073741824LL), 1073741824LL));\n";
      out << "    *hi_ = static_cast<int>(min_ll_(max_ll_(h_, -1073741824LL), 1073741824LL));\n  }\n";
    }
    out << "  __device__ bool visible(int bh_, int row_, int col_) const {\n" << (live ? lead_decode : decode(true, true));
    if (live) out << "    return " << printer_.print_bool(globals_bounded(c)) << ";  // on global rows and columns\n  }\n";
    else out << "    return " << printer_.print_bool(globals_bounded(*cond)) << ";\n  }\n";
    if (live && solved)
      skip_text = "key tiles outside the columns " + print_expr(c) + " may reach from the block's rows, [" + (reach.lo ? reach.lo->text : std::string("0")) + ", " +
                  (reach.hi ? reach.hi->text : std::string("seq_k - 1")) + "] (solved from its linear bounds, O(1) per work tile), are skipped, then the end tiles where interval bounds say it cannot hold; tiles where it may fail (" +
                  (may_fail ? std::string("interval bounds") : std::string("every tile")) +
                  (row_interval ? ") mask each row outside its visible columns [lo, hi] (two compares per score), the others nothing"
                                : ") evaluate the mask per element, the others nothing");
    else if (live)
      skip_text = "key tiles outside [first, last] tile where " + print_expr(c) + " may hold (interval bounds over the block's rows and the tile's columns, a scan from both ends) are skipped; tiles where it may fail (" +
                  (may_fail ? std::string("interval bounds") : std::string("every tile")) + ") evaluate the mask per element";
    else
      skip_text = "none: the mask " + print_expr(*cond) + " has no interval bound over rows and columns (every tile computed, the mask per element)";
  }
  out << "};\n";
  out << "struct " << epilogue << " {\n" << members.str();
  std::string epilogue_text = "o / Σp stored";
  {
    const std::string op = cuda_identifier(o->name);
    // The stored value on the skeleton's row_ and column col_ (the store's lead axes are 0, its row the
    // global row, its last axis the column).
    std::map<std::string, Expr> at;
    const auto& saxes = store->domain.axes;
    for (size_t k2 = 0; k2 + 2 < saxes.size(); ++k2) at[saxes[k2].var] = make_int(0);
    if (saxes.size() >= 2) {
      at[saxes[saxes.size() - 2].var] = make_var(row_var);
      at[saxes.back().var] = make_var("col_");
    }
    const Expr value = substitute_vars(stored_value, at);
    const bool plain = value.kind() == ExprKind::Load && value.as<LoadNode>()->tensor == "(&a_)";
    plain_epilogue_ = plain;
    out << "  // " << o->name << "[.., row, col], [.., row, col + 1] = " << (plain ? std::string("o / Σp") : print_expr(stored_value) + " with a_ = o / Σp") << ", rounded to "
        << dtype_name(o->dtype) << (D_ < kHeadDim ? " (head dim " + std::to_string(D_) + " padded to " + std::to_string(kHeadDim) + ": the padding columns are not stored)" : std::string("")) << "\n";
    // Inputs read at the stored element (evoformer's gate): when every such read is a 16-bit input
    // indexed [.., col_] along a last dim of even extent, the epilogue preloads them (functors.cuh,
    // "Epilogue preload"): one 4-byte word per input and pair of columns, loaded by the skeleton at the
    // start of each work tile, so that the loads are in flight together while the tile's MMAs run. A
    // plain epilogue reads them at the store, one dependent load after another (the stores may alias).
    // $SOLDER_ATTN_EPILOGUE_PRELOAD=0 keeps the loads at the store (A/B runs).
    std::vector<Expr> pre_loads;  // distinct loads, in order
    bool preload = !plain;
    if (const char* forced = std::getenv("SOLDER_ATTN_EPILOGUE_PRELOAD"); forced && std::string(forced) == "0") preload = false;
    if (preload) {
      rewrite_loads(value, [&](const LoadNode& l, const Expr& self) -> Expr {
        if (l.tensor == "(&a_)") return self;
        const GlobalTensor* gt = program_.find_global(l.tensor);
        if (!gt || gt->role != GlobalRole::input || (gt->dtype != DType::bf16 && gt->dtype != DType::f16) || gt->shape.empty() || gt->shape.back() % 2 != 0 ||
            l.index.size() != gt->shape.size() || !is_var(l.index.back(), "col_")) {
          preload = false;
          return self;
        }
        for (const Expr& i : l.index)
          if (!tensors_used(i).empty()) preload = false;  // a data-dependent index
        bool seen = false;
        for (const Expr& e : pre_loads) seen = seen || print_expr(e) == print_expr(self);
        if (!seen) pre_loads.push_back(self);
        return self;
      });
      if (pre_loads.empty()) preload = false;
    }
    if (preload) {
      out << "  // the inputs of the stored value, preloaded per pair of columns at the start of each work tile\n";
      out << "  static constexpr bool kPreload = true;\n";
      out << "  struct Preload {\n    unsigned int w[" << pre_loads.size() << "];\n  };\n";
      out << "  __device__ Preload preload(int bh_, int row_, int col_) const {\n" << decode(true, false);
      out << "    Preload p_{};\n";
      if (D_ < kHeadDim) out << "    if (col_ >= " << D_ << ") return p_;  // padding columns\n";
      std::map<std::string, std::string> element_of;  // the load's text -> its element in p_
      for (size_t n = 0; n < pre_loads.size(); ++n) {
        const LoadNode& l = *pre_loads[n].as<LoadNode>();
        const GlobalTensor* gt = program_.find_global(l.tensor);
        const CudaArray* a = printer_.array(l.tensor);
        std::vector<std::string> idx;
        std::string in_range;
        for (size_t d = 0; d < l.index.size(); ++d) {
          idx.push_back(printer_.print_int(l.index[d]));
          in_range += std::string(d ? " && " : "") + "(" + idx.back() + ") >= 0LL && (" + idx.back() + ") + " + (d + 1 == l.index.size() ? "1" : "0") + "LL < " +
                      std::to_string(gt->shape[d]) + "LL";
        }
        // (an even offset: the last dim's extent and col_ are even, so the word is 4-byte aligned)
        out << "    if (" << in_range << ")\n      p_.w[" << n << "] = __ldg(reinterpret_cast<const unsigned int*>(&" << a->pointer << "[" << printer_.offset(*a, idx) << "]));\n";
        const std::string word = "(&pw" + std::to_string(n) + "_)";
        arrays_[word] = CudaArray{"reinterpret_cast<const " + std::string(cuda_element_type(gt->dtype)) + "*>(&p_.w[" + std::to_string(n) + "])", {2}, gt->dtype, true, -1};
        element_of[print_expr(pre_loads[n])] = word;
      }
      out << "    return p_;\n  }\n";
      const Expr from_words = rewrite_loads(value, [&](const LoadNode&, const Expr& self) -> Expr {
        auto it = element_of.find(print_expr(self));
        return it == element_of.end() ? self : make_load(it->second, {make_var("half_")});
      });
      epilogue_text = print_expr(stored_value) + " with a_ = o / Σp; the inputs (" + std::to_string(pre_loads.size()) +
                      " 16-bit, one 4-byte word per pair of columns) preloaded at the start of each work tile";
      out << "  __device__ float value_(int bh_, int row_, int col_, float a_, const Preload& p_, int half_) const {\n" << decode(true, false);
      out << "    (void)col_; (void)p_; (void)half_;\n    return " << printer_.print_float(from_words) << ";\n  }\n";
      out << "  __device__ void operator()(int bh_, int row_, int col_, float o0_, float o1_, const Preload& p_) const {\n";
      if (D_ < kHeadDim) out << "    if (col_ >= " << D_ << ") return;  // padding columns\n";
      out << "    o0_ = value_(bh_, row_, col_, o0_, p_, 0);\n    o1_ = value_(bh_, row_, col_ + 1, o1_, p_, 1);\n";
    } else {
    if (!plain) {
      epilogue_text = print_expr(stored_value) + " with a_ = o / Σp, inputs read at the stored element";
      out << "  __device__ float value_(int bh_, int row_, int col_, float a_) const {\n" << decode(true, false);
      out << "    (void)col_;\n    return " << printer_.print_float(globals_bounded(value)) << ";\n  }\n";
    }
    out << "  __device__ void operator()(int bh_, int row_, int col_, float o0_, float o1_) const {\n";
    if (D_ < kHeadDim) out << "    if (col_ >= " << D_ << ") return;  // padding columns\n";
    if (!plain) out << "    o0_ = value_(bh_, row_, col_, o0_);\n    o1_ = value_(bh_, row_, col_ + 1, o1_);\n";
    }
    // The staged epilogue (Config's StagedEpilogue, functors.cuh "epilogue_staged"): each consumer writes
    // its 64 x head dim tile of stored words into shared memory and stores whole rows with 16-byte
    // coalesced stores (8 lanes per 128-byte line) instead of one 4-byte store per pair of columns
    // (16 per thread at hd64, each warp instruction 8 rows x 16 bytes). Where the stored value has no
    // preloaded input, the output is 16-bit and has the full head dim (no padding columns), and in the
    // single mode (the dual mode's combine() stores through its own path). By default where it was
    // measured: the persistent two-consumer kernels without a stagger, data mask or bias of a mask of one
    // comparison (causal) — at hd64 where its buffer fits beside the ring (causal S 1k's free kernel, 4
    // stages: 118.3 -> 109.5 us), at hd128 also at a stage fewer (causal S 1k, 3 -> 2 stages: 199.1 ->
    // 184.4 us; H100, 2026-11-27, same call, two rounds); with the free consumers of a mask of two
    // comparisons (sliding_window, prefix_lm S 1k: above). Not on vanilla / gqa's staggered 6-stage kernels
    // (at 5 stages with it 1.00x / 1.03x of their time) nor on three consumers, one block per work tile,
    // with a mask or an affine score (alibi S 4k / 16k 649.4 -> 663.1, 2455.4 -> 2546.5 us; diff_attn S 16k
    // 2282.8 -> 2346.5; prefix_lm S 4k 369.0 -> 362.5; H100, 2026-11-28, same call, one round).
    // With one block per work tile (not persistent) the buffer is each consumer's own Q rows (Config's
    // EpilogueInQ): it costs no stage there, and it is taken by default on those kernels with the plain
    // score and no mask (wide_by_default: vanilla / gqa at hd128, and at hd64 from S 4k): vanilla hd128
    // S 1k / 4k / 16k 287.2 -> 251.8 / 919.0 -> 879.1 / 3433.7 -> 3353.5 us, gqa hd64 S 4k 545.6 -> 535.8
    // (H100, 2026-11-28, same call, two rounds; vanilla hd64 S 4k / 16k and gqa S 16k, the same Config as
    // gqa S 4k, and gqa hd128 not measured). On 3 stages at hd128 (the stage the dedicated buffer would
    // cost) it measured slower (262.1 / 901.4 / 3374.5 us), and hd128 S 1k on persistent blocks with
    // two Q buffers and the dedicated buffer too (280.9; 275.1 with free consumers). And on a data mask's
    // Dynamic hd64 kernel, where it fits beside the 4-stage ring (by_data_mask: document_mask S 1k / 4k /
    // 16k 112.4 -> 102.7, 157.4 -> 150.6, 318.1 -> 318.1 us; H100, 2026-11-28, same call, one round).
    // $SOLDER_ATTN_EPI=1 takes it wherever it is allowed (a K/V stage fewer where its buffer does not
    // fit), =0 nowhere (A/B runs).
    // In the Q rows on persistent blocks (Config's QRowsEpilogue: each consumer's slice is its own rows of
    // the work tile's Q buffer, released after the epilogue instead of after the last S, so the buffer
    // costs no K/V stage): where the Q protocol stays free of deadlock (a stagger of at most 2 turns with
    // two Q buffers, none with one; tests/gpu/attention_skeleton/stagger_model.py) and there is no data
    // mask. Not by default: on vanilla / gqa hd64 S 1k's staggered 6-stage kernel it measured 172.4 / 166.0
    // us against the per-pair stores' 167.8 / 165.5 (slower on vanilla in all 6 rounds, gqa 3 of 6), the
    // dedicated buffer on 5 stages 170.9 / 167.5 (H100, 2026-11-28, same call, six interleaved rounds,
    // cuDNN SDPA 165.9 / 161.3): the stagger already hides the per-pair epilogue. $SOLDER_ATTN_EPIQ=1
    // takes it there (with the staged epilogue, at the ring's depth without a buffer), =0 nowhere (A/B
    // runs). $SOLDER_ATTN_O_STORE=tma (tma_store_o) takes it there too, and stores every staged
    // epilogue's rows by TMA.
    {
      const char* e = std::getenv("SOLDER_ATTN_EPI");
      const bool forced = e && *e;
      const char* eq = std::getenv("SOLDER_ATTN_EPIQ");
      const bool q_rows_allowed = persistent && !data && (q_buffers == 2 ? stagger <= 2 : stagger == 0);
      const bool q_rows = q_rows_allowed && ((eq && std::string(eq) == "1") || tma_store_o) && !(forced && std::string(e) == "0");
      const bool everywhere = (forced && std::string(e) == "1") || q_rows;
      // causal's 3-consumer kernel (hd64 past 32 key tiles per work tile: S 16k 1217.6 -> 1176.8 us, one
      // round, H100, 2026-11-28, with the dedicated buffer; S 4k 371.1 -> 363.9, two rounds, before its rows
      // went persistent)
      const bool causal_three = causal_rows && consumers == 3 && !persistent;
      const bool by_default = !forced && ((persistent && consumers == 2 && stagger == 0 && !data && !staged_bits && !with_bias && one_comparison) || causal_three);
      const bool by_data_mask = !forced && persistent && consumers == 2 && stagger == 0 && !staged_bits && !with_bias && data && kHeadDim == 64 && dynamic;
      // (a mask of two comparisons: with free consumers only, the rule above)
      const bool by_two_comparisons = !forced && two_comparisons_free_staged && free_consumers && persistent && stagger == 0;
      const bool wide_by_default = !forced && !persistent && identity && !cond && !data && !staged_bits && !with_bias && plain_layout;
      // $SOLDER_ATTN_HD128_Q2's persistent Configs: always in the Q rows (their stagger of at most 2 turns on two
      // Q buffers allows it), whatever $SOLDER_ATTN_EPI says, so that each is the device-tested Config
      const bool hd128_q2_rows = !hd128_q2_mode.empty() && q_rows_allowed;
      // (3 consumers at 160 registers: only with the identity score; softcap's staged kernel spills 4 bytes)
      const bool allowed = !fp8 && !preload && (o->dtype == DType::bf16 || o->dtype == DType::f16) && D_ == kHeadDim && kHeadDim <= 128 && dual_first_.empty() &&
                           (consumers == 2 || identity);
      if ((everywhere || by_default || by_data_mask || by_two_comparisons || wide_by_default || hd128_q2_rows) && allowed) {
        const int64_t epi_bytes = persistent && !q_rows && !hd128_q2_rows ? static_cast<int64_t>(bm) * kHeadDim * 2 : 0;
        auto fits = [&](int n) {
          return static_cast<int64_t>(q_buffers) * bm * kHeadDim * 2 + 2LL * n * bn * kHeadDim * 2 +
                     static_cast<int64_t>(n) * ((staged_bits & 1 ? bm * bn * 2 : 0) + (staged_bits & 2 ? 128 : 0)) + epi_bytes + 8 * (2 * q_buffers + 4 * n) + 1024 <=
                 232448;
        };
        int n = stages;
        if (everywhere || kHeadDim == 128)
          while (n > 2 && !fits(n)) --n;
        if (fits(n)) {
          staged_epilogue = true;
          q_rows_epilogue = q_rows || hd128_q2_rows;
          stages = n;
          stagger = std::min(stagger, stages - 1);
        }
      }
      if (!hd128_q2_mode.empty() && !q_rows_epilogue) {
        refuse("$SOLDER_ATTN_HD128_Q2=" + hd128_q2_mode + " with an epilogue that the staged epilogue does not take (preloaded inputs): its Configs are device-tested with it");
      }
    }
    std::ostringstream store_pair;  // o0_, o1_ stored at (bh_, row_, col_), col_ + 1
    store_pair << "    const long long at_ = (static_cast<long long>(bh_) * " << seq_q << "LL + row_) * " << D_ << "LL + col_;\n";
    if (o->dtype == DType::bf16) store_pair << "    *reinterpret_cast<__nv_bfloat162*>(&" << op << "[at_]) = __floats2bfloat162_rn(o0_, o1_);\n";
    else if (o->dtype == DType::f16) store_pair << "    *reinterpret_cast<__half2*>(&" << op << "[at_]) = __floats2half2_rn(o0_, o1_);\n";
    else store_pair << "    solder::store(&" << op << "[at_], o0_);\n    solder::store(&" << op << "[at_ + 1], o1_);\n";
    out << store_pair.str() << "  }\n";
    // The end of a staged store function (the staged epilogue's staged_pack, the dual mode's staged_combine):
    // the pair o0_, o1_ rounded to the output's 16-bit type as one 4-byte word; then staged_row, the address
    // of a row's first element for the 16-byte row stores.
    auto write_staged_word_and_row = [&] {
      if (o->dtype == DType::bf16) out << "    const __nv_bfloat162 w_ = __floats2bfloat162_rn(o0_, o1_);\n";
      else out << "    const __half2 w_ = __floats2half2_rn(o0_, o1_);\n";
      out << "    return *reinterpret_cast<const unsigned int*>(&w_);\n  }\n";
      out << "  __device__ void* staged_row(int bh_, int row_) const {\n";
      out << "    return &" << op << "[(static_cast<long long>(bh_) * " << seq_q << "LL + row_) * " << D_ << "LL];\n  }\n";
    };
    if (staged_epilogue) {
      out << "  // the staged epilogue: the stored pair as one 4-byte word, and the address of the row's first element\n";
      out << "  static constexpr bool kStaged = true;\n";
      out << "  __device__ unsigned int staged_pack(int bh_, int row_, int col_, float o0_, float o1_) const {\n";
      if (!plain) out << "    o0_ = value_(bh_, row_, col_, o0_);\n    o1_ = value_(bh_, row_, col_ + 1, o1_);\n";
      else out << "    (void)bh_; (void)row_; (void)col_;\n";
      write_staged_word_and_row();
      if (tma_store_o) {
        // functors.cuh kTmaStore: each consumer warp's 16 staged rows by one TMA store per 64 columns,
        // through the output's map (launch.out), placed after every global's pointer at the next multiple of
        // 64 bytes (runtime/attention_args.h, pack_tma_store_epilogue; checked below the struct)
        out << "  // the staged rows stored by TMA through the output's map (encoded by the launcher for each call)\n";
        out << "  static constexpr bool kTmaStore = true;\n  solder::attention::TensorMap out_map;\n";
      }
      epilogue_text += q_rows_epilogue ? "; through shared memory (each consumer's own Q rows, Q released after the epilogue)"
                                       : "; through shared memory";
      epilogue_text += tma_store_o ? ", one TMA store of 16 rows x 64 columns per consumer warp" : ", 16-byte row stores";
    }
    if (!dual_first_.empty() && !preload) {
      // The dual mode (sm90_attention_dual.cuh): the stored value with every read of `dual_first_` at the
      // stored element replaced by x_, the first half's o / Σp in f32 (what the kernel that stores
      // dual_first_ computes at the same element). Written only when each read is at that element and
      // dual_first_ has the output's shape; otherwise the kernel has no combine() and the dual mode refuses.
      const GlobalTensor* first = program_.find_global(dual_first_);
      std::vector<std::string> stored_at;
      for (auto& i : store->dst.index) stored_at.push_back(print_expr(substitute_vars(i, at)));
      bool at_element = first && first->shape == o->shape && first->dtype == DType::f32;
      int reads = 0;
      const Expr with_x = rewrite_loads(value, [&](const LoadNode& l, const Expr& self) -> Expr {
        if (l.tensor != dual_first_) return self;
        ++reads;
        bool same = l.index.size() == stored_at.size();
        for (size_t k2 = 0; same && k2 < l.index.size(); ++k2) same = print_expr(l.index[k2]) == stored_at[k2];
        at_element &= same;
        return make_load("(&x_)", {});
      });
      if (at_element && reads > 0) {
        arrays_["(&x_)"] = CudaArray{"(&x_)", {}, DType::f32, false};
        out << "  // the dual mode: " << dual_first_ << " at the stored element is x_, the first half's o / Σp in f32; a_ the second half's\n";
        out << "  __device__ float combine_value_(int bh_, int row_, int col_, float x_, float a_) const {\n" << decode(true, false);
        out << "    (void)col_;\n    return " << printer_.print_float(globals_bounded(with_x)) << ";\n  }\n";
        out << "  __device__ void combine(int bh_, int row_, int col_, float x0_, float x1_, float o0_, float o1_) const {\n";
        if (D_ < kHeadDim) out << "    if (col_ >= " << D_ << ") return;  // padding columns\n";
        out << "    o0_ = combine_value_(bh_, row_, col_, x0_, o0_);\n    o1_ = combine_value_(bh_, row_, col_ + 1, x1_, o1_);\n";
        out << store_pair.str() << "  }\n";
        if ((o->dtype == DType::bf16 || o->dtype == DType::f16) && D_ == kHeadDim && !staged_epilogue) {
          // The dual mode's staged combine (functors.cuh, kStagedCombine): the word combine() stores, and the
          // row's address for the 16-byte row stores.
          out << "  // the dual mode's staged combine: the stored pair as one 4-byte word, and the address of the row's first element\n";
          out << "  static constexpr bool kStagedCombine = true;\n";
          out << "  __device__ unsigned int staged_combine(int bh_, int row_, int col_, float x0_, float x1_, float o0_, float o1_) const {\n";
          out << "    o0_ = combine_value_(bh_, row_, col_, x0_, o0_);\n    o1_ = combine_value_(bh_, row_, col_ + 1, x1_, o1_);\n";
          write_staged_word_and_row();
          dual_staged_combine_ = true;
        }
        dual_combine_ = true;
      }
    }
    out << "};\n";
    if (staged_epilogue && tma_store_o)
      out << "static_assert(sizeof(" << epilogue << ") == " << runtime::epilogue_out_map_offset(program_.globals.size()) + 128
          << ", \"the launcher packs out_map after the pointers, as the last member\");\n";
  }
  const std::string config = config_text();
  out << "using " << name << "_config_ = " << config << ";\n";
  // (kTmaStore: the kernel whose epilogue is a __grid_constant__ parameter, so that TMA reads out_map there)
  out << (staged_epilogue && tma_store_o ? "SOLDER_ATTENTION_KERNEL_TMA_STORE(" : "SOLDER_ATTENTION_KERNEL(") << name << ", " << name << "_config_, " << score << ", " << mask << ", " << epilogue << ")\n";

  // Operands read at a fixed lead index (differential attention's halves q[b, c, h]).
  std::string lead_text;
  for (auto [what, l, h] : {std::tuple{"Q", &q_lead, heads}, std::tuple{"K", &kv_leads.at("K"), heads_kv}, std::tuple{"V", &kv_leads.at("V"), heads_kv}})
    if (l->block > 1)
      lead_text += std::string(what) + " at fixed lead index " + std::to_string(l->at) + " of " + std::to_string(l->block) + " (batch coordinate b·" + std::to_string(l->block * h) + " + " +
                   std::to_string(l->at * h) + " + h), ";
  AttentionSkeletonKernel result;
  std::ostringstream head;
  const std::string summary = config + " (" + std::to_string(bm) + " query rows x " + std::to_string(bn) + " keys per tile, " + std::to_string(stages) + "-stage K/V ring, " +
                              std::to_string(consumers) +
                              (free_consumers ? " free consumer warpgroups (no turns: each issues as soon as its operands are there) + 1 TMA producer warp), "
                                              : " consumer warpgroups in ping-pong + 1 TMA producer warp), ") +
                              (fp8 ? std::string("fp8: S and P·V on e4m3 wgmma (k 32), P rounded to e4m3 in registers, each V tile transposed to Vᵀ [d][key] "
                                                 "in shared memory by 3 producer warps (fp8 wgmma reads B K-major only), ") +
                                         (kHeadDim == 64 ? "Q, K and V in 64-byte rows (the 64-byte swizzle), " : "")
                                   : std::string("")) +
                              std::to_string(tiles) + " work tiles" +
                              (persistent ? " on " + std::to_string(std::min<int64_t>(tiles, kSmCount)) + " persistent blocks (longest first, " +
                                                (dynamic ? std::string("each block's first tile, then claimed from a counter as blocks free up") : std::string("snake order")) +
                                                (posted_work ? std::string(data ? "; each tile's head, rows and key-tile range posted by the classifier warps with its list"
                                                                   : "; each tile's head, rows and key-tile range posted by the producer with its entry")
                                                            : std::string("")) +
                                                (q_buffers > 1 ? std::string("; 2 Q buffers: the next work tile's Q, K and V load while this one runs") : std::string("")) +
                                                (stagger > 0 ? "; consumer 1 staggered " + std::to_string(stagger) + " turns behind consumer 0, so one's work-tile boundary overlaps the other's products" : std::string("")) + ")"
                                          : std::string("")) + ", " +
                              (heads_kv != heads ? "GQA " + std::to_string(heads) + " heads on " + std::to_string(heads_kv) + " KV heads, " : std::string("")) +
                              (D_ < kHeadDim ? "head dim " + std::to_string(D_) + " zero-padded to " + std::to_string(kHeadDim) + " by TMA, " : std::string("")) +
                              (kHeadDim == 256 ? "head dim 256: " + std::to_string(bn) + "-key tiles on " + std::to_string(stages) + " stages (Q " + std::to_string(bm * 256 * 2 / 1024) + " KB + " +
                                                     std::to_string(stages) + " x " + std::to_string(2 * bn * 256 * 2 / 1024) + " KB of K and V in shared memory) and " + std::to_string(consumers) +
                                                     " consumers (a 64 x 256 f32 O accumulator is 128 registers per consumer thread), the device-tested hd256 Config, " : std::string("")) +
                              lead_text + "score: " + score_text + "; skipped tiles: " + skip_text + "; epilogue: " + epilogue_text +
                              (data ? std::string(persistent ? (dynamic ? "; block order: persistent blocks take the work tiles in the list's order (query tiles of a head last to first), each block its first, then the next one claimed from a counter as a block frees up (a data mask's live tiles are not known at compile time); the classifier warps classify each tile the producer claims"
                                                                        : "; block order: persistent blocks deal out the work tiles longest first in a snake (query tiles of a head last to first; a data mask's live tiles are not known at compile time)")
                                                             : "; block order: one block per work tile, the query tiles of a head last to first (the live tiles of a data mask are not known at compile time: the hardware's dispatch balances them; persistent blocks only up to " +
                                                                   std::to_string(kDataPersistentMaxKeyTiles) + " key tiles per work tile, measured slower at 128)")
                                    : std::string("; block order: the query tiles of a head last to first (the longest causal rows first)")) +
                              (staged_bits && persistent
                                   ? "; schedule: heads in groups of at most one round's (" + std::to_string(std::max<int64_t>(1, std::min<int64_t>(tiles, kSmCount) / ((seq_q + bm - 1) / bm))) +
                                         " heads x " + std::to_string((seq_q + bm - 1) / bm) +
                                         " query tiles), so a head's query tiles run in one round on neighbouring blocks and its K, V and bias tiles are read from HBM once; the producer runs up to " +
                                         std::to_string(stages) + " key tiles ahead"
                                   : std::string(""));
  head << "#include <solder/attention/sm90_attention.cuh>\n";
  head << "// kernel " << kernel_.name << ": computes";
  for (auto& d : kernel_.definitions) head << " " << d;
  head << "\n// on the sm_90a attention skeleton: " << summary << "\n";
  head << "// the Kernel IR's online softmax (running max " << acc_m << ", sum " << acc_z << ", accumulator " << acc_o << ") is the skeleton's row state; Q = " << q->name
       << ", K = " << k->name << ", V = " << v->name << ", O = " << o->name << "\n";
  result.source = head.str() + out.str();
  result.summary = summary;
  result.output = o->name;
  result.combine = dual_combine_;
  result.staged_combine = dual_staged_combine_;
  result.plain_epilogue = plain_epilogue_;
  result.head_dim = static_cast<int>(kHeadDim);
  result.bn = static_cast<int>(bn);
  result.f16 = in_dtype_ == DType::f16;
  result.tiles_and_skipping = std::to_string(tiles) + " work tiles of " + std::to_string(bm) + " query rows x " + std::to_string(bn) + " keys" +
                              (persistent ? " on " + std::to_string(std::min<int64_t>(tiles, kSmCount)) + " persistent blocks" : std::string("")) +
                              (lead_text.empty() ? std::string("") : "; " + lead_text.substr(0, lead_text.size() - 2)) + "; skipped tiles: " + skip_text;
  result.info.name = name;
  result.info.threads = 128 * (consumers + 1);
  result.info.cluster = 1;
  result.info.blocks = persistent ? std::min<int64_t>(tiles, kSmCount) : tiles;
  const int64_t element_bytes = fp8 ? 1 : 2;  // (Config::SmemBytes; fp8: the Vᵀ ring and its mbarriers)
  result.info.shared_bytes = static_cast<int64_t>(q_buffers) * bm * kHeadDim * element_bytes + 2LL * stages * bn * kHeadDim * element_bytes +
                             8 * (2 * q_buffers + (fp8 ? 5 : 4) * stages) + 1024 + (fp8 ? static_cast<int64_t>(stages) * bn * kHeadDim : 0) +
                             (staged_epilogue && persistent && !q_rows_epilogue ? static_cast<int64_t>(bm) * kHeadDim * 2 : 0) +  // (Config::EpilogueInQ: none)
                             static_cast<int64_t>(stages) * ((staged_bits & 1 ? bm * bn * 2 : 0) + (staged_bits & 2 ? 128 : 0));
  // kAffineColumnMma's tile of key offsets (static shared memory), where the skeleton takes it
  constexpr int64_t kColumnOffsetBytes = 2176;
  if (column_mma && !data && result.info.shared_bytes + kColumnOffsetBytes <= 232448) result.info.shared_bytes += kColumnOffsetBytes;
  // A data mask's key-tile list is static shared memory in the skeleton (3 bytes per key tile and a count;
  // 5, each list's tile entry and two mbarrier pairs with persistent blocks: a double-buffered list; with
  // kOneIdTiles the one-id tiles' ids 8 more, 12 with persistent blocks), on top of the launch's dynamic
  // shared memory: both within sm_90's 227 KB per block. The id table (kColGroups): 8 bytes per group and
  // key tile.
  if (data && (seq_k + bn - 1) / bn > 16383) refuse("a data mask's key-tile list holds at most 16383 key tiles");
  const int64_t list_bytes = ((persistent ? 5 : 3) + (one_id_tiles ? (persistent ? 12 : 8) : 0)) * ((seq_k + bn - 1) / bn) + (persistent ? 56 : 16) + (posted_work ? 40 : 0) +
                             (persistent && col_groups.count > 0 ? 8 * col_groups.count * ((seq_k + bn - 1) / bn) : 0);
  if (data && result.info.shared_bytes + list_bytes > 232448)
    refuse("the data mask's key-tile list (" + std::to_string(list_bytes) + " bytes of shared memory) does not fit beside the K/V ring");
  AttentionSkeletonLaunch launch;
  auto global_index = [&](const std::string& n) {
    for (size_t i = 0; i < program_.globals.size(); ++i)
      if (program_.globals[i].name == n) return i;
    return size_t{0};
  };
  auto operand = [&](const GlobalTensor& t, int64_t rows, int64_t lead, int tile_rows) {
    GemmSkeletonLaunch::Operand r;
    r.global = global_index(t.name);
    r.dtype = in_dtype_ == DType::f16 ? 1 : fp8 ? 2 : 0;  // (runtime::GemmDtype)
    r.k_major = true;
    r.rows = rows;
    r.k = D_;
    r.ld = D_;
    r.batch = lead;
    r.batch_stride = rows * D_;
    r.tile_rows = tile_rows;
    r.tile_k = fp8 ? (kHeadDim == 64 ? 64 : 128) : 64;  // one swizzle row: 128 bytes (64 for fp8 at hd64: the 64-byte swizzle)
    return r;
  };
  // (an operand with a fixed lead block: its map covers all its heads, the shape says where ours are)
  launch.q = operand(*q, seq_q, batch * heads * q_lead.block, 64);
  launch.k = operand(*k, seq_k, batch * heads_kv * kv_leads.at("K").block, bn);
  launch.v = operand(*v, seq_k, batch * heads_kv * kv_leads.at("V").block, bn);
  if (q_lead.block > 1) launch.q_heads = static_cast<int>(q_lead.block * heads), launch.q_head0 = static_cast<int>(q_lead.at * heads);
  if (kv_leads.at("K").block > 1) launch.k_heads = static_cast<int>(kv_leads.at("K").block * heads_kv), launch.k_head0 = static_cast<int>(kv_leads.at("K").at * heads_kv);
  if (kv_leads.at("V").block > 1) launch.v_heads = static_cast<int>(kv_leads.at("V").block * heads_kv), launch.v_head0 = static_cast<int>(kv_leads.at("V").at * heads_kv);
  if (staged_tile.g) {
    // [lead..][rows][keys] as a K-major 16-bit operand: batch = the lead dims flattened, box 64 x 64
    const auto& sh = staged_tile.g->shape;
    int64_t lead = 1;
    for (size_t d = 0; d + 2 < sh.size(); ++d) lead *= sh[d];
    GemmSkeletonLaunch::Operand t;
    t.global = global_index(staged_tile.g->name);
    t.dtype = staged_tile.g->dtype == DType::f16 ? 1 : 0;
    t.rows = sh[sh.size() - 2];
    t.k = t.ld = sh.back();
    t.batch = lead;
    t.batch_stride = t.rows * t.k;
    t.tile_rows = 64;
    t.tile_k = 64;
    launch.bias_tile = t;
  }
  if (staged_epilogue && tma_store_o) {
    // o as [batch · heads][seq_q][D] (the per-pair store's index), box {64, 16, 1}: one consumer warp's rows
    GemmSkeletonLaunch::Operand t;
    t.global = global_index(o->name);
    t.dtype = o->dtype == DType::f16 ? 1 : 0;
    t.rows = seq_q;
    t.k = t.ld = D_;
    t.batch = batch * heads;
    t.batch_stride = seq_q * D_;
    t.tile_rows = 16;
    t.tile_k = 64;
    launch.out = t;
  }
  if (staged_column.g) {
    // [lead..][keys] bytes: rows = the lead dims flattened, box 128 x 1, no swizzle
    const auto& sh = staged_column.g->shape;
    int64_t lead = 1;
    for (size_t d = 0; d + 1 < sh.size(); ++d) lead *= sh[d];
    GemmSkeletonLaunch::Operand c;
    c.global = global_index(staged_column.g->name);
    c.dtype = 2;  // one byte (the map's element type is UINT8)
    c.rows = lead;
    c.k = c.ld = sh.back();
    c.batch = 1;
    c.batch_stride = 0;
    c.tile_rows = 1;
    c.tile_k = 128;
    c.swizzle = false;
    launch.bias_column = c;
  }
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

std::pair<double, double> attention_mask_reach(const Expr& mask, const std::map<std::string, int64_t>& dims, int64_t row_lo, int64_t row_hi, bool* exact) {
  const mma_stream::ColRange r = mma_stream::column_range(mask, dims);
  if (exact) *exact = r.exact;
  const double lo = static_cast<double>(row_lo), hi = static_cast<double>(row_hi);
  return {r.lo ? r.lo->at(lo, hi) : -std::numeric_limits<double>::infinity(), r.hi ? r.hi->at(lo, hi) : std::numeric_limits<double>::infinity()};
}

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
