#include "ir/expr_eval.h"

#include <cmath>
#include <limits>

#include "ir/dtype.h"
#include "ir/printer.h"
#include "ir/types.h"

namespace solder {

namespace {
constexpr int kMaxStack = 256;
inline double round32(double v) { return static_cast<double>(static_cast<float>(v)); }
}  // namespace

double apply_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::logical_not: return x == 0 ? 1 : 0;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::rsqrt: return 1.0 / std::sqrt(x);
    case UnaryOp::abs: return std::fabs(x);
    case UnaryOp::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::silu: return x / (1.0 + std::exp(-x));
    case UnaryOp::gelu: {
      constexpr double k = 0.7978845608028654;  // sqrt(2 / pi)
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case UnaryOp::sin: return std::sin(x);
    case UnaryOp::cos: return std::cos(x);
    case UnaryOp::tan: return std::tan(x);
    case UnaryOp::erf: return std::erf(x);
    case UnaryOp::exp2: return std::exp2(x);
    case UnaryOp::log2: return std::log2(x);
    case UnaryOp::log1p: return std::log1p(x);
    case UnaryOp::expm1: return std::expm1(x);
    case UnaryOp::floor: return std::floor(x);
    case UnaryOp::ceil: return std::ceil(x);
    case UnaryOp::round: return std::nearbyint(x);  // half to even (the default rounding mode), as rintf
    case UnaryOp::round_tf32: return round_to_tf32(x);
  }
  return x;
}

// PTX max.NaN / min.NaN (what the generated code and the device library compute): NaN in either operand
// gives NaN; -0 orders below +0, so the result never depends on the operands' order.
double max_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;  // equal values; of +0 and -0, +0
  return a > b ? a : b;
}

double min_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return std::signbit(a) ? a : b;  // equal values; of +0 and -0, -0
  return a < b ? a : b;
}

double apply_binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::floordiv:
      if (b == 0) throw Error("integer division by zero ('//')");
      return std::floor(a / b);
    case BinaryOp::mod:
      if (b == 0) throw Error("integer modulo by zero ('%')");
      return a - b * std::floor(a / b);
    case BinaryOp::max: return max_nan(a, b);
    case BinaryOp::min: return min_nan(a, b);
    case BinaryOp::pow: return std::pow(a, b);
    case BinaryOp::lt: return a < b;
    case BinaryOp::le: return a <= b;
    case BinaryOp::gt: return a > b;
    case BinaryOp::ge: return a >= b;
    case BinaryOp::eq: return a == b;
    case BinaryOp::ne: return a != b;
    case BinaryOp::logical_and: return (a != 0) && (b != 0);
    case BinaryOp::logical_or: return (a != 0) || (b != 0);
  }
  return 0;
}

CompiledExpr::CompiledExpr(const Expr& e, const Bindings& bindings, Arithmetic arithmetic)
    : round32_(arithmetic == Arithmetic::float32) {
  auto dtype_of = [&](const std::string& name) {
    const TensorStorage* s = bindings.tensor(name);
    if (!s) throw Error("expression reads '" + name + "', which is not bound");
    return s->dtype;
  };
  compile(e, bindings, dtype_of);
  if (max_depth_ > kMaxStack) throw Error("expression too deep to evaluate (" + std::to_string(max_depth_) + " levels)");
}

void CompiledExpr::compile(const Expr& e, const Bindings& b, const std::function<DType(const std::string&)>& dtype_of) {
  auto push = [&](Instr i) {
    code_.push_back(i);
    return static_cast<int32_t>(code_.size() - 1);
  };
  auto grow = [&](int n) { depth_ += n; max_depth_ = std::max(max_depth_, depth_); };
  bool real = round32_ && type_of(e, dtype_of, "") == ValueType::real;
  switch (e.kind()) {
    case ExprKind::Const: {
      double v = e.as<ConstNode>()->value;
      push({Code::constant, 0, false, 0, 0, real ? round32(v) : v});
      grow(1);
      return;
    }
    case ExprKind::Var: {
      const std::string& name = e.as<VarNode>()->name;
      for (size_t i = 0; i < b.vars.size(); ++i) {
        if (b.vars[i] == name) {
          push({Code::variable, 0, false, static_cast<int32_t>(i)});
          grow(1);
          return;
        }
      }
      throw Error("expression uses variable '" + name + "', which is not bound");
    }
    case ExprKind::DimRef: {
      const std::string& name = e.as<DimRefNode>()->name;
      auto it = b.dims.find(name);
      if (it == b.dims.end()) throw Error("expression uses dim '" + name + "', which is not bound");
      push({Code::constant, 0, false, 0, 0, static_cast<double>(it->second)});
      grow(1);
      return;
    }
    case ExprKind::Load: {
      auto load = e.as<LoadNode>();
      const TensorStorage* s = b.tensor(load->tensor);
      if (!s) throw Error("expression reads '" + load->tensor + "', which is not bound");
      if (s->shape.size() != load->index.size())
        throw Error("load of '" + load->tensor + "' has " + std::to_string(load->index.size()) +
                    " indices, its storage has rank " + std::to_string(s->shape.size()));
      for (auto& i : load->index) compile(i, b, dtype_of);
      LoadTarget target{s, b.tensor_slot ? b.tensor_slot(load->tensor) : -1, std::vector<int64_t>(s->shape.size())};
      int64_t stride = 1;
      for (size_t d = s->shape.size(); d-- > 0;) {
        target.strides[d] = stride;
        stride *= s->shape[d];
      }
      loads_.push_back(std::move(target));
      push({Code::load, 0, false, static_cast<int32_t>(loads_.size() - 1), static_cast<int32_t>(load->index.size())});
      depth_ -= static_cast<int>(load->index.size());
      grow(1);
      return;
    }
    case ExprKind::Unary: {
      auto u = e.as<UnaryNode>();
      compile(u->operand, b, dtype_of);
      push({Code::unary, static_cast<uint8_t>(u->op), real});
      return;
    }
    case ExprKind::Binary: {
      auto bin = e.as<BinaryNode>();
      if (is_logical(bin->op)) {
        bool is_and = bin->op == BinaryOp::logical_and;
        Expr t = is_and ? bin->rhs : make_int(1);
        Expr f = is_and ? make_int(0) : bin->rhs;
        compile(make_select(bin->lhs, t, f), b, dtype_of);
        return;
      }
      compile(bin->lhs, b, dtype_of);
      compile(bin->rhs, b, dtype_of);
      push({Code::binary, static_cast<uint8_t>(bin->op), real});
      depth_ -= 1;
      return;
    }
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      compile(s->cond, b, dtype_of);
      int32_t branch = push({Code::jump_if_false});
      depth_ -= 1;
      compile(s->if_true, b, dtype_of);
      int32_t skip = push({Code::jump});
      depth_ -= 1;
      code_[branch].a = static_cast<int32_t>(code_.size());
      compile(s->if_false, b, dtype_of);
      code_[skip].a = static_cast<int32_t>(code_.size());
      return;
    }
    case ExprKind::Cast: {
      auto c = e.as<CastNode>();
      compile(c->operand, b, dtype_of);
      push({Code::cast, static_cast<uint8_t>(c->dtype)});
      return;
    }
  }
}

double CompiledExpr::eval(const int64_t* vars, const TensorStorage* const* storage, int64_t* load_counts) const {
  double stack[kMaxStack];
  int top = 0;
  const size_t n = code_.size();
  for (size_t pc = 0; pc < n; ++pc) {
    const Instr& in = code_[pc];
    switch (in.code) {
      case Code::constant: stack[top++] = in.value; break;
      case Code::variable: stack[top++] = static_cast<double>(vars[in.a]); break;
      case Code::load: {
        const LoadTarget& t = loads_[in.a];
        const TensorStorage* source = storage && t.slot >= 0 ? storage[t.slot] : t.storage;
        if (load_counts && t.slot >= 0) ++load_counts[t.slot];
        top -= in.b;
        int64_t offset = 0;
        for (int d = 0; d < in.b; ++d) {
          auto index = static_cast<int64_t>(stack[top + d]);
          if (index < 0 || index >= t.storage->shape[d]) {
            std::string where = source->name + "[";
            for (int k = 0; k < in.b; ++k) where += (k ? ", " : "") + std::to_string(static_cast<int64_t>(stack[top + k]));
            throw Error("load out of range: " + where + "]: index " + std::to_string(index) + " of dim " +
                        std::to_string(d + 1) + " is outside [0, " + std::to_string(t.storage->shape[d]) + ")");
          }
          offset += index * t.strides[d];
        }
        stack[top++] = source->data64 ? source->data64[offset] : static_cast<double>(source->data32[offset]);
        break;
      }
      case Code::unary: {
        double r = apply_unary(static_cast<UnaryOp>(in.op), stack[top - 1]);
        stack[top - 1] = in.round ? round32(r) : r;
        break;
      }
      case Code::binary: {
        --top;
        double r = apply_binary(static_cast<BinaryOp>(in.op), stack[top - 1], stack[top]);
        stack[top - 1] = in.round ? round32(r) : r;
        break;
      }
      case Code::cast: stack[top - 1] = round_to_dtype(stack[top - 1], static_cast<DType>(in.op)); break;
      case Code::jump_if_false:
        if (stack[--top] == 0) pc = static_cast<size_t>(in.a) - 1;
        break;
      case Code::jump: pc = static_cast<size_t>(in.a) - 1; break;
    }
  }
  return stack[0];
}

}  // namespace solder
