// The sampled reference, part 1 (internal to sampled_reference.cpp): helpers and the bytecode a
// definition body compiles to, evaluated per element in float64.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_set>

#include "backend/cpu/reference.h"
#include "ir/expr_eval.h"
#include "support/parallel.h"

namespace solder::sampled {


inline constexpr int kMaxStack = 256;  // as CompiledExpr
inline constexpr int kTensorShift = 48;  // memo key: tensor id << 48 | flat index

inline int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

inline void decode(int64_t n, const std::vector<int64_t>& extents, int64_t* out) {
  for (size_t d = extents.size(); d-- > 0;) {
    out[d] = n % extents[d];
    n /= extents[d];
  }
}

inline std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = stride;
    stride *= shape[d];
  }
  return s;
}

bool greater_for_topk(double a, int64_t ia, double b, int64_t ib) {  // as reference.cpp
  bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

class Random {  // splitmix64
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }

 private:
  uint64_t state_;
};

inline uint64_t hash_name(const std::string& name, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull) ^ 0x5a4d504c45445245ull;  // "SAMPLED" salt
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// ---- Bytecode ---------------------------------------------------------------------------------
// The same instruction set as CompiledExpr in float64 mode, except that a load of a definition's
// target asks the worker for that element (computed on demand) instead of reading storage.

enum class Op : uint8_t {
  constant, variable,
  load_input, load_def,                // indices on the stack
  load_input_direct, load_def_direct,  // indices are variables or integer constants (no stack)
  unary, binary, cast, jump_if_false, jump
};

struct Instr {
  Op op;
  uint8_t sub = 0;  // UnaryOp / BinaryOp / DType
  int32_t a = 0;    // variable slot, load index, jump target
  int32_t b = 0;    // load rank
  double value = 0;
};

struct LoadSite {
  int tensor = -1;                // tensor id (index into BoundProgram::tensors)
  const double* data = nullptr;   // inputs: their values
  const std::string* name = nullptr;
  std::vector<int64_t> shape, strides;
  // Direct loads: per index, the variable slot, or -1 and the constant in `fixed`.
  std::vector<int32_t> slots;
  std::vector<int64_t> fixed;
};

struct Code {
  std::vector<Instr> code;
  std::vector<LoadSite> loads;
};

struct TensorSlot {
  const TensorInfo* info = nullptr;
  const double* input_data = nullptr;  // inputs
  int def = -1;                        // targets: the defining definition
};

class Compiler {
 public:
  Compiler(const BoundProgram& p, const std::vector<TensorSlot>& tensors, const std::vector<std::string>& vars)
      : program_(p), tensors_(tensors), vars_(vars) {}

  Code compile(const Expr& e) {
    emit(e);
    if (max_depth_ > kMaxStack) throw Error("expression too deep to evaluate (" + std::to_string(max_depth_) + " levels)");
    return std::move(out_);
  }

 private:
  const BoundProgram& program_;
  const std::vector<TensorSlot>& tensors_;
  const std::vector<std::string>& vars_;
  Code out_;
  int depth_ = 0, max_depth_ = 0;

  int32_t push(Instr i) {
    out_.code.push_back(i);
    return static_cast<int32_t>(out_.code.size() - 1);
  }
  void grow(int n) {
    depth_ += n;
    max_depth_ = std::max(max_depth_, depth_);
  }
  int32_t here() const { return static_cast<int32_t>(out_.code.size()); }

  int tensor_id(const std::string& name) const {
    for (size_t i = 0; i < program_.tensors.size(); ++i)
      if (program_.tensors[i].name == name) return static_cast<int>(i);
    throw Error("expression reads '" + name + "', which is not bound");
  }

  int32_t var_slot(const std::string& name) const {
    for (size_t i = 0; i < vars_.size(); ++i)
      if (vars_[i] == name) return static_cast<int32_t>(i);
    throw Error("expression uses variable '" + name + "', which is not bound");
  }

  // The value of a subtree without variables or loads, computed by the same functions the
  // evaluator uses (so folding it changes no bit), or nothing (also when computing it throws:
  // it may sit in a branch that is never taken).
  std::optional<double> constant(const Expr& e) const {
    switch (e.kind()) {
      case ExprKind::Const: return e.as<ConstNode>()->value;
      case ExprKind::DimRef: {
        auto it = program_.dims.find(e.as<DimRefNode>()->name);
        if (it == program_.dims.end()) return std::nullopt;
        return static_cast<double>(it->second);
      }
      case ExprKind::Unary: {
        auto u = e.as<UnaryNode>();
        auto x = constant(u->operand);
        if (!x) return std::nullopt;
        return apply_unary(u->op, *x);
      }
      case ExprKind::Binary: {
        auto b = e.as<BinaryNode>();
        if (is_logical(b->op)) return std::nullopt;
        auto x = constant(b->lhs);
        if (!x) return std::nullopt;
        auto y = constant(b->rhs);
        if (!y) return std::nullopt;
        try {
          return apply_binary(b->op, *x, *y);
        } catch (const Error&) {
          return std::nullopt;
        }
      }
      case ExprKind::Cast: {
        auto c = e.as<CastNode>();
        auto x = constant(c->operand);
        if (!x) return std::nullopt;
        return round_to_dtype(*x, c->dtype);
      }
      default: return std::nullopt;
    }
  }

  void emit(const Expr& e) {
    if (e.kind() == ExprKind::Unary || e.kind() == ExprKind::Binary || e.kind() == ExprKind::Cast) {
      if (auto v = constant(e)) {
        push({Op::constant, 0, 0, 0, *v});
        grow(1);
        return;
      }
    }
    switch (e.kind()) {
      case ExprKind::Const:
        push({Op::constant, 0, 0, 0, e.as<ConstNode>()->value});
        grow(1);
        return;
      case ExprKind::Var:
        push({Op::variable, 0, var_slot(e.as<VarNode>()->name)});
        grow(1);
        return;
      case ExprKind::DimRef: {
        const std::string& name = e.as<DimRefNode>()->name;
        auto it = program_.dims.find(name);
        if (it == program_.dims.end()) throw Error("expression uses dim '" + name + "', which is not bound");
        push({Op::constant, 0, 0, 0, static_cast<double>(it->second)});
        grow(1);
        return;
      }
      case ExprKind::Load: {
        auto load = e.as<LoadNode>();
        int id = tensor_id(load->tensor);
        const TensorSlot& slot = tensors_[static_cast<size_t>(id)];
        if (slot.info->shape.size() != load->index.size())
          throw Error("load of '" + load->tensor + "' has " + std::to_string(load->index.size()) +
                      " indices, its storage has rank " + std::to_string(slot.info->shape.size()));
        LoadSite site;
        bool direct = true;
        for (auto& i : load->index) {
          if (auto v = i.as<VarNode>()) {
            site.slots.push_back(var_slot(v->name));
            site.fixed.push_back(0);
          } else if (auto c = constant(i)) {
            site.slots.push_back(-1);
            site.fixed.push_back(static_cast<int64_t>(*c));  // as the evaluator converts an index
          } else {
            direct = false;
          }
        }
        if (!direct) {
          site.slots.clear();
          site.fixed.clear();
          for (auto& i : load->index) emit(i);
        }
        site.tensor = id;
        site.data = slot.input_data;
        site.name = &slot.info->name;
        site.shape = slot.info->shape;
        site.strides = strides_of(site.shape);
        if (slot.def < 0 && !site.data) throw Error("expression reads '" + load->tensor + "', which is not bound");
        out_.loads.push_back(std::move(site));
        Op op = direct ? (slot.def >= 0 ? Op::load_def_direct : Op::load_input_direct)
                       : (slot.def >= 0 ? Op::load_def : Op::load_input);
        push({op, 0, static_cast<int32_t>(out_.loads.size() - 1), static_cast<int32_t>(load->index.size())});
        if (!direct) depth_ -= static_cast<int>(load->index.size());
        grow(1);
        return;
      }
      case ExprKind::Unary: {
        auto u = e.as<UnaryNode>();
        emit(u->operand);
        push({Op::unary, static_cast<uint8_t>(u->op)});
        return;
      }
      case ExprKind::Binary: {
        auto bin = e.as<BinaryNode>();
        if (is_logical(bin->op)) {
          // As CompiledExpr: a && b is select(a, b, 0); a || b is select(a, 1, b).
          bool is_and = bin->op == BinaryOp::logical_and;
          emit_select(bin->lhs, is_and ? bin->rhs : make_int(1), is_and ? make_int(0) : bin->rhs);
          return;
        }
        emit(bin->lhs);
        emit(bin->rhs);
        push({Op::binary, static_cast<uint8_t>(bin->op)});
        depth_ -= 1;
        return;
      }
      case ExprKind::Select: {
        auto s = e.as<SelectNode>();
        emit_select(s->cond, s->if_true, s->if_false);
        return;
      }
      case ExprKind::Cast: {
        auto c = e.as<CastNode>();
        emit(c->operand);
        push({Op::cast, static_cast<uint8_t>(c->dtype)});
        return;
      }
    }
  }

  void emit_select(const Expr& cond, const Expr& t, const Expr& f) {
    emit(cond);
    int32_t branch = push({Op::jump_if_false});
    depth_ -= 1;
    emit(t);
    int32_t skip = push({Op::jump});
    depth_ -= 1;
    out_.code[static_cast<size_t>(branch)].a = here();
    emit(f);
    out_.code[static_cast<size_t>(skip)].a = here();
  }
};

}  // namespace solder::sampled
