// The statements of a tensor-core kernel over register fragments (mma_stream_writer.h): maps and
// reductions per row and per fragment element, the two contractions on tensor cores, stores.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "backend/cuda/mma_stream_writer.h"
#include "ir/diagnostics.h"
#include "ir/printer.h"

namespace solder::mma_stream {

void MmaStreamWriter::emit_statement(std::ostringstream& out, const Stmt& s, int ind) {
  switch (s.kind()) {
    case StmtKind::Fill: {
      auto f = s.as<FillNode>();
      Role r = roles_.at(f->buffer);
      std::string v = cuda_float_literal(f->value), name = cuda_identifier(f->buffer);
      if (r == Role::row) out << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) " << name << "[rs] = " << v << ";  // fill " << f->buffer << "\n";
      else if (r == Role::wide) out << pad(ind) << "for (int nt = 0; nt < " << G_ * DV_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << name << "[nt][e] = " << v << ";  // fill " << f->buffer << "\n";
      else if (r == Role::scores) return;  // the contraction starts from zero
      else refuse("a fill of shared tile " + f->buffer);
      invalidate(f->buffer);
      return;
    }
    case StmtKind::Copy: {
      auto c = s.as<CopyNode>();
      if (c->dst.name == A_ && s.kind() == StmtKind::Copy) {
        emit_stage(out, *c, A_, ind);
        if (wgmma_) emit_a_wgmma(out, ind);
        else emit_a_fragments(out, ind);
        return;
      }
      if (!kernel_.find_buffer(c->dst.name)) { emit_store(out, c->domain, c->dst, make_load(c->src.name, c->src.index), ind); return; }
      emit_map(out, c->domain, c->dst, make_load(c->src.name, c->src.index), ind);
      return;
    }
    case StmtKind::Map: {
      auto m = s.as<MapNode>();
      if (!kernel_.find_buffer(m->dst.name)) { emit_store(out, m->domain, m->dst, m->value, ind); return; }
      emit_map(out, m->domain, m->dst, m->value, ind);
      return;
    }
    case StmtKind::Reduce: emit_row_reduce(out, *s.as<ReduceNode>(), ind); return;
    default: refuse("statement kind");
  }
}

Expr MmaStreamWriter::hoist_row_invariants(std::ostringstream& out, const Expr& e, const Binding& b, int ind) {
  auto row_only = [&](const Expr& x) {
    if (uses_var(x, b.col)) return false;
    for (auto& t : tensors_used(x))
      if (roles_.count(t) && roles_.at(t) != Role::row) return false;
    return true;
  };
  bool trivial = e.kind() == ExprKind::Load || e.kind() == ExprKind::Const || e.kind() == ExprKind::Var || e.kind() == ExprKind::DimRef;
  if (trivial || !row_only(e)) goto recurse;
  {
    Binding rows = b;
    rows.col.clear();
    ValueType type = printer_.type(to_registers(e, rows));
    if (type == ValueType::integer) goto recurse;
    std::string name = "row_value" + std::to_string(hoisted_++);
    out << pad(ind) << "float " << name << "[" << 2 * G_ << "];\n" << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) { " << bind(rows)
        << name << "[rs] = " << (type == ValueType::boolean ? "(" + element_text_bool(e, rows) + ") ? 1.0f : 0.0f" : element_text(e, rows)) << "; }\n";
    std::string pseudo = "(&" + name + "[rs])";
    arrays_[pseudo] = CudaArray{pseudo, {}, type == ValueType::boolean ? DType::boolean : DType::f32, false};
    pseudo_rows_[pseudo] = name;
    return make_load(pseudo, {});
  }
recurse:
  if (e.kind() == ExprKind::Load) return e;
  return map_children(e, [&](const Expr& c) { return hoist_row_invariants(out, c, b, ind); });
}

void MmaStreamWriter::emit_map(std::ostringstream& out, const Domain& domain, const Access& dst, const Expr& value, int ind) {
  auto it = roles_.find(dst.name);
  if (it != roles_.end() && it->second == Role::scalar) {
    if (domain.guard.defined()) refuse("a guarded write of scalar " + dst.name);
    Binding none;
    out << pad(ind) << "{ const int rs = 0; (void)rs; ";
    for (auto& a : domain.axes) out << "const long long " << cuda_identifier(a.var) << " = 0; (void)" << cuda_identifier(a.var) << "; ";
    out << cuda_identifier(dst.name) << "[0] = " << round_function(kernel_.find_buffer(dst.name)->dtype) << "(" << element_text(value, none) << "); }  // " << dst.name << "\n";
    invalidate(dst.name);
    return;
  }
  if (it == roles_.end() || (it->second != Role::row && it->second != Role::wide)) refuse("a map into " + dst.name);
  bool wide = it->second == Role::wide;
  Binding b = binding_of(domain, {}, wide);
  if (!index_matches(dst.index, b, wide)) refuse("a map whose destination is not indexed by its domain");
  std::string name = cuda_identifier(dst.name), round = round_function(kernel_.find_buffer(dst.name)->dtype);
  out << pad(ind) << "// " << dst.name << " = " << print_expr(value) << "\n";
  Expr element = wide ? hoist_row_invariants(out, value, b, ind) : value;
  if (wide) {
    std::string guard = when(guard_of(domain, b));
    // select(row condition, x, y): when the condition holds on every row of this thread (all tiles but the
    // first, for the online softmax's rescale), the elements take x without a select each; the same values.
    auto select = element.as<SelectNode>();
    auto cond = select && select->cond.kind() == ExprKind::Load ? select->cond.as<LoadNode>() : nullptr;
    if (cond && pseudo_rows_.count(cond->tensor)) {
      std::string rows = pseudo_rows_.at(cond->tensor), all;
      for (int rs = 0; rs < 2 * G_; ++rs) all += (rs ? " && " : "") + rows + "[" + std::to_string(rs) + "] != 0.0f";
      out << pad(ind) << "if (" << all << ") {  // the condition holds on every row: no select per element\n";
      for_each_element(out, ind + 1, false, b, guard + name + "[nt][e] = " + round + "(" + element_text(select->if_true, b) + ");");
      out << pad(ind) << "} else {\n";
      for_each_element(out, ind + 1, false, b, guard + name + "[nt][e] = " + round + "(" + element_text(element, b) + ");");
      out << pad(ind) << "}\n";
    } else {
      for_each_element(out, ind, false, b, guard + name + "[nt][e] = " + round + "(" + element_text(element, b) + ");");
    }
  } else {
    out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) { " << bind(b) << "\n";
    out << pad(ind + 1) << when(guard_of(domain, b)) << name << "[rs] = " << round << "(" << element_text(value, b) << "); }\n";
  }
  invalidate(dst.name);
}

// A row state combined over the columns of the scores (or, for the scores, the contraction).
void MmaStreamWriter::emit_row_reduce(std::ostringstream& out, const ReduceNode& r, int ind) {
  if (&r == scores_) { emit_scores(out, ind); return; }
  if (&r == pv_) { emit_second_contraction(out, ind); return; }
  auto it = roles_.find(r.dst.name);
  if (it == roles_.end() || it->second != Role::row) refuse("a reduction into " + r.dst.name + " (only row states)");
  if (r.op != ReduceOp::sum && r.op != ReduceOp::max && r.op != ReduceOp::min) refuse("a " + std::string(reduce_op_name(r.op)) + " reduction");
  Binding b = binding_of(r.domain, r.reduce_axes, false);
  if (!index_matches(r.dst.index, b, false)) refuse("a reduction whose destination is not indexed by its domain");
  std::string identity = r.op == ReduceOp::sum ? "0.0f" : r.op == ReduceOp::max ? "(-solder::infinity())" : "solder::infinity()";
  auto combine = [&](const std::string& x, const std::string& y) {
    return r.op == ReduceOp::sum ? x + " + " + y : (r.op == ReduceOp::max ? "solder::max_nan(" : "solder::min_nan(") + x + ", " + y + ")";
  };
  std::string quad = r.op == ReduceOp::sum ? "solder::tile::quad_sum" : r.op == ReduceOp::max ? "solder::tile::quad_max" : "solder::tile::quad_min";
  std::string value = element_text(r.value, b);
  bool keep = r.op == ReduceOp::sum && !r.where.defined() && !r.domain.guard.defined() && value == element_text(p_value_, p_binding());
  std::string name = cuda_identifier(r.dst.name), round = round_function(kernel_.find_buffer(r.dst.name)->dtype);
  out << pad(ind) << "// " << r.dst.name << " " << reduce_op_name(r.op) << "= over " << b.col << ": " << print_expr(r.value) << "\n";
  out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) {\n";
  out << pad(ind + 1) << "float part = " << identity << ";\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int n = 0; n < " << BN_ / 8 << "; ++n) { const int nt = (rs >> 1) * " << BN_ / 8 << " + n;\n";
  out << pad(ind + 2) << "#pragma unroll\n" << pad(ind + 2) << "for (int e2 = 0; e2 < 2; ++e2) { const int e = (rs & 1) * 2 + e2; " << bind(b) << "\n";
  std::string where = r.where.defined() ? element_text(r.where, b) : "";
  out << pad(ind + 3) << "const float v = " << value << ";";
  if (keep) out << " p_frag[nt][e] = v;";
  out << "\n";
  if (!where.empty()) out << pad(ind + 3) << "if (" << where << ") ";
  else out << pad(ind + 3);
  out << "part = " << combine("part", "v") << "; }\n";
  out << pad(ind + 1) << "}\n";
  out << pad(ind + 1) << "part = " << quad << "(part);\n";
  Binding rows = b;
  rows.col.clear();
  out << pad(ind + 1) << "{ " << bind(rows) << when(guard_of(r.domain, rows)) << name << "[rs] = " << round << "(" << (r.accumulate ? combine(name + "[rs]", "part") : "part") << "); }\n";
  out << pad(ind) << "}\n";
  invalidate(r.dst.name);
  if (keep) {
    std::set<std::string> reads;
    for (auto& t : tensors_used(p_value_)) reads.insert(t);
    cached_[value] = reads;
  }
}

// S = A · Bᵀ with mma.sync: B fragments through ldmatrix, each feeding the warp's G row groups.
void MmaStreamWriter::emit_scores_mma_sync(std::ostringstream& out, int ind) {
  std::string s = cuda_identifier(S_), b = cuda_identifier(B_);
  out << pad(ind) << "// " << S_ << " = " << A_ << " · " << B_ << "ᵀ on tensor cores\n";
  out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * BN_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << s << "[nt][e] = 0.0f;\n";
  out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int ks = 0; ks < " << D_ / 16 << "; ++ks) {\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int np = 0; np < " << BN_ / 16 << "; ++np) {\n";
  out << pad(ind + 2) << "unsigned bf[4];\n";
  out << pad(ind + 2) << "solder::tile::ldmatrix_x4(bf, &" << b << "[(np * 16 + b_row) * " << D_ << " + ((ks * 16) ^ b_xor)]);\n";
  out << pad(ind + 2) << "#pragma unroll\n" << pad(ind + 2) << "for (int g = 0; g < " << G_ << "; ++g) {\n";
  out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << s << "[g * " << BN_ / 8 << " + 2 * np], a_frag[g][ks], bf[0], bf[1]);\n";
  out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << s << "[g * " << BN_ / 8 << " + 2 * np + 1], a_frag[g][ks], bf[2], bf[3]);\n";
  out << pad(ind + 2) << "}\n";
  out << pad(ind + 1) << "}\n" << pad(ind) << "}\n";
}

// S = A · Bᵀ on tensor cores, then the scalar factors.
void MmaStreamWriter::emit_scores(std::ostringstream& out, int ind) {
  std::string s = cuda_identifier(S_);
  if (wgmma_) emit_scores_wgmma(out, ind);
  else emit_scores_mma_sync(out, ind);
  if (has_scale_ && !scale_in_a_)
    out << pad(ind) << "{ const float scale = " << printer_.print_float(score_scale_) << ";\n" << pad(ind) << "#pragma unroll\n" << pad(ind)
        << "for (int nt = 0; nt < " << G_ * BN_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << s << "[nt][e] *= scale; }\n";
  if (scores_->domain.guard.defined()) {  // points outside the guard keep the fill (zero)
    Binding b;
    const auto& axes = scores_->domain.axes;
    for (size_t k = 0; k + 2 < axes.size(); ++k) b.lead.push_back(axes[k].var);
    b.row = axes[axes.size() - 2].var;
    b.col = axes.back().var;
    b.col_is_scores = true;
    for_each_element(out, ind, true, b, "if (!(" + guard_of(scores_->domain, b) + ")) " + s + "[nt][e] = 0.0f;");
  }
  if (modifier_) {
    // find the binding of the statement G came from: G's own variables name the row and column
    Binding b;
    for (auto& st : loop_->body) {
      if (st.kind() != StmtKind::Reduce || st.as<ReduceNode>() == scores_ || !uses_tensor(st.as<ReduceNode>()->value, S_)) continue;
      b = st.as<ReduceNode>() == pv_ ? p_binding() : binding_of(st.as<ReduceNode>()->domain, st.as<ReduceNode>()->reduce_axes, false);
      break;
    }
    modifier_in_place_ = true;
    out << pad(ind) << "// " << S_ << " = " << print_expr(*modifier_) << ", once for every statement that reads it\n";
    for_each_element(out, ind, true, b, s + "[nt][e] = " + element_text(*modifier_, b) + ";");
    modifier_in_place_ = false;
  }
  invalidate(S_);
}

// O (+)= P · V on tensor cores, P evaluated per score element (or reused from a reduction).
void MmaStreamWriter::emit_second_contraction(std::ostringstream& out, int ind) {
  Binding b = p_binding();  // P over the score columns
  Binding w = binding_of(pv_->domain, {}, true);
  for (size_t k = 0; k + 2 < pv_->domain.axes.size(); ++k)
    if (pv_->domain.axes[k].extent != 1) refuse("the second contraction has a leading axis of extent " + std::to_string(pv_->domain.axes[k].extent));
  if (kernel_.find_buffer(pv_->dst.name)->dtype != DType::f32) refuse("the second contraction accumulates into a " + std::string(dtype_name(kernel_.find_buffer(pv_->dst.name)->dtype)) + " tile");
  if (!index_matches(pv_->dst.index, w, true) || roles_.at(pv_->dst.name) != Role::wide) refuse("the second contraction's destination");
  std::string value = element_text(p_value_, b);
  std::string o = cuda_identifier(pv_->dst.name), v = cuda_identifier(V_);
  out << pad(ind) << "// " << pv_->dst.name << " += sum over " << b.col << " of (" << print_expr(p_value_) << ") * " << V_ << " on tensor cores\n";
  if (!pv_->accumulate) out << pad(ind) << "for (int nt = 0; nt < " << G_ * DV_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << o << "[nt][e] = 0.0f;\n";
  if (pv_->domain.guard.defined() && uses_var(pv_->domain.guard, w.col)) refuse("the second contraction's guard depends on its output column");
  if (!cached_.count(value) || pv_->where.defined() || pv_->domain.guard.defined()) {
    std::string where = pv_->where.defined() ? element_text(pv_->where, b) : "";
    std::string rows = guard_of(pv_->domain, b);
    if (!rows.empty()) where = where.empty() ? rows : "(" + where + ") && (" + rows + ")";
    for_each_element(out, ind, true, b, "p_frag[nt][e] = " + (where.empty() ? value : "(" + where + ") ? " + value + " : 0.0f") + ";");
  } else {
    out << pad(ind) << "// P: the values the reduction above computed\n";
  }
  if (wgmma_) {
    emit_pv_wgmma(out, ind);
    invalidate(pv_->dst.name);
    return;
  }
  out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int kk = 0; kk < " << BN_ / 16 << "; ++kk) {\n";
  out << pad(ind + 1) << "unsigned pa[" << G_ << "][4];\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int g = 0; g < " << G_ << "; ++g) solder::tile::c_fragments_to_a<T>(pa[g], p_frag[g * " << BN_ / 8
      << " + 2 * kk], p_frag[g * " << BN_ / 8 << " + 2 * kk + 1]);\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int np = 0; np < " << DV_ / 16 << "; ++np) {\n";
  out << pad(ind + 2) << "unsigned bf[4];\n";
  out << pad(ind + 2) << "solder::tile::ldmatrix_x4_trans(bf, &" << v << "[(kk * 16 + (lane & 15)) * " << DV_ << " + ((np * 16) ^ v_xor)]);\n";
  out << pad(ind + 2) << "#pragma unroll\n" << pad(ind + 2) << "for (int g = 0; g < " << G_ << "; ++g) {\n";
  out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << o << "[g * " << DV_ / 8 << " + 2 * np], pa[g], bf[0], bf[1]);\n";
  out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << o << "[g * " << DV_ / 8 << " + 2 * np + 1], pa[g], bf[2], bf[3]);\n";
  out << pad(ind + 2) << "}\n";
  out << pad(ind + 1) << "}\n" << pad(ind) << "}\n";
  invalidate(pv_->dst.name);
}

// A global ← register store: rows or wide fragments.
void MmaStreamWriter::emit_store(std::ostringstream& out, const Domain& domain, const Access& dst, const Expr& value, int ind) {
  const GlobalTensor* g = program_.find_global(dst.name);
  if (!g) refuse("a write to " + dst.name);
  std::vector<std::string> reads = tensors_used(value);
  bool wide = false;
  for (auto& t : reads) wide |= roles_.count(t) && roles_.at(t) == Role::wide;
  Binding b = binding_of(domain, {}, wide);
  std::vector<std::string> idx;
  for (auto& e : dst.index) idx.push_back(printer_.print_int(e));
  std::string bounds;
  for (size_t d = 0; d < idx.size(); ++d)
    bounds += (d ? " && " : "") + std::string("(") + idx[d] + ") >= 0 && (" + idx[d] + ") < " + std::to_string(g->shape[d]) + "LL";
  std::string guard = guard_of(domain, b);
  if (!guard.empty()) bounds = "(" + guard + ") && " + bounds;
  std::string target = cuda_identifier(dst.name) + " + " + printer_.offset(arrays_.at(dst.name), idx);
  out << pad(ind) << "// store " << dst.name << "\n";
  if (wide) {
    for_each_element(out, ind, false, b, "if (" + bounds + ") solder::store(" + target + ", " + element_text(value, b) + ");");
  } else {
    out << pad(ind) << "if ((lane & 3) == 0) {\n" << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) { " << bind(b) << "\n";
    out << pad(ind + 2) << "if (" << bounds << ") solder::store(" << target << ", " << element_text(value, b) << "); }\n";
    out << pad(ind) << "}\n";
  }
}

}  // namespace solder::mma_stream
