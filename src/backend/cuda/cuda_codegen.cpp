#include "backend/cuda/cuda_codegen.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "ir/expr_visitor.h"
#include "backend/cuda/mma_stream_codegen.h"
#include "ir/diagnostics.h"
#include "ir/printer.h"
#include "kernel/kernel_verifier.h"

namespace solder {

std::string_view cuda_element_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f16: return "__half";
    case DType::bf16: return "__nv_bfloat16";
    case DType::f8e4m3: return "__nv_fp8_e4m3";
    case DType::f8e5m2: return "__nv_fp8_e5m2";
    case DType::i32: return "int";
    case DType::boolean: return "unsigned char";
  }
  return "float";
}

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kVectorBatch = 8;  // 16-byte vectors each thread has in flight in a staging copy
constexpr int kMaxMergedReduces = 4;  // consecutive reduces computed in one cooperative pass
constexpr int kAsyncStages = 3;       // buffers of a tile staged by cp.async: this one and two ahead
// cp.async staging of stream tiles (async_staged) instead of the register prefetch: verified on the
// H100 but slower on variance V8 (56.4 vs 50.7 us) and faster on inertia I8 (223 vs 236 us); off until
// the occupancy it gets (3 x 16 KB tiles per block) is understood (bench/NOTES.md, reductions v2).
constexpr bool kAsyncStaging = false;

int64_t floor_pow2(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}


// `e` is a multiple of `v` whatever its variables' values (structurally: constants, products with a
// multiple, sums of multiples).
bool multiple_of(const Expr& e, int64_t v, const std::map<std::string, int64_t>& dims) {
  if (auto c = e.as<ConstNode>()) return c->is_integer && static_cast<int64_t>(c->value) % v == 0;
  if (auto d = e.as<DimRefNode>()) return dims.count(d->name) && dims.at(d->name) % v == 0;
  if (auto b = e.as<BinaryNode>()) {
    if (b->op == BinaryOp::mul) return multiple_of(b->lhs, v, dims) || multiple_of(b->rhs, v, dims);
    if (b->op == BinaryOp::add || b->op == BinaryOp::sub) return multiple_of(b->lhs, v, dims) && multiple_of(b->rhs, v, dims);
  }
  return false;
}

class KernelWriter {
 public:
  KernelWriter(const KernelProgram& program, const Kernel& kernel) : program_(program), kernel_(kernel) {
    printer_.dims = program.dims;
    printer_.array = [this](const std::string& name) -> const CudaArray* {
      auto it = arrays_.find(name);
      return it == arrays_.end() ? nullptr : &it->second;
    };
    for (auto& g : program.globals)
      arrays_[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true};
    int64_t offset = 0;
    for (auto& b : kernel.buffers) {
      if (b.scope == Scope::queue)
        throw Error("CUDA code generator: kernel '" + kernel.name + "' uses queue '" + b.name +
                    "'; queues are not supported by the CUDA backend yet (run it with --backend cpu)");
      arrays_[b.name] = CudaArray{cuda_identifier(b.name), b.shape, b.dtype, false};
      tile_offsets_.emplace_back(b.name, offset);
      offset += (b.elements() * 4 + 15) / 16 * 16;
      max_tile_ = std::max(max_tile_, b.elements());
    }
    // Tiles staged asynchronously (async_staged) get kAsyncStages - 1 more buffers.
    for (auto& name : async_buffers()) {
      const Buffer* b = kernel.find_buffer(name);
      for (int stage = 1; stage < kAsyncStages; ++stage) {
        stage_offsets_.emplace_back(name + "_stage" + std::to_string(stage), offset);
        offset += (b->elements() * 4 + 15) / 16 * 16;
      }
    }
    reduce_scratch_offset_ = offset;
    if (has_reduce()) offset += kThreads * 4 * kMaxMergedReduces;
    scratch_offset_ = offset;
    shared_bytes_ = offset + (needs_scratch() ? (max_tile_ * 4 + 15) / 16 * 16 : 0);
  }

  GeneratedKernel info() const {
    return GeneratedKernel{kernel_.name, kernel_.blocks(), kernel_.cluster, kThreads, shared_bytes_};
  }

  std::string write() {
    std::ostringstream out;
    out << "#include <solder/reduce/vector.cuh>\n";
    out << "// kernel " << kernel_.name;
    if (!kernel_.definitions.empty()) {
      out << ": computes";
      for (auto& d : kernel_.definitions) out << " " << d;
    }
    out << "\n// grid";
    for (auto& g : kernel_.grid) out << " " << g.var << " < " << g.extent;
    out << " (" << kernel_.blocks() << " blocks)";
    if (kernel_.cluster > 1) out << ", clusters of " << kernel_.cluster;
    out << ", " << shared_bytes_ << " bytes of shared memory\n";
    out << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << cuda_identifier(kernel_.name) << "(";
    for (size_t i = 0; i < program_.globals.size(); ++i) {
      const GlobalTensor& g = program_.globals[i];
      out << (i ? ",\n    " : "\n    ") << (g.role == GlobalRole::input ? "const " : "") << cuda_element_type(g.dtype) << "* __restrict__ "
          << cuda_identifier(g.name);
    }
    out << ") {\n";
    out << "  extern __shared__ __align__(16) unsigned char smem[];\n";
    if (kernel_.cluster > 1) out << "  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();\n";
    // Logical grid coordinates from the linear block index.
    out << "  long long block_linear = blockIdx.x;\n";
    for (size_t d = kernel_.grid.size(); d-- > 0;) {
      const GridDim& g = kernel_.grid[d];
      out << "  const long long " << cuda_identifier(g.var) << " = block_linear % " << g.extent << "LL;";
      out << " block_linear /= " << g.extent << "LL;\n";
    }
    std::set<std::string> rotated = async_buffers();
    for (auto& [name, off] : tile_offsets_) {
      const Buffer* b = kernel_.find_buffer(name);
      out << (rotated.count(name) ? "  float* " : "  float* const ") << cuda_identifier(name) << " = reinterpret_cast<float*>(smem + " << off << ");  // "
          << scope_name(b->scope) << " " << dtype_name(b->dtype) << " [";
      for (size_t i = 0; i < b->shape.size(); ++i) out << (i ? ", " : "") << b->shape[i];
      out << "]\n";
    }
    for (auto& [name, off] : tile_offsets_)
      if (rotated.count(name))
        out << "  float* const " << cuda_identifier(name + "_stage0") << " = " << cuda_identifier(name) << ";  // its first staging buffer\n";
    for (auto& [name, off] : stage_offsets_)
      out << "  float* const " << cuda_identifier(name) << " = reinterpret_cast<float*>(smem + " << off << ");  // a staging buffer of "
          << name.substr(0, name.rfind("_stage")) << " (cp.async)\n";
    if (needs_scratch()) out << "  float* const collective_scratch = reinterpret_cast<float*>(smem + " << scratch_offset_ << ");\n";
    if (has_reduce())
      out << "  float* const reduce_scratch = reinterpret_cast<float*>(smem + " << reduce_scratch_offset_ << ");  // partials of cooperative reduces\n";
    out << "  (void)block_linear;\n";
    statements(out, kernel_.body, 1);
    out << "}\n";
    return out.str();
  }

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  CudaExprPrinter printer_;
  std::map<std::string, CudaArray> arrays_;
  std::vector<std::pair<std::string, int64_t>> tile_offsets_;
  int64_t max_tile_ = 0, scratch_offset_ = 0, shared_bytes_ = 0, reduce_scratch_offset_ = 0;
  std::vector<std::pair<std::string, int64_t>> stage_offsets_;  // extra buffers of asynchronously staged tiles

  // ---- Block barriers ----------------------------------------------------------------------------
  // Element-wise loops give domain point p to thread p % blockDim. An access is *owned* when the
  // element it touches at point p has row-major offset p (the index is the domain's axes, in order,
  // over a buffer of the domain's shape): then only the element's own thread touches it. A statement
  // needs a barrier before it only when it touches something another thread touched since the last
  // barrier, and one of the two writes it.
  struct Touch {
    std::string name;
    bool write = false, owned = false;
  };
  struct Touched {
    bool written = false, foreign = false;
  };
  std::map<std::string, Touched> touched_;  // since the last barrier

  static bool owned_index(const std::vector<Expr>& index, const std::vector<int64_t>& shape, const std::vector<Axis>& axes) {
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
  Touch access_touch(const Access& a, bool write, const std::vector<Axis>& axes, bool by_point_thread = true) const {
    return Touch{a.name, write, by_point_thread && owned_index(a.index, array(a.name).shape, axes)};
  }
  // The loads of an expression, as reads (owned when at the point's own element).
  void expr_touches(const Expr& e, const std::vector<Axis>& axes, bool by_point_thread, std::vector<Touch>& touches) const {
    for_each_load(e, [&](const LoadNode& load) {
      const CudaArray& a = array(load.tensor);
      touches.push_back(Touch{load.tensor, false, by_point_thread && owned_index(load.index, a.shape, axes)});
    });
  }
  void index_touches(const Access& a, const std::vector<Axis>& axes, std::vector<Touch>& touches) const {
    for (auto& i : a.index) expr_touches(i, axes, true, touches);
  }
  void barrier(std::ostringstream& out, int indent) {
    out << pad(indent) << "__syncthreads();\n";
    touched_.clear();
  }
  // A barrier when anything was touched since the last one (before statements whose threads the
  // ownership rule does not describe).
  void flush(std::ostringstream& out, int indent) {
    if (!touched_.empty()) barrier(out, indent);
  }
  // A barrier before `touches` when they conflict with what was touched since the last one; then
  // records them.
  void touch(std::ostringstream& out, int indent, const std::vector<Touch>& touches) {
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
  static void merge(std::map<std::string, Touched>& into, const std::map<std::string, Touched>& from) {
    for (auto& [name, t] : from) {
      Touched& r = into[name];
      r.written |= t.written;
      r.foreign |= t.foreign;
    }
  }

  bool has_reduce() const {
    struct Finder : StmtVisitor {
      bool found = false;
      using StmtVisitor::visit;
      void visit(const ReduceNode&) override { found = true; }
    } f;
    f.visit(kernel_.body);
    return f.found;
  }

  bool needs_scratch() const {
    struct Finder : StmtVisitor {
      bool found = false;
      using StmtVisitor::visit;
      void visit(const ClusterReduceNode&) override { found = true; }
      void visit(const ReduceScatterNode&) override { found = true; }
      void visit(const DsmShuffleNode&) override { found = true; }
      void visit(const AllExchangeNode&) override { found = true; }
    } f;
    f.visit(kernel_.body);
    return f.found;
  }

  const CudaArray& array(const std::string& name) const { return arrays_.at(name); }
  static std::string pad(int indent) { return std::string(static_cast<size_t>(indent) * 2, ' '); }

  std::vector<std::string> index_texts(const std::vector<Expr>& index) {
    std::vector<std::string> out;
    for (auto& i : index) out.push_back(printer_.print_int(i));
    return out;
  }
  // `true` when every index of `a` is in bounds (for globals: the clipping rule).
  std::string in_bounds(const CudaArray& a, const std::vector<std::string>& index) const {
    std::string s;
    for (size_t d = 0; d < index.size(); ++d)
      s += (s.empty() ? "" : " && ") + std::string("(") + index[d] + ") >= 0 && (" + index[d] + ") < " + std::to_string(a.shape[d]) + "LL";
    return s.empty() ? "true" : s;
  }

  // Opens a block-strided loop over the points of `axes` (declaring each axis variable), with
  // `guard` skipping points; returns the indentation of the loop body.
  int open_domain(std::ostringstream& out, const std::vector<Axis>& axes, const Expr& guard, int indent, const std::string& label) {
    int64_t points = 1;
    for (auto& a : axes) points *= a.extent;
    // Tile domains are far below 2^31 points: int counters (cheap division); long long otherwise.
    const bool narrow = points < (int64_t{1} << 30);
    const std::string type = narrow ? "int" : "long long", suffix = narrow ? "" : "LL";
    out << pad(indent) << "for (" << type << " " << label << " = threadIdx.x; " << label << " < " << points << suffix << "; " << label
        << " += blockDim.x) {\n";
    if (!axes.empty()) {
      out << pad(indent + 1) << type << " rest = " << label << ";\n";
      for (size_t d = axes.size(); d-- > 0;) {
        out << pad(indent + 1) << "const long long " << cuda_identifier(axes[d].var) << " = rest % " << axes[d].extent << suffix << ";";
        out << " rest /= " << axes[d].extent << suffix << ";\n";
      }
      out << pad(indent + 1) << "(void)rest;\n";
    }
    if (guard) out << pad(indent + 1) << "if (!" << printer_.print_bool(guard) << ") continue;\n";
    return indent + 1;
  }

  // Writes `value` (float text) to an access: globals are clipped and stored in their dtype, tiles
  // are rounded to theirs.
  void write_access(std::ostringstream& out, const Access& a, const std::string& value, int indent) {
    const CudaArray& arr = array(a.name);
    auto idx = index_texts(a.index);
    std::string element = arr.pointer + "[" + printer_.offset(arr, idx) + "]";
    if (arr.global)
      out << pad(indent) << "if (" << in_bounds(arr, idx) << ") solder::store(&" << element << ", " << value << ");\n";
    else
      out << pad(indent) << element << " = " << round_function(arr.dtype) << "(" << value << ");\n";
  }
  std::string read_access(const Access& a) {
    const CudaArray& arr = array(a.name);
    auto idx = index_texts(a.index);
    std::string element = arr.pointer + "[" + printer_.offset(arr, idx) + "]";
    if (!arr.global) return element;
    return "((" + in_bounds(arr, idx) + ") ? solder::to_float(" + element + ") : 0.0f)";
  }

  void sync(std::ostringstream& out, int indent) { out << pad(indent) << "__syncthreads();\n"; }

  // A body: consecutive reduces over the same domain and reduce axes, none reading another's result,
  // become one cooperative pass (one read of their tiles, one combine); the rest one by one.
  void statements(std::ostringstream& out, const Block& body, int indent) {
    for (size_t i = 0; i < body.size(); ++i) {
      std::vector<const ReduceNode*> run;
      for (size_t j = i; j < body.size() && run.size() < static_cast<size_t>(kMaxMergedReduces); ++j) {
        auto r = body[j].as<ReduceNode>();
        if (!r || (!run.empty() && !mergeable(*run.front(), *r, run))) break;
        run.push_back(r);
      }
      if (run.size() > 1 && cooperative_layout(run)) {
        for (auto r : run)
          if (!r->comment.empty()) out << pad(indent) << "// " << r->comment << "\n";
        cooperative_reduce(out, run, indent);
        i += run.size() - 1;
        continue;
      }
      statement(out, body[i], indent);
    }
  }
  static bool same_axes(const std::vector<Axis>& a, const std::vector<Axis>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].var != b[i].var || a[i].extent != b[i].extent) return false;
    return true;
  }
  bool mergeable(const ReduceNode& first, const ReduceNode& r, const std::vector<const ReduceNode*>& run) const {
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

  void statement(std::ostringstream& out, const Stmt& s, int indent) {
    if (!s.get()->comment.empty()) out << pad(indent) << "// " << s.get()->comment << "\n";
    switch (s.kind()) {
      case StmtKind::For: {
        auto n = s.as<ForNode>();
        std::vector<Touch> bounds;
        expr_touches(n->begin, {}, false, bounds);
        expr_touches(n->end, {}, false, bounds);
        touch(out, indent, bounds);
        std::string v = cuda_identifier(n->var), end = printer_.print_int(n->end);
        // Prefetched staging copies: registers loaded for the first iteration before the loop, for
        // the next one right after this one's are stored.
        const size_t ahead = prefetchable(*n);
        if (async_staged(*n)) return async_loop(out, *n, ahead, indent);
        auto prefetch = [&](const std::string& iteration, int in) {
          out << pad(in) << "{ const long long next_ = " << iteration << "; { const long long " << v << " = next_; if (" << v << " < " << end << ") {\n";
          for (size_t i = 0; i < ahead; ++i) {
            auto c = n->body[i].as<CopyNode>();
            vector_phase(out, *c, *vector_plan(*c), "prefetch" + std::to_string(i) + "_", "threadIdx.x", true, in + 1);
          }
          out << pad(in) << "} } }\n";
        };
        if (ahead) out << pad(indent) << "{  // the loop with its prefetch registers\n";
        for (size_t i = 0; i < ahead; ++i) {
          auto c = n->body[i].as<CopyNode>();
          auto plan = *vector_plan(*c);
          out << pad(indent) << "float prefetch" << i << "_[" << plan.batch << "][" << plan.vector << "];  // the next tile of " << c->src.name << "\n";
        }
        if (ahead) prefetch(printer_.print_int(n->begin), indent);
        out << pad(indent) << "for (long long " << v << " = " << printer_.print_int(n->begin) << "; " << v << " < " << end << "; ++" << v << ") {\n";
        // The first iteration starts from what was touched before the loop; every iteration ends
        // with a barrier when it touched anything, so the next one starts clean. After the loop:
        // what was touched before it (when it ran zero times).
        auto before = touched_;
        for (size_t i = 0; i < ahead; ++i) {
          auto c = n->body[i].as<CopyNode>();
          if (!c->comment.empty()) out << pad(indent + 1) << "// " << c->comment << " (prefetched)\n";
          touch(out, indent + 1, vector_touches(*c));
          vector_phase(out, *c, *vector_plan(*c), "prefetch" + std::to_string(i) + "_", "threadIdx.x", false, indent + 1);
        }
        if (ahead) prefetch(v + " + 1", indent + 1);
        statements(out, Block(n->body.begin() + static_cast<std::ptrdiff_t>(ahead), n->body.end()), indent + 1);
        flush(out, indent + 1);
        out << pad(indent) << "}\n";
        if (ahead) out << pad(indent) << "}\n";
        touched_ = before;
        return;
      }
      case StmtKind::If: {
        auto n = s.as<IfNode>();
        std::vector<Touch> cond;
        expr_touches(n->cond, {}, false, cond);
        touch(out, indent, cond);
        auto before = touched_;
        out << pad(indent) << "if (" << printer_.print_bool(n->cond) << ") {\n";
        statements(out, n->then_body, indent + 1);
        auto after_then = touched_;
        touched_ = before;
        if (!n->else_body.empty()) {
          out << pad(indent) << "} else {\n";
          statements(out, n->else_body, indent + 1);
        }
        out << pad(indent) << "}\n";
        merge(touched_, after_then);
        return;
      }
      case StmtKind::Fill: {
        auto n = s.as<FillNode>();
        const Buffer* b = kernel_.find_buffer(n->buffer);
        touch(out, indent, {Touch{n->buffer, true, true}});
        out << pad(indent) << "for (int e = threadIdx.x; e < " << b->elements() << "; e += blockDim.x) "
            << cuda_identifier(n->buffer) << "[e] = " << round_function(b->dtype) << "(" << cuda_float_literal(n->value) << ");\n";
        return;
      }
      case StmtKind::Copy: {
        auto n = s.as<CopyNode>();
        out << pad(indent) << "// copy " << n->dst.name << " = " << n->src.name << "\n";
        if (vector_copy(out, *n, indent)) return;
        std::vector<Touch> touches;
        expr_touches(n->domain.guard, n->domain.axes, true, touches);
        index_touches(n->src, n->domain.axes, touches);
        index_touches(n->dst, n->domain.axes, touches);
        touches.push_back(access_touch(n->src, false, n->domain.axes));
        touches.push_back(access_touch(n->dst, true, n->domain.axes));
        touch(out, indent, touches);
        int body = open_domain(out, n->domain.axes, n->domain.guard, indent, "point");
        write_access(out, n->dst, read_access(n->src), body);
        out << pad(indent) << "}\n";
        return;
      }
      case StmtKind::Map: {
        auto n = s.as<MapNode>();
        std::vector<Touch> touches;
        expr_touches(n->domain.guard, n->domain.axes, true, touches);
        expr_touches(n->value, n->domain.axes, true, touches);
        index_touches(n->dst, n->domain.axes, touches);
        touches.push_back(access_touch(n->dst, true, n->domain.axes));
        touch(out, indent, touches);
        int body = open_domain(out, n->domain.axes, n->domain.guard, indent, "point");
        write_access(out, n->dst, printer_.print_float(n->value), body);
        out << pad(indent) << "}\n";
        return;
      }
      case StmtKind::Reduce: {
        auto n = s.as<ReduceNode>();
        if (cooperative_layout({n})) return cooperative_reduce(out, {n}, indent);
        std::vector<Touch> touches;
        expr_touches(n->domain.guard, n->domain.axes, true, touches);
        expr_touches(n->value, n->domain.axes, true, touches);
        expr_touches(n->where, n->domain.axes, true, touches);
        expr_touches(n->index_value, n->domain.axes, true, touches);
        for (const Access* a : {&n->dst, &n->index_dst}) {
          if (a->name.empty()) continue;
          // topk writes k ranks per point: not the point's own element
          bool by_point = n->op != ReduceOp::topk;
          index_touches(*a, n->domain.axes, touches);
          touches.push_back(access_touch(*a, true, n->domain.axes, by_point));
          touches.push_back(access_touch(*a, false, n->domain.axes, by_point));
        }
        touch(out, indent, touches);
        return reduce(out, *n, indent);
      }
      case StmtKind::Gemm:
        flush(out, indent);
        gemm(out, *s.as<GemmNode>(), indent);
        touched_.clear();  // gemm ends with a barrier
        return;
      case StmtKind::ClusterReduce:
      case StmtKind::ClusterGather:
      case StmtKind::ReduceScatter:
      case StmtKind::DsmShuffle:
      case StmtKind::AllExchange:
        flush(out, indent);
        collective(out, s, indent);
        touched_.clear();  // collectives end with a block or cluster barrier
        return;
      case StmtKind::InterClusterReduce: {
        flush(out, indent);
        touched_.clear();
        auto n = s.as<InterClusterReduceNode>();
        const CudaArray& dst = array(n->dst.name);
        if (dst.dtype != DType::f32)
          throw Error("CUDA code generator: inter_cluster_reduce into '" + n->dst.name + "' needs an f32 global");
        int body = open_domain(out, n->domain.axes, n->domain.guard, indent, "point");
        auto idx = index_texts(n->dst.index);
        std::string element = dst.pointer + "[" + printer_.offset(dst, idx) + "]";
        std::string op = n->op == ReduceOp::sum ? "atomicAdd" : n->op == ReduceOp::max ? "solder::atomic_max" : "solder::atomic_min";
        out << pad(body) << "if (" << in_bounds(dst, idx) << ") " << op << "(&" << element << ", " << read_access(n->src) << ");\n";
        out << pad(indent) << "}\n";
        sync(out, indent);
        return;
      }
      case StmtKind::QueuePush:
      case StmtKind::QueuePop: throw Error("CUDA code generator: queues are not supported yet");
      case StmtKind::Barrier:
        out << pad(indent) << (s.as<BarrierNode>()->cluster ? "cluster.sync();\n" : "__syncthreads();\n");
        touched_.clear();
        return;
    }
  }

  // ---- Staging copies with 16-byte vectors ----------------------------------------------------------
  // A copy between a global (f32, f16, bf16) and a tile whose last k domain axes walk both sides
  // contiguously: the innermost k - 1 axes cover their dims whole, the k-th is `base + axis` (base a
  // multiple of the vector), and the run they span, the global's row and the base are whole vectors.
  // Each thread then moves whole vectors, kVectorBatch of them loaded before any is stored. Bounds:
  // a global's vector is wholly in or out (its dims are whole vectors), checked at its first element.
  bool contiguous_run(const Access& a, const std::vector<Axis>& axes, size_t k, int64_t vector) const {
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

  struct VectorPlan {
    int64_t vector = 4, vectors = 0, batch = 1;  // elements per vector, vectors, vectors per thread in flight
  };
  std::optional<VectorPlan> vector_plan(const CopyNode& n) const {
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
  std::vector<Touch> vector_touches(const CopyNode& n) const {
    std::vector<Touch> touches;
    expr_touches(n.domain.guard, n.domain.axes, false, touches);
    for (const Access* a : {&n.src, &n.dst})
      for (auto& i : a->index) expr_touches(i, n.domain.axes, false, touches);
    touches.push_back(Touch{n.src.name, false, false});
    touches.push_back(Touch{n.dst.name, true, false});
    return touches;
  }
  // One phase of a vector copy: the batch of vectors first + u * 256 (u < batch) of this thread,
  // loaded from the source into `regs`, or stored from `regs` into the destination.
  void vector_phase(std::ostringstream& out, const CopyNode& n, const VectorPlan& plan, const std::string& regs,
                    const std::string& first, bool load, int indent) {
    const auto& axes = n.domain.axes;
    const std::string v = std::to_string(plan.vector), p = pad(indent);
    auto element = [&](const Access& a) {
      const CudaArray& arr = array(a.name);
      return arr.pointer + " + " + printer_.offset(arr, index_texts(a.index));
    };
    out << p << "#pragma unroll\n";
    out << p << "for (int u_ = 0; u_ < " << plan.batch << "; ++u_) {\n";
    out << p << "  const int vec_ = " << first << " + u_ * " << kThreads << ";\n";
    out << p << "  if (vec_ >= " << plan.vectors << ") continue;\n";
    out << p << "  int rest_ = vec_ * " << v << ";\n";
    for (size_t d = axes.size(); d-- > 0;) {
      out << p << "  const long long " << cuda_identifier(axes[d].var) << " = rest_ % " << axes[d].extent << ";";
      out << " rest_ /= " << axes[d].extent << ";\n";
    }
    out << p << "  (void)rest_;\n";
    if (n.domain.guard) out << p << "  if (!" << printer_.print_bool(n.domain.guard) << ") continue;\n";
    const CudaArray& src = array(n.src.name);
    const CudaArray& dst = array(n.dst.name);
    if (load && src.global) {
      out << p << "  if (" << in_bounds(src, index_texts(n.src.index)) << ") solder::reduce::load_vector(" << element(n.src) << ", " << regs << "[u_]);\n";
      out << p << "  else for (int i_ = 0; i_ < " << v << "; ++i_) " << regs << "[u_][i_] = 0.0f;  // outside the global: 0\n";
    } else if (load) {
      out << p << "  solder::reduce::load_tile(" << element(n.src) << ", " << regs << "[u_]);\n";
    } else if (dst.global) {
      out << p << "  if (" << in_bounds(dst, index_texts(n.dst.index)) << ") solder::reduce::store_vector(" << element(n.dst) << ", " << regs << "[u_]);\n";
    } else {
      if (dst.dtype != DType::f32)
        out << p << "  for (int i_ = 0; i_ < " << v << "; ++i_) " << regs << "[u_][i_] = " << round_function(dst.dtype) << "(" << regs << "[u_][i_]);\n";
      out << p << "  solder::reduce::store_tile(" << element(n.dst) << ", " << regs << "[u_]);\n";
    }
    out << p << "}\n";
  }

  // A stream loop whose leading copies are staged by cp.async, kAsyncStages - 1 tiles ahead.
  void async_loop(std::ostringstream& out, const ForNode& n, size_t ahead, int indent) {
    const std::string v = cuda_identifier(n.var), begin = printer_.print_int(n.begin), end = printer_.print_int(n.end);
    auto slot_pointer = [&](const std::string& tile, const std::string& slot) {
      std::string e = cuda_identifier(tile + "_stage0");
      for (int stage = kAsyncStages - 1; stage >= 1; --stage)
        e = "(" + slot + " == " + std::to_string(stage) + " ? " + cuda_identifier(tile + "_stage" + std::to_string(stage)) + " : " + e + ")";
      return e;
    };
    std::set<std::string> tiles;
    for (size_t i = 0; i < ahead; ++i) tiles.insert(n.body[i].as<CopyNode>()->dst.name);
    // No thread may still read a staging buffer that the copies below overwrite.
    flush(out, indent);
    out << pad(indent) << "{  // the loop with its tiles staged by cp.async, " << kAsyncStages - 1 << " ahead\n";
    auto stage = [&](const std::string& iteration, const std::string& slot, int in) {
      out << pad(in) << "{ const long long next_ = " << iteration << "; const long long slot_ = " << slot << "; (void)slot_;\n";
      out << pad(in) << "  { const long long " << v << " = next_; if (" << v << " < " << end << ") {\n";
      for (size_t i = 0; i < ahead; ++i) {
        auto c = n.body[i].as<CopyNode>();
        std::string buffer = slot_pointer(c->dst.name, "slot_");
        async_phase(out, *c, *vector_plan(*c), buffer, in + 2);
      }
      out << pad(in) << "  } }\n";
      out << pad(in) << "  solder::reduce::cp_async_commit();\n";
      out << pad(in) << "}\n";
    };
    for (int s = 0; s < kAsyncStages - 1; ++s) stage(begin + " + " + std::to_string(s), std::to_string(s), indent);
    out << pad(indent) << "for (long long " << v << " = " << begin << "; " << v << " < " << end << "; ++" << v << ") {\n";
    auto before = touched_;
    const int in = indent + 1;
    out << pad(in) << "// the tiles of " << n.var << " + " << kAsyncStages - 1 << " into the buffers iteration " << n.var
        << " - 1 used (free since its last barrier); then wait for this iteration's\n";
    stage(v + " + " + std::to_string(kAsyncStages - 1), "(" + v + " - " + begin + " + " + std::to_string(kAsyncStages - 1) + ") % " + std::to_string(kAsyncStages), in);
    out << pad(in) << "solder::reduce::cp_async_wait<" << kAsyncStages - 1 << ">();\n";
    out << pad(in) << "{ const long long slot_ = (" << v << " - " << begin << ") % " << kAsyncStages << ";\n";
    for (auto& t : tiles) {
      std::string e = slot_pointer(t, "slot_");
      out << pad(in) << "  " << cuda_identifier(t) << " = " << e << ";\n";
    }
    out << pad(in) << "}\n";
    for (size_t i = 0; i < ahead; ++i) {
      auto c = n.body[i].as<CopyNode>();
      if (!c->comment.empty()) out << pad(in) << "// " << c->comment << " (staged by cp.async above)\n";
      touch(out, in, vector_touches(*c));
    }
    statements(out, Block(n.body.begin() + static_cast<std::ptrdiff_t>(ahead), n.body.end()), in);
    flush(out, in);
    out << pad(indent) << "}\n";
    out << pad(indent) << "solder::reduce::cp_async_wait<0>();  // nothing left in flight\n";
    out << pad(indent) << "}\n";
    touched_ = before;
  }

  bool vector_copy(std::ostringstream& out, const CopyNode& n, int indent) {
    auto plan = vector_plan(n);
    if (!plan) return false;
    touch(out, indent, vector_touches(n));
    const std::string p = pad(indent);
    out << p << "// " << plan->vectors << " vectors of " << plan->vector << " elements (16 bytes of " << n.src.name << " / " << n.dst.name
        << "), " << plan->batch << " in flight per thread\n";
    out << p << "for (int first_ = threadIdx.x; first_ < " << plan->vectors << "; first_ += " << kThreads * plan->batch << ") {\n";
    out << p << "  float staged_[" << plan->batch << "][" << plan->vector << "];\n";
    vector_phase(out, n, *plan, "staged_", "first_", true, indent + 1);
    vector_phase(out, n, *plan, "staged_", "first_", false, indent + 1);
    out << p << "}\n";
    return true;
  }

  // Staging copies at the top of a loop body that read an input at indices of the loop variable
  // alone (no loads): prefetched one iteration ahead into registers, so that the next tile's loads
  // are in flight while this one is computed. Returns how many leading statements qualify.
  size_t prefetchable(const ForNode& loop) const {
    size_t count = 0;
    for (auto& stmt : loop.body) {
      auto c = stmt.as<CopyNode>();
      if (!c) break;
      auto plan = vector_plan(*c);
      const GlobalTensor* g = program_.find_global(c->src.name);
      if (!plan || !g || g->role != GlobalRole::input || plan->vectors > kThreads * kVectorBatch) break;
      bool loads = false;
      for_each_load(c->domain.guard, [&](const LoadNode&) { loads = true; });
      for (auto& i : c->src.index) for_each_load(i, [&](const LoadNode&) { loads = true; });
      for (auto& i : c->dst.index) for_each_load(i, [&](const LoadNode&) { loads = true; });
      if (loads) break;
      ++count;
    }
    return count;
  }

  // Prefetched copies that cp.async can stage instead (f32 to an f32 tile, no guard): all of a
  // loop's or none. They rotate through kAsyncStages buffers, two tiles in flight ahead of the one
  // computed, in shared memory rather than registers.
  bool async_staged(const ForNode& loop) const {
    size_t ahead = prefetchable(loop);
    if (!kAsyncStaging || !ahead) return false;
    // The extra buffers must leave room: at most 160 KB of tiles (as float) in all.
    int64_t bytes = 0;
    for (auto& b : kernel_.buffers) bytes += b.elements() * 4;
    for (size_t i = 0; i < ahead; ++i) bytes += (kAsyncStages - 1) * kernel_.find_buffer(loop.body[i].as<CopyNode>()->dst.name)->elements() * 4;
    if (bytes > 160 * 1024) return false;
    for (size_t i = 0; i < ahead; ++i) {
      auto c = loop.body[i].as<CopyNode>();
      const CudaArray& src = array(c->src.name);
      const CudaArray& dst = array(c->dst.name);
      if (!src.global || dst.global || src.dtype != DType::f32 || dst.dtype != DType::f32 || c->domain.guard) return false;
    }
    return true;
  }
  std::set<std::string> async_buffers() const {
    struct Finder : StmtVisitor {
      const KernelWriter* self;
      std::set<std::string> names;
      using StmtVisitor::visit;
      void visit(const ForNode& loop) override {
        if (self->async_staged(loop))
          for (size_t i = 0; i < self->prefetchable(loop); ++i) names.insert(loop.body[i].as<CopyNode>()->dst.name);
        StmtVisitor::visit(loop);
      }
    } f;
    f.self = this;
    f.visit(kernel_.body);
    return f.names;
  }
  // The cp.async phase of a copy into the staging buffer `buffer` (an expression of a tile pointer).
  void async_phase(std::ostringstream& out, const CopyNode& n, const VectorPlan& plan, const std::string& buffer, int indent) {
    const auto& axes = n.domain.axes;
    const std::string p = pad(indent);
    const CudaArray& src = array(n.src.name);
    const CudaArray& dst = array(n.dst.name);
    out << p << "#pragma unroll\n";
    out << p << "for (int u_ = 0; u_ < " << plan.batch << "; ++u_) {\n";
    out << p << "  const int vec_ = threadIdx.x + u_ * " << kThreads << ";\n";
    out << p << "  if (vec_ >= " << plan.vectors << ") continue;\n";
    out << p << "  int rest_ = vec_ * " << plan.vector << ";\n";
    for (size_t d = axes.size(); d-- > 0;) {
      out << p << "  const long long " << cuda_identifier(axes[d].var) << " = rest_ % " << axes[d].extent << ";";
      out << " rest_ /= " << axes[d].extent << ";\n";
    }
    out << p << "  (void)rest_;\n";
    out << p << "  const bool inside_ = " << in_bounds(src, index_texts(n.src.index)) << ";\n";
    out << p << "  solder::reduce::cp_async16(" << buffer << " + " << printer_.offset(dst, index_texts(n.dst.index)) << ", inside_ ? "
        << src.pointer << " + " << printer_.offset(src, index_texts(n.src.index)) << " : " << src.pointer << ", inside_);\n";
    out << p << "}\n";
  }

  // ---- Cooperative reduces --------------------------------------------------------------------------
  // A sum / prod / max / min whose reduced extent is large gives each output point a group of threads
  // that splits the reduce axes, then combines the partials (f32 at each step; the order differs from
  // the executor's serial one). Two layouts:
  //   reduce-major (the tiles are contiguous along the reduce axis): G consecutive threads per point,
  //     combined by warp shuffles, then through shared memory when G spans several warps;
  //   point-major (contiguous along the domain): consecutive threads take consecutive points and the
  //     G = 256 / P' slices of each point are combined through shared memory.
  // A run of reduces over the same axes (statements()) is computed in one pass, one partial each.
  struct CooperativeLayout {
    bool point_major = false;
    int64_t points = 1, reduced = 1, group = 1, lanes_per_pass = 0;
    bool through_shared() const { return point_major || group > 32; }
  };

  // The layout of a run of reduces, or nothing when the generic path should run them.
  std::optional<CooperativeLayout> cooperative_layout(const std::vector<const ReduceNode*>& run) const {
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

  void cooperative_reduce(std::ostringstream& out, const std::vector<const ReduceNode*>& run, int indent) {
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
        out << p << "    for (int j = 1; j < " << G << "; ++j) " << acc(k) << " = " << op_of(run[k]->op) << "(" << acc(k) << ", reduce_scratch["
            << base << " + j * " << L << " + threadIdx.x]);\n";
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
          out << p << "    for (int j = 1; j < " << per_point << "; ++j) " << acc(k) << " = " << op_of(run[k]->op) << "(" << acc(k)
              << ", reduce_scratch[" << base << " + j]);\n";
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

  void reduce(std::ostringstream& out, const ReduceNode& n, int indent) {
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
        out << pad(body + 1) << "float i = " << (with_index ? read_access(n.index_dst) : std::string("0.0f")) << ";\n";
        out << pad(body + 1) << "if (!(v == -solder::infinity() && i < 0.0f)) { best[count] = v; best_index[count] = i; ++count; }\n";
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

  void gemm(std::ostringstream& out, const GemmNode& n, int indent) {
    const Buffer* a = kernel_.find_buffer(n.a);
    const Buffer* b = kernel_.find_buffer(n.b);
    const Buffer* c = kernel_.find_buffer(n.c);
    int64_t M = c->shape[0], N = c->shape[1], K = n.trans_a ? a->shape[0] : a->shape[1];
    std::string A = cuda_identifier(n.a), B = cuda_identifier(n.b), C = cuda_identifier(n.c);
    out << pad(indent) << "for (long long e = threadIdx.x; e < " << M * N << "LL; e += blockDim.x) {\n";
    out << pad(indent + 1) << "const long long row = e / " << N << "LL, col = e % " << N << "LL;\n";
    out << pad(indent + 1) << "float acc = " << (n.accumulate ? C + "[e]" : "0.0f") << ";\n";
    std::string av = n.trans_a ? A + "[k * " + std::to_string(a->shape[1]) + "LL + row]" : A + "[row * " + std::to_string(a->shape[1]) + "LL + k]";
    std::string bv = n.trans_b ? B + "[col * " + std::to_string(b->shape[1]) + "LL + k]" : B + "[k * " + std::to_string(b->shape[1]) + "LL + col]";
    out << pad(indent + 1) << "for (long long k = 0; k < " << K << "LL; ++k) acc += " << av << " * " << bv << ";\n";
    out << pad(indent + 1) << C << "[e] = acc;\n";
    out << pad(indent) << "}\n";
    sync(out, indent);
  }

  // Collectives over distributed shared memory: every block of the cluster takes part. The block
  // first waits for all peers (their buffers are complete), reads what it needs from its peers into
  // its own scratch, waits again (nobody overwrites a buffer a peer still reads), then writes.
  void collective(std::ostringstream& out, const Stmt& s, int indent) {
    const int C = kernel_.cluster;
    out << pad(indent) << "cluster.sync();\n";
    auto peer = [](const std::string& buffer, const std::string& rank) {
      return "cluster.map_shared_rank(" + buffer + ", static_cast<unsigned int>(" + rank + "))";
    };
    auto combine = [](ReduceOp op, const std::string& a, const std::string& b) {
      if (op == ReduceOp::sum) return a + " + " + b;
      return std::string(op == ReduceOp::max ? "solder::max_nan(" : "solder::min_nan(") + a + ", " + b + ")";
    };
    std::string target;
    int64_t n = 0;
    switch (s.kind()) {
      case StmtKind::ClusterReduce: {
        auto c = s.as<ClusterReduceNode>();
        std::string buf = cuda_identifier(c->buffer);
        n = kernel_.find_buffer(c->buffer)->elements();
        out << pad(indent) << "for (long long e = threadIdx.x; e < " << n << "LL; e += blockDim.x) {\n";
        out << pad(indent + 1) << "float acc = " << peer(buf, "0") << "[e];\n";
        out << pad(indent + 1) << "for (int r = 1; r < " << C << "; ++r) acc = " << combine(c->op, "acc", peer(buf, "r") + "[e]") << ";\n";
        out << pad(indent + 1) << "collective_scratch[e] = acc;\n";
        out << pad(indent) << "}\n";
        target = c->buffer;
        break;
      }
      case StmtKind::AllExchange: {
        auto c = s.as<AllExchangeNode>();
        std::string buf = cuda_identifier(c->buffer);
        int group = c->group ? c->group : C;
        n = kernel_.find_buffer(c->buffer)->elements();
        out << pad(indent) << "{ const int first = static_cast<int>(cluster.block_rank()) / " << group << " * " << group << ";\n";
        out << pad(indent) << "for (long long e = threadIdx.x; e < " << n << "LL; e += blockDim.x) {\n";
        out << pad(indent + 1) << "float acc = " << peer(buf, "first") << "[e];\n";
        out << pad(indent + 1) << "for (int r = first + 1; r < first + " << group << "; ++r) acc = acc " << (c->multiply ? "*" : "+") << " "
            << peer(buf, "r") << "[e];\n";
        out << pad(indent + 1) << "collective_scratch[e] = acc;\n";
        out << pad(indent) << "} }\n";
        target = c->buffer;
        break;
      }
      case StmtKind::ClusterGather: {
        auto c = s.as<ClusterGatherNode>();
        n = kernel_.find_buffer(c->src)->elements();
        const Buffer* dst = kernel_.find_buffer(c->dst);
        out << pad(indent) << "for (long long e = threadIdx.x; e < " << n * C << "LL; e += blockDim.x) "
            << cuda_identifier(c->dst) << "[e] = " << round_function(dst->dtype) << "(" << peer(cuda_identifier(c->src), "e / " + std::to_string(n) + "LL")
            << "[e % " << n << "LL]);\n";
        out << pad(indent) << "cluster.sync();\n";
        return;
      }
      case StmtKind::ReduceScatter: {
        auto c = s.as<ReduceScatterNode>();
        std::string src = cuda_identifier(c->src);
        n = kernel_.find_buffer(c->dst)->elements();
        out << pad(indent) << "{ const long long base = static_cast<long long>(cluster.block_rank()) * " << n << "LL;\n";
        out << pad(indent) << "for (long long e = threadIdx.x; e < " << n << "LL; e += blockDim.x) {\n";
        out << pad(indent + 1) << "float acc = " << peer(src, "0") << "[base + e];\n";
        out << pad(indent + 1) << "for (int r = 1; r < " << C << "; ++r) acc = " << combine(c->op, "acc", peer(src, "r") + "[base + e]") << ";\n";
        out << pad(indent + 1) << "collective_scratch[e] = acc;\n";
        out << pad(indent) << "} }\n";
        target = c->dst;
        break;
      }
      case StmtKind::DsmShuffle: {
        auto c = s.as<DsmShuffleNode>();
        int group = c->group ? c->group : C;
        n = kernel_.find_buffer(c->src)->elements();
        out << pad(indent) << "{ const int rank = static_cast<int>(cluster.block_rank()); const int first = rank / " << group << " * " << group
            << "; const int from = first + (rank - first - 1 + " << group << ") % " << group << ";\n";
        out << pad(indent) << "for (long long e = threadIdx.x; e < " << n << "LL; e += blockDim.x) collective_scratch[e] = "
            << peer(cuda_identifier(c->src), "from") << "[e]; }\n";
        target = c->dst;
        break;
      }
      default: break;
    }
    out << pad(indent) << "cluster.sync();\n";
    const Buffer* t = kernel_.find_buffer(target);
    out << pad(indent) << "for (long long e = threadIdx.x; e < " << n << "LL; e += blockDim.x) " << cuda_identifier(target) << "[e] = "
        << round_function(t->dtype) << "(collective_scratch[e]);\n";
    sync(out, indent);
  }
};

}  // namespace

GeneratedModule generate_cuda(const KernelProgram& input) {
  verify_kernel_program(input);
  // A kernel named like a global tensor (`y1` computing y1) would clash with its parameter in C++.
  KernelProgram program = input;
  for (auto& k : program.kernels)
    if (program.find_global(k.name)) k.name += "_kernel";
  GeneratedModule module;
  std::ostringstream out;
  out << "// Generated by Solder from program '" << program.name << "' (" << program.kernels.size() << " kernel"
      << (program.kernels.size() == 1 ? "" : "s") << ").\n";
  out << "#include <cooperative_groups.h>\n#include <solder/runtime.cuh>\n#include <solder/tile/tile.cuh>\n\n";
  for (auto& g : program.globals) module.parameters.push_back(g.name);
  for (auto& k : program.kernels) {
    // the tensor-core emitter for streamed two-contraction kernels; the generic writer for the rest
    std::string refusal;
    if (auto mma = generate_mma_stream_kernel(program, k, &refusal)) {
      out << mma->source << "\n";
      module.kernels.push_back(mma->info);
      continue;
    }
    out << "// tensor-core emitter not used for " << k.name << ": " << refusal << "\n";
    KernelWriter writer(program, k);
    out << writer.write() << "\n";
    module.kernels.push_back(writer.info());
  }
  module.source = out.str();
  return module;
}

}  // namespace solder
