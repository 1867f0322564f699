// Compiled evaluation of scalar expressions, in float64 (the reference) or float32 (the Kernel IR
// executor, matching the GPU's rounding points).
//
// Semantics of every operation:
//   integers    exact (held in a double, exact up to 2^53); // and % floor (Python semantics);
//               division or modulo by zero is an Error.
//   reals       IEEE arithmetic. In float32 mode every real-valued result (each + - * /, each
//               function, each constant) is rounded to float32, as a GPU computing in f32 would.
//               sigmoid(x) = 1 / (1 + exp(-x)); silu(x) = x * sigmoid(x);
//               gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));  rsqrt(x) = 1 / sqrt(x).
//               sin cos tan erf exp2 log2 log1p expm1 floor ceil are the C library's functions;
//               round(x) rounds half to even (rint); round_tf32(x) rounds to 10 fraction bits,
//               nearest even (ir/dtype.h, round_to_tf32; exact in float32). In float32 mode they are computed in float64
//               and rounded once to float32 (the correctly rounded value; the GPU's precise
//               functions are within 2 ulp of it, floor/ceil/round exactly).
//               max and min propagate NaN and order -0 below +0 (max(+0, -0) = +0, min = -0, in
//               either order: PTX max.NaN / min.NaN, which the generated code uses); comparisons with
//               NaN are false.
//   booleans    0 or 1.
//   select      evaluates only the taken branch; && and || short-circuit.
//   cast        rounds to the dtype (dtype.h).
//   loads       read the bound tensor's storage (float64 or float32 elements, row-major); an index
//               out of range is an Error naming the tensor and the index.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace solder {

enum class Arithmetic { float64, float32 };

// Storage a load reads: row-major elements of a tensor or buffer.
struct TensorStorage {
  std::string name;
  std::vector<int64_t> shape;
  const double* data64 = nullptr;  // exactly one of the two is set
  const float* data32 = nullptr;
  DType dtype = DType::f32;
};

class CompiledExpr {
 public:
  struct Bindings {
    std::vector<std::string> vars;                          // a variable's slot is its position
    // Storage of a loaded name: its shape and dtype are fixed at compile time; its data is used
    // unless eval is given a storage table.
    std::function<const TensorStorage*(const std::string&)> tensor;
    // Optional: the slot of a loaded name in the storage table that eval receives (lets one
    // compiled expression read each block's own buffers).
    std::function<int(const std::string&)> tensor_slot;
    std::map<std::string, int64_t> dims;
  };

  CompiledExpr() = default;
  CompiledExpr(const Expr& e, const Bindings& bindings, Arithmetic arithmetic);

  bool defined() const { return !code_.empty(); }
  // Evaluates at the given variable values (one per slot of Bindings::vars). Thread-safe.
  // `storage`, when given, is indexed by Bindings::tensor_slot; `load_counts`, when given, counts
  // the elements loaded per storage slot.
  double eval(const int64_t* vars, const TensorStorage* const* storage = nullptr, int64_t* load_counts = nullptr) const;

 private:
  enum class Code : uint8_t { constant, variable, load, unary, binary, cast, jump_if_false, jump };
  struct Instr {
    Code code;
    uint8_t op = 0;       // UnaryOp / BinaryOp / DType
    bool round = false;   // round the result to float32
    int32_t a = 0;        // variable slot, tensor slot, jump target
    int32_t b = 0;        // load rank
    double value = 0;     // constant
  };
  struct LoadTarget {
    const TensorStorage* storage;  // compile-time storage (shape, dtype, default data)
    int slot;                      // index into eval's storage table (-1: none)
    std::vector<int64_t> strides;
  };
  std::vector<Instr> code_;
  std::vector<LoadTarget> loads_;
  bool round32_ = false;

  void compile(const Expr& e, const Bindings& b, const std::function<DType(const std::string&)>& dtype_of);
  int depth_ = 0, max_depth_ = 0;
};

// The scalar functions, shared with code that evaluates outside CompiledExpr.
double apply_unary(UnaryOp op, double x);
double apply_binary(BinaryOp op, double a, double b);  // throws Error on integer division by zero
// max and min as apply_binary computes them (NaN propagates; -0 < +0): every max/min of the executor and
// the reference, collectives included.
double max_nan(double a, double b);
double min_nan(double a, double b);

}  // namespace solder
