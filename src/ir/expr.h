// Scalar expressions: the one expression language of Solder's IRs.
//
// The Program IR uses expressions for definition bodies, index expressions and dim sizes; the
// Kernel IR reuses them for element-wise tile maps and tile addresses. Expressions are immutable
// trees of shared, reference-counted nodes (`Expr` is a handle to a const node), so passes share
// subtrees freely and a rebuild that changes nothing returns the same node.
//
// Node kinds (the list SOLDER_EXPR_NODES drives the visitor, the mutator and the printer):
//   Const   a number; `is_integer` marks integer literals (index arithmetic), otherwise real.
//   Var     an index variable (a p- or r-variable of a definition, or a Kernel IR loop/grid/axis var).
//   DimRef  the size of a named dim (bound when a program is instantiated with concrete sizes).
//   Load    tensor[index...]; a 0-d tensor has no indices.
//   Unary   neg, not, exp, log, tanh, sqrt, rsqrt, abs, sigmoid, silu, gelu, sin, cos, tan, erf,
//           exp2, log2, log1p, expm1, floor, ceil, round (half to even).
//   Binary  + - * / (real division), // and % (floor division and modulo on integers), max, min,
//           pow, the comparisons < <= > >= == !=, and the logical && ||.
//   Select  select(cond, a, b): a where cond holds, else b. Only the taken branch is evaluated,
//           which makes guarded loads (padding) safe.
//   Cast    cast(x, dtype): x rounded to dtype; the value stays a number.
//
// Evaluation semantics (reference interpreter: float64; executor: float32) are in expr_eval.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/diagnostics.h"
#include "ir/dtype.h"

namespace solder {

#define SOLDER_EXPR_NODES(X) \
  X(Const)                   \
  X(Var)                     \
  X(DimRef)                  \
  X(Load)                    \
  X(Unary)                   \
  X(Binary)                  \
  X(Select)                  \
  X(Cast)

enum class ExprKind {
#define SOLDER_DECLARE_KIND(name) name,
  SOLDER_EXPR_NODES(SOLDER_DECLARE_KIND)
#undef SOLDER_DECLARE_KIND
};

enum class UnaryOp {
  neg, logical_not, exp, log, tanh, sqrt, rsqrt, abs, sigmoid, silu, gelu,
  sin, cos, tan, erf, exp2, log2, log1p, expm1, floor, ceil, round, round_tf32
};

enum class BinaryOp {
  add, sub, mul, div, floordiv, mod, max, min, pow,
  lt, le, gt, ge, eq, ne,
  logical_and, logical_or
};

struct ExprNode;
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  explicit operator bool() const { return defined(); }
  ExprKind kind() const;
  SourceLoc loc() const;
  const ExprNode* get() const { return node_.get(); }
  bool same_node(const Expr& other) const { return node_ == other.node_; }

  // The node as its concrete type, or nullptr when it is of another kind.
  template <class Node>
  const Node* as() const;

 private:
  std::shared_ptr<const ExprNode> node_;
};

struct ExprNode {
  explicit ExprNode(ExprKind k, SourceLoc l) : kind(k), loc(l) {}
  virtual ~ExprNode() = default;
  ExprKind kind;
  SourceLoc loc;
};

struct ConstNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::Const;
  ConstNode(double v, bool integer, SourceLoc l) : ExprNode(node_kind, l), value(v), is_integer(integer) {}
  double value;
  bool is_integer;
};

struct VarNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::Var;
  VarNode(std::string n, SourceLoc l) : ExprNode(node_kind, l), name(std::move(n)) {}
  std::string name;
};

struct DimRefNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::DimRef;
  DimRefNode(std::string n, SourceLoc l) : ExprNode(node_kind, l), name(std::move(n)) {}
  std::string name;
};

struct LoadNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::Load;
  LoadNode(std::string t, std::vector<Expr> i, SourceLoc l)
      : ExprNode(node_kind, l), tensor(std::move(t)), index(std::move(i)) {}
  std::string tensor;
  std::vector<Expr> index;
};

struct UnaryNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::Unary;
  UnaryNode(UnaryOp o, Expr a, SourceLoc l) : ExprNode(node_kind, l), op(o), operand(std::move(a)) {}
  UnaryOp op;
  Expr operand;
};

struct BinaryNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::Binary;
  BinaryNode(BinaryOp o, Expr a, Expr b, SourceLoc l)
      : ExprNode(node_kind, l), op(o), lhs(std::move(a)), rhs(std::move(b)) {}
  BinaryOp op;
  Expr lhs, rhs;
};

struct SelectNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::Select;
  SelectNode(Expr c, Expr t, Expr f, SourceLoc l)
      : ExprNode(node_kind, l), cond(std::move(c)), if_true(std::move(t)), if_false(std::move(f)) {}
  Expr cond, if_true, if_false;
};

struct CastNode final : ExprNode {
  static constexpr ExprKind node_kind = ExprKind::Cast;
  CastNode(DType d, Expr a, SourceLoc l) : ExprNode(node_kind, l), dtype(d), operand(std::move(a)) {}
  DType dtype;
  Expr operand;
};

inline ExprKind Expr::kind() const { return node_->kind; }
inline SourceLoc Expr::loc() const { return node_ ? node_->loc : SourceLoc{}; }
template <class Node>
const Node* Expr::as() const {
  return node_ && node_->kind == Node::node_kind ? static_cast<const Node*>(node_.get()) : nullptr;
}

// ---- Builders -------------------------------------------------------------------------------
Expr make_const(double value, SourceLoc loc = {});
Expr make_int(int64_t value, SourceLoc loc = {});
Expr make_var(std::string name, SourceLoc loc = {});
Expr make_dim(std::string name, SourceLoc loc = {});
Expr make_load(std::string tensor, std::vector<Expr> index, SourceLoc loc = {});
Expr make_unary(UnaryOp op, Expr operand, SourceLoc loc = {});
Expr make_binary(BinaryOp op, Expr lhs, Expr rhs, SourceLoc loc = {});
Expr make_select(Expr cond, Expr if_true, Expr if_false, SourceLoc loc = {});
Expr make_cast(DType dtype, Expr operand, SourceLoc loc = {});

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator-(Expr a);

// ---- Operator tables (one place for names, symbols and precedence) --------------------------
std::string_view unary_op_name(UnaryOp op);      // "neg", "not", "exp", ...
std::optional<UnaryOp> unary_function(std::string_view name);  // functions written f(x)
bool is_function_style(UnaryOp op);               // exp(x) vs -x / !x
std::string_view binary_op_symbol(BinaryOp op);   // "+", "//", "max", ...
std::optional<BinaryOp> binary_function(std::string_view name);  // max, min, pow
bool is_function_style(BinaryOp op);              // max(a, b) vs a + b
bool is_comparison(BinaryOp op);
bool is_logical(BinaryOp op);
// Binding strength of infix operators: || 1, && 2, comparisons 3, + - 4, * / // % 5; unary 6.
int binary_precedence(BinaryOp op);

// Where the text of `e` begins: the position of its leftmost token (a binary node's own position
// is its operator's).
SourceLoc start_loc(const Expr& e);

// ---- Structure ------------------------------------------------------------------------------
// Structural equality (ignores source positions).
bool structurally_equal(const Expr& a, const Expr& b);
// Whether `e` mentions the index variable / the tensor `name`.
bool uses_var(const Expr& e, std::string_view name);
bool uses_tensor(const Expr& e, std::string_view name);
// Names of the index variables / tensors `e` mentions, in first-use order, without repeats.
std::vector<std::string> vars_used(const Expr& e);
std::vector<std::string> tensors_used(const Expr& e);

}  // namespace solder
