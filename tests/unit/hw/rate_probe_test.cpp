// The rate probe's kernels (src/hw/rate_probe.h) compile for sm_90a with NVRTC (they run only on a GPU,
// through `solder probe`); without NVRTC the test skips, saying why. Without a GPU, measuring says why.
#include "hw/rate_probe.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "ir/diagnostics.h"
#include "runtime/runtime.h"

namespace solder {
namespace {

TEST(RateProbe, KernelsCompileForSm90a) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << why;
  runtime::CompileFlags flags;
  flags.use_cache = false;
  runtime::CompiledModule module = runtime::compile_cuda(rate_probe_source(), "solder_rate_probe.cu", flags);
  EXPECT_GT(module.cubins.front().size(), 1000u);
  const std::string source = rate_probe_source();
  for (const char* kernel : {"probe_wgmma_bf16", "probe_wgmma_f16", "probe_wgmma_e4m3", "probe_wgmma_e5m2", "probe_wgmma_tf32",
                             "probe_copy", "probe_l2_read", "probe_chase", "probe_empty", "probe_cluster_barriers"})
    EXPECT_NE(source.find(kernel), std::string::npos) << kernel;
  EXPECT_NE(source.find("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"), std::string::npos);
}

TEST(RateProbe, WithoutAGpuSaysWhy) {
  setenv("SOLDER_NO_GPU", "1", 1);
  try {
    measure_rates();
    ADD_FAILURE() << "measure_rates() ran without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a GPU"), std::string::npos) << e.what();
  }
  unsetenv("SOLDER_NO_GPU");
}

}  // namespace
}  // namespace solder
