#include "contract/gemm_skeleton_fit.h"

#include <algorithm>
#include <map>

#include <cstdlib>

#include "contract/canonicalize.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {
namespace {

bool sixteen_bit(DType t) { return t == DType::bf16 || t == DType::f16; }
bool fp8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }

const GlobalTensor* find(const std::vector<GlobalTensor>& globals, const std::string& name) {
  for (auto& g : globals)
    if (g.name == name) return &g;
  return nullptr;
}

bool is_var(const Expr& e, const std::string& name) {
  auto v = e.as<VarNode>();
  return v && v->name == name;
}

std::optional<int64_t> integer(const Expr& e) {
  auto c = e.as<ConstNode>();
  if (!c || !c->is_integer) return std::nullopt;
  return static_cast<int64_t>(c->value);
}

// The reduced axes in the order A's load names them (one K, flattened row-major in that order: both
// operands must name them consecutively in it); the contract's order when A is not a load of them all.
std::vector<std::string> reduced_axes_in_order(const ContractNode& c) {
  std::vector<std::string> order;
  for (auto& r : c.reduce_axes) order.push_back(r.var);
  auto load = c.terms.empty() ? nullptr : c.terms[0].a.as<LoadNode>();
  if (!load || order.size() < 2) return order;
  std::vector<std::string> named;
  for (auto& i : load->index)
    if (auto v = i.as<VarNode>(); v && std::count(order.begin(), order.end(), v->name)) named.push_back(v->name);
  return named.size() == order.size() ? named : order;
}

}  // namespace

std::optional<GemmKRangeTerm> gemm_k_range_term(const Expr& e, const std::string& k, int64_t extent) {
  auto s = e.as<SelectNode>();
  auto cond = s ? s->cond.as<BinaryNode>() : nullptr;
  if (!cond || cond->op != BinaryOp::lt || !is_var(cond->lhs, k)) return std::nullopt;
  auto c = integer(cond->rhs);
  if (!c || *c <= 0 || *c >= extent) return std::nullopt;
  GemmKRangeTerm r;
  Expr value;
  if (is_constant_zero(s->if_false)) {
    r.hi = *c;
    value = s->if_true;
  } else if (is_constant_zero(s->if_true)) {
    r.lo = *c;
    r.hi = extent;
    value = s->if_false;
  } else {
    return std::nullopt;
  }
  auto load = value.as<LoadNode>();
  if (!load) return std::nullopt;
  std::vector<Expr> index;
  for (auto& i : load->index) {
    auto b = i.as<BinaryNode>();
    const bool shifted = b && is_var(b->lhs, k) &&
                         ((b->op == BinaryOp::sub && integer(b->rhs) == r.lo) || (b->op == BinaryOp::add && integer(b->rhs) == -r.lo));
    if (r.lo > 0 && shifted) {
      index.push_back(make_var(k));
    } else {
      if (r.lo > 0 && is_var(i, k)) return std::nullopt;  // the second range must read k − K1
      index.push_back(i);
    }
  }
  r.a = make_load(load->tensor, std::move(index));
  return r;
}

bool gemm_k_ranges_enabled() {
  const char* v = std::getenv("SOLDER_GEMM_K_RANGES");
  return !(v && std::string(v) == "0");
}

bool gemm_batch_exchange_enabled() {
  const char* v = std::getenv("SOLDER_GEMM_BATCH_EXCHANGE");
  return !(v && std::string(v) == "0");
}

// The operand `e` = load of a global indexed by plain variables: [batch?, side…, k] or
// [batch?, k, side…], the side axes (each once) flattened in that order into its rows. `order`
// receives them.
std::optional<GemmSkeletonOperand> operand_of(const Expr& e, const std::vector<std::string>& side_axes, const std::string& k_axis,
                                              const std::vector<std::string>& batch_axes, const std::vector<GlobalTensor>& globals,
                                              const char* what, std::vector<std::string>& order, std::string& why) {
  return operand_of(e, side_axes, std::vector<std::string>{k_axis}, batch_axes, globals, what, order, why);
}

std::optional<GemmSkeletonOperand> operand_of(const Expr& e, const std::vector<std::string>& side_axes, const std::vector<std::string>& k_axes,
                                              const std::vector<std::string>& batch_axes, const std::vector<GlobalTensor>& globals,
                                              const char* what, std::vector<std::string>& order, std::string& why, bool tma) {
  auto load = e.as<LoadNode>();
  if (!load) {
    why = std::string("operand ") + what + " = " + print_expr(e) + " is computed, not a load (the skeleton stages loads)";
    return std::nullopt;
  }
  const GlobalTensor* g = find(globals, load->tensor);
  if (!g) {
    why = std::string("operand ") + what + " reads " + load->tensor + ", not a global tensor";
    return std::nullopt;
  }
  // The load's indices as plain variables over the tensor's dims; an index x · C + y (an axis split by
  // grouped_axes.h) reads its dim as two, of extents shape / C and C.
  std::vector<std::string> vars;
  std::vector<int64_t> shape;
  for (size_t d = 0; d < load->index.size(); ++d) {
    const Expr& i = load->index[d];
    if (auto v = i.as<VarNode>()) {
      vars.push_back(v->name);
      shape.push_back(g->shape[d]);
      continue;
    }
    std::string x, y;
    int64_t c = 0;
    if (auto sum = i.as<BinaryNode>(); sum && sum->op == BinaryOp::add) {
      auto product = sum->lhs.as<BinaryNode>();
      auto low = sum->rhs.as<VarNode>();
      if (product && product->op == BinaryOp::mul && low) {
        auto high = product->lhs.as<VarNode>();
        auto factor = integer(product->rhs);
        if (high && factor && *factor > 1 && g->shape[d] % *factor == 0) {
          x = high->name;
          y = low->name;
          c = *factor;
        }
      }
    }
    if (c == 0) {
      why = std::string("operand ") + what + " = " + print_expr(e) + " is not indexed by plain variables";
      return std::nullopt;
    }
    vars.push_back(x);
    shape.push_back(g->shape[d] / c);
    vars.push_back(y);
    shape.push_back(c);
  }
  GemmSkeletonOperand op;
  op.tensor = g->name;
  op.dtype = g->dtype;
  size_t first = 0;
  if (!batch_axes.empty() && vars.size() > batch_axes.size() &&
      std::equal(batch_axes.begin(), batch_axes.end(), vars.begin())) {
    first = batch_axes.size();
    op.batch = 1;
    for (size_t d = 0; d < first; ++d) op.batch *= shape[d];
    op.batch_stride = 1;
    for (size_t d = first; d < shape.size(); ++d) op.batch_stride *= shape[d];
  }
  std::vector<std::string> rest(vars.begin() + static_cast<long>(first), vars.end());
  std::string k_text;
  for (auto& k : k_axes) k_text += (k_text.empty() ? "" : ", ") + k;
  auto bad_index = [&] {
    std::string batch;
    for (auto& b : batch_axes) batch += b + "?, ";
    why = std::string("operand ") + what + " = " + print_expr(e) + " is not indexed [" + batch +
          "rows…, " + k_text + "] or [" + k_text + ", rows…] with its rows consecutive";
    return std::nullopt;
  };
  const size_t nk = k_axes.size();
  if (nk == 0 || rest.size() != side_axes.size() + nk) return bad_index();
  // The reduced axes in the given order, last (K-major) or first (MN-major): one K, flattened row-major.
  if (std::equal(k_axes.begin(), k_axes.end(), rest.end() - static_cast<long>(nk))) op.k_major = true;
  else if (std::equal(k_axes.begin(), k_axes.end(), rest.begin())) op.k_major = false;
  else return bad_index();
  order.assign(op.k_major ? rest.begin() : rest.begin() + static_cast<long>(nk), op.k_major ? rest.end() - static_cast<long>(nk) : rest.end());
  std::vector<std::string> sorted_order = order, sorted_sides = side_axes;
  std::sort(sorted_order.begin(), sorted_order.end());
  std::sort(sorted_sides.begin(), sorted_sides.end());
  if (sorted_order != sorted_sides) return bad_index();
  const size_t k_begin = op.k_major ? shape.size() - nk : first, k_end = k_begin + nk;
  op.k = 1;
  op.rows = 1;
  for (size_t d = first; d < shape.size(); ++d) (d >= k_begin && d < k_end ? op.k : op.rows) *= shape[d];
  op.ld = op.k_major ? op.k : op.rows;
  const int64_t bytes = dtype_bytes(g->dtype);
  if (tma && ((op.ld * bytes) % 16 != 0 || (op.batch > 1 && (op.batch_stride * bytes) % 16 != 0))) {
    why = std::string("operand ") + what + "'s rows are " + std::to_string(op.ld * bytes) +
          " bytes apart (the tensor memory accelerator needs a multiple of 16)";
    return std::nullopt;
  }
  return op;
}

namespace {

// The fit with these row and column axes (the contract's, or fewer: the others are batch axes). exchanged:
// the one product term's operands on each other's side (its b as A along `rows`, its a as B along `columns`), the
// same sum of products (each product a · b = b · a exactly).
GemmSkeletonFit fit_sides(const ContractNode& c, const std::vector<GlobalTensor>& globals, const std::vector<std::string>& rows,
                          const std::vector<std::string>& columns, bool exchanged = false) {
  GemmSkeletonFit fit;
  auto refuse = [&](std::string why) {
    fit.refusal = std::move(why);
    return fit;
  };
  const bool ranges = c.terms.size() == 2 && gemm_k_ranges_enabled();
  if (c.terms.size() != 1 && !ranges) return refuse(std::to_string(c.terms.size()) + " product terms (the skeleton takes one)");
  if (exchanged && (c.terms.size() != 1 || !c.pair_terms.empty())) return refuse("operands exchanged in a contract of several terms");
  const Expr& a_term = exchanged ? c.terms[0].b : c.terms[0].a;
  const Expr& b_term = exchanged ? c.terms[0].a : c.terms[0].b;
  if (c.where || c.domain.guard) return refuse("a where condition or a guarded domain");
  if (c.accumulate) return refuse("it accumulates onto its destination");
  if (c.type == MmaType::f32) return refuse("T = f32 (the skeleton takes bf16, f16, e4m3, e5m2, tf32 and 3xtf32)");
  // 3xtf32: the operands are split (fusion/tf32_split.h) before the skeleton stages them, so any layout
  // and pitch of a plain f32 load fits; the split's copies are K-major in 16-byte rows.
  const bool split = c.type == MmaType::tf32x3;
  if (split && (c.terms.size() != 1 || !c.pair_terms.empty()))
    return refuse("3xtf32 with " + std::to_string(c.terms.size() + c.pair_terms.size()) + " product terms (the split takes one)");
  if (split && exchanged) return refuse("3xtf32 with its operands exchanged (the split writes the term's a as A3, its b as B3)");
  if (c.reduce_axes.empty()) return refuse("no reduced axis");
  if (c.reduce_axes.size() > 1 && ranges) return refuse("K ranges over several reduced axes (the skeleton's ranges split one)");
  if (rows.empty() || columns.empty()) return refuse("no row or no column axis (a matrix-vector product)");
  if (!find(globals, c.dst.name)) return refuse("its destination " + c.dst.name + " is not a global tensor");
  GemmSkeletonProblem p;
  p.reduce_axes = reduced_axes_in_order(c);
  p.reduce_axis = p.reduce_axes[0];
  p.k = 1;
  for (auto& r : c.reduce_axes) p.k *= r.extent;
  std::map<std::string, int64_t> extent;
  for (auto& a : c.domain.axes) {
    extent[a.var] = a.extent;
    bool side = std::count(rows.begin(), rows.end(), a.var) || std::count(columns.begin(), columns.end(), a.var);
    if (side) continue;
    p.batch_axes.push_back(a.var);
    p.batch_extents.push_back(a.extent);
    p.batch *= a.extent;
  }
  std::string why;
  // K ranges: the terms' A as ranges [0, K1) and [K1, K), each A read at its own k.
  std::optional<GemmKRangeTerm> first, second;
  if (ranges) {
    if (!c.pair_terms.empty()) return refuse("K ranges with a paired product (the dual-B skeleton takes one range)");
    first = gemm_k_range_term(c.terms[0].a, p.reduce_axis, p.k);
    second = gemm_k_range_term(c.terms[1].a, p.reduce_axis, p.k);
    if (!first || !second)
      return refuse("2 product terms that are not K ranges select(" + p.reduce_axis + " < K1, A1, 0) and select(" + p.reduce_axis +
                    " < K1, 0, A2[" + p.reduce_axis + " - K1]) of loads");
    if (first->lo > second->lo) std::swap(first, second);
    if (first->lo != 0 || first->hi != second->lo || second->hi != p.k) return refuse("K ranges that do not partition K");
    if (!structurally_equal(c.terms[0].b, c.terms[1].b))
      return refuse("K ranges over two different B operands (the skeleton's ranges share one B)");
  }
  auto a = operand_of(ranges ? first->a : a_term, rows, p.reduce_axes, p.batch_axes, globals, ranges ? "A (first K range)" : "A",
                      p.row_axes, why, !split);
  // 3xtf32: an operand that is not a plain load may be one the split evaluates (one row and one reduced axis).
  auto computed = [&](const Expr& e, const std::vector<std::string>& side, const char* what, std::vector<std::string>& order) {
    std::optional<GemmSkeletonOperand> o;
    if (!split) return o;
    if (side.size() != 1 || p.reduce_axes.size() != 1) {
      why += "; 3xtf32 evaluates a computed operand over one row and one reduced axis only (" + std::to_string(side.size()) + " and " +
             std::to_string(p.reduce_axes.size()) + " here)";
      return o;
    }
    std::string computed_why;
    o = computed_split_operand(e, side[0], p.reduce_axis, p.batch_axes, extent.at(side[0]), p.k, p.batch, globals, what, computed_why);
    if (o) order = side;
    else why += "; " + computed_why;
    return o;
  };
  if (!a) a = computed(a_term, rows, "A", p.row_axes);
  if (!a) return refuse(why);
  auto b = operand_of(b_term, columns, p.reduce_axes, p.batch_axes, globals, "B", p.column_axes, why, !split);
  if (!b) b = computed(b_term, columns, "B", p.column_axes);
  if (!b) return refuse(why);
  for (auto& v : p.row_axes) {
    p.row_extents.push_back(extent.at(v));
    p.m *= extent.at(v);
  }
  for (auto& v : p.column_axes) {
    p.column_extents.push_back(extent.at(v));
    p.n *= extent.at(v);
  }
  const bool both_16 = sixteen_bit(a->dtype) && a->dtype == b->dtype, both_8 = fp8(a->dtype) && fp8(b->dtype);
  const bool both_32 = a->dtype == DType::f32 && b->dtype == DType::f32;
  if ((c.type == MmaType::tf32 || split) != both_32 || (!both_16 && !both_8 && !both_32))
    return refuse("operands of " + std::string(dtype_name(a->dtype)) + " and " + std::string(dtype_name(b->dtype)) + " with T = " +
                  std::string(mma_type_name(c.type)) + " (the skeleton takes two of one 16-bit type or two fp8, or two f32 with T tf32 or 3xtf32)");
  if (split && (p.row_axes.size() != 1 || p.column_axes.size() != 1 || p.reduce_axes.size() != 1))
    return refuse("3xtf32 over several row, column or reduced axes (the split takes one of each)");
  if (c.type == MmaType::tf32 && (!a->k_major || !b->k_major))
    return refuse("a tf32 operand is not K-major (tf32 wgmma reads K-major operands; 3xtf32's split transposes)");
  if (both_8 && (!a->k_major || !b->k_major)) return refuse("an fp8 operand is not K-major (fp8 wgmma reads K-major operands)");
  // An operand whose K extent is longer than the contract's is read over its first K (the tensor map has
  // K elements along k, its pitch stays the tensor's): fusion/padded_operands.h's padded copies.
  if (a->rows != p.m || b->rows != p.n || a->k < (ranges ? first->hi : p.k) || b->k < p.k)
    return refuse("the operands' shapes are not the contract's M, N, K");
  if (ranges) {
    const int64_t k1 = first->hi, k2 = p.k - k1;
    std::vector<std::string> order;
    auto a2 = operand_of(second->a, rows, p.reduce_axis, p.batch_axes, globals, "A (second K range)", order, why);
    if (!a2) return refuse(why);
    if (order != p.row_axes || a2->dtype != a->dtype || a2->k_major != a->k_major || a2->rows != p.m || a2->k < k2 ||
        (a2->batch > 1 && a2->batch != p.batch))
      return refuse("the second K range's A = " + a2->tensor + " differs from the first's " + a->tensor +
                    " in dtype, layout, rows or batch, or is shorter than its range");
    GemmSkeletonKRange range;
    range.k = k2;
    range.a = *a2;
    range.a.k = k2;
    range.b = *b;
    range.b.k = k2;
    range.b.offset = b->k_major ? k1 : k1 * b->ld;
    if ((range.b.offset * dtype_bytes(b->dtype)) % 16 != 0)
      return refuse("B's second K range starts " + std::to_string(range.b.offset * dtype_bytes(b->dtype)) +
                    " bytes in (its tensor map needs a 16-byte aligned start)");
    a->k = k1;
    b->k = k1;
    p.second = range;
  } else {
    a->k = p.k;
    b->k = p.k;
  }
  if ((a->batch > 1 && a->batch != p.batch) || (b->batch > 1 && b->batch != p.batch)) return refuse("a batch of another extent");
  p.a = *a;
  p.b = *b;
  if (!c.pair_terms.empty()) {
    if (c.pair_terms.size() != 1) return refuse(std::to_string(c.pair_terms.size()) + " paired product terms (the dual-B skeleton takes one)");
    if (!structurally_equal(c.pair_terms[0].a, c.terms[0].a))
      return refuse("the paired term's A " + print_expr(c.pair_terms[0].a) + " is not the contract's A " + print_expr(c.terms[0].a) +
                    " (the dual-B skeleton shares one A)");
    std::vector<std::string> order;
    auto b2 = operand_of(c.pair_terms[0].b, columns, p.reduce_axes, p.batch_axes, globals, "B2", order, why);
    if (!b2) return refuse(why);
    if (order != p.column_axes || b2->dtype != b->dtype || b2->k_major != b->k_major || b2->rows != b->rows || b2->k != b->k ||
        b2->batch != b->batch)
      return refuse("the paired B2 = " + b2->tensor + " differs from B = " + b->tensor +
                    " in dtype, layout, shape or batch (the dual-B skeleton reads both through one box shape)");
    p.b2 = *b2;
  }
  fit.problem = p;
  return fit;
}

// The side axes a load names before its first reduced axis when it names others after it ([i, k, n]:
// i); none for any other operand.
std::vector<std::string> leading_side_axes(const Expr& operand, const std::vector<std::string>& sides, const std::vector<Axis>& reduced) {
  std::vector<std::string> leading;
  auto load = operand.as<LoadNode>();
  if (!load) return {};
  bool after_k = false;
  for (auto& i : load->index) {
    auto v = i.as<VarNode>();
    if (!v) return {};
    const bool side = std::count(sides.begin(), sides.end(), v->name) > 0;
    if (std::any_of(reduced.begin(), reduced.end(), [&](const Axis& r) { return r.var == v->name; })) after_k = true;
    else if (side && !after_k) leading.push_back(v->name);
    else if (side) return leading;
  }
  return {};
}

std::vector<std::string> without(const std::vector<std::string>& axes, const std::vector<std::string>& removed) {
  std::vector<std::string> kept;
  for (auto& a : axes)
    if (!std::count(removed.begin(), removed.end(), a)) kept.push_back(a);
  return kept;
}

}  // namespace

std::optional<GemmSkeletonOperand> computed_split_operand(const Expr& e, const std::string& side_axis, const std::string& k_axis,
                                                          const std::vector<std::string>& batch_axes, int64_t rows, int64_t k, int64_t batch,
                                                          const std::vector<GlobalTensor>& globals, const char* what, std::string& why) {
  const std::string operand = std::string("computed 3xtf32 operand ") + what + " = " + print_expr(e);
  bool side = false, depth = false;
  size_t batch_named = 0;
  for (auto& v : vars_used(e)) {
    if (v == side_axis) side = true;
    else if (v == k_axis) depth = true;
    else if (std::count(batch_axes.begin(), batch_axes.end(), v)) ++batch_named;
    else {
      why = operand + " uses " + v + ", neither its row axis " + side_axis + ", the reduced axis " + k_axis + " nor a batch axis";
      return std::nullopt;
    }
  }
  if (!side || !depth) {
    why = operand + " does not use both its row axis " + side_axis + " and the reduced axis " + k_axis +
          " (a vector: the canonical form folds it into the other operand or the scale)";
    return std::nullopt;
  }
  if (batch_named != 0 && batch_named != batch_axes.size()) {
    why = operand + " uses some of the batch axes, not all (the split writes a batched copy or a shared one)";
    return std::nullopt;
  }
  std::string missing;
  for_each_load(e, [&](const LoadNode& load) {
    if (missing.empty() && !find(globals, load.tensor)) missing = load.tensor;
  });
  if (!missing.empty()) {
    why = operand + " reads " + missing + ", not a global tensor";
    return std::nullopt;
  }
  GemmSkeletonOperand o;
  o.computed = true;
  o.dtype = DType::f32;
  o.k_major = true;
  o.rows = rows;
  o.k = k;
  o.ld = k;
  o.batch = batch_named ? batch : 1;
  o.batch_stride = batch_named ? rows * k : 0;
  return o;
}

GemmSkeletonFit fit_gemm_skeleton(const ContractNode& c, const std::vector<GlobalTensor>& globals) {
  GemmSkeletonFit fit = fit_sides(c, globals, c.row_axes, c.column_axes);
  if (fit.problem || c.terms.size() != 1 || !c.pair_terms.empty()) return fit;
  // A row (column) axis that A (B) alone reads, named before K in an M-major (N-major) operand
  // (torch.matmul of a [M, K] by b [Bt, K, N]: b[i, k, n]), is not consecutive with the other rows
  // (columns): it runs as a batch axis, the other operand shared by every batch. Not for a batch of one.
  const std::vector<std::string> lead_rows = leading_side_axes(c.terms[0].a, c.row_axes, c.reduce_axes),
                                 lead_columns = leading_side_axes(c.terms[0].b, c.column_axes, c.reduce_axes);
  int64_t batch = 1;
  for (auto& a : c.domain.axes)
    if (std::count(lead_rows.begin(), lead_rows.end(), a.var) || std::count(lead_columns.begin(), lead_columns.end(), a.var)) batch *= a.extent;
  if (batch == 1) return fit;  // none, or axes of extent 1 (conv_chain's batch of one image keeps its gathered chain)
  const std::vector<std::string> rows = without(c.row_axes, lead_rows), columns = without(c.column_axes, lead_columns);
  if (rows.empty() || columns.empty()) return fit;
  // The canonical form's rule again without the batch axis (canonicalize.cpp, split_sides: A is the side
  // of the destination's first non-batch axis): c[i, m, n] = Σ b[i, k, n] · a[m, k] has rows i, n and
  // columns m; with i a batch, m comes first, so a is A and b is B, and the destination's contiguous n
  // runs along the tile's columns (the skeleton's row stores) instead of down its rows.
  for (auto& index : c.dst.index) {
    auto v = index.as<VarNode>();
    const bool row = v && std::count(rows.begin(), rows.end(), v->name), column = v && std::count(columns.begin(), columns.end(), v->name);
    if (!row && !column) continue;  // a batch axis
    if (column && gemm_batch_exchange_enabled()) {
      GemmSkeletonFit exchanged = fit_sides(c, globals, columns, rows, true);
      if (exchanged.problem) return exchanged;
    }
    break;
  }
  GemmSkeletonFit batched = fit_sides(c, globals, rows, columns);
  return batched.problem ? batched : fit;
}

// The destination's indices before the last may be any expressions of the other axes (a split head,
// h_kv · G + h_g: grouped_axes.h): row_pointer() evaluates them, and the row stays contiguous.
bool gemm_row_stores(const ContractNode& c, const GemmSkeletonProblem& p, DType dst) {
  if (p.b2 || c.accumulate || (dst != DType::f16 && dst != DType::bf16) || p.column_axes.size() != 1 || c.dst.index.empty()) return false;
  for (size_t i = 0; i + 1 < c.dst.index.size(); ++i) {
    // The other indices: any expressions of the other axes (a split head, h_kv · G + h_g: grouped_axes.h).
    const std::vector<std::string> used = vars_used(c.dst.index[i]);
    if (std::count(used.begin(), used.end(), p.column_axes[0])) return false;
  }
  const VarNode* last = c.dst.index.back().as<VarNode>();
  return last && last->name == p.column_axes[0];
}

int64_t tf32x3_split_ld(int64_t k) { return (3 * k + 3) / 4 * 4; }

GemmSkeletonProblem tf32x3_gemm_problem(const GemmSkeletonProblem& p) {
  GemmSkeletonProblem g = p;
  const int64_t ld = tf32x3_split_ld(p.k);
  g.k = 3 * p.k;
  for (GemmSkeletonOperand* o : {&g.a, &g.b}) {
    o->k_major = true;
    o->k = g.k;
    o->ld = ld;
    o->offset = 0;
    if (o->batch > 1) o->batch_stride = o->rows * ld;
  }
  return g;
}

}  // namespace solder
