// Per-phase trace of the collectives' rounds (bench/NOTES-cluster.md, session 4: where do ~5k cycles per round
// go?). Build with -DSOLDER_CLUSTER_TRACE=1 (bench/cluster/device_session.sh does): thread 0 of every block
// stamps each phase boundary of every round (device/solder/cluster/trace.cuh says what each phase means).
//
// One cluster of C = 4 blocks, 256 threads, fp16, tiles in shared memory, `calls` back-to-back collectives per
// kernel (as the in-kernel benchmark). For each case and transport it prints one table: the events of one call
// in program order (the same sequence in every block), with, per block, the cycles since the block's previous
// event averaged over the steady calls (2 .. calls-2), and the %globaltimer time of the event relative to
// block 0's call_begin of the same call (ns, averaged; shows which block waits for which). The last line gives
// the cycles per call (call_begin to the next call_begin) per block.
// Usage: trace_round [--csv FILE] [--calls N]   (FILE: every raw event, one line each)
#include <solder/cluster/cluster.cuh>

#if !SOLDER_CLUSTER_TRACE
#error "build trace_round.cu with -DSOLDER_CLUSTER_TRACE=1"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../tests/gpu/cluster/launch.h"

namespace sc = solder::cluster;
namespace trace = solder::cluster::trace;
using half = __half;

constexpr unsigned cluster_blocks = 4;
constexpr unsigned block_threads = 256;  // unless a case says otherwise

// reduce: an in-place all-reduce of `count` elements; gather: `count` elements per block into C * count.
template <bool Gather>
__global__ void __launch_bounds__(256) traced_kernel(const half* input, unsigned count, unsigned slot_bytes,
                                                      unsigned calls, unsigned transport) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned C = sc::ptx::cluster_size();
  auto comm = sc::communicator::setup(smem, slot_bytes, sc::mailbox_layout::all_peers,
                                     static_cast<sc::transport>(transport));
  half* src = reinterpret_cast<half*>(smem + sc::mailbox_bytes(C, slot_bytes));
  half* dst = src + count;
  const uint4* from = reinterpret_cast<const uint4*>(input + static_cast<size_t>(blockIdx.x) * count);
  for (unsigned p = threadIdx.x; p < count / 8; p += blockDim.x) reinterpret_cast<uint4*>(src)[p] = from[p];
  for (unsigned i = 0; i < calls; ++i) {
    if constexpr (Gather) sc::cluster_gather(comm, src, dst, count);
    else sc::cluster_reduce<sc::reduce_op::sum>(comm, src, count);
  }
  comm.teardown();
}

struct trace_case {
  const char* name;
  bool gather;
  unsigned data_bytes;  // reduce: the tile; gather: the buffer each block ends with (ClusterFusion's D)
  unsigned threads = block_threads;
  unsigned slot = 0;    // mailbox slot bytes; 0: the benchmark's placement (220 KB budget, at most 32 KB)
};

static const char* transport_name(sc::transport t) {
  return t == sc::transport::bulk_copy ? "bulk_copy" : t == sc::transport::direct ? "direct" : "store_async";
}

int main(int argc, char** argv) {
  std::string csv_path;
  unsigned calls = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--csv")) csv_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--calls")) calls = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  calls = std::max(calls, 5u);
  FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "case,transport,block,index,phase,round,clock,global_ns\n");

  cudaDeviceProp prop;
  CLUSTER_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("# Per-phase trace of one round (%s), C = %u, %u threads unless the case says otherwise, fp16, tiles in shared memory, %u calls per "
              "kernel, steady calls 2..%u averaged\n\n",
              prop.name, cluster_blocks, block_threads, calls, calls - 3);

  const size_t input_bytes = size_t(cluster_blocks) * 256 * 1024;
  half* input;
  CLUSTER_CHECK_CUDA(cudaMalloc(&input, input_bytes));
  {
    std::vector<half> host(input_bytes / 2);
    for (size_t i = 0; i < host.size(); ++i) host[i] = __float2half(static_cast<float>(i % 97) * 0.01f);
    CLUSTER_CHECK_CUDA(cudaMemcpy(input, host.data(), input_bytes, cudaMemcpyHostToDevice));
  }
  void* events_address;
  CLUSTER_CHECK_CUDA(cudaGetSymbolAddress(&events_address, trace::events));
  const size_t events_bytes = sizeof(trace::event) * sc::max_cluster_size * trace::capacity;
  std::vector<trace::event> events(sc::max_cluster_size * trace::capacity);

  const trace_case cases[] = {
      {"reduce 8 KB", false, 8 * 1024},   {"reduce 32 KB", false, 32 * 1024}, {"gather 32 KB", true, 32 * 1024},
      {"reduce 128 KB", false, 128 * 1024}, {"gather 128 KB", true, 128 * 1024},
      // ClusterFusion's configuration (bench_cf_config): 128 threads, slots of one tile; 1 KB takes one round.
      {"reduce 1 KB, 128 threads", false, 1024, 128, 1024}, {"reduce 8 KB, 128 threads", false, 8 * 1024, 128, 8 * 1024},
  };
  const sc::transport transports[] = {sc::transport::store_async, sc::transport::direct};
  for (sc::transport how : transports)  // store_async first: a hang with direct loses none of its tables
    for (const trace_case& c : cases) {
      // The benchmark's placement (bench_collectives.cu, plan): tiles beside the mailbox in 220 KB, slot <= 32 KB.
      const unsigned src_bytes = c.gather ? c.data_bytes / cluster_blocks : c.data_bytes;
      const unsigned tiles = src_bytes + (c.gather ? c.data_bytes : 0);
      const unsigned slot =
          c.slot ? c.slot : std::min(32u * 1024, sc::slot_bytes_for_budget(cluster_blocks, 220 * 1024 - tiles));
      const size_t smem = sc::mailbox_bytes(cluster_blocks, slot) + tiles;
      const unsigned count = src_bytes / 2;
      CLUSTER_CHECK_CUDA(cudaMemset(events_address, 0, events_bytes));
      cudaError_t status =
          c.gather ? launch_clusters(traced_kernel<true>, 1, cluster_blocks, c.threads, smem, nullptr, input, count,
                                     slot, calls, static_cast<unsigned>(how))
                   : launch_clusters(traced_kernel<false>, 1, cluster_blocks, c.threads, smem, nullptr, input,
                                     count, slot, calls, static_cast<unsigned>(how));
      // Watchdog: a protocol bug shows up as a hang; report it instead of waiting for the step's time limit.
      if (status == cudaSuccess && !finished_within(std::chrono::seconds(5))) {
        std::printf("## %s, %s: HANG (kernel still running after 5 s)\n", c.name, transport_name(how));
        std::fflush(stdout);
        std::_Exit(2);
      }
      if (status == cudaSuccess) status = cudaDeviceSynchronize();
      if (status != cudaSuccess) {
        std::printf("## %s, %s: launch failed: %s\n\n", c.name, transport_name(how), cudaGetErrorString(status));
        std::fflush(stdout);
        if (status != cudaErrorInvalidValue && status != cudaErrorNotSupported) return 1;
        cudaGetLastError();
        continue;
      }
      CLUSTER_CHECK_CUDA(cudaMemcpy(events.data(), events_address, events_bytes, cudaMemcpyDeviceToHost));

      // Per block: the events, and where each call begins.
      std::vector<std::vector<trace::event>> list(cluster_blocks);
      std::vector<std::vector<size_t>> begins(cluster_blocks);
      for (unsigned b = 0; b < cluster_blocks; ++b) {
        for (unsigned i = 0; i < trace::capacity; ++i) {
          const trace::event& e = events[b * trace::capacity + i];
          if (e.phase == 0) break;
          if (e.phase == static_cast<unsigned>(trace::phase::call_begin)) begins[b].push_back(list[b].size());
          list[b].push_back(e);
          if (csv)
            std::fprintf(csv, "%s,%s,%u,%u,%s,%u,%lld,%lld\n", c.name, transport_name(how), b, i,
                         trace::phase_name(static_cast<trace::phase>(e.phase)), e.round, e.clock, e.global_ns);
        }
      }
      std::printf("## %s, C = %u, transport %s (slot %u B, %zu B shared memory)\n\n", c.name, cluster_blocks,
                  transport_name(how), slot, smem);
      bool consistent = true;
      for (unsigned b = 0; b < cluster_blocks; ++b) consistent = consistent && begins[b].size() == calls;
      if (!consistent) {
        std::printf("unexpected trace: calls seen per block");
        for (unsigned b = 0; b < cluster_blocks; ++b) std::printf(" %zu", begins[b].size());
        std::printf("\n\n");
        continue;
      }
      // Events per call (block 0's steady call 2 as the template).
      const size_t per_call = begins[0][3] - begins[0][2];
      for (unsigned b = 0; b < cluster_blocks; ++b)
        for (unsigned k = 2; k + 2 < calls; ++k)
          if (begins[b][k + 1] - begins[b][k] != per_call) consistent = false;
      if (!consistent) std::printf("(event counts per call differ between blocks or calls; rows by position)\n\n");
      const unsigned first = 2, last = calls - 3;  // steady calls averaged: [first, last]
      const double n = last - first + 1;
      std::printf("| # | phase | round | ");
      for (unsigned b = 0; b < cluster_blocks; ++b) std::printf("b%u Δcycles | ", b);
      for (unsigned b = 0; b < cluster_blocks; ++b) std::printf("b%u ns | ", b);
      std::printf("\n|---|---|---|");
      for (unsigned b = 0; b < 2 * cluster_blocks; ++b) std::printf("---|");
      std::printf("\n");
      for (size_t j = 0; j < per_call; ++j) {
        const trace::event& model = list[0][begins[0][first] + j];
        std::printf("| %zu | %s | %u | ", j, trace::phase_name(static_cast<trace::phase>(model.phase)),
                    model.round - list[0][begins[0][first]].round);
        double ns[cluster_blocks];
        for (unsigned b = 0; b < cluster_blocks; ++b) {
          double cycles = 0, offset = 0;
          bool same = true;
          for (unsigned k = first; k <= last; ++k) {
            const size_t at = begins[b][k] + j;
            if (at >= list[b].size() || list[b][at].phase != model.phase) same = false;
            if (at >= list[b].size()) continue;
            cycles += j == 0 ? 0.0 : static_cast<double>(list[b][at].clock - list[b][at - 1].clock);
            offset += static_cast<double>(list[b][at].global_ns - list[0][begins[0][k]].global_ns);
          }
          ns[b] = offset / n;
          std::printf("%s%.0f | ", same ? "" : "?", cycles / n);
        }
        for (unsigned b = 0; b < cluster_blocks; ++b) std::printf("%.0f | ", ns[b]);
        std::printf("\n");
      }
      std::printf("| | cycles per call | | ");
      for (unsigned b = 0; b < cluster_blocks; ++b) {
        double cycles = 0;
        for (unsigned k = first; k <= last; ++k)
          cycles += static_cast<double>(list[b][begins[b][k + 1]].clock - list[b][begins[b][k]].clock);
        std::printf("%.0f | ", cycles / n);
      }
      double call_ns = 0;
      for (unsigned k = first; k <= last; ++k)
        call_ns += static_cast<double>(list[0][begins[0][k + 1]].global_ns - list[0][begins[0][k]].global_ns);
      std::printf("b0 ns per call: %.0f | | | |\n", call_ns / n);
      // %globaltimer granularity seen in this trace (smallest non-zero step of block 0).
      long long step = 0;
      for (size_t i = 1; i < list[0].size(); ++i) {
        long long d = list[0][i].global_ns - list[0][i - 1].global_ns;
        if (d > 0 && (step == 0 || d < step)) step = d;
      }
      std::printf("\n(smallest non-zero %%globaltimer step seen: %lld ns)\n\n", step);
      std::fflush(stdout);
    }
  if (csv) std::fclose(csv);
  return 0;
}
