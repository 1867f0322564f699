// ClusterFusion Table 1 in ClusterFusion's own benchmark configuration (issue 6).
//
// What Table 1's "data size" means, from the microbenchmark in ClusterFusion's repository
// (github.com/xinhao-luo/ClusterFusion, workspace/microkernel.cu and dsm_microkernel.cuh, commits 3485b9b
// and 347b6d3, May-June 2025; removed in f5d7fd9): 32 clusters of 4 blocks of 128 threads, fp16, each block
// holding a tile of REDUCE_NUM elements in *static* shared memory (so at most 48 KB per block: the gather
// kernel holds 4 + 1 tiles, which caps REDUCE_NUM at 4096 = 8 KB per block), timed per launch over 100
// back-to-back launches with CUDA events. Its off-chip reduce writes CLUSTER_NUM x REDUCE_NUM halves, 256 KB at
// REDUCE_NUM = 4096. So D = 32 clusters x the per-block tile: D = 32 / 64 / 128 / 256 KB is a tile of
// 1 / 2 / 4 / 8 KB per block. (bench_collectives.cu keeps the readings "D per block" and "D per cluster".)
//
// For each D, with the same grid, block size and data type, this program times:
//   - cluster_reduce (sum, in place) and cluster_gather (each block contributes the tile, ends with 4 tiles)
//     over DSM with the library (transport direct by default), and the same collectives through global memory
//     (collective_kernels.cuh); and the channels, compiled for this shape: cluster_reduce over a
//     reduce_channel<4, tile, 128> and cluster_gather over a gather_channel<4, segment, 128> (reduce_channel.cuh,
//     gather_channel.cuh), in ClusterFusion's kernel shape and launch;
//   - per launch in ClusterFusion's kernel shape and launch: cluster size compiled in (__cluster_dims__),
//     <<<...>>> launches, the tile filled from registers instead of loaded, and only each cluster's rank 0
//     storing its reduced tile (a gather stores nothing); timed as ClusterFusion did (100 back-to-back stream
//     launches, events) and over CUDA-graph replays;
//   - per launch in our usual shape (every block loads its input from and stores its result to global memory,
//     cudaLaunchKernelEx with the cluster size as a launch attribute), graph replays;
//   - in kernel: (t(72 calls) - t(8 calls)) / 64 with all 32 clusters running, and cycles per call (block 0);
//   - the launch floors: the DSM kernel in ClusterFusion's shape with zero collective calls (the communicator's
//     setup and teardown, the fill, rank 0's store), and an empty kernel of the same grid and launch (no code).
// Before timing, every configuration runs once in our usual shape on random inputs with the output poisoned
// (NaN) and is compared with a host reference (fp32 accumulation in rank order, one rounding to fp16), and the
// reduce once more in ClusterFusion's shape (rank 0's tile against the reference of the filled pattern): a
// mismatch exits 1, a call still running after 10 s exits 3 (HANG).
// Usage: bench_cf_config [--commit HASH] [--markdown FILE] [--transport direct|store_async|bulk]
//        [--in-kernel-only]   (skips the per-launch timings: for A/B runs of library changes)
//        [--slot-divisor N]   (mailbox slots of tile / N bytes instead of a whole tile: N > 1 takes an all-reduce
//                              of 1-2 KB tiles off the one-round path, and N > 4 splits it into chunks)
//        bench_cf_config --profile reduce|gather KB   (for ncu: runs Solder's DSM kernel and the CF-algorithm
//        kernel once each, 72 calls per kernel, at data size KB, and exits)
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../../tests/gpu/cluster/launch.h"
#include "collective_kernels.cuh"
#include "timing.h"

namespace {

constexpr unsigned cluster_size = 4, clusters = 32, threads = 128;
constexpr unsigned sizes_kb[] = {32, 64, 128, 256};
constexpr float cf_on[2][4] = {{6.77f, 6.61f, 7.42f, 9.17f}, {3.90f, 4.12f, 4.39f, 4.15f}};
constexpr float cf_off[2][4] = {{8.03f, 9.01f, 14.95f, 22.44f}, {6.26f, 6.27f, 6.31f, 6.61f}};

unsigned parse_transport(const char* name) {
  if (!std::strcmp(name, "bulk") || !std::strcmp(name, "bulk_copy")) return unsigned(sc::transport::bulk_copy);
  if (!std::strcmp(name, "store_async")) return unsigned(sc::transport::store_async);
  if (!std::strcmp(name, "direct")) return unsigned(sc::transport::direct);
  std::fprintf(stderr, "bench_cf_config: --transport expects direct, store_async or bulk, found '%s'\n", name);
  std::exit(2);
}

// Shared memory of one configuration: the tiles, and a mailbox whose slots hold a whole tile.
struct layout {
  unsigned count;  // elements per block (reduce: the tile; gather: what each block contributes)
  unsigned slot_bytes;
  size_t dsm_smem, global_smem, peer_smem, channel_smem;
};

layout plan(bool gather, unsigned tile_bytes, unsigned slot_divisor) {
  layout l{};
  l.count = tile_bytes / 2;
  const unsigned tiles = gather ? (1 + cluster_size) * tile_bytes : tile_bytes;
  // A slot holds a gather's segment or a reduce's whole tile (so the library may reduce a tile of at most one
  // packet per thread in one round; larger tiles then need a single two-round chunk).
  l.slot_bytes = (tile_bytes / slot_divisor + 15) / 16 * 16;
  l.dsm_smem = sc::mailbox_bytes(cluster_size, l.slot_bytes) + tiles;
  l.global_smem = tiles;
  l.peer_smem = 128 + (gather ? cluster_size : 2) * size_t(tile_bytes);  // cf_algorithm_body's layout
  l.channel_smem = gather ? sc::gather_channel_bytes(cluster_size, tile_bytes) + tiles  // gather_channel_body's layout
                         : sc::reduce_channel_bytes(cluster_size, tile_bytes) + tiles;  // channel_body's layout
  return l;
}

// Host reference of one run (iterations = 1) on `input`; returns the number of mismatches. `peer`: the
// ClusterFusion-algorithm kernel, whose gathered segments are rotated (segment j of block b is block b - j's)
// and whose reduce adds in fp16 (3 roundings, so a looser bound).
size_t check(bool gather, const layout& l, const std::vector<__half>& input, const std::vector<__half>& output,
             bool peer = false) {
  const unsigned out_count = gather ? cluster_size * l.count : l.count;
  const float bound = peer ? 4e-3f : 1e-3f;
  size_t bad = 0;
  for (unsigned block = 0; block < clusters * cluster_size; ++block) {
    const unsigned first = block / cluster_size * cluster_size, local = block - first;
    for (unsigned i = 0; i < out_count; ++i) {
      float expected;
      if (gather) {
        const unsigned segment = i / l.count;
        const unsigned source = peer ? (local + cluster_size - segment) % cluster_size : segment;
        expected = __half2float(input[size_t(first + source) * l.count + i % l.count]);
      } else {
        float sum = 0.f;
        for (unsigned r = 0; r < cluster_size; ++r) sum += __half2float(input[size_t(first + r) * l.count + i]);
        expected = __half2float(__float2half(sum));
      }
      const float got = __half2float(output[size_t(block) * out_count + i]);
      if (!(std::fabs(got - expected) <= bound * std::fabs(expected) + bound)) ++bad;  // NaN fails
    }
  }
  return bad;
}

// Host reference of the reduce in ClusterFusion's shape: rank 0's tile of each cluster, from fill_half's pattern.
size_t check_cf_reduce(const layout& l, const std::vector<__half>& output) {
  size_t bad = 0;
  for (unsigned cluster = 0; cluster < clusters; ++cluster)
    for (unsigned i = 0; i < l.count; ++i) {
      float sum = 0.f;
      for (unsigned r = 0; r < cluster_size; ++r)
        sum += __half2float(__float2half(static_cast<float>((i + cluster * cluster_size + r) % 64) / 64.f));
      const float expected = __half2float(__float2half(sum));
      const float got = __half2float(output[size_t(cluster) * cluster_size * l.count + i]);
      if (!(std::fabs(got - expected) <= 1e-3f * std::fabs(expected) + 1e-3f)) ++bad;
    }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  std::string commit = "unknown", markdown_path;
  unsigned transport = unsigned(sc::transport::direct);
  int profile_op = -1;
  unsigned profile_kb = 0;
  bool in_kernel_only = false;
  unsigned slot_divisor = 1;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--profile") && i + 2 < argc) {
      if (std::strcmp(argv[i + 1], "reduce") && std::strcmp(argv[i + 1], "gather")) {
        std::fprintf(stderr, "bench_cf_config: --profile expects reduce or gather, found '%s'\n", argv[i + 1]);
        return 2;
      }
      profile_op = !std::strcmp(argv[i + 1], "gather");
      profile_kb = static_cast<unsigned>(std::atoi(argv[i + 2]));
      i += 2;
      continue;
    }
    if (!std::strcmp(argv[i], "--commit") && has_value) commit = argv[++i];
    else if (!std::strcmp(argv[i], "--markdown") && has_value) markdown_path = argv[++i];
    else if (!std::strcmp(argv[i], "--transport") && has_value) transport = parse_transport(argv[++i]);
    else if (!std::strcmp(argv[i], "--in-kernel-only")) in_kernel_only = true;
    else if (!std::strcmp(argv[i], "--slot-divisor") && has_value) {
      const int n = std::atoi(argv[++i]);
      if (n < 1 || n > 64) {
        std::fprintf(stderr, "bench_cf_config: --slot-divisor expects an integer from 1 to 64, found '%s'\n", argv[i]);
        return 2;
      }
      slot_divisor = static_cast<unsigned>(n);
    }
    else {
      std::fprintf(stderr, "bench_cf_config: unknown or incomplete option '%s'\n"
                           "usage: bench_cf_config [--commit HASH] [--markdown FILE] [--transport direct|store_async|bulk]"
                           " [--in-kernel-only] [--slot-divisor N]\n"
                           "       bench_cf_config --profile reduce|gather KB\n",
                   argv[i]);
      return 2;
    }
  }
  if (profile_op >= 0 && std::find(std::begin(sizes_kb), std::end(sizes_kb), profile_kb) == std::end(sizes_kb)) {
    std::fprintf(stderr, "bench_cf_config: --profile expects a data size of 32, 64, 128 or 256 KB, found %u\n",
                 profile_kb);
    return 2;
  }
  cudaDeviceProp prop;
  CLUSTER_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::string md;
  char line[2048];
  auto out = [&](const char* text) {
    std::fputs(text, stdout);
    std::fflush(stdout);
    md += text;
  };

  const size_t elements = size_t(clusters) * cluster_size * 8192 * cluster_size;  // largest output, 8 KB tiles
  std::vector<__half> host_input(elements);
  std::mt19937 rng(20261122);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (auto& x : host_input) x = __float2half(uniform(rng));
  half *input, *output, *scratch;
  long long* cycles;
  CLUSTER_CHECK_CUDA(cudaMalloc(&input, elements * 2));
  CLUSTER_CHECK_CUDA(cudaMalloc(&output, elements * 2));
  CLUSTER_CHECK_CUDA(cudaMalloc(&scratch, elements * 2));
  CLUSTER_CHECK_CUDA(cudaMalloc(&cycles, sizeof(long long)));
  CLUSTER_CHECK_CUDA(cudaMemcpy(input, host_input.data(), elements * 2, cudaMemcpyHostToDevice));

  std::snprintf(line, sizeof line,
                "# ClusterFusion Table 1 in its own configuration, on %s\n\n%s; commit %s; nvcc -O3 sm_90a; "
                "%u clusters of %u blocks of %u threads, fp16; D = %u clusters x the per-block tile (1-8 KB); DSM "
                "transport %s. CF shape = ClusterFusion's kernel shape and launch (tile filled from registers, only "
                "rank 0 stores a reduced tile, __cluster_dims__ and <<<...>>>); load+store = every block loads and "
                "stores its tiles (cudaLaunchKernelEx). Stream = ClusterFusion's timing: 100 back-to-back launches, "
                "events, median of 7. Graph = replays of a graph of 20 launches, median of 30. In kernel = "
                "(t(72 calls) - t(8 calls)) / 64, all %u clusters. Ratios > 1: Solder's DSM version faster. Every "
                "configuration was first checked against a host reference (random inputs, output poisoned).\n\n",
                prop.name, date, commit.c_str(), clusters, cluster_size, threads, clusters,
                transport == 2 ? "direct" : transport == 1 ? "bulk_copy" : "store_async", clusters);
  out(line);
  std::string launch_table =
      "## Per launch (µs)\n\n"
      "| op | D (KB) | tile per block (KB) | CF published on-chip | CF published off-chip | Solder DSM, CF shape, "
      "stream | CF algorithm here, stream | global, CF shape, stream | Solder DSM, CF shape, graph | CF algorithm "
      "here, graph | Solder DSM, load+store, graph | CF published / Solder | CF algorithm / Solder (stream) | "
      "global / Solder (stream) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::string kernel_table =
      "## In kernel (ns per call, all 32 clusters)\n\n"
      "| op | D (KB) | Solder DSM | Solder cycles/call | CF algorithm here | global | CF published on-chip (per "
      "launch) / Solder | CF algorithm / Solder | global / Solder |\n|---|---|---|---|---|---|---|---|---|\n";
  float floor_stream = 0, floor_graph = 0, empty_stream = 0, empty_graph = 0;
  float channel_floor_stream = 0, channel_floor_graph = 0, no_code_stream = 0, no_code_graph = 0;
  std::string channel_table =
      "## Channels: cluster_reduce over a reduce_channel<4, tile, 128>, cluster_gather over a gather_channel<4, "
      "segment, 128> (the shape compiled in)\n\n"
      "| op | D (KB) | tile per block (KB) | channel in kernel (ns) | channel cycles/call | communicator in kernel (ns) | "
      "global in kernel (ns) | global / channel | communicator / channel | channel per launch, stream (µs) | channel per "
      "launch, graph (µs) | CF published on-chip / channel (stream) | CF published on-chip / channel (graph) "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (int g = 0; g < 2; ++g) {
    const bool gather = g == 1;
    for (int s = 0; s < 4; ++s) {
      if (profile_op >= 0 && (profile_op != g || profile_kb != sizes_kb[s])) continue;
      const unsigned tile_bytes = sizes_kb[s] * 1024 / clusters;
      const layout l = plan(gather, tile_bytes, slot_divisor);
      auto args = [&](unsigned iterations, long long* cyc, int cf_shape) {
        return bench_args{input, output, scratch, l.count, l.slot_bytes, iterations, 0, 0, cyc, transport, cf_shape};
      };
      // Our usual shape and launch (cudaLaunchKernelEx, cluster size as an attribute).
      auto make = [&](bool dsm, unsigned iterations, long long* cyc) {
        const bench_args a = args(iterations, cyc, 0);
        const size_t smem = dsm ? l.dsm_smem : l.global_smem;
        auto kernel = dsm ? (gather ? dsm_kernel<true, 256> : dsm_kernel<false, 256>)
                          : (gather ? global_kernel<true, 256> : global_kernel<false, 256>);
        CLUSTER_CHECK_CUDA(prepare_cluster_kernel(kernel, cluster_size, smem));
        return [=](cudaStream_t stream) {
          return launch_prepared_clusters(kernel, clusters, cluster_size, threads, smem, stream, a);
        };
      };
      // ClusterFusion's launch (__cluster_dims__, <<<...>>>): 0 Solder DSM (communicator), 1 global, 2 the CF
      // algorithm, 3 Solder DSM through a channel (reduce_channel or gather_channel).
      auto make_cf = [&](int which, unsigned iterations, long long* cyc, int cf_shape = 1) {
        const bench_args a = args(iterations, cyc, cf_shape);
        const size_t smem = which == 0 ? l.dsm_smem : which == 1 ? l.global_smem : which == 2 ? l.peer_smem : l.channel_smem;
        auto kernel = which == 0 ? (gather ? cf_dsm_kernel<true> : cf_dsm_kernel<false>)
                      : which == 1 ? (gather ? cf_global_kernel<true> : cf_global_kernel<false>)
                      : which == 2 ? (gather ? cf_algorithm_kernel<true> : cf_algorithm_kernel<false>)
                                   : gather ? cf_channel_kernel_for<true>(tile_bytes) : cf_channel_kernel_for<false>(tile_bytes);
        CLUSTER_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        return [=](cudaStream_t stream) {
          kernel<<<clusters * cluster_size, threads, smem, stream>>>(a);
          return cudaGetLastError();
        };
      };
      // Correctness first: one call each, output poisoned, against the host reference. Variants: Solder DSM,
      // global, the CF algorithm (load+store shape), Solder DSM in ClusterFusion's shape (reduce only: a gather in
      // that shape stores nothing).
      const unsigned out_count = gather ? cluster_size * l.count : l.count;
      const char* variant_names[] = {"Solder DSM",
                                     "global",
                                     "CF algorithm",
                                     "Solder DSM (ClusterFusion shape)",
                                     "Solder channel",
                                     "Solder channel (ClusterFusion shape)"};
      for (int variant = 0; variant < 6; ++variant) {
        if ((variant == 3 || variant == 5) && gather) continue;  // a gather in ClusterFusion's shape stores nothing
        CLUSTER_CHECK_CUDA(cudaMemset(output, 0xff, elements * 2));  // 0xffff is a NaN in fp16
        if (variant < 2) CLUSTER_CHECK_CUDA(make(variant == 0, 1, nullptr)(nullptr));
        else if (variant == 2) CLUSTER_CHECK_CUDA(make_cf(2, 1, nullptr, 0)(nullptr));
        else if (variant == 3) CLUSTER_CHECK_CUDA(make_cf(0, 1, nullptr)(nullptr));
        else CLUSTER_CHECK_CUDA(make_cf(3, 1, nullptr, variant == 5)(nullptr));
        // Watchdog: one call takes microseconds; a protocol bug shows up as a hang, reported instead of waited on.
        if (!finished_within(std::chrono::seconds(10))) {
          std::fprintf(stderr, "bench_cf_config: %s %s D = %u KB: HANG (kernel still running after 10 s)\n",
                       variant_names[variant], gather ? "gather" : "reduce", sizes_kb[s]);
          std::_Exit(3);
        }
        CLUSTER_CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<__half> host_output(size_t(clusters) * cluster_size * out_count);
        CLUSTER_CHECK_CUDA(cudaMemcpy(host_output.data(), output, host_output.size() * 2, cudaMemcpyDeviceToHost));
        const size_t bad = variant == 3 || variant == 5 ? check_cf_reduce(l, host_output)
                                        : check(gather, l, host_input, host_output, variant == 2);
        if (bad) {
          std::fprintf(stderr, "bench_cf_config: %s %s D = %u KB: %zu outputs differ from the host reference\n",
                       variant_names[variant], gather ? "gather" : "reduce", sizes_kb[s], bad);
          return 1;
        }
      }
      if (profile_op >= 0) {
        CLUSTER_CHECK_CUDA(make_cf(0, 72, cycles)(nullptr));
        CLUSTER_CHECK_CUDA(make_cf(2, 72, nullptr)(nullptr));
        CLUSTER_CHECK_CUDA(cudaDeviceSynchronize());
        std::printf("profiled %s %u KB\n", gather ? "gather" : "reduce", sizes_kb[s]);
        return 0;
      }
      const bool timed = !in_kernel_only;  // per-launch figures (0 when skipped)
      const float dsm_stream = timed ? stream_launch_us(make_cf(0, 1, nullptr)) : 0.f;
      const float peer_stream = timed ? stream_launch_us(make_cf(2, 1, nullptr)) : 0.f;
      const float global_stream = timed ? stream_launch_us(make_cf(1, 1, nullptr)) : 0.f;
      const float dsm_graph = timed ? per_launch_us(make_cf(0, 1, nullptr)) : 0.f;
      const float peer_graph = timed ? per_launch_us(make_cf(2, 1, nullptr)) : 0.f;
      const float dsm_full_graph = timed ? per_launch_us(make(true, 1, nullptr)) : 0.f;
      const float channel_stream = timed ? stream_launch_us(make_cf(3, 1, nullptr)) : 0.f;
      const float channel_graph = timed ? per_launch_us(make_cf(3, 1, nullptr)) : 0.f;
      if (timed && !gather && s == 0) {
        channel_floor_stream = stream_launch_us(make_cf(3, 0, nullptr));
        channel_floor_graph = per_launch_us(make_cf(3, 0, nullptr));
        floor_stream = stream_launch_us(make_cf(0, 0, nullptr));
        floor_graph = per_launch_us(make_cf(0, 0, nullptr));
        empty_stream = stream_launch_us(make_cf(2, 0, nullptr));
        empty_graph = per_launch_us(make_cf(2, 0, nullptr));
        const bench_args none = args(0, nullptr, 1);
        auto launch_empty = [=](cudaStream_t stream) {
          cf_empty_kernel<<<clusters * cluster_size, threads, 0, stream>>>(none);
          return cudaGetLastError();
        };
        no_code_stream = stream_launch_us(launch_empty);
        no_code_graph = per_launch_us(launch_empty);
      }
      float ns[4] = {};
      long long cyc = 0, channel_cyc = 0;
      for (int which = 0; which < 4; ++which) {
        const bool solder = which == 0 || which == 3;
        const float small = single_launch_us(make_cf(which, 8, nullptr));
        const float large = single_launch_us(make_cf(which, 72, solder ? cycles : nullptr));
        ns[which] = (large - small) * 1000.f / 64;
        if (solder) CLUSTER_CHECK_CUDA(cudaMemcpy(which == 0 ? &cyc : &channel_cyc, cycles, sizeof cyc, cudaMemcpyDeviceToHost));
      }
      std::snprintf(line, sizeof line,
                    "| %s | %u | %.0f | %.0f | %lld | %.0f | %.0f | %.2fx | %.2fx | %.2f | %.2f | %.2fx | %.2fx |\n",
                    gather ? "gather" : "reduce", sizes_kb[s], tile_bytes / 1024.0, ns[3], channel_cyc, ns[0], ns[1],
                    ns[1] / ns[3], ns[0] / ns[3], channel_stream, channel_graph,
                    timed ? cf_on[g][s] / channel_stream : 0.f, timed ? cf_on[g][s] / channel_graph : 0.f);
      std::printf("channel %s", line);
      channel_table += line;
      const char* op = gather ? "gather" : "reduce";
      std::snprintf(line, sizeof line,
                    "| %s | %u | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.2fx |\n",
                    op, sizes_kb[s], tile_bytes / 1024.0, cf_on[g][s], cf_off[g][s], dsm_stream, peer_stream,
                    global_stream, dsm_graph, peer_graph, dsm_full_graph, cf_on[g][s] / dsm_stream,
                    peer_stream / dsm_stream, global_stream / dsm_stream);
      if (!in_kernel_only) {
        std::printf("%s", line);
        launch_table += line;
      }
      std::snprintf(line, sizeof line, "| %s | %u | %.0f | %lld | %.0f | %.0f | %.2fx | %.2fx | %.2fx |\n", op,
                    sizes_kb[s], ns[0], cyc, ns[2], ns[1], cf_on[g][s] * 1000.f / ns[0], ns[2] / ns[0], ns[1] / ns[0]);
      std::printf("%s", line);
      std::fflush(stdout);
      kernel_table += line;
    }
  }
  out(((in_kernel_only ? std::string() : launch_table + "\n") + kernel_table + "\n" + channel_table).c_str());
  if (!in_kernel_only) {
    std::snprintf(line, sizeof line,
                  "\nLaunch floors (zero collective calls, 1 KB tiles, same grid, ClusterFusion's shape): Solder's DSM "
                  "kernel (communicator setup and teardown) %.2f µs per launch (stream), %.2f µs (graph); the "
                  "CF-algorithm kernel (one mbarrier, two cluster barriers) %.2f µs (stream), %.2f µs (graph).\n",
                  floor_stream, floor_graph, empty_stream, empty_graph);
    out(line);
    std::snprintf(line, sizeof line,
                  "\nLaunch floor of the reduce_channel kernel (zero calls: channel setup and teardown, the fill, rank 0's "
                  "store): %.2f µs per launch (stream), %.2f µs (graph).\n",
                  channel_floor_stream, channel_floor_graph);
    out(line);
    std::snprintf(line, sizeof line,
                  "\nLaunch floor of the grid itself (an empty kernel, no code, __cluster_dims__(4) and <<<...>>>): %.2f µs "
                  "per launch (stream), %.2f µs (graph). 1.2x under ClusterFusion's published gathers is %.2f / %.2f / "
                  "%.2f / %.2f µs.\n",
                  no_code_stream, no_code_graph, cf_on[1][0] / 1.2f, cf_on[1][1] / 1.2f, cf_on[1][2] / 1.2f,
                  cf_on[1][3] / 1.2f);
    out(line);
  }
  return write_result_file("bench_cf_config", markdown_path, md) ? 0 : 1;
}
