#include "fusion/fuse.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "fusion/inline_pointwise.h"
#include "fusion/layer_chains.h"
#include "fusion/lower_fused.h"
#include "kernel/kernel_verifier.h"

namespace solder {
namespace {

// For every tensor, the targets of the definitions that read it.
using Readers = std::map<std::string, std::vector<std::string>>;

Readers readers_of(const std::vector<Definition>& all) {
  Readers readers;
  for (auto& d : all)
    for (auto& t : tensors_used(d.body)) readers[t].push_back(d.target.name);
  return readers;
}

// The results of `group` needed outside it: outputs, and what a definition outside the group reads.
std::vector<std::string> exported_members(const BoundProgram& program, const std::vector<Definition>& group,
                                          const Readers& readers) {
  std::vector<std::string> exported;
  std::set<std::string> in_group;
  for (auto& d : group) in_group.insert(d.target.name);
  for (auto& d : group) {
    std::vector<std::pair<std::string, bool>> names{{d.target.name, d.target.is_output}};
    if (d.index_target) names.push_back({d.index_target->name, d.index_target->is_output});
    for (auto& [n, is_output] : names) {
      bool needed = is_output;
      if (auto it = readers.find(n); it != readers.end())
        for (auto& reader : it->second) needed = needed || !in_group.count(reader);
      if (needed) exported.push_back(n);
    }
  }
  return exported;
}

int64_t on_chip_bytes(const std::vector<Kernel>& kernels, std::string* largest) {
  int64_t worst = 0;
  for (auto& k : kernels) {
    int64_t total = 0;
    const Buffer* big = nullptr;
    int64_t big_bytes = 0;
    for (auto& b : k.buffers) {
      if (b.scope == Scope::queue) continue;
      int64_t bytes = b.elements() * std::max(4, dtype_bytes(b.dtype));  // tiles are held as words
      total += bytes;
      if (!big || bytes > big_bytes) { big = &b; big_bytes = bytes; }
    }
    if (total > worst) {
      worst = total;
      if (big && largest) *largest = big->name + " (" + std::to_string(big_bytes) + " bytes)";
    }
  }
  return worst;
}

// The program's dims and every tensor as a global: what a backend's writer reads a lowered kernel's
// loads and stores against, before the program's kernels are all known.
KernelProgram writer_context(const BoundProgram& program) {
  KernelProgram context;
  context.name = program.program->name;
  context.dims = program.dims;
  for (auto& t : program.tensors)
    context.globals.push_back({t.name, t.shape, t.dtype,
                               t.role == TensorRole::input ? GlobalRole::input
                               : t.role == TensorRole::output ? GlobalRole::output : GlobalRole::intermediate});
  return context;
}

// Why `lowered` (planned as `plan`) does not fit the shared memory of one block as the backend's writer
// holds it (FusionParams::writer_shared_bytes), or "" when it fits or the writer is not asked: no
// backend answer, or a plan with a stream (the attention writers choose that kernel's tiles themselves).
std::string over_writer_shared_memory(const BoundProgram& program, const GroupPlan& plan, const LoweredGroup& lowered,
                                      const FusionParams& params) {
  if (!params.writer_shared_bytes || plan.stream >= 0) return "";
  KernelProgram context = writer_context(program);
  context.globals.insert(context.globals.end(), lowered.scratch.begin(), lowered.scratch.end());
  for (auto& k : lowered.kernels) {
    std::optional<int64_t> bytes = params.writer_shared_bytes(context, k);
    if (bytes && *bytes > params.shared_memory_limit)
      return "shared memory: the writer asks " + std::to_string(*bytes) + " bytes per block for kernel '" + k.name +
             "' (its tiles and the contraction's staging buffers); the limit is " + std::to_string(params.shared_memory_limit) + " bytes";
  }
  return "";
}

// A group lowered as the backend's register pass runs it (FusionParams::register_pass).
struct RegisterFit {
  GroupPlan plan;
  LoweredGroup lowered;
};

// The rows per block of a group on the backend's register pass (FusionParams::register_pass: the CUDA
// backend's, backend/cuda/fusion_params.h). From `plan`'s rows, halving down to one row: the first tile at
// which the pass takes a kernel of the lowered group and every kernel fits the budget counted as the
// backend holds it (the pass: its shared memory only; other kernels: their tiles' sum), then, for a
// group with a reduction (a row kernel), fewer rows while the pass's tile registers per thread exceed
// params.register_floats_target and it still takes the kernel: more blocks per SM, the same bytes in flight.
// The rows are the grid dim of the largest tile (the streaming tiles' innermost grid dim). A long row
// (quant_gemm's K 8192: 8 rows are 256 + 128 floats per thread) needs fewer rows to fit the registers
// at all. `over_budget`: the plan's tiles exceed the shared-memory budget (else it fits as it is, and
// only the registers may move its rows). nullopt: keep `plan` (or, over budget, refuse).
std::optional<RegisterFit> fit_in_registers(const BoundProgram& program, const GroupPlan& plan, const std::string& name,
                                            const FusionParams& params, bool over_budget) {
  if (!params.register_pass) return std::nullopt;  // the CPU executor: every tile is a tile
  bool reduces = false;
  for (auto& m : plan.members) reduces |= m.def.reduce != ReduceOp::none;
  if (!over_budget && !reduces) return std::nullopt;
  const KernelProgram context = writer_context(program);
  int rows = -1;
  for (int g : plan.grid_dims())
    if (plan.dims[static_cast<size_t>(g)].tile > 1 && (rows < 0 || plan.dims[static_cast<size_t>(g)].tile > plan.dims[static_cast<size_t>(rows)].tile))
      rows = g;
  // The lowered group at `p`'s tiles and its register pass's worst kernel, if taken and within budget.
  struct Taken {
    LoweredGroup lowered;
    int64_t shared = 0, floats = 0;
  };
  auto take = [&](const GroupPlan& p) -> std::optional<Taken> {
    Taken t{lower_group(program, p, name)};
    KernelProgram here = context;
    here.globals.insert(here.globals.end(), t.lowered.scratch.begin(), t.lowered.scratch.end());
    bool taken = false, fits = !t.lowered.kernels.empty();
    for (auto& k : t.lowered.kernels) {
      std::optional<RegisterPassFit> fit = params.register_pass(here, k);
      taken |= fit.has_value();
      const int64_t b = fit ? fit->shared_bytes : on_chip_bytes({k}, nullptr);
      t.shared = std::max(t.shared, b);
      if (fit) t.floats = std::max(t.floats, fit->floats);
      fits &= b <= params.on_chip_budget;
    }
    if (!taken || !fits) return std::nullopt;
    return t;
  };
  const int64_t first_tile = rows >= 0 ? plan.dims[static_cast<size_t>(rows)].tile : 1;
  GroupPlan tried = plan;
  std::optional<RegisterFit> best;
  int64_t best_floats = 0, best_shared = 0, first_floats = 0;
  while (true) {
    if (std::optional<Taken> t = take(tried)) {
      if (!best) first_floats = t->floats;
      best = RegisterFit{tried, std::move(t->lowered)};
      best_floats = t->floats;
      best_shared = t->shared;
      if (!reduces || t->floats <= params.register_floats_target) break;
    } else if (best) {
      break;  // taken at more rows, not at these: keep those
    } else if (!over_budget) {
      return std::nullopt;  // not the pass's at the plan's own rows: as planned
    }
    if (rows < 0 || tried.dims[static_cast<size_t>(rows)].tile <= 1) break;
    tried.dims[static_cast<size_t>(rows)].tile /= 2;
  }
  if (!best) return std::nullopt;
  const int64_t tile = rows >= 0 ? best->plan.dims[static_cast<size_t>(rows)].tile : 1;
  if (!over_budget && tile == first_tile) return std::nullopt;  // nothing moved
  std::string why;
  if (over_budget)
    why = "as shared tiles " + std::to_string((on_chip_bytes(lower_group(program, plan, name).kernels, nullptr) + 1023) / 1024) + " KB at " +
          std::to_string(first_tile) + " rows, over the " + std::to_string(params.on_chip_budget / 1024) + " KB budget";
  if (tile != first_tile && first_floats > 0)
    why += std::string(why.empty() ? "" : "; ") + std::to_string(best_floats) + " tile registers per thread" +
           (first_floats > best_floats ? " (" + std::to_string(first_floats) + " at the first rows the pass takes)" : std::string()) +
           ", target " + std::to_string(params.register_floats_target);
  best->plan.notes.push_back("rows in registers at " + best->plan.dims[static_cast<size_t>(rows >= 0 ? rows : 0)].name + " tile " +
                             std::to_string(tile) + ": the backend's register pass holds the row tiles (" + std::to_string(best_shared) +
                             " bytes of shared memory per block; " + why + ")");
  best->plan.on_chip_bytes = best_shared;
  return best;
}

// `wanted`, or `wanted_2`, `wanted_3`, ... when a kernel already lowered has that name (or its merge
// kernel's, `<name>_merge`): a single-definition kernel `fused_y` and the fused kernel of a group
// ending in `y` must not share a name.
std::string unique_kernel_name(const KernelProgram& kp, const std::string& wanted) {
  auto taken = [&](const std::string& name) {
    for (auto& k : kp.kernels)
      if (k.name == name || k.name == name + "_merge" || k.name + "_merge" == name) return true;
    return false;
  };
  std::string name = wanted;
  for (int n = 2; taken(name); ++n) name = wanted + "_" + std::to_string(n);
  return name;
}

std::string names_of(const std::vector<Definition>& defs) {
  std::string s;
  for (auto& d : defs) s += (s.empty() ? "" : ", ") + d.target.name;
  return s;
}

// The name of a grid dim of `before` that is no longer a grid dim in `after` (or "").
std::string lost_grid_dim(const GroupPlan& before, const GroupPlan& after) {
  for (auto& m : before.members) {
    const GroupMember* same = after.member(m.def.target.name);
    if (!same) continue;
    for (size_t i = 0; i < m.p_dims.size(); ++i) {
      const GroupDim& was = before.dims[static_cast<size_t>(m.p_dims[i])];
      const GroupDim& now = after.dims[static_cast<size_t>(same->p_dims[i])];
      if (was.role == DimRole::grid && now.role != DimRole::grid) return was.name;
    }
  }
  return "";
}

// Members of a multi-segment plan that every segment would compute again: pre-phase reductions,
// with the members of the group they read (pre as well), so that the kernel they move to computes
// everything it reads or finds it in a global written before.
std::vector<std::string> costly_pre_members(const GroupPlan& plan) {
  std::vector<std::string> names;
  if (plan.segments <= 1) return names;
  std::set<std::string> needed;
  for (auto& m : plan.members)
    if (m.phase == Phase::pre && !m.r_dims.empty()) needed.insert(m.def.target.name);
  // Producers come before their readers: one pass from the back closes the set.
  for (size_t i = plan.members.size(); i-- > 0;) {
    const GroupMember& m = plan.members[i];
    if (!needed.count(m.def.target.name)) continue;
    for (auto& t : tensors_used(m.def.body))
      if (const GroupMember* producer = plan.member(t)) needed.insert(producer->def.target.name);
  }
  for (auto& m : plan.members)
    if (needed.count(m.def.target.name)) names.push_back(m.def.target.name);
  return names;
}

}  // namespace

// A sum over a product of two program inputs (attention's q·k, a GEMM of two inputs): two of the
// body's factors are plain loads of inputs. (P·V with P a function of inputs -- evoformer's pair bias
// and mask inside exp(...) -- is not: its other factor is computed.)
bool contracts_two_inputs(const BoundProgram& program, const Definition& d) {
  if (d.reduce != ReduceOp::sum) return false;
  std::set<std::string> inputs;
  for (const TensorInfo* t : program.inputs()) inputs.insert(t->name);
  int loaded = 0;
  std::function<void(const Expr&)> factors = [&](const Expr& e) {
    if (e.kind() == ExprKind::Binary && e.as<BinaryNode>()->op == BinaryOp::mul) {
      factors(e.as<BinaryNode>()->lhs);
      factors(e.as<BinaryNode>()->rhs);
    } else if (e.kind() == ExprKind::Cast) {
      factors(e.as<CastNode>()->operand);
    } else if (e.kind() == ExprKind::Load) {
      loaded += inputs.count(e.as<LoadNode>()->tensor) > 0;
    }
  };
  factors(d.body);
  return loaded >= 2;
}

FusionResult fuse_program(const BoundProgram& program, const FusionParams& params, const WholeContractionPlan* whole) {
  FusionResult result;
  InlinedProgram inlined = inline_pointwise(program, whole ? whole->kept : std::set<std::string>{});
  // The whole contraction a definition is (nullptr: none), and whether one computes it as its epilogue.
  auto whole_of = [&](const Definition& d) -> const WholeContraction* {
    const WholeContraction* w = whole ? whole->computing(program, d.target.name) : nullptr;
    return w && program.defs[w->def].def->target.name == d.target.name ? w : nullptr;
  };
  auto absorbed = [&](const Definition& d) {
    const WholeContraction* w = whole ? whole->computing(program, d.target.name) : nullptr;
    return w && program.defs[w->def].def->target.name != d.target.name;
  };
  auto is_whole_group = [&](const std::vector<Definition>& g) { return g.size() == 1 && whole_of(g[0]); };
  if (whole) {
    for (auto& w : whole->whole) {
      std::string line = program.defs[w.def].def->target.name + ": whole";
      if (w.pair) {
        line = program.defs[*w.pair].def->target.name + " and " + line + ", paired over one A in one dual-B launch";
        if (w.epilogue) line += ", with " + program.defs[*w.epilogue].def->target.name + " as their epilogue (neither is stored)";
      } else if (w.epilogue) {
        line += ", with " + program.defs[*w.epilogue].def->target.name + " as its epilogue (" + program.defs[w.def].def->target.name +
                " is never stored)";
      }
      if (!w.chained.empty()) {
        line += ", in one kernel after";
        for (size_t d : w.chained) line += " " + program.defs[d].def->target.name;
      }
      result.whole_notes.push_back(line + ": " + w.why);
      if (!w.absorbed.empty()) {  // the prologue form (whole_contractions.h)
        std::string absorbed_names;
        for (size_t d : w.absorbed) absorbed_names += (absorbed_names.empty() ? "" : ", ") + program.defs[d].def->target.name;
        result.whole_notes.push_back("  one kernel with its operand prologue, absorbing " + absorbed_names + ":");
        for (auto& n : w.notes) result.whole_notes.push_back("    " + n);
      }
    }
    for (auto& f : whole->fused) result.whole_notes.push_back(f);
    if (layer_chain_report_on())  // the chains the sm90 chain kernel would take (layer_chains.h); reported only
      for (auto& line : layer_chains_text(program, *whole, find_layer_chains(program, *whole))) result.whole_notes.push_back(line);
  }
  result.inlined = inlined.inlined;
  const std::vector<Definition>& all = inlined.defs;
  const Readers readers = readers_of(all);

  // Structural grouping (capacity is checked when a group closes).
  FusionParams structural = params;
  structural.on_chip_budget = INT64_MAX / 4;
  FusionParams grouping = structural;  // groups as if every cascade dim were streamed
  grouping.hold_whole_up_to = 0;
  std::vector<std::vector<Definition>> groups;
  std::vector<Definition> current;
  std::optional<PlanAttempt> current_plan;  // plan_group of `current`, once computed (it is deterministic)
  for (auto& d : all) {
    if (absorbed(d)) continue;  // computed by its contraction's kernel
    if (whole_of(d)) {
      // A kernel of its own; no group spans it.
      if (!current.empty()) groups.push_back(current);
      groups.push_back({d});
      current.clear();
      current_plan.reset();
      continue;
    }
    if (current.empty()) { current.push_back(d); continue; }
    std::vector<Definition> candidate = current;
    candidate.push_back(d);
    PlanAttempt attempt = plan_group(program, candidate, exported_members(program, candidate, readers), grouping);
    if (attempt.plan) {
      // Do not serialise a streaming kernel's parallel dims: a definition that reduces over a grid dim
      // of a kernel with a stream would put every block's stream in one block.
      if (!current_plan) current_plan = plan_group(program, current, exported_members(program, current, readers), grouping);
      const PlanAttempt& before = *current_plan;
      if (before.plan && before.plan->stream >= 0) {
        std::string lost = lost_grid_dim(*before.plan, *attempt.plan);
        if (!lost.empty()) {
          attempt.plan.reset();
          attempt.refusal = "it reduces over " + lost + ", a grid dim of that streaming kernel (joining would run every " + lost +
                            " of the stream in one block)";
        }
      }
    }
    if (attempt.plan) {
      current = std::move(candidate);
      current_plan = std::move(attempt);
    } else {
      result.refusals.push_back(d.target.name + " does not join the kernel of " + names_of(current) + ": " + attempt.refusal);
      groups.push_back(current);
      current = {d};
      current_plan.reset();
    }
  }
  if (!current.empty()) groups.push_back(current);

  // Lower each group within capacity, giving trailing definitions to the next group when needed.
  KernelProgram& kp = result.kernels;
  kp.name = program.program->name;
  kp.dims = program.dims;
  std::set<std::string> global_names;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (is_whole_group(groups[gi])) {
      const WholeContraction& w = *whole_of(groups[gi][0]);
      Kernel k = w.kernel;
      k.name = unique_kernel_name(kp, k.name);
      result.whole.push_back(k.name);
      global_names.insert(k.body.back().as<ContractNode>()->dst.name);  // the contract is last (prologue form: side reductions first)
      for (auto& statement : k.body)  // a chain's first result: a global of the executor's (the CUDA kernel keeps it on chip)
        if (auto c = statement.as<ContractNode>()) global_names.insert(c->dst.name);
      kp.kernels.push_back(std::move(k));
      continue;
    }
    std::vector<Definition> group = groups[gi];
    while (true) {
      std::vector<std::string> exported = exported_members(program, group, readers);
      std::optional<GroupPlan> plan;
      std::string refusal;
      bool over_capacity = false;  // the refusal is the on-chip budget's (smaller tiles may fit)
      LoweredGroup lowered;
      // Within the budget: as requested, then holding less whole, then with smaller row and inner
      // tiles. A group of several definitions keeps 64 rows and its inner tile (a tensor-core
      // kernel's shape) and is split instead; a single definition halves down to the CPU defaults.
      // (Two or more contractions of program inputs -- diff_attn's two score matrices -- keep the
      // row tile too: at fewer rows their tiles and accumulators together outgrow the registers of
      // one tensor-core kernel, while each half alone is one such kernel.)
      int input_contractions = 0;
      for (auto& d : group) input_contractions += contracts_two_inputs(program, d);
      // (A group of one contraction of inputs that reads nothing but tensors in memory -- program inputs
      // and what earlier kernels store -- may go down to 32 rows: evoformer at head dim 128, whose
      // pair-bias and gate tiles outgrow the budget at 64, and diff_attn's second pass at head dim 128,
      // whose combine o = a0 − λ·a1 reads the first pass's a0; the attention skeleton then takes 128
      // rows per work tile of its own.)
      bool reads_inputs_only = true;
      {
        std::set<std::string> own(global_names.begin(), global_names.end());  // stored by earlier kernels
        for (const TensorInfo* t : program.inputs()) own.insert(t->name);
        for (auto& d : group) own.insert(d.target.name);
        for (auto& d : group)
          for (auto& t : tensors_used(d.body)) reads_inputs_only &= own.count(t) > 0;
      }
      int64_t smallest_grid_tile = std::min<int64_t>(
          params.grid_tile, group.size() == 1 ? FusionParams{}.grid_tile : input_contractions > 1 ? params.grid_tile : reads_inputs_only ? 32 : 64);
      // Split-KV (FusionParams::split_unshared_streams): a group with a contraction whose streamed tiles
      // no two grid rows share (decode's attention: K and V indexed by b and h) runs one row per block,
      // its stream split across blocks (choose_segments), instead of keeping rows that share nothing
      // and splitting the group for capacity (llama_decode: s, fused_z, a).
      int64_t first_grid_tile = params.grid_tile;
      if (params.split_unshared_streams && input_contractions == 0) {
        PlanAttempt probe = plan_group(program, group, exported, structural);
        bool contraction = false;
        if (probe.plan)
          for (auto& m : probe.plan->members) contraction |= m.def.reduce == ReduceOp::sum && !m.r_dims.empty() && m.phase != Phase::cascade;
        if (probe.plan && probe.plan->stream >= 0 && !probe.plan->grid_shares_stream && contraction) {
          first_grid_tile = 1;
          smallest_grid_tile = 1;
        }
      }
      const int64_t smallest_inner_tile = group.size() > 1 ? params.inner_tile : std::min<int64_t>(params.inner_tile, FusionParams{}.inner_tile);
      // Short cascade dims held whole (hold_whole_up_to) at the largest row tile where that fits and
      // the grid alone fills the GPU; otherwise they are streamed.
      std::vector<int64_t> holds = {params.hold_whole_up_to};
      if (params.hold_whole_up_to > 0) holds.push_back(0);
      for (int64_t hold : holds) {
        for (int64_t grid_tile = first_grid_tile, inner_tile = params.inner_tile; !plan; grid_tile /= 2, inner_tile /= 2) {
          FusionParams tiled = structural;
          tiled.hold_whole_up_to = hold;
          tiled.grid_tile = std::max(grid_tile, smallest_grid_tile);
          tiled.inner_tile = std::max(inner_tile, smallest_inner_tile);
          for (bool prefer_inner : {false, true}) {
            PlanAttempt attempt = plan_group(program, group, exported, tiled);
            if (!attempt.plan) {
              refusal = attempt.refusal;
              over_capacity = attempt.over_capacity;
              break;
            }
            if (prefer_inner) {
              // Hold nothing whole that only reductions use: loop over it instead.
              for (auto& dim : attempt.plan->dims)
                if (dim.role == DimRole::resident && !dim.whole && dim.extent > tiled.inner_tile) {
                  bool p_dim = false;
                  for (auto& m : attempt.plan->members)
                    for (size_t i = 0; i < m.p_dims.size(); ++i) p_dim |= &attempt.plan->dims[static_cast<size_t>(m.p_dims[i])] == &dim;
                  if (!p_dim) { dim.role = DimRole::inner; dim.tile = tiled.inner_tile; }
                }
            }
            std::string name = unique_kernel_name(kp, group.size() == 1 ? group[0].target.name : "fused_" + group.back().target.name);
            LoweredGroup candidate = lower_group(program, *attempt.plan, name);
            std::string largest;
            int64_t bytes = on_chip_bytes(candidate.kernels, &largest);
            if (bytes <= params.on_chip_budget) {
              if (std::string over = over_writer_shared_memory(program, *attempt.plan, candidate, params); !over.empty()) {
                refusal = over;  // as over the budget: the next form or smaller tiles
                over_capacity = true;
                continue;
              }
              plan = attempt.plan;
              lowered = std::move(candidate);
              if (std::optional<RegisterFit> fit = fit_in_registers(program, *attempt.plan, name, params, false)) {
                plan = std::move(fit->plan);  // fewer rows per block for the register pass's registers
                lowered = std::move(fit->lowered);
              }
              refusal.clear();
              over_capacity = false;
              break;
            }
            if (std::optional<RegisterFit> fit = fit_in_registers(program, *attempt.plan, name, params, true)) {
              plan = std::move(fit->plan);
              lowered = std::move(fit->lowered);
              refusal.clear();
              over_capacity = false;
              break;
            }
            refusal = "on-chip capacity: the kernel needs " + std::to_string(bytes) + " bytes (" + std::to_string((bytes + 1023) / 1024) +
                      " KB) of tiles per block (largest " + largest + "); the budget is " + std::to_string(params.on_chip_budget) +
                      " bytes (" + std::to_string(params.on_chip_budget / 1024) + " KB)";
            over_capacity = true;
          }
          bool smallest = tiled.grid_tile <= smallest_grid_tile && tiled.inner_tile <= smallest_inner_tile;
          if (plan || smallest || !over_capacity) break;
        }
        // A short dim held whole gives no parallelism of its own: with fewer blocks than
        // min_blocks_for_single_segment, stream it instead (split across the blocks of a cluster).
        if (plan && hold > 0 && lowered.kernels.front().blocks() < params.min_blocks_for_single_segment) {
          plan.reset();
          refusal = "held whole, the kernel would have only " + std::to_string(lowered.kernels.front().blocks()) + " blocks";
          over_capacity = false;
          continue;
        }
        if (plan) break;
      }
      if (plan && first_grid_tile == 1 && params.grid_tile > 1)
        plan->notes.insert(plan->notes.begin(), "split-KV: one row per block (every streamed input is indexed by every grid dim, so rows "
                                                "that share a block would share no tile); the stream is split to fill the GPU");
      if (plan && group.size() > 1) {
        std::vector<std::string> hoisted = costly_pre_members(*plan);
        if (!hoisted.empty() && hoisted.size() < group.size()) {
          // Give them a kernel of their own before this one.
          std::vector<Definition> first, rest;
          for (auto& d : group)
            (std::find(hoisted.begin(), hoisted.end(), d.target.name) != hoisted.end() ? first : rest).push_back(d);
          std::string list;
          for (auto& h : hoisted) list += (list.empty() ? "" : ", ") + h;
          result.refusals.push_back(list + " run in a kernel of their own: the multi-segment kernel of " + names_of(rest) +
                                    " would compute them again in each of its " + std::to_string(plan->segments) + " segments");
          groups.insert(groups.begin() + static_cast<std::ptrdiff_t>(gi) + 1, rest);
          group = first;
          continue;
        }
      }
      if (plan) {
        FusedGroupInfo info;
        info.name = lowered.kernels.front().name;
        info.plan = *plan;
        for (auto& k : lowered.kernels) info.kernels.push_back(k.name);
        for (auto& k : lowered.kernels) kp.kernels.push_back(std::move(k));
        for (auto& s : lowered.scratch) kp.globals.push_back(s);
        for (auto& e : exported) global_names.insert(e);
        result.groups.push_back(std::move(info));
        break;
      }
      if (group.size() == 1) {
        std::string message = "fusion: cannot fit definition '" + group[0].target.name + "' in one kernel: " + refusal;
        if (over_capacity) throw OnChipCapacityError(message);
        throw Error(message);
      }
      Definition last = group.back();
      group.pop_back();
      result.refusals.push_back(last.target.name + " does not join the kernel of " + names_of(group) + ": " + refusal);
      if (gi + 1 < groups.size() && !is_whole_group(groups[gi + 1])) groups[gi + 1].insert(groups[gi + 1].begin(), last);
      else groups.insert(groups.begin() + static_cast<std::ptrdiff_t>(gi) + 1, {last});
    }
  }

  // Globals: inputs, outputs, and what crosses kernels.
  std::vector<GlobalTensor> globals;
  for (auto& t : program.tensors) {
    if (t.role == TensorRole::input) globals.push_back({t.name, t.shape, t.dtype, GlobalRole::input});
    else if (t.role == TensorRole::output) globals.push_back({t.name, t.shape, t.dtype, GlobalRole::output});
    else if (global_names.count(t.name)) globals.push_back({t.name, t.shape, t.dtype, GlobalRole::intermediate});
  }
  for (auto& g : kp.globals) globals.push_back(g);
  kp.globals = std::move(globals);
  return result;
}

}  // namespace solder
