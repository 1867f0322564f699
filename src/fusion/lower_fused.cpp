#include "fusion/lower_fused.h"

// The fused lowering (group_lowering.h): kernels, buffers, index arithmetic, exports.
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

// ---- Index arithmetic ----
Expr GroupLowering::base(int d) const {
  const GroupDim& g = dim(d);
  switch (g.role) {
    case DimRole::resident: return make_int(0);
    case DimRole::stream: return merge_kernel_ ? make_int(0) : mul(make_var(stream_var_), make_int(g.tile));
    case DimRole::grid:
    case DimRole::inner: {
      auto it = tile_var_.find(d);
      if (it == tile_var_.end()) return make_int(0);
      return g.tile == 1 ? make_var(it->second) : mul(make_var(it->second), make_int(g.tile));
    }
  }
  return make_int(0);
}

Expr GroupLowering::ragged_guard(int d, const std::string& var) const {
  const GroupDim& g = dim(d);
  if (g.role == DimRole::resident || !g.ragged()) return {};
  return lt(global_index(d, var), make_int(g.extent));
}

// ---- Buffers ----
// ---- Names ----
void GroupLowering::reserve_program_names() {
  names_ = InternalNames(program_);
  // Members are inlined: their bodies may hold variables the program's definitions do not.
  for (auto& m : plan_.members) {
    names_.reserve_definition(m.def);
    const Decomposition& d = m.decomposition;
    for (const Expr& e : {d.online_term, d.h_deferred, d.h_online, d.d_load}) names_.reserve_names_in(e);
    for (auto& t : d.taylor) names_.reserve_names_in(t);
  }
}

void GroupLowering::add_buffer(const std::string& name, const std::vector<int>& dims, DType dtype, Scope scope, std::vector<int64_t> extra) {
  if (kernel_.find_buffer(name)) return;
  Buffer b{name, {}, dtype, scope};
  for (int d : dims) b.shape.push_back(dim(d).tile);
  for (int64_t e : extra) b.shape.push_back(e);
  if (b.shape.empty()) b.shape.push_back(1);
  kernel_.buffers.push_back(b);
  buffer_dims_[name] = dims;
}

std::vector<Expr> GroupLowering::axis_index(const std::vector<std::string>& vars) const {
  std::vector<Expr> idx;
  for (auto& v : vars) idx.push_back(make_var(v));
  if (idx.empty()) idx = scalar_index();
  return idx;
}

// ---- Exports ----
void GroupLowering::export_member(Block& into, const GroupMember& m) {
  if (!m.exported) return;
  MemberDomain md = domain_of(m);
  auto store = [&](const std::string& name) {
    CopyNode c;
    c.comment = "store " + name;
    for (size_t i = 0; i < m.def.target.index.size(); ++i) c.domain.axes.push_back({m.def.target.index[i].name, dim(m.p_dims[i]).tile});
    c.domain.guard = md.domain.guard;
    c.dst.name = name;
    for (size_t i = 0; i < m.def.target.index.size(); ++i) c.dst.index.push_back(global_index(m.p_dims[i], m.def.target.index[i].name));
    c.src = Access{tile_of(name), axis_index(md.p_vars)};
    into.push_back(make_stmt(std::move(c)));
  };
  // Only what another kernel reads or the program outputs: an unused topk index or value stays on chip.
  if (m.value_exported) store(m.def.target.name);
  if (m.def.index_target && m.index_exported) store(m.def.index_target->name);
}

// ---- Kernels ----
void GroupLowering::start_kernel(const std::string& name) {
  kernel_ = Kernel{};
  kernel_.name = name;
  buffer_dims_.clear();
  staged_.clear();
  for (auto& m : plan_.members) {
    kernel_.definitions.push_back(m.def.target.name);
    if (m.def.index_target) kernel_.definitions.push_back(m.def.index_target->name);
  }
  for (int g : plan_.grid_dims())
    if (tile_var_.count(g)) kernel_.grid.push_back({tile_var_.at(g), dim(g).tiles()});
}

void GroupLowering::finish_kernel() {
  if (kernel_.grid.empty()) kernel_.grid.push_back({internal_name("block", "", "block"), 1});
  kernels_.push_back(std::move(kernel_));
}

int64_t GroupLowering::segment_tiles() const {
  const GroupDim& st = dim(plan_.stream);
  return (st.tiles() + plan_.segments - 1) / plan_.segments;
}

// Translates every expression the kernel will emit once, so that staging is known up front.
void GroupLowering::discover_staging(bool loop_part, bool post_part) {
  std::map<std::string, std::string> none;
  for (auto& m : plan_.members) {
    bool in_loop = m.phase == Phase::per_tile || m.phase == Phase::cascade;
    if (m.phase == Phase::pre && !loop_part && !post_part) continue;
    if (m.phase == Phase::post && !post_part) continue;
    if (in_loop && !loop_part) continue;
    translate(m, m.def.body);
    if (m.phase == Phase::cascade) {
      const Decomposition& d = m.decomposition;
      for (const Expr& e : {d.online_term, d.h_deferred}) if (e) translate(m, e);
      for (auto& t : d.taylor) translate(m, t);
    }
  }
}

void GroupLowering::build_main_kernel(bool segmented) {
  segmented_ = segmented;
  merge_kernel_ = false;
  start_kernel(name_);
  if (segmented) kernel_.grid.push_back({seg_var(), plan_.segments});
  if (segmented && cluster_merge_) kernel_.cluster = plan_.segments;
  // Register buffers for members first, so loads resolve to tiles, then discover staging.
  for (auto& m : plan_.members)
    if (m.phase != Phase::post || !segmented || cluster_merge_) add_buffer(tile_of(m.def.target.name), m.p_dims, m.dtype, m.phase == Phase::per_tile ? Scope::shared : Scope::register_file);
  discover_staging(true, !segmented || cluster_merge_);
  Block& body = kernel_.body;
  emit_staging(body, -1);
  for (auto& m : plan_.members) {
    if (m.phase != Phase::pre) continue;
    compute_member(body, m);
    if (!segmented) export_member(body, m);
    else if (m.exported) {
      IfNode first;
      first.cond = make_binary(BinaryOp::eq, make_var(seg_var()), make_int(0));
      export_member(first.then_body, m);
      body.push_back(make_stmt(std::move(first)));
    }
  }
  if (plan_.stream >= 0) {
    for (auto& m : plan_.members) if (m.phase == Phase::cascade) init_cascade(body, m);
    for (auto& t : old_copies_needed()) {
      const GroupMember* x = plan_.member(t);
      add_buffer(old_of(t), x->p_dims, DType::f32, Scope::register_file);
    }
    Block loop;
    emit_staging(loop, plan_.stream);
    for (auto& [d, v] : tile_var_) (void)v;
    for (size_t d = 0; d < plan_.dims.size(); ++d)
      if (dim(static_cast<int>(d)).role == DimRole::stream && static_cast<int>(d) != plan_.stream) emit_staging(loop, static_cast<int>(d));
    for (auto& m : plan_.members) if (m.phase == Phase::per_tile) compute_member(loop, m);
    for (auto& t : old_copies_needed()) {
      const GroupMember* x = plan_.member(t);
      MemberDomain xd = domain_of(*x);
      CopyNode c;
      c.comment = "remember " + t + " before this tile";
      c.domain = xd.domain;
      c.dst = Access{old_of(t), axis_index(xd.p_vars)};
      c.src = Access{tile_of(t), axis_index(xd.p_vars)};
      loop.push_back(make_stmt(std::move(c)));
    }
    for (auto& m : plan_.members) if (m.phase == Phase::cascade) update_cascade(loop, m);
    ForNode f;
    const GroupDim& st = dim(plan_.stream);
    f.comment = "stream " + st.name + " in tiles of " + std::to_string(st.tile) +
                (segmented ? ", this block's segment of " + std::to_string(segment_tiles()) + " tiles" : "");
    f.var = stream_var_;
    if (segmented) {
      Expr first = mul(make_var(seg_var()), make_int(segment_tiles()));
      f.begin = first;
      f.end = make_binary(BinaryOp::min, add(first, make_int(segment_tiles())), make_int(st.tiles()));
    } else {
      f.begin = make_int(0);
      f.end = make_int(st.tiles());
    }
    f.body = std::move(loop);
    body.push_back(make_stmt(std::move(f)));
    if (segmented && cluster_merge_) {
      merge_in_cluster(body);
      IfNode leader;
      leader.comment = "the segments now agree; the first block of each cluster finishes";
      leader.cond = make_binary(BinaryOp::eq, make_var(seg_var()), make_int(0));
      for (auto& m : plan_.members) if (m.phase == Phase::cascade) export_member(leader.then_body, m);
      post_members(leader.then_body);
      body.push_back(make_stmt(std::move(leader)));
      finish_kernel();
      return;
    }
    if (segmented) {
      write_partials(body);
      finish_kernel();
      return;
    }
    for (auto& m : plan_.members) {
      if (m.phase != Phase::cascade) continue;
      finalize_cascade(body, m);
      export_member(body, m);
    }
  }
  post_members(body);
  finish_kernel();
}

// The post members (computed from finished reductions) and their exports.
void GroupLowering::post_members(Block& into) {
  for (auto& m : plan_.members) {
    if (m.phase != Phase::post) continue;
    compute_member(into, m);
    export_member(into, m);
  }
}

}  // namespace solder::fused

namespace solder {

LoweredGroup lower_group(const BoundProgram& program, const GroupPlan& plan, const std::string& name) {
  fused::GroupLowering lowering(program, plan, name);
  return lowering.run();
}

}  // namespace solder
