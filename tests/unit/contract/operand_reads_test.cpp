// What a copy of an operand reads (contract/operand_reads.h): a gather's selected rows, not its whole table;
// a plain operand its tensor; and which operands are row gathers (an embedding's A, selected weight rows' B).
#include <gtest/gtest.h>

#include "contract/operand_reads.h"
#include "../kernel_builders.h"

namespace solder {
namespace {

using namespace kernel_builders;

// emb[tok[t], c] over T × C points: T · C elements of emb (each point reads one) and tok whole, when the
// table is larger (V 32000, T 4096: 33.6 MB, not the table's 262 MB); the table once when it is smaller
// (V 1000 under T 4096: its repeated rows are read again from L2, not memory).
TEST(OperandReads, AGatherReadsItsRowsNotItsTable) {
  const Expr a = load("emb", {load("tok", {var("t")}), var("c")});
  const std::vector<GlobalTensor> large = {input("tok", {4096}, DType::i32), input("emb", {32000, 4096}, DType::bf16)};
  EXPECT_EQ(operand_bytes_read(a, int64_t{4096} * 4096, large), int64_t{4096} * 4096 * 2 + 4096 * 4);
  const std::vector<GlobalTensor> small = {input("tok", {4096}, DType::i32), input("emb", {1000, 4096}, DType::bf16)};
  EXPECT_EQ(operand_bytes_read(a, int64_t{4096} * 4096, small), int64_t{1000} * 4096 * 2 + 4096 * 4);
  EXPECT_EQ(operand_bytes_read(a, 16, {input("emb", {10, 4}, DType::bf16)}), std::nullopt);  // tok is no global
}

// A plain operand reads its tensor (an f32 weight, cast to bf16); two loads of one tensor at most the tensor.
TEST(OperandReads, APlainOperandReadsItsTensor) {
  const std::vector<GlobalTensor> w = {input("w", {512, 256})};
  EXPECT_EQ(operand_bytes_read(make_cast(DType::bf16, load("w", {var("n"), var("k")})), 512 * 256, w), 512 * 256 * 4);
  const Expr both = make_select(less(var("k"), num(128)), load("w", {var("n"), var("k")}), load("w", {var("n"), var("k")}));
  EXPECT_EQ(operand_bytes_read(both, 512 * 256, w), 512 * 256 * 4);
}

TEST(OperandReads, RowGathers) {
  EXPECT_EQ(row_gather(load("emb", {load("tok", {var("t")}), var("c")}), "t", "c"), "emb[tok]");
  EXPECT_EQ(row_gather(make_cast(DType::bf16, load("w", {load("idx", {var("n")}), var("k")})), "n", "k"), "w[idx]");
  EXPECT_EQ(row_gather(load("x", {var("t"), var("c")}), "t", "c"), std::nullopt);                          // plain
  EXPECT_EQ(row_gather(load("emb", {var("t"), load("tok", {var("c")})}), "t", "c"), std::nullopt);          // the column gathered
  EXPECT_EQ(row_gather(load("emb", {load("tok", {var("c")}), var("c")}), "t", "c"), std::nullopt);          // the row index uses K
  EXPECT_EQ(row_gather(load("emb", {load("tok", {var("t")}), binary(BinaryOp::add, var("c"), num(1))}), "t", "c"), std::nullopt);
}

}  // namespace
}  // namespace solder
