// Solder's tile primitives for tensor-core kernels: mma fragments, ldmatrix, cp.async, swizzled
// shared-memory layouts, row reductions over fragments.
#pragma once

#include <solder/tile/cp_async.cuh>
#include <solder/tile/fast_math.cuh>
#include <solder/tile/fragment.cuh>
#include <solder/tile/ldmatrix.cuh>
#include <solder/tile/mma.cuh>
#include <solder/tile/swizzle.cuh>
#include <solder/tile/block_gemm.cuh>
#include <solder/tile/wgmma.cuh>
