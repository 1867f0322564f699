#include "fusion/row_epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "algebra/normal_form.h"
#include "contract/gemm_skeleton_fit.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "plan/skeleton_choice.h"

namespace solder {
namespace {

bool is_var(const Expr& e, const std::string& name) {
  const VarNode* v = e ? e.as<VarNode>() : nullptr;
  return v && v->name == name;
}

bool expr_mentions(const Expr& e, const std::string& name) { return e && uses_tensor(e, name); }

bool access_mentions(const Access& a, const std::string& name) {
  if (a.name == name) return true;
  for (auto& i : a.index)
    if (expr_mentions(i, name)) return true;
  return false;
}

// Whether a statement (or its nested bodies) reads or writes the tensor `name`.
bool mentions(const Stmt& s, const std::string& name);
bool mentions(const Block& b, const std::string& name) {
  return std::any_of(b.begin(), b.end(), [&](const Stmt& s) { return mentions(s, name); });
}
bool mentions(const Stmt& s, const std::string& name) {
  switch (s.kind()) {
    case StmtKind::For: {
      auto n = s.as<ForNode>();
      return expr_mentions(n->begin, name) || expr_mentions(n->end, name) || mentions(n->body, name);
    }
    case StmtKind::If: {
      auto n = s.as<IfNode>();
      return expr_mentions(n->cond, name) || mentions(n->then_body, name) || mentions(n->else_body, name);
    }
    case StmtKind::Fill: return s.as<FillNode>()->buffer == name;
    case StmtKind::Copy: {
      auto n = s.as<CopyNode>();
      return access_mentions(n->dst, name) || access_mentions(n->src, name) || expr_mentions(n->domain.guard, name);
    }
    case StmtKind::Map: {
      auto n = s.as<MapNode>();
      return access_mentions(n->dst, name) || expr_mentions(n->value, name) || expr_mentions(n->domain.guard, name);
    }
    case StmtKind::Reduce: {
      auto n = s.as<ReduceNode>();
      return access_mentions(n->dst, name) || access_mentions(n->index_dst, name) || expr_mentions(n->value, name) ||
             expr_mentions(n->where, name) || expr_mentions(n->index_value, name) || expr_mentions(n->domain.guard, name);
    }
    case StmtKind::Contract: {
      auto n = s.as<ContractNode>();
      if (access_mentions(n->dst, name) || n->value == name || n->pair_value == name) return true;
      for (const Expr& e : {n->scale, n->bias, n->where, n->epilogue, n->domain.guard})
        if (expr_mentions(e, name)) return true;
      for (auto* terms : {&n->terms, &n->pair_terms})
        for (auto& t : *terms)
          if (expr_mentions(t.a, name) || expr_mentions(t.b, name)) return true;
      return false;
    }
    case StmtKind::InterClusterReduce: {
      auto n = s.as<InterClusterReduceNode>();
      return access_mentions(n->dst, name) || access_mentions(n->src, name) || expr_mentions(n->domain.guard, name);
    }
    case StmtKind::QueuePush: {
      auto n = s.as<QueuePushNode>();
      return n->queue == name || n->src == name || expr_mentions(n->tag, name);
    }
    case StmtKind::QueuePop: return s.as<QueuePopNode>()->dst == name || s.as<QueuePopNode>()->queue == name;
    case StmtKind::ClusterReduce: return s.as<ClusterReduceNode>()->buffer == name;
    case StmtKind::ClusterGather: return s.as<ClusterGatherNode>()->src == name || s.as<ClusterGatherNode>()->dst == name;
    case StmtKind::ReduceScatter: return s.as<ReduceScatterNode>()->src == name || s.as<ReduceScatterNode>()->dst == name;
    case StmtKind::DsmShuffle: return s.as<DsmShuffleNode>()->src == name || s.as<DsmShuffleNode>()->dst == name;
    case StmtKind::AllExchange: return s.as<AllExchangeNode>()->buffer == name;
    case StmtKind::Barrier: return false;
  }
  return true;
}

// The globals a block of statements writes.
void written_globals(const Block& body, const KernelProgram& program, std::set<std::string>& out) {
  auto global = [&](const std::string& n) {
    if (program.find_global(n)) out.insert(n);
  };
  for (const Stmt& s : body) {
    if (auto n = s.as<ForNode>()) written_globals(n->body, program, out);
    if (auto n = s.as<IfNode>()) {
      written_globals(n->then_body, program, out);
      written_globals(n->else_body, program, out);
    }
    if (auto n = s.as<CopyNode>()) global(n->dst.name);
    if (auto n = s.as<MapNode>()) global(n->dst.name);
    if (auto n = s.as<ReduceNode>()) {
      global(n->dst.name);
      global(n->index_dst.name);
    }
    if (auto n = s.as<ContractNode>()) global(n->dst.name);
    if (auto n = s.as<InterClusterReduceNode>()) global(n->dst.name);
  }
}

// g·TR + t, as the fused lowering writes a grid-tiled row index (g + t for one row a block).
bool is_tiled_row(const Expr& e, const std::string& grid_var, int64_t rows, const std::string& row_var) {
  const Expr want = make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var(grid_var), make_int(rows)), make_var(row_var));
  const Expr one = make_binary(BinaryOp::add, make_var(grid_var), make_var(row_var));
  return e && (structurally_equal(e, want) || (rows == 1 && structurally_equal(e, one)));
}

// A staging copy D[t, e] = G[g·TR + t, e] over t < TR, e < N of the whole rows of G.
struct Staging {
  std::string tile, row_var, column_var;
  Expr guard;
};
std::optional<Staging> staging_copy(const Stmt& s, const std::string& g_name, const Kernel& kernel, int64_t n, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<Staging> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  const CopyNode* c = s.as<CopyNode>();
  if (!c || c->src.name != g_name) return refuse("it reads " + g_name + " other than by a top-level copy");
  if (kernel.grid.size() != 1) return refuse("its grid is not one dimension of row tiles");
  const Buffer* tile = kernel.find_buffer(c->dst.name);
  if (!tile || tile->dtype != DType::f32 || tile->shape.size() != 2 || tile->shape[1] != n)
    return refuse("the copy of " + g_name + " does not stage whole f32 rows");
  if (c->domain.axes.size() != 2 || c->domain.axes[1].extent != n || c->domain.axes[0].extent != tile->shape[0])
    return refuse("the copy of " + g_name + " does not cover the tile's rows and all " + std::to_string(n) + " columns");
  const std::string t = c->domain.axes[0].var, e = c->domain.axes[1].var;
  if (c->dst.index.size() != 2 || !is_var(c->dst.index[0], t) || !is_var(c->dst.index[1], e) || c->src.index.size() != 2 ||
      !is_var(c->src.index[1], e) || !is_tiled_row(c->src.index[0], kernel.grid[0].var, tile->shape[0], t))
    return refuse("the copy of " + g_name + " is not D[t, e] = " + g_name + "[g * TR + t, e]");
  return Staging{c->dst.name, t, e, c->domain.guard};
}

}  // namespace

bool row_epilogue_enabled() {
  const char* env = std::getenv("SOLDER_ROW_EPILOGUE");
  return env && std::string(env) == "1";
}

bool row_epilogue_statements(const Kernel& kernel, size_t first, const std::vector<std::string>& tiles, const std::string& row_var,
                             int64_t rows, int64_t columns, std::string* why) {
  auto refuse = [&](std::string text) {
    if (why) *why = std::move(text);
    return false;
  };
  auto is_tile = [&](const std::string& n) { return std::find(tiles.begin(), tiles.end(), n) != tiles.end(); };
  // A per-row buffer: [TR] (a row's value) or [TR, k] (a top-k list), in registers or shared memory.
  auto per_row = [&](const std::string& n, size_t rank) {
    const Buffer* b = kernel.find_buffer(n);
    return b && b->shape.size() == rank && b->shape[0] == rows && (b->scope == Scope::register_file || b->scope == Scope::shared) &&
           (b->dtype == DType::f32 || b->dtype == DType::i32);
  };
  // The loads of `e`: row tiles at [t, column], per-row values at [t], globals.
  auto reads_ok = [&](const Expr& e, const std::string& column) {
    bool ok = true;
    for_each_load(e, [&](const LoadNode& l) {
      if (kernel.find_buffer(l.tensor) == nullptr) return;  // a global
      if (is_tile(l.tensor)) {
        ok = ok && !column.empty() && l.index.size() == 2 && is_var(l.index[0], row_var) && is_var(l.index[1], column);
      } else {
        ok = ok && per_row(l.tensor, 1) && l.index.size() == 1 && is_var(l.index[0], row_var);
      }
    });
    return ok;
  };
  std::map<std::string, double> filled;  // the value each per-row buffer was last filled with
  for (size_t i = first; i < kernel.body.size(); ++i) {
    const Stmt& s = kernel.body[i];
    const std::string at = "statement " + std::to_string(i) + " (" + std::string(stmt_kind_name(s.kind())) + ")";
    if (s.as<BarrierNode>()) continue;
    if (auto f = s.as<FillNode>()) {
      if (!per_row(f->buffer, 1) && !per_row(f->buffer, 2)) return refuse(at + ": fills a buffer that is not one value or list per row");
      filled[f->buffer] = f->value;
      continue;
    }
    if (auto r = s.as<ReduceNode>()) {
      if (r->domain.axes.size() != 1 || r->domain.axes[0].var != row_var || r->domain.guard || r->where || r->reduce_axes.size() != 1 ||
          r->reduce_axes[0].extent != columns)
        return refuse(at + ": not a reduction of whole rows (over t < TR, reducing one axis of all " + std::to_string(columns) + " columns)");
      const std::string e = r->reduce_axes[0].var;
      if (!reads_ok(r->value, e)) return refuse(at + ": reads something other than the row, per-row values and globals");
      if (r->op == ReduceOp::topk) {
        if (r->dst.index.size() != 2 || !is_var(r->dst.index[0], row_var) || !is_var(r->dst.index[1], r->rank_var) || !per_row(r->dst.name, 2))
          return refuse(at + ": a top-k list not indexed [t, rank]");
        if (!r->index_dst.name.empty() && (r->index_dst.index.size() != 2 || !is_var(r->index_dst.index[0], row_var) ||
                                           !is_var(r->index_dst.index[1], r->rank_var) || !per_row(r->index_dst.name, 2)))
          return refuse(at + ": a top-k index list not indexed [t, rank]");
        if (r->index_value && !reads_ok(r->index_value, e)) return refuse(at + ": the index reads something other than the row");
        // Accumulating into a list filled with (-inf, -1) is a plain top-k (the executor drops those entries).
        if (r->accumulate) {
          auto fd = filled.find(r->dst.name);
          auto fi = filled.find(r->index_dst.name);
          if (fd == filled.end() || !(fd->second < 0 && std::isinf(fd->second)) ||
              (!r->index_dst.name.empty() && (fi == filled.end() || fi->second != -1)))
            return refuse(at + ": a top-k merged into a list that is not empty");
        }
        continue;
      }
      if (r->op != ReduceOp::sum && r->op != ReduceOp::max && r->op != ReduceOp::min)
        return refuse(at + ": the reduction is not sum, max, min or topk");
      if (r->dst.index.size() != 1 || !is_var(r->dst.index[0], row_var) || !per_row(r->dst.name, 1))
        return refuse(at + ": the reduction's result is not one value per row");
      continue;
    }
    if (auto m = s.as<MapNode>()) {
      if (m->domain.axes.size() != 1 || m->domain.axes[0].var != row_var || m->domain.guard || m->dst.index.size() != 1 ||
          !is_var(m->dst.index[0], row_var) || !per_row(m->dst.name, 1) || !reads_ok(m->value, ""))
        return refuse(at + ": not a map of one value per row");
      continue;
    }
    if (auto c = s.as<CopyNode>()) {
      const Buffer* src = kernel.find_buffer(c->src.name);
      const bool list = c->domain.axes.size() == 2;
      if (kernel.find_buffer(c->dst.name) || !src || c->domain.axes.empty() || c->domain.axes.size() > 2 || c->domain.axes[0].var != row_var ||
          !per_row(c->src.name, list ? 2 : 1) || c->src.index.size() != c->domain.axes.size() || !is_var(c->src.index[0], row_var) ||
          (list && (!is_var(c->src.index[1], c->domain.axes[1].var) || c->domain.axes[1].extent != src->shape[1])))
        return refuse(at + ": not a store of one value or list per row");
      continue;
    }
    return refuse(at + ": not a row statement");
  }
  return true;
}

std::optional<RowEpilogueKernel> match_row_epilogue_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<RowEpilogueKernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (kernel.body.empty() || kernel.grid.size() != 1) return refuse("not a contract followed by row statements");
  const ContractNode* c = kernel.body[0].as<ContractNode>();
  if (!c) return refuse("its first statement is not a contract");
  const Buffer* tile = kernel.find_buffer(c->dst.name);
  if (!tile || tile->dtype != DType::f32 || tile->shape.size() != 2) return refuse("the contract does not write an f32 row tile");
  if (c->row_axes.size() != 1 || c->column_axes.size() != 1 || c->domain.axes.size() != 2 || c->accumulate || c->epilogue ||
      !c->pair_terms.empty() || c->where)
    return refuse("the contract is not one product of one row and one column axis");
  RowEpilogueKernel k;
  k.tile = c->dst.name;
  k.grid_var = kernel.grid[0].var;
  k.row_var = c->domain.axes[0].var;
  k.column_var = c->domain.axes[1].var;
  k.rows = c->domain.axes[0].extent;
  k.columns = c->domain.axes[1].extent;
  if (c->row_axes[0] != k.row_var || c->column_axes[0] != k.column_var || tile->shape[0] != k.rows || tile->shape[1] != k.columns ||
      c->dst.index.size() != 2 || !is_var(c->dst.index[0], k.row_var) || !is_var(c->dst.index[1], k.column_var))
    return refuse("the contract does not write the tile as D[t, e]");
  if (k.columns > kRowEpilogueMaxColumns) return refuse("a row of " + std::to_string(k.columns) + " columns is wider than one column tile");
  // The product's rows: g·TR + t below the guard's bound (or all of them).
  k.m = kernel.grid[0].extent * k.rows;
  if (c->domain.guard) {
    const BinaryNode* lt = c->domain.guard.as<BinaryNode>();
    const ConstNode* bound = lt ? lt->rhs.as<ConstNode>() : nullptr;
    if (!lt || lt->op != BinaryOp::lt || !is_tiled_row(lt->lhs, k.grid_var, k.rows, k.row_var) || !bound)
      return refuse("the contract's guard is not g * TR + t < M");
    k.m = static_cast<int64_t>(bound->value);
  }
  size_t first = 1;
  std::vector<std::string> tiles = {k.tile};
  for (; first < kernel.body.size(); ++first) {
    const CopyNode* a = kernel.body[first].as<CopyNode>();
    if (!a || a->src.name != k.tile) break;
    const Buffer* alias = kernel.find_buffer(a->dst.name);
    if (!alias || alias->shape != tile->shape || alias->dtype != DType::f32 || a->domain.axes.size() != 2 || a->dst.index.size() != 2 ||
        !is_var(a->dst.index[0], a->domain.axes[0].var) || !is_var(a->dst.index[1], a->domain.axes[1].var) ||
        a->src.index.size() != 2 || !is_var(a->src.index[0], a->domain.axes[0].var) || !is_var(a->src.index[1], a->domain.axes[1].var) ||
        a->domain.axes[1].extent != k.columns)
      return refuse("a copy of the tile that is not a whole copy");
    k.aliases.push_back(a->dst.name);
    tiles.push_back(a->dst.name);
  }
  (void)program;
  if (!row_epilogue_statements(kernel, first, tiles, k.row_var, k.rows, k.columns, why)) return std::nullopt;
  return k;
}

RowEpilogueFusion fuse_row_epilogues(const KernelProgram& input) {
  RowEpilogueFusion result;
  result.program = input;
  const bool enabled = row_epilogue_enabled();
  KernelProgram& program = result.program;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const Kernel& whole = program.kernels[i];
    if (whole.body.size() != 1 || !whole.body[0].as<ContractNode>()) continue;
    const ContractNode& c = *whole.body[0].as<ContractNode>();
    const GlobalTensor* g = program.find_global(c.dst.name);
    if (!g || g->role != GlobalRole::intermediate || g->dtype != DType::f32 || g->shape.size() != 2) continue;
    if (c.accumulate || c.epilogue || !c.pair_terms.empty() || c.where || c.domain.guard || c.row_axes.size() != 1 ||
        c.column_axes.size() != 1 || c.domain.axes.size() != 2 || c.dst.index.size() != 2 || !is_var(c.dst.index[0], c.row_axes[0]) ||
        !is_var(c.dst.index[1], c.column_axes[0]) || c.domain.axes[0].var != c.row_axes[0] || c.reduce_axes.size() != 1)
      continue;
    const std::string name = c.dst.name;
    const int64_t m = c.domain.axes[0].extent, n = c.domain.axes[1].extent;
    auto note = [&](const std::string& text) { result.notes.push_back(name + ": " + text); };
    // The GEMM skeleton must take the product with a tile that holds a whole row (BN ≥ N, single B, no
    // cluster along N): what the CUDA writer instantiates (gemm_row_epilogue_writer.h).
    GemmSkeletonFit fit = fit_gemm_skeleton(c, program.globals);
    if (!fit.problem) continue;  // not on the skeleton (the gathered GEMM, or fused): not this rule's
    if (n <= kRowEpilogueMaxColumns && fit.problem->batch == 1 &&
        !choose_skeleton_config(*fit.problem, c.type, DType::f32, false, 2, n).chosen) {
      note("two kernels (no configuration of the GEMM skeleton holds a row of " + std::to_string(n) + " columns)");
      continue;
    }
    if (fit.problem->batch != 1) continue;
    // The one later kernel that reads it.
    std::vector<size_t> readers;
    for (size_t j = 0; j < program.kernels.size(); ++j)
      if (j != i && mentions(program.kernels[j].body, name)) readers.push_back(j);
    if (readers.size() != 1 || readers[0] < i) {
      note("two kernels (" + std::to_string(readers.size()) + " kernels read it)");
      continue;
    }
    const size_t j = readers[0];
    if (n > kRowEpilogueMaxColumns) {
      note("two kernels (a row of " + std::to_string(n) + " columns is wider than the skeleton's widest tile, " +
           std::to_string(kRowEpilogueMaxColumns) + ")");
      continue;
    }
    Kernel rows = program.kernels[j];
    std::string why;
    // Its staging copies, first, then the row statements.
    std::vector<Staging> staged;
    size_t first = 0;
    bool ok = true;
    for (; first < rows.body.size(); ++first) {
      if (!mentions(rows.body[first], name)) break;
      auto s = staging_copy(rows.body[first], name, rows, n, &why);
      if (!s) {
        ok = false;
        break;
      }
      staged.push_back(*s);
    }
    for (size_t k = first; ok && k < rows.body.size(); ++k)
      if (mentions(rows.body[k], name)) {
        ok = false;
        why = "it reads " + name + " after its row statements begin";
      }
    if (ok && staged.empty()) {
      ok = false;
      why = "it does not stage " + name + " first";
    }
    std::vector<std::string> tiles;
    for (auto& s : staged) tiles.push_back(s.tile);
    const int64_t tile_rows = ok ? rows.find_buffer(staged[0].tile)->shape[0] : 0;
    if (ok) {
      for (auto& s : staged)
        if (s.row_var != staged[0].row_var) ok = false, why = "its staging copies use different row variables";
    }
    if (ok && !row_epilogue_statements(rows, first, tiles, staged[0].row_var, tile_rows, n, &why)) ok = false;
    // Nothing from the product's kernel to the reader (included) writes the product's operands.
    if (ok) {
      std::set<std::string> written;
      for (size_t k = i + 1; k <= j; ++k) written_globals(program.kernels[k].body, program, written);
      for (auto& t : c.terms)
        for (const std::string& used : tensors_used(t.a * t.b))
          if (written.count(used)) ok = false, why = used + " is written between the product and its rows' kernel";
    }
    if (!ok) {
      note("two kernels (" + rows.name + ": " + why + ")");
      continue;
    }
    if (!enabled) {
      note("two kernels (the rule takes it with " + rows.name +
           ", but the one-kernel form is off: measured slower on the H100; SOLDER_ROW_EPILOGUE=1 takes it)");
      continue;
    }
    // The product over the reader's rows: its row axis at g·TR + t, its column axis the staging copy's.
    const Staging& s0 = staged[0];
    const std::string grid_var = rows.grid[0].var;
    std::string k_var = c.reduce_axes[0].var;
    std::set<std::string> taken = {grid_var, s0.row_var, s0.column_var};
    while (taken.count(k_var)) k_var += "_k";
    const std::map<std::string, Expr> at = {
        {c.row_axes[0], make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var(grid_var), make_int(tile_rows)), make_var(s0.row_var))},
        {c.column_axes[0], make_var(s0.column_var)},
        {c.reduce_axes[0].var, make_var(k_var)}};
    auto moved = [&](const Expr& e) { return e ? substitute_vars(e, at) : e; };
    ContractNode product = c;
    product.comment = c.comment.empty() ? name + " (its rows reduced in the GEMM skeleton's epilogue)"
                                        : c.comment + " (its rows reduced in the GEMM skeleton's epilogue)";
    product.domain.axes = {Axis{s0.row_var, tile_rows}, Axis{s0.column_var, n}};
    product.domain.guard = Expr();
    if (rows.grid[0].extent * tile_rows != m)
      product.domain.guard = make_binary(BinaryOp::lt, at.at(c.row_axes[0]), make_int(m));
    product.reduce_axes = {Axis{k_var, c.reduce_axes[0].extent}};
    product.dst = Access{s0.tile, {make_var(s0.row_var), make_var(s0.column_var)}};
    for (auto& t : product.terms) t = ContractTerm{moved(t.a), moved(t.b)};
    product.scale = moved(c.scale);
    product.bias = moved(c.bias);
    product.row_axes = {s0.row_var};
    product.column_axes = {s0.column_var};
    Block body;
    body.push_back(make_stmt(product));
    for (size_t k = 1; k < staged.size(); ++k) {
      const CopyNode& old = *rows.body[k].as<CopyNode>();
      CopyNode alias = old;
      alias.src = Access{s0.tile, old.dst.index};
      alias.domain.guard = Expr();
      alias.comment = "copy of " + name + "'s rows";
      body.push_back(make_stmt(alias));
    }
    for (size_t k = first; k < rows.body.size(); ++k) body.push_back(rows.body[k]);
    rows.body = std::move(body);
    std::vector<std::string> definitions = whole.definitions;
    definitions.insert(definitions.end(), rows.definitions.begin(), rows.definitions.end());
    rows.definitions = std::move(definitions);
    note("one kernel with " + rows.name + " (a row of " + std::to_string(n) + " columns fits one column tile; " + rows.name +
         " reduces whole rows): " + name + " (" + std::to_string(m * n * 4) + " bytes) is never stored");
    program.kernels[j] = std::move(rows);
    program.kernels.erase(program.kernels.begin() + static_cast<std::ptrdiff_t>(i));
    program.globals.erase(std::remove_if(program.globals.begin(), program.globals.end(), [&](const GlobalTensor& t) { return t.name == name; }),
                          program.globals.end());
    --i;
  }
  return result;
}

}  // namespace solder
