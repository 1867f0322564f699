#include "contract/decode_attention_fit.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "ir/expr_eval.h"
#include "ir/expr_visitor.h"

namespace solder {
namespace {

constexpr int64_t kVectorElements = 8;  // one lane's columns: 16 bytes of a 16-bit row

// A load of a staged tile replaced by the global element it holds: the staging copy's source with the
// copy's domain variables replaced by the load's indices.
class Unstage : public ExprMutator {
 public:
  explicit Unstage(const std::map<std::string, const CopyNode*>& staged) : staged_(staged) {}
  using ExprMutator::mutate;

 protected:
  Expr mutate(const LoadNode& node, const Expr& self) override {
    auto it = staged_.find(node.tensor);
    if (it == staged_.end()) return ExprMutator::mutate(node, self);
    const CopyNode& copy = *it->second;
    std::map<std::string, Expr> at;
    for (size_t i = 0; i < copy.dst.index.size() && i < node.index.size(); ++i)
      if (auto v = copy.dst.index[i].as<VarNode>()) at[v->name] = mutate(node.index[i]);
    std::vector<Expr> index;
    for (auto& e : copy.src.index) index.push_back(substitute_vars(e, at));
    return make_load(copy.src.name, std::move(index));
  }

 private:
  const std::map<std::string, const CopyNode*>& staged_;
};

// The axes of a domain with more than one point; the others are set to 0.
struct AxisSplit {
  std::vector<Axis> wide;
  std::map<std::string, Expr> renamed;  // unit axes → 0
};
AxisSplit split_axes(const std::vector<Axis>& axes) {
  AxisSplit s;
  for (auto& a : axes) {
    if (a.extent > 1) s.wide.push_back(a);
    else s.renamed[a.var] = make_int(0);
  }
  return s;
}

bool loads_buffer(const Expr& e, const Kernel& kernel) {
  bool found = false;
  for_each_load(e, [&](const LoadNode& l) { found |= kernel.find_buffer(l.tensor) != nullptr; });
  return found;
}

// exp(S[..] − M[..]) with S the scores' buffer: the probability factor of the output's terms.
bool is_probability(const Expr& e, const std::string& scores) {
  auto u = e.as<UnaryNode>();
  if (!u || u->op != UnaryOp::exp) return false;
  auto b = u->operand.as<BinaryNode>();
  if (!b || b->op != BinaryOp::sub) return false;
  auto s = b->lhs.as<LoadNode>();
  return s && s->tensor == scores && b->rhs.as<LoadNode>();
}

bool is_zero(const Expr& e) {
  auto c = e.as<ConstNode>();
  return c && c->value == 0.0;
}

}  // namespace

bool online_stream_enabled() {
  const char* v = std::getenv("SOLDER_ONLINE_STREAM");
  return !(v && std::string(v) == "0");
}

DecodeAttentionFit fit_decode_attention(const Kernel& kernel, const KernelProgram& program) {
  DecodeAttentionFit fit;
  auto refuse = [&](std::string why) {
    fit.refusal = std::move(why);
    return fit;
  };
  // ---- the shape: one stream loop with two contracts, a max and a sum --------------------------------
  const ForNode* loop = nullptr;
  for (auto& s : kernel.body)
    if (auto f = s.as<ForNode>()) {
      if (loop) return refuse("more than one loop");
      loop = f;
    }
  if (!loop) return refuse("no stream loop");
  std::vector<const ContractNode*> contracts;
  std::vector<const ReduceNode*> reduces;
  std::map<std::string, const CopyNode*> staged;
  auto stage = [&](const Block& block) -> std::string {
    for (auto& s : block) {
      if (auto c = s.as<CopyNode>()) {
        const Buffer* dst = kernel.find_buffer(c->dst.name);
        if (dst && program.find_global(c->src.name)) staged[c->dst.name] = c;
      }
    }
    return "";
  };
  stage(kernel.body);
  stage(loop->body);
  for (auto& s : loop->body) {
    switch (s.kind()) {
      case StmtKind::Contract: contracts.push_back(s.as<ContractNode>()); break;
      case StmtKind::Reduce: reduces.push_back(s.as<ReduceNode>()); break;
      case StmtKind::Copy:
      case StmtKind::Map:
      case StmtKind::Fill: break;
      default: return refuse("the stream loop holds a " + std::string(stmt_kind_name(s.kind())));
    }
  }
  if (contracts.size() != 2) return refuse("the stream loop holds " + std::to_string(contracts.size()) + " contracts, not two");
  // The scores: the contract whose destination the other's terms read.
  const ContractNode* score = contracts[0];
  const ContractNode* output = contracts[1];
  auto reads = [](const ContractNode& c, const std::string& buffer) {
    bool found = false;
    for (auto& t : c.terms) found |= uses_tensor(t.a, buffer) || uses_tensor(t.b, buffer);
    return found;
  };
  if (!reads(*output, score->dst.name)) std::swap(score, output);
  if (!reads(*output, score->dst.name) || reads(*score, output->dst.name))
    return refuse("neither contract reads the other's destination as its probabilities");
  if (score->type != output->type || (score->type != MmaType::f16 && score->type != MmaType::bf16))
    return refuse("T is not f16 or bf16 in both contracts");
  const DType type = score->type == MmaType::bf16 ? DType::bf16 : DType::f16;
  for (const ContractNode* c : {score, output})
    if (c->bias || c->epilogue || !c->pair_terms.empty()) return refuse(c->dst.name + " has a bias, an epilogue or a paired product");
  if (score->where) return refuse(score->dst.name + " has a where on the columns");
  if (output->domain.guard) return refuse(output->dst.name + " has a guard on the columns");
  if (output->scale) return refuse(output->dst.name + " has a scale");
  DecodeAttentionProblem p;
  p.type = score->type;
  p.tile_var = loop->var;
  p.scores = score->dst.name;
  p.output = output->dst.name;
  Unstage unstage(staged);

  // ---- the scores: s = scale · Σ_d q(d) · K(key, d) over the key in the tile ----------------------------
  AxisSplit sd = split_axes(score->domain.axes);
  if (sd.wide.size() != 1) return refuse(score->dst.name + " keeps " + std::to_string(sd.wide.size()) + " axes of more than one point, not one (the key)");
  if (score->reduce_axes.size() != 1) return refuse(score->dst.name + " reduces " + std::to_string(score->reduce_axes.size()) + " axes, not one (the columns)");
  if (score->terms.size() != 1) return refuse(score->dst.name + " is not one product term");
  // One query row per block, a stream with two contracts: the attention's shape (its refusals are reported).
  fit.recognized = true;
  if (!online_stream_enabled()) return refuse("off by SOLDER_ONLINE_STREAM=0");
  p.key_tile = sd.wide[0].extent;
  p.columns = score->reduce_axes[0].extent;
  sd.renamed[sd.wide[0].var] = make_var(kKeyInTileVar);
  sd.renamed[score->reduce_axes[0].var] = make_var(kColumnVar);
  auto in_score = [&](const Expr& e) { return e ? substitute_vars(unstage.mutate(e), sd.renamed) : Expr(); };
  const Expr a = in_score(score->terms[0].a), b = in_score(score->terms[0].b);
  const bool a_keyed = uses_var(a, kKeyInTileVar) || uses_var(a, p.tile_var), b_keyed = uses_var(b, kKeyInTileVar) || uses_var(b, p.tile_var);
  if (a_keyed == b_keyed) return refuse(score->dst.name + ": not one factor of the key (K) and one without it (q)");
  p.query = a_keyed ? b : a;
  const Expr key = a_keyed ? a : b;
  if (loads_buffer(p.query, kernel) || loads_buffer(key, kernel)) return refuse(score->dst.name + " reads a tile that is not staged from a global");
  p.key_where = in_score(score->domain.guard);  // the key is a kept axis of the scores: their guard
  p.score_scale = in_score(score->scale);
  if (p.score_scale && (uses_var(p.score_scale, kKeyInTileVar) || uses_var(p.score_scale, kColumnVar) || uses_var(p.score_scale, p.tile_var) ||
                        loads_buffer(p.score_scale, kernel)))
    return refuse(score->dst.name + "'s scale is not the same for every key and column");
  if (p.key_where && uses_var(p.key_where, kColumnVar)) return refuse(score->dst.name + "'s where uses the column");

  // ---- the row state: m = max over the keys of s, z = Σ exp(s − m), both over the same keys ---------------
  const ReduceNode *max_reduce = nullptr, *sum_reduce = nullptr;
  for (const ReduceNode* r : reduces) {
    if (r->op == ReduceOp::max && !max_reduce) max_reduce = r;
    else if (r->op == ReduceOp::sum && !sum_reduce) sum_reduce = r;
    else return refuse("the stream loop's reduces are not one max and one sum");
  }
  if (!max_reduce || !sum_reduce) return refuse("the stream loop's reduces are not one max and one sum");
  for (const ReduceNode* r : {max_reduce, sum_reduce}) {
    AxisSplit rd = split_axes(r->domain.axes);
    if (!rd.wide.empty() || r->reduce_axes.size() != 1 || r->reduce_axes[0].extent != p.key_tile)
      return refuse(r->dst.name + " is not one value per row reduced over the key");
    rd.renamed[r->reduce_axes[0].var] = make_var(kKeyInTileVar);
    const Expr where = r->where ? substitute_vars(r->where, rd.renamed) : Expr();
    if (bool(where) != bool(p.key_where) || (where && !structurally_equal(where, p.key_where)))
      return refuse(r->dst.name + " reduces over other keys than " + score->dst.name);
    const Expr value = r->value;
    const bool ok = r == max_reduce ? (value.as<LoadNode>() && value.as<LoadNode>()->tensor == score->dst.name) : is_probability(value, score->dst.name);
    if (!ok) return refuse(r->dst.name + " is not " + (r == max_reduce ? "max of " : "Σ exp(s − m) of ") + score->dst.name);
  }

  // ---- the output: Σ over the key of exp(s − m) · V(key, d), kept per column --------------------------------
  AxisSplit od = split_axes(output->domain.axes);
  if (od.wide.size() != 1 || od.wide[0].extent != p.columns)
    return refuse(output->dst.name + " does not keep one axis of the " + std::to_string(p.columns) + " columns");
  if (output->reduce_axes.size() != 1 || output->reduce_axes[0].extent != p.key_tile) return refuse(output->dst.name + " is not reduced over the key alone");
  od.renamed[od.wide[0].var] = make_var(kColumnVar);
  od.renamed[output->reduce_axes[0].var] = make_var(kKeyInTileVar);
  auto in_output = [&](const Expr& e) { return e ? substitute_vars(unstage.mutate(e), od.renamed) : Expr(); };
  {
    const Expr where = in_output(output->where);
    if (bool(where) != bool(p.key_where) || (where && !structurally_equal(where, p.key_where)))
      return refuse(output->dst.name + " sums over other keys than " + score->dst.name);
  }
  // V's pieces: each term is exp(s − m) · piece, a piece a global load or select(c, load, 0) / select(c, 0, load)
  struct Piece {
    Expr cond;
    bool negated = false;
    Expr load;
  };
  std::vector<Piece> pieces;
  for (auto& t : output->terms) {
    const bool a_prob = is_probability(t.a, score->dst.name), b_prob = is_probability(t.b, score->dst.name);
    if (a_prob == b_prob) return refuse(output->dst.name + ": a term is not exp(s − m) times a value");
    const Expr v = in_output(a_prob ? t.b : t.a);
    if (v.as<LoadNode>()) {
      pieces.push_back({Expr(), false, v});
    } else if (auto sel = v.as<SelectNode>()) {
      if (is_zero(sel->if_false) && sel->if_true.as<LoadNode>()) pieces.push_back({sel->cond, false, sel->if_true});
      else if (is_zero(sel->if_true) && sel->if_false.as<LoadNode>()) pieces.push_back({sel->cond, true, sel->if_false});
      else return refuse(output->dst.name + ": a value is a select of two nonzero loads in one term");
    } else {
      return refuse(output->dst.name + ": a value is not a load or a select of one");
    }
  }
  if (pieces.size() == 1 && !pieces[0].cond) {
    p.value.when_true = pieces[0].load;
  } else if (pieces.size() == 2 && pieces[0].cond && pieces[1].cond && structurally_equal(pieces[0].cond, pieces[1].cond) &&
             pieces[0].negated != pieces[1].negated) {
    const Piece& yes = pieces[0].negated ? pieces[1] : pieces[0];
    const Piece& no = pieces[0].negated ? pieces[0] : pieces[1];
    p.value = {yes.cond, yes.load, no.load};
  } else {
    return refuse(output->dst.name + ": V is not one load, or two on complementary conditions of the key");
  }
  // K: one load, or a select between two
  if (key.as<LoadNode>()) {
    p.key.when_true = key;
  } else if (auto sel = key.as<SelectNode>(); sel && sel->if_true.as<LoadNode>() && sel->if_false.as<LoadNode>()) {
    p.key = {sel->cond, sel->if_true, sel->if_false};
  } else {
    return refuse(score->dst.name + ": K is not one load or a select between two");
  }
  // Each side of K and V: a global of T's dtype, contiguous along the column (the last index), rows of
  // whole 16-byte vectors; the conditions of the key alone.
  for (const KeyOperand* o : {&p.key, &p.value}) {
    if (o->cond && (uses_var(o->cond, kColumnVar) || loads_buffer(o->cond, kernel))) return refuse("a select of K or V depends on the column");
    for (const Expr* side : {&o->when_true, &o->when_false}) {
      if (!side->defined()) continue;
      const LoadNode& l = *side->as<LoadNode>();
      const GlobalTensor* g = program.find_global(l.tensor);
      if (!g) return refuse(l.tensor + " is not a global");
      if (g->dtype != type) return refuse(l.tensor + " is " + std::string(dtype_name(g->dtype)) + ", not T");
      if (l.index.empty() || !l.index.back().as<VarNode>() || l.index.back().as<VarNode>()->name != kColumnVar)
        return refuse(l.tensor + "'s last index is not the column");
      for (size_t i = 0; i + 1 < l.index.size(); ++i)
        if (uses_var(l.index[i], kColumnVar)) return refuse(l.tensor + " uses the column in another index");
      if (g->shape.back() % kVectorElements != 0) return refuse(l.tensor + "'s rows are not whole 16-byte vectors");
    }
  }
  if (p.columns % kVectorElements != 0 || 32 % (p.columns / kVectorElements) != 0)
    return refuse("D = " + std::to_string(p.columns) + ": not 8, 16, 32, 64, 128 or 256 columns");

  // ---- the grid: the segments are its last dim, one cluster; the other dims are rows ------------------------
  std::string segment_var;
  for (auto& g : kernel.grid)
    if (uses_var(loop->begin, g.var) || uses_var(loop->end, g.var)) {
      if (!segment_var.empty()) return refuse("the stream's bounds use two grid dims");
      segment_var = g.var;
    }
  if (!segment_var.empty()) {
    if (kernel.grid.back().var != segment_var) return refuse("the segments are not the grid's last dim");
    p.segments = static_cast<int>(kernel.grid.back().extent);
    if (kernel.cluster != p.segments) return refuse("the segments are not one cluster (they are merged by another kernel)");
  } else if (kernel.cluster != 1) {
    return refuse("a cluster without segments");
  }
  // ---- the store: the kernel's one global write, of the normalized output ---------------------------------
  const CopyNode* store = nullptr;
  int writes = 0;
  std::function<void(const Block&)> find_writes = [&](const Block& block) {
    for (auto& s : block) {
      if (auto c = s.as<CopyNode>(); c && program.find_global(c->dst.name)) {
        ++writes;
        store = c;
      } else if (auto m = s.as<MapNode>(); m && program.find_global(m->dst.name)) {
        ++writes;
      } else if (auto r = s.as<ReduceNode>(); r && program.find_global(r->dst.name)) {
        ++writes;
      } else if (auto c2 = s.as<ContractNode>(); c2 && program.find_global(c2->dst.name)) {
        ++writes;
      } else if (auto i = s.as<IfNode>()) {
        find_writes(i->then_body);
        find_writes(i->else_body);
      } else if (s.kind() == StmtKind::InterClusterReduce || s.kind() == StmtKind::QueuePush) {
        ++writes;
      }
    }
  };
  find_writes(kernel.body);
  find_writes(loop->body);
  if (writes != 1 || !store) return refuse("the kernel does not write one global by one copy");
  // the stored tile is the output's accumulator times 1 / z (or divided by z): the last map before the store
  const MapNode* normalize = nullptr;
  for (auto& s : kernel.body)
    if (auto m = s.as<MapNode>(); m && m->dst.name == store->src.name) normalize = m;
  if (!normalize) return refuse("the stored tile is not computed after the stream");
  {
    auto mul = normalize->value.as<BinaryNode>();
    auto acc = mul ? mul->lhs.as<LoadNode>() : nullptr;
    bool ok = acc && acc->tensor == output->dst.name;
    if (ok && mul->op == BinaryOp::mul) {
      auto inv = mul->rhs.as<BinaryNode>();
      auto one = inv ? inv->lhs.as<ConstNode>() : nullptr;
      ok = inv && inv->op == BinaryOp::div && one && one->value == 1.0 && inv->rhs.as<LoadNode>();
    } else {
      ok = ok && mul->op == BinaryOp::div && mul->rhs.as<LoadNode>();
    }
    if (!ok) return refuse("the stored tile is not " + output->dst.name + " · (1 / z)");
  }
  AxisSplit cd = split_axes(store->domain.axes);
  if (cd.wide.size() != 1 || cd.wide[0].extent != p.columns) return refuse("the store does not run over the columns");
  cd.renamed[cd.wide[0].var] = make_var(kColumnVar);
  p.dst.name = store->dst.name;
  for (auto& e : store->dst.index) p.dst.index.push_back(substitute_vars(e, cd.renamed));
  {
    const GlobalTensor* g = program.find_global(p.dst.name);
    if (g->dtype != DType::f16 && g->dtype != DType::bf16 && g->dtype != DType::f32) return refuse(p.dst.name + " is not f16, bf16 or f32");
  }

  for (auto& g : kernel.grid)
    if (g.var != segment_var) p.rows.push_back(g);
  // every variable of q, K, V, the where and the store is a row's, the key's, the tile's or the column
  std::set<std::string> known = {kKeyInTileVar, kColumnVar, p.tile_var};
  for (auto& g : p.rows) known.insert(g.var);
  std::vector<Expr> all = {p.query, p.key_where, p.score_scale, p.key.cond, p.key.when_true, p.key.when_false, p.value.cond, p.value.when_true, p.value.when_false};
  for (auto& e : p.dst.index) all.push_back(e);
  for (auto& e : all)
    if (e)
      for (auto& v : vars_used(e))
        if (!known.count(v)) return refuse("an operand uses the variable " + v + ", not a row's, the key's or the column's");
  if (uses_var(p.query, p.tile_var) || uses_var(p.query, kKeyInTileVar)) return refuse("q depends on the key");
  for (auto& e : p.dst.index)
    if (uses_var(e, p.tile_var) || uses_var(e, kKeyInTileVar)) return refuse("the store depends on the key");

  // The stream's tiles over all segments: [begin(0), max end), with no gap between the segments.
  {
    CompiledExpr::Bindings bindings;
    bindings.vars = {segment_var.empty() ? std::string("segment_") : segment_var};
    bindings.dims = program.dims;
    CompiledExpr begin(loop->begin, bindings, Arithmetic::float64), end(loop->end, bindings, Arithmetic::float64);
    int64_t covered = 0;
    for (int64_t s = 0; s < p.segments; ++s) {
      const int64_t b0 = static_cast<int64_t>(begin.eval(&s)), e0 = static_cast<int64_t>(end.eval(&s));
      if (s == 0 && b0 != 0) return refuse("the stream does not start at key 0");
      if (e0 <= b0) continue;
      if (b0 > covered) return refuse("the segments leave a gap in the stream");
      covered = std::max(covered, e0);
    }
    p.key_tiles = covered;
  }
  fit.problem = std::move(p);
  return fit;
}

}  // namespace solder
