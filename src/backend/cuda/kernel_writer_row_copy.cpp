// The generic writer (kernel_writer.h): maps that only move data into whole rows of a global, written
// in 16-byte vectors.
//
// The rule. A map qualifies when
//   - its destination is a global of f32, f16 or bf16 indexed, in its last dim, by the map's last domain
//     axis (the depth axis) over the whole dim, a whole number of 16-byte vectors (V = 16 / |dtype|
//     elements each), and no other index of the destination, nor the guard, uses the depth axis;
//   - its value is a tree of selects whose conditions read no tensor and whose leaves are constants and
//     loads of globals; a load's last index reads no tensor, and a load that uses the depth axis uses it
//     only in its last index, as depth + c (c an integer). Its leading indices may read a tensor (a
//     gathered row, emb[tok[t], c]: the padded pass's gathered copies); they are the same for the whole
//     vector, and checked as every data-dependent index is (solder_checked_index: out of range, the
//     error is recorded and index 0 read, as the element-wise writer does).
// Each thread then computes V consecutive elements of a row, one by one (the selects per element), and
// stores them with one 16-byte store (store_vector_v4: st.global.v4, device/solder/reduce/vector.cuh). A
// leaf whose global has rows of whole 16-byte vectors and elements no wider than the destination's is read
// as the aligned 16-byte vectors that hold its V elements (a window, shifted by (c mod Vs) elements, Vs its
// elements per vector); the other leaves element by element. Bounds follow the clipping rule: an aligned
// vector lies wholly inside its row or wholly outside it (rows are whole vectors), and reads as zeros
// outside, as each of its elements would.
// The values and their rounding are the element-wise writer's: the same float per element, stored by
// round-to-nearest into the destination's dtype.
//
// SOLDER_VECTOR_ROW_COPY=0 writes these maps one element per thread (the writer before the rule).
#include <cstdlib>
#include <optional>
#include <sstream>

#include "backend/cuda/kernel_writer.h"
#include "ir/expr_visitor.h"

namespace solder::generic {
namespace {

bool vector_row_copy_enabled() {
  const char* v = std::getenv("SOLDER_VECTOR_ROW_COPY");
  return !(v && std::string(v) == "0");
}

bool reads_tensor(const Expr& e) { return !tensors_used(e).empty(); }

// An integer constant (a literal or a dim).
std::optional<int64_t> integer_constant(const Expr& e, const std::map<std::string, int64_t>& dims) {
  if (auto c = e.as<ConstNode>(); c && c->is_integer) return static_cast<int64_t>(c->value);
  if (auto d = e.as<DimRefNode>(); d && dims.count(d->name)) return dims.at(d->name);
  return std::nullopt;
}

// c when `e` is depth + c (depth, depth + c, c + depth, depth - c).
std::optional<int64_t> depth_offset(const Expr& e, const std::string& depth, const std::map<std::string, int64_t>& dims) {
  auto is_depth = [&](const Expr& x) {
    auto v = x.as<VarNode>();
    return v && v->name == depth;
  };
  if (is_depth(e)) return 0;
  auto b = e.as<BinaryNode>();
  if (!b) return std::nullopt;
  if (b->op == BinaryOp::add) {
    if (is_depth(b->lhs)) return integer_constant(b->rhs, dims);
    if (is_depth(b->rhs)) return integer_constant(b->lhs, dims);
  }
  if (b->op == BinaryOp::sub && is_depth(b->lhs))
    if (auto c = integer_constant(b->rhs, dims)) return -*c;
  return std::nullopt;
}

}  // namespace

bool KernelWriter::row_copy(std::ostringstream& out, const MapNode& n, int indent) {
  if (!vector_row_copy_enabled() || n.domain.axes.empty()) return false;
  const CudaArray& dst = array(n.dst.name);
  if (!dst.global || (dst.dtype != DType::f32 && dst.dtype != DType::f16 && dst.dtype != DType::bf16)) return false;
  const Axis& depth = n.domain.axes.back();
  const int64_t vector = 16 / dtype_bytes(dst.dtype);
  const size_t rank = n.dst.index.size();
  auto last = rank ? n.dst.index.back().as<VarNode>() : nullptr;
  if (!last || last->name != depth.var || dst.shape.back() != depth.extent || depth.extent % vector != 0) return false;
  for (size_t d = 0; d + 1 < rank; ++d)
    if (uses_var(n.dst.index[d], depth.var) || reads_tensor(n.dst.index[d])) return false;
  if (n.domain.guard && (uses_var(n.domain.guard, depth.var) || reads_tensor(n.domain.guard))) return false;

  // The value: selects over constants and loads of globals; each load's windowed form, where it has one.
  struct Window {
    const LoadNode* load;
    int64_t offset = 0, per_vector = 0, shift = 0, vectors = 0;  // c, Vs, c mod Vs, vectors in the window
    std::string name;
  };
  std::vector<Window> windows;
  std::function<bool(const Expr&)> copy_tree = [&](const Expr& e) -> bool {
    if (auto s = e.as<SelectNode>()) return !reads_tensor(s->cond) && copy_tree(s->if_true) && copy_tree(s->if_false);
    if (e.as<ConstNode>()) return true;
    auto l = e.as<LoadNode>();
    if (!l || !arrays_.count(l->tensor) || !array(l->tensor).global || l->index.empty()) return false;
    if (reads_tensor(l->index.back())) return false;
    for (size_t d = 0; d + 1 < l->index.size(); ++d)
      if (uses_var(l->index[d], depth.var)) return false;  // a leading index may read a tensor: a gathered row
    if (!uses_var(l->index.back(), depth.var)) return true;  // the same element for the whole vector
    std::optional<int64_t> offset = depth_offset(l->index.back(), depth.var, program_.dims);
    if (!offset) return false;
    const CudaArray& src = array(l->tensor);
    if (src.dtype != DType::f32 && src.dtype != DType::f16 && src.dtype != DType::bf16) return true;  // element by element
    const int64_t per_vector = 16 / dtype_bytes(src.dtype);
    if (src.shape.back() % per_vector != 0 || vector % per_vector != 0) return true;  // element by element
    Window w{l, *offset, per_vector, ((*offset % per_vector) + per_vector) % per_vector, 0, ""};
    w.vectors = (w.shift + vector + per_vector - 1) / per_vector;
    w.name = "window" + std::to_string(windows.size()) + "_";
    windows.push_back(w);
    return true;
  };
  if (!copy_tree(n.value)) return false;
  int64_t vectors = depth.extent / vector;
  for (size_t d = 0; d + 1 < n.domain.axes.size(); ++d) vectors *= n.domain.axes[d].extent;
  if (vectors >= (int64_t{1} << 30)) return false;

  std::vector<Touch> touches;
  expr_touches(n.domain.guard, n.domain.axes, false, touches);
  expr_touches(n.value, n.domain.axes, false, touches);
  touches.push_back(Touch{n.dst.name, true, false});
  touch(out, indent, touches);

  const std::string p = pad(indent), first = cuda_identifier(depth.var + "_first_");
  out << p << "// " << vectors << " vectors of " << vector << " elements (16 bytes of " << n.dst.name << "), one store each";
  for (auto& w : windows)
    out << "; " << w.load->tensor << " read as " << w.vectors << " aligned 16-byte vector" << (w.vectors > 1 ? "s" : "") << " shifted by "
        << w.shift;
  out << "\n";
  out << p << "for (int vector_ = threadIdx.x; vector_ < " << vectors << "; vector_ += blockDim.x) {\n";
  out << p << "  int rest_ = vector_;\n";
  out << p << "  const long long " << first << " = rest_ % " << depth.extent / vector << " * " << vector << "; rest_ /= " << depth.extent / vector
      << ";\n";
  for (size_t d = n.domain.axes.size() - 1; d-- > 0;) {
    const Axis& a = n.domain.axes[d];
    out << p << "  const long long " << cuda_identifier(a.var) << " = rest_ % " << a.extent << "; rest_ /= " << a.extent << ";\n";
  }
  out << p << "  (void)rest_;\n";
  if (n.domain.guard) out << p << "  if (!" << printer_.print_bool(n.domain.guard) << ") continue;\n";

  // Each window: its aligned vectors, from the one holding element first + c - shift.
  const std::string column = "column_";
  std::map<std::string, Expr> to_window;
  for (auto& w : windows) {
    const CudaArray& src = array(w.load->tensor);
    std::vector<Expr> index = w.load->index;
    index.back() = make_var(column);
    auto idx = index_texts(Access{w.load->tensor, index});  // a gathered row's index checked (solder_checked_index)
    out << p << "  float " << w.name << "[" << w.vectors << "][" << w.per_vector << "];  // " << w.load->tensor << " from column " << first
        << (w.offset - w.shift < 0 ? " - " : " + ") << std::abs(w.offset - w.shift) << "\n";
    out << p << "  #pragma unroll\n";
    out << p << "  for (int w_ = 0; w_ < " << w.vectors << "; ++w_) {\n";
    const int64_t start = w.offset - w.shift;
    out << p << "    const long long " << column << " = " << first << (start < 0 ? " - " : " + ") << std::abs(start) << "LL + w_ * " << w.per_vector
        << ";\n";
    out << p << "    if (" << in_bounds(src, idx) << ") solder::reduce::load_vector(" << src.pointer << " + " << printer_.offset(src, idx) << ", "
        << w.name << "[w_]);\n";
    out << p << "    else for (int i_ = 0; i_ < " << w.per_vector << "; ++i_) " << w.name << "[w_][i_] = 0.0f;  // outside the global: 0\n";
    out << p << "  }\n";
    const std::string element = "(e_ + " + std::to_string(w.shift) + ")";
    arrays_[w.name] = CudaArray{w.name, {}, DType::f32, false, -1,
                                w.name + "[" + element + " / " + std::to_string(w.per_vector) + "][" + element + " % " + std::to_string(w.per_vector) + "]"};
  }
  // The value with each windowed load reading its window.
  struct ToWindows : ExprMutator {
    const std::vector<Window>* windows;
    using ExprMutator::mutate;
    Expr mutate(const LoadNode& node, const Expr& self) override {
      for (auto& w : *windows)
        if (w.load == &node) return make_load(w.name, {});
      return self;
    }
  } to_windows;
  to_windows.windows = &windows;
  const Expr value = to_windows.mutate(n.value);

  out << p << "  float values_[" << vector << "];\n";
  out << p << "  #pragma unroll\n";
  out << p << "  for (int e_ = 0; e_ < " << vector << "; ++e_) {\n";
  out << p << "    const long long " << cuda_identifier(depth.var) << " = " << first << " + e_;\n";
  out << p << "    values_[e_] = " << printer_.print_float(value) << ";\n";
  out << p << "  }\n";
  out << p << "  {\n";
  out << p << "    const long long " << cuda_identifier(depth.var) << " = " << first << ";\n";
  auto idx = index_texts(n.dst);
  out << p << "    if (" << in_bounds(dst, idx) << ") solder::reduce::store_vector_v4(" << dst.pointer << " + " << printer_.offset(dst, idx) << ", values_);\n";
  out << p << "  }\n";
  out << p << "}\n";
  for (auto& w : windows) arrays_.erase(w.name);
  return true;
}

}  // namespace solder::generic
