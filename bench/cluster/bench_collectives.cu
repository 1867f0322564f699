// Microbenchmarks of the cluster collectives (issue 6).
//
//   1. ClusterFusion Table 1 comparison: cluster_reduce (sum) and cluster_gather over DSM vs the same
//      collective through global memory, fp16, cluster size 4, data size D = 32/64/128/256 KB where D is the
//      per-block buffer of ClusterFusion's Alg. 1/2 (reduce: the tile each block reduces; gather: the gathered
//      buffer each block ends with, so each block contributes D/4). Grids of 1 cluster and of 32 clusters.
//      Per launch: one kernel doing one collective (load input, collective, store output), CUDA events around
//      CUDA-graph replays of 20 launches, median of 30 replays. In kernel: many back-to-back collectives in one
//      kernel; ns per call from the difference of two iteration counts, cycles per call from clock64.
//   2. Aggregate DSM bandwidth per cluster size: pull (16-byte loads of the neighbour's 64 KB through
//      map_shared_rank) and push (dsm_shuffle of a 32 KB tile to the successor over a ring mailbox,
//      st.async); every co-resident cluster (cudaOccupancyMaxActiveClusters), 64 KB smem per block.
//   3. One-way SM-to-SM latency (remote mbarrier arrive ping-pong between ranks 0 and C-1).
//   4. cudaOccupancyMaxActiveClusters for 32/64/128/192 KB of shared memory per block.
// Prints markdown; --markdown FILE and --json FILE also write the results; --commit HASH is recorded.
#include <solder/cluster/cluster.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "../../tests/gpu/cluster/launch.h"
#include "collective_kernels.cuh"
#include "timing.h"

// Threads per block of the collective kernels; the CF comparison runs at 256 and 1024 (NOTES-cluster.md v4).
static unsigned threads = 256;

// Pull: every block reads its successor's 64 KB with 16-byte loads, `rounds` times.
__global__ void pull_kernel(unsigned rounds, unsigned* sink) {
  extern __shared__ __align__(16) uint4 tile[];
  const unsigned packets = 65536 / 16;
  for (unsigned p = threadIdx.x; p < packets; p += blockDim.x) tile[p] = make_uint4(p, p + 1, p + 2, blockIdx.x);
  sc::ptx::cluster_sync();
  const uint4* peer = sc::ptx::map_to_rank(tile, (sc::ptx::block_rank() + 1) % sc::ptx::cluster_size());
  unsigned x = 0;
  for (unsigned r = 0; r < rounds; ++r)
#pragma unroll 8
    for (unsigned p = threadIdx.x; p < packets; p += blockDim.x) {
      uint4 v = peer[(p + r * 32) & (packets - 1)];  // depends on r, so the loads are not hoisted
      x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  sc::ptx::cluster_sync();
  if (x == 0x12345678u) *sink = x;
}

// Push: dsm_shuffle of a 32 KB tile to the successor, in place, `rounds` times, over a ring mailbox.
__global__ void push_kernel(unsigned rounds, unsigned slot_bytes) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned C = sc::ptx::cluster_size();
  auto comm = sc::communicator::setup(smem, slot_bytes, sc::mailbox_layout::ring);
  half* tile = reinterpret_cast<half*>(smem + sc::mailbox_bytes(C, slot_bytes, sc::mailbox_layout::ring));
  const unsigned count = 32768 / sizeof(half);
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) tile[i] = __float2half(i * 0.001f);
  for (unsigned r = 0; r < rounds; ++r) sc::dsm_shuffle(comm, tile, tile, count, C);
  comm.teardown();
}

// Push through the copy engine (experiment for a later version): the same ring mailbox and flow control as
// push_kernel, but each 16 KB chunk goes by one cp.async.bulk (one thread) instead of 16-byte st.async stores.
// The received chunk is copied back into the tile like dsm_shuffle does.
__global__ void push_bulk_kernel(unsigned rounds, unsigned slot_bytes) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned C = sc::ptx::cluster_size();
  auto comm = sc::communicator::setup(smem, slot_bytes, sc::mailbox_layout::ring);
  uint4* tile = reinterpret_cast<uint4*>(smem + sc::mailbox_bytes(C, slot_bytes, sc::mailbox_layout::ring));
  const unsigned chunk_packets = slot_bytes / 16, total = 2 * rounds;
  for (unsigned i = threadIdx.x; i < 2 * chunk_packets; i += blockDim.x) tile[i] = make_uint4(i, i, i, i);
  const sc::group_view ring = comm.group(C);
  auto send = [&](unsigned round, unsigned ahead) {
    sc::ptx::fence_shared_to_async_proxy();  // the tile was written by generic stores
    comm.wait_for_slot(ahead, ring.successor());
    if (threadIdx.x == 0) {
      sc::remote_slot slot = comm.peer_slot(ahead, ring.successor());
      sc::ptx::bulk_copy_to_peer(slot.data, tile + (round % 2) * chunk_packets, slot_bytes, slot.barrier);
    }
  };
  send(0, 0);
  for (unsigned round = 0; round < total; ++round) {
    if (round + 1 < total) send(round + 1, 1);
    comm.wait_round(slot_bytes);
    const uint4* slot = comm.receive_slot(0, ring.predecessor());
    for (unsigned i = threadIdx.x; i < chunk_packets; i += blockDim.x) tile[(round % 2) * chunk_packets + i] = slot[i];
    comm.release_round_to(ring.predecessor());
  }
  comm.teardown();
}

// Raw push (no copy-out): each block sends a 32 KB tile of its own shared memory to its successor's receive
// buffer, chunk after chunk, by cp.async.bulk into `Stages` ping-pong receive chunks (32 KB / Stages each),
// completing the receiver's full barrier; the receiver (another warp) releases a chunk as soon as it has
// landed. Measures the push data path with the protocol's flow control but without the consumer's copy.
// Shared memory: tile 32 KB + receive 32 KB + barriers.
template <unsigned Stages>
__global__ void push_raw_kernel(unsigned rounds) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr unsigned chunk = 32768 / Stages;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + Stages;
  unsigned char* tile = smem + 1024;
  unsigned char* receive = tile + 32768;
  for (unsigned i = threadIdx.x; i < 32768 / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(tile)[i] = make_uint4(i, i, i, blockIdx.x);
  if (threadIdx.x == 0) {
    for (unsigned s = 0; s < Stages; ++s) {
      sc::ptx::barrier_init(&full[s], 1);
      sc::ptx::barrier_init(&empty[s], 1);
    }
    sc::ptx::fence_barrier_init();
  }
  sc::ptx::fence_shared_to_async_proxy();
  sc::ptx::cluster_sync();
  const unsigned C = sc::ptx::cluster_size(), rank = sc::ptx::block_rank();
  const unsigned successor = (rank + 1) % C, predecessor = (rank + C - 1) % C;
  if (threadIdx.x == 0) {  // sender
    for (unsigned r = 0; r < rounds; ++r) {
      const unsigned s = r % Stages, use = r / Stages;
      sc::ptx::wait_parity(&empty[s], (use & 1) ^ 1);
      sc::ptx::bulk_copy_to_peer(sc::ptx::map_to_rank(receive + s * chunk, successor), tile + (r * chunk) % 32768, chunk,
                                 sc::ptx::map_to_rank(&full[s], successor));
    }
  } else if (threadIdx.x == 32) {  // receiver
    for (unsigned r = 0; r < rounds; ++r) {
      const unsigned s = r % Stages, use = r / Stages;
      sc::ptx::arrive_expect_bytes(&full[s], chunk);
      sc::ptx::wait_parity_cta(&full[s], use & 1);
      sc::ptx::arrive_remote(sc::ptx::map_to_rank(&empty[s], predecessor));
    }
  }
  sc::ptx::cluster_sync();
}

// One-way latency: ranks 0 and C-1 bounce a signal `rounds` times. variant 0: remote mbarrier arrive
// (release.cluster) + wait (acquire.cluster), the protocol's slot release; 1: relaxed arrive + default wait;
// 2: st.async of a 16-byte token completing the peer's transaction count + default wait, the protocol's
// round signal.
__global__ void latency_kernel(unsigned rounds, int variant, long long* cycles) {
  __shared__ uint64_t barrier;
  __shared__ uint4 token;
  const unsigned rank = sc::ptx::block_rank(), last = sc::ptx::cluster_size() - 1;
  if (threadIdx.x == 0) {
    sc::ptx::barrier_init(&barrier, 1);
    sc::ptx::fence_barrier_init();
  }
  sc::ptx::cluster_sync();
  if (threadIdx.x == 0 && (rank == 0 || rank == last)) {
    const unsigned peer_rank = rank == 0 ? last : 0;
    uint64_t* peer = sc::ptx::map_to_rank(&barrier, peer_rank);
    uint4* peer_token = sc::ptx::map_to_rank(&token, peer_rank);
    auto signal = [&](unsigned r) {
      if (variant == 0) sc::ptx::arrive_remote(peer);
      else if (variant == 1) sc::ptx::arrive_remote_relaxed(peer);
      else sc::ptx::store_async_16(peer_token, make_uint4(r, 0, 0, 0), peer);
    };
    auto wait = [&](unsigned r) {
      if (variant == 2) sc::ptx::arrive_expect_bytes(&barrier, 16);
      if (variant == 0) sc::ptx::wait_parity(&barrier, r & 1);
      else sc::ptx::wait_parity_cta(&barrier, r & 1);
    };
    long long start = clock64();
    for (unsigned r = 0; r < rounds; ++r) {
      if (rank == 0) {
        signal(r);
        wait(r);
      } else {
        wait(r);
        signal(r);
      }
    }
    if (rank == 0) *cycles = (clock64() - start) / (2 * rounds);
  }
  sc::ptx::cluster_sync();
}

// ---- host ---------------------------------------------------------------------------------------------------

// sc::transport by name (store_async, bulk_copy or bulk, direct), as an integer for bench_args.
static unsigned parse_transport(const char* name) {
  if (!std::strcmp(name, "bulk") || !std::strcmp(name, "bulk_copy")) return static_cast<unsigned>(sc::transport::bulk_copy);
  if (!std::strcmp(name, "direct")) return static_cast<unsigned>(sc::transport::direct);
  if (!std::strcmp(name, "store_async")) return static_cast<unsigned>(sc::transport::store_async);
  std::fprintf(stderr, "bench_collectives: transport must be store_async, bulk_copy (bulk) or direct, found '%s'\n", name);
  std::exit(2);
}
static const char* transport_name(unsigned transport) {
  return transport == 1 ? "bulk_copy" : transport == 2 ? "direct" : "store_async";
}

struct collective_setup {
  unsigned count, slot_bytes;
  int src_global, dst_global;
  size_t dsm_smem, global_smem;
};

// Placement for data size D: tiles in shared memory when they fit beside the mailbox (220 KB in all),
// else in global memory; the mailbox slot is as large as the rest of the budget allows (at most 32 KB).
static collective_setup plan(bool gather, unsigned C, unsigned data_bytes) {
  collective_setup s{};
  const unsigned budget = 220 * 1024;
  unsigned src_bytes = gather ? data_bytes / C : data_bytes, dst_bytes = gather ? data_bytes : 0;
  s.count = src_bytes / 2;
  unsigned tiles = src_bytes + dst_bytes;
  if (tiles + 8 * 1024 > budget) {
    s.dst_global = gather ? 1 : 0;
    s.src_global = gather ? 0 : 1;
    tiles = gather ? src_bytes : 0;
  }
  s.slot_bytes = std::min(32u * 1024, sc::slot_bytes_for_budget(C, budget - tiles));
  s.dsm_smem = sc::mailbox_bytes(C, s.slot_bytes) + tiles;
  s.global_smem = std::max(tiles, 16u);
  return s;
}

int main(int argc, char** argv) {
  std::string commit = "unknown", markdown_path, json_path;
  unsigned sweep_threads = 1024;  // the launch floor, the cluster-size sweep: --threads N --transport T
  unsigned sweep_transport = 1;  // sc::transport: 0 store_async, 1 bulk_copy, 2 direct
  // The Table 1 comparison runs once per threads/transport pair (--table-configs 256/store_async,256/direct).
  std::string table_configs = "256/store_async,256/bulk_copy,1024/store_async,1024/bulk_copy";
  // Which parts run (--sections table,sweep,dsm): the Table 1 comparison; the launch floor and the cluster-size
  // sweep; the DSM bandwidth/latency table (and the JSON).
  std::string sections = ",table,sweep,dsm,";
  auto has = [&](const char* section) { return sections.find(std::string(",") + section + ",") != std::string::npos; };
  for (int i = 1; i < argc; i += 2) {
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!value) {
      std::fprintf(stderr, "bench_collectives: option '%s' needs a value\n", argv[i]);
      return 2;
    }
    if (!std::strcmp(argv[i], "--commit")) commit = value;
    else if (!std::strcmp(argv[i], "--threads")) sweep_threads = static_cast<unsigned>(std::atoi(value));
    else if (!std::strcmp(argv[i], "--transport")) sweep_transport = parse_transport(value);
    else if (!std::strcmp(argv[i], "--table-configs")) table_configs = value;
    else if (!std::strcmp(argv[i], "--sections")) sections = std::string(",") + value + ",";
    else if (!std::strcmp(argv[i], "--markdown")) markdown_path = value;
    else if (!std::strcmp(argv[i], "--json")) json_path = value;
    else {
      std::fprintf(stderr,
                   "bench_collectives: unknown option '%s'\nusage: bench_collectives [--commit HASH] [--threads N] "
                   "[--transport store_async|bulk_copy|direct] [--table-configs THREADS/TRANSPORT,...] "
                   "[--sections table,sweep,dsm] [--markdown FILE] [--json FILE]\n",
                   argv[i]);
      return 2;
    }
  }
  if (sweep_threads < 32 || sweep_threads > 1024 || sweep_threads % 32 != 0) {
    std::fprintf(stderr, "bench_collectives: --threads expects a multiple of 32 from 32 to 1024, found %u\n",
                 sweep_threads);
    return 2;
  }
  cudaDeviceProp prop;
  CLUSTER_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CLUSTER_CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::string md;
  char line[512];
  auto out = [&](const char* text) {
    std::fputs(text, stdout);
    std::fflush(stdout);  // a run cut short by a time limit keeps what it printed
    md += text;
  };
  std::snprintf(line, sizeof line,
                "# Cluster collectives on %s\n\n%s; commit %s; %d SMs; SM clock %d MHz (reported max); "
                "nvcc -O3 sm_90a. Launch floor and cluster-size sweep: %u threads per block, transport %s.\n\n",
                prop.name, date, commit.c_str(), prop.multiProcessorCount, clock_khz / 1000, sweep_threads,
                transport_name(sweep_transport));
  out(line);

  // Buffers large enough for every configuration: 32 clusters x 4 blocks x 1 MB.
  const size_t buffer_bytes = size_t(128) << 20;
  half *input, *output, *scratch;
  long long* cycles;
  CLUSTER_CHECK_CUDA(cudaMalloc(&input, buffer_bytes));
  CLUSTER_CHECK_CUDA(cudaMalloc(&output, buffer_bytes));
  CLUSTER_CHECK_CUDA(cudaMalloc(&scratch, buffer_bytes));
  CLUSTER_CHECK_CUDA(cudaMalloc(&cycles, sizeof(long long)));
  {
    std::vector<half> host(buffer_bytes / 2);
    for (size_t i = 0; i < host.size(); ++i) host[i] = __float2half(static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f);
    CLUSTER_CHECK_CUDA(cudaMemcpy(input, host.data(), buffer_bytes, cudaMemcpyHostToDevice));
  }

  // ---- 1. ClusterFusion Table 1 comparison ----
  // Per-block data sizes 8-256 KB: ClusterFusion's "data size" read as the per-block buffer (32-256 KB, the
  // targets of issue 6) or as the whole cluster's (then 8-64 KB per block at C = 4); NOTES-cluster.md v4.
  const unsigned sizes_kb[] = {8, 16, 32, 64, 128, 256};
  constexpr int size_count = 6;
  const float cf_reduce[] = {0, 0, 6.77f, 6.61f, 7.42f, 9.17f}, cf_gather[] = {0, 0, 3.90f, 4.12f, 4.39f, 4.15f};
  const float cf_reduce_off[] = {0, 0, 8.03f, 9.01f, 14.95f, 22.44f}, cf_gather_off[] = {0, 0, 6.26f, 6.27f, 6.31f, 6.61f};
  const unsigned C = 4;
  struct row_result {
    float dsm_launch[2], global_launch[2], dsm_ns, global_ns;
    long long dsm_cycles, global_cycles;
  };
  struct config {
    unsigned threads;
    unsigned transport;
  };
  std::vector<config> configs;
  for (size_t begin = 0; begin < table_configs.size();) {
    size_t end = table_configs.find(',', begin);
    if (end == std::string::npos) end = table_configs.size();
    const std::string item = table_configs.substr(begin, end - begin);
    const size_t slash = item.find('/');
    configs.push_back({static_cast<unsigned>(std::atoi(item.c_str())),
                       slash == std::string::npos ? 0u : parse_transport(item.c_str() + slash + 1)});
    const unsigned t = configs.back().threads;
    if (t < 32 || t > 1024 || t % 32 != 0) {
      std::fprintf(stderr, "bench_collectives: --table-configs expects THREADS/TRANSPORT items with THREADS a multiple "
                           "of 32 from 32 to 1024, found '%s'\n", item.c_str());
      return 2;
    }
    begin = end + 1;
  }
  if (!has("table")) configs.clear();
  for (const config& cfg : configs) {
    threads = cfg.threads;
    row_result results[2][size_count];
    for (int g = 0; g < 2; ++g)
      for (int s = 0; s < size_count; ++s) {
        const bool gather = g == 1;
        collective_setup p = plan(gather, C, sizes_kb[s] * 1024);
        auto make = [&](bool dsm, unsigned clusters, unsigned iterations, long long* cyc) {
          bench_args a{input, output, scratch, p.count, p.slot_bytes, iterations, p.src_global, p.dst_global, cyc,
                       cfg.transport};
          const unsigned t = threads;
          return [=](cudaStream_t stream) {
            if (dsm)
              return gather ? launch_clusters(dsm_kernel_for<true>(t), clusters, C, t, p.dsm_smem, stream, a)
                            : launch_clusters(dsm_kernel_for<false>(t), clusters, C, t, p.dsm_smem, stream, a);
            return gather ? launch_clusters(global_kernel_for<true>(t), clusters, C, t, p.global_smem, stream, a)
                          : launch_clusters(global_kernel_for<false>(t), clusters, C, t, p.global_smem, stream, a);
          };
        };
        row_result& r = results[g][s];
        const unsigned grids[2] = {1, 32};
        for (int k = 0; k < 2; ++k) {
          r.dsm_launch[k] = per_launch_us(make(true, grids[k], 1, nullptr));
          r.global_launch[k] = per_launch_us(make(false, grids[k], 1, nullptr));
        }
        // In kernel, one cluster: (t(72 calls) - t(8 calls)) / 64.
        for (int dsm = 0; dsm < 2; ++dsm) {
          float t_small = single_launch_us(make(dsm, 1, 8, nullptr));
          float t_large = single_launch_us(make(dsm, 1, 72, cycles));
          long long cyc;
          CLUSTER_CHECK_CUDA(cudaMemcpy(&cyc, cycles, sizeof cyc, cudaMemcpyDeviceToHost));
          (dsm ? r.dsm_ns : r.global_ns) = (t_large - t_small) * 1000.f / 64;
          (dsm ? r.dsm_cycles : r.global_cycles) = cyc;
        }
      }
    std::snprintf(line, sizeof line, "## ClusterFusion Table 1 comparison (fp16, cluster size 4, %u threads per block, "
                  "transport %s)\n\n", cfg.threads, transport_name(cfg.transport));
    out(line);
    out("D = per-block buffer of ClusterFusion Alg. 1/2: reduce = tile each block all-reduces (sum); gather = "
        "buffer each block ends with (each contributes D/4). Tiles in shared memory up to 128 KB, in global "
        "memory at 256 KB (reduce tile; gather destination). Per launch = one kernel (load input, one collective, "
        "store output), graph replays, median. In kernel = (t(72 calls) - t(8 calls)) / 64, one cluster. CF ratios "
        "> 1: Solder faster. The 8 and 16 KB rows have no CF number (they serve the cluster-total reading).\n\n");
    out("| op | D (KB) | CF on-chip µs | CF off-chip µs | DSM µs/launch, 1 cluster | global µs/launch, 1 cluster | "
        "DSM µs/launch, 32 clusters | global µs/launch, 32 clusters | CF / DSM per launch (1 cl.) | "
        "DSM in-kernel ns/call | DSM cycles/call | CF / DSM in kernel | global in-kernel ns/call | global cycles/call | "
        "global/DSM in-kernel |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int g = 0; g < 2; ++g)
      for (int s = 0; s < size_count; ++s) {
        const row_result& r = results[g][s];
        const float cf = g ? cf_gather[s] : cf_reduce[s], cf_off = g ? cf_gather_off[s] : cf_reduce_off[s];
        std::snprintf(line, sizeof line,
                      "| %s | %u | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2fx | %.0f | %lld | %.2fx | %.0f | %lld | %.2fx |\n",
                      g ? "gather" : "reduce", sizes_kb[s], cf, cf_off, r.dsm_launch[0], r.global_launch[0],
                      r.dsm_launch[1], r.global_launch[1], cf / r.dsm_launch[0], r.dsm_ns, r.dsm_cycles,
                      cf * 1000.f / r.dsm_ns, r.global_ns, r.global_cycles, r.global_ns / r.dsm_ns);
        out(line);
      }
    out("\n");
  }
  threads = sweep_threads;

  // The markdown file, when asked; a failure to write it is reported and exits 1.
  auto write_markdown = [&] { return write_result_file("bench_collectives", markdown_path, md); };
  // Launch floor: the same kernel with zero calls (setup, load, store, teardown).
  if (has("sweep")) {
    collective_setup p = plan(false, C, 32 * 1024);
    bench_args a{input, output, scratch, p.count, p.slot_bytes, 0, 0, 0, nullptr, sweep_transport};
    float floor_us = per_launch_us([=](cudaStream_t stream) {
      return launch_clusters(dsm_kernel_for<false>(threads), 1, C, threads, p.dsm_smem, stream, a);
    });
    std::snprintf(line, sizeof line, "\nLaunch floor (same reduce kernel, D = 32 KB, zero collective calls, 1 cluster): %.2f µs per launch.\n", floor_us);
    out(line);
  }

  // In-kernel sweep over cluster sizes at D = 32 KB (reduce) and D = 32 KB * C / 4 (gather: 8 KB per block).
  if (has("sweep"))
    out("\n## In-kernel latency per cluster size (fp16, one cluster, 64 back-to-back calls; threads and transport "
      "as in the header)\n\n"
      "| cluster size | reduce 32 KB ns/call | reduce cycles/call | gather 8 KB/block ns/call | gather cycles/call |\n|---|---|---|---|---|\n");
  for (unsigned cs : {2u, 4u, 8u, 16u}) {
    if (!has("sweep")) break;
    float ns[2] = {0, 0};
    long long cyc[2] = {0, 0};
    for (int g = 0; g < 2; ++g) {
      collective_setup p = plan(g, cs, g ? 8 * 1024 * cs : 32 * 1024);
      int fits = g ? max_active_clusters(dsm_kernel_for<true>(threads), cs, threads, p.dsm_smem)
                   : max_active_clusters(dsm_kernel_for<false>(threads), cs, threads, p.dsm_smem);
      if (fits == 0) continue;  // reported as 0: no cluster of this size fits with this footprint
      auto make = [&](unsigned iterations, long long* c) {
        bench_args a{input, output, scratch, p.count, p.slot_bytes, iterations, p.src_global, p.dst_global, c,
                     sweep_transport};
        return [=](cudaStream_t stream) {
          return g ? launch_clusters(dsm_kernel_for<true>(threads), 1, cs, threads, p.dsm_smem, stream, a)
                   : launch_clusters(dsm_kernel_for<false>(threads), 1, cs, threads, p.dsm_smem, stream, a);
        };
      };
      float t_small = single_launch_us(make(8, nullptr)), t_large = single_launch_us(make(72, cycles));
      CLUSTER_CHECK_CUDA(cudaMemcpy(&cyc[g], cycles, sizeof(long long), cudaMemcpyDeviceToHost));
      ns[g] = (t_large - t_small) * 1000.f / 64;
    }
    std::snprintf(line, sizeof line, "| %u | %.0f | %lld | %.0f | %lld |\n", cs, ns[0], cyc[0], ns[1], cyc[1]);
    out(line);
  }

  // ---- 2-4. DSM table (256 threads per block, 64 KB of shared memory: 3 blocks per SM, as the reference) ----
  if (!has("dsm")) return write_markdown() ? 0 : 1;
  threads = 256;
  const unsigned cluster_sizes[] = {1, 2, 4, 8, 16};
  const unsigned smem_kb[] = {32, 64, 128, 192};
  const float reference_pull[] = {30.3f, 4.09f, 2.83f, 3.18f, 2.91f};
  float pull[5] = {}, push[5] = {}, push_bulk[5] = {}, push_raw[5][2] = {}, latency_ns[5] = {};
  long long latency_cycles[5] = {}, latency_variants[5][3] = {};
  int active[5][4], active_bw[5];
  unsigned* sink;
  CLUSTER_CHECK_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  // Co-residency is asked of the 1024-bounded kernel (at most 64 registers per thread), as in the tables the
  // planner's hardware description was built from; the 256-bounded one uses more registers and fits fewer blocks.
  for (int i = 0; i < 5; ++i) {
    const unsigned cs = cluster_sizes[i];
    for (int j = 0; j < 4; ++j) active[i][j] = max_active_clusters(dsm_kernel<false, 1024>, cs, threads, smem_kb[j] * 1024);
    const size_t smem = 64 * 1024;
    active_bw[i] = max_active_clusters(pull_kernel, cs, threads, smem);
    const unsigned rounds = 64;
    pull[i] = 0;
    if (active_bw[i] == 0) continue;
    float t = single_launch_us([&](cudaStream_t s) {
      return launch_clusters(pull_kernel, active_bw[i], cs, threads, smem, s, rounds, sink);
    });
    pull[i] = static_cast<float>(active_bw[i]) * cs * 65536.0 * rounds / (t * 1e-6) / 1e12;
    push[i] = 0;
    latency_cycles[i] = 0;
    latency_ns[i] = 0;
    if (cs > 1) {
      const unsigned slot = 16 * 1024;  // ring mailbox 32 KB + tile 32 KB = 64 KB per block
      const size_t push_smem = sc::mailbox_bytes(cs, slot, sc::mailbox_layout::ring) + 32768;
      int clusters = max_active_clusters(push_kernel, cs, threads, push_smem);
      if (clusters > 0) {
        float tp = single_launch_us([&](cudaStream_t s) {
          return launch_clusters(push_kernel, clusters, cs, threads, push_smem, s, 2 * rounds, slot);
        });
        push[i] = static_cast<float>(clusters) * cs * 32768.0 * 2 * rounds / (tp * 1e-6) / 1e12;
        float tb = single_launch_us([&](cudaStream_t s) {
          return launch_clusters(push_bulk_kernel, clusters, cs, threads, push_smem, s, 2 * rounds, slot);
        });
        push_bulk[i] = static_cast<float>(clusters) * cs * 32768.0 * 2 * rounds / (tb * 1e-6) / 1e12;
      }
      const size_t raw_smem = 1024 + 65536;
      for (int v = 0; v < 2; ++v) {
        int raw_clusters = v == 0 ? max_active_clusters(push_raw_kernel<2>, cs, threads, raw_smem)
                                  : max_active_clusters(push_raw_kernel<4>, cs, threads, raw_smem);
        if (raw_clusters == 0) continue;
        const unsigned chunks = v == 0 ? 4 * rounds : 8 * rounds;  // 128 x 32 KB per block either way
        float tr = single_launch_us([&](cudaStream_t s) {
          return v == 0 ? launch_clusters(push_raw_kernel<2>, raw_clusters, cs, threads, raw_smem, s, chunks)
                        : launch_clusters(push_raw_kernel<4>, raw_clusters, cs, threads, raw_smem, s, chunks);
        });
        push_raw[i][v] = static_cast<float>(raw_clusters) * cs * 32768.0 * 2 * rounds / (tr * 1e-6) / 1e12;
      }
      for (int variant = 0; variant < 3; ++variant) {
        CLUSTER_CHECK_CUDA(launch_clusters(latency_kernel, 1, cs, 32, 0, nullptr, 1000u, variant, cycles));
        CLUSTER_CHECK_CUDA(cudaDeviceSynchronize());
        CLUSTER_CHECK_CUDA(cudaMemcpy(&latency_variants[i][variant], cycles, sizeof(long long), cudaMemcpyDeviceToHost));
      }
      latency_cycles[i] = latency_variants[i][2];
      latency_ns[i] = latency_cycles[i] * 1e6f / clock_khz;
    } else {
      latency_cycles[i] = 0;
      latency_ns[i] = 0;
    }
  }
  out("\n## DSM bandwidth, latency and co-residency per cluster size\n\n"
      "Aggregate over every co-resident cluster at 64 KB smem per block. Pull: 16-byte loads of the "
      "successor's 64 KB through map_shared_rank (bytes read). Push: dsm_shuffle (st.async into a ring mailbox "
      "with 16 KB ping-pong slots, flow control by mbarriers) of a 32 KB tile to the successor (bytes "
      "delivered). Push bulk: the same with one cp.async.bulk per 16 KB chunk (experiment, not used by the "
      "collectives). Latency: one-way signal between ranks 0 and C-1 (ping-pong / 2), cycles: token = st.async "
      "16 B completing the peer's transaction count (the round signal; ns at the reported max clock), "
      "release = remote arrive .release.cluster + wait .acquire.cluster (the slot release), relaxed = relaxed "
      "arrive + default wait.\n\n"
      "Push raw: cp.async.bulk of a 32 KB tile to the successor in 2 x 16 KB or 4 x 8 KB ping-pong chunks, "
      "completing the receiver's mbarrier, released by the receiver on arrival (flow control, no copy-out). "
      "Push (best) = the larger raw figure: the planner's push bandwidth.\n\n"
      "| cluster size | clusters | pull TB/s | reference pull TB/s | push shuffle (st.async) TB/s | push shuffle bulk TB/s | "
      "push raw 2x16 KB TB/s | push raw 4x8 KB TB/s | push (best) / reference pull | "
      "latency token cycles | ns | release cycles | relaxed cycles | max active clusters 32 / 64 / 128 / 192 KB |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < 5; ++i) {
    if (i == 0)
      std::snprintf(line, sizeof line, "| 1 | %d | %.2f | %.2f | - | - | - | - | - | - | - | - | - | %d / %d / %d / %d |\n",
                    active_bw[i], pull[i], reference_pull[i], active[i][0], active[i][1], active[i][2], active[i][3]);
    else
      std::snprintf(line, sizeof line,
                    "| %u | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2fx | %lld | %.0f | %lld | %lld | %d / %d / %d / %d |\n",
                    cluster_sizes[i], active_bw[i], pull[i], reference_pull[i], push[i], push_bulk[i], push_raw[i][0],
                    push_raw[i][1], std::max(push_raw[i][0], push_raw[i][1]) / reference_pull[i],
                    latency_cycles[i], latency_ns[i], latency_variants[i][0], latency_variants[i][1], active[i][0],
                    active[i][1], active[i][2], active[i][3]);
    out(line);
  }

  if (!write_markdown()) return 1;
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "bench_collectives: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"commit\": \"%s\",\n  \"sm_count\": %d,\n"
                    "  \"sm_clock_mhz\": %d,\n  \"smem_per_block_bytes\": %zu,\n  \"max_cluster_size\": 16,\n"
                    "  \"smem_per_block_bytes_for_bandwidth\": 65536,\n  \"cluster_sizes\": {\n",
                 prop.name, date, commit.c_str(), prop.multiProcessorCount, clock_khz / 1000, prop.sharedMemPerBlockOptin);
    for (int i = 0; i < 5; ++i) {
      std::fprintf(f, "    \"%u\": {\"pull_tbps\": %.3f, \"push_tbps\": %s, \"push_shuffle_tbps\": %s, "
                      "\"push_shuffle_bulk_tbps\": %s, \"one_way_latency_cycles\": %s, "
                      "\"one_way_latency_ns\": %s, \"max_active_clusters\": {\"32768\": %d, \"65536\": %d, "
                      "\"131072\": %d, \"196608\": %d}}%s\n",
                   cluster_sizes[i], pull[i],
                   i ? std::to_string(std::max(push_raw[i][0], push_raw[i][1])).c_str() : "null",
                   i ? std::to_string(push[i]).c_str() : "null",
                   i ? std::to_string(push_bulk[i]).c_str() : "null",
                   i ? std::to_string(latency_cycles[i]).c_str() : "null",
                   i ? std::to_string(latency_ns[i]).c_str() : "null", active[i][0], active[i][1], active[i][2],
                   active[i][3], i < 4 ? "," : "");
    }
    std::fprintf(f, "  }\n}\n");
    std::fclose(f);
  }
  return 0;
}
