// Pass: a whole contraction whose result is only reduced along its rows runs with those reductions as
// the GEMM skeleton's epilogue (device/solder/gemm/row_epilogue.cuh), one kernel instead of two.
//
// The rule, on the compiled Kernel IR (after the contractions are canonical), for a kernel W that is
// one whole `contract` G[m, n] = Σ_k A·B into an f32 intermediate G (no epilogue, no pair, no guard,
// one row and one column axis), and the one later kernel R that reads G:
//
//   fused  ⇔  N ≤ kRowEpilogueMaxColumns (one column tile of the skeleton holds a whole row)
//             and R reads G only by staging whole rows, copy D[t, e] = G[g·TR + t, e] over t < TR,
//                 e < N (g R's one grid variable)
//             and R's other statements are row reductions over the full N range and their per-row
//                 consumers (row_epilogue_statements: fill, reduce sum/max/min/topk over e < N of an
//                 expression of D[t, e], per-row values and globals; map of per-row values; stores of
//                 per-row values and top-k lists)
//             and nothing between W and R writes an operand of the product,
//
// Then R takes W's product in place of its first staging copy (contract D[t, e] = Σ_k A(g·TR + t, k) ·
// B(k, e) over t < TR, e < N: the logits of R's rows, f32 from the accumulator as G held them), its
// other staging copies copy D, and W and G go. The program's meaning is unchanged (G was f32, stored
// unrounded); the CUDA backend runs R as one skeleton launch (gemm_row_epilogue_writer.h), the CPU
// executor as written. moe_routing's logits → softmax → top-k is the case (E ≤ 256 experts).
//
// Off unless $SOLDER_ROW_EPILOGUE=1: on the H100 (2026-11-27, bench/NOTES.md, moe-fused) the one
// kernel ran 1.5–2.6× slower than the two at every moe_routing shape (R1–R8). Its epilogue is a serial
// chain per thread (4 lanes a row, one warpgroup per SM: 12–55 µs a tile), where the row kernel spreads
// the same work over 32 lanes a row and many blocks. Where the rule takes a pair but the knob is off,
// the report says so ("qualifies").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

// The widest column tile of the GEMM skeleton (BN 256): a row longer than that has no block holding it.
constexpr int64_t kRowEpilogueMaxColumns = 256;

struct RowEpilogueFusion {
  KernelProgram program;
  std::vector<std::string> notes;  // per fused pair (and per refusal of a candidate), for the report
};

RowEpilogueFusion fuse_row_epilogues(const KernelProgram& program);

// Whether $SOLDER_ROW_EPILOGUE asks for the one-kernel form ("1"; unset or anything else: two kernels).
bool row_epilogue_enabled();

// The shape of a kernel that runs a contraction with its rows reduced in the epilogue: body[0] is the
// contract into `tile` [rows, columns] (rows of the program's product at grid_var · rows + row_var), the
// rest are the row statements. Nothing when the kernel is not of that form (`why`).
struct RowEpilogueKernel {
  std::string tile;          // D: the contract's destination
  std::string grid_var;      // g
  std::string row_var;       // t (the contract's row axis)
  std::string column_var;    // e (the contract's column axis)
  int64_t rows = 0;          // TR
  int64_t columns = 0;       // N
  int64_t m = 0;             // the product's rows (g's extent · TR, or less: the guard)
  std::vector<std::string> aliases;  // buffers that copy D whole (the other staging copies)
};
std::optional<RowEpilogueKernel> match_row_epilogue_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

// Whether `body` (after the staging copies) is made of the row statements the epilogue computes: every
// statement a fill, a reduce along the row (sum, max, min, topk) over one axis of extent `columns` of
// an expression that reads the row tiles `tiles` at [row_var, that axis], per-row buffers at [row_var]
// and globals, a map of a per-row buffer, or a copy of a per-row buffer (or a top-k list) to a global.
bool row_epilogue_statements(const Kernel& kernel, size_t first, const std::vector<std::string>& tiles, const std::string& row_var,
                             int64_t rows, int64_t columns, std::string* why);

}  // namespace solder
