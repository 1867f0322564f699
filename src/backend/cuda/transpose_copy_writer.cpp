#include "backend/cuda/transpose_copy_writer.h"

#include <cstdlib>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "fusion/padded_operands.h"

namespace solder {

bool transpose_copy_writer_enabled() {
  const char* v = std::getenv("SOLDER_TRANSPOSE_COPIES");
  return !(v && std::string(v) == "generic");
}

std::optional<TransposeCopyWriterKernel> write_transpose_copy_kernel(const KernelProgram& program, const Kernel& kernel) {
  if (!transpose_copy_writer_enabled()) return std::nullopt;
  std::optional<TransposingCopy> t = transposing_copy_of(program, kernel);
  if (!t) return std::nullopt;
  const GlobalTensor* src = program.find_global(t->src);
  const GlobalTensor* dst = program.find_global(t->dst);
  const int64_t in_bytes = dtype_bytes(src->dtype), out_bytes = dtype_bytes(dst->dtype);
  if (16 % in_bytes != 0 || 16 % out_bytes != 0 || (t->sides * in_bytes) % 16 != 0 || (t->kp * out_bytes) % 16 != 0) return std::nullopt;
  const int64_t tile = kTransposeCopyTile, v_in = 16 / in_bytes, v_out = 16 / out_bytes;
  const std::string name = cuda_identifier(kernel.name), s = cuda_identifier(t->src), d = cuda_identifier(t->dst);
  const std::string src_type(cuda_element_type(src->dtype)), dst_type(cuda_element_type(dst->dtype));
  std::ostringstream out;
  out << "// kernel " << kernel.name << ": " << t->dst << "[s, k] = (k < " << t->k << " ? " << t->src << "[k, s] : 0) over s < " << t->sides
      << ", k < " << t->kp << ", transposed through one " << tile << " x " << tile << " shared tile per block\n";
  out << "// (fusion/padded_operands.h; backend/cuda/transpose_copy_writer.h): 16-byte reads along s, 16-byte writes along k\n";
  out << "// grid " << t->side_tiles << " side tiles x " << t->k_tiles << " k tiles (" << kernel.blocks() << " blocks)\n";
  out << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "(";
  out << cuda_global_parameters(program.globals) << ") {\n";
  out << "  extern __shared__ __align__(16) unsigned char smem[];\n";
  out << "  float (*tile_)[" << tile + 1 << "] = reinterpret_cast<float (*)[" << tile + 1 << "]>(smem);  // [" << tile << "][" << tile + 1
      << "]: [s][k], one padding column\n";
  out << "  const long long side0_ = (static_cast<long long>(blockIdx.x) / " << t->k_tiles << "LL) * " << tile << ";\n";
  out << "  const long long k0_ = (static_cast<long long>(blockIdx.x) % " << t->k_tiles << "LL) * " << tile << ";\n";
  out << "  // " << tile << " k rows of " << tile << " s: " << tile / v_in << " vectors of " << v_in << " elements a row\n";
  out << "  for (int v_ = threadIdx.x; v_ < " << tile * (tile / v_in) << "; v_ += 256) {\n";
  out << "    const int kk_ = v_ / " << tile / v_in << ", ss_ = (v_ % " << tile / v_in << ") * " << v_in << ";\n";
  out << "    const long long k_ = k0_ + kk_, side_ = side0_ + ss_;\n";
  out << "    if (k_ < " << t->k << "LL && side_ < " << t->sides << "LL) {\n";
  out << "      alignas(16) " << src_type << " in_[" << v_in << "];\n";
  out << "      *reinterpret_cast<uint4*>(in_) = *reinterpret_cast<const uint4*>(" << s << " + k_ * " << t->sides << "LL + side_);\n";
  out << "#pragma unroll\n";
  out << "      for (int i_ = 0; i_ < " << v_in << "; ++i_) tile_[ss_ + i_][kk_] = solder::to_float(in_[i_]);\n";
  out << "    } else {\n";
  out << "#pragma unroll\n";
  out << "      for (int i_ = 0; i_ < " << v_in << "; ++i_) tile_[ss_ + i_][kk_] = 0.0f;  // k past K: the zero columns\n";
  out << "    }\n";
  out << "  }\n";
  out << "  __syncthreads();\n";
  out << "  // " << tile << " s rows of " << tile << " k: " << tile / v_out << " vectors of " << v_out << " elements a row\n";
  out << "  for (int v_ = threadIdx.x; v_ < " << tile * (tile / v_out) << "; v_ += 256) {\n";
  out << "    const int ss_ = v_ / " << tile / v_out << ", kk_ = (v_ % " << tile / v_out << ") * " << v_out << ";\n";
  out << "    const long long side_ = side0_ + ss_, k_ = k0_ + kk_;\n";
  out << "    if (side_ >= " << t->sides << "LL || k_ >= " << t->kp << "LL) continue;\n";
  out << "    alignas(16) " << dst_type << " packed_[" << v_out << "];\n";
  out << "#pragma unroll\n";
  out << "    for (int i_ = 0; i_ < " << v_out << "; ++i_) solder::store(&packed_[i_], tile_[ss_][kk_ + i_]);\n";
  out << "    *reinterpret_cast<uint4*>(" << d << " + side_ * " << t->kp << "LL + k_) = *reinterpret_cast<const uint4*>(packed_);\n";
  out << "  }\n";
  out << "}\n";
  TransposeCopyWriterKernel k;
  k.source = out.str();
  k.info.name = name;
  k.info.blocks = kernel.blocks();
  k.info.threads = 256;
  k.info.shared_bytes = tile * (tile + 1) * 4;  // dynamic: the launch declares it (no static shared arrays)
  return k;
}

}  // namespace solder
