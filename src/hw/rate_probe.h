// The measurements behind the cost model's rates (hardware.h, Rates), as `solder probe` takes them on a GPU:
//
//   tensor_tflops      a loop of back-to-back wgmma m64n256 instructions from shared memory (two warpgroups
//                      per SM, one CTA per SM) per MMA type: the tensor cores' ceiling at the clocks they hold
//                      under load, written to tensor_peak_tflops; tensor_tflops is that × kGemmFractionOfPeak
//                      (a full GEMM also loads, waits and stores: cuBLAS reaches 785 of the 989 TFLOP/s spec
//                      on our H100), until the skeleton sweep calibrates it
//   hbm_tbps           a grid-stride copy of 512 MiB (16-byte loads and stores), bytes read plus written
//   l2_tbps            every SM reading an 8 MiB buffer (L2-resident) with ld.global.cg, 16 bytes a thread
//   sm_load_gbps       the same loads from one CTA of 1024 threads on one SM
//   memory_latency_ns  one thread chasing pointers through 1 GiB, 1 MiB apart (unloaded latency)
//   launch_us          an empty kernel, 20 launches per CUDA graph replay
//   cluster_launch_us  a kernel with two cluster barriers on 32 clusters of 4, less the empty kernel
//   l2_bytes, smem_per_sm_bytes, registers_per_sm  from the device's attributes
//
// Without a GPU only the source is useful (tests compile it with NVRTC).
#pragma once

#include <string>

#include "hw/hardware.h"

namespace solder {

constexpr double kGemmFractionOfPeak = 0.79;

// The probe kernels (CUDA C++ for NVRTC, sm_90a).
std::string rate_probe_source();

// Measures the rates on GPU 0 (an sm_90 GPU; throws solder::Error otherwise). Takes a few seconds.
Rates measure_rates();

}  // namespace solder
