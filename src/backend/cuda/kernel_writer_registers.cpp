// The generic writer (kernel_writer.h): the register pass. A memory-bound kernel of top-level copies,
// maps, fills and reduces (SiLU·up, RMSNorm: no stream loop, no contraction) whose tiles of N
// elements are touched only at each point's own element keeps those tiles in registers instead of
// staging them through shared memory: thread t owns the 16-byte vectors t, t + 256, ... of every
// such tile, so one thread loads, computes and stores each element and no block barrier stands
// between the statements that touch them. What each statement computes is unchanged: the same
// expressions, rounded to the same dtypes; a reduce over the whole tile combines its partials in a
// different (fixed) order, as the cooperative reduces do.
#include <sstream>

#include "backend/cuda/kernel_writer.h"
#include "ir/expr_visitor.h"

namespace solder::generic {

namespace {

int64_t points_of(const std::vector<Axis>& axes) {
  int64_t p = 1;
  for (auto& a : axes) p *= a.extent;
  return p;
}

std::vector<Axis> concat(const std::vector<Axis>& a, const std::vector<Axis>& b) {
  std::vector<Axis> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::string op_functor(ReduceOp op) {
  return op == ReduceOp::sum ? "solder::reduce::Sum()" : op == ReduceOp::prod ? "solder::reduce::Prod()"
         : op == ReduceOp::max ? "solder::reduce::Max()" : "solder::reduce::Min()";
}
std::string op_identity(ReduceOp op) {
  return op == ReduceOp::sum ? "0.0f" : op == ReduceOp::prod ? "1.0f" : op == ReduceOp::min ? "solder::infinity()" : "(-solder::infinity())";
}

constexpr int64_t kMaxRegisterFloats = 128;  // point tiles × vectors per thread × V, per thread

}  // namespace

// Owned up to axes of extent 1: dims of extent 1 are indexed by 0 (or an axis of extent 1), and the
// rest of the index is the remaining axes, in order, over dims of their extents.
bool KernelWriter::register_owned(const std::vector<Expr>& index, const std::vector<int64_t>& shape, const std::vector<Axis>& axes) const {
  if (index.size() != shape.size()) return false;
  std::vector<const Axis*> moving;
  std::set<std::string> unit;
  for (auto& a : axes) {
    if (a.extent == 1) unit.insert(a.var);
    else moving.push_back(&a);
  }
  size_t k = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    auto v = index[d].as<VarNode>();
    if (shape[d] == 1) {
      auto c = index[d].as<ConstNode>();
      if ((c && c->value == 0) || (v && unit.count(v->name))) continue;
      return false;
    }
    if (k >= moving.size() || !v || v->name != moving[k]->var || shape[d] != moving[k]->extent) return false;
    ++k;
  }
  return k == moving.size();
}

std::optional<KernelWriter::RegisterPlan> KernelWriter::plan_registers() const {
  if (kernel_.cluster > 1 || !contraction_staged_tiles().empty() || kernel_.body.empty()) return std::nullopt;
  RegisterPlan plan;
  plan.vector = 0;
  // Pass 1: the statement kinds, N, V and the candidate point tiles.
  auto tile = [&](const std::string& name) -> const CudaArray* {
    auto it = arrays_.find(name);
    return it == arrays_.end() || it->second.global ? nullptr : &it->second;
  };
  auto set_n = [&](int64_t n) {
    if (!plan.elements) plan.elements = n;
    return plan.elements == n;
  };
  auto index_reads = [](const Access& a) {
    for (auto& i : a.index)
      if (!tensors_used(i).empty()) return true;
    return false;
  };
  std::set<std::string> shared_written;  // by fills and reduces
  for (auto& s : kernel_.body) {
    switch (s.kind()) {
      case StmtKind::Copy: {
        auto c = s.as<CopyNode>();
        const CudaArray& src = array(c->src.name);
        const CudaArray& dst = array(c->dst.name);
        if (src.global == dst.global || index_reads(c->src) || index_reads(c->dst)) return std::nullopt;
        const Access& g = src.global ? c->src : c->dst;
        const Access& t = src.global ? c->dst : c->src;
        const CudaArray& global = array(g.name);
        if (global.dtype != DType::f32 && global.dtype != DType::f16 && global.dtype != DType::bf16) return std::nullopt;
        const int64_t v = 16 / dtype_bytes(global.dtype);
        if (plan.vector && plan.vector != v) return std::nullopt;
        plan.vector = v;
        if (!set_n(points_of(c->domain.axes)) || c->domain.axes.empty()) return std::nullopt;
        if (!contiguous_run(g, c->domain.axes, 1, v)) return std::nullopt;
        plan.tiles.insert(t.name);
        break;
      }
      case StmtKind::Map: {
        auto m = s.as<MapNode>();
        if (!tile(m->dst.name) || index_reads(m->dst) || m->domain.axes.empty()) return std::nullopt;
        if (!set_n(points_of(m->domain.axes))) return std::nullopt;
        plan.tiles.insert(m->dst.name);
        break;
      }
      case StmtKind::Fill: shared_written.insert(s.as<FillNode>()->buffer); break;
      case StmtKind::Reduce: {
        auto r = s.as<ReduceNode>();
        if (r->op != ReduceOp::sum && r->op != ReduceOp::prod && r->op != ReduceOp::max && r->op != ReduceOp::min) return std::nullopt;
        if (!r->index_dst.name.empty() || r->domain.guard || points_of(r->domain.axes) != 1 || r->reduce_axes.empty()) return std::nullopt;
        if (!tile(r->dst.name) || index_reads(r->dst) || !set_n(points_of(r->reduce_axes))) return std::nullopt;
        shared_written.insert(r->dst.name);
        break;
      }
      default: return std::nullopt;
    }
  }
  if (!plan.vector || plan.elements % plan.vector != 0) return std::nullopt;
  // Pass 2: every point tile has N float elements and is touched only at the point's own element;
  // the other tiles are written only by fills and reduces.
  for (auto& name : plan.tiles) {
    const Buffer* b = kernel_.find_buffer(name);
    if (!b || b->elements() != plan.elements || b->dtype == DType::i32 || shared_written.count(name)) return std::nullopt;
  }
  bool ok = true;
  // The element of a vector moves along the domain's last axis: it must hold whole vectors.
  auto check_axes = [&](const std::vector<Axis>& axes) {
    if (axes.empty() || axes.back().extent % plan.vector != 0) ok = false;
  };
  auto check_loads = [&](const Expr& e, const std::vector<Axis>& axes) {
    if (!e) return;
    for_each_load(e, [&](const LoadNode& load) {
      for (auto& i : load.index)
        if (!tensors_used(i).empty()) ok = false;
      if (plan.tiles.count(load.tensor) && !register_owned(load.index, array(load.tensor).shape, axes)) ok = false;
    });
  };
  for (auto& s : kernel_.body) {
    if (auto c = s.as<CopyNode>()) {
      const Access& t = array(c->src.name).global ? c->dst : c->src;
      check_axes(c->domain.axes);
      check_loads(c->domain.guard, c->domain.axes);
      if (!register_owned(t.index, array(t.name).shape, c->domain.axes)) ok = false;
    } else if (auto m = s.as<MapNode>()) {
      check_axes(m->domain.axes);
      check_loads(m->domain.guard, m->domain.axes);
      check_loads(m->value, m->domain.axes);
      if (!register_owned(m->dst.index, array(m->dst.name).shape, m->domain.axes)) ok = false;
    } else if (auto r = s.as<ReduceNode>()) {
      const auto axes = concat(r->domain.axes, r->reduce_axes);
      check_axes(r->reduce_axes);
      check_loads(r->value, axes);
      check_loads(r->where, axes);
      if (plan.tiles.count(r->dst.name)) ok = false;
    } else if (auto f = s.as<FillNode>()) {
      if (plan.tiles.count(f->buffer)) ok = false;
    }
  }
  if (!ok) return std::nullopt;
  plan.vectors = plan.elements / plan.vector;
  // At least half the block busy (fewer vectors leave most threads idle: the shared tiles then let
  // every thread compute).
  if (plan.vectors < kThreads / 2) return std::nullopt;
  plan.batch = (plan.vectors + kThreads - 1) / kThreads;
  if (plan.batch > kVectorBatch || static_cast<int64_t>(plan.tiles.size()) * plan.batch * plan.vector > kMaxRegisterFloats)
    return std::nullopt;
  return plan;
}

void KernelWriter::register_axes_base(std::ostringstream& out, const std::vector<Axis>& axes, int indent) {
  out << pad(indent) << "int rest_ = vec_ * " << register_plan_->vector << ";\n";
  for (size_t d = axes.size(); d-- > 0;) {
    out << pad(indent) << "const int b_" << cuda_identifier(axes[d].var) << "_ = rest_ % " << axes[d].extent << ";";
    out << " rest_ /= " << axes[d].extent << ";\n";
  }
  out << pad(indent) << "(void)rest_;\n";
}

void KernelWriter::register_axes_element(std::ostringstream& out, const std::vector<Axis>& axes, int indent) {
  for (size_t d = 0; d < axes.size(); ++d) {
    const std::string id = cuda_identifier(axes[d].var);
    out << pad(indent) << "const long long " << id << " = b_" << id << "_" << (d + 1 == axes.size() ? " + i_" : "") << "; (void)" << id << ";\n";
  }
}

void KernelWriter::register_pass(std::ostringstream& out) {
  const RegisterPlan& plan = *register_plan_;
  const std::string V = std::to_string(plan.vector), B = std::to_string(plan.batch);
  auto reg = [](const std::string& tile) { return "reg_" + cuda_identifier(tile); };
  out << "  // the register pass: " << plan.elements << " elements of each point tile per block, " << plan.batch
      << " vectors of " << plan.vector << " per thread (vector v of a tile in thread v % " << kThreads << ")\n";
  for (auto& t : plan.tiles) {
    out << "  float " << reg(t) << "[" << B << "][" << V << "] = {};  // " << t << "\n";
    arrays_[t].element = reg(t) + "[u_][i_]";
  }
  // Opens the per-vector loop (indent 2 inside); returns the body's indentation.
  auto open_vectors = [&](const std::vector<Axis>& axes) {
    out << "  #pragma unroll\n";
    out << "  for (int u_ = 0; u_ < " << B << "; ++u_) {\n";
    out << "    const int vec_ = threadIdx.x + u_ * " << kThreads << ";\n";
    out << "    if (vec_ >= " << plan.vectors << ") continue;\n";
    register_axes_base(out, axes, 2);
    return 2;
  };
  auto close = [&](int indent) { out << pad(indent) << "}\n"; };
  // Whether a statement since the last barrier touched a shared tile (a fill then needs one first).
  bool shared_touched = false;
  auto reads_shared = [&](const Expr& e) {
    if (e)
      for_each_load(e, [&](const LoadNode& load) {
        if (!array(load.tensor).global && !plan.tiles.count(load.tensor)) shared_touched = true;
      });
  };
  for (auto& s : kernel_.body) {
    if (!s.get()->comment.empty()) out << "  // " << s.get()->comment << "\n";
    switch (s.kind()) {
      case StmtKind::Copy: {
        auto c = s.as<CopyNode>();
        reads_shared(c->domain.guard);
        const bool load = array(c->src.name).global;
        const Access& g = load ? c->src : c->dst;
        const Access& t = load ? c->dst : c->src;
        const CudaArray& global = array(g.name);
        const Buffer* tb = kernel_.find_buffer(t.name);
        const auto& axes = c->domain.axes;
        out << "  // copy " << c->dst.name << " = " << c->src.name << ": 16-byte vectors, " << (load ? "into" : "from") << " registers\n";
        int in = open_vectors(axes);
        if (load) {
          // The vector is wholly in or out of the global (its dims are whole vectors); a guard does
          // not hold the load back (an element it skips is never read).
          out << pad(in) << "{\n";
          out << pad(in + 1) << "const int i_ = 0;\n";
          register_axes_element(out, axes, in + 1);
          out << pad(in + 1) << "if (" << in_bounds(global, index_texts(g)) << ") solder::reduce::load_vector(" << global.pointer << " + "
              << printer_.offset(global, index_texts(g)) << ", " << reg(t.name) << "[u_]);\n";
          out << pad(in + 1) << "else for (int j_ = 0; j_ < " << V << "; ++j_) " << reg(t.name) << "[u_][j_] = 0.0f;  // outside the global: 0\n";
          out << pad(in) << "}\n";
          if (tb->dtype != DType::f32 && tb->dtype != global.dtype)
            out << pad(in) << "for (int j_ = 0; j_ < " << V << "; ++j_) " << reg(t.name) << "[u_][j_] = " << round_function(tb->dtype) << "("
                << reg(t.name) << "[u_][j_]);\n";
        } else {
          // A vector store when every element's guard holds, else element by element.
          out << pad(in) << "bool whole_ = true;\n";
          if (c->domain.guard) {
            out << pad(in) << "#pragma unroll\n";
            out << pad(in) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
            register_axes_element(out, axes, in + 1);
            out << pad(in + 1) << "whole_ = whole_ && " << printer_.print_bool(c->domain.guard) << ";\n";
            out << pad(in) << "}\n";
          }
          out << pad(in) << "if (whole_) {\n";
          out << pad(in + 1) << "const int i_ = 0;\n";
          register_axes_element(out, axes, in + 1);
          out << pad(in + 1) << "if (" << in_bounds(global, index_texts(g)) << ") solder::reduce::store_vector(" << global.pointer << " + "
              << printer_.offset(global, index_texts(g)) << ", " << reg(t.name) << "[u_]);\n";
          out << pad(in) << "} else {\n";
          out << pad(in + 1) << "#pragma unroll\n";
          out << pad(in + 1) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
          register_axes_element(out, axes, in + 2);
          if (c->domain.guard) out << pad(in + 2) << "if (!" << printer_.print_bool(c->domain.guard) << ") continue;\n";
          auto idx = index_texts(g);
          out << pad(in + 2) << "if (" << in_bounds(global, idx) << ") solder::store(&" << global.pointer << "[" << printer_.offset(global, idx)
              << "], " << reg(t.name) << "[u_][i_]);\n";
          out << pad(in + 1) << "}\n";
          out << pad(in) << "}\n";
        }
        close(1);
        break;
      }
      case StmtKind::Map: {
        auto m = s.as<MapNode>();
        reads_shared(m->value);
        reads_shared(m->domain.guard);
        const auto& axes = m->domain.axes;
        const Buffer* b = kernel_.find_buffer(m->dst.name);
        out << "  // " << m->dst.name << " element by element, in registers\n";
        int in = open_vectors(axes);
        out << pad(in) << "#pragma unroll\n";
        out << pad(in) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
        register_axes_element(out, axes, in + 1);
        if (m->domain.guard) out << pad(in + 1) << "if (!" << printer_.print_bool(m->domain.guard) << ") continue;\n";
        out << pad(in + 1) << reg(m->dst.name) << "[u_][i_] = " << round_function(b->dtype) << "(" << printer_.print_float(m->value) << ");\n";
        out << pad(in) << "}\n";
        close(1);
        break;
      }
      case StmtKind::Fill: {
        auto f = s.as<FillNode>();
        const Buffer* b = kernel_.find_buffer(f->buffer);
        if (shared_touched) out << "  __syncthreads();  // no thread still reads " << f->buffer << "\n";
        out << "  for (int e = threadIdx.x; e < " << b->elements() << "; e += blockDim.x) " << cuda_identifier(f->buffer) << "[e] = "
            << round_function(b->dtype) << "(" << cuda_float_literal(f->value) << ");\n";
        out << "  __syncthreads();\n";
        shared_touched = false;
        break;
      }
      case StmtKind::Reduce: {
        auto r = s.as<ReduceNode>();
        out << "  {  // reduce into " << r->dst.name << " from registers: per thread, across the warp, then 8 warps through shared memory\n";
        out << "  float acc_ = " << op_identity(r->op) << ";\n";
        // The domain's axes (extent 1) are 0; the reduce axes walk the point tiles' elements.
        int in = open_vectors(r->reduce_axes);
        out << pad(in) << "#pragma unroll\n";
        out << pad(in) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
        for (auto& a : r->domain.axes) out << pad(in + 1) << "const long long " << cuda_identifier(a.var) << " = 0; (void)" << cuda_identifier(a.var) << ";\n";
        register_axes_element(out, r->reduce_axes, in + 1);
        std::string update = "acc_ = " + op_functor(r->op) + "(acc_, " + printer_.print_float(r->value) + ");";
        if (r->where) out << pad(in + 1) << "if (" << printer_.print_bool(r->where) << ") " << update << "\n";
        else out << pad(in + 1) << update << "\n";
        out << pad(in) << "}\n";
        close(1);
        out << "  acc_ = solder::reduce::warp_combine(acc_, 1, 32, " << op_functor(r->op) << ");\n";
        out << "  if (threadIdx.x % 32 == 0) reduce_scratch[threadIdx.x / 32] = acc_;\n";
        out << "  __syncthreads();\n";
        out << "  if (threadIdx.x == 0) {\n";
        out << "    acc_ = reduce_scratch[0];\n";
        out << "    for (int j_ = 1; j_ < " << kWarps << "; ++j_) acc_ = " << op_functor(r->op) << "(acc_, reduce_scratch[j_]);\n";
        for (auto& a : r->domain.axes) out << "    const long long " << cuda_identifier(a.var) << " = 0; (void)" << cuda_identifier(a.var) << ";\n";
        if (r->accumulate) out << "    acc_ = " << op_functor(r->op) << "(" << read_access(r->dst) << ", acc_);\n";
        write_access(out, r->dst, "acc_", 2);
        out << "  }\n";
        out << "  __syncthreads();  // " << r->dst.name << " for every thread; the scratch free again\n";
        out << "  }\n";
        shared_touched = false;
        break;
      }
      default: throw Error("CUDA code generator: the register pass met a statement its plan excludes (please report)");
    }
  }
  for (auto& t : plan.tiles) arrays_[t].element.clear();
}

}  // namespace solder::generic
