// The generic writer (kernel_writer.h): the kernel and its statements (the cluster collectives are in
// kernel_writer_cluster.cpp).
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

std::string KernelWriter::write() {
  std::ostringstream out;
  out << "#include <solder/reduce/vector.cuh>\n";
  if (has_topk()) out << "#include <solder/reduce/topk.cuh>\n";
  if (collectives_.used) out << "#include <solder/cluster/cluster.cuh>\n";
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
  out << "extern \"C\" __global__ void __launch_bounds__(" << kThreads;
  if (register_plan_ && register_plan_->launch_blocks && register_plan_->blocks_per_sm > 1) out << ", " << register_plan_->blocks_per_sm;
  out << ") " << cuda_identifier(kernel_.name) << "(";
  out << cuda_global_parameters(program_.globals) << ") {\n";
  out << "  extern __shared__ __align__(16) unsigned char smem[];\n";
  if (kernel_.cluster > 1) out << "  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();\n";
  // Logical grid coordinates from the linear block index (the pipelined register pass: per row block,
  // in its loop).
  const bool pipelined = register_plan_ && register_plan_->launch_blocks;
  if (!pipelined) grid_coordinates(out, "blockIdx.x", 1);
  std::set<std::string> rotated = async_buffers();
  for (auto& [name, off] : tile_offsets_) {
    const Buffer* b = kernel_.find_buffer(name);
    // i32 tiles hold int, so that integers above 2^24 stay exact; every other tile holds float.
    const char* element = b->dtype == DType::i32 && !rotated.count(name) ? "int" : "float";
    out << "  " << element << (rotated.count(name) ? "* " : "* const ") << cuda_identifier(name) << " = reinterpret_cast<" << element
        << "*>(smem + " << off << ");  // "
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
  collective_setup(out);
  if (has_reduce())
    out << "  float* const reduce_scratch = reinterpret_cast<float*>(smem + " << reduce_scratch_offset_ << ");  // partials of cooperative reduces\n";
  if (!pipelined) out << "  (void)block_linear;\n";
  if (register_plan_) register_pass(out);
  else statements(out, kernel_.body, 1);
  collective_teardown(out);
  out << "}\n";
  return out.str();
}

void KernelWriter::grid_coordinates(std::ostringstream& out, const std::string& linear, int indent) const {
  out << pad(indent) << "long long block_linear = " << linear << ";\n";
  for (size_t d = kernel_.grid.size(); d-- > 0;) {
    const GridDim& g = kernel_.grid[d];
    out << pad(indent) << "const long long " << cuda_identifier(g.var) << " = block_linear % " << g.extent << "LL;";
    out << " block_linear /= " << g.extent << "LL;\n";
  }
}

bool KernelWriter::has_topk() const {
  struct Finder : StmtVisitor {
    bool found = false;
    using StmtVisitor::visit;
    void visit(const ReduceNode& n) override { found |= n.op == ReduceOp::topk; }
  } f;
  f.visit(kernel_.body);
  return f.found;
}

bool KernelWriter::has_reduce() const {
  struct Finder : StmtVisitor {
    bool found = false;
    using StmtVisitor::visit;
    void visit(const ReduceNode&) override { found = true; }
  } f;
  f.visit(kernel_.body);
  return f.found;
}

std::vector<std::string> KernelWriter::index_texts(const std::vector<Expr>& index) {
  std::vector<std::string> out;
  for (auto& i : index) out.push_back(printer_.print_int(i));
  return out;
}

std::vector<std::string> KernelWriter::index_texts(const Access& a) {
  std::vector<std::string> out = index_texts(a.index);
  const CudaArray& arr = array(a.name);
  if (!arr.global) return out;
  for (size_t d = 0; d < a.index.size(); ++d)
    if (!tensors_used(a.index[d]).empty())
      out[d] = "solder_checked_index(" + out[d] + ", " + std::to_string(arr.shape[d]) + "LL, " + std::to_string(arr.parameter) +
               ", " + std::to_string(d) + ")";
  return out;
}

// `true` when every index of `a` is in bounds (for globals: the clipping rule).
std::string KernelWriter::in_bounds(const CudaArray& a, const std::vector<std::string>& index) const {
  std::string s;
  for (size_t d = 0; d < index.size(); ++d)
    s += (s.empty() ? "" : " && ") + std::string("(") + index[d] + ") >= 0 && (" + index[d] + ") < " + std::to_string(a.shape[d]) + "LL";
  return s.empty() ? "true" : s;
}

// Opens a block-strided loop over the points of `axes` (declaring each axis variable), with
// `guard` skipping points; returns the indentation of the loop body.
int KernelWriter::open_domain(std::ostringstream& out, const std::vector<Axis>& axes, const Expr& guard, int indent, const std::string& label) {
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
void KernelWriter::write_access(std::ostringstream& out, const Access& a, const std::string& value, int indent, bool integer_value) {
  const CudaArray& arr = array(a.name);
  auto idx = index_texts(a);
  std::string element = arr.pointer + "[" + printer_.offset(arr, idx) + "]";
  if (integer_value && arr.dtype == DType::i32) {
    // An integer into an i32 tile or global: exact, saturated to the int32 range (docs/kernel-ir.md).
    if (arr.global)
      out << pad(indent) << "if (" << in_bounds(arr, idx) << ") " << element << " = solder::saturate_i32(" << value << ");\n";
    else
      out << pad(indent) << element << " = solder::saturate_i32(" << value << ");\n";
    return;
  }
  if (arr.global)
    out << pad(indent) << "if (" << in_bounds(arr, idx) << ") solder::store(&" << element << ", " << value << ");\n";
  else
    out << pad(indent) << element << " = " << round_function(arr.dtype) << "(" << value << ");\n";
}

std::string KernelWriter::read_access(const Access& a) {
  const CudaArray& arr = array(a.name);
  auto idx = index_texts(a);
  std::string element = arr.pointer + "[" + printer_.offset(arr, idx) + "]";
  if (!arr.global) return element;
  if (arr.dtype == DType::i32) return "((" + in_bounds(arr, idx) + ") ? " + element + " : 0)";  // exact: an int
  return "((" + in_bounds(arr, idx) + ") ? solder::to_float(" + element + ") : 0.0f)";
}

// A body: consecutive reduces over the same domain and reduce axes, none reading another's result,
// become one cooperative pass (one read of their tiles, one combine); the rest one by one.
void KernelWriter::statements(std::ostringstream& out, const Block& body, int indent) {
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

void KernelWriter::statement(std::ostringstream& out, const Stmt& s, int indent) {
  if (!s.get()->comment.empty()) out << pad(indent) << "// " << s.get()->comment << "\n";
  switch (s.kind()) {
    case StmtKind::For: {
      auto n = s.as<ForNode>();
      if (contraction_loop(out, *n, indent)) return;
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
      write_access(out, n->dst, read_access(n->src), body, array(n->src.name).dtype == DType::i32);
      out << pad(indent) << "}\n";
      return;
    }
    case StmtKind::Map: {
      auto n = s.as<MapNode>();
      if (row_copy(out, *n, indent)) return;
      std::vector<Touch> touches;
      expr_touches(n->domain.guard, n->domain.axes, true, touches);
      expr_touches(n->value, n->domain.axes, true, touches);
      index_touches(n->dst, n->domain.axes, touches);
      touches.push_back(access_touch(n->dst, true, n->domain.axes));
      touch(out, indent, touches);
      int body = open_domain(out, n->domain.axes, n->domain.guard, indent, "point");
      if (array(n->dst.name).dtype == DType::i32 && printer_.type(n->value) == ValueType::integer)
        write_access(out, n->dst, printer_.print_int(n->value), body, true);
      else
        write_access(out, n->dst, printer_.print_float(n->value), body);
      out << pad(indent) << "}\n";
      return;
    }
    case StmtKind::Reduce: {
      auto n = s.as<ReduceNode>();
      if (contraction_reduce(out, *n, indent)) return;
      if (cooperative_layout({n})) return cooperative_reduce(out, {n}, indent);
      if (cooperative_topk(out, *n, indent)) return;
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
    case StmtKind::Contract:  // generate_cuda runs contracts_as_reduces first (contract_view.h)
      throw Error("CUDA code generator: a contract statement reached the generic writer");
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
      auto idx = index_texts(n->dst);
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

}  // namespace solder::generic
