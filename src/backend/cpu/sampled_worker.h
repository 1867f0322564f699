// The sampled reference, part 3 (internal to sampled_reference.cpp): a worker computes requested
// elements on demand, recursively through the definitions they read, memoised.
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

#include "backend/cpu/sampled_engine.h"

namespace solder::sampled {

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
    throw Error("load out of range: " + where + "]: index " + std::to_string(static_cast<int64_t>(index[d])) +
                " of dim " + std::to_string(d + 1) + " is outside [0, " + std::to_string(t.shape[static_cast<size_t>(d)]) + ")");
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

}  // namespace solder::sampled
