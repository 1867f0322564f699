#include "contract/contract_pass.h"

#include <functional>
#include <sstream>

#include "kernel/kernel_printer.h"

namespace solder {
namespace {

// Whether a sum's summand is worth a refusal in the report: some term multiplies two or more
// factors that use the reduced axes (a plain row sum is not a contraction and is not reported).
bool looks_like_a_product(const ReduceNode& r) {
  if (r.op != ReduceOp::sum) return false;
  int factors = 0;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (auto b = e.as<BinaryNode>(); b && (b->op == BinaryOp::mul || b->op == BinaryOp::div)) {
      walk(b->lhs);
      walk(b->rhs);
      return;
    }
    for (auto& a : r.reduce_axes)
      if (uses_var(e, a.var)) {
        ++factors;
        return;
      }
  };
  walk(r.value);
  return factors >= 2;
}

class Canonicalizer {
 public:
  Canonicalizer(const KernelProgram& program, const Kernel& kernel, const ContractPolicy& policy,
                std::vector<ContractReportEntry>& entries)
      : program_(program), kernel_(kernel), policy_(policy), entries_(entries) {}

  Block rewrite(const Block& block) {
    Block out;
    for (auto& s : block) out.push_back(rewrite(s));
    return out;
  }

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  const ContractPolicy& policy_;
  std::vector<ContractReportEntry>& entries_;

  std::optional<DType> dtype_of(const std::string& name) const {
    if (auto b = kernel_.find_buffer(name)) return b->dtype;
    if (auto g = program_.find_global(name)) return g->dtype;
    return std::nullopt;
  }

  Stmt rewrite(const Stmt& s) {
    if (auto f = s.as<ForNode>()) {
      ForNode n = *f;
      n.body = rewrite(f->body);
      return make_stmt(std::move(n));
    }
    if (auto i = s.as<IfNode>()) {
      IfNode n = *i;
      n.then_body = rewrite(i->then_body);
      n.else_body = rewrite(i->else_body);
      return make_stmt(std::move(n));
    }
    auto r = s.as<ReduceNode>();
    if (!r || r->op != ReduceOp::sum) return s;
    Canonicalization c = canonicalize_contraction(*r, [this](const std::string& n) { return dtype_of(n); }, policy_);
    if (!c.contract && !looks_like_a_product(*r)) return s;
    ContractReportEntry entry;
    entry.kernel = kernel_.name;
    entry.destination = r->dst.name;
    entry.canonical = c.contract.has_value();
    entry.notes = c.notes;
    entry.refusal = c.refusal;
    if (!c.contract) {
      entries_.push_back(std::move(entry));
      return s;
    }
    Stmt contract = make_stmt(std::move(*c.contract));
    entry.text = print_stmt(contract);
    entries_.push_back(std::move(entry));
    return contract;
  }
};

}  // namespace

ContractPassResult canonicalize_contractions(const KernelProgram& program) {
  ContractPassResult result;
  result.policy = contract_policy_of(program);
  result.program = program;
  for (auto& kernel : result.program.kernels) {
    Canonicalizer c(program, kernel, result.policy, result.entries);
    kernel.body = c.rewrite(kernel.body);
  }
  return result;
}

std::string contract_report_text(const ContractPassResult& result) {
  if (result.entries.empty()) return "";
  std::ostringstream out;
  out << "Contractions (precision policy: "
      << (result.policy.fp8 ? "16-bit operands, fp8 beside fp8" : result.policy.sixteen_bit ? "16-bit operands" : "f32 operands") << ", because "
      << result.policy.why << ")\n";
  for (auto& e : result.entries) {
    out << "  " << e.kernel << ": " << e.destination << ": ";
    if (!e.canonical) {
      out << "stays a reduce: " << e.refusal << "\n";
      continue;
    }
    std::string text = e.text;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (auto hash = text.rfind('\n'); hash != std::string::npos) text = text.substr(hash + 1);  // drop the comment line
    out << text << "\n";
    for (auto& n : e.notes) out << "      " << n << "\n";
  }
  return out.str();
}

}  // namespace solder
