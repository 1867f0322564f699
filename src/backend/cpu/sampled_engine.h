// The sampled reference, part 2 (internal to sampled_reference.cpp): the plan of each definition and
// the memo of element values already computed (paged tables shared by the workers).
#pragma once

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

#include "backend/cpu/sampled_bytecode.h"

namespace solder::sampled {

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

inline constexpr double kMemoCost = 32;

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
inline constexpr size_t kMemoPages = size_t{1} << 18;

}  // namespace solder::sampled
