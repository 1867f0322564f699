// The generic writer (kernel_writer.h): which threads touch which elements, so that block barriers go
// only where a statement reads what another thread wrote; 16-byte vector plans for staging copies.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "backend/cuda/kernel_writer.h"
#include "ir/diagnostics.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder::generic {

bool KernelWriter::owned_index(const std::vector<Expr>& index, const std::vector<int64_t>& shape, const std::vector<Axis>& axes) {
  if (axes.empty()) {
    for (auto& i : index) {
      auto c = i.as<ConstNode>();
      if (!c || c->value != 0) return false;
    }
    return true;
  }
  if (index.size() != axes.size() || shape.size() != axes.size()) return false;
  for (size_t d = 0; d < axes.size(); ++d) {
    auto v = index[d].as<VarNode>();
    if (!v || v->name != axes[d].var || shape[d] != axes[d].extent) return false;
  }
  return true;
}

// The loads of an expression, as reads (owned when at the point's own element).
void KernelWriter::expr_touches(const Expr& e, const std::vector<Axis>& axes, bool by_point_thread, std::vector<Touch>& touches) const {
  for_each_load(e, [&](const LoadNode& load) {
    const CudaArray& a = array(load.tensor);
    touches.push_back(Touch{load.tensor, false, by_point_thread && owned_index(load.index, a.shape, axes)});
  });
}

void KernelWriter::barrier(std::ostringstream& out, int indent) {
  out << pad(indent) << "__syncthreads();\n";
  touched_.clear();
}

// A barrier before `touches` when they conflict with what was touched since the last one; then
// records them.
void KernelWriter::touch(std::ostringstream& out, int indent, const std::vector<Touch>& touches) {
  bool conflict = false;
  for (auto& t : touches) {
    auto it = touched_.find(t.name);
    if (it == touched_.end()) continue;
    if ((t.write || it->second.written) && (!t.owned || it->second.foreign)) conflict = true;
  }
  if (conflict) barrier(out, indent);
  for (auto& t : touches) {
    Touched& r = touched_[t.name];
    r.written |= t.write;
    r.foreign |= !t.owned;
  }
}

void KernelWriter::merge(std::map<std::string, Touched>& into, const std::map<std::string, Touched>& from) {
  for (auto& [name, t] : from) {
    Touched& r = into[name];
    r.written |= t.written;
    r.foreign |= t.foreign;
  }
}

// ---- Staging copies with 16-byte vectors ----------------------------------------------------------
// A copy between a global (f32, f16, bf16) and a tile whose last k domain axes walk both sides
// contiguously: the innermost k - 1 axes cover their dims whole, the k-th is `base + axis` (base a
// multiple of the vector), and the run they span, the global's row and the base are whole vectors.
// Each thread then moves whole vectors, kVectorBatch of them loaded before any is stored. Bounds:
// a global's vector is wholly in or out (its dims are whole vectors), checked at its first element.
bool KernelWriter::contiguous_run(const Access& a, const std::vector<Axis>& axes, size_t k, int64_t vector) const {
  const CudaArray& arr = array(a.name);
  size_t rank = a.index.size();
  if (k > axes.size() || k > rank) return false;
  int64_t inner = 1;
  for (size_t j = 1; j < k; ++j) {  // the innermost k - 1 axes: exactly the axis, covering the dim
    auto v = a.index[rank - j].as<VarNode>();
    const Axis& axis = axes[axes.size() - j];
    if (!v || v->name != axis.var || arr.shape[rank - j] != axis.extent) return false;
    inner *= axis.extent;
  }
  const Axis& outer = axes[axes.size() - k];
  const Expr& head = a.index[rank - k];
  Expr base;
  if (auto v = head.as<VarNode>(); v && v->name == outer.var) {
  } else if (auto b = head.as<BinaryNode>(); b && b->op == BinaryOp::add) {
    auto l = b->lhs.as<VarNode>(), r = b->rhs.as<VarNode>();
    if (r && r->name == outer.var) base = b->lhs;
    else if (l && l->name == outer.var) base = b->rhs;
    else return false;
  } else {
    return false;
  }
  if ((outer.extent * inner) % vector != 0 || (arr.shape[rank - k] * inner) % vector != 0) return false;
  if (base && !multiple_of(base, vector, program_.dims)) return false;
  // No other index (nor the base) may move with the run's axes.
  for (size_t j = 0; j < k; ++j) {
    const std::string& var = axes[axes.size() - 1 - j].var;
    if (base && uses_var(base, var)) return false;
    for (size_t d = 0; d + k < rank; ++d)
      if (uses_var(a.index[d], var)) return false;
  }
  return true;
}

std::optional<KernelWriter::VectorPlan> KernelWriter::vector_plan(const CopyNode& n) const {
  const CudaArray& src = array(n.src.name);
  const CudaArray& dst = array(n.dst.name);
  if (src.global == dst.global) return std::nullopt;
  const CudaArray& global = src.global ? src : dst;
  if (global.dtype != DType::f32 && global.dtype != DType::f16 && global.dtype != DType::bf16) return std::nullopt;
  VectorPlan plan;
  plan.vector = 16 / dtype_bytes(global.dtype);
  const auto& axes = n.domain.axes;
  size_t k = 0;
  for (size_t c = 1; c <= axes.size() && !k; ++c)
    if (contiguous_run(n.src, axes, c, plan.vector) && contiguous_run(n.dst, axes, c, plan.vector)) k = c;
  if (!k) return std::nullopt;
  for (size_t j = 0; j < k; ++j)
    if (n.domain.guard && uses_var(n.domain.guard, axes[axes.size() - 1 - j].var)) return std::nullopt;
  int64_t points = 1;
  for (auto& a : axes) points *= a.extent;
  if (points >= (int64_t{1} << 30)) return std::nullopt;
  plan.vectors = points / plan.vector;
  plan.batch = std::min<int64_t>(kVectorBatch, (plan.vectors + kThreads - 1) / kThreads);
  return plan;
}

std::vector<KernelWriter::Touch> KernelWriter::vector_touches(const CopyNode& n) const {
  std::vector<Touch> touches;
  expr_touches(n.domain.guard, n.domain.axes, false, touches);
  for (const Access* a : {&n.src, &n.dst})
    for (auto& i : a->index) expr_touches(i, n.domain.axes, false, touches);
  touches.push_back(Touch{n.src.name, false, false});
  touches.push_back(Touch{n.dst.name, true, false});
  return touches;
}

}  // namespace solder::generic
