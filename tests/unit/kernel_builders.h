// Builders for Kernel IR programs in tests: short functions that fill one node each, so that a
// test reads as the program it builds. Shared by the executor and verifier tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder::kernel_builders {

// ---- Expressions and accesses -------------------------------------------------------------------

inline Expr var(const std::string& name) { return make_var(name); }
inline Expr num(int64_t value) { return make_int(value); }
inline Expr real(double value) { return make_const(value); }
inline Expr load(const std::string& tensor, std::vector<Expr> index) { return make_load(tensor, std::move(index)); }
inline Expr binary(BinaryOp op, Expr a, Expr b) { return make_binary(op, std::move(a), std::move(b)); }
inline Expr less(Expr a, Expr b) { return binary(BinaryOp::lt, std::move(a), std::move(b)); }
inline Expr equal(Expr a, Expr b) { return binary(BinaryOp::eq, std::move(a), std::move(b)); }
inline Expr not_equal(Expr a, Expr b) { return binary(BinaryOp::ne, std::move(a), std::move(b)); }
inline Expr mod(Expr a, Expr b) { return binary(BinaryOp::mod, std::move(a), std::move(b)); }
inline Expr floordiv(Expr a, Expr b) { return binary(BinaryOp::floordiv, std::move(a), std::move(b)); }

inline Access at(std::string name, std::vector<Expr> index = {}) { return Access{std::move(name), std::move(index)}; }
inline Domain over(std::vector<Axis> axes, Expr guard = {}) { return Domain{std::move(axes), std::move(guard)}; }

// ---- Statements ---------------------------------------------------------------------------------

inline Stmt loop(std::string v, Expr begin, Expr end, Block body) {
  ForNode n;
  n.var = std::move(v);
  n.begin = std::move(begin);
  n.end = std::move(end);
  n.body = std::move(body);
  return make_stmt(std::move(n));
}
inline Stmt branch(Expr cond, Block then_body, Block else_body = {}) {
  IfNode n;
  n.cond = std::move(cond);
  n.then_body = std::move(then_body);
  n.else_body = std::move(else_body);
  return make_stmt(std::move(n));
}
inline Stmt fill(std::string buffer, double value) {
  FillNode n;
  n.buffer = std::move(buffer);
  n.value = value;
  return make_stmt(std::move(n));
}
inline Stmt copy(Access dst, Access src, Domain domain = {}) {
  CopyNode n;
  n.dst = std::move(dst);
  n.src = std::move(src);
  n.domain = std::move(domain);
  return make_stmt(std::move(n));
}
inline Stmt map(Access dst, Expr value, Domain domain = {}) {
  MapNode n;
  n.dst = std::move(dst);
  n.value = std::move(value);
  n.domain = std::move(domain);
  return make_stmt(std::move(n));
}
inline Stmt reduce_sum(Access dst, Expr value, Domain domain, std::vector<Axis> reduce_axes, bool accumulate) {
  ReduceNode n;
  n.op = ReduceOp::sum;
  n.dst = std::move(dst);
  n.value = std::move(value);
  n.domain = std::move(domain);
  n.reduce_axes = std::move(reduce_axes);
  n.accumulate = accumulate;
  return make_stmt(std::move(n));
}
// c[i, j] (+)= Σ_k a[i, k] · b[k, j] over whole M×N tiles with depth K (a stored [k, i] when trans_a,
// b stored [j, k] when trans_b), operands rounded to `type`.
inline Stmt contract_tiles(std::string c, int64_t M, int64_t N, int64_t K, std::string a, std::string b, bool trans_a = false,
                           bool trans_b = false, bool accumulate = false, MmaType type = MmaType::f32) {
  ContractNode n;
  n.domain = Domain{{{"i", M}, {"j", N}}, Expr()};
  n.reduce_axes = {{"k", K}};
  n.dst = Access{std::move(c), {var("i"), var("j")}};
  Expr x = trans_a ? load(a, {var("k"), var("i")}) : load(a, {var("i"), var("k")});
  Expr y = trans_b ? load(b, {var("j"), var("k")}) : load(b, {var("k"), var("j")});
  n.terms = {ContractTerm{x, y}};
  n.type = type;
  n.accumulate = accumulate;
  n.row_axes = {"i"};
  n.column_axes = {"j"};
  return make_stmt(std::move(n));
}
inline Stmt cluster_reduce(ReduceOp op, std::string buffer) {
  ClusterReduceNode n;
  n.op = op;
  n.buffer = std::move(buffer);
  return make_stmt(std::move(n));
}
inline Stmt cluster_gather(std::string src, std::string dst) {
  ClusterGatherNode n;
  n.src = std::move(src);
  n.dst = std::move(dst);
  return make_stmt(std::move(n));
}
inline Stmt reduce_scatter(ReduceOp op, std::string src, std::string dst) {
  ReduceScatterNode n;
  n.op = op;
  n.src = std::move(src);
  n.dst = std::move(dst);
  return make_stmt(std::move(n));
}
inline Stmt dsm_shuffle(std::string src, std::string dst, int group) {
  DsmShuffleNode n;
  n.src = std::move(src);
  n.dst = std::move(dst);
  n.group = group;
  return make_stmt(std::move(n));
}
inline Stmt all_exchange(bool multiply, std::string buffer, int group) {
  AllExchangeNode n;
  n.multiply = multiply;
  n.buffer = std::move(buffer);
  n.group = group;
  return make_stmt(std::move(n));
}
inline Stmt inter_cluster_reduce(ReduceOp op, Access dst, Access src, Domain domain) {
  InterClusterReduceNode n;
  n.op = op;
  n.dst = std::move(dst);
  n.src = std::move(src);
  n.domain = std::move(domain);
  return make_stmt(std::move(n));
}
inline Stmt queue_push(std::string queue, std::string src, Expr tag) {
  QueuePushNode n;
  n.queue = std::move(queue);
  n.src = std::move(src);
  n.tag = std::move(tag);
  return make_stmt(std::move(n));
}
inline Stmt queue_pop(std::string queue, std::string dst, std::string tag_var) {
  QueuePopNode n;
  n.queue = std::move(queue);
  n.dst = std::move(dst);
  n.tag_var = std::move(tag_var);
  return make_stmt(std::move(n));
}
inline Stmt barrier(bool cluster) {
  BarrierNode n;
  n.cluster = cluster;
  return make_stmt(std::move(n));
}

// ---- Kernels and programs -----------------------------------------------------------------------

inline Buffer buffer(std::string name, std::vector<int64_t> shape, Scope scope, DType dtype = DType::f32, int depth = 0) {
  Buffer b;
  b.name = std::move(name);
  b.shape = std::move(shape);
  b.scope = scope;
  b.dtype = dtype;
  b.depth = depth;
  return b;
}
inline GlobalTensor input(std::string name, std::vector<int64_t> shape, DType dtype = DType::f32) {
  return GlobalTensor{std::move(name), std::move(shape), dtype, GlobalRole::input};
}
inline GlobalTensor output(std::string name, std::vector<int64_t> shape, DType dtype = DType::f32) {
  return GlobalTensor{std::move(name), std::move(shape), dtype, GlobalRole::output};
}
inline GlobalTensor intermediate(std::string name, std::vector<int64_t> shape, DType dtype = DType::f32) {
  return GlobalTensor{std::move(name), std::move(shape), dtype, GlobalRole::intermediate};
}
inline Kernel kernel(std::string name, std::vector<GridDim> grid, int cluster, std::vector<Buffer> buffers, Block body) {
  Kernel k;
  k.name = std::move(name);
  k.grid = std::move(grid);
  k.cluster = cluster;
  k.buffers = std::move(buffers);
  k.body = std::move(body);
  return k;
}

}  // namespace solder::kernel_builders
