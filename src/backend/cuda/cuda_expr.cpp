#include "backend/cuda/cuda_expr.h"

#include <cmath>
#include <cstdio>

#include "ir/diagnostics.h"

namespace solder {

// generate_cuda renames the whole Kernel IR first (with_cuda_names, cuda_names.h): every name that
// reaches a writer is already its C++ spelling.
std::string cuda_identifier(const std::string& name) { return name; }

std::string cuda_float_literal(double value) {
  if (std::isnan(value)) return "__int_as_float(0x7fc00000)";
  if (std::isinf(value)) return value > 0 ? "solder::infinity()" : "(-solder::infinity())";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.9g", static_cast<double>(static_cast<float>(value)));
  std::string s = buffer;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

const char* const kCheckedIndexPrologue =
    "// Data-dependent indices are checked: the first one out of range is recorded here (parameter + 1,\n"
    "// dim, index) and read by the runtime after the launches; the load reads element 0 instead.\n"
    "__device__ long long solder_index_error[3];\n"
    "__device__ __forceinline__ long long solder_checked_index(long long index, long long extent, int parameter, int dim) {\n"
    "  if (index >= 0 && index < extent) return index;\n"
    "  if (atomicCAS(reinterpret_cast<unsigned long long*>(&solder_index_error[0]), 0ULL,\n"
    "                static_cast<unsigned long long>(parameter + 1)) == 0ULL) {\n"
    "    solder_index_error[1] = dim;\n"
    "    solder_index_error[2] = index;\n"
    "  }\n"
    "  return 0;\n"
    "}\n\n";

std::string round_function(DType dtype) { return "solder::round_" + std::string(dtype_name(dtype)); }

ValueType CudaExprPrinter::type(const Expr& e) {
  return type_of(e, [this](const std::string& name) {
    const CudaArray* a = array(name);
    if (!a) throw Error("CUDA code generator: expression reads '" + name + "', which is not a tile or global");
    return a->dtype;
  }, "");
}

std::string CudaExprPrinter::convert(const std::string& text, ValueType from, ValueType to) {
  if (from == to) return text;
  switch (to) {
    case ValueType::real: return from == ValueType::boolean ? "((" + text + ") ? 1.0f : 0.0f)" : "static_cast<float>(" + text + ")";
    case ValueType::integer: return from == ValueType::boolean ? "((" + text + ") ? 1LL : 0LL)" : "static_cast<long long>(" + text + ")";
    case ValueType::boolean: return "((" + text + ") != 0)";
  }
  return text;
}

std::string CudaExprPrinter::print(const Expr& e, ValueType as) {
  ValueType t;
  std::string text = emit(e, t);
  return convert(text, t, as);
}

std::string CudaExprPrinter::offset(const CudaArray& a, const std::vector<std::string>& index) const {
  if (index.empty()) return "0";
  // Tiles are at most 227 KB: their strides are int (32-bit arithmetic when the indices are int).
  std::string suffix = a.global ? "LL" : "";
  std::string s = "(" + index[0] + ")";
  for (size_t d = 1; d < index.size(); ++d) s = "(" + s + " * " + std::to_string(a.shape[d]) + suffix + " + (" + index[d] + "))";
  return s;
}

std::string CudaExprPrinter::emit(const Expr& e, ValueType& t) {
  t = type(e);
  switch (e.kind()) {
    case ExprKind::Const: {
      auto c = e.as<ConstNode>();
      if (c->is_integer) return std::to_string(static_cast<long long>(c->value)) + "LL";
      return cuda_float_literal(c->value);
    }
    case ExprKind::Var: return cuda_identifier(e.as<VarNode>()->name);
    case ExprKind::DimRef: return std::to_string(dims.at(e.as<DimRefNode>()->name)) + "LL";
    case ExprKind::Load: {
      auto l = e.as<LoadNode>();
      const CudaArray* a = array(l->tensor);
      std::vector<std::string> idx;
      for (size_t d = 0; d < l->index.size(); ++d) {
        const Expr& i = l->index[d];
        // An index that reads a tensor is data-dependent: checked, never a wild read.
        if (a->global && !tensors_used(i).empty())
          idx.push_back("solder_checked_index(" + print_int(i) + ", " + std::to_string(a->shape[d]) + "LL, " +
                        std::to_string(a->parameter) + ", " + std::to_string(d) + ")");
        else
          idx.push_back(print_int(i));
      }
      std::string element = !a->global && !a->element.empty() ? a->element : a->pointer + "[" + offset(*a, idx) + "]";
      if (a->global) {
        if (a->dtype == DType::i32) return "static_cast<long long>(" + element + ")";
        if (a->dtype == DType::boolean) return "(" + element + " != 0)";
        return "solder::to_float(" + element + ")";
      }
      if (t == ValueType::integer) return "static_cast<long long>(" + element + ")";
      if (t == ValueType::boolean) return "(" + element + " != 0.0f)";
      return element;
    }
    case ExprKind::Unary: {
      auto u = e.as<UnaryNode>();
      switch (u->op) {
        case UnaryOp::neg: return "(-" + print(u->operand, t) + ")";
        case UnaryOp::logical_not: return "(!" + print_bool(u->operand) + ")";
        case UnaryOp::abs: return t == ValueType::integer ? "llabs(" + print_int(u->operand) + ")" : "fabsf(" + print_float(u->operand) + ")";
        case UnaryOp::exp:
          if (!fast_math) return "expf(" + print_float(u->operand) + ")";
          if (u->operand.kind() == ExprKind::Binary && u->operand.as<BinaryNode>()->op == BinaryOp::sub)
            return "solder::tile::fast_exp_diff(" + print_float(u->operand.as<BinaryNode>()->lhs) + ", " +
                   print_float(u->operand.as<BinaryNode>()->rhs) + ")";
          return "__expf(" + print_float(u->operand) + ")";
        case UnaryOp::log: return "logf(" + print_float(u->operand) + ")";
        case UnaryOp::tanh: return (fast_math ? "solder::tile::fast_tanh(" : "tanhf(") + print_float(u->operand) + ")";
        case UnaryOp::sqrt: return "sqrtf(" + print_float(u->operand) + ")";
        case UnaryOp::rsqrt: return "solder::rsqrt_exact(" + print_float(u->operand) + ")";
        case UnaryOp::sigmoid: return (fast_math ? "solder::tile::fast_sigmoid(" : "solder::sigmoid(") + print_float(u->operand) + ")";
        case UnaryOp::silu: return "solder::silu(" + print_float(u->operand) + ")";
        case UnaryOp::gelu: return "solder::gelu(" + print_float(u->operand) + ")";
        // The precise CUDA functions (ulp bounds in the CUDA Math API): never the __sinf-style
        // intrinsics, whose error grows with |x| (RoPE angles reach thousands of radians).
        case UnaryOp::sin: return "sinf(" + print_float(u->operand) + ")";
        case UnaryOp::cos: return "cosf(" + print_float(u->operand) + ")";
        case UnaryOp::tan: return "tanf(" + print_float(u->operand) + ")";
        case UnaryOp::erf: return "erff(" + print_float(u->operand) + ")";
        case UnaryOp::exp2: return "exp2f(" + print_float(u->operand) + ")";
        case UnaryOp::log2: return "log2f(" + print_float(u->operand) + ")";
        case UnaryOp::log1p: return "log1pf(" + print_float(u->operand) + ")";
        case UnaryOp::expm1: return "expm1f(" + print_float(u->operand) + ")";
        case UnaryOp::floor: return "floorf(" + print_float(u->operand) + ")";
        case UnaryOp::ceil: return "ceilf(" + print_float(u->operand) + ")";
        case UnaryOp::round: return "rintf(" + print_float(u->operand) + ")";  // half to even
        case UnaryOp::round_tf32: return "solder::round_tf32(" + print_float(u->operand) + ")";
      }
      break;
    }
    case ExprKind::Binary: {
      auto b = e.as<BinaryNode>();
      if (is_logical(b->op))
        return "(" + print_bool(b->lhs) + (b->op == BinaryOp::logical_and ? " && " : " || ") + print_bool(b->rhs) + ")";
      if (is_comparison(b->op)) {
        ValueType operands = type(b->lhs) == ValueType::real || type(b->rhs) == ValueType::real ? ValueType::real : ValueType::integer;
        return "(" + print(b->lhs, operands) + " " + std::string(binary_op_symbol(b->op)) + " " + print(b->rhs, operands) + ")";
      }
      switch (b->op) {
        case BinaryOp::floordiv: return "solder::floordiv(" + print_int(b->lhs) + ", " + print_int(b->rhs) + ")";
        case BinaryOp::mod: return "solder::floormod(" + print_int(b->lhs) + ", " + print_int(b->rhs) + ")";
        case BinaryOp::pow: {
          // x^2 as one correctly rounded product (what the executor's f32-rounded pow gives), not
          // powf's log/exp sequence of ~100 instructions.
          auto c = b->rhs.as<ConstNode>();
          if (c && c->value == 2) return "[](float t) { return t * t; }(" + print_float(b->lhs) + ")";
          return "powf(" + print_float(b->lhs) + ", " + print_float(b->rhs) + ")";
        }
        case BinaryOp::div:
          if (!row_divisors.empty())
            if (auto it = row_divisors.find(print_float(b->rhs)); it != row_divisors.end())
              return "solder::reduce::divide_by_row(" + print_float(b->lhs) + ", " + it->second + ")";
          return "(" + print_float(b->lhs) + " / " + print_float(b->rhs) + ")";
        case BinaryOp::max:
          return t == ValueType::integer ? "solder::max_int(" + print_int(b->lhs) + ", " + print_int(b->rhs) + ")"
                                         : "solder::max_nan(" + print_float(b->lhs) + ", " + print_float(b->rhs) + ")";
        case BinaryOp::min:
          return t == ValueType::integer ? "solder::min_int(" + print_int(b->lhs) + ", " + print_int(b->rhs) + ")"
                                         : "solder::min_nan(" + print_float(b->lhs) + ", " + print_float(b->rhs) + ")";
        default:
          return "(" + print(b->lhs, t) + " " + std::string(binary_op_symbol(b->op)) + " " + print(b->rhs, t) + ")";
      }
    }
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      return "(" + print_bool(s->cond) + " ? " + print(s->if_true, t) + " : " + print(s->if_false, t) + ")";
    }
    case ExprKind::Cast: {
      auto c = e.as<CastNode>();
      std::string value = round_function(c->dtype) + "(" + print_float(c->operand) + ")";
      return t == ValueType::real ? value : convert(value, ValueType::real, t);
    }
  }
  throw Error("CUDA code generator: cannot print expression");
}

}  // namespace solder
