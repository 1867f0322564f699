#include "plan/copy_cost.h"

namespace solder {

double copy_cost_us(double bytes_read, double bytes_written, const Rates& rates) {
  const double tbps = rates.hbm_tbps > 0 ? rates.hbm_tbps : 3.0;  // no rates: about the H100's copy rate
  return rates.launch_us + (bytes_read + bytes_written) / (tbps * 1e6);
}

}  // namespace solder
