// Printing scalar expressions as CUDA C++ (part of the CUDA code generator).
//
// Integers are `long long`, reals `float`, conditions `bool`; mixed arithmetic converts integers to
// float where the IR's typing (types.h) says the result is real. Loads of tiles read the float
// shared-memory arrays (int for i32 tiles); loads of globals convert their dtype to float
// (solder::to_float), except i32, read as integers.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/types.h"

namespace solder {

struct CudaArray {
  std::string pointer;          // C++ expression of the base pointer
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  bool global = false;          // a typed global (else a float tile)
  int parameter = -1;           // a global's position among the kernel parameters
  // When set, a load of this tile prints this text instead of pointer[offset] (the generic writer's
  // register-resident tiles, read only at the point's own element: kernel_writer_registers.cpp).
  std::string element;
};

// The generated code's check of a data-dependent index (docs/kernel-ir.md, "Bounds"): the module
// defines kCheckedIndexPrologue when its source calls solder_checked_index(index, extent, parameter,
// dim), which returns the index when it is in [0, extent) and otherwise records the first offence in
// the __device__ array solder_index_error {parameter + 1, dim, index} and returns 0 (an in-range
// element); the runtime reads the array after the launches and fails the run (cuda_backend.h).
extern const char* const kCheckedIndexPrologue;
constexpr const char* kIndexErrorVariable = "solder_index_error";

class CudaExprPrinter {
 public:
  std::function<const CudaArray*(const std::string&)> array;  // tiles and globals by name
  std::map<std::string, int64_t> dims;
  // The tensor-core kernels' hardware approximations (off for the generic writer): exp(x) as
  // __expf (ex2.approx of x · log2 e), exp(a - b) as one FFMA and ex2.approx (fast_exp_diff),
  // tanh as tanh.approx, sigmoid as rcp.approx(1 + ex2.approx(-x · log2 e)) (fast_sigmoid). Relative
  // errors about 2^-21 (exp, sigmoid) and 2^-11 (tanh); mma_stream_writer.h
  // lists them among the choices that differ from the Kernel IR's float32 arithmetic.
  bool fast_math = false;
  // The register pass's row divisors (kernel_writer_registers.cpp; empty elsewhere): a real division
  // whose divisor prints as a key prints as solder::reduce::divide_by_row(numerator, <the value>),
  // the same bits as the IEEE quotient (device/solder/reduce/row_divide.h).
  std::map<std::string, std::string> row_divisors;

  // The expression as C++ of the requested type.
  std::string print(const Expr& e, ValueType as);
  std::string print_float(const Expr& e) { return print(e, ValueType::real); }
  std::string print_int(const Expr& e) { return print(e, ValueType::integer); }
  std::string print_bool(const Expr& e) { return print(e, ValueType::boolean); }
  ValueType type(const Expr& e);

  // Row-major element offset of `index` into `a`.
  std::string offset(const CudaArray& a, const std::vector<std::string>& index) const;

 private:
  std::string emit(const Expr& e, ValueType& type);
  static std::string convert(const std::string& text, ValueType from, ValueType to);
};

std::string cuda_identifier(const std::string& name);  // a Kernel IR name in C++ (already renamed: cuda_names.h)
std::string cuda_float_literal(double value);
std::string round_function(DType dtype);                 // "solder::round_bf16"

}  // namespace solder
