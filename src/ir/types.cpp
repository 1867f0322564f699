#include "ir/types.h"

#include "ir/printer.h"

namespace solder {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::integer: return "an integer";
    case ValueType::real: return "a real number";
    case ValueType::boolean: return "a condition";
  }
  return "?";
}

ValueType value_type_of_dtype(DType dtype) {
  if (dtype == DType::i32) return ValueType::integer;
  if (dtype == DType::boolean) return ValueType::boolean;
  return ValueType::real;
}

ValueType type_of(const Expr& e, const std::function<DType(const std::string&)>& tensor_dtype,
                  const std::string& file) {
  auto recurse = [&](const Expr& x) { return type_of(x, tensor_dtype, file); };
  auto numeric = [](ValueType t) { return t == ValueType::real ? ValueType::real : ValueType::integer; };
  switch (e.kind()) {
    case ExprKind::Const: return e.as<ConstNode>()->is_integer ? ValueType::integer : ValueType::real;
    case ExprKind::Var:
    case ExprKind::DimRef: return ValueType::integer;
    case ExprKind::Load: {
      auto load = e.as<LoadNode>();
      for (auto& index : load->index) {
        ValueType t = recurse(index);
        if (t == ValueType::real)
          fail(file, start_loc(index), "index '" + print_expr(index) + "' of '" + load->tensor +
                                      "' must be an integer, found a real number");
      }
      return value_type_of_dtype(tensor_dtype(load->tensor));
    }
    case ExprKind::Unary: {
      auto u = e.as<UnaryNode>();
      ValueType a = recurse(u->operand);
      if (u->op == UnaryOp::logical_not) {
        if (a != ValueType::boolean)
          fail(file, e.loc(), "'!' expects a condition, found " + std::string(value_type_name(a)));
        return ValueType::boolean;
      }
      if (u->op == UnaryOp::neg || u->op == UnaryOp::abs) return numeric(a);
      if (a == ValueType::boolean)
        fail(file, e.loc(), "'" + std::string(unary_op_name(u->op)) + "' expects a number, found a condition");
      return ValueType::real;
    }
    case ExprKind::Binary: {
      auto b = e.as<BinaryNode>();
      ValueType x = recurse(b->lhs), y = recurse(b->rhs);
      std::string sym(binary_op_symbol(b->op));
      if (is_logical(b->op)) {
        if (x != ValueType::boolean || y != ValueType::boolean)
          fail(file, e.loc(), "'" + sym + "' expects conditions on both sides, found " +
                                  std::string(value_type_name(x != ValueType::boolean ? x : y)));
        return ValueType::boolean;
      }
      if (is_comparison(b->op)) return ValueType::boolean;
      if (b->op == BinaryOp::floordiv || b->op == BinaryOp::mod) {
        if (x == ValueType::real || y == ValueType::real)
          fail(file, e.loc(), "'" + sym + "' needs integers, found a real number (use '/' for real division)");
        return ValueType::integer;
      }
      if (b->op == BinaryOp::div || b->op == BinaryOp::pow) return ValueType::real;
      return numeric(x) == ValueType::real || numeric(y) == ValueType::real ? ValueType::real : ValueType::integer;
    }
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      ValueType c = recurse(s->cond);
      if (c != ValueType::boolean)
        fail(file, s->cond.loc(), "select's condition must be a condition (a comparison or a bool), found " +
                                      std::string(value_type_name(c)));
      ValueType a = recurse(s->if_true), b = recurse(s->if_false);
      if (a == b) return a;
      return numeric(a) == ValueType::real || numeric(b) == ValueType::real ? ValueType::real : ValueType::integer;
    }
    case ExprKind::Cast: {
      auto c = e.as<CastNode>();
      recurse(c->operand);
      return value_type_of_dtype(c->dtype);
    }
  }
  return ValueType::real;
}

}  // namespace solder
