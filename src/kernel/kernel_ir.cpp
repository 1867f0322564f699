#include "kernel/kernel_ir.h"

#include "support/checked.h"

namespace solder {

std::string_view scope_name(Scope scope) {
  switch (scope) {
    case Scope::global: return "global";
    case Scope::shared: return "shared";
    case Scope::register_file: return "register";
    case Scope::cluster: return "cluster";
    case Scope::queue: return "queue";
  }
  return "?";
}

std::string_view stmt_kind_name(StmtKind kind) {
  switch (kind) {
    case StmtKind::For: return "for";
    case StmtKind::If: return "if";
    case StmtKind::Fill: return "fill";
    case StmtKind::Copy: return "copy";
    case StmtKind::Map: return "map";
    case StmtKind::Reduce: return "reduce";
    case StmtKind::Gemm: return "gemm";
    case StmtKind::ClusterReduce: return "cluster_reduce";
    case StmtKind::ClusterGather: return "cluster_gather";
    case StmtKind::ReduceScatter: return "reduce_scatter";
    case StmtKind::DsmShuffle: return "dsm_shuffle";
    case StmtKind::AllExchange: return "all_exchange";
    case StmtKind::InterClusterReduce: return "inter_cluster_reduce";
    case StmtKind::QueuePush: return "queue_push";
    case StmtKind::QueuePop: return "queue_pop";
    case StmtKind::Barrier: return "barrier";
  }
  return "?";
}

// Sizes are products of bound extents (ir/limits.h keeps them far from the wrap); they are still
// multiplied with overflow checks, and an overflow is an internal error.
int64_t Domain::points() const {
  int64_t n = 1;
  for (auto& a : axes) n = mul_or_throw(n, a.extent, "domain points");
  return n;
}

int64_t Buffer::elements() const { return product_or_throw(shape, "buffer elements"); }

int64_t GlobalTensor::elements() const { return product_or_throw(shape, "global tensor elements"); }

int64_t Kernel::blocks() const {
  int64_t n = 1;
  for (auto& g : grid) n = mul_or_throw(n, g.extent, "grid blocks");
  return n;
}

const Buffer* Kernel::find_buffer(std::string_view name) const {
  for (auto& b : buffers) if (b.name == name) return &b;
  return nullptr;
}

const GlobalTensor* KernelProgram::find_global(std::string_view name) const {
  for (auto& g : globals) if (g.name == name) return &g;
  return nullptr;
}

void StmtVisitor::visit(const Block& block) {
  for (auto& s : block) visit(s);
}
void StmtVisitor::visit(const Stmt& stmt) {
  switch (stmt.kind()) {
#define SOLDER_STMT_DISPATCH(name) \
  case StmtKind::name: visit(*stmt.as<name##Node>()); return;
    SOLDER_STMT_NODES(SOLDER_STMT_DISPATCH)
#undef SOLDER_STMT_DISPATCH
  }
}
void StmtVisitor::visit(const ForNode& n) { visit(n.body); }
void StmtVisitor::visit(const IfNode& n) { visit(n.then_body); visit(n.else_body); }
void StmtVisitor::visit(const FillNode&) {}
void StmtVisitor::visit(const CopyNode&) {}
void StmtVisitor::visit(const MapNode&) {}
void StmtVisitor::visit(const ReduceNode&) {}
void StmtVisitor::visit(const GemmNode&) {}
void StmtVisitor::visit(const ClusterReduceNode&) {}
void StmtVisitor::visit(const ClusterGatherNode&) {}
void StmtVisitor::visit(const ReduceScatterNode&) {}
void StmtVisitor::visit(const DsmShuffleNode&) {}
void StmtVisitor::visit(const AllExchangeNode&) {}
void StmtVisitor::visit(const InterClusterReduceNode&) {}
void StmtVisitor::visit(const QueuePushNode&) {}
void StmtVisitor::visit(const QueuePopNode&) {}
void StmtVisitor::visit(const BarrierNode&) {}

}  // namespace solder
