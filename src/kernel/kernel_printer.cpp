#include "kernel/kernel_printer.h"

#include <sstream>

#include "ir/printer.h"

namespace solder {
namespace {

std::string access_text(const Access& a) {
  std::string s = a.name;
  if (!a.index.empty()) {
    s += "[";
    for (size_t i = 0; i < a.index.size(); ++i) s += (i ? ", " : "") + print_expr(a.index[i]);
    s += "]";
  }
  return s;
}

std::string axes_text(const std::vector<Axis>& axes) {
  std::string s;
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + axes[i].var + " < " + std::to_string(axes[i].extent);
  return s;
}

std::string domain_text(const Domain& d) {
  std::string s = d.axes.empty() ? "" : "  over " + axes_text(d.axes);
  if (d.guard) s += " where " + print_expr(d.guard);
  return s;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string group_text(int group) { return group ? " group " + std::to_string(group) : ""; }

void print_block(std::ostringstream& out, const Block& block, int indent);

void print_one(std::ostringstream& out, const Stmt& stmt, int indent) {
  std::string pad(static_cast<size_t>(indent) * 2, ' ');
  if (!stmt.get()->comment.empty()) out << pad << "# " << stmt.get()->comment << "\n";
  out << pad;
  switch (stmt.kind()) {
    case StmtKind::For: {
      auto n = stmt.as<ForNode>();
      out << "for " << n->var << " in " << print_expr(n->begin) << " .. " << print_expr(n->end) << " {\n";
      print_block(out, n->body, indent + 1);
      out << pad << "}\n";
      return;
    }
    case StmtKind::If: {
      auto n = stmt.as<IfNode>();
      out << "if " << print_expr(n->cond) << " {\n";
      print_block(out, n->then_body, indent + 1);
      if (!n->else_body.empty()) {
        out << pad << "} else {\n";
        print_block(out, n->else_body, indent + 1);
      }
      out << pad << "}\n";
      return;
    }
    case StmtKind::Fill: {
      auto n = stmt.as<FillNode>();
      out << "fill " << n->buffer << " = " << format_number(n->value, false) << "\n";
      return;
    }
    case StmtKind::Copy: {
      auto n = stmt.as<CopyNode>();
      out << "copy " << access_text(n->dst) << " = " << access_text(n->src) << domain_text(n->domain) << "\n";
      return;
    }
    case StmtKind::Map: {
      auto n = stmt.as<MapNode>();
      out << "map " << access_text(n->dst) << " = " << print_expr(n->value) << domain_text(n->domain) << "\n";
      return;
    }
    case StmtKind::Reduce: {
      auto n = stmt.as<ReduceNode>();
      out << "reduce " << reduce_op_name(n->op);
      if (n->op == ReduceOp::topk) out << "(" << n->k << ", rank " << n->rank_var << ")";
      out << " " << access_text(n->dst);
      if (!n->index_dst.name.empty()) out << ", " << access_text(n->index_dst) << " <- index " << print_expr(n->index_value);
      out << (n->accumulate ? " += " : " = ") << print_expr(n->value) << domain_text(n->domain) << "  reducing "
          << axes_text(n->reduce_axes);
      if (n->where) out << " where " << print_expr(n->where);
      out << "\n";
      return;
    }
    case StmtKind::Contract: {
      auto n = stmt.as<ContractNode>();
      out << "contract(" << mma_type_name(n->type) << ") " << access_text(n->dst) << (n->accumulate ? " += " : " = ");
      if (n->scale) out << print_expr(n->scale) << " · ";
      out << "Σ ";
      for (size_t t = 0; t < n->terms.size(); ++t)
        out << (t ? " + " : "") << "(" << print_expr(n->terms[t].a) << ") · (" << print_expr(n->terms[t].b) << ")";
      if (n->bias) out << " + " << print_expr(n->bias);
      if (n->epilogue) out << " as " << n->value << "[0]";
      if (!n->pair_terms.empty()) {
        out << " and Σ ";
        for (size_t t = 0; t < n->pair_terms.size(); ++t)
          out << (t ? " + " : "") << "(" << print_expr(n->pair_terms[t].a) << ") · (" << print_expr(n->pair_terms[t].b) << ")";
        out << " as " << n->pair_value << "[0]";
      }
      if (n->epilogue) out << " in " << print_expr(n->epilogue);
      out << domain_text(n->domain) << "  reducing " << axes_text(n->reduce_axes);
      if (n->where) out << " where " << print_expr(n->where);
      auto names = [](const std::vector<std::string>& v) {
        std::string s;
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
        return s.empty() ? std::string("none") : s;
      };
      out << "  rows " << names(n->row_axes) << "; columns " << names(n->column_axes) << "\n";
      return;
    }
    case StmtKind::ClusterReduce: {
      auto n = stmt.as<ClusterReduceNode>();
      out << "cluster_reduce(" << reduce_op_name(n->op) << ") " << n->buffer << "\n";
      return;
    }
    case StmtKind::ClusterGather: {
      auto n = stmt.as<ClusterGatherNode>();
      out << "cluster_gather " << n->src << " -> " << n->dst << "\n";
      return;
    }
    case StmtKind::ReduceScatter: {
      auto n = stmt.as<ReduceScatterNode>();
      out << "reduce_scatter(" << reduce_op_name(n->op) << ") " << n->src << " -> " << n->dst << "\n";
      return;
    }
    case StmtKind::DsmShuffle: {
      auto n = stmt.as<DsmShuffleNode>();
      out << "dsm_shuffle " << n->src << " -> " << n->dst << group_text(n->group) << "\n";
      return;
    }
    case StmtKind::AllExchange: {
      auto n = stmt.as<AllExchangeNode>();
      out << "all_exchange(" << (n->multiply ? "mul" : "add") << ") " << n->buffer << group_text(n->group) << "\n";
      return;
    }
    case StmtKind::InterClusterReduce: {
      auto n = stmt.as<InterClusterReduceNode>();
      out << "inter_cluster_reduce(" << reduce_op_name(n->op) << ") " << access_text(n->dst) << " <- "
          << access_text(n->src) << domain_text(n->domain) << "\n";
      return;
    }
    case StmtKind::QueuePush: {
      auto n = stmt.as<QueuePushNode>();
      out << "queue_push " << n->queue << " <- " << n->src << " tag " << print_expr(n->tag) << "\n";
      return;
    }
    case StmtKind::QueuePop: {
      auto n = stmt.as<QueuePopNode>();
      out << "queue_pop " << n->queue << " -> " << n->dst << " tag " << n->tag_var << "\n";
      return;
    }
    case StmtKind::Barrier: {
      out << "barrier " << (stmt.as<BarrierNode>()->cluster ? "cluster" : "block") << "\n";
      return;
    }
  }
}

void print_block(std::ostringstream& out, const Block& block, int indent) {
  for (auto& s : block) print_one(out, s, indent);
}

}  // namespace

std::string print_stmt(const Stmt& stmt, int indent) {
  std::ostringstream out;
  print_one(out, stmt, indent);
  return out.str();
}

std::string print_kernel(const Kernel& kernel) {
  std::ostringstream out;
  out << "kernel " << kernel.name;
  if (!kernel.definitions.empty()) {
    out << "  # computes";
    for (auto& d : kernel.definitions) out << " " << d;
  }
  out << "\n  grid ";
  for (size_t i = 0; i < kernel.grid.size(); ++i)
    out << (i ? ", " : "") << kernel.grid[i].var << " < " << kernel.grid[i].extent;
  out << "  (" << kernel.blocks() << " blocks)";
  if (kernel.cluster > 1) out << "  cluster " << kernel.cluster << (kernel.cluster > 8 ? " (non-portable)" : "");
  out << "  threads " << kernel.threads << "\n";
  for (auto& b : kernel.buffers) {
    out << "  " << scope_name(b.scope) << " " << b.name << shape_text(b.shape) << " : " << dtype_name(b.dtype);
    if (b.scope == Scope::queue) out << " depth " << b.depth;
    out << "\n";
  }
  print_block(out, kernel.body, 1);
  return out.str();
}

std::string print_kernel_program(const KernelProgram& program) {
  std::ostringstream out;
  out << "kernel program " << program.name << " (" << program.kernels.size() << " kernel"
      << (program.kernels.size() == 1 ? "" : "s") << ")\n";
  for (auto& g : program.globals) {
    const char* role = g.role == GlobalRole::input ? "in" : g.role == GlobalRole::output ? "out"
                       : g.role == GlobalRole::intermediate ? "intermediate" : "scratch";
    out << "global " << role << " " << g.name << shape_text(g.shape) << " : " << dtype_name(g.dtype) << "\n";
  }
  for (auto& k : program.kernels) out << "\n" << print_kernel(k);
  return out.str();
}

}  // namespace solder
