#include "lower/lower_unfused.h"

#include <cstdlib>
#include <functional>
#include <limits>

#include "contract/canonicalize.h"
#include "contract/gathered_gemm_fit.h"
#include "contract/gemv_fit.h"
#include "contract/gemm_skeleton_fit.h"
#include "contract/grouped_axes.h"
#include "contract/operand_copy_fit.h"
#include "plan/skeleton_choice.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "fusion/inline_pointwise.h"
#include "lower/internal_names.h"

namespace solder {
namespace {

struct TiledVar {
  std::string name;     // the program's index variable, also the tile axis variable
  int64_t extent = 1;
  int64_t tile = 1;
  std::string tile_var;  // grid or loop variable counting tiles ("" when one tile covers it)
  Expr base;             // first index of the current tile (tile_var * tile), 0 when untiled
  bool ragged() const { return extent % tile != 0; }
  int64_t tiles() const { return (extent + tile - 1) / tile; }
};

TiledVar tile_var(const std::string& name, int64_t extent, int64_t tile, InternalNames& names) {
  TiledVar t{name, extent, std::min(tile, extent), "", make_int(0)};
  if (t.tiles() > 1) {
    t.tile_var = names.get("tile_var", name, name + "_tile");
    t.base = make_binary(BinaryOp::mul, make_var(t.tile_var), make_int(t.tile));
  }
  return t;
}

// `var + base` for a tiled variable (just `var` when there is one tile).
Expr global_index(const TiledVar& t) {
  if (t.tile_var.empty()) return make_var(t.name);
  return make_binary(BinaryOp::add, t.base, make_var(t.name));
}

// Conjunction of `global index < extent` for the ragged variables (undefined when none is).
Expr bounds_guard(const std::vector<TiledVar>& vars) {
  Expr guard;
  for (auto& t : vars) {
    if (!t.ragged()) continue;
    Expr c = make_binary(BinaryOp::lt, global_index(t), make_int(t.extent));
    guard = guard ? make_binary(BinaryOp::logical_and, guard, c) : c;
  }
  return guard;
}

double identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0;
    case ReduceOp::prod: return 1;
    case ReduceOp::max: case ReduceOp::argmax: case ReduceOp::topk: return -std::numeric_limits<double>::infinity();
    case ReduceOp::min: case ReduceOp::argmin: return std::numeric_limits<double>::infinity();
    case ReduceOp::none: return 0;
  }
  return 0;
}

}  // namespace

std::vector<GlobalTensor> program_globals(const BoundProgram& program) {
  std::vector<GlobalTensor> globals;
  for (auto& t : program.tensors) {
    GlobalRole role = t.role == TensorRole::input ? GlobalRole::input
                      : t.role == TensorRole::output ? GlobalRole::output : GlobalRole::intermediate;
    globals.push_back({t.name, t.shape, t.dtype, role});
  }
  return globals;
}

Kernel lower_definition(const BoundProgram& program, size_t index) {
  const BoundDefinition& bd = program.defs[index];
  const Definition& def = *bd.def;
  InternalNames names(program);
  Kernel kernel;
  kernel.name = def.target.name;
  kernel.definitions.push_back(def.target.name);
  if (def.index_target) kernel.definitions.push_back(def.index_target->name);

  // Tile the p-variables (topk's rank stays whole, in the tile).
  std::vector<TiledVar> p_vars;
  const size_t np = def.target.index.size();
  int tiled_seen = 0;
  for (size_t i = np; i-- > 0;) {
    const std::string& name = def.target.index[i].name;
    int64_t extent = bd.p_extents[i];
    int64_t tile = 1;
    if (static_cast<int>(i) == bd.topk_rank_position) {
      tile = extent;
    } else {
      tile = tiled_seen == 0 ? 32 : tiled_seen == 1 ? 8 : 1;
      ++tiled_seen;
    }
    p_vars.insert(p_vars.begin(), tile_var(name, extent, tile, names));
  }
  std::vector<TiledVar> r_vars;
  for (size_t i = 0; i < def.reduce_vars.size(); ++i)
    r_vars.push_back(tile_var(def.reduce_vars[i].name, bd.r_extents[i], i + 1 == def.reduce_vars.size() ? 32 : 1, names));

  for (auto& t : p_vars)
    if (!t.tile_var.empty()) kernel.grid.push_back({t.tile_var, t.tiles()});
  if (kernel.grid.empty()) kernel.grid.push_back({names.get("block", "", "block"), 1});

  std::map<std::string, Expr> substitute;
  for (auto& t : p_vars) substitute[t.name] = global_index(t);
  for (auto& t : r_vars) substitute[t.name] = global_index(t);
  Expr body = substitute_vars(def.body, substitute);

  // Domain of the output tile (without topk's rank), and the store's domain (with it).
  Domain tile_domain, store_domain;
  std::vector<TiledVar> domain_vars;
  for (size_t i = 0; i < np; ++i) {
    store_domain.axes.push_back({p_vars[i].name, p_vars[i].tile});
    if (static_cast<int>(i) == bd.topk_rank_position) continue;
    tile_domain.axes.push_back({p_vars[i].name, p_vars[i].tile});
    domain_vars.push_back(p_vars[i]);
  }
  tile_domain.guard = bounds_guard(domain_vars);
  Access out{def.target.name, {}};
  for (auto& t : p_vars) out.index.push_back(global_index(t));

  if (def.reduce == ReduceOp::none) {
    MapNode map;
    map.comment = def.target.name + ": pointwise";
    map.domain = tile_domain;
    map.dst = out;
    map.value = body;
    kernel.body.push_back(make_stmt(std::move(map)));
    return kernel;
  }

  // Accumulate into a register tile over loops of r-tiles, then store.
  const std::string acc_name = names.get("acc", "", "acc"), acc_index_name = names.get("acc_index", "", "acc_index");
  Buffer acc{acc_name, {}, DType::f32, Scope::register_file};
  for (auto& a : store_domain.axes) acc.shape.push_back(a.extent);
  Access acc_access{acc_name, {}};
  for (auto& a : store_domain.axes) acc_access.index.push_back(make_var(a.var));
  kernel.buffers.push_back(acc);
  FillNode fill;
  fill.buffer = acc_name;
  fill.value = identity_of(def.reduce);
  fill.comment = def.target.name + ": " + std::string(reduce_op_name(def.reduce)) + " over " +
                 [&] { std::string s; for (auto& r : r_vars) s += (s.empty() ? "" : ", ") + r.name; return s; }();
  kernel.body.push_back(make_stmt(std::move(fill)));

  bool wants_index = def.reduce == ReduceOp::argmax || def.reduce == ReduceOp::argmin || def.index_target;
  if (wants_index) {
    Buffer index_acc{acc_index_name, acc.shape, DType::f32, Scope::register_file};
    kernel.buffers.push_back(index_acc);
    FillNode fill_index;
    fill_index.buffer = acc_index_name;
    fill_index.value = -1;
    kernel.body.push_back(make_stmt(std::move(fill_index)));
  }

  ReduceNode reduce;
  reduce.op = def.reduce;
  reduce.domain = tile_domain;
  for (auto& t : r_vars) reduce.reduce_axes.push_back({t.name, t.tile});
  reduce.dst = acc_access;
  reduce.value = body;
  reduce.where = bounds_guard(r_vars);
  reduce.accumulate = true;
  if (wants_index) {
    reduce.index_dst = Access{acc_index_name, acc_access.index};
    reduce.index_value = global_index(r_vars[0]);
  }
  if (def.reduce == ReduceOp::topk) {
    reduce.k = bd.topk_k;
    reduce.rank_var = def.target.index[static_cast<size_t>(bd.topk_rank_position)].name;
  }
  Block loop_body{make_stmt(std::move(reduce))};
  for (size_t i = r_vars.size(); i-- > 0;) {
    if (r_vars[i].tile_var.empty()) continue;
    ForNode loop;
    loop.var = r_vars[i].tile_var;
    loop.begin = make_int(0);
    loop.end = make_int(r_vars[i].tiles());
    loop.body = std::move(loop_body);
    loop_body = Block{make_stmt(std::move(loop))};
  }
  for (auto& s : loop_body) kernel.body.push_back(s);

  // Store: argmax/argmin write the index; topk writes values and indices.
  auto store = [&](const std::string& target, const std::string& from) {
    CopyNode copy;
    copy.domain = store_domain;
    copy.dst = Access{target, out.index};
    copy.src = Access{from, acc_access.index};
    kernel.body.push_back(make_stmt(std::move(copy)));
  };
  if (def.reduce == ReduceOp::argmax || def.reduce == ReduceOp::argmin) {
    store(def.target.name, acc_index_name);
  } else {
    store(def.target.name, acc_name);
    if (def.index_target) store(def.index_target->name, acc_index_name);
  }
  return kernel;
}

bool absorbable_epilogue(const BoundProgram& program, size_t producer, size_t consumer, std::string* why,
                         const std::set<std::string>& stored) {
  auto refuse = [&](std::string text) {
    if (why) *why = std::move(text);
    return false;
  };
  const BoundDefinition& pb = program.defs[producer];
  const BoundDefinition& cb = program.defs[consumer];
  const Definition& c = *cb.def;
  const std::string& name = pb.def->target.name;
  if (c.reduce != ReduceOp::none) return refuse(c.target.name + " is a reduction");
  if (c.index_target) return refuse(c.target.name + " has an index output");
  if (cb.p_extents != pb.p_extents) return refuse(c.target.name + " has other extents than " + name);
  bool ok = true;
  std::string bad;
  for_each_load(c.body, [&](const LoadNode& load) {
    if (load.tensor == name) {
      if (load.index.size() != c.target.index.size()) ok = false;
      for (size_t i = 0; ok && i < load.index.size(); ++i) {
        auto v = load.index[i].as<VarNode>();
        if (!v || v->name != c.target.index[i].name) ok = false;
      }
      if (!ok && bad.empty()) bad = name + " is read at another index than " + c.target.name + "'s own";
    } else if (!stored.count(load.tensor) && (!program.has_tensor(load.tensor) || program.tensor(load.tensor).role != TensorRole::input)) {
      ok = false;
      if (bad.empty()) bad = c.target.name + " reads " + load.tensor + ", which is neither a program input nor stored before";
    }
  });
  if (!ok) return refuse(bad);
  return true;
}

namespace {

// `e` with every load of `tensor` replaced by `by`.
class ReplaceLoads : public ExprMutator {
 public:
  std::string tensor;
  Expr by;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const LoadNode& load, const Expr& self) override { return load.tensor == tensor ? by : ExprMutator::mutate(load, self); }
};

}  // namespace

namespace {

// `body` with every load of a pointwise intermediate that is not `stored` substituted by that
// definition's body (its index variables replaced by the load's indices; a declared 16-bit dtype
// kept as a cast: the program's rounding point) where that body reads only program inputs and
// `stored` tensors (what earlier kernels store): nerf_mlp's cat[n, c] = select(c < IN, x[n, c],
// h4[n, c - IN]) read by z5 becomes the concatenation itself, a K range of x and one of h4 (stored
// by z4's whole kernel), so the gathered GEMM reads x and h4 and cat is never stored.
Expr inline_pointwise_operands(const BoundProgram& program, const Expr& body, const std::set<std::string>& stored) {
  class Inline : public ExprMutator {
   public:
    const BoundProgram* program;
    const std::set<std::string>* stored;
    using ExprMutator::mutate;

   protected:
    Expr mutate(const LoadNode& load, const Expr& self) override {
      for (auto& d : program->defs) {
        const Definition& def = *d.def;
        if (def.target.name != load.tensor) continue;
        if (def.reduce != ReduceOp::none || def.index_target || def.target.is_output || def.target.index.size() != load.index.size() ||
            stored->count(def.target.name))
          return self;
        for (auto& t : tensors_used(def.body))
          if (!program->has_tensor(t) || (program->tensor(t).role != TensorRole::input && !stored->count(t))) return self;
        std::map<std::string, Expr> at;
        for (size_t i = 0; i < load.index.size(); ++i) at[def.target.index[i].name] = load.index[i];
        Expr value = substitute_vars(def.body, at);
        const DType dtype = program->tensor(def.target.name).dtype;
        return dtype == DType::f32 ? value : make_cast(dtype, value);
      }
      return self;
    }
  } inliner;
  inliner.program = &program;
  inliner.stored = &stored;
  return inliner.mutate(body);
}

}  // namespace

namespace {

// Definition `index` as one reduce over its whole domain.
ReduceNode whole_reduce(const BoundProgram& program, size_t index) {
  const BoundDefinition& bd = program.defs[index];
  const Definition& def = *bd.def;
  ReduceNode r;
  r.op = def.reduce;
  for (size_t i = 0; i < def.target.index.size(); ++i) {
    r.domain.axes.push_back({def.target.index[i].name, bd.p_extents[i]});
    r.dst.index.push_back(make_var(def.target.index[i].name));
  }
  for (size_t i = 0; i < def.reduce_vars.size(); ++i) r.reduce_axes.push_back({def.reduce_vars[i].name, bd.r_extents[i]});
  r.dst.name = def.target.name;
  r.value = def.body;
  r.comment = def.target.name + " (the whole contraction, one launch of the GEMM skeleton)";
  return r;
}

std::function<std::optional<DType>(const std::string&)> dtypes_of(const BoundProgram& program) {
  return [&program](const std::string& name) -> std::optional<DType> {
    if (program.has_tensor(name)) return program.tensor(name).dtype;
    return std::nullopt;
  };
}

}  // namespace

bool tf32_split_inlines_enabled() {
  const char* v = std::getenv("SOLDER_TF32_SPLIT_INLINE");
  return !(v && std::string(v) == "0");
}

std::optional<MmaType> whole_contraction_type(const BoundProgram& program, size_t index) {
  Canonicalization c = canonicalize_contraction(whole_reduce(program, index), dtypes_of(program), contract_policy_of(program));
  if (!c.contract) return std::nullopt;
  return c.contract->type;
}

std::optional<Kernel> lower_whole_contraction(const BoundProgram& program, size_t index, std::string* why, bool feasible_only,
                                              std::optional<size_t> epilogue, const std::set<std::string>& stored, OperandCopyMode operand_copies) {
  const Definition& def = *program.defs[index].def;
  ReduceNode r = whole_reduce(program, index);
  auto dtype_of = dtypes_of(program);
  Canonicalization c = canonicalize_contraction(r, dtype_of, contract_policy_of(program));
  if (!c.contract) {
    if (why) *why = c.refusal;
    return std::nullopt;
  }
  std::vector<GlobalTensor> globals = program_globals(program);
  // A matrix-vector product runs on the GEMV stream (contract/gemv_fit.h), which the planner then
  // keeps whole by its own rule (whole_contractions.h).
  const bool gemv = fit_gemv(*c.contract, globals).problem.has_value();
  if (gemv) {
    r.comment = def.target.name + " (the whole contraction, one launch of the GEMV stream)";
    c.contract->comment = r.comment;
  }
  GemmSkeletonFit fit = gemv ? GemmSkeletonFit{} : fit_gemm_skeleton(*c.contract, globals);
  // A head index h // G (grouped-query attention's shared K and V heads): h split into h_kv · G + h_g, one
  // batch stride for the skeleton (contract/grouped_axes.h; SOLDER_GROUPED_AXES=1). Not with an epilogue (it reads h).
  if (!gemv && !fit.problem && !epilogue && grouped_axes_enabled())
    if (std::optional<ReduceNode> split = split_grouped_axis(r, program.dims)) {
      Canonicalization cs = canonicalize_contraction(*split, dtype_of, contract_policy_of(program));
      GemmSkeletonFit split_fit = cs.contract ? fit_gemm_skeleton(*cs.contract, globals) : GemmSkeletonFit{};
      if (split_fit.problem) {
        r = std::move(*split);
        c = std::move(cs);
        fit = std::move(split_fit);
        c.contract->comment = def.target.name + " (the whole contraction, one launch of the GEMM skeleton; the shared head index " +
                              "split into a batch of KV heads and rows of their query heads)";
      }
    }
  // 3xtf32: the split evaluates its operands (fusion/tf32_split.h), so the pointwise intermediates they read
  // are inlined into them as for the gathered GEMM below: computed by the split, not stored and read back
  // (silu(x + bias) as an intermediate h read by the product).
  if (!gemv && c.contract->type == MmaType::tf32x3 && tf32_split_inlines_enabled()) {
    if (Expr inlined = inline_pointwise_operands(program, r.value, stored); !structurally_equal(inlined, r.value)) {
      ReduceNode inlined_reduce = r;
      inlined_reduce.value = inlined;
      Canonicalization ci = canonicalize_contraction(inlined_reduce, dtype_of, contract_policy_of(program));
      GemmSkeletonFit inlined_fit = ci.contract && ci.contract->type == MmaType::tf32x3 ? fit_gemm_skeleton(*ci.contract, globals) : GemmSkeletonFit{};
      if (inlined_fit.problem) {
        r = std::move(inlined_reduce);
        c = std::move(ci);
        fit = std::move(inlined_fit);
      }
    }
  }
  // What the skeleton does not stage (a convolution's im2col operand, a concatenation along K, rows
  // that are not TMA-aligned) runs whole as an implicit GEMM with gathered operands on mma.sync
  // (gathered_gemm_fit.h), when that takes it.
  bool gathered = false, converted = false;
  if (!gemv && !fit.problem) {
    // The gathered GEMM evaluates its operands per element: pointwise intermediates it reads are
    // inlined into them (never stored), as the fused kernels would.
    if (Expr inlined = inline_pointwise_operands(program, r.value, stored); !structurally_equal(inlined, r.value)) {
      ReduceNode inlined_reduce = r;
      inlined_reduce.value = inlined;
      Canonicalization ci = canonicalize_contraction(inlined_reduce, dtype_of, contract_policy_of(program));
      if (ci.contract && fit_gathered_gemm(*ci.contract, globals).problem) c = std::move(ci);
    }
    GatheredGemmFit g = fit_gathered_gemm(*c.contract, globals);
    std::string copy_refusal;
    std::optional<OperandCopies> copies;
    if (operand_copies != OperandCopyMode::kNoCopies) copies = fit_operand_copies(*c.contract, globals, &copy_refusal);
    if (!g.problem && copies && (copies->pays() || operand_copies == OperandCopyMode::kCopiesThatFit)) {
      // Conversion copies of the operands into T, then the skeleton: fusion/padded_operands.h makes them
      // after the lowering (the same fit, the same price).
      converted = true;
      r.comment = def.target.name + " (the whole contraction, one launch of the GEMM skeleton after conversion copies of its operands: " +
                  fit.refusal + ")";
      c.contract->comment = r.comment;
    } else if (!g.problem) {
      if (why)
        *why = fit.refusal + "; not a gathered GEMM either: " + g.refusal + "; no conversion copy: " +
               (copies ? copies->figures() : copy_refusal);
      return std::nullopt;
    } else {
      gathered = true;
      r.comment = def.target.name + " (the whole contraction, one launch of the gathered GEMM on mma.sync: the skeleton does not stage it: " +
                  fit.refusal + ")";
      c.contract->comment = r.comment;
    }
  }
  SkeletonChoice choice;
  if (feasible_only && !gathered && !gemv && !converted)
    choice = choose_skeleton_config(*fit.problem, c.contract->type,
                                    program.tensor(epilogue ? program.defs[*epilogue].def->target.name : def.target.name).dtype);
  if (feasible_only && !gathered && !gemv && !converted && !choice.chosen) {
    if (why) *why = choice.why;
    return std::nullopt;
  }
  Kernel kernel;
  kernel.name = def.target.name;
  kernel.definitions.push_back(def.target.name);
  kernel.grid.push_back({"block", 1});
  if (epilogue) {
    std::string refusal;
    if (!absorbable_epilogue(program, index, *epilogue, &refusal, stored)) {
      if (why) *why = refusal;
      return std::nullopt;
    }
    const Definition& p = *program.defs[*epilogue].def;
    InternalNames names(program);
    Buffer value;
    value.name = names.get("value", def.target.name, def.target.name + "_value");
    value.shape = {1};
    value.dtype = DType::f32;
    value.scope = Scope::register_file;
    // p's index variables become the contract's axes; its loads of c read the contract's value,
    // rounded to c's declared dtype where that is not f32 (exactly what storing c would do).
    std::map<std::string, Expr> axes;
    for (size_t i = 0; i < p.target.index.size(); ++i) axes[p.target.index[i].name] = make_var(def.target.index[i].name);
    ReplaceLoads loads;
    loads.tensor = def.target.name;
    loads.by = make_load(value.name, {make_int(0)});
    const DType c_dtype = program.tensor(def.target.name).dtype;
    if (c_dtype != DType::f32) loads.by = make_cast(c_dtype, loads.by);
    c.contract->epilogue = substitute_vars(loads.mutate(p.body), axes);
    c.contract->value = value.name;
    c.contract->dst.name = p.target.name;
    c.contract->comment = p.target.name + " = " + print_expr(p.body) + " with " + def.target.name +
                          " the whole contraction (one launch of the " + (gemv ? "GEMV stream" : "GEMM skeleton") + "; " + def.target.name +
                          " is never stored)";
    kernel.name = p.target.name;
    kernel.definitions.push_back(p.target.name);
    kernel.buffers.push_back(std::move(value));
  }
  kernel.body.push_back(make_stmt(std::move(*c.contract)));
  return kernel;
}

KernelProgram lower_unfused(const BoundProgram& program, const UnfusedOptions& options) {
  KernelProgram result;
  result.name = program.program->name;
  result.dims = program.dims;
  result.globals = program_globals(program);
  for (size_t i = 0; i < program.defs.size(); ++i) {
    if (options.gemm_skeleton)
      if (auto whole = lower_whole_contraction(program, i, nullptr, options.feasible_only, std::nullopt, {}, OperandCopyMode::kNoCopies)) {
        result.kernels.push_back(std::move(*whole));
        continue;
      }
    result.kernels.push_back(lower_definition(program, i));
  }
  return result;
}

}  // namespace solder
