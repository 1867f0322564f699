// The implicit-GEMM fit of a whole contract (gathered_gemm_fit.h).
#include "contract/gathered_gemm_fit.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "contract/canonicalize.h"
#include "ir/expr_visitor.h"
#include "ir/interval.h"
#include "ir/printer.h"
#include "support/refusal.h"

namespace solder {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// The first load `e` makes (in evaluation order), or nullptr.
const LoadNode* first_load(const Expr& e) {
  const LoadNode* found = nullptr;
  for_each_load(e, [&](const LoadNode& load) {
    if (!found) found = &load;
  });
  return found;
}

// Whether the innermost index of the first load of `e` uses `var`.
bool innermost_uses(const Expr& e, const std::string& var) {
  const LoadNode* load = first_load(e);
  if (!load || load->index.empty() || var.empty()) return false;
  return contains(vars_used(load->index.back()), var);
}

bool collect_leaves(const Expr& e, std::vector<std::pair<Expr, bool>>& guards, std::vector<DType>& casts, std::vector<GatherLeaf>& leaves) {
  switch (e.kind()) {
    case ExprKind::Load: {
      for (auto& i : e.as<LoadNode>()->index)
        if (!tensors_used(i).empty()) return false;  // a data-dependent index: element by element
      leaves.push_back(GatherLeaf{e, guards, casts});
      return true;
    }
    case ExprKind::Cast: {
      casts.push_back(e.as<CastNode>()->dtype);
      const bool ok = collect_leaves(e.as<CastNode>()->operand, guards, casts, leaves);
      casts.pop_back();
      return ok;
    }
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      if (!tensors_used(s->cond).empty()) return false;
      for (bool holds : {true, false}) {
        guards.emplace_back(s->cond, holds);
        const bool ok = collect_leaves(holds ? s->if_true : s->if_false, guards, casts, leaves);
        guards.pop_back();
        if (!ok) return false;
      }
      return true;
    }
    case ExprKind::Const: return e.as<ConstNode>()->value == 0;
    default: return false;
  }
}

constexpr int64_t kInt32Limit = (int64_t{1} << 31) - 1;

bool within_int32(Interval i) { return i.lo >= -kInt32Limit && i.hi <= kInt32Limit; }

// Whether every integer sub-expression of `e` (an index or a condition) has a bound within ±2^31.
bool integers_fit_int32(const Expr& e, const RangeFacts& facts) {
  switch (e.kind()) {
    case ExprKind::Const:
    case ExprKind::DimRef:
    case ExprKind::Var: {
      auto b = facts.bound(e);
      return b && within_int32(*b);
    }
    case ExprKind::Unary: {
      auto u = e.as<UnaryNode>();
      if (u->op == UnaryOp::logical_not) return integers_fit_int32(u->operand, facts);
      auto b = facts.bound(e);
      return b && within_int32(*b) && integers_fit_int32(u->operand, facts);
    }
    case ExprKind::Binary: {
      auto b = e.as<BinaryNode>();
      if (is_logical(b->op) || is_comparison(b->op)) return integers_fit_int32(b->lhs, facts) && integers_fit_int32(b->rhs, facts);
      auto r = facts.bound(e);
      return r && within_int32(*r) && integers_fit_int32(b->lhs, facts) && integers_fit_int32(b->rhs, facts);
    }
    default: return false;  // loads, selects, casts in an index: not proved
  }
}

// The 32-bit proof of a leafy operand (GatheredGemmProblem::a_index32): every guard's and index's
// integers, and each load's row-major offset (Horner, as the printer writes it), within ±2^31.
bool leaves_fit_int32(const std::vector<GatherLeaf>& leaves, const RangeFacts& facts, const std::vector<GlobalTensor>& globals) {
  if (leaves.empty()) return false;
  for (auto& leaf : leaves) {
    for (auto& [cond, holds] : leaf.guards)
      if (!integers_fit_int32(cond, facts)) return false;
    auto load = leaf.load.as<LoadNode>();
    const GlobalTensor* g = nullptr;
    for (auto& t : globals)
      if (t.name == load->tensor) g = &t;
    if (!g || g->shape.size() != load->index.size()) return false;
    Interval offset{0, 0};
    for (size_t d = 0; d < load->index.size(); ++d) {
      if (!integers_fit_int32(load->index[d], facts)) return false;
      auto i = facts.bound(load->index[d]);
      if (!i) return false;
      if (d > 0) {
        const int64_t s = g->shape[d];
        if (s > kInt32Limit) return false;
        offset = Interval{offset.lo * s, offset.hi * s};
        if (!within_int32(offset)) return false;
      }
      offset = Interval{offset.lo + i->lo, offset.hi + i->hi};
      if (!within_int32(offset)) return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::vector<GatherLeaf>> gather_leaves(const Expr& operand) {
  std::vector<std::pair<Expr, bool>> guards;
  std::vector<DType> casts;
  std::vector<GatherLeaf> leaves;
  if (!collect_leaves(operand, guards, casts, leaves) || leaves.empty()) return std::nullopt;
  return leaves;
}

GatheredGemmFit fit_gathered_gemm(const ContractNode& c, const std::vector<GlobalTensor>& globals, const std::map<std::string, int64_t>* dims) {
  auto refuse = [](std::string why) { return GatheredGemmFit{std::nullopt, std::move(why)}; };
  if (const char* off = std::getenv("SOLDER_GATHERED_GEMM"); off && std::string(off) == "0") return refuse("off by SOLDER_GATHERED_GEMM=0");
  if (c.type != MmaType::f16 && c.type != MmaType::bf16)
    return refuse("T is " + std::string(mma_type_name(c.type)) + " (the gathered GEMM takes bf16 or f16)");
  if (!c.pair_terms.empty()) return refuse("a paired product");
  if (c.where) return refuse("a where condition on the reduced points");
  if (c.domain.guard) return refuse("a guarded domain");
  if (c.accumulate) return refuse("it accumulates onto its destination");
  const std::vector<ContractTerm> terms = merge_k_range_terms(c.terms);
  if (terms.size() != 1) return refuse(std::to_string(terms.size()) + " product terms (one, after merging K ranges)");
  auto global = [&](const std::string& name) -> const GlobalTensor* {
    for (auto& g : globals)
      if (g.name == name) return &g;
    return nullptr;
  };
  if (!global(c.dst.name)) return refuse("the destination " + c.dst.name + " is not a global tensor");
  auto dtype_of = [&](const std::string& name) -> std::optional<DType> {
    if (auto g = global(name)) return g->dtype;
    return std::nullopt;
  };
  GatheredGemmProblem p;
  p.a = terms[0].a;
  p.b = terms[0].b;
  for (const Expr* operand : {&p.a, &p.b}) {
    auto exact = exact_mma_type(*operand, dtype_of);
    if (!exact || !(*exact == c.type || *exact == MmaType::f8e4m3 || *exact == MmaType::f8e5m2))
      return refuse("operand " + print_expr(*operand) + " is not exact in " + std::string(mma_type_name(c.type)) + " as written");
  }
  // Every tensor read is a global the contract does not write.
  std::vector<Expr> read = {p.a, p.b};
  for (const Expr* e : {&c.scale, &c.bias, &c.epilogue})
    if (*e) read.push_back(*e);
  for (auto& i : c.dst.index) read.push_back(i);
  for (auto& e : read)
    for (auto& t : tensors_used(e)) {
      if (t == c.value && !c.value.empty()) continue;
      if (!global(t)) return refuse(t + " is not a global tensor");
      if (t == c.dst.name) return refuse("it reads its destination " + t);
    }
  for (auto& axis : c.domain.axes) {
    if (contains(c.row_axes, axis.var)) {
      p.row_axes.push_back(axis);
      p.m *= axis.extent;
    } else if (contains(c.column_axes, axis.var)) {
      p.column_axes.push_back(axis);
      p.n *= axis.extent;
    } else {
      p.batch_axes.push_back(axis);
      p.batch *= axis.extent;
    }
  }
  p.reduce_axes = c.reduce_axes;
  for (auto& axis : c.reduce_axes) p.k *= axis.extent;
  if (p.row_axes.empty() || p.column_axes.empty()) return refuse("no row or no column axis (a matrix-vector product)");
  if (p.m < 16 || p.n < 16)
    return refuse(std::to_string(p.m) + " rows × " + std::to_string(p.n) + " columns: fewer than one 16 × 16 mma tile (a decode's product)");
  auto uses_only = [&](const Expr& e, const std::vector<Axis>& side) {
    for (auto& v : vars_used(e)) {
      bool known = false;
      for (const std::vector<Axis>* axes : {&side, static_cast<const std::vector<Axis>*>(&p.reduce_axes), static_cast<const std::vector<Axis>*>(&p.batch_axes)})
        for (auto& a : *axes) known |= a.var == v;
      if (!known) return false;
    }
    return true;
  };
  if (!uses_only(p.a, p.row_axes)) return refuse("operand A uses an axis that is not a row, reduced or batch axis");
  if (!uses_only(p.b, p.column_axes)) return refuse("operand B uses an axis that is not a column, reduced or batch axis");
  constexpr int64_t kIndexLimit = int64_t{1} << 30;  // the writer's flat indices are int
  if (p.m >= kIndexLimit || p.n >= kIndexLimit || p.k >= kIndexLimit || p.batch >= kIndexLimit)
    return refuse("M, N, K or the batch reaches 2^30 (the writer's flat indices are 32-bit)");
  p.a_rows_fastest = !p.row_axes.empty() && innermost_uses(p.a, p.row_axes.back().var);
  p.b_columns_fastest = !p.column_axes.empty() && innermost_uses(p.b, p.column_axes.back().var);
  // The leaves and the 32-bit proof. The writer decodes a thread's row (column) and depth from
  // m0 + row < M + BM and kt · BK + depth < K + BK: the outermost row (column) and reduced axis may
  // exceed its extent by up to one tile (128 rows, 64 of depth), the others stay in range.
  RangeFacts facts;
  if (dims) facts.dims = *dims;
  auto add_range = [&](const std::vector<Axis>& axes, int64_t widen) {
    for (size_t i = 0; i < axes.size(); ++i) facts.vars[axes[i].var] = Interval{0, axes[i].extent - 1 + (i == 0 ? widen : 0)};
  };
  add_range(p.row_axes, 128);
  add_range(p.column_axes, 128);
  add_range(p.reduce_axes, 64);
  for (auto& axis : p.batch_axes) facts.vars[axis.var] = Interval{0, axis.extent - 1};
  if (auto leaves = gather_leaves(p.a)) {
    p.a_leaves = *leaves;
    p.a_index32 = leaves_fit_int32(p.a_leaves, facts, globals);
  }
  if (auto leaves = gather_leaves(p.b)) {
    p.b_leaves = *leaves;
    p.b_index32 = leaves_fit_int32(p.b_leaves, facts, globals);
  }
  p.b_rows_contiguous = [&] {
    if (p.b_leaves.size() != 1 || !p.b_leaves[0].guards.empty() || !p.b_leaves[0].casts.empty() || p.k % 8 != 0 || p.n * p.k >= kInt32Limit)
      return false;
    auto load = p.b_leaves[0].load.as<LoadNode>();
    const GlobalTensor* g = global(load->tensor);
    if (!g || g->dtype != (c.type == MmaType::bf16 ? DType::bf16 : DType::f16)) return false;
    std::vector<Axis> axes = p.column_axes;
    axes.insert(axes.end(), p.reduce_axes.begin(), p.reduce_axes.end());
    if (load->index.size() != axes.size() || g->shape.size() != axes.size()) return false;
    for (size_t d = 0; d < axes.size(); ++d) {
      auto v = load->index[d].as<VarNode>();
      if (!v || v->name != axes[d].var || g->shape[d] != axes[d].extent) return false;
    }
    return true;
  }();
  return GatheredGemmFit{std::move(p), ""};
}

int64_t gathered_chain_b2_rows(int64_t n2) { return n2 <= 128 ? (n2 + 15) / 16 * 16 : (n2 + 127) / 128 * 128; }

int64_t gathered_chain_rank_columns(int64_t n2, int cluster) { return gathered_chain_b2_rows((n2 + cluster - 1) / cluster); }

const char* gathered_chain_refusal_name(GatheredChainRefusal r) {
  switch (r) {
    case GatheredChainRefusal::none: return "none";
    case GatheredChainRefusal::off: return "off";
    case GatheredChainRefusal::first_not_gathered: return "first_not_gathered";
    case GatheredChainRefusal::second_not_gathered: return "second_not_gathered";
    case GatheredChainRefusal::mixed_types: return "mixed_types";
    case GatheredChainRefusal::h_not_in_t: return "h_not_in_t";
    case GatheredChainRefusal::a_not_h: return "a_not_h";
    case GatheredChainRefusal::h_read_elsewhere: return "h_read_elsewhere";
    case GatheredChainRefusal::h_too_wide: return "h_too_wide";
    case GatheredChainRefusal::b2_not_rows: return "b2_not_rows";
    case GatheredChainRefusal::b2_too_large: return "b2_too_large";
    case GatheredChainRefusal::form_refused: return "form_refused";
    case GatheredChainRefusal::grid_too_narrow: return "grid_too_narrow";
  }
  return "?";
}

namespace {

std::string chain_env() {
  const char* text = std::getenv("SOLDER_GATHERED_CHAIN");
  return text ? std::string(text) : std::string();
}

// SOLDER_GATHERED_CHAIN_CLUSTER=2|4|8, or 0 when unset; a clear error when malformed.
int cluster_override() {
  const char* text = std::getenv("SOLDER_GATHERED_CHAIN_CLUSTER");
  if (!text || !*text) return 0;
  const std::string s = text;
  if (s != "2" && s != "4" && s != "8")
    throw Refusal("SOLDER_GATHERED_CHAIN_CLUSTER: expected the chain's cluster size 2, 4 or 8; found '" + s + "'");
  return std::stoi(s);
}

// B's bytes staged per block: its rows (per rank) × K rounded to 64, in T.
int64_t b2_bytes(const GatheredGemmProblem& two, int cluster) {
  const int64_t k2 = (two.k + 63) / 64 * 64;
  const int64_t rows = cluster == 1 ? gathered_chain_b2_rows(two.n) : gathered_chain_rank_columns(two.n, cluster);
  return rows * k2 * 2;
}

}  // namespace

bool gathered_chain_forced() {
  const std::string text = chain_env();
  return text == "1" || text == "block" || text == "cluster";
}

int64_t gathered_chain_blocks(const GatheredChainProblem& p) {
  return (p.first.m + kGatheredChainRows - 1) / kGatheredChainRows * p.first.batch;
}

GatheredChainForm choose_gathered_chain_form(const GatheredChainProblem& p, int64_t sms, bool whatever_the_grid) {
  GatheredChainForm form;
  const std::string env = whatever_the_grid && chain_env().empty() ? std::string("1") : chain_env();
  const int64_t tiles = gathered_chain_blocks(p);
  const int64_t steps = (p.first.k + 63) / 64;
  const bool one_fits = b2_bytes(p.second, 1) <= kGatheredChainMaxB2Bytes;
  auto kb = [](int64_t bytes) { return std::to_string(bytes / 1024) + " KB"; };
  // The cluster size: the smallest whose B slice fits, doubled while the doubled grid still gives each
  // block an SM of its own and ranks keep 2 steps. Measured on the H100 (bench/NOTES.md, conv-cluster):
  // C6 with clusters of 4 (100 blocks) 11.7 µs, of 8 (200 blocks, 68 SMs with two) 16.2 µs.
  int s = 2;
  while (s < kGatheredChainMaxCluster && b2_bytes(p.second, s) > kGatheredChainMaxB2Bytes) s *= 2;
  const bool cluster_fits = b2_bytes(p.second, s) <= kGatheredChainMaxB2Bytes;
  while (cluster_fits && s < kGatheredChainMaxCluster && tiles * 2 * s <= sms && steps >= 2 * (2 * s)) s *= 2;
  if (int o = cluster_override()) s = o;
  auto one_block = [&] {
    form.kind = GatheredChainFormKind::one_block;
    form.cluster = 1;
    form.grid = tiles;
    form.why = std::to_string(tiles) + " blocks of " + std::to_string(kGatheredChainRows) + " rows, " + (2 * tiles >= sms ? "≥" : "<") +
               " half of the " + std::to_string(sms) + " SMs";
    return form;
  };
  auto cluster = [&] {
    form.kind = GatheredChainFormKind::cluster;
    form.cluster = s;
    form.grid = tiles * s;
    form.why = std::to_string(tiles) + " clusters of " + std::to_string(s) + " blocks of " + std::to_string(kGatheredChainRows) +
               " rows (" + std::to_string(tiles * s) + " blocks, " + (4 * tiles * s >= sms ? "≥" : "<") + " a quarter of the " +
               std::to_string(sms) + " SMs; " + std::to_string((steps + s - 1) / s) + " of the first product's " + std::to_string(steps) +
               " K steps and " + kb(b2_bytes(p.second, s)) + " of its B per rank, h summed over distributed shared memory)";
    return form;
  };
  auto refuse = [&](GatheredChainRefusal r, std::string why) {
    form.kind.reset();
    form.reason = r;
    form.why = std::move(why);
    return form;
  };
  const std::string b_one = "the second product's B (" + kb(b2_bytes(p.second, 1)) + ") does not fit on chip beside the tiles (" +
                            kb(kGatheredChainMaxB2Bytes) + ")";
  if (env == "block") return one_fits ? one_block() : refuse(GatheredChainRefusal::form_refused, b_one + ", forced to one block per row tile");
  const bool slice_fits = b2_bytes(p.second, s) <= kGatheredChainMaxB2Bytes;
  const std::string b_slice = "the second product's B (" + kb(b2_bytes(p.second, 1)) + ") does not fit on chip, " + kb(b2_bytes(p.second, s)) +
                              " per rank of a cluster of " + std::to_string(s);
  if (env == "cluster") return slice_fits ? cluster() : refuse(GatheredChainRefusal::b2_too_large, b_slice);
  // One block per row tile where it fits and a cluster would leave a rank under two K steps (C1: one
  // step); else the cluster form, which also beat one block at C5 on the H100 (clusters of 2, 5 steps
  // per rank: 12.48 µs against 13.39; C1 in clusters: 8.45 against 5.56).
  const bool one_grid = 2 * tiles >= sms || env == "1";
  const bool cluster_pays = slice_fits && steps >= 2 * s && (4 * tiles * s >= sms || env == "1");
  if (one_fits && one_grid && !cluster_pays) return one_block();
  if (!slice_fits) return refuse(GatheredChainRefusal::b2_too_large, b_slice);
  if (4 * tiles * s >= sms || env == "1") return cluster();
  const std::string one_why = one_fits ? one_block().why : b_one;
  const std::string cluster_why = cluster().why;
  return refuse(GatheredChainRefusal::grid_too_narrow, one_why + "; " + cluster_why);
}

GatheredChainFit fit_gathered_chain(const ContractNode& first, const ContractNode& second, const std::vector<GlobalTensor>& globals,
                                    const std::map<std::string, int64_t>* dims) {
  auto refuse = [](GatheredChainRefusal r, std::string why) { return GatheredChainFit{std::nullopt, std::move(why), r}; };
  if (chain_env() == "0") return refuse(GatheredChainRefusal::off, "off by SOLDER_GATHERED_CHAIN=0");
  GatheredGemmFit f1 = fit_gathered_gemm(first, globals, dims);
  if (!f1.problem) return refuse(GatheredChainRefusal::first_not_gathered, "the first product is not a gathered GEMM: " + f1.refusal);
  GatheredGemmFit f2 = fit_gathered_gemm(second, globals, dims);
  if (!f2.problem) return refuse(GatheredChainRefusal::second_not_gathered, "the second product is not a gathered GEMM: " + f2.refusal);
  GatheredChainProblem p{std::move(*f1.problem), std::move(*f2.problem)};
  if (first.type != second.type) return refuse(GatheredChainRefusal::mixed_types, "the products round their operands to different types");
  const std::string& h = first.dst.name;
  const GlobalTensor* h_global = nullptr;
  for (auto& g : globals)
    if (g.name == h) h_global = &g;
  const DType t = first.type == MmaType::bf16 ? DType::bf16 : DType::f16;
  if (!h_global || h_global->dtype != t)
    return refuse(GatheredChainRefusal::h_not_in_t,
                  h + " is not stored in " + std::string(mma_type_name(first.type)) + " (the on-chip tile is rounded to T)");
  // The second's A is h at the first's destination index, renamed into the second's axes.
  Expr a = p.second.a;
  auto load = a.as<LoadNode>();
  if (!load || load->tensor != h) return refuse(GatheredChainRefusal::a_not_h, "the second product's A is not a plain load of " + h);
  const GatheredGemmProblem &one = p.first, &two = p.second;
  if (one.row_axes.size() != two.row_axes.size() || one.batch_axes.size() != two.batch_axes.size() ||
      one.column_axes.size() != two.reduce_axes.size())
    return refuse(GatheredChainRefusal::a_not_h, "the second product's rows, batch and K are not the first's rows, batch and columns");
  std::map<std::string, Expr> rename;  // the first product's axes as the second's
  auto map_axes = [&](const std::vector<Axis>& from, const std::vector<Axis>& to) {
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i].extent != to[i].extent) return false;
      rename[from[i].var] = make_var(to[i].var);
    }
    return true;
  };
  if (!map_axes(one.row_axes, two.row_axes) || !map_axes(one.batch_axes, two.batch_axes) || !map_axes(one.column_axes, two.reduce_axes))
    return refuse(GatheredChainRefusal::a_not_h,
                  "the second product's rows, batch and K differ in extent from the first's rows, batch and columns");
  if (first.dst.index.size() != load->index.size()) return refuse(GatheredChainRefusal::a_not_h, "the second product reads " + h + " at another index");
  for (size_t i = 0; i < load->index.size(); ++i)
    if (!structurally_equal(substitute_vars(first.dst.index[i], rename), load->index[i]))
      return refuse(GatheredChainRefusal::a_not_h, "the second product reads " + h + " at another index than the first writes it");
  for (const Expr* e : {static_cast<const Expr*>(&p.second.b), &second.scale, &second.bias, &second.epilogue})
    if (*e)
      for (auto& used : tensors_used(*e))
        if (used == h) return refuse(GatheredChainRefusal::h_read_elsewhere, "the second product reads " + h + " outside its A operand");
  if (one.n > kGatheredChainMaxN1)
    return refuse(GatheredChainRefusal::h_too_wide, std::to_string(one.n) + " columns of " + h + ", more than the " +
                                                        std::to_string(kGatheredChainMaxN1) + " a row tile holds on chip");
  if (!two.b_rows_contiguous)
    return refuse(GatheredChainRefusal::b2_not_rows, "the second product's B is not contiguous rows of one tensor (cp.async)");
  if (b2_bytes(two, kGatheredChainMaxCluster) > kGatheredChainMaxB2Bytes)
    return refuse(GatheredChainRefusal::b2_too_large, "the second product's B (" + std::to_string(b2_bytes(two, 1) / 1024) +
                                                          " KB) does not fit on chip even split over a cluster of " +
                                                          std::to_string(kGatheredChainMaxCluster) + " (" +
                                                          std::to_string(kGatheredChainMaxB2Bytes / 1024) + " KB per rank)");
  return GatheredChainFit{std::move(p), "", GatheredChainRefusal::none};
}

}  // namespace solder
