// The fused lowering (group_lowering.h): a stream split into segments across blocks; the partial
// states go to scratch and a second kernel, or merge through DSM within a cluster.
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

std::vector<GroupLowering::Partial> GroupLowering::partial_buffers() const {
  std::vector<Partial> out;
  for (auto& m : plan_.members) {
    if (m.phase != Phase::cascade) continue;
    if (m.decomposition.kind == Decomposition::Kind::polynomial) {
      PolynomialState s = polynomial_state(m);
      for (size_t k = 0; k < m.decomposition.taylor.size(); ++k) out.push_back({taylor(m, k), s.dims, {}});
      out.push_back({center(m), s.dims, {}});
      continue;
    }
    out.push_back({acc(m), m.p_dims, {}});
    if (keeps_index(m)) out.push_back({acc_index(m), m.p_dims, {}});
    out.push_back({tile_of(m.def.target.name), m.p_dims, {}});  // the segment's value, for ratios
  }
  return out;
}

void GroupLowering::write_partials(Block& body) {
  for (auto& m : plan_.members)
    if (m.phase == Phase::cascade && m.decomposition.kind != Decomposition::Kind::polynomial) refresh_value(body, m);
  for (auto& p : partial_buffers()) {
    GlobalTensor g{partial_name(p.buffer), {plan_.segments}, DType::f32, GlobalRole::scratch};
    for (int d : p.dims) g.shape.push_back(dim(d).extent);
    scratch_.push_back(g);
    CopyNode c;
    c.comment = "this segment's partial " + p.buffer;
    std::vector<std::string> axes;
    for (int d : p.dims) {
      c.domain.axes.push_back({dim(d).name, dim(d).tile});
      axes.push_back(dim(d).name);
      c.domain.guard = conj(c.domain.guard, ragged_guard(d, dim(d).name));
    }
    c.dst.name = g.name;
    c.dst.index.push_back(make_var(seg_var()));
    for (size_t k = 0; k < p.dims.size(); ++k) c.dst.index.push_back(global_index(p.dims[k], axes[k]));
    c.src = Access{p.buffer, axis_index(axes)};
    body.push_back(make_stmt(std::move(c)));
  }
}

// A load of the segment partial of `buffer` for member m, at segment `seg_part`.
Expr GroupLowering::partial_load(const GroupMember& m, const std::string& buffer, const LoadNode& load) {
  const GroupMember* x = plan_.member(buffer);
  std::vector<Expr> idx{make_var(seg_part_var())};
  for (size_t k = 0; k < load.index.size(); ++k) {
    Translator t;
    t.self = this;
    t.m = &m;
    std::map<std::string, std::string> none;
    t.renamed = &none;
    idx.push_back(t.mutate(load.index[k]));
  }
  (void)x;
  return make_load(partial_name(tile_of(buffer)), idx, load.loc);
}

Expr GroupLowering::partial_at(const std::string& buffer, const std::vector<int>& dims, const std::vector<std::string>& vars) {
  std::vector<Expr> idx{make_var(seg_part_var())};
  for (size_t k = 0; k < dims.size(); ++k) idx.push_back(global_index(dims[k], vars[k]));
  return make_load(partial_name(buffer), idx);
}

// ---- Multi-segment within a cluster: merge the segments' states through DSM ----
// Every block holds its segment's state. In cascade order: combine the independent and additive
// states with a cluster reduction (or a gather and a local selection for arg- and top-k); rescale a
// multiplicative state from its segment's D to the merged D, then sum it across the cluster; shift
// a polynomial state's centre to the merged D, then sum its zeroth term. Afterwards every block
// holds the final values.
void GroupLowering::cluster_reduce_buffer(Block& into, const std::string& buffer, const std::vector<int>& dims, ReduceOp op,
                           const std::string& comment) {
  // A copy, not a pointer: the push_back below may move kernel_.buffers.
  const Buffer b = *kernel_.find_buffer(buffer);
  std::string shared = internal_name("dsm", buffer, "dsm_" + buffer);
  if (!kernel_.find_buffer(shared)) {
    Buffer d = b;
    d.name = shared;
    d.scope = Scope::cluster;
    d.dtype = DType::f32;
    kernel_.buffers.push_back(d);
  }
  Domain all;
  std::vector<std::string> vars;
  for (size_t k = 0; k < b.shape.size(); ++k) {
    all.axes.push_back({element_var(k), b.shape[k]});
    vars.push_back(element_var(k));
  }
  CopyNode to;
  to.comment = comment;
  to.domain = all;
  to.dst = Access{shared, axis_index(vars)};
  to.src = Access{buffer, axis_index(vars)};
  into.push_back(make_stmt(std::move(to)));
  ClusterReduceNode r;
  r.op = op;
  r.buffer = shared;
  into.push_back(make_stmt(std::move(r)));
  CopyNode back;
  back.domain = all;
  back.dst = Access{buffer, axis_index(vars)};
  back.src = Access{shared, axis_index(vars)};
  into.push_back(make_stmt(std::move(back)));
  (void)dims;
}

void GroupLowering::merge_in_cluster(Block& body) {
  const int S = plan_.segments;
  // Each segment's values of the results later members depend on, before they are merged.
  std::set<std::string> d_members;
  for (auto& m : plan_.members)
    if (m.phase == Phase::cascade && m.decomposition.h_online)
      for (auto& t : tensors_used(m.decomposition.h_online)) d_members.insert(t);
  for (auto& m : plan_.members)
    if (m.phase == Phase::cascade && m.decomposition.kind != Decomposition::Kind::polynomial) refresh_value(body, m);
  std::map<std::string, std::string> segment_names;
  for (auto& t : d_members) {
    const GroupMember* x = plan_.member(t);
    MemberDomain xd = domain_of(*x);
    add_buffer(segment_of(t), x->p_dims, DType::f32, Scope::register_file);
    CopyNode c;
    c.comment = "this segment's " + t + ", before the segments are merged";
    c.domain = xd.domain;
    c.dst = Access{segment_of(t), axis_index(xd.p_vars)};
    c.src = Access{tile_of(t), axis_index(xd.p_vars)};
    body.push_back(make_stmt(std::move(c)));
    segment_names[t] = segment_of(t);
  }
  for (auto& y : plan_.members) {
    if (y.phase != Phase::cascade) continue;
    const Definition& def = y.def;
    const Decomposition& dec = y.decomposition;
    MemberDomain md = domain_of(y);
    std::string comment = def.target.name + ": merge the " + std::to_string(S) + " segments of the cluster (" +
                          std::string(decomposition_kind_name(dec.kind)) + ")";
    if (dec.kind == Decomposition::Kind::polynomial) {
      update_polynomial(body, y, /*final=*/true);  // shift to the merged D
      PolynomialState st = polynomial_state(y);
      cluster_reduce_buffer(body, taylor(y, 0), st.dims, ReduceOp::sum, comment);
      finalize_cascade_value_only(body, y);
      continue;
    }
    if (selects(def.reduce)) {
      merge_selection_in_cluster(body, y, comment);
      refresh_value(body, y);
      continue;
    }
    if (dec.kind == Decomposition::Kind::multiplicative && dec.h_online) {
      MapNode rescale;
      rescale.comment = comment + ": rescale to the merged values";
      rescale.domain = md.domain;
      rescale.dst = Access{acc(y), axis_index(md.p_vars)};
      rescale.value = rescaled(y, make_load(acc(y), axis_index(md.p_vars)), segment_names);
      body.push_back(make_stmt(std::move(rescale)));
    }
    ReduceOp op = def.reduce == ReduceOp::prod ? ReduceOp::sum : def.reduce;
    if (def.reduce == ReduceOp::prod) throw Error("fusion: a product over a split stream is not supported");
    cluster_reduce_buffer(body, acc(y), y.p_dims, op, comment);
    refresh_value(body, y);
  }
  (void)S;
}

// argmax / argmin / topk across the cluster: gather every segment's candidates, select locally.
void GroupLowering::merge_selection_in_cluster(Block& body, const GroupMember& y, const std::string& comment) {
  const Definition& def = y.def;
  MemberDomain md = domain_of(y);
  const int S = plan_.segments;
  bool has_index = keeps_index(y);
  std::vector<std::string> sources{acc(y)};
  if (has_index) sources.push_back(acc_index(y));
  for (auto& src : sources) {
    Buffer mine = *kernel_.find_buffer(src);  // a copy: the push_backs below may move kernel_.buffers
    mine.name = internal_name("dsm", src, "dsm_" + src);
    mine.scope = Scope::cluster;
    mine.dtype = DType::f32;
    Buffer all = mine;
    all.name = internal_name("gathered", src, "gathered_" + src);
    all.shape.insert(all.shape.begin(), S);
    if (!kernel_.find_buffer(mine.name)) kernel_.buffers.push_back(mine);
    if (!kernel_.find_buffer(all.name)) kernel_.buffers.push_back(all);
    Domain d;
    std::vector<std::string> vars;
    for (size_t k = 0; k < mine.shape.size(); ++k) {
      d.axes.push_back({element_var(k), mine.shape[k]});
      vars.push_back(element_var(k));
    }
    CopyNode c;
    c.comment = src == acc(y) ? comment : "";
    c.domain = d;
    c.dst = Access{mine.name, axis_index(vars)};
    c.src = Access{src, axis_index(vars)};
    body.push_back(make_stmt(std::move(c)));
    ClusterGatherNode g;
    g.src = mine.name;
    g.dst = all.name;
    body.push_back(make_stmt(std::move(g)));
  }
  reset_accumulator(body, y, "");
  ReduceNode r;
  r.op = def.reduce;
  r.domain = md.domain;
  r.accumulate = true;
  r.dst = Access{acc(y), axis_index(md.p_vars)};
  Axis seg_axis{seg_part_var(), S};
  std::vector<std::string> vars_in = md.p_vars;
  if (def.reduce == ReduceOp::topk) {
    std::string rank = rank_var(y);
    size_t pos = static_cast<size_t>(std::find(md.p_vars.begin(), md.p_vars.end(), rank) - md.p_vars.begin());
    vars_in[pos] = rank_in_var(rank);
    r.reduce_axes = {seg_axis, {rank_in_var(rank), dim(y.p_dims[pos]).tile}};
    r.rank_var = rank;
    r.k = dim(y.p_dims[pos]).extent;
  } else {
    r.reduce_axes = {seg_axis};
  }
  std::vector<Expr> gathered{make_var(seg_part_var())};
  for (auto& v : vars_in) gathered.push_back(make_var(v));
  r.value = make_load(internal_name("gathered", acc(y), "gathered_" + acc(y)), gathered);
  if (has_index) {
    r.index_dst = Access{acc_index(y), axis_index(md.p_vars)};
    r.index_value = make_load(internal_name("gathered", acc_index(y), "gathered_" + acc_index(y)), gathered);
  }
  body.push_back(make_stmt(std::move(r)));
}

// The final value of a polynomial member from its zeroth Taylor state (already at the final centre).
void GroupLowering::finalize_cascade_value_only(Block& into, const GroupMember& y) {
  PolynomialState s = polynomial_state(y);
  MemberDomain md = domain_of(y);
  if (s.extra_axes.empty()) {
    CopyNode c;
    c.comment = y.def.target.name + " = its zeroth Taylor state at the final centre";
    c.domain = md.domain;
    c.dst = Access{tile_of(y.def.target.name), axis_index(md.p_vars)};
    c.src = Access{taylor(y, 0), axis_index(s.vars)};
    into.push_back(make_stmt(std::move(c)));
    return;
  }
  ReduceNode r;
  r.comment = y.def.target.name + " = the zeroth Taylor states at the final centres, summed";
  r.op = ReduceOp::sum;
  r.domain = md.domain;
  r.reduce_axes = s.extra_axes;
  for (size_t i = 0; i < y.def.reduce_vars.size(); ++i)
    if (std::find_if(s.extra_axes.begin(), s.extra_axes.end(), [&](auto& a) { return a.var == y.def.reduce_vars[i].name; }) != s.extra_axes.end())
      r.where = conj(r.where, ragged_guard(y.r_dims[i], y.def.reduce_vars[i].name));
  r.dst = Access{tile_of(y.def.target.name), axis_index(md.p_vars)};
  r.value = make_load(taylor(y, 0), axis_index(s.vars));
  into.push_back(make_stmt(std::move(r)));
}

void GroupLowering::build_merge_kernel() {
  merge_kernel_ = true;
  start_kernel(name_ + "_merge");
  for (auto& m : plan_.members)
    if (m.phase == Phase::cascade || m.phase == Phase::post) add_buffer(tile_of(m.def.target.name), m.p_dims, m.dtype, Scope::register_file);
  discover_staging(false, true);
  Block& body = kernel_.body;
  emit_staging(body, -1);
  Axis seg_axis{seg_part_var(), plan_.segments};
  for (auto& y : plan_.members) {
    if (y.phase != Phase::cascade) continue;
    const Definition& def = y.def;
    const Decomposition& dec = y.decomposition;
    MemberDomain md = domain_of(y);
    std::string comment = def.target.name + ": merge the " + std::to_string(plan_.segments) + " segments (" +
                          std::string(decomposition_kind_name(dec.kind)) + ")";
    if (dec.kind == Decomposition::Kind::polynomial) {
      PolynomialState s = polynomial_state(y);
      add_buffer(taylor(y, 0), s.dims, DType::f32, Scope::register_file);
      Expr delta = make_binary(BinaryOp::sub, translate(y, dec.d_load), partial_at(center(y), s.dims, s.vars));
      Expr value = partial_at(taylor(y, 0), s.dims, s.vars);
      for (size_t k = 1; k < dec.taylor.size(); ++k)
        value = add(value, mul(k == 1 ? delta : make_binary(BinaryOp::pow, delta, make_const(static_cast<double>(k))),
                               partial_at(taylor(y, k), s.dims, s.vars)));
      ReduceNode r;
      r.comment = comment + ": shift every segment's Taylor states to the final centre";
      r.op = ReduceOp::sum;
      r.domain = Domain{s.axes, s.guard};
      r.reduce_axes = {seg_axis};
      r.dst = Access{taylor(y, 0), axis_index(s.vars)};
      r.value = value;
      body.push_back(make_stmt(std::move(r)));
      finalize_cascade_value_only(body, y);
      export_member(body, y);
      continue;
    }
    add_buffer(acc(y), y.p_dims, DType::f32, Scope::register_file);
    bool has_index = keeps_index(y);
    if (has_index) add_buffer(acc_index(y), y.p_dims, DType::f32, Scope::register_file);
    if (def.index_target) add_buffer(tile_of(def.index_target->name), y.p_dims, DType::i32, Scope::register_file);
    reset_accumulator(body, y, comment);
    ReduceNode r;
    r.op = def.reduce;
    r.domain = md.domain;
    r.accumulate = true;
    r.dst = Access{acc(y), axis_index(md.p_vars)};
    Expr part = partial_at(acc(y), y.p_dims, md.p_vars);
    if (def.reduce == ReduceOp::topk) {
      // Merge the k-lists of every segment: reduce over (segment, rank of the segment's list).
      std::string rank = rank_var(y);
      std::string rank_in = rank_in_var(rank);
      size_t pos = static_cast<size_t>(std::find_if(def.target.index.begin(), def.target.index.end(), [&](auto& v) { return v.name == rank; }) - def.target.index.begin());
      std::vector<std::string> vars_in = md.p_vars;
      vars_in[pos] = rank_in;
      r.reduce_axes = {seg_axis, {rank_in, dim(y.p_dims[pos]).extent}};
      r.value = partial_at(acc(y), y.p_dims, vars_in);
      r.rank_var = rank;
      r.k = dim(y.p_dims[pos]).extent;
      if (has_index) {
        r.index_dst = Access{acc_index(y), axis_index(md.p_vars)};
        r.index_value = partial_at(acc_index(y), y.p_dims, vars_in);
      }
    } else {
      r.reduce_axes = {seg_axis};
      if (dec.kind == Decomposition::Kind::multiplicative && dec.h_online) {
        std::map<std::string, std::string> before;
        for (auto& t : tensors_used(dec.h_online)) before[t] = "@part:" + t;
        r.value = rescaled(y, part, before);
      } else {
        r.value = part;
      }
      if (has_index) {
        r.index_dst = Access{acc_index(y), axis_index(md.p_vars)};
        r.index_value = partial_at(acc_index(y), y.p_dims, md.p_vars);
      }
    }
    body.push_back(make_stmt(std::move(r)));
    refresh_value(body, y);
    export_member(body, y);
  }
  post_members(body);
  finish_kernel();
}

}  // namespace solder::fused
