#include "backend/cuda/mma_stream_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "backend/cuda/mma_stream_writer.h"
#include "ir/diagnostics.h"
#include "ir/interval.h"
#include "ir/printer.h"

namespace solder::mma_stream {

MmaStreamKernel MmaStreamWriter::write() {
  analyze();
  if (!is_16bit(in_dtype_)) refuse(std::string(dtype_name(in_dtype_)) + " tiles (this schedule takes bf16 and f16; the attention skeleton runs e4m3)");
  for (auto& [name, role] : roles_)
    if (role == Role::score_input) refuse("the scores read tile " + name + " (a [rows, keys] input staged per step: the attention skeleton's, not this schedule's)");
  const int threads = warps_ * 32;
  int64_t smem = 0;
  std::map<std::string, int64_t> offsets;
  const int64_t align = wgmma_ ? 1024 : 128;  // wgmma: 128-byte-swizzled tiles start on 1024-byte atoms
  for (auto* name : {&A_, &B_, &V_}) {
    offsets[*name] = smem;
    smem += (kernel_.find_buffer(*name)->elements() * 2 * (*name == A_ ? 1 : stages_) + align - 1) / align * align;  // B and V: the stages
  }
  exchange_offset_ = smem;  // the block-wide min/max exchange of data-dependent mask bounds
  if (!row_ranges_.empty()) smem += 2 * warps_ * 8;
  if (class_tiles_ > 0) {  // the key-tile classes (bytes) and the next-live table (long long), 8-byte aligned
    smem = (smem + 7) / 8 * 8;
    class_offset_ = smem;
    next_offset_ = smem + (class_tiles_ + 7) / 8 * 8;
    smem += class_table_bytes();
  }
  if (wgmma_) smem += 1024;  // slack to align the dynamic shared memory's start to 1024 bytes
  std::ostringstream body;
  emit_body(body);
  std::ostringstream out;
  out << "// kernel " << kernel_.name << ": computes";
  for (auto& d : kernel_.definitions) out << " " << d;
  out << "\n// tensor-core emitter: " << summary_ << "\n";
  const int min_blocks = wgmma_ ? (D_ == 64 && DV_ == 64 && smem <= 113 * 1024 ? 2 : 1) : (BN_ / 2 + DV_ / 2 + D_ / 4 <= 80 ? 2 : 1);
  out << "extern \"C\" __global__ void __launch_bounds__(" << threads << ", " << min_blocks << ") "
      << cuda_identifier(kernel_.name) << "(";
  out << cuda_global_parameters(program_.globals) << ") {\n";
  if (wgmma_) {
    out << "  extern __shared__ __align__(1024) unsigned char smem_unaligned[];\n";
    out << "  unsigned char* const smem = smem_unaligned + (1024 - static_cast<unsigned>(__cvta_generic_to_shared(smem_unaligned)) % 1024) % 1024;\n";
  } else {
    out << "  extern __shared__ __align__(128) unsigned char smem[];\n";
  }
  out << "  using T = " << cuda_element_type(in_dtype_) << ";\n";
  emit_block_decode(out);
  out << "  (void)block_linear;\n";
  out << "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  out << "  const int row0 = warp * " << 16 * G_ << " + (lane >> 2);  // this thread's rows: row0 + 16 g + 8 h (row slot rs = 2 g + h)\n";
  if (wgmma_) {
    out << "  // warp w of warpgroup k holds rows 64 k + 16 w .. + 15: the wgmma accumulator's fragments are the mma.sync m16n8\n";
    out << "  // C fragments (tile/wgmma.cuh), so row0 and the element indexing [nt][e] are those of the mma.sync path\n";
  } else {
    out << "  // ldmatrix row addresses: row of this lane's matrix row, and its 16-byte chunk's swizzle (see tile/swizzle.cuh)\n";
    out << "  const int b_row = ((lane >> 4) << 3) + (lane & 7);\n";
    out << "  const int b_xor = (((lane >> 3) & 1) ^ (b_row & solder::tile::Swizzle<" << D_ << ">::mask)) << 3;\n";
    out << "  const int v_xor = ((lane >> 4) ^ (lane & solder::tile::Swizzle<" << DV_ << ">::mask)) << 3;\n";
  }
  const std::string layout = wgmma_ ? "128-byte-swizzled (Swizzle128)" : "swizzled";
  for (auto* name : {&A_, &B_, &V_})
    out << "  T* const " << cuda_identifier(*name) << (*name == A_ ? "" : "_stages") << " = reinterpret_cast<T*>(smem + " << offsets[*name]
        << ");  // shared, " << layout << " [" << (*name == A_ ? "" : std::to_string(stages_) + "][") << rows_of(*name) << "][" << cols_of(*name) << "]\n";
  for (auto& b : kernel_.buffers) {
    Role r = roles_.at(b.name);
    if (r == Role::row) out << "  float " << cuda_identifier(b.name) << "[" << 2 * G_ << "];  // row state, " << dtype_name(b.dtype) << "\n";
    if (r == Role::scalar) out << "  float " << cuda_identifier(b.name) << "[1];  // scalar, " << dtype_name(b.dtype) << "\n";
    if (r == Role::wide) out << "  float " << cuda_identifier(b.name) << "[" << G_ * DV_ / 8 << "][4];  // fragments (row group g: [g * " << DV_ / 8 << " + n]), " << dtype_name(b.dtype) << "\n";
    if (r == Role::scores) out << "  float " << cuda_identifier(b.name) << "[" << G_ * BN_ / 8 << "][4];  // score fragments (row group g: [g * " << BN_ / 8 << " + n])\n";
  }
  if (!wgmma_) out << "  unsigned a_frag[" << G_ << "][" << D_ / 16 << "][4];  // " << A_ << " as mma A fragments\n";
  out << "  float p_frag[" << G_ * BN_ / 8 << "][4];  // P of the second contraction\n";
  out << body.str();
  out << "}\n";
  MmaStreamKernel result;
  result.source = out.str();
  result.info = GeneratedKernel{kernel_.name, kernel_.blocks(), 1, threads, smem};
  result.summary = summary_;
  return result;
}

Expr MmaStreamWriter::apply_modifier(const Expr& e) const {
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
Expr MmaStreamWriter::divisions_as_products(const Expr& e) const {
  if (e.kind() == ExprKind::Load) return e;
  Expr x = map_children(e, [&](const Expr& c) { return divisions_as_products(c); });
  if (x.kind() != ExprKind::Binary || x.as<BinaryNode>()->op != BinaryOp::div) return x;
  const Expr& r = x.as<BinaryNode>()->rhs;
  for (auto& t : tensors_used(r))
    if (roles_.count(t) && roles_.at(t) != Role::row && roles_.at(t) != Role::scalar) return x;
  return make_binary(BinaryOp::mul, x.as<BinaryNode>()->lhs, make_binary(BinaryOp::div, make_const(1.0), r));
}

Expr MmaStreamWriter::strip_mask(const Expr& e) const {
  if (e.kind() == ExprKind::Select) {
    auto x = e.as<SelectNode>();
    if (mask_ && structurally_equal(x->cond, *mask_) && is_neg_infinity(x->if_false)) return strip_mask(x->if_true);
  }
  if (e.kind() == ExprKind::Load) return e;
  return map_children(e, [&](const Expr& c) { return strip_mask(c); });
}

void MmaStreamWriter::collect_index_facts() {
  index_facts_.dims = program_.dims;
  for (const GridDim& g : kernel_.grid) index_facts_.vars[g.var] = {0, g.extent - 1};
  auto axes = [&](const std::vector<Axis>& list) {
    for (auto& a : list) {
      auto it = index_facts_.vars.find(a.var);
      if (it == index_facts_.vars.end()) index_facts_.vars[a.var] = {0, a.extent - 1};
      else it->second.hi = std::max(it->second.hi, a.extent - 1);
    }
  };
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) {
    for (auto& s : body) {
      if (s.kind() == StmtKind::Copy) axes(s.as<CopyNode>()->domain.axes);
      if (s.kind() == StmtKind::Map) axes(s.as<MapNode>()->domain.axes);
      if (s.kind() == StmtKind::Reduce) {
        axes(s.as<ReduceNode>()->domain.axes);
        axes(s.as<ReduceNode>()->reduce_axes);
      }
      if (s.kind() == StmtKind::For) walk(s.as<ForNode>()->body);
    }
  };
  walk(kernel_.body);
  // The stream variable last: its range, not an axis's, wherever the names meet.
  auto begin = index_facts_.bound(loop_->begin), end = index_facts_.bound(loop_->end);
  if (begin && end && end->hi > begin->lo) index_facts_.vars[loop_->var] = {begin->lo, end->hi - 1};
  else index_facts_.vars.erase(loop_->var);
}

bool MmaStreamWriter::provably_inside(const Expr& index, int64_t extent) const {
  auto range = index_facts_.bound(index);
  return range && range->lo >= 0 && range->hi < extent;
}

// A load of a global, 0 where an index is out of bounds (the Kernel IR's rule for global reads); no
// check where every index is provably inside.
Expr MmaStreamWriter::bounded(const LoadNode& l, const Expr& self) const {
  const GlobalTensor* g = program_.find_global(l.tensor);
  if (!g) return self;
  Expr inside;
  for (size_t d = 0; d < l.index.size(); ++d) {
    if (l.index[d].kind() == ExprKind::Const) continue;  // constant indices were checked by the verifier
    if (provably_inside(l.index[d], g->shape[d])) continue;
    Expr ok = make_binary(BinaryOp::logical_and, make_binary(BinaryOp::ge, l.index[d], make_int(0)), make_binary(BinaryOp::lt, l.index[d], make_int(g->shape[d])));
    inside = inside.defined() ? make_binary(BinaryOp::logical_and, inside, ok) : ok;
  }
  if (!inside.defined()) return self;
  return make_select(inside, self, g->dtype == DType::i32 || g->dtype == DType::boolean ? make_int(0) : make_const(0.0));
}

// The input element a column tile holds at `at` (its copy's axes bound to expressions); 0 out of
// bounds, as the copy would have staged it.
Expr MmaStreamWriter::column_source_load(const CopyNode* c, const std::map<std::string, Expr>& at) const {
  const GlobalTensor* g = program_.find_global(c->src.name);
  std::vector<Expr> index;
  Expr inside;
  for (size_t d = 0; d < c->src.index.size(); ++d) {
    index.push_back(substitute_vars(c->src.index[d], at));
    if (provably_inside(index.back(), g->shape[d])) continue;
    Expr ok = make_binary(BinaryOp::logical_and, make_binary(BinaryOp::ge, index.back(), make_int(0)),
                          make_binary(BinaryOp::lt, index.back(), make_int(g->shape[d])));
    inside = inside.defined() ? make_binary(BinaryOp::logical_and, inside, ok) : ok;
  }
  Expr load = make_load(c->src.name, index);
  if (!inside.defined()) return load;
  return make_select(inside, load, g->dtype == DType::i32 || g->dtype == DType::boolean ? make_int(0) : make_const(0.0));
}

// ---- Printing expressions per fragment element ------------------------------------------------
// Binds a statement's axes: the lead axes are 0, the row is this thread's row of slot rs, the
// column is the fragment element's column.
std::string MmaStreamWriter::bind(const Binding& b) const {
  std::string s;
  for (auto& v : b.lead) s += "const long long " + cuda_identifier(v) + " = 0; (void)" + cuda_identifier(v) + "; ";
  s += "const long long " + cuda_identifier(b.row) + " = row0 + (rs >> 1) * 16 + (rs & 1) * 8; (void)" + cuda_identifier(b.row) + "; ";
  int64_t tiles = (b.col_is_scores ? BN_ : DV_) / 8;
  if (!b.col.empty()) s += "const long long " + cuda_identifier(b.col) + " = (nt % " + std::to_string(tiles) + ") * 8 + ((lane & 3) << 1) + (e & 1); (void)" + cuda_identifier(b.col) + "; ";
  return s;
}

bool MmaStreamWriter::index_matches(const std::vector<Expr>& index, const Binding& b, bool with_col) const {
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
Binding MmaStreamWriter::p_binding() const {
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
Expr MmaStreamWriter::to_registers(const Expr& in, const Binding& b) {
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

Binding MmaStreamWriter::binding_of(const Domain& domain, const std::vector<Axis>& reduce_axes, bool wide_cols) const {
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
std::string MmaStreamWriter::guard_of(const Domain& domain, const Binding& b) {
  if (!domain.guard.defined()) return "";
  return printer_.print_bool(rewrite_loads(domain.guard, [&](const LoadNode& l, const Expr& self) -> Expr {
    if (roles_.count(l.tensor)) refuse("a domain guard reads tile " + l.tensor);
    return self;
  }));
}

void MmaStreamWriter::for_each_element(std::ostringstream& out, int ind, bool scores, const Binding& b, const std::string& statement) {
  int64_t tiles = (scores ? BN_ : DV_) / 8;
  out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int nt = 0; nt < " << G_ * tiles << "; ++nt) {\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int e = 0; e < 4; ++e) { const int rs = (nt / " << tiles << ") * 2 + (e >> 1); " << bind(b) << "\n";
  out << pad(ind + 2) << statement << " }\n";
  out << pad(ind) << "}\n";
}

void MmaStreamWriter::invalidate(const std::string& written) {
  for (auto it = cached_.begin(); it != cached_.end();)
    it = it->second.count(written) ? cached_.erase(it) : std::next(it);
}

// ---- Statements -------------------------------------------------------------------------------
void MmaStreamWriter::emit_body(std::ostringstream& out) {
  for (auto& s : kernel_.body) {
    if (s.kind() == StmtKind::For) emit_loop(out);
    else emit_statement(out, s, 1);
  }
}

// ---- Staging and the loop ---------------------------------------------------------------------
// copy tile[.., r, c] = global[...] → cp.async of 16-byte chunks into the swizzled layout.
void MmaStreamWriter::emit_stage(std::ostringstream& out, const CopyNode& c, const std::string& tile, int ind) {
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
  // Index ranges over the whole launch: grid variables, the stream variable (any tile of the loop), the
  // tile's rows and 16-byte columns. An index proven inside its global's extent needs no guard; when every
  // index is, the copy has no `inside` at all (paper shapes: no per-copy compares or selects).
  RangeFacts facts;
  facts.dims = program_.dims;
  for (const GridDim& gd : kernel_.grid) facts.vars[gd.var] = {0, gd.extent - 1};
  if (loop_) {
    auto begin = facts.bound(loop_->begin), end = facts.bound(loop_->end);
    if (begin && end) facts.vars[loop_->var] = {begin->lo, end->hi - 1};
  }
  for (size_t k = 0; k + 2 < n; ++k) facts.vars[axes[k].var] = {0, 0};
  facts.vars[row] = {0, R - 1};
  facts.vars[col] = {0, C - 8};
  std::string bounds;
  for (size_t d = 0; d < idx.size(); ++d) {
    const int64_t width = d + 1 == idx.size() ? 8 : 1;
    auto range = facts.bound(src[d]);
    if (range && range->lo >= 0 && range->hi + width <= g->shape[d]) continue;
    bounds += (bounds.empty() ? "" : " && ") + std::string("(") + idx[d] + ") >= 0 && (" + idx[d] + ") + " + std::to_string(width) + " <= " + std::to_string(g->shape[d]) + "LL";
  }
  const bool guarded = !bounds.empty();
  const int64_t copies = R * chunks, threads = warps_ * 32;
  out << pad(ind) << "// stage " << tile << " = " << c.src.name << " (cp.async, 16 bytes per copy, "
      << (guarded ? "out-of-bounds rows are zero" : "every index in bounds: no guard") << ")\n";
  if (copies % threads == 0) {
    out << pad(ind) << "#pragma unroll\n";
    out << pad(ind) << "for (int copy = 0; copy < " << copies / threads << "; ++copy) { const int chunk = threadIdx.x + copy * " << threads << ";\n";
  } else {
    out << pad(ind) << "for (int chunk = threadIdx.x; chunk < " << copies << "; chunk += " << threads << ") {\n";
  }
  out << pad(ind + 1);
  for (size_t k = 0; k + 2 < n; ++k) out << "const long long " << cuda_identifier(axes[k].var) << " = 0; ";
  out << "const long long " << cuda_identifier(row) << " = chunk / " << chunks << "; const long long " << cuda_identifier(col) << " = (chunk % " << chunks << ") * 8;\n";
  if (guarded) out << pad(ind + 1) << "const bool inside = " << bounds << ";\n";
  std::string r = "static_cast<int>(" + cuda_identifier(row) + ")", k = "static_cast<int>(" + cuda_identifier(col) + ")";
  std::string destination = wgmma_ ? "reinterpret_cast<unsigned char*>(" + cuda_identifier(tile) + ") + solder::tile::Swizzle128<" + std::to_string(R) + ">::byte_offset(" + r + ", " + k + ")"
                                   : "&" + cuda_identifier(tile) + "[solder::tile::Swizzle<" + std::to_string(C) + ">::offset(" + r + ", " + k + ")]";
  std::string source = cuda_identifier(c.src.name) + " + " + printer_.offset(arrays_.at(c.src.name), idx);
  if (guarded) out << pad(ind + 1) << "solder::tile::cp_async_16(" << destination << ", inside ? " << source << " : " << cuda_identifier(c.src.name) << ", inside);\n";
  else out << pad(ind + 1) << "solder::tile::cp_async_16(" << destination << ", " << source << ");\n";
  out << pad(ind) << "}\n";
  if (!wgmma_) out << pad(ind) << "solder::tile::cp_async_commit();\n";
}

// Run-time bounds of the data a mask reads: block-wide min/max of row states (once), and a function
// giving a column tile's min/max for tile j_t (each warp computes it alone: no barrier).
void MmaStreamWriter::emit_data_ranges(std::ostringstream& out, const std::string& jt) {
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
    out << "  // bounds of " << l.tensor << " over the columns of tile " << loop_->var << ": this lane's columns (column_part" << n
        << "_)" << (class_tiles_ > 0 ? "" : ", then the warp's (column_range" + n + ")") << "\n";
    out << "  auto column_part" << n << "_ = [&](long long " << jt << ", long long& lo, long long& hi) {\n";
    out << "    lo = 0x7fffffffffffffffLL; hi = (-0x7fffffffffffffffLL - 1);\n";
    out << "    #pragma unroll\n";
    out << "    for (int c = lane; c < " << BN_ << "; c += 32) { ";
    for (size_t a = 0; a + 1 < l.index.size(); ++a)
      if (l.index[a].kind() == ExprKind::Var) out << "const long long " << cuda_identifier(l.index[a].as<VarNode>()->name) << " = 0; ";
    out << "const long long " << cuda_identifier(col) << " = c;\n";
    out << "      const long long v = " << printer_.print_int(column_source_load(c, at)) << "; lo = v < lo ? v : lo; hi = v > hi ? v : hi; }\n";
    out << "  };\n";
    if (class_tiles_ > 0) continue;  // the table of classes reduces the parts itself
    out << "  auto column_range" << n << " = [&](long long " << jt << ", long long& lo, long long& hi) {\n";
    out << "    column_part" << n << "_(" << jt << ", lo, hi);\n";
    out << "    for (int o = 16; o > 0; o >>= 1) { lo = solder::min_int(lo, __shfl_xor_sync(0xffffffffu, lo, o)); hi = solder::max_int(hi, __shfl_xor_sync(0xffffffffu, hi, o)); }\n";
    out << "  };\n";
  }
}

void MmaStreamWriter::emit_a_fragments(std::ostringstream& out, int ind) {
  out << pad(ind) << "solder::tile::cp_async_wait<0>();\n" << pad(ind) << "__syncthreads();\n";
  out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int ks = 0; ks < " << D_ / 16 << "; ++ks)  // " << A_ << " → A fragments, once\n";
  out << pad(ind + 1) << "for (int g = 0; g < " << G_ << "; ++g)\n";
  out << pad(ind + 2) << "solder::tile::ldmatrix_x4(a_frag[g][ks], &" << cuda_identifier(A_) << "[solder::tile::Swizzle<" << D_ << ">::offset(warp * " << 16 * G_
      << " + g * 16 + (lane & 15), ks * 16 + ((lane >> 4) << 3))]);\n";
  if (scale_in_a_) {
    out << pad(ind) << "{ const float scale = " << printer_.print_float(score_scale_) << ";  // a power of two: the scores' scale, applied to "
        << A_ << " once (exact)\n";
    out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int ks = 0; ks < " << D_ / 16 << "; ++ks) for (int g = 0; g < " << G_
        << "; ++g) solder::tile::scale_bf16_fragment(a_frag[g][ks], scale); }\n";
  }
}

MmaStreamWriter::LoopParts MmaStreamWriter::loop_parts() const {
  LoopParts parts;
  bool after_scores = false, after_pv = false;
  int b_copies = 0, v_copies = 0;
  for (auto& s : loop_->body) {
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == B_) { if (after_scores) refuse("B is staged after the scores"); parts.stage_b = s.as<CopyNode>(); ++b_copies; continue; }
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == V_) { if (after_pv) refuse("V is staged after its use"); parts.stage_v = s.as<CopyNode>(); ++v_copies; continue; }
    if (s.kind() == StmtKind::Copy && s.as<CopyNode>()->dst.name == A_) refuse("A is staged inside the loop");
    if (s.kind() == StmtKind::Copy && roles_.count(s.as<CopyNode>()->dst.name) && roles_.at(s.as<CopyNode>()->dst.name) == Role::column) continue;  // read where it is
    if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() == scores_) after_scores = true;
    if (s.kind() == StmtKind::Reduce && s.as<ReduceNode>() == pv_) after_pv = true;
    parts.statements.push_back(&s);
  }
  if (b_copies != 1 || v_copies != 1) refuse("B and V are not each staged once per step");
  return parts;
}

void MmaStreamWriter::emit_tile_classes(std::ostringstream& out, const std::string& jt) {
  emit_data_ranges(out, jt);
  if (!live_condition_) {
    out << "  auto tile_live = [&](long long) -> bool { return true; };  // " << skip_refusal_ << "\n";
    out << "  auto next_live = [&](long long t) { while (t < stream_end && !tile_live(t)) ++t; return t; };\n";
    return;
  }
  const std::string live = printer_.print_bool(*live_condition_);
  const std::string full = full_condition_ ? printer_.print_bool(*full_condition_) : "false";
  if (class_tiles_ > 0) {
    // Data-dependent bounds: every key tile is classified once per block, all warps at once (each
    // warp bounds kBatch tiles per round, their loads in flight together), into a table in shared
    // memory; the loops then read the table.
    const int batch = 8;
    const std::string tiles = "stream_tiles_";
    out << "  // the key tiles' classes, once per block, from the per-tile min/max of the ids the mask compares:\n";
    out << "  // 0 masked everywhere (skipped), 1 boundary (mask code), 2 unmasked everywhere (no mask code)\n";
    out << "  const long long stream_begin_ = " << printer_.print_int(loop_->begin) << ", " << tiles << " = stream_end - stream_begin_;\n";
    out << "  unsigned char* const tile_class_ = smem + " << class_offset_ << ";  // [" << class_tiles_ << "]\n";
    out << "  long long* const next_live_tile_ = reinterpret_cast<long long*>(smem + " << next_offset_ << ");  // [" << class_tiles_ + 1
        << "]: the first live tile at or after each tile\n";
    out << "  for (long long round_ = static_cast<long long>(warp) * " << batch << "; round_ < " << tiles << "; round_ += " << warps_ * batch << ") {\n";
    for (size_t k = 0; k < column_ranges_.size(); ++k)
      out << "    long long col_lo" << k << "_of_[" << batch << "], col_hi" << k << "_of_[" << batch << "];\n";
    out << "    #pragma unroll\n";
    out << "    for (int u_ = 0; u_ < " << batch << "; ++u_) { const long long " << jt << " = stream_begin_ + solder::min_int(round_ + u_, " << tiles << " - 1);";
    for (size_t k = 0; k < column_ranges_.size(); ++k) out << " column_part" << k << "_(" << jt << ", col_lo" << k << "_of_[u_], col_hi" << k << "_of_[u_]);";
    out << " }\n";
    out << "    #pragma unroll\n";
    out << "    for (int u_ = 0; u_ < " << batch << "; ++u_) {\n";
    out << "      const long long " << jt << " = stream_begin_ + round_ + u_; (void)" << jt << ";\n";
    for (size_t k = 0; k < column_ranges_.size(); ++k) {
      std::string n = std::to_string(k);
      out << "      long long col_lo" << n << " = col_lo" << n << "_of_[u_], col_hi" << n << " = col_hi" << n << "_of_[u_];\n";
      out << "      for (int o = 16; o > 0; o >>= 1) { col_lo" << n << " = solder::min_int(col_lo" << n << ", __shfl_xor_sync(0xffffffffu, col_lo" << n
          << ", o)); col_hi" << n << " = solder::max_int(col_hi" << n << ", __shfl_xor_sync(0xffffffffu, col_hi" << n << ", o)); }\n";
    }
    out << "      if (lane == 0 && round_ + u_ < " << tiles << ") tile_class_[round_ + u_] = " << live << " ? (" << full << " ? 2 : 1) : 0;\n";
    out << "    }\n  }\n";
    out << "  __syncthreads();\n";
    out << "  if (warp == 0) {  // the next live tile at or after each tile: a suffix minimum, 32 tiles at a time from the end\n";
    out << "    long long next_ = stream_end;\n";
    out << "    for (long long base_ = (" << tiles << " - 1) / 32 * 32; base_ >= 0; base_ -= 32) {\n";
    out << "      const long long t = base_ + lane;\n";
    out << "      long long first_ = t < " << tiles << " && tile_class_[t] != 0 ? stream_begin_ + t : next_;\n";
    out << "      for (int o = 1; o < 32; o <<= 1) { const long long other_ = __shfl_down_sync(0xffffffffu, first_, o); if (lane + o < 32) first_ = solder::min_int(first_, other_); }\n";
    out << "      if (t < " << tiles << ") next_live_tile_[t] = first_;\n";
    out << "      next_ = __shfl_sync(0xffffffffu, first_, 0);\n";
    out << "    }\n";
    out << "  }\n";
    out << "  __syncthreads();\n";
    out << "  auto tile_full = [&](long long " << jt << ") -> bool { return tile_class_[" << jt << " - stream_begin_] == 2; };\n";
    out << "  auto next_live = [&](long long t) -> long long { return t < stream_end ? next_live_tile_[t - stream_begin_] : t; };\n";
    return;
  }
  std::string ranges;  // the column bounds of tile j_t, computed where a tile is classified
  for (size_t k = 0; k < column_ranges_.size(); ++k)
    ranges += "long long col_lo" + std::to_string(k) + ", col_hi" + std::to_string(k) + "; column_range" + std::to_string(k) + "(" + jt + ", col_lo" +
              std::to_string(k) + ", col_hi" + std::to_string(k) + "); ";
  out << "  // a tile lives when its mask may hold somewhere, and is full when it holds everywhere (interval bounds\n";
  out << "  // over the tile's rows and columns): dead tiles are skipped, full tiles skip the mask\n";
  out << "  auto tile_live = [&](long long " << jt << ") -> bool { " << ranges << "return " << live << "; };\n";
  out << "  auto tile_full = [&](long long " << jt << ") -> bool { " << ranges << "return " << full << "; };\n";
  out << "  auto next_live = [&](long long t) { while (t < stream_end && !tile_live(t)) ++t; return t; };\n";
}

// The stream loop, software-pipelined over two stages: B and V of the next live tile load while
// this tile computes.
void MmaStreamWriter::emit_loop(std::ostringstream& out) {
  if (wgmma_) { emit_loop_wgmma(out); return; }
  LoopParts parts = loop_parts();
  std::string jt = cuda_identifier(loop_->var);
  std::string begin = printer_.print_int(loop_->begin), end = printer_.print_int(loop_->end);
  std::string kb = cuda_identifier(B_), vb = cuda_identifier(V_);
  int64_t k_elements = BN_ * D_, v_elements = BN_ * DV_;
  out << "  // the stream: " << loop_->var << " in " << print_expr(loop_->begin) << " .. " << print_expr(loop_->end)
      << "; two stages of " << B_ << " and " << V_ << " (the next live tile loads while this one computes)\n";
  out << "  const long long stream_end = " << end << ";\n";
  emit_tile_classes(out, jt);
  out << "  long long " << jt << " = next_live(" << begin << ");\n";
  out << "  int stage = 0;\n";
  out << "  if (" << jt << " < stream_end) {\n";
  out << "    T* const " << kb << " = " << kb << "_stages; T* const " << vb << " = " << vb << "_stages;\n";
  emit_stage(out, *parts.stage_b, B_, 2);
  emit_stage(out, *parts.stage_v, V_, 2);
  out << "  }\n";
  out << "  while (" << jt << " < stream_end) {\n";
  out << "    const long long next_tile = next_live(" << jt << " + 1);\n";
  out << "    if (next_tile < stream_end) {\n";
  out << "      T* const " << kb << " = " << kb << "_stages + (stage ^ 1) * " << k_elements << "; T* const " << vb << " = " << vb << "_stages + (stage ^ 1) * " << v_elements << ";\n";
  out << "      const long long " << jt << " = next_tile;\n";
  emit_stage(out, *parts.stage_b, B_, 3);
  emit_stage(out, *parts.stage_v, V_, 3);
  out << "      solder::tile::cp_async_wait<2>();  // this tile's two groups are in; the next tile's are in flight\n";
  out << "    } else {\n      solder::tile::cp_async_wait<0>();\n    }\n";
  out << "    __syncthreads();\n";
  out << "    T* const " << kb << " = " << kb << "_stages + stage * " << k_elements << "; T* const " << vb << " = " << vb << "_stages + stage * " << v_elements << ";\n";
  auto body = [&](int ind) {
    cached_.clear();
    for (auto* s : parts.statements) emit_statement(out, *s, ind);
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

}  // namespace solder::mma_stream

namespace solder {

std::optional<TileMaskRule> tile_mask_rule(const KernelProgram& program, const Kernel& kernel, std::string* refusal) {
  try {
    mma_stream::MmaStreamWriter writer(program, kernel);
    return writer.mask_rule(refusal);
  } catch (const mma_stream::Refusal& r) {
    if (refusal) *refusal = "the tensor-core emitter does not take the kernel: " + r.why;
    return std::nullopt;
  }
}

std::optional<MmaStreamKernel> generate_mma_stream_kernel(const KernelProgram& program, const Kernel& kernel, std::string* refusal) {
  // Its staging copies address tiles directly: a copy at a data-dependent index (a gather) goes to
  // the generic writer, which checks the index (docs/kernel-ir.md, "Bounds").
  struct Gathers : StmtVisitor {
    bool found = false;
    using StmtVisitor::visit;
    void visit(const CopyNode& n) override {
      for (auto& i : n.src.index) found |= !tensors_used(i).empty();
    }
  } gathers;
  gathers.visit(kernel.body);
  if (gathers.found) {
    if (refusal) *refusal = "a copy reads a global at a data-dependent index (a gather)";
    return std::nullopt;
  }
  try {
    mma_stream::MmaStreamWriter writer(program, kernel);
    return writer.write();
  } catch (const mma_stream::Refusal& r) {
    if (refusal) *refusal = r.why;
    return std::nullopt;
  }
}

}  // namespace solder
