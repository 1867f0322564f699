// The fused lowering (group_lowering.h): members computed whole per tile, their domains, and their
// expressions translated into the kernel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "algebra/normal_form.h"
#include "fusion/group_lowering.h"
#include "fusion/inline_pointwise.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder::fused {

Expr GroupLowering::translate(const GroupMember& m, const Expr& e, const std::map<std::string, std::string>& renamed) {
  Translator t;
  t.self = this;
  t.m = &m;
  t.renamed = &renamed;
  return fold_constants(t.mutate(e));
}

// A load of a global that every point of the tile reads at plain variables (or at indices fixed
// for the block) reads a staged copy instead.
Expr GroupLowering::staged_load(const GroupMember& m, const LoadNode& load) {
  // A load at a data-dependent index (a gather) is never staged: a staging copy would read it
  // speculatively (also where a select's guard keeps it from being evaluated) and would need the
  // index tensor as a global. It stays a direct load of the global, checked where it is evaluated.
  for (auto& i : load.index)
    if (!tensors_used(i).empty()) return {};
  std::vector<int> dims;
  std::vector<Expr> source;
  std::vector<Expr> local;
  for (auto& i : load.index) {
    auto v = i.as<VarNode>();
    if (v && m.dim_of(v->name) >= 0) {
      int d = m.dim_of(v->name);
      if (std::find(dims.begin(), dims.end(), d) != dims.end()) return {};
      dims.push_back(d);
      source.push_back(Expr());
      local.push_back(i);
      continue;
    }
    // Fixed for the block: only variables of grid dims with tile 1.
    for (auto& var : vars_used(i)) {
      int d = m.dim_of(var);
      if (d < 0 || dim(d).role != DimRole::grid || dim(d).tile != 1) return {};
    }
    std::map<std::string, Expr> fixed;
    for (auto& var : vars_used(i)) fixed[var] = base(m.dim_of(var));
    source.push_back(fold_constants(substitute_vars(i, fixed)));
  }
  int loop_dim = -1;
  for (int d : dims) {
    if (dim(d).role == DimRole::inner) loop_dim = d;
    else if (dim(d).role == DimRole::stream && loop_dim < 0 && !merge_kernel_) loop_dim = d;
  }
  for (auto& s : staged_) {
    if (s.tensor != load.tensor || s.dims != dims || s.source.size() != source.size()) continue;
    bool same = true;
    for (size_t k = 0; k < source.size() && same; ++k)
      same = (!s.source[k] && !source[k]) || (s.source[k] && source[k] && structurally_equal(s.source[k], source[k]));
    if (same) {
      s.users.insert(m.def.target.name);
      return make_load(s.buffer, local.empty() ? scalar_index() : local, load.loc);
    }
  }
  Staged s;
  const int copies = staged_count(load.tensor);
  s.buffer = internal_name("staged" + std::to_string(copies), load.tensor, load.tensor + "_tile" + (copies ? std::to_string(copies + 1) : ""));
  s.tensor = load.tensor;
  s.dims = dims;
  s.source = source;
  s.loop_dim = loop_dim;
  s.users.insert(m.def.target.name);
  add_buffer(s.buffer, dims, program_.tensor(load.tensor).dtype, Scope::shared);
  staged_.push_back(s);
  return make_load(s.buffer, local.empty() ? scalar_index() : local, load.loc);
}

int GroupLowering::staged_count(const std::string& tensor) const {
  int n = 0;
  for (auto& s : staged_) n += s.tensor == tensor;
  return n;
}

// Copies of the staged inputs that belong at this loop level (-1: once per block). An inner loop
// belongs to one member's computation: it restages what that member reads (`for_member`), even
// when another member's loop over the same dim staged it before.
void GroupLowering::emit_staging(Block& into, int loop_dim, const std::string& for_member) {
  for (auto& s : staged_) {
    if (s.loop_dim != loop_dim) continue;
    if (for_member.empty() ? s.emitted : !s.users.count(for_member)) continue;
    s.emitted = true;
    CopyNode c;
    c.comment = "stage " + s.tensor;
    std::vector<std::string> axes;
    for (int d : s.dims) {
      c.domain.axes.push_back({dim(d).name, dim(d).tile});
      axes.push_back(dim(d).name);
    }
    c.dst = Access{s.buffer, axis_index(axes)};
    size_t kept = 0;
    for (auto& src : s.source) {
      if (src) c.src.index.push_back(src);
      else {
        int d = s.dims[kept];
        c.src.index.push_back(global_index(d, axes[kept]));
        ++kept;
      }
    }
    c.src.name = s.tensor;
    into.push_back(make_stmt(std::move(c)));
  }
}

GroupLowering::MemberDomain GroupLowering::domain_of(const GroupMember& m) const {
  MemberDomain md;
  const Definition& def = m.def;
  for (size_t i = 0; i < def.target.index.size(); ++i) {
    const std::string& v = def.target.index[i].name;
    md.p_vars.push_back(v);
    if (def.reduce == ReduceOp::topk && !uses_var(def.body, v)) continue;  // the rank
    md.domain.axes.push_back({v, dim(m.p_dims[i]).tile});
    md.domain.guard = conj(md.domain.guard, ragged_guard(m.p_dims[i], v));
  }
  for (size_t i = 0; i < def.reduce_vars.size(); ++i) {
    const std::string& v = def.reduce_vars[i].name;
    md.reduce_axes.push_back({v, dim(m.r_dims[i]).tile});
    md.where = conj(md.where, ragged_guard(m.r_dims[i], v));
  }
  return md;
}

std::string GroupLowering::rank_var(const GroupMember& m) const {
  for (auto& v : m.def.target.index) if (!uses_var(m.def.body, v.name)) return v.name;
  return "";
}

// ---- Members computed whole for the tile (pre, per-tile, post) ----
void GroupLowering::compute_member(Block& into, const GroupMember& m) {
  const Definition& def = m.def;
  MemberDomain md = domain_of(m);
  std::string comment = def.target.name + " = " + (def.reduce == ReduceOp::none ? std::string("") : std::string(reduce_op_name(def.reduce)) + " ") +
                        "(" + std::string(phase_name(m.phase)) + (m.recomputed ? ", recomputed by every block" : "") + ")";
  Scope scope = m.phase == Phase::per_tile ? Scope::shared : Scope::register_file;
  add_buffer(tile_of(def.target.name), m.p_dims, m.dtype, scope);
  Expr value = translate(m, def.body);
  if (def.reduce == ReduceOp::none) {
    MapNode map;
    map.comment = comment;
    map.domain = md.domain;
    map.dst = Access{tile_of(def.target.name), axis_index(md.p_vars)};
    map.value = value;
    into.push_back(make_stmt(std::move(map)));
    return;
  }
  // Accumulate over the reduce axes, looping over inner dims. A sum, product or top-k of a narrow
  // dtype that loops over inner dims accumulates in an f32 tile and is rounded once, after the loops,
  // as the reference rounds it (an accumulator of the member's dtype would round at every step; a
  // top-k would compare later candidates with winners already rounded, and could keep the wrong one).
  bool by_index = def.reduce == ReduceOp::argmax || def.reduce == ReduceOp::argmin;
  bool looped = std::any_of(m.r_dims.begin(), m.r_dims.end(), [&](int d) { return dim(d).role == DimRole::inner; });
  bool widened = !by_index && looped && m.dtype != DType::f32 &&
                 (def.reduce == ReduceOp::sum || def.reduce == ReduceOp::prod || def.reduce == ReduceOp::topk);
  std::string value_buffer = by_index ? "val_" + def.target.name
                             : widened ? internal_name("f32", def.target.name, tile_of(def.target.name) + "_f32") : tile_of(def.target.name);
  if (by_index || widened) add_buffer(value_buffer, m.p_dims, DType::f32, Scope::register_file);
  std::string index_buffer = by_index ? tile_of(def.target.name) : def.index_target ? tile_of(def.index_target->name) : "";
  if (def.index_target) add_buffer(index_buffer, m.p_dims, DType::i32, scope);
  FillNode fill;
  fill.comment = comment;
  fill.buffer = value_buffer;
  fill.value = identity_of(def.reduce);
  into.push_back(make_stmt(std::move(fill)));
  if (widened) {  // the tile's points outside the ragged guard hold the identity, as without widening
    FillNode tile;
    tile.buffer = tile_of(def.target.name);
    tile.value = identity_of(def.reduce);
    into.push_back(make_stmt(std::move(tile)));
  }
  if (!index_buffer.empty()) {
    FillNode fi;
    fi.buffer = index_buffer;
    fi.value = -1;
    into.push_back(make_stmt(std::move(fi)));
  }
  ReduceNode r;
  r.op = def.reduce;
  r.domain = md.domain;
  r.reduce_axes = md.reduce_axes;
  r.where = md.where;
  r.accumulate = true;
  r.dst = Access{value_buffer, axis_index(md.p_vars)};
  r.value = value;
  if (!index_buffer.empty()) {
    r.index_dst = Access{index_buffer, axis_index(md.p_vars)};
    r.index_value = global_index(m.r_dims[0], def.reduce_vars[0].name);
  }
  if (def.reduce == ReduceOp::topk) {
    r.k = dim(m.p_dims[static_cast<size_t>(std::find_if(def.target.index.begin(), def.target.index.end(), [&](auto& v) { return v.name == rank_var(m); }) - def.target.index.begin())]).extent;
    r.rank_var = rank_var(m);
  }
  Block body{make_stmt(std::move(r))};
  // Wrap in loops over the member's inner dims, restaging their inputs each iteration.
  for (size_t i = m.r_dims.size(); i-- > 0;) {
    int d = m.r_dims[i];
    if (dim(d).role != DimRole::inner) continue;
    Block loop_body;
    emit_staging(loop_body, d, def.target.name);
    for (auto& s : body) loop_body.push_back(s);
    ForNode loop;
    loop.var = tile_var_.at(d);
    loop.begin = make_int(0);
    loop.end = make_int(dim(d).tiles());
    loop.body = std::move(loop_body);
    body = Block{make_stmt(std::move(loop))};
  }
  for (auto& s : body) into.push_back(s);
  if (widened) {
    CopyNode round;
    round.comment = def.target.name + " rounded once to " + std::string(dtype_name(m.dtype)) + " after the loop";
    round.domain = md.domain;
    if (def.reduce == ReduceOp::topk) {  // every rank
      std::string rank = rank_var(m);
      for (size_t i = 0; i < def.target.index.size(); ++i)
        if (def.target.index[i].name == rank) round.domain.axes.insert(round.domain.axes.begin() + static_cast<std::ptrdiff_t>(i), Axis{rank, dim(m.p_dims[i]).tile});
    }
    round.dst = Access{tile_of(def.target.name), axis_index(md.p_vars)};
    round.src = Access{value_buffer, axis_index(md.p_vars)};
    into.push_back(make_stmt(std::move(round)));
  }
}

}  // namespace solder::fused
