// The recogniser of contractions on tensor cores (gemm_codegen.h): whether a reduce runs on
// block_gemm, as which matrix product and with which operands computed, or the rule that refuses it.
#include <map>
#include <set>

#include "backend/cuda/gemm_codegen.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder::generic {

namespace {

// Whether a statement of `kernel` writes tensor `name` (its dst, or a reduce's index dst).
bool writes(const Kernel& kernel, const std::string& name) {
  struct Writes : StmtVisitor {
    const std::string* name;
    bool found = false;
    using StmtVisitor::visit;
    void visit(const CopyNode& n) override { found |= n.dst.name == *name; }
    void visit(const MapNode& n) override { found |= n.dst.name == *name; }
    void visit(const ReduceNode& n) override { found |= n.dst.name == *name || n.index_dst.name == *name; }
    void visit(const ContractNode& n) override { found |= n.dst.name == *name; }
    void visit(const InterClusterReduceNode& n) override { found |= n.dst.name == *name; }
    void visit(const FillNode& n) override { found |= n.buffer == *name; }
  } w;
  w.name = &name;
  w.visit(kernel.body);
  return w.found;
}

bool sixteen_bit(DType t) { return t == DType::bf16 || t == DType::f16; }
bool fp8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }

// The stride, in elements, of each axis variable in a tile access whose indices are each the
// constant 0 or an axis variable covering its dimension whole (unit axes index nothing: stride 0).
// Empty with `why` set otherwise.
std::optional<std::map<std::string, int64_t>> axis_strides(const Access& access, const Buffer& tile,
                                                          const std::map<std::string, int64_t>& extents, std::string& why) {
  std::map<std::string, int64_t> strides;
  int64_t stride = 1;
  for (size_t d = access.index.size(); d-- > 0;) {
    const Expr& index = access.index[d];
    if (auto c = index.as<ConstNode>(); c && c->value == 0) {
    } else if (auto v = index.as<VarNode>(); v && extents.count(v->name)) {
      const int64_t extent = extents.at(v->name);
      if (extent != 1) {
        if (extent != tile.shape[d] || strides.count(v->name)) {
          why = "tile " + tile.name + " is not indexed by whole axes";
          return std::nullopt;
        }
        strides[v->name] = stride;
      }
    } else {
      why = "index " + print_expr(index) + " of " + tile.name + " is not an axis of the statement";
      return std::nullopt;
    }
    stride *= tile.shape[d];
  }
  return strides;
}

// One factor of the summand's product.
struct Operand {
  Expr value;
  const Buffer* tile = nullptr;            // a 16-bit tile read as it is; null for a computed operand
  std::map<std::string, int64_t> strides;  // the axes it runs along (strides only for a tile)
  DType exact = DType::f32;                // every value of it is a value of this type
  bool computed() const { return tile == nullptr; }
};

bool zero(const Expr& e) {
  auto c = e.as<ConstNode>();
  return c && c->value == 0;
}

// The 16-bit or fp8 type every value of `e` belongs to as it stands: a load of a 16-bit or fp8 tile,
// a cast to one, or a select between such values of one type or 0 (a concatenation along K, its K
// ranges merged, or a zero-fill); nothing otherwise.
std::optional<DType> exact_type_as_written(const Expr& e, const Kernel& kernel) {
  if (auto load = e.as<LoadNode>()) {
    const Buffer* tile = kernel.find_buffer(load->tensor);
    if (tile && (sixteen_bit(tile->dtype) || fp8(tile->dtype))) return tile->dtype;
    return std::nullopt;
  }
  if (auto cast = e.as<CastNode>(); cast && (sixteen_bit(cast->dtype) || fp8(cast->dtype))) return cast->dtype;
  if (auto s = e.as<SelectNode>()) {
    if (zero(s->if_false)) return exact_type_as_written(s->if_true, kernel);
    if (zero(s->if_true)) return exact_type_as_written(s->if_false, kernel);
    auto a = exact_type_as_written(s->if_true, kernel), b = exact_type_as_written(s->if_false, kernel);
    if (a && b && *a == *b) return a;
  }
  return std::nullopt;
}

// Whether `e` is exact in a 16-bit type as it stands (exact_type_as_written).
bool exact_as_written(const Expr& e, const Kernel& kernel) { return exact_type_as_written(e, kernel).has_value(); }

// The operand `e`, or nothing with `why` set.
std::optional<Operand> operand_of(const Expr& e, const Kernel& kernel, const std::string& result,
                                  const std::map<std::string, int64_t>& extents, std::string& why) {
  Operand op;
  op.value = e;
  if (auto load = e.as<LoadNode>()) {
    const Buffer* tile = kernel.find_buffer(load->tensor);
    if (!tile) {
      why = "operand " + load->tensor + " is a global, not a staged tile";
      return std::nullopt;
    }
    if (!sixteen_bit(tile->dtype) && !fp8(tile->dtype)) {
      why = "operand " + load->tensor + " is " + std::string(dtype_name(tile->dtype)) +
            " (tensor cores only for bf16/f16 operands): rounding it would change the result";
      return std::nullopt;
    }
    auto strides = axis_strides(Access{load->tensor, load->index}, *tile, extents, why);
    if (!strides) return std::nullopt;
    op.strides = *strides;
    op.exact = tile->dtype;
    if (sixteen_bit(tile->dtype)) op.tile = tile;  // an fp8 tile is computed: converted to 16 bits
    return op;
  }
  // An expression is exact in a 16-bit type only where the program rounds it to one.
  if (!exact_as_written(e, kernel)) {
    why = "operand " + print_expr(e) + " is an f32 value, not rounded to f16, bf16 or fp8 by the program" +
          " (the tensor cores would round it: another result)";
    return std::nullopt;
  }
  op.exact = *exact_type_as_written(e, kernel);
  // It reads tiles (not the result) at whole axes, and globals the kernel never writes (rope's rotated
  // q, read at the row and depth being evaluated); it runs along the axes its loads and variables use.
  bool readable = true;
  for_each_load(e, [&](const LoadNode& load) {
    if (!readable) return;
    const Buffer* tile = kernel.find_buffer(load.tensor);
    if (!tile && !writes(kernel, load.tensor)) return;
    if (!tile || load.tensor == result) {
      why = "operand " + print_expr(e) + " reads " + (tile ? "the result tile " : "global ") + load.tensor;
      readable = false;
      return;
    }
    // Evaluated once per element, a computed operand may read a tile at any index the program
    // keeps in bounds: a shifted K range of a concatenation (h[n, i - IN] under select(i < IN, …)),
    // or a tile shorter than K under such a select. It runs along the variables it uses (below).
    std::string shifted;
    if (auto strides = axis_strides(Access{load.tensor, load.index}, *tile, extents, shifted))
      for (auto& [var, stride] : *strides) op.strides[var] = 0;
  });
  if (!readable) return std::nullopt;
  struct Variables : ExprVisitor {
    std::set<std::string> names;
    using ExprVisitor::visit;
    void visit(const VarNode& v) override { names.insert(v.name); }
  } variables;
  variables.visit(e);
  for (auto& name : variables.names)
    if (extents.count(name) && extents.at(name) != 1) op.strides[name] = 0;
  return op;
}

// The rule for a summand of three or more factors whose two-operand reading failed: when one side of
// the product is a product of two exact operands and the other side is not exact (a scale), that
// scale multiplies every term.
std::string extra_factor_rule(const BinaryNode& product, const Kernel& kernel) {
  for (auto [inner, outer] : {std::pair{&product.lhs, &product.rhs}, std::pair{&product.rhs, &product.lhs}}) {
    auto pair = inner->as<BinaryNode>();
    if (pair && pair->op == BinaryOp::mul && exact_as_written(pair->lhs, kernel) && exact_as_written(pair->rhs, kernel) &&
        !exact_as_written(*outer, kernel))
      return "the summand is (" + print_expr(*inner) + ") * (" + print_expr(*outer) + "): the factor " + print_expr(*outer) +
             " rounds each term; taking it out of the sum would change the result (not only the sum's order)";
  }
  return "";
}

// The rule that keeps a contraction the tensor cores cannot win scalar, or "". With fewer than 16
// rows (decode: one row of x against a weight panel) the mma pads its 16-row fragment, and with both
// operands tiles (none computed) it saves no evaluation either: the scalar loop reads each operand
// element once too (llama_decode's q, k_new, v_new: the mma form measured 8-18% slower on the H100).
// A computed operand is still taken (ffn, gated_ffn: evaluated once per element instead of once per
// term).
std::string rounded_row_rule(const Contraction& r) {
  if (r.m >= 16 || r.a_computed || r.b_computed) return "";
  return "few-row product: M = " + std::to_string(r.m) + " row" + (r.m == 1 ? "" : "s") + " (an mma pads 16) and no computed operand: "
         "the scalar loop reads each operand element once too";
}

}  // namespace

ContractionMatch match_contraction(const ReduceNode& n, const Kernel& kernel) {
  auto refuse = [](std::string why) { return ContractionMatch{std::nullopt, std::move(why)}; };
  if (n.op != ReduceOp::sum) return refuse("not a sum");
  if (n.domain.guard) return refuse("a guarded domain");
  // A where condition on the reduced points (a ragged last K tile, K ranges): both operands are
  // zero-filled where it is false, as computed operands (evaluated once per element), so the points
  // outside contribute 0 · 0.
  Expr zero_filled_value;
  if (n.where) {
    auto product = n.value.as<BinaryNode>();
    if (!product || product->op != BinaryOp::mul) return refuse("a where condition on the reduced points, and the summand is not a product");
    zero_filled_value = make_select(n.where, product->lhs, make_const(0.0)) * make_select(n.where, product->rhs, make_const(0.0));
  }
  const Expr& value = n.where ? zero_filled_value : n.value;
  std::map<std::string, int64_t> extents;
  std::vector<std::string> kept, reduced;
  for (auto& a : n.domain.axes) {
    extents[a.var] = a.extent;
    if (a.extent != 1) kept.push_back(a.var);
  }
  for (auto& a : n.reduce_axes) {
    extents[a.var] = a.extent;
    if (a.extent != 1) reduced.push_back(a.var);
  }
  if (reduced.size() != 1) return refuse("reduces over " + std::to_string(reduced.size()) + " axes (one is a matrix product)");
  auto product = value.as<BinaryNode>();
  if (!product || product->op != BinaryOp::mul) return refuse("the summand is not a product");
  const Buffer* c = kernel.find_buffer(n.dst.name);
  std::string why;
  std::optional<Operand> operands[2];
  for (int i = 0; i < 2; ++i) {
    operands[i] = operand_of(i ? product->rhs : product->lhs, kernel, n.dst.name, extents, why);
    if (!operands[i]) {
      std::string extra = extra_factor_rule(*product, kernel);
      return refuse(extra.empty() ? why : extra);
    }
  }
  if (operands[0]->tile && operands[0]->tile == operands[1]->tile) return refuse("both operands read tile " + operands[0]->tile->name);
  // The mma input type: the operands' 16-bit type (fp8 values are exact in either); f16 for two fp8.
  DType type = DType::f16;
  if (sixteen_bit(operands[0]->exact) && sixteen_bit(operands[1]->exact) && operands[0]->exact != operands[1]->exact)
    return refuse("operands of two dtypes");
  for (auto& op : operands)
    if (sixteen_bit(op->exact)) type = op->exact;
  if (!c) return refuse("the result is not a tile");
  if (c->dtype != DType::f32 && !sixteen_bit(c->dtype))
    return refuse("the result is " + std::string(dtype_name(c->dtype)) + " (an f32 or 16-bit tile only)");
  auto c_strides = axis_strides(n.dst, *c, extents, why);
  if (!c_strides) return refuse(why);
  const std::string& k = reduced[0];
  if (c_strides->count(k)) return refuse("the result is indexed by the reduced axis");
  // Each operand holds the reduced axis and at most one kept axis; C holds every kept axis.
  std::string axis_of[2];
  for (int i = 0; i < 2; ++i) {
    const std::string name = operands[i]->tile ? operands[i]->tile->name : print_expr(operands[i]->value);
    if (!operands[i]->strides.count(k)) return refuse("operand " + name + " does not run along the reduced axis");
    for (auto& [var, stride] : operands[i]->strides) {
      if (var == k) continue;
      if (!axis_of[i].empty()) return refuse("operand " + name + " spans two kept axes");
      axis_of[i] = var;
    }
  }
  if (axis_of[0] == axis_of[1] && !axis_of[0].empty()) return refuse("both operands run along axis " + axis_of[0]);
  for (auto& var : kept) {
    if (var != axis_of[0] && var != axis_of[1]) return refuse("kept axis " + var + " is in neither operand (a broadcast)");
    if (!c_strides->count(var)) return refuse("the result is not indexed by kept axis " + var);
  }
  // Roles: B (n) needs whole 16-column pairs, A (m) at most 16 rows or whole m-tiles; prefer A with
  // its depth contiguous (what the staged loop needs; a computed operand is laid out so).
  auto extent_of = [&](const std::string& var) { return var.empty() ? int64_t{1} : extents.at(var); };
  auto build = [&](int ai) {
    const int bi = 1 - ai;
    const Operand& a = *operands[ai];
    const Operand& b = *operands[bi];
    Contraction r;
    r.a = a.tile ? a.tile->name : print_expr(a.value);
    r.b = b.tile ? b.tile->name : print_expr(b.value);
    r.c = c->name;
    r.type = type;
    r.result_type = c->dtype;
    r.m = extent_of(axis_of[ai]);
    r.n = extent_of(axis_of[bi]);
    r.k = extents.at(k);
    r.a_computed = a.computed();
    r.b_computed = b.computed();
    if (r.a_computed) r.a_value = a.value;
    if (r.b_computed) r.b_value = b.value;
    r.row_axis = axis_of[ai];
    r.column_axis = axis_of[bi];
    r.depth_axis = k;
    r.a_depth = r.a_computed ? 1 : a.strides.at(k);
    r.a_row = axis_of[ai].empty() || r.a_computed ? 0 : a.strides.at(axis_of[ai]);
    r.b_depth = r.b_computed ? 1 : b.strides.at(k);
    r.b_column = axis_of[bi].empty() || r.b_computed ? 0 : b.strides.at(axis_of[bi]);
    r.b_k_major = r.b_depth == 1;
    r.c_row = axis_of[ai].empty() ? 0 : c_strides->at(axis_of[ai]);
    r.c_column = axis_of[bi].empty() ? 0 : c_strides->at(axis_of[bi]);
    r.accumulate = n.accumulate;
    return r;
  };
  auto shape_rule = [](const Contraction& r) -> std::string {
    if (r.n % 16) return "N = " + std::to_string(r.n) + " columns is not a multiple of 16";
    if (r.m > 16 && r.m % 16) return "M = " + std::to_string(r.m) + " rows is neither at most 16 nor a multiple of 16";
    return "";
  };
  std::optional<Contraction> chosen;
  std::string refusal;
  for (int ai : {0, 1}) {
    Contraction r = build(ai);
    std::string rule = shape_rule(r);
    if (!rule.empty()) {
      if (refusal.empty()) refusal = rule;
      continue;
    }
    if (!chosen || (chosen->a_depth != 1 && r.a_depth == 1)) chosen = r;
  }
  if (!chosen) return refuse(refusal);
  // The zero-fill makes both operands computed; for a few-row product (decode's P · V) that evaluation
  // is the whole cost, and the scalar loop skips the points outside instead.
  if (n.where && chosen->m < 16)
    return refuse("a where condition on the reduced points of a few-row product (M = " + std::to_string(chosen->m) + ")");
  std::string rule = rounded_row_rule(*chosen);
  if (!rule.empty()) return refuse(rule);
  return ContractionMatch{chosen, ""};
}

}  // namespace solder::generic
