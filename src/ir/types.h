// Value types of scalar expressions: integer, real or boolean.
//
// Index variables, dims, integer literals, // and % are integers; real literals, / and the math
// functions are real; comparisons, &&, || and ! are booleans; loads take their tensor's kind
// (i32 → integer, bool → boolean, the float dtypes → real). Arithmetic on mixed operands is real
// when either side is real, otherwise integer (a boolean counts as the integer 0 or 1).
#pragma once

#include <functional>
#include <string>

#include "ir/dtype.h"
#include "ir/expr.h"

namespace solder {

enum class ValueType { integer, real, boolean };
std::string_view value_type_name(ValueType t);  // "an integer", "a real number", "a condition"

ValueType value_type_of_dtype(DType dtype);

// The type of `e`. Loads are typed through `tensor_dtype`. An operation given a type it cannot take
// (// on reals, exp of a condition, && of numbers, a real-valued index) is an Error at the
// operation's position in `file`.
ValueType type_of(const Expr& e, const std::function<DType(const std::string&)>& tensor_dtype,
                  const std::string& file);

}  // namespace solder
