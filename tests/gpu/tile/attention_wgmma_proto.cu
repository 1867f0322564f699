// Prototype: FlashAttention-3-style forward attention on Hopper wgmma, built only from the tile library
// (wgmma.cuh, cp_async.cuh, fast_math.cuh). It measures whether this schedule reaches the ≥ 300 TFLOP/s target
// on vanilla attention B4 H16 S4096 D64 bf16 before the code generator emits it.
//
//   o[b,h,i,:] = Σ_j softmax_j(q[b,h,i,:] · k[b,h,j,:] / √D) v[b,h,j,:]     q, k, v, o: bf16 [B][H][S][D], D = 64
//   (causal: only j ≤ i.)
//
// Schedule. One block = 2 warpgroups (256 threads) = 128 query rows of one (b, h); warpgroup w owns rows
// 64w..64w+63. Keys stream in tiles of N = 128 (or 64) keys (K and V tiles [N][64], 128-byte swizzled, in a
// kStages-deep ring filled by cp.async from all 256 threads; one __syncthreads per tile publishes tile j+1 and
// frees tile j-1's stage). Per warpgroup and key tile j, with P_j (bf16, registers) from the previous step:
//     issue S_{j+1} = Q·K_{j+1}ᵀ          4 × wgmma m64nNk16, A = Q and B = K from shared memory
//     issue O += P_j·V_j                  N/16 × wgmma m64n64k16, A = P_j from registers, B = V (MN-major)
//     wait for S_{j+1}; softmax of S_{j+1} → P_{j+1}, row max/sum update (runs while P_j·V_j is on the tensor cores)
//     wait for P_j·V_j; rescale O by exp2(m_old − m_new)
// Softmax in base 2 with log2 e / √D folded into one FFMA per score: p = 2^(s·c − m·c).
// The row max uses fmaxf (a NaN score is not propagated as Solder's max_nan would).
//
// Variants (template arguments), to measure what each part is worth: N = 128 with 3 or 4 stages, with the
// overlap off (wait for both products before the softmax); N = 64 (108 registers) with 2 blocks per SM, whose
// independent blocks overlap one block's softmax with the other's products. Causal skips the key tiles past
// the block's last row and masks those past its first row.
//
// Run: attention_wgmma_proto [--no-causal] [--small]. Checks every variant at S=256 fully and at B4 H16 S4096 on
// 160 sampled rows (10240 elements, tile and warpgroup boundaries included) against a float64 host reference,
// then times 50 launches each (median, CUDA events) and prints µs and TFLOP/s (4·B·H·S²·D flops, half of that
// for causal). --small: only S=256 (for compute-sanitizer). Exit status non-zero when a check fails.
#include <solder/tile/cp_async.cuh>
#include <solder/tile/fast_math.cuh>
#include <solder/tile/wgmma.cuh>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

namespace st = solder::tile;
namespace wg = solder::tile::warpgroup;
using bf16 = __nv_bfloat16;

static const char* current_variant = "setup";

#define PROTO_CHECK_CUDA(call)                                                                                \
  do {                                                                                                        \
    cudaError_t status_ = (call);                                                                             \
    if (status_ != cudaSuccess) {                                                                             \
      std::printf("%s:%d: %s failed: %s (variant %s)\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_), \
                  current_variant);                                                                           \
      std::exit(2);                                                                                           \
    }                                                                                                         \
  } while (0)

constexpr int kHeadDim = 64;
constexpr int kBlockRows = 128;  // query rows per block (2 warpgroups × 64)
constexpr int kThreads = 256;
constexpr int kQTileBytes = kBlockRows * kHeadDim * 2;
// Dynamic shared memory: alignment slack, the Q tile, `stages` K and V tiles of `keys` rows.
constexpr int smem_bytes(int keys, int stages) { return 1024 + kQTileBytes + stages * 2 * keys * kHeadDim * 2; }

// ---- device side ----------------------------------------------------------------------------------------------

// Copies rows [0, ROWS) × 64 of a row-major [S][64] matrix into a Swizzle128<ROWS> tile; all 256 threads.
template <int ROWS>
__device__ __forceinline__ void load_tile(unsigned char* tile, const bf16* src) {
#pragma unroll
  for (int i = 0; i < ROWS * kHeadDim / 8 / kThreads; ++i) {
    const int chunk = threadIdx.x + i * kThreads, row = chunk / 8, col = chunk % 8 * 8;
    st::cp_async_16(tile + st::Swizzle128<ROWS>::byte_offset(row, col), src + row * kHeadDim + col);
  }
}

// Online-softmax state of the two rows a thread holds (rows g and g + 8 of its warp's 16), base-2 scaled.
struct RowState {
  float max[2];  // running max of s · c (c = log2 e / √D)
  float sum[2];  // this thread's part of Σ 2^(s·c − max)
};

// Softmax of one S tile (Accumulator layout: reg i is row (i % 4) / 2, column 8(i / 4) + 2t + i % 2) into
// the bf16 A registers of P·V. Updates `state`; returns through `correction` the factor 2^(old max − new max)
// by which O and the sums must be scaled. `mask`: set scores with key > query to −inf first (diagonal tile).
template <int kBlockKeys>
__device__ __forceinline__ void softmax_tile(wg::Accumulator<kBlockKeys>& s, RowState& state, wg::ARegisters (&p)[kBlockKeys / 16],
                                             float (&correction)[2], float scale_log2, bool mask, int query_row0, int key0) {
  const int lane = threadIdx.x % 32;
  if (mask) {
#pragma unroll
    for (int i = 0; i < kBlockKeys / 2; ++i) {
      const int query = query_row0 + (i % 4) / 2 * 8, key = key0 + i / 4 * 8 + (lane % 4) * 2 + i % 2;
      if (key > query) s.reg[i] = -INFINITY;
    }
  }
  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < kBlockKeys / 2; ++i) row_max[(i % 4) / 2] = fmaxf(row_max[(i % 4) / 2], s.reg[i]);
  float new_max[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 1));
    row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 2));
    new_max[r] = fmaxf(state.max[r], row_max[r] * scale_log2);
    correction[r] = st::fast_exp2(state.max[r] - new_max[r]);
    state.max[r] = new_max[r];
    state.sum[r] *= correction[r];
  }
#pragma unroll
  for (int i = 0; i < kBlockKeys / 2; ++i) {
    s.reg[i] = st::fast_exp2(fmaf(s.reg[i], scale_log2, -new_max[(i % 4) / 2]));
    state.sum[(i % 4) / 2] += s.reg[i];
  }
#pragma unroll
  for (int step = 0; step < kBlockKeys / 16; ++step) p[step] = wg::to_a_registers(s, step);
}

// Descriptors of every k-step of a product, computed before the wgmma.fence that starts the batch: ptxas
// serializes the wgmma of a batch (warning C7513) when ordinary instructions define their operands in between.
template <int STEPS>
struct StepDescriptors {
  std::uint64_t step[STEPS];
  __device__ __forceinline__ void pin() {
#pragma unroll
    for (int i = 0; i < STEPS; ++i) asm volatile("" : "+l"(step[i]));
  }
};

// The calling warpgroup's 64 rows of Q (k-major) and one K tile (k-major) over the 4 k-steps of D = 64.
__device__ __forceinline__ StepDescriptors<kHeadDim / 16> q_descriptors(const unsigned char* q_tile, int q_row0) {
  StepDescriptors<kHeadDim / 16> d;
#pragma unroll
  for (int step = 0; step < kHeadDim / 16; ++step) d.step[step] = wg::k_major_descriptor<kBlockRows>(q_tile, step, q_row0);
  return d;
}
template <int kBlockKeys>
__device__ __forceinline__ StepDescriptors<kHeadDim / 16> k_descriptors(const unsigned char* k_tile) {
  StepDescriptors<kHeadDim / 16> d;
#pragma unroll
  for (int step = 0; step < kHeadDim / 16; ++step) d.step[step] = wg::k_major_descriptor<kBlockKeys>(k_tile, step);
  return d;
}
// One V tile [key][d] as the MN-major B of P·V, over the 8 k-steps of 128 keys.
template <int kBlockKeys>
__device__ __forceinline__ StepDescriptors<kBlockKeys / 16> v_descriptors(const unsigned char* v_tile) {
  StepDescriptors<kBlockKeys / 16> d;
#pragma unroll
  for (int step = 0; step < kBlockKeys / 16; ++step) d.step[step] = wg::mn_major_descriptor<kBlockKeys>(v_tile, step);
  return d;
}

// Issues S = Q·Kᵀ for one key tile.
template <int kBlockKeys>
__device__ __forceinline__ void issue_scores(wg::Accumulator<kBlockKeys>& s, const StepDescriptors<kHeadDim / 16>& q,
                                             const StepDescriptors<kHeadDim / 16>& k) {
#pragma unroll
  for (int step = 0; step < kHeadDim / 16; ++step) wg::mma_ss<kBlockKeys, false>(s, q.step[step], k.step[step], step > 0);
}

// Issues O += P·V for one key tile.
template <int kBlockKeys>
__device__ __forceinline__ void issue_values(wg::Accumulator<kHeadDim>& o, const wg::ARegisters (&p)[kBlockKeys / 16],
                                             const StepDescriptors<kBlockKeys / 16>& v) {
#pragma unroll
  for (int step = 0; step < kBlockKeys / 16; ++step) wg::mma_rs<kHeadDim, true>(o, p[step], v.step[step], true);
}

// kBlockKeys: keys per tile (128, or 64: half the registers and shared memory, for 2 blocks per SM).
// kStages: K/V tiles in the ring (≥ 3: tile j + 1 is read while j's V is read and j + 2 loads).
// overlap: softmax of S_{j+1} runs while P_j·V_j is in flight (false: waits for both first, for comparison).
// kMinBlocks: blocks per SM asked of the compiler (__launch_bounds__; 2 caps registers at 128).
template <bool causal, int kBlockKeys, int kStages, bool overlap, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v, bf16* __restrict__ o, int seq,
                     float scale_log2) {
  extern __shared__ unsigned char raw_smem[];
  unsigned char* smem = raw_smem + ((1024 - static_cast<unsigned>(__cvta_generic_to_shared(raw_smem)) % 1024) % 1024);
  unsigned char* q_tile = smem;
  constexpr int kTileBytes = kBlockKeys * kHeadDim * 2;  // one K or V tile
  auto k_tile = [&](int stage) { return smem + kQTileBytes + stage * 2 * kTileBytes; };
  auto v_tile = [&](int stage) { return smem + kQTileBytes + kTileBytes + stage * 2 * kTileBytes; };

  // Causal: the longest rows (last query tiles) start first.
  const int query_tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const size_t head = static_cast<size_t>(blockIdx.y) * seq * kHeadDim;
  const bf16* k_head = k + head;
  const bf16* v_head = v + head;
  // Causal: key tiles up to the block's last row; those reaching past its first row are masked.
  const int tiles = causal ? (query_tile + 1) * kBlockRows / kBlockKeys : seq / kBlockKeys;
  auto masked = [&](int tile) { return causal && (tile + 1) * kBlockKeys - 1 > query_tile * kBlockRows; };
  auto load_keys = [&](int tile) {
    if (tile < tiles) {
      load_tile<kBlockKeys>(k_tile(tile % kStages), k_head + static_cast<size_t>(tile) * kBlockKeys * kHeadDim);
      load_tile<kBlockKeys>(v_tile(tile % kStages), v_head + static_cast<size_t>(tile) * kBlockKeys * kHeadDim);
    }
    st::cp_async_commit();  // always, so that group counts are uniform
  };

  load_tile<kBlockRows>(q_tile, q + head + static_cast<size_t>(query_tile) * kBlockRows * kHeadDim);
  for (int tile = 0; tile < kStages - 1; ++tile) load_keys(tile);

  // Through a shuffle from lane 0 the compiler knows the warpgroup index is warp-uniform, so descriptors derived
  // from it can live in uniform registers (wgmma reads its descriptors from there).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int q_row0 = warpgroup * 64;                                                    // within the block
  const int query_row0 = query_tile * kBlockRows + q_row0 + warp * 16 + lane / 4;       // this thread's first row
  wg::Accumulator<kBlockKeys> s;
  wg::Accumulator<kHeadDim> out;
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) out.reg[i] = 0.0f;
  RowState state = {{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
  wg::ARegisters p[kBlockKeys / 16];
  float correction[2];
  StepDescriptors<kHeadDim / 16> q_desc = q_descriptors(q_tile, q_row0);

  // S_0 and P_0.
  st::cp_async_wait<kStages - 2>();
  wg::fence_proxy_async();
  __syncthreads();
  {
    StepDescriptors<kHeadDim / 16> k_desc = k_descriptors<kBlockKeys>(k_tile(0));
    q_desc.pin();
    k_desc.pin();
    wg::fence();
    issue_scores(s, q_desc, k_desc);
  }
  wg::commit_group();
  wg::wait_group<0>();
  wg::fence_operand(s);
  softmax_tile(s, state, p, correction, scale_log2, masked(0), query_row0, 0);

  // One key tile; the last one (no S_{tile+1}) is a separate instantiation so that no branch sits between
  // the wgmma.fence and the mma of a batch (ptxas serializes such batches, warning C7513).
  auto step = [&](int tile, auto last_tile) {
    constexpr bool last = decltype(last_tile)::value;
    // Tile + 1 is in shared memory; every warpgroup is done with tile − 1, whose stage is refilled.
    st::cp_async_wait<kStages - 3>();
    wg::fence_proxy_async();
    __syncthreads();
    load_keys(tile + kStages - 1);
    StepDescriptors<kHeadDim / 16> k_desc = k_descriptors<kBlockKeys>(k_tile((tile + 1) % kStages));
    StepDescriptors<kBlockKeys / 16> v_desc = v_descriptors<kBlockKeys>(v_tile(tile % kStages));
    q_desc.pin();
    k_desc.pin();
    v_desc.pin();
    wg::fence_operand(out);
    wg::fence();
    if constexpr (!last) {
      issue_scores(s, q_desc, k_desc);
      wg::commit_group();
    }
    issue_values<kBlockKeys>(out, p, v_desc);
    wg::commit_group();
    if constexpr (!last) {
      if constexpr (overlap) wg::wait_group<1>();
      else wg::wait_group<0>();
      wg::fence_operand(s);
      wg::ARegisters p_next[kBlockKeys / 16];
      softmax_tile(s, state, p_next, correction, scale_log2, masked(tile + 1), query_row0, (tile + 1) * kBlockKeys);
      wg::wait_group<0>();
      wg::fence_operand(out);
      // P_tile stays live until its mma retired: otherwise the compiler, which does not know that wgmma reads
      // its A registers asynchronously, may give P_{tile+1} the same registers (ptxas then serializes, C7513).
#pragma unroll
      for (int k_step = 0; k_step < kBlockKeys / 16; ++k_step) wg::fence_operand(p[k_step]);
#pragma unroll
      for (int i = 0; i < kHeadDim / 2; ++i) out.reg[i] *= correction[(i % 4) / 2];
#pragma unroll
      for (int k_step = 0; k_step < kBlockKeys / 16; ++k_step) p[k_step] = p_next[k_step];
    } else {
      wg::wait_group<0>();
      wg::fence_operand(out);
    }
  };
  for (int tile = 0; tile + 1 < tiles; ++tile) step(tile, std::false_type{});
  step(tiles - 1, std::true_type{});

  // O / Σ, rows g and g + 8; each thread writes pairs of columns.
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = state.sum[r];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    inverse[r] = 1.0f / total;
  }
  bf16* o_rows = o + head + static_cast<size_t>(query_row0) * kHeadDim;
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; i += 2) {
    const int r = (i % 4) / 2, col = i / 4 * 8 + (lane % 4) * 2;
    *reinterpret_cast<__nv_bfloat162*>(o_rows + r * 8 * kHeadDim + col) =
        __floats2bfloat162_rn(out.reg[i] * inverse[r], out.reg[i + 1] * inverse[r]);
  }
}

// ---- host side --------------------------------------------------------------------------------------------------

struct Problem {
  int batch, heads, seq;
  bool causal;
};

static float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

// Checks rows (b, h, i) of o against float64; returns the number of wrong elements.
static int check_rows(const Problem& pr, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                      const std::vector<bf16>& o, const std::vector<size_t>& rows, double& worst_ratio, double& worst_abs) {
  const int S = pr.seq, D = kHeadDim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  int bad = 0, shown = 0;
  std::vector<double> score(S);
  for (size_t row : rows) {  // row = (b·H + h)·S + i
    const size_t head = row / S * static_cast<size_t>(S) * D;
    const int i = static_cast<int>(row % S), keys = pr.causal ? i + 1 : S;
    double mx = -INFINITY;
    for (int j = 0; j < keys; ++j) {
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += static_cast<double>(q[row * D + d]) * k[head + static_cast<size_t>(j) * D + d];
      score[j] = dot * scale;
      mx = std::max(mx, score[j]);
    }
    double total = 0;
    for (int j = 0; j < keys; ++j) total += (score[j] = std::exp(score[j] - mx));
    for (int d = 0; d < D; ++d) {
      double ref = 0, magnitude = 0;
      for (int j = 0; j < keys; ++j) {
        const double w = score[j] * v[head + static_cast<size_t>(j) * D + d];
        ref += w;
        magnitude += std::fabs(w);
      }
      ref /= total;
      magnitude /= total;
      // P rounded to bf16 (relative 2^-8 per term), O rounded to bf16 (2^-8 relative), float sums.
      const double bound = std::ldexp(1.0, -7) * magnitude + std::ldexp(1.0, -8) * std::fabs(ref) + 1e-5;
      const float got = __bfloat162float(o[row * D + d]);
      const double err = std::fabs(got - ref);
      worst_ratio = std::max(worst_ratio, err / bound);
      worst_abs = std::max(worst_abs, err);
      if (std::isnan(got) || err > bound) {
        if (shown++ < 8)
          std::printf("    wrong: b=%zu h=%zu i=%d d=%d (row %d of its query tile, warpgroup %d): %.6f vs %.6f (bound %.2e)\n",
                      row / S / pr.heads, row / S % pr.heads, i, d, i % kBlockRows, i % kBlockRows / 64, got, ref, bound);
        ++bad;
      }
    }
  }
  return bad;
}

// One compiled variant of the kernel.
struct Variant {
  const char* name;
  void (*kernel)(const bf16*, const bf16*, const bf16*, bf16*, int, float);
  bool causal;
  int smem;
};

template <bool causal, int keys, int stages, bool overlap, int min_blocks>
Variant make_variant(const char* name) {
  return {name, attention_kernel<causal, keys, stages, overlap, min_blocks>, causal, smem_bytes(keys, stages)};
}

// Runs every variant of the problem's masking on one set of inputs: checks it (all rows when `full_check`,
// else a sample), then times it when `timed`. Returns false when a check fails.
static bool run(const Problem& pr, const std::vector<Variant>& variants, bool full_check, bool timed) {
  const size_t elements = static_cast<size_t>(pr.batch) * pr.heads * pr.seq * kHeadDim;
  std::printf("== %s B=%d H=%d S=%d D=%d\n", pr.causal ? "causal" : "vanilla", pr.batch, pr.heads, pr.seq, kHeadDim);
  if (pr.seq % kBlockRows != 0) {
    std::printf("  S must be a multiple of %d\n", kBlockRows);
    return false;
  }
  std::mt19937 rng(1234 + pr.seq + pr.causal);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(elements), k(elements), v(elements);
  std::vector<bf16> qb(elements), kb(elements), vb(elements);
  // q, k in [-2, 2] so that softmax rows are far from uniform (a misplaced score changes the output visibly).
  for (size_t i = 0; i < elements; ++i) {
    q[i] = bf16_round(2 * uniform(rng));
    k[i] = bf16_round(2 * uniform(rng));
    v[i] = bf16_round(uniform(rng));
    qb[i] = __float2bfloat16(q[i]);
    kb[i] = __float2bfloat16(k[i]);
    vb[i] = __float2bfloat16(v[i]);
  }
  std::vector<size_t> rows;
  const size_t total_rows = static_cast<size_t>(pr.batch) * pr.heads * pr.seq;
  if (full_check) {
    for (size_t r = 0; r < total_rows; ++r) rows.push_back(r);
  } else {
    // Tile and warpgroup boundaries of the first and last heads, then random rows.
    for (int i : {0, 1, 7, 8, 15, 16, 63, 64, 127, 128, pr.seq / 2, pr.seq - 65, pr.seq - 64, pr.seq - 1}) {
      rows.push_back(static_cast<size_t>(i));
      rows.push_back(total_rows - pr.seq + i);
    }
    std::uniform_int_distribution<size_t> pick(0, total_rows - 1);
    while (rows.size() < 160) rows.push_back(pick(rng));
  }
  bf16 *dq, *dk, *dv, *dout;
  PROTO_CHECK_CUDA(cudaMalloc(&dq, elements * 2));
  PROTO_CHECK_CUDA(cudaMalloc(&dk, elements * 2));
  PROTO_CHECK_CUDA(cudaMalloc(&dv, elements * 2));
  PROTO_CHECK_CUDA(cudaMalloc(&dout, elements * 2));
  PROTO_CHECK_CUDA(cudaMemcpy(dq, qb.data(), elements * 2, cudaMemcpyHostToDevice));
  PROTO_CHECK_CUDA(cudaMemcpy(dk, kb.data(), elements * 2, cudaMemcpyHostToDevice));
  PROTO_CHECK_CUDA(cudaMemcpy(dv, vb.data(), elements * 2, cudaMemcpyHostToDevice));
  const dim3 grid(pr.seq / kBlockRows, pr.batch * pr.heads);
  const float scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(kHeadDim)));
  const double flops = 4.0 * pr.batch * pr.heads * static_cast<double>(pr.seq) * pr.seq * kHeadDim * (pr.causal ? 0.5 : 1.0);
  bool ok = true;
  for (const Variant& variant : variants) {
    if (variant.causal != pr.causal) continue;
    current_variant = variant.name;
    PROTO_CHECK_CUDA(cudaMemset(dout, 0xFF, elements * 2));  // NaN: every element must be written
    variant.kernel<<<grid, kThreads, variant.smem>>>(dq, dk, dv, dout, pr.seq, scale_log2);
    PROTO_CHECK_CUDA(cudaGetLastError());
    PROTO_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<bf16> out(elements);
    PROTO_CHECK_CUDA(cudaMemcpy(out.data(), dout, elements * 2, cudaMemcpyDeviceToHost));
    double worst_ratio = 0, worst_abs = 0;
    const int bad = check_rows(pr, q, k, v, out, rows, worst_ratio, worst_abs);
    ok &= bad == 0;
    std::printf("  %-24s check %s: %zu elements (%zu rows%s), %d wrong, worst |error| %.3e, worst error/bound %.3f\n", variant.name,
                bad ? "FAIL" : "PASS", rows.size() * kHeadDim, rows.size(), full_check ? ", all" : ", sampled", bad, worst_abs, worst_ratio);
    if (!timed) continue;
    cudaEvent_t start, stop;
    PROTO_CHECK_CUDA(cudaEventCreate(&start));
    PROTO_CHECK_CUDA(cudaEventCreate(&stop));
    for (int i = 0; i < 10; ++i) variant.kernel<<<grid, kThreads, variant.smem>>>(dq, dk, dv, dout, pr.seq, scale_log2);
    std::vector<float> times;
    for (int i = 0; i < 50; ++i) {
      PROTO_CHECK_CUDA(cudaEventRecord(start));
      variant.kernel<<<grid, kThreads, variant.smem>>>(dq, dk, dv, dout, pr.seq, scale_log2);
      PROTO_CHECK_CUDA(cudaEventRecord(stop));
      PROTO_CHECK_CUDA(cudaEventSynchronize(stop));
      float ms;
      PROTO_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(ms);
    }
    PROTO_CHECK_CUDA(cudaGetLastError());
    std::sort(times.begin(), times.end());
    const double us = times[times.size() / 2] * 1e3;
    std::printf("  %-24s time: median %.1f us (min %.1f, max %.1f over 50), %.1f TFLOP/s%s\n", variant.name, us, times.front() * 1e3,
                times.back() * 1e3, flops / us * 1e-6, pr.causal ? " (causal: half the flops counted)" : "");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  return ok;
}

int main(int argc, char** argv) {
  bool causal = true, small_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-causal")) causal = false;
    else if (!std::strcmp(argv[i], "--small")) small_only = true;
    else {
      std::printf("usage: attention_wgmma_proto [--no-causal] [--small]\n");
      return 2;
    }
  }
  cudaDeviceProp prop;
  PROTO_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  PROTO_CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("device: %s, %d SMs, clock %d MHz\n", prop.name, prop.multiProcessorCount, clock_khz / 1000);
  // The first variant of each masking is the proposed schedule; the others measure what its parts are worth.
  const std::vector<Variant> variants = {
      make_variant<false, 128, 3, true, 1>("vanilla n128 s3 overlap"),
      make_variant<false, 128, 4, true, 1>("vanilla n128 s4 overlap"),
      make_variant<false, 128, 3, false, 1>("vanilla n128 s3 serial"),
      make_variant<false, 64, 4, true, 2>("vanilla n64 s4 overlap 2/SM"),
      make_variant<true, 128, 3, true, 1>("causal n128 s3 overlap"),
      make_variant<true, 64, 4, true, 2>("causal n64 s4 overlap 2/SM"),
  };
  for (const Variant& variant : variants) {
    cudaFuncAttributes attributes;
    PROTO_CHECK_CUDA(cudaFuncGetAttributes(&attributes, variant.kernel));
    PROTO_CHECK_CUDA(cudaFuncSetAttribute(variant.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, variant.smem));
    int blocks = 0;
    PROTO_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, variant.kernel, kThreads, variant.smem));
    std::printf("kernel %-24s: %d registers/thread, %zu bytes local (spill), %d bytes dynamic smem, %d threads, %d block(s)/SM\n",
                variant.name, attributes.numRegs, attributes.localSizeBytes, variant.smem, kThreads, blocks);
  }
  bool ok = true;
  ok &= run({1, 2, 256, false}, variants, true, false);
  if (!small_only) ok &= run({4, 16, 4096, false}, variants, false, true);
  if (causal) {
    ok &= run({1, 2, 256, true}, variants, true, false);
    if (!small_only) ok &= run({4, 16, 4096, true}, variants, false, true);
  }
  std::printf("%s\n", ok ? "attention_wgmma_proto: all checks passed" : "attention_wgmma_proto: CHECK FAILED");
  return ok ? 0 : 1;
}
