#include "backend/cuda/online_stream_writer.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>

#include "backend/cuda/cuda_expr.h"
#include "contract/decode_attention_fit.h"
#include "ir/expr_eval.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "support/refusal.h"

namespace solder {
namespace {

constexpr int kWarps = 4;  // per block (128 threads, 4 blocks per SM: every cluster of 8 in one wave); the
                           // H200 call of 2026-11-28 timed 8 (SOLDER_ONLINE_STREAM_WARPS=8) 4-7 % slower
constexpr int kRegisterFile = 65536;  // 32-bit registers per SM; the kernel asks for 128 per thread
constexpr int kUnroll = 8;     // U: 16-byte loads of K (and of V) in flight per lane and step ...
constexpr int kMaxUnroll = 9;  // ... or 9 where that saves a step (decode's ragged last key)

// The keys [0, n) the where leaves (a prefix of the stream), or the whole stream when it depends on more
// than the key.
int64_t valid_keys(const DecodeAttentionProblem& p, const KernelProgram& program) {
  const int64_t keys = p.key_tiles * p.key_tile;
  if (!p.key_where) return keys;
  for (auto& v : vars_used(p.key_where))
    if (v != p.tile_var && v != kKeyInTileVar) return keys;
  CompiledExpr::Bindings bindings;
  bindings.vars = {p.tile_var, kKeyInTileVar};
  bindings.dims = program.dims;
  CompiledExpr where(p.key_where, bindings, Arithmetic::float64);
  int64_t n = keys;
  auto holds = [&](int64_t key) {
    const int64_t at[2] = {key / p.key_tile, key % p.key_tile};
    return where.eval(at) != 0.0;
  };
  while (n > 0 && !holds(n - 1)) --n;
  for (int64_t key = 0; key < n; ++key)
    if (!holds(key)) return keys;  // not a prefix: every key is tested
  return n;
}

// SOLDER_ONLINE_STREAM_WARPS=W (tuning, A/B runs): W warps per block (4 or 8) instead of kWarps.
int warps_per_block() {
  const char* v = std::getenv("SOLDER_ONLINE_STREAM_WARPS");
  if (!v || !*v) return kWarps;
  const std::string text(v);
  if (text == "4" || text == "8") return std::stoi(text);
  throw Refusal("SOLDER_ONLINE_STREAM_WARPS: expected 4 or 8; found '" + text + "'");
}

// The leading keys [0, n) at which `cond` (an expression of the key alone) holds; n = keys when it is
// undefined, 0 when it depends on more than the key.
int64_t leading_keys(const Expr& cond, const DecodeAttentionProblem& p, const KernelProgram& program, int64_t keys) {
  if (!cond) return keys;
  for (auto& v : vars_used(cond))
    if (v != p.tile_var && v != kKeyInTileVar) return 0;
  CompiledExpr::Bindings bindings;
  bindings.vars = {p.tile_var, kKeyInTileVar};
  bindings.dims = program.dims;
  CompiledExpr compiled(cond, bindings, Arithmetic::float64);
  int64_t n = 0;
  for (; n < keys; ++n) {
    const int64_t at[2] = {n / p.key_tile, n % p.key_tile};
    if (compiled.eval(at) == 0.0) break;
  }
  return n;
}

// K's or V's cache side as a pointer advanced by a constant stride: at the keys [0, keys), the side's
// offset is affine in the key (each index that uses the key uses nothing else and is checked at every
// one of those keys), with a stride of whole 16-byte vectors. `stride` is in 16-byte vectors; nothing
// when the side is not so.
std::optional<int64_t> vector_stride(const Expr& side, const DecodeAttentionProblem& p, const KernelProgram& program, int64_t keys) {
  const LoadNode* load = side.as<LoadNode>();
  const GlobalTensor* g = load ? program.find_global(load->tensor) : nullptr;
  if (!g || load->index.size() != g->shape.size()) return std::nullopt;
  CompiledExpr::Bindings bindings;
  bindings.vars = {p.tile_var, kKeyInTileVar};
  bindings.dims = program.dims;
  int64_t stride = 0, extent = 1;  // in elements; extent: the row-major stride of index d
  for (size_t d = load->index.size(); d-- > 0;) {
    const Expr& index = load->index[d];
    const bool keyed = uses_var(index, p.tile_var) || uses_var(index, kKeyInTileVar);
    if (keyed) {
      for (auto& v : vars_used(index))
        if (v != p.tile_var && v != kKeyInTileVar) return std::nullopt;
      try {
        CompiledExpr compiled(index, bindings, Arithmetic::float64);
        auto at = [&](int64_t key) {
          const int64_t vars[2] = {key / p.key_tile, key % p.key_tile};
          return compiled.eval(vars);
        };
        const double first = at(0), step = keys > 1 ? at(1) - first : 0.0;
        for (int64_t key = 0; key < keys; ++key)
          if (at(key) != first + step * static_cast<double>(key)) return std::nullopt;
        stride += static_cast<int64_t>(step) * extent;
      } catch (const std::exception&) {
        return std::nullopt;  // an index that reads a tensor
      }
    }
    extent *= g->shape[d];
  }
  const int64_t bytes = stride * dtype_bytes(g->dtype);
  if (bytes % 16 != 0) return std::nullopt;
  return bytes / 16;
}

// Full steps of cache keys load through per-warp pointers advanced by a constant stride (strided_keys
// below), the default since the seventeenth session's H200 A/B (llama_decode KV 16k 108.5 against 137.8
// us); SOLDER_ONLINE_STREAM_STRIDE=0: every load computes its key's address and select (the former kernel).
bool stride_enabled() {
  const char* v = std::getenv("SOLDER_ONLINE_STREAM_STRIDE");
  return !(v && std::string(v) == "0");
}

// SOLDER_ONLINE_STREAM_PREFETCH=1 (A/B runs): each slot's next K and V are loaded as soon as the step
// has used them. Unset or any other value: each step loads all of its keys, then computes. The H200 timed
// both equal at KV 16k and the prefetch 2-3 % slower at KV 1k / 4k: the kernel's time is its instruction
// issue, not the wait for its loads (bench/NOTES.md, decode16k).
bool prefetch_enabled() {
  const char* v = std::getenv("SOLDER_ONLINE_STREAM_PREFETCH");
  return v && std::string(v) == "1";
}

}  // namespace

std::optional<OnlineStreamKernel> write_online_stream_kernel(const KernelProgram& program, const Kernel& kernel, std::string* why, bool* recognized) {
  DecodeAttentionFit fit = fit_decode_attention(kernel, program);
  if (recognized) *recognized = fit.recognized;
  if (!fit.problem) {
    if (why) *why = fit.refusal;
    return std::nullopt;
  }
  const DecodeAttentionProblem& p = *fit.problem;
  const int block_warps = warps_per_block(), threads = 32 * block_warps;
  const bool prefetch = prefetch_enabled();
  const int blocks_per_sm = kRegisterFile / (128 * threads);
  const int lanes_per_key = static_cast<int>(p.columns / 8), keys_per_load = 32 / lanes_per_key;
  // Each warp of the cluster streams one contiguous run of keys, in steps of U loads (KW keys each); U is
  // 8, or up to 9 where that saves a step: the step count is a warp's serial latency.
  const int64_t keys = valid_keys(p, program), warps = int64_t{p.segments} * block_warps;
  const int64_t warp_keys = ((keys + warps - 1) / warps + keys_per_load - 1) / keys_per_load * keys_per_load;
  const int64_t warp_loads = warp_keys / keys_per_load;
  int64_t steps = (warp_loads + kUnroll - 1) / kUnroll;
  if ((warp_loads + kMaxUnroll - 1) / kMaxUnroll < steps) steps = (warp_loads + kMaxUnroll - 1) / kMaxUnroll;
  const int unroll = static_cast<int>(std::max<int64_t>(1, (warp_loads + steps - 1) / std::max<int64_t>(steps, 1)));
  const int64_t rank_keys = warp_keys * block_warps;
  // Strided full steps (SOLDER_ONLINE_STREAM_STRIDE=1, not with the prefetch): the keys [0, strided_keys)
  // have the where and both selects true and K's and V's cache sides at constant strides.
  int64_t strided_keys = 0, key_stride = 0, value_stride = 0;
  if (stride_enabled() && !prefetch) {
    int64_t n = leading_keys(p.key_where, p, program, keys);
    n = std::min(n, leading_keys(p.key.cond, p, program, n));
    n = std::min(n, leading_keys(p.value.cond, p, program, n));
    auto ks = vector_stride(p.key.when_true, p, program, n), vs = vector_stride(p.value.when_true, p, program, n);
    if (ks && vs && n > 0) {
      strided_keys = n;
      key_stride = *ks;
      value_stride = *vs;
    }
  }
  int64_t rows = 1;
  for (auto& g : p.rows) rows *= g.extent;
  const std::string T2 = p.type == MmaType::bf16 ? "__nv_bfloat162" : "__half2";
  const std::string to_float2 = p.type == MmaType::bf16 ? "__bfloat1622float2" : "__half22float2";
  const std::string round_t = p.type == MmaType::bf16 ? "solder::round_bf16" : "solder::round_f16";
  const std::string name = cuda_identifier(kernel.name);

  std::map<std::string, CudaArray> arrays;
  for (size_t i = 0; i < program.globals.size(); ++i) {
    const GlobalTensor& g = program.globals[i];
    arrays[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, static_cast<int>(i)};
  }
  CudaExprPrinter printer;
  printer.array = [&arrays](const std::string& n) -> const CudaArray* {
    auto it = arrays.find(n);
    return it == arrays.end() ? nullptr : &it->second;
  };
  printer.dims = program.dims;
  // &tensor[index] of a side of K or V (its last index the column)
  auto address = [&](const Expr& side) {
    const LoadNode& l = *side.as<LoadNode>();
    std::vector<std::string> index;
    for (auto& i : l.index) index.push_back(printer.print_int(i));
    const CudaArray& a = arrays.at(l.tensor);
    return "reinterpret_cast<const uint4*>(" + a.pointer + " + " + printer.offset(a, index) + ")";
  };
  auto pointer = [&](const KeyOperand& o) {
    if (!o.cond) return address(o.when_true);
    return "(" + printer.print_bool(o.cond) + " ? " + address(o.when_true) + " : " + address(o.when_false) + ")";
  };
  auto operand_text = [](const KeyOperand& o) {
    return o.cond ? "select(" + print_expr(o.cond) + ", " + print_expr(o.when_true) + ", " + print_expr(o.when_false) + ")" : print_expr(o.when_true);
  };
  const std::string key_tile = std::to_string(p.key_tile) + "u";
  const std::string tile_var = cuda_identifier(p.tile_var);
  // the tile variable and the key's index in its tile, from key_ (an int, never negative)
  const std::string key_vars = "const long long " + tile_var + " = static_cast<unsigned>(key_) / " + key_tile + "; const long long " + kKeyInTileVar +
                               " = static_cast<unsigned>(key_) % " + key_tile + "; (void)" + tile_var + "; (void)" + kKeyInTileVar + ";";
  const GlobalTensor& dst = *program.find_global(p.dst.name);

  std::ostringstream out;
  out << "#include <solder/cluster/ptx.cuh>\n";
  out << "// Online-state stream (online_stream_writer.h): " << p.output << " = Σ_j exp(s_j − m) · V / Σ_j exp(s_j − m), s_j = "
      << (p.score_scale ? print_expr(p.score_scale) + " · " : std::string()) << "Σ_" << kColumnVar << " q · K, stored as " << p.dst.name << "\n";
  out << "//   q = " << print_expr(p.query) << "\n";
  out << "//   K = " << operand_text(p.key) << "\n";
  out << "//   V = " << operand_text(p.value) << "\n";
  if (p.key_where) out << "//   keys where " << print_expr(p.key_where) << "; key = " << p.tile_var << " · " << p.key_tile << " + " << kKeyInTileVar << "\n";
  out << "// " << rows << " rows x " << p.segments << " segments of " << rank_keys << " keys (a cluster of " << p.segments << ", merged through distributed shared memory); "
      << block_warps << " warps of " << warp_keys << " keys each in " << steps << " steps; " << lanes_per_key << " lanes of 16 bytes per key, "
      << keys_per_load << " keys per warp load, " << unroll << " loads of K and of V in flight per lane; T = " << mma_type_name(p.type) << "\n";
  out << "extern \"C\" __global__ void __launch_bounds__(" << threads << ", " << blocks_per_sm << ") " << name << "(";
  out << cuda_global_parameters(program.globals) << ") {\n";
  out << "  constexpr int S_ = " << p.segments << ", D_ = " << p.columns << ", LK_ = " << lanes_per_key << ", KW_ = " << keys_per_load << ", U_ = " << unroll
      << ", W_ = " << block_warps << ";\n";
  out << "  constexpr int KEYS_ = " << keys << ", KWARP_ = " << warp_keys << ";  // keys over all segments; per warp\n";
  out << "  extern __shared__ __align__(16) unsigned char smem[];\n";
  out << "  float* const warp_o_ = reinterpret_cast<float*>(smem);  // [W_][D_] each warp's O\n";
  out << "  float* const block_o_ = warp_o_ + W_ * D_;  // [D_] this segment's O, read by the cluster's ranks\n";
  out << "  float* const warp_m_ = block_o_ + D_;  // [W_]\n";
  out << "  float* const warp_z_ = warp_m_ + W_;  // [W_]\n";
  out << "  float* const block_state_ = warp_z_ + W_;  // this segment's m and z, read by the cluster's ranks\n";
  out << "  const int rank_ = " << (p.segments > 1 ? "static_cast<int>(blockIdx.x % S_)" : std::string("0")) << ";\n";
  out << "  long long row_rest_ = blockIdx.x / S_;\n";
  for (size_t i = p.rows.size(); i-- > 0;) {
    const std::string v = cuda_identifier(p.rows[i].var);
    out << "  const long long " << v << " = row_rest_ % " << p.rows[i].extent << "LL; row_rest_ /= " << p.rows[i].extent << "LL; (void)" << v << ";\n";
  }
  out << "  const int warp_ = threadIdx.x / 32, lane_ = threadIdx.x % 32;\n";
  out << "  const int slot_ = lane_ / LK_, part_ = lane_ % LK_;  // which key of a warp load; which 8 columns\n";
  out << "  float q_[8];\n";
  out << "  #pragma unroll\n";
  out << "  for (int c_ = 0; c_ < 8; ++c_) {\n";
  out << "    const long long " << kColumnVar << " = part_ * 8 + c_;\n";
  out << "    q_[c_] = " << round_t << "(" << printer.print_float(p.query) << ");\n";
  out << "  }\n";
  out << "  const float scale_ = " << (p.score_scale ? printer.print_float(p.score_scale) : std::string("1.0f")) << ";\n";
  out << "  const int key0_ = (rank_ * W_ + warp_) * KWARP_, key1_ = key0_ + KWARP_ < KEYS_ ? key0_ + KWARP_ : KEYS_;  // this warp's keys\n";
  out << "  float m_ = -solder::infinity(), z_ = 0.0f;  // this lane group's online state over its keys\n";
  out << "  float o_[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};\n";
  // One step: its loads, the dot products of its K, the online state, P·V with its V. With prefetch
  // (SOLDER_ONLINE_STREAM_PREFETCH=1), each slot's K (then V) for the next step is loaded as soon as this
  // step has used it, so the 2 U loads stay in flight while the warp computes.
  auto load_keys = [&](const std::string& first, const std::string& indent, bool k, bool v) {
    out << indent << "const int key_ = " << first << " + u_ * KW_ + slot_;\n";
    out << indent << key_vars << "\n";
    if (k) out << indent << "valid_[u_] = key_ < key1_" << (p.key_where ? " && (" + printer.print_bool(p.key_where) + ")" : std::string()) << ";\n";
    if (k) out << indent << "k_raw_[u_] = make_uint4(0u, 0u, 0u, 0u);\n";
    if (v) out << indent << "v_raw_[u_] = make_uint4(0u, 0u, 0u, 0u);\n";
    out << indent << "if (valid_[u_]) {\n";
    out << indent << "  const long long " << kColumnVar << " = part_ * 8;\n";
    if (k) out << indent << "  k_raw_[u_] = __ldg(" << pointer(p.key) << ");\n";
    if (v) out << indent << "  v_raw_[u_] = __ldg(" << pointer(p.value) << ");\n";
    out << indent << "}\n";
  };
  if (prefetch) {
    out << "  uint4 k_raw_[U_], v_raw_[U_];\n";
    out << "  bool valid_[U_];\n";
    out << "  #pragma unroll\n";
    out << "  for (int u_ = 0; u_ < U_; ++u_) {  // the first step's keys: 2 U_ independent 16-byte loads in flight\n";
    load_keys("key0_", "    ", true, true);
    out << "  }\n";
  }
  if (strided_keys > 0) {
    out << "  // keys [0, STRIDED_): the where and the selects hold, and K and V sit at constant strides of KSTRIDE_ and VSTRIDE_\n";
    out << "  // 16-byte vectors per key: a full step of such keys loads through kp_ and vp_, this lane's first key's K and V\n";
    out << "  constexpr int STRIDED_ = " << strided_keys << ";\n";
    out << "  constexpr long long KSTRIDE_ = " << key_stride << "LL, VSTRIDE_ = " << value_stride << "LL;\n";
    out << "  const uint4* kp_;\n";
    out << "  const uint4* vp_;\n";
    out << "  {\n";
    out << "    const int key_ = key0_ + slot_;\n";
    out << "    " << key_vars << "\n";
    out << "    const long long " << kColumnVar << " = part_ * 8;\n";
    out << "    kp_ = " << address(p.key.when_true) << ";\n";
    out << "    vp_ = " << address(p.value.when_true) << ";\n";
    out << "  }\n";
    out << "  for (int base_ = key0_; base_ < key1_; base_ += KW_ * U_, kp_ += KW_ * U_ * KSTRIDE_, vp_ += KW_ * U_ * VSTRIDE_) {\n";
  } else {
    out << "  for (int base_ = key0_; base_ < key1_; base_ += KW_ * U_) {\n";
  }
  if (!prefetch) {
    out << "    uint4 k_raw_[U_], v_raw_[U_];\n";
    out << "    bool valid_[U_];\n";
    std::string indent = "    ";
    if (strided_keys > 0) {
      out << "    if (base_ + KW_ * U_ <= key1_ && base_ + KW_ * U_ <= STRIDED_) {  // a full step of strided keys\n";
      out << "      #pragma unroll\n";
      out << "      for (int u_ = 0; u_ < U_; ++u_) {\n";
      out << "        valid_[u_] = true;\n";
      out << "        k_raw_[u_] = __ldg(kp_ + u_ * KW_ * KSTRIDE_);\n";
      out << "        v_raw_[u_] = __ldg(vp_ + u_ * KW_ * VSTRIDE_);\n";
      out << "      }\n";
      out << "    } else {\n";
      indent = "      ";
    }
    out << indent << "#pragma unroll\n";
    out << indent << "for (int u_ = 0; u_ < U_; ++u_) {  // 2 U_ independent 16-byte loads in flight\n";
    load_keys("base_", indent + "  ", true, true);
    out << indent << "}\n";
    if (strided_keys > 0) out << "    }\n";
  } else {
    out << "    const int next_ = base_ + KW_ * U_;  // the next step's first key\n";
  }
  out << "    float s_[U_];\n";
  out << "    #pragma unroll\n";
  out << "    for (int u_ = 0; u_ < U_; ++u_) {  // the dot product: 8 columns per lane, then LK_ lanes by shuffles\n";
  out << "      const " << T2 << "* const pair_ = reinterpret_cast<const " << T2 << "*>(&k_raw_[u_]);\n";
  out << "      float dot_ = 0.0f;\n";
  out << "      #pragma unroll\n";
  out << "      for (int j_ = 0; j_ < 4; ++j_) {\n";
  out << "        const float2 k2_ = " << to_float2 << "(pair_[j_]);\n";
  out << "        dot_ = fmaf(q_[2 * j_], k2_.x, dot_);\n";
  out << "        dot_ = fmaf(q_[2 * j_ + 1], k2_.y, dot_);\n";
  out << "      }\n";
  out << "      #pragma unroll\n";
  out << "      for (int off_ = LK_ / 2; off_ > 0; off_ /= 2) dot_ += __shfl_xor_sync(0xffffffffu, dot_, off_);\n";
  out << "      s_[u_] = valid_[u_] ? dot_ * scale_ : -solder::infinity();\n";
  if (prefetch) {
    out << "      {  // this slot's K for the next step\n";
    load_keys("next_", "        ", true, false);
    out << "      }\n";
  }
  out << "    }\n";
  out << "    float m_new_ = m_;\n";
  out << "    #pragma unroll\n";
  out << "    for (int u_ = 0; u_ < U_; ++u_) m_new_ = solder::max_nan(m_new_, s_[u_]);\n";
  out << "    const float correction_ = m_new_ == m_ ? 1.0f : expf(m_ - m_new_);\n";
  out << "    z_ *= correction_;\n";
  out << "    #pragma unroll\n";
  out << "    for (int c_ = 0; c_ < 8; ++c_) o_[c_] *= correction_;\n";
  out << "    #pragma unroll\n";
  out << "    for (int u_ = 0; u_ < U_; ++u_) {  // one exp per key; P rounded to T as the product's operand\n";
  out << "      const float e_ = s_[u_] == -solder::infinity() ? 0.0f : expf(s_[u_] - m_new_);\n";
  out << "      z_ += e_;\n";
  out << "      const float p_ = " << round_t << "(e_);\n";
  out << "      const " << T2 << "* const pair_ = reinterpret_cast<const " << T2 << "*>(&v_raw_[u_]);\n";
  out << "      #pragma unroll\n";
  out << "      for (int j_ = 0; j_ < 4; ++j_) {\n";
  out << "        const float2 v2_ = " << to_float2 << "(pair_[j_]);\n";
  out << "        o_[2 * j_] = fmaf(p_, v2_.x, o_[2 * j_]);\n";
  out << "        o_[2 * j_ + 1] = fmaf(p_, v2_.y, o_[2 * j_ + 1]);\n";
  out << "      }\n";
  if (prefetch) {
    out << "      {  // this slot's V for the next step\n";
    load_keys("next_", "        ", false, true);
    out << "      }\n";
  }
  out << "    }\n";
  out << "    m_ = m_new_;\n";
  out << "  }\n";
  out << "  // the warp's lane groups merged by shuffles (the groups of the same 8 columns)\n";
  out << "  #pragma unroll\n";
  out << "  for (int off_ = 16; off_ >= LK_; off_ /= 2) {\n";
  out << "    const float m_other_ = __shfl_xor_sync(0xffffffffu, m_, off_), z_other_ = __shfl_xor_sync(0xffffffffu, z_, off_);\n";
  out << "    const float m_both_ = solder::max_nan(m_, m_other_);\n";
  out << "    const float mine_ = m_ == m_both_ ? 1.0f : expf(m_ - m_both_), theirs_ = m_other_ == m_both_ ? 1.0f : expf(m_other_ - m_both_);\n";
  out << "    z_ = z_ * mine_ + z_other_ * theirs_;\n";
  out << "    #pragma unroll\n";
  out << "    for (int c_ = 0; c_ < 8; ++c_) o_[c_] = o_[c_] * mine_ + __shfl_xor_sync(0xffffffffu, o_[c_], off_) * theirs_;\n";
  out << "    m_ = m_both_;\n";
  out << "  }\n";
  out << "  if (slot_ == 0) {\n";
  out << "    #pragma unroll\n";
  out << "    for (int c_ = 0; c_ < 8; ++c_) warp_o_[warp_ * D_ + part_ * 8 + c_] = o_[c_];\n";
  out << "    if (part_ == 0) { warp_m_[warp_] = m_; warp_z_[warp_] = z_; }\n";
  out << "  }\n";
  out << "  __syncthreads();\n";
  out << "  // the block's warps merged through shared memory: this segment's (m, z, O)\n";
  out << "  for (int e_ = threadIdx.x; e_ < D_; e_ += " << threads << ") {\n";
  out << "    float m_all_ = -solder::infinity();\n";
  out << "    for (int w_ = 0; w_ < W_; ++w_) m_all_ = solder::max_nan(m_all_, warp_m_[w_]);\n";
  out << "    float z_all_ = 0.0f, o_all_ = 0.0f;\n";
  out << "    for (int w_ = 0; w_ < W_; ++w_) {\n";
  out << "      const float weight_ = warp_m_[w_] == m_all_ ? 1.0f : expf(warp_m_[w_] - m_all_);\n";
  out << "      z_all_ += warp_z_[w_] * weight_;\n";
  out << "      o_all_ += warp_o_[w_ * D_ + e_] * weight_;\n";
  out << "    }\n";
  out << "    block_o_[e_] = o_all_;\n";
  out << "    if (e_ == 0) { block_state_[0] = m_all_; block_state_[1] = z_all_; }\n";
  out << "  }\n";
  const std::string sync = p.segments > 1 ? "solder::cluster::ptx::cluster_sync();" : "__syncthreads();";
  out << "  " << sync << (p.segments > 1 ? "  // every rank's state is visible to the cluster" : "") << "\n";
  if (p.segments > 1) {
    out << "  // the cluster's segments merged through distributed shared memory: rank_ finishes columns rank_, rank_ + S_, ...\n";
    out << "  for (int e_ = rank_ + threadIdx.x * S_; e_ < D_; e_ += " << threads << " * S_) {\n";
    out << "    float m_r_[S_], z_r_[S_], o_r_[S_];\n";
    out << "    float m_all_ = -solder::infinity();\n";
    out << "    #pragma unroll\n";
    out << "    for (int r_ = 0; r_ < S_; ++r_) {\n";
    out << "      m_r_[r_] = solder::cluster::ptx::map_to_rank(block_state_, r_)[0];\n";
    out << "      z_r_[r_] = solder::cluster::ptx::map_to_rank(block_state_, r_)[1];\n";
    out << "      o_r_[r_] = *solder::cluster::ptx::map_to_rank(&block_o_[e_], r_);\n";
    out << "      m_all_ = solder::max_nan(m_all_, m_r_[r_]);\n";
    out << "    }\n";
    out << "    float z_all_ = 0.0f, o_all_ = 0.0f;\n";
    out << "    #pragma unroll\n";
    out << "    for (int r_ = 0; r_ < S_; ++r_) {\n";
    out << "      const float weight_ = m_r_[r_] == m_all_ ? 1.0f : expf(m_r_[r_] - m_all_);\n";
    out << "      z_all_ += z_r_[r_] * weight_;\n";
    out << "      o_all_ += o_r_[r_] * weight_;\n";
    out << "    }\n";
  } else {
    out << "  for (int e_ = threadIdx.x; e_ < D_; e_ += " << threads << ") {\n";
    out << "    const float z_all_ = block_state_[1], o_all_ = block_o_[e_];\n";
  }
  out << "    const long long " << kColumnVar << " = e_;\n";
  std::vector<std::string> index;
  for (auto& i : p.dst.index) index.push_back(printer.print_int(i));
  out << "    // " << p.dst.name << " = " << p.output << " · (1 / z), rounded to " << dtype_name(dst.dtype) << " by the store\n";
  out << "    solder::store(&" << arrays.at(p.dst.name).pointer << "[" << printer.offset(arrays.at(p.dst.name), index) << "], o_all_ * (1.0f / z_all_));\n";
  out << "  }\n";
  if (p.segments > 1) out << "  solder::cluster::ptx::cluster_sync();  // no block leaves while another may still read its shared memory\n";
  out << "}\n";

  OnlineStreamKernel result;
  result.source = out.str();
  result.info.name = name;
  result.info.threads = threads;
  result.info.blocks = rows * p.segments;
  result.info.cluster = p.segments;
  result.info.shared_bytes = (int64_t{block_warps} * p.columns + p.columns + 2 * block_warps + 2) * 4;
  result.tile = "one row per block, " + std::to_string(p.segments) + " segments of " + std::to_string(rank_keys) + " keys (a cluster, DSM merge), " +
                std::to_string(block_warps) + " warps x " + std::to_string(keys_per_load * unroll) + " keys per step, K and V in registers";
  result.scores = p.scores;
  result.output = p.output;
  return result;
}

}  // namespace solder
