// The CPU executor: runs a KernelProgram faithfully, block by block (kernel_ir.h gives the meaning).
//
// * Every block of the grid runs, in float32 with the GPU's rounding points: every real-valued
//   operation is rounded to float32 and every write is rounded to the target's dtype.
// * The blocks of one cluster run concurrently, one thread each, so collectives and cluster
//   barriers behave as on the GPU; the cluster's buffers are visible to the collectives of its peers
//   (DSM). A block that exits while its peers wait at a barrier, or blocks that reach different
//   collectives, are reported as a deadlock naming the kernel and statement — never a hang.
// * Kernels with queues run all their blocks concurrently (as a persistent GPU kernel must have them
//   co-resident); queues are bounded ring buffers; if every live block waits, that is a deadlock.
// * Independent blocks (no cluster, no queue) run in parallel on the machine's cores.
// * Global tensors other than inputs are poisoned (a NaN with a recognisable payload) before the
//   run; an output element still holding the poison was never written.
// * Global memory traffic is counted per kernel: every element a copy, map, reduce or collective
//   reads from or writes to a global tensor, in bytes of its dtype.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/host_tensor.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct KernelTraffic {
  std::string kernel;
  int64_t blocks = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  std::map<std::string, int64_t> read_by_tensor;     // bytes per global
  std::map<std::string, int64_t> written_by_tensor;
};

struct ExecutionResult {
  TensorSet outputs;                        // every output global
  std::map<std::string, int64_t> unwritten; // output elements still holding the poison
  std::vector<KernelTraffic> traffic;       // one entry per kernel, in order
};

// How far a run has got, readable from another thread while it runs (`solder run` prints it).
struct ExecutionProgress {
  std::atomic<int> kernel{0};           // index of the kernel running
  std::atomic<int64_t> blocks_done{0};  // blocks of that kernel finished so far
};

// Runs `program` on `inputs` (every input global must be present). Throws Error on a deadlock, an
// out-of-range buffer access or a malformed program (the program is verified first). `progress`,
// when given, is updated as blocks finish.
ExecutionResult execute_kernel_program(const KernelProgram& program, const TensorSet& inputs,
                                       ExecutionProgress* progress = nullptr);

// The poison value written into non-input globals before a run.
bool is_poison(double value);

}  // namespace solder
