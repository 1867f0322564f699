#include "lower/lower_prologue.h"

#include <algorithm>
#include <limits>
#include <map>

#include "contract/canonicalize.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "lower/internal_names.h"

namespace solder {
namespace {

double identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0;
    case ReduceOp::min: return std::numeric_limits<double>::infinity();
    default: return -std::numeric_limits<double>::infinity();
  }
}

struct Side {
  size_t def = 0;
  std::string buffer;
  ReduceOp op = ReduceOp::sum;
  Expr value;  // in the contraction's row and k variables
};

// Inlines pointwise intermediates (with their declared rounding) and turns loads of row reductions
// into loads of side buffers.
class Inliner : public ExprMutator {
 public:
  const BoundProgram* program = nullptr;
  std::string row_var, k_var;
  int64_t k_extent = 0;
  bool allow_sides = true;
  InternalNames* names = nullptr;
  std::vector<Side>* sides = nullptr;
  std::set<size_t>* absorbed = nullptr;
  std::string failure;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const LoadNode& load, const Expr& self) override {
    if (!program->has_tensor(load.tensor)) return self;
    const TensorInfo& info = program->tensor(load.tensor);
    if (info.role == TensorRole::input) return ExprMutator::mutate(load, self);
    if (info.role == TensorRole::output || info.def_index < 0 || info.is_index_target) {
      fail(load.tensor + " is an output or an index target (it must be stored)");
      return self;
    }
    const size_t d = static_cast<size_t>(info.def_index);
    const BoundDefinition& bd = program->defs[d];
    const Definition& def = *bd.def;
    if (def.reduce == ReduceOp::none && !def.index_target) {
      std::map<std::string, Expr> rename;
      for (size_t i = 0; i < def.target.index.size() && i < load.index.size(); ++i)
        rename[def.target.index[i].name] = mutate(load.index[i]);
      Expr body = mutate(substitute_vars(def.body, rename));
      if (info.dtype != DType::f32) body = make_cast(info.dtype, body);
      absorbed->insert(d);
      return body;
    }
    if (!allow_sides) {
      fail("the side reduction " + load.tensor + " reads another reduction");
      return self;
    }
    if ((def.reduce != ReduceOp::sum && def.reduce != ReduceOp::max && def.reduce != ReduceOp::min) || def.target.index.size() != 1 ||
        def.reduce_vars.size() != 1 || load.index.size() != 1) {
      fail(load.tensor + " is not a sum, max or min of one row over one axis");
      return self;
    }
    auto v = load.index[0].as<VarNode>();
    if (!v || v->name != row_var) {
      fail(load.tensor + " is read at " + print_expr(load.index[0]) + ", not at the row " + row_var);
      return self;
    }
    if (bd.r_extents[0] != k_extent) {
      fail(load.tensor + " reduces " + std::to_string(bd.r_extents[0]) + " elements, not K = " + std::to_string(k_extent));
      return self;
    }
    absorbed->insert(d);
    for (auto& s : *sides)
      if (s.def == d) return make_load(s.buffer, {make_var(row_var)});
    Side side;
    side.def = d;
    side.op = def.reduce;
    side.buffer = names->get("side", load.tensor, load.tensor + "_side");
    std::map<std::string, Expr> rename;
    rename[def.target.index[0].name] = make_var(row_var);
    rename[def.reduce_vars[0].name] = make_var(k_var);
    const bool saved = allow_sides;
    allow_sides = false;
    side.value = mutate(substitute_vars(def.body, rename));
    allow_sides = saved;
    sides->push_back(side);
    return make_load(side.buffer, {make_var(row_var)});
  }

 private:
  void fail(std::string why) {
    if (failure.empty()) failure = std::move(why);
  }
};

bool plain_vars(const LoadNode& load, const std::vector<std::string>& vars) {
  if (load.index.size() != vars.size()) return false;
  for (size_t i = 0; i < vars.size(); ++i) {
    auto v = load.index[i].as<VarNode>();
    if (!v || v->name != vars[i]) return false;
  }
  return true;
}

}  // namespace

std::optional<PrologueContraction> lower_prologue_contraction(const BoundProgram& program, size_t index, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<PrologueContraction> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  const BoundDefinition& bd = program.defs[index];
  const Definition& def = *bd.def;
  if (def.reduce != ReduceOp::sum || def.reduce_vars.size() != 1 || def.index_target) return refuse("not a sum over one axis");
  if (def.target.index.size() < 2) return refuse("no row or no column axis");
  const std::string k_var = def.reduce_vars[0].name;
  InternalNames names(program);
  std::vector<Side> sides;
  std::set<size_t> absorbed;
  // The row axis: the one index variable the reductions it reads are read at; tried in order.
  std::optional<PrologueContraction> result;
  std::string last_refusal = "its operands are loads (the plain skeleton's case) or not computed from one staged tensor";
  for (size_t row = 0; row < def.target.index.size() && !result; ++row) {
    sides.clear();
    absorbed.clear();
    Inliner inliner;
    inliner.program = &program;
    inliner.row_var = def.target.index[row].name;
    inliner.k_var = k_var;
    inliner.k_extent = bd.r_extents[0];
    inliner.names = &names;
    inliner.sides = &sides;
    inliner.absorbed = &absorbed;
    Expr body = inliner.mutate(def.body);
    if (!inliner.failure.empty()) {
      last_refusal = inliner.failure;
      continue;
    }
    if (absorbed.empty()) return refuse("it reads no computed operand (the plain skeleton's case)");
    ReduceNode r;
    r.op = ReduceOp::sum;
    for (size_t i = 0; i < def.target.index.size(); ++i) {
      r.domain.axes.push_back({def.target.index[i].name, bd.p_extents[i]});
      r.dst.index.push_back(make_var(def.target.index[i].name));
    }
    r.reduce_axes.push_back({k_var, bd.r_extents[0]});
    r.dst.name = def.target.name;
    r.value = body;
    std::set<std::string> side_names;
    for (auto& s : sides) side_names.insert(s.buffer);
    auto dtype_of = [&](const std::string& name) -> std::optional<DType> {
      if (side_names.count(name)) return DType::f32;
      if (program.has_tensor(name)) return program.tensor(name).dtype;
      return std::nullopt;
    };
    Canonicalization c = canonicalize_contraction(r, dtype_of, contract_policy_of(program));
    if (!c.contract) {
      last_refusal = c.refusal;
      continue;
    }
    ContractNode& node = *c.contract;
    const std::string row_var = def.target.index[row].name;
    if (node.terms.size() != 1 || node.bias || node.where) {
      last_refusal = "more than one product term, or a bias";
      continue;
    }
    if (node.row_axes != std::vector<std::string>{row_var}) {
      last_refusal = "its rows are not the one axis " + row_var;
      continue;
    }
    // A: X[row, k], side buffers at [row], inputs at [k].
    std::string source, bad;
    for_each_load(node.terms[0].a, [&](const LoadNode& load) {
      if (side_names.count(load.tensor)) {
        if (!plain_vars(load, {row_var}) && bad.empty()) bad = load.tensor + " is not read at [" + row_var + "]";
      } else if (plain_vars(load, {row_var, k_var}) && program.has_tensor(load.tensor) &&
                 program.tensor(load.tensor).role == TensorRole::input) {
        if (!source.empty() && source != load.tensor && bad.empty()) bad = "operand A reads two tensors at [" + row_var + ", " + k_var + "]";
        source = load.tensor;
      } else if (!(plain_vars(load, {k_var}) && program.has_tensor(load.tensor) && program.tensor(load.tensor).role == TensorRole::input)) {
        if (bad.empty()) bad = "operand A reads " + load.tensor + " at another index than [" + row_var + ", " + k_var + "], [" + row_var + "] or [" + k_var + "]";
      }
    });
    if (source.empty() && bad.empty()) bad = "operand A reads no input at [" + row_var + ", " + k_var + "]";
    if (node.terms[0].a.as<LoadNode>() || (node.terms[0].a.as<CastNode>() && node.terms[0].a.as<CastNode>()->operand.as<LoadNode>()))
      if (bad.empty()) bad = "operand A is a load (the plain skeleton's case)";
    for (auto& s : sides)
      for_each_load(s.value, [&](const LoadNode& load) {
        if ((load.tensor != source || !plain_vars(load, {row_var, k_var})) && bad.empty())
          bad = "the side reduction " + program.defs[s.def].def->target.name + " reads " + load.tensor + ", not the staged " + source + "[" +
                row_var + ", " + k_var + "]";
      });
    if (node.scale)
      for_each_load(node.scale, [&](const LoadNode& load) {
        if (!side_names.count(load.tensor) && !(program.has_tensor(load.tensor) && program.tensor(load.tensor).role == TensorRole::input) &&
            bad.empty())
          bad = "the scale reads " + load.tensor + ", neither an input nor a side reduction";
      });
    if (!bad.empty()) {
      last_refusal = bad;
      continue;
    }
    // Everything absorbed is read only by absorbed definitions and the contraction.
    for (size_t d : absorbed)
      for (size_t i = 0; i < program.defs.size(); ++i) {
        if (i == index || absorbed.count(i)) continue;
        for (auto& t : tensors_used(program.defs[i].def->body))
          if (t == program.defs[d].def->target.name && bad.empty()) bad = t + " is also read by " + program.defs[i].def->target.name;
      }
    if (!bad.empty()) return refuse(bad);

    PrologueContraction p;
    p.source = source;
    p.absorbed.assign(absorbed.begin(), absorbed.end());
    Kernel& kernel = p.kernel;
    kernel.name = def.target.name;
    for (size_t d : p.absorbed) kernel.definitions.push_back(program.defs[d].def->target.name);
    kernel.definitions.push_back(def.target.name);
    kernel.grid.push_back({"block", 1});
    int64_t rows = bd.p_extents[row];
    for (auto& s : sides) {
      kernel.buffers.push_back(Buffer{s.buffer, {rows}, DType::f32, Scope::register_file});
      FillNode fill;
      fill.buffer = s.buffer;
      fill.value = identity(s.op);
      fill.comment = program.defs[s.def].def->target.name + ": a side reduction over the staged " + source + " (" +
                     std::string(reduce_op_name(s.op)) + " over " + k_var + ")";
      kernel.body.push_back(make_stmt(std::move(fill)));
    }
    for (auto& s : sides) {
      ReduceNode side;
      side.op = s.op;
      side.domain.axes.push_back({row_var, rows});
      side.reduce_axes.push_back({k_var, bd.r_extents[0]});
      side.dst = Access{s.buffer, {make_var(row_var)}};
      side.value = s.value;
      side.accumulate = true;
      kernel.body.push_back(make_stmt(std::move(side)));
      p.notes.push_back("side reduction " + program.defs[s.def].def->target.name + " = " + std::string(reduce_op_name(s.op)) + "(" + k_var +
                        ") " + print_expr(s.value) + " over the staged " + source + " tile");
    }
    bool a_reads_sides = false;
    for_each_load(node.terms[0].a, [&](const LoadNode& load) { a_reads_sides |= side_names.count(load.tensor) > 0; });
    if (!sides.empty())
      p.notes.push_back(a_reads_sides ? "A reads the side values: each block first sweeps its A stripe for them (a pre-sweep, once per "
                                        "tile-row it meets; the extra reads come from L2), then the main sweep"
                                      : "only the scale reads the side values: they are folded during the one main sweep and applied "
                                        "after the dot product (exact by linearity)");
    p.notes.push_back("operand A = " + print_expr(node.terms[0].a) + " converted from the staged " + source + " into a shared-memory tile of " +
                      std::string(mma_type_name(node.type)) + " (wgmma SS; the conversion of one K tile overlaps the MMA of the previous)");
    for (auto& n : c.notes) p.notes.push_back(n);
    node.comment = def.target.name + " (the whole contraction with its operand prologue, one launch of the GEMM skeleton)";
    kernel.body.push_back(make_stmt(std::move(node)));
    result = std::move(p);
  }
  if (!result) return refuse(last_refusal);
  return result;
}

bool is_prologue_contraction(const Kernel& kernel, std::vector<const ReduceNode*>* sides) {
  if (kernel.body.size() < 3 || !kernel.body.back().as<ContractNode>()) return false;
  std::vector<const ReduceNode*> found;
  for (size_t i = 0; i + 1 < kernel.body.size(); ++i) {
    if (kernel.body[i].as<FillNode>()) continue;
    auto r = kernel.body[i].as<ReduceNode>();
    if (!r) return false;
    found.push_back(r);
  }
  if (found.empty()) return false;
  if (sides) *sides = found;
  return true;
}

}  // namespace solder
