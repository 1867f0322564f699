#include "support/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace solder {

int worker_count() {
  unsigned hardware = std::thread::hardware_concurrency();
  const int fallback = hardware == 0 ? 1 : static_cast<int>(hardware);
  if (const char* env = std::getenv("SOLDER_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n <= 4096) return static_cast<int>(n);
    // Not an error (the loops still run), but never silent: said once per process.
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr, "solder: SOLDER_THREADS='%s' is not a whole number from 1 to 4096; using %d threads\n", env, fallback);
    });
  }
  return fallback;
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body, int64_t min_chunk) {
  if (n <= 0) return;
  int workers = static_cast<int>(std::min<int64_t>(worker_count(), std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk))));
  if (workers <= 1) {
    body(0, n);
    return;
  }
  // Chunks several times smaller than n / workers balance uneven work.
  int64_t chunk = std::max<int64_t>(min_chunk, n / (workers * 8));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&] {
    while (true) {
      int64_t begin = next.fetch_add(chunk);
      if (begin >= n) return;
      {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error) return;
      }
      try {
        body(begin, std::min(n, begin + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < workers; ++i) threads.emplace_back(run);
  run();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace solder
