#include "plan/problems.h"

#include <algorithm>
#include <optional>
#include <set>


namespace solder {

namespace {

void flatten_product(const Expr& e, std::vector<Expr>& factors) {
  if (const auto* b = e.as<BinaryNode>(); b && b->op == BinaryOp::mul) {
    flatten_product(b->lhs, factors);
    flatten_product(b->rhs, factors);
    return;
  }
  factors.push_back(e);
}

struct Operand {
  const LoadNode* load = nullptr;
  const GlobalTensor* tensor = nullptr;
  DType dtype = DType::f32;  // the global's, or the cast's around the load
  int k_position = -1;
};

// A load of a global (under casts) whose index uses `k` in exactly one position.
std::optional<Operand> operand(const Expr& factor, const std::string& k, const KernelProgram& program) {
  Operand op;
  Expr e = factor;
  std::optional<DType> cast;
  while (const auto* c = e.as<CastNode>()) {
    if (!cast) cast = c->dtype;
    e = c->operand;
  }
  op.load = e.as<LoadNode>();
  if (!op.load) return std::nullopt;
  op.tensor = program.find_global(op.load->tensor);
  if (!op.tensor || op.tensor->shape.size() != op.load->index.size()) return std::nullopt;
  op.dtype = cast ? *cast : op.tensor->dtype;
  for (size_t i = 0; i < op.load->index.size(); ++i)
    if (uses_var(op.load->index[i], k)) {
      if (op.k_position >= 0) return std::nullopt;
      op.k_position = static_cast<int>(i);
    }
  if (op.k_position < 0) return std::nullopt;
  return op;
}

std::set<std::string> vars_of(const Expr& e, const std::string& k) {
  std::set<std::string> vars;
  for (const std::string& v : vars_used(e))
    if (v != k) vars.insert(v);
  return vars;
}

bool shares(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& v) { return b.count(v) > 0; });
}

MmaType operand_type(DType a, DType b) {
  auto ta = mma_type_for(a), tb = mma_type_for(b);
  if (ta && tb && *ta == *tb) return *ta;
  // Mixed operands run at the wider type: a 16-bit one if either is 16-bit, else tf32.
  for (DType d : {a, b})
    if (d == DType::bf16) return MmaType::bf16;
  for (DType d : {a, b})
    if (d == DType::f16) return MmaType::f16;
  return MmaType::tf32;
}

class Finder : public StmtVisitor {
 public:
  Finder(const KernelProgram& program, const Kernel& kernel, std::vector<GemmProblem>& out)
      : program_(program), kernel_(kernel), out_(out) {}
  using StmtVisitor::visit;

  void visit(const ReduceNode& node) override {
    if (node.op != ReduceOp::sum || node.reduce_axes.size() != 1 || !node.value) return;
    const std::string& k = node.reduce_axes[0].var;
    std::vector<Expr> factors;
    flatten_product(node.value, factors);
    std::vector<Operand> operands;
    std::vector<Expr> scales;
    for (const Expr& f : factors) {
      if (!uses_var(f, k)) {
        scales.push_back(f);
        continue;
      }
      auto op = operand(f, k, program_);
      if (!op) return;  // the reduced variable appears in something other than an operand load
      operands.push_back(*op);
    }
    if (operands.size() != 2) return;
    // A shares a variable with the destination's first index.
    std::set<std::string> first = node.dst.index.empty() ? std::set<std::string>{} : vars_of(node.dst.index[0], k);
    auto touches_first = [&](const Operand& op) {
      for (size_t i = 0; i < op.load->index.size(); ++i)
        if (static_cast<int>(i) != op.k_position && shares(vars_of(op.load->index[i], k), first)) return true;
      return false;
    };
    if (!touches_first(operands[0]) && touches_first(operands[1])) std::swap(operands[0], operands[1]);
    const Operand& a = operands[0];
    const Operand& b = operands[1];

    GemmProblem p;
    p.k = a.tensor->shape[a.k_position];
    if (b.tensor->shape[b.k_position] != p.k) return;
    int64_t batch = 1, m = 1, n = 1;
    std::vector<bool> b_batch(b.load->index.size(), false);
    for (size_t i = 0; i < a.load->index.size(); ++i) {
      if (static_cast<int>(i) == a.k_position) continue;
      const auto vars = vars_of(a.load->index[i], k);
      bool is_batch = false;
      for (size_t j = 0; j < b.load->index.size(); ++j)
        if (static_cast<int>(j) != b.k_position && shares(vars, vars_of(b.load->index[j], k))) {
          is_batch = true;
          b_batch[j] = true;
        }
      (is_batch ? batch : m) *= a.tensor->shape[i];
    }
    for (size_t j = 0; j < b.load->index.size(); ++j)
      if (static_cast<int>(j) != b.k_position && !b_batch[j]) n *= b.tensor->shape[j];
    p.batch = batch;
    p.m = m;
    p.n = n;
    p.type = operand_type(a.dtype, b.dtype);
    p.a_k_major = a.k_position + 1 == static_cast<int>(a.load->index.size());
    p.b_k_major = b.k_position + 1 == static_cast<int>(b.load->index.size());
    const GlobalTensor* result = kernel_.definitions.empty() ? nullptr : program_.find_global(kernel_.definitions.front());
    p.output = result ? result->dtype : DType::f32;
    const double outputs = static_cast<double>(batch) * m * n;
    for (const Expr& s : scales)
      for (const std::string& tensor : tensors_used(s))
        if (const GlobalTensor* g = program_.find_global(tensor)) p.epilogue_bytes_per_output += g->bytes() / outputs;
    p.name = "kernel " + kernel_.name + ": " + a.load->tensor + " · " + b.load->tensor + " over " + k;
    out_.push_back(p);
  }

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  std::vector<GemmProblem>& out_;
};

}  // namespace

std::vector<GemmProblem> gemm_problems(const KernelProgram& program) {
  std::vector<GemmProblem> problems;
  for (const Kernel& kernel : program.kernels) {
    Finder finder(program, kernel, problems);
    finder.visit(kernel.body);
  }
  return problems;
}

}  // namespace solder
