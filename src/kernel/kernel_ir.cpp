#include "kernel/kernel_ir.h"

#include <cmath>
#include <limits>
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
    case StmtKind::Contract: return "contract";
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

std::string_view mma_type_name(MmaType type) {
  switch (type) {
    case MmaType::f32: return "f32";
    case MmaType::tf32: return "tf32";
    case MmaType::bf16: return "bf16";
    case MmaType::f16: return "f16";
    case MmaType::f8e4m3: return "f8e4m3";
    case MmaType::f8e5m2: return "f8e5m2";
    case MmaType::tf32x3: return "3xtf32";
  }
  return "?";
}

std::optional<MmaType> parse_mma_type(std::string_view name) {
  for (MmaType t : {MmaType::f32, MmaType::tf32, MmaType::bf16, MmaType::f16, MmaType::f8e4m3, MmaType::f8e5m2, MmaType::tf32x3})
    if (mma_type_name(t) == name) return t;
  if (name == "e4m3") return MmaType::f8e4m3;  // the short names PTX and the planner's tables use
  if (name == "e5m2") return MmaType::f8e5m2;
  return std::nullopt;
}

double round_to_mma_type(double value, MmaType type) {
  switch (type) {
    case MmaType::f32:
    case MmaType::tf32x3: return round_to_dtype(value, DType::f32);
    case MmaType::bf16: return round_to_dtype(value, DType::bf16);
    case MmaType::f16: return round_to_dtype(value, DType::f16);
    case MmaType::f8e4m3: return round_to_dtype(value, DType::f8e4m3);
    case MmaType::f8e5m2: return round_to_dtype(value, DType::f8e5m2);
    case MmaType::tf32: return round_to_tf32(value);  // cvt.rn.tf32.f32
  }
  return value;
}

double tf32_hi(double value) { return round_to_mma_type(value, MmaType::tf32); }

double tf32_lo(double value) {
  const double x = round_to_dtype(value, DType::f32);  // an infinity's lo is NaN, as on the device
  return round_to_mma_type(x - tf32_hi(x), MmaType::tf32);
}

double accumulate_product(double acc, double a, double b, MmaType type) {
  auto f32 = [](double v) { return round_to_dtype(v, DType::f32); };
  if (type != MmaType::tf32x3) return f32(acc + f32(round_to_mma_type(a, type) * round_to_mma_type(b, type)));
  const double a_hi = tf32_hi(a), a_lo = tf32_lo(a), b_hi = tf32_hi(b), b_lo = tf32_lo(b);
  acc = f32(acc + f32(a_hi * b_lo));
  acc = f32(acc + f32(a_lo * b_hi));
  return f32(acc + f32(a_hi * b_hi));
}

std::optional<MmaType> mma_type_of(DType dtype) {
  switch (dtype) {
    case DType::bf16: return MmaType::bf16;
    case DType::f16: return MmaType::f16;
    case DType::f8e4m3: return MmaType::f8e4m3;
    case DType::f8e5m2: return MmaType::f8e5m2;
    default: return std::nullopt;
  }
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
void StmtVisitor::visit(const ContractNode&) {}
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
