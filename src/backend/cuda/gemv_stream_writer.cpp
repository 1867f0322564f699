#include "backend/cuda/gemv_stream_writer.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "contract/gemv_fit.h"
#include "ir/printer.h"
#include "support/refusal.h"

namespace solder {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 8;           // U: 16-byte loads of W in flight per thread
constexpr int kSmCount = 132;        // the H100's SMs: 1.5 blocks each is the target grid (one wave at 2-3 per SM)
constexpr int kMinRowsPerThread = 8;
constexpr int64_t kChunkRows = 2048; // rows of K whose V and W offsets sit in shared memory at once

struct Shape {
  int vectors = 8;
  int split = 1;
};

// SOLDER_GEMV_SHAPE=NV,S (tuning): the column vectors per block (8, 16 or 32) and the cluster's ranks
// along K (1, 2, 4 or 8); nothing when unset.
std::optional<Shape> shape_override() {
  const char* v = std::getenv("SOLDER_GEMV_SHAPE");
  if (!v || !*v) return std::nullopt;
  Shape s;
  char comma = 0;
  std::istringstream in(v);
  if (!(in >> s.vectors >> comma >> s.split) || comma != ',' || (s.vectors != 8 && s.vectors != 16 && s.vectors != 32) ||
      (s.split != 1 && s.split != 2 && s.split != 4 && s.split != 8))
    throw Refusal("SOLDER_GEMV_SHAPE: expected NV,S with NV 8, 16 or 32 and S 1, 2, 4 or 8; found '" + std::string(v) + "'");
  return s;
}

Shape choose_shape(const GemvProblem& p) {
  if (auto o = shape_override()) return *o;
  const int64_t vectors = p.n / 8;
  for (int nv : {32, 16, 8}) {
    const int64_t column_blocks = (vectors + nv - 1) / nv;
    const int slices = kThreads / nv;
    for (int s : {1, 2, 4, 8})
      if (2 * column_blocks * s >= 3 * kSmCount && p.k >= int64_t{s} * slices * kMinRowsPerThread) return {nv, s};
  }
  Shape fallback;
  for (int s : {2, 4, 8})
    if (p.k >= int64_t{s} * (kThreads / 8) * kMinRowsPerThread) fallback.split = s;
  return fallback;
}

// `flat` (a long long expression) unflattened into the axes' variables (the last fastest), each
// declared `const long long`; returns nothing.
void unflatten(std::ostringstream& out, const std::string& pad, const std::vector<Axis>& axes, const std::string& flat, const std::string& rest) {
  out << pad << "long long " << rest << " = " << flat << ";\n";
  for (size_t i = axes.size(); i-- > 0;) {
    const std::string v = cuda_identifier(axes[i].var);
    out << pad << "const long long " << v << " = " << rest << " % " << axes[i].extent << "LL; " << rest << " /= " << axes[i].extent << "LL; (void)" << v
        << ";\n";
  }
  out << pad << "(void)" << rest << ";\n";
}

// Σ axis · stride as C++ (the axes declared by unflatten), plus `base`.
std::string affine(const std::vector<Axis>& axes, const std::vector<int64_t>& strides, int64_t base) {
  std::string text = std::to_string(base) + "LL";
  for (size_t i = 0; i < axes.size(); ++i)
    if (strides[i] != 0) text += " + " + cuda_identifier(axes[i].var) + " * " + std::to_string(strides[i]) + "LL";
  return text;
}

}  // namespace

std::optional<GemvStreamKernel> write_gemv_stream_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<GemvStreamKernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (kernel.body.size() != 1 || !kernel.body[0].as<ContractNode>()) return refuse("its body is not one whole contract");
  const ContractNode& c = *kernel.body[0].as<ContractNode>();
  GemvFit fit = fit_gemv(c, program.globals);
  if (!fit.problem) return refuse(fit.refusal);
  const GemvProblem& p = *fit.problem;
  const Shape shape = choose_shape(p);
  const int nv = shape.vectors, split = shape.split, slices = kThreads / nv, columns = nv * 8;
  const int64_t column_blocks = (p.n / 8 + nv - 1) / nv;
  const int64_t rank_rows = (p.k + split - 1) / split;
  const int64_t chunk = std::min<int64_t>(rank_rows, kChunkRows);
  const std::string T = p.type == DType::bf16 ? "__nv_bfloat16" : "__half";
  const std::string T2 = p.type == DType::bf16 ? "__nv_bfloat162" : "__half2";
  const std::string to_float2 = p.type == DType::bf16 ? "__bfloat1622float2" : "__half22float2";
  const std::string name = cuda_identifier(kernel.name);
  const LoadNode& matrix = *p.matrix.as<LoadNode>();
  const LoadNode& vector = *p.vector.as<LoadNode>();

  // The printer knows every global and the contract's `value` register (the epilogue reads value[0]).
  std::map<std::string, CudaArray> arrays;
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, static_cast<int>(i)};
  }
  if (!c.value.empty()) arrays[c.value] = CudaArray{"(&value_)", {1}, DType::f32, false};
  CudaExprPrinter printer;
  printer.array = [&arrays](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  printer.dims = program.dims;
  const GlobalTensor* dst_global = program.find_global(c.dst.name);
  if (!dst_global) return refuse("the destination is not a global");
  const CudaArray& dst = arrays.at(c.dst.name);

  // Shared memory: V's chunk as float, W's row offsets, the slices' partial sums, the block's sums.
  // (each region 16-byte aligned: the slices' sums are stored as float4)
  const int64_t v_bytes = (chunk * 4 + 15) / 16 * 16, w_bytes = (chunk * 8 + 15) / 16 * 16,
                part_floats = int64_t{slices} * columns + columns;
  const int64_t shared_bytes = v_bytes + w_bytes + part_floats * 4;

  std::ostringstream out;
  out << "// GEMV stream (gemv_stream_writer.h): " << c.dst.name << " = Σ " << print_expr(p.vector) << " · " << print_expr(p.matrix) << "\n";
  out << "// N " << p.n << " (outputs";
  for (auto& a : p.output_axes) out << " " << a.var;
  out << ") x K " << p.k << " (reduced";
  for (auto& a : p.reduce_axes) out << " " << a.var;
  out << "); " << nv << " column vectors of 8 x " << slices << " slices of K per block, " << column_blocks << " column blocks";
  if (split > 1) out << ", K split over a cluster of " << split << " (merged through distributed shared memory)";
  out << "; T = " << dtype_name(p.type) << "\n";
  out << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << name << "(";
  out << cuda_global_parameters(program.globals) << ") {\n";
  out << "  extern __shared__ __align__(16) unsigned char smem[];\n";
  out << "  constexpr int NV_ = " << nv << ", KS_ = " << slices << ", S_ = " << split << ", U_ = " << kUnroll << ", COLS_ = " << columns << ";\n";
  out << "  constexpr long long N_ = " << p.n << "LL, K_ = " << p.k << "LL, KR_ = " << rank_rows << "LL, CH_ = " << chunk << "LL;\n";
  out << "  float* const v_s_ = reinterpret_cast<float*>(smem);  // V over the chunk's rows of K, as float\n";
  out << "  long long* const w_row_s_ = reinterpret_cast<long long*>(smem + " << v_bytes << ");  // W's offset of each row of the chunk\n";
  out << "  float* const part_s_ = reinterpret_cast<float*>(smem + " << v_bytes + w_bytes << ");  // [KS_][COLS_] the slices' sums, then [COLS_] the block's\n";
  out << "  float* const sum_s_ = part_s_ + KS_ * COLS_;\n";
  out << "  const int rank_ = " << (split > 1 ? "static_cast<int>(blockIdx.x % S_)" : std::string("0")) << ";  // this block's rows of K: [rank_ * KR_, ...)\n";
  out << "  const long long column_block_ = blockIdx.x / S_;\n";
  out << "  const long long k0_ = rank_ * KR_;\n";
  out << "  const long long klen_ = K_ - k0_ < KR_ ? K_ - k0_ : KR_;\n";
  out << "  const int vec_ = threadIdx.x % NV_, slice_ = threadIdx.x / NV_;\n";
  out << "  const long long n0_ = column_block_ * COLS_ + vec_ * 8;  // this thread's 8 contiguous outputs\n";
  out << "  long long column_ = 0;\n";
  out << "  if (n0_ < N_) {\n";
  unflatten(out, "    ", p.output_axes, "n0_", "n_rest_");
  out << "    column_ = " << affine(p.output_axes, p.matrix_output_strides, 0) << ";\n";
  out << "  }\n";
  out << "  const " << T << "* const w_ = " << cuda_identifier(matrix.tensor) << " + column_;\n";
  out << "  float acc_[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};\n";
  out << "  for (long long c0_ = 0; c0_ < klen_; c0_ += CH_) {\n";
  out << "    const int clen_ = static_cast<int>(klen_ - c0_ < CH_ ? klen_ - c0_ : CH_);\n";
  out << "    if (c0_ > 0) __syncthreads();  // every thread is done with the last chunk's rows\n";
  out << "    for (int r_ = threadIdx.x; r_ < clen_; r_ += " << kThreads << ") {\n";
  unflatten(out, "      ", p.reduce_axes, "k0_ + c0_ + r_", "k_rest_");
  for (auto& a : p.unit_axes) out << "      const long long " << cuda_identifier(a.var) << " = 0; (void)" << cuda_identifier(a.var) << ";\n";
  out << "      v_s_[r_] = solder::to_float(" << cuda_identifier(vector.tensor) << "[" << affine(p.reduce_axes, p.vector_reduce_strides, p.vector_base)
      << "]);\n";
  out << "      w_row_s_[r_] = " << affine(p.reduce_axes, p.matrix_reduce_strides, p.matrix_base) << ";\n";
  out << "    }\n";
  out << "    __syncthreads();\n";
  out << "    if (n0_ < N_) {\n";
  out << "      for (int r0_ = slice_; r0_ < clen_; r0_ += KS_ * U_) {\n";
  out << "        uint4 raw_[U_];\n";
  out << "        float v_[U_];\n";
  out << "        #pragma unroll\n";
  out << "        for (int u_ = 0; u_ < U_; ++u_) {  // U_ independent 16-byte loads in flight\n";
  out << "          const int r_ = r0_ + u_ * KS_;\n";
  out << "          if (r_ < clen_) {\n";
  out << "            raw_[u_] = __ldg(reinterpret_cast<const uint4*>(w_ + w_row_s_[r_]));\n";
  out << "            v_[u_] = v_s_[r_];\n";
  out << "          } else {\n";
  out << "            raw_[u_] = make_uint4(0u, 0u, 0u, 0u);\n";
  out << "            v_[u_] = 0.0f;\n";
  out << "          }\n";
  out << "        }\n";
  out << "        #pragma unroll\n";
  out << "        for (int u_ = 0; u_ < U_; ++u_) {\n";
  out << "          const " << T2 << "* const pair_ = reinterpret_cast<const " << T2 << "*>(&raw_[u_]);\n";
  out << "          #pragma unroll\n";
  out << "          for (int j_ = 0; j_ < 4; ++j_) {\n";
  out << "            const float2 w2_ = " << to_float2 << "(pair_[j_]);\n";
  out << "            acc_[2 * j_] = fmaf(v_[u_], w2_.x, acc_[2 * j_]);\n";
  out << "            acc_[2 * j_ + 1] = fmaf(v_[u_], w2_.y, acc_[2 * j_ + 1]);\n";
  out << "          }\n";
  out << "        }\n";
  out << "      }\n";
  out << "    }\n";
  out << "  }\n";
  out << "  // the block's slices summed through shared memory\n";
  out << "  {\n";
  out << "    float4* const mine_ = reinterpret_cast<float4*>(part_s_ + slice_ * COLS_ + vec_ * 8);\n";
  out << "    mine_[0] = make_float4(acc_[0], acc_[1], acc_[2], acc_[3]);\n";
  out << "    mine_[1] = make_float4(acc_[4], acc_[5], acc_[6], acc_[7]);\n";
  out << "  }\n";
  out << "  __syncthreads();\n";
  out << "  for (int e_ = threadIdx.x; e_ < COLS_; e_ += " << kThreads << ") {\n";
  out << "    float total_ = 0.0f;\n";
  out << "    #pragma unroll 8\n";
  out << "    for (int q_ = 0; q_ < KS_; ++q_) total_ += part_s_[q_ * COLS_ + e_];\n";
  out << "    sum_s_[e_] = total_;\n";
  out << "  }\n";
  if (split > 1) {
    out << "  // the cluster's ranks summed through distributed shared memory: rank_ takes COLS_ / S_ outputs\n";
    out << "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n";
    out << "  for (int e_ = rank_ * (COLS_ / S_) + threadIdx.x; e_ < (rank_ + 1) * (COLS_ / S_); e_ += " << kThreads << ") {\n";
    out << "    const unsigned local_ = static_cast<unsigned>(__cvta_generic_to_shared(sum_s_ + e_));\n";
    out << "    float value_ = 0.0f;\n";
    out << "    #pragma unroll\n";
    out << "    for (unsigned q_ = 0; q_ < S_; ++q_) {\n";
    out << "      unsigned remote_;\n";
    out << "      float part_;\n";
    out << "      asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote_) : \"r\"(local_), \"r\"(q_));\n";
    out << "      asm volatile(\"ld.shared::cluster.f32 %0, [%1];\" : \"=f\"(part_) : \"r\"(remote_) : \"memory\");\n";
    out << "      value_ += part_;\n";
    out << "    }\n";
  } else {
    out << "  __syncthreads();\n";
    out << "  for (int e_ = threadIdx.x; e_ < COLS_; e_ += " << kThreads << ") {\n";
    out << "    float value_ = sum_s_[e_];\n";
  }
  out << "    const long long n_ = column_block_ * COLS_ + e_;\n";
  out << "    if (n_ >= N_) continue;\n";
  unflatten(out, "    ", p.output_axes, "n_", "n_rest_");
  for (auto& a : p.unit_axes) out << "    const long long " << cuda_identifier(a.var) << " = 0; (void)" << cuda_identifier(a.var) << ";\n";
  out << "    // " << c.dst.name << " = " << (c.scale ? "acc · (" + print_expr(c.scale) + ")" : std::string("acc"))
      << (c.bias ? " + " + print_expr(c.bias) : std::string(""));
  if (c.epilogue) out << ", then " << print_expr(c.epilogue) << " with " << c.value << "[0] that value";
  out << ", rounded to " << dtype_name(dst_global->dtype) << " by the store\n";
  if (c.scale) out << "    value_ = value_ * (" << printer.print_float(c.scale) << ");\n";
  if (c.bias) out << "    value_ = value_ + (" << printer.print_float(c.bias) << ");\n";
  if (c.epilogue) out << "    value_ = " << printer.print_float(c.epilogue) << ";\n";
  std::vector<std::string> index;
  for (auto& i : c.dst.index) index.push_back(printer.print_int(i));
  out << "    solder::store(&" << dst.pointer << "[" << printer.offset(dst, index) << "], value_);\n";
  out << "  }\n";
  if (split > 1) {
    out << "  // no block leaves while another may still read its shared memory\n";
    out << "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n";
  }
  out << "}\n";

  GemvStreamKernel result;
  result.source = out.str();
  result.info.name = name;
  result.info.threads = kThreads;
  result.info.blocks = column_blocks * split;
  result.info.cluster = split;
  result.info.shared_bytes = shared_bytes;
  result.vectors = nv;
  result.split = split;
  return result;
}

}  // namespace solder
