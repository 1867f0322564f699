#include "fusion/layer_chains.h"

#include <cstdlib>
#include <map>

#include "contract/gemm_skeleton_fit.h"
#include "lower/lower_unfused.h"

namespace solder {
namespace {

// c2 after c1, or the reason why not ("" when it chains). `p1`, `p2`: their skeleton problems.
std::string chain_refusal(const ContractNode& c1, const GemmSkeletonProblem& p1, const ContractNode& c2,
                          const GemmSkeletonProblem& p2) {
  if (p1.batch != 1 || p2.batch != 1) return "batched products (the chain runs one batch)";
  if (c2.terms.size() != 1 || p2.a.tensor != c1.dst.name) return "the second product's A is not the first one's result alone";
  if (p1.m != p2.m) return "different rows (M " + std::to_string(p1.m) + " and " + std::to_string(p2.m) + ")";
  if (p2.k != p1.n) return "K " + std::to_string(p2.k) + " is not the first product's N " + std::to_string(p1.n);
  if (p1.n != p2.n) return "different widths (N " + std::to_string(p1.n) + " and " + std::to_string(p2.n) + ": one chain has one N)";
  if (p1.n % 64 != 0 || p1.n > 256)
    return "N " + std::to_string(p1.n) + ": the chain kernel takes N 64, 128, 192 or 256 (whole N-major boxes, the accumulator and "
                                         "the A fragment in one thread's registers)";
  auto sixteen_bit = [](MmaType t) { return t == MmaType::f16 || t == MmaType::bf16; };
  if (!sixteen_bit(c1.type) || c1.type != c2.type) return "T is not one 16-bit type (f16 or bf16) for both";
  if (p1.b.k_major || p2.b.k_major) return "a weight is K-major (the chain streams N-major weights, K × N)";
  if (!p1.a.k_major) return "the first product's A is M-major";
  return "";
}

}  // namespace

bool layer_chain_report_on() {
  const char* env = std::getenv("SOLDER_LAYER_CHAIN");
  return env && std::string(env) == "1";
}

LayerChainPlan find_layer_chains(const BoundProgram& program, const WholeContractionPlan& plan) {
  LayerChainPlan result;
  const std::vector<GlobalTensor> globals = program_globals(program);
  std::map<std::string, std::vector<size_t>> readers;  // tensor → the definitions that read it
  for (size_t i = 0; i < program.defs.size(); ++i)
    for (auto& t : tensors_used(program.defs[i].def->body)) readers[t].push_back(i);

  // The plain skeleton layer of whole contraction i, or null.
  auto layer = [&](size_t i, GemmSkeletonProblem* problem) -> const ContractNode* {
    const WholeContraction& w = plan.whole[i];
    if (w.pair || !w.absorbed.empty() || !w.chained.empty() || w.kernel.body.size() != 1) return nullptr;
    auto c = w.kernel.body[0].as<ContractNode>();
    if (!c || !c->pair_terms.empty()) return nullptr;
    GemmSkeletonFit fit = fit_gemm_skeleton(*c, globals);
    if (!fit.problem) return nullptr;
    *problem = *fit.problem;
    return c;
  };
  auto name_of = [&](size_t i) { return program.defs[plan.whole[i].def].def->target.name; };

  LayerChain current;
  GemmSkeletonProblem p1;
  const ContractNode* c1 = nullptr;
  auto close = [&] {
    if (current.layers.size() >= 2) {
      for (size_t j = 0; j < current.layers.size(); ++j) {
        const std::string& h = current.results[j];
        const TensorInfo& info = program.tensor(h);
        bool other_reader = info.role == TensorRole::output;
        for (size_t r : readers[h])
          if (j + 1 >= current.layers.size() || r != plan.whole[current.layers[j + 1]].def) other_reader = true;
        current.stored.push_back(j + 1 == current.layers.size() || other_reader);
      }
      result.chains.push_back(current);
    }
    current = {};
  };
  for (size_t i = 0; i < plan.whole.size(); ++i) {
    GemmSkeletonProblem p2;
    const ContractNode* c2 = layer(i, &p2);
    if (c1 && c2) {
      bool reads_h = false;
      for (auto& t : tensors_used(c2->terms.front().a)) reads_h |= t == c1->dst.name;
      const std::string why = chain_refusal(*c1, p1, *c2, p2);
      if (why.empty()) {
        if (current.layers.empty()) {
          current.layers.push_back(i - 1);
          current.results.push_back(c1->dst.name);
          current.m = p1.m;
          current.k0 = p1.k;
          current.n = p1.n;
        }
        current.layers.push_back(i);
        current.results.push_back(c2->dst.name);
        c1 = c2;
        p1 = p2;
        continue;
      }
      if (reads_h) result.refused.push_back(name_of(i - 1) + " and " + name_of(i) + ": not chained: " + why);
    }
    close();
    c1 = c2;
    p1 = p2;
  }
  close();
  return result;
}

std::vector<std::string> layer_chains_text(const BoundProgram& program, const WholeContractionPlan& plan,
                                           const LayerChainPlan& chains) {
  std::vector<std::string> lines;
  if (chains.chains.empty() && chains.refused.empty()) return lines;
  lines.push_back("layer chains (layer_chains.h, SOLDER_LAYER_CHAIN=1: what the sm90 chain kernel would take; not generated, one launch per layer runs):");
  for (auto& c : chains.chains) {
    std::string text = "  ";
    for (size_t j = 0; j < c.layers.size(); ++j) {
      text += (j ? " -> " : "") + program.defs[plan.whole[c.layers[j]].def].def->target.name + " (" + c.results[j];
      text += c.stored[j] ? ", stored)" : ", on chip)";
    }
    text += ": M " + std::to_string(c.m) + ", K0 " + std::to_string(c.k0) + ", N " + std::to_string(c.n) + ", " +
            std::to_string(c.layers.size()) + " layers, 128-row tiles";
    lines.push_back(text);
  }
  for (auto& r : chains.refused) lines.push_back("  " + r);
  return lines;
}

}  // namespace solder
