// Program inputs drawn on the GPU (device/solder/random_inputs.cuh): `solder bench` fills its input
// buffers from each input's draw (backend/cpu/inputs.h, input_draw) with a counter-based kernel, so an
// input of any size costs no host memory, no host time and no upload; the values are make_inputs'
// (up to the device's libm, see the header).
#pragma once

#include <cstdint>

#include "backend/cpu/inputs.h"
#include "runtime/runtime.h"

namespace solder {

// Draws elements 0 .. count − 1 of the input `draw` into device memory at `pointer`
// (dtype_bytes per element), queued on `stream` (nullptr: the default stream). The drawing kernel is
// compiled once per process (NVRTC, through the compile cache).
void draw_input_on_gpu(runtime::DevicePtr pointer, int64_t count, const InputDraw& draw, CUstream_st* stream = nullptr);

// The drawing kernel's CUDA source (extern "C" solder_draw_input), as draw_input_on_gpu compiles it.
const char* draw_input_source();

}  // namespace solder
