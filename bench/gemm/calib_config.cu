// One configuration of the calibration sweep (calib_sweep.h): compiled with -DCALIB_BM=.. -DCALIB_BN=..
// -DCALIB_STAGES=.. by sweep_calibration.sh, one object per configuration, linked with calib_sweep.cu.
#include "calib_sweep.h"

#if !defined(CALIB_BM) || !defined(CALIB_BN) || !defined(CALIB_STAGES)
#error "compile with -DCALIB_BM=64|128 -DCALIB_BN=64|128|192|256 -DCALIB_STAGES=2..8"
#endif

namespace {

using C = solder::gemm::Config<solder::gemm::Dtype::f16, solder::gemm::Dtype::f16, CALIB_BM, CALIB_BN, CALIB_STAGES,
                               /*AKMajor=*/true, /*BKMajor=*/false>;

double run(const calib::Operand& a, const calib::Operand& b, __nv_bfloat16* out, int replays, int* blocks) {
  const gemm_test::TensorMap ma = gemm_test::make_map(a, C::ABoxRows, C::BK, "A");
  const gemm_test::TensorMap mb = gemm_test::make_map(b, C::BBoxRows, C::BK, "B");
  solder::gemm::GemmShape shape;
  shape.m = a.rows;
  shape.n = b.rows;
  shape.k = a.k;
  const gemm_test::StoreBf16 epi{out, shape.n, (long long)shape.m * shape.n, nullptr, nullptr};
  const double flops = 2.0 * shape.m * shape.n * double(shape.k);
  const int per_graph = std::max(2, std::min(50, int(1e12 / flops)));
  const int persistent = gemm_test::resident_blocks<C, gemm_test::StoreBf16>();
  *blocks = int(solder::gemm::launch_config(C{}, shape, persistent).grid[0]);
  return calib::time_ms<C>(ma, mb, shape, epi, per_graph, replays, persistent);
}

const bool registered = (calib::registry().push_back({CALIB_BM, CALIB_BN, CALIB_STAGES, &run}), true);

}  // namespace
