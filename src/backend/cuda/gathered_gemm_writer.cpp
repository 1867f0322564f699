// The gathered-GEMM writer (gathered_gemm_writer.h).
#include "backend/cuda/gathered_gemm_writer.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "contract/gathered_gemm_fit.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "support/refusal.h"

namespace solder {

namespace {

constexpr int64_t kSmCount = 132;  // H100 SXM: a tile small enough that every SM gets a block

struct TileChoice {
  int bm, bn;
};

// SOLDER_GATHERED_TILE=BM,BN,BK,THREADS (tuning: bench/contract_suites_device.sh times variants),
// each from the writer's set; nothing when unset; a clear error when malformed.
std::optional<std::array<int, 4>> tile_override() {
  const char* text = std::getenv("SOLDER_GATHERED_TILE");
  if (!text || !*text) return std::nullopt;
  std::array<int, 4> v{};
  char tail = 0;
  if (std::sscanf(text, "%d,%d,%d,%d%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4 || (v[0] != 32 && v[0] != 64 && v[0] != 128) ||
      (v[1] != 32 && v[1] != 64) || (v[2] != 32 && v[2] != 64) || (v[3] != 128 && v[3] != 256) || (v[0] == 128 && v[2] == 64))
    throw Refusal(std::string("SOLDER_GATHERED_TILE: expected BM,BN,BK,THREADS with BM 32, 64 or 128, BN 32 or 64, BK 32 or 64 "
                              "(not 64 with BM 128), THREADS 128 or 256; found '") + text + "'");
  return v;
}

// The largest tile whose grid still gives every SM a block; the smallest when none does.
TileChoice choose_tile(const GatheredGemmProblem& p) {
  const TileChoice tiles[] = {{128, 64}, {64, 64}, {64, 32}, {32, 32}};
  for (auto t : tiles) {
    if (p.n < t.bn && t.bn > 32) continue;  // narrow N: narrow tiles
    const int64_t blocks = ((p.m + t.bm - 1) / t.bm) * ((p.n + t.bn - 1) / t.bn) * p.batch;
    if (blocks >= kSmCount) return t;
  }
  return tiles[3];
}

// `flat` (a C++ int expression) unflattened into the axes' variables, the last fastest.
void unflatten(std::ostringstream& out, const std::string& pad, const std::vector<Axis>& axes, const std::string& flat, const std::string& rest) {
  if (axes.empty()) return;
  out << pad << "int " << rest << " = " << flat << ";\n";
  for (size_t i = axes.size(); i-- > 0;) {
    const std::string v = cuda_identifier(axes[i].var);
    if (i == 0)
      out << pad << "const long long " << v << " = " << rest << "; (void)" << v << ";\n";
    else
      out << pad << "const long long " << v << " = " << rest << " % " << axes[i].extent << "; " << rest << " /= " << axes[i].extent << "; (void)"
          << v << ";\n";
  }
}

}  // namespace

std::optional<GatheredGemmKernel> write_gathered_gemm_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<GatheredGemmKernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (kernel.body.size() != 1 || !kernel.body[0].as<ContractNode>()) return refuse("its body is not one whole contract");
  const ContractNode& c = *kernel.body[0].as<ContractNode>();
  GatheredGemmFit fit = fit_gathered_gemm(c, program.globals);
  if (!fit.problem) return refuse(fit.refusal);
  const GatheredGemmProblem& p = *fit.problem;
  const TileChoice tile = choose_tile(p);
  // K in steps of 64 where K is long and the tile small (fewer barriers and load round trips per
  // block; 16 KB of buffers at 64 x 64), else 32.
  int bm = tile.bm, bn = tile.bn, bk = p.k >= 256 && bm <= 64 ? 64 : 32;
  // 8 warps where the grid leaves SMs without a block (a deep convolution at batch 1: few tiles,
  // long K): each thread gathers half as much per step, and the warps split the k-steps.
  int threads = ((p.m + bm - 1) / bm) * ((p.n + bn - 1) / bn) * p.batch < kSmCount ? 256 : 128;
  if (auto o = tile_override()) bm = (*o)[0], bn = (*o)[1], bk = (*o)[2], threads = (*o)[3];
  const int kThreads = threads, kWarps = threads / 32;
  const int64_t m_tiles = (p.m + bm - 1) / bm, n_tiles = (p.n + bn - 1) / bn, k_tiles = (p.k + bk - 1) / bk;
  const int c_stride = bn + 4;  // floats per row of the epilogue's C tile
  const int64_t operand_bytes = 2LL * (bm + bn) * bk * 2, c_bytes = int64_t{bm} * c_stride * 4;
  const std::string T = c.type == MmaType::bf16 ? "__nv_bfloat16" : "__half";
  const std::string name = cuda_identifier(kernel.name);

  std::map<std::string, CudaArray> arrays;
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, static_cast<int>(i)};
  }
  if (!c.value.empty()) arrays[c.value] = CudaArray{"(&value_)", {1}, DType::f32, false};
  CudaExprPrinter printer;
  printer.array = [&](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  printer.dims = program.dims;
  auto find_global = [&](const std::string& n) -> const GlobalTensor* { return program.find_global(n); };

  // The destination's innermost index decides how the epilogue's threads run.
  bool c_rows_fastest = false;
  if (!c.dst.index.empty() && !p.row_axes.empty())
    for (auto& v : vars_used(c.dst.index.back())) c_rows_fastest |= v == p.row_axes.back().var;

  std::ostringstream out;
  out << "// implicit GEMM with gathered operands on mma.sync (gathered_gemm_writer.h): " << c.dst.name << " = Σ " << print_expr(p.a) << " · "
      << print_expr(p.b) << "\n";
  out << "// M " << p.m << " (rows";
  for (auto& a : p.row_axes) out << " " << a.var;
  out << ") x N " << p.n << " (columns";
  for (auto& a : p.column_axes) out << " " << a.var;
  out << ") x K " << p.k << " (reduced";
  for (auto& a : p.reduce_axes) out << " " << a.var;
  out << ")";
  if (p.batch > 1) out << ", batch " << p.batch;
  out << "; tile BM " << bm << " x BN " << bn << " x BK " << bk << ", " << threads << " threads, T = " << mma_type_name(c.type) << "; A gathered "
      << (p.a_rows_fastest ? "rows" : "depth") << "-fastest, B " << (p.b_columns_fastest ? "columns" : "depth") << "-fastest\n";
  out << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << name << "(";
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    out << (i ? ",\n    " : "\n    ") << (g.role == GlobalRole::input ? "const " : "") << cuda_element_type(g.dtype) << "* __restrict__ "
        << cuda_identifier(g.name);
  }
  out << ") {\n";
  out << "  extern __shared__ __align__(128) unsigned char smem[];\n";
  out << "  constexpr int BM_ = " << bm << ", BN_ = " << bn << ", BK_ = " << bk << ", KT_ = " << k_tiles << ";\n";
  out << "  constexpr int M_ = " << p.m << ", N_ = " << p.n << ", K_ = " << p.k << ";\n";
  out << "  " << T << "* const a_s_ = reinterpret_cast<" << T << "*>(smem);  // two buffers of A [BM_][BK_], Swizzle<BK_>\n";
  out << "  " << T << "* const b_s_ = a_s_ + 2 * BM_ * BK_;  // two buffers of B [BN_][BK_] (k-major), Swizzle<BK_>\n";
  out << "  int block_ = blockIdx.x;\n";
  // Column tiles fastest: the blocks that share a row tile of A (the gathered, large operand) run
  // together and read it from L2 once; B (the weights) is small and stays in L2.
  out << "  const int n0_ = (block_ % " << n_tiles << ") * BN_; block_ /= " << n_tiles << ";\n";
  out << "  const int m0_ = (block_ % " << m_tiles << ") * BM_; block_ /= " << m_tiles << ";\n";
  unflatten(out, "  ", p.batch_axes, "block_", "batch_rest_");
  // One operand's gather for tile step kt_ into buffer s_: each element evaluated and stored as T
  // (exact: the operand is exact in T). Loads of several elements are in flight together (the loop
  // is unrolled by 4; the stores go to shared memory, which the loads cannot alias).
  auto gather = [&](const char* base, const Expr& value, int rows, bool rows_fastest, const std::vector<Axis>& side, const char* origin,
                    const char* bound) {
    const int per_thread = rows * bk / kThreads;
    // Four elements in flight per thread and operand: the loops fully unrolled kept every element's
    // 64-bit index arithmetic live at once (255 registers and spills at 32 x 32 x 64).
    out << "    #pragma unroll 4\n";
    out << "    for (int i_ = 0; i_ < " << per_thread << "; ++i_) {\n";
    out << "      const int e_ = threadIdx.x + i_ * " << kThreads << ";\n";
    if (rows_fastest)
      out << "      const int row_ = e_ % " << rows << ", depth_ = e_ / " << rows << ";\n";
    else
      out << "      const int row_ = e_ / BK_, depth_ = e_ % BK_;\n";
    out << "      const int side_ = " << origin << " + row_, k_ = kt_ * BK_ + depth_;\n";
    out << "      float v_ = 0.0f;\n";
    out << "      if (side_ < " << bound << " && k_ < K_) {\n";
    unflatten(out, "        ", side, "side_", "side_rest_");
    unflatten(out, "        ", p.reduce_axes, "k_", "k_rest_");
    out << "        v_ = " << printer.print_float(value) << ";\n";
    out << "      }\n";
    out << "      " << base << "[solder::tile::Swizzle<BK_>::offset(row_, depth_)] = " << T << "(v_);  // exact in T\n";
    out << "    }\n";
  };
  out << "  auto gather_ = [&](int kt_, int s_) {\n";
  out << "    // A(m, k) = " << print_expr(p.a) << "\n";
  gather("(a_s_ + s_ * BM_ * BK_)", p.a, bm, p.a_rows_fastest, p.row_axes, "m0_", "M_");
  out << "    // B(n, k) = " << print_expr(p.b) << "\n";
  gather("(b_s_ + s_ * BN_ * BK_)", p.b, bn, p.b_columns_fastest, p.column_axes, "n0_", "N_");
  out << "  };\n";
  out << "  solder::tile::BlockGemm<" << T << ", BM_, BN_, BK_, " << kWarps << "> gemm_;\n";
  out << "  gather_(0, 0);\n";
  out << "  __syncthreads();\n";
  out << "  for (int kt_ = 0; kt_ < KT_; ++kt_) {\n";
  out << "    const int s_ = kt_ & 1;\n";
  out << "    // the next step into the other buffer (every thread finished reading it before the last barrier)\n";
  out << "    if (kt_ + 1 < KT_) gather_(kt_ + 1, s_ ^ 1);\n";
  out << "    gemm_.accumulate(solder::tile::SwizzledA<" << T << ", BM_, BK_>{a_s_ + s_ * BM_ * BK_}, solder::tile::SwizzledB<" << T
      << ", BK_, BN_, true>{b_s_ + s_ * BN_ * BK_});\n";
  out << "    __syncthreads();\n";
  out << "  }\n";
  out << "  float* const c_s_ = reinterpret_cast<float*>(smem);  // C [BM_][" << c_stride << "] over the operand buffers\n";
  out << "  gemm_.write(c_s_, " << c_stride << ", 1, false);\n";
  out << "  __syncthreads();\n";
  // The epilogue, element by element, threads along the destination's contiguous axis.
  const GlobalTensor* dst_global = find_global(c.dst.name);
  const CudaArray& dst = arrays.at(c.dst.name);
  std::vector<std::string> index;
  for (auto& i : c.dst.index) index.push_back(printer.print_int(i));
  out << "  // " << c.dst.name << " = " << (c.scale ? "acc · (" + print_expr(c.scale) + ")" : std::string("acc"))
      << (c.bias ? " + " + print_expr(c.bias) : std::string(""));
  if (c.epilogue) out << ", then " << print_expr(c.epilogue) << " with " << c.value << "[0] that value";
  out << ", rounded to " << dtype_name(dst_global->dtype) << " by the store\n";
  out << "  #pragma unroll 4\n";
  out << "  for (int i_ = 0; i_ < " << bm * bn / kThreads << "; ++i_) {\n";
  out << "    const int e_ = threadIdx.x + i_ * " << kThreads << ";\n";
  if (c_rows_fastest)
    out << "    const int row_ = e_ % BM_, col_ = e_ / BM_;\n";
  else
    out << "    const int row_ = e_ / BN_, col_ = e_ % BN_;\n";
  out << "    const int m_ = m0_ + row_, n_ = n0_ + col_;\n";
  out << "    if (m_ >= M_ || n_ >= N_) continue;\n";
  unflatten(out, "    ", p.row_axes, "m_", "m_rest_");
  unflatten(out, "    ", p.column_axes, "n_", "n_rest_");
  out << "    float value_ = c_s_[row_ * " << c_stride << " + col_];\n";
  if (c.scale) out << "    value_ = value_ * (" << printer.print_float(c.scale) << ");\n";
  if (c.bias) out << "    value_ = value_ + (" << printer.print_float(c.bias) << ");\n";
  if (c.epilogue) out << "    value_ = " << printer.print_float(c.epilogue) << ";\n";
  out << "    solder::store(&" << dst.pointer << "[" << printer.offset(dst, index) << "], value_);\n";
  out << "  }\n";
  out << "}\n";

  GatheredGemmKernel result;
  result.source = out.str();
  result.info.name = name;
  result.info.threads = kThreads;
  result.info.blocks = m_tiles * n_tiles * p.batch;
  result.info.shared_bytes = std::max(operand_bytes, c_bytes);
  result.bm = bm;
  result.bn = bn;
  result.bk = bk;
  return result;
}

}  // namespace solder
