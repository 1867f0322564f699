#include "backend/cuda/gemm_prologue_writer.h"

#include "solder/gemm/prologue_config.cuh"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "support/refusal.h"
#include "contract/gemm_prologue_fit.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "plan/skeleton_choice.h"

namespace solder {
namespace {

const char* mma_enum(MmaType t) {
  switch (t) {
    case MmaType::bf16: return "solder::gemm::Dtype::bf16";
    case MmaType::f16: return "solder::gemm::Dtype::f16";
    case MmaType::f8e4m3: return "solder::gemm::Dtype::e4m3";
    default: return "solder::gemm::Dtype::e5m2";
  }
}

constexpr int kSmCount = 132;
// ClusterN 2 for fp8 T (below). Off until it has run on a GPU: tests/gpu/gemm/test_sm90_gemm_prologue
// covers the cluster kernels (its last cases); turn on once they pass and the bench says it is faster.
constexpr bool kPrologueClusters = false;

// The prologue kernel's schedule (PrologueConfig's ConverterWarpgroup): inline (conversion in the
// consumer warpgroups) unless SOLDER_PROLOGUE_SCHEDULE=converter asks for the converter-warpgroup
// schedule, an A/B knob (docs/runtime.md): measured 2.0-3.2x slower on the H100 (bench/NOTES.md, fifth
// session). Any other value is the user's error (a Refusal: exit 2).
bool converter_schedule() {
  const char* value = std::getenv("SOLDER_PROLOGUE_SCHEDULE");
  if (!value || !*value || std::string(value) == "inline") return false;
  if (std::string(value) == "converter") return true;
  throw Refusal(std::string("SOLDER_PROLOGUE_SCHEDULE: expected inline or converter, found '") + value + "' (unset it for the default)");
}

// Loads of the staged source X[row, k] → x_, loads of side buffers → s_[i].
class PrologueLoads : public ExprMutator {
 public:
  std::string source, row, k;
  std::map<std::string, int> sides;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const LoadNode& load, const Expr& self) override {
    if (load.tensor == source && load.index.size() == 2 && load.index[0].as<VarNode>() && load.index[1].as<VarNode>() &&
        load.index[0].as<VarNode>()->name == row && load.index[1].as<VarNode>()->name == k)
      return make_load("x_", {make_int(0)});
    auto it = sides.find(load.tensor);
    if (it != sides.end()) return make_load(load.tensor, {make_int(it->second)});
    return ExprMutator::mutate(load, self);
  }
};

// What an operand sub-expression (after PrologueLoads) reads and does: the row-divisor path needs a
// divisor that reads neither x_ nor k nor any tensor but the side values, and no additions on either
// side of the division (so no FMA contraction can round numerator() or divisor() differently from
// the same terms inside operand()).
class DivisorScan : public ExprVisitor {
 public:
  std::string k;
  std::set<std::string> sides;
  bool reads_x = false, reads_k = false, reads_other = false, reads_side = false, adds = false;
  using ExprVisitor::visit;

 protected:
  void visit(const LoadNode& load) override {
    if (load.tensor == "x_") reads_x = true;
    else if (sides.count(load.tensor)) reads_side = true;
    else reads_other = true;
    ExprVisitor::visit(load);
  }
  void visit(const VarNode& var) override {
    if (var.name == k) reads_k = true;
  }
  void visit(const BinaryNode& b) override {
    if (b.op == BinaryOp::add || b.op == BinaryOp::sub) adds = true;
    ExprVisitor::visit(b);
  }
};

// Whether an epilogue scale (after PrologueLoads) reads nothing but the row variable, the side values
// and constants: then it is the same along a row.
bool row_only(const std::optional<Expr>& scale, const std::string& row, const std::set<std::string>& sides) {
  if (!scale) return true;
  struct Scan : ExprVisitor {
    std::string row;
    const std::set<std::string>* sides = nullptr;
    bool ok = true;
    using ExprVisitor::visit;
    void visit(const LoadNode& load) override {
      if (!sides->count(load.tensor)) ok = false;
      ExprVisitor::visit(load);
    }
    void visit(const VarNode& var) override {
      if (var.name != row) ok = false;
    }
  } scan;
  scan.row = row;
  scan.sides = &sides;
  scan.visit(*scale);
  return scan.ok;
}

}  // namespace

std::optional<RowDivision> row_division(const Expr& operand, const std::string& k, const std::set<std::string>& sides, bool pre_sweep) {
  auto div = operand.as<BinaryNode>();
  if (!div || div->op != BinaryOp::div) return std::nullopt;
  DivisorScan num, den;
  num.k = den.k = k;
  num.sides = den.sides = sides;
  num.visit(div->lhs);
  den.visit(div->rhs);
  if (num.adds || den.adds || den.reads_x || den.reads_k || den.reads_other || (den.reads_side && !pre_sweep)) return std::nullopt;
  return RowDivision{div->lhs, div->rhs};
}

std::optional<GemmSkeletonKernel> write_gemm_prologue_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<GemmSkeletonKernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  GemmPrologueFit fit = fit_gemm_prologue(kernel, program.globals);
  if (!fit.problem) return refuse(fit.refusal);
  const GemmPrologueProblem& pp = *fit.problem;
  const GemmSkeletonProblem& p = pp.problem;
  const ContractNode& c = *pp.contract;
  const DType out_dtype = program.find_global(c.dst.name)->dtype;
  // The tile: the planner's BM and BN for T (split-K and clusters are not on this path: 128 × 128
  // then), the ring refitted for A staged in its source type.
  int bm = 128, bn = 128, stages = 4;
  std::string plan_note = "fixed 128 × 128 tile";
  SkeletonChoice choice = choose_skeleton_config(p, c.type, out_dtype);
  if (choice.chosen && choice.chosen->config.split_k == 1 && choice.chosen->config.cluster_size() == 1) {
    bm = choice.chosen->config.bm;
    bn = choice.chosen->config.bn;
    stages = std::max(choice.chosen->config.stages, 4);
    plan_note = choice.why;
  } else if (choice.chosen) {
    plan_note = "the planner chose split-K or a cluster, which the prologue path has not: 128 × 128 instead";
  }
  const bool fp8_t = c.type == MmaType::f8e4m3 || c.type == MmaType::f8e5m2;
  const int mma_bytes = fp8_t ? 1 : 2, source_bytes = dtype_bytes(p.a.dtype);
  const int side_slots = std::max<int>(1, static_cast<int>(pp.sides.size()));
  stages = solder::gemm::prologue_stages(bm, bn, source_bytes, mma_bytes, std::min(stages, 8), side_slots);
  const int64_t tiles_m = (p.m + bm - 1) / bm, tiles_n = (p.n + bn - 1) / bn;
  // fp8 T with a 16-bit source stages A as two 128-byte K boxes per stage: clusters of two blocks on
  // adjacent tiles of a tile-row each load one and multicast it (A's L2 reads halved: 48 KB per K tile
  // at 128 × 256 instead of 64). 66 clusters of two fit on the H100's 132 SMs (measured 2026-11-26).
  const int cluster_n = kPrologueClusters && mma_bytes == 1 && source_bytes == 2 && tiles_n >= 2 ? 2 : 1;
  const int64_t tiles = tiles_m * ((tiles_n + cluster_n - 1) / cluster_n) * cluster_n;
  const bool converter = converter_schedule();

  GemmSkeletonLaunch launch;
  auto operand = [&](const GemmSkeletonOperand& o, int tile_rows) { return skeleton_launch_operand(program, o, tile_rows); };
  launch.a = operand(p.a, bm);
  launch.b = operand(p.b, bn);
  launch.m = static_cast<int>(p.m);
  launch.n = static_cast<int>(p.n);
  launch.k = static_cast<int>(p.k);
  launch.prologue = true;
  std::ostringstream config;
  config << "solder::gemm::PrologueConfig<" << skeleton_dtype_name(p.a.dtype) << ", " << mma_enum(c.type) << ", " << skeleton_dtype_name(p.b.dtype) << ", " << bm
         << ", " << bn << ", " << stages << ", " << (p.b.k_major ? "true" : "false") << ", 16, " << side_slots << ", " << cluster_n
         << (converter ? ", true" : "") << ">";
  launch.config = config.str();

  const std::string name = cuda_identifier(kernel.name);
  const std::string row = c.row_axes[0], k = p.reduce_axis;
  std::map<std::string, CudaArray> arrays;
  std::ostringstream members;
  for (auto& g : program.globals) {
    members << "  " << (g.role == GlobalRole::input ? "const " : "") << cuda_element_type(g.dtype) << "* " << cuda_identifier(g.name) << ";\n";
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true};
  }
  PrologueLoads loads;
  loads.source = p.a.tensor;
  loads.row = row;
  loads.k = k;
  for (size_t i = 0; i < pp.sides.size(); ++i) {
    loads.sides[pp.sides[i]->dst.name] = static_cast<int>(i);
    arrays[pp.sides[i]->dst.name] = CudaArray{"s_", {static_cast<int64_t>(pp.sides.size())}, DType::f32, false};
  }
  arrays["x_"] = CudaArray{"(&x_)", {1}, DType::f32, false};
  CudaExprPrinter printer;
  printer.array = [&](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  printer.dims = program.dims;
  const std::string row_id = cuda_identifier(row), k_id = cuda_identifier(k);

  std::ostringstream out;
  out << "#include <solder/gemm/sm90_gemm_prologue.cuh>\n";
  out << "// kernel " << kernel.name << ": computes";
  for (auto& d : kernel.definitions) out << " " << d;
  out << "\n// on the sm_90a GEMM skeleton's operand-prologue path: " << launch.config << ", M " << p.m << ", N " << p.n << ", K " << p.k;
  out << "\n// tile: " << plan_note << "; ring refitted to " << stages << " stages for A staged in " << dtype_name(p.a.dtype);
  out << "\n// schedule: " << (converter ? "converter warpgroup (SOLDER_PROLOGUE_SCHEDULE=converter)" : "inline (the consumer warpgroups convert A)");
  out << "\n// A = " << print_expr(c.terms[0].a) << ", converted from the staged " << p.a.tensor << " and rounded to "
      << mma_type_name(c.type) << " into a shared-memory tile (wgmma SS); B = " << p.b.tensor << (p.b.k_major ? " (K-major)" : " (N-major)");
  for (auto* s : pp.sides)
    out << "\n// side reduction " << s->dst.name << " = " << reduce_op_name(s->op) << "(" << k << ") " << print_expr(s->value)
        << " over the staged tiles" << (pp.pre_sweep ? " (a pre-sweep of the A stripe: A reads it)" : " (during the one sweep)");
  out << "\n";
  // The prologue functor.
  out << "struct " << name << "_prologue_ {\n" << members.str();
  out << "  static constexpr int Sides = " << pp.sides.size() << ";\n";
  out << "  static constexpr bool PreSweep = " << (pp.pre_sweep ? "true" : "false") << ";\n";
  out << "  __device__ void side_init(float* s_) const {\n";
  for (size_t i = 0; i < pp.sides.size(); ++i) {
    const ReduceOp op = pp.sides[i]->op;
    out << "    s_[" << i << "] = " << (op == ReduceOp::sum ? "0.0f" : op == ReduceOp::max ? "-solder::infinity()" : "solder::infinity()") << ";\n";
  }
  out << "    (void)s_;\n  }\n";
  out << "  __device__ void side_step(float* s_, int row_, int k_, float x_) const {\n";
  out << "    const long long " << row_id << " = row_; const long long " << k_id << " = k_; (void)" << row_id << "; (void)" << k_id
      << "; (void)x_;\n";
  for (size_t i = 0; i < pp.sides.size(); ++i) {
    const ReduceOp op = pp.sides[i]->op;
    const std::string v = printer.print_float(loads.mutate(pp.sides[i]->value));
    if (op == ReduceOp::sum) out << "    s_[" << i << "] += " << v << ";\n";
    else out << "    s_[" << i << "] = " << (op == ReduceOp::max ? "fmaxf" : "fminf") << "(s_[" << i << "], " << v << ");\n";
  }
  out << "    (void)s_;\n  }\n";
  out << "  __device__ void side_merge(float* s_, const float* o_) const {\n";
  for (size_t i = 0; i < pp.sides.size(); ++i) {
    const ReduceOp op = pp.sides[i]->op;
    if (op == ReduceOp::sum) out << "    s_[" << i << "] += o_[" << i << "];\n";
    else out << "    s_[" << i << "] = " << (op == ReduceOp::max ? "fmaxf" : "fminf") << "(s_[" << i << "], o_[" << i << "]);\n";
  }
  out << "    (void)s_; (void)o_;\n  }\n";
  out << "  __device__ float operand(int row_, int k_, float x_, const float* s_) const {\n";
  out << "    const long long " << row_id << " = row_; const long long " << k_id << " = k_; (void)" << row_id << "; (void)" << k_id
      << "; (void)s_;\n";
  // A's outer cast to T (quant_gemm's e4m3) is the skeleton's own rounding to TA (round to nearest,
  // saturating): left to it rather than rounded twice.
  Expr a_value = c.terms[0].a;
  if (auto cast = a_value.as<CastNode>()) {
    const bool same = (cast->dtype == DType::f8e4m3 && c.type == MmaType::f8e4m3) || (cast->dtype == DType::f8e5m2 && c.type == MmaType::f8e5m2) ||
                      (cast->dtype == DType::bf16 && c.type == MmaType::bf16) || (cast->dtype == DType::f16 && c.type == MmaType::f16);
    if (same) {
      a_value = cast->operand;
      out << "    // rounded to " << mma_type_name(c.type) << " by the skeleton (the operand's cast)\n";
    }
  }
  const Expr operand_value = loads.mutate(a_value);
  out << "    return " << printer.print_float(operand_value) << ";\n  }\n";
  std::set<std::string> side_arrays;
  for (auto* side : pp.sides) side_arrays.insert(side->dst.name);
  if (auto division = row_division(operand_value, k, side_arrays, pp.pre_sweep)) {
    // operand = numerator / divisor with a per-row divisor: the kernel multiplies by its reciprocal
    // where row_divide.h proves the rounding to T the same, and calls operand() elsewhere.
    out << "  static constexpr bool RowDivisor = true;\n";
    out << "  __device__ float numerator(int row_, int k_, float x_, const float* s_) const {\n";
    out << "    const long long " << row_id << " = row_; const long long " << k_id << " = k_; (void)" << row_id << "; (void)" << k_id
        << "; (void)s_; (void)x_;\n";
    out << "    return " << printer.print_float(division->numerator) << ";\n  }\n";
    out << "  __device__ float divisor(int row_, const float* s_) const {\n";
    out << "    const long long " << row_id << " = row_; (void)" << row_id << "; (void)s_;\n";
    out << "    return " << printer.print_float(division->divisor) << ";\n  }\n";
  }
  out << "};\n";
  // The epilogue functor.
  const CudaArray& dst = arrays.at(c.dst.name);
  std::vector<std::string> index;
  for (auto& i : c.dst.index) index.push_back(printer.print_int(i));
  out << "struct " << name << "_epilogue_ {\n" << members.str();
  out << "  // " << c.dst.name << " = acc" << (c.scale ? " · (" + print_expr(c.scale) + ")" : std::string("")) << ", rounded to "
      << dtype_name(dst.dtype) << "\n";
  auto columns = [&] {
    if (p.column_axes.size() == 1) {
      out << "    const long long " << cuda_identifier(p.column_axes[0]) << " = col_;\n";
    } else {
      out << "    long long col_rest_ = col_;\n";
      for (size_t i = p.column_axes.size(); i-- > 0;) {
        if (i == 0) out << "    const long long " << cuda_identifier(p.column_axes[i]) << " = col_rest_;\n";
        else
          out << "    const long long " << cuda_identifier(p.column_axes[i]) << " = col_rest_ % " << p.column_extents[i] << "LL; col_rest_ /= "
              << p.column_extents[i] << "LL;\n";
      }
    }
  };
  const std::string store_offset = printer.offset(dst, index);
  const std::optional<Expr> scale = c.scale ? std::optional<Expr>(loads.mutate(c.scale)) : std::nullopt;
  out << "  __device__ void operator()(int batch_, int row_, int col_, float acc_, const float* s_) const {\n";
  out << "    const long long " << row_id << " = row_;\n";
  columns();
  out << "    (void)batch_; (void)s_;\n";
  out << "    float value_ = acc_;\n";
  if (scale) out << "    value_ = value_ * (" << printer.print_float(*scale) << ");\n";
  out << "    solder::store(&" << dst.pointer << "[" << store_offset << "], value_);\n";
  out << "  }\n";
  // The scale once per row (row_factor) when it reads only the row and its side values; scaled() is
  // operator() with that factor. scaled_pair() stores columns col and col + 1 (col even) together when
  // the output is 16-bit, [row, column] with an even row length.
  std::set<std::string> side_names;
  for (auto* side : pp.sides) side_names.insert(side->dst.name);
  if (row_only(scale, row, side_names)) {
    out << "  static constexpr bool RowFactor = true;\n";
    out << "  __device__ float row_factor(int row_, const float* s_) const {\n";
    out << "    const long long " << row_id << " = row_; (void)" << row_id << "; (void)s_;\n";
    out << "    return " << (scale ? printer.print_float(*scale) : std::string("1.0f")) << ";\n  }\n";
    out << "  __device__ void scaled(int batch_, int row_, int col_, float acc_, float factor_) const {\n";
    out << "    const long long " << row_id << " = row_;\n";
    columns();
    out << "    (void)batch_; (void)factor_;\n";
    out << "    float value_ = acc_;\n";
    if (scale) out << "    value_ = value_ * factor_;\n";
    out << "    solder::store(&" << dst.pointer << "[" << store_offset << "], value_);\n";
    out << "  }\n";
    const bool pairs = (dst.dtype == DType::bf16 || dst.dtype == DType::f16) && p.column_axes.size() == 1 && c.dst.index.size() == 2 &&
                       c.dst.index[0].as<VarNode>() && c.dst.index[0].as<VarNode>()->name == row && c.dst.index[1].as<VarNode>() &&
                       c.dst.index[1].as<VarNode>()->name == p.column_axes[0] && dst.shape.size() == 2 && dst.shape[1] % 2 == 0;
    if (pairs) {
      const std::string pair_type = dst.dtype == DType::bf16 ? "__nv_bfloat162" : "__half2";
      const std::string pack = dst.dtype == DType::bf16 ? "__floats2bfloat162_rn" : "__floats2half2_rn";
      out << "  static constexpr bool Pairs = true;\n";
      out << "  __device__ void scaled_pair(int batch_, int row_, int col_, float acc0_, float acc1_, float factor_) const {\n";
      out << "    const long long " << row_id << " = row_;\n";
      columns();
      out << "    (void)batch_; (void)factor_;\n";
      out << "    float value0_ = acc0_, value1_ = acc1_;\n";
      if (scale) out << "    value0_ = value0_ * factor_; value1_ = value1_ * factor_;\n";
      out << "    auto* p_ = &" << dst.pointer << "[" << store_offset << "];\n";
      out << "    if ((reinterpret_cast<unsigned long long>(p_) & 3ull) == 0) {\n";
      out << "      *reinterpret_cast<" << pair_type << "*>(p_) = " << pack << "(value0_, value1_);\n";
      out << "    } else {\n";
      out << "      solder::store(p_, value0_); solder::store(p_ + 1, value1_);\n";
      out << "    }\n  }\n";
    }
  }
  out << "};\n";
  out << "using " << name << "_config_ = " << launch.config << ";\n";
  out << "SOLDER_GEMM_PROLOGUE_KERNEL(" << name << ", " << name << "_config_, " << name << "_prologue_, " << name << "_epilogue_)\n";

  GemmSkeletonKernel result;
  result.source = out.str();
  result.info.name = name;
  result.info.threads = solder::gemm::prologue_threads(bm);
  result.info.cluster = cluster_n;
  result.info.blocks = std::max<int64_t>(1, std::min<int64_t>(tiles, kSmCount) / cluster_n) * cluster_n;
  result.info.shared_bytes = solder::gemm::prologue_smem_bytes(bm, bn, source_bytes, mma_bytes, stages, side_slots);
  result.info.gemm = launch;
  return result;
}

}  // namespace solder
