#include "backend/cpu/sampled_reference.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_set>

#include "backend/cpu/reference.h"
#include "ir/expr_eval.h"
#include "support/parallel.h"

namespace solder {
namespace {

constexpr int kMaxStack = 256;  // as CompiledExpr
constexpr int kTensorShift = 48;  // memo key: tensor id << 48 | flat index

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

void decode(int64_t n, const std::vector<int64_t>& extents, int64_t* out) {
  for (size_t d = extents.size(); d-- > 0;) {
    out[d] = n % extents[d];
    n /= extents[d];
  }
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = stride;
    stride *= shape[d];
  }
  return s;
}

bool greater_for_topk(double a, int64_t ia, double b, int64_t ib) {  // as reference.cpp
  bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

class Random {  // splitmix64
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }

 private:
  uint64_t state_;
};

uint64_t hash_name(const std::string& name, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull) ^ 0x5a4d504c45445245ull;  // "SAMPLED" salt
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// ---- Bytecode ---------------------------------------------------------------------------------
// The same instruction set as CompiledExpr in float64 mode, except that a load of a definition's
// target asks the worker for that element (computed on demand) instead of reading storage.

enum class Op : uint8_t {
  constant, variable,
  load_input, load_def,                // indices on the stack
  load_input_direct, load_def_direct,  // indices are variables or integer constants (no stack)
  unary, binary, cast, jump_if_false, jump
};

struct Instr {
  Op op;
  uint8_t sub = 0;  // UnaryOp / BinaryOp / DType
  int32_t a = 0;    // variable slot, load index, jump target
  int32_t b = 0;    // load rank
  double value = 0;
};

struct LoadSite {
  int tensor = -1;                // tensor id (index into BoundProgram::tensors)
  const double* data = nullptr;   // inputs: their values
  const std::string* name = nullptr;
  std::vector<int64_t> shape, strides;
  // Direct loads: per index, the variable slot, or -1 and the constant in `fixed`.
  std::vector<int32_t> slots;
  std::vector<int64_t> fixed;
};

struct Code {
  std::vector<Instr> code;
  std::vector<LoadSite> loads;
};

struct TensorSlot {
  const TensorInfo* info = nullptr;
  const double* input_data = nullptr;  // inputs
  int def = -1;                        // targets: the defining definition
};

class Compiler {
 public:
  Compiler(const BoundProgram& p, const std::vector<TensorSlot>& tensors, const std::vector<std::string>& vars)
      : program_(p), tensors_(tensors), vars_(vars) {}

  Code compile(const Expr& e) {
    emit(e);
    if (max_depth_ > kMaxStack) throw Error("expression too deep to evaluate (" + std::to_string(max_depth_) + " levels)");
    return std::move(out_);
  }

 private:
  const BoundProgram& program_;
  const std::vector<TensorSlot>& tensors_;
  const std::vector<std::string>& vars_;
  Code out_;
  int depth_ = 0, max_depth_ = 0;

  int32_t push(Instr i) {
    out_.code.push_back(i);
    return static_cast<int32_t>(out_.code.size() - 1);
  }
  void grow(int n) {
    depth_ += n;
    max_depth_ = std::max(max_depth_, depth_);
  }
  int32_t here() const { return static_cast<int32_t>(out_.code.size()); }

  int tensor_id(const std::string& name) const {
    for (size_t i = 0; i < program_.tensors.size(); ++i)
      if (program_.tensors[i].name == name) return static_cast<int>(i);
    throw Error("expression reads '" + name + "', which is not bound");
  }

  int32_t var_slot(const std::string& name) const {
    for (size_t i = 0; i < vars_.size(); ++i)
      if (vars_[i] == name) return static_cast<int32_t>(i);
    throw Error("expression uses variable '" + name + "', which is not bound");
  }

  // The value of a subtree without variables or loads, computed by the same functions the
  // evaluator uses (so folding it changes no bit), or nothing (also when computing it throws:
  // it may sit in a branch that is never taken).
  std::optional<double> constant(const Expr& e) const {
    switch (e.kind()) {
      case ExprKind::Const: return e.as<ConstNode>()->value;
      case ExprKind::DimRef: {
        auto it = program_.dims.find(e.as<DimRefNode>()->name);
        if (it == program_.dims.end()) return std::nullopt;
        return static_cast<double>(it->second);
      }
      case ExprKind::Unary: {
        auto u = e.as<UnaryNode>();
        auto x = constant(u->operand);
        if (!x) return std::nullopt;
        return apply_unary(u->op, *x);
      }
      case ExprKind::Binary: {
        auto b = e.as<BinaryNode>();
        if (is_logical(b->op)) return std::nullopt;
        auto x = constant(b->lhs);
        if (!x) return std::nullopt;
        auto y = constant(b->rhs);
        if (!y) return std::nullopt;
        try {
          return apply_binary(b->op, *x, *y);
        } catch (const Error&) {
          return std::nullopt;
        }
      }
      case ExprKind::Cast: {
        auto c = e.as<CastNode>();
        auto x = constant(c->operand);
        if (!x) return std::nullopt;
        return round_to_dtype(*x, c->dtype);
      }
      default: return std::nullopt;
    }
  }

  void emit(const Expr& e) {
    if (e.kind() == ExprKind::Unary || e.kind() == ExprKind::Binary || e.kind() == ExprKind::Cast) {
      if (auto v = constant(e)) {
        push({Op::constant, 0, 0, 0, *v});
        grow(1);
        return;
      }
    }
    switch (e.kind()) {
      case ExprKind::Const:
        push({Op::constant, 0, 0, 0, e.as<ConstNode>()->value});
        grow(1);
        return;
      case ExprKind::Var:
        push({Op::variable, 0, var_slot(e.as<VarNode>()->name)});
        grow(1);
        return;
      case ExprKind::DimRef: {
        const std::string& name = e.as<DimRefNode>()->name;
        auto it = program_.dims.find(name);
        if (it == program_.dims.end()) throw Error("expression uses dim '" + name + "', which is not bound");
        push({Op::constant, 0, 0, 0, static_cast<double>(it->second)});
        grow(1);
        return;
      }
      case ExprKind::Load: {
        auto load = e.as<LoadNode>();
        int id = tensor_id(load->tensor);
        const TensorSlot& slot = tensors_[static_cast<size_t>(id)];
        if (slot.info->shape.size() != load->index.size())
          throw Error("load of '" + load->tensor + "' has " + std::to_string(load->index.size()) +
                      " indices, its storage has rank " + std::to_string(slot.info->shape.size()));
        LoadSite site;
        bool direct = true;
        for (auto& i : load->index) {
          if (auto v = i.as<VarNode>()) {
            site.slots.push_back(var_slot(v->name));
            site.fixed.push_back(0);
          } else if (auto c = constant(i)) {
            site.slots.push_back(-1);
            site.fixed.push_back(static_cast<int64_t>(*c));  // as the evaluator converts an index
          } else {
            direct = false;
          }
        }
        if (!direct) {
          site.slots.clear();
          site.fixed.clear();
          for (auto& i : load->index) emit(i);
        }
        site.tensor = id;
        site.data = slot.input_data;
        site.name = &slot.info->name;
        site.shape = slot.info->shape;
        site.strides = strides_of(site.shape);
        if (slot.def < 0 && !site.data) throw Error("expression reads '" + load->tensor + "', which is not bound");
        out_.loads.push_back(std::move(site));
        Op op = direct ? (slot.def >= 0 ? Op::load_def_direct : Op::load_input_direct)
                       : (slot.def >= 0 ? Op::load_def : Op::load_input);
        push({op, 0, static_cast<int32_t>(out_.loads.size() - 1), static_cast<int32_t>(load->index.size())});
        if (!direct) depth_ -= static_cast<int>(load->index.size());
        grow(1);
        return;
      }
      case ExprKind::Unary: {
        auto u = e.as<UnaryNode>();
        emit(u->operand);
        push({Op::unary, static_cast<uint8_t>(u->op)});
        return;
      }
      case ExprKind::Binary: {
        auto bin = e.as<BinaryNode>();
        if (is_logical(bin->op)) {
          // As CompiledExpr: a && b is select(a, b, 0); a || b is select(a, 1, b).
          bool is_and = bin->op == BinaryOp::logical_and;
          emit_select(bin->lhs, is_and ? bin->rhs : make_int(1), is_and ? make_int(0) : bin->rhs);
          return;
        }
        emit(bin->lhs);
        emit(bin->rhs);
        push({Op::binary, static_cast<uint8_t>(bin->op)});
        depth_ -= 1;
        return;
      }
      case ExprKind::Select: {
        auto s = e.as<SelectNode>();
        emit_select(s->cond, s->if_true, s->if_false);
        return;
      }
      case ExprKind::Cast: {
        auto c = e.as<CastNode>();
        emit(c->operand);
        push({Op::cast, static_cast<uint8_t>(c->dtype)});
        return;
      }
    }
  }

  void emit_select(const Expr& cond, const Expr& t, const Expr& f) {
    emit(cond);
    int32_t branch = push({Op::jump_if_false});
    depth_ -= 1;
    emit(t);
    int32_t skip = push({Op::jump});
    depth_ -= 1;
    out_.code[static_cast<size_t>(branch)].a = here();
    emit(f);
    out_.code[static_cast<size_t>(skip)].a = here();
  }
};

// ---- Definitions ------------------------------------------------------------------------------

struct DefPlan {
  ReduceOp reduce = ReduceOp::none;
  Code body;
  size_t np = 0, nr = 0;
  std::vector<int64_t> p_extents, r_extents;
  int64_t r_points = 1;
  int value_tensor = -1, index_tensor = -1;
  DType value_dtype = DType::f32;
  int rank_position = -1;
  int64_t topk_k = 0;
  int64_t rank_stride = 0;
  // Whether elements are memoised: every reduction, and pointwise definitions whose element
  // costs more than kMemoCost to recompute. Cheap pointwise elements (a select between two
  // loads, a ReLU, a scale) are recomputed at each use, which keeps strided sweeps over large
  // pointwise tensors (the concatenated KV cache of a decode step) out of the memo.
  bool memoised = true;
  double cost = 0;  // estimated work to compute one element without the memo
};

constexpr double kMemoCost = 32;

class Engine {
 public:
  Engine(const BoundProgram& program, const TensorSet& inputs) : program_(program) {
    tensors_.resize(program.tensors.size());
    for (size_t i = 0; i < program.tensors.size(); ++i) {
      const TensorInfo& t = program.tensors[i];
      if ((t.elements() >> kTensorShift) != 0 || i >= (size_t{1} << (64 - kTensorShift)))
        throw Error("sampled reference: tensor '" + t.name + "' is too large to index");
      tensors_[i].info = &t;
      if (t.role == TensorRole::input) {
        auto it = inputs.find(t.name);
        if (it == inputs.end()) throw Error("reference: input '" + t.name + "' was not provided");
        if (it->second.shape != t.shape) throw Error("reference: input '" + t.name + "' has the wrong shape");
        if (static_cast<int64_t>(it->second.values.size()) != t.elements())
          throw Error("reference: input '" + t.name + "' has the wrong number of values");
        tensors_[i].input_data = it->second.values.data();
      } else {
        tensors_[i].def = t.def_index;
      }
    }
    for (size_t di = 0; di < program.defs.size(); ++di) {
      const BoundDefinition& bd = program.defs[di];
      const Definition& def = *bd.def;
      DefPlan plan;
      plan.reduce = def.reduce;
      std::vector<std::string> vars;
      for (auto& v : def.target.index) vars.push_back(v.name);
      for (auto& v : def.reduce_vars) vars.push_back(v.name);
      plan.body = Compiler(program, tensors_, vars).compile(def.body);
      plan.np = def.target.index.size();
      plan.nr = def.reduce_vars.size();
      plan.p_extents = bd.p_extents;
      plan.r_extents = bd.r_extents;
      plan.r_points = product(bd.r_extents);
      plan.value_tensor = id_of(def.target.name);
      plan.value_dtype = program.tensors[static_cast<size_t>(plan.value_tensor)].dtype;
      if (def.index_target) plan.index_tensor = id_of(def.index_target->name);
      plan.rank_position = bd.topk_rank_position;
      plan.topk_k = bd.topk_k;
      if (def.reduce == ReduceOp::topk)
        plan.rank_stride = strides_of(plan.p_extents)[static_cast<size_t>(plan.rank_position)];
      plan.cost = static_cast<double>(std::max<int64_t>(1, plan.r_points)) * body_cost(plan.body);
      plan.memoised = plan.reduce != ReduceOp::none || plan.cost > kMemoCost;
      defs_.push_back(std::move(plan));
    }
  }

  // Work to evaluate a body once: an instruction is 1, a transcendental function 20, a load of a
  // memoised target 4, a load of a recomputed target that target's cost.
  double body_cost(const Code& code) const {
    double cost = 0;
    for (const Instr& in : code.code) {
      cost += 1;
      if (in.op == Op::unary) {
        auto op = static_cast<UnaryOp>(in.sub);
        if (op != UnaryOp::neg && op != UnaryOp::logical_not && op != UnaryOp::abs) cost += 20;
      } else if (in.op == Op::binary && static_cast<BinaryOp>(in.sub) == BinaryOp::pow) {
        cost += 20;
      } else if (in.op == Op::load_def || in.op == Op::load_def_direct) {
        const TensorSlot& t = tensors_[static_cast<size_t>(code.loads[static_cast<size_t>(in.a)].tensor)];
        const DefPlan& d = defs_[static_cast<size_t>(t.def)];
        cost += d.memoised ? 4 : d.cost;
      }
    }
    return cost;
  }

  int id_of(const std::string& name) const {
    for (size_t i = 0; i < program_.tensors.size(); ++i)
      if (program_.tensors[i].name == name) return static_cast<int>(i);
    throw Error("sampled reference: no tensor '" + name + "'");
  }

  const BoundProgram& program_;
  std::vector<TensorSlot> tensors_;
  std::vector<DefPlan> defs_;
};

// ---- Memo -------------------------------------------------------------------------------------
// Elements are kept in pages of 16 consecutive flat indices of one tensor (a presence mask and
// 16 values), found through an open-addressing index; the page each tensor touched last is
// remembered, so the sequential sweeps a reduction makes (p[b, h, i, j] over j) cost no hashing
// and stay in cache. Two generations: when the young one holds `page_limit` pages it becomes the
// old one (the previous old one is dropped); a hit in the old one is copied to the young one.
// A cache only: a dropped element is recomputed to the same value.

class PageIndex {  // page id -> page number, linear probing
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  int64_t find(uint64_t id) const {
    if (count_ == 0) return -1;
    for (size_t i = slot_of(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == id) return slots_[i].page;
      if (slots_[i].id == kEmpty) return -1;
    }
  }
  void insert(uint64_t id, int64_t page) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(256, slots_.size() * 2));
    for (size_t i = slot_of(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == kEmpty) {
        slots_[i] = {id, page};
        ++count_;
        return;
      }
    }
  }
  void clear() {
    if (count_ == 0) return;
    std::fill(slots_.begin(), slots_.end(), Slot{kEmpty, 0});
    count_ = 0;
  }

 private:
  struct Slot {
    uint64_t id;
    int64_t page;
  };
  std::vector<Slot> slots_;
  size_t count_ = 0, mask_ = 0;
  int shift_ = 64;
  size_t slot_of(uint64_t id) const { return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t capacity) {
    std::vector<Slot> old(capacity, Slot{kEmpty, 0});
    old.swap(slots_);
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    count_ = 0;
    for (const Slot& s : old)
      if (s.id != kEmpty) insert(s.id, s.page);
  }
};

class PagedTable {
 public:
  static constexpr int kPageBits = 4;
  static constexpr uint64_t kPageMask = (uint64_t{1} << kPageBits) - 1;
  explicit PagedTable(size_t tensors) : last_id_(tensors, PageIndex::kEmpty), last_page_(tensors, -1) {}

  bool find(uint64_t key, double& value) {
    int64_t page = page_of(key >> kPageBits, false);
    if (page < 0) return false;
    const Page& pg = pages_[static_cast<size_t>(page)];
    uint64_t bit = uint64_t{1} << (key & kPageMask);
    if (!(pg.present & bit)) return false;
    value = pg.values[key & kPageMask];
    return true;
  }
  void insert(uint64_t key, double value) {
    Page& pg = pages_[static_cast<size_t>(page_of(key >> kPageBits, true))];
    pg.present |= uint64_t{1} << (key & kPageMask);
    pg.values[key & kPageMask] = value;
  }
  size_t pages() const { return pages_.size(); }
  void clear() {
    pages_.clear();
    index_.clear();
    std::fill(last_id_.begin(), last_id_.end(), PageIndex::kEmpty);
  }
  void swap(PagedTable& o) {
    pages_.swap(o.pages_);
    std::swap(index_, o.index_);
    last_id_.swap(o.last_id_);
    last_page_.swap(o.last_page_);
  }

 private:
  struct Page {
    uint64_t present;
    double values[uint64_t{1} << kPageBits];
  };
  std::vector<Page> pages_;
  PageIndex index_;
  std::vector<uint64_t> last_id_;  // per tensor: the page it touched last
  std::vector<int64_t> last_page_;

  int64_t page_of(uint64_t id, bool create) {
    const auto tensor = static_cast<size_t>(id >> (kTensorShift - kPageBits));
    if (last_id_[tensor] == id) return last_page_[tensor];
    int64_t page = index_.find(id);
    if (page < 0) {
      if (!create) return -1;
      page = static_cast<int64_t>(pages_.size());
      pages_.push_back(Page{0, {}});
      index_.insert(id, page);
    }
    last_id_[tensor] = id;
    last_page_[tensor] = page;
    return page;
  }
};

class Memo {
 public:
  Memo(size_t tensors, size_t page_limit) : page_limit_(page_limit), young_(tensors), old_(tensors) {}
  bool find(uint64_t key, double& value) {
    if (young_.find(key, value)) return true;
    if (old_.find(key, value)) {
      insert(key, value);
      return true;
    }
    return false;
  }
  void insert(uint64_t key, double value) {
    if (young_.pages() >= page_limit_) {
      young_.swap(old_);
      young_.clear();
    }
    young_.insert(key, value);
  }

 private:
  size_t page_limit_;
  PagedTable young_, old_;
};

// Pages per memo generation: 2 generations x 2^18 pages x 136 bytes, about 70 MB per worker.
constexpr size_t kMemoPages = size_t{1} << 18;

// ---- Worker -----------------------------------------------------------------------------------

class Worker {
 public:
  explicit Worker(const Engine& engine) : engine_(engine), memo_(engine.tensors_.size(), kMemoPages) {
    vars_.resize(engine.defs_.size());
    candidates_.resize(engine.defs_.size());
    last_computed_.assign(engine.defs_.size(), -2);
    for (size_t i = 0; i < engine.defs_.size(); ++i) vars_[i].assign(engine.defs_[i].np + engine.defs_[i].nr + 1, 0);
  }

  // The value of element `flat` of tensor `tensor`, as the full reference has it.
  // `decoded`: the caller has already written the element's coordinates into the scratch
  // variables of the tensor's definition.
  double element(int tensor, int64_t flat, bool decoded = false) {
    const TensorSlot& slot = engine_.tensors_[static_cast<size_t>(tensor)];
    if (slot.input_data) return slot.input_data[flat];
    const size_t di = static_cast<size_t>(slot.def);
    const DefPlan& d = engine_.defs_[di];
    uint64_t key = (static_cast<uint64_t>(tensor) << kTensorShift) | static_cast<uint64_t>(flat);
    double cached;
    if (d.memoised && memo_.find(key, cached)) return cached;
    // A definition never reads its own targets, so one scratch area per definition suffices.
    int64_t* vars = vars_[di].data();
    if (!decoded) decode(flat, d.p_extents, vars);
    if (sweep_batchable(d) && flat == last_computed_[di] + 1 && vars[d.np - 1] != 0) return sweep(d, di, tensor, flat, vars);
    last_computed_[di] = flat;
    double result = 0;
    switch (d.reduce) {
      case ReduceOp::none: result = eval(d.body, vars); break;
      case ReduceOp::sum: {
        double acc = 0;
        for_each_r(d, vars, [&](double v) { acc += v; return true; });
        result = acc;
        break;
      }
      case ReduceOp::prod: {
        double acc = 1;
        for_each_r(d, vars, [&](double v) { acc *= v; return true; });
        result = acc;
        break;
      }
      case ReduceOp::max:
      case ReduceOp::min: {
        bool is_max = d.reduce == ReduceOp::max;
        BinaryOp op = is_max ? BinaryOp::max : BinaryOp::min;
        double acc = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
        for_each_r(d, vars, [&](double v) { acc = apply_binary(op, acc, v); return true; });
        result = acc;
        break;
      }
      case ReduceOp::argmax:
      case ReduceOp::argmin: {
        bool is_max = d.reduce == ReduceOp::argmax;
        double best = 0;
        int64_t best_index = -1, r = 0;
        for_each_r(d, vars, [&](double v) {
          if (best_index >= 0 && std::isnan(best)) return false;  // the first NaN wins
          if (best_index < 0 || std::isnan(v) || (is_max ? v > best : v < best)) {
            best = v;
            best_index = r;
          }
          ++r;
          return true;
        });
        result = static_cast<double>(best_index);
        break;
      }
      case ReduceOp::topk: return topk(d, di, tensor, flat, vars);
    }
    result = round_to_dtype(result, d.value_dtype);
    if (d.memoised) memo_.insert(key, result);
    return result;
  }

 private:
  const Engine& engine_;
  Memo memo_;
  std::vector<std::vector<int64_t>> vars_;
  std::vector<std::vector<std::pair<double, int64_t>>> candidates_;
  std::vector<int64_t> last_computed_;  // per definition: the flat index it computed last

  // Sweeps. When a reduction's elements are demanded one after the other along its last p-dim
  // (c[m, n] for n = 0, 1, 2, ... as a later sum walks h[m, n]), the next kSweepLanes elements of
  // that row are computed together: the r-loop outside, the elements inside, so each element
  // still combines its body values in the reference's r-order (bit for bit the same), while the
  // loads of neighbouring elements share cache lines (b[k, n .. n + 31] instead of a column of b
  // per element). At most kSweepLanes - 1 elements past the end of a sweep are computed for
  // nothing; they are elements the full reference computes too.
  static constexpr int64_t kSweepLanes = 32;

  static bool sweep_batchable(const DefPlan& d) {
    return d.np > 0 && (d.reduce == ReduceOp::sum || d.reduce == ReduceOp::prod || d.reduce == ReduceOp::max ||
                        d.reduce == ReduceOp::min);
  }

  double sweep(const DefPlan& d, size_t di, int tensor, int64_t flat, int64_t* vars) {
    int64_t& last = vars[d.np - 1];
    const int64_t first = last;
    const int64_t lanes = std::min(kSweepLanes, d.p_extents[d.np - 1] - first);
    double acc[kSweepLanes];
    const bool is_max = d.reduce == ReduceOp::max;
    double identity = d.reduce == ReduceOp::sum ? 0.0 : d.reduce == ReduceOp::prod ? 1.0
                      : is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    std::fill(acc, acc + lanes, identity);
    int64_t* r = vars + d.np;
    for (size_t i = 0; i < d.nr; ++i) r[i] = 0;
    for (int64_t n = 0; n < d.r_points; ++n) {
      for (int64_t l = 0; l < lanes; ++l) {
        last = first + l;
        double v = eval(d.body, vars);
        switch (d.reduce) {
          case ReduceOp::sum: acc[l] += v; break;
          case ReduceOp::prod: acc[l] *= v; break;
          default: acc[l] = apply_binary(is_max ? BinaryOp::max : BinaryOp::min, acc[l], v); break;
        }
      }
      for (size_t i = d.nr; i-- > 0;) {
        if (++r[i] < d.r_extents[i]) break;
        r[i] = 0;
      }
    }
    const uint64_t base = static_cast<uint64_t>(tensor) << kTensorShift;
    for (int64_t l = 0; l < lanes; ++l) {
      acc[l] = round_to_dtype(acc[l], d.value_dtype);
      memo_.insert(base | static_cast<uint64_t>(flat + l), acc[l]);
    }
    last_computed_[di] = flat + lanes - 1;
    return acc[0];
  }

  // Evaluates the body at every r-point in lexicographic order (the last r-variable fastest),
  // passing each value to `f`; stops when f returns false.
  template <class F>
  void for_each_r(const DefPlan& d, int64_t* vars, F&& f) {
    int64_t* r = vars + d.np;
    for (size_t i = 0; i < d.nr; ++i) r[i] = 0;
    if (d.r_points <= 0) return;
    for (int64_t n = 0; n < d.r_points; ++n) {
      if (!f(eval(d.body, vars))) return;
      for (size_t i = d.nr; i-- > 0;) {
        if (++r[i] < d.r_extents[i]) break;
        r[i] = 0;
      }
    }
  }

  double topk(const DefPlan& d, size_t di, int tensor, int64_t flat, int64_t* vars) {
    const auto rank = static_cast<size_t>(d.rank_position);
    int64_t base = flat - vars[rank] * d.rank_stride;
    int64_t wanted_rank = vars[rank];
    vars[rank] = 0;
    auto& candidates = candidates_[di];
    candidates.clear();
    int64_t r = 0;
    for_each_r(d, vars, [&](double v) { candidates.emplace_back(v, r++); return true; });
    auto k = static_cast<size_t>(d.topk_k);
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(k), candidates.end(),
                      [](auto& a, auto& b) { return greater_for_topk(a.first, a.second, b.first, b.second); });
    double result = 0;
    for (size_t i = 0; i < k; ++i) {
      int64_t at = base + static_cast<int64_t>(i) * d.rank_stride;
      double value = round_to_dtype(candidates[i].first, d.value_dtype);
      double index = static_cast<double>(candidates[i].second);  // the reference does not round indices
      memo_.insert((static_cast<uint64_t>(d.value_tensor) << kTensorShift) | static_cast<uint64_t>(at), value);
      if (d.index_tensor >= 0)
        memo_.insert((static_cast<uint64_t>(d.index_tensor) << kTensorShift) | static_cast<uint64_t>(at), index);
      if (static_cast<int64_t>(i) == wanted_rank) result = tensor == d.value_tensor ? value : index;
    }
    return result;
  }

  [[noreturn]] static void out_of_range(const LoadSite& t, const double* index, int rank, int d) {
    std::string where = *t.name + "[";
    for (int k = 0; k < rank; ++k) where += (k ? ", " : "") + std::to_string(static_cast<int64_t>(index[k]));
    throw Error("load out of range: " + where + "] (dim " + std::to_string(d + 1) + " has extent " +
                std::to_string(t.shape[static_cast<size_t>(d)]) + ")");
  }

  [[noreturn]] static void out_of_range_direct(const LoadSite& t, const int64_t* vars, int d) {
    std::vector<double> index;
    for (size_t k = 0; k < t.slots.size(); ++k)
      index.push_back(static_cast<double>(t.slots[k] >= 0 ? vars[t.slots[k]] : t.fixed[k]));
    out_of_range(t, index.data(), static_cast<int>(index.size()), d);
  }

  double eval(const Code& c, const int64_t* vars) {
    double stack[kMaxStack];
    int top = 0;
    const Instr* code = c.code.data();
    const size_t n = c.code.size();
    for (size_t pc = 0; pc < n; ++pc) {
      const Instr& in = code[pc];
      switch (in.op) {
        case Op::constant: stack[top++] = in.value; break;
        case Op::variable: stack[top++] = static_cast<double>(vars[in.a]); break;
        case Op::load_input:
        case Op::load_def: {
          const LoadSite& t = c.loads[static_cast<size_t>(in.a)];
          top -= in.b;
          int64_t offset = 0;
          for (int d = 0; d < in.b; ++d) {
            auto index = static_cast<int64_t>(stack[top + d]);
            if (index < 0 || index >= t.shape[static_cast<size_t>(d)]) out_of_range(t, stack + top, in.b, d);
            offset += index * t.strides[static_cast<size_t>(d)];
          }
          stack[top++] = in.op == Op::load_input ? t.data[offset] : element(t.tensor, offset);
          break;
        }
        case Op::load_input_direct: {
          const LoadSite& t = c.loads[static_cast<size_t>(in.a)];
          int64_t offset = 0;
          for (int d = 0; d < in.b; ++d) {
            const auto du = static_cast<size_t>(d);
            int64_t index = t.slots[du] >= 0 ? vars[t.slots[du]] : t.fixed[du];
            if (index < 0 || index >= t.shape[du]) out_of_range_direct(t, vars, d);
            offset += index * t.strides[du];
          }
          stack[top++] = t.data[offset];
          break;
        }
        case Op::load_def_direct: {
          // The coordinates go straight into the scratch variables of the loaded definition
          // (never active now: definitions only read earlier ones), sparing element() a decode.
          const LoadSite& t = c.loads[static_cast<size_t>(in.a)];
          int64_t* coords = vars_[static_cast<size_t>(engine_.tensors_[static_cast<size_t>(t.tensor)].def)].data();
          int64_t offset = 0;
          for (int d = 0; d < in.b; ++d) {
            const auto du = static_cast<size_t>(d);
            int64_t index = t.slots[du] >= 0 ? vars[t.slots[du]] : t.fixed[du];
            if (index < 0 || index >= t.shape[du]) out_of_range_direct(t, vars, d);
            coords[du] = index;
            offset += index * t.strides[du];
          }
          stack[top++] = element(t.tensor, offset, /*decoded=*/true);
          break;
        }
        case Op::unary: stack[top - 1] = apply_unary(static_cast<UnaryOp>(in.sub), stack[top - 1]); break;
        case Op::binary: {
          --top;
          // The four arithmetic operations inline (as apply_binary computes them), the rest through it.
          switch (static_cast<BinaryOp>(in.sub)) {
            case BinaryOp::add: stack[top - 1] = stack[top - 1] + stack[top]; break;
            case BinaryOp::sub: stack[top - 1] = stack[top - 1] - stack[top]; break;
            case BinaryOp::mul: stack[top - 1] = stack[top - 1] * stack[top]; break;
            case BinaryOp::div: stack[top - 1] = stack[top - 1] / stack[top]; break;
            default: stack[top - 1] = apply_binary(static_cast<BinaryOp>(in.sub), stack[top - 1], stack[top]);
          }
          break;
        }
        case Op::cast: stack[top - 1] = round_to_dtype(stack[top - 1], static_cast<DType>(in.sub)); break;
        case Op::jump_if_false:
          if (stack[--top] == 0) pc = static_cast<size_t>(in.a) - 1;
          break;
        case Op::jump: pc = static_cast<size_t>(in.a) - 1; break;
      }
    }
    return stack[0];
  }
};

// Evaluates elements (tensor id, flat index) in parallel; `items` should be grouped so that
// neighbours share work (sorted by tensor, then flat index).
std::vector<double> evaluate(const Engine& engine, const std::vector<std::pair<int, int64_t>>& items,
                             const std::function<void(double)>& progress) {
  std::vector<double> values(items.size());
  std::mutex pool_mutex, progress_mutex;
  std::vector<std::unique_ptr<Worker>> pool;
  std::atomic<int64_t> done{0};
  double reported = 0;
  const auto total = static_cast<int64_t>(items.size());
  parallel_for(total, [&](int64_t begin, int64_t end) {
    std::unique_ptr<Worker> worker;
    {
      std::lock_guard<std::mutex> lock(pool_mutex);
      if (!pool.empty()) {
        worker = std::move(pool.back());
        pool.pop_back();
      }
    }
    if (!worker) worker = std::make_unique<Worker>(engine);
    for (int64_t i = begin; i < end; ++i)
      values[static_cast<size_t>(i)] = worker->element(items[static_cast<size_t>(i)].first, items[static_cast<size_t>(i)].second);
    {
      std::lock_guard<std::mutex> lock(pool_mutex);
      pool.push_back(std::move(worker));
    }
    int64_t now = done.fetch_add(end - begin) + (end - begin);
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      double fraction = static_cast<double>(now) / static_cast<double>(std::max<int64_t>(1, total));
      if (fraction > reported) {
        reported = fraction;
        progress(fraction);
      }
    }
  });
  return values;
}

// ---- Sample selection -------------------------------------------------------------------------

struct MaskFacts {
  bool index_mask = false;                // a select condition compares index variables
  std::set<std::string> document_inputs;  // i32 inputs loaded in select conditions
};

void scan_condition(const Expr& e, const BoundProgram& program, MaskFacts& facts);

void scan(const Expr& e, const BoundProgram& program, MaskFacts& facts) {
  switch (e.kind()) {
    case ExprKind::Const:
    case ExprKind::Var:
    case ExprKind::DimRef: return;
    case ExprKind::Load:
      for (auto& i : e.as<LoadNode>()->index) scan(i, program, facts);
      return;
    case ExprKind::Unary: scan(e.as<UnaryNode>()->operand, program, facts); return;
    case ExprKind::Binary:
      scan(e.as<BinaryNode>()->lhs, program, facts);
      scan(e.as<BinaryNode>()->rhs, program, facts);
      return;
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      scan_condition(s->cond, program, facts);
      scan(s->if_true, program, facts);
      scan(s->if_false, program, facts);
      return;
    }
    case ExprKind::Cast: scan(e.as<CastNode>()->operand, program, facts); return;
  }
}

void scan_condition(const Expr& e, const BoundProgram& program, MaskFacts& facts) {
  switch (e.kind()) {
    case ExprKind::Const:
    case ExprKind::Var:
    case ExprKind::DimRef: return;
    case ExprKind::Load: {
      auto load = e.as<LoadNode>();
      if (program.has_tensor(load->tensor)) {
        const TensorInfo& t = program.tensor(load->tensor);
        if (t.role == TensorRole::input && t.dtype == DType::i32 && !t.shape.empty()) facts.document_inputs.insert(t.name);
      }
      for (auto& i : load->index) scan_condition(i, program, facts);
      return;
    }
    case ExprKind::Unary: scan_condition(e.as<UnaryNode>()->operand, program, facts); return;
    case ExprKind::Binary: {
      auto b = e.as<BinaryNode>();
      if (is_comparison(b->op)) {
        std::set<std::string> names;
        for (auto& v : vars_used(b->lhs)) names.insert(v);
        for (auto& v : vars_used(b->rhs)) names.insert(v);
        if (names.size() >= 2) facts.index_mask = true;
      }
      scan_condition(b->lhs, program, facts);
      scan_condition(b->rhs, program, facts);
      return;
    }
    case ExprKind::Select: {
      auto s = e.as<SelectNode>();
      scan_condition(s->cond, program, facts);
      scan_condition(s->if_true, program, facts);
      scan_condition(s->if_false, program, facts);
      return;
    }
    case ExprKind::Cast: scan_condition(e.as<CastNode>()->operand, program, facts); return;
  }
}

MaskFacts mask_facts(const BoundProgram& program) {
  MaskFacts facts;
  for (auto& bd : program.defs) scan(bd.def->body, program, facts);
  return facts;
}

// The output's rows: leading dims (all but the last; for a 1-d output, the dim itself, with rows
// of one element) and the row length.
struct RowShape {
  std::vector<int64_t> leading;
  std::vector<std::string> labels;
  int64_t row_length = 1;
};

RowShape row_shape(const TensorInfo& t) {
  RowShape r;
  if (t.shape.size() <= 1) {
    r.leading = t.shape;
    r.labels = t.dim_labels;
    return r;
  }
  r.leading.assign(t.shape.begin(), t.shape.end() - 1);
  r.labels.assign(t.dim_labels.begin(), t.dim_labels.end() - 1);
  r.row_length = t.shape.back();
  return r;
}

int64_t row_id(const std::vector<int64_t>& coords, const std::vector<int64_t>& leading) {
  int64_t id = 0;
  for (size_t d = 0; d < leading.size(); ++d) id = id * leading[d] + coords[d];
  return id;
}

std::set<int64_t> required_rows(const BoundProgram& program, const TensorSet& inputs, const TensorInfo& output) {
  RowShape rs = row_shape(output);
  const size_t L = rs.leading.size();
  std::set<int64_t> rows;
  // Corner rows.
  std::vector<int64_t> coords(L, 0);
  for (uint64_t mask = 0; mask < (uint64_t{1} << std::min<size_t>(L, 20)); ++mask) {
    for (size_t d = 0; d < L; ++d) coords[d] = (d < 20 && ((mask >> d) & 1)) ? rs.leading[d] - 1 : 0;
    rows.insert(row_id(coords, rs.leading));
  }
  MaskFacts facts = mask_facts(program);
  if (facts.index_mask || !facts.document_inputs.empty()) {
    // Rows near the diagonal: the first 8 positions of each leading dim, the others at 0.
    for (size_t d = 0; d < L; ++d) {
      std::fill(coords.begin(), coords.end(), 0);
      for (int64_t i = 0; i < std::min<int64_t>(8, rs.leading[d]); ++i) {
        coords[d] = i;
        rows.insert(row_id(coords, rs.leading));
      }
    }
  }
  for (const std::string& name : facts.document_inputs) {
    const TensorInfo& x = program.tensor(name);
    auto it = inputs.find(name);
    if (it == inputs.end() || it->second.shape != x.shape) throw Error("reference: input '" + name + "' was not provided");
    const std::vector<double>& values = it->second.values;
    const size_t xr = x.shape.size();
    const std::string& seq_label = x.dim_labels.back();
    bool maps = std::find(rs.labels.begin(), rs.labels.end(), seq_label) != rs.labels.end();
    if (!maps) continue;
    const int64_t len = x.shape.back();
    std::vector<int64_t> boundaries;  // flat index into x of position p (p >= 1, value changed)
    for (int64_t i = 0; i < x.elements(); ++i)
      if (i % len != 0 && values[static_cast<size_t>(i)] != values[static_cast<size_t>(i - 1)]) boundaries.push_back(i);
    std::vector<int64_t> chosen;
    if (static_cast<int64_t>(boundaries.size()) <= kMaxBoundaryPositions) {
      chosen = boundaries;
    } else {
      for (int64_t k = 0; k < kMaxBoundaryPositions; ++k)
        chosen.push_back(boundaries[static_cast<size_t>(k * static_cast<int64_t>(boundaries.size()) / kMaxBoundaryPositions)]);
    }
    std::vector<int64_t> xc(xr);
    for (int64_t b : chosen) {
      decode(b, x.shape, xc.data());
      for (int64_t shift = 0; shift < 2; ++shift) {
        for (size_t d = 0; d < L; ++d) {
          coords[d] = 0;
          if (rs.labels[d] == seq_label) {
            coords[d] = xc[xr - 1] - shift;
          } else {
            for (size_t k = 0; k + 1 < xr; ++k) {
              if (x.dim_labels[k] == rs.labels[d]) {
                coords[d] = xc[k];
                break;
              }
            }
          }
          coords[d] = std::clamp<int64_t>(coords[d], 0, rs.leading[d] - 1);
        }
        rows.insert(row_id(coords, rs.leading));
      }
    }
  }
  return rows;
}

std::vector<int64_t> rows_to_elements(const std::set<int64_t>& rows, int64_t row_length) {
  std::vector<int64_t> out;
  out.reserve(rows.size() * static_cast<size_t>(row_length));
  for (int64_t r : rows)
    for (int64_t c = 0; c < row_length; ++c) out.push_back(r * row_length + c);
  return out;
}

}  // namespace

std::vector<int64_t> required_sample_indices(const BoundProgram& program, const TensorSet& inputs,
                                             const TensorInfo& output) {
  return rows_to_elements(required_rows(program, inputs, output), row_shape(output).row_length);
}

std::vector<int64_t> sample_indices(const BoundProgram& program, const TensorSet& inputs, const TensorInfo& output,
                                    const SampleOptions& options) {
  const int64_t n = output.elements();
  const int64_t m = std::max<int64_t>(0, options.samples_per_output);
  std::vector<int64_t> out;
  if (n <= m) {
    out.resize(static_cast<size_t>(n));
    std::iota(out.begin(), out.end(), int64_t{0});
    return out;
  }
  // Floyd's algorithm: m distinct elements, uniformly.
  Random random(hash_name(output.name, options.seed));
  std::unordered_set<int64_t> chosen;
  chosen.reserve(static_cast<size_t>(m) * 2);
  for (int64_t j = n - m; j < n; ++j) {
    int64_t t = random.below(j + 1);
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  out.assign(chosen.begin(), chosen.end());
  std::vector<int64_t> required = required_sample_indices(program, inputs, output);
  out.insert(out.end(), required.begin(), required.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<SampledOutput> run_sampled_reference(const BoundProgram& program, const TensorSet& inputs,
                                                 const SampleOptions& options) {
  Engine engine(program, inputs);
  std::vector<SampledOutput> result;
  std::vector<std::pair<int, int64_t>> items;
  for (const TensorInfo* out : program.outputs()) {
    SampledOutput s;
    s.name = out->name;
    s.flat_indices = sample_indices(program, inputs, *out, options);
    int id = engine.id_of(out->name);
    for (int64_t i : s.flat_indices) items.emplace_back(id, i);
    result.push_back(std::move(s));
  }
  if (options.allow_full_reference) {
    bool whole = true;
    double bytes = 0;
    for (size_t o = 0; o < result.size(); ++o)
      whole = whole && static_cast<int64_t>(result[o].flat_indices.size()) == program.outputs()[o]->elements();
    for (const TensorInfo& t : program.tensors) bytes += 8.0 * static_cast<double>(t.elements());
    if (whole && bytes <= static_cast<double>(kFullReferenceBytes)) {
      ReferenceOptions reference_options;
      std::mutex progress_mutex;
      double reported = 0;
      if (options.progress)
        reference_options.progress = [&](int, double f) {
          std::lock_guard<std::mutex> lock(progress_mutex);
          if (f > reported && f < 1.0) {
            reported = f;
            options.progress(f);
          }
        };
      TensorSet full = run_reference(program, inputs, reference_options);
      for (auto& s : result) s.values = std::move(full.at(s.name).values);
      if (options.progress) options.progress(1.0);
      return result;
    }
  }
  std::vector<double> values = evaluate(engine, items, options.progress);
  size_t at = 0;
  for (auto& s : result) {
    s.values.assign(values.begin() + static_cast<std::ptrdiff_t>(at),
                    values.begin() + static_cast<std::ptrdiff_t>(at + s.flat_indices.size()));
    at += s.flat_indices.size();
  }
  return result;
}

std::vector<double> evaluate_reference_elements(const BoundProgram& program, const TensorSet& inputs,
                                                const std::string& tensor, const std::vector<int64_t>& flat_indices,
                                                const std::function<void(double)>& progress) {
  Engine engine(program, inputs);
  int id = engine.id_of(tensor);
  const TensorInfo& info = program.tensors[static_cast<size_t>(id)];
  std::vector<std::pair<int, int64_t>> items;
  items.reserve(flat_indices.size());
  for (int64_t i : flat_indices) {
    if (i < 0 || i >= info.elements())
      throw Error("sampled reference: element " + std::to_string(i) + " of '" + tensor + "' is out of range (" +
                  std::to_string(info.elements()) + " elements)");
    items.emplace_back(id, i);
  }
  return evaluate(engine, items, progress);
}

std::pair<HostTensor, HostTensor> gather_sampled(const HostTensor& got, const SampledOutput& reference) {
  const auto n = static_cast<int64_t>(reference.flat_indices.size());
  HostTensor g{reference.name, {n}, got.dtype, std::vector<double>(static_cast<size_t>(n))};
  HostTensor r{reference.name, {n}, got.dtype, reference.values};
  for (size_t i = 0; i < reference.flat_indices.size(); ++i) {
    int64_t at = reference.flat_indices[i];
    if (at < 0 || at >= static_cast<int64_t>(got.values.size()))
      throw Error("sampled reference: element " + std::to_string(at) + " of '" + reference.name + "' is outside the output");
    g.values[i] = got.values[static_cast<size_t>(at)];
  }
  return {std::move(g), std::move(r)};
}

}  // namespace solder
