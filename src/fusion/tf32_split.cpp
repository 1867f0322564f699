#include "fusion/tf32_split.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include "contract/gemm_skeleton_fit.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {
namespace {

std::string free_global_name(const KernelProgram& program, const std::string& wanted) {
  std::string name = wanted;
  for (int i = 2; program.find_global(name); ++i) name = wanted + "_" + std::to_string(i);
  return name;
}

Expr add(Expr a, Expr b) { return make_binary(BinaryOp::add, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return make_binary(BinaryOp::mul, std::move(a), std::move(b)); }
Expr less(Expr a, Expr b) { return make_binary(BinaryOp::lt, std::move(a), std::move(b)); }

// One operand's split: its kernel and the scratch global it writes.
struct OperandSplit {
  Kernel kernel;
  GlobalTensor split;
};

void finish_split(Kernel& kernel, const Buffer& t, const GlobalTensor& split, const Expr& x, const GemmSkeletonOperand& op,
                  const Expr& row, const Expr& kk, const Expr& guard, const std::vector<Expr>& batch_index, int lo_part);

bool uses(const Expr& e, const std::string& var) {
  for (auto& v : vars_used(e))
    if (v == var) return true;
  return false;
}

// Whether the loads of `x` read along its rows: some load's last index names the row axis `side` and not `k`
// (an operand stored [K, rows], transposed by the split).
bool reads_along(const Expr& x, const std::string& side, const std::string& k) {
  bool along = false;
  for_each_load(x, [&](const LoadNode& load) {
    if (!load.index.empty() && uses(load.index.back(), side) && !uses(load.index.back(), k)) along = true;
  });
  return along;
}

// The split kernel of operand `x` (a load indexed by `side` (its row or column axis), `k` and, when
// `batched`, the batch axes), writing `split`[batch…?, row, j] with part `lo_part` lo(x) and the others hi(x).
OperandSplit split_operand(const std::string& name, const GlobalTensor& split, const Expr& x, const GemmSkeletonOperand& op,
                           const std::string& side, const std::string& k, const std::vector<std::string>& batch_axes,
                           const std::vector<int64_t>& batch_extents, bool batched, int lo_part) {
  const int64_t tile = kTf32SplitTile;
  OperandSplit out;
  out.split = split;
  Kernel& kernel = out.kernel;
  kernel.name = name;
  kernel.threads = 256;
  const std::string gb = name + "_b", gr = name + "_r", gk = name + "_k";
  if (batched) {
    int64_t batch = 1;
    for (int64_t e : batch_extents) batch *= e;
    kernel.grid.push_back({gb, batch});
  }
  kernel.grid.push_back({gr, (op.rows + tile - 1) / tile});
  kernel.grid.push_back({gk, (op.k + tile - 1) / tile});
  Buffer t;
  t.name = name + "_tile";
  // An operand read along its rows is written into the tile down its columns: one padding column keeps
  // those stores off a single shared-memory bank.
  const bool along_rows = op.computed ? reads_along(x, side, k) : !op.k_major;
  t.shape = {tile, along_rows ? tile + 1 : tile};
  t.dtype = DType::f32;
  t.scope = Scope::shared;
  kernel.buffers.push_back(t);

  // The batch axes from the flattened grid index, row-major.
  std::map<std::string, Expr> at;
  std::vector<Expr> batch_index;
  if (batched) {
    int64_t after = 1;
    for (size_t i = batch_axes.size(); i-- > 0;) {
      Expr v = make_var(gb);
      if (after > 1) v = make_binary(BinaryOp::floordiv, v, make_int(after));
      if (i > 0) v = make_binary(BinaryOp::mod, v, make_int(batch_extents[i]));
      at[batch_axes[i]] = v;
      after *= batch_extents[i];
    }
    for (auto& b : batch_axes) batch_index.push_back(at[b]);
  }
  const Expr row = add(mul(make_var(gr), make_int(tile)), make_var("i"));
  const Expr kk = add(mul(make_var(gk), make_int(tile)), make_var("j"));
  at[side] = row;
  at[k] = kk;

  Expr guard;
  if (op.rows % tile != 0) guard = less(row, make_int(op.rows));
  if (op.k % tile != 0) {
    Expr in_k = less(kk, make_int(op.k));
    guard = guard ? make_binary(BinaryOp::logical_and, guard, in_k) : in_k;
  }
  if (op.computed) {
    // A computed operand: its expression evaluated at each element of the 32 × 32 tile (inside the
    // operand: the tile's elements outside are never read), k fastest unless its loads read along rows.
    MapNode value;
    value.comment = "32 rows x 32 k of the computed operand " + print_expr(x);
    value.domain.axes = along_rows ? std::vector<Axis>{{"j", tile}, {"i", tile}} : std::vector<Axis>{{"i", tile}, {"j", tile}};
    value.domain.guard = guard;
    value.dst = Access{t.name, {make_var("i"), make_var("j")}};
    value.value = substitute_vars(x, at);
    kernel.body.push_back(make_stmt(std::move(value)));
    kernel.body.push_back(make_stmt(BarrierNode{}));
    finish_split(kernel, t, split, x, op, row, kk, guard, batch_index, lo_part);
    return out;
  }

  // Copy the 32 × 32 tile, the index that is contiguous in the operand fastest (a global read out of
  // bounds is 0: ragged edges).
  CopyNode copy;
  copy.comment = "32 rows x 32 k of " + print_expr(x) + (op.k_major ? "" : ", read along its rows (transposed here)");
  copy.domain.axes = op.k_major ? std::vector<Axis>{{"i", tile}, {"j", tile}} : std::vector<Axis>{{"j", tile}, {"i", tile}};
  copy.dst = Access{t.name, {make_var("i"), make_var("j")}};
  auto load = x.as<LoadNode>();
  std::vector<Expr> src;
  for (auto& i : load->index) src.push_back(substitute_vars(i, at));
  copy.src = Access{load->tensor, src};
  kernel.body.push_back(make_stmt(std::move(copy)));
  BarrierNode barrier;
  kernel.body.push_back(make_stmt(std::move(barrier)));
  finish_split(kernel, t, split, x, op, row, kk, guard, batch_index, lo_part);
  return out;
}

// The split kernel's last statement: the three parts of the tile `t` along j, part p of k at p · K + k.
void finish_split(Kernel& kernel, const Buffer& t, const GlobalTensor& split, const Expr& x, const GemmSkeletonOperand& op,
                  const Expr& row, const Expr& kk, const Expr& guard, const std::vector<Expr>& batch_index, int lo_part) {
  const int64_t tile = kTf32SplitTile;
  MapNode map;
  const char* parts = lo_part == 0 ? "[lo | hi | hi]" : "[hi | lo | hi]";
  map.comment = "3xTF32 split of " + print_expr(x) + " into " + split.name + " = " + parts + " along K (hi = round_tf32(x), lo = round_tf32(x - hi))";
  map.domain.axes = {{"i", tile}, {"p", 3}, {"j", tile}};
  map.domain.guard = guard;
  std::vector<Expr> dst = batch_index;
  dst.push_back(row);
  dst.push_back(add(mul(make_var("p"), make_int(op.k)), kk));
  map.dst = Access{split.name, dst};
  const Expr value = make_load(t.name, {make_var("i"), make_var("j")});
  const Expr hi = make_unary(UnaryOp::round_tf32, value);
  const Expr lo = make_unary(UnaryOp::round_tf32, make_binary(BinaryOp::sub, value, hi));
  map.value = make_select(make_binary(BinaryOp::eq, make_var("p"), make_int(lo_part)), lo, hi);
  kernel.body.push_back(make_stmt(std::move(map)));
}

std::string mb(double bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << bytes / 1e6 << " MB";
  return out.str();
}

}  // namespace

std::optional<Tf32SplitKernel> tf32_split_kernel_of(const KernelProgram& program, const Kernel& kernel) {
  if (kernel.body.size() != 3 || kernel.buffers.size() != 1 || kernel.grid.size() < 2 || kernel.grid.size() > 3) return std::nullopt;
  auto copy = kernel.body[0].as<CopyNode>();
  auto computed = kernel.body[0].as<MapNode>();  // a computed operand's tile
  auto map = kernel.body[2].as<MapNode>();
  const std::string& tile_name = kernel.buffers[0].name;
  auto at_ij = [](const Access& a) {
    auto i = a.index.size() == 2 ? a.index[0].as<VarNode>() : nullptr;
    auto j = a.index.size() == 2 ? a.index[1].as<VarNode>() : nullptr;
    return i && j && i->name == "i" && j->name == "j";
  };
  if ((!copy && !computed) || !kernel.body[1].as<BarrierNode>() || !map) return std::nullopt;
  if (copy ? copy->dst.name != tile_name : computed->dst.name != tile_name || !at_ij(computed->dst) || computed->domain.axes.size() != 2)
    return std::nullopt;
  const GlobalTensor* src = copy ? program.find_global(copy->src.name) : nullptr;
  const GlobalTensor* dst = program.find_global(map->dst.name);
  if ((copy && (!src || src->dtype != DType::f32)) || !dst || dst->dtype != DType::f32 || dst->role != GlobalRole::scratch || dst->shape.size() < 2)
    return std::nullopt;
  // The value: select(p == lo_part, round_tf32(t − round_tf32(t)), round_tf32(t)) of the tile's element t.
  auto select = map->value.as<SelectNode>();
  auto cond = select ? select->cond.as<BinaryNode>() : nullptr;
  auto lo_part = cond && cond->op == BinaryOp::eq ? cond->rhs.as<ConstNode>() : nullptr;
  auto hi = select ? select->if_false.as<UnaryNode>() : nullptr;
  auto lo = select ? select->if_true.as<UnaryNode>() : nullptr;
  auto tile = hi ? hi->operand.as<LoadNode>() : nullptr;
  if (!lo_part || !hi || hi->op != UnaryOp::round_tf32 || !lo || lo->op != UnaryOp::round_tf32 || !tile || tile->tensor != tile_name ||
      !structurally_equal(lo->operand, make_binary(BinaryOp::sub, hi->operand, make_unary(UnaryOp::round_tf32, hi->operand))))
    return std::nullopt;
  // The part's offset along j: the last index is p · K + (k tile · 32 + j).
  auto last = map->dst.index.back().as<BinaryNode>();
  auto part = last && last->op == BinaryOp::add ? last->lhs.as<BinaryNode>() : nullptr;
  auto k = part && part->op == BinaryOp::mul ? part->rhs.as<ConstNode>() : nullptr;
  if (!k) return std::nullopt;
  Tf32SplitKernel s;
  s.dst = dst->name;
  s.lo_part = static_cast<int>(lo_part->value);
  s.k = static_cast<int64_t>(k->value);
  s.rows = dst->shape[dst->shape.size() - 2];
  s.ld = dst->shape.back();
  const size_t g = kernel.grid.size();
  s.k_tiles = kernel.grid[g - 1].extent;
  s.row_tiles = kernel.grid[g - 2].extent;
  s.batch = g == 3 ? kernel.grid[0].extent : 1;
  if (computed) {
    s.value = computed->value;
    s.guard = computed->domain.guard;
    s.along_rows = computed->domain.axes[0].var == "j";
    s.row_var = kernel.grid[g - 2].var;
    s.k_var = kernel.grid[g - 1].var;
    if (g == 3) s.batch_var = kernel.grid[0].var;
    return s;
  }
  s.src = src->name;
  // The source's strides: the index naming i is the row, j the k, the others the batch (leading, consecutive).
  int64_t stride = 1;
  bool row = false, depth = false;
  for (size_t d = src->shape.size(); d-- > 0;) {
    const Expr& i = copy->src.index[d];
    if (uses(i, "i")) {
      s.row_stride = stride;
      row = true;
    } else if (uses(i, "j")) {
      s.k_stride = stride;
      depth = true;
    } else if (g == 3 && uses(i, kernel.grid[0].var)) {
      if (s.src_batch_stride == 0) s.src_batch_stride = stride;  // the innermost batch index's: the flattened batch's stride
    } else {
      return std::nullopt;
    }
    stride *= src->shape[d];
  }
  if (!row || !depth || (s.batch > 1 && s.src_batch_stride == 0)) return std::nullopt;
  return s;
}

Tf32Split split_tf32x3_operands(const KernelProgram& program) {
  Tf32Split result;
  result.program = program;
  result.program.kernels.clear();
  for (const Kernel& k : program.kernels) {
    const ContractNode* c = k.body.size() == 1 ? k.body[0].as<ContractNode>() : nullptr;
    if (!c || c->type != MmaType::tf32x3) {
      result.program.kernels.push_back(k);
      continue;
    }
    GemmSkeletonFit fit = fit_gemm_skeleton(*c, result.program.globals);
    if (!fit.problem) {
      result.notes.push_back(c->dst.name + ": not split (the skeleton does not take it: " + fit.refusal + ")");
      result.program.kernels.push_back(k);
      continue;
    }
    const GemmSkeletonProblem& p = *fit.problem;
    // The fitted A must be the term's a along a row axis and B its b along a column axis (a fit that put
    // the operands on each other's sides is not split: the strides below are per side).
    auto reads_on_side = [](const Expr& e, const GemmSkeletonOperand& op, const std::string& axis, const std::vector<std::string>& axes) {
      if (op.computed) return std::find(axes.begin(), axes.end(), axis) != axes.end() && uses(e, axis);
      auto load = e.as<LoadNode>();
      if (!load || load->tensor != op.tensor || std::find(axes.begin(), axes.end(), axis) == axes.end()) return false;
      for (auto& i : load->index)
        if (auto v = i.as<VarNode>(); v && v->name == axis) return true;
      return false;
    };
    if (p.row_axes.size() != 1 || p.column_axes.size() != 1 || !reads_on_side(c->terms[0].a, p.a, p.row_axes[0], c->row_axes) ||
        !reads_on_side(c->terms[0].b, p.b, p.column_axes[0], c->column_axes)) {
      result.notes.push_back(c->dst.name + ": not split (the skeleton's fit does not read A and B on the contract's sides)");
      result.program.kernels.push_back(k);
      continue;
    }
    const int64_t ld = tf32x3_split_ld(p.k);
    const std::string reduce = p.reduce_axis;
    std::string k3 = reduce + "3";
    for (bool clash = true; clash;) {
      clash = false;
      for (auto& a : c->domain.axes) clash = clash || a.var == k3;
      if (clash) k3 += "_";
    }
    ContractNode split = *c;
    split.type = MmaType::tf32;
    split.reduce_axes = {Axis{k3, 3 * p.k}};
    std::vector<Expr> index[2];
    const GemmSkeletonOperand* ops[2] = {&p.a, &p.b};
    const Expr* xs[2] = {&c->terms[0].a, &c->terms[0].b};
    const std::string sides[2] = {p.row_axes[0], p.column_axes[0]};
    std::string names[2];
    for (int s = 0; s < 2; ++s) {
      const bool batched = ops[s]->batch > 1;
      GlobalTensor g;
      g.name = free_global_name(result.program, c->dst.name + (s == 0 ? "_a3" : "_b3"));
      g.dtype = DType::f32;
      g.role = GlobalRole::scratch;
      if (batched) g.shape = p.batch_extents;
      g.shape.push_back(ops[s]->rows);
      g.shape.push_back(ld);
      if (batched)
        for (auto& b : p.batch_axes) index[s].push_back(make_var(b));
      index[s].push_back(make_var(sides[s]));
      index[s].push_back(make_var(k3));
      OperandSplit o = split_operand("split_" + g.name, g, *xs[s], *ops[s], sides[s], reduce, p.batch_axes, p.batch_extents, batched,
                                     s == 0 ? 1 : 0);
      result.program.globals.push_back(o.split);
      result.program.kernels.push_back(std::move(o.kernel));
      names[s] = g.name;
    }
    split.terms = {ContractTerm{make_load(names[0], index[0]), make_load(names[1], index[1])}};
    split.comment = c->comment + "; 3xTF32: tf32 over K' = 3K of the split operands " + names[0] + " and " + names[1];
    GemmSkeletonFit check = fit_gemm_skeleton(split, result.program.globals);
    if (!check.problem)
      throw std::logic_error("tf32 split of " + c->dst.name + ": the skeleton does not take the split contract: " + check.refusal);
    Kernel w = k;
    w.body = {make_stmt(std::move(split))};
    result.program.kernels.push_back(std::move(w));
    const double elements = static_cast<double>(p.a.batch * p.m + p.b.batch * p.n) * static_cast<double>(p.k);
    result.notes.push_back(c->dst.name + ": 3xTF32: " + print_expr(*xs[0]) + " and " + print_expr(*xs[1]) + " split into " + names[0] + "[" +
                           std::to_string(p.m) + ", " + std::to_string(ld) + "] and " + names[1] + "[" + std::to_string(p.n) + ", " +
                           std::to_string(ld) + "] (read " + mb(4 * elements) + ", write " + mb(12 * elements) +
                           "), then the tf32 skeleton over K' = " + std::to_string(3 * p.k));
  }
  return result;
}

}  // namespace solder
