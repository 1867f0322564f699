#include "backend/cuda/tf32_split_writer.h"

#include <cstdlib>
#include <map>
#include <sstream>
#include <utility>

#include "backend/cuda/cuda_expr.h"
#include "fusion/tf32_split.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {

bool tf32_split_writer_enabled() {
  const char* v = std::getenv("SOLDER_TF32_SPLIT");
  return !(v && std::string(v) == "generic");
}

namespace {

const char* parts_text(int lo_part) { return lo_part == 0 ? "[lo | hi | hi]" : lo_part == 1 ? "[hi | lo | hi]" : "[hi | hi | lo]"; }

// The written kernel: its source and its launch (one block of kTf32SplitThreads a tile, no dynamic shared memory).
Tf32SplitWriterKernel finished(const std::string& name, const Kernel& kernel, std::string source) {
  Tf32SplitWriterKernel k;
  k.source = std::move(source);
  k.info.name = name;
  k.info.blocks = kernel.blocks();
  k.info.threads = 256;  // solder::gemm::kTf32SplitThreads (device/solder/gemm/tf32_split.cuh)
  k.info.shared_bytes = 0;
  return k;
}

// A computed operand's split: the block's tile filled with the operand's expression (the Kernel IR's first
// map, printed as the generic writer prints it), then tf32_split.cuh's parts of it.
std::optional<Tf32SplitWriterKernel> write_computed(const KernelProgram& program, const Kernel& kernel, const Tf32SplitKernel& s) {
  std::map<std::string, CudaArray> arrays;
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, static_cast<int>(i)};
  }
  // A data-dependent index needs the checked-index prologue: left to the generic writer.
  bool indirect = false;
  for_each_load(s.value, [&](const LoadNode& load) {
    for (auto& i : load.index) indirect = indirect || !tensors_used(i).empty();
  });
  if (indirect) return std::nullopt;
  CudaExprPrinter printer;
  printer.array = [&](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  printer.dims = program.dims;
  const std::string name = cuda_identifier(kernel.name);
  const std::string tile = std::to_string(kTf32SplitTile) + "LL";
  std::ostringstream out;
  out << "#include <solder/runtime.cuh>\n#include <solder/gemm/tf32_split.cuh>\n";
  out << "// kernel " << kernel.name << ": the 3xTF32 split of the computed operand " << print_expr(s.value) << " into " << s.dst << " = "
      << parts_text(s.lo_part) << " along K (its 32 x 32 tile evaluated, then gemm/tf32_split.cuh's parts)\n";
  out << "// grid " << s.batch << " x " << s.row_tiles << " row tiles x " << s.k_tiles << " k tiles (" << kernel.blocks() << " blocks)\n";
  out << "extern \"C\" __global__ void __launch_bounds__(solder::gemm::kTf32SplitThreads) " << name << "(";
  out << cuda_global_parameters(program.globals) << ") {\n";
  out << "  __shared__ solder::gemm::Tf32SplitTileValues tile;\n";
  out << "  long long block = blockIdx.x;\n";
  out << "  const long long " << cuda_identifier(s.k_var) << " = block % " << s.k_tiles << "LL; block /= " << s.k_tiles << "LL;\n";
  out << "  const long long " << cuda_identifier(s.row_var) << " = block % " << s.row_tiles << "LL; block /= " << s.row_tiles << "LL;\n";
  if (!s.batch_var.empty()) out << "  const long long " << cuda_identifier(s.batch_var) << " = block;\n";
  out << "  const long long lane = threadIdx.x % " << tile << ", group = threadIdx.x / " << tile << ";\n";
  out << "  // the operand's tile, consecutive threads along " << (s.along_rows ? "its rows" : "k") << "\n";
  out << "#pragma unroll\n";
  out << "  for (long long step = 0; step < " << tile << "; step += solder::gemm::kTf32SplitThreads / " << tile << ") {\n";
  out << "    const long long " << (s.along_rows ? "i = lane, j = group + step;" : "i = group + step, j = lane;") << "\n";
  const std::string value = "tile[i][j] = " + round_function(DType::f32) + "(" + printer.print_float(s.value) + ");";
  if (s.guard) out << "    if (" << printer.print_bool(s.guard) << ") " << value << "\n";
  else out << "    " << value << "\n";
  out << "  }\n";
  out << "  __syncthreads();\n";
  out << "  solder::gemm::Tf32SplitArgs args;\n";
  out << "  args.rows = " << s.rows << ";\n";
  out << "  args.k = " << s.k << ";\n";
  out << "  args.dst = " << cuda_identifier(s.dst) << (s.batch_var.empty() ? "" : " + " + cuda_identifier(s.batch_var) + " * " + std::to_string(s.rows * s.ld) + "LL")
      << ";\n";
  out << "  args.dst_ld = " << s.ld << "LL;\n";
  out << "  solder::gemm::tf32_split_store_parts<" << (1 << s.lo_part) << ">(tile, args, static_cast<int>(" << cuda_identifier(s.k_var)
      << "), static_cast<int>(" << cuda_identifier(s.row_var) << "));\n";
  out << "}\n";
  return finished(name, kernel, out.str());
}

}  // namespace

std::optional<Tf32SplitWriterKernel> write_tf32_split_kernel(const KernelProgram& program, const Kernel& kernel) {
  if (!tf32_split_writer_enabled()) return std::nullopt;
  std::optional<Tf32SplitKernel> s = tf32_split_kernel_of(program, kernel);
  if (!s) return std::nullopt;
  if (s->value) return write_computed(program, kernel, *s);
  const std::string name = cuda_identifier(kernel.name);
  std::ostringstream out;
  out << "#include <solder/gemm/tf32_split.cuh>\n";
  out << "// kernel " << kernel.name << ": the 3xTF32 split of " << s->src << " into " << s->dst << " = "
      << parts_text(s->lo_part)
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
  return finished(name, kernel, out.str());
}

}  // namespace solder
