#include "fusion/group_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "algebra/normal_form.h"
#include "contract/canonicalize.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "plan/plan.h"
#include "plan/skeleton_choice.h"
#include "support/checked.h"

namespace solder {

std::string_view dim_role_name(DimRole role) {
  switch (role) {
    case DimRole::grid: return "grid";
    case DimRole::stream: return "stream";
    case DimRole::resident: return "resident";
    case DimRole::inner: return "inner";
  }
  return "?";
}

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::pre: return "pre";
    case Phase::per_tile: return "per-tile";
    case Phase::cascade: return "cascade";
    case Phase::post: return "post";
  }
  return "?";
}

int GroupMember::dim_of(const std::string& var) const {
  for (size_t i = 0; i < def.target.index.size(); ++i) if (def.target.index[i].name == var) return p_dims[i];
  for (size_t i = 0; i < def.reduce_vars.size(); ++i) if (def.reduce_vars[i].name == var) return r_dims[i];
  return -1;
}

const GroupMember* GroupPlan::member(const std::string& name) const {
  for (auto& m : members)
    if (m.def.target.name == name || (m.def.index_target && m.def.index_target->name == name)) return &m;
  return nullptr;
}

std::vector<int> GroupPlan::grid_dims() const {
  std::vector<int> g;
  for (size_t i = 0; i < dims.size(); ++i) if (dims[i].role == DimRole::grid) g.push_back(static_cast<int>(i));
  return g;
}

namespace {

struct UnionFind {
  std::vector<int> parent;
  int add() { parent.push_back(static_cast<int>(parent.size())); return parent.back(); }
  int find(int x) { while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])]; return x; }
  void join(int a, int b) { parent[static_cast<size_t>(find(a))] = find(b); }
};


class Planner {
 public:
  Planner(const BoundProgram& program, const std::vector<Definition>& defs, const std::vector<std::string>& exported,
          const FusionParams& params)
      : program_(program), params_(params) {
    const std::set<std::string> exported_set(exported.begin(), exported.end());
    for (auto& t : program.tensors) tensor_by_name_.emplace(t.name, &t);
    for (auto& d : defs) {
      GroupMember m;
      m.def = d;
      m.dtype = d.value_dtype();
      m.value_exported = exported_set.count(d.target.name) > 0;
      m.index_exported = d.index_target && exported_set.count(d.index_target->name) > 0;
      m.exported = m.value_exported || m.index_exported;
      plan_.members.push_back(std::move(m));
    }
    for (size_t i = plan_.members.size(); i-- > 0;) {  // the first member of a name wins
      const Definition& d = plan_.members[i].def;
      member_of_tensor_[d.target.name] = static_cast<int>(i);
      if (d.index_target) member_of_tensor_[d.index_target->name] = static_cast<int>(i);
    }
  }

  PlanAttempt run() {
    try {
      build_dims();
      const GroupPlan dims_only = plan_;
      PlanAttempt attempt = plan_roles();
      if (!attempt.plan && product_rows_tiled_) {
        // Refused with a product's row tile (its tiles do not fit on chip): one row per block, as before.
        plan_ = dims_only;
        tile_product_rows_ = false;
        attempt = plan_roles();
      }
      return attempt;
    } catch (const std::string& refusal) {
      return {std::nullopt, refusal};
    }
  }

 private:
  // Roles, phases, segments and the capacity check, on the dims of build_dims.
  PlanAttempt plan_roles() {
    std::set<int> excluded;  // classes refused as stream
    while (true) {
      assign_roles(excluded);
      std::string refusal = assign_phases();
      if (refusal.empty()) break;
      if (plan_.stream < 0) return {std::nullopt, refusal};
      plan_.notes.push_back("not streaming " + plan_.dims[static_cast<size_t>(plan_.stream)].name + ": " + refusal);
      excluded.insert(plan_.stream);
    }
    bool streaming = params_.streaming_tiles && !has_contraction();
    if (streaming) retile_for_streaming();
    if (!streaming && split_k_ < 0 && params_.split_k_to_fill && plan_.stream < 0) {
      // Too few blocks for the GPU and no stream to split: stream the contraction's K instead, split
      // into segments across blocks (its partial sums merged as any stream's are).
      if (int d = split_k_candidate(); d >= 0) {
        split_k_ = d;
        return plan_roles();
      }
    }
    plan_.grid_shares_stream = grid_shares_streamed_tiles();
    const bool split_kv = params_.split_unshared_streams && plan_.stream >= 0 && !plan_.grid_shares_stream;
    choose_segments(streaming || split_k_ >= 0 || split_kv ? fill_blocks() : params_.min_blocks_for_single_segment, split_kv);
    std::string capacity = check_capacity();
    if (!capacity.empty()) return {std::nullopt, capacity, true};
    return {plan_, ""};
  }

  // Whether a tensor-core product's rows are still tiled (product_row_tile).
  bool tile_product_rows_ = true;
  int split_k_ = -1;  // a contraction's reduced dim streamed to split it across blocks (split_k_candidate)
  bool product_rows_tiled_ = false;  // assign_roles gave a product's rows that tile
  const BoundProgram& program_;
  const FusionParams& params_;
  GroupPlan plan_;
  std::vector<std::set<int>> p_of_, r_of_;  // per dim: members using it as p-/r-dim
  std::map<std::string, int> member_of_tensor_;  // target (and index target) name -> member
  std::map<std::string, const TensorInfo*> tensor_by_name_;  // the program's tensors

  const TensorInfo& tensor(const std::string& name) const {
    auto it = tensor_by_name_.find(name);
    if (it == tensor_by_name_.end()) throw std::string("internal: no tensor named " + name);
    return *it->second;
  }

  int member_index(const std::string& tensor) const {
    auto it = member_of_tensor_.find(tensor);
    return it == member_of_tensor_.end() ? -1 : it->second;
  }

  // ---- 1. Dim classes -------------------------------------------------------------------------
  void build_dims() {
    UnionFind uf;
    std::map<std::pair<int, std::string>, int> node;
    std::map<int, int64_t> extent_of_node;
    std::set<int> whole_nodes;
    // Members of each class (by root), to refuse joining two variables of one definition; merged
    // smaller into larger, so that building the classes stays near-linear in the group's size.
    std::map<int, std::set<int>> members_of_root;
    std::map<std::string, const BoundDefinition*> bound_by_name;
    for (auto& bd : program_.defs) bound_by_name[bd.def->target.name] = &bd;
    for (size_t i = 0; i < plan_.members.size(); ++i) {
      auto found = bound_by_name.find(plan_.members[i].def.target.name);
      if (found == bound_by_name.end()) throw std::string("internal: no bound definition for " + plan_.members[i].def.target.name);
      for (auto& [var, extent] : found->second->extent) {
        int id = uf.add();
        node[{static_cast<int>(i), var}] = id;
        extent_of_node[id] = extent;
        members_of_root[id] = {static_cast<int>(i)};
      }
      // topk's rank variable indexes the k winners, which one selection produces together: held whole
      // (a grid dim of tile 1 gave each block one rank of a topk(2): an out-of-bounds write).
      const Definition& def = plan_.members[i].def;
      const BoundDefinition& bd = *found->second;
      if (def.reduce == ReduceOp::topk && bd.topk_rank_position >= 0)
        whole_nodes.insert(node.at({static_cast<int>(i), def.target.index[static_cast<size_t>(bd.topk_rank_position)].name}));
    }
    auto try_join = [&](int a, int b) {
      int ra = uf.find(a), rb = uf.find(b);
      if (ra == rb) return true;
      if (extent_of_node[a] != extent_of_node[b]) return false;  // e.g. a concatenation's wider index
      std::set<int>& ma = members_of_root[ra];
      std::set<int>& mb = members_of_root[rb];
      const std::set<int>& smaller = ma.size() < mb.size() ? ma : mb;
      const std::set<int>& larger = ma.size() < mb.size() ? mb : ma;
      for (int x : smaller) if (larger.count(x)) return false;
      uf.join(a, b);  // the root of b's class stays the root
      if (ma.size() > mb.size()) ma.swap(mb);
      mb.insert(ma.begin(), ma.end());
      members_of_root.erase(ra);
      return true;
    };
    std::map<std::pair<std::string, size_t>, int> input_position;  // first variable seen at (input, position)
    for (size_t i = 0; i < plan_.members.size(); ++i) {
      for_each_load(plan_.members[i].def.body, [&](const LoadNode& load) {
        int producer = member_index(load.tensor);
        for (size_t k = 0; k < load.index.size(); ++k) {
          auto v = load.index[k].as<VarNode>();
          if (producer >= 0) {
            const Definition& pd = plan_.members[static_cast<size_t>(producer)].def;
            int pnode = node.at({producer, pd.target.index[k].name});
            if (!v || !try_join(pnode, node.at({static_cast<int>(i), v->name}))) whole_nodes.insert(pnode);
          } else if (v && !tensor(load.tensor).input) {
            // a global intermediate computed by an earlier kernel: no alignment needed
          } else if (v) {
            auto key = std::make_pair(load.tensor, k);
            int here = node.at({static_cast<int>(i), v->name});
            auto it = input_position.find(key);
            if (it == input_position.end()) input_position[key] = here;
            else try_join(it->second, here);
          }
        }
      });
    }
    // Number the classes.
    std::map<int, int> dim_of_root;
    for (size_t i = 0; i < plan_.members.size(); ++i) {
      GroupMember& m = plan_.members[i];
      auto dim_for = [&](const std::string& var) {
        int id = node.at({static_cast<int>(i), var});
        int root = uf.find(id);
        auto it = dim_of_root.find(root);
        if (it == dim_of_root.end()) {
          GroupDim d;
          d.name = var;
          d.extent = extent_of_node[id];
          it = dim_of_root.emplace(root, static_cast<int>(plan_.dims.size())).first;
          plan_.dims.push_back(d);
        }
        GroupDim& d = plan_.dims[static_cast<size_t>(it->second)];
        if (d.extent != extent_of_node[id])
          throw std::string("dims do not align: '" + var + "' of " + m.def.target.name + " has extent " +
                            std::to_string(extent_of_node[id]) + " but is joined with a dim of extent " + std::to_string(d.extent));
        if (whole_nodes.count(id)) d.whole = true;
        return it->second;
      };
      for (auto& v : m.def.target.index) m.p_dims.push_back(dim_for(v.name));
      for (auto& v : m.def.reduce_vars) m.r_dims.push_back(dim_for(v.name));
    }
    for (auto& [key, id] : node) {
      int root = uf.find(id);
      if (whole_nodes.count(id)) plan_.dims[static_cast<size_t>(dim_of_root[root])].whole = true;
    }
    // Unique names.
    std::map<std::string, int> seen;
    for (auto& d : plan_.dims) {
      int n = seen[d.name]++;
      if (n > 0) d.name += std::to_string(n + 1);
    }
    p_of_.assign(plan_.dims.size(), {});
    r_of_.assign(plan_.dims.size(), {});
    for (size_t i = 0; i < plan_.members.size(); ++i) {
      for (int d : plan_.members[i].p_dims) p_of_[static_cast<size_t>(d)].insert(static_cast<int>(i));
      for (int d : plan_.members[i].r_dims) r_of_[static_cast<size_t>(d)].insert(static_cast<int>(i));
    }
  }

  // ---- 2. Roles --------------------------------------------------------------------------------
  // A dim is worth streaming when it carries a cascade: it is a producer's p-dim demoted into its
  // consumers' reductions, or several reductions over it depend on one another. A dim that only
  // independent reductions share is an ordinary (inner or held-whole) reduction dim.
  bool carries_cascade(int d) const {
    if (!p_of_[static_cast<size_t>(d)].empty()) return true;
    const auto& reducers = r_of_[static_cast<size_t>(d)];
    for (int a : reducers)
      for (int b : reducers)
        if (a != b && uses_tensor(plan_.members[static_cast<size_t>(a)].def.body, plan_.members[static_cast<size_t>(b)].def.target.name)) return true;
    return false;
  }

  bool can_stream(int d, std::set<int>& excluded) const {
    const GroupDim& dim = plan_.dims[static_cast<size_t>(d)];
    if (excluded.count(d) || dim.whole || r_of_[static_cast<size_t>(d)].empty()) return false;
    if (!carries_cascade(d) && d != split_k_) return false;
    // (only where split_k_candidate would split the scores' depth otherwise: at least two stream tiles)
    const bool one_key_tile = params_.stream_one_tile_keys && params_.hold_whole_up_to == 0 && dim.extent == params_.stream_tile &&
                              softmax_keys_depth(d) >= 2 * params_.stream_tile;
    if (dim.extent <= std::max(params_.stream_tile, params_.hold_whole_up_to) && !one_key_tile) return false;  // short: hold it whole
    for (int m : p_of_[static_cast<size_t>(d)])
      if (plan_.members[static_cast<size_t>(m)].exported) return false;  // an output needs every value
    return true;
  }

  // Whether dim `d` is attention's key dim: a member takes the maximum over `d` alone of a member that is
  // a contraction over one dim keeping `d` (the scores, under any score modifier or mask), and another
  // member is a contraction over `d` alone (O = Σ_j P[i, j] · V[j, e]). Returns the scores' depth (the
  // extent of their reduced dim), or 0 where `d` is not.
  int64_t softmax_keys_depth(int d) const {
    auto contraction = [&](const GroupMember& m) {
      return m.def.reduce == ReduceOp::sum && m.r_dims.size() == 1 && member_contraction(m).contract.has_value();
    };
    int64_t depth = 0;
    bool weighted_sum = false;
    for (auto& m : plan_.members) {
      weighted_sum |= contraction(m) && m.r_dims.front() == d;
      if (m.def.reduce != ReduceOp::max || m.r_dims.size() != 1 || m.r_dims.front() != d) continue;
      for (auto& s : plan_.members)
        if (uses_tensor(m.def.body, s.def.target.name) && contraction(s) && std::find(s.p_dims.begin(), s.p_dims.end(), d) != s.p_dims.end())
          depth = std::max(depth, plan_.dims[static_cast<size_t>(s.r_dims.front())].extent);
    }
    return weighted_sum ? depth : 0;
  }

  // Whether dim `d` is the depth of a streamed score contraction held whole
  // (FusionParams::score_depth_whole_up_to): one member reduces it, a sum whose canonical form is a
  // contraction over `d` alone of two tensors read as they are (attention's S[i, j] = Σ_d Q[i, d] · K[j, d],
  // not rope's rotated operands) with a `streamed` dim among its kept dims (j, the stream), a member takes
  // the maximum of those scores over a streamed dim reading nothing but members (the online softmax's
  // running max under index masks and score modifiers; not a data mask's ids or a bias tensor, whose
  // kernels the attention skeleton does not take at head dim 256; an MLP's Σ_n act(a·w1)·w2 has no
  // maximum), and another member is a contraction over a streamed dim (O = Σ_j P[i, j] · V[j, e]).
  // Elsewhere a depth of 256 would reach the emitter's own mma.sync schedule whole, which spills there
  // (document_mask at head dim 256: 2.3 KB) where two steps of 128 do not.
  bool score_depth(int d, const std::set<int>& streamed) const {
    const GroupDim& dim = plan_.dims[static_cast<size_t>(d)];
    if (dim.extent > params_.score_depth_whole_up_to || r_of_[static_cast<size_t>(d)].size() != 1) return false;
    auto contraction_over = [&](const GroupMember& m, auto&& reduced) {
      if (m.def.reduce != ReduceOp::sum || m.r_dims.size() != 1 || !reduced(m.r_dims.front())) return false;
      return member_contraction(m).contract.has_value();
    };
    const int s = *r_of_[static_cast<size_t>(d)].begin();
    const GroupMember& scores = plan_.members[static_cast<size_t>(s)];
    if (!contraction_over(scores, [&](int r) { return r == d; })) return false;
    const std::vector<ContractTerm> terms = merge_k_range_terms(member_contraction(scores).contract->terms);
    auto read_as_is = [&](const Expr& e) { return e.kind() == ExprKind::Load && member_index(e.as<LoadNode>()->tensor) < 0; };
    if (terms.size() != 1 || !read_as_is(terms.front().a) || !read_as_is(terms.front().b)) return false;
    bool keeps_stream = false;
    for (int p : scores.p_dims) keeps_stream |= streamed.count(p) > 0;
    if (!keeps_stream) return false;
    bool running_max = false;
    for (auto& m : plan_.members) {
      if (m.def.reduce != ReduceOp::max || m.r_dims.size() != 1 || !streamed.count(m.r_dims.front()) || !uses_tensor(m.def.body, scores.def.target.name))
        continue;
      bool members_only = true;
      for (auto& t : tensors_used(m.def.body)) members_only &= member_index(t) >= 0;
      running_max |= members_only;
    }
    if (!running_max) return false;
    for (size_t m = 0; m < plan_.members.size(); ++m)
      if (static_cast<int>(m) != s && contraction_over(plan_.members[m], [&](int r) { return streamed.count(r) > 0; })) return true;
    return false;
  }

  void assign_roles(std::set<int>& excluded) {
    plan_.stream = -1;
    // The stream: the longest streamable reduced dim; dims of the same extent that never meet in one
    // definition share its loop (identical sketches fuse).
    for (size_t d = 0; d < plan_.dims.size(); ++d) {
      if (!can_stream(static_cast<int>(d), excluded)) continue;
      if (plan_.stream < 0 || plan_.dims[d].extent > plan_.dims[static_cast<size_t>(plan_.stream)].extent) plan_.stream = static_cast<int>(d);
    }
    std::set<int> streamed;
    if (plan_.stream >= 0) {
      streamed.insert(plan_.stream);
      for (size_t d = 0; d < plan_.dims.size(); ++d) {
        if (static_cast<int>(d) == plan_.stream || !can_stream(static_cast<int>(d), excluded)) continue;
        if (plan_.dims[d].extent != plan_.dims[static_cast<size_t>(plan_.stream)].extent) continue;
        bool meets = false;
        for (auto& m : plan_.members) {
          int hits = 0;
          for (int x : m.p_dims) hits += streamed.count(x) || x == static_cast<int>(d);
          for (int x : m.r_dims) hits += streamed.count(x) || x == static_cast<int>(d);
          meets |= hits > 1;
        }
        if (!meets) streamed.insert(static_cast<int>(d));
      }
    }
    int64_t deep_scores = 0;  // the depth of a score contraction held whole past inner_tile (score_depth)
    const GroupMember* anchor = nullptr;
    for (auto& m : plan_.members) if (m.exported) anchor = &m;
    if (!anchor) anchor = &plan_.members.back();
    for (size_t d = 0; d < plan_.dims.size(); ++d) {
      GroupDim& dim = plan_.dims[d];
      bool reduced = !r_of_[d].empty();
      if (streamed.count(static_cast<int>(d))) {
        dim.role = DimRole::stream;
        dim.tile = std::min(params_.stream_tile, dim.extent);
      } else if (reduced) {
        bool only_reduced = p_of_[d].empty() && !carries_cascade(static_cast<int>(d));
        const bool looped = only_reduced && r_of_[d].size() == 1 && dim.extent > params_.inner_tile && !dim.whole;
        if (looped && !score_depth(static_cast<int>(d), streamed)) {
          dim.role = DimRole::inner;
          dim.tile = params_.inner_tile;
        } else {
          if (looped) deep_scores = std::max(deep_scores, dim.extent);
          dim.role = DimRole::resident;
          dim.tile = dim.extent;
        }
      } else if (p_of_[d].size() == plan_.members.size() && !dim.whole) {
        dim.role = DimRole::grid;
        dim.tile = 1;
      } else {
        dim.role = DimRole::resident;
        dim.tile = dim.extent;
      }
    }
    // A score depth held whole past inner_tile streams fewer keys per step, so that each staged key tile
    // holds what it holds at depth inner_tile (head dim 256: 32 keys, as 64 at 128): the tiles still fit
    // the on-chip budget at the rows that fit at depth inner_tile.
    if (deep_scores > 0) {
      for (int d : streamed)
        if (plan_.dims[static_cast<size_t>(d)].tile > 16)
          plan_.dims[static_cast<size_t>(d)].tile = std::max<int64_t>(16, plan_.dims[static_cast<size_t>(d)].tile * params_.inner_tile / deep_scores);
      const GroupDim& stream = plan_.dims[static_cast<size_t>(plan_.stream)];
      char note[300];
      std::snprintf(note, sizeof note,
                    "score depth %lld held whole (past the inner tile %lld): a streamed score contraction, one K loop on the attention "
                    "skeleton; %s streamed in tiles of %lld so that a staged key tile holds what it holds at depth %lld",
                    static_cast<long long>(deep_scores), static_cast<long long>(params_.inner_tile), stream.name.c_str(),
                    static_cast<long long>(stream.tile), static_cast<long long>(params_.inner_tile));
      if (std::find(plan_.notes.begin(), plan_.notes.end(), note) == plan_.notes.end()) plan_.notes.push_back(note);
    }
    // The innermost grid dim of the anchor gets a real tile; in a matrix product on tensor cores
    // (tensor_core_product) the next one out gets one mma fragment of rows, so that a block's A tile
    // has real rows and each weight tile it stages serves 16 of them, not one.
    bool inner_tiled = false;
    int inner = -1;
    for (size_t k = anchor->p_dims.size(); k-- > 0;) {
      GroupDim& dim = plan_.dims[static_cast<size_t>(anchor->p_dims[k])];
      if (dim.role != DimRole::grid) continue;
      if (!inner_tiled) {
        dim.tile = std::min(params_.grid_tile, dim.extent);
        inner_tiled = true;
        inner = anchor->p_dims[k];
        if (!tile_product_rows_) break;
      } else {
        if (tensor_core_product(inner, anchor->p_dims[k])) {
          dim.tile = std::min(product_row_tile(plan_.members.front(), inner, anchor->p_dims[k]), dim.extent);  // the product member
          product_rows_tiled_ = true;
          narrow_columns_to_fill(inner);
        }
        break;
      }
    }
    // Resident p-dims that would need too much room become grid dims when recomputing the members
    // that lack them in every block costs little next to the work of the members that have them
    // (quant_gemm's amax per column tile: yes; a whole first GEMM per output tile: no).
    auto work = [&](const GroupMember& m, int tiled, int64_t tile) {
      double w = 1;
      for (int p : m.p_dims) w *= static_cast<double>(p == tiled ? tile : plan_.dims[static_cast<size_t>(p)].role == DimRole::grid ? plan_.dims[static_cast<size_t>(p)].tile : plan_.dims[static_cast<size_t>(p)].extent);
      for (int r : m.r_dims) w *= static_cast<double>(plan_.dims[static_cast<size_t>(r)].extent);
      return w;
    };
    for (size_t d = 0; d < plan_.dims.size(); ++d) {
      GroupDim& dim = plan_.dims[d];
      if (dim.role != DimRole::resident || !r_of_[d].empty() || dim.whole || dim.extent <= params_.resident_limit) continue;
      int64_t tile = std::min(params_.grid_tile, dim.extent);
      double recomputed = 0, useful = 0;
      for (size_t m = 0; m < plan_.members.size(); ++m)
        (p_of_[d].count(static_cast<int>(m)) ? useful : recomputed) += work(plan_.members[m], static_cast<int>(d), tile);
      if (recomputed * 4 > useful) continue;
      dim.role = DimRole::grid;
      dim.tile = tile;
    }
    for (auto& m : plan_.members) {
      m.recomputed = false;
      for (int g : plan_.grid_dims())
        if (std::find(m.p_dims.begin(), m.p_dims.end(), g) == m.p_dims.end()) m.recomputed = true;
    }
  }

  // The row tile of a tensor-core product (tensor_core_product(column, row)) of member `m`: the CPU's
  // grid_tile, or on the GPU (product_rows_from_cost_model) the cost model's choice of BM among 64 and
  // 128 at the catalogue's BN nearest the column tile (src/plan: waves, launch, roofline per level),
  // with the prediction in the plan's notes.
  int64_t product_row_tile(const GroupMember& m, int column, int row) {
    if (!params_.product_rows_from_cost_model) return params_.grid_tile;
    Canonicalization c = member_contraction(m);
    GemmProblem problem;
    problem.m = plan_.dims[static_cast<size_t>(row)].extent;
    problem.n = plan_.dims[static_cast<size_t>(column)].extent;
    problem.k = plan_.dims[static_cast<size_t>(m.r_dims.front())].extent;
    for (int g : plan_.grid_dims())
      if (g != row && g != column) problem.batch = saturating_mul(problem.batch, plan_.dims[static_cast<size_t>(g)].extent);
    problem.type = c.contract ? c.contract->type : MmaType::bf16;
    problem.output = m.dtype;
    const int64_t column_tile = plan_.dims[static_cast<size_t>(column)].tile;
    int bn = 0;
    for (const GemmConfig& config : gemm_catalogue(problem.type))
      if (bn == 0 || std::abs(config.bn - column_tile) < std::abs(bn - column_tile)) bn = config.bn;
    PlanOptions options;
    options.top = 1;
    for (const GemmConfig& config : gemm_catalogue(problem.type))
      if ((config.bm == 64 || config.bm == 128) && config.bn == bn && config.split_k == 1 && config.cluster_size() == 1 &&
          !config.pingpong && in_device_skeleton(config))
        options.only.push_back(config);
    GemmPlan plan;
    if (!options.only.empty()) plan = plan_gemm(problem, default_hardware(), options);
    const int64_t tile = plan.chosen() ? plan.chosen()->config.bm : 64;
    char note[200];
    if (plan.chosen())
      std::snprintf(note, sizeof note, "row tile %lld of %s: the cost model's BM for %s at BN %d (%.1f us predicted, bound by %s)",
                    static_cast<long long>(tile), plan_.dims[static_cast<size_t>(row)].name.c_str(), describe(problem).c_str(), bn,
                    plan.chosen()->cost.total_us, std::string(resource_name(plan.chosen()->cost.binding)).c_str());
    else
      std::snprintf(note, sizeof note, "row tile 64 of %s: no configuration of the catalogue is feasible for %s", plan_.dims[static_cast<size_t>(row)].name.c_str(),
                    describe(problem).c_str());
    plan_.notes.push_back(note);
    return tile;
  }

  // A tensor-core product keeps its row tile (64 or 128 rows: no fewer to fill the grid). While its
  // grid would still fit in one wave at twice the blocks, the column tile halves instead, down to one
  // mma fragment of 16 columns (ffn G1: h = gelu(a·b) at 128 × 512 ran in 8 blocks of 64 × 128,
  // 11.9 µs under ncu; in 64 blocks of 64 × 16, about 1.7 µs). On the CPU (no cost model) nothing changes.
  void narrow_columns_to_fill(int column) {
    // Only a product followed by pointwise members (an MLP layer's h = act(a·b), 8aad03b): a product
    // alone keeps the column tile that its tests and the skeleton's BN assume.
    if (!params_.product_rows_from_cost_model || plan_.members.size() < 2) return;
    GroupDim& dim = plan_.dims[static_cast<size_t>(column)];
    constexpr int64_t kFragmentColumns = 16;
    auto blocks = [&] {
      int64_t n = 1;
      for (int g : plan_.grid_dims()) n = saturating_mul(n, plan_.dims[static_cast<size_t>(g)].tiles());
      return n;
    };
    const int64_t before = dim.tile, blocks_before = blocks();
    while (2 * blocks() <= default_hardware().sm_count && dim.tile / 2 >= kFragmentColumns && dim.tile % 2 == 0) dim.tile /= 2;
    if (dim.tile != before) {
      char note[200];
      std::snprintf(note, sizeof note, "column tile %lld of %s, not %lld: %lld blocks at %lld columns fill under half of the %d SMs",
                    static_cast<long long>(dim.tile), dim.name.c_str(), static_cast<long long>(before),
                    static_cast<long long>(blocks_before), static_cast<long long>(before), static_cast<int>(default_hardware().sm_count));
      plan_.notes.push_back(note);
    }
  }

  // FusionParams::split_k_to_fill: when no product got a row tile and the grid has fewer than
  // fill_blocks() blocks, the reduced dim
  // of contractions (sums over one dim whose canonical form is a contraction; llama_decode's q and
  // k_new share theirs) that only they reduce, that no member keeps, that is not held whole and spans
  // at least two stream tiles past hold_whole_up_to; the longest such dim, or -1.
  int split_k_candidate() const {
    // A product with a row tile keeps it (its K stays an inner loop of the tensor-core writer): the
    // cost model chose that tile knowing the waves. The split is for products without one (GEMVs).
    if (product_rows_tiled_) return -1;
    int64_t blocks = 1;
    for (int g : plan_.grid_dims()) blocks = saturating_mul(blocks, plan_.dims[static_cast<size_t>(g)].tiles());
    if (blocks >= fill_blocks()) return -1;
    auto contraction_over_one_dim = [&](const GroupMember& m) {
      return m.def.reduce == ReduceOp::sum && m.r_dims.size() == 1 && member_contraction(m).contract.has_value();
    };
    int best = -1;
    for (auto& m : plan_.members) {
      if (!contraction_over_one_dim(m)) continue;
      const int d = m.r_dims.front();
      const GroupDim& dim = plan_.dims[static_cast<size_t>(d)];
      bool only_contractions = true;
      for (int r : r_of_[static_cast<size_t>(d)]) only_contractions &= contraction_over_one_dim(plan_.members[static_cast<size_t>(r)]);
      if (!only_contractions || !p_of_[static_cast<size_t>(d)].empty() || dim.whole) continue;
      if (dim.extent < 2 * std::max(params_.stream_tile, params_.hold_whole_up_to)) continue;
      if (best < 0 || dim.extent > plan_.dims[static_cast<size_t>(best)].extent) best = d;
    }
    return best;
  }

  // Memory-bound groups split their stream below this many blocks: streaming_blocks_per_sm per SM.
  int64_t fill_blocks() const { return params_.streaming_blocks_per_sm * default_hardware().sm_count; }
  // Segments merged through DSM in one launch (GroupLowering::kMaxClusterSegments, the portable cluster).
  static constexpr int64_t kClusterSegments = 8;

  // ---- 2b. Memory-bound tiles (FusionParams::streaming_tiles) ------------------------------------
  // The dims a load's indices use, as dims of member `m`.
  std::set<int> load_dims(const GroupMember& m, const LoadNode& load) const {
    std::set<int> dims;
    for (auto& i : load.index)
      for (auto& v : vars_used(i))
        if (int d = m.dim_of(v); d >= 0) dims.insert(d);
    return dims;
  }

  // The dtype of a tensor of the program, for the canonicalizer.
  std::optional<DType> dtype_of(const std::string& name) const {
    if (!tensor_by_name_.count(name)) return std::nullopt;
    return tensor(name).dtype;
  }

  // The canonical form of member `m`'s definition as a contraction (src/contract/canonicalize.h),
  // its axes named by the member's variables.
  Canonicalization member_contraction(const GroupMember& m) const {
    ReduceNode r;
    r.op = m.def.reduce;
    auto extent = [&](const std::string& var) {
      int d = m.dim_of(var);
      return d >= 0 ? plan_.dims[static_cast<size_t>(d)].extent : int64_t{1};
    };
    for (auto& v : m.def.target.index) {
      r.domain.axes.push_back({v.name, extent(v.name)});
      r.dst.index.push_back(make_var(v.name));
    }
    for (auto& v : m.def.reduce_vars) r.reduce_axes.push_back({v.name, extent(v.name)});
    r.dst.name = m.def.target.name;
    r.value = m.def.body;
    return canonicalize_contraction(r, [this](const std::string& name) { return dtype_of(name); }, contract_policy_of(program_));
  }

  // Whether the group is a matrix product C[row, column] = Σ_k A[row, k] · B[k, column] that the
  // generic writer runs on tensor cores (gemm_codegen.h), with `column` the innermost grid dim and
  // `row` the next one out: one member, no stream, a canonical contraction of one term over one
  // reduced dim whose operands are both exact in a narrow type (no rounding by the precision policy),
  // the row a row axis and the column a column axis (or the other way round), and any other dim
  // either operand reads a grid dim (a batch, one per block). ffn's and gated_ffn's GEMMs, nerf_mlp's
  // layers, mla_decode's q·ckv; not attention (a stream), not a decode projection whose weight holds
  // both kept dims, not unrounded f32 operands.
  bool tensor_core_product(int column, int row) const {
    if (plan_.stream >= 0 || plan_.members.empty() || column < 0) return false;
    const GroupMember& m = plan_.members.front();
    if (m.r_dims.size() != 1) return false;
    // The product alone, or followed by pointwise members over its own dims (an MLP layer's
    // h = relu(z + b), stored for the next layer): they read its tile where it is.
    for (size_t i = 1; i < plan_.members.size(); ++i) {
      const GroupMember& p = plan_.members[i];
      if (p.def.reduce != ReduceOp::none || !p.r_dims.empty() || p.def.index_target ||
          std::set<int>(p.p_dims.begin(), p.p_dims.end()) != std::set<int>(m.p_dims.begin(), m.p_dims.end()))
        return false;
    }
    Canonicalization c = member_contraction(m);
    if (!c.contract || c.contract->type == MmaType::f32 || c.contract->type == MmaType::tf32x3) return false;
    // K ranges (a concatenation along K) that share their other operand are one product.
    const std::vector<ContractTerm> terms = merge_k_range_terms(c.contract->terms);
    if (terms.size() != 1) return false;
    const ContractTerm& term = terms.front();
    auto dtypes = [this](const std::string& name) { return dtype_of(name); };
    // On the GPU an operand the precision policy rounds to T (an f32 weight or intermediate, a computed
    // operand) tiles its rows like an exact one: the writer rounds it as it stages the tile, whatever
    // its rows, and a row tile of 1 (512 blocks of one row, an mma of 16 rows 15 of them padding) is
    // what issue 15 forbids. The CPU (no cost model) keeps exact operands only.
    if (!params_.product_rows_from_cost_model && (!exact_mma_type(term.a, dtypes) || !exact_mma_type(term.b, dtypes))) return false;
    auto dims_of = [&](const std::vector<std::string>& vars) {
      std::set<int> dims;
      for (auto& v : vars) dims.insert(m.dim_of(v));
      return dims;
    };
    std::set<int> rows = dims_of(c.contract->row_axes), columns = dims_of(c.contract->column_axes);
    if (!((rows.count(row) && columns.count(column)) || (rows.count(column) && columns.count(row)))) return false;
    for (const Expr* operand : {&term.a, &term.b})
      for (auto& v : vars_used(*operand)) {
        int d = m.dim_of(v);
        if (d < 0 || d == m.r_dims.front() || d == row || d == column) continue;
        if (plan_.dims[static_cast<size_t>(d)].role != DimRole::grid) return false;
      }
    return true;
  }

  // A contraction: a member whose definition the canonicalizer reads as a matrix product with a row
  // or column dim of 8 or more (a matrix product, QK^T, PV, a decode GEMV). Such groups keep the
  // tensor-core tiles. (Inertia's mass[b, n] * pos[b, n, x] has only the column x < 3: no contraction.)
  bool has_contraction() const {
    for (auto& m : plan_.members) {
      if (m.def.reduce != ReduceOp::sum || m.r_dims.empty()) continue;
      Canonicalization c = member_contraction(m);
      if (!c.contract) continue;
      std::vector<std::string> sides = c.contract->row_axes;
      sides.insert(sides.end(), c.contract->column_axes.begin(), c.contract->column_axes.end());
      for (auto& v : sides)
        if (int d = m.dim_of(v); d >= 0 && plan_.dims[static_cast<size_t>(d)].extent >= 8) return true;
    }
    return false;
  }

  static int64_t floor_pow2(int64_t x) {
    int64_t p = 1;
    while (p * 2 <= x) p *= 2;
    return p;
  }

  // A contiguous tile of about `elements` along a dim of `extent`: `elements` when the dim is shorter or
  // that divides it, else the largest tile that divides the extent into whole 16-byte vectors with at
  // most twice the tiles (Llama's 11008 in 4 tiles of 2752, not 4096, 4096 and a ragged 2816: no
  // guarded elements in any block), else `elements`.
  static int64_t divisor_tile(int64_t extent, int64_t elements, int64_t sector) {
    if (extent <= elements || extent % elements == 0) return elements;
    const int64_t vector = std::max<int64_t>(1, sector / 2);  // 16 bytes: half a 32-byte sector
    const int64_t tiles = (extent + elements - 1) / elements;
    for (int64_t n = tiles; n <= 2 * tiles; ++n)
      if (extent % n == 0 && (extent / n) % vector == 0) return extent / n;
    return elements;
  }

  // Rows per block of a row-statistics group (retile_for_streaming): the generic writer's register
  // pass holds one row per warp or more (kernel_writer_registers.cpp, 8 warps).
  static constexpr int64_t kRowsPerBlock = 8;
  // ... and of one whose rows are one dim of at least kLongRowElements elements (long_rows):
  // kLongRowsPerBlock, 128 threads per row (each holding at least one 16-byte vector of 16-bit elements). Smaller blocks with fewer
  // registers each run as several waves whose loads, arithmetic and stores overlap across blocks,
  // where 8 rows per block ran as one lockstep wave. Measured on the H100 (bench/NOTES.md, quant-lrb3,
  // the row kernels of quant_gemm alone): rows of 2048 at 8 / 4 / 2 / 1 rows per block 14.10 / 11.45 /
  // 10.65 / 11.19 µs (60 / 40 / 31 / 23 registers: 1.0 / 1.3 / 1.9 / 3.9 waves), rows of 2560 17.67 →
  // 14.12, 1536 10.07 → 9.78, 3584 (4 rows before) 18.30 → 17.92 at 2 rows; Q8 whole 25.87 → 22.82.
  static constexpr int64_t kLongRowElements = 1024;
  static constexpr int64_t kLongRowsPerBlock = 2;
  // The cap (long rows or not), or SOLDER_ROW_TILE=N (A/B runs, docs/runtime.md): at most
  // N rows per block whatever the row's length, a power of two in [1, kRowsPerBlock] (anything else is
  // ignored).
  static int64_t rows_per_block(bool long_rows) {
    const int64_t cap = long_rows ? kLongRowsPerBlock : kRowsPerBlock;
    const char* env = std::getenv("SOLDER_ROW_TILE");
    if (!env || !*env) return cap;
    const int64_t rows = std::atoll(env);
    return rows >= 1 && rows <= kRowsPerBlock && (rows & (rows - 1)) == 0 ? rows : cap;
  }

  // Whether a member reduces (a row statistic, a sum) and none streams.
  bool reduces_rows() const {
    for (auto& m : plan_.members)
      if (!m.r_dims.empty()) return true;
    return false;
  }

  // Whether a row is one non-grid dim of at least kLongRowElements elements (quant_gemm's and RMSNorm's
  // rows; not a top-k over several resident dims).
  bool long_rows() const {
    int dims = 0;
    for (auto& d : plan_.dims)
      if (d.role != DimRole::grid) ++dims;
    return dims == 1 && row_elements() >= kLongRowElements;
  }

  // The elements of one row: the product of the non-grid dims' tiles.
  int64_t row_elements() const {
    int64_t e = 1;
    for (auto& d : plan_.dims)
      if (d.role != DimRole::grid) e = saturating_mul(e, d.tile);
    return e;
  }

  // No member reduces, none is a top-k or gather target: element-wise definitions only.
  bool pure_elementwise() const {
    for (auto& m : plan_.members)
      if (!m.r_dims.empty() || m.def.reduce != ReduceOp::none || m.def.index_target) return false;
    return true;
  }

  // Tiles the exported member's grid dims outward from `inner` (whole already) until a block holds
  // about `elements` elements, keeping at least fill_blocks() blocks.
  void widen_grid_tiles(int inner, int64_t elements) {
    const GroupMember* anchor = nullptr;
    for (auto& m : plan_.members)
      if (m.exported) anchor = &m;
    if (!anchor) return;
    auto blocks = [&] {
      int64_t b = 1;
      for (int g : plan_.grid_dims()) b = saturating_mul(b, plan_.dims[static_cast<size_t>(g)].tiles());
      return b;
    };
    int64_t per_block = plan_.dims[static_cast<size_t>(inner)].tile;
    bool past_inner = false;
    for (size_t k = anchor->p_dims.size(); k-- > 0;) {
      const int d = anchor->p_dims[k];
      if (d == inner) { past_inner = true; continue; }
      GroupDim& dim = plan_.dims[static_cast<size_t>(d)];
      if (!past_inner || dim.role != DimRole::grid || dim.tile != 1) break;
      const int64_t want = std::min(dim.extent, floor_pow2(std::max<int64_t>(1, elements / per_block)));
      if (want <= 1) break;
      dim.tile = want;
      while (dim.tile > 1 && blocks() < fill_blocks()) dim.tile /= 2;
      if (dim.tile <= 1) { dim.tile = 1; break; }
      char note[200];
      const GroupDim& in = plan_.dims[static_cast<size_t>(inner)];
      std::snprintf(note, sizeof note, "%lld rows of %s per block: element-wise, %lld elements of %s per row",
                    static_cast<long long>(dim.tile), dim.name.c_str(), static_cast<long long>(per_block),
                    per_block == in.tile ? in.name.c_str() : "the inner dims");
      plan_.notes.push_back(note);
      per_block *= dim.tile;
      if (dim.tile < dim.extent || per_block >= elements) break;
    }
  }

  // Few rows per block and a long stream (or inner, or contiguous grid) tile: each block stages about
  // streaming_tile_elements elements per step, in enough blocks to fill the GPU.
  void retile_for_streaming() {
    const int64_t elements = params_.streaming_tile_elements;
    // Dims that are the last (contiguous) index of an input load, with the narrowest such dtype.
    std::map<int, int64_t> contiguous_bytes;
    std::map<std::string, std::set<int>> input_dims;  // streamed inputs: their dims
    for (auto& m : plan_.members)
      for_each_load(m.def.body, [&](const LoadNode& load) {
        if (member_index(load.tensor) >= 0 || !program_.has_tensor(load.tensor) || load.index.empty()) return;
        const TensorInfo& t = tensor(load.tensor);
        if (auto v = load.index.back().as<VarNode>(); v && m.dim_of(v->name) >= 0) {
          int64_t bytes = dtype_bytes(t.dtype);
          auto [it, fresh] = contiguous_bytes.emplace(m.dim_of(v->name), bytes);
          if (!fresh) it->second = std::min(it->second, bytes);
        }
        auto dims = load_dims(m, load);
        input_dims[load.tensor].insert(dims.begin(), dims.end());
      });
    // The innermost grid dim that got grid_tile (assign_roles), and the blocks of the other grid dims.
    int inner_grid = -1;
    int64_t other_blocks = 1;
    for (int g : plan_.grid_dims())
      if (plan_.dims[static_cast<size_t>(g)].tile > 1 && inner_grid < 0) inner_grid = g;
      else other_blocks = saturating_mul(other_blocks, plan_.dims[static_cast<size_t>(g)].tiles());
    int64_t grid_tile = 1;
    if (inner_grid >= 0) {
      GroupDim& dim = plan_.dims[static_cast<size_t>(inner_grid)];
      auto c = contiguous_bytes.find(inner_grid);
      int64_t sector = c == contiguous_bytes.end() ? 1 : std::max<int64_t>(1, 32 / c->second);
      if (plan_.stream < 0 && other_blocks >= fill_blocks() && c != contiguous_bytes.end())
        grid_tile = divisor_tile(dim.extent, elements, sector);  // rows enough: a long contiguous tile per block
      else  // as many blocks as wanted, down to one sector of the contiguous dim
        grid_tile = std::max(sector, floor_pow2(std::max<int64_t>(1, dim.extent * other_blocks / fill_blocks())));
      grid_tile = std::min({grid_tile, elements, dim.extent});
      // Row statistics (a reduce over the non-grid dims, rows not contiguous): at most one row per warp
      // of the block, so that the generic writer keeps the rows in registers (its register pass)
      // rather than staging up to 64 rows of a LayerNorm through shared memory in a few large blocks.
      if (plan_.stream < 0 && c == contiguous_bytes.end() && reduces_rows() && row_elements() >= 128)
        grid_tile = std::min<int64_t>(grid_tile, rows_per_block(long_rows()));
      dim.tile = grid_tile;
      // A pure element-wise group whose innermost grid dim is short and whole (Evoformer's gate written
      // [S, R, H, C], read from [S, H, R, C]: 32 elements a block) tiles the next grid dims out too,
      // up to `elements` per block while the grid still fills the GPU: a block then stages a
      // [.., H, tile R, C] box of the transposed input and stores whole rows of the result.
      if (plan_.stream < 0 && dim.tile == dim.extent && dim.tile < elements && pure_elementwise())
        widen_grid_tiles(inner_grid, elements);
    }
    int64_t blocks = 1;
    for (int g : plan_.grid_dims()) blocks = saturating_mul(blocks, plan_.dims[static_cast<size_t>(g)].tiles());
    // Few blocks: a longer step per block keeps more bytes in flight.
    int64_t per_step = blocks < fill_blocks() ? 4 * elements : elements;
    if (plan_.stream >= 0) {
      // Staged elements per stream position: each streamed input's dims other than grid and stream.
      int64_t width = 0;
      for (auto& [tensor, dims] : input_dims) {
        if (!dims.count(plan_.stream)) continue;
        int64_t w = 1;
        for (int d : dims)
          if (d != plan_.stream) w *= plan_.dims[static_cast<size_t>(d)].tile;
        width += w;
      }
      GroupDim& s = plan_.dims[static_cast<size_t>(plan_.stream)];
      s.tile = std::min(s.extent, std::clamp<int64_t>(floor_pow2(std::max<int64_t>(1, elements / std::max<int64_t>(1, width))), 64, elements));
      return;
    }
    for (auto& dim : plan_.dims)
      if (dim.role == DimRole::inner)
        dim.tile = std::min(dim.extent, std::clamp<int64_t>(floor_pow2(std::max<int64_t>(1, per_step / grid_tile)), 64, 1024));
  }

  // ---- 3. Phases and decompositions -----------------------------------------------------------
  std::string assign_phases() {
    std::vector<std::set<int>> reads(plan_.members.size());
    for (size_t i = 0; i < plan_.members.size(); ++i)
      for_each_load(plan_.members[i].def.body, [&](const LoadNode& load) {
        int p = member_index(load.tensor);
        if (p >= 0) reads[i].insert(p);
      });
    auto is_stream = [&](int d) { return plan_.dims[static_cast<size_t>(d)].role == DimRole::stream; };
    for (size_t i = 0; i < plan_.members.size(); ++i) {
      GroupMember& m = plan_.members[i];
      bool p_stream = std::any_of(m.p_dims.begin(), m.p_dims.end(), is_stream);
      bool r_stream = std::any_of(m.r_dims.begin(), m.r_dims.end(), is_stream);
      if (p_stream && r_stream) return m.def.target.name + " both keeps and reduces the streamed dim";
      if (p_stream) m.phase = Phase::per_tile;
      else if (r_stream) m.phase = Phase::cascade;
      else {
        m.phase = Phase::pre;
        for (int p : reads[i]) {
          Phase q = plan_.members[static_cast<size_t>(p)].phase;
          if (q != Phase::pre) m.phase = Phase::post;
        }
      }
      for (int p : reads[i]) {
        Phase q = plan_.members[static_cast<size_t>(p)].phase;
        const std::string& pn = plan_.members[static_cast<size_t>(p)].def.target.name;
        if (m.phase == Phase::per_tile && (q == Phase::cascade || q == Phase::post))
          return m.def.target.name + " is computed per tile but reads " + pn + ", which is final only after the loop";
        if (m.phase == Phase::post && q == Phase::per_tile)
          return m.def.target.name + " needs every tile of " + pn + " after the loop";
        if (m.phase == Phase::cascade && q == Phase::post)
          return m.def.target.name + " reduces over the streamed dim but reads " + pn + ", which is final only after the loop";
        if (m.phase == Phase::pre && q != Phase::pre)
          return "internal: phase order";
      }
      if (m.phase == Phase::per_tile && m.exported) return m.def.target.name + " is an output with the streamed dim";
    }
    // Decompose cascade members: D are the earlier cascade members.
    std::set<std::string> cascade_names;
    for (auto& m : plan_.members) {
      if (m.phase != Phase::cascade) continue;
      auto is_d = [&](const std::string& t) { return cascade_names.count(t) > 0; };
      // An earlier sum of positive terms (exponentials) is positive: monotone selections may scale by it.
      auto is_positive = [&](const std::string& t) {
        const GroupMember* d = plan_.member(t);
        if (!d || d->def.reduce != ReduceOp::sum || !d->decomposition.online_term) return false;
        ProductForm f = to_product_form(d->decomposition.online_term);
        if (!(f.constant > 0)) return false;
        for (auto& [atom, power] : f.powers) {
          auto u = atom.as<UnaryNode>();
          if (!u || (u->op != UnaryOp::exp && u->op != UnaryOp::sigmoid)) return false;
        }
        return true;
      };
      m.decomposition = decompose_reduction(m.def.body, m.def.reduce, is_d, program_.dims, is_positive);
      if (!m.decomposition.decomposable())
        return m.def.target.name + " over the streamed dim: " + m.decomposition.reason;
      // A running result D read at one of m's reduced variables is a different D for each of its
      // terms (alibi's m[b, h, j] in a sum over j). Only a polynomial state keeps one centre per value
      // of such a variable, and only of a variable held whole: at the stream's, D is not final yet.
      std::string d_at_reduced;
      for_each_load(m.def.body, [&](const LoadNode& load) {
        if (!is_d(load.tensor)) return;
        for (auto& i : load.index)
          for (auto& v : vars_used(i))
            for (size_t r = 0; r < m.def.reduce_vars.size(); ++r) {
              bool streamed = is_stream(m.r_dims[r]);
              if (m.def.reduce_vars[r].name != v || !d_at_reduced.empty()) continue;
              if (streamed || m.decomposition.kind != Decomposition::Kind::polynomial)
                d_at_reduced = load.tensor + " at its reduced variable " + v + (streamed ? " (the stream's)" : "");
            }
      });
      if (!d_at_reduced.empty())
        return m.def.target.name + " over the streamed dim reads the running result " + d_at_reduced +
               ": a different value for every term, not one per element";
      bool selects = m.def.reduce == ReduceOp::argmax || m.def.reduce == ReduceOp::argmin || m.def.reduce == ReduceOp::topk;
      if (selects && m.decomposition.kind == Decomposition::Kind::multiplicative)
        return m.def.target.name + ": " + std::string(reduce_op_name(m.def.reduce)) + " of a value scaled by running results needs a D-independent key";
      if (m.decomposition.kind == Decomposition::Kind::multiplicative && m.decomposition.h_online) {
        std::string why = exact_reset_refusal(m);
        if (!why.empty()) return why;
      }
      if (m.decomposition.h_deferred && m.decomposition.kind == Decomposition::Kind::multiplicative) {
        // (Σ G)·H equals Σ G·H unless H is infinite: then the terms' signs decide between ±inf and NaN.
        for (auto& t : tensors_used(m.decomposition.h_deferred)) {
          const GroupMember* d = plan_.member(t);
          if (d && (d->def.reduce == ReduceOp::max || d->def.reduce == ReduceOp::min))
            return m.def.target.name + ": its factor depending on " + t + " (a " + std::string(reduce_op_name(d->def.reduce)) +
                   ", which can be infinite) cannot be applied once to the sum: Σ G·inf is NaN when G has both signs";
        }
      }
      if (m.decomposition.kind == Decomposition::Kind::polynomial) {
        const GroupMember* d_member = plan_.member(m.decomposition.d_tensors[0]);
        if (d_member && d_member->def.reduce != ReduceOp::sum)
          return m.def.target.name + " is a polynomial in " + d_member->def.target.name + ", a " +
                 std::string(reduce_op_name(d_member->def.reduce)) + " whose running value can be infinite: the Taylor states need a finite centre";
        // Polynomial states are exact only at the end; no later member may read the running value.
        for (auto& other : plan_.members)
          if (&other != &m && other.phase == Phase::cascade && uses_tensor(other.def.body, m.def.target.name))
            return m.def.target.name + " is a polynomial cascade member read by " + other.def.target.name + " inside the loop";
        const GroupMember* d = plan_.member(m.decomposition.d_tensors[0]);
        bool extensive = d && d->def.reduce == ReduceOp::sum && d->decomposition.kind == Decomposition::Kind::independent;
        if (extensive) m.d_extensive = d->def.target.name;
      }
      cascade_names.insert(m.def.target.name);
      if (m.def.index_target) cascade_names.insert(m.def.index_target->name);
    }
    return "";
  }

  // The rescale resets an accumulator whose old running maximum is -inf (RedFuser appendix A.1). That
  // is exact only when every term added meanwhile was zero: the exponent must be the maximised value
  // minus the maximum, exp(V − m), so that m = −inf means every V seen was −inf.
  std::string exact_reset_refusal(const GroupMember& m) const {
    const Decomposition& dec = m.decomposition;
    ProductForm online = to_product_form(dec.online_term);
    for (auto& t : tensors_used(dec.h_online)) {
      const GroupMember* d = plan_.member(t);
      if (!d) continue;
      if (d->def.reduce == ReduceOp::sum && d->decomposition.kind == Decomposition::Kind::independent) continue;
      if (d->def.reduce != ReduceOp::max)
        return m.def.target.name + ": rescaling by a running " + std::string(reduce_op_name(d->def.reduce)) + " of " + t +
               " cannot be made exact where " + t + " is still infinite";
      // exponent = V − t[...] with V the maximised value
      SumForm rest;
      bool minus_d = false;
      for (auto& [atom, coefficient] : online.exponent.terms) {
        auto load = atom.as<LoadNode>();
        if (load && load->tensor == t && coefficient == -1) { minus_d = true; continue; }
        rest.add(atom, coefficient);
      }
      rest.constant = online.exponent.constant;
      SumForm v = to_sum_form(d->decomposition.online_term ? d->decomposition.online_term : d->def.body);
      bool same = minus_d && rest.constant == v.constant && rest.terms.size() == v.terms.size();
      for (size_t i = 0; same && i < v.terms.size(); ++i) {
        bool found = false;
        for (auto& [atom, coefficient] : rest.terms)
          found |= structurally_equal(atom, v.terms[i].first) && coefficient == v.terms[i].second;
        same = found;
      }
      if (!same)
        return m.def.target.name + ": its terms are not exp(V − " + t + ") with V the value " + t +
               " maximises, so while the running " + t + " is −inf they need not be zero and the online reset would drop them";
    }
    return "";
  }

  // ---- 4. Multi-segment -------------------------------------------------------------------------
  // The loads of program inputs (not members) in per-tile and cascade members that use the stream:
  // per load, the dims it is indexed by (`plain`: only by an index that is the dim's variable itself,
  // not a computed one such as GQA's h // G, which rows of one group share).
  std::vector<std::set<int>> streamed_load_dims(bool plain = false) const {
    std::vector<std::set<int>> streamed_loads;
    for (auto& m : plan_.members)
      if (m.phase == Phase::per_tile || m.phase == Phase::cascade)
        for_each_load(m.def.body, [&](const LoadNode& load) {
          if (member_index(load.tensor) >= 0) return;
          std::set<int> dims;
          bool streamed = false;
          for (auto& i : load.index)
            for (auto& v : vars_used(i)) {
              int d = m.dim_of(v);
              if (d < 0) continue;
              streamed |= plan_.dims[static_cast<size_t>(d)].role == DimRole::stream;
              auto var = i.as<VarNode>();
              if (!plain || (var && var->name == v)) dims.insert(d);
            }
          if (streamed) streamed_loads.push_back(dims);
        });
    return streamed_loads;
  }

  // GroupPlan::grid_shares_stream: some grid dim (of any tile) is missing from a streamed load.
  bool grid_shares_streamed_tiles() const {
    if (plan_.stream < 0) return true;
    std::vector<std::set<int>> streamed_loads = streamed_load_dims(true);
    if (streamed_loads.empty()) return true;
    for (int g : plan_.grid_dims())
      for (auto& dims : streamed_loads)
        if (!dims.count(g)) return true;
    return false;
  }

  // `split_kv` (FusionParams::split_unshared_streams): round the segments down to one cluster's when
  // that keeps 90 % of min_blocks (the DSM merge, no second kernel).
  void choose_segments(int64_t min_blocks, bool split_kv = false) {
    plan_.segments = 1;
    if (plan_.stream < 0) return;
    const GroupDim& s = plan_.dims[static_cast<size_t>(plan_.stream)];
    if (s.tiles() < 2) return;
    for (auto& m : plan_.members)
      if (m.phase == Phase::cascade && m.def.reduce == ReduceOp::prod) {
        plan_.notes.push_back("one segment: " + m.def.target.name + " is a product, which the segment merge does not combine");
        return;
      }
    // FlashDecoding's rule: split the stream across blocks when the grid alone leaves the GPU mostly
    // idle and no grid dim reuses streamed tiles (a grid dim of several tiles that some streamed input
    // does not depend on: every block along it reads the same tiles, as the query tiles of prefill do).
    const std::vector<std::set<int>> streamed_loads = streamed_load_dims();  // per streamed input load: its dims
    int64_t blocks = 1;
    for (int g : plan_.grid_dims()) {
      blocks = saturating_mul(blocks, plan_.dims[static_cast<size_t>(g)].tiles());
      // (A split K reads each tile once whatever the grid: every block its own slice.)
      if (plan_.dims[static_cast<size_t>(g)].tiles() < 2 || plan_.stream == split_k_) continue;
      for (auto& dims : streamed_loads)
        if (!dims.count(g)) return;  // blocks along g share this streamed input's tiles: keep one segment
    }
    if (blocks >= min_blocks) return;
    int64_t want = (min_blocks + blocks - 1) / blocks;
    if (split_kv && want > kClusterSegments && blocks * kClusterSegments * 10 >= min_blocks * 9) want = kClusterSegments;
    plan_.segments = static_cast<int>(std::min<int64_t>(s.tiles(), want));
    if (plan_.segments > 1)
      plan_.notes.push_back("multi-segment: the stream " + s.name + " is split into " + std::to_string(plan_.segments) +
                            " segments across blocks (the grid has " + std::to_string(blocks) +
                            " block(s) and no grid dim reuses a streamed tile); partial states are merged across the blocks of a cluster (DSM) when the segments fit one cluster, else by a second kernel");
  }

  // ---- 5. Capacity -------------------------------------------------------------------------------
  int64_t tile_elements(const std::vector<int>& dims) const {
    int64_t n = 1;
    for (int d : dims) n *= plan_.dims[static_cast<size_t>(d)].tile;
    return n;
  }

  std::string check_capacity() {
    int64_t bytes = 0;
    std::string largest;
    int64_t largest_bytes = 0;
    for (auto& m : plan_.members) {
      int64_t b = tile_elements(m.p_dims) * 4;
      if (m.phase == Phase::cascade) b *= m.decomposition.kind == Decomposition::Kind::polynomial ? 1 + static_cast<int64_t>(m.decomposition.taylor.size()) : 2;
      bytes += b;
      if (b > largest_bytes) { largest_bytes = b; largest = m.def.target.name; }
    }
    plan_.on_chip_bytes = bytes;
    if (bytes > params_.on_chip_budget)
      return "on-chip capacity: the tiles and states need " + std::to_string(bytes / 1024) + " KB per block (largest: " + largest +
             ", " + std::to_string(largest_bytes / 1024) + " KB) but the budget is " + std::to_string(params_.on_chip_budget / 1024) + " KB";
    return "";
  }
};

}  // namespace

PlanAttempt plan_group(const BoundProgram& program, const std::vector<Definition>& defs,
                       const std::vector<std::string>& exported, const FusionParams& params) {
  Planner planner(program, defs, exported, params);
  return planner.run();
}

}  // namespace solder
