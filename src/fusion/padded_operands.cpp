#include "fusion/padded_operands.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <map>
#include <set>
#include <sstream>

#include "contract/canonicalize.h"
#include "contract/gathered_gemm_fit.h"
#include "contract/gemm_skeleton_fit.h"
#include "contract/operand_copy_fit.h"
#include "contract/operand_reads.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "kernel/kernel_printer.h"

namespace solder {
namespace {

std::string mb(int64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / 1e6 << " MB";
  return out.str();
}

// A name no global of the program has: `wanted`, else `wanted_2`, `wanted_3`, ...
std::string free_global_name(const KernelProgram& program, const std::string& wanted) {
  std::string name = wanted;
  for (int i = 2; program.find_global(name); ++i) name = wanted + "_" + std::to_string(i);
  return name;
}

struct Candidate {
  Kernel copy;           // the copy kernel, run before the contraction's
  GlobalTensor padded;   // P
  ContractNode contract; // the contraction reading P
  std::string note;
  std::string key;       // what P holds (copy_key)
};

// The copy kernel `name` writing P[m_t · R + m, k] = (k < K ? A(m_t · R + m, k) : 0) over m < R, k < Kp
// (whole rows of P, a global of M rows), A an expression of the row axis `row` and the depth axis `depth`.
Kernel copy_kernel(const std::string& name, const GlobalTensor& padded, const Expr& a, const std::string& row, const std::string& depth,
                   int64_t k, const std::string& comment) {
  const int64_t m = padded.shape[0], kp = padded.shape[1];
  const int64_t rows = padded_copy_rows(kp / (16 / dtype_bytes(padded.dtype)));
  const std::string tile = row + "_t";
  Expr global_row = make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var(tile), make_int(rows)), make_var(row));
  MapNode map;
  map.comment = comment;
  map.domain.axes = {{row, rows}, {depth, kp}};
  if (m % rows != 0) map.domain.guard = make_binary(BinaryOp::lt, global_row, make_int(m));
  map.dst = Access{padded.name, {global_row, make_var(depth)}};
  map.value = substitute_vars(a, {{row, global_row}});
  if (kp != k) map.value = make_select(make_binary(BinaryOp::lt, make_var(depth), make_int(k)), map.value, make_const(0.0));
  Kernel copy;
  copy.name = name;
  copy.grid = {{tile, (m + rows - 1) / rows}};
  copy.threads = 256;
  copy.body.push_back(make_stmt(std::move(map)));
  return copy;
}

// Whether `x` is read along the side axis: it loads, and every load's last (contiguous) index uses `side`
// and not `depth` (a weight b[k, n] copied into P[n, k]): the row copy above would read it column by
// column.
bool reads_along_side(const Expr& x, const std::string& side, const std::string& depth) {
  bool any = false, along = true;
  for_each_load(x, [&](const LoadNode& load) {
    any = true;
    if (load.index.empty()) {
      along = false;
      return;
    }
    std::set<std::string> used;
    for (auto& v : vars_used(load.index.back())) used.insert(v);
    along = along && used.count(side) && !used.count(depth);
  });
  return any && along;
}

// The transposing copy kernel `name`: P[s, k] = (k < K ? X(s, k) : 0) over s < S, k < Kp, one tile of
// kTransposeCopyTile sides × kTransposeCopyTile k per block through shared memory: a map into the tile
// with the side axis fastest (reads along X's contiguous index; the tile's store rounds to P's dtype as
// P's would), a barrier, then a map of the tile into P with k fastest (writes along P's rows). The same
// values as copy_kernel's, read and written in coalesced order.
Kernel transposing_copy_kernel(const std::string& name, const GlobalTensor& padded, const Expr& x, const std::string& side,
                               const std::string& depth, int64_t k, const std::string& comment, const std::string& tile_name = "",
                               const std::string& side_tile_name = "", const std::string& depth_tile_name = "") {
  const int64_t rows = padded.shape[0], kp = padded.shape[1], tile = kTransposeCopyTile;
  const std::string side_tile = side_tile_name.empty() ? side + "_t" : side_tile_name;
  const std::string depth_tile = depth_tile_name.empty() ? depth + "_t" : depth_tile_name;
  auto global = [&](const std::string& tile_var, const std::string& var) {
    return make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var(tile_var), make_int(tile)), make_var(var));
  };
  const Expr global_side = global(side_tile, side), global_depth = global(depth_tile, depth);
  Expr guard;
  if (rows % tile != 0) guard = make_binary(BinaryOp::lt, global_side, make_int(rows));
  if (kp % tile != 0) {
    Expr in_k = make_binary(BinaryOp::lt, global_depth, make_int(kp));
    guard = guard ? make_binary(BinaryOp::logical_and, guard, in_k) : in_k;
  }
  Kernel copy;
  copy.name = name;
  copy.grid = {{side_tile, (rows + tile - 1) / tile}, {depth_tile, (kp + tile - 1) / tile}};
  copy.threads = 256;
  Buffer staged;
  staged.name = tile_name.empty() ? name + "_tile" : tile_name;
  staged.shape = {tile, tile + 1};  // one padding column: the side-fastest stores fall on distinct banks
  staged.dtype = padded.dtype;
  staged.scope = Scope::shared;
  copy.buffers.push_back(staged);
  MapNode in;
  in.comment = comment + ": " + std::to_string(tile) + " x " + std::to_string(tile) + " tiles, read along " + side;
  in.domain.axes = {{depth, tile}, {side, tile}};
  in.domain.guard = guard;
  in.dst = Access{staged.name, {make_var(side), make_var(depth)}};
  in.value = substitute_vars(x, {{side, global_side}, {depth, global_depth}});
  if (kp != k) in.value = make_select(make_binary(BinaryOp::lt, global_depth, make_int(k)), in.value, make_const(0.0));
  copy.body.push_back(make_stmt(std::move(in)));
  copy.body.push_back(make_stmt(BarrierNode{}));
  MapNode out;
  out.comment = "the tile into " + padded.name + "'s rows, written along " + depth;
  out.domain.axes = {{side, tile}, {depth, tile}};
  out.domain.guard = guard;
  out.dst = Access{padded.name, {global_side, global_depth}};
  out.value = make_load(staged.name, {make_var(side), make_var(depth)});
  copy.body.push_back(make_stmt(std::move(out)));
  return copy;
}

// A statement's printed form without its comment (two kernels compared by what they compute).
std::string uncommented(const Stmt& s) {
  if (auto m = s.as<MapNode>()) {
    MapNode copy = *m;
    copy.comment.clear();
    return print_stmt(make_stmt(std::move(copy)));
  }
  return print_stmt(s);
}

// What a copy computes, independent of its axes' names: P's shape and dtype and A printed with the row
// and depth axes renamed (two copies with equal keys write equal tensors).
std::string copy_key(const GlobalTensor& padded, const Expr& a, const std::string& row, const std::string& depth, int64_t k) {
  std::ostringstream key;
  key << dtype_name(padded.dtype) << " " << padded.shape[0] << "x" << padded.shape[1] << " k<" << k << " "
      << print_expr(substitute_vars(a, {{row, make_var("row_")}, {depth, make_var("depth_")}}));
  return key.str();
}

// The dims of an expression bound to their values (K ranges' boundaries as integers, which the
// skeleton's fit reads).
class BindDims : public ExprMutator {
 public:
  explicit BindDims(const std::map<std::string, int64_t>& dims) : dims_(dims) {}
  using ExprMutator::mutate;

 protected:
  Expr mutate(const DimRefNode& node, const Expr& self) override {
    auto it = dims_.find(node.name);
    return it == dims_.end() ? self : make_int(it->second);
  }

 private:
  const std::map<std::string, int64_t>& dims_;
};

// The copies of one K-range contraction, and the contraction reading them.
struct RangeCandidate {
  std::vector<std::pair<Kernel, GlobalTensor>> copies;  // new copy kernels and their P (not the shared ones)
  std::vector<std::pair<std::string, std::string>> keyed;  // (key, P) of the new copies
  ContractNode contract;
  std::string note;
};

// Kernel `k`'s contract (two K-range terms) with each range whose A the skeleton cannot stage (its
// pitch) read from a padded copy of that range alone, the others as they are; `shared`: the copies
// made so far (key → P), reused where one computes the same tensor (nerf_mlp's x, copied for h0).
std::optional<RangeCandidate> pad_ranges(const KernelProgram& program, const Kernel& k, const std::map<std::string, std::string>& shared,
                                         std::string& why) {
  ContractNode c = *k.body[0].as<ContractNode>();
  if (c.terms.size() != 2 || c.reduce_axes.size() != 1 || c.row_axes.size() != 1 || !c.pair_terms.empty() || c.type == MmaType::f32 ||
      c.type == MmaType::tf32 || c.type == MmaType::tf32x3 || c.domain.axes.size() != 2)
    return std::nullopt;
  BindDims bind(program.dims);
  for (auto& t : c.terms) {
    t.a = bind.mutate(t.a);
    t.b = bind.mutate(t.b);
  }
  const std::string& row = c.row_axes[0];
  const std::string& depth = c.reduce_axes[0].var;
  const int64_t kk = c.reduce_axes[0].extent;
  int64_t m = 0;
  for (auto& a : c.domain.axes)
    if (a.var == row) m = a.extent;
  const DType t = c.type == MmaType::bf16 ? DType::bf16 : DType::f16;
  const int64_t per_row = 16 / dtype_bytes(t);
  RangeCandidate out;
  std::vector<GlobalTensor> globals = program.globals;
  std::vector<std::string> parts;
  int64_t read_bytes = 0, copy_bytes = 0;  // what the ranges' A tensors hold; what the new copies write
  for (auto& term : c.terms) {
    std::optional<GemmKRangeTerm> r = gemm_k_range_term(term.a, depth, kk);
    if (!r) return std::nullopt;  // not K ranges
    const LoadNode& load = *r->a.as<LoadNode>();
    const GlobalTensor* g = program.find_global(load.tensor);
    if (!g || g->dtype != t) {
      why = "K range " + print_expr(r->a) + " does not load a global of T";
      return std::nullopt;
    }
    read_bytes += g->bytes();
    std::vector<std::string> order;
    std::string refusal;
    if (operand_of(r->a, c.row_axes, depth, {}, globals, "A", order, refusal)) {
      parts.push_back(load.tensor + " (k " + std::to_string(r->lo) + ".." + std::to_string(r->hi) + ", staged as it is)");
      continue;
    }
    // A copy of this range alone: P[m, j] = (j < hi − lo ? A_r(m, j) : 0) over j < Kp.
    const int64_t len = r->hi - r->lo, kp = (len + per_row - 1) / per_row * per_row;
    GlobalTensor padded{"", {m, kp}, t, GlobalRole::intermediate};
    const std::string key = copy_key(padded, r->a, row, depth, len);
    std::string name;
    std::string kind = "copied into ";
    if (auto it = shared.find(key); it != shared.end()) {
      name = it->second;
      kind = "read from ";
    } else {
      for (auto& [k2, p] : out.keyed)
        if (k2 == key) name = p;
    }
    if (name.empty()) {
      KernelProgram named = program;
      named.globals = globals;
      padded.name = free_global_name(named, load.tensor + "_padded");
      name = padded.name;
      globals.push_back(padded);
      Kernel copy = copy_kernel("pad_" + c.dst.name + "_" + load.tensor, padded, r->a, row, depth, len,
                                load.tensor + " (a K range of " + c.dst.name + "'s contraction) in rows of " + std::to_string(kp * dtype_bytes(t)) +
                                    " bytes");
      out.copies.push_back({std::move(copy), padded});
      out.keyed.push_back({key, name});
      copy_bytes += padded.bytes();
    }
    parts.push_back(load.tensor + " (k " + std::to_string(r->lo) + ".." + std::to_string(r->hi) + ", " + kind + name + ")");
    // The term reads P at the range's own k: P[m, k − lo] inside the same select.
    Expr k_index = r->lo == 0 ? make_var(depth) : make_binary(BinaryOp::sub, make_var(depth), make_int(r->lo));
    Expr p_load = make_load(name, {make_var(row), k_index});
    const Expr zero = make_const(0.0);
    const Expr cond = make_binary(BinaryOp::lt, make_var(depth), make_int(r->lo == 0 ? r->hi : r->lo));
    term.a = r->lo == 0 ? make_select(cond, p_load, zero) : make_select(cond, zero, p_load);
  }
  // The rule's bound, against what the contraction's A reads (both ranges): a re-pitched range, not an im2col.
  if (static_cast<double>(copy_bytes) > kPaddedCopyMaxRatio * static_cast<double>(read_bytes)) {
    why = "the copies of its K ranges (" + mb(copy_bytes) + ") are more than " + std::to_string(kPaddedCopyMaxRatio).substr(0, 4) +
          "x what A reads (" + mb(read_bytes) + ")";
    return std::nullopt;
  }
  GemmSkeletonFit fit = fit_gemm_skeleton(c, globals);
  if (!fit.problem) {
    why = "the skeleton does not take its K ranges: " + fit.refusal;
    return std::nullopt;
  }
  c.comment = c.dst.name + " (the whole contraction, one launch of the GEMM skeleton in two K ranges)";
  out.contract = c;
  out.note = c.dst.name + ": two K ranges, " + parts[0] + " and " + parts[1] + ", on the skeleton's two-range kernel";
  return out;
}

// The padded form of kernel `k` (one whole contract), or the reason it is not taken (`why`).
std::optional<Candidate> pad(const KernelProgram& program, const Kernel& k, std::string& why) {
  const ContractNode& c = *k.body[0].as<ContractNode>();
  GemmSkeletonFit plain = fit_gemm_skeleton(c, program.globals);
  if (plain.problem) return std::nullopt;  // the skeleton takes it already: nothing to say
  GatheredGemmFit gathered = fit_gathered_gemm(c, program.globals, &program.dims);
  if (!gathered.problem) return std::nullopt;  // not a gathered GEMM either: nothing to say
  const GatheredGemmProblem& p = *gathered.problem;
  const std::string skeleton_refusal = plain.refusal;
  if (p.row_axes.size() != 1 || p.reduce_axes.size() != 1 || !p.batch_axes.empty()) {
    why = "not one row axis, one reduced axis and no batch";
    return std::nullopt;
  }
  if (p.a_leaves.empty()) {
    why = "A is not a tree of selects over loads";
    return std::nullopt;
  }
  const DType t = c.type == MmaType::bf16 ? DType::bf16 : DType::f16;
  const int64_t per_row = 16 / dtype_bytes(t);
  const int64_t m = p.m, kk = p.k, kp = (kk + per_row - 1) / per_row * per_row;
  const int64_t copy_bytes = m * kp * dtype_bytes(t);
  // What the copy reads of A's tensors (contract/operand_reads.h): each at most whole, at most M · K elements per load.
  const int64_t read_bytes = operand_bytes_read(p.a, m * kk, program.globals).value_or(0);
  if (static_cast<double>(copy_bytes) > kPaddedCopyMaxRatio * static_cast<double>(read_bytes)) {
    why = "the copy of A (" + mb(copy_bytes) + ") is more than " + std::to_string(kPaddedCopyMaxRatio).substr(0, 4) +
          "x what A reads (" + mb(read_bytes) + ")";
    return std::nullopt;
  }

  Candidate out;
  const std::string& row = p.row_axes[0].var;
  const std::string& depth = p.reduce_axes[0].var;
  out.padded = {free_global_name(program, c.dst.name + "_a_padded"), {m, kp}, t, GlobalRole::intermediate};
  out.contract = c;
  out.contract.comment = c.dst.name + " (the whole contraction, one launch of the GEMM skeleton; A copied into " + out.padded.name + " by pad_" +
                         c.dst.name + ")";
  out.contract.terms = {ContractTerm{make_load(out.padded.name, {make_var(row), make_var(depth)}), p.b}};
  std::vector<GlobalTensor> globals = program.globals;
  globals.push_back(out.padded);
  GemmSkeletonFit fit = fit_gemm_skeleton(out.contract, globals);
  if (!fit.problem) {
    why = "the skeleton does not take it with A padded either: " + fit.refusal;
    return std::nullopt;
  }

  // The copy: P[m_t · R + m, k] = (k < K ? A(m_t · R + m, k) : 0) over m < R, k < Kp (whole rows).
  const int64_t rows = padded_copy_rows(kp / per_row);
  const std::string tile = row + "_t";
  Expr global_row = make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var(tile), make_int(rows)), make_var(row));
  MapNode map;
  map.comment = "A of " + c.dst.name + "'s contraction, in rows of " + std::to_string(kp * dtype_bytes(t)) + " bytes";
  map.domain.axes = {{row, rows}, {depth, kp}};
  if (m % rows != 0) map.domain.guard = make_binary(BinaryOp::lt, global_row, make_int(m));
  map.dst = Access{out.padded.name, {global_row, make_var(depth)}};
  map.value = substitute_vars(p.a, {{row, global_row}});
  if (kp != kk) map.value = make_select(make_binary(BinaryOp::lt, make_var(depth), make_int(kk)), map.value, make_const(0.0));
  out.key = copy_key(out.padded, p.a, row, depth, kk);
  out.copy.name = "pad_" + c.dst.name;
  out.copy.definitions = {};
  out.copy.grid = {{tile, (m + rows - 1) / rows}};
  out.copy.threads = 256;
  out.copy.body.push_back(make_stmt(std::move(map)));

  out.note = c.dst.name + ": A = " + print_expr(p.a) + " copied into " + out.padded.name + "[" + std::to_string(m) + ", " +
             std::to_string(kp) + "] (" + mb(copy_bytes) + ", rows of " + std::to_string(kp * dtype_bytes(t)) +
             " bytes; reads " + mb(read_bytes) + "), then the skeleton, instead of the gathered GEMM (the skeleton did not stage it: " +
             skeleton_refusal + ")";
  return out;
}

// What a copy is, for the report: "gathered copy of A (emb[tok])" for a row gather (operand_reads.h),
// "conversion copy of B = w[n, k]" otherwise.
std::string copy_title(const OperandCopy& copy) {
  if (std::optional<std::string> gather = row_gather(copy.value, copy.side, copy.depth)) return "gathered copy of " + copy.operand + " (" + *gather + ")";
  return "conversion copy of " + copy.operand + " = " + print_expr(copy.value);
}

// Kernel `k` (one whole contract the skeleton refuses) as conversion copies of its operands into T, then
// the skeleton (contract/operand_copy_fit.h), appended to `result` when they fit and pay; false otherwise,
// with `why` extended by the reason when the contract would stay on the gathered GEMM.
bool convert_operands(PaddedOperands& result, const Kernel& k, std::map<std::string, std::string>& shared, std::string& why) {
  const ContractNode& c = *k.body[0].as<ContractNode>();
  if (fit_gemm_skeleton(c, result.program.globals).problem) return false;
  std::string refusal;
  std::optional<OperandCopies> copies = fit_operand_copies(c, result.program.globals, &refusal);
  if (!copies || !copies->pays()) {
    std::string gathers;  // the row gathers among the copies, named in the report
    if (copies)
      for (auto& copy : copies->copies)
        if (row_gather(copy.value, copy.side, copy.depth)) gathers += (gathers.empty() ? "" : " and ") + copy_title(copy);
    if (!why.empty()) why += "; no " + (gathers.empty() ? std::string("conversion copy") : gathers) + ": " + (copies ? copies->figures() : refusal);
    return false;
  }
  std::vector<std::string> parts;
  for (auto& copy : copies->copies) {
    const std::string key = copy_key(copy.copy, copy.value, copy.side, copy.depth, copy.k);
    const int64_t row_bytes = copy.copy.shape[1] * dtype_bytes(copy.copy.dtype);
    const std::string what = copy_title(copy) + " to " + std::string(dtype_name(copy.copy.dtype));
    if (auto it = shared.find(key); it != shared.end()) {
      copy.copy.name = it->second;  // an earlier copy computes the same tensor
      parts.push_back(what + " read from " + copy.copy.name);
      continue;
    }
    copy.copy.name = free_global_name(result.program, copy.copy.name);
    result.program.globals.push_back(copy.copy);
    const std::string comment = what + " before the skeleton's " + c.dst.name + " (K-major rows of " + std::to_string(row_bytes) + " bytes)";
    const bool transposed = transposing_copies_enabled() && reads_along_side(copy.value, copy.side, copy.depth);
    result.program.kernels.push_back(transposed ? transposing_copy_kernel("convert_" + copy.copy.name, copy.copy, copy.value, copy.side,
                                                                          copy.depth, copy.k, comment)
                                                : copy_kernel("convert_" + copy.copy.name, copy.copy, copy.value, copy.side, copy.depth, copy.k,
                                                              comment));
    shared[key] = copy.copy.name;
    parts.push_back(what + " into " + copy.copy.name + "[" + std::to_string(copy.copy.shape[0]) + ", " + std::to_string(copy.copy.shape[1]) +
                    "] (" + copy.why + "; reads " + mb(copy.bytes_read) + ")" +
                    (transposed ? ", transposed through " + std::to_string(kTransposeCopyTile) + " x " + std::to_string(kTransposeCopyTile) +
                                      " shared tiles"
                                : std::string()));
  }
  ContractNode converted = with_copies(c, copies->copies);
  std::string list;
  for (auto& copy : copies->copies) list += (list.empty() ? "" : " and ") + copy.copy.name;
  converted.comment = c.dst.name + " (the whole contraction, one launch of the GEMM skeleton; its operands read from the conversion copies " + list + ")";
  Kernel skeleton = k;
  skeleton.body.clear();
  skeleton.body.push_back(make_stmt(std::move(converted)));
  result.program.kernels.push_back(std::move(skeleton));
  std::string note = c.dst.name + ": ";
  if (c.type == MmaType::tf32) note += "bf16 x f16: both operands exact in tf32; conversion copies to f32, tf32 skeleton: ";
  for (size_t i = 0; i < parts.size(); ++i) note += (i ? "; " : "") + parts[i];
  result.notes.push_back(note + " before the skeleton: " + copies->figures());
  return true;
}

}  // namespace

int64_t padded_copy_rows(int64_t vectors_per_row) {
  return std::min(kPaddedCopyMaxRows, 256 / std::gcd(int64_t{256}, vectors_per_row));
}

std::optional<TransposingCopy> transposing_copy_of(const KernelProgram& program, const Kernel& kernel) {
  if (kernel.body.size() != 3 || kernel.buffers.size() != 1 || kernel.grid.size() != 2) return std::nullopt;
  auto in = kernel.body[0].as<MapNode>();
  auto out = kernel.body[2].as<MapNode>();
  if (!in || !kernel.body[1].as<BarrierNode>() || !out || out->domain.axes.size() != 2 || in->dst.name != kernel.buffers[0].name)
    return std::nullopt;
  const GlobalTensor* dst = program.find_global(out->dst.name);
  if (!dst || dst->shape.size() != 2) return std::nullopt;
  // X: src[k_g, s_g], under select(k_g < K, X, 0) where P has columns past K.
  Expr x = in->value;
  int64_t k = dst->shape[1];
  if (auto sel = x.as<SelectNode>()) {
    auto cond = sel->cond.as<BinaryNode>();
    auto bound = cond && cond->op == BinaryOp::lt ? cond->rhs.as<ConstNode>() : nullptr;
    if (!bound || !is_constant_zero(sel->if_false)) return std::nullopt;
    k = static_cast<int64_t>(bound->value);
    x = sel->if_true;
  }
  auto load = x.as<LoadNode>();
  const GlobalTensor* src = load ? program.find_global(load->tensor) : nullptr;
  if (!src || src->shape != std::vector<int64_t>{k, dst->shape[0]}) return std::nullopt;
  const std::string& side = out->domain.axes[0].var;
  const std::string& depth = out->domain.axes[1].var;
  // The kernel must be exactly the one the pass builds for that load (comments aside).
  Kernel expected = transposing_copy_kernel(kernel.name, *dst, make_load(src->name, {make_var(depth), make_var(side)}), side, depth, k, "",
                                            kernel.buffers[0].name, kernel.grid[0].var, kernel.grid[1].var);
  if (expected.grid.size() != 2 || expected.grid[0].var != kernel.grid[0].var || expected.grid[0].extent != kernel.grid[0].extent ||
      expected.grid[1].var != kernel.grid[1].var || expected.grid[1].extent != kernel.grid[1].extent ||
      expected.buffers[0].name != kernel.buffers[0].name || expected.buffers[0].shape != kernel.buffers[0].shape ||
      expected.buffers[0].dtype != kernel.buffers[0].dtype)
    return std::nullopt;
  for (size_t i = 0; i < 3; ++i)
    if (uncommented(expected.body[i]) != uncommented(kernel.body[i])) return std::nullopt;
  TransposingCopy t;
  t.src = src->name;
  t.dst = dst->name;
  t.sides = dst->shape[0];
  t.kp = dst->shape[1];
  t.k = k;
  t.side_tiles = kernel.grid[0].extent;
  t.k_tiles = kernel.grid[1].extent;
  return t;
}

bool transposing_copies_enabled() {
  const char* v = std::getenv("SOLDER_TRANSPOSE_COPIES");
  return !(v && std::string(v) == "0");
}

bool padded_operands_enabled() {
  const char* v = std::getenv("SOLDER_PADDED_OPERANDS");
  return !(v && std::string(v) == "0");
}

PaddedOperands pad_gathered_operands(const KernelProgram& program) {
  PaddedOperands result;
  result.program = program;
  if (!padded_operands_enabled()) return result;
  result.program.kernels.clear();
  std::map<std::string, std::string> copies;  // the copies made so far: key (copy_key) → P
  for (const Kernel& k : program.kernels) {
    if (k.body.size() != 1 || k.body[0].kind() != StmtKind::Contract) {
      result.program.kernels.push_back(k);
      continue;
    }
    std::string why;
    if (gemm_k_ranges_enabled() && !fit_gemm_skeleton(*k.body[0].as<ContractNode>(), program.globals).problem) {
      std::string range_why;
      if (std::optional<RangeCandidate> ranges = pad_ranges(result.program, k, copies, range_why)) {
        for (auto& [copy, padded] : ranges->copies) {
          result.program.globals.push_back(padded);
          result.program.kernels.push_back(std::move(copy));
        }
        for (auto& [key, name] : ranges->keyed) copies[key] = name;
        Kernel skeleton = k;
        skeleton.body.clear();
        skeleton.body.push_back(make_stmt(std::move(ranges->contract)));
        result.program.kernels.push_back(std::move(skeleton));
        result.notes.push_back(ranges->note);
        continue;
      }
      if (!range_why.empty()) result.notes.push_back(k.body[0].as<ContractNode>()->dst.name + ": not as K ranges: " + range_why);
    }
    std::optional<Candidate> candidate = pad(result.program, k, why);
    if (!candidate) {
      if (convert_operands(result, k, copies, why)) continue;
      if (!why.empty()) result.notes.push_back(k.body[0].as<ContractNode>()->dst.name + ": stays on the gathered GEMM: " + why);
      result.program.kernels.push_back(k);
      continue;
    }
    result.program.globals.push_back(candidate->padded);
    result.program.kernels.push_back(candidate->copy);
    copies[candidate->key] = candidate->padded.name;
    Kernel skeleton = k;
    skeleton.body.clear();
    skeleton.body.push_back(make_stmt(std::move(candidate->contract)));
    result.program.kernels.push_back(std::move(skeleton));
    result.notes.push_back(candidate->note);
  }
  return result;
}

}  // namespace solder
