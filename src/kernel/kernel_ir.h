// The Kernel IR: how a program runs on a GPU with thread-block clusters.
//
// A KernelProgram is an ordered list of kernels plus the global tensors they read and write. The
// kernels run one after another; each sees every global write of the kernels before it.
//
// KERNEL. A kernel has
//   * a logical grid: named dims with extents. The grid is linearized row-major (the last dim varies
//     fastest) onto the physical grid's x dimension (Flashlight §3.6); each block sees its
//     coordinates as the grid variables.
//   * an optional cluster of C blocks (1 ≤ C ≤ 16; C > 8 needs the non-portable cluster attribute).
//     A cluster is C consecutive blocks of the linearized grid, so C must divide the last grid dim's
//     extent; a block's rank in its cluster is (last grid variable) % C.
//   * buffers, each with a name, a shape, a dtype and a scope:
//       register  a tile held by the block's threads (private to the block);
//       shared    the block's shared memory (private to the block);
//       cluster   the block's shared memory, visible to the other blocks of its cluster (DSM); the
//                 collectives below read and write it;
//       queue     a bounded ring buffer of tiles in L2 (Kitsune §4.1), shared by every block of the
//                 kernel; `depth` tiles of the buffer's shape, each tagged with an integer.
//     Every block has its own copy of each register, shared and cluster buffer; there is one copy of
//     each queue per kernel.
//   * a body of statements.
//
// STATEMENTS. Every statement is executed by the whole block: all its threads take part and
// control flow is uniform across the block. Collectives are executed by every block of the cluster
// (or of the named group), in the same order. A value written to a buffer or global is rounded to its
// dtype. Arithmetic is float32 (the CPU executor rounds every real-valued operation to float32, the
// GPU computes in float32); gemm and reduce accumulate in float32.
//
//   for v in begin .. end { body }     serial loop; begin/end are integer expressions of enclosing
//                                      grid/loop variables.
//   if cond { then } else { else }     block-uniform branch.
//   fill buf = value                   every element of buf.
//   copy dst[...] = src[...] over D    for each point of the domain D (axes with extents, and an
//                                      optional guard: points where it is false are skipped), copies
//                                      one element. Reading a global out of bounds yields 0; writing
//                                      a global out of bounds is skipped (tiles at ragged edges).
//                                      Buffers must be accessed in bounds.
//   map dst[...] = expr over D         like copy with an arbitrary scalar expression; its loads may
//                                      read buffers and globals (in bounds).
//   reduce op dst[...] (+)= expr over D, R where W
//                                      for each point of D (its guard may use D's axes only),
//                                      combines expr over the points of the reduce axes R where W
//                                      holds, with the monoid op (sum, max, min, prod; argmax,
//                                      argmin and topk(k) also write the winning `index_value` into
//                                      index_dst); `accumulate` combines with dst's current value
//                                      (for topk: merges with the current sorted list) instead of
//                                      starting from the identity. topk's dst is indexed by the
//                                      domain plus a rank variable of extent k.
//   contract dst[...] (+)= scale · Σ_R Σ_terms round_T(a) · round_T(b) + bias  over D where W
//                                      a matrix product (the canonical form of a contraction,
//                                      src/contract/canonicalize.h). For each point of D (guard on
//                                      D's axes only): acc = the sum, over the points of the reduce
//                                      axes R (K, flattened in order) where W holds and over the
//                                      terms, of round_T(a) · round_T(b), accumulated in float32 in
//                                      any order (zero when no point contributes); then
//                                      v = acc · scale + bias (float32; scale and bias are
//                                      expressions of D's axes, 1 and 0 when undefined), plus dst's
//                                      value when `accumulate`; dst = v rounded to its dtype.
//                                      round_T is rounding to the MMA input type T, nearest even:
//                                      bf16, f16, f8e4m3, f8e5m2 (saturating as the casts), tf32
//                                      (10 significand bits), or f32 (no rounding beyond float32:
//                                      CUDA cores). A product of two values of T is exact in float32
//                                      for every T but f32. T = 3xtf32 (f32 operands on tf32 tensor
//                                      cores at about f32 accuracy) is not one rounding: each
//                                      product a · b is the three tf32 products
//                                      hi(a)·lo(b) + lo(a)·hi(b) + hi(a)·hi(b), hi = round_tf32,
//                                      lo(x) = round_tf32(x − hi(x)) (x − hi(x) is exact in
//                                      float32), each added into the float32 accumulator (lo·lo
//                                      is dropped). `a` uses D's row and batch axes and R,
//                                      `b` D's column and batch axes and R; `row_axes` and
//                                      `column_axes` name them (every other axis of D is a batch
//                                      axis). T, scale and bias are part of the meaning: the
//                                      canonicalizer chooses them and the fusion report states why.
//                                      Epilogue: with one, dst (+)= epilogue instead of v, where
//                                      the epilogue reads v as value[0]. Paired (a dual-B product):
//                                      a second list of terms, pair_terms, is summed the same way
//                                      (same D, R, W and T) into acc2, which the epilogue reads
//                                      unscaled as pair_value[0]; gated FFN's silu(gate) · up is
//                                      one paired contract over x · Wu and x · Wg.
//   cluster_reduce(op) buf             all-reduce across the cluster, op ∈ {sum, max, min}: every
//                                      block's buf becomes op over all ranks, element-wise.
//   cluster_gather src -> dst          dst[r*n + i] = src_r[i] (n = size of src) in every block.
//   reduce_scatter(op) src -> dst      block r's dst[i] = op over s of src_s[r*n + i] (n = size of dst).
//   dsm_shuffle src -> dst group G     ring exchange within groups of G consecutive ranks: the dst of
//                                      group rank g receives the src of group rank (g-1+G) mod G.
//   all_exchange(add|mul) buf group G  every block of each group of G consecutive ranks ends with the
//                                      element-wise sum (add) or product (mul) over the group.
//   inter_cluster_reduce(op) dst[...] <- src[...] over D
//                                      combines the block's src elements into a global dst with op
//                                      (sum, max, min) atomically; the order across blocks is
//                                      unspecified. Out-of-bounds global elements are skipped.
//   queue_push q <- src tag t          waits for a free slot, then enqueues a copy of src tagged t.
//   queue_pop q -> dst tag v           waits for an item, dequeues it into dst and binds its tag to the
//                                      variable v for the statements that follow.
//   barrier block | cluster            orders memory among the block's threads / the cluster's blocks.
//
// Collectives and cluster barriers are where blocks of a cluster wait for each other; a block that
// exits while its peers wait, or blocks that reach different collectives, is a deadlock that the CPU
// executor reports with the kernel and statement.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/expr.h"
#include "ir/program.h"

namespace solder {

enum class Scope { global, shared, register_file, cluster, queue };
std::string_view scope_name(Scope scope);  // "global", "shared", "register", "cluster", "queue"

struct Axis {
  std::string var;
  int64_t extent = 1;
};

// An iteration domain: the points of `axes`, restricted to where `guard` holds (when defined).
struct Domain {
  std::vector<Axis> axes;
  Expr guard;
  int64_t points() const;
};

// One element of a buffer or global tensor.
struct Access {
  std::string name;
  std::vector<Expr> index;
};

#define SOLDER_STMT_NODES(X) \
  X(For)                     \
  X(If)                      \
  X(Fill)                    \
  X(Copy)                    \
  X(Map)                     \
  X(Reduce)                  \
  X(Contract)                \
  X(ClusterReduce)           \
  X(ClusterGather)           \
  X(ReduceScatter)           \
  X(DsmShuffle)              \
  X(AllExchange)             \
  X(InterClusterReduce)      \
  X(QueuePush)               \
  X(QueuePop)                \
  X(Barrier)

enum class StmtKind {
#define SOLDER_DECLARE_STMT_KIND(name) name,
  SOLDER_STMT_NODES(SOLDER_DECLARE_STMT_KIND)
#undef SOLDER_DECLARE_STMT_KIND
};
std::string_view stmt_kind_name(StmtKind kind);  // "for", "copy", "cluster_reduce", ...

struct StmtNode {
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  StmtKind kind;
  std::string comment;  // why the statement exists (which definitions it came from); printed
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}
  StmtKind kind() const { return node_->kind; }
  const StmtNode* get() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  template <class Node>
  const Node* as() const {
    return node_ && node_->kind == Node::node_kind ? static_cast<const Node*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};
using Block = std::vector<Stmt>;

#define SOLDER_STMT_NODE_HEADER(name) \
  static constexpr StmtKind node_kind = StmtKind::name; \
  name##Node() : StmtNode(node_kind) {}

struct ForNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(For)
  std::string var;
  Expr begin, end;
  Block body;
};
struct IfNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(If)
  Expr cond;
  Block then_body, else_body;
};
struct FillNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(Fill)
  std::string buffer;
  double value = 0;
};
struct CopyNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(Copy)
  Domain domain;
  Access dst, src;
};
struct MapNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(Map)
  Domain domain;
  Access dst;
  Expr value;
};
struct ReduceNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(Reduce)
  ReduceOp op = ReduceOp::sum;  // sum, max, min, prod, argmax, argmin, topk
  Domain domain;                // the kept (p) axes
  std::vector<Axis> reduce_axes;
  Access dst;
  Expr value;
  Expr where;  // when defined, points of the reduce axes where it is false do not contribute
  bool accumulate = false;
  // argmax / argmin / topk:
  Access index_dst;   // name empty when the index is not wanted (argmax/argmin: required)
  Expr index_value;   // the index recorded for a point of the reduce axes
  int64_t k = 0;      // topk
  std::string rank_var;  // topk: the variable indexing the k ranks in dst and index_dst
};
// The input type of a matrix unit: what a contract rounds its operands to. tf32x3 ("3xtf32") is f32
// operands split into two tf32 parts each and multiplied as three tf32 products (the contract's
// meaning above; the GEMM skeleton runs it as one tf32 GEMM over 3K, fusion/tf32_split.h).
enum class MmaType { f32, tf32, bf16, f16, f8e4m3, f8e5m2, tf32x3 };
std::string_view mma_type_name(MmaType type);  // "f32", "tf32", "bf16", ..., "3xtf32"
std::optional<MmaType> parse_mma_type(std::string_view name);
// Rounds a real value to `type` (nearest even; fp8 as the casts of ir/dtype.h; f32 and 3xtf32: to
// float32, the operand's value before its split).
double round_to_mma_type(double value, MmaType type);
// The two tf32 parts of an f32 value: hi = round_tf32(x), lo = round_tf32(x − hi).
double tf32_hi(double value);
double tf32_lo(double value);
// One product term of a contract of type T as the contract's meaning has it: round_T(a) · round_T(b)
// rounded to float32, or for 3xtf32 the three float32 products hi·lo, lo·hi, hi·hi in that order,
// added one by one into `acc` (float32). Returns the new accumulator.
double accumulate_product(double acc, double a, double b, MmaType type);
// The MMA type whose values are exactly the values of `dtype`, when there is one (f32 has none:
// f32 operands are rounded to f32, i.e. not at all).
std::optional<MmaType> mma_type_of(DType dtype);

// One product term of a contract: a · b (each rounded to the contract's type first).
struct ContractTerm {
  Expr a, b;
};
struct ContractNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(Contract)
  Domain domain;                  // the kept axes: rows, columns and batch axes
  std::vector<Axis> reduce_axes;  // K, flattened in order
  Access dst;
  std::vector<ContractTerm> terms;
  MmaType type = MmaType::f32;    // T
  Expr scale;                     // of D's axes; undefined: 1
  Expr bias;                      // of D's axes; undefined: 0
  Expr where;                     // points of R where it is false do not contribute
  bool accumulate = false;
  std::vector<std::string> row_axes, column_axes;  // D's axes that a (rows) and b (columns) run along
  // The epilogue, optional: dst (+)= epilogue, an expression of D's axes, of globals, and of `value`,
  // a one-element f32 buffer of the kernel that holds v = scale · Σ + bias at the current point (read
  // as value[0]). Undefined: dst (+)= v. A pointwise consumer absorbed into a whole contraction
  // (h = gelu(c), with c read by nothing else) is this epilogue; rounding to dst's dtype is the
  // store's, as for every statement.
  std::string value;
  Expr epilogue;
  // The paired product, optional (a dual-B GEMM): acc2 = Σ_R Σ_pair_terms round_T(a) · round_T(b) over
  // the same domain, reduce axes, where and T as `terms`, with no scale or bias, held as float32 in
  // `pair_value` (a one-element f32 register buffer, read as pair_value[0]) at the current point, for
  // the epilogue, which a paired contract must have. gated FFN's h = silu(gate) · up with gate = Σ a·wg
  // and up = Σ a·wu: terms a·wu, pair_terms a·wg, epilogue silu(pair_value[0]) · value[0].
  std::vector<ContractTerm> pair_terms;
  std::string pair_value;
};
struct ClusterReduceNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(ClusterReduce)
  ReduceOp op = ReduceOp::sum;
  std::string buffer;
};
struct ClusterGatherNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(ClusterGather)
  std::string src, dst;
};
struct ReduceScatterNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(ReduceScatter)
  ReduceOp op = ReduceOp::sum;
  std::string src, dst;
};
struct DsmShuffleNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(DsmShuffle)
  std::string src, dst;
  int group = 0;  // 0: the whole cluster
};
struct AllExchangeNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(AllExchange)
  bool multiply = false;  // add (false) or mul (true)
  std::string buffer;
  int group = 0;          // 0: the whole cluster
};
struct InterClusterReduceNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(InterClusterReduce)
  ReduceOp op = ReduceOp::sum;
  Domain domain;
  Access dst, src;
};
struct QueuePushNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(QueuePush)
  std::string queue, src;
  Expr tag;
};
struct QueuePopNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(QueuePop)
  std::string queue, dst;
  std::string tag_var;
};
struct BarrierNode final : StmtNode {
  SOLDER_STMT_NODE_HEADER(Barrier)
  bool cluster = false;  // block barrier when false
};
#undef SOLDER_STMT_NODE_HEADER

// Wraps a node built by a pass into a Stmt.
template <class Node>
Stmt make_stmt(Node node) {
  return Stmt(std::make_shared<const Node>(std::move(node)));
}

struct Buffer {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  Scope scope = Scope::shared;
  int depth = 0;  // queues: number of slots
  int64_t elements() const;
  int64_t bytes() const { return elements() * dtype_bytes(dtype); }
};

struct GridDim {
  std::string var;
  int64_t extent = 1;
};

struct Kernel {
  std::string name;
  std::vector<std::string> definitions;  // the Program definitions this kernel computes
  std::vector<GridDim> grid;
  int cluster = 1;     // blocks per cluster
  int threads = 128;   // threads per block (a code generation hint)
  std::vector<Buffer> buffers;
  Block body;

  int64_t blocks() const;
  const Buffer* find_buffer(std::string_view name) const;
};

enum class GlobalRole { input, output, intermediate, scratch };

struct GlobalTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  GlobalRole role = GlobalRole::intermediate;
  int64_t elements() const;
  int64_t bytes() const { return elements() * dtype_bytes(dtype); }
};

struct KernelProgram {
  std::string name;
  std::map<std::string, int64_t> dims;  // dim values, for DimRef nodes in expressions
  std::vector<GlobalTensor> globals;
  std::vector<Kernel> kernels;

  const GlobalTensor* find_global(std::string_view name) const;
};

// Walks statements (and nested bodies) in order.
class StmtVisitor {
 public:
  virtual ~StmtVisitor() = default;
  void visit(const Block& block);
  void visit(const Stmt& stmt);
#define SOLDER_STMT_VISIT_DECL(name) virtual void visit(const name##Node& node);
  SOLDER_STMT_NODES(SOLDER_STMT_VISIT_DECL)
#undef SOLDER_STMT_VISIT_DECL
};

}  // namespace solder
