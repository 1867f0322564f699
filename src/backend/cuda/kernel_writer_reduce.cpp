// The generic writer (kernel_writer.h): reductions, cooperative (a group of threads per output point,
// warp shuffles and shared memory) where the reduced extent is large, else one thread per point.
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

bool KernelWriter::same_axes(const std::vector<Axis>& a, const std::vector<Axis>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].var != b[i].var || a[i].extent != b[i].extent) return false;
  return true;
}

bool KernelWriter::mergeable(const ReduceNode& first, const ReduceNode& r, const std::vector<const ReduceNode*>& run) const {
  if (!same_axes(first.domain.axes, r.domain.axes) || !same_axes(first.reduce_axes, r.reduce_axes)) return false;
  if (static_cast<bool>(first.domain.guard) != static_cast<bool>(r.domain.guard)) return false;
  if (first.domain.guard && !structurally_equal(first.domain.guard, r.domain.guard)) return false;
  for (auto other : run) {
    if (other->dst.name == r.dst.name) return false;
    for (auto [a, b] : {std::pair{other, &r}, std::pair{&r, other}})
      for (const Expr* e : {&a->value, &a->where, &a->domain.guard})
        if (*e && uses_tensor(*e, b->dst.name)) return false;
  }
  return true;
}

// The layout of a run of reduces, or nothing when the generic path should run them.
std::optional<KernelWriter::CooperativeLayout> KernelWriter::cooperative_layout(const std::vector<const ReduceNode*>& run) const {
  CooperativeLayout l;
  const ReduceNode& n = *run.front();
  for (auto r : run) {
    if (r->op != ReduceOp::sum && r->op != ReduceOp::prod && r->op != ReduceOp::max && r->op != ReduceOp::min) return std::nullopt;
    if (!r->index_dst.name.empty()) return std::nullopt;
  }
  for (auto& a : n.domain.axes) l.points *= a.extent;
  for (auto& a : n.reduce_axes) l.reduced *= a.extent;
  if (l.reduced < 64 || l.points > kThreads / 4 || l.reduced >= (int64_t{1} << 30)) return std::nullopt;
  // Which axis the tiles the values read are contiguous along.
  bool along_reduce = false, along_domain = false;
  for (auto r : run)
    for_each_load(r->value, [&](const LoadNode& load) {
      if (array(load.tensor).global || load.index.empty()) return;
      along_reduce |= uses_var(load.index.back(), n.reduce_axes.back().var);
      if (!n.domain.axes.empty()) along_domain |= uses_var(load.index.back(), n.domain.axes.back().var);
    });
  l.point_major = along_domain && !along_reduce && l.points >= 8;
  if (l.point_major) {
    l.lanes_per_pass = 8;
    while (l.lanes_per_pass < l.points) l.lanes_per_pass *= 2;
    l.group = kThreads / l.lanes_per_pass;
  } else {
    l.group = floor_pow2(kThreads / l.points);
  }
  if (l.group < 4) return std::nullopt;
  return l;
}

void KernelWriter::cooperative_reduce(std::ostringstream& out, const std::vector<const ReduceNode*>& run, int indent) {
  const CooperativeLayout l = *cooperative_layout(run);
  const ReduceNode& n = *run.front();
  const bool shared = l.through_shared();
  const size_t count = run.size();
  auto op_of = [](ReduceOp op) {
    return std::string(op == ReduceOp::sum ? "solder::reduce::Sum()" : op == ReduceOp::prod ? "solder::reduce::Prod()"
                       : op == ReduceOp::max ? "solder::reduce::Max()" : "solder::reduce::Min()");
  };
  auto identity_of = [](ReduceOp op) {
    return std::string(op == ReduceOp::sum ? "0.0f" : op == ReduceOp::prod ? "1.0f"
                       : op == ReduceOp::min ? "solder::infinity()" : "(-solder::infinity())");
  };
  auto acc = [](size_t k) { return "acc" + std::to_string(k) + "_"; };

  // Before: every thread reads the values' loads (and the guard's), and the scratch is rewritten.
  std::vector<Touch> touches, after;
  for (auto r : run) {
    expr_touches(r->value, {}, false, touches);
    expr_touches(r->where, {}, false, touches);
  }
  expr_touches(n.domain.guard, {}, false, touches);
  if (shared) touches.push_back(Touch{"reduce_scratch", true, false});
  // After: the writers are thread p for point p when the partials meet in shared memory (behind the
  // internal barrier, which orders everything before it), else a thread of p's group.
  expr_touches(n.domain.guard, n.domain.axes, shared, after);
  for (auto r : run) {
    index_touches(r->dst, n.domain.axes, after);
    after.push_back(access_touch(r->dst, true, n.domain.axes, shared));
    if (r->accumulate) after.push_back(access_touch(r->dst, false, n.domain.axes, shared));
  }
  if (shared) after.push_back(Touch{"reduce_scratch", false, false});
  else touches.insert(touches.end(), after.begin(), after.end());
  touch(out, indent, touches);

  // Axes are int here (tile offsets in 32-bit arithmetic); global offsets still widen (LL strides).
  const std::string p = pad(indent), P = std::to_string(l.points), G = std::to_string(l.group);
  auto decode = [&](const std::vector<Axis>& axes, const std::string& flat, int in) {
    if (axes.empty()) return;
    out << pad(in) << "int rest_ = " << flat << ";\n";
    for (size_t d = axes.size(); d-- > 0;) {
      out << pad(in) << "const int " << cuda_identifier(axes[d].var) << " = rest_ % " << axes[d].extent << ";";
      out << " rest_ /= " << axes[d].extent << ";\n";
    }
    out << pad(in) << "(void)rest_;\n";
  };
  // The combined partials acc<k> of point `flat` into each dst (with its old value when accumulating).
  auto finish = [&](const std::string& flat, int in) {
    decode(n.domain.axes, flat, in);
    if (n.domain.guard) out << pad(in) << "if (" << printer_.print_bool(n.domain.guard) << ") {\n";
    int w = n.domain.guard ? in + 1 : in;
    for (size_t k = 0; k < count; ++k) {
      if (run[k]->accumulate) out << pad(w) << acc(k) << " = " << op_of(run[k]->op) << "(" << read_access(run[k]->dst) << ", " << acc(k) << ");\n";
      write_access(out, run[k]->dst, acc(k), w);
    }
    if (n.domain.guard) out << pad(in) << "}\n";
  };
  // This thread's partials over the slices slice, slice + G, ... of the reduce axes.
  auto partial = [&](int in) {
    for (size_t k = 0; k < count; ++k) out << pad(in) << "float " << acc(k) << " = " << identity_of(run[k]->op) << ";\n";
    out << pad(in) << "if (point_ < " << P << ") {\n";
    decode(n.domain.axes, "point_", in + 1);
    int body = in + 1;
    if (n.domain.guard) out << pad(body) << "if (" << printer_.print_bool(n.domain.guard) << ") {\n", ++body;
    out << pad(body) << "#pragma unroll 8\n";
    out << pad(body) << "for (int flat_ = slice_; flat_ < " << l.reduced << "; flat_ += " << G << ") {\n";
    out << pad(body + 1) << "int rest_ = flat_;\n";
    for (size_t d = n.reduce_axes.size(); d-- > 0;) {
      out << pad(body + 1) << "const int " << cuda_identifier(n.reduce_axes[d].var) << " = rest_ % " << n.reduce_axes[d].extent << ";";
      out << " rest_ /= " << n.reduce_axes[d].extent << ";\n";
    }
    out << pad(body + 1) << "(void)rest_;\n";
    for (size_t k = 0; k < count; ++k) {
      const ReduceNode& r = *run[k];
      std::string update = acc(k) + " = " + op_of(r.op) + "(" + acc(k) + ", " + printer_.print_float(r.value) + ");";
      if (r.where) out << pad(body + 1) << "if (" << printer_.print_bool(r.where) << ") " << update << "\n";
      else out << pad(body + 1) << update << "\n";
    }
    out << pad(body) << "}\n";
    if (n.domain.guard) out << pad(in + 1) << "}\n";
    out << pad(in) << "}\n";
  };

  std::string what;
  for (auto r : run) what += (what.empty() ? "" : ", ") + r->dst.name;
  if (l.point_major) {
    const std::string L = std::to_string(l.lanes_per_pass);
    out << p << "{  // reduce into " << what << ": " << G << " threads per point (point-major: thread t takes point t % " << L << ")\n";
    out << p << "  const int point_ = threadIdx.x % " << L << ", slice_ = threadIdx.x / " << L << ";\n";
    partial(indent + 1);
    for (size_t k = 0; k < count; ++k) out << p << "  reduce_scratch[" << k * kThreads << " + threadIdx.x] = " << acc(k) << ";\n";
    out << p << "  __syncthreads();\n";
    out << p << "  if (threadIdx.x < " << P << ") {\n";
    for (size_t k = 0; k < count; ++k) {
      std::string base = std::to_string(k * kThreads);
      out << p << "    float " << acc(k) << " = reduce_scratch[" << base << " + threadIdx.x];\n";
      out << p << "    for (int j_ = 1; j_ < " << G << "; ++j_) " << acc(k) << " = " << op_of(run[k]->op) << "(" << acc(k) << ", reduce_scratch["
          << base << " + j_ * " << L << " + threadIdx.x]);\n";
    }
    finish("threadIdx.x", indent + 2);
    out << p << "  }\n";
    out << p << "}\n";
  } else {
    const int64_t warp_lanes = std::min<int64_t>(l.group, 32);
    out << p << "{  // reduce into " << what << ": " << G << " threads per point (reduce-major: threads " << G << "·p … " << G << "·p + "
        << l.group - 1 << " take point p)\n";
    const int64_t per_pass = kThreads / l.group;
    const bool passes = l.points > per_pass;
    if (passes) out << p << "for (int pass_ = 0; pass_ < " << P << "; pass_ += " << per_pass << ") {\n";
    out << p << "  const int point_ = " << (passes ? "pass_ + " : "") << "threadIdx.x / " << G << ", slice_ = threadIdx.x % " << G << ";\n";
    partial(indent + 1);
    for (size_t k = 0; k < count; ++k)
      out << p << "  " << acc(k) << " = solder::reduce::warp_combine(" << acc(k) << ", 1, " << warp_lanes << ", " << op_of(run[k]->op) << ");\n";
    if (!shared) {
      out << p << "  if (slice_ == 0 && point_ < " << P << ") {\n";
      finish("point_", indent + 2);
      out << p << "  }\n";
    } else {
      const std::string per_point = std::to_string(l.group / 32);
      out << p << "  if (threadIdx.x % 32 == 0) {\n";
      for (size_t k = 0; k < count; ++k) out << p << "    reduce_scratch[" << k * kWarps << " + threadIdx.x / 32] = " << acc(k) << ";\n";
      out << p << "  }\n";
      out << p << "  __syncthreads();\n";
      out << p << "  if (threadIdx.x < " << P << ") {\n";
      for (size_t k = 0; k < count; ++k) {
        std::string base = std::to_string(k * kWarps) + " + threadIdx.x * " + per_point;
        out << p << "    float " << acc(k) << " = reduce_scratch[" << base << "];\n";
        out << p << "    for (int j_ = 1; j_ < " << per_point << "; ++j_) " << acc(k) << " = " << op_of(run[k]->op) << "(" << acc(k)
            << ", reduce_scratch[" << base << " + j_]);\n";
      }
      finish("threadIdx.x", indent + 2);
      out << p << "  }\n";
    }
    if (passes) out << p << "}\n";
    out << p << "}\n";
  }
  if (shared) {
    touched_.clear();
    touch(out, indent, after);  // no conflict: the barrier was just passed
  }
}

void KernelWriter::reduce(std::ostringstream& out, const ReduceNode& n, int indent) {
  int body = open_domain(out, n.domain.axes, n.domain.guard, indent, "point");
  const bool topk = n.op == ReduceOp::topk;
  const bool arg = n.op == ReduceOp::argmax || n.op == ReduceOp::argmin;
  const bool with_index = !n.index_dst.name.empty();
  std::string identity = n.op == ReduceOp::sum ? "0.0f" : n.op == ReduceOp::prod ? "1.0f"
                         : (n.op == ReduceOp::min || n.op == ReduceOp::argmin) ? "solder::infinity()" : "(-solder::infinity())";
  auto rank_access = [&](const Access& a, const std::string& rank) {
    // The access with the rank variable bound to `rank`.
    out << pad(body) << "{ const long long " << cuda_identifier(n.rank_var) << " = " << rank << "; (void)"
        << cuda_identifier(n.rank_var) << ";\n";
    (void)a;
  };
  if (topk) {
    out << pad(body) << "float best[" << n.k << "]; float best_index[" << n.k << "]; int count = 0;\n";
    if (n.accumulate) {
      out << pad(body) << "for (long long r_old = 0; r_old < " << n.k << "LL; ++r_old) {\n";
      rank_access(n.dst, "r_old");
      out << pad(body + 1) << "float v = " << read_access(n.dst) << ";\n";
      out << pad(body + 1) << "float index_ = " << (with_index ? read_access(n.index_dst) : std::string("0.0f")) << ";\n";
      out << pad(body + 1) << "if (!(v == -solder::infinity() && index_ < 0.0f)) { best[count] = v; best_index[count] = index_; ++count; }\n";
      out << pad(body) << "} }\n";
    }
  } else if (arg) {
    if (n.accumulate) out << pad(body) << "float acc = " << read_access(n.dst) << "; float acc_index = " << read_access(n.index_dst) << ";\n";
    else out << pad(body) << "float acc = 0.0f; float acc_index = -1.0f;\n";
  } else {
    out << pad(body) << "float acc = " << (n.accumulate ? read_access(n.dst) : identity) << ";\n";
  }
  int inner = body;
  for (auto& a : n.reduce_axes) {
    std::string v = cuda_identifier(a.var);
    out << pad(inner) << "for (long long " << v << " = 0; " << v << " < " << a.extent << "LL; ++" << v << ") {\n";
    ++inner;
  }
  if (n.where) out << pad(inner) << "if (!" << printer_.print_bool(n.where) << ") continue;\n";
  std::string value = printer_.print_float(n.value);
  switch (n.op) {
    case ReduceOp::sum: out << pad(inner) << "acc = acc + " << value << ";\n"; break;
    case ReduceOp::prod: out << pad(inner) << "acc = acc * " << value << ";\n"; break;
    case ReduceOp::max: out << pad(inner) << "acc = solder::max_nan(acc, " << value << ");\n"; break;
    case ReduceOp::min: out << pad(inner) << "acc = solder::min_nan(acc, " << value << ");\n"; break;
    case ReduceOp::argmax:
    case ReduceOp::argmin: {
      std::string better = n.op == ReduceOp::argmax ? "v > acc" : "v < acc";
      out << pad(inner) << "if (acc_index >= 0.0f && acc != acc) continue;  // the first NaN wins\n";
      out << pad(inner) << "float v = " << value << ";\n";
      out << pad(inner) << "if (acc_index < 0.0f || v != v || " << better << ") { acc = v; acc_index = "
          << printer_.print_float(n.index_value) << "; }\n";
      break;
    }
    case ReduceOp::topk: {
      std::string index = n.index_value ? printer_.print_float(n.index_value) : "0.0f";
      out << pad(inner) << "float v = " << value << "; float vi = " << index << ";\n";
      out << pad(inner) << "// insert into the sorted list: NaN first, then larger values, then lower indices\n";
      out << pad(inner) << "int at = count;\n";
      out << pad(inner) << "while (at > 0) {\n";
      out << pad(inner + 1) << "float w = best[at - 1], wi = best_index[at - 1];\n";
      out << pad(inner + 1) << "bool greater = (v != v) != (w != w) ? (v != v) : ((v == v && v != w) ? v > w : vi < wi);\n";
      out << pad(inner + 1) << "if (!greater) break;\n";
      out << pad(inner + 1) << "if (at < " << n.k << ") { best[at] = w; best_index[at] = wi; }\n";
      out << pad(inner + 1) << "--at;\n";
      out << pad(inner) << "}\n";
      out << pad(inner) << "if (at < " << n.k << ") { best[at] = v; best_index[at] = vi; if (count < " << n.k << ") ++count; }\n";
      break;
    }
    case ReduceOp::none: break;
  }
  for (size_t i = 0; i < n.reduce_axes.size(); ++i) out << pad(inner - 1 - static_cast<int>(i)) << "}\n";
  if (topk) {
    out << pad(body) << "for (long long r_new = 0; r_new < " << n.k << "LL; ++r_new) {\n";
    out << pad(body + 1) << "const long long " << cuda_identifier(n.rank_var) << " = r_new;\n";
    out << pad(body + 1) << "float v = r_new < count ? best[r_new] : -solder::infinity();\n";
    out << pad(body + 1) << "float vi = r_new < count ? best_index[r_new] : -1.0f;\n";
    write_access(out, n.dst, "v", body + 1);
    if (with_index) write_access(out, n.index_dst, "vi", body + 1);
    out << pad(body + 1) << "(void)vi;\n";
    out << pad(body) << "}\n";
  } else {
    write_access(out, n.dst, "acc", body);
    if (arg) write_access(out, n.index_dst, "acc_index", body);
  }
  out << pad(indent) << "}\n";
}

}  // namespace solder::generic
