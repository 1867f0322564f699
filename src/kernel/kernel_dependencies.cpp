#include "kernel/kernel_dependencies.h"

#include <algorithm>
#include <optional>

#include "ir/expr_visitor.h"

namespace solder {
namespace {

// Every tensor an expression loads.
class LoadedNames : public ExprVisitor {
 public:
  explicit LoadedNames(std::set<std::string>& names) : names_(names) {}
  using ExprVisitor::visit;
  void visit(const LoadNode& node) override {
    names_.insert(node.tensor);
    ExprVisitor::visit(node);
  }

 private:
  std::set<std::string>& names_;
};

// The names a kernel's statements load and store (buffers and globals alike).
class Accesses : public StmtVisitor {
 public:
  std::set<std::string> loaded, stored;
  bool queue = false;
  using StmtVisitor::visit;

  void visit(const ForNode& n) override {
    expr(n.begin);
    expr(n.end);
    StmtVisitor::visit(n);
  }
  void visit(const IfNode& n) override {
    expr(n.cond);
    StmtVisitor::visit(n);
  }
  void visit(const FillNode& n) override { stored.insert(n.buffer); }
  void visit(const CopyNode& n) override {
    domain(n.domain);
    store(n.dst);
    load(n.src);
  }
  void visit(const MapNode& n) override {
    domain(n.domain);
    store(n.dst);
    expr(n.value);
  }
  void visit(const ReduceNode& n) override {
    domain(n.domain);
    store(n.dst);
    if (!n.index_dst.name.empty()) store(n.index_dst);
    expr(n.value);
    expr(n.where);
    expr(n.index_value);
    if (n.accumulate) loaded.insert(n.dst.name);
  }
  void visit(const ContractNode& n) override {
    domain(n.domain);
    store(n.dst);
    for (auto* terms : {&n.terms, &n.pair_terms})
      for (auto& t : *terms) {
        expr(t.a);
        expr(t.b);
      }
    expr(n.scale);
    expr(n.bias);
    expr(n.where);
    expr(n.epilogue);
    if (n.accumulate) loaded.insert(n.dst.name);
  }
  void visit(const InterClusterReduceNode& n) override {
    domain(n.domain);
    store(n.dst);
    load(n.src);
    loaded.insert(n.dst.name);  // combined atomically with its current value
  }
  void visit(const QueuePushNode& n) override {
    queue = true;
    expr(n.tag);
  }
  void visit(const QueuePopNode&) override { queue = true; }

 private:
  void expr(const Expr& e) {
    if (!e) return;
    LoadedNames names(loaded);
    names.visit(e);
  }
  void indices(const Access& a) {
    for (auto& i : a.index) expr(i);
  }
  void store(const Access& a) {
    stored.insert(a.name);
    indices(a);
  }
  void load(const Access& a) {
    loaded.insert(a.name);
    indices(a);
  }
  void domain(const Domain& d) { expr(d.guard); }
};

bool intersects(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (auto& name : a)
    if (b.count(name)) return true;
  return false;
}

}  // namespace

GlobalUse global_use(const KernelProgram& program, const Kernel& kernel) {
  Accesses accesses;
  accesses.visit(kernel.body);
  auto global = [&](const std::string& name) { return !kernel.find_buffer(name) && program.find_global(name); };
  GlobalUse use;
  for (auto& name : accesses.loaded)
    if (global(name)) use.reads.insert(name);
  for (auto& name : accesses.stored)
    if (global(name)) use.writes.insert(name);
  use.exclusive = accesses.queue;
  for (auto& b : kernel.buffers) use.exclusive = use.exclusive || b.scope == Scope::queue;
  return use;
}

std::vector<std::vector<size_t>> kernel_dependencies(const std::vector<GlobalUse>& launches) {
  std::vector<std::vector<size_t>> dependencies(launches.size());
  for (size_t k = 0; k < launches.size(); ++k)
    for (size_t j = 0; j < k; ++j) {
      const GlobalUse &before = launches[j], &after = launches[k];
      if (before.exclusive || after.exclusive || intersects(before.writes, after.reads) ||
          intersects(before.writes, after.writes) || intersects(before.reads, after.writes))
        dependencies[k].push_back(j);
    }
  return dependencies;
}

LaunchSchedule schedule_launches(const std::vector<std::vector<size_t>>& dependencies, int max_streams) {
  const size_t n = dependencies.size();
  // ancestors[k]: every launch k waits for, directly or through others.
  std::vector<std::vector<bool>> ancestors(n, std::vector<bool>(n, false));
  for (size_t k = 0; k < n; ++k)
    for (size_t d : dependencies[k]) {
      ancestors[k][d] = true;
      for (size_t a = 0; a < d; ++a)
        if (ancestors[d][a]) ancestors[k][a] = true;
    }
  LaunchSchedule schedule;
  schedule.steps.resize(n);
  std::vector<std::optional<size_t>> last;  // per stream used so far: its last launch
  const int limit = std::max(1, max_streams);
  for (size_t k = 0; k < n; ++k) {
    // The stream to follow: the latest dependency that ends a stream, else an ancestor that does.
    int chosen = -1;
    for (int s = 0; s < static_cast<int>(last.size()); ++s)
      if (last[s] && ancestors[k][*last[s]] && (chosen < 0 || *last[s] > *last[chosen])) chosen = s;
    if (chosen < 0 && static_cast<int>(last.size()) < limit) {
      chosen = static_cast<int>(last.size());
      last.emplace_back();
    }
    if (chosen < 0) {
      chosen = 0;
      for (int s = 1; s < static_cast<int>(last.size()); ++s)
        if (*last[s] < *last[chosen]) chosen = s;
    }
    LaunchStep& step = schedule.steps[k];
    step.stream = chosen;
    // Wait for each dependency the stream's order does not already imply (queued on the same stream, or
    // an ancestor of the stream's last launch).
    for (size_t d : dependencies[k]) {
      const std::optional<size_t>& before = last[chosen];
      if (schedule.steps[d].stream == chosen || (before && ancestors[*before][d])) continue;
      step.waits.push_back(d);
    }
    last[chosen] = k;
  }
  schedule.streams = std::max<int>(1, static_cast<int>(last.size()));
  return schedule;
}

}  // namespace solder
