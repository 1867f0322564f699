// The CUDA code generator's writer for a contraction whose rows are reduced in the GEMM skeleton's
// epilogue (fusion/row_epilogue.h decides it; device/solder/gemm/row_epilogue.cuh runs it): a kernel
// whose body is a contract into a row tile D[t, e] (all N ≤ 256 columns) followed by row statements
// (fill, reduce sum/max/min/topk along the row, per-row maps, stores of per-row values and top-k
// lists). The skeleton runs the product over all rows with a tile that holds whole rows (BN ≥ N); this
// writer writes the epilogue functor's row(): each statement as code over the lane's part of the row
// (RowFragment: BN/4 values), combined over the quad (quad_max / quad_sum / quad_topk), and the stores
// of the row's results by the quad's first lane. D and its copies are never stored.
//
// Arithmetic is float32 as the Kernel IR's (expf, IEEE division); sums are combined in a different
// order than the executor's sequential one (lane partials, then the quad), as any GPU reduction.
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/gemm_skeleton_writer.h"
#include "kernel/kernel_ir.h"

namespace solder {

// The skeleton kernel for `kernel`, or nothing (with `why`) when it is not a contract with its rows
// reduced (match_row_epilogue_kernel) or the skeleton does not take the product.
std::optional<GemmSkeletonKernel> write_gemm_row_epilogue_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why);

}  // namespace solder
