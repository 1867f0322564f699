// The attention skeleton's dual mode for two kernels of one program (attention_dual.h).
#include "backend/cuda/attention_dual.h"

#include <algorithm>
#include <cstdlib>
#include <regex>

#include "backend/cuda/mma_stream_writer.h"
#include "kernel/kernel_printer.h"

namespace solder {

namespace {

// The text of `struct <name> { ... };` in a generated source ("" when absent).
std::string struct_text(const std::string& source, const std::string& name) {
  const size_t at = source.find("struct " + name + " {");
  if (at == std::string::npos) return "";
  const size_t end = source.find("\n};\n", at);
  return end == std::string::npos ? "" : source.substr(at, end + 4 - at);
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
  return text;
}

bool same_operand(const GemmSkeletonLaunch::Operand& a, const GemmSkeletonLaunch::Operand& b) {
  return a.global == b.global && a.dtype == b.dtype && a.rows == b.rows && a.k == b.k && a.ld == b.ld && a.batch == b.batch &&
         a.batch_stride == b.batch_stride && a.tile_rows == b.tile_rows && a.tile_k == b.tile_k;
}

// The dual Config's shared memory (DualConfig::SmemBytes): two Q tiles, Stages K stages of two tiles and
// V stages of one, 2 + 4·Stages mbarriers, 1 KB of alignment slack.
// The most key tiles of a row the dual mode takes (see generate_attention_dual_kernel).
constexpr int64_t kDualMaxKeyTiles = 32;

int64_t dual_smem_bytes(int head_dim, int bn, int stages, int q_buffers = 1) {
  return q_buffers * 2LL * 64 * head_dim * 2 + static_cast<int64_t>(stages) * 3 * bn * head_dim * 2 + 8LL * (2 * q_buffers + 4 * stages) + 1024;
}

}  // namespace

std::optional<AttentionSkeletonKernel> generate_attention_dual_kernel(const KernelProgram& program, const KernelProgram& named, size_t first,
                                                                      std::string* refusal) {
  auto refuse = [&](const std::string& why) -> std::optional<AttentionSkeletonKernel> {
    if (refusal) *refusal = why;
    return std::nullopt;
  };
  const char* forced_dual = std::getenv("SOLDER_ATTN_DUAL");
  const std::string dual_knob = forced_dual ? forced_dual : "";
  if (dual_knob == "0") return refuse("SOLDER_ATTN_DUAL=0");
  if (const char* forced = std::getenv("SOLDER_MMA_PATH"); forced && *forced && std::string(forced) != "skeleton")
    return refuse(std::string("SOLDER_MMA_PATH=") + forced);
  if (first + 1 >= program.kernels.size()) return refuse("no second kernel");
  AttentionSkeletonKernel a, b;
  try {
    mma_stream::MmaStreamWriter writer(program, program.kernels[first]);
    a = writer.write_skeleton(named.kernels[first]);
  } catch (const mma_stream::Refusal& r) {
    return refuse("the first kernel is not on the attention skeleton: " + r.why);
  }
  const GlobalTensor* x = program.find_global(a.output);
  if (!x || x->role != GlobalRole::intermediate || x->dtype != DType::f32)
    return refuse("the first kernel stores " + a.output + ", not an f32 intermediate");
  if (!a.plain_epilogue) return refuse("the first kernel stores more than o / Σp");
  try {
    mma_stream::MmaStreamWriter writer(program, program.kernels[first + 1]);
    writer.set_dual_first(a.output);
    b = writer.write_skeleton(named.kernels[first + 1]);
  } catch (const mma_stream::Refusal& r) {
    return refuse("the second kernel is not on the attention skeleton: " + r.why);
  }
  if (!b.combine) return refuse("the second kernel does not read " + a.output + " at the stored element alone");
  // No other kernel reads the intermediate (the dual kernel never stores it).
  const std::regex read("(^|[^A-Za-z0-9_])" + a.output + "\\[");
  for (size_t k = 0; k < program.kernels.size(); ++k)
    if (k != first && k != first + 1 && std::regex_search(print_kernel(program.kernels[k]), read))
      return refuse("kernel " + program.kernels[k].name + " reads " + a.output + " too");
  for (auto& g : program.globals)
    if (g.name == a.output && g.role != GlobalRole::intermediate) return refuse(a.output + " is not an intermediate");

  const AttentionSkeletonLaunch& la = *a.info.attention;
  const AttentionSkeletonLaunch& lb = *b.info.attention;
  if (la.bias_tile || la.bias_column || lb.bias_tile || lb.bias_column) return refuse("a staged bias");
  if (la.batch != lb.batch || la.heads != lb.heads || la.heads_kv != lb.heads_kv || la.seq_q != lb.seq_q || la.seq_k != lb.seq_k)
    return refuse("the two kernels' batch, heads or sequence lengths differ");
  if (!same_operand(la.q, lb.q) || !same_operand(la.k, lb.k) || !same_operand(la.v, lb.v)) return refuse("the two kernels read different Q, K or V tensors");
  if (la.q_heads == 0 || la.q_heads != lb.q_heads || lb.q_head0 != la.q_head0 + la.heads)
    return refuse("the second kernel's Q is not the first's at the next fixed lead index");
  if (la.k_heads == 0 || la.k_heads != lb.k_heads || lb.k_head0 != la.k_head0 + la.heads_kv)
    return refuse("the second kernel's K is not the first's at the next fixed lead index");
  if (la.v_heads != lb.v_heads || la.v_head0 != lb.v_head0) return refuse("the two kernels read V at different lead indices");
  if (a.head_dim != b.head_dim || a.bn != b.bn || a.f16 != b.f16) return refuse("the two kernels' tiles differ");
  if (a.head_dim != 64 && a.head_dim != 128) return refuse("head dim " + std::to_string(a.head_dim) + " (the dual mode takes 64 and 128)");
  const std::string name_a = cuda_identifier(program.kernels[first].name), name_b = cuda_identifier(program.kernels[first + 1].name);
  for (const char* part : {"_score_", "_mask_"}) {
    const std::string ta = struct_text(a.source, name_a + part), tb = struct_text(b.source, name_b + part);
    if (ta.empty() || tb.empty() || replace_all(ta, name_a + part, name_b + part) != tb)
      return refuse(std::string("the two kernels' ") + (part[1] == 's' ? "score" : "mask") + " functors differ");
    for (const char* trait : {"kAffine", "kBias", "kStagedBias", "kDataTiles"})
      if (tb.find(trait) != std::string::npos) return refuse(std::string("the ") + trait + " functor (the dual mode takes plain scores and index masks)");
  }
  const std::string epilogue = struct_text(b.source, name_b + "_epilogue_");
  if (epilogue.empty() || epilogue.find("kPreload") != std::string::npos) return refuse("the second kernel's epilogue preloads its inputs");

  // Rows over kDualMaxKeyTiles key tiles keep the two kernels: there the dual kernel's 1.5× K/V bytes per
  // MMA (each consumer loads its own K tile) cost more than a0's round trip and the second launch save
  // (measured: bench/NOTES.md, tenth session, diff-one; on persistent blocks with the staged combine still
  // 2477.7 us against the two kernels' 2355.9 at hd64 S 16k, H100, 2026-11-28, one round). $SOLDER_ATTN_DUAL=1
  // takes it anyway.
  const int64_t key_tiles = (static_cast<int64_t>(la.seq_k) + a.bn - 1) / a.bn;
  if (key_tiles > kDualMaxKeyTiles && dual_knob != "1")
    return refuse(std::to_string(key_tiles) + " key tiles per row (the dual mode takes at most " + std::to_string(kDualMaxKeyTiles) +
                  ": two kernels are faster on long rows; SOLDER_ATTN_DUAL=1 forces it)");
  // The tile: the skeleton's BN, as many stages as fit (at most 4).
  const int head_dim = a.head_dim, bn = a.bn;
  int stages = 4;
  while (stages > 2 && dual_smem_bytes(head_dim, bn, stages) > 232448) --stages;
  if (dual_smem_bytes(head_dim, bn, stages) > 232448) return refuse("two stages of both K tiles and V do not fit in shared memory");
  // The staged combine (sm90_attention_dual.cuh, "Staged combine": each consumer half of the columns,
  // x exchanged at shared addresses, the rows staged in shared memory, 16-byte row stores) where the
  // epilogue offers it, on persistent blocks, one per SM: the producer loads the next work tile's Q (into
  // a second Q buffer where it fits beside the ring: hd64) and K/V stages while the consumers combine and
  // store the current one. Measured (H100, 2026-11-28, same call, two rounds, the second alone on the GPU):
  // hd64 S 1k 205.9 -> 178.4 us, S 4k 653.4 -> 636.5, hd128 S 1k 281.6 -> 274.4 (its round alone: 270.8
  // -> 276.3 at the median, 270.3 -> 245.5 at the replays' minimum: a tie within its two clock speeds);
  // the staged combine on one block per tile alone: 201.0 / 660.0 / 277.2. $SOLDER_ATTN_DUAL_PERSISTENT=0
  // keeps one block per work tile with the staged combine, $SOLDER_ATTN_DUAL_COMBINE=pairs the previous
  // kernel (consumer 0's pair-by-pair combine(), one block per work tile) (A/B runs).
  const char* combine_knob = std::getenv("SOLDER_ATTN_DUAL_COMBINE");
  const bool staged_combine = b.staged_combine && !(combine_knob && std::string(combine_knob) == "pairs");
  constexpr int64_t kSmCount = 132;  // H100 SXM
  const char* persistent_knob = std::getenv("SOLDER_ATTN_DUAL_PERSISTENT");
  const bool persistent = staged_combine && !(persistent_knob && std::string(persistent_knob) == "0");
  const int q_buffers = persistent && dual_smem_bytes(head_dim, bn, stages, 2) <= 232448 ? 2 : 1;
  // Clusters of two persistent blocks (sm90_attention_dual.cuh, DualConfig::Cluster): the ranks take the
  // two 64-row work tiles of a 128-row pair of one head, and each K/V tile is read from L2 once per
  // cluster and multicast into both blocks (the dual kernel's K/V bytes per MMA halved: 0.75× a 128-row
  // kernel's instead of 1.5×). $SOLDER_ATTN_DUAL_CLUSTER=2 takes them at head dim 64 (A/B; =1 the single
  // blocks): the cluster Config's consumers have 232 registers (the producer 40), which hd128's spill.
  const char* cluster_knob = std::getenv("SOLDER_ATTN_DUAL_CLUSTER");
  const int cluster = persistent && head_dim == 64 && cluster_knob && std::string(cluster_knob) == "2" ? 2 : 1;
  const std::string config = std::string("solder::attention::DualConfig<") + (a.f16 ? "solder::gemm::Dtype::f16" : "solder::gemm::Dtype::bf16") + ", " +
                             std::to_string(head_dim) + ", " + std::to_string(bn) + ", " + std::to_string(stages) +
                             (persistent ? ", true, true, " + std::to_string(q_buffers) + (cluster > 1 ? ", " + std::to_string(cluster) : "") + ">"
                              : staged_combine ? ", true>"
                                               : ">");
  const int64_t tiles = static_cast<int64_t>(la.batch) * la.heads * ((la.seq_q + 63) / 64);
  // the work items: work tiles, or with clusters pairs of them (one per cluster)
  const int64_t items = static_cast<int64_t>(la.batch) * la.heads * (((la.seq_q + 63) / 64 + cluster - 1) / cluster);

  // The source: the second kernel's functors (combine() in its epilogue) on the dual skeleton.
  const size_t body = b.source.find("struct " + name_b + "_score_ {");
  const size_t using_at = b.source.find("using " + name_b + "_config_ = ");
  if (body == std::string::npos || using_at == std::string::npos) return refuse("the second kernel's source has no functors (please report)");
  AttentionSkeletonKernel result;
  const std::string lead = "Q and K at fixed lead indices " + std::to_string(la.q_head0 / la.heads) + " and " + std::to_string(lb.q_head0 / la.heads) +
                           " of " + std::to_string(la.q_heads / la.heads) + ", V shared";
  result.summary = config + " (64 query rows x " + std::to_string(bn) + " keys per tile, " + std::to_string(stages) +
                   "-stage K ring of both halves' K tiles and V ring, consumer warpgroup 0 the half of " + program.kernels[first].name +
                   ", 1 the half of " + program.kernels[first + 1].name + " + 1 TMA producer warp), " + std::to_string(tiles) + " work tiles, " + lead +
                   "; " + a.output + " never stored: the first half's o / Σp reaches the combine in f32 through shared memory" +
                   (staged_combine ? " (each consumer half of the columns, 16-byte row stores)" : "") +
                   (persistent ? "; persistent blocks, one per SM, " + std::to_string(q_buffers) + " Q buffer" + (q_buffers > 1 ? "s" : "") : "") +
                   (cluster > 1 ? "; clusters of 2 blocks, the ranks the two work tiles of a 128-row pair, K and V multicast to both" : "");
  std::string source = "#include <solder/attention/sm90_attention_dual.cuh>\n";
  source += "// kernels " + program.kernels[first].name + " and " + program.kernels[first + 1].name + " as one: computes";
  for (auto& d : program.kernels[first].definitions) source += " " + d;
  for (auto& d : program.kernels[first + 1].definitions) source += " " + d;
  source += "\n// on the attention skeleton's dual mode: " + result.summary + "\n";
  source += b.source.substr(body, using_at - body);
  source += "using " + name_b + "_config_ = " + config + ";\n";
  source += "SOLDER_ATTENTION_DUAL_KERNEL(" + name_b + ", " + name_b + "_config_, " + name_b + "_score_, " + name_b + "_mask_, " + name_b + "_epilogue_)\n";
  result.source = source;
  result.tiles_and_skipping = std::to_string(tiles) + " work tiles of 64 query rows x " + std::to_string(bn) + " keys, one half per consumer (dual mode, with " +
                              (first + 1 < program.kernels.size() ? program.kernels[first].name : std::string()) + "); " + lead;
  result.output = b.output;
  result.combine = true;
  result.head_dim = head_dim;
  result.bn = bn;
  result.f16 = a.f16;
  result.info = b.info;
  result.info.name = name_b;
  result.info.threads = 384;
  result.info.cluster = cluster;
  result.info.blocks = cluster * (persistent ? std::min<int64_t>(items, kSmCount / cluster) : items);
  result.info.shared_bytes = dual_smem_bytes(head_dim, bn, stages, q_buffers);
  AttentionSkeletonLaunch launch = la;  // the first half's lead indices: the kernel adds heads for the second
  launch.config = config;
  result.info.attention = launch;
  return result;
}

}  // namespace solder
