#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"

TEST(Smoke, ParsesAndPrints) {
  auto p = solder::parse_program("program p\ndim N = 4\nin x[N] : f32\nout y[i] = x[i] * 2\n", "t.sol");
  EXPECT_EQ(solder::print_program(p), "program p\ndim N = 4\nin x[N] : f32\nout y[i] = x[i] * 2\n");
}
