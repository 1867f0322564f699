// The generic writer (kernel_writer.h): top-k reductions with a group of threads per output point.
//
// One thread per point keeps a sorted list and scans every key (KernelWriter::reduce); with 16 points
// in a 256-thread block, 15 of 16 threads idle and the list lives in local memory. Here G threads
// share a point: each holds a few candidates (its slice of the keys, and of the old list when the
// reduce accumulates) in registers, and k rounds pick the group's first candidate in the top-k order
// (solder/reduce/topk.cuh) and retire it. The result is the sequential one: the k first candidates in
// the order of docs/kernel-ir.md (NaN first, larger values, lower indices), empty slots (-inf, -1).
#include <algorithm>
#include <sstream>

#include "backend/cuda/kernel_writer.h"

namespace solder::generic {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

bool KernelWriter::cooperative_topk(std::ostringstream& out, const ReduceNode& n, int indent) {
  if (n.op != ReduceOp::topk) return false;
  int64_t points = 1, reduced = 1;
  for (auto& a : n.domain.axes) points *= a.extent;
  for (auto& a : n.reduce_axes) reduced *= a.extent;
  if (points > kThreads / 4 || n.k > 32 || reduced < 16 || reduced >= (int64_t{1} << 30)) return false;
  const int64_t group = std::min<int64_t>(32, floor_pow2(kThreads / points));
  const int64_t new_slots = ceil_div(reduced, group), old_slots = n.accumulate ? ceil_div(n.k, group) : 0;
  const int64_t slots = old_slots + new_slots;
  if (slots > 16) return false;  // registers: keep the one-thread-per-point form

  // Every thread reads values of any point; writers are a thread of the point's group.
  std::vector<Touch> touches;
  for (const Expr* e : {&n.domain.guard, &n.value, &n.where, &n.index_value}) expr_touches(*e, {}, false, touches);
  for (const Access* a : {&n.dst, &n.index_dst}) {
    if (a->name.empty()) continue;
    for (auto& i : a->index) expr_touches(i, {}, false, touches);
    touches.push_back(access_touch(*a, true, n.domain.axes, false));
    touches.push_back(access_touch(*a, false, n.domain.axes, false));
  }
  touch(out, indent, touches);

  const std::string p = pad(indent), G = std::to_string(group), C = std::to_string(slots), K = std::to_string(n.k);
  const std::string rank = cuda_identifier(n.rank_var);
  const bool with_index = !n.index_dst.name.empty();
  auto decode = [&](const std::vector<Axis>& axes, const std::string& flat, int in) {
    out << pad(in) << "int rest_ = " << flat << ";\n";
    for (size_t d = axes.size(); d-- > 0;)
      out << pad(in) << "const int " << cuda_identifier(axes[d].var) << " = rest_ % " << axes[d].extent << "; rest_ /= " << axes[d].extent << ";\n";
    out << pad(in) << "(void)rest_;\n";
  };
  // Opens the point's scope (its axes, its guard) for the lanes that hold a point; returns the depth.
  auto open_point = [&](const std::string& who, int in) {
    out << pad(in) << "if (" << who << "point_ < " << points << ") {\n";
    decode(n.domain.axes, "point_", in + 1);
    if (!n.domain.guard) return in + 1;
    out << pad(in + 1) << "if (" << printer_.print_bool(n.domain.guard) << ") {\n";
    return in + 2;
  };
  auto close_point = [&](int in) {
    if (n.domain.guard) out << pad(in + 1) << "}\n";
    out << pad(in) << "}\n";
  };

  out << p << "{  // top-" << K << " into " << n.dst.name << (with_index ? ", " + n.index_dst.name : "") << ": " << G
      << " threads per point, each with " << C << " candidates; " << K << " rounds of the group's first (solder/reduce/topk.cuh)\n";
  out << p << "  const int point_ = threadIdx.x / " << G << ", slice_ = threadIdx.x % " << G << ";\n";
  out << p << "  float cand_value_[" << C << "], cand_index_[" << C << "];\n";
  out << p << "  bool cand_live_[" << C << "];\n";
  out << p << "  #pragma unroll\n" << p << "  for (int c_ = 0; c_ < " << C << "; ++c_) cand_live_[c_] = false;\n";
  int in = open_point("", indent + 1);
  if (old_slots) {  // the old list's ranks slice_, slice_ + G, ...; empty slots are (-inf, -1)
    out << pad(in) << "#pragma unroll\n" << pad(in) << "for (int q_ = 0; q_ < " << old_slots << "; ++q_) {\n";
    out << pad(in + 1) << "const int " << rank << " = slice_ + q_ * " << G << ";\n";
    out << pad(in + 1) << "if (" << rank << " >= " << K << ") continue;\n";
    out << pad(in + 1) << "const float v_ = " << read_access(n.dst) << ", i_ = " << (with_index ? read_access(n.index_dst) : "0.0f") << ";\n";
    out << pad(in + 1) << "if (!(v_ == -solder::infinity() && i_ < 0.0f)) { cand_value_[q_] = v_; cand_index_[q_] = i_; cand_live_[q_] = true; }\n";
    out << pad(in) << "}\n";
  }
  out << pad(in) << "#pragma unroll\n" << pad(in) << "for (int q_ = 0; q_ < " << new_slots << "; ++q_) {  // keys slice_, slice_ + " << G << ", ...\n";
  out << pad(in + 1) << "const int flat_ = slice_ + q_ * " << G << ";\n";
  out << pad(in + 1) << "if (flat_ >= " << reduced << ") continue;\n";
  decode(n.reduce_axes, "flat_", in + 1);
  if (n.where) out << pad(in + 1) << "if (!" << printer_.print_bool(n.where) << ") continue;\n";
  out << pad(in + 1) << "cand_value_[" << old_slots << " + q_] = " << printer_.print_float(n.value) << ";\n";
  out << pad(in + 1) << "cand_index_[" << old_slots << " + q_] = " << (n.index_value ? printer_.print_float(n.index_value) : "0.0f") << ";\n";
  out << pad(in + 1) << "cand_live_[" << old_slots << " + q_] = true;\n";
  out << pad(in) << "}\n";
  close_point(indent + 1);
  // k rounds, every lane of the warp taking part (the shuffles need them all).
  out << p << "  float best_value_[" << K << "], best_index_[" << K << "];\n";
  out << p << "  #pragma unroll\n" << p << "  for (int r_ = 0; r_ < " << K << "; ++r_) {\n";
  out << p << "    solder::reduce::TopkCandidate mine_{false, 0.0f, 0.0f, 0};\n";
  out << p << "    #pragma unroll\n" << p << "    for (int c_ = 0; c_ < " << C << "; ++c_) {\n";
  out << p << "      const solder::reduce::TopkCandidate here_{cand_live_[c_], cand_value_[c_], cand_index_[c_], slice_ * " << C << " + c_};\n";
  out << p << "      if (solder::reduce::topk_first(here_, mine_)) mine_ = here_;\n";
  out << p << "    }\n";
  out << p << "    const solder::reduce::TopkCandidate best_ = solder::reduce::topk_group_best<" << G << ">(mine_);\n";
  out << p << "    #pragma unroll\n" << p << "    for (int c_ = 0; c_ < " << C << "; ++c_) if (best_.live && best_.owner == slice_ * " << C
      << " + c_) cand_live_[c_] = false;\n";
  out << p << "    best_value_[r_] = best_.live ? best_.value : -solder::infinity();\n";
  out << p << "    best_index_[r_] = best_.live ? best_.index : -1.0f;\n";
  out << p << "  }\n";
  in = open_point("slice_ == 0 && ", indent + 1);
  out << pad(in) << "#pragma unroll\n" << pad(in) << "for (int r_new_ = 0; r_new_ < " << K << "; ++r_new_) {\n";
  out << pad(in + 1) << "const long long " << rank << " = r_new_;\n";
  write_access(out, n.dst, "best_value_[r_new_]", in + 1);
  if (with_index) write_access(out, n.index_dst, "best_index_[r_new_]", in + 1);
  out << pad(in) << "}\n";
  close_point(indent + 1);
  out << p << "}\n";
  return true;
}

}  // namespace solder::generic
