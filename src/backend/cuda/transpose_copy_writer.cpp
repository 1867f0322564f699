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

bool transpose_copy_byte_form_enabled() {
  const char* v = std::getenv("SOLDER_TRANSPOSE_COPIES");
  return !(v && std::string(v) == "tile");
}

namespace {

// The byte form (header): a bit copy of 1-byte elements, kTransposeByteSides s × kTransposeCopyTile k per block.
std::string byte_transpose_source(const KernelProgram& program, const Kernel& kernel, const TransposingCopy& t, int64_t s_tiles,
                                  int64_t k_tiles) {
  const int64_t sides_tile = kTransposeByteSides, k_tile = kTransposeCopyTile;
  const std::string name = cuda_identifier(kernel.name), s = cuda_identifier(t.src), d = cuda_identifier(t.dst);
  std::ostringstream out;
  out << "// kernel " << kernel.name << ": " << t.dst << "[s, k] = (k < " << t.k << " ? " << t.src << "[k, s] : 0) over s < " << t.sides
      << ", k < " << t.kp << ", 1-byte elements copied bit for bit, transposed through one " << sides_tile << " s x " << k_tile
      << " k shared tile per block\n";
  out << "// (fusion/padded_operands.h; backend/cuda/transpose_copy_writer.h): each thread reads 4 rows x 16 bytes, byte-permutes\n";
  out << "// them into 16 words of 4 k, and writes 16-byte rows of " << t.dst << "; grid " << s_tiles << " s tiles x " << k_tiles << " k tiles\n";
  out << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "(";
  out << cuda_global_parameters(program.globals) << ") {\n";
  out << "  extern __shared__ __align__(16) unsigned char smem[];\n";
  out << "  // [" << sides_tile << " s][" << k_tile / 4 << " words of 4 k]: row s stored at row s ^ ((s >> 4) & 1), so that the two\n";
  out << "  // rows 16 apart that a warp writes at once lie in the two halves of the banks\n";
  out << "  unsigned int* tile_ = reinterpret_cast<unsigned int*>(smem);\n";
  out << "  const long long side0_ = (static_cast<long long>(blockIdx.x) / " << k_tiles << "LL) * " << sides_tile << ";\n";
  out << "  const long long k0_ = (static_cast<long long>(blockIdx.x) % " << k_tiles << "LL) * " << k_tile << ";\n";
  out << "  const int lane_ = threadIdx.x & 31, kq_ = lane_ >> 1, sl_ = (threadIdx.x >> 5) * 32 + (lane_ & 1) * 16;\n";
  out << "  const long long side_ = side0_ + sl_;\n";
  out << "  // k rows 4 kq_ .. 4 kq_ + 3 of the tile, 16 bytes (s sl_ .. sl_ + 15) each; rows k >= " << t.k << " are the zero columns\n";
  out << "  alignas(16) unsigned int r_[4][4];\n";
  out << "#pragma unroll\n";
  out << "  for (int i_ = 0; i_ < 4; ++i_) {\n";
  out << "    const long long k_ = k0_ + 4 * kq_ + i_;\n";
  out << "    *reinterpret_cast<uint4*>(r_[i_]) = (k_ < " << t.k << "LL && side_ < " << t.sides << "LL)\n";
  out << "        ? *reinterpret_cast<const uint4*>(reinterpret_cast<const unsigned char*>(" << s << ") + k_ * " << t.sides << "LL + side_)\n";
  out << "        : make_uint4(0u, 0u, 0u, 0u);\n";
  out << "  }\n";
  out << "  // byte j = 4 w_ + b of each row is s = sl_ + j: the word of its 4 k bytes (k ascending) by byte permutes\n";
  out << "#pragma unroll\n";
  out << "  for (int w_ = 0; w_ < 4; ++w_) {\n";
  out << "    const unsigned int lo01_ = __byte_perm(r_[0][w_], r_[1][w_], 0x5140u), hi01_ = __byte_perm(r_[0][w_], r_[1][w_], 0x7362u);\n";
  out << "    const unsigned int lo23_ = __byte_perm(r_[2][w_], r_[3][w_], 0x5140u), hi23_ = __byte_perm(r_[2][w_], r_[3][w_], 0x7362u);\n";
  out << "    const unsigned int col_[4] = {__byte_perm(lo01_, lo23_, 0x5410u), __byte_perm(lo01_, lo23_, 0x7632u),\n";
  out << "                                  __byte_perm(hi01_, hi23_, 0x5410u), __byte_perm(hi01_, hi23_, 0x7632u)};\n";
  out << "#pragma unroll\n";
  out << "    for (int b_ = 0; b_ < 4; ++b_) {\n";
  out << "      const int ss_ = sl_ + 4 * w_ + b_;\n";
  out << "      tile_[(ss_ ^ ((ss_ >> 4) & 1)) * " << k_tile / 4 << " + kq_] = col_[b_];\n";
  out << "    }\n";
  out << "  }\n";
  out << "  __syncthreads();\n";
  out << "  // " << sides_tile << " s rows of " << k_tile << " k: " << k_tile / 16 << " vectors of 16 bytes a row\n";
  out << "#pragma unroll\n";
  out << "  for (int it_ = 0; it_ < " << sides_tile * (k_tile / 16) / 256 << "; ++it_) {\n";
  out << "    const int v_ = it_ * 256 + threadIdx.x, ss_ = v_ / " << k_tile / 16 << ", kk_ = (v_ % " << k_tile / 16 << ") * 16;\n";
  out << "    const long long so_ = side0_ + ss_, k_ = k0_ + kk_;\n";
  out << "    if (so_ >= " << t.sides << "LL || k_ >= " << t.kp << "LL) continue;\n";
  out << "    const uint4 v4_ = *reinterpret_cast<const uint4*>(tile_ + (ss_ ^ ((ss_ >> 4) & 1)) * " << k_tile / 4 << " + kk_ / 4);\n";
  out << "    *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(" << d << ") + so_ * " << t.kp << "LL + k_) = v4_;\n";
  out << "  }\n";
  out << "}\n";
  return out.str();
}

}  // namespace

std::optional<TransposeCopyWriterKernel> write_transpose_copy_kernel(const KernelProgram& program, const Kernel& kernel) {
  if (!transpose_copy_writer_enabled()) return std::nullopt;
  std::optional<TransposingCopy> t = transposing_copy_of(program, kernel);
  if (!t) return std::nullopt;
  const GlobalTensor* src = program.find_global(t->src);
  const GlobalTensor* dst = program.find_global(t->dst);
  const int64_t in_bytes = dtype_bytes(src->dtype), out_bytes = dtype_bytes(dst->dtype);
  if (16 % in_bytes != 0 || 16 % out_bytes != 0 || (t->sides * in_bytes) % 16 != 0 || (t->kp * out_bytes) % 16 != 0) return std::nullopt;
  if (in_bytes == 1 && src->dtype == dst->dtype && transpose_copy_byte_form_enabled()) {
    const int64_t s_tiles = (t->sides + kTransposeByteSides - 1) / kTransposeByteSides;
    const int64_t k_tiles = (t->kp + kTransposeCopyTile - 1) / kTransposeCopyTile;
    TransposeCopyWriterKernel k;
    k.source = byte_transpose_source(program, kernel, *t, s_tiles, k_tiles);
    k.info.name = cuda_identifier(kernel.name);
    k.info.blocks = s_tiles * k_tiles;
    k.info.threads = 256;
    k.info.shared_bytes = kTransposeByteSides * kTransposeCopyTile;  // dynamic: [256 s][64 k] bytes
    return k;
  }
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
