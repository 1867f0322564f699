#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "ir/limits.h"

namespace solder {

std::string format_number(double value, bool is_integer) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "nan";
  if (is_integer) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(value));
    return buffer;
  }
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text = buffer;
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

namespace {

constexpr int kUnaryPrecedence = 6;

bool is_whole(double v) { return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15; }
constexpr int kPrimaryPrecedence = 7;

int precedence(const Expr& e) {
  if (auto c = e.as<ConstNode>()) return c->value < 0 || std::signbit(c->value) ? kUnaryPrecedence : kPrimaryPrecedence;
  if (auto u = e.as<UnaryNode>()) return is_function_style(u->op) ? kPrimaryPrecedence : kUnaryPrecedence;
  if (auto b = e.as<BinaryNode>()) return is_function_style(b->op) ? kPrimaryPrecedence : binary_precedence(b->op);
  return kPrimaryPrecedence;
}

void print(std::ostringstream& out, const Expr& e);

// The parser groups a run of more than kBalancedRunLength operands of one associative operator as
// a balanced tree (limits.h). A left-deep chain of the same operator therefore prints in runs of at
// most kBalancedRunLength operands: the left operand is parenthesized every kBalancedRunLength - 1
// operands, so that the text parses back to the same tree.
bool ends_printed_run(const Expr& lhs, BinaryOp op) {
  if (op != BinaryOp::add && op != BinaryOp::mul && op != BinaryOp::logical_and && op != BinaryOp::logical_or) return false;
  int64_t operands = 1;  // of lhs's left spine of `op`
  for (const BinaryNode* b = lhs.as<BinaryNode>(); b && b->op == op; b = b->lhs.as<BinaryNode>()) ++operands;
  return operands > 1 && operands % (kBalancedRunLength - 1) == 0;
}

void print_operand(std::ostringstream& out, const Expr& e, bool parenthesize) {
  if (parenthesize) out << '(';
  print(out, e);
  if (parenthesize) out << ')';
}

void print_list(std::ostringstream& out, const std::vector<Expr>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out << ", ";
    print(out, items[i]);
  }
}

void print(std::ostringstream& out, const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Const: {
      auto c = e.as<ConstNode>();
      out << format_number(c->value, c->is_integer);
      return;
    }
    case ExprKind::Var: out << e.as<VarNode>()->name; return;
    case ExprKind::DimRef: out << e.as<DimRefNode>()->name; return;
    case ExprKind::Load: {
      auto l = e.as<LoadNode>();
      out << l->tensor;
      if (!l->index.empty()) {
        out << '[';
        print_list(out, l->index);
        out << ']';
      }
      return;
    }
    case ExprKind::Unary: {
      auto u = e.as<UnaryNode>();
      if (is_function_style(u->op)) {
        out << unary_op_name(u->op) << '(';
        print(out, u->operand);
        out << ')';
        return;
      }
      out << (u->op == UnaryOp::neg ? "-" : "!");
      print_operand(out, u->operand, precedence(u->operand) < kUnaryPrecedence);
      return;
    }
    case ExprKind::Binary: {
      auto b = e.as<BinaryNode>();
      if (is_function_style(b->op)) {
        out << binary_op_symbol(b->op) << '(';
        print(out, b->lhs);
        out << ", ";
        print(out, b->rhs);
        out << ')';
        return;
      }
      int p = binary_precedence(b->op);
      bool comparison = is_comparison(b->op);  // non-associative: parenthesize both sides
      print_operand(out, b->lhs, comparison ? precedence(b->lhs) <= p : precedence(b->lhs) < p || ends_printed_run(b->lhs, b->op));
      out << ' ' << binary_op_symbol(b->op) << ' ';
      print_operand(out, b->rhs, precedence(b->rhs) <= p);
      return;
    }
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      out << "select(";
      print_list(out, {s->cond, s->if_true, s->if_false});
      out << ')';
      return;
    }
    case ExprKind::Cast: {
      auto c = e.as<CastNode>();
      out << "cast(";
      print(out, c->operand);
      out << ", " << dtype_name(c->dtype) << ')';
      return;
    }
  }
}

void print_index_decls(std::ostringstream& out, const std::vector<IndexVarDecl>& vars) {
  for (size_t i = 0; i < vars.size(); ++i) {
    if (i) out << ", ";
    out << vars[i].name;
    if (vars[i].extent) out << " : " << print_expr(*vars[i].extent);
  }
}

void print_target(std::ostringstream& out, const DefTarget& t) {
  if (t.is_output) out << "out ";
  out << t.name << '[';
  print_index_decls(out, t.index);
  out << ']';
  if (t.dtype) out << " : " << dtype_name(*t.dtype);
}

void print_dim_line(std::ostringstream& out, const char* keyword, const std::vector<DimDecl>& dims) {
  if (dims.empty()) return;
  out << keyword << ' ';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out << ", ";
    out << dims[i].name << " = " << print_expr(dims[i].value);
  }
  out << '\n';
}

}  // namespace

std::string print_expr(const Expr& e) {
  std::ostringstream out;
  print(out, e);
  return out.str();
}

std::string print_definition(const Definition& def) {
  std::ostringstream out;
  print_target(out, def.target);
  if (def.index_target) {
    out << ", ";
    print_target(out, *def.index_target);
  }
  out << " = ";
  if (def.reduce == ReduceOp::topk) {
    out << "topk(" << print_expr(def.topk_k) << ", ";
    print_index_decls(out, def.reduce_vars);
    out << ") ";
  } else if (def.reduce != ReduceOp::none) {
    out << reduce_op_name(def.reduce) << '(';
    print_index_decls(out, def.reduce_vars);
    out << ") ";
  }
  out << print_expr(def.body);
  return out.str();
}

std::string print_program(const Program& program) {
  std::ostringstream out;
  out << "program " << program.name << '\n';
  print_dim_line(out, "dim", program.dims);
  print_dim_line(out, "small", program.small);
  for (auto& in : program.inputs) {
    out << "in " << in.name;
    if (!in.shape.empty()) {
      out << '[';
      for (size_t i = 0; i < in.shape.size(); ++i) out << (i ? ", " : "") << print_expr(in.shape[i]);
      out << ']';
    }
    out << " : " << dtype_name(in.dtype);
    if (in.distribution.kind != InputDistribution::Kind::standard) {
      out << " ~ " << distribution_name(in.distribution.kind) << '(';
      for (size_t i = 0; i < in.distribution.params.size(); ++i)
        out << (i ? ", " : "") << format_number(in.distribution.params[i], is_whole(in.distribution.params[i]));
      out << ')';
    }
    out << '\n';
  }
  for (auto& def : program.defs) out << print_definition(def) << '\n';
  return out.str();
}

}  // namespace solder
