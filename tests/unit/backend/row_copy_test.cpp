// Row copies in 16-byte vectors (KernelWriter::row_copy, kernel_writer_row_copy.cpp): nerf_mlp's three
// padded copies store one 16-byte vector per thread and step; a 16-byte-pitched source (h4, feature) is
// read as aligned vectors shifted by its offset, a source with other rows (x, dir) element by element;
// SOLDER_VECTOR_ROW_COPY=0 writes them one element per thread; a gathered row (emb[tok[r], k]) is read as
// vectors too; a map whose value computes stays element-wise. The generated code compiles
// (cuda_codegen_test, nvcc) and computes the program on the GPU (`solder run --backend cuda`, bench/NOTES.md, nerf-copies).
#include <gtest/gtest.h>

#include "backend/cuda/cuda_codegen.h"
#include "driver/compile.h"
#include "../kernel_builders.h"
#include "../fusion/fusion_test_util.h"

namespace solder {
namespace {

using testing::ScopedEnv;

// nerf_mlp's whole-A copies (SOLDER_GEMM_K_RANGES=0: h5's and hv's A copied whole, not as K ranges).
std::string nerf_source(std::vector<std::pair<std::string, int64_t>> dims = {}) {
  ScopedEnv whole("SOLDER_GEMM_K_RANGES", "0");
  BoundProgram bound = testing::bind_example("nerf_mlp", false, std::move(dims));
  return generate_cuda(compile_program(bound, CompileOptions::for_gpu()).kernels).source;
}

// The text of one generic-writer kernel: from its signature to the next kernel's header.
std::string kernel_text(const std::string& source, const std::string& name) {
  size_t begin = source.find(" " + name + "(\n");
  EXPECT_NE(begin, std::string::npos) << name;
  if (begin == std::string::npos) return "";
  size_t end = source.find("// ---- kernel", begin);
  return source.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(RowCopy, NerfMlpsCopiesStoreSixteenByteVectors) {
  const std::string source = nerf_source();
  const std::string h0 = kernel_text(source, "pad_h0"), h5 = kernel_text(source, "pad_h5"), hv = kernel_text(source, "pad_hv");
  for (auto* text : {&h0, &h5, &hv}) {
    EXPECT_FALSE(has(*text, "solder::store(&")) << *text;  // no element-wise store
    EXPECT_TRUE(has(*text, "#pragma unroll")) << *text;
  }
  // h0: 32 rows of 64 columns per block (one vector per thread), x (126-byte rows) element by element.
  EXPECT_TRUE(has(h0, "// 256 vectors of 8 elements (16 bytes of h0_a_padded), one store each\n")) << h0;
  EXPECT_TRUE(has(h0, "solder::reduce::store_vector_v4(h0_a_padded + ")) << h0;
  EXPECT_FALSE(has(h0, "window")) << h0;
  // h5: h4 at column 63, read as the two aligned vectors from column first - 64, shifted by 1; x element by element.
  EXPECT_TRUE(has(h5, "// 1280 vectors of 8 elements (16 bytes of h5_a_padded), one store each; h4 read as 2 aligned 16-byte vectors shifted by 1\n"))
      << h5;
  EXPECT_TRUE(has(h5, " - 64LL + w_ * 8;")) << h5;
  EXPECT_TRUE(has(h5, "solder::reduce::load_vector(h4 + ")) << h5;
  EXPECT_TRUE(has(h5, "window0_[(e_ + 1) / 8][(e_ + 1) % 8]")) << h5;
  EXPECT_TRUE(has(h5, "solder::to_float(x[")) << h5;
  // hv: feature at column 0, one aligned vector; dir (54-byte rows) element by element; zeros past K 283.
  EXPECT_TRUE(has(hv, "feat read as 1 aligned 16-byte vector shifted by 0\n")) << hv;
  EXPECT_TRUE(has(hv, "solder::to_float(dir[")) << hv;
  EXPECT_TRUE(has(hv, "< 283LL")) << hv;
}

// Another shape: IN 21 puts h4 at column 21 (shift 3), and 333 rows leave the last block ragged (its guard).
TEST(RowCopy, OtherOffsetsAndARaggedLastBlock) {
  const std::string h5 = kernel_text(nerf_source({{"N", 333}, {"IN", 21}, {"DIN", 11}}), "pad_h5");
  EXPECT_TRUE(has(h5, "(16 bytes of h5_a_padded), one store each; h4 read as 2 aligned 16-byte vectors shifted by 3\n")) << h5;
  EXPECT_TRUE(has(h5, " - 24LL + w_ * 8;")) << h5;
  EXPECT_TRUE(has(h5, ") continue;\n")) << h5;  // the guard of the rows past 333
  EXPECT_TRUE(has(h5, "solder::reduce::store_vector_v4(h5_a_padded + ")) << h5;
}

TEST(RowCopy, OffWritesOneElementPerThread) {
  ScopedEnv off("SOLDER_VECTOR_ROW_COPY", "0");
  const std::string h5 = kernel_text(nerf_source(), "pad_h5");
  EXPECT_TRUE(has(h5, "solder::store(&h5_a_padded[")) << h5;
  EXPECT_FALSE(has(h5, "store_vector")) << h5;
}

// Built in the Kernel IR: a concatenation into f16 rows of 16 whose second source is f32 with 64-byte rows
// (a wider element: a window of 3 aligned vectors of 4, shifted by 1) and whose first source has 6-byte
// rows (element by element); a map whose value computes (a bias and a maximum) is not a copy and stays
// element-wise.
KernelProgram one_map(Expr value, std::vector<GlobalTensor> globals) {
  using namespace kernel_builders;
  globals.push_back(output("y", {4, 16}, DType::f16));
  KernelProgram p;
  p.name = "rows";
  p.globals = std::move(globals);
  p.kernels = {kernel("rows", {{"t", 1}}, 1, {}, {map(at("y", {var("r"), var("k")}), value, over({{"r", 4}, {"k", 16}}))})};
  return p;
}

TEST(RowCopy, WiderSourcesReadAsSeveralVectors) {
  using namespace kernel_builders;
  Expr value = make_select(less(var("k"), num(3)), load("a", {var("r"), var("k")}),
                           load("b", {var("r"), binary(BinaryOp::sub, var("k"), num(3))}));
  const std::string source = generate_cuda(one_map(value, {input("a", {4, 3}, DType::f16), input("b", {4, 16})})).source;
  EXPECT_TRUE(has(source, "// 8 vectors of 8 elements (16 bytes of y), one store each; b read as 3 aligned 16-byte vectors shifted by 1\n"))
      << source;
  EXPECT_TRUE(has(source, "float window0_[3][4];")) << source;
  EXPECT_TRUE(has(source, "window0_[(e_ + 1) / 4][(e_ + 1) % 4]")) << source;
  EXPECT_TRUE(has(source, "solder::to_float(a[")) << source;
  EXPECT_TRUE(has(source, "solder::reduce::store_vector_v4(y + ")) << source;
}

// A gathered row (an embedding's copy before the skeleton, emb[tok[r], k]): the row index reads a tensor,
// the same for the whole vector, checked as every data-dependent index is; emb's 32-byte rows read as
// aligned vectors. A gather in the last index (the column read from a tensor) stays element-wise.
TEST(RowCopy, GatheredRowsReadAsVectors) {
  using namespace kernel_builders;
  const std::vector<GlobalTensor> globals = {input("tok", {4}, DType::i32), input("emb", {10, 16}, DType::f16)};
  const std::string source = generate_cuda(one_map(load("emb", {load("tok", {var("r")}), var("k")}), globals)).source;
  EXPECT_TRUE(has(source, "// 8 vectors of 8 elements (16 bytes of y), one store each; emb read as 1 aligned 16-byte vector shifted by 0\n"))
      << source;
  EXPECT_TRUE(has(source, "solder_checked_index(static_cast<long long>(tok[")) << source;
  EXPECT_TRUE(has(source, "solder::reduce::load_vector(emb + ")) << source;
  EXPECT_TRUE(has(source, "solder::reduce::store_vector_v4(y + ")) << source;
  const std::string column = generate_cuda(one_map(load("emb", {var("r"), load("tok", {var("r")})}), globals)).source;
  EXPECT_FALSE(has(column, "one store each")) << column;
  EXPECT_TRUE(has(column, "solder::store(&y[")) << column;
}

TEST(RowCopy, ComputedValuesStayElementWise) {
  using namespace kernel_builders;
  Expr value = binary(BinaryOp::max, binary(BinaryOp::add, load("x", {var("r"), var("k")}), real(1.0)), real(0.0));
  const std::string source = generate_cuda(one_map(value, {input("x", {4, 16}, DType::f16)})).source;
  EXPECT_FALSE(has(source, "one store each")) << source;
  EXPECT_TRUE(has(source, "solder::store(&y[")) << source;
}

}  // namespace
}  // namespace solder
