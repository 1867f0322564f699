// Device tests of the cluster collectives against host references.
//
// Every collective x cluster size {1,2,4,8,16, and 3,6,12} x dtype {f32,bf16,f16} x payload {1,4,32,256 KB}
// (payload = bytes of each block's input tile). Inputs are random; outputs are poisoned with 0xFF bytes (NaN)
// before each run; each kernel makes `reps` back-to-back calls with fresh data (phase and parity reuse).
// Tiles live in shared memory when they fit next to the mailbox, else in per-block global memory.
// Flags: --subset (a few small cases, for compute-sanitizer), --filter=TEXT (case names containing TEXT),
// --verbose (names each case on stderr before running it), --transport=bulk|direct (the communicator's
// bulk-copy data path, or direct writes into the peers' shared-memory tiles, instead of st.async into slots),
// --threads=N (threads per block, default 256).
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

#include "host_combine.h"
#include "launch.h"

namespace sc = solder::cluster;
using sc::reduce_op;

enum class kind { reduce, reduce_scatter, gather, shuffle, exchange_add, exchange_mul, inter };

struct kernel_args {
  const void* input;   // [reps][blocks][in_count]
  void* output;        // [reps][blocks][out_count], or [cluster_size][count] for inter
  void* scratch;       // [blocks][in_count + out_count] when tiles live in global memory
  unsigned count;      // the collective's count argument
  unsigned in_count, out_count, group, reps, slot_bytes;
  int global_tiles;
  unsigned transport;  // sc::transport of the communicator
};

template <class T>
__device__ void copy_tile(T* dst, const T* src, unsigned count) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  for (unsigned p = threadIdx.x; p < count * sizeof(T) / 16; p += blockDim.x) d[p] = s[p];
}

template <class T, kind K, reduce_op Op>
__global__ void __launch_bounds__(1024) collective_kernel(kernel_args a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned cluster_size = sc::ptx::cluster_size();
  auto comm = sc::communicator::setup(smem, a.slot_bytes, sc::mailbox_layout::all_peers,
                                     static_cast<sc::transport>(a.transport));
  T* in_tile;
  T* out_tile;
  if (a.global_tiles) {
    in_tile = static_cast<T*>(a.scratch) + static_cast<size_t>(blockIdx.x) * (a.in_count + a.out_count);
  } else {
    in_tile = reinterpret_cast<T*>(smem + sc::mailbox_bytes(cluster_size, a.slot_bytes));
  }
  out_tile = in_tile + a.in_count;
  const T* input = static_cast<const T*>(a.input);
  T* output = static_cast<T*>(a.output);
  const size_t blocks = gridDim.x;
  for (unsigned rep = 0; rep < a.reps; ++rep) {
    const T* my_input = input + (rep * blocks + blockIdx.x) * a.in_count;
    T* my_output = output + (rep * blocks + blockIdx.x) * a.out_count;
    if (K != kind::shuffle || rep == 0) copy_tile(in_tile, my_input, a.in_count);
    // (no barrier needed: every collective begins with a block barrier)
    if constexpr (K == kind::reduce) {
      sc::cluster_reduce<Op>(comm, in_tile, a.count);
      copy_tile(my_output, in_tile, a.count);
    } else if constexpr (K == kind::exchange_add || K == kind::exchange_mul) {
      constexpr auto op = K == kind::exchange_add ? sc::exchange_op::add : sc::exchange_op::mul;
      sc::all_exchange<op>(comm, in_tile, a.count, a.group);
      copy_tile(my_output, in_tile, a.count);
    } else if constexpr (K == kind::gather) {
      sc::cluster_gather(comm, in_tile, out_tile, a.count);
      copy_tile(my_output, out_tile, a.out_count);
    } else if constexpr (K == kind::reduce_scatter) {
      sc::reduce_scatter<Op>(comm, in_tile, out_tile, a.count);
      copy_tile(my_output, out_tile, a.count);
    } else if constexpr (K == kind::shuffle) {
      // Ring rotation: the output of step k is the input of step k+1 (ping-pong between the two tiles).
      T* src = rep % 2 == 0 ? in_tile : out_tile;
      T* dst = rep % 2 == 0 ? out_tile : in_tile;
      sc::dsm_shuffle_start(comm, src, a.count, a.group);
      sc::dsm_shuffle_wait(comm, src, dst, a.count, a.group);
      copy_tile(my_output, dst, a.count);
    } else if constexpr (K == kind::inter) {
      T* region = output + sc::ptx::block_rank() * a.count;
      sc::inter_cluster_reduce<Op>(in_tile, a.count, region);
    }
    __syncthreads();  // the next rep overwrites the tiles
  }
  comm.teardown();
}

// ---- host side --------------------------------------------------------------------------------------------

enum class dtype { f32, bf16, f16 };
static const char* dtype_name(dtype d) { return d == dtype::f32 ? "f32" : d == dtype::bf16 ? "bf16" : "f16"; }
static unsigned dtype_bytes(dtype d) { return d == dtype::f32 ? 4 : 2; }

static float to_float(dtype d, const void* p, size_t i) {
  if (d == dtype::f32) return static_cast<const float*>(p)[i];
  if (d == dtype::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return __half2float(static_cast<const __half*>(p)[i]);
}
static void from_float(dtype d, void* p, size_t i, float v) {
  if (d == dtype::f32) static_cast<float*>(p)[i] = v;
  else if (d == dtype::bf16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else static_cast<__half*>(p)[i] = __float2half_rn(v);
}

struct test_case {
  kind k;
  reduce_op op;
  dtype type;
  unsigned cluster_size, payload_bytes, group, slot_bytes;
  bool force_global;
  std::string row, name;
  unsigned reps = 3;  // back-to-back calls per kernel
};

struct outcome {
  enum { pass, tolerance, fail, skip } status;
  std::string detail;
};

static unsigned block_threads = 256;
static sc::transport transport = sc::transport::store_async;
static const char* transport_name(sc::transport t) {
  return t == sc::transport::bulk_copy ? "bulk_copy" : t == sc::transport::direct ? "direct" : "store_async";
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float random_uniform(float lo, float hi) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return lo + (hi - lo) * static_cast<float>((rng_state >> 40) * (1.0 / 16777216.0));
}

template <class T>
static cudaError_t launch_kind(const test_case& c, unsigned clusters, size_t smem, const kernel_args& a,
                               int* max_clusters) {
  auto pick = [&](auto kernel) -> cudaError_t {
    *max_clusters = max_active_clusters(kernel, c.cluster_size, block_threads, smem);
    if (*max_clusters == 0) return cudaErrorNotSupported;
    return launch_clusters(kernel, clusters, c.cluster_size, block_threads, smem, nullptr, a);
  };
  switch (c.k) {
    case kind::reduce:
      if (c.op == reduce_op::sum) return pick(collective_kernel<T, kind::reduce, reduce_op::sum>);
      if (c.op == reduce_op::max) return pick(collective_kernel<T, kind::reduce, reduce_op::max>);
      return pick(collective_kernel<T, kind::reduce, reduce_op::min>);
    case kind::reduce_scatter:
      if (c.op == reduce_op::sum) return pick(collective_kernel<T, kind::reduce_scatter, reduce_op::sum>);
      if (c.op == reduce_op::max) return pick(collective_kernel<T, kind::reduce_scatter, reduce_op::max>);
      return pick(collective_kernel<T, kind::reduce_scatter, reduce_op::min>);
    case kind::inter:
      if (c.op == reduce_op::sum) return pick(collective_kernel<T, kind::inter, reduce_op::sum>);
      if (c.op == reduce_op::max) return pick(collective_kernel<T, kind::inter, reduce_op::max>);
      return pick(collective_kernel<T, kind::inter, reduce_op::min>);
    case kind::gather: return pick(collective_kernel<T, kind::gather, reduce_op::sum>);
    case kind::shuffle: return pick(collective_kernel<T, kind::shuffle, reduce_op::sum>);
    case kind::exchange_add: return pick(collective_kernel<T, kind::exchange_add, reduce_op::sum>);
    case kind::exchange_mul: return pick(collective_kernel<T, kind::exchange_mul, reduce_op::prod>);
  }
  return cudaErrorInvalidValue;
}

static outcome run_case(const test_case& c) {
  const unsigned C = c.cluster_size, eb = dtype_bytes(c.type);
  const unsigned in_count = c.payload_bytes / eb;
  unsigned count = in_count, out_count = in_count;
  if (c.k == kind::gather) out_count = C * in_count;
  if (c.k == kind::reduce_scatter) count = out_count = in_count / C / (16 / eb) * (16 / eb);
  if (const char* e = sc::check_tile(count, eb)) return {outcome::skip, e};
  if (const char* e = sc::check_group(C, c.group)) return {outcome::fail, e};
  if (const char* e = sc::check_slot(C, c.slot_bytes)) return {outcome::fail, e};
  const unsigned reps = c.reps;
  const size_t gather_bytes = static_cast<size_t>(C) * C * c.payload_bytes * reps;
  const unsigned clusters = c.k == kind::inter ? 3 : (gather_bytes > (64u << 20) ? 1 : 2);
  const unsigned blocks = clusters * C;
  const size_t mailbox = sc::mailbox_bytes(C, c.slot_bytes);
  const size_t tile_bytes = static_cast<size_t>(in_count + out_count) * eb;
  const bool global_tiles = c.force_global || mailbox + tile_bytes > 200 * 1024;
  const size_t smem = mailbox + (global_tiles ? 0 : tile_bytes);

  // Inputs: fresh random data for every rep and block. mul stays near 1 so products of 16 stay in range.
  const size_t in_elems = static_cast<size_t>(reps) * blocks * in_count;
  std::vector<unsigned char> input(in_elems * eb);
  const float lo = c.k == kind::exchange_mul ? 0.5f : -1.f, hi = c.k == kind::exchange_mul ? 1.5f : 1.f;
  for (size_t i = 0; i < in_elems; ++i) from_float(c.type, input.data(), i, random_uniform(lo, hi));
  const size_t out_elems = c.k == kind::inter ? static_cast<size_t>(C) * count : static_cast<size_t>(reps) * blocks * out_count;
  std::vector<unsigned char> initial(out_elems * eb, 0xff);  // poison: NaN in every dtype
  if (c.k == kind::inter)
    for (size_t i = 0; i < out_elems; ++i) from_float(c.type, initial.data(), i, random_uniform(-1.f, 1.f));

  void *d_input, *d_output, *d_scratch = nullptr;
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_input, input.size()));
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_output, initial.size()));
  if (global_tiles) {
    CLUSTER_CHECK_CUDA(cudaMalloc(&d_scratch, tile_bytes * blocks));
    CLUSTER_CHECK_CUDA(cudaMemset(d_scratch, 0xff, tile_bytes * blocks));
  }
  CLUSTER_CHECK_CUDA(cudaMemcpy(d_input, input.data(), input.size(), cudaMemcpyHostToDevice));
  CLUSTER_CHECK_CUDA(cudaMemcpy(d_output, initial.data(), initial.size(), cudaMemcpyHostToDevice));
  kernel_args a{d_input, d_output, d_scratch, count, in_count, out_count, c.group, reps, c.slot_bytes, global_tiles,
                static_cast<unsigned>(transport)};
  int max_clusters = 0;
  cudaError_t status = c.type == dtype::f32    ? launch_kind<float>(c, clusters, smem, a, &max_clusters)
                       : c.type == dtype::bf16 ? launch_kind<__nv_bfloat16>(c, clusters, smem, a, &max_clusters)
                                               : launch_kind<__half>(c, clusters, smem, a, &max_clusters);
  // Watchdog: a protocol bug shows up as a hang; stop after 30 s instead of burning the whole run.
  if (status == cudaSuccess && !finished_within(std::chrono::seconds(30))) {
    std::printf("HANG  %s: kernel still running after 30 s\n", c.name.c_str());
    std::fflush(stdout);
    std::_Exit(2);
  }
  if (status == cudaSuccess) status = cudaDeviceSynchronize();
  std::vector<unsigned char> result(initial.size());
  if (status == cudaSuccess) status = cudaMemcpy(result.data(), d_output, result.size(), cudaMemcpyDeviceToHost);
  cudaFree(d_input);
  cudaFree(d_output);
  if (d_scratch) cudaFree(d_scratch);
  if (status == cudaErrorNotSupported && max_clusters == 0) {
    cudaGetLastError();
    return {outcome::skip, "cudaOccupancyMaxActiveClusters = 0 for this cluster size"};
  }
  if (status != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", c.name.c_str(), cudaGetErrorString(status));
    std::exit(1);  // a sticky error poisons every later case
  }

  // Host reference (same accumulation order and rounding as the device).
  std::vector<unsigned char> expected(initial.size());
  std::vector<double> bound(out_elems, 0.0);  // error bound where the order is unspecified (inter)
  auto in = [&](unsigned rep, unsigned block, size_t i) {
    return to_float(c.type, input.data(), (static_cast<size_t>(rep) * blocks + block) * in_count + i);
  };
  for (unsigned rep = 0; rep < reps && c.k != kind::inter; ++rep)
    for (unsigned b = 0; b < blocks; ++b) {
      const unsigned base = b / C * C, rank = b % C;
      const unsigned group_first = base + rank / c.group * c.group, g = rank % c.group;
      const size_t out_base = (static_cast<size_t>(rep) * blocks + b) * out_count;
      for (size_t i = 0; i < out_count; ++i) {
        float v = 0;
        if (c.k == kind::reduce || c.k == kind::exchange_add || c.k == kind::exchange_mul) {
          const unsigned first = c.k == kind::reduce ? base : group_first, n = c.k == kind::reduce ? C : c.group;
          const reduce_op op = c.k == kind::reduce ? c.op : c.k == kind::exchange_add ? reduce_op::sum : reduce_op::prod;
          v = in(rep, first, i);
          for (unsigned r = 1; r < n; ++r) v = host_combine(op, v, in(rep, first + r, i));
        } else if (c.k == kind::reduce_scatter) {
          v = in(rep, base, rank * count + i);
          for (unsigned r = 1; r < C; ++r) v = host_combine(c.op, v, in(rep, base + r, rank * count + i));
        } else if (c.k == kind::gather) {
          v = in(rep, base + i / count, i % count);
        } else if (c.k == kind::shuffle) {
          v = in(0, group_first + (g + c.group * 4 - (rep + 1) % c.group) % c.group, i);
        }
        from_float(c.type, expected.data(), out_base + i, v);
      }
    }
  if (c.k == kind::inter) {
    const double eps = c.type == dtype::f32 ? 1.2e-7 : c.type == dtype::bf16 ? 7.9e-3 : 9.8e-4;
    for (unsigned r = 0; r < C; ++r)
      for (size_t i = 0; i < count; ++i) {
        float v = to_float(c.type, initial.data(), r * count + i);
        double magnitude = std::fabs(v);
        for (unsigned rep = 0; rep < reps; ++rep)
          for (unsigned k = 0; k < clusters; ++k) {
            float x = in(rep, k * C + r, i);
            v = host_combine(c.op, v, x);
            if (c.type != dtype::f32) {  // the device rounds to T at every combine
              unsigned char rounded[4];
              from_float(c.type, rounded, 0, v);
              v = to_float(c.type, rounded, 0);
            }
            magnitude += std::fabs(x);
          }
        from_float(c.type, expected.data(), r * count + i, v);
        bound[r * count + i] = c.op == reduce_op::sum ? 2.0 * (reps * clusters + 1) * eps * magnitude : 0.0;
      }
  }

  size_t mismatches = 0, bad = 0;
  double worst = 0;
  for (size_t i = 0; i < out_elems; ++i) {
    if (std::memcmp(&result[i * eb], &expected[i * eb], eb) == 0) continue;
    ++mismatches;
    float got = to_float(c.type, result.data(), i), want = to_float(c.type, expected.data(), i);
    double err = std::fabs(static_cast<double>(got) - want);
    if (std::isnan(got) || !(err <= bound[i])) ++bad;
    if (std::isnan(got)) err = INFINITY;
    if (err > worst) worst = err;
  }
  char text[160];
  std::snprintf(text, sizeof text, "%zu/%zu elements differ (%zu beyond bound), max abs error %.3g%s", mismatches,
                out_elems, bad, worst, global_tiles ? ", tiles in global memory" : "");
  if (bad) return {outcome::fail, text};
  if (mismatches) return {outcome::tolerance, text};
  return {outcome::pass, text};
}

static std::vector<test_case> all_cases(bool subset) {
  std::vector<test_case> cases;
  struct collective {
    kind k;
    reduce_op op;
    const char* row;
    int group;  // 0: whole cluster, 2: pairs
  };
  const collective collectives[] = {
      {kind::reduce, reduce_op::sum, "cluster_reduce sum", 0},  {kind::reduce, reduce_op::max, "cluster_reduce max", 0},
      {kind::reduce, reduce_op::min, "cluster_reduce min", 0},  {kind::gather, reduce_op::sum, "cluster_gather", 0},
      {kind::reduce_scatter, reduce_op::sum, "reduce_scatter sum", 0},
      {kind::reduce_scatter, reduce_op::max, "reduce_scatter max", 0},
      {kind::reduce_scatter, reduce_op::min, "reduce_scatter min", 0},
      {kind::shuffle, reduce_op::sum, "dsm_shuffle G=C", 0},   {kind::shuffle, reduce_op::sum, "dsm_shuffle G=2", 2},
      {kind::exchange_add, reduce_op::sum, "all_exchange add G=C", 0},
      {kind::exchange_mul, reduce_op::prod, "all_exchange mul G=C", 0},
      {kind::exchange_add, reduce_op::sum, "all_exchange add G=2", 2},
      {kind::inter, reduce_op::sum, "inter_cluster_reduce sum", 0},
      {kind::inter, reduce_op::max, "inter_cluster_reduce max", 0},
      {kind::inter, reduce_op::min, "inter_cluster_reduce min", 0},
  };
  const dtype types[] = {dtype::f32, dtype::bf16, dtype::f16};
  auto add = [&](const collective& col, dtype t, unsigned C, unsigned payload, unsigned slot, bool force_global,
                 unsigned reps = 3) {
    unsigned group = col.group == 0 ? C : 2;
    if (group > C || C % group != 0) return;
    char name[160];
    if (payload >= 1024)
      std::snprintf(name, sizeof name, "%s %s C=%u %uKB slot=%u%s", col.row, dtype_name(t), C, payload / 1024, slot,
                    force_global ? " global" : "");
    else
      std::snprintf(name, sizeof name, "%s %s C=%u %uB slot=%u x%u", col.row, dtype_name(t), C, payload, slot, reps);
    cases.push_back({col.k, col.op, t, C, payload, group, slot, force_global, col.row, name, reps});
  };
  auto default_slot = [](unsigned C) { return sc::slot_bytes_for_budget(C, 48 * 1024); };
  // The one-round all-reduce's limits (limits.cuh, one_round_packets_per_thread): a tile of exactly the limit
  // in a slot that holds it (one round), one packet more (two rounds), and the limit in a slot one packet too
  // small (two rounds); f32 and f16 sum, all_exchange mul; 3 calls per kernel.
  auto add_one_round_limits = [&](unsigned C) {
    const unsigned limit = sc::one_round_packets_per_thread * block_threads * sc::packet_bytes;
    for (dtype t : {dtype::f32, dtype::f16}) {
      add(collectives[0], t, C, limit, limit, false);
      add(collectives[0], t, C, limit + sc::packet_bytes, limit + sc::packet_bytes, false);
      add(collectives[0], t, C, limit, limit - sc::packet_bytes, false);
    }
    add(collectives[10], dtype::f32, C, limit, limit, false);
  };
  if (subset) {
    for (const collective& col : collectives) add(col, dtype::bf16, 4, 4096, default_slot(4), false);
    add(collectives[0], dtype::f32, 2, 4096, default_slot(2), false);
    add(collectives[0], dtype::f32, 4, 4096, 256, false);       // many rounds through small slots
    add(collectives[3], dtype::f16, 4, 1024, 64, true);         // tiles in global memory
    add(collectives[12], dtype::f32, 2, 4096, 1024, true);      // inter-cluster reduce through atomics
    for (unsigned C : {2u, 8u}) {                               // all-reduce and gather at C = 2 and 8
      add(collectives[0], dtype::bf16, C, 2048, default_slot(C), false);
      add(collectives[3], dtype::bf16, C, 2048, default_slot(C), false);
    }
    add(collectives[0], dtype::f32, 3, 16, 16, false, 16);      // empty slices (placeholders), repeated calls
    add(collectives[3], dtype::f32, 4, 64, 16, false, 16);      // repeated gathers (direct: entry handshakes)
    add_one_round_limits(4);
    return cases;
  }
  for (const collective& col : collectives)
    for (dtype t : types) {
      for (unsigned C : {1u, 2u, 4u, 8u, 16u})
        for (unsigned kb : {1u, 4u, 32u, 256u}) add(col, t, C, kb * 1024, default_slot(C), false);
      for (unsigned C : {3u, 6u, 12u})
        for (unsigned kb : {4u, 32u}) add(col, t, C, kb * 1024, default_slot(C), false);
      // Multi-round paths with tiny slots, and tiles in global memory at small sizes.
      add(col, t, 4, 4096, 64, false);
      add(col, t, 8, 32768, 256, false);
      add(col, t, 4, 4096, default_slot(4), true);
    }
  for (unsigned C : {2u, 3u, 4u, 8u}) add_one_round_limits(C);
  // Tiny tiles, many back-to-back calls: chunks with fewer packets than ranks give some ranks an empty slice
  // of an all-reduce (its sender pushes a placeholder: collectives.cuh, wire_packets); a lost phase hangs.
  // Gathers too: 64 back-to-back direct gathers reuse the entry handshake's phases (transport::direct).
  for (const collective& col : collectives)
    if (col.k == kind::reduce || col.k == kind::exchange_add || col.k == kind::exchange_mul || col.k == kind::gather)
      for (unsigned C : {3u, 4u, 8u})
        for (unsigned bytes : {16u, 48u}) add(col, dtype::f32, C, bytes, 16, false, 64);
  return cases;
}

int main(int argc, char** argv) {
  bool subset = false, verbose = false;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--subset")) subset = true;
    else if (!std::strcmp(argv[i], "--verbose")) verbose = true;
    else if (!std::strncmp(argv[i], "--filter=", 9)) filter = argv[i] + 9;
    else if (!std::strcmp(argv[i], "--transport=bulk")) transport = sc::transport::bulk_copy;
    else if (!std::strcmp(argv[i], "--transport=direct")) transport = sc::transport::direct;
    else if (!std::strncmp(argv[i], "--threads=", 10)) block_threads = static_cast<unsigned>(std::atoi(argv[i] + 10));
    else {
      std::fprintf(stderr, "usage: test_collectives [--subset] [--verbose] [--filter=TEXT] [--transport=bulk|direct] [--threads=N]\n");
      return 2;
    }
  }
  cudaDeviceProp prop;
  CLUSTER_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs); %u threads per block; transport %s\n", prop.name, prop.multiProcessorCount,
              block_threads, transport_name(transport));

  std::vector<test_case> cases = all_cases(subset);
  std::map<std::string, std::map<unsigned, std::array<int, 4>>> table;  // row -> C -> pass, tol, fail, skip
  std::vector<std::string> rows;
  int passed = 0, failed = 0, skipped = 0, within = 0;
  for (const test_case& c : cases) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    if (verbose) {
      std::fprintf(stderr, "running %s\n", c.name.c_str());
      std::fflush(stderr);
    }
    outcome o = run_case(c);
    if (!table.count(c.row)) rows.push_back(c.row);
    table[c.row][c.cluster_size][static_cast<int>(o.status)]++;
    if (o.status == outcome::fail) ++failed;
    else if (o.status == outcome::skip) ++skipped;
    else ++passed;
    if (o.status == outcome::tolerance) ++within;
    if (o.status == outcome::fail || o.status == outcome::tolerance || o.status == outcome::skip)
      std::printf("%-5s %s: %s\n", o.status == outcome::fail ? "FAIL" : o.status == outcome::skip ? "SKIP" : "TOL",
                  c.name.c_str(), o.detail.c_str());
  }
  // Compact table: passed/total per collective and cluster size (all dtypes, payloads and slot variants).
  const unsigned sizes[] = {1, 2, 3, 4, 6, 8, 12, 16};
  std::printf("\n| collective |");
  for (unsigned C : sizes) std::printf(" C=%u |", C);
  std::printf("\n|---|");
  for (unsigned i = 0; i < 8; ++i) std::printf("---|");
  std::printf("\n");
  for (const std::string& row : rows) {
    std::printf("| %s |", row.c_str());
    for (unsigned C : sizes) {
      auto it = table[row].find(C);
      if (it == table[row].end()) {
        std::printf(" - |");
        continue;
      }
      const auto& n = it->second;
      int ok = n[0] + n[1], total = n[0] + n[1] + n[2];
      std::printf(" %s%d/%d%s", n[2] ? "**" : "", ok, total, n[2] ? "**" : "");
      if (n[3]) std::printf(" (%d skipped)", n[3]);
      std::printf(" |");
    }
    std::printf("\n");
  }
  std::printf("\n(bit-exact against the host reference unless listed as TOL: within the order-dependent bound)\n");
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  (void)within;
  return failed ? 1 : 0;
}
