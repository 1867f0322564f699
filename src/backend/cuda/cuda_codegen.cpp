#include "backend/cuda/cuda_codegen.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
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
    scratch_offset_ = offset;
    shared_bytes_ = offset + (needs_scratch() ? (max_tile_ * 4 + 15) / 16 * 16 : 0);
  }

  GeneratedKernel info() const {
    return GeneratedKernel{kernel_.name, kernel_.blocks(), kernel_.cluster, kThreads, shared_bytes_};
  }

  std::string write() {
    std::ostringstream out;
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
    for (auto& [name, off] : tile_offsets_) {
      const Buffer* b = kernel_.find_buffer(name);
      out << "  float* const " << cuda_identifier(name) << " = reinterpret_cast<float*>(smem + " << off << ");  // "
          << scope_name(b->scope) << " " << dtype_name(b->dtype) << " [";
      for (size_t i = 0; i < b->shape.size(); ++i) out << (i ? ", " : "") << b->shape[i];
      out << "]\n";
    }
    if (needs_scratch()) out << "  float* const collective_scratch = reinterpret_cast<float*>(smem + " << scratch_offset_ << ");\n";
    out << "  (void)block_linear;\n";
    for (auto& s : kernel_.body) statement(out, s, 1);
    out << "}\n";
    return out.str();
  }

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  CudaExprPrinter printer_;
  std::map<std::string, CudaArray> arrays_;
  std::vector<std::pair<std::string, int64_t>> tile_offsets_;
  int64_t max_tile_ = 0, scratch_offset_ = 0, shared_bytes_ = 0;

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
    out << pad(indent) << "for (long long " << label << " = threadIdx.x; " << label << " < " << points << "LL; " << label
        << " += blockDim.x) {\n";
    if (!axes.empty()) {
      out << pad(indent + 1) << "long long rest = " << label << ";\n";
      for (size_t d = axes.size(); d-- > 0;) {
        out << pad(indent + 1) << "const long long " << cuda_identifier(axes[d].var) << " = rest % " << axes[d].extent << "LL;";
        out << " rest /= " << axes[d].extent << "LL;\n";
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

  void statement(std::ostringstream& out, const Stmt& s, int indent) {
    if (!s.get()->comment.empty()) out << pad(indent) << "// " << s.get()->comment << "\n";
    switch (s.kind()) {
      case StmtKind::For: {
        auto n = s.as<ForNode>();
        std::string v = cuda_identifier(n->var);
        out << pad(indent) << "for (long long " << v << " = " << printer_.print_int(n->begin) << "; " << v << " < "
            << printer_.print_int(n->end) << "; ++" << v << ") {\n";
        for (auto& b : n->body) statement(out, b, indent + 1);
        out << pad(indent) << "}\n";
        return;
      }
      case StmtKind::If: {
        auto n = s.as<IfNode>();
        out << pad(indent) << "if (" << printer_.print_bool(n->cond) << ") {\n";
        for (auto& b : n->then_body) statement(out, b, indent + 1);
        if (!n->else_body.empty()) {
          out << pad(indent) << "} else {\n";
          for (auto& b : n->else_body) statement(out, b, indent + 1);
        }
        out << pad(indent) << "}\n";
        return;
      }
      case StmtKind::Fill: {
        auto n = s.as<FillNode>();
        const Buffer* b = kernel_.find_buffer(n->buffer);
        out << pad(indent) << "for (long long e = threadIdx.x; e < " << b->elements() << "LL; e += blockDim.x) "
            << cuda_identifier(n->buffer) << "[e] = " << round_function(b->dtype) << "(" << cuda_float_literal(n->value) << ");\n";
        sync(out, indent);
        return;
      }
      case StmtKind::Copy: {
        auto n = s.as<CopyNode>();
        out << pad(indent) << "// copy " << n->dst.name << " = " << n->src.name << "\n";
        int body = open_domain(out, n->domain.axes, n->domain.guard, indent, "point");
        write_access(out, n->dst, read_access(n->src), body);
        out << pad(indent) << "}\n";
        sync(out, indent);
        return;
      }
      case StmtKind::Map: {
        auto n = s.as<MapNode>();
        int body = open_domain(out, n->domain.axes, n->domain.guard, indent, "point");
        write_access(out, n->dst, printer_.print_float(n->value), body);
        out << pad(indent) << "}\n";
        sync(out, indent);
        return;
      }
      case StmtKind::Reduce: return reduce(out, *s.as<ReduceNode>(), indent);
      case StmtKind::Gemm: return gemm(out, *s.as<GemmNode>(), indent);
      case StmtKind::ClusterReduce:
      case StmtKind::ClusterGather:
      case StmtKind::ReduceScatter:
      case StmtKind::DsmShuffle:
      case StmtKind::AllExchange: return collective(out, s, indent);
      case StmtKind::InterClusterReduce: {
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
        return;
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
    sync(out, indent);
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
