// Device half of the agreement test between the CPU executor and the device collectives (issue #6, "host-side
// semantics"). agreement_reference (the executor, on Kernel IR programs) wrote DATA_DIR: a manifest of cases,
// each case's input and the executor's output (agreement_reference.cpp has the format). For every case this
// program runs the device library's collective on the same input with the same cluster shape (clusters of C
// blocks, two clusters, three for inter_cluster_reduce; 256 threads; 2 KB mailbox slots; tiles in shared memory
// when they fit next to the mailbox, else in per-block global memory), one call, outputs poisoned with 0xFF
// bytes (NaN) first, and compares with the executor's output:
//
//   bit-exact  every collective except inter_cluster_reduce(sum): gather and shuffle move bits; max and min are
//              order-free; reduce/reduce_scatter/all_exchange sums and products combine in fp32 in rank order on
//              both sides (docs/cluster-collectives.md) and round once to T.
//   bounded    inter_cluster_reduce(sum): the order of the atomic / bulk combines across clusters is unspecified,
//              each combine rounds to T: |device - executor| <= 2 (k + 1) eps_T sum|terms|, k = combines,
//              eps_T = 2^-23 (f32), 2^-7 (bf16), 2^-10 (f16).
//
// A NaN in the device output never agrees on the random cases (their inputs hold no NaN). The special-value
// cases (inputs with +-0, +-inf, NaN) are compared the same way except that NaN agrees with NaN (any payload,
// but never the 0xFF poison); +0 and -0 differ. They test the max/min rule (NaN propagates, -0 < +0, in any
// rank order) and are reported apart; they gate like the random cases.
//
// Usage: agreement DATA_DIR [--verbose]   Exit 0 when every case agrees, 1 otherwise, 2 on bad usage.
#include <solder/cluster/cluster.cuh>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "agreement_cases.h"
#include "launch.h"

namespace sc = solder::cluster;
using agreement::Case;
using agreement::Collective;
using agreement::ElementType;
using agreement::Op;

constexpr unsigned kThreads = 256;
constexpr unsigned kSlotBytes = 2048;

struct KernelArgs {
  const void* input;  // [blocks][in_count]
  void* output;       // [blocks][out_count], or [C][count] for inter_cluster_reduce
  void* scratch;      // [blocks][in_count + out_count] when tiles live in global memory
  unsigned count, in_count, out_count, group;
  int global_tiles;
};

template <class T>
__device__ void copy_tile(T* dst, const T* src, unsigned count) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  for (unsigned p = threadIdx.x; p < count * sizeof(T) / 16; p += blockDim.x) d[p] = s[p];
}

// One collective per launch: input -> tile, the collective, tile or result -> output.
template <class T, Collective K, sc::reduce_op Op>
__global__ void __launch_bounds__(kThreads) collective_kernel(KernelArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned cluster_size = sc::ptx::cluster_size();
  auto comm = sc::communicator::setup(smem, kSlotBytes);
  T* tile = a.global_tiles ? static_cast<T*>(a.scratch) + static_cast<size_t>(blockIdx.x) * (a.in_count + a.out_count)
                           : reinterpret_cast<T*>(smem + sc::mailbox_bytes(cluster_size, kSlotBytes));
  T* result = tile + a.in_count;
  T* output = static_cast<T*>(a.output);
  T* my_output = output + static_cast<size_t>(blockIdx.x) * a.out_count;
  copy_tile(tile, static_cast<const T*>(a.input) + static_cast<size_t>(blockIdx.x) * a.in_count, a.in_count);
  // (no barrier needed: every collective begins with a block barrier)
  if constexpr (K == Collective::cluster_reduce) {
    sc::cluster_reduce<Op>(comm, tile, a.count);
    copy_tile(my_output, tile, a.count);
  } else if constexpr (K == Collective::all_exchange) {
    constexpr auto op = Op == sc::reduce_op::prod ? sc::exchange_op::mul : sc::exchange_op::add;
    sc::all_exchange<op>(comm, tile, a.count, a.group);
    copy_tile(my_output, tile, a.count);
  } else if constexpr (K == Collective::cluster_gather) {
    sc::cluster_gather(comm, tile, result, a.count);
    copy_tile(my_output, result, a.out_count);
  } else if constexpr (K == Collective::reduce_scatter) {
    sc::reduce_scatter<Op>(comm, tile, result, a.count);
    copy_tile(my_output, result, a.count);
  } else if constexpr (K == Collective::dsm_shuffle) {
    sc::dsm_shuffle(comm, tile, result, a.count, a.group);
    copy_tile(my_output, result, a.count);
  } else if constexpr (K == Collective::inter_cluster_reduce) {
    sc::inter_cluster_reduce<Op>(tile, a.count, output + sc::ptx::block_rank() * a.count);
  }
  comm.teardown();
}

// ---- host side --------------------------------------------------------------------------------------------

static float to_float(ElementType t, const void* p, size_t i) {
  if (t == ElementType::f32) return static_cast<const float*>(p)[i];
  if (t == ElementType::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return __half2float(static_cast<const __half*>(p)[i]);
}
static void from_float(ElementType t, void* p, size_t i, float v) {  // exact for values already rounded to T
  if (t == ElementType::f32) static_cast<float*>(p)[i] = v;
  else if (t == ElementType::bf16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else static_cast<__half*>(p)[i] = __float2half_rn(v);
}
static bool is_poison(ElementType t, const void* p, size_t i) {
  if (t == ElementType::f32) return static_cast<const uint32_t*>(p)[i] == 0xffffffffu;
  return static_cast<const uint16_t*>(p)[i] == 0xffffu;
}

static std::vector<float> read_floats(const std::string& path, size_t count) {
  std::vector<float> data(count);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f || std::fread(data.data(), sizeof(float), count, f) != count || std::fgetc(f) != EOF) {
    std::fprintf(stderr, "agreement: cannot read %zu floats from %s\n", count, path.c_str());
    std::exit(2);
  }
  std::fclose(f);
  return data;
}

template <class T>
static cudaError_t launch(const Case& c, size_t smem, const KernelArgs& a) {
  auto go = [&](auto kernel) { return launch_clusters(kernel, c.clusters(), c.cluster, kThreads, smem, nullptr, a); };
  using R = sc::reduce_op;
  switch (c.collective) {
    case Collective::cluster_reduce:
      if (c.op == Op::sum) return go(collective_kernel<T, Collective::cluster_reduce, R::sum>);
      if (c.op == Op::max) return go(collective_kernel<T, Collective::cluster_reduce, R::max>);
      return go(collective_kernel<T, Collective::cluster_reduce, R::min>);
    case Collective::reduce_scatter:
      if (c.op == Op::sum) return go(collective_kernel<T, Collective::reduce_scatter, R::sum>);
      if (c.op == Op::max) return go(collective_kernel<T, Collective::reduce_scatter, R::max>);
      return go(collective_kernel<T, Collective::reduce_scatter, R::min>);
    case Collective::inter_cluster_reduce:
      if (c.op == Op::sum) return go(collective_kernel<T, Collective::inter_cluster_reduce, R::sum>);
      if (c.op == Op::max) return go(collective_kernel<T, Collective::inter_cluster_reduce, R::max>);
      return go(collective_kernel<T, Collective::inter_cluster_reduce, R::min>);
    case Collective::all_exchange:
      if (c.op == Op::mul) return go(collective_kernel<T, Collective::all_exchange, R::prod>);
      return go(collective_kernel<T, Collective::all_exchange, R::sum>);
    case Collective::cluster_gather: return go(collective_kernel<T, Collective::cluster_gather, R::sum>);
    case Collective::dsm_shuffle: return go(collective_kernel<T, Collective::dsm_shuffle, R::sum>);
  }
  return cudaErrorInvalidValue;
}

struct Outcome {
  enum Status { exact, bounded, differ } status;
  size_t mismatches = 0, bad = 0, nan_pairs = 0;
  double worst = 0;
  std::string examples;  // the first elements outside the rule (1 for random cases, 8 for special ones)
};

static Outcome run_case(const std::string& dir, const Case& c) {
  const ElementType t = c.type;
  const unsigned eb = agreement::type_bytes(t);
  const bool inter = c.collective == Collective::inter_cluster_reduce;
  const size_t in_elems = c.input_elements(), out_elems = c.output_elements();
  std::vector<float> x = read_floats(dir + "/" + c.file("x"), in_elems);
  std::vector<float> expected = read_floats(dir + "/" + c.file("y"), out_elems);
  std::vector<float> init = inter ? read_floats(dir + "/" + c.file("init"), out_elems) : std::vector<float>{};

  std::vector<unsigned char> input(in_elems * eb), initial(out_elems * eb, 0xff);  // 0xff: NaN poison
  for (size_t i = 0; i < in_elems; ++i) from_float(t, input.data(), i, x[i]);
  for (size_t i = 0; i < init.size(); ++i) from_float(t, initial.data(), i, init[i]);

  const size_t mailbox = sc::mailbox_bytes(c.cluster, kSlotBytes);
  const size_t tile_bytes = static_cast<size_t>(c.in_count() + c.out_count()) * eb;
  const bool global_tiles = mailbox + tile_bytes > 200 * 1024;
  const size_t smem = mailbox + (global_tiles ? 0 : tile_bytes);
  void *d_input, *d_output, *d_scratch = nullptr;
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_input, input.size()));
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_output, initial.size()));
  if (global_tiles) {
    CLUSTER_CHECK_CUDA(cudaMalloc(&d_scratch, tile_bytes * c.blocks()));
    CLUSTER_CHECK_CUDA(cudaMemset(d_scratch, 0xff, tile_bytes * c.blocks()));
  }
  CLUSTER_CHECK_CUDA(cudaMemcpy(d_input, input.data(), input.size(), cudaMemcpyHostToDevice));
  CLUSTER_CHECK_CUDA(cudaMemcpy(d_output, initial.data(), initial.size(), cudaMemcpyHostToDevice));
  KernelArgs a{d_input, d_output, d_scratch, c.count(), c.in_count(), c.out_count(), c.group, global_tiles};
  cudaError_t status = t == ElementType::f32    ? launch<float>(c, smem, a)
                       : t == ElementType::bf16 ? launch<__nv_bfloat16>(c, smem, a)
                                                : launch<__half>(c, smem, a);
  // Watchdog: a protocol bug shows up as a hang; stop after 20 s instead of burning the whole run.
  if (status == cudaSuccess && !finished_within(std::chrono::seconds(20))) {
    std::printf("HANG  case %d %s: kernel still running after 20 s\n", c.id, c.row().c_str());
    std::fflush(stdout);
    std::_Exit(2);
  }
  if (status == cudaSuccess) status = cudaDeviceSynchronize();
  std::vector<unsigned char> result(initial.size());
  if (status == cudaSuccess) status = cudaMemcpy(result.data(), d_output, result.size(), cudaMemcpyDeviceToHost);
  if (status != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in case %d (%s): %s\n", c.id, c.row().c_str(), cudaGetErrorString(status));
    std::exit(1);  // a sticky error poisons every later case
  }
  cudaFree(d_input);
  cudaFree(d_output);
  if (d_scratch) cudaFree(d_scratch);

  // The bound for inter_cluster_reduce(sum): element (r, i) combines init and one block of rank r per cluster.
  const double eps = t == ElementType::f32 ? 0x1p-23 : t == ElementType::bf16 ? 0x1p-7 : 0x1p-10;
  Outcome o{Outcome::exact};
  for (size_t i = 0; i < out_elems; ++i) {
    const float got = to_float(t, result.data(), i), want = expected[i];
    uint32_t got_bits, want_bits;
    std::memcpy(&got_bits, &got, 4);
    std::memcpy(&want_bits, &want, 4);
    if (got_bits == want_bits && !is_poison(t, result.data(), i)) continue;
    if (c.special && std::isnan(got) && std::isnan(want) && !is_poison(t, result.data(), i)) {
      ++o.nan_pairs;  // NaN agrees with NaN, whatever the payload (special cases only)
      continue;
    }
    ++o.mismatches;
    double err = std::fabs(static_cast<double>(got) - want), bound = 0;
    if (!c.exact()) {
      const size_t r = i / c.count(), e = i % c.count();
      double magnitude = std::fabs(init[i]);
      for (unsigned k = 0; k < c.clusters(); ++k) magnitude += std::fabs(x[(k * c.cluster + r) * c.in_count() + e]);
      bound = 2.0 * (c.clusters() + 1) * eps * magnitude;
    }
    if (c.exact() || std::isnan(got) || std::isnan(want) || !(err <= bound)) {  // exact: +0 vs -0 differs too
      if (o.bad < (c.special ? 8u : 1u)) {
        char text[160];
        std::snprintf(text, sizeof text, "\n         element %zu: device %.9g (0x%08x) executor %.9g (0x%08x)%s", i, got,
                      got_bits, want, want_bits, is_poison(t, result.data(), i) ? " [poison: never written]" : "");
        o.examples += text;
      }
      ++o.bad;
      err = INFINITY;
    }
    if (err > o.worst) o.worst = err;
  }
  o.status = o.bad ? Outcome::differ : o.mismatches ? Outcome::bounded : Outcome::exact;
  return o;
}

int main(int argc, char** argv) {
  if (argc < 2 || (argc == 3 && std::strcmp(argv[2], "--verbose")) || argc > 3) {
    std::fprintf(stderr, "usage: agreement DATA_DIR [--verbose]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const bool verbose = argc == 3;
  FILE* manifest = std::fopen((dir + "/manifest.txt").c_str(), "r");
  if (!manifest) {
    std::fprintf(stderr, "agreement: no %s/manifest.txt (run agreement_reference first)\n", dir.c_str());
    return 2;
  }
  std::vector<Case> cases;
  char line[256];
  while (std::fgets(line, sizeof line, manifest)) {
    Case c;
    if (!agreement::parse_manifest_line(line, &c)) {
      std::fprintf(stderr, "agreement: bad manifest line: %s", line);
      return 2;
    }
    cases.push_back(c);
  }
  std::fclose(manifest);
  cudaDeviceProp prop;
  CLUSTER_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs); %zu cases from %s; %u threads, %u-byte slots\n", prop.name,
              prop.multiProcessorCount, cases.size(), dir.c_str(), kThreads, kSlotBytes);

  // Table: row -> C -> {exact, bounded, differ}, for random and special cases apart.
  std::map<std::string, std::map<unsigned, std::array<int, 3>>> table[2];
  std::vector<std::string> rows[2];
  int counts[2][3] = {};
  for (const Case& c : cases) {
    if (verbose) std::fprintf(stderr, "running case %d %s %s C=%u %u B\n", c.id, c.row().c_str(),
                              agreement::type_name(c.type), c.cluster, c.payload_bytes);
    Outcome o = run_case(dir, c);
    const int s = c.special ? 1 : 0;
    const std::string row = c.row() + " " + agreement::type_name(c.type);
    if (!table[s].count(row)) rows[s].push_back(row);
    table[s][row][c.cluster][o.status]++;
    counts[s][o.status]++;
    if (o.status != Outcome::exact || c.special)
      std::printf("%-6s case %d %s %s C=%u %u B: %zu/%zu elements differ in bits, %zu outside the rule, max |diff| %.3g; "
                  "NaN on both sides: %zu%s\n",
                  o.status == Outcome::differ ? (c.special ? "DIFF" : "FAIL") : o.status == Outcome::bounded ? "BOUND" : "SAME",
                  c.id, c.row().c_str(), agreement::type_name(c.type), c.cluster, c.payload_bytes, o.mismatches,
                  c.output_elements(), o.bad, o.worst, o.nan_pairs, o.examples.c_str());
  }
  for (int s = 0; s < 2; ++s) {
    if (rows[s].empty()) continue;
    std::printf("\n%s\n| collective, dtype | rule | C=2 | C=4 | C=8 |\n|---|---|---|---|---|\n",
                s == 0 ? "Random inputs (make_inputs, fixed seeds), 1 KB and 16 KB per block: agreeing / cases"
                       : "Special values (+-0, +-inf, NaN; even and odd sources; NaN agrees with NaN), 1 KB: agreeing / cases");
    for (const std::string& row : rows[s]) {
      const bool bounded = row.rfind("inter_cluster_reduce sum", 0) == 0;
      std::printf("| %s | %s |", row.c_str(), bounded ? "bound" : "bit-exact");
      for (unsigned C : {2u, 4u, 8u}) {
        auto it = table[s][row].find(C);
        if (it == table[s][row].end()) {
          std::printf(" - |");
          continue;
        }
        const std::array<int, 3>& n = it->second;
        std::printf(" %s%d/%d%s |", n[2] ? "**" : "", n[0] + n[1], n[0] + n[1] + n[2], n[2] ? "**" : "");
      }
      std::printf("\n");
    }
  }
  std::printf("\nrandom inputs: %d of %d cases agree (%d bit-exact, %d within the bound), %d differ\n",
              counts[0][0] + counts[0][1], counts[0][0] + counts[0][1] + counts[0][2], counts[0][0], counts[0][1],
              counts[0][2]);
  std::printf("special values: %d of %d cases agree (%d bit-exact, %d within the bound), %d differ\n",
              counts[1][0] + counts[1][1], counts[1][0] + counts[1][1] + counts[1][2], counts[1][0], counts[1][1],
              counts[1][2]);
  return counts[0][2] || counts[1][2] ? 1 : 0;
}
