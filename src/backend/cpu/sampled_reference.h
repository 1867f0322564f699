// The float64 reference on a sample of output elements, for shapes where the full reference
// (reference.h) is too slow (paper dims: attention over 16k tokens, decode over a 16k KV cache,
// FFN 128 x 8192 x 3072).
//
// What it computes. Every sampled element has exactly the value run_reference gives it, bit for
// bit: float64 arithmetic through the same scalar functions (apply_unary / apply_binary), every
// tensor element rounded to its tensor's dtype when written, the same monoid semantics (sum from
// +0 in lexicographic r-order, prod from 1, max/min propagating NaN, argmax/argmin taking the
// first extreme with NaN extreme, topk by value descending with NaN first and ties to the lower
// index), select evaluating only the taken branch, && and || as selects.
//
// How. Demand-driven: an element of a definition's target is computed when a load needs it, by
// evaluating that definition's body over its r-space at that one p-point; loads of earlier
// targets recurse. Elements are memoised per (tensor, flat index) in a per-thread table, so one
// attention output row costs O(S·D), not O(S²·D). Cheap pointwise elements (a select between two
// loads, a ReLU) are recomputed at each use instead. A topk element computes the whole top-k list
// of its p-point (values and indices) at once. The memo is a cache only (two generations, the
// older dropped when the newer fills up), so memory stays bounded (about 70 MB per thread) and
// values never depend on it. When a later sum walks a reduction's elements in order along its
// last dim (h[m, n] for n = 0, 1, ... in an FFN), the next 32 elements of that row are computed
// together (each still in the reference's r-order), so their loads share cache lines.
// Work is spread over sampled elements with parallel_for (one memo per worker, so expensive
// intermediates shared by all samples — a decode step's projections — are computed once per
// worker); results are deterministic for a seed. When every output is sampled whole, the full
// reference runs instead (SampleOptions::allow_full_reference).
//
// Which elements. For each output, `samples_per_output` distinct elements drawn uniformly at
// random (splitmix64 seeded from the seed and the output's name), together with every required
// ("boundary") row; all elements when the output has no more than `samples_per_output`. A row is
// the run of elements along the last dim at fixed leading coordinates (for a 1-d output, a single
// element). Required rows:
//   * corner rows: every leading coordinate at the first or the last position of its dim;
//   * when a definition's body has a select whose condition compares index variables (a
//     comparison whose two sides mention at least two distinct index variables: causal,
//     sliding-window, prefix masks) or loads an i32 input (document ids): for each leading dim,
//     the rows at its first 8 positions with the other leading coordinates at 0 (the rows near
//     the diagonal); and, for each such i32 input X, the rows at each document boundary — the
//     positions p and p - 1 along X's last dim where X changes value — mapped onto the output by
//     dim label (the output's leading dim labelled like X's last dim takes p, a dim labelled like
//     one of X's leading dims takes that coordinate, the others 0); at most
//     kMaxBoundaryPositions boundaries per input (evenly spread) are taken.
// Required rows are included whole, however long the last dim.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/host_tensor.h"
#include "ir/verifier.h"

namespace solder {

struct SampleOptions {
  int64_t samples_per_output = 1024;  // random elements per output (all of them when fewer)
  uint64_t seed = 0;                  // the choice of elements is a function of (seed, output name)
  // Called now and then, from worker threads (one call at a time), with the fraction done.
  std::function<void(double)> progress;
  // When every output is sampled whole (small outputs, or a decode step whose one row is a
  // required corner row) and the full reference's tensors fit in kFullReferenceBytes, run the
  // full reference instead: the same values, computed once rather than once per thread.
  bool allow_full_reference = true;
};

inline constexpr int64_t kFullReferenceBytes = int64_t{4} << 30;

struct SampledOutput {
  std::string name;
  std::vector<int64_t> flat_indices;  // row-major flat indices, ascending, distinct
  std::vector<double> values;         // the reference's value at each index (rounded to the dtype)
};

// Samples and evaluates every output of the program, in the order of program.outputs().
// Throws Error when an input is missing or has the wrong shape, or when the reference would
// fail on an evaluated element (a load out of range, integer division by zero).
std::vector<SampledOutput> run_sampled_reference(const BoundProgram& program, const TensorSet& inputs,
                                                 const SampleOptions& options);

// The elements of `output` that every sample includes (its required rows, above), ascending.
std::vector<int64_t> required_sample_indices(const BoundProgram& program, const TensorSet& inputs,
                                             const TensorInfo& output);

// The elements run_sampled_reference evaluates for `output`, ascending and distinct.
std::vector<int64_t> sample_indices(const BoundProgram& program, const TensorSet& inputs, const TensorInfo& output,
                                    const SampleOptions& options);

// Evaluates the given elements (row-major flat indices) of any definition's target, as the full
// reference would give them.
std::vector<double> evaluate_reference_elements(const BoundProgram& program, const TensorSet& inputs,
                                                const std::string& tensor, const std::vector<int64_t>& flat_indices,
                                                const std::function<void(double)>& progress = {});

// For verification with compare_output (compare.h): the elements of a full tensor `got` at the
// sampled positions, and the sampled reference, both as 1-d tensors of `got`'s dtype.
std::pair<HostTensor, HostTensor> gather_sampled(const HostTensor& got, const SampledOutput& reference);

// At most this many document boundaries per i32 input are made required rows.
inline constexpr int64_t kMaxBoundaryPositions = 1024;

}  // namespace solder
