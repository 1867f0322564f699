// Device tests of reduce_channel (reduce_channel.cuh): cluster_reduce and all_exchange over a channel, against a
// host reference, bit for bit.
//
// Shapes (cluster size, group size, tile bytes, threads) are compiled in: groups of 1 to 16 blocks, groups smaller
// than the cluster, non-power-of-two groups and block sizes, tiles of 1 to 64 KB, slices shorter and longer than
// the block. Each shape runs dtypes f32 / bf16 / f16 with sum, and max / min / prod on one dtype each. One kernel
// makes 7 back-to-back calls with fresh random inputs (both stages, parity reuse), on 2 clusters; outputs are
// poisoned (0xFF bytes, NaN) before the launch; every output element must equal the host's (fp32 accumulation in
// group-rank order, one rounding). Variants:
//   - plain: every call through the channel;
//   - skewed: before each call, one block per group sleeps a pseudo-random 0-4 us (blocks run calls apart, so the
//     protocol's proof-by-data must hold when a peer is a call ahead or behind);
//   - mixed: odd calls go through the communicator's generic all-reduce on the same tile (the two protocols share
//     a kernel and give the same bits).
// A kernel still running after 10 s is reported as HANG (exit 3). Flags: --subset (a few shapes, for
// compute-sanitizer), --verbose (names each case on stderr first), --filter=TEXT.
#include <solder/cluster/cluster.cuh>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "host_combine.h"
#include "launch.h"

namespace sc = solder::cluster;
using sc::reduce_op;

namespace {

constexpr unsigned reps = 7, clusters = 2;
enum class variant : int { plain, skewed, mixed };

struct kernel_args {
  const void* input;  // [reps][blocks][count]
  void* output;       // [reps][blocks][count]
  unsigned count;
  int how;            // variant
  unsigned slot_bytes;  // the communicator's slots (mixed)
};

template <class T>
__device__ void copy_packets(T* dst, const T* src, unsigned count, unsigned threads) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  for (unsigned p = threadIdx.x; p < count * sizeof(T) / 16; p += threads) d[p] = s[p];
}

template <unsigned C, unsigned G, unsigned TileBytes, unsigned Threads, class T, reduce_op Op>
__global__ void __launch_bounds__(Threads) channel_kernel(kernel_args a) {
  using channel = sc::reduce_channel<G, TileBytes, Threads>;
  extern __shared__ __align__(16) unsigned char smem[];
  const bool mixed = a.how == int(variant::mixed);
  auto ch = channel::setup(smem);
  auto comm = sc::communicator::setup(smem + channel::area_bytes, a.slot_bytes);
  T* tile = reinterpret_cast<T*>(smem + channel::area_bytes + sc::mailbox_bytes(C, a.slot_bytes));
  const size_t blocks = gridDim.x;
  for (unsigned rep = 0; rep < reps; ++rep) {
    // Each thread copies the same packets in and out, so no block barrier is needed around the copies: the calls
    // begin and end with one.
    copy_packets(tile, static_cast<const T*>(a.input) + (rep * blocks + blockIdx.x) * a.count, a.count, Threads);
    if (a.how == int(variant::skewed) && threadIdx.x == 0 && sc::ptx::block_rank() % G == (rep * 7 + blockIdx.x) % G)
      __nanosleep(((rep + 1) * 2654435761u ^ blockIdx.x * 40503u) % 4000u);
    if (mixed && rep % 2 == 1) {
      if constexpr (Op == reduce_op::prod) sc::all_exchange<sc::exchange_op::mul>(comm, tile, a.count, G);
      else sc::detail::group_all_reduce<Op>(comm, tile, a.count, G);
    } else if constexpr (G == C && Op != reduce_op::prod) {
      sc::cluster_reduce<Op>(ch, tile);
    } else if constexpr (Op == reduce_op::prod) {
      sc::all_exchange<sc::exchange_op::mul>(ch, tile);
    } else {
      ch.template all_reduce<Op>(tile);
    }
    copy_packets(static_cast<T*>(a.output) + (rep * blocks + blockIdx.x) * a.count, tile, a.count, Threads);
  }
  comm.teardown();
  ch.teardown();
}

// ---- host side ----------------------------------------------------------------------------------------------

enum class dtype { f32, bf16, f16 };
const char* dtype_name(dtype d) { return d == dtype::f32 ? "f32" : d == dtype::bf16 ? "bf16" : "f16"; }
unsigned dtype_bytes(dtype d) { return d == dtype::f32 ? 4 : 2; }
const char* op_name(reduce_op op) {
  return op == reduce_op::sum ? "sum" : op == reduce_op::max ? "max" : op == reduce_op::min ? "min" : "prod";
}
const char* variant_name(variant v) { return v == variant::plain ? "plain" : v == variant::skewed ? "skewed" : "mixed"; }

float to_float(dtype d, const std::vector<unsigned char>& bytes, size_t i) {
  if (d == dtype::f32) return reinterpret_cast<const float*>(bytes.data())[i];
  if (d == dtype::bf16) return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(bytes.data())[i]);
  return __half2float(reinterpret_cast<const __half*>(bytes.data())[i]);
}
// The bits of v rounded once to d (round to nearest even).
uint32_t rounded_bits(dtype d, float v) {
  if (d == dtype::f32) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits;
  }
  uint16_t bits;
  if (d == dtype::bf16) {
    __nv_bfloat16 b = __float2bfloat16_rn(v);
    std::memcpy(&bits, &b, 2);
  } else {
    __half h = __float2half_rn(v);
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}
uint32_t stored_bits(dtype d, const std::vector<unsigned char>& bytes, size_t i) {
  if (d == dtype::f32) return reinterpret_cast<const uint32_t*>(bytes.data())[i];
  return reinterpret_cast<const uint16_t*>(bytes.data())[i];
}

uint64_t rng_state = 0x2545f4914f6cdd1dull;
float random_uniform() {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return -1.f + 2.f * static_cast<float>((rng_state >> 40) * (1.0 / 16777216.0));
}

struct shape {
  unsigned cluster, group, tile_bytes, threads;
};

// One case: returns an empty string when it passes, else what went wrong.
template <unsigned C, unsigned G, unsigned TileBytes, unsigned Threads, class T, reduce_op Op>
std::string run_case(dtype type, variant how) {
  using channel = sc::reduce_channel<G, TileBytes, Threads>;
  if (const char* why = sc::check_reduce_channel(C, G, TileBytes, Threads)) return std::string("shape rejected: ") + why;
  const unsigned eb = dtype_bytes(type), count = TileBytes / eb, blocks = clusters * C;
  const unsigned slot_bytes = TileBytes / G;  // the generic all-reduce in one chunk
  const size_t smem = channel::area_bytes + sc::mailbox_bytes(C, slot_bytes) + TileBytes;
  const size_t elements = size_t(reps) * blocks * count;
  std::vector<unsigned char> input(elements * eb), output(elements * eb);
  for (size_t i = 0; i < elements; ++i) {
    const float v = random_uniform();
    if (type == dtype::f32) reinterpret_cast<float*>(input.data())[i] = v;
    else if (type == dtype::bf16) reinterpret_cast<__nv_bfloat16*>(input.data())[i] = __float2bfloat16_rn(v);
    else reinterpret_cast<__half*>(input.data())[i] = __float2half_rn(v);
  }
  void *d_input, *d_output;
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_input, input.size()));
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_output, output.size()));
  CLUSTER_CHECK_CUDA(cudaMemcpy(d_input, input.data(), input.size(), cudaMemcpyHostToDevice));
  CLUSTER_CHECK_CUDA(cudaMemset(d_output, 0xff, output.size()));
  const kernel_args a{d_input, d_output, count, int(how), slot_bytes};
  auto kernel = channel_kernel<C, G, TileBytes, Threads, T, Op>;
  std::string failure;
  if (max_active_clusters(kernel, C, Threads, smem) == 0) {
    failure = "cannot launch (cudaOccupancyMaxActiveClusters = 0 for " + std::to_string(smem) + " bytes)";
  } else {
    CLUSTER_CHECK_CUDA(launch_clusters(kernel, clusters, C, Threads, smem, nullptr, a));
    if (!finished_within(std::chrono::seconds(10))) {
      std::fprintf(stderr, "test_reduce_channel: HANG (kernel still running after 10 s)\n");
      std::_Exit(3);
    }
    const cudaError_t status = cudaDeviceSynchronize();
    if (status != cudaSuccess) {
      std::fprintf(stderr, "test_reduce_channel: kernel failed: %s\n", cudaGetErrorString(status));
      std::exit(1);
    }
    CLUSTER_CHECK_CUDA(cudaMemcpy(output.data(), d_output, output.size(), cudaMemcpyDeviceToHost));
    size_t bad = 0;
    char first[256] = "";
    for (unsigned rep = 0; rep < reps; ++rep)
      for (unsigned block = 0; block < blocks; ++block) {
        const unsigned group_first = block / G * G;  // cluster ranks are consecutive block indices
        for (unsigned i = 0; i < count; ++i) {
          auto at = [&](unsigned b) { return (size_t(rep) * blocks + b) * count + i; };
          float accumulator = to_float(type, input, at(group_first));
          for (unsigned r = 1; r < G; ++r) accumulator = host_combine(Op, accumulator, to_float(type, input, at(group_first + r)));
          const uint32_t expected = rounded_bits(type, accumulator), got = stored_bits(type, output, at(block));
          if (expected != got) {
            if (bad++ == 0)
              std::snprintf(first, sizeof first, "call %u block %u element %u: expected bits 0x%x (%g), found 0x%x", rep,
                            block, i, expected, accumulator, got);
          }
        }
      }
    if (bad) failure = std::to_string(bad) + " of " + std::to_string(elements) + " outputs differ; first: " + first;
  }
  CLUSTER_CHECK_CUDA(cudaFree(d_input));
  CLUSTER_CHECK_CUDA(cudaFree(d_output));
  return failure;
}

struct registry {
  bool subset = false, verbose = false;
  std::string filter;
  unsigned passed = 0, failed = 0;

  template <unsigned C, unsigned G, unsigned TileBytes, unsigned Threads, class T, reduce_op Op>
  void run(dtype type, bool in_subset) {
    for (variant how : {variant::plain, variant::skewed, variant::mixed}) {
      if (subset && (!in_subset || how == variant::skewed)) continue;
      char name[160];
      std::snprintf(name, sizeof name, "C=%u G=%u tile=%uB threads=%u %s %s %s", C, G, TileBytes, Threads,
                    dtype_name(type), op_name(Op), variant_name(how));
      if (!filter.empty() && std::string(name).find(filter) == std::string::npos) continue;
      if (verbose) std::fprintf(stderr, "%s\n", name);
      const std::string failure = run_case<C, G, TileBytes, Threads, T, Op>(type, how);
      if (failure.empty()) {
        ++passed;
      } else {
        ++failed;
        std::printf("FAIL %s: %s\n", name, failure.c_str());
      }
    }
  }

  // Every dtype with sum; max on f16, min on bf16, prod (all_exchange mul) on f32.
  template <unsigned C, unsigned G, unsigned TileBytes, unsigned Threads>
  void shape(bool in_subset = false) {
    run<C, G, TileBytes, Threads, float, reduce_op::sum>(dtype::f32, in_subset);
    run<C, G, TileBytes, Threads, __nv_bfloat16, reduce_op::sum>(dtype::bf16, false);
    run<C, G, TileBytes, Threads, __half, reduce_op::sum>(dtype::f16, in_subset);
    run<C, G, TileBytes, Threads, __half, reduce_op::max>(dtype::f16, false);
    run<C, G, TileBytes, Threads, __nv_bfloat16, reduce_op::min>(dtype::bf16, false);
    run<C, G, TileBytes, Threads, float, reduce_op::prod>(dtype::f32, false);
  }
};

}  // namespace

int main(int argc, char** argv) {
  registry tests;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--subset")) tests.subset = true;
    else if (!std::strcmp(argv[i], "--verbose")) tests.verbose = true;
    else if (!std::strncmp(argv[i], "--filter=", 9)) tests.filter = argv[i] + 9;
    else {
      std::fprintf(stderr, "test_reduce_channel: unknown option '%s'\nusage: test_reduce_channel [--subset] [--verbose] "
                           "[--filter=TEXT]\n", argv[i]);
      return 2;
    }
  }
  //          C   G   tile   threads
  tests.shape<1, 1, 1024, 128>();
  tests.shape<2, 2, 1024, 128>(true);
  tests.shape<2, 2, 65536, 512>();
  tests.shape<4, 4, 1024, 128>(true);    // slices of 16 packets: most threads idle in the combine
  tests.shape<4, 4, 8192, 128>(true);    // ClusterFusion's configuration at D = 256 KB
  tests.shape<4, 4, 32768, 256>();
  tests.shape<8, 4, 8192, 128>(true);    // two groups per cluster
  tests.shape<8, 8, 4096, 256>();
  tests.shape<6, 3, 3072, 96>(true);     // non-power-of-two cluster, group and block
  tests.shape<12, 12, 2304, 64>();
  tests.shape<16, 16, 32768, 128>();     // non-portable cluster size
  tests.shape<16, 2, 4096, 1024>();
  std::printf("reduce_channel device tests: %u passed, %u failed\n", tests.passed, tests.failed);
  return tests.failed ? 1 : 0;
}
