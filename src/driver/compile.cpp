#include "driver/compile.h"

#include "contract/gemv_fit.h"

#include <optional>
#include <sstream>
#include <string>

#include "ir/diagnostics.h"

#include "contract/contract_pass.h"
#include "fusion/padded_operands.h"
#include "fusion/tf32_split.h"
#include "fusion/fuse.h"
#include "fusion/row_epilogue.h"
#include "kernel/kernel_printer.h"
#include "kernel/kernel_verifier.h"
#include "lower/lower_unfused.h"

namespace solder {

namespace {

// A pass's notes, one indented line each under `heading`, appended to the fusion report (nothing when
// the pass has none).
void append_notes(std::string& report, const std::string& heading, const std::vector<std::string>& notes) {
  if (notes.empty()) return;
  std::string text = heading;
  for (auto& note : notes) text += "\n  " + note;
  report += (report.empty() ? "" : "\n") + text + "\n";
}

}  // namespace

const std::vector<CompileStepInfo>& compile_steps() {
  static const std::vector<CompileStepInfo> steps = {
      {CompileStep::parse, "parse", "parse_program, bind_program", "the canonical program text", false},
      {CompileStep::lower, "lower", "lower_unfused", "the unfused Kernel IR", false},
      {CompileStep::skeletons, "skeletons", "choose_skeletons", "the contractions that run whole on the sm_90a GEMM skeleton, with the rule's figures", true},
      {CompileStep::tiles, "tiles", "fuse_for", "each fused kernel's dims (role, extent, tile), stream, segments and blocks", false},
      {CompileStep::fuse, "fuse", "compile_program", "the compiled Kernel IR", false},
      {CompileStep::schedule, "schedule", "generate_cuda",
       "per contraction the skeleton, tile, stages, T and the cost model's figures (why, when scalar); per kernel its launch", true},
  };
  return steps;
}

std::optional<CompileStep> compile_step_named(std::string_view name) {
  for (auto& s : compile_steps())
    if (s.name == name) return s.step;
  return std::nullopt;
}

std::string compile_step_names() {
  std::string names;
  for (auto& s : compile_steps()) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names;
}

WholeContractionPlan choose_skeletons(const BoundProgram& program, const CompileOptions& options) {
  if (!options.gemm_skeleton) return {};
  return plan_whole_contractions(program);
}

std::string skeletons_text(const BoundProgram& program, const WholeContractionPlan& plan) {
  std::string text = whole_contractions_text(program, plan);
  if (text.empty()) return "No contraction the sm_90a GEMM skeleton takes: every one stays in the fused kernels.\n";
  for (auto& w : plan.whole) text += "\n" + print_kernel(w.kernel);
  for (auto& [name, dtype] : plan.store_in_t)  // fuse_for plans again (whole_contractions.h, store_in_t)
    text += "\nThis plan is made again with " + name + " stored in " + std::string(dtype_name(dtype)) +
            " (the two-kernel form above is cheaper): `solder fuse --gpu` shows the kernels that run.\n";
  return text;
}

FusionResult fuse_for(const BoundProgram& program, const CompileOptions& options, const WholeContractionPlan& whole) {
  // A plan that stores an operand in T (whole_contractions.h, store_in_t: the two-kernel form of a
  // prologue contraction) is made again on the program with those dtypes; that plan asks for none.
  if (options.gemm_skeleton && !whole.store_in_t.empty()) {
    const BoundProgram stored = with_storage_dtypes(program, whole.store_in_t);
    const WholeContractionPlan again = plan_whole_contractions(stored);
    if (again.store_in_t.empty()) {
      FusionResult result = fuse_for(stored, options, again);
      for (auto& w : whole.whole)  // the decision, with the figures of the program as written
        for (auto& note : w.notes)
          if (note.rfind("two kernels once", 0) == 0 || note.rfind("stored in T", 0) == 0) result.whole_notes.push_back("  " + note);
      for (auto& note : whole.fused)  // an intermediate stored in T instead of a conversion copy (whole_contractions.cpp)
        if (note.find(": stored in T: ") != std::string::npos) result.whole_notes.push_back("  " + note);
      return result;
    }
  }
  // fuse: inline pointwise definitions, group, decompose cascades, tile and lower each group. A
  // definition too large for the on-chip budget at the requested row tile is retried with half the
  // tile, down to the CPU executor's default tile.
  FusionParams params = options.fusion;
  while (true) {
    try {
      return fuse_program(program, params, options.gemm_skeleton ? &whole : nullptr);
    } catch (const OnChipCapacityError&) {
      if (params.grid_tile <= FusionParams{}.grid_tile) throw;
      params.grid_tile /= 2;
    }
  }
}

FusionResult fuse_for(const BoundProgram& program, const CompileOptions& options) {
  return fuse_for(program, options, choose_skeletons(program, options));
}

std::string tiles_text(const FusionResult& fused) {
  std::ostringstream out;
  auto blocks_of = [&](const std::string& name) -> int64_t {
    for (auto& k : fused.kernels.kernels)
      if (k.name == name) return k.blocks();
    return 0;
  };
  for (auto& name : fused.whole) {
    // The GEMV stream's contracts (contract/gemv_fit.h) are shaped by its writer, the rest by the skeleton's cost model.
    bool gemv = false;
    for (auto& k : fused.kernels.kernels)
      if (k.name == name && k.body.size() == 1)
        if (auto c = k.body[0].as<ContractNode>()) gemv = fit_gemv(*c, fused.kernels.globals).problem.has_value();
    out << "kernel " << name << (gemv ? ": a whole contraction on the GEMV stream (step schedule)\n"
                                      : ": a whole contraction, tiled by the GEMM skeleton's cost model (step schedule)\n");
  }
  for (auto& g : fused.groups) {
    out << "kernel " << g.name << ":";
    for (auto& m : g.plan.members) out << " " << m.def.target.name;
    out << "\n  dims:";
    for (auto& d : g.plan.dims) {
      out << " " << d.name << " " << dim_role_name(d.role) << " " << d.extent;
      if (d.role != DimRole::resident) out << "/" << d.tile;
    }
    out << "\n";
    if (g.plan.stream >= 0)
      out << "  stream " << g.plan.dims[static_cast<size_t>(g.plan.stream)].name << ", " << g.plan.segments << (g.plan.segments == 1 ? " segment" : " segments") << "\n";
    out << "  blocks:";
    for (auto& k : g.kernels) out << " " << k << " " << blocks_of(k);
    out << "; on chip " << g.plan.on_chip_bytes << " bytes of tiles and states\n";
  }
  return out.str();
}

CompileResult compile_program(const BoundProgram& program, const CompileOptions& options) {
  CompileResult result;
  if (!options.fuse) {
    // lower: one kernel per definition
    result.kernels = lower_unfused(program, UnfusedOptions{options.gemm_skeleton});
  } else {
    // skeletons: the contractions that run whole; tiles and fuse: the rest, fused around them
    FusionResult fused = fuse_for(program, options, choose_skeletons(program, options));
    result.kernels = std::move(fused.kernels);
    result.report = fusion_report_text(program, fused);
  }
  // canonicalize contractions: every `reduce sum` that is a matrix product becomes a `contract`
  if (options.contractions) {
    ContractPassResult contracts = canonicalize_contractions(result.kernels);
    result.kernels = std::move(contracts.program);
    std::string text = contract_report_text(contracts);
    if (!text.empty()) result.report += (result.report.empty() ? "" : "\n") + text;
  }
  // 3xTF32 split: a whole all-f32 contraction runs as the split of its operands into tf32 parts, then
  // the tf32 skeleton over K' = 3K (fusion/tf32_split.h; GPU)
  if (options.fuse && options.gemm_skeleton && options.contractions) {
    Tf32Split split = split_tf32x3_operands(result.kernels);
    result.kernels = std::move(split.program);
    append_notes(result.report, "3xTF32 (f32 operands split into tf32 parts, then one tf32 GEMM over 3K):", split.notes);
  }
  // row epilogues: a whole contraction whose result is only reduced along whole rows runs with those
  // reductions in the GEMM skeleton's epilogue, one kernel (fusion/row_epilogue.h; GPU)
  if (options.fuse && options.gemm_skeleton && options.contractions) {
    RowEpilogueFusion rows = fuse_row_epilogues(result.kernels);
    result.kernels = std::move(rows.program);
    append_notes(result.report, "Row epilogues (a product's rows reduced in the GEMM skeleton's epilogue):", rows.notes);
  }
  // padded operands: a whole contraction the skeleton does not stage only because of its A operand (rows
  // not 16-byte aligned, a concatenation along K) runs as a padded copy of A, then the skeleton
  // (fusion/padded_operands.h; GPU)
  if (options.fuse && options.gemm_skeleton && options.contractions) {
    PaddedOperands padded = pad_gathered_operands(result.kernels);
    result.kernels = std::move(padded.program);
    append_notes(result.report, "Padded operands (a copy of A in 16-byte rows, then the GEMM skeleton):", padded.notes);
  }
  // verify the Kernel IR before anything runs it
  verify_kernel_program(result.kernels);
  return result;
}

}  // namespace solder
