#include "fusion/padded_operands.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <map>
#include <set>
#include <sstream>

#include "contract/canonicalize.h"
#include "contract/gathered_gemm_fit.h"
#include "contract/gemm_skeleton_fit.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder {
namespace {

std::string mb(int64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / 1e6 << " MB";
  return out.str();
}

// A name no global of the program has: `wanted`, else `wanted_2`, `wanted_3`, ...
std::string free_global_name(const KernelProgram& program, const std::string& wanted) {
  std::string name = wanted;
  for (int i = 2; program.find_global(name); ++i) name = wanted + "_" + std::to_string(i);
  return name;
}

struct Candidate {
  Kernel copy;           // the copy kernel, run before the contraction's
  GlobalTensor padded;   // P
  ContractNode contract; // the contraction reading P
  std::string note;
};

// The padded form of kernel `k` (one whole contract), or the reason it is not taken (`why`).
std::optional<Candidate> pad(const KernelProgram& program, const Kernel& k, std::string& why) {
  const ContractNode& c = *k.body[0].as<ContractNode>();
  GemmSkeletonFit plain = fit_gemm_skeleton(c, program.globals);
  if (plain.problem) return std::nullopt;  // the skeleton takes it already: nothing to say
  GatheredGemmFit gathered = fit_gathered_gemm(c, program.globals, &program.dims);
  if (!gathered.problem) return std::nullopt;  // not a gathered GEMM either: nothing to say
  const GatheredGemmProblem& p = *gathered.problem;
  const std::string skeleton_refusal = plain.refusal;
  if (p.row_axes.size() != 1 || p.reduce_axes.size() != 1 || !p.batch_axes.empty()) {
    why = "not one row axis, one reduced axis and no batch";
    return std::nullopt;
  }
  if (p.a_leaves.empty()) {
    why = "A is not a tree of selects over loads";
    return std::nullopt;
  }
  const DType t = c.type == MmaType::bf16 ? DType::bf16 : DType::f16;
  const int64_t per_row = 16 / dtype_bytes(t);
  const int64_t m = p.m, kk = p.k, kp = (kk + per_row - 1) / per_row * per_row;
  const int64_t copy_bytes = m * kp * dtype_bytes(t);
  std::set<std::string> read;
  for (auto& leaf : p.a_leaves) read.insert(leaf.load.as<LoadNode>()->tensor);
  int64_t read_bytes = 0;
  for (auto& name : read) read_bytes += program.find_global(name)->bytes();
  if (static_cast<double>(copy_bytes) > kPaddedCopyMaxRatio * static_cast<double>(read_bytes)) {
    why = "the copy of A (" + mb(copy_bytes) + ") is more than " + std::to_string(kPaddedCopyMaxRatio).substr(0, 4) +
          "x what A reads (" + mb(read_bytes) + ")";
    return std::nullopt;
  }

  Candidate out;
  const std::string& row = p.row_axes[0].var;
  const std::string& depth = p.reduce_axes[0].var;
  out.padded = {free_global_name(program, c.dst.name + "_a_padded"), {m, kp}, t, GlobalRole::intermediate};
  out.contract = c;
  out.contract.comment = c.dst.name + " (the whole contraction, one launch of the GEMM skeleton; A copied into " + out.padded.name + " by pad_" +
                         c.dst.name + ")";
  out.contract.terms = {ContractTerm{make_load(out.padded.name, {make_var(row), make_var(depth)}), p.b}};
  std::vector<GlobalTensor> globals = program.globals;
  globals.push_back(out.padded);
  GemmSkeletonFit fit = fit_gemm_skeleton(out.contract, globals);
  if (!fit.problem) {
    why = "the skeleton does not take it with A padded either: " + fit.refusal;
    return std::nullopt;
  }

  // The copy: P[m_t · R + m, k] = (k < K ? A(m_t · R + m, k) : 0) over m < R, k < Kp (whole rows).
  const int64_t rows = padded_copy_rows(kp / per_row);
  const std::string tile = row + "_t";
  Expr global_row = make_binary(BinaryOp::add, make_binary(BinaryOp::mul, make_var(tile), make_int(rows)), make_var(row));
  MapNode map;
  map.comment = "A of " + c.dst.name + "'s contraction, in rows of " + std::to_string(kp * dtype_bytes(t)) + " bytes";
  map.domain.axes = {{row, rows}, {depth, kp}};
  if (m % rows != 0) map.domain.guard = make_binary(BinaryOp::lt, global_row, make_int(m));
  map.dst = Access{out.padded.name, {global_row, make_var(depth)}};
  map.value = substitute_vars(p.a, {{row, global_row}});
  if (kp != kk) map.value = make_select(make_binary(BinaryOp::lt, make_var(depth), make_int(kk)), map.value, make_const(0.0));
  out.copy.name = "pad_" + c.dst.name;
  out.copy.definitions = {};
  out.copy.grid = {{tile, (m + rows - 1) / rows}};
  out.copy.threads = 256;
  out.copy.body.push_back(make_stmt(std::move(map)));

  out.note = c.dst.name + ": A = " + print_expr(p.a) + " copied into " + out.padded.name + "[" + std::to_string(m) + ", " +
             std::to_string(kp) + "] (" + mb(copy_bytes) + ", rows of " + std::to_string(kp * dtype_bytes(t)) +
             " bytes; reads " + mb(read_bytes) + "), then the skeleton, instead of the gathered GEMM (the skeleton did not stage it: " +
             skeleton_refusal + ")";
  return out;
}

}  // namespace

int64_t padded_copy_rows(int64_t vectors_per_row) {
  return std::min(kPaddedCopyMaxRows, 256 / std::gcd(int64_t{256}, vectors_per_row));
}

bool padded_operands_enabled() {
  const char* v = std::getenv("SOLDER_PADDED_OPERANDS");
  return !(v && std::string(v) == "0");
}

PaddedOperands pad_gathered_operands(const KernelProgram& program) {
  PaddedOperands result;
  result.program = program;
  if (!padded_operands_enabled()) return result;
  result.program.kernels.clear();
  for (const Kernel& k : program.kernels) {
    if (k.body.size() != 1 || k.body[0].kind() != StmtKind::Contract) {
      result.program.kernels.push_back(k);
      continue;
    }
    std::string why;
    std::optional<Candidate> candidate = pad(result.program, k, why);
    if (!candidate) {
      if (!why.empty()) result.notes.push_back(k.body[0].as<ContractNode>()->dst.name + ": stays on the gathered GEMM: " + why);
      result.program.kernels.push_back(k);
      continue;
    }
    result.program.globals.push_back(candidate->padded);
    result.program.kernels.push_back(candidate->copy);
    Kernel skeleton = k;
    skeleton.body.clear();
    skeleton.body.push_back(make_stmt(std::move(candidate->contract)));
    result.program.kernels.push_back(std::move(skeleton));
    result.notes.push_back(candidate->note);
  }
  return result;
}

}  // namespace solder
