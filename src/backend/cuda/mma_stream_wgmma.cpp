// The Hopper path of the tensor-core emitter (mma_stream_writer.h): both contractions on wgmma.
//
// Schedule (after tests/gpu/tile/attention_wgmma_proto.cu, variant "n64 s4 2/SM"): one warpgroup per
// 64 rows of the block (BM / 64 warpgroups); A stays in 128-byte-swizzled shared memory and is read by
// S = A · Bᵀ through descriptors (wgmma m64nBNk16, both operands from shared memory); B and V stream
// through a ring of four stages filled by cp.async, one barrier per tile; P, rounded to the inputs'
// type, is the register A operand of O += P · V (wgmma m64nDVk16, V MN-major in shared memory).
// Each product is waited for before the statements that follow it, so the row statements run in the
// Kernel IR's order exactly as on the mma.sync path; the tensor cores are kept busy by the other
// warpgroups of the SM (two blocks per SM at head dim 64), not by overlapping a warpgroup's softmax
// with its own P · V as the prototype's fastest variant does.
//
// Why the row statements carry over unchanged: the m64nN accumulator gives warp w of a warpgroup rows
// 16w .. 16w + 15 with register 4j + e at the position of element e of the mma.sync m16n8 C fragment j
// (tile/wgmma.cuh, PTX ISA "wgmma .m64nNk16 register fragments"), so with one 16-row group per warp
// the score and wide tiles keep their [nt][e] arrays and the binding row0 + 8 (rs & 1), column
// 8 nt + 2 (lane & 3) + (e & 1); solder::tile::warpgroup::as_accumulator views them as accumulators.
//
// The compiler findings of tile/wgmma.cuh are followed: descriptors are built from warp-uniform values
// (stage and warpgroup read through __shfl_sync) and pinned before wgmma.fence; P's registers are fenced
// after the wait that retires the P · V that reads them.
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
  out << pad(ind) << wg << "fence_proxy_async();  // cp.async wrote " << A_ << ": visible to wgmma (the async proxy) after the barrier\n";
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

void MmaStreamWriter::emit_loop_wgmma(std::ostringstream& out) {
  LoopParts parts = loop_parts();
  const std::string jt = cuda_identifier(loop_->var), begin = printer_.print_int(loop_->begin), end = printer_.print_int(loop_->end);
  const std::string kb = cuda_identifier(B_), vb = cuda_identifier(V_);
  const int64_t k_elements = BN_ * D_, v_elements = BN_ * DV_;
  auto stage_pointers = [&](const std::string& stage) {
    return "T* const " + kb + " = " + kb + "_stages + " + stage + " * " + std::to_string(k_elements) + "; T* const " + vb + " = " + vb + "_stages + " + stage + " * " +
           std::to_string(v_elements) + ";";
  };
  out << "  // the stream: " << loop_->var << " in " << print_expr(loop_->begin) << " .. " << print_expr(loop_->end) << "; a ring of " << stages_ << " stages of " << B_
      << " and " << V_ << " (" << stages_ - 1 << " live tiles load while one computes), one barrier per tile\n";
  out << "  const long long stream_end = " << end << ";\n";
  emit_tile_classes(out, jt);
  out << "  long long " << jt << " = next_live(" << begin << ");\n";
  out << "  long long load_next = " << jt << ";  // the next live tile to load\n";
  out << "  // " << B_ << " and " << V_ << " of tile load_next into `stage`: one cp.async group, empty past the end (group counts stay uniform)\n";
  out << "  auto load_tile = [&](int stage) {\n";
  out << "    if (load_next < stream_end) {\n";
  out << "      " << stage_pointers("stage") << "\n";
  out << "      const long long " << jt << " = load_next;\n";
  emit_stage(out, *parts.stage_b, B_, 3);
  emit_stage(out, *parts.stage_v, V_, 3);
  out << "      load_next = next_live(load_next + 1);\n";
  out << "    }\n";
  out << "    solder::tile::cp_async_commit();\n";
  out << "  };\n";
  out << "  for (int stage = 0; stage < " << stages_ - 1 << "; ++stage) load_tile(stage);\n";
  out << "  int tiles_done = 0;\n";
  out << "  while (" << jt << " < stream_end) {\n";
  out << "    solder::tile::cp_async_wait<" << stages_ - 2 << ">();  // this tile's group is in; the later ones may be in flight\n";
  out << "    " << kWarpgroup << "fence_proxy_async();  // cp.async wrote it: visible to wgmma after the barrier\n";
  out << "    __syncthreads();  // ... which also says every warpgroup is done with the previous tile, whose stage loads now\n";
  out << "    load_tile((tiles_done + " << stages_ - 1 << ") % " << stages_ << ");\n";
  out << "    const int stage = __shfl_sync(0xffffffffu, tiles_done % " << stages_ << ", 0);  // warp-uniform, as descriptors must be\n";
  out << "    " << stage_pointers("stage") << "\n";
  auto body = [&](int ind) {
    cached_.clear();
    for (auto* s : parts.statements) emit_statement(out, *s, ind);
  };
  if (live_condition_) {
    out << "    if (tile_full(" << jt << ")) {  // the mask holds on the whole tile\n";
    mask_true_ = true;
    body(3);
    mask_true_ = false;
    out << "    } else {\n";
    body(3);
    out << "    }\n";
  } else {
    body(2);
  }
  out << "    ++tiles_done;\n";
  out << "    " << jt << " = next_live(" << jt << " + 1);\n";
  out << "  }\n";
  cached_.clear();
}

}  // namespace solder::mma_stream
