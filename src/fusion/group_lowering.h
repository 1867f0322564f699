// The fused lowering's writer (internal to src/fusion): one fusion group's plan → Kernel IR.
//   lower_fused.cpp           the kernels, buffers, index arithmetic, exports, the entry point
//   lower_fused_members.cpp   members computed whole per tile (pre, per-tile, post), their domains and
//                             expressions in the kernel
//   lower_fused_cascade.cpp   cascade members: online updates of reductions over the stream
//   lower_fused_segments.cpp  multi-segment streams: partial states merged by a second kernel or
//                             through DSM within a cluster
// lower_fused.h says what the lowering produces.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "algebra/normal_form.h"
#include "fusion/inline_pointwise.h"
#include "fusion/lower_fused.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "lower/internal_names.h"

namespace solder::fused {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline double identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0;
    case ReduceOp::prod: return 1;
    case ReduceOp::min: case ReduceOp::argmin: return kInf;
    default: return -kInf;
  }
}

inline Expr add(Expr a, Expr b) {
  if (auto c = a.as<ConstNode>(); c && c->value == 0) return b;
  if (auto c = b.as<ConstNode>(); c && c->value == 0) return a;
  return make_binary(BinaryOp::add, a, b);
}
inline Expr mul(Expr a, Expr b) { return make_binary(BinaryOp::mul, a, b); }
inline Expr lt(Expr a, Expr b) { return make_binary(BinaryOp::lt, a, b); }
inline Expr conj(Expr a, Expr b) { return !a ? b : !b ? a : make_binary(BinaryOp::logical_and, a, b); }
inline Expr finite(Expr a) { return lt(make_unary(UnaryOp::abs, a), make_const(kInf)); }

inline bool selects(ReduceOp op) { return op == ReduceOp::argmax || op == ReduceOp::argmin || op == ReduceOp::topk; }

class GroupLowering {
 public:
  GroupLowering(const BoundProgram& program, const GroupPlan& plan, const std::string& name)
      : program_(program), plan_(plan), name_(name) {
    reserve_program_names();
    if (plan.stream >= 0) stream_var_ = tile_var_of(plan.dims[static_cast<size_t>(plan.stream)].name);
    for (size_t d = 0; d < plan.dims.size(); ++d) {
      const GroupDim& dim = plan.dims[d];
      if ((dim.role == DimRole::grid && dim.tiles() > 1) || dim.role == DimRole::inner) tile_var_[static_cast<int>(d)] = tile_var_of(dim.name);
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
  // ---- Names the lowering introduces ----
  // Buffers, variables and scratch globals are named after the program's tensors and dims (`x_tile`,
  // `acc_y`, `T_t`). A name the program already uses (a tensor, a dim or an index variable: `y_tile`
  // as an input), or that another internal name took first, gets a numeric suffix instead
  // (`y_tile_2`): internal names never collide with the program's or with each other. The same
  // purpose (`kind`, `of`) always gets the same name within the group.
  std::string internal_name(const std::string& kind, const std::string& of, const std::string& wanted) const {
    return names_.get(kind, of, wanted);
  }
  void reserve_program_names();
  mutable InternalNames names_;

  // The on-chip tile holding a member's value (globals keep the plain name).
  std::string tile_of(const std::string& tensor) const { return internal_name("tile", tensor, tensor + "_tile"); }
  // The tile-index variable of a grid, stream or inner dim.
  std::string tile_var_of(const std::string& dim_name) const { return internal_name("tile_var", dim_name, dim_name + "_t"); }
  // A cascade member's input before this tile (rescale factors).
  std::string old_of(const std::string& tensor) const { return internal_name("old", tensor, "old_" + tensor); }
  // The segment grid variable, and the segment index of the partials read by the merge.
  std::string seg_var() const { return internal_name("seg", "", "seg"); }
  std::string seg_part_var() const { return internal_name("seg_part", "", "seg_part"); }
  // The rank variable of a selection merged across segments.
  // A cascade member's input at this segment's end (the merge's rescale factors).
  std::string segment_of(const std::string& tensor) const { return internal_name("segment", tensor, "segment_" + tensor); }
  // The k-th element variable of a whole-buffer copy.
  std::string element_var(size_t k) const { return internal_name("element", std::to_string(k), "e" + std::to_string(k)); }
  std::string rank_in_var(const std::string& rank) const { return internal_name("rank_in", rank, rank + "_in"); }

  // ---- Index arithmetic ----
  Expr base(int d) const;
  Expr global_index(int d, const std::string& var) const { return add(base(d), make_var(var)); }
  Expr ragged_guard(int d, const std::string& var) const;

  // ---- Buffers ----
  void add_buffer(const std::string& name, const std::vector<int>& dims, DType dtype, Scope scope, std::vector<int64_t> extra = {});
  // Index list for a buffer with no dims (a scalar tile of one element).
  static std::vector<Expr> scalar_index() { return {make_int(0)}; }

  std::vector<Expr> axis_index(const std::vector<std::string>& vars) const;

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
      if (producer) name = self->tile_of(name);
      auto bd = self->buffer_dims_.find(name);
      if (bd != self->buffer_dims_.end() || producer) {
        const std::vector<int>& dims = bd != self->buffer_dims_.end() ? bd->second : producer->p_dims;
        // A tile with no dims (a scalar state such as a whole-vector mean) is read at scalar_index().
        if (dims.empty()) return make_load(name, scalar_index(), load.loc);
        if (load.index.size() != dims.size())
          throw std::logic_error("fused lowering: load of '" + name + "' has " + std::to_string(load.index.size()) + " indices for " +
                              std::to_string(dims.size()) + " dims");
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

  Expr translate(const GroupMember& m, const Expr& e, const std::map<std::string, std::string>& renamed = {});

  // A load of a global that every point of the tile reads at plain variables (or at indices fixed
  // for the block) reads a staged copy instead.
  Expr staged_load(const GroupMember& m, const LoadNode& load);
  int staged_count(const std::string& tensor) const;

  // Copies of the staged inputs that belong at this loop level (-1: once per block). An inner loop
  // belongs to one member's computation: it restages what that member reads (`for_member`), even
  // when another member's loop over the same dim staged it before.
  void emit_staging(Block& into, int loop_dim, const std::string& for_member = "");

  // ---- Domains ----
  struct MemberDomain {
    Domain domain;                 // p-axes (without topk's rank), guarded at ragged edges
    std::vector<std::string> p_vars;  // all p-variables, for buffer indices
    std::vector<Axis> reduce_axes;
    Expr where;
  };
  MemberDomain domain_of(const GroupMember& m) const;
  std::string rank_var(const GroupMember& m) const;

  // ---- Members computed whole for the tile (pre, per-tile, post) ----
  void compute_member(Block& into, const GroupMember& m);

  // ---- Cascade members (reductions over the stream) ----
  bool is_d_of_later(const GroupMember& y) const;
  std::set<std::string> old_copies_needed() const;
  std::string acc(const GroupMember& y) const { return internal_name("acc", y.def.target.name, "acc_" + y.def.target.name); }
  std::string acc_index(const GroupMember& y) const {
    return internal_name("acc_index", y.def.target.name, "acc_" + y.def.target.name + "_index");
  }
  std::string center(const GroupMember& y) const { return internal_name("center", y.def.target.name, "center_" + y.def.target.name); }
  std::string center_new(const GroupMember& y) const {
    return internal_name("center_new", y.def.target.name, "center_" + y.def.target.name + "_new");
  }
  // Whether a selection keeps the winners' indices beside its values (argmax/argmin always; topk
  // when it has an index target).
  static bool keeps_index(const GroupMember& y) {
    return selects(y.def.reduce) && (y.def.index_target || y.def.reduce != ReduceOp::topk);
  }
  // acc (and the index accumulator, if any) back to the monoid's identity.
  void reset_accumulator(Block& into, const GroupMember& y, const std::string& comment);
  std::string taylor(const GroupMember& y, size_t k) const {
    return internal_name("taylor" + std::to_string(k), y.def.target.name, "B" + std::to_string(k) + "_" + y.def.target.name);
  }

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
  PolynomialState polynomial_state(const GroupMember& y) const;

  void init_cascade(Block& into, const GroupMember& y);

  // The running (or, after the loop, final) value of y from its state.
  void refresh_value(Block& into, const GroupMember& y);

  // Rescale-or-reset: acc ← valid ? acc ⊗ H(D_now)/H(D_before) : identity.
  Expr rescaled(const GroupMember& y, const Expr& acc_value, const std::map<std::string, std::string>& before);

  void update_cascade(Block& into, const GroupMember& y);

  // Moves the polynomial state's centre to `target` (the running D in the loop, the final D after
  // it) by shifting the Taylor states, then (in the loop) adds this tile's terms.
  void update_polynomial(Block& into, const GroupMember& y, bool final);

  // `value_from_key` with its `@key` load replaced by `key`.
  static Expr replace_key(const Expr& e, const Expr& key);

  static Expr replace_d_load(const Expr& e, const Expr& d_load, const Expr& with);

  void finalize_cascade(Block& into, const GroupMember& y);

  // ---- Exports ----
  void export_member(Block& into, const GroupMember& m);

  // ---- Kernels ----
  void start_kernel(const std::string& name);
  void finish_kernel();
  int64_t segment_tiles() const;

  // Translates every expression the kernel will emit once, so that staging is known up front.
  void discover_staging(bool loop_part, bool post_part);

  void build_main_kernel(bool segmented);

  // ---- Multi-segment: partial states to scratch, merged by a second kernel ----
  struct Partial { std::string buffer; std::vector<int> dims; std::vector<int64_t> extra; };
  std::vector<Partial> partial_buffers() const;
  std::string partial_name(const std::string& buffer) const { return internal_name("part", buffer, name_ + "_part_" + buffer); }

  void write_partials(Block& body);

  // A load of the segment partial of `buffer` for member m, at segment `seg_part`.
  Expr partial_load(const GroupMember& m, const std::string& buffer, const LoadNode& load);
  Expr partial_at(const std::string& buffer, const std::vector<int>& dims, const std::vector<std::string>& vars);

  // ---- Multi-segment within a cluster: merge the segments' states through DSM ----
  // Every block holds its segment's state. In cascade order: combine the independent and additive
  // states with a cluster reduction (or a gather and a local selection for arg- and top-k); rescale a
  // multiplicative state from its segment's D to the merged D, then sum it across the cluster; shift
  // a polynomial state's centre to the merged D, then sum its zeroth term. Afterwards every block
  // holds the final values.
  void cluster_reduce_buffer(Block& into, const std::string& buffer, const std::vector<int>& dims, ReduceOp op,
                             const std::string& comment);

  void merge_in_cluster(Block& body);

  // argmax / argmin / topk across the cluster: gather every segment's candidates, select locally.
  void merge_selection_in_cluster(Block& body, const GroupMember& y, const std::string& comment);

  // The final value of a polynomial member from its zeroth Taylor state (already at the final centre).
  void finalize_cascade_value_only(Block& into, const GroupMember& y);

  void build_merge_kernel();

  // The post members (computed from finished reductions) and their exports.
  void post_members(Block& into);
};

}  // namespace solder::fused
