#include "ir/verifier.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "ir/expr_depth.h"
#include "ir/expr_visitor.h"
#include "ir/interval.h"
#include "ir/limits.h"
#include "ir/printer.h"
#include "ir/types.h"
#include "support/checked.h"

namespace solder {

int64_t TensorInfo::elements() const { return product_or_throw(shape, "tensor elements"); }

bool BoundProgram::has_tensor(std::string_view name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](auto& t) { return t.name == name; });
}
const TensorInfo& BoundProgram::tensor(std::string_view name) const {
  for (auto& t : tensors) if (t.name == name) return t;
  throw std::out_of_range("no tensor named " + std::string(name));
}
std::vector<const TensorInfo*> BoundProgram::inputs() const {
  std::vector<const TensorInfo*> r;
  for (auto& t : tensors) if (t.role == TensorRole::input) r.push_back(&t);
  return r;
}
std::vector<const TensorInfo*> BoundProgram::outputs() const {
  std::vector<const TensorInfo*> r;
  for (auto& t : tensors) if (t.role == TensorRole::output) r.push_back(&t);
  return r;
}

namespace {

std::string where(SourceLoc loc) { return std::to_string(loc.line) + ":" + std::to_string(loc.column); }

class Binder {
 public:
  Binder(std::shared_ptr<const Program> program, const SizeChoice& sizes)
      : program_(*program), file_(program->file) {
    bound_.program = std::move(program);
    bound_.sizes = sizes;
  }

  BoundProgram run() {
    check_depths();
    bind_dims();
    for (auto& in : program_.inputs) bind_input(in);
    for (size_t i = 0; i < program_.defs.size(); ++i) bind_definition(program_.defs[i], static_cast<int>(i));
    if (bound_.outputs().empty())
      fail(file_, {1, 1}, "program '" + program_.name + "' declares no output; mark a definition with 'out'");
    return std::move(bound_);
  }

 private:
  const Program& program_;
  std::string file_;
  BoundProgram bound_;
  // bound_.tensors by name: binding looks tensors up for every load, in time independent of the
  // program's length.
  std::unordered_map<std::string, size_t> tensor_index_;

  void add_tensor(TensorInfo t) {
    tensor_index_[t.name] = bound_.tensors.size();
    bound_.tensors.push_back(std::move(t));
  }
  const TensorInfo& tensor(const std::string& name) const { return bound_.tensors.at(tensor_index_.at(name)); }

  // ---- Limits ----
  // Programs built with the C++ API skip the parser's depth check (limits.h); every pass after this
  // one may recurse over expressions.
  void check_depth(const Expr& e, SourceLoc fallback) {
    if (e && expr_depth(e) > kMaxExprDepth)
      fail(file_, e.loc().known() ? e.loc() : fallback,
           "expression nests more than " + std::to_string(kMaxExprDepth) + " levels deep; split it into several definitions");
  }
  void check_depths() {
    for (auto& d : program_.dims) check_depth(d.value, d.loc);
    for (auto& d : program_.small) check_depth(d.value, d.loc);
    for (auto& in : program_.inputs)
      for (auto& s : in.shape) check_depth(s, in.loc);
    for (auto& def : program_.defs) {
      check_depth(def.body, def.loc);
      check_depth(def.topk_k, def.loc);
      for (auto* vars : {&def.target.index, &def.reduce_vars})
        for (auto& v : *vars)
          if (v.extent) check_depth(*v.extent, v.loc);
    }
  }

  static std::string size_text(int64_t v) {
    // The interval analysis saturates at int64 max / 4.
    return v >= std::numeric_limits<int64_t>::max() / 4 ? "at least 2^61" : std::to_string(v);
  }
  // A dim, extent or k: `value` must lie in [1, kMaxDim].
  void check_dim_value(int64_t value, SourceLoc loc, const std::string& what) {
    if (value < 1) fail(file_, loc, what + " is " + std::to_string(value) + "; sizes must be at least 1");
    if (value > kMaxDim)
      fail(file_, loc, what + " is " + size_text(value) + "; sizes must be at most " + std::to_string(kMaxDim) +
                           " (2^31 - 1)");
  }
  // Tensor element counts and iteration spaces, multiplied without wrapping: "WHAT A (4) x B (8), more
  // than the limit of LIMIT".
  void check_count(const std::vector<int64_t>& extents, const std::vector<std::string>& labels, int64_t limit,
                   const std::string& limit_text, SourceLoc loc, const std::string& what) {
    int64_t n = 1;
    bool over = false;
    for (int64_t e : extents) {
      auto m = checked_mul(n, e);
      if (!m || *m > limit) { over = true; break; }
      n = *m;
    }
    if (!over) return;
    std::string product;
    for (size_t i = 0; i < extents.size(); ++i)
      product += (i ? " x " : "") + labels[i] + (labels[i] == std::to_string(extents[i]) ? "" : " (" + std::to_string(extents[i]) + ")");
    fail(file_, loc, what + " " + product + ", more than the limit of " + limit_text);
  }
  void check_elements(const TensorInfo& t, SourceLoc loc) {
    check_count(t.shape, t.dim_labels, kMaxElements, "2^40 (" + std::to_string(kMaxElements) + ") elements per tensor", loc,
                "tensor '" + t.name + "' has");
  }
  std::set<std::string, std::less<>> integer_tensors_;  // the i32 tensors bound so far

  // ---- Dims ----
  static bool is_base(const DimDecl& d) {
    bool uses_dims = false;
    struct Finder : ExprVisitor {
      bool* found;
      using ExprVisitor::visit;
      void visit(const DimRefNode&) override { *found = true; }
    } finder;
    finder.found = &uses_dims;
    finder.visit(d.value);
    return !uses_dims;
  }

  int64_t eval_size(const Expr& e, const std::string& what) {
    RangeFacts facts;
    facts.dims = bound_.dims;
    auto r = facts.bound(e);
    if (!r || r->lo != r->hi) {
      zero_divisor(e, facts, what);
      fail(file_, e.loc(), "expected a size for " + what + ", found '" + print_expr(e) + "'");
    }
    return r->lo;
  }
  // Names a `//` or `%` in a size whose divisor is 0 or negative (the analysis cannot bound those).
  void zero_divisor(const Expr& e, const RangeFacts& facts, const std::string& what) {
    for (auto& child : children(e)) zero_divisor(child, facts, what);  // sizes nest at most kMaxExprDepth
    auto b = e.as<BinaryNode>();
    if (!b || (b->op != BinaryOp::floordiv && b->op != BinaryOp::mod)) return;
    auto d = facts.bound(b->rhs);
    if (d && d->lo == d->hi && d->lo <= 0)
      fail(file_, e.loc(), "'" + std::string(binary_op_symbol(b->op)) + "' in " + what + " divides by '" + print_expr(b->rhs) +
                               "', which is " + std::to_string(d->lo) + "; sizes divide by positive numbers only");
  }

  void bind_dims() {
    if (bound_.sizes.small && program_.small.empty())
      fail(file_, {1, 1}, "--small: program '" + program_.name + "' has no 'small' line; add one after the dims " +
                              "(e.g. 'small " + (program_.dims.empty() ? std::string("N") : program_.dims[0].name) +
                              " = 4') or run without --small");
    std::map<std::string, const DimDecl*> small;
    for (auto& s : program_.small) small[s.name] = &s;
    std::map<std::string, int64_t> overrides;
    for (auto& [name, value] : bound_.sizes.overrides) {
      const DimDecl* d = program_.find_dim(name);
      if (!d) {
        std::string names;
        for (auto& x : program_.dims) names += (names.empty() ? "" : ", ") + x.name;
        throw Error("--dim " + name + "=" + std::to_string(value) + ": program '" + program_.name +
                    "' has no dim named '" + name + "' (its dims: " + names + ")");
      }
      if (!is_base(*d))
        throw Error("--dim " + name + "=" + std::to_string(value) + ": dim '" + name + "' is derived (" + name +
                    " = " + print_expr(d->value) + "); set the dims it is computed from instead");
      overrides[name] = value;
    }
    for (auto& d : program_.dims) {
      int64_t value;
      SourceLoc value_loc = d.loc;  // where the value comes from: the dim or its `small` binding
      auto s = small.find(d.name);
      if (s != small.end() && !is_base(d))
        fail(file_, s->second->loc, "'small' sets dim '" + d.name + "', which is derived (" + d.name + " = " +
                                        print_expr(d.value) + "); set the dims it is computed from instead");
      if (overrides.count(d.name)) {
        value = overrides[d.name];
      } else if (bound_.sizes.small && s != small.end()) {
        value = eval_size(s->second->value, "dim '" + d.name + "'");
        value_loc = s->second->loc;
      } else {
        value = eval_size(d.value, "dim '" + d.name + "'");
      }
      if (value < 1) {
        if (overrides.count(d.name))
          throw Error("--dim " + d.name + "=" + std::to_string(value) + ": a dim must be at least 1");
        fail(file_, value_loc, "dim '" + d.name + "' evaluates to " + std::to_string(value) + "; a dim must be at least 1");
      }
      if (value > kMaxDim) {
        std::string limit = "; a dim must be at most " + std::to_string(kMaxDim) + " (2^31 - 1)";
        if (overrides.count(d.name)) throw Error("--dim " + d.name + "=" + std::to_string(value) + limit);
        fail(file_, value_loc, "dim '" + d.name + "' evaluates to " + size_text(value) + limit);
      }
      bound_.dims[d.name] = value;
    }
  }

  // ---- Inputs ----
  void bind_input(const InputDecl& in) {
    TensorInfo t;
    t.name = in.name;
    t.role = TensorRole::input;
    t.dtype = in.dtype;
    t.input = &in;
    for (auto& s : in.shape) {
      int64_t v = eval_size(s, "a dim of input '" + in.name + "'");
      check_dim_value(v, start_loc(s), "dim '" + print_expr(s) + "' of input '" + in.name + "'");
      t.shape.push_back(v);
      t.dim_labels.push_back(print_expr(s));
    }
    check_elements(t, in.loc);
    check_distribution(in);
    if (t.dtype == DType::i32) integer_tensors_.insert(t.name);
    add_tensor(std::move(t));
  }

  void check_distribution(const InputDecl& in) {
    using K = InputDistribution::Kind;
    const auto& d = in.distribution;
    auto bad = [&](const std::string& why) {
      fail(file_, in.loc, "input '" + in.name + "': " + std::string(distribution_name(d.kind)) + why);
    };
    bool is_float = is_float_dtype(in.dtype);
    switch (d.kind) {
      case K::standard: break;
      case K::normal:
        if (!is_float) bad(" draws real numbers; input is " + std::string(dtype_name(in.dtype)) + " (use randint or bernoulli)");
        if (!(d.params[1] > 0)) bad(" needs a positive standard deviation, found " + format_number(d.params[1], false));
        break;
      case K::uniform:
        if (!is_float) bad(" draws real numbers; input is " + std::string(dtype_name(in.dtype)) + " (use randint or bernoulli)");
        if (!(d.params[0] < d.params[1])) bad(" needs lo < hi");
        break;
      case K::randint:
      case K::sorted_randint:
        if (in.dtype == DType::boolean) bad(" draws integers; input is bool (use bernoulli)");
        if (d.params[0] != static_cast<int64_t>(d.params[0]) || d.params[1] != static_cast<int64_t>(d.params[1]))
          bad(" needs integer bounds");
        if (!(d.params[0] < d.params[1])) bad(" needs lo < hi (hi is exclusive)");
        break;
      case K::bernoulli:
        if (!(d.params[0] >= 0 && d.params[0] <= 1)) bad(" needs a probability in [0, 1]");
        break;
    }
  }

  // ---- Definitions ----
  DType dtype_of(const std::string& name) const { return tensor(name).dtype; }

  // Every (variable, extent, label, position) where a variable appears alone as a load index.
  struct BareUse { std::string var; int64_t extent; std::string label; SourceLoc loc; };
  std::vector<BareUse> bare_uses(const Expr& body) const {
    struct Collector : ExprVisitor {
      const Binder* binder;
      std::vector<BareUse> uses;
      using ExprVisitor::visit;
      void visit(const LoadNode& load) override {
        const TensorInfo& t = binder->tensor(load.tensor);
        for (size_t i = 0; i < load.index.size(); ++i)
          if (auto v = load.index[i].as<VarNode>())
            uses.push_back({v->name, t.shape[i], t.dim_labels[i], load.index[i].loc()});
        ExprVisitor::visit(load);
      }
    } collector;
    collector.binder = this;
    collector.visit(body);
    return collector.uses;
  }

  void bind_definition(const Definition& def, int def_index) {
    BoundDefinition bd;
    bd.def = &def;
    std::vector<const IndexVarDecl*> all;
    for (auto& v : def.target.index) all.push_back(&v);
    for (auto& v : def.reduce_vars) all.push_back(&v);

    // Free names in the body must be this definition's index variables.
    for (auto& name : vars_used(def.body)) {
      bool known = std::any_of(all.begin(), all.end(), [&](auto* v) { return v->name == name; });
      if (!known) {
        SourceLoc loc = find_var_loc(def.body, name);
        fail(file_, loc, "unknown name '" + name + "': not an index variable of this definition, a dim or a tensor");
      }
    }

    // topk: the target index the body does not use is the rank (extent k).
    std::string rank_var;
    if (def.reduce == ReduceOp::topk) {
      bd.topk_k = eval_size(def.topk_k, "topk's k");
      check_dim_value(bd.topk_k, start_loc(def.topk_k), "topk's k (" + print_expr(def.topk_k) + ")");
      std::vector<int> unused;
      for (size_t i = 0; i < def.target.index.size(); ++i)
        if (!uses_var(def.body, def.target.index[i].name)) unused.push_back(static_cast<int>(i));
      if (unused.size() != 1)
        fail(file_, def.target.loc, "topk's target needs exactly one index the body does not use (the rank, extent " +
                                        print_expr(def.topk_k) + "), found " + std::to_string(unused.size()));
      bd.topk_rank_position = unused[0];
      rank_var = def.target.index[unused[0]].name;
      int64_t r_extent = 0;
      if (auto e = eval_reduce_extent(def.reduce_vars[0], def.body); e) r_extent = *e;
      if (bd.topk_k > r_extent && r_extent > 0)
        fail(file_, def.topk_k.loc(), "topk's k is " + std::to_string(bd.topk_k) + " but it selects among only " +
                                          std::to_string(r_extent) + " values");
    }

    auto uses = bare_uses(def.body);
    for (const IndexVarDecl* v : all) {
      std::optional<int64_t> explicit_extent;
      if (v->extent) explicit_extent = eval_size(*v->extent, "the extent of '" + v->name + "'");
      if (v->name == rank_var) {
        if (explicit_extent && *explicit_extent != bd.topk_k)
          fail(file_, v->loc, "topk's rank index '" + v->name + "' has extent " + std::to_string(bd.topk_k) +
                                  " (k), found an explicit extent " + std::to_string(*explicit_extent));
        bd.extent[v->name] = bd.topk_k;
        continue;
      }
      std::optional<BareUse> first;
      for (auto& u : uses) {
        if (u.var != v->name) continue;
        // An explicit extent wins; the range check below makes sure every use stays in bounds.
        if (explicit_extent) break;
        if (first && u.extent != first->extent)
          fail(file_, u.loc, "index '" + v->name + "' is used with extent " + first->label + " (" +
                                 std::to_string(first->extent) + ") at " + where(first->loc) + " and with extent " +
                                 u.label + " (" + std::to_string(u.extent) + ") here");
        if (!first) first = u;
      }
      if (explicit_extent) {
        check_dim_value(*explicit_extent, v->loc, "the extent of index '" + v->name + "'");
        bd.extent[v->name] = *explicit_extent;
      } else if (first) {
        bd.extent[v->name] = first->extent;
      } else {
        fail(file_, v->loc, "index variable '" + v->name + "' has no extent: it is never used alone as an index; write '" +
                                v->name + " : DIM'");
      }
    }
    for (auto& v : def.target.index) bd.p_extents.push_back(bd.extent[v.name]);
    for (auto& v : def.reduce_vars) bd.r_extents.push_back(bd.extent[v.name]);
    {
      std::vector<int64_t> extents;
      std::vector<std::string> labels;
      for (const IndexVarDecl* v : all) {
        extents.push_back(bd.extent[v->name]);
        labels.push_back(v->name);
      }
      check_count(extents, labels, kMaxIterations, "2^62 points", def.loc,
                  "the iteration space of '" + def.target.name + "' has");
    }

    // Types.
    auto dtype_lookup = [&](const std::string& t) { return dtype_of(t); };
    ValueType body_type = type_of(def.body, dtype_lookup, file_);
    if (def.reduce != ReduceOp::none && body_type == ValueType::boolean && def.reduce != ReduceOp::sum)
      fail(file_, def.body.loc(), std::string(reduce_op_name(def.reduce)) + " expects numbers, found a condition");
    bool index_result = def.reduce == ReduceOp::argmax || def.reduce == ReduceOp::argmin;
    if (index_result && def.target.dtype && *def.target.dtype != DType::i32)
      fail(file_, def.target.loc, std::string(reduce_op_name(def.reduce)) + " gives an index; declare '" +
                                      def.target.name + "' as i32 or leave its dtype out, found " +
                                      std::string(dtype_name(*def.target.dtype)));
    if (def.index_target && def.index_target->dtype && *def.index_target->dtype != DType::i32)
      fail(file_, def.index_target->loc, "topk's indices are integers; declare '" + def.index_target->name +
                                             "' as i32 or leave its dtype out");

    // Ranges of every load.
    RangeFacts facts;
    facts.dims = bound_.dims;
    facts.integer_tensors = &integer_tensors_;
    for (auto& [name, extent] : bd.extent) facts.vars[name] = Interval{0, extent - 1};
    check_ranges(def.body, facts);

    // Tensors this definition writes.
    auto add_target = [&](const DefTarget& t, DType dtype, bool is_index) {
      TensorInfo info;
      info.name = t.name;
      info.role = t.is_output ? TensorRole::output : TensorRole::intermediate;
      info.dtype = dtype;
      info.def_index = def_index;
      info.is_index_target = is_index;
      for (size_t i = 0; i < t.index.size(); ++i) {
        info.shape.push_back(bd.p_extents[i]);
        info.dim_labels.push_back(label_for(def, t.index[i], uses, bd));
      }
      check_elements(info, t.loc);
      if (info.dtype == DType::i32) integer_tensors_.insert(info.name);
      add_tensor(std::move(info));
    };
    add_target(def.target, def.value_dtype(), false);
    if (def.index_target) add_target(*def.index_target, DType::i32, true);
    bound_.defs.push_back(std::move(bd));
  }

  std::optional<int64_t> eval_reduce_extent(const IndexVarDecl& v, const Expr& body) {
    if (v.extent) return eval_size(*v.extent, "the extent of '" + v.name + "'");
    for (auto& u : bare_uses(body)) if (u.var == v.name) return u.extent;
    return std::nullopt;
  }

  std::string label_for(const Definition& def, const IndexVarDecl& v, const std::vector<BareUse>& uses,
                        const BoundDefinition& bd) const {
    if (v.extent) return print_expr(*v.extent);
    if (def.reduce == ReduceOp::topk && v.name == def.target.index[bd.topk_rank_position].name) return print_expr(def.topk_k);
    for (auto& u : uses) if (u.var == v.name) return u.label;
    return std::to_string(bd.extent.at(v.name));
  }

  static SourceLoc find_var_loc(const Expr& e, const std::string& name) {
    struct Finder : ExprVisitor {
      std::string name;
      SourceLoc loc;
      using ExprVisitor::visit;
      void visit(const VarNode& v) override { if (!loc.known() && v.name == name) loc = v.loc; }
    } finder;
    finder.name = name;
    finder.visit(e);
    return finder.loc;
  }

  void check_ranges(const Expr& e, const RangeFacts& facts) {
    if (auto s = e.as<SelectNode>()) {
      check_ranges(s->cond, facts);
      auto decided = facts.decide(s->cond);
      if (!decided || *decided) check_ranges(s->if_true, facts.assuming(s->cond, true));
      if (!decided || !*decided) check_ranges(s->if_false, facts.assuming(s->cond, false));
      return;
    }
    if (auto b = e.as<BinaryNode>(); b && is_logical(b->op)) {
      // && and || evaluate their right side only when the left side leaves the answer open.
      check_ranges(b->lhs, facts);
      check_ranges(b->rhs, facts.assuming(b->lhs, b->op == BinaryOp::logical_and));
      return;
    }
    if (auto load = e.as<LoadNode>()) {
      const TensorInfo& t = tensor(load->tensor);
      for (size_t i = 0; i < load->index.size(); ++i) {
        const Expr& index = load->index[i];
        std::vector<std::string> read = tensors_used(index);
        for (auto& name : read)
          if (dtype_of(name) != DType::i32)
            fail(file_, start_loc(index), "index '" + print_expr(index) + "' of '" + load->tensor + "' reads '" + name +
                                         "', which is " + std::string(dtype_name(dtype_of(name))) +
                                         "; an index may read i32 tensors only");
        if (!read.empty() && t.shape[i] > (int64_t{1} << 24))
          fail(file_, start_loc(index), "index '" + print_expr(index) + "' of '" + load->tensor + "' reads a tensor, and dim " +
                                       std::to_string(i + 1) + " has extent " + std::to_string(t.shape[i]) +
                                       "; a data-dependent index may address at most 2^24 elements (kernels hold it in f32)");
        auto r = facts.bound(index);
        if (!read.empty() && !(r && Interval{0, t.shape[i] - 1}.contains(*r))) {
          // A data-dependent index that guards do not prove in range: checked when the load runs
          // (an out-of-range value is a reported error, never a wild read; docs/language.md).
          check_ranges(index, facts);
          continue;
        }
        if (!r)
          fail(file_, start_loc(index), "cannot bound index '" + print_expr(index) + "' of '" + load->tensor +
                                       "' (expected affine arithmetic, // or % by a positive number, comparisons)");
        Interval valid{0, t.shape[i] - 1};
        if (!valid.contains(*r)) {
          std::string dim = "dim " + std::to_string(i + 1) + " of '" + load->tensor + "' has extent " +
                            t.dim_labels[i] + " (" + std::to_string(t.shape[i]) + ")";
          if (index.as<ConstNode>())
            fail(file_, index.loc(), "constant index " + print_expr(index) + " is out of range: " + dim);
          fail(file_, start_loc(index), "index '" + print_expr(index) + "' of '" + load->tensor + "' may be out of range: it takes values in [" +
                                       std::to_string(r->lo) + ", " + std::to_string(r->hi) + "] but " + dim +
                                       "; guard the load with select(condition, load, 0)");
        }
        check_ranges(index, facts);
      }
      return;
    }
    if (auto u = e.as<UnaryNode>()) return check_ranges(u->operand, facts);
    if (auto b = e.as<BinaryNode>()) {
      if (b->op == BinaryOp::floordiv || b->op == BinaryOp::mod) {
        // An integer divisor the analysis can bound (index arithmetic, dims, literals) must not be 0
        // where it is evaluated; data-dependent divisors are checked when the program runs.
        auto r = facts.bound(b->rhs);
        if (r && r->lo <= 0 && r->hi >= 0)
          fail(file_, e.loc(), "'" + std::string(binary_op_symbol(b->op)) + "' divides by '" + print_expr(b->rhs) + "', which " +
                                   (r->lo == 0 && r->hi == 0 ? "is 0" : "can be 0 (it takes values in [" + std::to_string(r->lo) + ", " +
                                                                              std::to_string(r->hi) + "])"));
      }
      check_ranges(b->lhs, facts);
      check_ranges(b->rhs, facts);
      return;
    }
    if (auto c = e.as<CastNode>()) return check_ranges(c->operand, facts);
  }
};

}  // namespace

BoundProgram bind_program(std::shared_ptr<const Program> program, const SizeChoice& sizes) {
  Binder binder(std::move(program), sizes);
  return binder.run();
}

}  // namespace solder
