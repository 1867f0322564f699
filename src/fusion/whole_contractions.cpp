#include "fusion/whole_contractions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "contract/gathered_gemm_fit.h"
#include "contract/gemm_prologue_fit.h"
#include "contract/gemm_skeleton_fit.h"
#include "contract/gemv_fit.h"
#include "contract/operand_copy_fit.h"
#include "fusion/inline_pointwise.h"
#include "hw/hardware.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "lower/internal_names.h"
#include "lower/lower_prologue.h"
#include "lower/lower_unfused.h"
#include "plan/skeleton_choice.h"

namespace solder {
namespace {

constexpr double kBalanceFraction = 1.0 / 3.0;  // whole when FLOPs per byte materialised ≥ balance / 3
constexpr int64_t kMinSide = 64;                // ... and M and N are each at least the skeleton's smallest tile side
constexpr double kGemvMaterialisedFraction = 8;  // GEMV stream: whole when the bytes materialised ≤ 1/8 of the matrix's
constexpr int64_t kMinReduced = 16;             // a sum over at least one mma's K is a matrix product (stored_anyway)

std::string figure(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", x);
  return text;
}

// The partner of contraction `first` for one paired (dual-B) launch: a later contraction `second` such
// that both are read by one pointwise definition p only, p reads nothing else but program inputs and
// tensors already stored, and neither is an output. Returns (second, p).
std::optional<std::pair<size_t, size_t>> pair_partner(const BoundProgram& program, size_t first,
                                                      std::map<std::string, std::vector<size_t>>& readers,
                                                      const std::set<std::string>& stored) {
  const Definition& f = *program.defs[first].def;
  const auto& mine = readers[f.target.name];
  if (f.reduce != ReduceOp::sum || f.target.is_output || mine.size() != 1) return std::nullopt;
  const size_t consumer = mine[0];
  const Definition& p = *program.defs[consumer].def;
  if (p.reduce != ReduceOp::none || p.index_target) return std::nullopt;
  std::optional<size_t> second;
  for (auto& t : tensors_used(p.body)) {
    if (t == f.target.name || stored.count(t) || !program.has_tensor(t) || program.tensor(t).role == TensorRole::input) continue;
    if (second) return std::nullopt;  // a third computed operand
    for (size_t j = first + 1; j < consumer; ++j)
      if (program.defs[j].def->target.name == t) second = j;
    if (!second) return std::nullopt;
  }
  if (!second) return std::nullopt;
  const Definition& g = *program.defs[*second].def;
  if (g.reduce != ReduceOp::sum || g.target.is_output || readers[g.target.name].size() != 1) return std::nullopt;
  return std::pair{*second, consumer};
}

// One paired contract from `primary` (the contract of p with `second`'s value, lower_whole_contraction
// with an epilogue, whose epilogue still loads `first`'s result) and `first`'s plain contract: first's
// terms become the paired terms, over primary's axes (renamed by position), and the epilogue reads
// first's value as pair_value[0] (times its scale, plus its bias, rounded to its dtype as storing it
// would) instead of loading it. Why not otherwise.
std::optional<Kernel> pair_contracts(const BoundProgram& program, const Kernel& primary, const Kernel& first_kernel, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<Kernel> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  ContractNode merged = *primary.body[0].as<ContractNode>();
  const ContractNode& g = *first_kernel.body[0].as<ContractNode>();
  if (g.domain.axes.size() != merged.domain.axes.size() || g.reduce_axes.size() != merged.reduce_axes.size())
    return refuse("their domains or reduced axes differ in number");
  std::map<std::string, Expr> rename;
  for (size_t i = 0; i < g.domain.axes.size(); ++i) {
    if (g.domain.axes[i].extent != merged.domain.axes[i].extent) return refuse("their domains differ in extent");
    rename[g.domain.axes[i].var] = make_var(merged.domain.axes[i].var);
  }
  for (size_t i = 0; i < g.reduce_axes.size(); ++i) {
    if (g.reduce_axes[i].extent != merged.reduce_axes[i].extent) return refuse("their reduced axes differ in extent");
    rename[g.reduce_axes[i].var] = make_var(merged.reduce_axes[i].var);
  }
  auto renamed = [&](const Expr& e) { return e ? substitute_vars(e, rename) : e; };
  auto renamed_names = [&](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (auto& n : names) out.push_back(rename.count(n) ? rename.at(n).as<VarNode>()->name : n);
    return out;
  };
  if (g.type != merged.type) return refuse("their MMA types differ (" + std::string(mma_type_name(g.type)) + ", " + std::string(mma_type_name(merged.type)) + ")");
  if (g.where || merged.where || g.domain.guard || merged.domain.guard || g.accumulate) return refuse("a where condition, a guard or accumulation");
  if (renamed_names(g.row_axes) != merged.row_axes || renamed_names(g.column_axes) != merged.column_axes)
    return refuse("their row and column axes differ");
  for (auto& t : g.terms) merged.pair_terms.push_back({renamed(t.a), renamed(t.b)});
  // The epilogue's loads of first's result at its own point read the pair value instead.
  std::vector<Expr> own;
  for (auto& i : g.dst.index) own.push_back(renamed(i));
  InternalNames names(program);
  for (auto& b : primary.buffers) names.reserve(b.name);
  Buffer value;
  value.name = names.get("value", g.dst.name, g.dst.name + "_value");
  value.shape = {1};
  value.dtype = DType::f32;
  value.scope = Scope::register_file;
  Expr pair = make_load(value.name, {make_int(0)});
  if (g.scale) pair = pair * renamed(g.scale);
  if (g.bias) pair = pair + renamed(g.bias);
  const DType stored_as = program.tensor(g.dst.name).dtype;
  if (stored_as != DType::f32) pair = make_cast(stored_as, pair);
  bool elsewhere = false;
  class ReadPair : public ExprMutator {
   public:
    const std::string* tensor;
    const std::vector<Expr>* own;
    Expr by;
    bool* elsewhere;
    using ExprMutator::mutate;

   protected:
    Expr mutate(const LoadNode& load, const Expr& self) override {
      if (load.tensor != *tensor) return ExprMutator::mutate(load, self);
      bool same = load.index.size() == own->size();
      for (size_t i = 0; same && i < own->size(); ++i) same = structurally_equal(load.index[i], (*own)[i]);
      if (!same) *elsewhere = true;
      return by;
    }
  } read_pair;
  read_pair.tensor = &g.dst.name;
  read_pair.own = &own;
  read_pair.by = pair;
  read_pair.elsewhere = &elsewhere;
  merged.epilogue = read_pair.mutate(merged.epilogue);
  if (elsewhere) return refuse(g.dst.name + " is read at another point than its own");
  merged.pair_value = value.name;
  merged.comment = merged.comment + "; paired with " + g.dst.name + " = " + (g.terms.size() == 1 ? "Σ " + print_expr(g.terms[0].a) + " · " + print_expr(g.terms[0].b) : "its contract") +
                   " (one dual-B launch; " + g.dst.name + " is never stored)";
  Kernel kernel = primary;
  kernel.definitions.insert(kernel.definitions.begin(), g.dst.name);
  kernel.buffers.push_back(std::move(value));
  kernel.body = {make_stmt(std::move(merged))};
  return kernel;
}

// Whether intermediate `name` is a pointwise function of a matrix product's result that the program
// stores anyway (an MLP's h0 = relu(z0 + b0), read by the next layer's product): a sum over at least
// kMinReduced reduced points whose result has at least kMinSide × kMinSide elements. Such a result cannot
// stay on chip across the product that reads h0 (its tile would be the next product's whole A), so
// the fused plan stores z0 (f32) or h0 whatever this contraction does; storing the 16-bit h0 adds no
// round trip (it halves z0's), and the rule does not count it against the contraction. (nerf_mlp's
// first layer has K = 63: at least kMinReduced.)
// The index of the definition of `name` in program.defs, or defs.size().
size_t program_index(const BoundProgram& program, const std::string& name) {
  for (size_t i = 0; i < program.defs.size(); ++i)
    if (program.defs[i].def->target.name == name) return i;
  return program.defs.size();
}

bool stored_anyway(const BoundProgram& program, const std::string& name) {
  for (auto& d : program.defs) {
    if (d.def->target.name != name) continue;
    if (d.def->reduce != ReduceOp::none || d.def->index_target) return false;
    for (auto& t : tensors_used(d.def->body)) {
      if (!program.has_tensor(t) || program.tensor(t).role != TensorRole::intermediate) continue;
      for (auto& p : program.defs) {
        if (p.def->target.name != t || p.def->reduce != ReduceOp::sum) continue;
        int64_t reduced = 1, elements = 1;
        for (int64_t e : p.r_extents) reduced *= e;
        for (int64_t e : program.tensor(t).shape) elements *= e;
        if (reduced >= kMinReduced && elements >= kMinSide * kMinSide) return true;
      }
    }
    return false;
  }
  return false;
}

// Whether every reader of `name` is a matrix product (a sum over at least kMinReduced points).
bool read_only_by_products(const BoundProgram& program, const std::string& name, std::map<std::string, std::vector<size_t>>& readers) {
  const auto& r = readers[name];
  if (r.empty()) return false;
  for (size_t d : r) {
    const BoundDefinition& bd = program.defs[d];
    int64_t reduced = 1;
    for (int64_t e : bd.r_extents) reduced *= e;
    if (bd.def->reduce != ReduceOp::sum || reduced < kMinReduced) return false;
  }
  return true;
}

// Whether the contract `c` no longer reads `t`, which its definition reads: a pointwise
// intermediate that lower_whole_contraction inlined into the operands.
bool inlined_away(const BoundProgram& program, const std::string& t, const ContractNode& c) {
  if (!program.has_tensor(t) || program.tensor(t).role != TensorRole::intermediate) return false;
  for (auto& term : c.terms)
    for (const Expr* e : {&term.a, &term.b})
      for (auto& used : tensors_used(*e))
        if (used == t) return false;
  return true;
}

// Whether the skeleton's prologue path takes the kernel (fit_gemm_prologue); why not.
bool prologue_skeleton_takes(const BoundProgram& program, const Kernel& kernel, std::string* why) {
  GemmPrologueFit fit = fit_gemm_prologue(kernel, program_globals(program));
  if (!fit.problem && why) *why = fit.refusal;
  return fit.problem.has_value();
}


// The two-kernel alternative to a prologue contraction (gemm_prologue_fit.h, choose_prologue_plan):
// the plain whole contraction whose A is a load of an intermediate stored in T (the row definitions
// then fuse into one memory-bound kernel before it), and the choice between the two by cost. Nothing
// when there is no such alternative (rmsnorm_gemm: its xn is f32, not T).
std::optional<ProloguePlanChoice> prologue_plan(const BoundProgram& program, size_t index, const PrologueContraction& prologue,
                                                const std::set<std::string>& materialised, std::optional<Kernel>* plain,
                                                std::map<std::string, DType>* store) {
  const std::vector<GlobalTensor> globals = program_globals(program);
  GemmPrologueFit fit = fit_gemm_prologue(prologue.kernel, globals);
  if (!fit.problem) return std::nullopt;
  // The split stores the operand (M × K in T) and reads it back: it must pass the whole-contraction
  // rule with that round trip (header), else the product would stay fused, slower than either form.
  auto passes_rule = [&](int64_t operand_bytes) {
    const GemmSkeletonProblem& q = fit.problem->problem;
    const Rates& rates = default_hardware().rates;
    double balance = rates.tensor(mma_type_name(fit.problem->contract->type)) / rates.hbm_tbps;
    if (!(balance > 0 && balance < 1e6)) balance = 262;
    double bytes = 2.0 * static_cast<double>(operand_bytes);
    const TensorInfo& result = program.tensor(fit.problem->contract->dst.name);
    if (result.role == TensorRole::intermediate) bytes += 2.0 * static_cast<double>(result.bytes());
    return 2.0 * static_cast<double>(q.m) * q.n * q.k / bytes >= balance * kBalanceFraction;
  };
  // The plain form as the skeleton or the gathered GEMM takes it: a conversion copy of A is what the split
  // below makes with its own rule (store_in_t), not a candidate of its own.
  auto whole = lower_whole_contraction(program, index, nullptr, true, std::nullopt, materialised, OperandCopyMode::kNoCopies);
  if (!whole || whole->body.empty() || !whole->body.back().as<ContractNode>()) {
    // An f32 intermediate P[row, k] as A (rmsnorm_gemm's xn), read by this contraction alone, which
    // rounds it to a 16-bit T: stored in T instead, the plain skeleton takes the product (store_in_t).
    const ContractNode& pc = *fit.problem->contract;
    const MmaType t = pc.type;
    if ((t != MmaType::bf16 && t != MmaType::f16) || !store) return std::nullopt;
    const Definition& def = *program.defs[index].def;
    const std::string row = pc.row_axes[0], k = pc.reduce_axes[0].var;
    std::string operand;
    bool several = false;
    for_each_load(def.body, [&](const LoadNode& l) {
      if (!program.has_tensor(l.tensor) || program.tensor(l.tensor).role != TensorRole::intermediate) return;
      if (l.index.size() == 2 && l.index[0].as<VarNode>() && l.index[1].as<VarNode>() && l.index[0].as<VarNode>()->name == row &&
          l.index[1].as<VarNode>()->name == k && (operand.empty() || operand == l.tensor))
        operand = l.tensor;
      else
        several = true;
    });
    if (operand.empty() || several) return std::nullopt;
    const TensorInfo& info = program.tensor(operand);
    if (info.dtype != DType::f32 || info.def_index < 0 || program.defs[static_cast<size_t>(info.def_index)].def->reduce != ReduceOp::none)
      return std::nullopt;
    for (size_t j = 0; j < program.defs.size(); ++j)
      if (j != index)
        for (auto& used : tensors_used(program.defs[j].def->body))
          if (used == operand) return std::nullopt;
    GemmSkeletonProblem plain_problem = fit.problem->problem;
    plain_problem.a.tensor = operand;
    plain_problem.a.dtype = t == MmaType::bf16 ? DType::bf16 : DType::f16;
    const DType out = program.tensor(pc.dst.name).dtype;
    // The plain kernel's epilogue priced as the writer will emit it (row stores where they apply).
    SkeletonChoice plain_choice = choose_skeleton_config(plain_problem, t, out, gemm_row_stores(pc, plain_problem, out));
    if (!plain_choice.chosen || !passes_rule(info.elements() * 2)) return std::nullopt;
    int bm = 128, bn = 128;
    SkeletonChoice one = choose_skeleton_config(fit.problem->problem, t, out);
    if (one.chosen && one.chosen->config.split_k == 1 && one.chosen->config.cluster_size() == 1) {
      bm = one.chosen->config.bm;
      bn = one.chosen->config.bn;
    }
    ProloguePlanChoice choice = choose_prologue_plan(*fit.problem, bm, bn, 64, plain_choice.chosen->cost.total_us, info.elements() * 2);
    if (choice.split) {
      (*store)[operand] = plain_problem.a.dtype;
      choice.why += "; " + operand + " is stored in " + std::string(dtype_name(plain_problem.a.dtype)) +
                    " (the type the product rounds it to; read by it alone)";
    }
    return choice;
  }
  const ContractNode& c = *whole->body.back().as<ContractNode>();
  if (c.terms.size() != 1) return std::nullopt;
  Expr a = c.terms[0].a;
  if (auto cast = a.as<CastNode>()) a = cast->operand;
  auto load = a.as<LoadNode>();
  if (!load || !program.has_tensor(load->tensor) || program.tensor(load->tensor).role != TensorRole::intermediate) return std::nullopt;
  const TensorInfo& a_info = program.tensor(load->tensor);
  const bool exact = (a_info.dtype == DType::f8e4m3 && c.type == MmaType::f8e4m3) || (a_info.dtype == DType::f8e5m2 && c.type == MmaType::f8e5m2) ||
                     (a_info.dtype == DType::bf16 && c.type == MmaType::bf16) || (a_info.dtype == DType::f16 && c.type == MmaType::f16);
  if (!exact) return std::nullopt;  // the stored operand would be rounded again at the MMA
  GemmSkeletonFit plain_fit = fit_gemm_skeleton(c, globals);
  if (!plain_fit.problem) return std::nullopt;
  const DType out = program.tensor(c.dst.name).dtype;
  SkeletonChoice plain_choice = choose_skeleton_config(*plain_fit.problem, c.type, out, gemm_row_stores(c, *plain_fit.problem, out));
  if (!plain_choice.chosen) return std::nullopt;
  // The prologue kernel's tile, as gemm_prologue_writer chooses it.
  int bm = 128, bn = 128;
  SkeletonChoice one = choose_skeleton_config(fit.problem->problem, fit.problem->contract->type, out);
  if (one.chosen && one.chosen->config.split_k == 1 && one.chosen->config.cluster_size() == 1) {
    bm = one.chosen->config.bm;
    bn = one.chosen->config.bn;
  }
  const MmaType t = fit.problem->contract->type;
  const int bk = (t == MmaType::f8e4m3 || t == MmaType::f8e5m2) ? 128 : 64;
  int64_t a_bytes = dtype_bytes(a_info.dtype);
  for (int64_t e : a_info.shape) a_bytes *= e;
  if (!passes_rule(a_bytes)) return std::nullopt;
  ProloguePlanChoice choice = choose_prologue_plan(*fit.problem, bm, bn, bk, plain_choice.chosen->cost.total_us, a_bytes);
  *plain = std::move(whole);
  return choice;
}
// Chains (header): adjacent whole contractions on the gathered GEMM whose first result is the second's
// A, merged into one kernel where the chained grid is wide enough.
void chain_gathered_contractions(const BoundProgram& program, WholeContractionPlan& plan,
                                 std::map<std::string, std::vector<size_t>>& readers) {
  const std::vector<GlobalTensor> globals = program_globals(program);
  const int64_t sms = default_hardware().sm_count > 0 ? default_hardware().sm_count : 132;
  for (size_t i = 0; i + 1 < plan.whole.size(); ++i) {
    WholeContraction& w1 = plan.whole[i];
    WholeContraction& w2 = plan.whole[i + 1];
    if (w1.pair || w2.pair || !w1.absorbed.empty() || !w2.absorbed.empty() || !w1.chained.empty() || w1.kernel.body.size() != 1 ||
        w2.kernel.body.size() != 1)
      continue;
    auto c1 = w1.kernel.body[0].as<ContractNode>();
    auto c2 = w2.kernel.body[0].as<ContractNode>();
    if (!c1 || !c2) continue;
    const std::string& h = c1->dst.name;
    bool reads_h = false;
    for (auto& term : c2->terms)
      for (auto& t : tensors_used(term.a)) reads_h |= t == h;
    if (!reads_h) continue;
    const std::string names = program.defs[w1.def].def->target.name + " and " + program.defs[w2.def].def->target.name;
    // both on the gathered GEMM: the skeleton stages neither as the canonical form names its axes (the
    // CUDA backend tries it first). One the skeleton takes only by running a side axis as a batch
    // (gemm_skeleton_fit.h: conv_chain's y2 at N > 1, h[n, o, r, col]) keeps the chain, which keeps h on
    // chip: conv_chain N 2 ran 26.8 us chained, 31.6 us as two kernels (bench/NOTES.md, twentieth session).
    auto skeleton_as_named = [&](const ContractNode& c) {
      GemmSkeletonFit fit = fit_gemm_skeleton(c, globals);
      if (!fit.problem) return false;
      for (auto& b : fit.problem->batch_axes)
        if (std::count(c.row_axes.begin(), c.row_axes.end(), b) || std::count(c.column_axes.begin(), c.column_axes.end(), b)) return false;
      return true;
    };
    if (skeleton_as_named(*c1) || skeleton_as_named(*c2) || !fit_gathered_gemm(*c1, globals).problem || !fit_gathered_gemm(*c2, globals).problem)
      continue;
    const TensorInfo& info = program.tensor(h);
    std::vector<size_t> h_readers = readers[h];
    if (info.role != TensorRole::intermediate || h_readers.size() != 1 || h_readers[0] != w2.def) {
      plan.fused.push_back(names + ": not chained: " + h + " is " + (info.role == TensorRole::output ? "an output" : "read by other definitions"));
      continue;
    }
    GatheredChainFit fit = fit_gathered_chain(*c1, *c2, globals);
    if (!fit.problem) {
      plan.fused.push_back(names + ": not chained: " + fit.refusal + " [" + gathered_chain_refusal_name(fit.reason) + "]");
      continue;
    }
    // The form (one block or a cluster per row tile) and the grid rule, shared with the writer.
    const GatheredChainForm form = choose_gathered_chain_form(*fit.problem, sms);
    if (!form.kind) {
      plan.fused.push_back(names + ": not chained: " + form.why + " [" + gathered_chain_refusal_name(form.reason) + "]");
      continue;
    }
    const std::string figures = form.why;
    Kernel merged = w2.kernel;
    merged.definitions.insert(merged.definitions.begin(), w1.kernel.definitions.begin(), w1.kernel.definitions.end());
    merged.buffers.insert(merged.buffers.begin(), w1.kernel.buffers.begin(), w1.kernel.buffers.end());
    merged.body.insert(merged.body.begin(), w1.kernel.body[0]);
    w2.kernel = std::move(merged);
    w2.chained.push_back(w1.def);
    if (w1.epilogue) w2.chained.push_back(*w1.epilogue);
    w2.why = "chained after " + program.defs[w1.def].def->target.name + " (" + h + " kept on chip as its A: " + figures +
             (gathered_chain_forced() ? ", SOLDER_GATHERED_CHAIN=" + std::string(std::getenv("SOLDER_GATHERED_CHAIN")) : std::string()) + "); " +
             w2.why;
    plan.whole.erase(plan.whole.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

}  // namespace

BoundProgram with_storage_dtypes(const BoundProgram& program, const std::map<std::string, DType>& dtypes) {
  auto text = std::make_shared<Program>(*program.program);
  for (auto& d : text->defs) {
    auto it = dtypes.find(d.target.name);
    if (it != dtypes.end()) d.target.dtype = it->second;
  }
  return bind_program(text, program.sizes);
}

const WholeContraction* WholeContractionPlan::computing(const BoundProgram& program, const std::string& target) const {
  for (auto& w : whole) {
    if (program.defs[w.def].def->target.name == target) return &w;
    for (size_t d : w.absorbed)
      if (program.defs[d].def->target.name == target) return &w;
    if (w.epilogue && program.defs[*w.epilogue].def->target.name == target) return &w;
    if (w.pair && program.defs[*w.pair].def->target.name == target) return &w;
    for (size_t d : w.chained)
      if (program.defs[d].def->target.name == target) return &w;
  }
  return nullptr;
}

WholeContractionPlan plan_whole_contractions(const BoundProgram& program) {
  WholeContractionPlan plan;
  // Readers of each tensor, by definition index.
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < program.defs.size(); ++i)
    for (auto& t : tensors_used(program.defs[i].def->body)) {
      auto& r = readers[t];
      if (r.empty() || r.back() != i) r.push_back(i);
    }
  std::set<size_t> absorbed;
  std::set<std::string> materialised;  // intermediates that whole contractions already store or read
  // The bytes that running a contraction whole adds for `name`: a result written and read back (none for an
  // output, written anyway), an operand that nothing materialises yet.
  auto round_trip = [&](const std::string& name) {
    const TensorInfo& info = program.tensor(name);
    if (info.role != TensorRole::intermediate || materialised.count(name)) return 0.0;
    double n = 1;
    for (int64_t e : info.shape) n *= static_cast<double>(e);
    return 2 * n * dtype_bytes(info.dtype);
  };
  // Takes `w` whole: its epilogue and its prologue's definitions absorbed, its computed operands and its
  // result stored.
  auto take = [&](WholeContraction w, const std::vector<std::string>& operands, const std::string& result) {
    for (size_t d : w.absorbed) absorbed.insert(d);
    if (w.epilogue) {
      absorbed.insert(*w.epilogue);
      plan.kept.insert(program.defs[*w.epilogue].def->target.name);
    }
    for (auto& t : operands) {
      plan.kept.insert(t);
      materialised.insert(t);
    }
    materialised.insert(result);
    plan.whole.push_back(std::move(w));
  };
  // A conversion copy (contract/operand_copy_fit.h) of an f32 intermediate that an earlier whole
  // contraction stores as its result and contraction `i` alone reads (chain_f32_mid's h): that kernel
  // stores it in T instead, which is the copy's rounding at no copy (store_in_t: planned again with the
  // dtype, where the skeleton takes `i` as it is). True when it takes one; `notes` say which.
  auto store_in_t_instead = [&](const ContractNode& c, size_t i, std::vector<std::string>& notes) {
    std::string why;
    auto copies = fit_operand_copies(c, program_globals(program), &why);
    if (!copies) return false;
    bool taken = false;
    for (auto& copy : copies->copies) {
      auto load = copy.value.as<LoadNode>();
      if (!load || !program.has_tensor(load->tensor)) continue;
      const TensorInfo& t = program.tensor(load->tensor);
      const WholeContraction* producer = plan.computing(program, t.name);
      if (t.role != TensorRole::intermediate || t.dtype != DType::f32 || readers[t.name] != std::vector<size_t>{i} || !producer ||
          producer->def != program_index(program, t.name) || producer->epilogue || producer->pair || !producer->chained.empty())
        continue;
      plan.store_in_t[t.name] = copy.copy.dtype;
      notes.push_back("stored in T: " + t.name + " stored in " + std::string(dtype_name(copy.copy.dtype)) +
                      " by its own kernel instead of a conversion copy of operand " + copy.operand + " (the same rounding)");
      taken = true;
    }
    return taken;
  };
  for (size_t i = 0; i < program.defs.size(); ++i) {
    const Definition& def = *program.defs[i].def;
    if (def.reduce != ReduceOp::sum || absorbed.count(i)) continue;
    // Two contractions over one A whose only reader is one pointwise expression of both (gated FFN's
    // h = silu(gate) · up): one paired, dual-B launch; neither is stored.
    if (auto partner = pair_partner(program, i, readers, materialised)) {
      const auto [second, consumer] = *partner;
      std::set<std::string> with_first = materialised;
      with_first.insert(def.target.name);
      std::string why = "the pair does not lower", pair_figures;
      std::optional<Kernel> paired;
      auto primary = lower_whole_contraction(program, second, &why, true, consumer, with_first);
      auto first = primary ? lower_whole_contraction(program, i, &why, true) : std::nullopt;
      if (first) paired = pair_contracts(program, *primary, *first, &why);
      if (paired) {
        const ContractNode& c = *paired->body[0].as<ContractNode>();
        GemmSkeletonFit fit = fit_gemm_skeleton(c, program_globals(program));
        if (!fit.problem) {
          why = fit.refusal;
          paired.reset();
        } else {
          SkeletonChoice choice = choose_skeleton_config(*fit.problem, c.type, program.tensor(c.dst.name).dtype);
          // The whole-contraction rule (header) for the pair: both products' FLOPs over the round
          // trip of p's result (none for an output); at least one tile each way.
          const double flops = 4.0 * static_cast<double>(fit.problem->m) * fit.problem->n * fit.problem->k * fit.problem->batch;
          const TensorInfo& result = program.tensor(c.dst.name);
          double bytes = 0;
          if (result.role == TensorRole::intermediate) {
            bytes = 2 * dtype_bytes(result.dtype);
            for (int64_t e : result.shape) bytes *= static_cast<double>(e);
          }
          const Rates& rates = default_hardware().rates;
          double balance = rates.tensor(mma_type_name(c.type)) / rates.hbm_tbps;
          if (!(balance > 0 && balance < 1e6)) balance = 262;
          if (!choice.chosen) {
            why = choice.why;
            paired.reset();
          } else if (fit.problem->m < kMinSide || fit.problem->n < kMinSide) {
            why = std::to_string(fit.problem->m) + " rows × " + std::to_string(fit.problem->n) + " columns, under one " + std::to_string(kMinSide) +
                  " × " + std::to_string(kMinSide) + " tile of the skeleton";
            paired.reset();
          } else if (bytes > 0 && flops / bytes < balance * kBalanceFraction) {
            why = figure(flops / bytes) + " FLOP per byte materialised, < balance / 3 = " + figure(balance * kBalanceFraction);
            paired.reset();
          } else {
            pair_figures = (bytes > 0 ? figure(flops / bytes) + " FLOP per byte materialised" : std::string("no bytes materialised")) +
                           ", ≥ balance / 3 = " + figure(balance * kBalanceFraction) + " (T = " + std::string(mma_type_name(c.type)) + ")";
          }
        }
      }
      const std::string names = def.target.name + " and " + program.defs[second].def->target.name;
      if (paired) {
        WholeContraction w;
        w.def = second;
        w.pair = i;
        w.epilogue = consumer;
        w.kernel = std::move(*paired);
        w.why = pair_figures;
        absorbed.insert(second);
        absorbed.insert(consumer);
        plan.kept.insert(program.defs[consumer].def->target.name);
        for (size_t d : {i, second})
          for (auto& t : tensors_used(program.defs[d].def->body))
            if (program.tensor(t).role != TensorRole::input) {
              plan.kept.insert(t);
              materialised.insert(t);
            }
        materialised.insert(program.defs[consumer].def->target.name);
        plan.whole.push_back(std::move(w));
        continue;
      }
      plan.fused.push_back(names + ": not paired: " + why);
    }
    // The pointwise consumer it could compute as its epilogue.
    std::optional<size_t> consumer;
    const auto& mine = readers[def.target.name];
    if (!def.target.is_output && mine.size() == 1 && absorbable_epilogue(program, i, mine[0], nullptr, materialised)) consumer = mine[0];
    std::optional<Kernel> kernel;
    std::optional<PrologueContraction> prologue;
    if (!consumer) {
      prologue = lower_prologue_contraction(program, i, nullptr);
      if (prologue && std::any_of(prologue->absorbed.begin(), prologue->absorbed.end(), [&](size_t d) { return absorbed.count(d) > 0; }))
        prologue.reset();
      if (prologue) {
        std::string refusal;
        if (!prologue_skeleton_takes(program, prologue->kernel, &refusal)) {
          plan.fused.push_back(def.target.name + ": no operand prologue: " + refusal);
          prologue.reset();
        } else {
          kernel = prologue->kernel;
          std::optional<Kernel> plain;
          std::map<std::string, DType> store;
          if (auto plan_choice = prologue_plan(program, i, *prologue, materialised, &plain, &store)) {
            if (plan_choice->split && !store.empty()) {
              // Two kernels once the operand is stored in T: planned again on that program (fuse_for).
              for (auto& [name, dtype] : store) plan.store_in_t[name] = dtype;
              prologue->notes.push_back("two kernels once the operand is stored in T (planned again): " + plan_choice->why);
            } else if (plan_choice->split) {
              plan.fused.push_back(def.target.name + ": no operand prologue: two kernels (the row definitions fused into one memory-bound kernel "
                                   "storing the operand in T, then the plain skeleton): " + plan_choice->why);
              prologue.reset();
              kernel = std::move(plain);
            } else {
              prologue->notes.push_back("one kernel, not two: " + plan_choice->why);
            }
          }
        }
      }
    }
    if (kernel) {
    } else if (consumer) kernel = lower_whole_contraction(program, i, nullptr, true, consumer, materialised);
    std::string refusal;
    if (!kernel) {
      consumer.reset();
      kernel = lower_whole_contraction(program, i, &refusal, true, std::nullopt, materialised);
    }
    if (!kernel) {
      // Not a contraction the skeleton takes (the fusion report says why, per kernel); one whose
      // conversion copies fit but do not pay says so here (contract/operand_copy_fit.h), unless the
      // operand they copy is an intermediate that its own kernel can store in T (store_in_t_instead).
      const std::string copy = "no conversion copy: copy ";
      if (whole_contraction_type(program, i) == MmaType::tf32x3) {
        // An all-f32 product the policy takes as 3xTF32 that the split and the skeleton do not take: its
        // fused tiles (fewer than 64 rows) compute it on CUDA cores.
        plan.fused.push_back(def.target.name + ": stays fused, on CUDA cores: not 3xTF32: " + refusal);
      } else if (auto at = refusal.find(copy); at != std::string::npos) {
        auto fitting = lower_whole_contraction(program, i, nullptr, true, std::nullopt, materialised, OperandCopyMode::kCopiesThatFit);
        std::vector<std::string> notes;
        if (fitting && store_in_t_instead(*fitting->body.back().as<ContractNode>(), i, notes))
          plan.fused.push_back(def.target.name + ": " + notes.front() + "; this plan is made again with that dtype");
        else
          plan.fused.push_back(def.target.name + ": stays fused: " + refusal.substr(at));
      }
      continue;
    }
    const ContractNode& c = *kernel->body.back().as<ContractNode>();
    // A matrix-vector product on the GEMV stream (contract/gemv_fit.h): whole when what that adds to
    // the traffic (its result's round trip, and each operand's that nothing stores yet) is at most
    // 1/8 of the matrix it streams.
    const std::vector<GlobalTensor> globals = program_globals(program);
    if (auto gemv = fit_gemv(c, globals).problem) {
      double added = round_trip(c.dst.name);
      std::vector<std::string> operands;
      for (const Expr* e : {&gemv->vector, &gemv->matrix}) {
        const std::string& t = e->as<LoadNode>()->tensor;
        if (program.tensor(t).role == TensorRole::input) continue;
        added += round_trip(t);
        operands.push_back(t);
      }
      const std::string& matrix = gemv->matrix.as<LoadNode>()->tensor;
      const double streamed = static_cast<double>(gemv->n) * static_cast<double>(gemv->k) * dtype_bytes(gemv->type);
      const std::string figures = "GEMV stream: N " + std::to_string(gemv->n) + " x K " + std::to_string(gemv->k) + ", " + figure(streamed / 1024) +
                                  " KB of " + matrix + " streamed once, " + figure(added / 1024) + " KB materialised (" +
                                  (added * kGemvMaterialisedFraction <= streamed ? "≤" : ">") + " 1/8 of it)";
      if (added * kGemvMaterialisedFraction > streamed) {
        plan.fused.push_back(def.target.name + ": stays fused: " + figures);
        continue;
      }
      WholeContraction w;
      w.def = i;
      w.epilogue = consumer;
      w.kernel = std::move(*kernel);
      w.why = figures;
      take(std::move(w), operands, c.dst.name);
      continue;
    }
    // At least one 64 × 64 tile of the skeleton: a matrix-vector product (decode) is memory-bound and
    // streams its weights through the GEMV stream above, or through many blocks in a fused kernel.
    int64_t rows = 1, columns = 1;
    for (auto& a : c.domain.axes) {
      if (std::count(c.row_axes.begin(), c.row_axes.end(), a.var)) rows *= a.extent;
      if (std::count(c.column_axes.begin(), c.column_axes.end(), a.var)) columns *= a.extent;
    }
    if (rows < kMinSide || columns < kMinSide) {
      plan.fused.push_back(def.target.name + ": stays fused: " + std::to_string(rows) + " rows × " + std::to_string(columns) +
                           " columns, under one " + std::to_string(kMinSide) + " × " + std::to_string(kMinSide) + " tile of the skeleton");
      continue;
    }
    double flops = 2;
    for (auto& a : c.domain.axes) flops *= static_cast<double>(a.extent);
    for (auto& a : c.reduce_axes) flops *= static_cast<double>(a.extent);
    // A result that is a pointwise function of this product and read only by matrix products (an
    // MLP's h0 = relu(z0 + b0) read by the next layer, conv_chain's h = relu(y1) read by the 1×1
    // convolution) is stored anyway (stored_anyway): no fused plan keeps it on chip across them.
    double bytes = round_trip(c.dst.name);
    const double result_bytes = bytes;
    std::vector<std::string> operands;
    // What the kernel reads: the definition's tensors, or for a whole contract whose operands inline
    // pointwise intermediates (the gathered GEMM, lower_whole_contraction) the tensors they read.
    std::vector<std::string> read = tensors_used(program.defs[i].def->body);
    if (!prologue) {
      read.clear();
      auto add = [&](const Expr& e) {
        if (!e) return;
        for (auto& t : tensors_used(e))
          if (program.has_tensor(t) && t != c.dst.name && std::find(read.begin(), read.end(), t) == read.end()) read.push_back(t);
      };
      for (auto& term : c.terms) {
        add(term.a);
        add(term.b);
      }
      add(c.scale);
      add(c.bias);
      for (auto& t : tensors_used(program.defs[i].def->body))  // as before, for what the terms inline
        if (std::find(read.begin(), read.end(), t) == read.end() && !inlined_away(program, t, c)) read.push_back(t);
    }
    for (auto& t : read) {
      if (program.tensor(t).role == TensorRole::input) continue;
      if (prologue && std::any_of(prologue->absorbed.begin(), prologue->absorbed.end(),
                                  [&](size_t d) { return program.defs[d].def->target.name == t; }))
        continue;  // computed in the kernel (inlined into A, or a side reduction): never materialised
      if (!stored_anyway(program, t)) bytes += round_trip(t);
      operands.push_back(t);
    }
    const Rates& rates = default_hardware().rates;
    // TFLOP/s over TB/s: FLOP per byte (3xtf32: a third of the tf32 rate, three products per product)
    double balance = (c.type == MmaType::tf32x3 ? rates.tensor("tf32") / 3 : rates.tensor(mma_type_name(c.type))) / rates.hbm_tbps;
    if (!(balance > 0 && balance < 1e6)) balance = 262;  // no rates: the H100's f16 figure
    double intensity = bytes > 0 ? flops / bytes : INFINITY;
    std::string stored_note;
    // A result that is a pointwise function of this product and read only by matrix products (an
    // MLP's h0 = relu(z0 + b0) read by the next layer, conv_chain's h = relu(y1) read by the 1×1
    // convolution) is stored anyway (stored_anyway): no fused plan keeps it on chip across them, so
    // its round trip is not charged.
    if (!(intensity >= balance * kBalanceFraction) && result_bytes > 0 && read_only_by_products(program, c.dst.name, readers) &&
        stored_anyway(program, c.dst.name)) {
      bytes -= result_bytes;
      intensity = bytes > 0 ? flops / bytes : INFINITY;
      stored_note = " (" + c.dst.name + " is stored anyway: a product's pointwise result read only by matrix products)";
    }
    const std::string figures = (bytes > 0 ? figure(intensity) + " FLOP per byte materialised" : std::string("no bytes materialised")) + ", " +
                                (intensity >= balance * kBalanceFraction ? "≥" : "<") + " balance / 3 = " + figure(balance * kBalanceFraction) +
                                " (T = " + std::string(mma_type_name(c.type)) +
                                (c.type == MmaType::tf32x3 ? ": 3xTF32 because all operands are f32" : "") + ")" + stored_note;
    if (!(intensity >= balance * kBalanceFraction)) {
      plan.fused.push_back(def.target.name + ": stays fused: " + figures);
      continue;
    }
    WholeContraction w;
    w.def = i;
    w.epilogue = consumer;
    w.why = figures;
    if (prologue) {
      w.absorbed = prologue->absorbed;
      w.notes = prologue->notes;
    }
    if (!prologue && !fit_gemm_skeleton(c, globals).problem) store_in_t_instead(c, i, w.notes);
    w.kernel = std::move(*kernel);
    take(std::move(w), operands, c.dst.name);
  }
  chain_gathered_contractions(program, plan, readers);
  return plan;
}

std::string whole_contractions_text(const BoundProgram& program, const WholeContractionPlan& plan) {
  if (plan.whole.empty() && plan.fused.empty()) return "";
  std::string text = "Whole contractions (one launch each: the sm_90a GEMM skeleton, or the GEMV stream where a line says so):\n";
  for (auto& w : plan.whole) {
    text += "  " + program.defs[w.def].def->target.name;
    if (w.pair) {
      text += " paired with " + program.defs[*w.pair].def->target.name + " (one dual-B launch, A read once)";
      if (w.epilogue) text += " with epilogue " + program.defs[*w.epilogue].def->target.name + " (" + program.defs[*w.pair].def->target.name +
                              " and " + program.defs[w.def].def->target.name + " are never stored)";
    } else if (w.epilogue) {
      text += " with epilogue " + program.defs[*w.epilogue].def->target.name + " (" + program.defs[w.def].def->target.name + " is never stored)";
    }
    if (!w.chained.empty()) {
      text += ", one kernel with";
      for (size_t d : w.chained) text += " " + program.defs[d].def->target.name;
    }
    text += ": " + w.why + "\n";
    if (!w.absorbed.empty()) {
      text += "    with its operand prologue (one kernel; absorbs";
      for (size_t d : w.absorbed) text += " " + program.defs[d].def->target.name;
      text += "):\n";
      for (auto& n : w.notes) text += "      " + n + "\n";
    }
  }
  for (auto& f : plan.fused) text += "  " + f + "\n";
  return text;
}

}  // namespace solder
