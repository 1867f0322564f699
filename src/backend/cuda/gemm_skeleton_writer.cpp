#include "backend/cuda/gemm_skeleton_writer.h"

#include "solder/gemm/config.cuh"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "contract/gemm_skeleton_fit.h"
#include "ir/printer.h"
#include "plan/feasibility.h"
#include "plan/skeleton_choice.h"

namespace solder {
namespace {

// solder::gemm::Dtype of a narrow float dtype.
int skeleton_dtype(DType t) {
  switch (t) {
    case DType::bf16: return 0;
    case DType::f16: return 1;
    case DType::f8e4m3: return 2;
    case DType::f32: return 4;  // tf32: the values are tf32 already (fusion/tf32_split.h)
    default: return 3;  // f8e5m2
  }
}

constexpr int kSmCount = 132;               // H100 SXM; the persistent grid is capped by the tiles

struct Tile {
  int bm, bn, stages, split_k;
  int cluster_m, cluster_n;  // ClusterM (B multicast along M) and ClusterN (A multicast along N)
  int64_t tiles;
  bool pingpong;  // Config::Pingpong: two consumer warpgroups on alternate tiles (BM 64)
};

}  // namespace

int gemm_tail_split(int64_t tile_units, int clusters, int k_tiles, const std::string& setting) {
  if (setting.empty() || setting == "0") return 1;
  const int tail = solder::gemm::tail_tile_units(tile_units, clusters);
  if (setting == "auto") {
    if (tail == 0) return 1;
    int best = 1;
    double best_time = 1.0;  // the unsplit last wave: one tile's time
    for (int s = 2; s <= 8; ++s) {
      if (k_tiles < 4 * s) break;
      const double time = static_cast<double>((static_cast<int64_t>(tail) * s + clusters - 1) / clusters) / s;
      if (time < best_time - 1e-9) {
        best = s;
        best_time = time;
      }
    }
    return best_time <= 0.8 ? best : 1;
  }
  char* end = nullptr;
  const long value = std::strtol(setting.c_str(), &end, 10);
  if (!end || *end != '\0' || value < 1 || value > 16) {
    std::fprintf(stderr, "solder: SOLDER_GEMM_TAIL_SPLIT='%s' is not auto or a split in 1..16; ignored\n", setting.c_str());
    return 1;
  }
  return tail > 0 && value > 1 && k_tiles >= 4 * value ? static_cast<int>(value) : 1;
}

int gemm_row_store_mode_from_env() {
  const char* env = std::getenv("SOLDER_GEMM_EPILOGUE");
  if (!env || !*env) return -1;
  const std::string v(env);
  if (v == "direct") return 0;
  if (v == "registers") return 1;
  if (v == "staged") return 2;
  std::fprintf(stderr, "solder: SOLDER_GEMM_EPILOGUE='%s' is not one of direct, registers, staged; ignored\n", env);
  return -1;
}

GemmSkeletonLaunch::Operand skeleton_launch_operand(const KernelProgram& program, const GemmSkeletonOperand& o, int tile_rows) {
  GemmSkeletonLaunch::Operand r;
  for (size_t i = 0; i < program.globals.size(); ++i)
    if (program.globals[i].name == o.tensor) {
      r.global = i;
      break;
    }
  r.dtype = skeleton_dtype(o.dtype);
  r.k_major = o.k_major;
  r.rows = o.rows;
  r.k = o.k;
  r.ld = o.ld;
  r.batch = o.batch;
  r.batch_stride = o.batch_stride;
  r.offset = o.offset;
  r.tile_rows = tile_rows;
  r.tile_k = 128 / dtype_bytes(o.dtype);
  return r;
}

const char* skeleton_dtype_name(DType t) {
  switch (t) {
    case DType::bf16: return "solder::gemm::Dtype::bf16";
    case DType::f16: return "solder::gemm::Dtype::f16";
    case DType::f8e4m3: return "solder::gemm::Dtype::e4m3";
    case DType::f32: return "solder::gemm::Dtype::tf32";
    default: return "solder::gemm::Dtype::e5m2";
  }
}

std::optional<GemmSkeletonKernel> write_gemm_skeleton_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<GemmSkeletonKernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (kernel.body.size() != 1 || !kernel.body[0].as<ContractNode>()) return refuse("its body is not one whole contract");
  const ContractNode& c = *kernel.body[0].as<ContractNode>();
  if (c.type == MmaType::tf32x3) return refuse("T = 3xtf32 not split into tf32 operands (fusion/tf32_split.h runs before the writer)");
  GemmSkeletonFit fit = fit_gemm_skeleton(c, program.globals);
  if (!fit.problem) return refuse(fit.refusal);
  const GemmSkeletonProblem& p = *fit.problem;
  const DType dst_dtype = program.find_global(c.dst.name)->dtype;
  // Row stores (sm90_gemm.cuh: value() and row_pointer(); the rule: gemm_row_stores): the skeleton then
  // stores 16 bytes of a row per lane. SOLDER_GEMM_ROW_STORE=0 leaves the hooks out (A/B runs: the
  // element-wise stores of operator()).
  bool row_store = gemm_row_stores(c, p, dst_dtype);
  if (const char* env = std::getenv("SOLDER_GEMM_ROW_STORE"); env && std::string(env) == "0") row_store = false;
  const int env_mode = gemm_row_store_mode_from_env();
  SkeletonChoice choice = choose_skeleton_config(p, c.type, dst_dtype, row_store, env_mode < 0 ? 2 : env_mode);
  if (!choice.chosen) return refuse(choice.why);
  const GemmConfig& chosen = choice.chosen->config;
  const Tile tile{chosen.bm, chosen.bn, chosen.stages, chosen.split_k, chosen.cluster_m, chosen.cluster_n,
                  ((p.m + chosen.bm - 1) / chosen.bm) * ((p.n + chosen.bn - 1) / chosen.bn) * p.batch, chosen.pingpong};
  const int cluster = tile.cluster_m * tile.cluster_n;
  const std::string plan_note = choice.why;
  const bool dual = p.b2.has_value();  // a paired contract: the dual-B configuration
  // The persistent grid: at most the clusters resident at once (one block per SM; the DSM table's
  // measured count for clusters, which GPC boundaries limit), never more than the work units.
  const int64_t tile_units = (((p.m + tile.bm - 1) / tile.bm + tile.cluster_m - 1) / tile.cluster_m) *
                             (((p.n + tile.bn - 1) / tile.bn + tile.cluster_n - 1) / tile.cluster_n) * p.batch;
  const int64_t units = tile_units * tile.split_k;
  int64_t resident = kSmCount;
  if (cluster > 1) {
    GemmConfig per_block = chosen;
    per_block.bn = tile.bn * (dual ? 2 : 1);  // the ring's bytes per stage, as the cost model sees them
    resident = std::min<int64_t>(resident, concurrent_ctas(per_block, program.find_global(c.dst.name)->dtype, default_hardware()));
  }
  const int64_t clusters = std::max<int64_t>(1, std::min<int64_t>(units, resident / cluster));
  // The tail split (A/B knob $SOLDER_GEMM_TAIL_SPLIT, off by default): the cooperative single-B
  // schedule without split-K only (config.cuh's TailSplit limits).
  int tail_split = 1;
  if (!tile.pingpong && tile.split_k == 1 && !dual) {
    const char* env = std::getenv("SOLDER_GEMM_TAIL_SPLIT");
    const int64_t bk = 128 / dtype_bytes(p.a.dtype);  // Config::BK
    tail_split = gemm_tail_split(tile_units, static_cast<int>(clusters), static_cast<int>((p.k + bk - 1) / bk),
                                 env ? std::string(env) : std::string());
  }
  const int tail_units = tail_split > 1 ? solder::gemm::tail_tile_units(tile_units, static_cast<int>(clusters)) : 0;

  GemmSkeletonLaunch launch;
  auto operand = [&](const GemmSkeletonOperand& o, int tile_rows) { return skeleton_launch_operand(program, o, tile_rows); };
  // The TMA boxes (Config::ABoxRows / BBoxRows): a K-major operand shared by a cluster is loaded in
  // slices, one per block.
  launch.a = operand(p.a, p.a.k_major ? tile.bm / tile.cluster_n : tile.bm);
  launch.b = operand(p.b, p.b.k_major ? tile.bn / tile.cluster_m : tile.bn);
  // An N-major B shared along M whose 64-wide boxes do not deal out (Config::BSplitK): K rows of each box.
  if (!p.b.k_major && tile.cluster_m > 1 && (tile.bn / 64) % tile.cluster_m != 0) launch.b.box_k = launch.b.tile_k / tile.cluster_m;
  if (dual) launch.b2 = operand(*p.b2, tile.bn);
  if (p.second) {  // K ranges: the second range's maps have the first's boxes
    launch.a_second = operand(p.second->a, launch.a.tile_rows);
    launch.a_second->box_k = launch.a.box_k;
    launch.b_second = operand(p.second->b, launch.b.tile_rows);
    launch.b_second->box_k = launch.b.box_k;
    launch.k_second = static_cast<int>(p.second->k);
  }
  launch.m = static_cast<int>(p.m);
  launch.n = static_cast<int>(p.n);
  launch.k = static_cast<int>(p.first_k());
  launch.batch = static_cast<int>(p.batch);
  launch.broadcast_a = p.batch > 1 && p.a.batch == 1;
  launch.broadcast_b = p.batch > 1 && p.b.batch == 1;
  std::ostringstream config;
  config << "solder::gemm::Config<" << skeleton_dtype_name(p.a.dtype) << ", " << skeleton_dtype_name(p.b.dtype) << ", " << tile.bm << ", "
         << tile.bn << ", " << tile.stages << ", " << (p.a.k_major ? "true" : "false") << ", " << (p.b.k_major ? "true" : "false");
  // Then ClusterM, GroupM 16 (the default), SplitK, BOperands, ClusterN, Pingpong, as far as they differ
  // from the defaults.
  if (tile.pingpong)
    config << ", " << tile.cluster_m << ", 16, 1, 1, " << tile.cluster_n << ", true";
  else if (tile.cluster_n > 1) config << ", " << tile.cluster_m << ", 16, " << tile.split_k << ", " << (dual ? 2 : 1) << ", " << tile.cluster_n;
  else if (dual) config << ", " << tile.cluster_m << ", 16, 1, 2";
  else if (tail_split > 1) config << ", " << tile.cluster_m << ", 16, 1, 1, " << tile.cluster_n << ", false, " << tail_split;
  else if (tile.split_k > 1 || tile.cluster_m > 1) config << ", " << tile.cluster_m << ", 16, " << tile.split_k;
  config << ">";
  launch.config = config.str();
  launch.stages = tile.stages;
  launch.bm = tile.bm;
  launch.bn = tile.bn;
  launch.cluster_m = tile.cluster_m;
  launch.cluster_n = tile.cluster_n;
  launch.plan = plan_note;
  launch.split_k = tile.split_k;
  launch.pingpong = tile.pingpong;
  {
    solder::gemm::GemmShape shape;
    shape.m = launch.m;
    shape.n = launch.n;
    shape.k = launch.k;
    shape.batch = launch.batch;
    launch.workspace_floats = solder::gemm::splitk_workspace_floats(tile.bm, tile.bn, tile.cluster_m, tile.split_k, shape, tile.cluster_n);
    launch.counters = solder::gemm::splitk_counters(tile.bm, tile.bn, tile.cluster_m, tile.split_k, shape, tile.cluster_n);
  }
  launch.tail_split = tail_split;
  if (tail_split > 1) {
    launch.workspace_floats = solder::gemm::tail_split_workspace_floats(tile.bm, tile.bn, cluster, tail_split, tail_units);
    launch.counters = solder::gemm::tail_split_counters(tile.bm, cluster, tail_split, tail_units);
  }

  // The epilogue: every global as a member (the launcher passes their pointers in this order).
  const std::string name = cuda_identifier(kernel.name);
  const std::string functor = name + "_epilogue_";  // generator names end in one underscore (cuda_names.h)
  std::map<std::string, CudaArray> arrays;
  std::ostringstream out;
  out << "#include <solder/gemm/sm90_gemm.cuh>\n";
  out << "// kernel " << kernel.name << ": computes";
  for (auto& d : kernel.definitions) out << " " << d;
  out << "\n// on the sm_90a GEMM skeleton: " << launch.config << ", M " << p.m << ", N " << p.n << ", K " << p.k;
  if (p.second) out << " in two K ranges, " << p.first_k() << " + " << p.second->k;
  if (p.batch > 1) out << ", batch " << p.batch;
 if (cluster > 1)
    out << "\n// cluster " << tile.cluster_m << "x" << tile.cluster_n << ": "
        << (tile.cluster_m > 1 && tile.cluster_n > 1
                ? "A's tile multicast along each tile-row and B's along each tile-column of the cluster"
            : tile.cluster_m > 1 ? "B's tile multicast into the blocks of adjacent tile-rows"
                                 : "A's tile multicast into the blocks of adjacent tile-columns");
  if (tile.split_k > 1)
    out << "\n// split-K " << tile.split_k << ": partials merged in the kernel through a global workspace of " << launch.workspace_floats
        << " f32 and " << launch.counters << " counters (the launcher's)";
  if (tail_split > 1)
    out << "\n// tail split " << tail_split << ": the last " << tail_units << " of " << tile_units << " tile units (a partial wave of "
        << clusters << " persistent clusters) split over K in " << tail_split << ", merged through a global workspace of "
        << launch.workspace_floats << " f32 and " << launch.counters << " counters (the launcher's; SOLDER_GEMM_TAIL_SPLIT)";
  if (tile.pingpong)
    out << "\n// ping-pong schedule: two consumer warpgroups take the block's tiles in turn, one's epilogue under the "
           "other's main loop";
  out << "\n// tile chosen by the " << plan_note;
  out << "\n// A = " << p.a.tensor << (p.a.k_major ? " (K-major)" : " (M-major)") << ", B = " << p.b.tensor
      << (p.b.k_major ? " (K-major)" : " (N-major)");
  if (dual) out << ", B2 = " << p.b2->tensor << " (dual-B: " << p.a.tensor << " is read once for both products)";
  if (p.second)
    out << "; then A = " << p.second->a.tensor << (p.second->a.k_major ? " (K-major)" : " (M-major)") << " with B = " << p.second->b.tensor
        << " from its row " << p.first_k() << " (the second K range: the producer switches tensor maps at K tile "
        << "⌈" << p.first_k() << " / BK⌉)";
  out << ", T = " << mma_type_name(c.type) << "\n";
  out << "struct " << functor << " {\n";
  for (auto& g : program.globals) {
    out << "  " << (g.role == GlobalRole::input ? "const " : "") << cuda_element_type(g.dtype) << "* " << cuda_identifier(g.name) << ";\n";
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true};
  }
  CudaExprPrinter printer;
  printer.array = [&](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  printer.dims = program.dims;
  if (c.epilogue) arrays[c.value] = CudaArray{"(&value_)", {1}, DType::f32, false};
  if (dual) arrays[c.pair_value] = CudaArray{"(&pair_value_)", {1}, DType::f32, false};
  const CudaArray& dst = arrays.at(c.dst.name);
  std::vector<std::string> index;
  for (auto& i : c.dst.index) index.push_back(printer.print_int(i));
  out << "  // " << c.dst.name << " = " << (c.scale ? "acc · (" + print_expr(c.scale) + ")" : std::string("acc"))
      << (c.bias ? " + " + print_expr(c.bias) : std::string(""));
  if (c.epilogue) out << ", then " << print_expr(c.epilogue) << " with " << c.value << "[0] that value";
  if (dual) out << " and " << c.pair_value << "[0] the paired product (acc2)";
  out << ", rounded to " << dtype_name(dst.dtype) << "\n";
  out << "  __device__ void operator()(int batch_, int row_, int col_, float acc_" << (dual ? ", float acc2_" : "") << ") const {\n";
  // The flattened row and column back into the program's axes (row-major in A's and B's order).
  auto unflatten = [&](const std::vector<std::string>& axes, const std::vector<int64_t>& extents, const char* flat) {
    if (axes.size() == 1) {
      out << "    const long long " << cuda_identifier(axes[0]) << " = " << flat << ";\n";
      return;
    }
    out << "    long long " << flat << "rest_ = " << flat << ";\n";
    for (size_t i = axes.size(); i-- > 0;) {
      if (i == 0) {
        out << "    const long long " << cuda_identifier(axes[i]) << " = " << flat << "rest_;\n";
      } else {
        out << "    const long long " << cuda_identifier(axes[i]) << " = " << flat << "rest_ % " << extents[i] << "LL; " << flat << "rest_ /= "
            << extents[i] << "LL;\n";
      }
    }
  };
  unflatten(p.row_axes, p.row_extents, "row_");
  unflatten(p.column_axes, p.column_extents, "col_");
  if (!p.batch_axes.empty()) unflatten(p.batch_axes, p.batch_extents, "batch_");
  out << "    (void)batch_;\n";
  out << "    float value_ = acc_;\n";
  if (dual) out << "    float pair_value_ = acc2_;\n";
  if (c.scale) out << "    value_ = value_ * (" << printer.print_float(c.scale) << ");\n";
  if (c.bias) out << "    value_ = value_ + (" << printer.print_float(c.bias) << ");\n";
  if (c.epilogue) out << "    value_ = " << printer.print_float(c.epilogue) << ";\n";
  out << "    solder::store(&" << dst.pointer << "[" << printer.offset(dst, index) << "], value_);\n";
  out << "  }\n";
  if (row_store) {
    // The same value without the store, and the row's first element (the column axis at 0).
    out << "  // row stores: the skeleton stores 16 bytes of a row of " << c.dst.name << " per lane (value(), row_pointer())\n";
    out << "  using element = " << cuda_element_type(dst.dtype) << ";\n";
    // SOLDER_GEMM_EPILOGUE=direct|registers|staged: the skeleton's row-store schedule for A/B runs
    // (sm90_gemm.cuh, row_store_mode_of: 0, 1, 2); unset, the skeleton's default (staged).
    if (env_mode >= 0) out << "  static constexpr int row_store_mode = " << env_mode << ";  // SOLDER_GEMM_EPILOGUE\n";
    out << "  __device__ float value(int batch_, int row_, int col_, float acc_) const {\n";
    unflatten(p.row_axes, p.row_extents, "row_");
    unflatten(p.column_axes, p.column_extents, "col_");
    if (!p.batch_axes.empty()) unflatten(p.batch_axes, p.batch_extents, "batch_");
    out << "    (void)batch_;\n";
    out << "    float value_ = acc_;\n";
    if (c.scale) out << "    value_ = value_ * (" << printer.print_float(c.scale) << ");\n";
    if (c.bias) out << "    value_ = value_ + (" << printer.print_float(c.bias) << ");\n";
    if (c.epilogue) out << "    value_ = " << printer.print_float(c.epilogue) << ";\n";
    out << "    return value_;\n  }\n";
    out << "  __device__ element* row_pointer(int batch_, int row_) const {\n";
    unflatten(p.row_axes, p.row_extents, "row_");
    if (!p.batch_axes.empty()) unflatten(p.batch_axes, p.batch_extents, "batch_");
    out << "    (void)batch_;\n";
    out << "    const long long " << cuda_identifier(p.column_axes[0]) << " = 0;\n";
    out << "    return &" << dst.pointer << "[" << printer.offset(dst, index) << "];\n  }\n";
  }
  out << "};\n";
  out << "using " << name << "_config_ = " << launch.config << ";\n";
  out << (dual ? "SOLDER_GEMM_DUAL_KERNEL(" : p.second ? "SOLDER_GEMM_RANGES_KERNEL(" : "SOLDER_GEMM_KERNEL(") << name << ", " << name << "_config_, " << functor << ")\n";

  GemmSkeletonKernel result;
  result.source = out.str();
  result.info.name = name;
  const int threads = 128 * ((tile.pingpong ? 2 : tile.bm / 64) + 1);  // Config::Threads
  result.info.threads = threads;
  // The persistent grid (clusters, above): the tail split's tail is counted on the same grid.
  result.info.cluster = cluster;
  result.info.blocks = clusters * cluster;
  // The ring, its barriers and the staged epilogue's buffer where it fits (config.cuh: Config::SmemBytes).
  result.info.shared_bytes = solder::gemm::gemm_smem_bytes(tile.bm, tile.bn, tile.stages, dual ? 2 : 1, tile.pingpong);
  result.info.gemm = launch;
  // gemm_body waits for the previous kernel before any global access, so any of its kernels may take
  // programmatic dependent launch; it is given to the short ones only (kProgrammaticLaunchMaxUs).
  result.info.programmatic = choice.chosen->cost.total_us <= kProgrammaticLaunchMaxUs;
  return result;
}

}  // namespace solder
