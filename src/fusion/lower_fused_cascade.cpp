// The fused lowering (group_lowering.h): cascade members, the online updates of reductions over the
// stream (Kernel IR for the decompositions of src/algebra/decompose).
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

// ---- Cascade members (reductions over the stream) ----
bool GroupLowering::is_d_of_later(const GroupMember& y) const {
  bool after = false;
  for (auto& m : plan_.members) {
    if (&m == &y) { after = true; continue; }
    if (after && m.phase == Phase::cascade && uses_tensor(m.def.body, y.def.target.name)) return true;
  }
  return false;
}

std::set<std::string> GroupLowering::old_copies_needed() const {
  std::set<std::string> names;
  for (auto& m : plan_.members) {
    if (m.phase != Phase::cascade || !m.decomposition.h_online) continue;
    for (auto& t : tensors_used(m.decomposition.h_online)) names.insert(t);
  }
  return names;
}

// acc (and the index accumulator, if any) back to the monoid's identity.
void GroupLowering::reset_accumulator(Block& into, const GroupMember& y, const std::string& comment) {
  FillNode f;
  f.comment = comment;
  f.buffer = acc(y);
  f.value = identity_of(y.def.reduce);
  into.push_back(make_stmt(std::move(f)));
  if (!keeps_index(y)) return;
  FillNode fi;
  fi.buffer = acc_index(y);
  fi.value = -1;
  into.push_back(make_stmt(std::move(fi)));
}

GroupLowering::PolynomialState GroupLowering::polynomial_state(const GroupMember& y) const {
  PolynomialState s;
  MemberDomain md = domain_of(y);
  s.dims = y.p_dims;
  s.vars = md.p_vars;
  s.axes = md.domain.axes;
  s.guard = md.domain.guard;
  auto d_vars = vars_used(y.decomposition.d_load);
  for (size_t i = 0; i < y.def.reduce_vars.size(); ++i) {
    const std::string& v = y.def.reduce_vars[i].name;
    Axis axis{v, dim(y.r_dims[i]).tile};
    if (std::find(d_vars.begin(), d_vars.end(), v) != d_vars.end()) {
      s.dims.push_back(y.r_dims[i]);
      s.vars.push_back(v);
      s.axes.push_back(axis);
      s.extra_axes.push_back(axis);
      s.guard = conj(s.guard, ragged_guard(y.r_dims[i], v));
    } else {
      s.reduced_axes.push_back(axis);
      s.where = conj(s.where, ragged_guard(y.r_dims[i], v));
    }
  }
  return s;
}

void GroupLowering::init_cascade(Block& into, const GroupMember& y) {
  const Definition& def = y.def;
  add_buffer(tile_of(def.target.name), y.p_dims, y.dtype, Scope::register_file);
  auto fill = [&](const std::string& b, double v, const std::string& comment = "") {
    FillNode f;
    f.buffer = b;
    f.value = v;
    f.comment = comment;
    into.push_back(make_stmt(std::move(f)));
  };
  std::string comment = def.target.name + " = " + std::string(reduce_op_name(def.reduce)) + " over the stream, " +
                        std::string(decomposition_kind_name(y.decomposition.kind));
  if (y.decomposition.kind == Decomposition::Kind::polynomial) {
    PolynomialState s = polynomial_state(y);
    for (size_t k = 0; k < y.decomposition.taylor.size(); ++k) {
      add_buffer(taylor(y, k), s.dims, DType::f32, Scope::register_file);
      fill(taylor(y, k), 0, k == 0 ? comment + ": Taylor states around a moving centre" : "");
    }
    add_buffer(center(y), s.dims, DType::f32, Scope::register_file);
    add_buffer(center_new(y), s.dims, DType::f32, Scope::register_file);
    fill(center(y), 0);
    return;
  }
  add_buffer(acc(y), y.p_dims, DType::f32, Scope::register_file);
  if (keeps_index(y)) add_buffer(acc_index(y), y.p_dims, DType::f32, Scope::register_file);
  reset_accumulator(into, y, comment);
  fill(tile_of(def.target.name), identity_of(def.reduce));
  if (def.index_target) add_buffer(tile_of(def.index_target->name), y.p_dims, DType::i32, Scope::register_file);
}

// The running (or, after the loop, final) value of y from its state.
void GroupLowering::refresh_value(Block& into, const GroupMember& y) {
  const Definition& def = y.def;
  MemberDomain md = domain_of(y);
  const Decomposition& dec = y.decomposition;
  if (dec.kind == Decomposition::Kind::polynomial) return;
  if (selects(def.reduce)) {
    if (def.reduce != ReduceOp::topk) {  // argmax / argmin: the index is the value
      CopyNode c;
      c.domain = md.domain;
      c.dst = Access{tile_of(def.target.name), axis_index(md.p_vars)};
      c.src = Access{acc_index(y), axis_index(md.p_vars)};
      into.push_back(make_stmt(std::move(c)));
      return;
    }
    Domain all;  // topk: values (+ H) and indices over every rank
    for (size_t i = 0; i < def.target.index.size(); ++i) all.axes.push_back({def.target.index[i].name, dim(y.p_dims[i]).tile});
    all.guard = md.domain.guard;
    MapNode v;
    v.domain = all;
    v.dst = Access{tile_of(def.target.name), axis_index(md.p_vars)};
    Expr a = make_load(acc(y), axis_index(md.p_vars));
    if (dec.kind == Decomposition::Kind::monotone) {
      // The selected keys back to values, with the final earlier results.
      v.value = translate(y, replace_key(dec.value_from_key, a));
      v.comment = def.target.name + ": the values of the selected keys, " + print_expr(dec.value_from_key);
    } else {
      v.value = dec.h_deferred ? add(a, translate(y, dec.h_deferred)) : a;
    }
    into.push_back(make_stmt(std::move(v)));
    if (def.index_target) {
      CopyNode c;
      c.domain = all;
      c.dst = Access{tile_of(def.index_target->name), axis_index(md.p_vars)};
      c.src = Access{acc_index(y), axis_index(md.p_vars)};
      into.push_back(make_stmt(std::move(c)));
    }
    return;
  }
  MapNode v;
  v.domain = md.domain;
  v.dst = Access{tile_of(def.target.name), axis_index(md.p_vars)};
  Expr a = make_load(acc(y), axis_index(md.p_vars));
  if (dec.h_deferred && dec.kind == Decomposition::Kind::multiplicative) v.value = mul(a, translate(y, dec.h_deferred));
  else if (dec.h_deferred && dec.kind == Decomposition::Kind::additive) v.value = add(a, translate(y, dec.h_deferred));
  else v.value = a;
  into.push_back(make_stmt(std::move(v)));
}

// Rescale-or-reset: acc ← valid ? acc ⊗ H(D_now)/H(D_before) : unchanged ? acc : identity.
// An old running value of ±inf makes the factor inf/inf or 0·inf; the terms added meanwhile are the
// placeholders the reference drops once D becomes finite (exp(V − m) with m = −inf), so the
// accumulator resets. Where D has not moved (still ±inf) the factor is exactly 1 and the accumulator
// is kept: when D ends infinite the reference sums those same terms (NaN for exp(−inf + inf)).
Expr GroupLowering::rescaled(const GroupMember& y, const Expr& acc_value, const std::map<std::string, std::string>& before) {
  const Decomposition& dec = y.decomposition;
  Expr ratio = rescale_factor(dec, before);
  Expr valid = finite(ratio);
  struct Collect : ExprVisitor {
    std::vector<Expr> loads;
    using ExprVisitor::visit;
    void visit(const LoadNode& n) override { loads.push_back(make_load(n.tensor, n.index)); }
  } collect;
  collect.visit(dec.h_online);
  Expr unchanged;
  for (auto& l : collect.loads) {
    Expr old = rename_loads(l, before);
    valid = conj(finite(old), valid);
    unchanged = conj(make_binary(BinaryOp::eq, l, old), unchanged);
  }
  Expr reset = make_const(identity_of(y.def.reduce));
  if (unchanged) reset = make_select(translate(y, unchanged), acc_value, reset);
  return make_select(translate(y, valid), mul(acc_value, translate(y, ratio)), reset);
}

void GroupLowering::update_cascade(Block& into, const GroupMember& y) {
  const Definition& def = y.def;
  const Decomposition& dec = y.decomposition;
  MemberDomain md = domain_of(y);
  std::map<std::string, std::string> old_names;
  for (auto& t : old_copies_needed()) old_names[t] = old_of(t);
  if (dec.kind == Decomposition::Kind::polynomial) {
    update_polynomial(into, y, /*final=*/false);
    return;
  }
  if (dec.kind == Decomposition::Kind::multiplicative && dec.h_online) {
    MapNode rescale;
    rescale.comment = def.target.name + ": rescale by " + print_expr(rescale_factor(dec, old_names)) + ", or reset where the old value is not invertible";
    rescale.domain = md.domain;
    rescale.dst = Access{acc(y), axis_index(md.p_vars)};
    rescale.value = rescaled(y, make_load(acc(y), axis_index(md.p_vars)), old_names);
    into.push_back(make_stmt(std::move(rescale)));
  }
  ReduceNode r;
  r.comment = def.target.name + ": add this tile";
  r.op = def.reduce;
  r.domain = md.domain;
  r.reduce_axes = md.reduce_axes;
  r.where = md.where;
  r.accumulate = true;
  r.dst = Access{acc(y), axis_index(md.p_vars)};
  r.value = translate(y, dec.online_term);
  if (keeps_index(y)) {
    r.index_dst = Access{acc_index(y), axis_index(md.p_vars)};
    for (size_t i = 0; i < def.reduce_vars.size(); ++i)
      if (dim(y.r_dims[i]).role == DimRole::stream) r.index_value = global_index(y.r_dims[i], def.reduce_vars[i].name);
  }
  if (def.reduce == ReduceOp::topk) {
    r.rank_var = rank_var(y);
    r.k = program_.tensor(def.target.name).shape[static_cast<size_t>(std::find_if(def.target.index.begin(), def.target.index.end(), [&](auto& v) { return v.name == r.rank_var; }) - def.target.index.begin())];
  }
  into.push_back(make_stmt(std::move(r)));
  if (is_d_of_later(y)) refresh_value(into, y);
}

// Moves the polynomial state's centre to `target` (the running D in the loop, the final D after
// it) by shifting the Taylor states, then (in the loop) adds this tile's terms.
void GroupLowering::update_polynomial(Block& into, const GroupMember& y, bool final) {
  const Decomposition& dec = y.decomposition;
  PolynomialState s = polynomial_state(y);
  std::vector<Expr> idx = axis_index(s.vars);
  Domain state_domain{s.axes, s.guard};
  // New centre: the running D, extrapolated to the whole stream when D is a plain sum.
  Expr estimate = translate(y, dec.d_load);
  if (!final && y.d_extensive && plan_.stream >= 0) {
    const GroupDim& st = dim(plan_.stream);
    Expr seen_end = make_binary(BinaryOp::min, mul(add(make_var(stream_var_), make_int(1)), make_int(st.tile)), make_int(st.extent));
    Expr seen = seen_end;
    if (segmented_) seen = make_binary(BinaryOp::sub, seen_end, mul(mul(make_var(seg_var()), make_int(segment_tiles())), make_int(st.tile)));
    estimate = make_binary(BinaryOp::div, mul(estimate, make_int(st.extent)), seen);
  }
  MapNode c;
  c.comment = y.def.target.name + ": move the centre to the " + (final ? "final " : "running ") + print_expr(dec.d_load) +
              (!final && y.d_extensive ? " (extrapolated to the whole stream)" : "") + " and shift the Taylor states";
  c.domain = state_domain;
  c.dst = Access{center_new(y), idx};
  c.value = estimate;
  into.push_back(make_stmt(std::move(c)));
  Expr delta = make_binary(BinaryOp::sub, make_load(center_new(y), idx), make_load(center(y), idx));
  size_t n = dec.taylor.size() - 1;
  for (size_t j = 0; j <= n; ++j) {
    Expr sum = make_load(taylor(y, j), idx);
    for (size_t k = j + 1; k <= n; ++k) {
      double binomial = 1;
      for (size_t t = 0; t < k - j; ++t) binomial = binomial * static_cast<double>(k - t) / static_cast<double>(t + 1);
      Expr power = k - j == 1 ? delta : make_binary(BinaryOp::pow, delta, make_const(static_cast<double>(k - j)));
      // A state still exactly zero has no term that depends on D yet: it adds nothing, even while
      // the old centre is not finite (a running D that starts at NaN: exp(−inf + inf)).
      Expr state = make_load(taylor(y, k), idx);
      sum = add(sum, make_select(make_binary(BinaryOp::eq, state, make_const(0)), make_const(0),
                                 mul(mul(make_const(binomial), power), state)));
    }
    MapNode shift;
    shift.domain = state_domain;
    shift.dst = Access{taylor(y, j), idx};
    shift.value = sum;
    into.push_back(make_stmt(std::move(shift)));
  }
  CopyNode move;
  move.domain = state_domain;
  move.dst = Access{center(y), idx};
  move.src = Access{center_new(y), idx};
  into.push_back(make_stmt(std::move(move)));
  if (final) return;
  std::string d_tensor = dec.d_load.as<LoadNode>()->tensor;
  for (size_t k = 0; k <= n; ++k) {
    // F_k with D read from the centre.
    Expr term = replace_d_load(dec.taylor[k], dec.d_load, make_load(center(y), idx));
    ReduceNode r;
    r.comment = k == 0 ? y.def.target.name + ": add this tile's Taylor terms" : "";
    r.op = ReduceOp::sum;
    r.domain = state_domain;
    r.reduce_axes = s.reduced_axes;
    r.where = s.where;
    r.accumulate = true;
    r.dst = Access{taylor(y, k), idx};
    r.value = translate(y, term);
    into.push_back(make_stmt(std::move(r)));
  }
  (void)d_tensor;
}

// `value_from_key` with its `@key` load replaced by `key`.
Expr GroupLowering::replace_key(const Expr& e, const Expr& key) {
  struct Replacer : ExprMutator {
    const Expr* key;
    using ExprMutator::mutate;
    Expr mutate(const LoadNode& n, const Expr& self) override { return n.tensor == "@key" ? *key : ExprMutator::mutate(n, self); }
  } r;
  r.key = &key;
  return r.mutate(e);
}

Expr GroupLowering::replace_d_load(const Expr& e, const Expr& d_load, const Expr& with) {
  struct Replacer : ExprMutator {
    const Expr* from;
    const Expr* to;
    using ExprMutator::mutate;
    Expr mutate(const LoadNode& n, const Expr& self) override {
      return structurally_equal(self, *from) ? *to : ExprMutator::mutate(n, self);
    }
  } r;
  r.from = &d_load;
  r.to = &with;
  return r.mutate(e);
}

void GroupLowering::finalize_cascade(Block& into, const GroupMember& y) {
  if (y.decomposition.kind != Decomposition::Kind::polynomial) {
    refresh_value(into, y);
    return;
  }
  update_polynomial(into, y, /*final=*/true);
  finalize_cascade_value_only(into, y);
}

}  // namespace solder::fused
