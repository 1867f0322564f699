// Conversion copies before the GEMM skeleton (contract/operand_copy_fit.h): which operands of the
// census's mixed-dtype products are copied, into what, and the price that decides whether they are taken.
#include <gtest/gtest.h>

#include "contract/gemm_skeleton_fit.h"
#include "contract/operand_copy_fit.h"
#include "driver/compile.h"
#include "lower/lower_unfused.h"
#include "../test_util.h"

namespace solder {
namespace {

using testing::ScopedEnv;

// The whole contract of the census program NAME's only definition (lower_whole_contraction's canonical
// form, before any copy) and the program's globals.
struct Whole {
  ContractNode contract;
  std::vector<GlobalTensor> globals;
};

std::optional<Whole> whole(const std::string& name, std::vector<std::pair<std::string, int64_t>> dims) {
  auto program = std::make_shared<Program>(parse_program_file(std::string(SOLDER_SOURCE_DIR) + "/tests/census/" + name + ".sol"));
  BoundProgram bound = bind_program(program, SizeChoice{false, std::move(dims)});
  ScopedEnv force("SOLDER_OPERAND_COPIES", "force");
  std::string why;
  auto kernel = lower_whole_contraction(bound, bound.defs.size() - 1, &why);
  if (!kernel) {
    ADD_FAILURE() << name << ": " << why;
    return std::nullopt;
  }
  return Whole{*kernel->body.back().as<ContractNode>(), program_globals(bound)};
}

const std::vector<std::pair<std::string, int64_t>> k4096 = {{"M", 4096}, {"N", 4096}, {"K", 4096}};

// x.bf16 @ w.f32: B (the f32 weight, which the contract rounds to bf16) is copied into bf16 [N, K]; A is
// staged as it is; the skeleton takes the copied contract, and at 4096³ the copy pays.
TEST(OperandCopyFit, AnF32WeightIsCopiedIntoBf16) {
  auto w = whole("mixed_bf16_f32w", k4096);
  ASSERT_TRUE(w);
  EXPECT_FALSE(fit_gemm_skeleton(w->contract, w->globals).problem);
  std::string why;
  auto copies = fit_operand_copies(w->contract, w->globals, &why);
  ASSERT_TRUE(copies) << why;
  ASSERT_EQ(copies->copies.size(), 1u);
  const OperandCopy& b = copies->copies[0];
  EXPECT_EQ(b.operand, "B");
  EXPECT_EQ(b.copy.dtype, DType::bf16);
  EXPECT_EQ(b.copy.shape, (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(b.bytes_read, 4096 * 4096 * 4);
  EXPECT_TRUE(copies->pays()) << copies->figures();
  EXPECT_LT(copies->copy_us + copies->skeleton_us, copies->mma_sync_us);
  std::vector<GlobalTensor> globals = w->globals;
  globals.push_back(b.copy);
  GemmSkeletonFit fit = fit_gemm_skeleton(with_copies(w->contract, copies->copies), globals);
  ASSERT_TRUE(fit.problem) << fit.refusal;
  EXPECT_EQ(fit.problem->b.tensor, b.copy.name);
  EXPECT_TRUE(fit.problem->b.k_major);
}

// The copy's price: at the census's default 512³ the copy and the skeleton's launch cost more than the
// mma.sync kernel is predicted to take, so the copy is not taken (unless forced).
TEST(OperandCopyFit, ASmallProductDoesNotPayForItsCopy) {
  auto w = whole("mixed_cast_bf16", {});
  ASSERT_TRUE(w);
  std::string why;
  auto copies = fit_operand_copies(w->contract, w->globals, &why);
  ASSERT_TRUE(copies) << why;
  EXPECT_FALSE(copies->pays()) << copies->figures();
  ScopedEnv force("SOLDER_OPERAND_COPIES", "force");
  EXPECT_TRUE(copies->pays());
}

// fp8 with B stored [K, N]: a transposing copy of B into e4m3 [N, K] (exact: the same type); f16 x e4m3:
// B widened to f16 (exact); each the skeleton then takes.
TEST(OperandCopyFit, Fp8IsTransposedAndE4m3IsWidened) {
  for (auto [name, dtype] : {std::pair{"mm_e4m3_nn", DType::f8e4m3}, std::pair{"mixed_f16_e4m3w", DType::f16}}) {
    SCOPED_TRACE(name);
    auto w = whole(name, k4096);
    ASSERT_TRUE(w);
    std::string why;
    auto copies = fit_operand_copies(w->contract, w->globals, &why);
    ASSERT_TRUE(copies) << why;
    ASSERT_EQ(copies->copies.size(), 1u);
    EXPECT_EQ(copies->copies[0].operand, "B");
    EXPECT_EQ(copies->copies[0].copy.dtype, dtype);
    EXPECT_TRUE(copies->pays()) << copies->figures();
  }
}

// bf16 x f16: the canonicalizer's T is tf32 (exact for both); both operands are copied into f32, K-major
// (A [M, K] as it is, B [K, N] transposed into [N, K]), and the skeleton takes the tf32 contract reading
// them. The copies pay at the census's 512³ (against the fused mma.sync kernel's rate) and at 4096³.
TEST(OperandCopyFit, Bf16TimesF16IsCopiedIntoF32ForTheTf32Skeleton) {
  for (auto dims : {std::vector<std::pair<std::string, int64_t>>{}, k4096}) {
    const int64_t n = dims.empty() ? 512 : 4096;
    SCOPED_TRACE(n);
    auto w = whole("mixed_bf16_f16", dims);
    ASSERT_TRUE(w);
    EXPECT_EQ(w->contract.type, MmaType::tf32);
    EXPECT_FALSE(fit_gemm_skeleton(w->contract, w->globals).problem);
    std::string why;
    auto copies = fit_operand_copies(w->contract, w->globals, &why);
    ASSERT_TRUE(copies) << why;
    ASSERT_EQ(copies->copies.size(), 2u);
    std::vector<GlobalTensor> globals = w->globals;
    for (size_t i = 0; i < 2; ++i) {
      const OperandCopy& copy = copies->copies[i];
      EXPECT_EQ(copy.operand, i == 0 ? "A" : "B");
      EXPECT_EQ(copy.copy.dtype, DType::f32);
      EXPECT_EQ(copy.copy.shape, (std::vector<int64_t>{n, n}));
      EXPECT_EQ(copy.bytes_read, n * n * 2);
      globals.push_back(copy.copy);
    }
    EXPECT_NE(copies->copies[0].why.find("A is bf16, T is tf32"), std::string::npos) << copies->copies[0].why;
    EXPECT_NE(copies->copies[1].why.find("B is f16, T is tf32"), std::string::npos) << copies->copies[1].why;
    EXPECT_TRUE(copies->pays()) << copies->figures();
    GemmSkeletonFit fit = fit_gemm_skeleton(with_copies(w->contract, copies->copies), globals);
    ASSERT_TRUE(fit.problem) << fit.refusal;
    EXPECT_TRUE(fit.problem->a.k_major);
    EXPECT_TRUE(fit.problem->b.k_major);
    EXPECT_EQ(fit.problem->a.dtype, DType::f32);
  }
}

// bf16 x f16's copies are priced against the fused kernels' scalar loop (neither mma.sync kernel takes tf32;
// its rate measured on the H200: kScalarLoopTensorFraction): at 256³ they pay, at 64³ they do not.
TEST(OperandCopyFit, Bf16TimesF16IsPricedAgainstTheScalarLoop) {
  for (int64_t n : {256, 64}) {
    SCOPED_TRACE(n);
    auto w = whole("mixed_bf16_f16", {{"M", n}, {"N", n}, {"K", n}});
    ASSERT_TRUE(w);
    std::string why;
    auto copies = fit_operand_copies(w->contract, w->globals, &why);
    ASSERT_TRUE(copies) << why;
    EXPECT_TRUE(copies->scalar);
    EXPECT_FALSE(copies->gathered);
    EXPECT_EQ(copies->alternative_fraction(), kScalarLoopTensorFraction);
    EXPECT_NE(copies->figures().find("scalar loop"), std::string::npos) << copies->figures();
    EXPECT_EQ(copies->pays(), n == 256) << copies->figures();
  }
}

// Everything is refused when the copies are off.
TEST(OperandCopyFit, RefusesWhenOff) {
  auto w = whole("mixed_bf16_f32w", k4096);
  ASSERT_TRUE(w);
  ScopedEnv off("SOLDER_OPERAND_COPIES", "0");
  std::string why;
  EXPECT_FALSE(fit_operand_copies(w->contract, w->globals, &why));
  EXPECT_NE(why.find("SOLDER_OPERAND_COPIES=0"), std::string::npos) << why;
}

}  // namespace
}  // namespace solder
