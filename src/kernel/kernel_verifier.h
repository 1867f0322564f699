// The Kernel IR verifier: runs after every pass that produces Kernel IR (in tests and debug
// builds, and always before execution or code generation).
//
// It checks that scopes are used legally (collectives and cluster buffers only in clustered kernels,
// gemm accumulators in registers, queues only through queue_push/queue_pop), that tile shapes agree
// (gemm operands, collective payloads, access ranks), that every variable is in scope, that every
// buffer and intermediate global is written before it is read, that every output is written, and
// the hard limits a GPU block cannot exceed (227 KB of shared memory, clusters of at most 16).
// Failures are Errors naming the kernel, the statement and the rule.
#pragma once

#include "kernel/kernel_ir.h"

namespace solder {

void verify_kernel_program(const KernelProgram& program);

constexpr int64_t kMaxSharedBytesPerBlock = 227 * 1024;
constexpr int kMaxClusterSize = 16;
constexpr int kMaxPortableClusterSize = 8;

}  // namespace solder
