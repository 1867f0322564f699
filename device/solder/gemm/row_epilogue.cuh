// The GEMM skeleton's row-reduction epilogue (sm90_gemm.cuh): a block whose column tile covers all N
// columns hands each output row, as it sits in the accumulator registers, to a generated functor that
// reduces it (max, Σ exp, top-k, …) and stores only the row's results. moe_routing's logits → softmax →
// top-k is the case: the logits never leave the chip.
//
//   struct Epilogue {
//     static constexpr bool row_reduction = true;
//     template <class Row>
//     __device__ void row(int batch, int row, bool row_in, const Row& values) const;
//   };
//
// The skeleton calls row() for both rows of every thread of a consumer warp (rows past M too, with
// row_in false: the quad's shuffles need all 32 lanes), after the last wgmma of a tile (and after
// split-K's merge). Row = RowFragment<BN>: the BN/4 values of the row that this lane holds, their
// columns, and which of them lie inside N. The four lanes of a quad (lane / 4 equal) hold one row
// together; the quad_* helpers below combine their partial results (2 shuffles). Which threads call
// them: all 32 lanes of the warp, with the same control flow (every lane of a quad on the same row).
#pragma once

namespace solder::gemm {

// One row of the m64nBNk accumulator as one lane holds it: register i of the row is column
// col0 + 8·(i/2) + i%2 (wgmma.cuh's layout: register 4j + 2h + p of row half h).
template <int BN>
struct RowFragment {
  static constexpr int Count = BN / 4;
  float v[Count];
  int col0;  // the lane's first column: n0 + 2·(lane % 4)
  int n;     // the product's N: columns at or past it are padding (zero-filled by TMA)
  __device__ __forceinline__ int col(int i) const { return col0 + 8 * (i / 2) + (i % 2); }
  __device__ __forceinline__ bool in(int i) const { return col(i) < n; }
};

// max with the Kernel IR's NaN rule (the executor's max_nan: a NaN wins).
__device__ __forceinline__ float max_nan(float a, float b) { return (a != a || b != b) ? (a != a ? a : b) : fmaxf(a, b); }
__device__ __forceinline__ float min_nan(float a, float b) { return (a != a || b != b) ? (a != a ? a : b) : fminf(a, b); }

// Combine one value over the 4 lanes of the quad (every lane gets the result).
__device__ __forceinline__ float quad_max(float x) {
  x = max_nan(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return max_nan(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_min(float x) {
  x = min_nan(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return min_nan(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The top-k order of the Kernel IR (and the float64 reference): NaN above everything, then larger
// values, ties to the lower index.
__device__ __forceinline__ bool topk_greater(float a, int ia, float b, int ib) {
  const bool na = a != a, nb = b != b;
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

// The K largest (key[i], index[i]) of the quad's row, descending, in every lane of the quad: K rounds
// of a lane-local scan over the keys not yet taken (skipping padding columns), a quad argmax (2 shuffle
// pairs), and the owner marking its winner taken. Ranks with no candidate left get (-inf, -1), as the
// Kernel IR's topk does when the row has fewer than K points.
template <int K, int Count>
__device__ __forceinline__ void quad_topk(const float (&key)[Count], const int (&index)[Count], const bool (&valid)[Count],
                                          float (&weight)[K], int (&which)[K]) {
  static_assert(Count <= 64, "a row fragment holds at most 64 values (BN 256)");
  unsigned long long taken = 0;
#pragma unroll
  for (int r = 0; r < K; ++r) {
    float best = -__int_as_float(0x7f800000);
    int best_index = -1;
    bool found = false;
#pragma unroll
    for (int i = 0; i < Count; ++i) {
      if (!valid[i] || ((taken >> i) & 1u)) continue;
      if (!found || topk_greater(key[i], index[i], best, best_index)) {
        best = key[i];
        best_index = index[i];
        found = true;
      }
    }
#pragma unroll
    for (int d = 1; d <= 2; d <<= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, d);
      const int other_index = __shfl_xor_sync(0xffffffffu, best_index, d);
      const bool other_found = __shfl_xor_sync(0xffffffffu, found ? 1 : 0, d) != 0;
      if (other_found && (!found || topk_greater(other, other_index, best, best_index))) {
        best = other;
        best_index = other_index;
        found = true;
      }
    }
    weight[r] = found ? best : -__int_as_float(0x7f800000);
    which[r] = found ? best_index : -1;
    // The lane that holds the winner marks it (indices are distinct within a row).
#pragma unroll
    for (int i = 0; i < Count; ++i)
      if (found && valid[i] && index[i] == best_index) taken |= 1ull << i;
  }
}

}  // namespace solder::gemm
