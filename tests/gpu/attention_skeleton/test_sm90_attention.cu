// Device test of the sm_90a attention skeleton (device/solder/attention/sm90_attention.cuh) against a
// float64 host reference of the rounded inputs: bf16 and f16, head dims 64, 128 and 256, 2 and 3 consumer
// warpgroups, 2 to 4 stages, persistent blocks or one per work tile, one or two Q buffers; ragged sequence lengths (1, 17, 100, 129, 257, 300, 1000, 2048),
// seq_q ≠ seq_k, grouped-query heads, padded rows; no mask, causal (top-left, bottom-right, and an
// offset that leaves rows with no visible key: zeros), and three score functors (softcap, an ALiBi-style
// bias that depends on row, column and head, and evoformer's form with a bias (kBias): a pair bias
// [head][row][col] read from global memory plus a finite column mask bias 1e9 · (keep[batch][col] − 1)).
// The same score with the bias staged by TMA into the K stages (kStagedBias: a bf16 pair-bias tile and
// the keep bytes; each alone too), ragged key counts with padded rows; and with evoformer's sigmoid gate
// in a preloading epilogue (kPreload) at 4 and 6 stages (hd64 and hd32 padded).
// Head dim 32 runs in the hd64 configurations with Q, K and V of 32 columns (TMA zero-fills columns
// 32..63; the epilogue stores the first 32 only).
//
// Affine scores (ALiBi's form, kAffine) with the row shift and with two FFMA per score, at hd64, hd128, f16;
// the scaled row shift (kAffinePositiveA: s / a by one FFMA with an immediate) and its column term by the
// tensor cores (kAffineColumnMma).
// Every output is poisoned with NaN before each run and NaN never passes; row padding of Q, K and V
// holds NaN, so a read past HeadDim fails too. Each case runs twice and must give the same bits (a
// race shows up as a moving result): once with one block per work tile, once with 3 persistent blocks
// looping over all of them (configurations with Persistent; the others run one block per tile twice). Exit 0 when every case passes, 1 on a failure, 3 on a CUDA error.
// Build and run: tests/gpu/attention_skeleton/run.sh.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention_test_util.h"
#include "solder/tile/fast_math.cuh"

using namespace attention_test;
using solder::attention::CausalMask;
using solder::attention::Config;
using solder::attention::NoMask;
using solder::attention::PlainScore;
using solder::attention::SoftcapScore;

namespace {

int failures = 0, cases = 0;
// Only the cases whose label contains this text run (argv[2]; empty: every case).
std::string case_filter;
// Only the data-mask cases of boundary tiles with two or many key ids (kinds 5 and 6; argument `ids`).
bool ids_only = false;
// Persistent blocks of each case's second run (run_many_tiles sets 1 too).
int persistent_blocks = 3;
// The output bits of the last run_case (its persistent run).
std::vector<uint16_t> last_output;

// logit = dot · scale − slope(head) · |row − col| (base e; scale_log2 = log2 e).
struct AlibiScore {
  float scale_log2;
  float scale;
  int heads;
  static constexpr bool kIdentity = false;
  __host__ __device__ float slope(int bh) const { return 0.0625f * float(1 + bh % heads % 4); }
  __device__ float operator()(int bh, int row, int col, float dot) const {
    return dot * scale - slope(bh) * float(row > col ? row - col : col - row);
  }
};

// An affine score (kAffine: a·dot + u·(col − row) + w·row + c per head): ALiBi's form with slopes that
// are not powers of two (2^(−(h + 1)/2): up to 0.71, so the bias reaches ±0.71·seq), and with w, c ≠ 0
// when `offsets`. TwoFfma: the whole bias per score (kAffineTwoFfma) instead of the row shift; PositiveA: the
// scaled row shift; ColumnMma: its column term by the tensor cores (kAffineColumnMma).
template <bool TwoFfma, bool PositiveA = false, bool ColumnMma = false>
struct AffineScoreOf {
  float scale_log2;
  float scale;
  int heads;
  bool offsets;
  static constexpr bool kIdentity = false;
  static constexpr bool kAffine = true;
  static constexpr bool kAffineTwoFfma = TwoFfma;
  static constexpr bool kAffinePositiveA = PositiveA;  // a = scale > 0: the scaled row shift
  static constexpr bool kAffineColumnMma = ColumnMma;
  __host__ __device__ float slope(int bh) const { return exp2f(-0.5f * float(1 + bh % heads)); }
  __host__ __device__ float row_factor(int bh) const { return offsets ? 0.001f * float(bh % heads) - 0.0015f : 0.0f; }
  __host__ __device__ float constant(int bh) const { return offsets ? 0.25f * float(bh % 3) : 0.0f; }
  __device__ void affine(int bh, float* a, float* u, float* w, float* c) const {
    *a = scale;
    *u = slope(bh);
    *w = row_factor(bh);
    *c = constant(bh);
  }
  __device__ float operator()(int, int, int, float dot) const { return dot; }  // never called (kAffine)
};
using AffineScore = AffineScoreOf<false>;
using AffineTwoFfmaScore = AffineScoreOf<true>;
using AffineScaledScore = AffineScoreOf<false, true>;
using AffineColumnScore = AffineScoreOf<false, true, true>;

// Evoformer's score: dot · scale + pair[head][row][col] + 1e9 · (keep[batch][col] − 1) (kBias: the bias
// is read while S runs). The host copies of pair and keep are kept for the reference.
struct BiasScore {
  float scale_log2;
  float scale;
  const float* pair;
  const unsigned char* keep;
  int heads, seq_q, seq_k;
  static constexpr bool kIdentity = false;
  static constexpr bool kBias = true;
  __device__ float dot_factor(int) const { return scale; }
  __device__ float bias(int bh, int row, int col) const {
    if (row >= seq_q || col >= seq_k) return 0.0f;  // rows past seq_q are not stored, keys past seq_k masked
    return pair[(size_t(bh % heads) * seq_q + row) * seq_k + col] + 1e9f * (float(keep[size_t(bh / heads) * seq_k + col]) - 1.0f);
  }
  __device__ float operator()(int bh, int row, int col, float dot) const { return dot * scale + bias(bh, row, col); }
};
std::vector<float> host_pair;
std::vector<unsigned char> host_keep;

// A data mask (kDataTiles): query row i of batch b sees key j when ids_q[b][i] == ids_k[b][j] (document
// ids; `less_equal`: ids_q ≤ ids_k instead). Rows that see no key get NaN (kEmptyRowNaN), as the
// program's softmax (0/0). The host copies are kept for the reference.
struct DataMask {
  const int* ids_q;
  const int* ids_k;
  int heads, seq_q, seq_k;
  bool less_equal;
  static constexpr bool kDataTiles = true;
  static constexpr bool kOneIdTiles = true;  // boundary tiles of one key id: one compare per row
  static constexpr bool kEmptyRowNaN = true;
  static constexpr int kMaxKeyTiles = 64;  // seq_k ≤ 64 · BN
  __device__ void key_tiles(int, int, int, int seq_k_, int bn, int* begin, int* end) const {
    *begin = 0;
    *end = (seq_k_ + bn - 1) / bn;
  }
  __device__ bool partial(int, int, int, int, int) const { return true; }
  __device__ int row_id(int bh, int row) const { return ids_q[size_t(bh / heads) * seq_q + row]; }
  __device__ int col_id(int bh, int col) const { return ids_k[size_t(bh / heads) * seq_k + col]; }
  __device__ bool match(int, int r, int c) const { return less_equal ? r <= c : r == c; }
  __device__ int tile_class(int, int row_lo, int row_hi, int col_lo, int col_hi) const {
    if (less_equal) return row_hi <= col_lo ? 1 : row_lo > col_hi ? 0 : 2;
    if (col_hi < row_lo || col_lo > row_hi) return 0;
    return row_lo == row_hi && col_lo == col_hi && row_lo == col_lo ? 1 : 2;
  }
  __device__ bool visible(int bh, int row, int col) const { return match(bh, row_id(bh, row), col_id(bh, col)); }
};
std::vector<int> host_ids_q, host_ids_k;
// The same mask with the keys' ids in groups (kColGroups: one group per batch, every head of a batch
// reads its ids): persistent blocks classify from a table of the key tiles' id ranges per block.
struct GroupedDataMask : DataMask {
  int batch;
  static constexpr int kColGroups = 4;  // batch ≤ 4
  __device__ int col_groups() const { return batch; }
  __device__ int col_group(int bh) const { return bh / heads; }
  __device__ int group_bh(int group) const { return group * heads; }
};
// The same masks with boundary tiles of one key id compared per score (kOneIdTiles false: the path
// before the per-row compare), for bit-for-bit comparisons.
struct PerScoreDataMask : DataMask {
  static constexpr bool kOneIdTiles = false;
};
struct PerScoreGroupedDataMask : GroupedDataMask {
  static constexpr bool kOneIdTiles = false;
};

// The same score with the bias staged by TMA into the K stages (kStagedBias = Bits): bit 1 the pair
// bias as a bf16 tile [head][row][col] (rows ld ≥ seq_k apart, NaN padding), bit 2 the keep bytes
// [batch][col] (rows ld ≥ seq_k apart). Without bit 1 the pair term is 0, without bit 2 the mask term.
template <int Bits>
struct StagedBiasScore {
  TensorMap bias_tile;
  TensorMap bias_column;
  float scale_log2;
  float scale;
  int heads, seq_q, seq_k;  // (seq_q, seq_k: for the host reference)
  static constexpr bool kIdentity = false;
  static constexpr bool kBias = true;
  static constexpr int kStagedBias = Bits;
  using BiasTile = __nv_bfloat16;
  using BiasColumn = unsigned char;
  __device__ float dot_factor(int) const { return scale; }
  __device__ int bias_tile_batch(int bh) const { return bh % heads; }
  __device__ int bias_column_row(int bh) const { return bh / heads; }
  __device__ float staged_bias(int, int, int, BiasTile t, BiasColumn c) const {
    return ((Bits & 1) ? __bfloat162float(t) : 0.0f) + ((Bits & 2) ? 1e9f * (float(c) - 1.0f) : 0.0f);
  }
  __device__ float bias(int, int, int) const { return 0.0f; }  // never called (staged)
  __device__ float operator()(int, int, int, float dot) const { return dot; }
};
// The same pair + mask bias declared as a sum (kStagedSum, evoformer's form since evoformer3): the
// skeleton forms the column term once per key column and adds it to the tile element per score.
struct StagedSumScore : StagedBiasScore<3> {
  static constexpr bool kStagedSum = true;
  __device__ float staged_column(int, int, BiasColumn c) const { return 1e9f * (float(c) - 1.0f); }
};

// o[bh][row][col] for col < cols (head dims below the configuration's: the padding columns are dropped).
template <Dtype T>
struct StoreCols {
  void* out;
  int ld;
  int seq;
  int cols;
  __device__ void operator()(int bh, int row, int col, float o0, float o1) const {
    if (col >= cols) return;
    Store16<T>{out, ld, seq}(bh, row, col, o0, o1);
  }
};

// The staged epilogue's interface (functors.cuh "epilogue_staged", Config::StagedEpilogue): the same
// o[bh][row][col] as StoreCols at the full head dim, the pair as one word and each row's address. A
// Config without StagedEpilogue stores it per pair through operator(), so the two paths run on one functor.
template <Dtype T>
struct StagedStore : StoreCols<T> {
  static constexpr bool kStaged = true;
  __device__ unsigned int staged_pack(int, int, int, float o0, float o1) const {
    if constexpr (T == Dtype::bf16) {
      const __nv_bfloat162 w = __floats2bfloat162_rn(o0, o1);
      return *reinterpret_cast<const unsigned int*>(&w);
    } else {
      const __half2 w = __floats2half2_rn(o0, o1);
      return *reinterpret_cast<const unsigned int*>(&w);
    }
  }
  __device__ void* staged_row(int bh, int row) const {
    return static_cast<unsigned char*>(this->out) + (size_t(bh) * this->seq + row) * this->ld * 2;
  }
};

// The same stores by TMA (functors.cuh "epilogue_tma_store"): each consumer warp's 16 staged rows by one
// cp.async.bulk.tensor store per 64 columns through out_map (o: {D, seq_q, bh}, box {64, 16, 1}, 128-byte
// swizzle; rows past seq_q clipped by the map). Per-pair stores where the Config has no staged epilogue.
template <Dtype T>
struct TmaStagedStore : StagedStore<T> {
  static constexpr bool kTmaStore = true;
  TensorMap out_map;
};

// evoformer's gated store o = sigmoid(gate[bh][row][col]) · o, col < cols, with the gate preloaded
// (kPreload: one 4-byte word of the bf16 gate per pair of columns, loaded when the work tile starts).
template <Dtype T>
struct GatedStore {
  void* out;
  const __nv_bfloat16* gate;  // [bh][seq][ld], ld even
  int ld;
  int seq;
  int cols;
  static constexpr bool kPreload = true;
  struct Preload {
    unsigned int w;
  };
  __device__ Preload preload(int bh, int row, int col) const {
    Preload p{0u};
    if (col < cols) p.w = __ldg(reinterpret_cast<const unsigned int*>(gate + (size_t(bh) * seq + row) * ld + col));
    return p;
  }
  __device__ void operator()(int bh, int row, int col, float o0, float o1, const Preload& p) const {
    if (col >= cols) return;
    const __nv_bfloat16* g = reinterpret_cast<const __nv_bfloat16*>(&p.w);
    o0 *= solder::tile::fast_sigmoid(__bfloat162float(g[0]));  // as the generator writes it (fast_math.cuh)
    o1 *= solder::tile::fast_sigmoid(__bfloat162float(g[1]));
    Store16<T>{out, ld, seq}(bh, row, col, o0, o1);
  }
};

struct Case {
  int batch, heads, heads_kv, seq_q, seq_k, pad;
};

// The host logit, mirroring each score functor in float64.
double host_logit(const PlainScore&, double dot, int, int, int, double scale) { return dot * scale; }
double host_logit(const SoftcapScore& s, double dot, int, int, int, double scale) {
  return double(s.cap) * std::tanh(dot * scale / double(s.cap));
}
double host_logit(const AlibiScore& s, double dot, int bh, int row, int col, double scale) {
  return dot * scale - double(s.slope(bh)) * std::abs(row - col);
}
template <bool TwoFfma, bool PositiveA, bool ColumnMma>
double host_logit(const AffineScoreOf<TwoFfma, PositiveA, ColumnMma>& s, double dot, int bh, int row, int col, double) {
  return dot * double(s.scale) + double(s.slope(bh)) * double(col - row) + double(s.row_factor(bh)) * double(row) + double(s.constant(bh));
}
double host_logit(const BiasScore& s, double dot, int bh, int row, int col, double) {
  return dot * double(s.scale) + double(host_pair[(size_t(bh % s.heads) * s.seq_q + row) * s.seq_k + col]) +
         1e9 * (double(host_keep[size_t(bh / s.heads) * s.seq_k + col]) - 1.0);
}
template <int Bits>
double host_logit(const StagedBiasScore<Bits>& s, double dot, int bh, int row, int col, double) {
  return dot * double(s.scale) + ((Bits & 1) ? double(host_pair[(size_t(bh % s.heads) * s.seq_q + row) * s.seq_k + col]) : 0.0) +
         ((Bits & 2) ? 1e9 * (double(host_keep[size_t(bh / s.heads) * s.seq_k + col]) - 1.0) : 0.0);
}
double host_logit(const StagedSumScore& s, double dot, int bh, int row, int col, double scale) {
  return host_logit(static_cast<const StagedBiasScore<3>&>(s), dot, bh, row, col, scale);
}
bool host_visible(const NoMask&, int, int, int) { return true; }
bool host_visible(const CausalMask& m, int, int row, int col) { return col <= row + m.offset; }
bool host_visible(const DataMask& m, int bh, int row, int col) {
  const int r = host_ids_q[size_t(bh / m.heads) * m.seq_q + row], c = host_ids_k[size_t(bh / m.heads) * m.seq_k + col];
  return m.less_equal ? r <= c : r == c;
}
// What a row that sees no key gets: NaN under a data mask (the program's 0/0), zeros otherwise.
template <class M>
double host_empty_row(const M&) {
  return solder::attention::mask_empty_row_nan<M>(0) ? NAN : 0.0;
}

// Q and K with a fixed lead block (AttentionShape::q_heads / k_heads): [batch][block][heads], the
// launch's heads at block index `at` (differential attention's q[b, 1, h]); block 1: the plain layout.
struct LeadBlock {
  int q_block = 1, q_at = 0, k_block = 1, k_at = 0;
};

// C0: the configuration of the first run (one block per work tile; C by default), which the second run
// (C on persistent blocks) must match bit for bit.
// Tma: the staged epilogue's rows stored by TMA (TmaStagedStore).
template <class C, class Score, class Mask, bool Gated = false, class C0 = C, bool Tma = false>
void run_case(const char* name, const Case& c, const Score& score, const Mask& mask, std::mt19937& rng, int D = C::HeadDim,
              LeadBlock lead = {}) {
  static_assert(C0::HeadDim == C::HeadDim && C0::BN == C::BN && C0::T == C::T, "C0 reads the same tensor maps");
  if (!case_filter.empty() && std::string(name).find(case_filter) == std::string::npos) return;
  const int bh = c.batch * c.heads, bh_kv = c.batch * c.heads_kv;
  Tensor q = make_tensor(C::T, bh * lead.q_block, c.seq_q, D, D + c.pad, &rng, 2.0f);
  Tensor k = make_tensor(C::T, bh_kv * lead.k_block, c.seq_k, D, D + c.pad, &rng, 2.0f);
  auto q_of = [&](int b) { return (b / c.heads) * c.heads * lead.q_block + lead.q_at * c.heads + b % c.heads; };
  auto k_of = [&](int g) { return (g / c.heads_kv) * c.heads_kv * lead.k_block + lead.k_at * c.heads_kv + g % c.heads_kv; };
  Tensor v = make_tensor(C::T, bh_kv, c.seq_k, D, D + c.pad, &rng, 1.0f);
  Tensor o = make_tensor(C::T, bh, c.seq_q, D, D, nullptr, 0.0f);  // all NaN
  if (D > C::HeadDim || D % 8 || (C::StagedEpilogue && D != C::HeadDim)) std::exit(3);
  TensorMap mq = make_map(q, C::QBoxRows, "q"), mk = make_map(k, C::KVBoxRows, "k"), mv = make_map(v, C::KVBoxRows, "v");
  AttentionShape shape;
  shape.batch = c.batch;
  shape.heads = c.heads;
  shape.heads_kv = c.heads_kv;
  if (lead.q_block > 1) shape.q_heads = c.heads * lead.q_block, shape.q_head0 = lead.q_at * c.heads;
  if (lead.k_block > 1) shape.k_heads = c.heads_kv * lead.k_block, shape.k_head0 = lead.k_at * c.heads_kv;
  shape.seq_q = c.seq_q;
  shape.seq_k = c.seq_k;
  // The gate of a gated case: [bh][seq_q][D] bf16 (D even: 4-byte pairs).
  Tensor gate = Gated ? make_tensor(Dtype::bf16, bh, c.seq_q, D, D, &rng, 4.0f) : Tensor{};
  auto epilogue = [&] {
    if constexpr (Gated) return GatedStore<C::T>{o.device, static_cast<const __nv_bfloat16*>(gate.device), D, c.seq_q, D};
    else if constexpr (C::StagedEpilogue && Tma) return TmaStagedStore<C::T>{{{o.device, D, c.seq_q, D}}, make_map(o, 16, "o")};
    else if constexpr (C::StagedEpilogue) return StagedStore<C::T>{{o.device, D, c.seq_q, D}};
    else return StoreCols<C::T>{o.device, D, c.seq_q, D};
  }();

  // float64 reference.
  const double scale = 1.0 / std::sqrt(double(D));
  const size_t count = size_t(bh) * c.seq_q * D;
  std::vector<double> ref(count), mag(count);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int b = 0; b < bh; ++b)
    for (int i = 0; i < c.seq_q; ++i) {
      const int g = (b / c.heads) * c.heads_kv + (b % c.heads) / (c.heads / c.heads_kv);
      std::vector<double> w(c.seq_k, 0.0);
      double mx = -INFINITY;
      for (int j = 0; j < c.seq_k; ++j) {
        if (!host_visible(mask, b, i, j)) continue;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(q.at(q_of(b), i, d)) * double(k.at(k_of(g), j, d));
        w[j] = host_logit(score, dot, b, i, j, scale);
        mx = std::max(mx, w[j]);
      }
      double total = 0;
      for (int j = 0; j < c.seq_k; ++j) {
        w[j] = host_visible(mask, b, i, j) ? std::exp(w[j] - mx) : 0.0;
        total += w[j];
      }
      for (int d = 0; d < D; ++d) {
        double acc = 0, m = 0;
        for (int j = 0; j < c.seq_k; ++j) {
          acc += w[j] * double(v.at(g, j, d));
          m += w[j] * std::fabs(double(v.at(g, j, d)));
        }
        const size_t at = (size_t(b) * c.seq_q + i) * D + d;
        ref[at] = total > 0 ? acc / total : host_empty_row(mask);
        mag[at] = total > 0 ? m / total : 0.0;
        if (Gated) {
          const double sg = 1.0 / (1.0 + std::exp(-double(gate.at(b, i, d))));
          ref[at] *= sg;
          mag[at] *= sg;
        }
      }
    }

  std::vector<uint16_t> first(count), got(count);
  // One block per work tile, then 3 persistent blocks looping over the tiles: the same bits.
  for (int run = 0; run < 2; ++run) {
    CUDA_CHECK(cudaMemset(o.device, 0xFF, o.bytes));
    if (run == 0) launch<C0>(mq, mk, mv, shape, score, mask, epilogue, 0, 0);
    else launch<C>(mq, mk, mv, shape, score, mask, epilogue, 0, persistent_blocks);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(run == 0 ? first.data() : got.data(), o.device, o.bytes, cudaMemcpyDeviceToHost));
  }
  ++cases;
  // P is rounded to 16 bits before P·V (relative 2^-8 per term for bf16), O to 16 bits (2^-8 relative).
  const double unit = C::T == Dtype::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  long long bad = 0, nan = 0, moved = 0;
  double worst = 0, err2 = 0, ref2 = 0;
  size_t first_bad = size_t(-1);
  for (size_t i = 0; i < count; ++i) {
    const double g = decode16(C::T, got[i]);
    const double err = std::fabs(g - ref[i]);
    const double bound = 2 * unit * mag[i] + unit * std::fabs(ref[i]) + 1e-5;
    const bool want_nan = std::isnan(ref[i]);  // a row that sees no key under a data mask
    if (std::isnan(g) && !want_nan) ++nan;
    if (got[i] != first[i]) ++moved;
    if (want_nan ? !std::isnan(g) : !(err <= bound)) {
      ++bad;
      if (first_bad == size_t(-1)) first_bad = i;
    }
    if (want_nan) continue;
    worst = std::max(worst, err / bound);
    err2 += (g - ref[i]) * (g - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  const bool ok = bad == 0 && nan == 0 && moved == 0;
  if (!ok) ++failures;
  // FNV-1a of the output's bits: two builds of this test (another skeleton header) on the same seed and
  // argument compute bit-identical outputs exactly when every case line carries the same hash.
  unsigned long long bits_hash = 1469598103934665603ull;
  for (size_t i = 0; i < count; ++i) bits_hash = (bits_hash ^ got[i]) * 1099511628211ull;
  std::printf("%s %-34s D%-3d B%d H%d/%d Sq%-5d Sk%-5d pad%d: %lld wrong, %lld NaN, %lld differ persistent(%d)/not, worst err/bound %.3f, rel L2 %.2e, bits %016llx\n",
              ok ? "OK  " : "FAIL", name, D, c.batch, c.heads, c.heads_kv, c.seq_q, c.seq_k, c.pad, bad, nan, moved, C::Persistent ? persistent_blocks : 0, worst,
              std::sqrt(err2 / (ref2 + 1e-300)), bits_hash);
  if (!ok && first_bad != size_t(-1)) {
    const size_t row = first_bad / D;
    std::printf("     first wrong: bh %zu row %zu d %zu: got %.6f, expected %.6f\n", row / c.seq_q, row % c.seq_q,
                first_bad % D, decode16(C::T, got[first_bad]), ref[first_bad]);
  }
  std::fflush(stdout);
  last_output = got;
  free_tensor(q);
  free_tensor(k);
  free_tensor(v);
  free_tensor(o);
  if (Gated) free_tensor(gate);
}

// FP8 (Config::T = e4m3): q, k, v e4m3 (random e4m3 values), o bf16. The reference rounds what the
// kernel rounds: P = exp(s − max s) to e4m3 (nearest even) before P·V, the row sum Σ p in full
// precision, S and the softmax in float64. The kernel rounds exp(s − running max), rescaled later by
// the correction, so each P may round differently from the reference's: per term at most half an
// e4m3 ulp in each (2^-4 relative, 2^-10 absolute below 2^-6), hence the bound 2·(2^-4·Σ p|v| +
// 2^-10·Σ|v|)/Σ p + the bf16 output's 2^-8·|o|; and the whole output within the fp8 tolerance class
// (relative L2 5e-2). Head dim D < HeadDim runs with k = D in the tensor maps (TMA zero-fills the rest).
template <class C, class Mask>
void run_fp8_case(const char* name, const Case& c, const Mask& mask, std::mt19937& rng, int D = C::HeadDim) {
  static_assert(C::T == Dtype::e4m3, "run_fp8_case: an e4m3 Config");
  if (!case_filter.empty() && std::string(name).find(case_filter) == std::string::npos) return;
  const int bh = c.batch * c.heads, bh_kv = c.batch * c.heads_kv;
  Tensor q = make_tensor(C::T, bh, c.seq_q, D, D + c.pad, &rng, 2.0f);
  Tensor k = make_tensor(C::T, bh_kv, c.seq_k, D, D + c.pad, &rng, 2.0f);
  Tensor v = make_tensor(C::T, bh_kv, c.seq_k, D, D + c.pad, &rng, 1.0f);
  Tensor o = make_tensor(Dtype::bf16, bh, c.seq_q, D, D, nullptr, 0.0f);  // all NaN
  TensorMap mq = make_map(q, C::QBoxRows, "q", C::ChunkElements), mk = make_map(k, C::KVBoxRows, "k", C::ChunkElements),
            mv = make_map(v, C::KVBoxRows, "v", C::ChunkElements);
  AttentionShape shape;
  shape.batch = c.batch;
  shape.heads = c.heads;
  shape.heads_kv = c.heads_kv;
  shape.seq_q = c.seq_q;
  shape.seq_k = c.seq_k;
  const StoreCols<Dtype::bf16> epilogue{o.device, D, c.seq_q, D};
  const double scale = 1.0 / std::sqrt(double(D));
  const PlainScore score{float(1.4426950408889634 * scale)};
  const size_t count = size_t(bh) * c.seq_q * D;
  std::vector<double> ref(count), bound(count);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int b = 0; b < bh; ++b)
    for (int i = 0; i < c.seq_q; ++i) {
      const int g = (b / c.heads) * c.heads_kv + (b % c.heads) / (c.heads / c.heads_kv);
      std::vector<double> w(c.seq_k, 0.0), p8(c.seq_k, 0.0);
      double mx = -INFINITY;
      for (int j = 0; j < c.seq_k; ++j) {
        if (!host_visible(mask, b, i, j)) continue;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(q.at(b, i, d)) * double(k.at(g, j, d));
        w[j] = dot * scale;
        mx = std::max(mx, w[j]);
      }
      double total = 0;
      for (int j = 0; j < c.seq_k; ++j) {
        w[j] = host_visible(mask, b, i, j) ? std::exp(w[j] - mx) : 0.0;
        p8[j] = decode8(Dtype::e4m3, encode8(Dtype::e4m3, float(w[j])));
        total += w[j];
      }
      for (int d = 0; d < D; ++d) {
        double acc = 0, m = 0, a = 0;
        for (int j = 0; j < c.seq_k; ++j) {
          if (!host_visible(mask, b, i, j)) continue;
          acc += p8[j] * double(v.at(g, j, d));
          m += w[j] * std::fabs(double(v.at(g, j, d)));
          a += std::fabs(double(v.at(g, j, d)));
        }
        const size_t at = (size_t(b) * c.seq_q + i) * D + d;
        ref[at] = total > 0 ? acc / total : 0.0;
        bound[at] = total > 0 ? 2 * (std::ldexp(m, -4) + std::ldexp(a, -10)) / total + std::ldexp(std::fabs(ref[at]), -8) + 1e-5 : 1e-5;
      }
    }
  std::vector<uint16_t> first(count), got(count);
  for (int run = 0; run < 2; ++run) {
    CUDA_CHECK(cudaMemset(o.device, 0xFF, o.bytes));
    if (run == 0) launch<C>(mq, mk, mv, shape, score, mask, epilogue, 0, 0);
    else launch<C>(mq, mk, mv, shape, score, mask, epilogue, 0, persistent_blocks);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(run == 0 ? first.data() : got.data(), o.device, o.bytes, cudaMemcpyDeviceToHost));
  }
  ++cases;
  long long bad = 0, nan = 0, moved = 0;
  double worst = 0, err2 = 0, ref2 = 0;
  size_t first_bad = size_t(-1);
  for (size_t i = 0; i < count; ++i) {
    const double g = decode16(Dtype::bf16, got[i]);
    const double err = std::fabs(g - ref[i]);
    if (std::isnan(g)) ++nan;
    if (got[i] != first[i]) ++moved;
    if (!(err <= bound[i])) {
      ++bad;
      if (first_bad == size_t(-1)) first_bad = i;
    }
    worst = std::max(worst, err / bound[i]);
    err2 += (g - ref[i]) * (g - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  const double rel = std::sqrt(err2 / (ref2 + 1e-300));
  const bool ok = bad == 0 && nan == 0 && moved == 0 && rel < 5e-2;
  if (!ok) ++failures;
  unsigned long long bits_hash = 1469598103934665603ull;
  for (size_t i = 0; i < count; ++i) bits_hash = (bits_hash ^ got[i]) * 1099511628211ull;
  std::printf("%s %-34s D%-3d B%d H%d/%d Sq%-5d Sk%-5d pad%d: %lld wrong, %lld NaN, %lld differ persistent(%d)/not, worst err/bound %.3f, rel L2 %.2e, bits %016llx\n",
              ok ? "OK  " : "FAIL", name, D, c.batch, c.heads, c.heads_kv, c.seq_q, c.seq_k, c.pad, bad, nan, moved, C::Persistent ? persistent_blocks : 0, worst,
              rel, bits_hash);
  if (!ok && first_bad != size_t(-1)) {
    const size_t row = first_bad / D;
    std::printf("     first wrong: bh %zu row %zu d %zu: got %.6f, expected %.6f (bound %.2e)\n", row / c.seq_q, row % c.seq_q,
                first_bad % D, decode16(Dtype::bf16, got[first_bad]), ref[first_bad], bound[first_bad]);
  }
  std::fflush(stdout);
  free_tensor(q);
  free_tensor(k);
  free_tensor(v);
  free_tensor(o);
}

// FP8 cases: head dims HeadDim and HeadDim / 2 (64 in the HeadDim 128 configuration, 32 in the HeadDim 64
// one: TMA zero-fills the rest), ragged lengths, grouped heads, padded rows, no mask and causal (top-left,
// bottom-right, an offset that leaves rows with no key).
template <class C>
void run_fp8(const char* name, std::mt19937& rng) {
  char label[96];
  for (int D : {C::HeadDim, C::HeadDim / 2}) {
    for (const Case& c : {Case{1, 1, 1, 1, 1, 0}, Case{1, 2, 2, 17, 17, 16}, Case{2, 3, 3, 100, 100, 0}, Case{1, 2, 1, 129, 300, 16},
                          Case{2, 4, 2, 257, 257, 0}, Case{1, 2, 2, 1000, 1000, 0}, Case{1, 1, 1, 2048, 2048, 0}}) {
      std::snprintf(label, sizeof label, "%s plain", name);
      run_fp8_case<C>(label, c, NoMask{}, rng, D);
      std::snprintf(label, sizeof label, "%s causal", name);
      run_fp8_case<C>(label, c, CausalMask{0}, rng, D);
    }
    std::snprintf(label, sizeof label, "%s causal bottom-right", name);
    run_fp8_case<C>(label, Case{1, 2, 1, 129, 300, 16}, CausalMask{300 - 129}, rng, D);
    std::snprintf(label, sizeof label, "%s causal offset -5", name);
    run_fp8_case<C>(label, Case{2, 3, 3, 100, 100, 0}, CausalMask{-5}, rng, D);
  }
}

const Case kShapes[] = {
    {1, 1, 1, 1, 1, 0},     {1, 2, 2, 17, 17, 8},     {2, 3, 3, 100, 100, 0},   {1, 2, 1, 129, 300, 8},
    {1, 2, 2, 300, 129, 0}, {2, 4, 2, 257, 257, 0},   {1, 2, 2, 1000, 1000, 0}, {1, 1, 1, 2048, 2048, 0},
};

template <class C, bool Functors>
void run_config(const char* name, std::mt19937& rng) {
  const float log2e = 1.4426950408889634f;
  const float scale = 1.0f / std::sqrt(float(C::HeadDim));
  const PlainScore plain{log2e * scale};
  char label[96];
  for (const Case& c : kShapes) {
    std::snprintf(label, sizeof label, "%s plain", name);
    run_case<C>(label, c, plain, NoMask{}, rng);
    std::snprintf(label, sizeof label, "%s causal", name);
    run_case<C>(label, c, plain, CausalMask{0}, rng);
  }
  std::snprintf(label, sizeof label, "%s causal bottom-right", name);
  run_case<C>(label, Case{1, 2, 1, 129, 300, 8}, plain, CausalMask{300 - 129}, rng);
  std::snprintf(label, sizeof label, "%s causal offset -5", name);
  run_case<C>(label, Case{2, 3, 3, 100, 100, 0}, plain, CausalMask{-5}, rng);
  if constexpr (Functors) {
    const SoftcapScore softcap{log2e, scale / 3.0f, 3.0f};
    const AlibiScore alibi{log2e, scale, 4};
    for (const Case& c : {Case{2, 3, 3, 100, 100, 0}, Case{1, 2, 1, 129, 300, 8}, Case{1, 2, 2, 1000, 1000, 0}}) {
      std::snprintf(label, sizeof label, "%s softcap 3", name);
      run_case<C>(label, c, softcap, NoMask{}, rng);
      std::snprintf(label, sizeof label, "%s alibi causal", name);
      run_case<C>(label, Case{c.batch, 4, c.heads_kv == 1 ? 1 : 4, c.seq_q, c.seq_k, c.pad}, alibi, CausalMask{0}, rng);
    }
  }
}

// Evoformer's score (kBias) on random pair biases in [-2, 2) and keep masks (90 % kept, key 0 always),
// at head dim D (32: the padded path).
template <class C>
void run_bias(const char* name, std::mt19937& rng, int D) {
  const float log2e = 1.4426950408889634f;
  char label[96];
  for (const Case& c : {Case{2, 3, 3, 100, 100, 0}, Case{1, 2, 2, 129, 300, 8}, Case{2, 4, 4, 256, 256, 0}, Case{1, 1, 1, 17, 1, 0}}) {
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::bernoulli_distribution kept(0.9);
    host_pair.assign(size_t(c.heads) * c.seq_q * c.seq_k, 0.0f);
    for (auto& x : host_pair) x = dist(rng);
    host_keep.assign(size_t(c.batch) * c.seq_k, 1);
    for (size_t i = 0; i < host_keep.size(); ++i) host_keep[i] = i % c.seq_k == 0 ? 1 : kept(rng);
    float* pair = nullptr;
    unsigned char* keep = nullptr;
    CUDA_CHECK(cudaMalloc(&pair, host_pair.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&keep, host_keep.size()));
    CUDA_CHECK(cudaMemcpy(pair, host_pair.data(), host_pair.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(keep, host_keep.data(), host_keep.size(), cudaMemcpyHostToDevice));
    const BiasScore score{log2e, 1.0f / std::sqrt(float(D)), pair, keep, c.heads, c.seq_q, c.seq_k};
    std::snprintf(label, sizeof label, "%s pair+mask bias", name);
    run_case<C>(label, c, score, NoMask{}, rng, D);
    CUDA_CHECK(cudaFree(pair));
    CUDA_CHECK(cudaFree(keep));
  }
}

// The staged bias (kStagedBias = Bits) on the same random pair biases and keep masks, ragged key counts
// (the pair rows and the keep rows padded to 8 and 16 elements for TMA), at head dim D.
inline TensorMap make_byte_map(const unsigned char* device, int rows, int cols, int ld) {
  rt::GemmOperand g;
  g.dtype = rt::GemmDtype::e4m3;  // 1 byte
  g.k_major = true;
  g.rows = rows;
  g.k = cols;
  g.ld = ld;
  g.batch = 1;
  g.tile_rows = 1;
  g.tile_k = 128;
  g.swizzle = false;
  g.base = reinterpret_cast<uintptr_t>(device);
  rt::TmaEncodeArgs args;
  const std::string problem = rt::plan_gemm_operand(g, "keep", &args);
  if (!problem.empty()) {
    std::fprintf(stderr, "plan_gemm_operand: %s\n", problem.c_str());
    std::exit(3);
  }
  TensorMap map;
  CUresult r = gemm_test::encode_fn()(
      reinterpret_cast<CUtensorMap*>(&map), CUtensorMapDataType(args.data_type), args.rank, const_cast<unsigned char*>(device),
      reinterpret_cast<const cuuint64_t*>(args.dims), reinterpret_cast<const cuuint64_t*>(args.strides), args.box,
      args.element_strides, CUtensorMapInterleave(args.interleave), CUtensorMapSwizzle(args.swizzle),
      CUtensorMapL2promotion(args.l2_promotion), CUtensorMapFloatOOBfill(args.oob_fill));
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d) for keep\n", int(r));
    std::exit(3);
  }
  return map;
}

// Gated: evoformer's whole kernel form (the staged bias and the sigmoid gate preloaded by the epilogue),
// with more ragged key counts (S2 = 192 and 264: a work tile of 3 and 5 key tiles, more than one tile
// per ring pass at 4 and 6 stages; S2 = 200: a ragged last key tile of 72 keys on 128-key tiles, 8 on
// 64-key tiles).
template <class C, int Bits, bool Gated = false, class Score = StagedBiasScore<Bits>>
void run_staged(const char* name, std::mt19937& rng, int D) {
  const float log2e = 1.4426950408889634f;
  char label[96];
  std::vector<Case> shapes = {Case{2, 3, 3, 100, 100, 0}, Case{1, 2, 2, 129, 300, 8}, Case{2, 4, 4, 256, 256, 0}, Case{1, 1, 1, 17, 1, 0},
                              Case{1, 2, 2, 200, 72, 0}};
  if (Gated) shapes.insert(shapes.end(), {Case{3, 4, 4, 192, 192, 0}, Case{2, 3, 3, 264, 264, 8}, Case{1, 5, 5, 256, 40, 0}, Case{2, 3, 3, 200, 200, 0}});
  for (const Case& c : shapes) {
    const int pair_ld = (c.seq_k + 7) / 8 * 8, keep_ld = (c.seq_k + 15) / 16 * 16;
    Tensor pair = make_tensor(Dtype::bf16, c.heads, c.seq_q, c.seq_k, pair_ld, &rng, 2.0f);
    host_pair = pair.values;
    std::bernoulli_distribution kept(0.9);
    std::vector<unsigned char> keep_rows(size_t(c.batch) * keep_ld, 7);  // padding: neither 0 nor 1
    host_keep.assign(size_t(c.batch) * c.seq_k, 1);
    for (int b = 0; b < c.batch; ++b)
      for (int j = 0; j < c.seq_k; ++j) keep_rows[size_t(b) * keep_ld + j] = host_keep[size_t(b) * c.seq_k + j] = j == 0 ? 1 : kept(rng);
    unsigned char* keep = nullptr;
    CUDA_CHECK(cudaMalloc(&keep, keep_rows.size()));
    CUDA_CHECK(cudaMemcpy(keep, keep_rows.data(), keep_rows.size(), cudaMemcpyHostToDevice));
    Score score{};
    score.bias_tile = make_map(pair, 64, "pair");
    score.bias_column = make_byte_map(keep, c.batch, c.seq_k, keep_ld);
    score.scale_log2 = log2e;
    score.scale = 1.0f / std::sqrt(float(D));
    score.heads = c.heads;
    score.seq_q = c.seq_q;
    score.seq_k = c.seq_k;
    std::snprintf(label, sizeof label, "%s staged%s%s%s%s", name, (Bits & 1) ? " pair" : "", (Bits & 2) ? " mask" : "",
                  solder::attention::score_staged_sum<Score>(0) ? " sum" : "", Gated ? " gate" : "");
    run_case<C, Score, NoMask, Gated>(label, c, score, NoMask{}, rng, D);
    free_tensor(pair);
    CUDA_CHECK(cudaFree(keep));
  }
}

// Head dim 32 in an hd64 configuration (plain and causal).
// Many work tiles per persistent block, so that the Q buffers and the K/V rings go around many times
// (their mbarrier phases run on across work tiles; with two Q buffers the producer loads tile n + 1's Q
// while the consumers read tile n's): 1 and 3 blocks over 48 .. 96 work tiles of 1 .. 8 key tiles,
// unmasked, causal (top-left; bottom-right with seq_q ≠ seq_k and 4:1 GQA; an offset of −200 that
// leaves the first work tile of every head no key tile at all, so the blocks skip it).
template <class C>
void run_many_tiles(const char* name, std::mt19937& rng) {
  const PlainScore plain{1.4426950408889634f / std::sqrt(float(C::HeadDim))};
  char label[96];
  for (int blocks : {1, 3}) {
    persistent_blocks = blocks;
    std::snprintf(label, sizeof label, "%s many plain", name);
    run_case<C>(label, Case{2, 4, 2, 1000, 1000, 0}, plain, NoMask{}, rng);
    std::snprintf(label, sizeof label, "%s many causal", name);
    run_case<C>(label, Case{2, 4, 2, 1000, 1000, 0}, plain, CausalMask{0}, rng);
    std::snprintf(label, sizeof label, "%s many causal bottom-right", name);
    run_case<C>(label, Case{3, 4, 1, 700, 1024, 8}, plain, CausalMask{1024 - 700}, rng);
    std::snprintf(label, sizeof label, "%s many causal offset -200", name);
    run_case<C>(label, Case{2, 3, 3, 600, 600, 0}, plain, CausalMask{-200}, rng);
  }
  persistent_blocks = 3;
}

// Config::Dynamic (work tiles claimed from a counter) against the static configuration CStatic, or
// Config::FreeConsumers (no turn ring) against the same schedule with turns, bit for bit and against the
// reference: on 0 (one block per tile, every block's first claim past the end), 1, 3 and 7 persistent blocks; unmasked, causal top-left with ragged S, bottom-right
// with seq_q != seq_k and 4:1 GQA, an offset of -200 (work tiles with no key tile: the producer posts them,
// the consumers store zeros), softcap (WithSoftcap: not with 3 consumers and the staged epilogue, which
// spills 4 bytes with the softcap functor and is no emitter's Config). Every launch after the first relies
// on the previous launch's reset of the counter.
// Tma: the staged epilogue's rows stored by TMA (run_case's Tma).
template <class C, class CStatic, bool WithSoftcap = true, bool Tma = false>
void run_dynamic(const char* name, std::mt19937& rng) {
  static_assert((C::Dynamic && !CStatic::Dynamic) || (C::FreeConsumers && !CStatic::FreeConsumers) ||
                    (C::StagedEpilogue && !CStatic::StagedEpilogue) || (C::PostedWork && !CStatic::PostedWork) ||
                    (C::QRowsEpilogue && !CStatic::QRowsEpilogue),
                "run_dynamic: a Dynamic configuration against a static one, free consumers against turns, the "
                "staged epilogue against the per-pair stores, the posted work-tile setup against the consumers' own, or "
                "the epilogue in the Q rows against its own buffer");
  const float log2e = 1.4426950408889634f;
  const PlainScore plain{log2e / std::sqrt(float(C::HeadDim))};
  const SoftcapScore softcap{log2e, 1.0f / std::sqrt(float(C::HeadDim)) / 3.0f, 3.0f};
  (void)softcap;
  char label[96];
  for (int blocks : {0, 1, 3, 7}) {
    if (!C::Persistent && blocks != 0) continue;  // (one block per work tile at any block count)
    persistent_blocks = blocks;
    std::snprintf(label, sizeof label, "%s dyn plain", name);
    run_case<C, PlainScore, NoMask, false, CStatic, Tma>(label, Case{2, 4, 2, 1000, 1000, 0}, plain, NoMask{}, rng);
    std::snprintf(label, sizeof label, "%s dyn causal", name);
    run_case<C, PlainScore, CausalMask, false, CStatic, Tma>(label, Case{2, 4, 2, 1000, 1000, 0}, plain, CausalMask{0}, rng);
    std::snprintf(label, sizeof label, "%s dyn causal 2048", name);
    run_case<C, PlainScore, CausalMask, false, CStatic, Tma>(label, Case{2, 4, 4, 2048, 2048, 0}, plain, CausalMask{0}, rng);
    std::snprintf(label, sizeof label, "%s dyn causal bottom-right", name);
    run_case<C, PlainScore, CausalMask, false, CStatic, Tma>(label, Case{3, 4, 1, 700, 1024, 8}, plain, CausalMask{1024 - 700}, rng);
    std::snprintf(label, sizeof label, "%s dyn causal offset -200", name);
    run_case<C, PlainScore, CausalMask, false, CStatic, Tma>(label, Case{2, 3, 3, 600, 600, 0}, plain, CausalMask{-200}, rng);
    if constexpr (WithSoftcap) {
      std::snprintf(label, sizeof label, "%s dyn softcap", name);
      run_case<C, SoftcapScore, NoMask, false, CStatic, Tma>(label, Case{1, 2, 1, 129, 300, 8}, softcap, NoMask{}, rng);
    }
  }
  persistent_blocks = 3;
}

// Affine scores (ALiBi's form, kAffine): the row-shift form against the float64 reference and the
// two-FFMA form (kAffineTwoFfma) on the same inputs; no mask and causal, ragged S, seq_q ≠ seq_k, GQA,
// w and c ≠ 0, and long rows (S 4096: biases up to ±2900, where the row shift's exact integer matters).
template <class C>
void run_affine(const char* name, std::mt19937& rng) {
  const float log2e = 1.4426950408889634f;
  const float scale = 1.0f / std::sqrt(float(C::HeadDim));
  char label[96];
  const Case shapes[] = {{2, 3, 3, 100, 100, 0}, {1, 4, 1, 129, 300, 8}, {1, 4, 4, 300, 129, 0}, {2, 4, 2, 1000, 1000, 0},
                         {1, 2, 2, 2048, 2048, 0}, {1, 1, 1, 4096, 4096, 0}};
  std::mt19937 inputs = rng;
  // forms: 0 the default (row shift; with 3 consumers two FFMA), 1 two FFMA, 2 the scaled row shift
  // (kAffinePositiveA), 3 its column term by the tensor cores (kAffineColumnMma; the FFMA form where its tile
  // does not fit); then the same with w, c ≠ 0 and causal
  for (const Case& c : shapes)
    for (int form = 0; form < 8; ++form) {
      const int kind = form % 4;
      const bool two = kind == 1, scaled = kind == 2, column = kind == 3, offsets = c.seq_q <= 1000 && form >= 4;
      const bool causal = c.seq_q == c.seq_k && c.seq_q <= 2048 && form >= 4;
      if (c.seq_q > 1000 && form >= 4 && !causal) continue;
      std::snprintf(label, sizeof label, "%s affine%s%s%s%s%s", name, two ? " two-ffma" : "", scaled ? " scaled" : "", column ? " column-mma" : "",
                    offsets ? " w,c" : "", causal ? " causal" : "");
      if (kind != 0) rng = inputs;  // the same q, k and v as the default form before it
      else inputs = rng;
      auto run = [&](const auto& score) {
        if (causal) run_case<C>(label, c, score, CausalMask{0}, rng);
        else run_case<C>(label, c, score, NoMask{}, rng);
      };
      if (scaled) run(AffineScaledScore{log2e, scale, c.heads, offsets});
      else if (column) run(AffineColumnScore{log2e, scale, c.heads, offsets});
      else if (two) run(AffineTwoFfmaScore{log2e, scale, c.heads, offsets});
      else run(AffineScore{log2e, scale, c.heads, offsets});
    }
}

template <class C>
void run_padded(const char* name, std::mt19937& rng) {
  const float log2e = 1.4426950408889634f;
  const PlainScore plain{log2e / std::sqrt(32.0f)};
  char label[96];
  for (const Case& c : {Case{1, 2, 2, 17, 17, 8}, Case{2, 3, 3, 100, 100, 0}, Case{1, 2, 1, 129, 300, 8}, Case{1, 2, 2, 1000, 1000, 0}}) {
    std::snprintf(label, sizeof label, "%s plain", name);
    run_case<C>(label, c, plain, NoMask{}, rng, 32);
    std::snprintf(label, sizeof label, "%s causal", name);
    run_case<C>(label, c, plain, CausalMask{0}, rng, 32);
  }
}

// Data masks (kDataTiles: key tiles classified per block from the ids' min/max): document ids of random
// lengths (1 included, documents longer than a tile so whole key tiles are skipped and others fully
// visible), unsorted ids in runs (live tiles not contiguous), ids_q ≠ ids_k at seq_q ≠ seq_k (rows that
// see no key: NaN), and ids_q ≤ ids_k; ragged and grouped-query shapes. Grouped: each case with
// GroupedDataMask (the id table on persistent blocks, each group's ranges built when a block's work
// tile first needs them) too, on the same inputs, and the two outputs must have the same bits. Every case also with the boundary tiles of one key id compared per score
// (PerScoreDataMask), bit for bit against the per-row compare; kind 4 (one document, query stretches of
// another id) makes every boundary tile such a tile but the last, ragged one. C0: the configuration
// of the first run (run_case), a static one against a Dynamic C.
template <class C, bool Grouped = false, class C0 = C>
void run_data(const char* name, std::mt19937& rng) {
  const float log2e = 1.4426950408889634f;
  const PlainScore plain{log2e / std::sqrt(float(C::HeadDim))};
  char label[96];
  // kind 0: sorted documents of random lengths; 1: unsorted runs; 2: separate q / k ids (rows may see nothing);
  // 3: sorted documents, the query rows of a few stretches (whole 128-row work tiles among them) with an
  // id no key has (work tiles with no live key tile at all: rows that see no key); 4: one document, query
  // stretches of another id; 5: sorted documents of 40–139 tokens (boundary tiles of mostly two key ids);
  // 6: sorted documents of 1–12 tokens (every tile a boundary tile of many key ids)
  auto fill_docs = [&](std::vector<int>& ids, int batch, int seq, int kind) {
    ids.assign(size_t(batch) * seq, 0);
    for (int b = 0; b < batch; ++b) {
      int doc = 0, left = 0, id = 0;
      for (int i = 0; i < seq; ++i) {
        if (left == 0) {
          const int pick = int(rng() % 8);
          left = pick == 0 ? 1 : pick == 1 ? 2 : pick < 5 ? 1 + int(rng() % 40) : 100 + int(rng() % 300);
          if (kind == 5) left = 40 + int(rng() % 100);
          if (kind == 6) left = 1 + int(rng() % 12);
          ++doc;
          id = kind == 0 || kind == 3 || kind >= 5 ? doc : kind == 4 ? 1 : int(rng() % 5);
        }
        ids[size_t(b) * seq + i] = id;
        --left;
      }
    }
  };
  struct DataCase {
    Case shape;
    int kind;
    bool less_equal;
  };
  const DataCase data_cases[] = {
      {{1, 2, 2, 1000, 1000, 0}, 0, false}, {{2, 3, 3, 300, 300, 0}, 0, false}, {{1, 1, 1, 2048, 2048, 0}, 0, false},
      {{1, 1, 1, 1, 1, 0}, 0, false},       {{2, 4, 2, 257, 257, 8}, 1, false}, {{1, 2, 2, 1000, 1000, 0}, 1, false},
      {{1, 2, 1, 129, 300, 8}, 2, false},   {{1, 2, 2, 300, 129, 0}, 2, false}, {{2, 3, 3, 300, 300, 0}, 1, true},
      {{1, 2, 2, 1000, 1000, 0}, 0, true},
      {{2, 2, 2, 2048, 2048, 0}, 3, false}, {{1, 3, 3, 1500, 1500, 8}, 3, false}, {{3, 2, 2, 700, 700, 0}, 0, false},
      {{2, 2, 2, 1000, 1000, 0}, 4, false}, {{1, 2, 2, 1500, 1500, 8}, 4, false},
      // four key-id groups (the id table's groups built as a block's work tiles first need them), ragged
      {{4, 2, 2, 333, 333, 0}, 0, false},
      // boundary tiles of two and of many key ids: seq_k a multiple of both BN (every boundary tile's
      // keys inside seq_k: the compare without the per-column bound) and ragged (the last key tile
      // with it), grouped queries
      {{1, 2, 2, 1024, 1024, 0}, 5, false}, {{2, 2, 2, 1000, 1000, 8}, 5, false}, {{1, 2, 2, 2048, 2048, 0}, 6, false},
      {{2, 3, 3, 777, 777, 0}, 6, false}, {{2, 4, 2, 512, 512, 0}, 6, false}, {{1, 2, 2, 1000, 1000, 0}, 5, true},
  };
  for (const DataCase& d : data_cases) {
    if (ids_only && d.kind < 5) continue;
    const Case& c = d.shape;
    fill_docs(host_ids_q, c.batch, c.seq_q, d.kind);
    if (d.kind == 2) fill_docs(host_ids_k, c.batch, c.seq_k, 1);
    else host_ids_k = host_ids_q;
    if (d.kind == 3 || d.kind == 4)
      for (int b = 0; b < c.batch; ++b)
        for (int from = int(rng() % 200); from < c.seq_q; from += 700 + int(rng() % 600))
          for (int i = from; i < std::min(c.seq_q, from + 1 + int(rng() % 400)); ++i) host_ids_q[size_t(b) * c.seq_q + i] = -7;
    int *ids_q = nullptr, *ids_k = nullptr;
    CUDA_CHECK(cudaMalloc(&ids_q, host_ids_q.size() * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&ids_k, host_ids_k.size() * sizeof(int)));
    CUDA_CHECK(cudaMemcpy(ids_q, host_ids_q.data(), host_ids_q.size() * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(ids_k, host_ids_k.data(), host_ids_k.size() * sizeof(int), cudaMemcpyHostToDevice));
    const DataMask mask{ids_q, ids_k, c.heads, c.seq_q, c.seq_k, d.less_equal};
    const char* kind_name = d.kind == 0   ? "sorted"
                            : d.kind == 1 ? "runs"
                            : d.kind == 2 ? "q!=k"
                            : d.kind == 3 ? "sorted-gaps"
                            : d.kind == 4 ? "one-doc"
                            : d.kind == 5 ? "two-ids"
                                          : "many-ids";
    std::snprintf(label, sizeof label, "%s %s %s", name, d.less_equal ? "ids<=" : "docs", kind_name);
    const std::mt19937 inputs = rng;
    run_case<C, PlainScore, DataMask, false, C0>(label, c, plain, mask, rng);
    const std::vector<uint16_t> plain_bits = last_output;
    auto same_bits = [&](const std::vector<uint16_t>& bits, const char* what) {
      ++cases;
      const bool same = last_output == bits;
      if (!same) ++failures;
      std::printf("%s %-34s %s: %s bits\n", same ? "OK  " : "FAIL", label, what, same ? "the same" : "different");
    };
    rng = inputs;  // the same q, k and v
    std::snprintf(label, sizeof label, "%s %s %s per-score", name, d.less_equal ? "ids<=" : "docs", kind_name);
    run_case<C, PlainScore, PerScoreDataMask, false, C0>(label, c, plain, PerScoreDataMask{mask}, rng);
    same_bits(plain_bits, "one-id tiles per row and per score");
    if (Grouped) {
      rng = inputs;
      std::snprintf(label, sizeof label, "%s %s %s table", name, d.less_equal ? "ids<=" : "docs", kind_name);
      run_case<C, PlainScore, GroupedDataMask, false, C0>(label, c, plain, GroupedDataMask{mask, c.batch}, rng);
      same_bits(plain_bits, "id table and per-tile classification");
      rng = inputs;
      std::snprintf(label, sizeof label, "%s %s %s table per-score", name, d.less_equal ? "ids<=" : "docs", kind_name);
      run_case<C, PlainScore, PerScoreGroupedDataMask, false, C0>(label, c, plain, PerScoreGroupedDataMask{GroupedDataMask{mask, c.batch}}, rng);
      same_bits(plain_bits, "id table, one-id tiles per score");
    }
    CUDA_CHECK(cudaFree(ids_q));
    CUDA_CHECK(cudaFree(ids_k));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned seed = argc > 1 ? unsigned(std::strtoul(argv[1], nullptr, 10)) : 2026u;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), seed %u\n", prop.name, prop.multiProcessorCount, seed);
  std::mt19937 rng(seed);
  // (line-buffered: a case that hangs under a time limit leaves the lines before it)
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // A second argument `data`: the data-mask cases alone (a short device call on the data-mask paths);
  // `dy`: those and the data masks on Dynamic Configs first, which have not run on the device yet (their
  // first version hung: bench/NOTES.md, docmask4), so they are not in the default run. Any other text:
  // only the cases whose label contains it.
  // `table`: the data masks whose key ids come in groups (the id table: Dynamic on 3 and 7 blocks, then
  // the static persistent configurations), each with its per-tile-classified and per-score runs on the
  // same inputs. `ids`: the data masks' cases of boundary tiles with two and many key ids alone (kinds
  // 5 and 6: the per-score compare), on every data-mask Config of `dy` and `data`.
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool table_only = mode == "table";
  ids_only = mode == "ids";
  const bool data_only = mode == "data" || mode == "dy" || table_only || ids_only;
  if (!data_only) case_filter = mode;
  if (!case_filter.empty()) std::printf("only the cases whose label contains \"%s\"\n", case_filter.c_str());
  if (!data_only) {
    // FP8 (e4m3 operands, P rounded to e4m3, bf16 output): first, the newest path
    run_fp8<Config<Dtype::e4m3, 128, 128, 2, 2>>("e4m3 d128 128x128 s2", rng);
    run_fp8<Config<Dtype::e4m3, 128, 128, 4, 2, true>>("e4m3 d128 128x128 s4 P", rng);
    run_fp8<Config<Dtype::e4m3, 128, 128, 3, 2, true, 0, 2>>("e4m3 d128 128x128 s3 P q2", rng);
    // head dim 64 in 64-byte rows (the 64-byte swizzle, S with K depth 64, P·V with N 64): the emitter's
    // 3 consumers, 2 consumers, persistent blocks with two Q buffers
    run_fp8<Config<Dtype::e4m3, 64, 128, 4, 3>>("e4m3 d64 192x128 s4", rng);
    run_fp8<Config<Dtype::e4m3, 64, 128, 4, 2>>("e4m3 d64 128x128 s4", rng);
    run_fp8<Config<Dtype::e4m3, 64, 128, 4, 3, true, 0, 2>>("e4m3 d64 192x128 s4 P q2", rng);
    // Affine scores (ALiBi) in the emitter's configurations: hd64 short rows (persistent, 2 Q buffers,
    // staggered, 6 stages), hd64 long rows (192 x 128, 3 consumers, one block per tile: the two-FFMA form
    // for both functors there; and 2 consumers), hd128, f16
    run_affine<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>>("bf16 d64 s6 P Q2 St2", rng);
    // (five stages: room for the column term's tile of offsets beside the ring, SOLDER_ATTN_STAGES=5)
    run_affine<Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2>>("bf16 d64 s5 P Q2 St2", rng);
    run_affine<Config<Dtype::bf16, 64, 128, 4, 3>>("bf16 d64 192x128 s4", rng);
    run_affine<Config<Dtype::bf16, 64, 128, 4, 2>>("bf16 d64 128x128 s4", rng);
    run_affine<Config<Dtype::bf16, 128, 128, 2, 2>>("bf16 d128 128x128 s2", rng);
    run_affine<Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2>>("f16 d64 s4 P Q2", rng);
    // P: persistent configurations (each case also runs with 3 blocks looping over every work tile).
    run_config<Config<Dtype::bf16, 64, 128, 4, 2, true>, true>("bf16 d64 128x128 s4 P", rng);
    run_config<Config<Dtype::bf16, 128, 128, 2, 2, true>, false>("bf16 d128 128x128 s2 P", rng);
    run_config<Config<Dtype::bf16, 64, 128, 4, 3>, false>("bf16 d64 192x128 s4", rng);
    run_config<Config<Dtype::bf16, 128, 128, 3, 2>, true>("bf16 d128 128x128 s3", rng);
    run_config<Config<Dtype::f16, 64, 128, 4, 2, true>, false>("f16 d64 128x128 s4 P", rng);
    run_config<Config<Dtype::bf16, 256, 64, 2, 2>, false>("bf16 d256 128x64 s2", rng);
    // hd256's candidates ($SOLDER_ATTN_HD256, the emitter): 80-key tiles (m64n80k16 for S, 5 k-blocks of
    // P·V, ragged key tiles at every S here), with the score functors; persistent blocks claiming work tiles
    // from a counter with free consumers and the posted setup (one Q buffer), bit for bit against one block
    // per work tile, at 64 and at 80 keys
    run_config<Config<Dtype::bf16, 256, 80, 2, 2>, true>("bf16 d256 128x80 s2", rng);
    run_dynamic<Config<Dtype::bf16, 256, 64, 2, 2, true, 0, 1, 0, true, true, false, true>, Config<Dtype::bf16, 256, 64, 2, 2>>("bf16 d256 s2 P Dy Fr Pw", rng);
    run_dynamic<Config<Dtype::bf16, 256, 80, 2, 2, true, 0, 1, 0, true, true, false, true>, Config<Dtype::bf16, 256, 80, 2, 2>>("bf16 d256 128x80 s2 P Dy Fr Pw",
                                                                                                                              rng);
    // Q2: two Q buffers (the emitter's short rows: vanilla, gqa and causal at S ≤ 1k), and the one-buffer
    // persistent configurations over many work tiles per block too
    run_config<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2>, true>("bf16 d64 128x128 s4 P Q2", rng);
    run_config<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2>, false>("bf16 d128 128x128 s2 P Q2", rng);
    run_config<Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2>, false>("f16 d64 128x128 s4 P Q2", rng);
    run_many_tiles<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2>>("bf16 d64 s4 P Q2", rng);
    run_many_tiles<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2>>("bf16 d128 s2 P Q2", rng);
    run_many_tiles<Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 s4 P", rng);
    run_many_tiles<Config<Dtype::bf16, 128, 128, 3, 2, true>>("bf16 d128 s3 P", rng);
    run_padded<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2>>("bf16 d64(32) 128x128 s4 P Q2", rng);
    // St: staggered consumers (consumer 1 Stagger turns behind consumer 0; the emitter's short rows at hd64:
    // 6 stages, 2 Q buffers, 2 turns): ragged S, seq_q != seq_k, GQA, causal (top-left, bottom-right,
    // offset), softcap and ALiBi; many work tiles per block (the rings' and Q buffers' mbarrier phases run
    // on across tiles, work tiles with no key tile skipped); each bound of the stagger (Stages - 1 turns,
    // 3 with two Q buffers, 1 with one), f16, hd128 and one block per work tile
    run_config<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>, true>("bf16 d64 128x128 s6 P Q2 St2", rng);
    run_many_tiles<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>>("bf16 d64 s6 P Q2 St2", rng);
    run_many_tiles<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 1>>("bf16 d64 s6 P Q2 St1", rng);
    run_many_tiles<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 3>>("bf16 d64 s4 P Q2 St3", rng);
    run_many_tiles<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 1>>("bf16 d64 s4 P St1", rng);
    run_many_tiles<Config<Dtype::f16, 64, 128, 6, 2, true, 0, 2, 2>>("f16 d64 s6 P Q2 St2", rng);
    run_many_tiles<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 1>>("bf16 d128 s2 P Q2 St1", rng);
    run_config<Config<Dtype::bf16, 64, 128, 4, 2, false, 0, 1, 1>, false>("bf16 d64 128x128 s4 St1", rng);
    run_padded<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>>("bf16 d64(32) 128x128 s6 P Q2 St2", rng);
    // Dy: work tiles claimed from a counter (Config::Dynamic; the emitter's causal short rows at hd64: 4
    // stages, 2 Q buffers, no stagger), each against its static configuration: with two and one Q buffer,
    // f16, hd128 (not staggered: config.cuh refuses Dynamic with Stagger, which deadlocked here at offset
    // -200 on one block)
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2>>("bf16 d64 s4 P Q2 Dy", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true>, Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 s4 P Dy", rng);
    run_dynamic<Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2, 0, true>, Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2>>("f16 d64 s4 P Q2 Dy", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2>>("bf16 d128 s2 P Q2 Dy", rng);
    // Fr: free consumers (Config::FreeConsumers: no turn ring, the consumers drift apart by up to the ring's
    // depth), each against the same Config with turns: the emitter's causal S 1k (Dynamic, two and one Q
    // buffer, f16), the shallowest ring (2 stages), vanilla's short rows (6 stages, against its stagger),
    // hd128's short rows (two consumers only: config.cuh)
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true>>("bf16 d64 s4 P Q2 Dy Fr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true>>("bf16 d64 s4 P Dy Fr", rng);
    run_dynamic<Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2, 0, true, true>, Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2, 0, true>>("f16 d64 s4 P Q2 Dy Fr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 2, 2, true, 0, 2, 0, true, true>, Config<Dtype::bf16, 64, 128, 2, 2, true, 0, 2>>("bf16 d64 s2 P Q2 Dy Fr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 0, false, true>, Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>>("bf16 d64 s6 P Q2 Fr", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 3, 2, true, 0, 1, 0, false, true>, Config<Dtype::bf16, 128, 128, 3, 2, true>>("bf16 d128 s3 P Fr", rng);
    // Qr: the staged epilogue in the Q rows on persistent blocks (Config::QRowsEpilogue: the Q buffer
    // released after the epilogue), each bit for bit against the Config with the per-pair stores (and
    // the float64 reference), on 0 / 1 / 3 / 7 blocks, ragged S, GQA, causal work tiles without key tiles
    // (offset -200: those store pair by pair), softcap: vanilla / gqa hd64 S 1k's staggered Config on its
    // 6 stages (the candidate), f16, Stagger 1, one Q buffer with turns and no stagger, hd128 with Stagger
    // 1, and causal S 1k's Config (Dynamic, free consumers, PostedWork) on 5 stages.
    run_dynamic<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2, false, false, true, false, true>, Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>>("bf16 d64 s6 P Q2 St2 Ep Qr", rng);
    run_dynamic<Config<Dtype::f16, 64, 128, 6, 2, true, 0, 2, 2, false, false, true, false, true>, Config<Dtype::f16, 64, 128, 6, 2, true, 0, 2, 2>>("f16 d64 s6 P Q2 St2 Ep Qr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 1, false, false, true, false, true>, Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 1>>("bf16 d64 s6 P Q2 St1 Ep Qr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, false, false, true, false, true>, Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 s4 P Ep Qr", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 1, false, false, true, false, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 1>>("bf16 d128 s2 P Q2 St1 Ep Qr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 0, true, true, true, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, false, true>>("bf16 d64 s5 P Q2 Dy Fr Ep Pw Qr", rng);
    // Tm: the same staged epilogues with each warp's rows stored by TMA (TmaStagedStore), bit for bit against
    // the per-pair stores and against the float64 reference, on 0 / 1 / 3 / 7 blocks, ragged S (1000, 700,
    // 600, 129 rows: the map clips the last tile's rows), GQA, tiles without key tiles (pair by pair):
    // vanilla / gqa hd64 S 1k's staggered Config in the Q rows (bf16, f16), hd128 in the Q rows, causal
    // S 1k's, the dedicated buffer on persistent blocks (hd64 5 stages), one block per work tile (hd128's
    // EpilogueInQ).
    run_dynamic<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2, false, false, true, false, true>, Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>, true, true>("bf16 d64 s6 P Q2 St2 Ep Qr Tm", rng);
    run_dynamic<Config<Dtype::f16, 64, 128, 6, 2, true, 0, 2, 2, false, false, true, false, true>, Config<Dtype::f16, 64, 128, 6, 2, true, 0, 2, 2>, true, true>("f16 d64 s6 P Q2 St2 Ep Qr Tm", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 1, false, false, true, false, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 1>, true, true>("bf16 d128 s2 P Q2 St1 Ep Qr Tm", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 0, true, true, true, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, false, true>, true, true>("bf16 d64 s5 P Q2 Dy Fr Ep Pw Qr Tm", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2, false, false, true>, Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2>, true, true>("bf16 d64 s5 P Q2 St2 Ep Tm", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, false, 0, 1, 0, false, false, true>, Config<Dtype::bf16, 128, 128, 2, 2>, true, true>("bf16 d128 s2 EpQ Tm", rng);
    // Ep: the staged epilogue (Config::StagedEpilogue: O through shared memory, 16-byte row stores), each
    // bit for bit against the same Config with the per-pair stores (and the float64 reference), on 0 / 1 /
    // 3 / 7 blocks: the emitter's two defaults first (causal hd64 S 1k: Dynamic, free consumers, two Q
    // buffers; causal hd128 S 1k: one Q buffer, 2 stages), then one Q buffer and f16 at hd64, vanilla's
    // staggered short rows (5 stages: the buffer takes the sixth), hd128 with two Q buffers; EpQ: one block
    // per work tile (not persistent), where the buffer is each consumer's own Q rows (Config::EpilogueInQ):
    // hd128 on 2 and 3 stages (vanilla's Config, and the stage the buffer no longer costs), f16, hd64
    // with 2 and 3 consumers (vanilla / gqa from S 4k: 192 x 128, 160 registers; not softcap, whose staged
    // kernel spills 4 bytes there). "bf16 d64 s4 Ep" and the Vr cases "192x128 s4 Ep Vr" and "s4 Fr Ep Vr"
    // below are one block per work tile too, so they run on the Q rows as well (the Vr pair of 2 and 3
    // consumers stands for EpQ's hd64 cases).
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true>>("bf16 d64 s4 P Q2 Dy Fr Ep", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, false, false, true>, Config<Dtype::bf16, 128, 128, 2, 2, true>>("bf16 d128 s2 P Ep", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, true>>("bf16 d64 s4 P Dy Fr Ep", rng);
    run_dynamic<Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true>, Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2, 0, true, true>>("f16 d64 s4 P Q2 Dy Fr Ep", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2, false, false, true>, Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2>>("bf16 d64 s5 P Q2 St2 Ep", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, true, false, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, true>>("bf16 d128 s2 P Q2 Dy Ep", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, false, 0, 1, 0, false, false, true>, Config<Dtype::bf16, 64, 128, 4, 2>>("bf16 d64 s4 Ep", rng);
    // Vr: the Configs the FlexAttention-target variants' knobs yield (sliding_window, prefix_lm, alibi,
    // evoformer; bench/NOTES.md, attn-variants2): the staged epilogue without free consumers on the Dynamic
    // two-Q-buffer kernel; on three consumers, one block per work tile (prefix_lm / alibi long rows); free
    // consumers with it on alibi's 5-stage short rows and on two consumers per block; free consumers with
    // evoformer's staged bias (below, with the staged cases)
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, false, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true>>("bf16 d64 s4 P Q2 Dy Ep Vr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 3, false, 0, 1, 0, false, false, true>, Config<Dtype::bf16, 64, 128, 4, 3>, false>("bf16 d64 192x128 s4 Ep Vr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 0, false, true, true>, Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 2, 2>>("bf16 d64 s5 P Q2 Fr Ep Vr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, false, 0, 1, 0, false, true, true>, Config<Dtype::bf16, 64, 128, 4, 2>>("bf16 d64 s4 Fr Ep Vr", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, false, 0, 1, 0, false, false, true>, Config<Dtype::bf16, 128, 128, 2, 2>>("bf16 d128 s2 EpQ", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 3, 2, false, 0, 1, 0, false, false, true>, Config<Dtype::bf16, 128, 128, 3, 2>>("bf16 d128 s3 EpQ", rng);
    run_dynamic<Config<Dtype::f16, 128, 128, 3, 2, false, 0, 1, 0, false, false, true>, Config<Dtype::f16, 128, 128, 3, 2>>("f16 d128 s3 EpQ", rng);
    // hd128 on persistent blocks with two Q buffers and the buffer of its own (vanilla hd128 with
    // $SOLDER_ATTN_SHORT=all: 2 x 32 KB of Q + 2 stages + 32 KB = 224 KB)
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, false, false, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2>>("bf16 d128 s2 P Q2 Ep", rng);
    // (the long rows' one-block-per-tile kernels, hd64 192 x 128 and hd128 on 2 stages, with the staged
    // epilogue are the cases "192x128 s4 Ep Vr" and "d128 s2 EpQ" above)
    // Pw: the work tile's setup posted with its entry (Config::PostedWork; the next entry taken before the
    // epilogue), each against the same Config that locates per consumer: causal hd64 S 1k's Config
    // (Dynamic, free, Q2, staged epilogue), with turns and one Q buffer, f16, the shallowest ring, hd128
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true>>("bf16 d64 s4 P Q2 Dy Fr Ep Pw", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, false, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true>>("bf16 d64 s4 P Dy Pw", rng);
    run_dynamic<Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true, true>, Config<Dtype::f16, 64, 128, 4, 2, true, 0, 2, 0, true, true, true>>("f16 d64 s4 P Q2 Dy Fr Ep Pw", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 2, 2, true, 0, 2, 0, true, true, false, true>, Config<Dtype::bf16, 64, 128, 2, 2, true, 0, 2, 0, true, true>>("bf16 d64 s2 P Q2 Dy Fr Pw", rng);
    // hd128's persistent Configs with all of it (the long rows' on two Q buffers, S 1k's on one), each
    // against the plain persistent Config of its Q buffers
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, true, true, true, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2>>("bf16 d128 s2 P Q2 Dy Fr Ep Pw", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, true, true, true, true>, Config<Dtype::bf16, 128, 128, 2, 2, true>>("bf16 d128 s2 P Dy Fr Ep Pw", rng);
    // Qr at hd128 (branch hd128's cases, on short-rows2's QRowsEpilogue: the Q buffer released after the
    // epilogue), each bit for bit against the same schedule with the dedicated buffer: hd128 S 1k's Config
    // on the third stage the buffer frees (against its 2-stage default), hd128's long rows on two Q
    // buffers, one Q buffer with turns and fixed rounds, hd64 on one Q buffer
    run_dynamic<Config<Dtype::bf16, 128, 128, 3, 2, true, 0, 1, 0, true, true, true, true, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, true, true, true, true>>("bf16 d128 s3 P Dy Fr Ep Pw Qr", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, true, true, true, true, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 2, 0, true, true, true, true>>("bf16 d128 s2 P Q2 Dy Fr Ep Pw Qr", rng);
    run_dynamic<Config<Dtype::bf16, 128, 128, 3, 2, true, 0, 1, 0, false, false, true, false, true>, Config<Dtype::bf16, 128, 128, 2, 2, true, 0, 1, 0, false, false, true>>("bf16 d128 s3 P Ep Qr", rng);
    run_dynamic<Config<Dtype::bf16, 64, 128, 5, 2, true, 0, 1, 0, true, true, true, true, true>, Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, true, true, true>>("bf16 d64 s5 P Dy Fr Ep Pw Qr", rng);
    // Hq2: $SOLDER_ATTN_HD128_Q2's 64-key Configs (the emitter; vanilla / gqa hd128 on persistent blocks with
    // two Q buffers: 2 x 32 KB of Q + 5 x 32 KB of K and V), each with the staged epilogue in the Q rows, bit
    // for bit against the same schedule with the per-pair stores and within the float64 reference: the
    // stagger of 2 turns with turns and fixed rounds ("bn64"), and work tiles claimed from a counter with
    // free consumers and the posted setup ("bn64f"). Its "st1" is the case "bf16 d128 s2 P Q2 St1 Ep Qr".
    run_dynamic<Config<Dtype::bf16, 128, 64, 5, 2, true, 0, 2, 2, false, false, true, false, true>, Config<Dtype::bf16, 128, 64, 5, 2, true, 0, 2, 2>>(
        "Hq2 bf16 d128 128x64 s5 P Q2 St2 Ep Qr", rng);
    run_dynamic<Config<Dtype::bf16, 128, 64, 5, 2, true, 0, 2, 0, true, true, true, true, true>, Config<Dtype::bf16, 128, 64, 5, 2, true, 0, 2, 2>>(
        "Hq2 bf16 d128 128x64 s5 P Q2 Dy Fr Ep Pw Qr", rng);
    // evoformer's configurations (a score with a bias: 64 keys per tile, 4 stages), head dims 64, 32, 128
    run_bias<Config<Dtype::bf16, 64, 64, 4, 2>>("bf16 d64 128x64 s4 bias", rng, 64);
    run_bias<Config<Dtype::bf16, 64, 64, 4, 2>>("bf16 d64(32) 128x64 s4 bias", rng, 32);
    run_bias<Config<Dtype::bf16, 128, 64, 4, 2>>("bf16 d128 128x64 s4 bias", rng, 128);
    // the staged bias (TMA into the K stages): pair + mask at head dims 64, 32, 128 and 128-key tiles;
    // the pair bias alone and the mask alone; a persistent configuration (tiles loop: the rings run on)
    run_staged<Config<Dtype::bf16, 64, 64, 4, 2, true, 3>, 3>("bf16 d64 128x64 s4 P sb3", rng, 64);
    run_staged<Config<Dtype::bf16, 64, 64, 4, 2, true, 3>, 3>("bf16 d64(32) 128x64 s4 P sb3", rng, 32);
    run_staged<Config<Dtype::bf16, 128, 64, 4, 2, true, 3>, 3>("bf16 d128 128x64 s4 P sb3", rng, 128);
    run_staged<Config<Dtype::bf16, 64, 64, 4, 2, false, 3>, 3>("bf16 d64 128x64 s4 sb3", rng, 64);
    run_staged<Config<Dtype::bf16, 64, 64, 4, 2, true, 1>, 1>("bf16 d64 128x64 s4 P sb1", rng, 64);
    run_staged<Config<Dtype::bf16, 64, 64, 4, 2, false, 2>, 2>("bf16 d64 128x64 s4 sb2", rng, 64);
    // evoformer as emitted (evoformer2): the staged bias, the gate preloaded, 6 stages at hd64. (hd128's
    // gated form, 4 stages, passed on the H100 on 2026-11-27 but spills 36 bytes under nvcc's ptxas (the 32
    // preloaded words beside O, S, P and the bias), which compile_check.sh refuses: it is verified through
    // `solder run --dim D=128` instead; bench/NOTES.md, evoformer2.)
    // evoformer as emitted since evoformer3: the bias as a sum (the column term once per key column) and
    // two Q buffers at hd64 (6 stages); hd128: 4 stages, one Q buffer, ungated (see above).
    run_staged<Config<Dtype::bf16, 64, 64, 6, 2, true, 3, 2>, 3, true, StagedSumScore>("bf16 d64 128x64 s6 P sb3 q2", rng, 64);
    run_staged<Config<Dtype::bf16, 64, 64, 6, 2, true, 3, 2>, 3, true, StagedSumScore>("bf16 d64(32) 128x64 s6 P sb3 q2", rng, 32);
    run_staged<Config<Dtype::bf16, 64, 64, 6, 2, true, 3, 2, 0, false, true>, 3, true, StagedSumScore>("bf16 d64 128x64 s6 P sb3 q2 Fr Vr", rng, 64);
    run_staged<Config<Dtype::bf16, 128, 64, 4, 2, true, 3>, 3, false, StagedSumScore>("bf16 d128 128x64 s4 P sb3", rng, 128);
    run_staged<Config<Dtype::bf16, 64, 64, 6, 2, true, 3>, 3, true>("bf16 d64 128x64 s6 P sb3", rng, 64);
    run_staged<Config<Dtype::bf16, 64, 64, 4, 2, true, 3>, 3, true>("bf16 d64 128x64 s4 P sb3", rng, 64);
    run_staged<Config<Dtype::bf16, 64, 64, 6, 2, false, 3>, 3, true>("bf16 d64 128x64 s6 sb3", rng, 64);
    // evoformer hd64 on 128-key tiles (the emitter's form under $SOLDER_ATTN_BIAS_BN=128, the column sum on
    // persistent blocks): 3 stages of K, V and the 128 x 128 bias tile beside two Q buffers, free consumers,
    // the gate; head dim 32 padded; with turns. (The per-score forms at 128 keys spill under nvcc's ptxas,
    // 40-80 bytes with the pair tile alone or on one block per work tile: the emitter keeps them on 64.)
    run_staged<Config<Dtype::bf16, 64, 128, 3, 2, true, 3, 2, 0, false, true>, 3, true, StagedSumScore>("bf16 d64 128x128 s3 P sb3 q2 Fr", rng, 64);
    run_staged<Config<Dtype::bf16, 64, 128, 3, 2, true, 3, 2, 0, false, true>, 3, true, StagedSumScore>("bf16 d64(32) 128x128 s3 P sb3 q2 Fr", rng, 32);
    run_staged<Config<Dtype::bf16, 64, 128, 3, 2, true, 3, 2>, 3, true, StagedSumScore>("bf16 d64 128x128 s3 P sb3 q2", rng, 64);
    run_padded<Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64(32) 128x128 s4 P", rng);
    run_padded<Config<Dtype::bf16, 64, 128, 4, 3>>("bf16 d64(32) 192x128 s4", rng);
    // a fixed lead block in Q and K (differential attention's halves: q[b, at, h] of [B, 2, H, S, D])
    {
      const PlainScore plain{1.4426950408889634f / 8.0f};
      run_case<Config<Dtype::bf16, 64, 128, 4, 3>>("bf16 d64 192x128 s4 q/k half 1", Case{2, 3, 3, 300, 300, 0}, plain, NoMask{}, rng, 64, LeadBlock{2, 1, 2, 1});
      run_case<Config<Dtype::bf16, 64, 128, 4, 3>>("bf16 d64 192x128 s4 q/k half 0", Case{2, 4, 2, 257, 257, 8}, plain, NoMask{}, rng, 64, LeadBlock{2, 0, 2, 0});
      run_case<Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 128x128 s4 P q half 1 of 3", Case{2, 2, 2, 1000, 1000, 0}, plain, CausalMask{0}, rng, 64, LeadBlock{3, 1, 1, 0});
  }
  }
  // data masks (document ids), with `dy` first: persistent data-mask blocks claiming their work tiles
  // from a counter (Config::Dynamic; the classifier warps follow the claims), with and without the id
  // table, on 3 and 7 blocks, bit for bit against the static persistent configuration on one block per
  // tile (hd64 only: hd128's spills 12 bytes under ptxas, and the emitter keeps it static)
  for (int blocks : {3, 7}) {
    if (mode != "dy" && !table_only && !ids_only) break;
    persistent_blocks = blocks;
    // the emitter's document_mask S 4k kernel with the work tile's setup posted by the classifier warps
    // with its list (Config::PostedWork on a data mask), and with two Q buffers (the next tile's Q, K and
    // V before this tile's last S), each against the static persistent Config with the per-pair stores.
    // (Not S 1k's 64-key Config with both: with this test's mask its consumers spill 4 bytes, `total`
    // across the roles' split; the emitted S 1k kernel with both compiles without spills and is verified
    // through `solder run --backend cuda`.)
    run_data<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true, true>, true, Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 128x128 s4 P Dy Ep Pw data", rng);
    run_data<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, false, true>, true, Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 128x128 s4 P Q2 Dy Ep data", rng);
    run_data<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true>, true, Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 128x128 s4 P Dy data", rng);
    run_data<Config<Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true>, true, Config<Dtype::bf16, 64, 64, 4, 2, true>>("bf16 d64 128x64 s4 P Dy data", rng);
    // the emitter's document_mask kernels (Dynamic, the staged epilogue) against the static persistent
    // Config with the per-pair stores: rows past seq_q, rows that see no key (NaN) through the buffer
    run_data<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>, true, Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 128x128 s4 P Dy Ep data", rng);
    run_data<Config<Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true, false, true>, true, Config<Dtype::bf16, 64, 64, 4, 2, true>>("bf16 d64 128x64 s4 P Dy Ep data", rng);
  }
  persistent_blocks = 3;
  if (!table_only) {
    // data masks (document ids): one block per work tile (non-persistent configurations)
    run_data<Config<Dtype::bf16, 64, 128, 4, 2>>("bf16 d64 128x128 s4 data", rng);
    run_data<Config<Dtype::bf16, 128, 128, 2, 2>>("bf16 d128 128x128 s2 data", rng);
    run_data<Config<Dtype::bf16, 64, 64, 4, 2>>("bf16 d64 128x64 s4 data", rng);
    // persistent data-mask blocks (the next tile's list classified by the producer's idle warps while the
    // consumers run this one; double-buffered): 3 blocks loop over every work tile, compared bit for bit
    // with one block per tile
    run_data<Config<Dtype::bf16, 64, 128, 4, 2, true>>("bf16 d64 128x128 s4 P data", rng);
    run_data<Config<Dtype::bf16, 128, 128, 2, 2, true>>("bf16 d128 128x128 s2 P data", rng);
    run_data<Config<Dtype::bf16, 64, 64, 4, 2, true>>("bf16 d64 128x64 s4 P data", rng);
  }
  // persistent data-mask blocks classifying from the id table (Mask::kColGroups), bit for bit against
  // the per-tile classification above on the same inputs, and one block per tile
  run_data<Config<Dtype::bf16, 64, 128, 4, 2, true>, true>("bf16 d64 128x128 s4 P data", rng);
  run_data<Config<Dtype::bf16, 128, 128, 2, 2, true>, true>("bf16 d128 128x128 s2 P data", rng);
  run_data<Config<Dtype::bf16, 64, 64, 4, 2, true>, true>("bf16 d64 128x64 s4 P data", rng);
  std::printf("%s: %d of %d cases passed\n", failures ? "FAILED" : "OK", cases - failures, cases);
  return failures ? 1 : 0;
}
