#include "backend/cuda/tf32_split_writer.h"

#include <cstdlib>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "fusion/tf32_split.h"

namespace solder {

bool tf32_split_writer_enabled() {
  const char* v = std::getenv("SOLDER_TF32_SPLIT");
  return !(v && std::string(v) == "generic");
}

std::optional<Tf32SplitWriterKernel> write_tf32_split_kernel(const KernelProgram& program, const Kernel& kernel) {
  if (!tf32_split_writer_enabled()) return std::nullopt;
  std::optional<Tf32SplitKernel> s = tf32_split_kernel_of(program, kernel);
  if (!s) return std::nullopt;
  const std::string name = cuda_identifier(kernel.name);
  std::ostringstream out;
  out << "#include <solder/gemm/tf32_split.cuh>\n";
  out << "// kernel " << kernel.name << ": the 3xTF32 split of " << s->src << " into " << s->dst << " = "
      << (s->lo_part == 0 ? "[lo | hi | hi]" : s->lo_part == 1 ? "[hi | lo | hi]" : "[hi | hi | lo]")
      << " along K (gemm/tf32_split.cuh, one 32 x 32 tile per block)\n";
  out << "// grid " << s->batch << " x " << s->row_tiles << " row tiles x " << s->k_tiles << " k tiles (" << kernel.blocks() << " blocks)\n";
  out << "extern \"C\" __global__ void __launch_bounds__(solder::gemm::kTf32SplitThreads) " << name << "(";
  out << cuda_global_parameters(program.globals) << ") {\n";
  out << "  long long block = blockIdx.x;\n";
  out << "  const int k_tile = static_cast<int>(block % " << s->k_tiles << "LL); block /= " << s->k_tiles << "LL;\n";
  out << "  const int row_tile = static_cast<int>(block % " << s->row_tiles << "LL); block /= " << s->row_tiles << "LL;  // block: the batch\n";
  out << "  solder::gemm::Tf32SplitArgs args;\n";
  out << "  args.src = " << cuda_identifier(s->src) << " + block * " << s->src_batch_stride << "LL;\n";
  out << "  args.row_stride = " << s->row_stride << "LL;\n";
  out << "  args.k_stride = " << s->k_stride << "LL;\n";
  out << "  args.rows = " << s->rows << ";\n";
  out << "  args.k = " << s->k << ";\n";
  out << "  args.dst = " << cuda_identifier(s->dst) << " + block * " << s->rows * s->ld << "LL;\n";
  out << "  args.dst_ld = " << s->ld << "LL;\n";
  out << "  solder::gemm::tf32_split_tile<" << (1 << s->lo_part) << ">(args, k_tile, row_tile);\n";
  out << "}\n";
  Tf32SplitWriterKernel k;
  k.source = out.str();
  k.info.name = name;
  k.info.blocks = kernel.blocks();
  k.info.threads = 256;
  k.info.shared_bytes = 0;
  return k;
}

}  // namespace solder
