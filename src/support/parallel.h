// A parallel loop over the machine's cores (SOLDER_THREADS overrides the count).
#pragma once

#include <cstdint>
#include <functional>

namespace solder {

// SOLDER_THREADS when it is a whole number from 1 to 4096, else the machine's hardware threads (a
// malformed value is said once on standard error).
int worker_count();

// Calls body(begin, end) on disjoint chunks covering [0, n), on up to worker_count() threads.
// An exception thrown by any chunk is rethrown in the caller after all chunks stop.
void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body,
                  int64_t min_chunk = 1);

}  // namespace solder
