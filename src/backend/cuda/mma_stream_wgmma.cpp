// The Hopper path of the tensor-core emitter (mma_stream_writer.h): both contractions on wgmma.
//
// Schedule (after tests/gpu/tile/attention_wgmma_proto.cu, variant "n64 s4 overlap 2/SM"): one
// warpgroup per 64 rows of the block (BM / 64 warpgroups); A stays in 128-byte-swizzled shared memory
// and is read by S = A · Bᵀ through descriptors (wgmma m64nBNk16, both operands from shared memory); B
// and V stream through a ring of 4 (or 3) stages filled by cp.async, one barrier per tile; P, rounded to
// the inputs' type, is the register A operand of O += P · V (wgmma m64nDVk16, V MN-major).
//   Overlapped (the default): S of the next tile is issued with P · V of this one; once S retired, the
// next tile's row statements that do not touch O and its P run while P · V is on the tensor cores, and
// those that touch O (the online rescaling) once it retired. overlap_refusal() says when that
// reordering keeps the Kernel IR's meaning; otherwise, and by default (the overlap needs SOLDER_MMA_PATH=wgmma-overlap: it measured slower), each product
// is waited for before the statements that follow it, in the Kernel IR's order.
//
// Why the row statements carry over unchanged: the m64nN accumulator gives warp w of a warpgroup rows
// 16w .. 16w + 15 with register 4j + e at the position of element e of the mma.sync m16n8 C fragment j
// (tile/wgmma.cuh, PTX ISA "wgmma .m64nNk16 register fragments"), so with one 16-row group per warp
// the score and wide tiles keep their [nt][e] arrays and the binding row0 + 8 (rs & 1), column
// 8 nt + 2 (lane & 3) + (e & 1); solder::tile::warpgroup::as_accumulator views them as accumulators.
//
// The compiler findings of tile/wgmma.cuh are followed: descriptors are built from warp-uniform values
// (stage and warpgroup read through __shfl_sync) and pinned before wgmma.fence; P's registers are fenced
// after the wait that retires the P · V that reads them, and the next P is packed into them only then.
#include <cstdlib>
#include <set>

#include "backend/cuda/mma_stream_writer.h"
#include "ir/printer.h"

namespace solder::mma_stream {

namespace {
const char* const kWarpgroup = "solder::tile::warpgroup::";
}

void MmaStreamWriter::emit_a_wgmma(std::ostringstream& out, int ind) {
  const std::string wg = kWarpgroup, a = cuda_identifier(A_);
  out << pad(ind) << "solder::tile::cp_async_commit();\n";
  out << pad(ind) << "solder::tile::cp_async_wait<0>();\n";
  if (scale_in_a_) {
    const int64_t chunks = BM_ * D_ / 8;
    out << pad(ind) << "__syncthreads();\n";
    out << pad(ind) << "{ const float scale = " << printer_.print_float(score_scale_) << ";  // a power of two: the scores' scale, applied to " << A_
        << " once, in shared memory (exact)\n";
    out << pad(ind) << "  for (int chunk = threadIdx.x; chunk < " << chunks << "; chunk += " << warps_ * 32 << ") {\n";
    out << pad(ind) << "    uint4* const at = reinterpret_cast<uint4*>(" << cuda_identifier(A_) << ") + chunk;\n";
    out << pad(ind) << "    uint4 v = *at; unsigned eight[4] = {v.x, v.y, v.z, v.w};\n";
    out << pad(ind) << "    solder::tile::scale_bf16_fragment(eight, scale);\n";
    out << pad(ind) << "    *at = make_uint4(eight[0], eight[1], eight[2], eight[3]);\n";
    out << pad(ind) << "  } }\n";
  }
  out << pad(ind) << wg << "fence_proxy_async();  // " << A_ << " was written through the generic proxy: visible to wgmma (the async proxy) after the barrier\n";
  out << pad(ind) << "__syncthreads();\n";
  out << pad(ind) << "// this warpgroup's 64 rows of " << A_ << " as wgmma descriptors (k-major), one per k-step of 16, built once\n";
  out << pad(ind) << "const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);  // warp-uniform, as descriptors must be\n";
  out << pad(ind) << "cuda::std::uint64_t a_desc[" << D_ / 16 << "];\n";
  out << pad(ind) << "#pragma unroll\n" << pad(ind) << "for (int ks = 0; ks < " << D_ / 16 << "; ++ks) a_desc[ks] = " << wg << "k_major_descriptor<" << BM_ << ">(" << a
      << ", ks, warpgroup * 64);\n";
}

void MmaStreamWriter::emit_scores_wgmma(std::ostringstream& out, int ind) {
  const std::string wg = kWarpgroup, s = cuda_identifier(S_), b = cuda_identifier(B_);
  const std::string acc = wg + "as_accumulator<" + std::to_string(BN_) + ">(" + s + ")";
  const int steps = static_cast<int>(D_ / 16);
  if (scores_issued_) {
    out << pad(ind) << "// " << S_ << " = " << A_ << " · " << B_ << "ᵀ: issued with the previous tile's P · V, retired above\n";
    return;
  }
  out << pad(ind) << "// " << S_ << " = " << A_ << " · " << B_ << "ᵀ on tensor cores: wgmma m64n" << BN_ << "k16, both operands from shared memory\n";
  out << pad(ind) << "{\n";
  out << pad(ind + 1) << "cuda::std::uint64_t b_desc[" << steps << "];\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int ks = 0; ks < " << steps << "; ++ks) b_desc[ks] = " << wg << "k_major_descriptor<" << BN_ << ">(" << b << ", ks);\n";
  out << pad(ind + 1) << "// operands defined before the fence (ptxas serializes a batch whose operands are defined after it, C7513)\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int ks = 0; ks < " << steps << "; ++ks) asm volatile(\"\" : \"+l\"(a_desc[ks]), \"+l\"(b_desc[ks]));\n";
  out << pad(ind + 1) << wg << "fence_operand(" << acc << ");\n";
  out << pad(ind + 1) << wg << "fence();\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int ks = 0; ks < " << steps << "; ++ks) " << wg << "mma_ss<" << BN_ << ", false>(" << acc
      << ", a_desc[ks], b_desc[ks], ks > 0);\n";
  out << pad(ind + 1) << wg << "commit_group();\n";
  out << pad(ind + 1) << wg << "wait_group<0>();\n";
  out << pad(ind + 1) << wg << "fence_operand(" << acc << ");\n";
  out << pad(ind) << "}\n";
}

void MmaStreamWriter::emit_pv_wgmma(std::ostringstream& out, int ind) {
  const std::string wg = kWarpgroup, o = cuda_identifier(pv_->dst.name), v = cuda_identifier(V_);
  const std::string acc = wg + "as_accumulator<" + std::to_string(DV_) + ">(" + o + ")";
  const int steps = static_cast<int>(BN_ / 16);
  if (pv_pack_only_) {
    out << pad(ind) << "// P stays in p_frag: it becomes the A registers once the P · V in flight retired (written earlier, ptxas\n";
    out << pad(ind) << "// may give them the registers of the P in flight and serialize the wgmma, C7513); the mma is issued with the next tile's scores\n";
    return;
  }
  out << pad(ind) << "// on tensor cores: wgmma m64n" << DV_ << "k16, P (rounded to T) from registers, " << V_ << " from shared memory (MN-major)\n";
  out << pad(ind) << "{\n";
  out << pad(ind + 1) << wg << "ARegisters p_regs[" << steps << "];\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int kk = 0; kk < " << steps << "; ++kk) solder::tile::c_fragments_to_a<T>(p_regs[kk].reg, p_frag[2 * kk], p_frag[2 * kk + 1]);\n";
  out << pad(ind + 1) << "cuda::std::uint64_t v_desc[" << steps << "];\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int kk = 0; kk < " << steps << "; ++kk) v_desc[kk] = " << wg << "mn_major_descriptor<" << BN_ << ">(" << v << ", kk);\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int kk = 0; kk < " << steps << "; ++kk) asm volatile(\"\" : \"+l\"(v_desc[kk]));\n";
  out << pad(ind + 1) << wg << "fence_operand(" << acc << ");\n";
  out << pad(ind + 1) << wg << "fence();\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int kk = 0; kk < " << steps << "; ++kk) " << wg << "mma_rs<" << DV_ << ", true>(" << acc
      << ", p_regs[kk], v_desc[kk], true);\n";
  out << pad(ind + 1) << wg << "commit_group();\n";
  out << pad(ind + 1) << wg << "wait_group<0>();\n";
  out << pad(ind + 1) << wg << "fence_operand(" << acc << ");\n";
  out << pad(ind + 1) << "#pragma unroll\n" << pad(ind + 1) << "for (int kk = 0; kk < " << steps << "; ++kk) " << wg
      << "fence_operand(p_regs[kk]);  // P's registers are P's until its mma retired\n";
  out << pad(ind) << "}\n";
}

namespace {

// Buffers a statement reads and writes (for the overlap's reordering rule).
void add_tensors(std::set<std::string>& into, const Expr& e) {
  if (!e.defined()) return;
  for (auto& t : tensors_used(e)) into.insert(t);
}
std::set<std::string> reads_of(const Stmt& s) {
  std::set<std::string> r;
  if (s.kind() == StmtKind::Copy) {
    r.insert(s.as<CopyNode>()->src.name);
    add_tensors(r, s.as<CopyNode>()->domain.guard);
  } else if (s.kind() == StmtKind::Map) {
    add_tensors(r, s.as<MapNode>()->value);
    add_tensors(r, s.as<MapNode>()->domain.guard);
  } else if (s.kind() == StmtKind::Reduce) {
    auto x = s.as<ReduceNode>();
    add_tensors(r, x->value);
    add_tensors(r, x->where);
    add_tensors(r, x->domain.guard);
    if (x->accumulate) r.insert(x->dst.name);
  }
  return r;
}
std::set<std::string> writes_of(const Stmt& s) {
  switch (s.kind()) {
    case StmtKind::Fill: return {s.as<FillNode>()->buffer};
    case StmtKind::Copy: return {s.as<CopyNode>()->dst.name};
    case StmtKind::Map: return {s.as<MapNode>()->dst.name};
    case StmtKind::Reduce: return {s.as<ReduceNode>()->dst.name};
    default: return {};
  }
}
bool meet(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (auto& x : a)
    if (b.count(x)) return true;
  return false;
}

}  // namespace

// The overlapped schedule moves the statements of a tile that touch O (the P · V accumulator, in flight
// meanwhile) after the tile's other row statements and its P. That keeps the Kernel IR's meaning when
// no statement moved past reads what a moved one writes or writes what it reads or writes.
std::string MmaStreamWriter::overlap_refusal(const LoopParts& parts) const {
  const char* forced = std::getenv("SOLDER_MMA_PATH");
  // Off unless asked for: on the H100 the serial order was faster (B4 S4096 H16 D64: vanilla 954 vs 997 us,
  // sliding window 205 vs 229, causal 647 vs 645; session 4, bench/NOTES.md).
  if (!forced || std::string(forced) != "wgmma-overlap") return "the overlap is off by default (SOLDER_MMA_PATH=wgmma-overlap: measured slower)";
  if (stages_ < 3) return "a ring of " + std::to_string(stages_) + " stages (the overlap holds the next tile's " + B_ + " beside this tile's " + V_ + ")";
  if (!pv_->accumulate) return "P · V does not accumulate";
  const std::string& o = pv_->dst.name;
  std::vector<const Stmt*> list;  // the statements from the scores to P · V; before the scores only their zero fill
  for (auto* st : parts.statements) {
    if (list.empty() && st->kind() == StmtKind::Fill && st->as<FillNode>()->buffer == S_) continue;  // emits nothing
    list.push_back(st);
  }
  auto is = [](const Stmt* st, const ReduceNode* r) { return st->kind() == StmtKind::Reduce && st->as<ReduceNode>() == r; };
  if (!is(list.front(), scores_) || !is(list.back(), pv_)) return "statements before the scores or after P · V in the loop";
  std::set<std::string> p_reads;  // P of P · V, computed among the moved-past statements
  add_tensors(p_reads, p_value_);
  add_tensors(p_reads, pv_->where);
  add_tensors(p_reads, pv_->domain.guard);
  if (p_reads.count(o)) return "P reads " + o;
  for (size_t k = 1; k + 1 < list.size(); ++k) {
    std::set<std::string> reads = reads_of(*list[k]), writes = writes_of(*list[k]);
    if (!reads.count(o) && !writes.count(o)) continue;
    for (size_t later = k + 1; later < list.size(); ++later) {
      const bool is_pv = later + 1 == list.size();
      std::set<std::string> later_reads = is_pv ? p_reads : reads_of(*list[later]), later_writes = is_pv ? std::set<std::string>{} : writes_of(*list[later]);
      if (!is_pv && (later_reads.count(o) || later_writes.count(o))) continue;  // moves too, in order
      if (meet(later_writes, reads) || meet(writes, later_reads) || meet(writes, later_writes))
        return "a statement writing " + *writes.begin() + " cannot move after the row statements that follow it";
    }
  }
  return "";
}

void MmaStreamWriter::emit_loop_wgmma(std::ostringstream& out) {
  LoopParts parts = loop_parts();
  const std::string overlap_refused = overlap_refusal(parts);
  overlap_ = overlap_refused.empty();
  summary_ += overlap_ ? "; the next tile's scores and row statements overlap P · V" : "; no overlap of the row statements with P · V (" + overlap_refused + ")";
  const std::string jt = cuda_identifier(loop_->var), begin = printer_.print_int(loop_->begin), end = printer_.print_int(loop_->end);
  out << "  // the stream: " << loop_->var << " in " << print_expr(loop_->begin) << " .. " << print_expr(loop_->end) << "; a ring of " << stages_ << " stages of " << B_
      << " and " << V_ << " (" << stages_ - 1 << " live tiles load while one computes), one barrier per tile\n";
  out << "  const long long stream_end = " << end << ";\n";
  emit_tile_classes(out, jt);
  out << "  long long " << jt << " = next_live(" << begin << ");\n";
  out << "  long long load_next = " << jt << ";  // the next live tile to load\n";
  out << "  // " << B_ << " and " << V_ << " of tile load_next into `stage`: one cp.async group, empty past the end (group counts stay uniform)\n";
  out << "  auto load_tile = [&](int stage) {\n";
  out << "    if (load_next < stream_end) {\n";
  out << "      " << stage_pointers("stage", "stage") << "\n";
  out << "      const long long " << jt << " = load_next;\n";
  emit_stage(out, *parts.stage_b, B_, 3);
  emit_stage(out, *parts.stage_v, V_, 3);
  out << "      load_next = next_live(load_next + 1);\n";
  out << "    }\n";
  out << "    solder::tile::cp_async_commit();\n";
  out << "  };\n";
  out << "  for (int stage = 0; stage < " << stages_ - 1 << "; ++stage) load_tile(stage);\n";
  out << "  int tiles_done = 0;\n";
  if (overlap_) {
    emit_loop_wgmma_overlapped(out, parts);
    return;
  }
  out << "  while (" << jt << " < stream_end) {\n";
  out << "    solder::tile::cp_async_wait<" << stages_ - 2 << ">();  // this tile's group is in; the later ones may be in flight\n";
  out << "    " << kWarpgroup << "fence_proxy_async();  // cp.async wrote it: visible to wgmma after the barrier\n";
  out << "    __syncthreads();  // ... which also says every warpgroup is done with the previous tile, whose stage loads now\n";
  out << "    load_tile((tiles_done + " << stages_ - 1 << ") % " << stages_ << ");\n";
  out << "    const int stage = __shfl_sync(0xffffffffu, tiles_done % " << stages_ << ", 0);  // warp-uniform, as descriptors must be\n";
  out << "    " << stage_pointers("stage", "stage") << "\n";
  emit_tile_bodies(out, parts.statements, 2);
  out << "    ++tiles_done;\n";
  out << "    " << jt << " = next_live(" << jt << " + 1);\n";
  out << "  }\n";
  cached_.clear();
}

// The statements of one tile, twice when the mask classifies tiles (full tiles without the mask).
void MmaStreamWriter::emit_tile_bodies(std::ostringstream& out, const std::vector<const Stmt*>& statements, int ind) {
  auto body = [&](int at) {
    cached_.clear();
    for (auto* s : statements) emit_statement(out, *s, at);
  };
  if (live_condition_) {
    out << pad(ind) << "if (tile_full(" << cuda_identifier(loop_->var) << ")) {  // the mask holds on the whole tile\n";
    mask_true_ = true;
    body(ind + 1);
    mask_true_ = false;
    out << pad(ind) << "} else {\n";
    body(ind + 1);
    out << pad(ind) << "}\n";
  } else {
    body(ind);
  }
}

std::string MmaStreamWriter::stage_pointers(const std::string& b_stage, const std::string& v_stage) const {
  const std::string kb = cuda_identifier(B_), vb = cuda_identifier(V_);
  return "T* const " + kb + " = " + kb + "_stages + " + b_stage + " * " + std::to_string(BN_ * D_) + "; T* const " + vb + " = " + vb + "_stages + " + v_stage + " * " +
         std::to_string(BN_ * DV_) + ";";
}

// Per live tile t (P_t in p_regs): issue S_next = A · B_nextᵀ and O += P_t · V_t together; once S_next
// retired, the next tile's row statements that do not touch O and its P (in p_frag) run while
// P_t · V_t is on the tensor cores; once that retired, the statements that touch O (the rescaling).
void MmaStreamWriter::emit_loop_wgmma_overlapped(std::ostringstream& out, const LoopParts& parts) {
  const std::string wg = kWarpgroup, jt = cuda_identifier(loop_->var), o = cuda_identifier(pv_->dst.name), s = cuda_identifier(S_);
  const std::string o_acc = wg + "as_accumulator<" + std::to_string(DV_) + ">(" + o + ")", s_acc = wg + "as_accumulator<" + std::to_string(BN_) + ">(" + s + ")";
  const int k_steps = static_cast<int>(D_ / 16), p_steps = static_cast<int>(BN_ / 16);
  std::vector<const Stmt*> before_wait, after_wait;  // the next tile's statements while P · V runs, and after
  for (auto* st : parts.statements) {
    bool touches = st->kind() != StmtKind::Reduce || st->as<ReduceNode>() != pv_;
    touches = touches && (reads_of(*st).count(pv_->dst.name) || writes_of(*st).count(pv_->dst.name));
    (touches ? after_wait : before_wait).push_back(st);
  }
  out << "  " << wg << "ARegisters p_regs[" << p_steps << "];  // P of the tile on the tensor cores\n";
  out << "  if (" << jt << " < stream_end) {  // the first tile: its scores, row statements and P, in order\n";
  out << "    solder::tile::cp_async_wait<" << stages_ - 2 << ">();\n";
  out << "    " << wg << "fence_proxy_async();\n";
  out << "    __syncthreads();\n";
  out << "    " << stage_pointers("0", "0") << " (void)" << cuda_identifier(V_) << ";\n";
  pv_pack_only_ = true;
  emit_tile_bodies(out, parts.statements, 2);
  out << pad(2) << "#pragma unroll\n" << pad(2) << "for (int kk = 0; kk < " << p_steps << "; ++kk) solder::tile::c_fragments_to_a<T>(p_regs[kk].reg, p_frag[2 * kk], p_frag[2 * kk + 1]);  // P rounded to T\n";
  out << "  }\n";
  out << "  while (" << jt << " < stream_end) {\n";
  out << "    const long long next_tile = next_live(" << jt << " + 1);\n";
  out << "    solder::tile::cp_async_wait<" << stages_ - 3 << ">();  // the next tile's group is in; the later ones may be in flight\n";
  out << "    " << wg << "fence_proxy_async();  // cp.async wrote it: visible to wgmma after the barrier\n";
  out << "    __syncthreads();  // ... which also says every warpgroup is done with the previous tile, whose stage loads now\n";
  out << "    load_tile((tiles_done + " << stages_ - 1 << ") % " << stages_ << ");\n";
  out << "    // warp-uniform, as descriptors must be: this tile's stage (" << V_ << ") and the next one's (" << B_ << ")\n";
  out << "    const int stage = __shfl_sync(0xffffffffu, tiles_done % " << stages_ << ", 0), next_stage = __shfl_sync(0xffffffffu, (tiles_done + 1) % " << stages_ << ", 0);\n";
  out << "    " << stage_pointers("next_stage", "stage") << "\n";
  out << "    cuda::std::uint64_t v_desc[" << p_steps << "];\n";
  out << "    #pragma unroll\n    for (int kk = 0; kk < " << p_steps << "; ++kk) v_desc[kk] = " << wg << "mn_major_descriptor<" << BN_ << ">(" << cuda_identifier(V_) << ", kk);\n";
  out << "    if (next_tile < stream_end) {\n";
  out << "      // " << S_ << " of the next tile and " << pv_->dst.name << " += P · " << V_ << " of this one, issued together (no branch between fence and mma: C7513)\n";
  out << "      cuda::std::uint64_t b_desc[" << k_steps << "];\n";
  out << "      #pragma unroll\n      for (int ks = 0; ks < " << k_steps << "; ++ks) b_desc[ks] = " << wg << "k_major_descriptor<" << BN_ << ">(" << cuda_identifier(B_) << ", ks);\n";
  out << "      #pragma unroll\n      for (int ks = 0; ks < " << k_steps << "; ++ks) asm volatile(\"\" : \"+l\"(a_desc[ks]), \"+l\"(b_desc[ks]));\n";
  out << "      #pragma unroll\n      for (int kk = 0; kk < " << p_steps << "; ++kk) asm volatile(\"\" : \"+l\"(v_desc[kk]));\n";
  out << "      " << wg << "fence_operand(" << s_acc << ");\n";
  out << "      " << wg << "fence_operand(" << o_acc << ");\n";
  out << "      " << wg << "fence();\n";
  out << "      #pragma unroll\n      for (int ks = 0; ks < " << k_steps << "; ++ks) " << wg << "mma_ss<" << BN_ << ", false>(" << s_acc << ", a_desc[ks], b_desc[ks], ks > 0);\n";
  out << "      " << wg << "commit_group();\n";
  out << "      #pragma unroll\n      for (int kk = 0; kk < " << p_steps << "; ++kk) " << wg << "mma_rs<" << DV_ << ", true>(" << o_acc << ", p_regs[kk], v_desc[kk], true);\n";
  out << "      " << wg << "commit_group();\n";
  out << "      " << wg << "wait_group<1>();  // the scores retired; P · V may still run\n";
  out << "      " << wg << "fence_operand(" << s_acc << ");\n";
  out << "      {\n";
  out << "        const long long " << jt << " = next_tile; (void)" << jt << ";  // the statements below are the next tile's\n";
  scores_issued_ = true;
  emit_tile_bodies(out, before_wait, 4);
  out << "        " << wg << "wait_group<0>();  // P · V retired\n";
  out << "        " << wg << "fence_operand(" << o_acc << ");\n";
  out << "        #pragma unroll\n        for (int kk = 0; kk < " << p_steps << "; ++kk) " << wg << "fence_operand(p_regs[kk]);  // P's registers are P's until its mma retired\n";
  if (!after_wait.empty()) emit_tile_bodies(out, after_wait, 4);
  scores_issued_ = false;
  out << pad(4) << "#pragma unroll\n" << pad(4) << "for (int kk = 0; kk < " << p_steps << "; ++kk) solder::tile::c_fragments_to_a<T>(p_regs[kk].reg, p_frag[2 * kk], p_frag[2 * kk + 1]);  // P rounded to T\n";
  out << "      }\n";
  out << "    } else {  // the last tile: P · V alone\n";
  out << "      #pragma unroll\n      for (int kk = 0; kk < " << p_steps << "; ++kk) asm volatile(\"\" : \"+l\"(v_desc[kk]));\n";
  out << "      " << wg << "fence_operand(" << o_acc << ");\n";
  out << "      " << wg << "fence();\n";
  out << "      #pragma unroll\n      for (int kk = 0; kk < " << p_steps << "; ++kk) " << wg << "mma_rs<" << DV_ << ", true>(" << o_acc << ", p_regs[kk], v_desc[kk], true);\n";
  out << "      " << wg << "commit_group();\n";
  out << "      " << wg << "wait_group<0>();\n";
  out << "      " << wg << "fence_operand(" << o_acc << ");\n";
  out << "      #pragma unroll\n      for (int kk = 0; kk < " << p_steps << "; ++kk) " << wg << "fence_operand(p_regs[kk]);\n";
  out << "    }\n";
  pv_pack_only_ = false;
  out << "    ++tiles_done;\n";
  out << "    " << jt << " = next_tile;\n";
  out << "  }\n";
  cached_.clear();
}

}  // namespace solder::mma_stream
