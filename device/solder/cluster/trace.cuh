// Per-phase timestamps of the collectives' rounds, for diagnosis (bench/cluster/trace_round.cu).
//
// Off by default and then free: every stamp compiles to nothing. Built with -DSOLDER_CLUSTER_TRACE=1, thread 0
// of each of the first max_cluster_size blocks of the grid appends one event per phase boundary it passes
// (clock64 and %globaltimer) to trace::events[block], in program order, up to trace::capacity events per block
// (later ones are dropped). The communicator stamps its own round machinery (mailbox.cuh); the collectives add
// the points between (collectives.cuh). An event's phase says what had just finished when it was taken:
//   call_begin     the collective's entry block barrier passed
//   ready_sent     (direct) this block told its peers that its destination may be written
//   slots_free     every destination's slot (or, direct, its destination tile) is free: after the one waiting
//                  thread per destination and the block barrier that hands the waits to the block
//   pushed         thread 0 has issued its own pushes of the round (other threads may still be issuing)
//   data_landed    thread 0's wait on the full barrier returned (the round's bytes have all landed)
//   data_visible   the block barrier after that wait passed
//   consumed       the block barrier after the last read of the round's slots passed (combine / copy-out done)
//   released       thread 0 has handed its slot back (remote arrive)
//   call_end       the collective returns
#pragma once

#include <cuda/std/cstdint>

#include "limits.cuh"

#ifndef SOLDER_CLUSTER_TRACE
#define SOLDER_CLUSTER_TRACE 0
#endif

namespace solder::cluster::trace {

enum class phase : unsigned {
  none = 0,
  call_begin,
  ready_sent,
  slots_free,
  pushed,
  data_landed,
  data_visible,
  consumed,
  released,
  call_end,
};

SOLDER_CLUSTER_HOST_DEVICE constexpr const char* phase_name(phase p) {
  constexpr const char* names[] = {"none",        "call_begin",   "ready_sent", "slots_free", "pushed",
                                   "data_landed", "data_visible", "consumed",   "released",   "call_end"};
  return names[static_cast<unsigned>(p)];
}

struct event {
  long long clock;        // clock64 of the block's SM (SM clocks are not synchronised across SMs)
  long long global_ns;    // %globaltimer (one clock for the whole GPU)
  unsigned phase;         // trace::phase
  unsigned round;         // the communicator's next round to receive when the stamp was taken
};

inline constexpr unsigned capacity = 4096;  // events per block

#if SOLDER_CLUSTER_TRACE
// Zeroed by the host before a traced launch (cudaMemset of the symbol); phase 0 marks the end of a block's list.
__device__ event events[max_cluster_size][capacity];

// Thread 0 of a block: appends event number `index` of this block.
__device__ inline void record(unsigned index, phase p, unsigned round) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (block >= max_cluster_size || index >= capacity) return;
  long long global_ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(global_ns));
  events[block][index] = event{clock64(), global_ns, static_cast<unsigned>(p), round};
}
#endif

}  // namespace solder::cluster::trace
