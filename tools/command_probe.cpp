// solder probe [-o FILE] — re-measures the DSM table and the cost model's rates (src/hw/rate_probe.h) of the
// hardware description (src/hw/hardware.h) on the present GPU: probe kernels built from the cluster device headers by NVRTC, launched with clusters through
// the runtime. Writes the JSON format that load_hardware_description() reads (stdout by default).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>

#include "cli.h"
#include "commands.h"
#include "hw/hardware.h"
#include "hw/rate_probe.h"
#include "ir/diagnostics.h"
#include "runtime/runtime.h"

namespace solder::cli {
namespace {

// The probe kernels: pull (remote 16-byte loads of the successor's 64 KB), push (cp.async.bulk of 16 KB chunks
// into the successor, two ping-pong stages, flow control by mbarriers), one-way latency (st.async token
// ping-pong between ranks 0 and C-1), residency (how many blocks run at once: each block stays ~100 µs).
constexpr const char* kProbeSource = R"cuda(
#include <solder/cluster/cluster.cuh>
namespace sc = solder::cluster;

extern "C" __global__ void probe_pull(unsigned rounds, unsigned* sink) {
  extern __shared__ __align__(16) uint4 tile[];
  const unsigned packets = 65536 / 16;
  for (unsigned p = threadIdx.x; p < packets; p += blockDim.x) tile[p] = make_uint4(p, p + 1, p + 2, blockIdx.x);
  sc::ptx::cluster_sync();
  const uint4* peer = sc::ptx::map_to_rank(tile, (sc::ptx::block_rank() + 1) % sc::ptx::cluster_size());
  unsigned x = 0;
  for (unsigned r = 0; r < rounds; ++r)
#pragma unroll 8
    for (unsigned p = threadIdx.x; p < packets; p += blockDim.x) {
      uint4 v = peer[(p + r * 32) & (packets - 1)];
      x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  sc::ptx::cluster_sync();
  if (x == 0x12345678u) *sink = x;
}

extern "C" __global__ void probe_push(unsigned chunks) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr unsigned stages = 2, chunk = 16384;
  unsigned long long* full = reinterpret_cast<unsigned long long*>(smem);
  unsigned long long* empty = full + stages;
  unsigned char* tile = smem + 1024;
  unsigned char* receive = tile + 32768;
  for (unsigned i = threadIdx.x; i < 32768 / 16; i += blockDim.x) reinterpret_cast<uint4*>(tile)[i] = make_uint4(i, i, i, i);
  if (threadIdx.x == 0) {
    for (unsigned s = 0; s < stages; ++s) { sc::ptx::barrier_init(&full[s], 1); sc::ptx::barrier_init(&empty[s], 1); }
    sc::ptx::fence_barrier_init();
  }
  sc::ptx::fence_shared_to_async_proxy();
  sc::ptx::cluster_sync();
  const unsigned C = sc::ptx::cluster_size(), rank = sc::ptx::block_rank();
  if (threadIdx.x == 0) {
    for (unsigned r = 0; r < chunks; ++r) {
      const unsigned s = r % stages, use = r / stages;
      sc::ptx::wait_parity(&empty[s], (use & 1) ^ 1);
      sc::ptx::bulk_copy_to_peer(sc::ptx::map_to_rank(receive + s * chunk, (rank + 1) % C), tile + (r * chunk) % 32768,
                                 chunk, sc::ptx::map_to_rank(&full[s], (rank + 1) % C));
    }
  } else if (threadIdx.x == 32) {
    for (unsigned r = 0; r < chunks; ++r) {
      const unsigned s = r % stages, use = r / stages;
      sc::ptx::arrive_expect_bytes(&full[s], chunk);
      sc::ptx::wait_parity(&full[s], use & 1);
      sc::ptx::arrive_remote(sc::ptx::map_to_rank(&empty[s], (rank + C - 1) % C));
    }
  }
  sc::ptx::cluster_sync();
}

extern "C" __global__ void probe_latency(unsigned rounds, long long* cycles) {
  __shared__ unsigned long long barrier;
  __shared__ uint4 token;
  const unsigned rank = sc::ptx::block_rank(), last = sc::ptx::cluster_size() - 1;
  if (threadIdx.x == 0) { sc::ptx::barrier_init(&barrier, 1); sc::ptx::fence_barrier_init(); }
  sc::ptx::cluster_sync();
  if (threadIdx.x == 0 && (rank == 0 || rank == last)) {
    const unsigned peer_rank = rank == 0 ? last : 0;
    unsigned long long* peer = sc::ptx::map_to_rank(&barrier, peer_rank);
    uint4* peer_token = sc::ptx::map_to_rank(&token, peer_rank);
    long long start = clock64();
    for (unsigned r = 0; r < rounds; ++r) {
      if (rank == 0) sc::ptx::store_async_16(peer_token, make_uint4(r, 0, 0, 0), peer);
      sc::ptx::arrive_expect_bytes(&barrier, 16);
      sc::ptx::wait_parity(&barrier, r & 1);
      if (rank != 0) sc::ptx::store_async_16(peer_token, make_uint4(r, 0, 0, 0), peer);
    }
    if (rank == 0) *cycles = (clock64() - start) / (2 * rounds);
  }
  sc::ptx::cluster_sync();
}

extern "C" __global__ void probe_residency(unsigned* counters, long long spin_cycles) {
  if (threadIdx.x == 0) {
    unsigned now = atomicAdd(&counters[0], 1u) + 1;
    atomicMax(&counters[1], now);
    long long start = clock64();
    while (clock64() - start < spin_cycles) atomicMax(&counters[1], atomicAdd(&counters[0], 0u));
    atomicSub(&counters[0], 1u);
  }
}
)cuda";

// Milliseconds of one run after a warm-up run (events on the default stream).
double launch_ms(const std::function<void()>& run_once) {
  run_once();  // warm-up
  runtime::Event begin, end;
  begin.record(nullptr);
  run_once();
  end.record(nullptr);
  return runtime::elapsed_ms(begin, end);
}

}  // namespace

int command_probe(const std::vector<std::string>& args) {
  std::string output = "-";
  Command command{"probe", "solder probe [-o FILE]",
                  "Measure the GPU's distributed shared memory per cluster size (1, 2, 4, 8, 16): aggregate pull\n"
                  "and push bandwidth over every co-resident cluster (3 blocks of 64 KB per SM), one-way\n"
                  "block-to-block latency, and how many clusters fit at 32/64/128/192 KB of shared memory per\n"
                  "block. Then the cost model's rates (docs/planner.md): wgmma throughput per MMA type, HBM copy,\n"
                  "L2 and one-SM load bandwidth, memory latency, graph launch and cluster launch overhead.\n"
                  "Writes the hardware-description JSON (docs/hardware.md) to FILE or stdout; `solder plan\n"
                  "--hardware FILE` reads it. Needs an sm_90 GPU and NVRTC; takes a few seconds."};
  command.min_files = 0;
  command.max_files = 0;
  command.options.push_back({"-o", "FILE", "write the JSON here instead of stdout", [&output](const std::string& v) { output = v; }});
  std::vector<std::string> files;
  if (!parse_arguments(command, args, files)) return kExitOk;
  runtime::DeviceInfo device = runtime::query_device();
  if (!device.available) throw Error("solder probe needs a GPU: " + device.why_unavailable);
  if (!device.runs_sm90a())
    throw Error("solder probe needs an sm_90 (Hopper) GPU; found " + device.name + " (compute capability " +
                std::to_string(device.major) + "." + std::to_string(device.minor) + ")");
  runtime::Module module(runtime::compile_cuda(kProbeSource, "solder_probe.cu"));
  runtime::Function pull = module.get_function("probe_pull"), push = module.get_function("probe_push"),
                    latency = module.get_function("probe_latency"), residency = module.get_function("probe_residency");
  runtime::DeviceBuffer counters(64), cycles(64), sink(64);

  HardwareDescription hw;
  hw.name = device.name;
  hw.sm_count = device.sm_count;
  hw.sm_clock_mhz = 0;
  hw.smem_per_block_bytes = device.max_shared_per_block_optin;
  hw.max_cluster_size = 16;
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  hw.measured = date;
  hw.commit = "solder probe";
  const unsigned threads = 256;
  for (unsigned C : {1u, 2u, 4u, 8u, 16u}) {
    DsmEntry entry;
    entry.cluster_size = static_cast<int>(C);
    for (unsigned kb : {32u, 64u, 128u, 192u}) {
      runtime::fill_u32(counters.pointer(), 0, 16);
      runtime::LaunchConfig config{{static_cast<unsigned>(device.sm_count) * 8 / C * C, 1, 1}, {threads, 1, 1}, {C, 1, 1}, kb * 1024};
      runtime::launch_with(residency, config, counters.pointer(), static_cast<long long>(200000));
      runtime::synchronize_device();
      std::vector<uint32_t> peak = counters.download<uint32_t>(2);
      entry.max_active_clusters[static_cast<int>(kb * 1024)] = static_cast<int>(peak[1] / C);
    }
    const int clusters = entry.max_active_clusters[65536];
    if (clusters == 0) continue;
    const unsigned rounds = 64;
    runtime::LaunchConfig pull_config{{clusters * C, 1, 1}, {threads, 1, 1}, {C, 1, 1}, 65536};
    double ms = launch_ms([&] { runtime::launch_with(pull, pull_config, rounds, sink.pointer()); });
    entry.pull_tbps = clusters * C * 65536.0 * rounds / (ms * 1e-3) / 1e12;
    if (C > 1) {
      const unsigned chunks = 4 * rounds;
      runtime::LaunchConfig push_config{{clusters * C, 1, 1}, {threads, 1, 1}, {C, 1, 1}, 1024 + 65536};
      double push_ms = launch_ms([&] { runtime::launch_with(push, push_config, chunks); });
      entry.push_tbps = clusters * C * 16384.0 * chunks / (push_ms * 1e-3) / 1e12;
      runtime::LaunchConfig latency_config{{C, 1, 1}, {32, 1, 1}, {C, 1, 1}, 0};
      runtime::launch_with(latency, latency_config, 1000u, cycles.pointer());
      runtime::synchronize_device();
      entry.latency_cycles = static_cast<double>(cycles.download<long long>(1)[0]);
    }
    hw.dsm.push_back(entry);
  }
  hw.rates = measure_rates();
  hw.has_rates = true;
  write_output(output, to_json(hw));
  return kExitOk;
}

}  // namespace solder::cli
