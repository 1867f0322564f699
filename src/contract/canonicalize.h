// The canonicalizer of contractions: the one place that decides whether a `reduce sum` is a matrix
// product, and in what form (kernel_ir.h, `contract`). The planner, the lowering and the backends
// ask it; nobody else pattern-matches a `reduce sum`.
//
// A summand is read as a sum of terms, each a product of factors (src/algebra's sum and product
// normal forms: + - × / and negation flattened, constants collected). For a reduce over the axes R
// with kept axes D:
//   * a term that uses no axis of R is k-free: it becomes the epilogue bias (|R| · term, which
//     needs an unconditional reduce: no `where`);
//   * every other term is split into its factors, each classified by the axes it uses:
//       no axis of R            a scale, applied after the dot product (row, column or scalar);
//       axes of R only           a k-only factor, folded into the A operand;
//       axes of R and of D       an operand factor. The operand factors are split into two sides
//                                A and B so that no axis of D is used by both sides except batch
//                                axes (used by both); A's other axes are the rows, B's the columns.
//     Several terms must agree on rows, columns and scale; they accumulate into one accumulator.
//   * several reduced axes are one K, flattened in order;
//   * a concatenation along K — an operand factor select(c, P, Q) whose condition c uses a reduced
//     axis and no kept axis (nerf_mlp's cat([x, h])) — becomes K ranges: one product term with
//     select(c, P, 0), one with select(c, 0, Q) (nested concatenations split again, at most 8
//     ranges), accumulating into one acc. Each range's operand is exact in the type of its branch
//     (the zero-fill is exact in every type), so T follows the tensors concatenated.
// The MMA input type T (the precision policy):
//   * an operand that is exactly a value of a narrow type U — a load of a bf16, f16 or fp8 tensor,
//     a cast to one, or a select between such values — is exact in U; two exact operands get the
//     narrowest type holding both (bf16·bf16 → bf16, fp8·bf16 → bf16, e4m3·e5m2 → f16,
//     bf16·f16 → tf32): rounding to T then changes nothing;
//   * a computed operand (x · g in f32) is rounded to the 16-bit type of the tensors it reads when
//     the program is in the 16-bit tolerance class (every output is 16-bit or narrower, or an
//     integer), which the fusion report states; otherwise T is f32 (no rounding: CUDA cores), so an
//     f32 program keeps f32 accuracy;
//   * in the fp8 tolerance class (the 16-bit class, and the program reads an fp8 input: its outputs
//     are checked at 5e-2), a computed operand that reads no 16-bit tensor and whose partner is exact
//     in an fp8 type is rounded to that type: attention's P = exp(s − m) times an e4m3 V becomes an
//     e4m3 · e4m3 product (the rounding of P that FlashAttention-3's fp8 path makes; P ≤ 1, so its
//     relative rounding is e4m3's 2^-4, where a normalised P = e / Σe would fall below e4m3's range).
//     The fusion report states it.
//   * in the f32 class, a product whose operands are all f32 (none exact in a narrower type: f32
//     loads or computed values) with at least kThreeTf32MinSide rows and as many columns takes
//     T = 3xtf32 (kernel_ir.h: three tf32 products of the operands' hi and lo parts, about f32
//     accuracy on the tensor cores), reported "3xTF32 because all operands are f32"; a smaller one
//     (below one wgmma tile the split buys nothing; a matrix-vector product is memory-bound), or
//     any with $SOLDER_F32_CONTRACT=f32, keeps T = f32 (CUDA cores) and the report says why.
// What it cannot put in this form stays a `reduce`, and the refusal says why.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/verifier.h"
#include "kernel/kernel_ir.h"

namespace solder {

// Whether all-f32 products may take T = 3xtf32: $SOLDER_F32_CONTRACT unset or anything but "f32"
// (kF32ContractThreeTf32Default when unset); "f32" keeps them on CUDA cores (T = f32), main's plan
// before the policy, for A/B runs.
constexpr bool kF32ContractThreeTf32Default = true;
bool f32_contract_three_tf32();
// The fewest rows, and columns, of a product that takes 3xTF32.
constexpr int64_t kThreeTf32MinSide = 64;

// The program's tolerance class, which decides how computed operands are rounded.
struct ContractPolicy {
  bool sixteen_bit = false;  // every output is 16-bit or narrower (or an integer)
  std::string why;           // the reason, for the report
  bool fp8 = false;          // sixteen_bit, and an input is fp8 (f8e4m3, f8e5m2): tolerance class 5e-2
};

// The policy of a program: from the dtypes of its outputs (name, dtype), and of its inputs.
ContractPolicy contract_policy_for(const std::vector<std::pair<std::string, DType>>& outputs,
                                   const std::vector<std::pair<std::string, DType>>& inputs = {});
ContractPolicy contract_policy_of(const KernelProgram& program);
ContractPolicy contract_policy_of(const BoundProgram& program);

struct Canonicalization {
  std::optional<ContractNode> contract;  // the canonical form, when there is one
  std::vector<std::string> notes;        // what was factored out, and T with its reason
  std::string refusal;                   // why not, when there is none
};

// The dtype of a tensor (buffer or global) the summand loads, when it is known.
using DTypeOf = std::function<std::optional<DType>(const std::string& tensor)>;

// The narrow type every value of `e` belongs to, when there is one: a load of a bf16, f16 or fp8
// tensor, a cast to one, a select between two values of one such type, or a negation of one.
std::optional<MmaType> exact_mma_type(const Expr& e, const DTypeOf& dtype_of);

// Whether `e` is the constant 0.
bool is_constant_zero(const Expr& e);

// Two K ranges of one operand as one expression: x and y zero-filled selects over the same
// conditions whose non-zero branches do not overlap (select(c, P, 0) and select(c, 0, Q) give
// select(c, P, Q)); nothing when they do not merge. Where the ranges partition K, the merged operand
// times the shared other operand is, point by point, the sum of the two range terms.
std::optional<Expr> merge_k_ranges(const Expr& x, const Expr& y);

// The product terms with K ranges that share their other operand merged back into one term each
// (the form a backend that evaluates the operand per element runs with one product per K step).
std::vector<ContractTerm> merge_k_range_terms(const std::vector<ContractTerm>& terms);

// The canonical form of `reduce` (any op; only sums are contractions).
Canonicalization canonicalize_contraction(const ReduceNode& reduce, const DTypeOf& dtype_of, const ContractPolicy& policy);

}  // namespace solder
