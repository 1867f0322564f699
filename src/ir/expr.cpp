#include "ir/expr.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ir/expr_depth.h"
#include "ir/expr_visitor.h"

namespace solder {

// ---- Builders -------------------------------------------------------------------------------

Expr make_const(double value, SourceLoc loc) {
  return Expr(std::make_shared<ConstNode>(value, false, loc));
}
Expr make_int(int64_t value, SourceLoc loc) {
  return Expr(std::make_shared<ConstNode>(static_cast<double>(value), true, loc));
}
Expr make_var(std::string name, SourceLoc loc) {
  return Expr(std::make_shared<VarNode>(std::move(name), loc));
}
Expr make_dim(std::string name, SourceLoc loc) {
  return Expr(std::make_shared<DimRefNode>(std::move(name), loc));
}
Expr make_load(std::string tensor, std::vector<Expr> index, SourceLoc loc) {
  return Expr(std::make_shared<LoadNode>(std::move(tensor), std::move(index), loc));
}
Expr make_unary(UnaryOp op, Expr operand, SourceLoc loc) {
  return Expr(std::make_shared<UnaryNode>(op, std::move(operand), loc));
}
Expr make_binary(BinaryOp op, Expr lhs, Expr rhs, SourceLoc loc) {
  return Expr(std::make_shared<BinaryNode>(op, std::move(lhs), std::move(rhs), loc));
}
Expr make_select(Expr cond, Expr if_true, Expr if_false, SourceLoc loc) {
  return Expr(std::make_shared<SelectNode>(std::move(cond), std::move(if_true), std::move(if_false), loc));
}
Expr make_cast(DType dtype, Expr operand, SourceLoc loc) {
  return Expr(std::make_shared<CastNode>(dtype, std::move(operand), loc));
}

Expr operator+(Expr a, Expr b) { return make_binary(BinaryOp::add, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return make_binary(BinaryOp::sub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return make_binary(BinaryOp::mul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return make_binary(BinaryOp::div, std::move(a), std::move(b)); }
Expr operator-(Expr a) { return make_unary(UnaryOp::neg, std::move(a)); }

// ---- Operator tables ------------------------------------------------------------------------

namespace {
struct UnaryInfo { UnaryOp op; std::string_view name; bool function_style; };
constexpr UnaryInfo kUnary[] = {
    {UnaryOp::neg, "neg", false},       {UnaryOp::logical_not, "not", false},
    {UnaryOp::exp, "exp", true},        {UnaryOp::log, "log", true},
    {UnaryOp::tanh, "tanh", true},      {UnaryOp::sqrt, "sqrt", true},
    {UnaryOp::rsqrt, "rsqrt", true},    {UnaryOp::abs, "abs", true},
    {UnaryOp::sigmoid, "sigmoid", true}, {UnaryOp::silu, "silu", true},
    {UnaryOp::gelu, "gelu", true},
    {UnaryOp::sin, "sin", true},        {UnaryOp::cos, "cos", true},
    {UnaryOp::tan, "tan", true},        {UnaryOp::erf, "erf", true},
    {UnaryOp::exp2, "exp2", true},      {UnaryOp::log2, "log2", true},
    {UnaryOp::log1p, "log1p", true},    {UnaryOp::expm1, "expm1", true},
    {UnaryOp::floor, "floor", true},    {UnaryOp::ceil, "ceil", true},
    {UnaryOp::round, "round", true},    {UnaryOp::round_tf32, "round_tf32", true},
};
struct BinaryInfo { BinaryOp op; std::string_view symbol; bool function_style; int precedence; };
constexpr BinaryInfo kBinary[] = {
    {BinaryOp::add, "+", false, 4},   {BinaryOp::sub, "-", false, 4},
    {BinaryOp::mul, "*", false, 5},   {BinaryOp::div, "/", false, 5},
    {BinaryOp::floordiv, "//", false, 5}, {BinaryOp::mod, "%", false, 5},
    {BinaryOp::max, "max", true, 0},  {BinaryOp::min, "min", true, 0},
    {BinaryOp::pow, "pow", true, 0},
    {BinaryOp::lt, "<", false, 3},    {BinaryOp::le, "<=", false, 3},
    {BinaryOp::gt, ">", false, 3},    {BinaryOp::ge, ">=", false, 3},
    {BinaryOp::eq, "==", false, 3},   {BinaryOp::ne, "!=", false, 3},
    {BinaryOp::logical_and, "&&", false, 2}, {BinaryOp::logical_or, "||", false, 1},
};
const UnaryInfo& info(UnaryOp op) {
  return *std::find_if(std::begin(kUnary), std::end(kUnary), [&](auto& i) { return i.op == op; });
}
const BinaryInfo& info(BinaryOp op) {
  return *std::find_if(std::begin(kBinary), std::end(kBinary), [&](auto& i) { return i.op == op; });
}
}  // namespace

std::string_view unary_op_name(UnaryOp op) { return info(op).name; }
bool is_function_style(UnaryOp op) { return info(op).function_style; }
std::optional<UnaryOp> unary_function(std::string_view name) {
  for (auto& i : kUnary) if (i.function_style && i.name == name) return i.op;
  return std::nullopt;
}
std::string_view binary_op_symbol(BinaryOp op) { return info(op).symbol; }
bool is_function_style(BinaryOp op) { return info(op).function_style; }
std::optional<BinaryOp> binary_function(std::string_view name) {
  for (auto& i : kBinary) if (i.function_style && i.symbol == name) return i.op;
  return std::nullopt;
}
bool is_comparison(BinaryOp op) { return info(op).precedence == 3; }
bool is_logical(BinaryOp op) { return op == BinaryOp::logical_and || op == BinaryOp::logical_or; }
int binary_precedence(BinaryOp op) { return info(op).precedence; }

// ---- Visitor and mutator --------------------------------------------------------------------

void ExprVisitor::visit(const Expr& e) {
  if (!e) return;
  switch (e.kind()) {
#define SOLDER_DISPATCH(name) \
  case ExprKind::name: visit(*e.as<name##Node>()); return;
    SOLDER_EXPR_NODES(SOLDER_DISPATCH)
#undef SOLDER_DISPATCH
  }
}
void ExprVisitor::visit(const ConstNode&) {}
void ExprVisitor::visit(const VarNode&) {}
void ExprVisitor::visit(const DimRefNode&) {}
void ExprVisitor::visit(const LoadNode& n) { for (auto& i : n.index) visit(i); }
void ExprVisitor::visit(const UnaryNode& n) { visit(n.operand); }
void ExprVisitor::visit(const BinaryNode& n) { visit(n.lhs); visit(n.rhs); }
void ExprVisitor::visit(const SelectNode& n) { visit(n.cond); visit(n.if_true); visit(n.if_false); }
void ExprVisitor::visit(const CastNode& n) { visit(n.operand); }

Expr ExprMutator::mutate(const Expr& e) {
  if (!e) return e;
  switch (e.kind()) {
#define SOLDER_DISPATCH(name) \
  case ExprKind::name: return mutate(*e.as<name##Node>(), e);
    SOLDER_EXPR_NODES(SOLDER_DISPATCH)
#undef SOLDER_DISPATCH
  }
  return e;
}
Expr ExprMutator::mutate(const ConstNode&, const Expr& self) { return self; }
Expr ExprMutator::mutate(const VarNode&, const Expr& self) { return self; }
Expr ExprMutator::mutate(const DimRefNode&, const Expr& self) { return self; }
Expr ExprMutator::mutate(const LoadNode& n, const Expr& self) {
  std::vector<Expr> index;
  bool changed = false;
  for (auto& i : n.index) {
    index.push_back(mutate(i));
    changed |= !index.back().same_node(i);
  }
  return changed ? make_load(n.tensor, std::move(index), n.loc) : self;
}
Expr ExprMutator::mutate(const UnaryNode& n, const Expr& self) {
  Expr a = mutate(n.operand);
  return a.same_node(n.operand) ? self : make_unary(n.op, a, n.loc);
}
Expr ExprMutator::mutate(const BinaryNode& n, const Expr& self) {
  Expr a = mutate(n.lhs), b = mutate(n.rhs);
  return a.same_node(n.lhs) && b.same_node(n.rhs) ? self : make_binary(n.op, a, b, n.loc);
}
Expr ExprMutator::mutate(const SelectNode& n, const Expr& self) {
  Expr c = mutate(n.cond), t = mutate(n.if_true), f = mutate(n.if_false);
  return c.same_node(n.cond) && t.same_node(n.if_true) && f.same_node(n.if_false)
             ? self
             : make_select(c, t, f, n.loc);
}
Expr ExprMutator::mutate(const CastNode& n, const Expr& self) {
  Expr a = mutate(n.operand);
  return a.same_node(n.operand) ? self : make_cast(n.dtype, a, n.loc);
}

// ---- Structure ----

SourceLoc start_loc(const Expr& e) {
  if (auto b = e.as<BinaryNode>(); b && !is_function_style(b->op)) {
    SourceLoc left = start_loc(b->lhs);
    return left.known() ? left : b->loc;
  }
  return e.loc();
}

bool structurally_equal(const Expr& a, const Expr& b) {
  if (a.same_node(b)) return true;
  if (!a || !b || a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ExprKind::Const: {
      auto x = a.as<ConstNode>(), y = b.as<ConstNode>();
      bool both_nan = std::isnan(x->value) && std::isnan(y->value);
      return x->is_integer == y->is_integer && (x->value == y->value || both_nan);
    }
    case ExprKind::Var: return a.as<VarNode>()->name == b.as<VarNode>()->name;
    case ExprKind::DimRef: return a.as<DimRefNode>()->name == b.as<DimRefNode>()->name;
    case ExprKind::Load: {
      auto x = a.as<LoadNode>(), y = b.as<LoadNode>();
      if (x->tensor != y->tensor || x->index.size() != y->index.size()) return false;
      for (size_t i = 0; i < x->index.size(); ++i)
        if (!structurally_equal(x->index[i], y->index[i])) return false;
      return true;
    }
    case ExprKind::Unary: {
      auto x = a.as<UnaryNode>(), y = b.as<UnaryNode>();
      return x->op == y->op && structurally_equal(x->operand, y->operand);
    }
    case ExprKind::Binary: {
      auto x = a.as<BinaryNode>(), y = b.as<BinaryNode>();
      return x->op == y->op && structurally_equal(x->lhs, y->lhs) && structurally_equal(x->rhs, y->rhs);
    }
    case ExprKind::Select: {
      auto x = a.as<SelectNode>(), y = b.as<SelectNode>();
      return structurally_equal(x->cond, y->cond) && structurally_equal(x->if_true, y->if_true) &&
             structurally_equal(x->if_false, y->if_false);
    }
    case ExprKind::Cast: {
      auto x = a.as<CastNode>(), y = b.as<CastNode>();
      return x->dtype == y->dtype && structurally_equal(x->operand, y->operand);
    }
  }
  return false;
}

namespace {
class NameCollector : public ExprVisitor {
 public:
  bool want_vars;
  std::vector<std::string> names;
  explicit NameCollector(bool vars) : want_vars(vars) {}
  void add(const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  using ExprVisitor::visit;
  void visit(const VarNode& n) override { if (want_vars) add(n.name); }
  void visit(const LoadNode& n) override {
    if (!want_vars) add(n.tensor);
    ExprVisitor::visit(n);
  }
};
}  // namespace

std::vector<std::string> vars_used(const Expr& e) {
  NameCollector c(true);
  c.visit(e);
  return c.names;
}
std::vector<std::string> tensors_used(const Expr& e) {
  NameCollector c(false);
  c.visit(e);
  return c.names;
}
bool uses_var(const Expr& e, std::string_view name) {
  auto v = vars_used(e);
  return std::find(v.begin(), v.end(), name) != v.end();
}
bool uses_tensor(const Expr& e, std::string_view name) {
  auto t = tensors_used(e);
  return std::find(t.begin(), t.end(), name) != t.end();
}

std::vector<Expr> children(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Const:
    case ExprKind::Var:
    case ExprKind::DimRef: return {};
    case ExprKind::Load: return e.as<LoadNode>()->index;
    case ExprKind::Unary: return {e.as<UnaryNode>()->operand};
    case ExprKind::Binary: return {e.as<BinaryNode>()->lhs, e.as<BinaryNode>()->rhs};
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      return {s->cond, s->if_true, s->if_false};
    }
    case ExprKind::Cast: return {e.as<CastNode>()->operand};
  }
  return {};
}

namespace {
// Post-order over the distinct nodes of `e` without recursion: `combine(node, child values)` gives
// a node's value from its children's.
template <class Value, class Combine>
Value fold_dag(const Expr& e, Combine combine) {
  if (!e) return Value{};
  std::unordered_map<const ExprNode*, Value> done;
  struct Frame { Expr node; std::vector<Expr> kids; size_t next = 0; };
  std::vector<Frame> stack;
  stack.push_back({e, children(e)});
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next < top.kids.size()) {
      Expr kid = top.kids[top.next++];
      if (kid && !done.count(kid.get())) stack.push_back({kid, children(kid)});
      continue;
    }
    std::vector<Value> values;
    for (auto& k : top.kids) values.push_back(k ? done.at(k.get()) : Value{});
    done[top.node.get()] = combine(values);
    stack.pop_back();
  }
  return done.at(e.get());
}
}  // namespace

int expr_depth(const Expr& e) {
  return fold_dag<int>(e, [](const std::vector<int>& kids) {
    int d = 0;
    for (int k : kids) d = std::max(d, k);
    return d + 1;
  });
}

int64_t expr_tree_size(const Expr& e, int64_t cap) {
  return fold_dag<int64_t>(e, [cap](const std::vector<int64_t>& kids) {
    int64_t n = 1;
    for (int64_t k : kids) n = std::min(cap, n + k);
    return n;
  });
}

void for_each_load(const Expr& e, const std::function<void(const LoadNode&)>& f) {
  if (!e) return;
  struct Walker : ExprVisitor {
    const std::function<void(const LoadNode&)>* f = nullptr;
    using ExprVisitor::visit;
    void visit(const LoadNode& n) override {
      (*f)(n);
      ExprVisitor::visit(n);
    }
  } walker;
  walker.f = &f;
  walker.visit(e);
}

namespace {

class VarSubstitution : public ExprMutator {
 public:
  explicit VarSubstitution(const std::map<std::string, Expr>& replacement) : replacement_(replacement) {}
  using ExprMutator::mutate;

 protected:
  Expr mutate(const VarNode& v, const Expr& self) override {
    auto it = replacement_.find(v.name);
    return it == replacement_.end() ? self : it->second;
  }

 private:
  const std::map<std::string, Expr>& replacement_;
};

}  // namespace

Expr substitute_vars(const Expr& e, const std::map<std::string, Expr>& replacement) {
  return VarSubstitution(replacement).mutate(e);
}

}  // namespace solder
