#include "plan/problems.h"

#include <cstdio>

#include "contract/gemm_skeleton_fit.h"
#include "hw/hardware.h"
#include "plan/skeleton_choice.h"

namespace solder {

std::vector<GemmProblem> gemm_problems(const KernelProgram& program) {
  std::vector<GemmProblem> problems;
  for (auto& kernel : program.kernels) {
    if (kernel.body.size() != 1) continue;
    auto c = kernel.body[0].as<ContractNode>();
    if (!c) continue;
    GemmSkeletonFit fit = fit_gemm_skeleton(*c, program.globals);
    if (!fit.problem) continue;
    // 3xtf32: the tf32 product over K' = 3K of the split copies (fusion/tf32_split.h), as the writer runs it
    // after the split; the name gives the split's bytes and time (choose_skeleton_config adds it).
    const bool three = c->type == MmaType::tf32x3;
    const GemmSkeletonProblem s = three ? tf32x3_gemm_problem(*fit.problem) : *fit.problem;
    GemmProblem p;
    p.name = c->dst.name + " (kernel " + kernel.name + (s.b2 ? ", dual-B: planned as one product of 2N columns)" : ")");
    if (three) {
      const GemmSkeletonProblem& f = *fit.problem;
      const double elements = static_cast<double>(f.a.batch * f.m + f.b.batch * f.n) * static_cast<double>(f.k);
      char text[200];
      std::snprintf(text, sizeof text, " 3xTF32: the tf32 GEMM over K' = 3K of its split operands, after the split (read %.1f MB, write %.1f MB: %.1f us at the copy rate, two launches)",
                    4 * elements / 1e6, 12 * elements / 1e6, tf32x3_split_us(f, default_hardware()));
      p.name += text;
    }
    p.batch = s.batch;
    p.m = s.m;
    p.n = s.b2 ? 2 * s.n : s.n;  // as choose_skeleton_config models a dual-B problem
    p.k = s.k;
    p.k_first = s.second ? s.first_k() : 0;
    p.type = three ? MmaType::tf32 : c->type;
    p.output = program.find_global(c->dst.name)->dtype;
    p.a_k_major = s.a.k_major;
    p.b_k_major = s.b.k_major;
    p.a_shared = s.batch > 1 && s.a.batch == 1;
    p.b_shared = s.batch > 1 && s.b.batch == 1;
    p.a_ld = s.a.ld;
    p.b_ld = s.b.ld;
    // The epilogue's reads: each loaded scale or bias element, amortised over the outputs that share it.
    double bytes = 0;
    for (const Expr* e : {&c->scale, &c->bias}) {
      if (!*e) continue;
      for_each_load(*e, [&](const LoadNode& load) {
        const GlobalTensor* g = program.find_global(load.tensor);
        if (!g) return;
        bytes += static_cast<double>(g->bytes()) / static_cast<double>(s.m * s.n * s.batch);
      });
    }
    p.epilogue_bytes_per_output = bytes;
    problems.push_back(p);
  }
  return problems;
}

}  // namespace solder
