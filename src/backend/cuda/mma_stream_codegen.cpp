#include "backend/cuda/mma_stream_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "backend/cuda/mma_stream_expr.h"
#include "ir/diagnostics.h"
#include "ir/printer.h"

namespace solder {
namespace {

using namespace mma_stream;

struct Refusal {
  std::string why;
};
[[noreturn]] void refuse(const std::string& why) { throw Refusal{why}; }

bool is_16bit(DType t) { return t == DType::bf16 || t == DType::f16; }

// ---- The writer -----------------------------------------------------------------------------------

enum class Role { row, wide, scores, tile_a, tile_b, tile_v, column, scalar };

// How the variables of one statement map onto a thread's fragment elements.
struct Binding {
  std::vector<std::string> lead;  // extent-1 axes: 0
  std::string row;                // the row axis i: this thread's row (slot rs)
  std::string col;                // the column axis (j over S, or d over a wide tile); empty for rows
  bool col_is_scores = false;     // col ranges over S's columns (BN) rather than a wide tile's (DV)
};

class MmaStreamWriter {
 public:
  MmaStreamWriter(const KernelProgram& program, const Kernel& kernel) : program_(program), kernel_(kernel) {
    printer_.dims = program.dims;
    intervals_.dims = program.dims;
    printer_.array = [this](const std::string& name) -> const CudaArray* {
      auto it = arrays_.find(name);
      return it == arrays_.end() ? nullptr : &it->second;
    };
    for (auto& g : program.globals) arrays_[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true};
  }

  MmaStreamKernel write() {
    analyze();
    const int threads = warps_ * 32;
    int64_t smem = 0;
    std::map<std::string, int64_t> offsets;
    for (auto* name : {&A_, &B_, &V_}) {
      offsets[*name] = smem;
      smem += (kernel_.find_buffer(*name)->elements() * 2 * (*name == A_ ? 1 : 2) + 127) / 128 * 128;  // B and V: two stages
    }
    exchange_offset_ = smem;  // the block-wide min/max exchange of data-dependent mask bounds
    if (!row_ranges_.empty()) smem += 2 * warps_ * 8;
    std::ostringstream body;
    emit_body(body);
    std::ostringstream out;
    out << "// kernel " << kernel_.name << ": computes";
    for (auto& d : kernel_.definitions) out << " " << d;
    out << "\n// tensor-core emitter: " << summary_ << "\n";
    out << "extern \"C\" __global__ void __launch_bounds__(" << threads << ", " << (BN_ / 2 + DV_ / 2 + D_ / 4 <= 80 ? 2 : 1) << ") "
        << cuda_identifier(kernel_.name) << "(";
    for (size_t i = 0; i < program_.globals.size(); ++i) {
      const GlobalTensor& g = program_.globals[i];
      out << (i ? ",\n    " : "\n    ") << (g.role == GlobalRole::input ? "const " : "") << cuda_element_type(g.dtype) << "* __restrict__ "
          << cuda_identifier(g.name);
    }
    out << ") {\n";
    out << "  extern __shared__ __align__(128) unsigned char smem[];\n";
    out << "  using T = " << cuda_element_type(in_dtype_) << ";\n";
    out << "  long long block_linear = blockIdx.x;\n";
    for (size_t d = kernel_.grid.size(); d-- > 0;) {
      const GridDim& g = kernel_.grid[d];
      out << "  const long long " << cuda_identifier(g.var) << " = block_linear % " << g.extent << "LL; block_linear /= " << g.extent << "LL;\n";
    }
    out << "  (void)block_linear;\n";
    out << "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
    out << "  const int row0 = warp * " << 16 * G_ << " + (lane >> 2);  // this thread's rows: row0 + 16 g + 8 h (row slot rs = 2 g + h)\n";
    out << "  // ldmatrix row addresses: row of this lane's matrix row, and its 16-byte chunk's swizzle (see tile/swizzle.cuh)\n";
    out << "  const int b_row = ((lane >> 4) << 3) + (lane & 7);\n";
    out << "  const int b_xor = (((lane >> 3) & 1) ^ (b_row & solder::tile::Swizzle<" << D_ << ">::mask)) << 3;\n";
    out << "  const int v_xor = ((lane >> 4) ^ (lane & solder::tile::Swizzle<" << DV_ << ">::mask)) << 3;\n";
    for (auto* name : {&A_, &B_, &V_})
      out << "  T* const " << cuda_identifier(*name) << (*name == A_ ? "" : "_stages") << " = reinterpret_cast<T*>(smem + " << offsets[*name]
          << ");  // shared, swizzled [" << (*name == A_ ? "" : "2][") << rows_of(*name) << "][" << cols_of(*name) << "]\n";
    for (auto& b : kernel_.buffers) {
      Role r = roles_.at(b.name);
      if (r == Role::row) out << "  float " << cuda_identifier(b.name) << "[" << 2 * G_ << "];  // row state, " << dtype_name(b.dtype) << "\n";
      if (r == Role::scalar) out << "  float " << cuda_identifier(b.name) << "[1];  // scalar, " << dtype_name(b.dtype) << "\n";
      if (r == Role::wide) out << "  float " << cuda_identifier(b.name) << "[" << G_ * DV_ / 8 << "][4];  // fragments (row group g: [g * " << DV_ / 8 << " + n]), " << dtype_name(b.dtype) << "\n";
      if (r == Role::scores) out << "  float " << cuda_identifier(b.name) << "[" << G_ * BN_ / 8 << "][4];  // score fragments (row group g: [g * " << BN_ / 8 << " + n])\n";
    }
    out << "  unsigned a_frag[" << G_ << "][" << D_ / 16 << "][4];  // " << A_ << " as mma A fragments\n";
    out << "  float p_frag[" << G_ * BN_ / 8 << "][4];  // P of the second contraction\n";
    out << body.str();
    out << "}\n";
    MmaStreamKernel result;
    result.source = out.str();
    result.info = GeneratedKernel{kernel_.name, kernel_.blocks(), 1, threads, smem};
    result.summary = summary_;
    return result;
  }

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  CudaExprPrinter printer_;
  IntervalPrinter intervals_;
  std::map<std::string, CudaArray> arrays_;
  std::map<std::string, Role> roles_;
  const ForNode* loop_ = nullptr;
  const ReduceNode* scores_ = nullptr;
  const ReduceNode* pv_ = nullptr;
  std::string S_, A_, B_, V_;
  int64_t BM_ = 0, BN_ = 0, D_ = 0, DV_ = 0;
  int warps_ = 0;
  int G_ = 1;  // 16-row groups per warp: each B and V fragment loaded from shared memory feeds G mma
  DType in_dtype_ = DType::bf16;
  std::optional<std::string> live_condition_;  // C++ of "the tile j_t may hold an unmasked score"
  std::string full_condition_;                 // C++ of "the tile j_t may hold a masked score"
  std::vector<std::string> row_ranges_;        // row states whose block-wide min/max bound the mask
  int64_t exchange_offset_ = 0;                // where in shared memory their warps meet
  std::vector<const LoadNode*> column_ranges_; // column tiles whose min/max per tile bound the mask
  std::optional<Expr> mask_;                   // the mask C of select(C, S, -inf)
  bool mask_true_ = false;                     // emitting the full-tile version: select(C, S, -inf) is S

  // The score modifier: when every read of S outside its contraction sits inside one subexpression
  // G(S) (soft-capping's CAP * tanh(S / CAP), ALiBi's S + slope * (j - i); the mask select itself
  // excluded), G is applied to S once, in place, after the contraction, and the statements read S.
  // The values are the same float32 computations done once instead of once per statement.
  std::optional<Expr> modifier_;
  std::string modifier_refusal_;
  bool modifier_in_place_ = false;  // while emitting G itself
  void find_score_modifier() {
    std::vector<const ReduceNode*> readers;
    for (auto& s : loop_->body) {
      if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() != scores_ && uses_tensor(s.as<ReduceNode>()->value, S_)) readers.push_back(s.as<ReduceNode>());
      if (s.kind() == StmtKind::Map && uses_tensor(s.as<MapNode>()->value, S_)) return;
    }
    if (readers.size() < 2) return;
    Expr g = readers[0] == pv_ ? p_value_ : readers[0]->value;
    if (g.kind() == ExprKind::Select && mask_ && structurally_equal(g.as<SelectNode>()->cond, *mask_) && is_neg_infinity(g.as<SelectNode>()->if_false))
      g = g.as<SelectNode>()->if_true;
    if (g.kind() == ExprKind::Load || !uses_tensor(g, S_)) return;
    for (auto& t : tensors_used(g))
      if (t != S_ && roles_.count(t)) return;  // G reads S, constants, indices and inputs only
    // every read of S must be inside G
    std::function<bool(const Expr&)> covered = [&](const Expr& e) -> bool {
      if (structurally_equal(e, g)) return true;
      if (e.kind() == ExprKind::Load) return e.as<LoadNode>()->tensor != S_;
      switch (e.kind()) {
        case ExprKind::Unary: return covered(e.as<UnaryNode>()->operand);
        case ExprKind::Binary: return covered(e.as<BinaryNode>()->lhs) && covered(e.as<BinaryNode>()->rhs);
        case ExprKind::Select: return covered(e.as<SelectNode>()->cond) && covered(e.as<SelectNode>()->if_true) && covered(e.as<SelectNode>()->if_false);
        case ExprKind::Cast: return covered(e.as<CastNode>()->operand);
        default: return true;
      }
    };
    for (auto* r : readers)
      if (!covered(r == pv_ ? p_value_ : r->value) || (r->where.defined() && uses_tensor(r->where, S_))) return;
    modifier_ = g;
  }

  Expr apply_modifier(const Expr& e) const {
    if (!modifier_ || modifier_in_place_) return e;
    if (structurally_equal(e, *modifier_)) {
      Expr load;
      std::function<void(const Expr&)> find = [&](const Expr& x) {
        if (x.kind() == ExprKind::Load && x.as<LoadNode>()->tensor == S_) load = x;
        else if (x.kind() == ExprKind::Unary) find(x.as<UnaryNode>()->operand);
        else if (x.kind() == ExprKind::Binary) { find(x.as<BinaryNode>()->lhs); find(x.as<BinaryNode>()->rhs); }
        else if (x.kind() == ExprKind::Select) { find(x.as<SelectNode>()->cond); find(x.as<SelectNode>()->if_true); find(x.as<SelectNode>()->if_false); }
        else if (x.kind() == ExprKind::Cast) find(x.as<CastNode>()->operand);
      };
      find(e);
      return load;
    }
    if (e.kind() == ExprKind::Load) return e;
    return map_children(e, [&](const Expr& c) { return apply_modifier(c); });
  }

  // x / y as x * (1 / y) where y holds no fragment value (a constant or a row state): the reciprocal
  // is computed once (folded at compile time for constants) and each element costs one multiply
  // (within 1.5 ulp of the division, far below the 16-bit inputs' rounding).
  Expr divisions_as_products(const Expr& e) const {
    if (e.kind() == ExprKind::Load) return e;
    Expr x = map_children(e, [&](const Expr& c) { return divisions_as_products(c); });
    if (x.kind() != ExprKind::Binary || x.as<BinaryNode>()->op != BinaryOp::div) return x;
    const Expr& r = x.as<BinaryNode>()->rhs;
    for (auto& t : tensors_used(r))
      if (roles_.count(t) && roles_.at(t) != Role::row && roles_.at(t) != Role::scalar) return x;
    return make_binary(BinaryOp::mul, x.as<BinaryNode>()->lhs, make_binary(BinaryOp::div, make_const(1.0), r));
  }

  Expr strip_mask(const Expr& e) const {
    if (e.kind() == ExprKind::Select) {
      auto x = e.as<SelectNode>();
      if (mask_ && structurally_equal(x->cond, *mask_) && is_neg_infinity(x->if_false)) return strip_mask(x->if_true);
    }
    if (e.kind() == ExprKind::Load) return e;
    return map_children(e, [&](const Expr& c) { return strip_mask(c); });
  }

  std::string summary_;
  std::map<std::string, std::set<std::string>> cached_;  // P values computed by a reduction: text → buffers it reads

  static std::string pad(int n) { return std::string(static_cast<size_t>(n) * 2, ' '); }
  static std::string when(const std::string& guard) { return guard.empty() ? "" : "if (" + guard + ") "; }
  int64_t rows_of(const std::string& tile) const { auto& s = kernel_.find_buffer(tile)->shape; return s[s.size() - 2]; }
  int64_t cols_of(const std::string& tile) const { return kernel_.find_buffer(tile)->shape.back(); }

  static bool leading_ones(const std::vector<int64_t>& shape, size_t keep) {
    for (size_t k = 0; k + keep < shape.size(); ++k)
      if (shape[k] != 1) return false;
    return shape.size() >= keep;
  }

  // ---- Analysis ---------------------------------------------------------------------------------
  void analyze() {
    if (kernel_.cluster != 1) refuse("the kernel runs in clusters of " + std::to_string(kernel_.cluster));
    for (auto& s : kernel_.body) {
      if (s.kind() == StmtKind::For) {
        if (loop_) refuse("more than one stream loop");
        loop_ = s.as<ForNode>();
      } else if (s.kind() != StmtKind::Copy && s.kind() != StmtKind::Fill && s.kind() != StmtKind::Map) {
        refuse("a top-level statement other than copy, fill, map and one loop");
      }
    }
    if (!loop_) refuse("no stream loop");
    for (auto& s : loop_->body) {
      if (s.kind() != StmtKind::Copy && s.kind() != StmtKind::Fill && s.kind() != StmtKind::Map && s.kind() != StmtKind::Reduce)
        refuse("the stream loop holds a statement other than copy, fill, map and reduce");
      if (s.kind() != StmtKind::Reduce) continue;
      auto r = s.as<ReduceNode>();
      if (!scores_ && is_scores_contraction(*r)) scores_ = r;
      else if (scores_ && !pv_ && is_second_contraction(*r)) pv_ = r;
    }
    if (!scores_) refuse("no contraction S = sum(d) A[i, d] * B[j, d] of two 16-bit tiles in the loop");
    if (!pv_) refuse("no second contraction O += sum(j) P[i, j] * V[j, dv] after the scores");
    if (BM_ % 16 || BM_ < 16 || BM_ > 128) refuse("the row tile (" + std::to_string(BM_) + ") is not 16 to 128 rows in steps of 16");
    if (BN_ % 16 || D_ % 16 || DV_ % 16) refuse("tiles of " + std::to_string(BN_) + " columns, depth " + std::to_string(D_) + ", width " + std::to_string(DV_) + " are not multiples of 16");
    if (D_ > 256 || DV_ > 256 || BN_ > 128) refuse("the fragments would not fit in registers (depth and width up to 256, 128 columns)");
    // Two row groups per warp halve the shared-memory reads per mma (FlashAttention-2's layout)
    // where the doubled score, accumulator and A fragments still fit in registers.
    G_ = (BM_ % 32 == 0 && BM_ >= 64 && D_ <= 64 && DV_ <= 64 && BN_ <= 64) ? 2 : 1;
    if (const char* forced = std::getenv("SOLDER_MMA_ROW_GROUPS"))  // tuning experiments (docs/runtime.md)
      if ((forced[0] == '1' || forced[0] == '2') && BM_ % (16 * (forced[0] - '0')) == 0) G_ = forced[0] - '0';
    warps_ = static_cast<int>(BM_ / (16 * G_));
    // Every buffer gets a role.
    for (auto& b : kernel_.buffers) {
      if (b.name == S_) roles_[b.name] = Role::scores;
      else if (b.name == A_) roles_[b.name] = Role::tile_a;
      else if (b.name == B_) roles_[b.name] = Role::tile_b;
      else if (b.name == V_) roles_[b.name] = Role::tile_v;
      else if (b.scope != Scope::shared && b.scope != Scope::register_file) refuse("buffer " + b.name + " is not a register or shared tile");
      else if (b.elements() == 1) roles_[b.name] = Role::scalar;
      else if (leading_ones(b.shape, 1) && b.shape.back() == BM_) roles_[b.name] = Role::row;
      else if (leading_ones(b.shape, 1) && b.shape.back() == BN_ && column_source(b.name)) roles_[b.name] = Role::column;
      else if (leading_ones(b.shape, 2) && b.shape[b.shape.size() - 2] == BM_ && b.shape.back() == DV_) roles_[b.name] = Role::wide;
      else refuse("buffer " + b.name + " is neither a row state [" + std::to_string(BM_) + "] nor a [" + std::to_string(BM_) + ", " + std::to_string(DV_) + "] tile");
    }
    if (kernel_.find_buffer(B_)->dtype != in_dtype_ || kernel_.find_buffer(V_)->dtype != in_dtype_) refuse("the contraction tiles differ in type");
    if (kernel_.find_buffer(S_)->dtype != DType::f32) refuse("the scores are rounded to " + std::string(dtype_name(kernel_.find_buffer(S_)->dtype)));
    if (scores_->accumulate) {  // the tensor-core contraction starts from zero: the IR must too
      bool zeroed = false;
      for (auto& s : loop_->body) {
        if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() == scores_) break;
        if (s.kind() == StmtKind::Fill && s.as<FillNode>()->buffer == S_) zeroed = s.as<FillNode>()->value == 0;
      }
      if (!zeroed) refuse("the scores accumulate onto values other than zero");
    }
    find_live_condition();
    find_score_modifier();
    summary_ = std::to_string(BM_) + " rows x " + std::to_string(BN_) + " columns per step, " + std::to_string(warps_) + " warps of " + std::to_string(16 * G_) + " rows, mma.sync m16n8k16 " +
               std::string(dtype_name(in_dtype_)) + "; " + (live_condition_ ? "tiles the mask empties are skipped" : "no tile skipping (" + skip_refusal_ + ")") +
               (modifier_ ? "; score modifier applied once: " + print_expr(*modifier_) : "");
  }

  // The indices before the last two are 0 or variables of extent-1 axes.
  static bool leading_indices_trivial(const std::vector<Expr>& index, const std::vector<Axis>& axes) {
    for (size_t k = 0; k + 2 < index.size(); ++k) {
      if (index[k].kind() == ExprKind::Const && index[k].as<ConstNode>()->value == 0) continue;
      if (index[k].kind() != ExprKind::Var) return false;
      bool unit = false;
      for (auto& a : axes) unit |= a.var == index[k].as<VarNode>()->name && a.extent == 1;
      if (!unit) return false;
    }
    return true;
  }

  // A column tile [.., BN] staged once per step from an input: its loads read the input directly.
  std::map<std::string, const CopyNode*> column_copies_;
  bool column_source(const std::string& name) {
    const CopyNode* found = nullptr;
    for (auto& s : loop_->body)
      if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == name) {
        if (found) return false;
        found = s.as<CopyNode>();
      }
    for (auto& s : kernel_.body)
      if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == name) return false;
    if (!found || found->domain.guard.defined()) return false;
    const GlobalTensor* g = program_.find_global(found->src.name);
    if (!g || g->role != GlobalRole::input) return false;
    for (size_t k = 0; k < found->domain.axes.size(); ++k)
      if (k >= found->dst.index.size() || !is_var(found->dst.index[k], found->domain.axes[k].var)) return false;
    column_copies_[name] = found;
    return true;
  }

  // A load of a global, 0 where an index is out of bounds (the Kernel IR's rule for global reads).
  Expr bounded(const LoadNode& l, const Expr& self) const {
    const GlobalTensor* g = program_.find_global(l.tensor);
    if (!g) return self;
    Expr inside;
    for (size_t d = 0; d < l.index.size(); ++d) {
      if (l.index[d].kind() == ExprKind::Const) continue;  // constant indices were checked by the verifier
      Expr ok = make_binary(BinaryOp::logical_and, make_binary(BinaryOp::ge, l.index[d], make_int(0)), make_binary(BinaryOp::lt, l.index[d], make_int(g->shape[d])));
      inside = inside.defined() ? make_binary(BinaryOp::logical_and, inside, ok) : ok;
    }
    if (!inside.defined()) return self;
    return make_select(inside, self, g->dtype == DType::i32 || g->dtype == DType::boolean ? make_int(0) : make_const(0.0));
  }

  // The input element a column tile holds at `at` (its copy's axes bound to expressions); 0 out of
  // bounds, as the copy would have staged it.
  Expr column_source_load(const CopyNode* c, const std::map<std::string, Expr>& at) const {
    const GlobalTensor* g = program_.find_global(c->src.name);
    std::vector<Expr> index;
    Expr inside;
    for (size_t d = 0; d < c->src.index.size(); ++d) {
      index.push_back(substitute_vars(c->src.index[d], at));
      Expr ok = make_binary(BinaryOp::logical_and, make_binary(BinaryOp::ge, index.back(), make_int(0)),
                            make_binary(BinaryOp::lt, index.back(), make_int(g->shape[d])));
      inside = inside.defined() ? make_binary(BinaryOp::logical_and, inside, ok) : ok;
    }
    Expr load = make_load(c->src.name, index);
    if (!inside.defined()) return load;
    return make_select(inside, load, g->dtype == DType::i32 || g->dtype == DType::boolean ? make_int(0) : make_const(0.0));
  }

  // S[.., i, j] = sum(d) A[.., i, d] * B[.., j, d] * scalars
  bool is_scores_contraction(const ReduceNode& r) {
    if (r.op != ReduceOp::sum || r.reduce_axes.size() != 1 || r.domain.axes.size() < 2 || r.where.defined()) return false;
    const Buffer* dst = kernel_.find_buffer(r.dst.name);
    if (!dst) return false;
    const auto& axes = r.domain.axes;
    size_t n = axes.size();
    for (size_t k = 0; k + 2 < n; ++k) if (axes[k].extent != 1) return false;
    for (size_t k = 0; k < n; ++k) if (!is_var(r.dst.index[k], axes[k].var)) return false;
    std::string i = axes[n - 2].var, j = axes[n - 1].var, d = r.reduce_axes[0].var;
    std::vector<Expr> factors, rest;
    product_factors(r.value, factors);
    const LoadNode *a = nullptr, *b = nullptr;
    for (auto& f : factors) {
      if (f.kind() == ExprKind::Load && kernel_.find_buffer(f.as<LoadNode>()->tensor)) {
        auto l = f.as<LoadNode>();
        const Buffer* buf = kernel_.find_buffer(l->tensor);
        size_t m = l->index.size();
        if (buf->scope != Scope::shared || !is_16bit(buf->dtype) || m < 2 || !leading_indices_trivial(l->index, axes)) return false;
        if (is_var(l->index[m - 2], i) && is_var(l->index[m - 1], d) && !a) a = l;
        else if (is_var(l->index[m - 2], j) && is_var(l->index[m - 1], d) && !b) b = l;
        else return false;
      } else {
        if (!tensors_used(f).empty() || !vars_used(f).empty()) return false;
        rest.push_back(f);
      }
    }
    if (!a || !b || a->tensor == b->tensor) return false;
    S_ = r.dst.name;
    A_ = a->tensor;
    B_ = b->tensor;
    BM_ = axes[n - 2].extent;
    BN_ = axes[n - 1].extent;
    D_ = r.reduce_axes[0].extent;
    in_dtype_ = kernel_.find_buffer(A_)->dtype;
    score_scale_ = product_of(rest);
    has_scale_ = !rest.empty();
    if (kernel_.find_buffer(A_)->shape.back() != D_ || rows_of(A_) != BM_ || cols_of(B_) != D_ || rows_of(B_) != BN_) return false;
    return true;
  }
  Expr score_scale_;
  bool has_scale_ = false;
  Expr p_value_;  // P of the second contraction (its factors without the V load)

  // O[.., i, dv] (+)= sum(j) P * V[.., j, dv]
  bool is_second_contraction(const ReduceNode& r) {
    if (r.op != ReduceOp::sum || r.reduce_axes.size() != 1) return false;
    const auto& axes = r.domain.axes;
    size_t n = axes.size();
    if (n < 2 || r.reduce_axes[0].extent != BN_ || axes[n - 2].extent != BM_) return false;
    std::string j = r.reduce_axes[0].var, dv = axes[n - 1].var;
    std::vector<Expr> factors, rest;
    product_factors(r.value, factors);
    const LoadNode* v = nullptr;
    for (auto& f : factors) {
      bool tile = false;
      for (auto& t : tensors_used(f)) {
        const Buffer* buf = kernel_.find_buffer(t);
        tile |= buf && buf->scope == Scope::shared && t != S_ && is_16bit(buf->dtype) && !leading_ones(buf->shape, 1);
      }
      if (f.kind() == ExprKind::Load && tile && !v) {
        auto l = f.as<LoadNode>();
        const Buffer* buf = kernel_.find_buffer(l->tensor);
        size_t m = l->index.size();
        if (!is_16bit(buf->dtype) || m < 2 || !leading_indices_trivial(l->index, axes) || !is_var(l->index[m - 2], j) || !is_var(l->index[m - 1], dv)) return false;
        v = l;
      } else if (tile) {
        return false;
      } else {
        if (uses_var(f, dv)) return false;  // P must not depend on the output column
        rest.push_back(f);
      }
    }
    if (!v || v->tensor == A_ || v->tensor == B_) return false;
    V_ = v->tensor;
    DV_ = axes[n - 1].extent;
    if (rows_of(V_) != BN_ || cols_of(V_) != DV_) return false;
    p_value_ = product_of(rest);
    return true;
  }

  // The masked-identity rule. Every read of S outside its contraction is select(C, S, -inf) with one
  // condition C, and sits either as the whole value of a `reduce max` or inside exp(· - R) (R reading
  // row states only) as the value of a `reduce sum`, or that times the V load of the second
  // contraction. On a tile where C is false everywhere each of these contributes its identity: max
  // gets -inf; exp(-inf - R) is 0 for a finite R, and for R = -inf (every score of the row masked so
  // far) the row's running values are reset by the online update's "not invertible" branch at the
  // row's first unmasked tile, or stay NaN-producing (0 / 0) to the end, exactly as without skipping.
  // The row maps of the loop (the online rescaling) see the same states with or without the tile.
  std::string skip_refusal_;
  void find_live_condition() {
    std::optional<Expr> cond;
    bool ok = true;
    std::function<bool(const Expr&)> only_masked = [&](const Expr& e) -> bool {
      if (e.kind() == ExprKind::Select) {
        auto s = e.as<SelectNode>();
        if (s->if_true.kind() == ExprKind::Load && s->if_true.as<LoadNode>()->tensor == S_ && is_neg_infinity(s->if_false)) {
          if (uses_tensor(s->cond, S_)) return false;
          if (cond && !structurally_equal(*cond, s->cond)) return false;
          cond = s->cond;
          return true;
        }
      }
      if (e.kind() == ExprKind::Load) return e.as<LoadNode>()->tensor != S_;
      bool good = true;
      switch (e.kind()) {
        case ExprKind::Unary: good = only_masked(e.as<UnaryNode>()->operand); break;
        case ExprKind::Binary: good = only_masked(e.as<BinaryNode>()->lhs) && only_masked(e.as<BinaryNode>()->rhs); break;
        case ExprKind::Select: good = only_masked(e.as<SelectNode>()->cond) && only_masked(e.as<SelectNode>()->if_true) && only_masked(e.as<SelectNode>()->if_false); break;
        case ExprKind::Cast: good = only_masked(e.as<CastNode>()->operand); break;
        default: break;
      }
      return good;
    };
    auto exp_of_masked = [&](const Expr& e) {
      if (e.kind() != ExprKind::Unary || e.as<UnaryNode>()->op != UnaryOp::exp) return false;
      const Expr& x = e.as<UnaryNode>()->operand;
      if (x.kind() != ExprKind::Binary || x.as<BinaryNode>()->op != BinaryOp::sub) return false;
      for (auto& t : tensors_used(x.as<BinaryNode>()->rhs))
        if (roles_.count(t) == 0 || roles_.at(t) != Role::row) return false;
      return x.as<BinaryNode>()->lhs.kind() == ExprKind::Select && only_masked(x.as<BinaryNode>()->lhs);
    };
    for (auto& s : loop_->body) {
      if (s.kind() != StmtKind::Reduce) continue;
      auto r = s.as<ReduceNode>();
      if (r == scores_ || !uses_tensor(r->value, S_)) continue;
      if (r->where.defined()) { ok = false; skip_refusal_ = "a reduction over the scores has a where-condition"; break; }
      const Expr& value = r == pv_ ? p_value_ : r->value;
      bool fits = (r->op == ReduceOp::max && value.kind() == ExprKind::Select && only_masked(value)) ||
                  (r->op == ReduceOp::sum && exp_of_masked(value));
      if (!fits) { ok = false; skip_refusal_ = "the scores reach a reduction other than max(select(C, s, -inf)) or sum(exp(select(C, s, -inf) - m))"; break; }
    }
    for (auto& s : loop_->body)
      if (s.kind() == StmtKind::Map && uses_tensor(s.as<MapNode>()->value, S_)) { ok = false; skip_refusal_ = "a map reads the scores"; }
    if (!cond) { skip_refusal_ = "no mask: no score is selected against -inf"; return; }
    if (!ok) return;
    // The ranges of the tile-local variables of C: those of the `reduce max` over the scores.
    for (auto& s : loop_->body) {
      if (s.kind() != StmtKind::Reduce || s.as<ReduceNode>() == scores_ || !uses_tensor(s.as<ReduceNode>()->value, S_)) continue;
      auto r = s.as<ReduceNode>();
      const auto& axes = r->domain.axes;
      for (size_t k = 0; k + 1 < axes.size(); ++k) intervals_.vars[axes[k].var] = {"0LL", "0LL"};
      intervals_.vars[axes.back().var] = {"0LL", std::to_string(BM_ - 1) + "LL"};
      intervals_.vars[r->reduce_axes[0].var] = {"0LL", std::to_string(BN_ - 1) + "LL"};
      for (auto& v : vars_used(*cond))
        if (v != axes.back().var && v != r->reduce_axes[0].var) {
          bool known = v == loop_->var;
          for (auto& g : kernel_.grid) known |= g.var == v;
          for (size_t k = 0; k + 1 < axes.size(); ++k) known |= axes[k].var == v;
          if (!known) { skip_refusal_ = "the mask uses variable " + v; return; }
        }
      break;
    }
    // Data-dependent bounds (document ids): an integer row state staged before the loop ranges over its
    // block-wide min and max; a column tile read from an input ranges over its min and max on the tile.
    intervals_.load_range = [&](const LoadNode& l) -> std::optional<IntervalText> {
      auto role = roles_.find(l.tensor);
      if (role == roles_.end()) return std::nullopt;
      const Buffer* buf = kernel_.find_buffer(l.tensor);
      if (!buf || buf->dtype != DType::i32) return std::nullopt;
      if (role->second == Role::row) {
        for (auto& st : loop_->body)
          if ((st.kind() == StmtKind::Copy && st.as<CopyNode>()->dst.name == l.tensor) || (st.kind() == StmtKind::Map && st.as<MapNode>()->dst.name == l.tensor) ||
              (st.kind() == StmtKind::Reduce && st.as<ReduceNode>()->dst.name == l.tensor))
            return std::nullopt;  // changes during the stream
        size_t k = std::find(row_ranges_.begin(), row_ranges_.end(), l.tensor) - row_ranges_.begin();
        if (k == row_ranges_.size()) row_ranges_.push_back(l.tensor);
        std::string n = std::to_string(k);
        return IntervalText{"row_lo" + n, "row_hi" + n};
      }
      if (role->second == Role::column && l.index.size() >= 1 && l.index.back().kind() == ExprKind::Var && intervals_.vars.count(l.index.back().as<VarNode>()->name)) {
        size_t k = 0;
        while (k < column_ranges_.size() && !(column_ranges_[k]->tensor == l.tensor && column_ranges_[k]->index.size() == l.index.size() &&
                                              std::equal(l.index.begin(), l.index.end(), column_ranges_[k]->index.begin(), structurally_equal)))
          ++k;
        if (k == column_ranges_.size()) column_ranges_.push_back(&l);
        std::string n = std::to_string(k);
        return IntervalText{"col_lo" + n, "col_hi" + n};
      }
      return std::nullopt;
    };
    live_condition_ = intervals_.may_be_true(*cond);
    auto may_be_false = intervals_.may_be_false(*cond);
    full_condition_ = may_be_false.value_or("true");  // unknown: never assume the tile full
    mask_ = cond;
    if (!live_condition_) skip_refusal_ = "the mask " + print_expr(*cond) + " has no interval bound (it reads tensors or real values)";
  }

  // ---- Printing expressions per fragment element ------------------------------------------------
  // Binds a statement's axes: the lead axes are 0, the row is this thread's row of slot rs, the
  // column is the fragment element's column.
  std::string bind(const Binding& b) const {
    std::string s;
    for (auto& v : b.lead) s += "const long long " + cuda_identifier(v) + " = 0; (void)" + cuda_identifier(v) + "; ";
    s += "const long long " + cuda_identifier(b.row) + " = row0 + (rs >> 1) * 16 + (rs & 1) * 8; (void)" + cuda_identifier(b.row) + "; ";
    int64_t tiles = (b.col_is_scores ? BN_ : DV_) / 8;
    if (!b.col.empty()) s += "const long long " + cuda_identifier(b.col) + " = (nt % " + std::to_string(tiles) + ") * 8 + ((lane & 3) << 1) + (e & 1); (void)" + cuda_identifier(b.col) + "; ";
    return s;
  }

  bool index_matches(const std::vector<Expr>& index, const Binding& b, bool with_col) const {
    size_t tail = with_col ? 2 : 1, n = index.size();
    if (n < tail) return false;
    size_t lead = n - tail;
    for (size_t k = 0; k < lead; ++k) {
      bool zero = index[k].kind() == ExprKind::Const && index[k].as<ConstNode>()->value == 0;
      bool lead_var = index[k].kind() == ExprKind::Var &&
                      std::find(b.lead.begin(), b.lead.end(), index[k].as<VarNode>()->name) != b.lead.end();
      if (!zero && !lead_var) return false;
    }
    if (!is_var(index[lead], b.row)) return false;
    return !with_col || is_var(index[lead + 1], b.col);
  }

  // P of the second contraction ranges over the rows and the score columns (its reduce axis).
  Binding p_binding() const {
    Binding b;
    const auto& axes = pv_->domain.axes;
    for (size_t k = 0; k + 2 < axes.size(); ++k) b.lead.push_back(axes[k].var);
    b.row = axes[axes.size() - 2].var;
    b.col = pv_->reduce_axes[0].var;
    b.col_is_scores = true;
    return b;
  }

  // The expression over registers: row states read slot rs, fragments element [nt][e] (loads of
  // pseudo arrays whose "pointer" is the register's address).
  Expr to_registers(const Expr& in, const Binding& b) {
    Expr e = divisions_as_products(apply_modifier(mask_true_ ? strip_mask(in) : in));
    return rewrite_loads(e, [&](const LoadNode& l, const Expr& self) -> Expr {
      if (pseudo_rows_.count(l.tensor)) {  // a hoisted row value
        std::string pseudo = "(&" + pseudo_rows_.at(l.tensor) + "[rs])";
        arrays_[pseudo] = CudaArray{pseudo, {}, arrays_.at(l.tensor).dtype, false};
        return make_load(pseudo, {});
      }
      auto it = roles_.find(l.tensor);
      if (it == roles_.end()) return bounded(l, self);  // a global: 0 out of bounds
      if (it->second == Role::column) {  // the staged input, read where it is
        const CopyNode* c = column_copies_.at(l.tensor);
        std::map<std::string, Expr> at;
        for (size_t k = 0; k < c->domain.axes.size(); ++k) at[c->domain.axes[k].var] = l.index[k];
        return column_source_load(c, at);
      }
      std::string pseudo;
      switch (it->second) {
        case Role::scalar:
          pseudo = "(&" + cuda_identifier(l.tensor) + "[0])";
          break;
        case Role::row:
          if (!index_matches(l.index, b, false)) refuse("a load of row state " + l.tensor + " is not indexed by the statement's row");
          pseudo = "(&" + cuda_identifier(l.tensor) + "[rs])";
          break;
        case Role::wide:
          if (b.col.empty() || b.col_is_scores || !index_matches(l.index, b, true)) refuse("a load of " + l.tensor + " outside an element-wise statement over it");
          pseudo = "(&" + cuda_identifier(l.tensor) + "[nt][e])";
          break;
        case Role::scores:
          if (b.col.empty() || !b.col_is_scores || !index_matches(l.index, b, true)) refuse("a load of the scores outside a statement over their columns");
          pseudo = "(&" + cuda_identifier(l.tensor) + "[nt][e])";
          break;
        default: refuse("a statement other than the contractions reads tile " + l.tensor);
      }
      arrays_[pseudo] = CudaArray{pseudo, {}, kernel_.find_buffer(l.tensor)->dtype, false};
      return make_load(pseudo, {});
    });
  }

  std::string element_text_bool(const Expr& e, const Binding& b) { return fast_exp(printer_.print_bool(to_registers(e, b))); }
  std::string element_text(const Expr& e, const Binding& b) { return fast_exp(printer_.print_float(to_registers(e, b))); }

  static std::string fast_exp(const std::string& text) {
    // the fast exponential (ex2.approx of x · log2 e), as FlashAttention
    std::string fast;
    for (size_t k = 0; k < text.size(); ++k) {
      bool word_start = k == 0 || (!isalnum(static_cast<unsigned char>(text[k - 1])) && text[k - 1] != '_' && text[k - 1] != ':');
      if (word_start && text.compare(k, 5, "expf(") == 0) fast += "__";
      if (word_start && text.compare(k, 6, "tanhf(") == 0) {
        fast += "solder::tile::fast_tanh(";
        k += 5;
        continue;
      }
      fast += text[k];
    }
    return fast;
  }

  Binding binding_of(const Domain& domain, const std::vector<Axis>& reduce_axes, bool wide_cols) const {
    Binding b;
    const auto& axes = domain.axes;
    size_t keep = wide_cols ? 2 : 1;
    if (axes.size() < keep) refuse("a statement over fewer axes than its tile");
    for (size_t k = 0; k + keep < axes.size(); ++k) {
      if (axes[k].extent != 1) refuse("a statement over a leading axis of extent " + std::to_string(axes[k].extent));
      b.lead.push_back(axes[k].var);
    }
    b.row = axes[axes.size() - keep].var;
    if (axes[axes.size() - keep].extent != BM_) refuse("a statement over " + std::to_string(axes[axes.size() - keep].extent) + " rows");
    if (wide_cols) {
      b.col = axes.back().var;
      if (axes.back().extent != DV_) refuse("an element-wise statement of width " + std::to_string(axes.back().extent));
    } else if (!reduce_axes.empty()) {
      if (reduce_axes.size() != 1 || reduce_axes[0].extent != BN_) refuse("a reduction over something other than the columns of one score tile");
      b.col = reduce_axes[0].var;
      b.col_is_scores = true;
    }
    return b;
  }

  // The domain's guard as C++ under the binding ("" when there is none).
  std::string guard_of(const Domain& domain, const Binding& b) {
    if (!domain.guard.defined()) return "";
    return printer_.print_bool(rewrite_loads(domain.guard, [&](const LoadNode& l, const Expr& self) -> Expr {
      if (roles_.count(l.tensor)) refuse("a domain guard reads tile " + l.tensor);
      return self;
    }));
  }

  void invalidate(const std::string& written) {
    for (auto it = cached_.begin(); it != cached_.end();)
      it = it->second.count(written) ? cached_.erase(it) : std::next(it);
  }

  // ---- Statements -------------------------------------------------------------------------------
  void emit_body(std::ostringstream& out) {
    for (auto& s : kernel_.body) {
      if (s.kind() == StmtKind::For) emit_loop(out);
      else emit_statement(out, s, 1);
    }
  }

  void emit_statement(std::ostringstream& out, const Stmt& s, int ind) {
    switch (s.kind()) {
      case StmtKind::Fill: {
        auto f = s.as<FillNode>();
        Role r = roles_.at(f->buffer);
        std::string v = cuda_float_literal(f->value), name = cuda_identifier(f->buffer);
        if (r == Role::row) out << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) " << name << "[rs] = " << v << ";  // fill " << f->buffer << "\n";
        else if (r == Role::wide) out << pad(ind) << "for (int nt = 0; nt < " << G_ * DV_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << name << "[nt][e] = " << v << ";  // fill " << f->buffer << "\n";
        else if (r == Role::scores) return;  // the contraction starts from zero
        else refuse("a fill of shared tile " + f->buffer);
        invalidate(f->buffer);
        return;
      }
      case StmtKind::Copy: {
        auto c = s.as<CopyNode>();
        if (c->dst.name == A_ && s.kind() == StmtKind::Copy) { emit_stage(out, *c, A_, ind); emit_a_fragments(out, ind); return; }
        if (!kernel_.find_buffer(c->dst.name)) { emit_store(out, c->domain, c->dst, make_load(c->src.name, c->src.index), ind); return; }
        emit_map(out, c->domain, c->dst, make_load(c->src.name, c->src.index), ind);
        return;
      }
      case StmtKind::Map: {
        auto m = s.as<MapNode>();
        if (!kernel_.find_buffer(m->dst.name)) { emit_store(out, m->domain, m->dst, m->value, ind); return; }
        emit_map(out, m->domain, m->dst, m->value, ind);
        return;
      }
      case StmtKind::Reduce: emit_row_reduce(out, *s.as<ReduceNode>(), ind); return;
      default: refuse("statement kind");
    }
  }

  // Subexpressions of an element-wise statement that depend on the row only (the online rescaling's
  // exp(old_m - m) and its condition) are computed once per row, before the loop over the elements.
  int hoisted_ = 0;
  Expr hoist_row_invariants(std::ostringstream& out, const Expr& e, const Binding& b, int ind) {
    auto row_only = [&](const Expr& x) {
      if (uses_var(x, b.col)) return false;
      for (auto& t : tensors_used(x))
        if (roles_.count(t) && roles_.at(t) != Role::row) return false;
      return true;
    };
    bool trivial = e.kind() == ExprKind::Load || e.kind() == ExprKind::Const || e.kind() == ExprKind::Var || e.kind() == ExprKind::DimRef;
    if (trivial || !row_only(e)) goto recurse;
    {
      Binding rows = b;
      rows.col.clear();
      ValueType type = printer_.type(to_registers(e, rows));
      if (type == ValueType::integer) goto recurse;
      std::string name = "row_value" + std::to_string(hoisted_++);
      out << pad(ind) << "float " << name << "[" << 2 * G_ << "];\n" << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) { " << bind(rows)
          << name << "[rs] = " << (type == ValueType::boolean ? "(" + element_text_bool(e, rows) + ") ? 1.0f : 0.0f" : element_text(e, rows)) << "; }\n";
      std::string pseudo = "(&" + name + "[rs])";
      arrays_[pseudo] = CudaArray{pseudo, {}, type == ValueType::boolean ? DType::boolean : DType::f32, false};
      pseudo_rows_[pseudo] = name;
      return make_load(pseudo, {});
    }
  recurse:
    if (e.kind() == ExprKind::Load) return e;
    return map_children(e, [&](const Expr& c) { return hoist_row_invariants(out, c, b, ind); });
  }
  std::map<std::string, std::string> pseudo_rows_;  // hoisted row values: pseudo array → C++ array

  void emit_map(std::ostringstream& out, const Domain& domain, const Access& dst, const Expr& value, int ind) {
    auto it = roles_.find(dst.name);
    if (it != roles_.end() && it->second == Role::scalar) {
      if (domain.guard.defined()) refuse("a guarded write of scalar " + dst.name);
      Binding none;
      out << pad(ind) << "{ const int rs = 0; (void)rs; ";
      for (auto& a : domain.axes) out << "const long long " << cuda_identifier(a.var) << " = 0; (void)" << cuda_identifier(a.var) << "; ";
      out << cuda_identifier(dst.name) << "[0] = " << round_function(kernel_.find_buffer(dst.name)->dtype) << "(" << element_text(value, none) << "); }  // " << dst.name << "\n";
      invalidate(dst.name);
      return;
    }
    if (it == roles_.end() || (it->second != Role::row && it->second != Role::wide)) refuse("a map into " + dst.name);
    bool wide = it->second == Role::wide;
    Binding b = binding_of(domain, {}, wide);
    if (!index_matches(dst.index, b, wide)) refuse("a map whose destination is not indexed by its domain");
    std::string name = cuda_identifier(dst.name), round = round_function(kernel_.find_buffer(dst.name)->dtype);
    out << pad(ind) << "// " << dst.name << " = " << print_expr(value) << "\n";
    Expr element = wide ? hoist_row_invariants(out, value, b, ind) : value;
    if (wide) {
      out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * DV_ / 8 << "; ++nt) {\n";
      out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int e = 0; e < 4; ++e) { const int rs = (nt / " << DV_ / 8 << ") * 2 + (e >> 1); " << bind(b) << "\n";
      out << pad(ind + 2) << when(guard_of(domain, b)) << name << "[nt][e] = " << round << "(" << element_text(element, b) << "); }\n";
      out << pad(ind) << "}\n";
    } else {
      out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) { " << bind(b) << "\n";
      out << pad(ind + 1) << when(guard_of(domain, b)) << name << "[rs] = " << round << "(" << element_text(value, b) << "); }\n";
    }
    invalidate(dst.name);
  }

  // A row state combined over the columns of the scores (or, for the scores, the contraction).
  void emit_row_reduce(std::ostringstream& out, const ReduceNode& r, int ind) {
    if (&r == scores_) { emit_scores(out, ind); return; }
    if (&r == pv_) { emit_second_contraction(out, ind); return; }
    auto it = roles_.find(r.dst.name);
    if (it == roles_.end() || it->second != Role::row) refuse("a reduction into " + r.dst.name + " (only row states)");
    if (r.op != ReduceOp::sum && r.op != ReduceOp::max && r.op != ReduceOp::min) refuse("a " + std::string(reduce_op_name(r.op)) + " reduction");
    Binding b = binding_of(r.domain, r.reduce_axes, false);
    if (!index_matches(r.dst.index, b, false)) refuse("a reduction whose destination is not indexed by its domain");
    std::string identity = r.op == ReduceOp::sum ? "0.0f" : r.op == ReduceOp::max ? "(-solder::infinity())" : "solder::infinity()";
    auto combine = [&](const std::string& x, const std::string& y) {
      return r.op == ReduceOp::sum ? x + " + " + y : (r.op == ReduceOp::max ? "solder::max_nan(" : "solder::min_nan(") + x + ", " + y + ")";
    };
    std::string quad = r.op == ReduceOp::sum ? "solder::tile::quad_sum" : r.op == ReduceOp::max ? "solder::tile::quad_max" : "solder::tile::quad_min";
    std::string value = element_text(r.value, b);
    bool keep = r.op == ReduceOp::sum && !r.where.defined() && !r.domain.guard.defined() && value == element_text(p_value_, p_binding());
    std::string name = cuda_identifier(r.dst.name), round = round_function(kernel_.find_buffer(r.dst.name)->dtype);
    out << pad(ind) << "// " << r.dst.name << " " << reduce_op_name(r.op) << "= over " << b.col << ": " << print_expr(r.value) << "\n";
    out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) {\n";
    out << pad(ind + 1) << "float part = " << identity << ";\n";
    out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int n = 0; n < " << BN_ / 8 << "; ++n) { const int nt = (rs >> 1) * " << BN_ / 8 << " + n;\n";
    out << pad(ind + 2) << "#pragma unroll\n" << pad(ind + 2) << "for (int e2 = 0; e2 < 2; ++e2) { const int e = (rs & 1) * 2 + e2; " << bind(b) << "\n";
    std::string where = r.where.defined() ? element_text(r.where, b) : "";
    out << pad(ind + 3) << "const float v = " << value << ";";
    if (keep) out << " p_frag[nt][e] = v;";
    out << "\n";
    if (!where.empty()) out << pad(ind + 3) << "if (" << where << ") ";
    else out << pad(ind + 3);
    out << "part = " << combine("part", "v") << "; }\n";
    out << pad(ind + 1) << "}\n";
    out << pad(ind + 1) << "part = " << quad << "(part);\n";
    Binding rows = b;
    rows.col.clear();
    out << pad(ind + 1) << "{ " << bind(rows) << when(guard_of(r.domain, rows)) << name << "[rs] = " << round << "(" << (r.accumulate ? combine(name + "[rs]", "part") : "part") << "); }\n";
    out << pad(ind) << "}\n";
    invalidate(r.dst.name);
    if (keep) {
      std::set<std::string> reads;
      for (auto& t : tensors_used(p_value_)) reads.insert(t);
      cached_[value] = reads;
    }
  }

  // S = A · Bᵀ on tensor cores, then the scalar factors.
  void emit_scores(std::ostringstream& out, int ind) {
    std::string s = cuda_identifier(S_), b = cuda_identifier(B_);
    out << pad(ind) << "// " << S_ << " = " << A_ << " · " << B_ << "ᵀ on tensor cores\n";
    out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * BN_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << s << "[nt][e] = 0.0f;\n";
    out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int ks = 0; ks < " << D_ / 16 << "; ++ks) {\n";
    out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int np = 0; np < " << BN_ / 16 << "; ++np) {\n";
    out << pad(ind + 2) << "unsigned bf[4];\n";
    out << pad(ind + 2) << "solder::tile::ldmatrix_x4(bf, &" << b << "[(np * 16 + b_row) * " << D_ << " + ((ks * 16) ^ b_xor)]);\n";
    out << pad(ind + 2) << "#pragma unroll\n" << pad(ind + 2) << "for (int g = 0; g < " << G_ << "; ++g) {\n";
    out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << s << "[g * " << BN_ / 8 << " + 2 * np], a_frag[g][ks], bf[0], bf[1]);\n";
    out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << s << "[g * " << BN_ / 8 << " + 2 * np + 1], a_frag[g][ks], bf[2], bf[3]);\n";
    out << pad(ind + 2) << "}\n";
    out << pad(ind + 1) << "}\n" << pad(ind) << "}\n";
    if (has_scale_)
      out << pad(ind) << "{ const float scale = " << printer_.print_float(score_scale_) << ";\n" << pad(ind) << "#pragma unroll\n" << pad(ind)
          << "for (int nt = 0; nt < " << G_ * BN_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << s << "[nt][e] *= scale; }\n";
    if (scores_->domain.guard.defined()) {  // points outside the guard keep the fill (zero)
      Binding b;
      const auto& axes = scores_->domain.axes;
      for (size_t k = 0; k + 2 < axes.size(); ++k) b.lead.push_back(axes[k].var);
      b.row = axes[axes.size() - 2].var;
      b.col = axes.back().var;
      b.col_is_scores = true;
      out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * BN_ / 8 << "; ++nt) {\n";
      out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int e = 0; e < 4; ++e) { const int rs = (nt / " << BN_ / 8 << ") * 2 + (e >> 1); " << bind(b) << "\n";
      out << pad(ind + 2) << "if (!(" << guard_of(scores_->domain, b) << ")) " << s << "[nt][e] = 0.0f; }\n";
      out << pad(ind) << "}\n";
    }
    if (modifier_) {
      // find the binding of the statement G came from: G's own variables name the row and column
      Binding b;
      for (auto& st : loop_->body) {
        if (st.kind() != StmtKind::Reduce || st.as<ReduceNode>() == scores_ || !uses_tensor(st.as<ReduceNode>()->value, S_)) continue;
        b = st.as<ReduceNode>() == pv_ ? p_binding() : binding_of(st.as<ReduceNode>()->domain, st.as<ReduceNode>()->reduce_axes, false);
        break;
      }
      modifier_in_place_ = true;
      out << pad(ind) << "// " << S_ << " = " << print_expr(*modifier_) << ", once for every statement that reads it\n";
      out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * BN_ / 8 << "; ++nt) {\n";
      out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int e = 0; e < 4; ++e) { const int rs = (nt / " << BN_ / 8 << ") * 2 + (e >> 1); " << bind(b) << "\n";
      out << pad(ind + 2) << s << "[nt][e] = " << element_text(*modifier_, b) << "; }\n";
      out << pad(ind) << "}\n";
      modifier_in_place_ = false;
    }
    invalidate(S_);
  }

  // O (+)= P · V on tensor cores, P evaluated per score element (or reused from a reduction).
  void emit_second_contraction(std::ostringstream& out, int ind) {
    Binding b = p_binding();  // P over the score columns
    Binding w = binding_of(pv_->domain, {}, true);
    for (size_t k = 0; k + 2 < pv_->domain.axes.size(); ++k)
      if (pv_->domain.axes[k].extent != 1) refuse("the second contraction has a leading axis of extent " + std::to_string(pv_->domain.axes[k].extent));
    if (kernel_.find_buffer(pv_->dst.name)->dtype != DType::f32) refuse("the second contraction accumulates into a " + std::string(dtype_name(kernel_.find_buffer(pv_->dst.name)->dtype)) + " tile");
    if (!index_matches(pv_->dst.index, w, true) || roles_.at(pv_->dst.name) != Role::wide) refuse("the second contraction's destination");
    std::string value = element_text(p_value_, b);
    std::string o = cuda_identifier(pv_->dst.name), v = cuda_identifier(V_);
    out << pad(ind) << "// " << pv_->dst.name << " += sum over " << b.col << " of (" << print_expr(p_value_) << ") * " << V_ << " on tensor cores\n";
    if (!pv_->accumulate) out << pad(ind) << "for (int nt = 0; nt < " << G_ * DV_ / 8 << "; ++nt) for (int e = 0; e < 4; ++e) " << o << "[nt][e] = 0.0f;\n";
    if (pv_->domain.guard.defined() && uses_var(pv_->domain.guard, w.col)) refuse("the second contraction's guard depends on its output column");
    if (!cached_.count(value) || pv_->where.defined() || pv_->domain.guard.defined()) {
      std::string where = pv_->where.defined() ? element_text(pv_->where, b) : "";
      std::string rows = guard_of(pv_->domain, b);
      if (!rows.empty()) where = where.empty() ? rows : "(" + where + ") && (" + rows + ")";
      out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * BN_ / 8 << "; ++nt) {\n";
      out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int e = 0; e < 4; ++e) { const int rs = (nt / " << BN_ / 8 << ") * 2 + (e >> 1); " << bind(b) << "\n";
      out << pad(ind + 2) << "p_frag[nt][e] = " << (where.empty() ? value : "(" + where + ") ? " + value + " : 0.0f") << "; }\n";
      out << pad(ind) << "}\n";
    } else {
      out << pad(ind) << "// P: the values the reduction above computed\n";
    }
    out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int kk = 0; kk < " << BN_ / 16 << "; ++kk) {\n";
    out << pad(ind + 1) << "unsigned pa[" << G_ << "][4];\n";
    out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int g = 0; g < " << G_ << "; ++g) solder::tile::c_fragments_to_a<T>(pa[g], p_frag[g * " << BN_ / 8
        << " + 2 * kk], p_frag[g * " << BN_ / 8 << " + 2 * kk + 1]);\n";
    out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int np = 0; np < " << DV_ / 16 << "; ++np) {\n";
    out << pad(ind + 2) << "unsigned bf[4];\n";
    out << pad(ind + 2) << "solder::tile::ldmatrix_x4_trans(bf, &" << v << "[(kk * 16 + (lane & 15)) * " << DV_ << " + ((np * 16) ^ v_xor)]);\n";
    out << pad(ind + 2) << "#pragma unroll\n" << pad(ind + 2) << "for (int g = 0; g < " << G_ << "; ++g) {\n";
    out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << o << "[g * " << DV_ / 8 << " + 2 * np], pa[g], bf[0], bf[1]);\n";
    out << pad(ind + 3) << "solder::tile::mma_16816<T>(" << o << "[g * " << DV_ / 8 << " + 2 * np + 1], pa[g], bf[2], bf[3]);\n";
    out << pad(ind + 2) << "}\n";
    out << pad(ind + 1) << "}\n" << pad(ind) << "}\n";
    invalidate(pv_->dst.name);
  }

  // A global ← register store: rows or wide fragments.
  void emit_store(std::ostringstream& out, const Domain& domain, const Access& dst, const Expr& value, int ind) {
    const GlobalTensor* g = program_.find_global(dst.name);
    if (!g) refuse("a write to " + dst.name);
    std::vector<std::string> reads = tensors_used(value);
    bool wide = false;
    for (auto& t : reads) wide |= roles_.count(t) && roles_.at(t) == Role::wide;
    Binding b = binding_of(domain, {}, wide);
    std::vector<std::string> idx;
    for (auto& e : dst.index) idx.push_back(printer_.print_int(e));
    std::string bounds;
    for (size_t d = 0; d < idx.size(); ++d)
      bounds += (d ? " && " : "") + std::string("(") + idx[d] + ") >= 0 && (" + idx[d] + ") < " + std::to_string(g->shape[d]) + "LL";
    std::string guard = guard_of(domain, b);
    if (!guard.empty()) bounds = "(" + guard + ") && " + bounds;
    std::string target = cuda_identifier(dst.name) + " + " + printer_.offset(arrays_.at(dst.name), idx);
    out << pad(ind) << "// store " << dst.name << "\n";
    if (wide) {
      out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * DV_ / 8 << "; ++nt) {\n";
      out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int e = 0; e < 4; ++e) { const int rs = (nt / " << DV_ / 8 << ") * 2 + (e >> 1); " << bind(b) << "\n";
      out << pad(ind + 2) << "if (" << bounds << ") solder::store(" << target << ", " << element_text(value, b) << "); }\n";
      out << pad(ind) << "}\n";
    } else {
      out << pad(ind) << "if ((lane & 3) == 0) {\n" << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int rs = 0; rs < " << 2 * G_ << "; ++rs) { " << bind(b) << "\n";
      out << pad(ind + 2) << "if (" << bounds << ") solder::store(" << target << ", " << element_text(value, b) << "); }\n";
      out << pad(ind) << "}\n";
    }
  }

  // ---- Staging and the loop ---------------------------------------------------------------------
  // copy tile[.., r, c] = global[...] → cp.async of 16-byte chunks into the swizzled layout.
  void emit_stage(std::ostringstream& out, const CopyNode& c, const std::string& tile, int ind) {
    const Buffer* buf = kernel_.find_buffer(tile);
    const GlobalTensor* g = program_.find_global(c.src.name);
    if (!g || g->dtype != buf->dtype) refuse("tile " + tile + " is not staged from a global of its type");
    const auto& axes = c.domain.axes;
    size_t n = axes.size();
    if (c.domain.guard.defined() || n != buf->shape.size() || n < 2) refuse("the staging of " + tile + " has a guard or other axes");
    for (size_t k = 0; k < n; ++k) {
      if (!is_var(c.dst.index[k], axes[k].var) || axes[k].extent != buf->shape[k]) refuse("the staging of " + tile + " does not cover the tile in order");
      if (k + 2 < n && axes[k].extent != 1) refuse("tile " + tile + " has a leading axis of extent " + std::to_string(axes[k].extent));
    }
    std::string row = axes[n - 2].var, col = axes[n - 1].var;
    const auto& src = c.src.index;
    if (!is_var(src.back(), col) || g->shape.back() % 8 != 0) refuse("the staging of " + tile + " does not read whole 16-byte rows of " + c.src.name);
    for (size_t k = 0; k + 1 < src.size(); ++k)
      if (uses_var(src[k], col)) refuse("the staging of " + tile + " uses the column in an outer index");
    int64_t R = buf->shape[n - 2], C = buf->shape[n - 1], chunks = C / 8;
    std::vector<std::string> idx;
    for (auto& e : src) idx.push_back(printer_.print_int(e));
    std::string bounds;
    for (size_t d = 0; d < idx.size(); ++d)
      bounds += (d ? " && " : "") + std::string("(") + idx[d] + ") >= 0 && (" + idx[d] + ") + " + (d + 1 == idx.size() ? "8" : "1") + " <= " + std::to_string(g->shape[d]) + "LL";
    out << pad(ind) << "// stage " << tile << " = " << c.src.name << " (cp.async, 16 bytes per copy, out-of-bounds rows are zero)\n";
    out << pad(ind) << "for (int chunk = threadIdx.x; chunk < " << R * chunks << "; chunk += " << warps_ * 32 << ") {\n";
    out << pad(ind + 1);
    for (size_t k = 0; k + 2 < n; ++k) out << "const long long " << cuda_identifier(axes[k].var) << " = 0; ";
    out << "const long long " << cuda_identifier(row) << " = chunk / " << chunks << "; const long long " << cuda_identifier(col) << " = (chunk % " << chunks << ") * 8;\n";
    out << pad(ind + 1) << "const bool inside = " << bounds << ";\n";
    out << pad(ind + 1) << "solder::tile::cp_async_16(&" << cuda_identifier(tile) << "[solder::tile::Swizzle<" << C << ">::offset(static_cast<int>(" << cuda_identifier(row) << "), static_cast<int>("
        << cuda_identifier(col) << "))], inside ? " << cuda_identifier(c.src.name) << " + " << printer_.offset(arrays_.at(c.src.name), idx) << " : " << cuda_identifier(c.src.name)
        << ", inside);\n";
    out << pad(ind) << "}\n" << pad(ind) << "solder::tile::cp_async_commit();\n";
  }

  // Run-time bounds of the data a mask reads: block-wide min/max of row states (once), and a function
  // giving a column tile's min/max for tile j_t (each warp computes it alone: no barrier).
  void emit_data_ranges(std::ostringstream& out, const std::string& jt) {
    if (!row_ranges_.empty()) {
      out << "  // block-wide bounds of the row states the mask reads\n";
      out << "  long long* const row_range_exchange = reinterpret_cast<long long*>(smem + " << exchange_offset_ << ");  // [2][" << warps_ << "]\n";
    }
    for (size_t k = 0; k < row_ranges_.size(); ++k) {
      std::string n = std::to_string(k), name = cuda_identifier(row_ranges_[k]);
      out << "  long long row_lo" << n << " = 0x7fffffffffffffffLL, row_hi" << n << " = (-0x7fffffffffffffffLL - 1);\n  {\n";
      out << "    for (int rs = 0; rs < " << 2 * G_ << "; ++rs) { const long long v = static_cast<long long>(" << name << "[rs]); row_lo" << n
          << " = v < row_lo" << n << " ? v : row_lo" << n << "; row_hi" << n << " = v > row_hi" << n << " ? v : row_hi" << n << "; }\n";
      out << "    for (int o = 16; o > 0; o >>= 1) { row_lo" << n << " = solder::min_int(row_lo" << n << ", __shfl_xor_sync(0xffffffffu, row_lo" << n
          << ", o)); row_hi" << n << " = solder::max_int(row_hi" << n << ", __shfl_xor_sync(0xffffffffu, row_hi" << n << ", o)); }\n";
      out << "    if (lane == 0) { row_range_exchange[warp] = row_lo" << n << "; row_range_exchange[" << warps_ << " + warp] = row_hi" << n << "; }\n";
      out << "    __syncthreads();\n";
      out << "    for (int w = 0; w < " << warps_ << "; ++w) { row_lo" << n << " = solder::min_int(row_lo" << n << ", row_range_exchange[w]); row_hi" << n
          << " = solder::max_int(row_hi" << n << ", row_range_exchange[" << warps_ << " + w]); }\n";
      out << "    __syncthreads();\n  }\n";
    }
    for (size_t k = 0; k < column_ranges_.size(); ++k) {
      const LoadNode& l = *column_ranges_[k];
      const CopyNode* c = column_copies_.at(l.tensor);
      std::map<std::string, Expr> at;
      for (size_t a = 0; a < c->domain.axes.size(); ++a) at[c->domain.axes[a].var] = l.index[a];
      std::string col = l.index.back().as<VarNode>()->name;
      std::string n = std::to_string(k);
      out << "  // bounds of " << l.tensor << " over the columns of tile " << loop_->var << "\n";
      out << "  auto column_range" << n << " = [&](long long " << jt << ", long long& lo, long long& hi) {\n";
      out << "    lo = 0x7fffffffffffffffLL; hi = (-0x7fffffffffffffffLL - 1);\n";
      out << "    for (int c = lane; c < " << BN_ << "; c += 32) { ";
      for (size_t a = 0; a + 1 < l.index.size(); ++a)
        if (l.index[a].kind() == ExprKind::Var) out << "const long long " << cuda_identifier(l.index[a].as<VarNode>()->name) << " = 0; ";
      out << "const long long " << cuda_identifier(col) << " = c;\n";
      out << "      const long long v = " << printer_.print_int(column_source_load(c, at)) << "; lo = v < lo ? v : lo; hi = v > hi ? v : hi; }\n";
      out << "    for (int o = 16; o > 0; o >>= 1) { lo = solder::min_int(lo, __shfl_xor_sync(0xffffffffu, lo, o)); hi = solder::max_int(hi, __shfl_xor_sync(0xffffffffu, hi, o)); }\n";
      out << "  };\n";
    }
  }

  void emit_a_fragments(std::ostringstream& out, int ind) {
    out << pad(ind) << "solder::tile::cp_async_wait<0>();\n" << pad(ind) << "__syncthreads();\n";
    out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int ks = 0; ks < " << D_ / 16 << "; ++ks)  // " << A_ << " → A fragments, once\n";
    out << pad(ind + 1) << "for (int g = 0; g < " << G_ << "; ++g)\n";
    out << pad(ind + 2) << "solder::tile::ldmatrix_x4(a_frag[g][ks], &" << cuda_identifier(A_) << "[solder::tile::Swizzle<" << D_ << ">::offset(warp * " << 16 * G_
        << " + g * 16 + (lane & 15), ks * 16 + ((lane >> 4) << 3))]);\n";
  }

  // The stream loop, software-pipelined: B of the next live tile loads during P·V; V of this tile
  // loads during S = A·Bᵀ and the row statements.
  void emit_loop(std::ostringstream& out) {
    std::vector<const CopyNode*> stage_b, stage_v;
    std::vector<const Stmt*> head, middle, tail;
    bool after_scores = false, after_pv = false;
    for (auto& s : loop_->body) {
      if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == B_) { if (after_scores) refuse("B is staged after the scores"); stage_b.push_back(s.as<CopyNode>()); continue; }
      if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == V_) { if (after_pv) refuse("V is staged after its use"); stage_v.push_back(s.as<CopyNode>()); continue; }
      if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == A_) refuse("A is staged inside the loop");
      if (s.kind() == StmtKind::Copy && roles_.count(s.as<CopyNode>()->dst.name) && roles_.at(s.as<CopyNode>()->dst.name) == Role::column) continue;  // read where it is
      if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() == scores_) { after_scores = true; middle.push_back(&s); continue; }
      if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() == pv_) { after_pv = true; tail.push_back(&s); continue; }
      (after_pv ? tail : after_scores ? middle : head).push_back(&s);
    }
    if (stage_b.size() != 1 || stage_v.size() != 1) refuse("B and V are not each staged once per step");
    std::string jt = cuda_identifier(loop_->var);
    std::string begin = printer_.print_int(loop_->begin), end = printer_.print_int(loop_->end);
    std::string kb = cuda_identifier(B_), vb = cuda_identifier(V_);
    int64_t k_elements = BN_ * D_, v_elements = BN_ * DV_;
    out << "  // the stream: " << loop_->var << " in " << print_expr(loop_->begin) << " .. " << print_expr(loop_->end)
        << "; two stages of " << B_ << " and " << V_ << " (the next live tile loads while this one computes)\n";
    out << "  const long long stream_end = " << end << ";\n";
    emit_data_ranges(out, jt);
    std::string ranges;  // the column bounds of tile j_t, computed where a tile is classified
    for (size_t k = 0; k < column_ranges_.size(); ++k)
      ranges += "long long col_lo" + std::to_string(k) + ", col_hi" + std::to_string(k) + "; column_range" + std::to_string(k) + "(" + jt + ", col_lo" +
                std::to_string(k) + ", col_hi" + std::to_string(k) + "); ";
    if (live_condition_) {
      out << "  // a tile lives when its mask may hold somewhere, and is full when it holds everywhere (interval bounds\n";
      out << "  // over the tile's rows and columns): dead tiles are skipped, full tiles skip the mask\n";
      out << "  auto tile_live = [&](long long " << jt << ") -> bool { " << ranges << "return " << *live_condition_ << "; };\n";
      out << "  auto tile_full = [&](long long " << jt << ") -> bool { " << ranges << "return !" << full_condition_ << "; };\n";
    } else {
      out << "  auto tile_live = [&](long long) -> bool { return true; };  // " << skip_refusal_ << "\n";
    }
    out << "  auto next_live = [&](long long t) { while (t < stream_end && !tile_live(t)) ++t; return t; };\n";
    out << "  long long " << jt << " = next_live(" << begin << ");\n";
    out << "  int stage = 0;\n";
    out << "  if (" << jt << " < stream_end) {\n";
    out << "    T* const " << kb << " = " << kb << "_stages; T* const " << vb << " = " << vb << "_stages;\n";
    emit_stage(out, *stage_b[0], B_, 2);
    emit_stage(out, *stage_v[0], V_, 2);
    out << "  }\n";
    out << "  while (" << jt << " < stream_end) {\n";
    out << "    const long long next_tile = next_live(" << jt << " + 1);\n";
    out << "    if (next_tile < stream_end) {\n";
    out << "      T* const " << kb << " = " << kb << "_stages + (stage ^ 1) * " << k_elements << "; T* const " << vb << " = " << vb << "_stages + (stage ^ 1) * " << v_elements << ";\n";
    out << "      const long long " << jt << " = next_tile;\n";
    emit_stage(out, *stage_b[0], B_, 3);
    emit_stage(out, *stage_v[0], V_, 3);
    out << "      solder::tile::cp_async_wait<2>();  // this tile's two groups are in; the next tile's are in flight\n";
    out << "    } else {\n      solder::tile::cp_async_wait<0>();\n    }\n";
    out << "    __syncthreads();\n";
    out << "    T* const " << kb << " = " << kb << "_stages + stage * " << k_elements << "; T* const " << vb << " = " << vb << "_stages + stage * " << v_elements << ";\n";
    auto body = [&](int ind) {
      cached_.clear();
      for (auto* s : head) emit_statement(out, *s, ind);
      for (auto* s : middle) emit_statement(out, *s, ind);
      for (auto* s : tail) emit_statement(out, *s, ind);
    };
    if (live_condition_) {
      out << "    if (tile_full(" << jt << ")) {  // the mask holds on the whole tile\n";
      mask_true_ = true;
      body(3);
      mask_true_ = false;
      out << "    } else {\n";
      body(3);
      out << "    }\n";
    } else {
      body(2);
    }
    out << "    __syncthreads();  // every warp is done with this stage before it is loaded again\n";
    out << "    stage ^= 1;\n";
    out << "    " << jt << " = next_tile;\n";
    out << "  }\n";
    cached_.clear();
  }
};

}  // namespace

std::optional<MmaStreamKernel> generate_mma_stream_kernel(const KernelProgram& program, const Kernel& kernel, std::string* refusal) {
  try {
    MmaStreamWriter writer(program, kernel);
    return writer.write();
  } catch (const Refusal& r) {
    if (refusal) *refusal = r.why;
    return std::nullopt;
  }
}

}  // namespace solder
