#include "support/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace solder {
namespace {

// SOLDER_THREADS sets the worker count; a malformed value falls back to the hardware threads and says
// so on standard error (once per process).
TEST(ParallelFor, ThreadCountFromTheEnvironment) {
  const unsigned hardware = std::thread::hardware_concurrency();
  const int fallback = hardware == 0 ? 1 : static_cast<int>(hardware);
  setenv("SOLDER_THREADS", "3", 1);
  EXPECT_EQ(worker_count(), 3);
  setenv("SOLDER_THREADS", "4x", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(worker_count(), fallback);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("SOLDER_THREADS='4x'"), std::string::npos) << said;
  setenv("SOLDER_THREADS", "0", 1);
  EXPECT_EQ(worker_count(), fallback);
  unsetenv("SOLDER_THREADS");
  EXPECT_EQ(worker_count(), fallback);
}

TEST(ParallelFor, CoversTheRangeOnce) {
  std::vector<std::atomic<int>> seen(1000);
  parallel_for(1000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)]++;
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

}  // namespace
}  // namespace solder
