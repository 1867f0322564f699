#include "hw/rate_probe.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "ir/diagnostics.h"
#include "runtime/runtime.h"

namespace solder {

namespace {

struct WgmmaVariant {
  const char* type;      // key in tensor_tflops
  const char* ptx_type;  // wgmma .atype/.btype
  int k;                 // K of one m64n256 instruction
  bool transpose_operands;  // 16-bit types take the two transpose immediates
  unsigned fill;         // 32-bit pattern of 1.0 in the type
};

const WgmmaVariant kVariants[] = {
    {"bf16", "bf16", 16, true, 0x3f803f80u},
    {"f16", "f16", 16, true, 0x3c003c00u},
    {"e4m3", "e4m3", 32, false, 0x38383838u},
    {"e5m2", "e5m2", 32, false, 0x3c3c3c3cu},
    {"tf32", "tf32", 8, false, 0x3f800000u},
};

constexpr int kWgmmaPerIteration = 4;

// One kernel per MMA type: each warpgroup issues kWgmmaPerIteration m64n256 wgmmas per iteration on the
// same shared-memory operands (contents and layout do not matter for the rate), then waits.
std::string wgmma_kernel(const WgmmaVariant& v) {
  std::string operands, outputs;
  for (int i = 0; i < 128; ++i) {
    operands += (i ? ", %" : "%") + std::to_string(i);
    outputs += std::string(i ? ", " : "") + "\"+f\"(acc[" + std::to_string(i) + "])";
  }
  std::string tail = v.transpose_operands ? "p, 1, 1, 0, 0;" : "p, 1, 1;";
  std::string name = std::string("probe_wgmma_") + v.type;
  return "extern \"C\" __global__ void __launch_bounds__(256, 1) " + name + "(unsigned iterations, float* sink) {\n"
         "  __shared__ __align__(1024) uint4 tile[2048];\n"
         "  for (unsigned i = threadIdx.x; i < 2048; i += blockDim.x) tile[i] = make_uint4(" + std::to_string(v.fill) + "u, " +
         std::to_string(v.fill) + "u, " + std::to_string(v.fill) + "u, " + std::to_string(v.fill) + "u);\n"
         "  asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
         "  __syncthreads();\n"
         "  const unsigned long long base = static_cast<unsigned long long>(__cvta_generic_to_shared(tile));\n"
         "  // Matrix descriptors without swizzle: start address, leading and stride byte offsets (>> 4).\n"
         "  const unsigned long long desc_a = ((base & 0x3FFFF) >> 4) | (8ull << 16) | (16ull << 32);\n"
         "  const unsigned long long desc_b = (((base + 4096) & 0x3FFFF) >> 4) | (8ull << 16) | (16ull << 32);\n"
         "  float acc[128];\n"
         "#pragma unroll\n"
         "  for (int i = 0; i < 128; ++i) acc[i] = 0.f;\n"
         "  for (unsigned it = 0; it < iterations; ++it) {\n"
         "    asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n"
         "#pragma unroll\n"
         "    for (int w = 0; w < " + std::to_string(kWgmmaPerIteration) + "; ++w)\n"
         "      asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %130, 0;\\n"
         "wgmma.mma_async.sync.aligned.m64n256k" + std::to_string(v.k) + ".f32." + v.ptx_type + "." + v.ptx_type + " {" + operands +
         "}, %128, %129, " + tail + "\\n}\\n\"\n"
         "                   : " + outputs + "\n"
         "                   : \"l\"(desc_a), \"l\"(desc_b), \"r\"(1));\n"
         "    asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n"
         "    asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");\n"
         "  }\n"
         "  float x = 0.f;\n"
         "#pragma unroll\n"
         "  for (int i = 0; i < 128; ++i) x += acc[i];\n"
         "  if (x == -1.2345f) sink[threadIdx.x] = x;\n"
         "}\n";
}

constexpr const char* kMemoryKernels = R"cuda(
#include <solder/cluster/cluster.cuh>

extern "C" __global__ void probe_copy(const uint4* src, uint4* dst, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * 1ull * blockDim.x + threadIdx.x; i < n; i += 1ull * gridDim.x * blockDim.x)
    dst[i] = src[i];
}

extern "C" __global__ void probe_l2_read(const uint4* src, unsigned long long n, unsigned rounds, unsigned* sink) {
  unsigned x = 0;
  for (unsigned r = 0; r < rounds; ++r)
    for (unsigned long long i = blockIdx.x * 1ull * blockDim.x + threadIdx.x; i < n; i += 1ull * gridDim.x * blockDim.x) {
      uint4 v = __ldcg(src + (i + r * 64ull) % n);
      x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  if (x == 0x12345678u) *sink = x;
}

extern "C" __global__ void probe_chase_init(unsigned long long* next, unsigned long long n, unsigned long long stride) {
  for (unsigned long long i = blockIdx.x * 1ull * blockDim.x + threadIdx.x; i < n; i += 1ull * gridDim.x * blockDim.x)
    next[i] = (i + stride) % n;
}

extern "C" __global__ void probe_chase(const unsigned long long* next, unsigned steps, unsigned long long* sink) {
  unsigned long long p = 0;
  for (unsigned s = 0; s < steps; ++s) p = __ldcg(next + p);
  *sink = p;
}

extern "C" __global__ void probe_empty() {}

extern "C" __global__ void probe_cluster_barriers() {
  solder::cluster::ptx::cluster_sync();
  solder::cluster::ptx::cluster_sync();
}
)cuda";

double timed_ms(const std::function<void()>& run_once) {
  run_once();  // warm-up
  runtime::synchronize_device();
  runtime::Event begin, end;
  begin.record(nullptr);
  run_once();
  end.record(nullptr);
  return runtime::elapsed_ms(begin, end);
}

}  // namespace

std::string rate_probe_source() {
  std::string source = kMemoryKernels;
  for (const WgmmaVariant& v : kVariants) source += "\n" + wgmma_kernel(v);
  return source;
}

Rates measure_rates() {
  runtime::DeviceInfo device = runtime::query_device();
  if (!device.available) throw Error("measuring the cost model's rates needs a GPU: " + device.why_unavailable);
  if (!device.runs_sm90a()) throw Error("measuring the cost model's rates needs an sm_90 (Hopper) GPU; found " + device.name);
  runtime::Module module(runtime::compile_cuda(rate_probe_source(), "solder_rate_probe.cu"));
  const unsigned sms = static_cast<unsigned>(device.sm_count);
  Rates rates;
  rates.source = "solder probe (src/hw/rate_probe.h): wgmma loop x " + std::to_string(kGemmFractionOfPeak) +
                 ", 512 MiB copy, 8 MiB L2 reads, pointer chase, graph launches";
  runtime::DeviceBuffer sink(1 << 16);

  // Tensor cores.
  for (const WgmmaVariant& v : kVariants) {
    runtime::Function f = module.get_function(std::string("probe_wgmma_") + v.type);
    const unsigned iterations = 2048;
    runtime::LaunchConfig config{{sms, 1, 1}, {256, 1, 1}, {1, 1, 1}, 0};
    double ms = timed_ms([&] { runtime::launch_with(f, config, iterations, sink.pointer()); });
    const double flops = 2.0 * 64 * 256 * v.k * kWgmmaPerIteration * iterations * 2 /* warpgroups */ * sms;
    const double peak = flops / (ms * 1e-3) / 1e12;
    rates.tensor_peak_tflops[v.type] = peak;
    rates.tensor_tflops[v.type] = peak * kGemmFractionOfPeak;
  }

  // HBM: a copy, bytes read plus written.
  {
    const unsigned long long bytes = 512ull << 20, n = bytes / 16;
    runtime::DeviceBuffer src(bytes), dst(bytes);
    runtime::fill_u32(src.pointer(), 1, bytes / 4);
    runtime::Function copy = module.get_function("probe_copy");
    runtime::LaunchConfig config{{sms * 8, 1, 1}, {256, 1, 1}, {1, 1, 1}, 0};
    double ms = timed_ms([&] { runtime::launch_with(copy, config, src.pointer(), dst.pointer(), n); });
    rates.hbm_tbps = 2.0 * bytes / (ms * 1e-3) / 1e12;
  }

  // L2: every SM, then one SM.
  {
    const unsigned long long bytes = 8ull << 20, n = bytes / 16;
    runtime::DeviceBuffer src(bytes);
    runtime::fill_u32(src.pointer(), 3, bytes / 4);
    runtime::Function read = module.get_function("probe_l2_read");
    const unsigned rounds = 64;
    runtime::LaunchConfig all{{sms * 4, 1, 1}, {256, 1, 1}, {1, 1, 1}, 0};
    double ms = timed_ms([&] { runtime::launch_with(read, all, src.pointer(), n, rounds, sink.pointer()); });
    rates.l2_tbps = static_cast<double>(bytes) * rounds / (ms * 1e-3) / 1e12;
    runtime::LaunchConfig one{{1, 1, 1}, {1024, 1, 1}, {1, 1, 1}, 0};
    const unsigned one_rounds = 4;
    double one_ms = timed_ms([&] { runtime::launch_with(read, one, src.pointer(), n, one_rounds, sink.pointer()); });
    rates.sm_load_gbps = static_cast<double>(bytes) * one_rounds / (one_ms * 1e-3) / 1e9;
  }

  // Latency: a pointer chase through 1 GiB, 1 MiB apart.
  {
    const unsigned long long bytes = 1ull << 30, n = bytes / 8, stride = (1ull << 20) / 8 + 1;
    runtime::DeviceBuffer next(bytes);
    runtime::launch_with(module.get_function("probe_chase_init"), runtime::LaunchConfig{{sms * 8, 1, 1}, {256, 1, 1}, {1, 1, 1}, 0},
                         next.pointer(), n, stride);
    const unsigned steps = 20000;
    runtime::Function chase = module.get_function("probe_chase");
    double ms = timed_ms([&] {
      runtime::launch_with(chase, runtime::LaunchConfig{{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 0}, next.pointer(), steps, sink.pointer());
    });
    rates.memory_latency_ns = ms * 1e6 / steps;
  }

  // Launch overheads, over CUDA-graph replays of 20 launches.
  {
    runtime::Stream stream;
    auto per_launch_us = [&](const runtime::Function& f, runtime::LaunchConfig config) {
      config.stream = stream.handle();
      runtime::Graph graph = runtime::capture_graph(stream, [&] {
        for (int i = 0; i < 20; ++i) runtime::launch(f, config, nullptr);
      });
      return runtime::time_replays(graph, stream, 3, 30).median_ms * 1e3 / 20;
    };
    const runtime::LaunchConfig grid{{128, 1, 1}, {128, 1, 1}, {1, 1, 1}, 0};
    rates.launch_us = per_launch_us(module.get_function("probe_empty"), grid);
    runtime::LaunchConfig clusters = grid;
    clusters.cluster = {4, 1, 1};
    rates.cluster_launch_us = std::max(0.0, per_launch_us(module.get_function("probe_cluster_barriers"), clusters) - rates.launch_us);
  }

  rates.l2_bytes = device.l2_bytes;
  rates.smem_per_sm_bytes = device.max_shared_per_block_optin + 1024;
  rates.registers_per_sm = 65536;
  return rates;
}

}  // namespace solder
