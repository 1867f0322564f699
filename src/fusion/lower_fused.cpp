#include "fusion/lower_fused.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "algebra/normal_form.h"
#include "fusion/inline_pointwise.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0;
    case ReduceOp::prod: return 1;
    case ReduceOp::min: case ReduceOp::argmin: return kInf;
    default: return -kInf;
  }
}

Expr add(Expr a, Expr b) {
  if (auto c = a.as<ConstNode>(); c && c->value == 0) return b;
  if (auto c = b.as<ConstNode>(); c && c->value == 0) return a;
  return make_binary(BinaryOp::add, a, b);
}
Expr mul(Expr a, Expr b) { return make_binary(BinaryOp::mul, a, b); }
Expr lt(Expr a, Expr b) { return make_binary(BinaryOp::lt, a, b); }
Expr conj(Expr a, Expr b) { return !a ? b : !b ? a : make_binary(BinaryOp::logical_and, a, b); }
Expr finite(Expr a) { return lt(make_unary(UnaryOp::abs, a), make_const(kInf)); }

bool selects(ReduceOp op) { return op == ReduceOp::argmax || op == ReduceOp::argmin || op == ReduceOp::topk; }

class GroupLowering {
 public:
  GroupLowering(const BoundProgram& program, const GroupPlan& plan, const std::string& name)
      : program_(program), plan_(plan), name_(name) {
    if (plan.stream >= 0) stream_var_ = plan.dims[static_cast<size_t>(plan.stream)].name + "_t";
    for (size_t d = 0; d < plan.dims.size(); ++d) {
      const GroupDim& dim = plan.dims[d];
      if ((dim.role == DimRole::grid && dim.tiles() > 1) || dim.role == DimRole::inner) tile_var_[static_cast<int>(d)] = dim.name + "_t";
    }
  }

  LoweredGroup run() {
    bool segmented = plan_.segments > 1;
    cluster_merge_ = segmented && plan_.segments <= kMaxClusterSegments;
    build_main_kernel(segmented);
    if (segmented && !cluster_merge_) build_merge_kernel();
    LoweredGroup out;
    out.kernels = std::move(kernels_);
    out.scratch = std::move(scratch_);
    return out;
  }

 private:
  const BoundProgram& program_;
  const GroupPlan& plan_;
  std::string name_;
  std::string stream_var_;
  std::map<int, std::string> tile_var_;
  std::vector<Kernel> kernels_;
  std::vector<GlobalTensor> scratch_;

  // ---- Per-kernel state ----
  Kernel kernel_;
  std::map<std::string, std::vector<int>> buffer_dims_;  // dims of every tile buffer (for indexing)
  struct Staged {
    std::string buffer, tensor;
    std::vector<int> dims;           // dim per kept position
    std::vector<Expr> source;        // per tensor position: nullptr for kept positions, else the fixed index
    int loop_dim = -1;               // the stream or inner dim it is restaged for (-1: once per block)
    bool emitted = false;
    std::set<std::string> users;     // members that read it (inner loops restage for each user)
  };
  std::vector<Staged> staged_;
  bool merge_kernel_ = false;
  bool segmented_ = false;
  bool cluster_merge_ = false;  // segments are the blocks of a cluster, merged through DSM
  static constexpr int kMaxClusterSegments = 8;  // portable cluster size

  const GroupDim& dim(int d) const { return plan_.dims[static_cast<size_t>(d)]; }
  // The on-chip tile holding a member's value (globals keep the plain name).
  static std::string tile_of(const std::string& tensor) { return tensor + "_tile"; }

  // ---- Index arithmetic ----
  Expr base(int d) const {
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
  Expr global_index(int d, const std::string& var) const { return add(base(d), make_var(var)); }
  Expr ragged_guard(int d, const std::string& var) const {
    const GroupDim& g = dim(d);
    if (g.role == DimRole::resident || !g.ragged()) return {};
    return lt(global_index(d, var), make_int(g.extent));
  }

  // ---- Buffers ----
  void add_buffer(const std::string& name, const std::vector<int>& dims, DType dtype, Scope scope, std::vector<int64_t> extra = {}) {
    if (kernel_.find_buffer(name)) return;
    Buffer b{name, {}, dtype, scope};
    for (int d : dims) b.shape.push_back(dim(d).tile);
    for (int64_t e : extra) b.shape.push_back(e);
    if (b.shape.empty()) b.shape.push_back(1);
    kernel_.buffers.push_back(b);
    buffer_dims_[name] = dims;
  }
  // Index list for a buffer with no dims (a scalar tile of one element).
  static std::vector<Expr> scalar_index() { return {make_int(0)}; }

  std::vector<Expr> axis_index(const std::vector<std::string>& vars) const {
    std::vector<Expr> idx;
    for (auto& v : vars) idx.push_back(make_var(v));
    if (idx.empty()) idx = scalar_index();
    return idx;
  }

  // ---- Translating a member's expressions into the kernel ----
  // `renamed`: loads of a tensor read another tile buffer with the same dims instead (m → m_old),
  // or, for names starting with "@part:", the segment partials in global scratch.
  class Translator : public ExprMutator {
   public:
    GroupLowering* self;
    const GroupMember* m;
    const std::map<std::string, std::string>* renamed;
    bool stage = true;
    using ExprMutator::mutate;

   protected:
    Expr mutate(const VarNode& v, const Expr& e) override {
      int d = m->dim_of(v.name);
      return d < 0 ? e : self->global_index(d, v.name);
    }
    Expr mutate(const LoadNode& load, const Expr& e) override {
      std::string name = load.tensor;
      if (auto it = renamed->find(name); it != renamed->end()) name = it->second;
      if (name.rfind("@part:", 0) == 0) return self->partial_load(*m, name.substr(6), load);
      const GroupMember* producer = self->plan_.member(name);
      if (producer) name = tile_of(name);
      auto bd = self->buffer_dims_.find(name);
      if (bd != self->buffer_dims_.end() || producer) {
        const std::vector<int>& dims = bd != self->buffer_dims_.end() ? bd->second : producer->p_dims;
        std::vector<Expr> idx;
        for (size_t k = 0; k < load.index.size(); ++k) {
          auto v = load.index[k].as<VarNode>();
          if (v && m->dim_of(v->name) == dims[k]) idx.push_back(load.index[k]);
          else idx.push_back(fold_constants(make_binary(BinaryOp::sub, mutate(load.index[k]), self->base(dims[k]))));
        }
        if (idx.empty()) idx = scalar_index();
        return make_load(name, idx, load.loc);
      }
      if (stage) {
        if (Expr staged = self->staged_load(*m, load); staged) return staged;
      }
      std::vector<Expr> idx;
      for (auto& i : load.index) idx.push_back(mutate(i));
      return make_load(load.tensor, idx, load.loc);
    }
  };

  Expr translate(const GroupMember& m, const Expr& e, const std::map<std::string, std::string>& renamed = {}) {
    Translator t;
    t.self = this;
    t.m = &m;
    t.renamed = &renamed;
    return fold_constants(t.mutate(e));
  }

  // A load of a global that every point of the tile reads at plain variables (or at indices fixed
  // for the block) reads a staged copy instead.
  Expr staged_load(const GroupMember& m, const LoadNode& load) {
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
    s.buffer = load.tensor + "_tile" + (staged_count(load.tensor) ? std::to_string(staged_count(load.tensor) + 1) : "");
    s.tensor = load.tensor;
    s.dims = dims;
    s.source = source;
    s.loop_dim = loop_dim;
    s.users.insert(m.def.target.name);
    add_buffer(s.buffer, dims, program_.tensor(load.tensor).dtype, Scope::shared);
    staged_.push_back(s);
    return make_load(s.buffer, local.empty() ? scalar_index() : local, load.loc);
  }
  int staged_count(const std::string& tensor) const {
    int n = 0;
    for (auto& s : staged_) n += s.tensor == tensor;
    return n;
  }

  // Copies of the staged inputs that belong at this loop level (-1: once per block). An inner loop
  // belongs to one member's computation: it restages what that member reads (`for_member`), even
  // when another member's loop over the same dim staged it before.
  void emit_staging(Block& into, int loop_dim, const std::string& for_member = "") {
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

  // ---- Domains ----
  struct MemberDomain {
    Domain domain;                 // p-axes (without topk's rank), guarded at ragged edges
    std::vector<std::string> p_vars;  // all p-variables, for buffer indices
    std::vector<Axis> reduce_axes;
    Expr where;
  };
  MemberDomain domain_of(const GroupMember& m) const {
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
  std::string rank_var(const GroupMember& m) const {
    for (auto& v : m.def.target.index) if (!uses_var(m.def.body, v.name)) return v.name;
    return "";
  }

  // ---- Members computed whole for the tile (pre, per-tile, post) ----
  void compute_member(Block& into, const GroupMember& m) {
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
    // Accumulate over the reduce axes, looping over inner dims.
    bool by_index = def.reduce == ReduceOp::argmax || def.reduce == ReduceOp::argmin;
    std::string value_buffer = by_index ? "val_" + def.target.name : tile_of(def.target.name);
    if (by_index) add_buffer(value_buffer, m.p_dims, DType::f32, Scope::register_file);
    std::string index_buffer = by_index ? tile_of(def.target.name) : def.index_target ? tile_of(def.index_target->name) : "";
    if (def.index_target) add_buffer(index_buffer, m.p_dims, DType::i32, scope);
    FillNode fill;
    fill.comment = comment;
    fill.buffer = value_buffer;
    fill.value = identity_of(def.reduce);
    into.push_back(make_stmt(std::move(fill)));
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
  }

  // ---- Cascade members (reductions over the stream) ----
  bool is_d_of_later(const GroupMember& y) const {
    bool after = false;
    for (auto& m : plan_.members) {
      if (&m == &y) { after = true; continue; }
      if (after && m.phase == Phase::cascade && uses_tensor(m.def.body, y.def.target.name)) return true;
    }
    return false;
  }
  std::set<std::string> old_copies_needed() const {
    std::set<std::string> names;
    for (auto& m : plan_.members) {
      if (m.phase != Phase::cascade || !m.decomposition.h_online) continue;
      for (auto& t : tensors_used(m.decomposition.h_online)) names.insert(t);
    }
    return names;
  }
  std::string acc(const GroupMember& y) const { return "acc_" + y.def.target.name; }
  std::string acc_index(const GroupMember& y) const { return "acc_" + y.def.target.name + "_index"; }
  std::string center(const GroupMember& y) const { return "center_" + y.def.target.name; }
  // Whether a selection keeps the winners' indices beside its values (argmax/argmin always; topk
  // when it has an index target).
  static bool keeps_index(const GroupMember& y) {
    return selects(y.def.reduce) && (y.def.index_target || y.def.reduce != ReduceOp::topk);
  }
  // acc (and the index accumulator, if any) back to the monoid's identity.
  void reset_accumulator(Block& into, const GroupMember& y, const std::string& comment) {
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
  std::string taylor(const GroupMember& y, size_t k) const { return "B" + std::to_string(k) + "_" + y.def.target.name; }

  // The dims and variables of a polynomial member's state: its p-dims plus the reduce variables
  // that index its D (one centre per value of D).
  struct PolynomialState {
    std::vector<int> dims;
    std::vector<std::string> vars;
    std::vector<Axis> axes;           // all state axes
    std::vector<Axis> reduced_axes;   // reduce axes not in the state
    std::vector<Axis> extra_axes;     // state axes that are reduce variables (summed at the end)
    Expr where, guard;
  };
  PolynomialState polynomial_state(const GroupMember& y) const {
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

  void init_cascade(Block& into, const GroupMember& y) {
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
      add_buffer(center(y) + "_new", s.dims, DType::f32, Scope::register_file);
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
  void refresh_value(Block& into, const GroupMember& y) {
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

  // Rescale-or-reset: acc ← valid ? acc ⊗ H(D_now)/H(D_before) : identity.
  Expr rescaled(const GroupMember& y, const Expr& acc_value, const std::map<std::string, std::string>& before) {
    const Decomposition& dec = y.decomposition;
    Expr ratio = rescale_factor(dec, before);
    Expr valid = finite(ratio);
    struct Collect : ExprVisitor {
      std::vector<Expr> loads;
      using ExprVisitor::visit;
      void visit(const LoadNode& n) override { loads.push_back(make_load(n.tensor, n.index)); }
    } collect;
    collect.visit(dec.h_online);
    for (auto& l : collect.loads) valid = conj(finite(rename_loads(l, before)), valid);
    return make_select(translate(y, valid), mul(acc_value, translate(y, ratio)), make_const(identity_of(y.def.reduce)));
  }

  void update_cascade(Block& into, const GroupMember& y) {
    const Definition& def = y.def;
    const Decomposition& dec = y.decomposition;
    MemberDomain md = domain_of(y);
    std::map<std::string, std::string> old_names;
    for (auto& t : old_copies_needed()) old_names[t] = "old_" + t;
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
  void update_polynomial(Block& into, const GroupMember& y, bool final) {
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
      if (segmented_) seen = make_binary(BinaryOp::sub, seen_end, mul(mul(make_var("seg"), make_int(segment_tiles())), make_int(st.tile)));
      estimate = make_binary(BinaryOp::div, mul(estimate, make_int(st.extent)), seen);
    }
    MapNode c;
    c.comment = y.def.target.name + ": move the centre to the " + (final ? "final " : "running ") + print_expr(dec.d_load) +
                (!final && y.d_extensive ? " (extrapolated to the whole stream)" : "") + " and shift the Taylor states";
    c.domain = state_domain;
    c.dst = Access{center(y) + "_new", idx};
    c.value = estimate;
    into.push_back(make_stmt(std::move(c)));
    Expr delta = make_binary(BinaryOp::sub, make_load(center(y) + "_new", idx), make_load(center(y), idx));
    size_t n = dec.taylor.size() - 1;
    for (size_t j = 0; j <= n; ++j) {
      Expr sum = make_load(taylor(y, j), idx);
      for (size_t k = j + 1; k <= n; ++k) {
        double binomial = 1;
        for (size_t t = 0; t < k - j; ++t) binomial = binomial * static_cast<double>(k - t) / static_cast<double>(t + 1);
        Expr power = k - j == 1 ? delta : make_binary(BinaryOp::pow, delta, make_const(static_cast<double>(k - j)));
        sum = add(sum, mul(mul(make_const(binomial), power), make_load(taylor(y, k), idx)));
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
    move.src = Access{center(y) + "_new", idx};
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
  static Expr replace_key(const Expr& e, const Expr& key) {
    struct Replacer : ExprMutator {
      const Expr* key;
      using ExprMutator::mutate;
      Expr mutate(const LoadNode& n, const Expr& self) override { return n.tensor == "@key" ? *key : ExprMutator::mutate(n, self); }
    } r;
    r.key = &key;
    return r.mutate(e);
  }

  static Expr replace_d_load(const Expr& e, const Expr& d_load, const Expr& with) {
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

  void finalize_cascade(Block& into, const GroupMember& y) {
    if (y.decomposition.kind != Decomposition::Kind::polynomial) {
      refresh_value(into, y);
      return;
    }
    update_polynomial(into, y, /*final=*/true);
    finalize_cascade_value_only(into, y);
  }

  // ---- Exports ----
  void export_member(Block& into, const GroupMember& m) {
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
    store(m.def.target.name);
    if (m.def.index_target) store(m.def.index_target->name);
  }

  // ---- Kernels ----
  void start_kernel(const std::string& name) {
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
  void finish_kernel() {
    if (kernel_.grid.empty()) kernel_.grid.push_back({"block", 1});
    kernels_.push_back(std::move(kernel_));
  }
  int64_t segment_tiles() const {
    const GroupDim& st = dim(plan_.stream);
    return (st.tiles() + plan_.segments - 1) / plan_.segments;
  }

  // Translates every expression the kernel will emit once, so that staging is known up front.
  void discover_staging(bool loop_part, bool post_part) {
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

  void build_main_kernel(bool segmented) {
    segmented_ = segmented;
    merge_kernel_ = false;
    start_kernel(name_);
    if (segmented) kernel_.grid.push_back({"seg", plan_.segments});
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
        first.cond = make_binary(BinaryOp::eq, make_var("seg"), make_int(0));
        export_member(first.then_body, m);
        body.push_back(make_stmt(std::move(first)));
      }
    }
    if (plan_.stream >= 0) {
      for (auto& m : plan_.members) if (m.phase == Phase::cascade) init_cascade(body, m);
      for (auto& t : old_copies_needed()) {
        const GroupMember* x = plan_.member(t);
        add_buffer("old_" + t, x->p_dims, DType::f32, Scope::register_file);
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
        c.dst = Access{"old_" + t, axis_index(xd.p_vars)};
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
        Expr first = mul(make_var("seg"), make_int(segment_tiles()));
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
        leader.cond = make_binary(BinaryOp::eq, make_var("seg"), make_int(0));
        for (auto& m : plan_.members) if (m.phase == Phase::cascade) export_member(leader.then_body, m);
        for (auto& m : plan_.members) {
          if (m.phase != Phase::post) continue;
          compute_member(leader.then_body, m);
          export_member(leader.then_body, m);
        }
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
    for (auto& m : plan_.members) {
      if (m.phase != Phase::post) continue;
      compute_member(body, m);
      export_member(body, m);
    }
    finish_kernel();
  }

  // ---- Multi-segment: partial states to scratch, merged by a second kernel ----
  struct Partial { std::string buffer; std::vector<int> dims; std::vector<int64_t> extra; };
  std::vector<Partial> partial_buffers() const {
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
  std::string partial_name(const std::string& buffer) const { return name_ + "_part_" + buffer; }

  void write_partials(Block& body) {
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
      c.dst.index.push_back(make_var("seg"));
      for (size_t k = 0; k < p.dims.size(); ++k) c.dst.index.push_back(global_index(p.dims[k], axes[k]));
      c.src = Access{p.buffer, axis_index(axes)};
      body.push_back(make_stmt(std::move(c)));
    }
  }

  // A load of the segment partial of `buffer` for member m, at segment `seg_part`.
  Expr partial_load(const GroupMember& m, const std::string& buffer, const LoadNode& load) {
    const GroupMember* x = plan_.member(buffer);
    std::vector<Expr> idx{make_var("seg_part")};
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
  Expr partial_at(const std::string& buffer, const std::vector<int>& dims, const std::vector<std::string>& vars) {
    std::vector<Expr> idx{make_var("seg_part")};
    for (size_t k = 0; k < dims.size(); ++k) idx.push_back(global_index(dims[k], vars[k]));
    return make_load(partial_name(buffer), idx);
  }

  // ---- Multi-segment within a cluster: merge the segments' states through DSM ----
  // Every block holds its segment's state. In cascade order: combine the independent and additive
  // states with a cluster reduction (or a gather and a local selection for arg- and top-k); rescale a
  // multiplicative state from its segment's D to the merged D, then sum it across the cluster; shift
  // a polynomial state's centre to the merged D, then sum its zeroth term. Afterwards every block
  // holds the final values.
  void cluster_reduce_buffer(Block& into, const std::string& buffer, const std::vector<int>& dims, ReduceOp op,
                             const std::string& comment) {
    const Buffer* b = kernel_.find_buffer(buffer);
    std::string shared = "dsm_" + buffer;
    if (!kernel_.find_buffer(shared)) {
      Buffer d = *b;
      d.name = shared;
      d.scope = Scope::cluster;
      d.dtype = DType::f32;
      kernel_.buffers.push_back(d);
    }
    Domain all;
    std::vector<std::string> vars;
    for (size_t k = 0; k < b->shape.size(); ++k) {
      all.axes.push_back({"e" + std::to_string(k), b->shape[k]});
      vars.push_back("e" + std::to_string(k));
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

  void merge_in_cluster(Block& body) {
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
      add_buffer("segment_" + t, x->p_dims, DType::f32, Scope::register_file);
      CopyNode c;
      c.comment = "this segment's " + t + ", before the segments are merged";
      c.domain = xd.domain;
      c.dst = Access{"segment_" + t, axis_index(xd.p_vars)};
      c.src = Access{tile_of(t), axis_index(xd.p_vars)};
      body.push_back(make_stmt(std::move(c)));
      segment_names[t] = "segment_" + t;
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
  void merge_selection_in_cluster(Block& body, const GroupMember& y, const std::string& comment) {
    const Definition& def = y.def;
    MemberDomain md = domain_of(y);
    const int S = plan_.segments;
    bool has_index = keeps_index(y);
    std::vector<std::string> sources{acc(y)};
    if (has_index) sources.push_back(acc_index(y));
    for (auto& src : sources) {
      const Buffer* b = kernel_.find_buffer(src);
      Buffer mine = *b;
      mine.name = "dsm_" + src;
      mine.scope = Scope::cluster;
      mine.dtype = DType::f32;
      Buffer all = mine;
      all.name = "gathered_" + src;
      all.shape.insert(all.shape.begin(), S);
      if (!kernel_.find_buffer(mine.name)) kernel_.buffers.push_back(mine);
      if (!kernel_.find_buffer(all.name)) kernel_.buffers.push_back(all);
      Domain d;
      std::vector<std::string> vars;
      for (size_t k = 0; k < b->shape.size(); ++k) {
        d.axes.push_back({"e" + std::to_string(k), b->shape[k]});
        vars.push_back("e" + std::to_string(k));
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
    Axis seg_axis{"seg_part", S};
    std::vector<std::string> vars_in = md.p_vars;
    if (def.reduce == ReduceOp::topk) {
      std::string rank = rank_var(y);
      size_t pos = static_cast<size_t>(std::find(md.p_vars.begin(), md.p_vars.end(), rank) - md.p_vars.begin());
      vars_in[pos] = rank + "_in";
      r.reduce_axes = {seg_axis, {rank + "_in", dim(y.p_dims[pos]).tile}};
      r.rank_var = rank;
      r.k = dim(y.p_dims[pos]).extent;
    } else {
      r.reduce_axes = {seg_axis};
    }
    std::vector<Expr> gathered{make_var("seg_part")};
    for (auto& v : vars_in) gathered.push_back(make_var(v));
    r.value = make_load("gathered_" + acc(y), gathered);
    if (has_index) {
      r.index_dst = Access{acc_index(y), axis_index(md.p_vars)};
      r.index_value = make_load("gathered_" + acc_index(y), gathered);
    }
    body.push_back(make_stmt(std::move(r)));
  }

  // The final value of a polynomial member from its zeroth Taylor state (already at the final centre).
  void finalize_cascade_value_only(Block& into, const GroupMember& y) {
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

  void build_merge_kernel() {
    merge_kernel_ = true;
    start_kernel(name_ + "_merge");
    for (auto& m : plan_.members)
      if (m.phase == Phase::cascade || m.phase == Phase::post) add_buffer(tile_of(m.def.target.name), m.p_dims, m.dtype, Scope::register_file);
    discover_staging(false, true);
    Block& body = kernel_.body;
    emit_staging(body, -1);
    Axis seg_axis{"seg_part", plan_.segments};
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
        std::string rank_in = rank + "_in";
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
    for (auto& m : plan_.members) {
      if (m.phase != Phase::post) continue;
      compute_member(body, m);
      export_member(body, m);
    }
    finish_kernel();
  }
};

}  // namespace

LoweredGroup lower_group(const BoundProgram& program, const GroupPlan& plan, const std::string& name) {
  GroupLowering lowering(program, plan, name);
  return lowering.run();
}

}  // namespace solder
