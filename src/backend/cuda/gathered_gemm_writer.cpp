// The gathered-GEMM writer (gathered_gemm_writer.h).
#include "backend/cuda/gathered_gemm_writer.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "contract/gathered_gemm_fit.h"
#include "hw/hardware.h"
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

// SOLDER_GATHERED_SPLIT=S (tuning): the split-K cluster size, 1, 2, 4 or 8; nothing when unset.
std::optional<int> split_override() {
  const char* text = std::getenv("SOLDER_GATHERED_SPLIT");
  if (!text || !*text) return std::nullopt;
  const std::string s = text;
  if (s != "1" && s != "2" && s != "4" && s != "8")
    throw Refusal("SOLDER_GATHERED_SPLIT: expected the split-K cluster size 1, 2, 4 or 8; found '" + s + "'");
  return std::stoi(s);
}

// The largest tile whose grid still gives every SM a block (four blocks where K is at most 128: one or
// two K steps of 64, so a block is mostly its load latency and epilogue, and more blocks per SM hide
// them); the smallest when none does. Measured on the H100 (bench/NOTES.md, sixth and seventh sessions):
// conv_chain C1's first convolution (K 64) 11.2 -> 9.6 µs and C5's second (K 64) 18.4 -> 16.7 µs with
// 32 x 32 instead of 64 x 64; C6's second (K 128) 64 x 32 x 32 -> 32 x 32 x 64 took the chain 21.2 -> 19.1 µs.
TileChoice choose_tile(const GatheredGemmProblem& p) {
  const TileChoice tiles[] = {{128, 64}, {64, 64}, {64, 32}, {32, 32}};
  const int64_t wanted = p.k <= 128 ? 4 * kSmCount : kSmCount;
  for (auto t : tiles) {
    if (p.n < t.bn && t.bn > 32) continue;  // narrow N: narrow tiles
    const int64_t blocks = ((p.m + t.bm - 1) / t.bm) * ((p.n + t.bn - 1) / t.bn) * p.batch;
    if (blocks >= wanted) return t;
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


// One product's writer state: the contract, its fit, the tile, and the CUDA names the printer knows
// (every global, the contract's `value` register). Built in place (the printer points into `arrays`).
struct Product {
  const KernelProgram* program_ = nullptr;
  const ContractNode* c_ = nullptr;
  const GatheredGemmProblem* p_ = nullptr;
  int bm = 0, bn = 0, bk = 0, split = 1, threads = 128;
  std::string T;
  std::map<std::string, CudaArray> arrays;
  CudaExprPrinter printer;
  bool c_rows_fastest = false;  // the destination's innermost index runs along the rows
};

// Programmatic dependent launch (GeneratedKernel::programmatic; the GEMM skeleton's griddepcontrol): every
// thread waits for the previous kernel to finish and its writes to be visible before touching anything it
// may have written, then lets the next kernel's blocks launch. Without the launch attribute both do nothing.
void write_grid_dependency(std::ostringstream& out) {
  out << "  // programmatic dependent launch: the previous kernel's results, then the next kernel may start\n";
  out << "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n";
  out << "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n";
}

// A chain of at most this many FLOPs (2·M·N·K·batch over both products; ~10 µs at mma.sync's rate)
// takes programmatic dependent launch: its launch and w2's copies overlap the previous kernel's tail
// (measured on the H100: C1 6.19 -> 5.57 µs, C5 13.96 -> 13.31). The one-contract kernels do not: with
// the same early trigger, conv_chain's two-kernel plans got slower (C7 20.17 -> 21.4-21.8 µs; C5 as two
// kernels 25.5 µs against 16.8 without), as the GEMM skeleton's long kernels did (bench/NOTES.md).
constexpr double kProgrammaticMaxFlops = 1e9;

double product_flops(const GatheredGemmProblem& p) { return 2.0 * static_cast<double>(p.m) * p.n * p.k * p.batch; }

void init_product(Product& pr, const KernelProgram& program, const ContractNode& c, const GatheredGemmProblem& p) {
  pr.program_ = &program;
  pr.c_ = &c;
  pr.p_ = &p;
  pr.T = c.type == MmaType::bf16 ? "__nv_bfloat16" : "__half";
  auto& arrays = pr.arrays;
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, static_cast<int>(i)};
  }
  if (!c.value.empty()) arrays[c.value] = CudaArray{"(&value_)", {1}, DType::f32, false};
  pr.printer.array = [&arrays](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  pr.printer.dims = program.dims;

  // The destination's innermost index decides how the epilogue's threads run.
  if (!c.dst.index.empty() && !p.row_axes.empty())
    for (auto& v : vars_used(c.dst.index.back())) pr.c_rows_fastest |= v == p.row_axes.back().var;

}

// The kernel's signature: every global, inputs const.
void write_signature(std::ostringstream& out, const KernelProgram& program, const std::string& name, int kThreads) {
  out << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << name << "(";
  out << cuda_global_parameters(program.globals) << ") {\n";
  out << "  extern __shared__ __align__(128) unsigned char smem[];\n";
}

#define SOLDER_PRODUCT_LOCALS                                                                                        \
  const KernelProgram& program = *pr.program_;                                                                       \
  const ContractNode& c = *pr.c_;                                                                                    \
  const GatheredGemmProblem& p = *pr.p_;                                                                             \
  const int bm = pr.bm, bn = pr.bn, bk = pr.bk, split = pr.split, kThreads = pr.threads, kWarps = kThreads / 32;    \
  const int64_t m_tiles = (p.m + bm - 1) / bm, n_tiles = (p.n + bn - 1) / bn, k_tiles = (p.k + bk - 1) / bk;       \
  const int c_stride = bn + 4;                                                                                       \
  const std::string& T = pr.T;                                                                                       \
  auto& arrays = pr.arrays;                                                                                          \
  auto& printer = pr.printer;                                                                                        \
  const bool c_rows_fastest = pr.c_rows_fastest;                                                                     \
  auto find_global = [&](const std::string& n) -> const GlobalTensor* { return program.find_global(n); };          \
  (void)kWarps, (void)m_tiles, (void)n_tiles, (void)k_tiles, (void)c_stride, (void)c_rows_fastest, (void)split, (void)find_global, (void)T

// The product's K loop: the tile's constants (BM_, BN_, BK_, KT_, M_, N_, K_), the block's tile (m0_,
// n0_, the batch axes), the operands' two-phase gathers into the two shared buffers, BlockGemm over this
// block's K steps; ends with C as float [BM_][BN_ + 4] at c_s_ (over the operand buffers) after a barrier.
void write_product(std::ostringstream& out, Product& pr) {
  SOLDER_PRODUCT_LOCALS;
  out << "  constexpr int BM_ = " << bm << ", BN_ = " << bn << ", BK_ = " << bk << ", KT_ = " << k_tiles << ";\n";
  out << "  constexpr int M_ = " << p.m << ", N_ = " << p.n << ", K_ = " << p.k << ";\n";
  out << "  " << T << "* const a_s_ = reinterpret_cast<" << T << "*>(smem);  // two buffers of A [BM_][BK_], Swizzle<BK_>\n";
  out << "  " << T << "* const b_s_ = a_s_ + 2 * BM_ * BK_;  // two buffers of B [BN_][BK_] (k-major), Swizzle<BK_>\n";
  out << "  int block_ = blockIdx.x" << (split > 1 ? " / " + std::to_string(split) : std::string("")) << ";\n";
  if (split > 1) {
    // The cluster's blocks are consecutive in x: rank = blockIdx.x % S takes K steps [kt0_, kt1_).
    const int64_t per = (k_tiles + split - 1) / split;
    out << "  const int rank_ = blockIdx.x % " << split << ";  // split-K: this block's rank in its cluster of " << split << "\n";
    out << "  const int kt0_ = rank_ * " << per << ", kt1_ = kt0_ + " << per << " < KT_ ? kt0_ + " << per << " : KT_;\n";
  } else {
    out << "  constexpr int kt0_ = 0, kt1_ = KT_;\n";
  }
  // Column tiles fastest: the blocks that share a row tile of A (the gathered, large operand) run
  // together and read it from L2 once; B (the weights) is small and stays in L2.
  out << "  const int n0_ = (block_ % " << n_tiles << ") * BN_; block_ /= " << n_tiles << ";\n";
  out << "  const int m0_ = (block_ % " << m_tiles << ") * BM_; block_ /= " << m_tiles << ";\n";
  unflatten(out, "  ", p.batch_axes, "block_", "batch_rest_");
  // The operands' gathers, in two phases per K step (the software pipeline): issue_(kt) computes each
  // of the thread's elements' index and guard and starts its load into a register (predicated: no
  // branch, no store between the loads, so all of a thread's loads are in flight together); the mma of
  // the previous step runs; commit_(s) then converts the registers and stores them into shared buffer
  // s. A thread's row (rows-fastest) or depth (depth-fastest) is the same in every step when the
  // block's threads are a multiple of the tile's rows (depth): its decode is hoisted out of the K loop
  // (rows) or out of the element loop (depth, once per step). Indices are 32-bit int where the fit
  // proved they fit (GatheredGemmProblem::a_index32), else long long.
  struct Operand {
    std::string tag;  // "a" or "b"
    const Expr* value;
    int rows;
    bool rows_fastest;
    const std::vector<Axis>* side;
    std::string origin, bound, buffer;
    const std::vector<GatherLeaf>* leaves;
    bool index32;
  };
  const Operand operands[2] = {
      {"a", &p.a, bm, p.a_rows_fastest, &p.row_axes, "m0_", "M_", "a_s_", &p.a_leaves, p.a_index32},
      {"b", &p.b, bn, p.b_columns_fastest, &p.column_axes, "n0_", "N_", "b_s_", &p.b_leaves, p.b_index32}};
  static const std::regex long_literal("\\b([0-9]+)LL\\b");
  for (const Operand& o : operands) {
    const int per_thread = o.rows * bk / kThreads;
    const bool rows_fixed = o.rows_fastest && kThreads % o.rows == 0;
    const bool depth_fixed = !o.rows_fastest && kThreads % bk == 0;
    const std::string int_t = o.index32 ? "int" : "long long";
    // 32-bit text: literals without LL, constant floor divisions folded (the printer's solder::floordiv
    // is long long and would widen the arithmetic around it).
    auto ix = [&](const std::string& text) {
      if (!o.index32) return text;
      std::string t = std::regex_replace(text, long_literal, "$1");
      static const std::regex constant_div("solder::floor(div|mod)\\((-?[0-9]+), (-?[0-9]+)\\)");
      std::string folded;
      auto begin = std::sregex_iterator(t.begin(), t.end(), constant_div);
      size_t last = 0;
      for (auto it = begin; it != std::sregex_iterator(); ++it) {
        const long long a = std::stoll((*it)[2]), b = std::stoll((*it)[3]);
        if (b == 0) continue;
        long long q = a / b;
        if (a % b != 0 && ((a < 0) != (b < 0))) --q;
        const long long value = (*it)[1] == "div" ? q : a - b * q;
        folded += t.substr(last, it->position() - last) + "(" + std::to_string(value) + ")";
        last = it->position() + it->length();
      }
      return folded + t.substr(last);
    };
    auto decode = [&](const std::string& pad, const std::vector<Axis>& axes, const std::string& flat, const std::string& rest) {
      if (axes.empty()) return;
      out << pad << "int " << rest << " = " << flat << ";\n";
      for (size_t i = axes.size(); i-- > 0;) {
        const std::string v = cuda_identifier(axes[i].var);
        if (i == 0)
          out << pad << "const " << int_t << " " << v << " = " << rest << "; (void)" << v << ";\n";
        else
          out << pad << "const " << int_t << " " << v << " = " << rest << " % " << axes[i].extent << "; " << rest << " /= " << axes[i].extent
              << "; (void)" << v << ";\n";
      }
    };
    const std::string tag = o.tag;
    if (tag == "b" && p.b_rows_contiguous) {
      // B's rows are whole 16-byte chunks of one tensor (GatheredGemmProblem::b_rows_contiguous):
      // cp.async straight into the buffer (zero-filled past N and K), waited for before the barrier.
      const GlobalTensor* g = find_global(p.b_leaves[0].load.as<LoadNode>()->tensor);
      const std::string pointer = arrays.at(g->name).pointer;
      out << "  // B(n, k) = " << print_expr(*o.value) << ": rows of K contiguous in " << g->name << ", copied 16 bytes at a time (cp.async)\n";
      out << "  auto b_issue_ = [&](int kt_, int s_) {\n";
      out << "    " << T << "* const buffer_ = b_s_ + s_ * BN_ * BK_;\n";
      const int chunks = bn * bk / 8, per = (chunks + kThreads - 1) / kThreads;
      out << "    #pragma unroll\n";
      out << "    for (int j_ = 0; j_ < " << per << "; ++j_) {\n";
      out << "      const int c_ = threadIdx.x + j_ * " << kThreads << ";\n";
      if (chunks % kThreads != 0) out << "      if (c_ >= " << chunks << ") break;\n";
      out << "      const int row_ = c_ / (BK_ / 8), depth_ = (c_ % (BK_ / 8)) * 8;\n";
      out << "      const int n_ = n0_ + row_, k_ = kt_ * BK_ + depth_;\n";
      out << "      const bool ok_ = n_ < N_ && k_ < K_;\n";
      out << "      solder::tile::cp_async_16(buffer_ + solder::tile::Swizzle<BK_>::offset(row_, depth_), " << pointer
          << " + (ok_ ? n_ * K_ + k_ : 0), ok_);\n";
      out << "    }\n";
      out << "    solder::tile::cp_async_commit();\n";
      out << "  };\n";
      out << "  auto b_commit_ = [&](int) { solder::tile::cp_async_wait<0>(); };\n";
      continue;
    }
    out << "  // " << (tag == "a" ? "A(m, k) = " : "B(n, k) = ") << print_expr(*o.value) << ": " << per_thread << " elements per thread, "
        << (o.leaves->empty() ? "evaluated as written" : std::to_string(o.leaves->size()) + " load(s) in flight each") << ", "
        << (o.index32 ? "32-bit" : "64-bit") << " indices\n";
    if (rows_fixed) {
      out << "  const int " << tag << "_row_ = threadIdx.x % " << o.rows << ";\n";
      out << "  const bool " << tag << "_side_ok_ = " << o.origin << " + " << tag << "_row_ < " << o.bound << ";\n";
      decode("  ", *o.side, o.origin + " + " + tag + "_row_", tag + "_side_rest_");
    }
    // The element's row_ and depth_ in the tile.
    auto element_position = [&](const std::string& pad) {
      if (rows_fixed)
        out << pad << "const int row_ = " << tag << "_row_, depth_ = threadIdx.x / " << o.rows << " + i_ * " << kThreads / o.rows << ";\n";
      else if (depth_fixed)
        out << pad << "const int row_ = threadIdx.x / BK_ + i_ * " << kThreads / bk << ", depth_ = threadIdx.x % BK_;\n";
      else if (o.rows_fastest)
        out << pad << "const int e_ = threadIdx.x + i_ * " << kThreads << ", row_ = e_ % " << o.rows << ", depth_ = e_ / " << o.rows << ";\n";
      else
        out << pad << "const int e_ = threadIdx.x + i_ * " << kThreads << ", row_ = e_ / BK_, depth_ = e_ % BK_;\n";
    };
    // Registers: one per element and leaf (the raw element), or the evaluated value.
    std::vector<std::string> raw_types;
    if (o.leaves->empty()) {
      out << "  float " << tag << "_value_[" << per_thread << "];\n";
    } else {
      for (size_t j = 0; j < o.leaves->size(); ++j) {
        const GlobalTensor* g = find_global((*o.leaves)[j].load.as<LoadNode>()->tensor);
        raw_types.push_back(std::string(cuda_element_type(g->dtype)));
        out << "  " << raw_types.back() << " " << tag << "_raw" << j << "_[" << per_thread << "];\n";
      }
    }
    out << "  auto " << tag << "_issue_ = [&](int kt_, int) {\n";
    if (depth_fixed) {
      out << "    const int k_ = kt_ * BK_ + threadIdx.x % BK_;\n";
      out << "    const bool k_ok_ = k_ < K_;\n";
      decode("    ", p.reduce_axes, "k_", "k_rest_");
    }
    out << "    #pragma unroll\n";
    out << "    for (int i_ = 0; i_ < " << per_thread << "; ++i_) {\n";
    element_position("      ");
    if (!rows_fixed) {
      out << "      const bool side_ok_ = " << o.origin << " + row_ < " << o.bound << ";\n";
      decode("      ", *o.side, o.origin + " + row_", "side_rest_");
    }
    if (!depth_fixed) {
      out << "      const int k_ = kt_ * BK_ + depth_;\n";
      out << "      const bool k_ok_ = k_ < K_;\n";
      decode("      ", p.reduce_axes, "k_", "k_rest_");
    }
    out << "      const bool ok_ = " << (rows_fixed ? tag + "_side_ok_" : std::string("side_ok_")) << " && k_ok_;\n";
    if (o.leaves->empty()) {
      out << "      float v_ = 0.0f;\n";
      out << "      if (ok_) v_ = " << printer.print_float(*o.value) << ";\n";
      out << "      " << tag << "_value_[i_] = v_;\n";
    } else {
      for (size_t j = 0; j < o.leaves->size(); ++j) {
        const GatherLeaf& leaf = (*o.leaves)[j];
        auto load = leaf.load.as<LoadNode>();
        std::string guard = "ok_";
        for (auto& [cond, holds] : leaf.guards) guard += std::string(" && ") + (holds ? "" : "!") + ix(printer.print_bool(cond));
        std::vector<std::string> index;
        for (auto& i : load->index) index.push_back(printer.print_int(i));
        const CudaArray& array = arrays.at(load->tensor);
        const std::string raw = tag + "_raw" + std::to_string(j) + "_[i_]";
        out << "      " << raw << " = " << raw_types[j] << "(0.0f);\n";
        out << "      if (" << guard << ") " << raw << " = " << array.pointer << "[" << ix(printer.offset(array, index)) << "];\n";
      }
    }
    out << "    }\n";
    out << "  };\n";
    out << "  auto " << tag << "_commit_ = [&](int s_) {\n";
    out << "    " << T << "* const buffer_ = " << o.buffer << " + s_ * " << o.rows << " * BK_;\n";
    out << "    #pragma unroll\n";
    out << "    for (int i_ = 0; i_ < " << per_thread << "; ++i_) {\n";
    element_position("      ");
    std::string value;
    const std::string T_raw = c.type == MmaType::bf16 ? "__nv_bfloat16" : "__half";
    if (o.leaves->empty()) {
      value = T + "(" + tag + "_value_[i_])";
    } else if (o.leaves->size() == 1 && (*o.leaves)[0].casts.empty() && raw_types[0] == T_raw) {
      value = tag + "_raw0_[i_]";  // already T
    } else {
      std::string sum;
      for (size_t j = 0; j < o.leaves->size(); ++j) {
        std::string v = "solder::to_float(" + tag + "_raw" + std::to_string(j) + "_[i_])";
        const auto& casts = (*o.leaves)[j].casts;
        for (size_t k = casts.size(); k-- > 0;) v = round_function(casts[k]) + "(" + v + ")";
        sum += (j ? " + " : "") + v;  // at most one leaf is taken; the others hold 0
      }
      value = T + "(" + sum + ")";
    }
    out << "      buffer_[solder::tile::Swizzle<BK_>::offset(row_, depth_)] = " << value << ";  // exact in T\n";
    out << "    }\n";
    out << "  };\n";
  }
  out << "  solder::tile::BlockGemm<" << T << ", BM_, BN_, BK_, " << kWarps << "> gemm_;\n";
  out << "  if (kt0_ < kt1_) {\n    a_issue_(kt0_, 0);\n    b_issue_(kt0_, 0);\n    a_commit_(0);\n    b_commit_(0);\n  }\n";
  out << "  __syncthreads();\n";
  out << "  for (int kt_ = kt0_; kt_ < kt1_; ++kt_) {\n";
  out << "    const int s_ = (kt_ - kt0_) & 1;\n";
  out << "    // the next step's loads in flight during this step's mma; stored into the other buffer after it\n";
  out << "    // (every thread finished reading that buffer before the last barrier)\n";
  out << "    if (kt_ + 1 < kt1_) {\n      a_issue_(kt_ + 1, s_ ^ 1);\n      b_issue_(kt_ + 1, s_ ^ 1);\n    }\n";
  out << "    gemm_.accumulate(solder::tile::SwizzledA<" << T << ", BM_, BK_>{a_s_ + s_ * BM_ * BK_}, solder::tile::SwizzledB<" << T
      << ", BK_, BN_, true>{b_s_ + s_ * BN_ * BK_});\n";
  out << "    if (kt_ + 1 < kt1_) {\n      a_commit_(s_ ^ 1);\n      b_commit_(s_ ^ 1);\n    }\n";
  out << "    __syncthreads();\n";
  out << "  }\n";
  out << "  float* const c_s_ = reinterpret_cast<float*>(smem);  // C [BM_][" << c_stride << "] over the operand buffers\n";
  out << "  gemm_.write(c_s_, " << c_stride << ", 1, false);\n";
  out << "  __syncthreads();\n";
}

// The store epilogue: C from shared memory (summed over the cluster's blocks under split-K), then the
// contract's scale, bias and epilogue, stored to its destination (rounded by the store).
void write_store_epilogue(std::ostringstream& out, Product& pr) {
  SOLDER_PRODUCT_LOCALS;
  // The epilogue, element by element, threads along the destination's contiguous axis.
  const GlobalTensor* dst_global = find_global(c.dst.name);
  const CudaArray& dst = arrays.at(c.dst.name);
  std::vector<std::string> index;
  for (auto& i : c.dst.index) index.push_back(printer.print_int(i));
  out << "  // " << c.dst.name << " = " << (c.scale ? "acc · (" + print_expr(c.scale) + ")" : std::string("acc"))
      << (c.bias ? " + " + print_expr(c.bias) : std::string(""));
  if (c.epilogue) out << ", then " << print_expr(c.epilogue) << " with " << c.value << "[0] that value";
  out << ", rounded to " << dtype_name(dst_global->dtype) << " by the store\n";
  if (split > 1) {
    out << "  // split-K: the cluster's partial C tiles are all in shared memory; rank_ sums its " << bm * bn / split
        << " elements over the " << split << " blocks\n";
    out << "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n";
    out << "  for (int e_ = rank_ * " << bm * bn / split << " + threadIdx.x; e_ < (rank_ + 1) * " << bm * bn / split << "; e_ += "
        << kThreads << ") {\n";
  } else {
    out << "  #pragma unroll 4\n";
    out << "  for (int i_ = 0; i_ < " << bm * bn / kThreads << "; ++i_) {\n";
    out << "    const int e_ = threadIdx.x + i_ * " << kThreads << ";\n";
  }
  if (c_rows_fastest)
    out << "    const int row_ = e_ % BM_, col_ = e_ / BM_;\n";
  else
    out << "    const int row_ = e_ / BN_, col_ = e_ % BN_;\n";
  out << "    const int m_ = m0_ + row_, n_ = n0_ + col_;\n";
  out << "    if (m_ >= M_ || n_ >= N_) continue;\n";
  unflatten(out, "    ", p.row_axes, "m_", "m_rest_");
  unflatten(out, "    ", p.column_axes, "n_", "n_rest_");
  if (split > 1) {
    out << "    const unsigned local_ = static_cast<unsigned>(__cvta_generic_to_shared(c_s_ + row_ * " << c_stride << " + col_));\n";
    out << "    float value_ = 0.0f;\n";
    out << "    #pragma unroll\n";
    out << "    for (unsigned q_ = 0; q_ < " << split << "; ++q_) {\n";
    out << "      unsigned remote_;\n";
    out << "      float part_;\n";
    out << "      asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote_) : \"r\"(local_), \"r\"(q_));\n";
    out << "      asm volatile(\"ld.shared::cluster.f32 %0, [%1];\" : \"=f\"(part_) : \"r\"(remote_) : \"memory\");\n";
    out << "      value_ += part_;\n";
    out << "    }\n";
  } else {
    out << "    float value_ = c_s_[row_ * " << c_stride << " + col_];\n";
  }
  if (c.scale) out << "    value_ = value_ * (" << printer.print_float(c.scale) << ");\n";
  if (c.bias) out << "    value_ = value_ + (" << printer.print_float(c.bias) << ");\n";
  if (c.epilogue) out << "    value_ = " << printer.print_float(c.epilogue) << ";\n";
  out << "    solder::store(&" << dst.pointer << "[" << printer.offset(dst, index) << "], value_);\n";
  out << "  }\n";
  if (split > 1) {
    out << "  // no block leaves while another may still read its shared memory\n";
    out << "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n";
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
  GatheredGemmFit fit = fit_gathered_gemm(c, program.globals, &program.dims);
  if (!fit.problem) return refuse(fit.refusal);
  const GatheredGemmProblem& p = *fit.problem;
  const TileChoice tile = choose_tile(p);
  // K in steps of 64 where K is long and the tile small (fewer barriers and load round trips per
  // block; 16 KB of buffers at 64 x 64) or where one or two steps of 64 cover K, else 32.
  int bm = tile.bm, bn = tile.bn, bk = (p.k >= 256 || p.k <= 128) && bm <= 64 ? 64 : 32;
  if (auto o = tile_override()) bm = o->at(0), bn = o->at(1), bk = o->at(2);
  // Split-K across a thread-block cluster where the grid leaves SMs without a block and K is deep (a
  // deep convolution at batch 1: C7's 56 tiles of 36 K steps): S blocks of one cluster take S
  // consecutive ranges of the K steps, and after the loop each reduces 1/S of the tile's C from the
  // S blocks' shared memory (distributed shared memory) and runs the epilogue on it; no workspace.
  int split = 1;
  {
    const int64_t tiles = ((p.m + bm - 1) / bm) * ((p.n + bn - 1) / bn) * p.batch, steps = (p.k + bk - 1) / bk;
    while (split < 8 && tiles * split < kSmCount && steps >= 4 * split) split *= 2;
    if (auto o = split_override()) split = *o;
  }
  // 8 warps where the grid still leaves SMs without a block: each thread gathers half as much per
  // step, and the warps split the k-steps.
  int threads = ((p.m + bm - 1) / bm) * ((p.n + bn - 1) / bn) * p.batch * split < kSmCount ? 256 : 128;
  if (auto o = tile_override()) threads = o->at(3);
  const int kThreads = threads;
  const int64_t m_tiles = (p.m + bm - 1) / bm, n_tiles = (p.n + bn - 1) / bn;
  const int c_stride = bn + 4;  // floats per row of the epilogue's C tile
  const int64_t operand_bytes = 2LL * (bm + bn) * bk * 2, c_bytes = int64_t{bm} * c_stride * 4;
  const std::string name = cuda_identifier(kernel.name);

  Product pr;
  init_product(pr, program, c, p);
  pr.bm = bm, pr.bn = bn, pr.bk = bk, pr.split = split, pr.threads = kThreads;
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
  write_signature(out, program, name, kThreads);
  write_product(out, pr);
  write_store_epilogue(out, pr);
  out << "}\n";

  GatheredGemmKernel result;
  result.source = out.str();
  result.info.name = name;
  result.info.threads = kThreads;
  result.info.blocks = m_tiles * n_tiles * p.batch * split;
  result.info.cluster = split;
  result.info.shared_bytes = std::max(operand_bytes, c_bytes);
  result.bm = bm;
  result.bn = bn;
  result.bk = bk;
  return result;
}

std::optional<GatheredGemmKernel> write_gathered_chain_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<GatheredGemmKernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (kernel.body.size() != 2 || !kernel.body[0].as<ContractNode>() || !kernel.body[1].as<ContractNode>())
    return refuse("its body is not two whole contracts");
  const ContractNode& c1 = *kernel.body[0].as<ContractNode>();
  const ContractNode& c2 = *kernel.body[1].as<ContractNode>();
  GatheredChainFit fit = fit_gathered_chain(c1, c2, program.globals, &program.dims);
  if (!fit.problem) return refuse(fit.refusal);
  const GatheredGemmProblem& p1 = fit.problem->first;
  const GatheredGemmProblem& p2 = fit.problem->second;
  // The form the planner chose (the same rule, the same SM count). A grid the rule calls too narrow is
  // still chained here: the planner merged the two contracts (SOLDER_GATHERED_CHAIN=1 or another SM count).
  const int64_t sms = default_hardware().sm_count > 0 ? default_hardware().sm_count : kSmCount;
  GatheredChainForm form = choose_gathered_chain_form(*fit.problem, sms);
  if (!form.kind) {
    if (form.reason != GatheredChainRefusal::grid_too_narrow) return refuse(form.why);
    form = choose_gathered_chain_form(*fit.problem, sms, /*whatever_the_grid=*/true);
    if (!form.kind) return refuse(form.why);
  }
  const int S = form.cluster;  // ranks per row tile (1: one block)
  const bool clustered = *form.kind == GatheredChainFormKind::cluster;
  constexpr int kThreads = 256, bm = kGatheredChainRows, bk = 64;
  const int bn1 = static_cast<int>((p1.n + 63) / 64 * 64), kt2 = bn1 / 64;  // h's row tile: kt2 chunks of 64 columns
  // The second product's B rows staged on chip: all of N2 (one block), or this rank's slice (cluster).
  const int n2_rows = static_cast<int>(clustered ? gathered_chain_rank_columns(p2.n, S) : gathered_chain_b2_rows(p2.n));
  const int bn2 = n2_rows <= 128 ? n2_rows : 128, nt2 = n2_rows / bn2;
  const int64_t operand_bytes = 2LL * (bm + bn1) * bk * 2, c1_bytes = int64_t{bm} * (bn1 + 4) * 4, c2_bytes = int64_t{bm} * (bn2 + 4) * 4;
  const int64_t region = (std::max({operand_bytes, c1_bytes, c2_bytes}) + 127) / 128 * 128;
  const int64_t h_bytes = int64_t{bm} * bn1 * 2, w_bytes = int64_t{n2_rows} * kt2 * 64 * 2;
  const std::string name = cuda_identifier(kernel.name);

  Product one, two;
  init_product(one, program, c1, p1);
  one.bm = bm, one.bn = bn1, one.bk = bk, one.split = S, one.threads = kThreads;
  init_product(two, program, c2, p2);
  two.bm = bm, two.bn = bn2, two.bk = 64, two.split = 1, two.threads = kThreads;
  const std::string& T = one.T;
  const GlobalTensor* w2 = program.find_global(p2.b_leaves[0].load.as<LoadNode>()->tensor);

  std::ostringstream out;
  out << "// two implicit GEMMs chained in one kernel (gathered_gemm_writer.h): " << c1.dst.name << " = Σ " << print_expr(p1.a) << " · "
      << print_expr(p1.b) << ", then " << c2.dst.name << " = Σ " << print_expr(p2.a) << " · " << print_expr(p2.b) << "\n";
  if (clustered) {
    out << "// " << c1.dst.name << " stays in the cluster: " << S << " ranks per row tile of " << bm << " x " << p1.n << " (M " << p1.m << ", K "
        << p1.k << "), each over 1/" << S << " of the K steps; the partial tiles summed over distributed shared memory, rounded to "
        << mma_type_name(c1.type) << " and written into every rank; then each rank computes " << c2.dst.name << "'s " << bm << " x " << n2_rows
        << " slice of its " << p2.n << " columns (K " << p2.k << ") from it; " << w2->name << "'s slice staged (" << w_bytes / 1024 << " KB); "
        << kThreads << " threads, T = " << mma_type_name(c1.type) << "\n";
  } else {
    out << "// " << c1.dst.name << " stays on chip: each block computes its [" << bm << " x " << p1.n << "] row tile (M " << p1.m << ", K "
        << p1.k << "), rounded to " << mma_type_name(c1.type) << " in shared memory, then " << c2.dst.name << "'s " << bm << " x " << p2.n
        << " rows (K " << p2.k << ") from it; " << w2->name << " staged whole (" << w_bytes / 1024 << " KB); " << kThreads << " threads, T = "
        << mma_type_name(c1.type) << "\n";
  }
  out << "// implicit GEMM with gathered operands on mma.sync: tile BM " << bm << " x BN " << bn1 << " x BK " << bk << ", then BM " << bm
      << " x BN " << bn2 << " x BK 64 over " << nt2 << " column tile(s)\n";
  write_signature(out, program, name, kThreads);
  out << "  " << T << "* const h_s_ = reinterpret_cast<" << T << "*>(smem + " << region << ");  // " << c1.dst.name << "'s row tile: "
      << kt2 << " chunk(s) [BM][64], Swizzle<64>\n";
  out << "  " << T << "* const w2_s_ = h_s_ + " << bm * bn1 << ";  // " << w2->name << (clustered ? "'s slice" : "") << ": " << kt2
      << " chunk(s) [" << n2_rows << "][64], Swizzle<64>\n";
  if (clustered)
    out << "  const int chain_rank_ = blockIdx.x % " << S << ";  // this block's rank in its cluster: " << c2.dst.name << "'s columns [chain_rank_ * "
        << n2_rows << ", +" << n2_rows << ")\n";
  const bool grid_dependency = product_flops(p1) + product_flops(p2) <= kProgrammaticMaxFlops;
  const GlobalTensor* w2_global = program.find_global(w2->name);
  const bool w2_first = grid_dependency && w2_global && w2_global->role == GlobalRole::input;
  if (grid_dependency && !w2_first) write_grid_dependency(out);
  // The second product's B (this rank's rows of it), staged by cp.async before the first product starts
  // (its copies land while the first product's K steps run; waited for with theirs); before
  // griddepcontrol.wait where it is an input.
  {
    const int chunks = n2_rows * kt2 * 8;  // 16-byte chunks
    const std::string first_row = clustered ? "chain_rank_ * " + std::to_string(n2_rows) + " + " : "";
    out << "  // " << w2->name << " rows of K " << p2.k << " contiguous: copied 16 bytes at a time (cp.async), zero past N and K\n";
    out << "  for (int c_ = threadIdx.x; c_ < " << chunks << "; c_ += " << kThreads << ") {\n";
    out << "    const int row_ = c_ / " << kt2 * 8 << ", depth_ = (c_ % " << kt2 * 8 << ") * 8, n_ = " << first_row << "row_;\n";
    out << "    const bool ok_ = n_ < " << p2.n << " && depth_ < " << p2.k << ";\n";
    out << "    solder::tile::cp_async_16(w2_s_ + (depth_ / 64) * " << n2_rows * 64 << " + solder::tile::Swizzle<64>::offset(row_, depth_ % 64), "
        << one.arrays.at(w2->name).pointer << " + (ok_ ? n_ * " << p2.k << " + depth_ : 0), ok_);\n";
    out << "  }\n";
    out << "  solder::tile::cp_async_commit();\n";
  }
  if (w2_first) write_grid_dependency(out);
  write_product(out, one);
  // h's row tile: the first contract's scale, bias and epilogue, rounded to T (what storing h in its
  // declared dtype, T, does), zero past M and N1.
  out << "  // " << c1.dst.name << " = " << (c1.scale ? "acc · (" + print_expr(c1.scale) + ")" : std::string("acc"))
      << (c1.bias ? " + " + print_expr(c1.bias) : std::string(""));
  if (c1.epilogue) out << ", then " << print_expr(c1.epilogue) << " with " << c1.value << "[0] that value";
  auto h_value = [&](const std::string& pad, const std::string& sum) {
    out << pad << "const int m_ = m0_ + row_, n_ = col_;\n";
    out << pad << "float value_ = 0.0f;\n";
    out << pad << "if (m_ < M_ && n_ < N_) {\n";
    unflatten(out, pad + "  ", p1.row_axes, "m_", "m_rest_");
    unflatten(out, pad + "  ", p1.column_axes, "n_", "n_rest_");
    out << pad << "  value_ = " << sum << ";\n";
    if (c1.scale) out << pad << "  value_ = value_ * (" << one.printer.print_float(c1.scale) << ");\n";
    if (c1.bias) out << pad << "  value_ = value_ + (" << one.printer.print_float(c1.bias) << ");\n";
    if (c1.epilogue) out << pad << "  value_ = " << one.printer.print_float(c1.epilogue) << ";\n";
    out << pad << "}\n";
  };
  if (clustered) {
    // Each rank sums its 1/S of the tile's 16-byte chunks of h (8 columns) over the S ranks' partial
    // tiles, applies the epilogue, rounds to T and stores the chunk into every rank's h_s_. A cluster
    // barrier before (every partial tile written) and after (every chunk of h in place, every partial
    // read: the operand region is reused below).
    const int chunks = bm * bn1 / 8, per_rank = chunks / S;
    out << ", rounded to " << mma_type_name(c1.type) << ": the " << S << " ranks' partial tiles summed over distributed shared memory, "
        << per_rank << " chunks of 8 columns per rank, each stored into every rank's h_s_ (never stored to memory)\n";
    out << "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n";
    out << "  for (int q_ = rank_ * " << per_rank << " + threadIdx.x; q_ < (rank_ + 1) * " << per_rank << "; q_ += " << kThreads << ") {\n";
    out << "    const int row_ = q_ / " << bn1 / 8 << ", col0_ = (q_ % " << bn1 / 8 << ") * 8;\n";
    out << "    float sum_[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};\n";
    out << "    const unsigned partial_ = static_cast<unsigned>(__cvta_generic_to_shared(c_s_ + row_ * " << bn1 + 4 << " + col0_));\n";
    out << "    #pragma unroll\n";
    out << "    for (unsigned r_ = 0; r_ < " << S << "; ++r_) {\n";
    out << "      unsigned remote_;\n";
    out << "      float v_[8];\n";
    out << "      asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote_) : \"r\"(partial_), \"r\"(r_));\n";
    out << "      asm volatile(\"ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\" : \"=f\"(v_[0]), \"=f\"(v_[1]), \"=f\"(v_[2]), \"=f\"(v_[3]) : "
           "\"r\"(remote_) : \"memory\");\n";
    out << "      asm volatile(\"ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\" : \"=f\"(v_[4]), \"=f\"(v_[5]), \"=f\"(v_[6]), \"=f\"(v_[7]) : "
           "\"r\"(remote_ + 16) : \"memory\");\n";
    out << "      #pragma unroll\n";
    out << "      for (int j_ = 0; j_ < 8; ++j_) sum_[j_] += v_[j_];\n";
    out << "    }\n";
    out << "    __align__(16) " << T << " chunk_[8];\n";
    out << "    #pragma unroll\n";
    out << "    for (int j_ = 0; j_ < 8; ++j_) {\n";
    out << "      const int col_ = col0_ + j_;\n";
    h_value("      ", "sum_[j_]");
    out << "      chunk_[j_] = " << T << "(value_);\n";
    out << "    }\n";
    out << "    const uint4 bits_ = *reinterpret_cast<const uint4*>(chunk_);\n";
    out << "    const unsigned h_local_ = static_cast<unsigned>(__cvta_generic_to_shared(h_s_ + (col0_ / 64) * " << bm * 64
        << " + solder::tile::Swizzle<64>::offset(row_, col0_ % 64)));\n";
    out << "    #pragma unroll\n";
    out << "    for (unsigned r_ = 0; r_ < " << S << "; ++r_) {\n";
    out << "      unsigned remote_;\n";
    out << "      asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote_) : \"r\"(h_local_), \"r\"(r_));\n";
    out << "      asm volatile(\"st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};\" :: \"r\"(remote_), \"r\"(bits_.x), \"r\"(bits_.y), \"r\"(bits_.z), "
           "\"r\"(bits_.w) : \"memory\");\n";
    out << "    }\n";
    out << "  }\n";
    out << "  solder::tile::cp_async_wait<0>();\n";
    out << "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n";
  } else {
    out << ", rounded to " << mma_type_name(c1.type) << " into h_s_ (never stored)\n";
    out << "  #pragma unroll 4\n";
    out << "  for (int i_ = 0; i_ < " << bm * bn1 / kThreads << "; ++i_) {\n";
    out << "    const int e_ = threadIdx.x + i_ * " << kThreads << ", row_ = e_ / BN_, col_ = e_ % BN_;\n";
    h_value("    ", "c_s_[row_ * " + std::to_string(bn1 + 4) + " + col_]");
    out << "    h_s_[(col_ / 64) * " << bm * 64 << " + solder::tile::Swizzle<64>::offset(row_, col_ % 64)] = " << T << "(value_);\n";
    out << "  }\n";
    out << "  solder::tile::cp_async_wait<0>();\n";
    out << "  __syncthreads();\n";
  }
  // The second product: every column tile of N2 (this rank's) from h's tile and the staged B, each
  // stored by the second contract's epilogue.
  out << "  // " << c2.dst.name << ": " << nt2 << " column tile(s) of " << bn2 << ", K " << p2.k << " from h_s_\n";
  out << "  for (int j_ = 0; j_ < " << nt2 << "; ++j_) {\n";
  out << "    constexpr int BM_ = " << bm << ", BN_ = " << bn2 << ", M_ = " << p2.m << ", N_ = " << p2.n << ";\n";
  out << "    const int n0_ = " << (clustered ? "chain_rank_ * " + std::to_string(n2_rows) + " + " : std::string()) << "j_ * BN_;\n";
  unflatten(out, "    ", p2.batch_axes, "block_", "batch2_rest_");
  out << "    solder::tile::BlockGemm<" << T << ", BM_, BN_, 64, " << kThreads / 32 << "> gemm2_;\n";
  out << "    #pragma unroll\n";
  out << "    for (int kt_ = 0; kt_ < " << kt2 << "; ++kt_)\n";
  out << "      gemm2_.accumulate(solder::tile::SwizzledA<" << T << ", BM_, 64>{h_s_ + kt_ * " << bm * 64 << "}, solder::tile::SwizzledB<" << T
      << ", 64, BN_, true>{w2_s_ + kt_ * " << n2_rows * 64 << " + j_ * BN_ * 64});\n";
  out << "    float* const c_s_ = reinterpret_cast<float*>(smem);  // C [BM_][" << bn2 + 4 << "]\n";
  out << "    gemm2_.write(c_s_, " << bn2 + 4 << ", 1, false);\n";
  out << "    __syncthreads();\n";
  {
    std::ostringstream epilogue;
    write_store_epilogue(epilogue, two);
    // indented one level: it runs inside the column-tile loop
    std::string text = epilogue.str(), indented;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      indented += "  " + text.substr(start, end - start) + "\n";
      start = end + 1;
    }
    out << indented;
  }
  out << "    __syncthreads();\n";
  out << "  }\n";
  out << "}\n";

  GatheredGemmKernel result;
  result.source = out.str();
  result.info.name = name;
  result.info.threads = kThreads;
  result.info.blocks = gathered_chain_blocks(*fit.problem) * S;
  result.info.cluster = S;
  result.info.shared_bytes = region + h_bytes + w_bytes;
  result.info.programmatic = grid_dependency;
  result.bm = bm;
  result.bn = bn1;
  result.bk = bk;
  result.chain_bn = bn2;
  result.chain_cluster = S;
  return result;
}

}  // namespace solder
