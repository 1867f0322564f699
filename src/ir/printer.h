// The canonical text of expressions and programs (docs/language.md, "Canonical form").
//
// print_program(parse(text)) is the canonical form of `text`; parsing and printing it again gives
// the same string. Expressions are printed with the fewest parentheses the grammar's precedence
// needs; numbers are printed with the fewest digits that read back to the same double.
#pragma once

#include <string>

#include "ir/expr.h"
#include "ir/program.h"

namespace solder {

std::string print_expr(const Expr& e);
std::string print_program(const Program& program);
// One definition line, as it appears in print_program.
std::string print_definition(const Definition& def);
// A number as the language writes it: integers without a point, reals with one ("2.0"), inf.
std::string format_number(double value, bool is_integer);

}  // namespace solder
