// Benchmark of the sm_90a attention skeleton (device/solder/attention/sm90_attention.cuh).
//
//   bench_attention table [JSON]   the suite's shapes (bench/suites.py: 16k tokens, H 16, B = 16384 / S)
//                                  at S 1k, 4k, 16k, hd 64 and 128, no mask and causal, in the tile
//                                  configurations of each head dim, with one block per work tile or
//                                  persistent blocks (one per SM; "pers").
//   bench_attention profile        one plain launch of each headline kernel (hd64 192x128 at S 4096, hd128
//                                  128x128 persistent at S 4096 and 1024), for ncu.
//   bench_attention stamps DIR     the emitter's Configs of causal hd64 S 1k (Dynamic), vanilla hd64 S 1k
//                                  (Stagger 2) and causal hd64 S 4k, and the first two
//                                  with free consumers (Config::FreeConsumers), each with and
//                                  without clock stamps (Stamped<Config>): both timed in two interleaved
//                                  rounds, their outputs compared bit for bit, and the last stamped launch's
//                                  records written to DIR/stamps_NAME.bin (sm90_attention.cuh, "Clock
//                                  stamps"; bench/attention/stamps_table.py reads them).
//   bench_attention stamps_data DIR  the same for document_mask's Configs (the emitter's Dynamic data-mask
//                                  kernels with the staged epilogue, ids sorted_randint(0, 12) per batch
//                                  as the suite's): S 4k (128-key tiles, the id table), then S 4k with
//                                  the work tile's setup posted by the classifier warps (PostedWork) and
//                                  with two Q buffers, S 1k (64-key tiles, the table built per group) and
//                                  S 16k; the classifier warps' stamps are in the producer's records.
//
// Timing: a CUDA graph of `per_graph` launches (about 2 TFLOP per graph), 2 warm-up replays, then CUDA
// events around each of 15 replays; the median replay / per_graph. Inputs are random (hash-filled on the
// device), never zeros. TFLOP/s = 4·B·H·S²·D / time, causal counting half (the suite's convention).
// The peers (cuDNN and FlashAttention SDPA through torch) are timed the same way by peer.py.
#include <algorithm>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "../../tests/gpu/attention_skeleton/attention_test_util.h"
#include "../common/graph_timer.h"

using namespace attention_test;
using solder::attention::CausalMask;
using solder::attention::Config;
using solder::attention::NoMask;
using solder::attention::PlainScore;

namespace {

struct Result {
  std::string config;
  int batch, heads, seq, dim;
  bool causal;
  double ms, tflops;
};
std::vector<Result> results;

__global__ void fill_random(__nv_bfloat16* data, size_t count, unsigned seed, float range) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    data[i] = __float2bfloat16_rn(range * (float(h & 0xFFFFFF) / float(1 << 23) - 1.0f));
  }
}

Tensor device_tensor(int bh, int seq, int dim, unsigned seed, float range) {
  Tensor t;
  t.dtype = Dtype::bf16;
  t.bh = bh;
  t.seq = seq;
  t.dim = dim;
  t.ld = dim;
  t.bytes = size_t(bh) * seq * dim * 2;
  CUDA_CHECK(cudaMalloc(&t.device, t.bytes));
  fill_random<<<1024, 256>>>(static_cast<__nv_bfloat16*>(t.device), t.bytes / 2, seed, range);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return t;
}

int sm_count = 132;

// Times configuration C on one shape; persistent: one block per SM looping over the work tiles;
// replays 0: one plain launch (for ncu).
template <class C, class Mask>
void bench(int batch, int heads, int seq, const Mask& mask, bool causal, int replays, bool persistent) {
  constexpr int D = C::HeadDim;
  const int bh = batch * heads;
  Tensor q = device_tensor(bh, seq, D, 1, 2.0f), k = device_tensor(bh, seq, D, 2, 2.0f), v = device_tensor(bh, seq, D, 3, 1.0f);
  Tensor o = device_tensor(bh, seq, D, 4, 1.0f);
  TensorMap mq = make_map(q, C::QBoxRows, "q"), mk = make_map(k, C::KVBoxRows, "k"), mv = make_map(v, C::KVBoxRows, "v");
  AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.heads_kv = heads;
  shape.seq_q = seq;
  shape.seq_k = seq;
  const PlainScore score{float(1.4426950408889634 / std::sqrt(double(D)))};
  Store16<Dtype::bf16> epilogue{o.device, D, seq};
  const double flops = 4.0 * bh * double(seq) * seq * D * (causal ? 0.5 : 1.0);
  const int per_graph = std::max(2, std::min(50, int(2e12 / flops)));

  const int blocks = persistent ? sm_count : 0;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  launch<C>(mq, mk, mv, shape, score, mask, epilogue, stream, blocks);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (replays == 0) {
    CUDA_CHECK(cudaStreamDestroy(stream));
    free_tensor(q);
    free_tensor(k);
    free_tensor(v);
    free_tensor(o);
    return;
  }
  const double ms = graph_timing::graph_median_ms(stream, per_graph, replays, [&](cudaStream_t s) {
    launch<C>(mq, mk, mv, shape, score, mask, epilogue, s, blocks);
  });
  char name[64];
  std::snprintf(name, sizeof name, "%dx%d s%d%s", C::BM, C::BN, C::Stages, persistent ? " pers" : "");
  results.push_back({name, batch, heads, seq, D, causal, ms, flops / ms / 1e9});
  std::printf("solder %-7s d%-3d S=%-6d B=%-3d H=%d %-19s %9.4f ms %7.1f TFLOP/s\n", causal ? "causal" : "vanilla", D, seq,
              batch, heads, name, ms, flops / ms / 1e9);
  std::fflush(stdout);
  CUDA_CHECK(cudaStreamDestroy(stream));
  free_tensor(q);
  free_tensor(k);
  free_tensor(v);
  free_tensor(o);
}

void write_json(const char* path) {
  if (!path) return;
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    std::exit(1);
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"kernel\": \"solder::attention::attention_kernel (sm90_attention.cuh)\",\n  \"results\": [\n",
               prop.name, date);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"config\": \"%s\", \"batch\": %d, \"heads\": %d, \"seq\": %d, \"dim\": %d, \"causal\": %s, \"ms\": %.6f, "
                 "\"tflops\": %.2f}%s\n",
                 r.config.c_str(), r.batch, r.heads, r.seq, r.dim, r.causal ? "true" : "false", r.ms, r.tflops,
                 i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

// Times Config C on one shape with and without clock stamps (two interleaved rounds), compares their
// outputs bit for bit, and writes the last timed stamped launch's records to dir/stamps_<name>.bin: a
// header of 8 int64 (magic 0x5354414d50, consumers, total work tiles, words per record, batch, heads, seq, head dim),
// then total · (Consumers + 1) records.
// Store16 with the staged epilogue's interface (functors.cuh, "epilogue_staged"): a Config with
// StagedEpilogue stores whole rows through shared memory, any other stores per pair through Store16.
struct StagedStore16 : Store16<Dtype::bf16> {
  static constexpr bool kStaged = true;
  __device__ unsigned int staged_pack(int, int, int, float o0, float o1) const {
    const __nv_bfloat162 w = __floats2bfloat162_rn(o0, o1);
    return *reinterpret_cast<const unsigned int*>(&w);
  }
  __device__ void* staged_row(int bh, int row) const { return static_cast<unsigned char*>(out) + (size_t(bh) * seq + row) * ld * 2; }
};

// document_mask's mask as the emitter writes it (kDataTiles, one-id tiles, rows without a key NaN, the
// keys' ids in one group per batch): query row i of batch b sees key j when doc[b][i] == doc[b][j].
template <int MaxKeyTiles, int ColGroups>
struct DocumentMask {
  const int* doc;
  int heads, seq;
  static constexpr bool kDataTiles = true;
  static constexpr bool kOneIdTiles = true;
  static constexpr bool kEmptyRowNaN = true;
  static constexpr int kMaxKeyTiles = MaxKeyTiles;
  static constexpr int kColGroups = ColGroups;
  __device__ int col_groups() const { return kColGroups; }
  __device__ int col_group(int bh) const { return bh / heads; }
  __device__ int group_bh(int group) const { return group * heads; }
  __device__ void key_tiles(int, int, int, int seq_k, int bn, int* begin, int* end) const {
    *begin = 0;
    *end = (seq_k + bn - 1) / bn;
  }
  __device__ bool partial(int, int, int, int, int) const { return true; }
  __device__ int row_id(int bh, int row) const { return doc[size_t(bh / heads) * seq + row]; }
  __device__ int col_id(int bh, int col) const { return doc[size_t(bh / heads) * seq + col]; }
  __device__ bool match(int, int r, int c) const { return r == c; }
  __device__ int tile_class(int, int row_lo, int row_hi, int col_lo, int col_hi) const {
    if (col_hi < row_lo || col_lo > row_hi) return 0;
    return row_lo == row_hi && col_lo == col_hi && row_lo == col_lo ? 1 : 2;
  }
  __device__ bool visible(int bh, int row, int col) const { return match(bh, row_id(bh, row), col_id(bh, col)); }
};

// The suite's document ids (bench/suites.py, `sorted_randint(0, 12)`): per batch seq draws from [0, 12), sorted.
int* document_ids(int batch, int seq, unsigned seed) {
  std::vector<int> ids(size_t(batch) * seq);
  std::mt19937 rng(seed);
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < seq; ++i) ids[size_t(b) * seq + i] = int(rng() % 12);
    std::sort(ids.begin() + size_t(b) * seq, ids.begin() + size_t(b + 1) * seq);
  }
  int* device = nullptr;
  CUDA_CHECK(cudaMalloc(&device, ids.size() * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(device, ids.data(), ids.size() * sizeof(int), cudaMemcpyHostToDevice));
  return device;
}

template <class C, class Mask>
bool stamps(const char* dir, const char* name, int batch, int heads, int seq, const Mask& mask, bool causal, bool persistent) {
  using S = solder::attention::Stamped<C>;
  constexpr int D = C::HeadDim;
  const int bh = batch * heads;
  Tensor q = device_tensor(bh, seq, D, 1, 2.0f), k = device_tensor(bh, seq, D, 2, 2.0f), v = device_tensor(bh, seq, D, 3, 1.0f);
  Tensor o = device_tensor(bh, seq, D, 4, 1.0f), o_stamped = device_tensor(bh, seq, D, 5, 1.0f);
  TensorMap mq = make_map(q, C::QBoxRows, "q"), mk = make_map(k, C::KVBoxRows, "k"), mv = make_map(v, C::KVBoxRows, "v");
  AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.heads_kv = heads;
  shape.seq_q = seq;
  shape.seq_k = seq;
  const PlainScore score{float(1.4426950408889634 / std::sqrt(double(D)))};
  StagedStore16 epilogue{{o.device, D, seq}}, epilogue_stamped{{o_stamped.device, D, seq}};
  const double flops = 4.0 * bh * double(seq) * seq * D * (causal ? 0.5 : 1.0);
  const int per_graph = std::max(2, std::min(50, int(2e12 / flops)));
  const int blocks = persistent ? sm_count : 0;
  const long long total = solder::attention::total_tiles(C{}, shape);
  const size_t words = size_t(total) * (C::Consumers + 1) * solder::attention::detail::kStampWords;
  unsigned long long* buffer = nullptr;
  CUDA_CHECK(cudaMalloc(&buffer, words * 8));
  CUDA_CHECK(cudaMemset(buffer, 0, words * 8));
  CUDA_CHECK(cudaMemcpyToSymbol(solder::attention::detail::stamp_buffer, &buffer, sizeof buffer));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  launch<C>(mq, mk, mv, shape, score, mask, epilogue, stream, blocks);
  launch<S>(mq, mk, mv, shape, score, mask, epilogue_stamped, stream, blocks);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<unsigned char> plain(o.bytes), stamped(o.bytes);
  CUDA_CHECK(cudaMemcpy(plain.data(), o.device, o.bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(stamped.data(), o_stamped.device, o.bytes, cudaMemcpyDeviceToHost));
  const bool same = plain == stamped;
  double ms[2][2];
  for (int round = 0; round < 2; ++round) {
    ms[round][0] = graph_timing::graph_median_ms(stream, per_graph, 15, [&](cudaStream_t s) {
      launch<C>(mq, mk, mv, shape, score, mask, epilogue, s, blocks);
    });
    ms[round][1] = graph_timing::graph_median_ms(stream, per_graph, 15, [&](cudaStream_t s) {
      launch<S>(mq, mk, mv, shape, score, mask, epilogue_stamped, s, blocks);
    });
  }
  // the records of the last timed replay's last launch (warm: caches and L2 as in the timings)
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<unsigned long long> records(words);
  CUDA_CHECK(cudaMemcpy(records.data(), buffer, words * 8, cudaMemcpyDeviceToHost));
  long long written = 0;
  for (size_t r = 0; r < words; r += solder::attention::detail::kStampWords) written += records[r] >> 63;
  std::printf("stamps %-16s B=%-3d H=%d S=%-5d d%-3d %s tiles %lld, records %lld of %lld, output %s; plain %.2f %.2f us, stamped %.2f %.2f us\n",
              name, batch, heads, seq, D, causal ? "causal " : "vanilla", total, written, total * (C::Consumers + 1),
              same ? "bit-identical" : "DIFFERS", 1e3 * ms[0][0], 1e3 * ms[1][0], 1e3 * ms[0][1], 1e3 * ms[1][1]);
  std::fflush(stdout);
  const std::string path = std::string(dir) + "/stamps_" + name + ".bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  const long long header[8] = {0x5354414d50ll, C::Consumers, total, solder::attention::detail::kStampWords, batch, heads, seq, D};
  std::fwrite(header, sizeof header, 1, f);
  std::fwrite(records.data(), 8, words, f);
  std::fclose(f);
  unsigned long long* none = nullptr;
  CUDA_CHECK(cudaMemcpyToSymbol(solder::attention::detail::stamp_buffer, &none, sizeof none));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(buffer));
  free_tensor(q);
  free_tensor(k);
  free_tensor(v);
  free_tensor(o);
  free_tensor(o_stamped);
  return same && written == total * (C::Consumers + 1);
}

using D64_C2 = Config<Dtype::bf16, 64, 128, 4, 2>;
using D64_C2P = Config<Dtype::bf16, 64, 128, 4, 2, true>;
using D64_C3 = Config<Dtype::bf16, 64, 128, 4, 3>;
using D128 = Config<Dtype::bf16, 128, 128, 2, 2>;
using D128P = Config<Dtype::bf16, 128, 128, 2, 2, true>;
using D128S3P = Config<Dtype::bf16, 128, 128, 3, 2, true>;

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "table";
  const char* json = argc > 2 ? argv[2] : nullptr;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  const int heads = 16, tokens = 16384;
  sm_count = prop.multiProcessorCount;
  if (mode == "table") {
    for (int seq : {1024, 4096, 16384}) {
      const int batch = tokens / seq;
      bench<D64_C2>(batch, heads, seq, NoMask{}, false, 15, false);
      bench<D64_C2P>(batch, heads, seq, NoMask{}, false, 15, true);
      bench<D64_C3>(batch, heads, seq, NoMask{}, false, 15, false);
      bench<D64_C2>(batch, heads, seq, CausalMask{0}, true, 15, false);
      bench<D64_C2P>(batch, heads, seq, CausalMask{0}, true, 15, true);
      bench<D64_C3>(batch, heads, seq, CausalMask{0}, true, 15, false);
      bench<D128>(batch, heads, seq, NoMask{}, false, 15, false);
      bench<D128P>(batch, heads, seq, NoMask{}, false, 15, true);
      bench<D128S3P>(batch, heads, seq, NoMask{}, false, 15, true);
      bench<D128>(batch, heads, seq, CausalMask{0}, true, 15, false);
      bench<D128P>(batch, heads, seq, CausalMask{0}, true, 15, true);
      bench<D128S3P>(batch, heads, seq, CausalMask{0}, true, 15, true);
    }
  } else if (mode == "profile") {  // one plain launch of each headline kernel
    bench<D64_C3>(4, heads, 4096, NoMask{}, false, 0, false);
    bench<D128P>(4, heads, 4096, NoMask{}, false, 0, true);
    bench<D128P>(16, heads, 1024, NoMask{}, false, 0, true);
  } else if (mode == "stamps") {  // the emitter's Configs of the issue's causal cells, with clock stamps
    const char* dir = argc > 2 ? argv[2] : ".";
    json = nullptr;
    bool ok = true;
    ok &= stamps<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true>>(dir, "causal_d64_s1k", 16, heads, 1024, CausalMask{0}, true, true);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, true>>(dir, "causal_d64_s1k_free", 16, heads, 1024, CausalMask{0}, true, true);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 2>>(dir, "vanilla_d64_s1k", 16, heads, 1024, NoMask{}, false, true);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 6, 2, true, 0, 2, 0, false, true>>(dir, "vanilla_d64_s1k_free", 16, heads, 1024, NoMask{}, false, true);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 4, 3>>(dir, "causal_d64_s4k", 4, heads, 4096, CausalMask{0}, true, false);
    // (not causal hd128 S 1k's Config: stamped, its consumers spill 4 bytes at 232 and at 240 registers)
    std::printf("stamps: %s\n", ok ? "all records written, outputs bit-identical" : "FAILED");
    if (!ok) return 1;
  } else if (mode == "stamps_data") {  // document_mask's Configs (the emitter's at S 1k / 4k / 16k, and two variants at S 4k)
    const char* dir = argc > 2 ? argv[2] : ".";
    json = nullptr;
    bool ok = true;
    using Doc4k = DocumentMask<32, 4>;
    int* doc4k = document_ids(4, 4096, 4096);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>>(dir, "docmask_s4k", 4, heads, 4096, Doc4k{doc4k, heads, 4096}, false, true);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true, true>>(dir, "docmask_s4k_pw", 4, heads, 4096, Doc4k{doc4k, heads, 4096}, false, true);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 2, 0, true, false, true>>(dir, "docmask_s4k_q2", 4, heads, 4096, Doc4k{doc4k, heads, 4096}, false, true);
    CUDA_CHECK(cudaFree(doc4k));
    int* doc1k = document_ids(16, 1024, 1024);
    ok &= stamps<Config<Dtype::bf16, 64, 64, 4, 2, true, 0, 1, 0, true, false, true>>(dir, "docmask_s1k", 16, heads, 1024, DocumentMask<16, 16>{doc1k, heads, 1024}, false, true);
    CUDA_CHECK(cudaFree(doc1k));
    int* doc16k = document_ids(1, 16384, 16384);
    ok &= stamps<Config<Dtype::bf16, 64, 128, 4, 2, true, 0, 1, 0, true, false, true>>(dir, "docmask_s16k", 1, heads, 16384, DocumentMask<128, 1>{doc16k, heads, 16384}, false, true);
    CUDA_CHECK(cudaFree(doc16k));
    std::printf("stamps_data: %s\n", ok ? "all records written, outputs bit-identical" : "FAILED");
    if (!ok) return 1;
  } else {
    std::fprintf(stderr, "usage: bench_attention table|profile|stamps|stamps_data [JSON|DIR]\n");
    return 2;
  }
  write_json(json);
  return 0;
}
