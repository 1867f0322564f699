#include "backend/cuda/device_inputs.h"

#include <algorithm>

#include "solder/random_inputs.cuh"

namespace solder {
namespace {

constexpr const char* kSource = R"(#include <solder/random_inputs.cuh>
extern "C" __global__ void __launch_bounds__(256) solder_draw_input(solder::random_inputs::DrawSpec spec, unsigned long long count,
                                                                   unsigned char* out) {
  solder::random_inputs::draw_input_grid(spec, count, out);
}
)";

// The kernel, loaded on first use and kept for the process (never unloaded: no module teardown at exit).
const runtime::Function& draw_function() {
  static const runtime::Function* function = [] {
    runtime::Module module(runtime::compile_cuda(draw_input_source(), "solder_random_inputs.cu"));
    return new runtime::Function(module.get_function("solder_draw_input"));
  }();
  return *function;
}

}  // namespace

const char* draw_input_source() { return kSource; }

void draw_input_on_gpu(runtime::DevicePtr pointer, int64_t count, const InputDraw& draw, CUstream_st* stream) {
  if (count <= 0) return;
  const random_inputs::DrawSpec spec{draw.distribution, draw.dtype, draw.p0, draw.p1, draw.stream};
  const unsigned long long elements = static_cast<unsigned long long>(count);
  runtime::LaunchConfig config;
  config.block.x = 256;
  // a few waves of 256-thread blocks; each thread strides over the rest
  config.grid.x = static_cast<unsigned>(std::clamp<int64_t>((count + 255) / 256, 1, 132 * 16));
  config.stream = stream;
  runtime::launch_with(draw_function(), config, spec, elements, pointer);
}

}  // namespace solder
