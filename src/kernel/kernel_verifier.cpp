#include "kernel/kernel_verifier.h"

#include <algorithm>
#include <set>

#include "ir/printer.h"
#include "ir/expr_visitor.h"
#include "kernel/kernel_printer.h"

namespace solder {
namespace {

class KernelVerifier {
 public:
  KernelVerifier(const KernelProgram& program, std::set<std::string>& written_globals)
      : program_(program), written_globals_(written_globals) {}

  void verify(const Kernel& kernel) {
    kernel_ = &kernel;
    statement_ = 0;
    current_ = nullptr;
    if (kernel.grid.empty()) fail("has no grid dims");
    std::set<std::string> names;
    for (auto& g : kernel.grid) {
      if (g.extent < 1) fail("grid dim '" + g.var + "' has extent " + std::to_string(g.extent));
      if (!names.insert(g.var).second) fail("grid dim '" + g.var + "' appears twice");
    }
    if (kernel.cluster < 1 || kernel.cluster > kMaxClusterSize)
      fail("cluster of " + std::to_string(kernel.cluster) + " blocks; a cluster has 1 to " + std::to_string(kMaxClusterSize) + " blocks");
    if (kernel.cluster > 1 && kernel.grid.back().extent % kernel.cluster != 0)
      fail("cluster of " + std::to_string(kernel.cluster) + " blocks does not divide the last grid dim '" +
           kernel.grid.back().var + "' (" + std::to_string(kernel.grid.back().extent) + ")");
    int64_t shared_bytes = 0;
    for (auto& b : kernel.buffers) {
      if (!names.insert(b.name).second) fail("buffer '" + b.name + "' reuses a name");
      if (program_.find_global(b.name)) fail("buffer '" + b.name + "' has the name of a global tensor");
      for (int64_t s : b.shape) if (s < 1) fail("buffer '" + b.name + "' has a dim of size " + std::to_string(s));
      if (b.scope == Scope::global) fail("buffer '" + b.name + "' has global scope; global tensors belong to the kernel program");
      if (b.scope == Scope::cluster && kernel.cluster == 1) fail("cluster buffer '" + b.name + "' in a kernel without a cluster");
      if (b.scope == Scope::queue && b.depth < 1) fail("queue '" + b.name + "' needs a depth of at least 1");
      if (b.scope == Scope::shared || b.scope == Scope::cluster) shared_bytes += b.bytes();
    }
    if (shared_bytes > kMaxSharedBytesPerBlock)
      fail("needs " + std::to_string(shared_bytes) + " bytes (" + std::to_string((shared_bytes + 1023) / 1024) +
           " KB) of shared memory per block; a block may use at most " + std::to_string(kMaxSharedBytesPerBlock) + " bytes (" +
           std::to_string(kMaxSharedBytesPerBlock / 1024) + " KB)");
    scope_vars_.clear();
    for (auto& g : kernel.grid) scope_vars_.push_back(g.var);
    written_.clear();
    check_block(kernel.body);
  }

 private:
  const KernelProgram& program_;
  std::set<std::string>& written_globals_;
  const Kernel* kernel_ = nullptr;
  int statement_ = 0;
  const StmtNode* current_ = nullptr;
  std::vector<std::string> scope_vars_;
  std::set<std::string> written_;  // buffers definitely written so far

  [[noreturn]] void fail(const std::string& what) const {
    std::string where = "kernel '" + kernel_->name + "'";
    if (current_) where += ", statement " + std::to_string(statement_) + " (" + std::string(stmt_kind_name(current_->kind)) + ")";
    throw Error("Kernel IR verifier: " + where + ": " + what);
  }

  const Buffer* buffer(const std::string& name) const { return kernel_->find_buffer(name); }

  // The shape of a named buffer or global; fails when neither exists.
  std::vector<int64_t> shape_of(const std::string& name) const {
    if (auto b = buffer(name)) return b->shape;
    if (auto g = program_.find_global(name)) return g->shape;
    fail("'" + name + "' is neither a buffer of this kernel nor a global tensor");
  }

  void check_load_ranks(const Expr& e) const {
    struct Walker : ExprVisitor {
      const KernelVerifier* self;
      using ExprVisitor::visit;
      void visit(const LoadNode& load) override {
        auto shape = self->shape_of(load.tensor);
        if (shape.size() != load.index.size())
          self->fail("'" + load.tensor + "' has rank " + std::to_string(shape.size()) + ", loaded with " +
                     std::to_string(load.index.size()) + " indices");
        ExprVisitor::visit(load);
      }
    } walker;
    walker.self = this;
    walker.visit(e);
  }

  // A loop variable, queue tag or domain axis may not reuse the name of a variable in scope.
  void check_fresh(const std::string& var) const {
    if (std::find(scope_vars_.begin(), scope_vars_.end(), var) != scope_vars_.end())
      fail("variable '" + var + "' is already in scope (a grid, loop or tag variable); use another name");
  }
  void check_fresh(const std::vector<Axis>& axes) const {
    for (auto& a : axes) check_fresh(a.var);
  }

  void check_vars(const Expr& e, const std::vector<std::string>& extra) const {
    if (!e) return;
    check_load_ranks(e);
    for (auto& v : vars_used(e)) {
      bool known = std::find(scope_vars_.begin(), scope_vars_.end(), v) != scope_vars_.end() ||
                   std::find(extra.begin(), extra.end(), v) != extra.end();
      if (!known) fail("variable '" + v + "' is not in scope in '" + print_expr(e) + "'");
    }
    for (auto& t : tensors_used(e)) note_read(t);
  }

  void note_read(const std::string& name) const {
    if (auto b = buffer(name)) {
      if (b->scope == Scope::queue) fail("queue '" + name + "' is read directly; use queue_pop");
      if (!written_.count(name)) fail("buffer '" + name + "' is read before it is written");
      return;
    }
    auto g = program_.find_global(name);
    if (!g) fail("'" + name + "' is neither a buffer of this kernel nor a global tensor");
    if (g->role != GlobalRole::input && !written_globals_.count(name))
      fail("global '" + name + "' is read before any kernel writes it");
  }

  void note_write(const std::string& name) {
    if (auto b = buffer(name)) {
      if (b->scope == Scope::queue) fail("queue '" + name + "' is written directly; use queue_push");
      written_.insert(name);
      return;
    }
    auto g = program_.find_global(name);
    if (!g) fail("'" + name + "' is neither a buffer of this kernel nor a global tensor");
    if (g->role == GlobalRole::input) fail("writes the input '" + name + "'");
    written_globals_.insert(name);
  }

  void check_access(const Access& a, const std::vector<std::string>& extra) const {
    auto shape = shape_of(a.name);
    if (shape.size() != a.index.size())
      fail("'" + a.name + "' has rank " + std::to_string(shape.size()) + ", accessed with " + std::to_string(a.index.size()) + " indices");
    for (auto& i : a.index) check_vars(i, extra);
  }

  static std::vector<std::string> axis_vars(const std::vector<Axis>& axes) {
    std::vector<std::string> v;
    for (auto& a : axes) v.push_back(a.var);
    return v;
  }

  const Buffer& require_buffer(const std::string& name, std::initializer_list<Scope> scopes, const std::string& role) const {
    const Buffer* b = buffer(name);
    if (!b) fail(role + " '" + name + "' is not a buffer of this kernel");
    if (std::find(scopes.begin(), scopes.end(), b->scope) == scopes.end()) {
      std::string allowed;
      for (Scope s : scopes) allowed += (allowed.empty() ? "" : " or ") + std::string(scope_name(s));
      fail(role + " '" + name + "' must be a " + allowed + " buffer, found " + std::string(scope_name(b->scope)));
    }
    return *b;
  }

  void require_cluster() const {
    if (kernel_->cluster == 1) fail("collectives need a clustered kernel; this kernel has no cluster");
  }

  void check_group(int group) const {
    if (group < 0 || (group > 0 && kernel_->cluster % group != 0))
      fail("group of " + std::to_string(group) + " does not divide the cluster of " + std::to_string(kernel_->cluster));
  }

  // Variables a body binds (loop variables, queue tags) go out of scope at its end.
  void check_block(const Block& block) {
    size_t scope_size = scope_vars_.size();
    for (auto& s : block) check_stmt(s);
    scope_vars_.resize(scope_size);
  }

  void check_stmt(const Stmt& s) {
    ++statement_;
    current_ = s.get();
    switch (s.kind()) {
      case StmtKind::For: {
        auto n = s.as<ForNode>();
        check_vars(n->begin, {});
        check_vars(n->end, {});
        check_fresh(n->var);
        scope_vars_.push_back(n->var);
        check_block(n->body);
        scope_vars_.pop_back();
        return;
      }
      case StmtKind::If: {
        auto n = s.as<IfNode>();
        check_vars(n->cond, {});
        auto before = written_;
        check_block(n->then_body);
        auto after_then = written_;
        written_ = before;
        check_block(n->else_body);
        std::set<std::string> both;
        for (auto& w : written_) if (after_then.count(w)) both.insert(w);
        written_ = both;
        return;
      }
      case StmtKind::Fill: {
        require_buffer(s.as<FillNode>()->buffer, {Scope::register_file, Scope::shared, Scope::cluster}, "fill target");
        note_write(s.as<FillNode>()->buffer);
        return;
      }
      case StmtKind::Copy: {
        auto n = s.as<CopyNode>();
        check_fresh(n->domain.axes);
        auto axes = axis_vars(n->domain.axes);
        check_vars(n->domain.guard, axes);
        check_access(n->src, axes);
        note_read(n->src.name);
        check_access(n->dst, axes);
        note_write(n->dst.name);
        return;
      }
      case StmtKind::Map: {
        auto n = s.as<MapNode>();
        check_fresh(n->domain.axes);
        auto axes = axis_vars(n->domain.axes);
        check_vars(n->domain.guard, axes);
        check_vars(n->value, axes);
        check_access(n->dst, axes);
        note_write(n->dst.name);
        return;
      }
      case StmtKind::Reduce: {
        auto n = s.as<ReduceNode>();
        check_fresh(n->domain.axes);
        check_fresh(n->reduce_axes);
        auto axes = axis_vars(n->domain.axes);
        auto all = axes;
        for (auto& a : n->reduce_axes) all.push_back(a.var);
        if (n->reduce_axes.empty()) fail("reduce has no reduce axes");
        check_vars(n->domain.guard, axes);
        check_vars(n->where, all);
        check_vars(n->value, all);
        auto dst_axes = axes;
        if (n->op == ReduceOp::topk) {
          if (n->k < 1) fail("topk needs k of at least 1");
          dst_axes.push_back(n->rank_var);
        }
        if (n->accumulate) note_read(n->dst.name);
        check_access(n->dst, dst_axes);
        note_write(n->dst.name);
        bool wants_index = n->op == ReduceOp::argmax || n->op == ReduceOp::argmin;
        if (wants_index && n->index_dst.name.empty()) fail(std::string(reduce_op_name(n->op)) + " needs an index destination");
        if (n->op == ReduceOp::none) fail("reduce with op none");
        if (!n->index_dst.name.empty()) {
          check_vars(n->index_value, all);
          if (n->accumulate) note_read(n->index_dst.name);
          check_access(n->index_dst, dst_axes);
          note_write(n->index_dst.name);
        }
        return;
      }
      case StmtKind::Contract: {
        auto n = s.as<ContractNode>();
        check_fresh(n->domain.axes);
        check_fresh(n->reduce_axes);
        auto axes = axis_vars(n->domain.axes);
        auto all = axes;
        for (auto& a : n->reduce_axes) all.push_back(a.var);
        if (n->reduce_axes.empty()) fail("contract has no reduce axes");
        if (n->terms.empty()) fail("contract has no product terms");
        check_vars(n->domain.guard, axes);
        check_vars(n->where, all);
        check_vars(n->scale, axes);
        check_vars(n->bias, axes);
        // Rows and columns are distinct axes of the domain; a reads no column axis, b no row axis.
        std::set<std::string> rows(n->row_axes.begin(), n->row_axes.end()), columns(n->column_axes.begin(), n->column_axes.end());
        for (auto& r : n->row_axes) {
          if (std::find(axes.begin(), axes.end(), r) == axes.end()) fail("row axis '" + r + "' is not an axis of the domain");
          if (columns.count(r)) fail("axis '" + r + "' is both a row and a column axis");
        }
        for (auto& c : n->column_axes)
          if (std::find(axes.begin(), axes.end(), c) == axes.end()) fail("column axis '" + c + "' is not an axis of the domain");
        for (auto& term : n->terms) {
          check_vars(term.a, all);
          check_vars(term.b, all);
          for (auto& v : vars_used(term.a))
            if (columns.count(v)) fail("operand a '" + print_expr(term.a) + "' uses the column axis '" + v + "'");
          for (auto& v : vars_used(term.b))
            if (rows.count(v)) fail("operand b '" + print_expr(term.b) + "' uses the row axis '" + v + "'");
        }
        if (!n->pair_terms.empty()) {
          // The paired product: the same operand rules; its value is read by the epilogue only.
          if (!n->epilogue) fail("a paired contract has no epilogue to read its pair value");
          if (n->pair_value == n->value) fail("a paired contract's pair value '" + n->pair_value + "' is also its value");
          const Buffer& pair = require_buffer(n->pair_value, {Scope::register_file}, "contract pair value");
          if (pair.elements() != 1 || pair.dtype != DType::f32) fail("contract pair value '" + n->pair_value + "' is not one f32 element");
          note_write(n->pair_value);
          for (auto& term : n->pair_terms) {
            check_vars(term.a, all);
            check_vars(term.b, all);
            for (auto& v : vars_used(term.a))
              if (columns.count(v)) fail("paired operand a '" + print_expr(term.a) + "' uses the column axis '" + v + "'");
            for (auto& v : vars_used(term.b))
              if (rows.count(v)) fail("paired operand b '" + print_expr(term.b) + "' uses the row axis '" + v + "'");
          }
        } else if (!n->pair_value.empty()) {
          fail("contract names a pair value '" + n->pair_value + "' but has no paired terms");
        }
        if (n->epilogue) {
          const Buffer& value = require_buffer(n->value, {Scope::register_file}, "contract epilogue value");
          if (value.elements() != 1 || value.dtype != DType::f32) fail("contract epilogue value '" + n->value + "' is not one f32 element");
          note_write(n->value);
          check_vars(n->epilogue, axes);
        } else if (!n->value.empty()) {
          fail("contract names an epilogue value '" + n->value + "' but has no epilogue");
        }
        if (n->accumulate) note_read(n->dst.name);
        check_access(n->dst, axes);
        note_write(n->dst.name);
        return;
      }
      case StmtKind::ClusterReduce: {
        auto n = s.as<ClusterReduceNode>();
        require_cluster();
        if (n->op != ReduceOp::sum && n->op != ReduceOp::max && n->op != ReduceOp::min) fail("cluster_reduce supports sum, max and min");
        require_buffer(n->buffer, {Scope::cluster}, "cluster_reduce buffer");
        note_read(n->buffer);
        note_write(n->buffer);
        return;
      }
      case StmtKind::ClusterGather: {
        auto n = s.as<ClusterGatherNode>();
        require_cluster();
        const Buffer& src = require_buffer(n->src, {Scope::cluster}, "cluster_gather source");
        const Buffer& dst = require_buffer(n->dst, {Scope::cluster, Scope::shared}, "cluster_gather destination");
        if (dst.elements() != src.elements() * kernel_->cluster)
          fail("cluster_gather destination holds " + std::to_string(dst.elements()) + " elements; expected cluster size × source = " +
               std::to_string(src.elements() * kernel_->cluster));
        note_read(n->src);
        note_write(n->dst);
        return;
      }
      case StmtKind::ReduceScatter: {
        auto n = s.as<ReduceScatterNode>();
        require_cluster();
        if (n->op != ReduceOp::sum && n->op != ReduceOp::max && n->op != ReduceOp::min) fail("reduce_scatter supports sum, max and min");
        const Buffer& src = require_buffer(n->src, {Scope::cluster}, "reduce_scatter source");
        const Buffer& dst = require_buffer(n->dst, {Scope::cluster, Scope::shared}, "reduce_scatter destination");
        if (src.elements() != dst.elements() * kernel_->cluster)
          fail("reduce_scatter source holds " + std::to_string(src.elements()) + " elements; expected cluster size × destination = " +
               std::to_string(dst.elements() * kernel_->cluster));
        note_read(n->src);
        note_write(n->dst);
        return;
      }
      case StmtKind::DsmShuffle: {
        auto n = s.as<DsmShuffleNode>();
        require_cluster();
        check_group(n->group);
        const Buffer& src = require_buffer(n->src, {Scope::cluster}, "dsm_shuffle source");
        const Buffer& dst = require_buffer(n->dst, {Scope::cluster, Scope::shared}, "dsm_shuffle destination");
        if (src.elements() != dst.elements()) fail("dsm_shuffle source and destination differ in size");
        note_read(n->src);
        note_write(n->dst);
        return;
      }
      case StmtKind::AllExchange: {
        auto n = s.as<AllExchangeNode>();
        require_cluster();
        check_group(n->group);
        require_buffer(n->buffer, {Scope::cluster}, "all_exchange buffer");
        note_read(n->buffer);
        note_write(n->buffer);
        return;
      }
      case StmtKind::InterClusterReduce: {
        auto n = s.as<InterClusterReduceNode>();
        check_fresh(n->domain.axes);
        if (n->op != ReduceOp::sum && n->op != ReduceOp::max && n->op != ReduceOp::min) fail("inter_cluster_reduce supports sum, max and min");
        auto axes = axis_vars(n->domain.axes);
        check_vars(n->domain.guard, axes);
        check_access(n->src, axes);
        note_read(n->src.name);
        if (!program_.find_global(n->dst.name)) fail("inter_cluster_reduce must target a global tensor, found '" + n->dst.name + "'");
        check_access(n->dst, axes);
        // The destination's earlier contents are combined into: it must hold the identity or data.
        note_read(n->dst.name);
        note_write(n->dst.name);
        return;
      }
      case StmtKind::QueuePush: {
        auto n = s.as<QueuePushNode>();
        const Buffer& q = require_buffer(n->queue, {Scope::queue}, "queue");
        const Buffer& src = require_buffer(n->src, {Scope::register_file, Scope::shared, Scope::cluster}, "queue_push source");
        if (src.shape != q.shape) fail("queue_push source '" + n->src + "' does not have the queue's tile shape");
        check_vars(n->tag, {});
        note_read(n->src);
        return;
      }
      case StmtKind::QueuePop: {
        auto n = s.as<QueuePopNode>();
        const Buffer& q = require_buffer(n->queue, {Scope::queue}, "queue");
        const Buffer& dst = require_buffer(n->dst, {Scope::register_file, Scope::shared, Scope::cluster}, "queue_pop destination");
        if (dst.shape != q.shape) fail("queue_pop destination '" + n->dst + "' does not have the queue's tile shape");
        note_write(n->dst);
        check_fresh(n->tag_var);
        scope_vars_.push_back(n->tag_var);  // visible to the rest of the enclosing body
        return;
      }
      case StmtKind::Barrier: {
        if (s.as<BarrierNode>()->cluster) require_cluster();
        return;
      }
    }
  }
};

}  // namespace

void verify_kernel_program(const KernelProgram& program) {
  std::set<std::string> names;
  for (auto& g : program.globals)
    if (!names.insert(g.name).second) throw Error("Kernel IR verifier: global '" + g.name + "' is declared twice");
  std::set<std::string> kernel_names;
  std::set<std::string> written;
  for (auto& k : program.kernels) {
    if (!kernel_names.insert(k.name).second) throw Error("Kernel IR verifier: two kernels are named '" + k.name + "'");
    KernelVerifier(program, written).verify(k);
  }
  for (auto& g : program.globals)
    if (g.role == GlobalRole::output && !written.count(g.name))
      throw Error("Kernel IR verifier: output '" + g.name + "' is never written");
}

}  // namespace solder
