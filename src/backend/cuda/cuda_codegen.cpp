#include "backend/cuda/cuda_codegen.h"

#include "backend/cuda/attention_dual.h"
#include "backend/cuda/contract_view.h"
#include "backend/cuda/gemm_prologue_writer.h"
#include "backend/cuda/gathered_gemm_writer.h"
#include "backend/cuda/gemm_row_epilogue_writer.h"
#include "backend/cuda/gemm_skeleton_writer.h"
#include "backend/cuda/gemv_stream_writer.h"
#include "backend/cuda/online_stream_writer.h"
#include "backend/cuda/tf32_split_writer.h"
#include "backend/cuda/transpose_copy_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "backend/cuda/cuda_names.h"
#include "backend/cuda/kernel_writer.h"
#include "ir/expr_visitor.h"
#include "backend/cuda/mma_stream_codegen.h"
#include "ir/diagnostics.h"
#include "ir/printer.h"
#include "kernel/kernel_verifier.h"
#include "plan/roofline.h"
#include "support/json.h"
#include "support/refusal.h"

namespace solder {

std::string_view cuda_element_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f16: return "__half";
    case DType::bf16: return "__nv_bfloat16";
    case DType::f8e4m3: return "__nv_fp8_e4m3";
    case DType::f8e5m2: return "__nv_fp8_e5m2";
    case DType::i32: return "int";
    case DType::boolean: return "unsigned char";
  }
  return "float";
}

std::string cuda_global_parameters(const std::vector<GlobalTensor>& globals) {
  std::string text;
  for (size_t i = 0; i < globals.size(); ++i) {
    const GlobalTensor& g = globals[i];
    text += i ? ",\n    " : "\n    ";
    if (g.role == GlobalRole::input) text += "const ";
    text += std::string(cuda_element_type(g.dtype)) + "* __restrict__ " + cuda_identifier(g.name);
  }
  return text;
}


std::string launch_limit_violation(const GeneratedKernel& k) {
  constexpr int64_t kMaxBlocksX = (int64_t(1) << 31) - 1;
  constexpr int64_t kMaxSharedBytes = 227 * 1024;
  constexpr int kMaxCluster = 16, kMaxThreads = 1024;
  const std::string kernel = "kernel '" + k.name + "' ";
  if (k.blocks < 1 || k.blocks > kMaxBlocksX)
    return kernel + "needs a grid of " + std::to_string(k.blocks) + " blocks; the limit is 2^31 - 1 = " +
           std::to_string(kMaxBlocksX) + " along x";
  if (k.cluster < 1 || k.cluster > kMaxCluster)
    return kernel + "needs clusters of " + std::to_string(k.cluster) + " blocks; the limit is " + std::to_string(kMaxCluster);
  if (k.blocks % k.cluster != 0)
    return kernel + "has " + std::to_string(k.blocks) + " blocks, not a multiple of its cluster size " + std::to_string(k.cluster);
  if (k.threads < 1 || k.threads > kMaxThreads)
    return kernel + "needs " + std::to_string(k.threads) + " threads per block; the limit is " + std::to_string(kMaxThreads);
  if (k.shared_bytes < 0 || k.shared_bytes > kMaxSharedBytes)
    return kernel + "needs " + std::to_string(k.shared_bytes) + " bytes of shared memory per block; the limit is 227 KB (" +
           std::to_string(kMaxSharedBytes) + " bytes)";
  return "";
}

namespace {

// The contracts of a kernel in program order, each with the trips of the loops around it (a loop
// whose bounds are not constants counts its constant end, an upper bound, or 1).
struct ContractAt {
  const ContractNode* contract = nullptr;
  int64_t steps = 1;
};

void collect_contracts(const Block& body, int64_t steps, std::vector<ContractAt>& out) {
  auto constant = [](const Expr& e) -> std::optional<int64_t> {
    if (auto c = e.as<ConstNode>(); c && c->is_integer) return static_cast<int64_t>(c->value);
    return std::nullopt;
  };
  for (auto& s : body) {
    if (auto c = s.as<ContractNode>()) {
      out.push_back({c, steps});
    } else if (auto f = s.as<ForNode>()) {
      auto begin = constant(f->begin), end = constant(f->end);
      int64_t trips = end ? std::max<int64_t>(1, *end - begin.value_or(0)) : 1;
      collect_contracts(f->body, steps * trips, out);
    } else if (auto i = s.as<IfNode>()) {
      collect_contracts(i->then_body, steps, out);
      collect_contracts(i->else_body, steps, out);
    }
  }
}

std::vector<ContractAt> contracts_of(const Kernel& kernel) {
  std::vector<ContractAt> out;
  collect_contracts(kernel.body, 1, out);
  return out;
}

// The schedule of `c` without its skeleton: names, extents (per block and step), T and the roofline
// floor of the kernel's whole work on it (every block, every step).
ContractionSchedule describe_contract(const Kernel& kernel, const ContractAt& at, const KernelProgram& program) {
  const ContractNode& c = *at.contract;
  ContractionSchedule s;
  s.kernel = kernel.name;
  s.contraction = c.dst.name;
  s.type = std::string(mma_type_name(c.type));
  s.blocks = kernel.blocks();
  s.steps = at.steps;
  auto in = [](const std::vector<std::string>& axes, const std::string& var) { return std::find(axes.begin(), axes.end(), var) != axes.end(); };
  for (auto& a : c.domain.axes) (in(c.row_axes, a.var) ? s.m : in(c.column_axes, a.var) ? s.n : s.batch) *= a.extent;
  for (auto& a : c.reduce_axes) s.k *= a.extent;
  GemmProblem problem;
  problem.batch = s.batch * s.blocks * s.steps;
  problem.m = s.m;
  problem.n = s.n;
  problem.k = s.k;
  problem.type = c.type;
  const GlobalTensor* dst = program.find_global(c.dst.name);
  problem.output = dst ? dst->dtype : DType::f32;
  const ContractionFloor floor = contraction_floor(problem, default_hardware());
  if (s.blocks == 1 && s.steps == 1) {
    s.figures = floor_text(floor);
  } else {
    // Inside a fused kernel the operands' traffic is the kernel's, not this contraction's: the tensor
    // floor only.
    char text[96];
    std::snprintf(text, sizeof text, "tensor floor %.3g us over the kernel's blocks and steps", floor.tensor_us);
    s.figures = text;
  }
  return s;
}

// The comment header of a kernel: what runs each of its contractions.
std::string schedule_header(const std::string& kernel, const std::vector<ContractionSchedule>& schedule) {
  std::ostringstream out;
  int count = 0;
  for (auto& s : schedule) {
    if (s.kernel != kernel) continue;
    ++count;
    out << "// contraction " << s.contraction << " (M " << s.m << ", N " << s.n << ", K " << s.k;
    if (s.batch > 1) out << ", batch " << s.batch;
    out << ", T " << s.type << "; " << s.blocks << (s.blocks == 1 ? " block" : " blocks");
    if (s.steps > 1) out << " x " << s.steps << " steps";
    out << "): " << s.skeleton;
    if (!s.tile.empty()) out << ", tile " << s.tile;
    if (!s.reason.empty()) out << (s.scalar() ? "; scalar because " : "; ") << s.reason;
    out << "\n//   cost model: " << s.figures << "\n";
  }
  if (count == 0) return "// ---- kernel " + kernel + ": no contraction ----\n";
  return "// ---- kernel " + kernel + ": " + std::to_string(count) + (count == 1 ? " contraction" : " contractions") + " ----\n" + out.str();
}

// The globals one launch of `kernels` reads and writes. An attention-skeleton launch also writes the
// module's work counter (device/solder/attention/sm90_attention.cuh: one for every attention kernel
// of a module, whose launches must not overlap), named here as no global can be.
GlobalUse launch_globals(const KernelProgram& program, std::vector<const Kernel*> kernels, bool attention_skeleton) {
  GlobalUse use;
  for (const Kernel* k : kernels) {
    GlobalUse one = global_use(program, *k);
    use.reads.insert(one.reads.begin(), one.reads.end());
    use.writes.insert(one.writes.begin(), one.writes.end());
    use.exclusive = use.exclusive || one.exclusive;
  }
  if (attention_skeleton) use.writes.insert("(attention work counter)");
  return use;
}

}  // namespace

std::string contraction_schedule_text(const std::vector<ContractionSchedule>& schedule) {
  std::ostringstream out;
  for (auto& s : schedule) {
    out << s.kernel << " " << s.contraction << ": " << s.skeleton;
    if (!s.tile.empty()) out << ", tile " << s.tile;
    out << ", T " << s.type << ", M " << s.m << " N " << s.n << " K " << s.k;
    if (s.batch > 1) out << " batch " << s.batch;
    out << " (" << s.blocks << (s.blocks == 1 ? " block" : " blocks") << (s.steps > 1 ? " x " + std::to_string(s.steps) + " steps" : "") << ")";
    if (!s.reason.empty()) out << (s.scalar() ? "; scalar because " : "; ") << s.reason;
    out << "; " << s.figures << "\n";
  }
  return out.str();
}

std::string contraction_schedule_json(const std::vector<ContractionSchedule>& schedule) {
  JsonWriter json;
  json.begin_array();
  for (auto& s : schedule) {
    json.begin_object();
    json.key("kernel").value(s.kernel).key("contraction").value(s.contraction).key("skeleton").value(s.skeleton);
    json.key("tile").value(s.tile).key("type").value(s.type);
    json.key("batch").value(s.batch).key("m").value(s.m).key("n").value(s.n).key("k").value(s.k);
    json.key("blocks").value(s.blocks).key("steps").value(s.steps);
    json.key("scalar").value(s.scalar()).key("reason").value(s.reason).key("figures").value(s.figures);
    json.end_object();
  }
  json.end_array();
  return json.str();
}

GeneratedModule generate_cuda(const KernelProgram& input, const CudaCodegenOptions& options) {
  verify_kernel_program(input);
  // Every name as the C++ source spells it (cuda_names.h): keywords, CUDA names and the generator's
  // own locals cannot collide with the program's. Contracts then become the reduces the writers know
  // (contract_view.h): with casts for the generic writer, without on computed operands for the
  // attention emitter (it rounds P itself); the skeleton writer reads the contracts.
  const KernelProgram named = with_cuda_names(input);
  const KernelProgram program = contracts_as_reduces(named), attention_view = contracts_as_reduces(named, false);
  GeneratedModule module;
  std::ostringstream out;
  out << "// Generated by Solder from program '" << program.name << "' (" << program.kernels.size() << " kernel"
      << (program.kernels.size() == 1 ? "" : "s") << ").\n";
  out << "#include <cooperative_groups.h>\n#include <solder/runtime.cuh>\n#include <solder/tile/tile.cuh>\n\n";
  for (auto& g : program.globals) module.parameters.push_back(g.name);
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const Kernel& k = program.kernels[i];
    // Named as the source names them (cuda_names.h).
    const std::vector<ContractAt> named_contracts = contracts_of(named.kernels[i]);
    std::vector<ContractionSchedule> schedule;
    for (const ContractAt& c : named_contracts) schedule.push_back(describe_contract(named.kernels[i], c, named));
    std::string source;
    std::optional<AttentionSkeletonKernel> attention;
    std::string dual_refusal;
    // two attention kernels as one on the skeleton's dual mode (attention_dual.h: differential attention)
    if (options.attention_skeleton_off.empty() && i + 1 < program.kernels.size())
      if (auto dual = generate_attention_dual_kernel(attention_view, named, i, &dual_refusal)) {
        for (const ContractAt& c : contracts_of(named.kernels[i + 1])) schedule.push_back(describe_contract(named.kernels[i + 1], c, named));
        for (auto& s : schedule) {
          s.kernel = dual->info.name;  // both kernels' contractions run in the dual launch
          s.skeleton = ContractionSchedule::kAttentionSkeleton;
          s.tile = dual->info.attention->config;
          s.blocks = dual->info.blocks;
          s.reason = dual->tiles_and_skipping;
        }
        module.kernels.push_back(dual->info);
        module.kernels.back().globals = launch_globals(named, {&named.kernels[i], &named.kernels[i + 1]}, true);
        out << schedule_header(named.kernels[i + 1].name, schedule) << dual->source << "\n";
        module.contractions.insert(module.contractions.end(), schedule.begin(), schedule.end());
        ++i;  // the second kernel is this launch
        continue;
      }
    // decode attention, one query row per block, on the online-state stream (online_stream_writer.h)
    std::string online_refusal;
    bool online_recognized = false;
    if (auto online = write_online_stream_kernel(named, named.kernels[i], &online_refusal, &online_recognized)) {
      for (auto& s : schedule) {
        s.skeleton = kOnlineStreamSkeleton;
        s.tile = online->tile;
        s.blocks = online->info.blocks;
        s.steps = 1;
      }
      source = online->source;
      module.kernels.push_back(online->info);
    } else if (auto gemv = write_gemv_stream_kernel(named, named.kernels[i], nullptr)) {
      for (auto& s : schedule) {
        s.skeleton = kGemvStreamSkeleton;
        s.tile = std::to_string(gemv->vectors * 8) + " outputs x " + std::to_string(256 / gemv->vectors) + " slices of K per block" +
                 (gemv->split > 1 ? ", split-K over a cluster of " + std::to_string(gemv->split) + " (DSM merge)" : std::string());
        s.blocks = gemv->info.blocks;
      }
      source = gemv->source;
      module.kernels.push_back(gemv->info);
    } else if (auto gemm = write_gemm_skeleton_kernel(named, named.kernels[i], nullptr)) {
      // the GEMM skeleton for whole contractions (the unfused lowering's, gemm_skeleton_writer.h)
      for (auto& s : schedule) {
        const GemmSkeletonLaunch& g = *gemm->info.gemm;
        s.skeleton = ContractionSchedule::kGemmSkeleton;
        s.tile = "BM " + std::to_string(g.bm ? g.bm : g.a.tile_rows) + " x BN " + std::to_string(g.bn ? g.bn : g.b.tile_rows) + " x BK " +
                 std::to_string(g.a.tile_k) + ", " + std::to_string(g.stages) + " stages" +
                 (g.split_k > 1 ? ", split-K " + std::to_string(g.split_k) : "") +
                 (g.cluster_m * g.cluster_n > 1 ? ", cluster " + std::to_string(g.cluster_m) + "x" + std::to_string(g.cluster_n) +
                                                      (g.cluster_m > 1 && g.cluster_n > 1 ? " (A and B multicast)"
                                                       : g.cluster_m > 1                    ? " (B multicast)"
                                                                                            : " (A multicast)")
                                                : "") +
                 (g.pingpong ? ", ping-pong" : "");
        // The extents as the launch runs them (a one-operand batch's leading axis is its batch).
        s.batch = g.batch;
        s.m = g.m;
        s.n = g.n;
        const std::string prefix = "cost model: ";
        s.figures = (g.plan.rfind(prefix, 0) == 0 ? g.plan.substr(prefix.size()) : g.plan) + "; " + s.figures;
        s.blocks = gemm->info.blocks;
      }
      source = gemm->source;
      module.kernels.push_back(gemm->info);
    } else if (auto rows = write_gemm_row_epilogue_kernel(named, named.kernels[i], nullptr)) {
      // a product with its rows reduced in the skeleton's epilogue (fusion/row_epilogue.h): one launch
      for (auto& s : schedule) {
        const GemmSkeletonLaunch& g = *rows->info.gemm;
        s.skeleton = ContractionSchedule::kGemmSkeleton;
        s.tile = "BM " + std::to_string(g.bm) + " x BN " + std::to_string(g.bn) + " x BK " + std::to_string(g.a.tile_k) + ", " +
                 std::to_string(g.stages) + " stages" + (g.split_k > 1 ? ", split-K " + std::to_string(g.split_k) : "") +
                 (g.pingpong ? ", ping-pong" : "") + ", row-reduction epilogue";
        s.m = g.m;
        s.n = g.n;
        const std::string prefix = "cost model: ";
        s.figures = (g.plan.rfind(prefix, 0) == 0 ? g.plan.substr(prefix.size()) : g.plan);
        s.blocks = rows->info.blocks;
        s.steps = 1;
      }
      source = rows->source;
      module.kernels.push_back(rows->info);
    } else if (auto prologue = write_gemm_prologue_kernel(named, named.kernels[i], nullptr)) {
      // side reductions + operand prologue on the GEMM skeleton's prologue path (wgmma SS)
      for (auto& s : schedule) {
        const GemmSkeletonLaunch& g = *prologue->info.gemm;
        s.skeleton = ContractionSchedule::kGemmPrologue;
        s.tile = "BM " + std::to_string(g.a.tile_rows) + " x BN " + std::to_string(g.b.tile_rows) + " x BK " + std::to_string(g.a.tile_k) + ", " +
                 std::to_string(g.stages) + " stages";
        s.blocks = prologue->info.blocks;
      }
      source = prologue->source;
      module.kernels.push_back(prologue->info);
    } else if (auto chain = write_gathered_chain_kernel(named, named.kernels[i], nullptr)) {
      // two whole contracts chained (the planner's decision, whole_contractions.h): the first's result
      // stays on chip as the second's A
      for (size_t c = 0; c < schedule.size(); ++c) {
        ContractionSchedule& s = schedule[c];
        s.skeleton = ContractionSchedule::kGatheredGemm;
        s.tile = c == 0 ? "BM " + std::to_string(chain->bm) + " x BN " + std::to_string(chain->bn) + " x BK " + std::to_string(chain->bk) +
                              ", 2 buffers, " + std::to_string(chain->info.threads) + " threads, " +
                              (chain->chain_cluster > 1 ? "split-K over a cluster of " + std::to_string(chain->chain_cluster) +
                                                              ", result summed and kept in distributed shared memory"
                                                        : std::string("result kept on chip"))
                        : "BM " + std::to_string(chain->bm) + " x BN " + std::to_string(chain->chain_bn) + " x BK 64, A on chip, " +
                              (chain->chain_cluster > 1 ? "N split over the cluster's " + std::to_string(chain->chain_cluster) + " ranks, B's slice staged, "
                                                        : std::string("B staged whole, ")) +
                              std::to_string(chain->info.threads) + " threads";
        s.blocks = chain->info.blocks;
      }
      source = chain->source;
      module.kernels.push_back(chain->info);
    } else if (auto gathered = write_gathered_gemm_kernel(named, named.kernels[i], nullptr)) {
      // a whole contract the skeleton does not stage (a convolution's im2col operand, a
      // concatenation along K): an implicit GEMM with gathered operands on mma.sync
      for (auto& s : schedule) {
        s.skeleton = ContractionSchedule::kGatheredGemm;
        s.tile = "BM " + std::to_string(gathered->bm) + " x BN " + std::to_string(gathered->bn) + " x BK " + std::to_string(gathered->bk) +
                 ", 2 buffers, " + std::to_string(gathered->info.threads) + " threads";
        s.blocks = gathered->info.blocks;
      }
      source = gathered->source;
      module.kernels.push_back(gathered->info);
    } else if (std::string skeleton_refusal = options.attention_skeleton_off, refusal;
               skeleton_refusal.empty() &&
               (attention = generate_attention_skeleton_kernel(attention_view, attention_view.kernels[i], named.kernels[i], &skeleton_refusal))) {
      // the attention skeleton (device/solder/attention) for the online softmax it computes
      for (auto& s : schedule) {
        s.skeleton = ContractionSchedule::kAttentionSkeleton;
        s.tile = attention->info.attention->config;
        s.blocks = attention->info.blocks;
        s.reason = attention->tiles_and_skipping;  // the work tiles and which key tiles are skipped by what rule
      }
      source = attention->source;
      module.kernels.push_back(attention->info);
    } else if (auto mma = generate_mma_stream_kernel(attention_view, attention_view.kernels[i], &refusal)) {
      // the tensor-core emitter for streamed two-contraction kernels (it rounds P itself): the
      // attention kernels the skeleton refuses
      const bool wgmma = mma->summary.find(" wgmma m64") != std::string::npos;
      const std::string tile = mma->summary.substr(0, mma->summary.find(" per step"));
      for (auto& s : schedule) {
        s.skeleton = wgmma ? ContractionSchedule::kAttentionWgmma : ContractionSchedule::kAttentionMmaSync;
        s.tile = tile;
        if (!skeleton_refusal.empty()) s.reason = "attention skeleton not used: " + skeleton_refusal;
      }
      source = "// attention skeleton not used for " + k.name + ": " + skeleton_refusal + "\n" + mma->source;
      module.kernels.push_back(mma->info);
    } else if (auto split = write_tf32_split_kernel(named, named.kernels[i])) {
      // the 3xTF32 split of a whole contraction's operand (fusion/tf32_split.h) as gemm/tf32_split.cuh's tile
      source = split->source;
      module.kernels.push_back(split->info);
    } else if (auto transpose = write_transpose_copy_kernel(named, named.kernels[i])) {
      // a transposing conversion copy (fusion/padded_operands.h) in 16-byte vectors through a shared tile
      source = transpose->source;
      module.kernels.push_back(transpose->info);
    } else {
      // the generic writer for the rest: block_gemm where a reduce is a product it takes, else scalar
      generic::KernelWriter writer(program, k);
      // (the skeleton's reason where it differs from the emitter's: a kernel of the attention shape
      // that both refuse, e.g. one whose score reads a [rows, keys] tile the skeleton cannot take)
      const bool say_skeleton = options.attention_skeleton_off.empty() && !skeleton_refusal.empty() && skeleton_refusal != refusal;
      source = (say_skeleton ? "// attention skeleton not used for " + k.name + ": " + skeleton_refusal + "\n" : std::string()) +
               "// tensor-core emitter not used for " + k.name + ": " + refusal + "\n" + writer.write();
      module.kernels.push_back(writer.info());
      for (size_t c = 0; c < schedule.size(); ++c) {
        // The view computes a contract into its destination or into a fresh `<dst>_dot` tile.
        const std::string& dst = named_contracts[c].contract->dst.name;
        const generic::KernelWriter::ContractionChoice* choice = nullptr;
        for (auto& ch : writer.contraction_choices())
          if (ch.dst == dst || ch.dst.rfind(dst + "_dot", 0) == 0) choice = &ch;
        ContractionSchedule& s = schedule[c];
        if (choice && choice->tensor_cores) {
          s.skeleton = ContractionSchedule::kMmaSync;
          s.tile = std::to_string(choice->m) + " x " + std::to_string(choice->n) + " x " + std::to_string(choice->k) +
                   (choice->stages > 0 ? ", " + std::to_string(choice->stages) + " stages" : std::string(", one step"));
          s.type = std::string(dtype_name(choice->type));
        } else {
          s.skeleton = ContractionSchedule::kScalar;
          s.reason = choice ? choice->refusal : "the generic writer's reduce loop (no product it runs on tensor cores)";
        }
        if (say_skeleton) s.reason += (s.reason.empty() ? "" : "; ") + std::string("attention skeleton not used: ") + skeleton_refusal;
        if (online_recognized) s.reason += (s.reason.empty() ? "" : "; ") + std::string("online-state stream not used: ") + online_refusal;
      }
      if (online_recognized) source = "// online-state stream not used for " + k.name + ": " + online_refusal + "\n" + source;
    }
    module.kernels.back().globals = launch_globals(named, {&named.kernels[i]}, module.kernels.back().attention.has_value());
    out << schedule_header(named.kernels[i].name, schedule) << source << "\n";
    module.contractions.insert(module.contractions.end(), schedule.begin(), schedule.end());
  }
  for (auto& k : module.kernels)
    if (std::string why = launch_limit_violation(k); !why.empty())
      throw Refusal("program '" + program.name + "' cannot run on the GPU: " + why +
                    "; use smaller sizes (--dim NAME=VALUE, --small) or other tiles (--tile-rows, --streaming-elements)");
  module.source = out.str();
  if (module.source.find("solder_checked_index(") != std::string::npos) {
    // The index-check prologue goes after the includes, before the first kernel.
    size_t at = module.source.find("#include <solder/tile/tile.cuh>\n\n");
    at += std::string_view("#include <solder/tile/tile.cuh>\n\n").size();
    module.source.insert(at, kCheckedIndexPrologue);
    module.checks_indices = true;
  }
  return module;
}

}  // namespace solder
