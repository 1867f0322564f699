// Lowering a planned group (group_plan.h) to Kernel IR.
//
// One kernel per group (two for a multi-segment group: the segments, then the merge):
//
//   grid over tiles of the grid dims [× segments]
//     stage the inputs every tile needs once          (copy global → shared)
//     pre members                                     (reduce/map into on-chip buffers)
//     init the cascade states
//     for each tile of the stream [within the segment]:
//       stage the streamed inputs
//       per-tile members                              (the demoted producers: a tile of s)
//       remember the running values later members depend on      (m_old ← m)
//       update every cascade member by its decomposition:
//         independent     acc ⊕= F
//         multiplicative  acc ← acc × H(D_new)/H(D_old) (reset when D_old is ±inf), acc += F without
//                         its deferred factors
//         additive        acc ⊕= G
//         polynomial      move the centre to the running D, shift the Taylor states, add F_k
//     finalize (apply deferred factors; shift polynomial states to the final D)
//     post members; store every exported result
//
// Every statement comment names the definition it computes. Inputs that every point of a tile reads
// with plain index variables are staged once per block (or per stream tile); others are read from
// global memory where used.
#pragma once

#include <vector>

#include "fusion/group_plan.h"
#include "kernel/kernel_ir.h"

namespace solder {

struct LoweredGroup {
  std::vector<Kernel> kernels;
  std::vector<GlobalTensor> scratch;  // multi-segment partial states
};

LoweredGroup lower_group(const BoundProgram& program, const GroupPlan& plan, const std::string& name);

}  // namespace solder
