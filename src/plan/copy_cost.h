// The cost model's price of a copy kernel: a memory-bound pass that reads `bytes_read` and writes
// `bytes_written` once, at the device-to-device copy rate (Rates::hbm_tbps counts bytes read plus
// written), plus one launch. The conversion copies before the GEMM skeleton
// (contract/operand_copy_fit.h) are priced by it.
#pragma once

#include "hw/hardware.h"

namespace solder {

double copy_cost_us(double bytes_read, double bytes_written, const Rates& rates);

}  // namespace solder
