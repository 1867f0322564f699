// Device tests of the channels, against host references, bit for bit:
//   - reduce_channel (reduce_channel.cuh): cluster_reduce and all_exchange over a channel;
//   - gather_channel (gather_channel.cuh): cluster_gather over a channel.
//
// Shapes are compiled in. All-reduces (cluster size, group size, tile bytes, threads): groups of 1 to 16 blocks,
// groups smaller than the cluster, non-power-of-two groups and block sizes, tiles of 1 to 64 KB, slices shorter and
// longer than the block; dtypes f32 / bf16 / f16 with sum, and max / min / prod on one dtype each. Gathers
// (cluster size, segment bytes, threads): clusters of 1 to 16 blocks (3 and 12 too), segments of 256 B to 16 KB,
// f32 and f16. One kernel makes 7 back-to-back calls with fresh random inputs (both stages, parity reuse), on 2
// clusters; outputs are poisoned (0xFF bytes, NaN) before the launch; every output element must equal the host's
// (all-reduce: fp32 accumulation in group-rank order, one rounding; gather: the input bits). Variants:
//   - plain: every call through the channel;
//   - skewed: before each call, one block per group sleeps a pseudo-random 0-4 us (blocks run calls apart, so the
//     protocol's proof-by-data must hold when a peer is a call ahead or behind);
//   - mixed: odd calls go through the communicator's collective on the same tiles (the two protocols share a
//     kernel and give the same bits);
//   - gathers also: in_place (src = dst + rank x segment) and global (src and dst in global memory).
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
enum class variant : int { plain, skewed, mixed, in_place, global };

struct kernel_args {
  const void* input;  // [reps][blocks][count]
  void* output;       // [reps][blocks][count]
  unsigned count;
  int how;            // variant
  unsigned slot_bytes;  // the communicator's slots (mixed)
  void* scratch;        // gather, variant global: [blocks][count + C count], src then dst
};

// Before call `rep` of a skewed run: one block per group of G sleeps a pseudo-random 0-4 us.
__device__ void skew(const kernel_args& a, unsigned rep, unsigned G) {
  if (a.how == int(variant::skewed) && threadIdx.x == 0 && sc::ptx::block_rank() % G == (rep * 7 + blockIdx.x) % G)
    __nanosleep(((rep + 1) * 2654435761u ^ blockIdx.x * 40503u) % 4000u);
}

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
    skew(a, rep, G);
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

// cluster_gather over a gather_channel: src (count) -> dst (C x count), 7 calls on fresh inputs.
template <unsigned C, unsigned SegmentBytes, unsigned Threads, class T>
__global__ void __launch_bounds__(Threads) gather_kernel(kernel_args a) {
  using channel = sc::gather_channel<C, SegmentBytes, Threads>;
  extern __shared__ __align__(16) unsigned char smem[];
  auto ch = channel::setup(smem);
  auto comm = sc::communicator::setup(smem + channel::area_bytes, a.slot_bytes);
  T* dst = a.how == int(variant::global)
               ? static_cast<T*>(a.scratch) + size_t(blockIdx.x) * (C + 1) * a.count + a.count
               : reinterpret_cast<T*>(smem + channel::area_bytes + sc::mailbox_bytes(C, a.slot_bytes)) + a.count;
  T* src = a.how == int(variant::in_place) ? dst + sc::ptx::block_rank() * a.count : dst - a.count;
  const size_t blocks = gridDim.x;
  for (unsigned rep = 0; rep < reps; ++rep) {
    // The copies in and out by each thread touch the packets it copied the call before, or are ordered by the
    // calls' block barriers.
    copy_packets(src, static_cast<const T*>(a.input) + (rep * blocks + blockIdx.x) * a.count, a.count, Threads);
    skew(a, rep, C);
    if (a.how == int(variant::mixed) && rep % 2 == 1) sc::cluster_gather(comm, src, dst, a.count);
    else sc::cluster_gather(ch, src, dst);
    copy_packets(static_cast<T*>(a.output) + (rep * blocks + blockIdx.x) * C * a.count, dst, C * a.count, Threads);
    __syncthreads();  // the next copy-in writes src, which other threads have just read into dst (in place: dst)
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
const char* variant_name(variant v) {
  const char* names[] = {"plain", "skewed", "mixed", "in_place", "global"};
  return names[int(v)];
}

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

// Random inputs of `elements` values of `type`.
std::vector<unsigned char> random_input(dtype type, size_t elements) {
  std::vector<unsigned char> input(elements * dtype_bytes(type));
  for (size_t i = 0; i < elements; ++i) {
    const float v = random_uniform();
    if (type == dtype::f32) reinterpret_cast<float*>(input.data())[i] = v;
    else if (type == dtype::bf16) reinterpret_cast<__nv_bfloat16*>(input.data())[i] = __float2bfloat16_rn(v);
    else reinterpret_cast<__half*>(input.data())[i] = __float2half_rn(v);
  }
  return input;
}

// Launches `kernel` on 2 clusters of C blocks with `input` and an output of `output.size()` bytes poisoned with
// 0xFF, and copies the output back. Returns an empty string, or why the kernel could not run. A kernel still
// running after 10 s exits the program (HANG, 3).
template <class Kernel>
std::string run_kernel(Kernel kernel, unsigned C, unsigned threads, size_t smem, kernel_args a,
                       const std::vector<unsigned char>& input, std::vector<unsigned char>& output, size_t scratch_bytes) {
  if (max_active_clusters(kernel, C, threads, smem) == 0)
    return "cannot launch (cudaOccupancyMaxActiveClusters = 0 for " + std::to_string(smem) + " bytes)";
  void *d_input, *d_output, *d_scratch = nullptr;
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_input, input.size()));
  CLUSTER_CHECK_CUDA(cudaMalloc(&d_output, output.size()));
  if (scratch_bytes) CLUSTER_CHECK_CUDA(cudaMalloc(&d_scratch, scratch_bytes));
  CLUSTER_CHECK_CUDA(cudaMemcpy(d_input, input.data(), input.size(), cudaMemcpyHostToDevice));
  CLUSTER_CHECK_CUDA(cudaMemset(d_output, 0xff, output.size()));
  a.input = d_input;
  a.output = d_output;
  a.scratch = d_scratch;
  CLUSTER_CHECK_CUDA(launch_clusters(kernel, clusters, C, threads, smem, nullptr, a));
  if (!finished_within(std::chrono::seconds(10))) {
    std::fprintf(stderr, "test_channels: HANG (kernel still running after 10 s)\n");
    std::_Exit(3);
  }
  const cudaError_t status = cudaDeviceSynchronize();
  if (status != cudaSuccess) {
    std::fprintf(stderr, "test_channels: kernel failed: %s\n", cudaGetErrorString(status));
    std::exit(1);
  }
  CLUSTER_CHECK_CUDA(cudaMemcpy(output.data(), d_output, output.size(), cudaMemcpyDeviceToHost));
  CLUSTER_CHECK_CUDA(cudaFree(d_input));
  CLUSTER_CHECK_CUDA(cudaFree(d_output));
  if (d_scratch) CLUSTER_CHECK_CUDA(cudaFree(d_scratch));
  return "";
}

// One case: returns an empty string when it passes, else what went wrong.
template <unsigned C, unsigned G, unsigned TileBytes, unsigned Threads, class T, reduce_op Op>
std::string run_case(dtype type, variant how) {
  using channel = sc::reduce_channel<G, TileBytes, Threads>;
  if (const char* why = sc::check_reduce_channel(C, G, TileBytes, Threads)) return std::string("shape rejected: ") + why;
  const unsigned eb = dtype_bytes(type), count = TileBytes / eb, blocks = clusters * C;
  const unsigned slot_bytes = TileBytes / G;  // the generic all-reduce in one chunk
  const size_t smem = channel::area_bytes + sc::mailbox_bytes(C, slot_bytes) + TileBytes;
  const size_t elements = size_t(reps) * blocks * count;
  const std::vector<unsigned char> input = random_input(type, elements);
  std::vector<unsigned char> output(elements * eb);
  std::string failure = run_kernel(channel_kernel<C, G, TileBytes, Threads, T, Op>, C, Threads, smem,
                                   kernel_args{nullptr, nullptr, count, int(how), slot_bytes, nullptr}, input, output, 0);
  if (failure.empty()) {
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
  return failure;
}

// One gather case: dst of block b = the inputs of its cluster's blocks, in rank order, bit for bit.
template <unsigned C, unsigned SegmentBytes, unsigned Threads, class T>
std::string run_gather_case(dtype type, variant how) {
  using channel = sc::gather_channel<C, SegmentBytes, Threads>;
  const unsigned slot_bytes = SegmentBytes < 4096 ? SegmentBytes : 4096;  // the communicator's gather (mixed)
  const bool in_global = how == variant::global;
  const size_t tiles = in_global ? 0 : size_t(C + 1) * SegmentBytes;
  const size_t smem = channel::area_bytes + sc::mailbox_bytes(C, slot_bytes) + tiles;
  if (const char* why = sc::check_gather_channel(C, SegmentBytes, Threads, unsigned(smem - channel::area_bytes)))
    return std::string("shape rejected: ") + why;
  const unsigned eb = dtype_bytes(type), count = SegmentBytes / eb, blocks = clusters * C;
  const std::vector<unsigned char> input = random_input(type, size_t(reps) * blocks * count);
  std::vector<unsigned char> output(size_t(reps) * blocks * C * count * eb);
  const size_t scratch = in_global ? size_t(blocks) * (C + 1) * SegmentBytes : 0;
  std::string failure = run_kernel(gather_kernel<C, SegmentBytes, Threads, T>, C, Threads, smem,
                                   kernel_args{nullptr, nullptr, count, int(how), slot_bytes, nullptr}, input, output, scratch);
  if (!failure.empty()) return failure;
  size_t bad = 0;
  char first[256] = "";
  for (unsigned rep = 0; rep < reps; ++rep)
    for (unsigned block = 0; block < blocks; ++block)
      for (unsigned i = 0; i < C * count; ++i) {
        const unsigned source = block / C * C + i / count;
        const uint32_t expected = stored_bits(type, input, (size_t(rep) * blocks + source) * count + i % count);
        const uint32_t got = stored_bits(type, output, (size_t(rep) * blocks + block) * C * count + i);
        if (expected != got && bad++ == 0)
          std::snprintf(first, sizeof first, "call %u block %u element %u: expected bits 0x%x, found 0x%x", rep, block, i,
                        expected, got);
      }
  if (bad) failure = std::to_string(bad) + " of " + std::to_string(output.size() / eb) + " outputs differ; first: " + first;
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
      std::snprintf(name, sizeof name, "reduce C=%u G=%u tile=%uB threads=%u %s %s %s", C, G, TileBytes, Threads,
                    dtype_name(type), op_name(Op), variant_name(how));
      if (!filter.empty() && std::string(name).find(filter) == std::string::npos) continue;
      if (verbose) std::fprintf(stderr, "%s\n", name);
      record(name, run_case<C, G, TileBytes, Threads, T, Op>(type, how));
    }
  }

  void record(const char* name, const std::string& failure) {
    if (failure.empty()) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name, failure.c_str());
    }
  }

  // Gathers: f32 in every variant, f16 plain and in place.
  template <unsigned C, unsigned SegmentBytes, unsigned Threads>
  void gather_shape(bool in_subset = false) {
    for (variant how : {variant::plain, variant::skewed, variant::mixed, variant::in_place, variant::global})
      for (dtype type : {dtype::f32, dtype::f16}) {
        if (type == dtype::f16 && how != variant::plain && how != variant::in_place) continue;
        if (subset && (!in_subset || how == variant::skewed || type == dtype::f16)) continue;
        char name[160];
        std::snprintf(name, sizeof name, "gather C=%u segment=%uB threads=%u %s %s", C, SegmentBytes, Threads,
                      dtype_name(type), variant_name(how));
        if (!filter.empty() && std::string(name).find(filter) == std::string::npos) continue;
        if (verbose) std::fprintf(stderr, "%s\n", name);
        record(name, type == dtype::f32 ? run_gather_case<C, SegmentBytes, Threads, float>(type, how)
                                        : run_gather_case<C, SegmentBytes, Threads, __half>(type, how));
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
      std::fprintf(stderr, "test_channels: unknown option '%s'\nusage: test_channels [--subset] [--verbose] "
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
  //                 C  segment threads
  tests.gather_shape<1, 1024, 128>();
  tests.gather_shape<2, 1024, 128>(true);
  tests.gather_shape<4, 1024, 128>(true);   // ClusterFusion's configuration at D = 32 KB
  tests.gather_shape<4, 8192, 128>(true);   // ... and at D = 256 KB
  tests.gather_shape<4, 16384, 256>();
  tests.gather_shape<3, 1008, 96>(true);    // non-power-of-two cluster and block, segment not a power of two
  tests.gather_shape<8, 4096, 256>();
  tests.gather_shape<12, 256, 64>();
  tests.gather_shape<16, 2048, 128>();      // non-portable cluster size
  std::printf("channel device tests: %u passed, %u failed\n", tests.passed, tests.failed);
  return tests.failed ? 1 : 0;
}
