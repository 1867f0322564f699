#include "contract/grouped_axes.h"

#include <algorithm>
#include <cstdlib>

#include "ir/expr_visitor.h"

namespace solder {
namespace {

// The divisor of `e` = h // G when h is the variable `var` and G an integer or a bound dim; 0 otherwise.
int64_t group_of(const Expr& e, const std::string& var, const std::map<std::string, int64_t>& dims) {
  auto b = e.as<BinaryNode>();
  if (!b || b->op != BinaryOp::floordiv) return 0;
  auto v = b->lhs.as<VarNode>();
  if (!v || v->name != var) return 0;
  if (auto c = b->rhs.as<ConstNode>(); c && c->is_integer) return static_cast<int64_t>(c->value);
  if (auto d = b->rhs.as<DimRefNode>()) {
    auto it = dims.find(d->name);
    return it == dims.end() ? 0 : it->second;
  }
  return 0;
}

// Every h // G of one variable replaced by `by`; `groups` collects the G seen.
class ReplaceGroups : public ExprMutator {
 public:
  ReplaceGroups(const std::string& var, const std::map<std::string, int64_t>& dims, Expr by) : var_(var), dims_(dims), by_(std::move(by)) {}
  std::vector<int64_t> groups;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const BinaryNode& node, const Expr& self) override {
    if (int64_t g = group_of(self, var_, dims_)) {
      groups.push_back(g);
      return by_;
    }
    return ExprMutator::mutate(node, self);
  }

 private:
  const std::string& var_;
  const std::map<std::string, int64_t>& dims_;
  Expr by_;
};

}  // namespace

bool grouped_axes_enabled() {
  const char* v = std::getenv("SOLDER_GROUPED_AXES");
  return v && std::string(v) == "1";
}

std::optional<ReduceNode> split_grouped_axis(const ReduceNode& r, const std::map<std::string, int64_t>& dims) {
  if (!r.value) return std::nullopt;
  auto taken = [&](const std::string& name) {
    for (auto& a : r.domain.axes)
      if (a.var == name) return true;
    for (auto& a : r.reduce_axes)
      if (a.var == name) return true;
    return false;
  };
  for (size_t i = 0; i < r.domain.axes.size(); ++i) {
    const Axis& h = r.domain.axes[i];
    if (!r.dst.index.empty() && i + 1 == r.domain.axes.size()) continue;
    const std::string kv = h.var + "_kv", g = h.var + "_g";
    if (taken(kv) || taken(g)) continue;
    ReplaceGroups groups(h.var, dims, make_var(kv));
    Expr value = groups.mutate(r.value);
    if (groups.groups.empty()) continue;
    const int64_t group = groups.groups.front();
    if (group <= 1 || h.extent % group != 0 ||
        std::any_of(groups.groups.begin(), groups.groups.end(), [&](int64_t x) { return x != group; }))
      continue;
    if (r.where) {
      ReplaceGroups in_where(h.var, dims, make_var(kv));
      if (!structurally_equal(in_where.mutate(r.where), r.where)) continue;
    }
    const std::map<std::string, Expr> at = {
        {h.var, make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var(kv), make_int(group)), make_var(g))}};
    ReduceNode out = r;
    out.value = substitute_vars(value, at);
    if (r.where) out.where = substitute_vars(r.where, at);
    for (auto& index : out.dst.index) index = substitute_vars(index, at);
    out.domain.axes.erase(out.domain.axes.begin() + static_cast<long>(i));
    out.domain.axes.insert(out.domain.axes.begin() + static_cast<long>(i), {Axis{kv, h.extent / group}, Axis{g, group}});
    if (out.domain.guard) out.domain.guard = substitute_vars(out.domain.guard, at);
    return out;
  }
  return std::nullopt;
}

}  // namespace solder
