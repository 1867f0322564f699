// What a copy of a contraction's operand reads from memory, and whether the operand gathers rows.
//
// A copy P[s, k] = X(s, k) over S × K points (operand_copy_fit.h's conversion copies, padded_operands.h's
// padded copies) evaluates each load of X once per point. So it reads, of each global tensor X loads, at
// most S · K elements per load of it, and at most the whole tensor:
//
//   bytes_read(X) = Σ over the tensors X loads  min(|tensor|, loads of it in X · S · K · |dtype|).
//
// For a plain operand (x[m, k], cast(w[n, k], bf16), a re-pitched row) the two are the tensor. They differ
// for a gather: an embedding's A = emb[tok[t], c] reads T · C elements of a table emb[V, C] that may be far
// larger (V 32000, 4096 tokens: 33.6 MB of a 262 MB table) or smaller (a table of 1000 rows, read many
// times over: its repeated rows come from L2, the table once from memory). Counting the table's size, as
// the copies' price did before, over-prices the first by V / T and is right for the second.
//
// A row gather is an operand X(s, k) = src[i_0, ..., i_{r-2}, k] (under casts) whose leading indices use
// only the side axis s and read an integer tensor (emb[tok[t], c]: an embedding; w[idx[n], k]: selected
// weight rows) and whose last index is the reduced axis k: each of P's rows is one row of src. TMA
// cannot gather rows on sm_90a, so the skeleton stages such an operand only from a copy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

// bytes_read(X) above, over `points` = S · K; nullopt when X loads a tensor that is not in `globals`.
std::optional<int64_t> operand_bytes_read(const Expr& x, int64_t points, const std::vector<GlobalTensor>& globals);

// "emb[tok]" when X is a row gather over the side axis `side` and the reduced axis `depth` (above): the
// gathered tensor, then the index tensors in brackets; nullopt otherwise.
std::optional<std::string> row_gather(const Expr& x, const std::string& side, const std::string& depth);

}  // namespace solder
