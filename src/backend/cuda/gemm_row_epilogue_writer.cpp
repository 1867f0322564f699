#include "backend/cuda/gemm_row_epilogue_writer.h"

#include "solder/gemm/config.cuh"

#include <map>
#include <sstream>

#include "algebra/normal_form.h"
#include "backend/cuda/cuda_expr.h"
#include "contract/gemm_skeleton_fit.h"
#include "fusion/row_epilogue.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "plan/feasibility.h"
#include "plan/skeleton_choice.h"

namespace solder {
namespace {

constexpr int kSmCount = 132;  // H100 SXM; the persistent grid is capped by the work units

std::string identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "0.0f";
    case ReduceOp::max: return "(-solder::infinity())";
    default: return "solder::infinity()";  // min
  }
}

std::string combine(ReduceOp op, const std::string& a, const std::string& b) {
  switch (op) {
    case ReduceOp::sum: return "(" + a + ") + (" + b + ")";
    case ReduceOp::max: return "solder::gemm::max_nan(" + a + ", " + b + ")";
    default: return "solder::gemm::min_nan(" + a + ", " + b + ")";
  }
}

std::string quad(ReduceOp op, const std::string& a) {
  switch (op) {
    case ReduceOp::sum: return "solder::gemm::quad_sum(" + a + ")";
    case ReduceOp::max: return "solder::gemm::quad_max(" + a + ")";
    default: return "solder::gemm::quad_min(" + a + ")";
  }
}

}  // namespace

std::optional<GemmSkeletonKernel> write_gemm_row_epilogue_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<GemmSkeletonKernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  std::optional<RowEpilogueKernel> shape = match_row_epilogue_kernel(program, kernel, why);
  if (!shape) return std::nullopt;
  const RowEpilogueKernel& k = *shape;
  const ContractNode& tiled = *kernel.body[0].as<ContractNode>();
  // The same product over all rows (g = 0, t < M): what the skeleton runs.
  ContractNode whole = tiled;
  const std::map<std::string, Expr> first_tile = {{k.grid_var, make_int(0)}};
  auto untiled = [&](const Expr& e) { return e ? fold_constants(substitute_vars(e, first_tile)) : e; };
  whole.domain.axes = {Axis{k.row_var, k.m}, Axis{k.column_var, k.columns}};
  whole.domain.guard = Expr();
  for (auto& t : whole.terms) t = ContractTerm{untiled(t.a), untiled(t.b)};
  whole.scale = untiled(tiled.scale);
  whole.bias = untiled(tiled.bias);
  // The fit asks for a global destination: the rows as if stored (they never are).
  std::vector<GlobalTensor> globals = program.globals;
  globals.push_back(GlobalTensor{tiled.dst.name, {k.m, k.columns}, DType::f32, GlobalRole::scratch});
  GemmSkeletonFit fit = fit_gemm_skeleton(whole, globals);
  if (!fit.problem) return refuse("the product does not fit the GEMM skeleton: " + fit.refusal);
  const GemmSkeletonProblem& p = *fit.problem;
  if (p.batch != 1 || p.n != k.columns) return refuse("the product is batched or its columns are not the row's");
  SkeletonChoice choice = choose_skeleton_config(p, whole.type, DType::f32, false, 2, k.columns);
  if (!choice.chosen) return refuse(choice.why);
  const GemmConfig& chosen = choice.chosen->config;

  GemmSkeletonLaunch launch;
  launch.a = skeleton_launch_operand(program, p.a, p.a.k_major ? chosen.bm : chosen.bm);
  launch.b = skeleton_launch_operand(program, p.b, p.b.k_major ? chosen.bn / chosen.cluster_m : chosen.bn);
  if (!p.b.k_major && chosen.cluster_m > 1 && (chosen.bn / 64) % chosen.cluster_m != 0) launch.b.box_k = launch.b.tile_k / chosen.cluster_m;
  launch.m = static_cast<int>(p.m);
  launch.n = static_cast<int>(p.n);
  launch.k = static_cast<int>(p.k);
  launch.batch = 1;
  std::ostringstream config;
  config << "solder::gemm::Config<" << skeleton_dtype_name(p.a.dtype) << ", " << skeleton_dtype_name(p.b.dtype) << ", " << chosen.bm << ", "
         << chosen.bn << ", " << chosen.stages << ", " << (p.a.k_major ? "true" : "false") << ", " << (p.b.k_major ? "true" : "false");
  if (chosen.pingpong)
    config << ", " << chosen.cluster_m << ", 16, 1, 1, 1, true";
  else if (chosen.split_k > 1 || chosen.cluster_m > 1)
    config << ", " << chosen.cluster_m << ", 16, " << chosen.split_k;
  config << ">";
  launch.config = config.str();
  launch.stages = chosen.stages;
  launch.bm = chosen.bm;
  launch.bn = chosen.bn;
  launch.cluster_m = chosen.cluster_m;
  launch.cluster_n = 1;
  launch.plan = choice.why;
  launch.split_k = chosen.split_k;
  launch.pingpong = chosen.pingpong;
  {
    solder::gemm::GemmShape gs;
    gs.m = launch.m;
    gs.n = launch.n;
    gs.k = launch.k;
    gs.batch = 1;
    launch.workspace_floats = solder::gemm::splitk_workspace_floats(chosen.bm, chosen.bn, chosen.cluster_m, chosen.split_k, gs, 1);
    launch.counters = solder::gemm::splitk_counters(chosen.bm, chosen.bn, chosen.cluster_m, chosen.split_k, gs, 1);
  }

  // ---- The functor ----
  const std::string name = cuda_identifier(kernel.name);
  const std::string functor = name + "_epilogue_";
  std::map<std::string, CudaArray> arrays;
  std::ostringstream out;
  out << "#include <solder/gemm/sm90_gemm.cuh>\n";
  out << "// kernel " << kernel.name << ": computes";
  for (auto& d : kernel.definitions) out << " " << d;
  out << "\n// on the sm_90a GEMM skeleton with a row-reduction epilogue: " << launch.config << ", M " << p.m << ", N " << p.n << ", K " << p.k;
  out << "\n// the tile holds whole rows of " << tiled.dst.name << " (BN " << chosen.bn << " >= N " << p.n
      << "): the row statements run on the accumulator, and " << tiled.dst.name << " is never stored";
  if (chosen.split_k > 1)
    out << "\n// split-K " << chosen.split_k << ": partials merged in the kernel through a global workspace of " << launch.workspace_floats
        << " f32 and " << launch.counters << " counters, before the row epilogue";
  if (chosen.pingpong) out << "\n// ping-pong schedule: two consumer warpgroups take the block's tiles in turn";
  out << "\n// tile chosen by the " << choice.why << " (the row epilogue's arithmetic is not in the model)";
  out << "\n// A = " << p.a.tensor << (p.a.k_major ? " (K-major)" : " (M-major)") << ", B = " << p.b.tensor
      << (p.b.k_major ? " (K-major)" : " (N-major)") << ", T = " << mma_type_name(whole.type) << "\n";
  out << "struct " << functor << " {\n";
  for (auto& g : program.globals) {
    out << "  " << (g.role == GlobalRole::input ? "const " : "") << cuda_element_type(g.dtype) << "* " << cuda_identifier(g.name) << ";\n";
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, -1, ""};
  }
  // The row tile and its copies: the lane's current value; per-row buffers: locals.
  arrays[k.tile] = CudaArray{"", {k.rows, k.columns}, DType::f32, false, -1, "value_"};
  for (auto& a : k.aliases) arrays[a] = CudaArray{"", {k.rows, k.columns}, DType::f32, false, -1, "value_"};
  auto local = [&](const std::string& buffer) { return cuda_identifier(buffer) + "_"; };
  for (const Buffer& b : kernel.buffers)
    if (!arrays.count(b.name) && b.shape.size() == 1) arrays[b.name] = CudaArray{"", b.shape, b.dtype, false, -1, local(b.name)};
  CudaExprPrinter printer;
  printer.array = [&](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  printer.dims = program.dims;

  out << "  static constexpr bool row_reduction = true;\n";
  out << "  template <class Row_>\n";
  out << "  __device__ void row(int batch_, int row_, bool row_in_, const Row_& row_values_) const {\n";
  out << "    (void)batch_;\n";
  out << "    // the row's place in the kernel's tiles (a row past M reads row 0 and stores nothing)\n";
  out << "    const long long " << cuda_identifier(k.grid_var) << " = (row_in_ ? row_ : 0) / " << k.rows << "LL;\n";
  out << "    const long long " << cuda_identifier(k.row_var) << " = (row_in_ ? row_ : 0) % " << k.rows << "LL;\n";
  out << "    (void)" << cuda_identifier(k.grid_var) << ";\n    (void)" << cuda_identifier(k.row_var) << ";\n";
  out << "    const bool store_ = row_in_ && threadIdx.x % 4 == 0;  // the quad's first lane stores the row's results\n";
  out << "    (void)store_;\n";
  // The per-row values and lists, as locals.
  for (const Buffer& b : kernel.buffers) {
    if (b.name == k.tile || std::find(k.aliases.begin(), k.aliases.end(), b.name) != k.aliases.end()) continue;
    const char* type = b.dtype == DType::i32 ? "int" : "float";
    if (b.shape.size() == 1)
      out << "    " << type << " " << local(b.name) << " = 0;\n";
    else if (b.shape.size() == 2)
      out << "    " << type << " " << local(b.name) << "[" << b.shape[1] << "] = {};\n";
  }
  // The loop over the lane's values of the row, with `axis` the column and value_ the row tile's value.
  auto lane_loop = [&](const std::string& axis, const std::string& body) {
    out << "#pragma unroll\n";
    out << "    for (int i_ = 0; i_ < Row_::Count; ++i_) {\n";
    out << "      const long long " << cuda_identifier(axis) << " = row_values_.col(i_);\n";
    out << "      const float value_ = row_values_.v[i_];\n";
    out << "      (void)" << cuda_identifier(axis) << ";\n      (void)value_;\n";
    out << body;
    out << "    }\n";
  };
  size_t first = 1 + k.aliases.size();
  for (size_t i = first; i < kernel.body.size(); ++i) {
    const Stmt& s = kernel.body[i];
    if (!s.get()->comment.empty()) out << "    // " << s.get()->comment << "\n";
    if (s.as<BarrierNode>()) continue;
    if (auto f = s.as<FillNode>()) {
      const Buffer* b = kernel.find_buffer(f->buffer);
      const std::string v = b->dtype == DType::i32 ? std::to_string(static_cast<long long>(f->value)) : cuda_float_literal(f->value);
      if (b->shape.size() == 1)
        out << "    " << local(f->buffer) << " = " << v << ";\n";
      else
        out << "    for (int r_ = 0; r_ < " << b->shape[1] << "; ++r_) " << local(f->buffer) << "[r_] = " << v << ";\n";
      continue;
    }
    if (auto r = s.as<ReduceNode>()) {
      const std::string axis = r->reduce_axes[0].var;
      if (r->op == ReduceOp::topk) {
        const Buffer* list = kernel.find_buffer(r->dst.name);
        const int64_t kk = list->shape[1];
        out << "    {\n";
        out << "    float key_[Row_::Count];\n    int index_[Row_::Count];\n    bool valid_[Row_::Count];\n";
        std::ostringstream body;
        body << "      valid_[i_] = row_values_.in(i_);\n";
        body << "      key_[i_] = valid_[i_] ? " << printer.print_float(r->value) << " : 0.0f;\n";
        body << "      index_[i_] = valid_[i_] ? static_cast<int>(" << (r->index_value ? printer.print_int(r->index_value) : std::string("0"))
             << ") : -1;\n";
        lane_loop(axis, body.str());
        out << "    float weight_[" << kk << "];\n    int which_[" << kk << "];\n";
        out << "    solder::gemm::quad_topk<" << kk << ">(key_, index_, valid_, weight_, which_);\n";
        out << "    for (int r_ = 0; r_ < " << kk << "; ++r_) " << local(r->dst.name) << "[r_] = weight_[r_];\n";
        if (!r->index_dst.name.empty())
          out << "    for (int r_ = 0; r_ < " << kk << "; ++r_) " << local(r->index_dst.name) << "[r_] = which_[r_];\n";
        out << "    }\n";
        continue;
      }
      const std::string dst = local(r->dst.name);
      out << "    {\n    float part_ = " << identity_of(r->op) << ";\n";
      lane_loop(axis, "      if (row_values_.in(i_)) part_ = " + combine(r->op, "part_", printer.print_float(r->value)) + ";\n");
      out << "    part_ = " << quad(r->op, "part_") << ";\n";
      out << "    " << dst << " = " << (r->accumulate ? combine(r->op, dst, "part_") : std::string("part_")) << ";\n    }\n";
      continue;
    }
    if (auto m = s.as<MapNode>()) {
      out << "    " << local(m->dst.name) << " = " << printer.print_float(m->value) << ";\n";
      continue;
    }
    if (auto c = s.as<CopyNode>()) {
      const CudaArray& dst = arrays.at(c->dst.name);
      std::vector<std::string> index;
      for (auto& e : c->dst.index) index.push_back(printer.print_int(e));
      const std::string guard = c->domain.guard ? " && (" + printer.print_bool(c->domain.guard) + ")" : "";
      if (c->domain.axes.size() == 1) {
        out << "    if (store_" << guard << ") solder::store(&" << dst.pointer << "[" << printer.offset(dst, index) << "], " << local(c->src.name)
            << ");\n";
      } else {
        const Axis& rank = c->domain.axes[1];
        out << "    for (int r_ = 0; r_ < " << rank.extent << "; ++r_) {\n";
        out << "      const long long " << cuda_identifier(rank.var) << " = r_;\n";
        out << "      if (store_" << guard << ") solder::store(&" << dst.pointer << "[" << printer.offset(dst, index) << "], " << local(c->src.name)
            << "[r_]);\n";
        out << "    }\n";
      }
      continue;
    }
    return refuse("statement " + std::to_string(i) + " is not a row statement");
  }
  out << "  }\n};\n";
  out << "using " << name << "_config_ = " << launch.config << ";\n";
  out << "SOLDER_GEMM_KERNEL(" << name << ", " << name << "_config_, " << functor << ")\n";

  GemmSkeletonKernel result;
  result.source = out.str();
  result.info.name = name;
  result.info.threads = 128 * ((chosen.pingpong ? 2 : chosen.bm / 64) + 1);  // Config::Threads
  result.info.cluster = chosen.cluster_m;
  const int64_t units = (((p.m + chosen.bm - 1) / chosen.bm + chosen.cluster_m - 1) / chosen.cluster_m) * chosen.split_k;
  int64_t resident = kSmCount;
  if (chosen.cluster_m > 1) resident = std::min<int64_t>(resident, concurrent_ctas(chosen, DType::f32, default_hardware()));
  result.info.blocks = std::max<int64_t>(1, std::min<int64_t>(units, resident / chosen.cluster_m)) * chosen.cluster_m;
  result.info.shared_bytes = solder::gemm::gemm_smem_bytes(chosen.bm, chosen.bn, chosen.stages, 1, chosen.pingpong);
  result.info.gemm = launch;
  result.info.programmatic = choice.chosen->cost.total_us <= kProgrammaticLaunchMaxUs;
  return result;
}

}  // namespace solder
