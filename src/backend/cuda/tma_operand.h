// The TMA operand (runtime/tma.h) of a skeleton kernel's operand plan (cuda_codegen.h) at a base address:
// what the CLI's runtime (cuda_backend.cpp) and the public API (api/launch_plan.cpp) encode per call.
#pragma once

#include "backend/cuda/cuda_codegen.h"
#include "runtime/tma.h"

namespace solder {

inline runtime::GemmOperand tma_operand(const GemmSkeletonLaunch::Operand& o, unsigned long long base) {
  runtime::GemmOperand op;
  op.dtype = static_cast<runtime::GemmDtype>(o.dtype);
  op.k_major = o.k_major;
  op.rows = o.rows;
  op.k = o.k;
  op.ld = o.ld;
  op.batch = o.batch;
  op.batch_stride = o.batch_stride;
  op.tile_rows = o.tile_rows;
  op.tile_k = o.tile_k;
  op.box_k = o.box_k;
  op.base = base + static_cast<unsigned long long>(o.offset) * (o.dtype == 0 || o.dtype == 1 ? 2u : 1u);  // Dtype bf16, f16: 2 bytes
  op.swizzle = o.swizzle;
  return op;
}

}  // namespace solder
