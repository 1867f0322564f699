// TMA tensor maps for the GEMM skeleton: the driver call (the argument plan is in tma_plan.cpp).
#include "runtime/tma.h"

#include "ir/diagnostics.h"
#include "runtime/cuda_api.h"

namespace solder::runtime {

TensorMapBytes encode_gemm_operand(const GemmOperand& operand, const char* what) {
  TmaEncodeArgs args;
  std::string problem = plan_gemm_operand(operand, what, &args);
  if (!problem.empty()) throw Error("cannot build the TMA tensor map: " + problem);
  const cuda::DriverApi& api = cuda::ensure_context();
  TensorMapBytes map;
  cuda::CUresult result = api.tensor_map_encode_tiled(
      reinterpret_cast<CUtensorMap_st*>(&map), args.data_type, args.rank, reinterpret_cast<void*>(operand.base), args.dims, args.strides, args.box,
      args.element_strides, args.interleave, args.swizzle, args.l2_promotion, args.oob_fill);
  std::string context = std::string(what ? what : "operand") + " (dims " + std::to_string(args.dims[0]) + "x" +
                        std::to_string(args.dims[1]) + "x" + std::to_string(args.dims[2]) + ", strides " +
                        std::to_string(args.strides[0]) + "/" + std::to_string(args.strides[1]) + " bytes, box " +
                        std::to_string(args.box[0]) + "x" + std::to_string(args.box[1]) + ")";
  cuda::check(api, result, "cuTensorMapEncodeTiled", context);
  return map;
}

}  // namespace solder::runtime
