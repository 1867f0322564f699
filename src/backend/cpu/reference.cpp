#include "backend/cpu/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>

#include "ir/expr_eval.h"
#include "support/parallel.h"

namespace solder {
namespace {

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// Decodes linear index `n` over `extents` (row-major) into `out`.
void decode(int64_t n, const std::vector<int64_t>& extents, int64_t* out) {
  for (size_t d = extents.size(); d-- > 0;) {
    out[d] = n % extents[d];
    n /= extents[d];
  }
}

bool greater_for_topk(double a, int64_t ia, double b, int64_t ib) {
  // NaN ranks above everything; ties go to the lower index.
  bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

}  // namespace

double reference_work(const BoundProgram& program) {
  double work = 0;
  for (auto& d : program.defs) work += static_cast<double>(product(d.p_extents)) * static_cast<double>(product(d.r_extents));
  return work;
}

TensorSet run_reference(const BoundProgram& program, const TensorSet& inputs, const ReferenceOptions& options) {
  TensorSet tensors = inputs;
  std::map<std::string, TensorStorage> storage;
  auto bind_storage = [&](const HostTensor& t) {
    storage[t.name] = TensorStorage{t.name, t.shape, t.values.data(), nullptr, t.dtype};
  };
  for (const TensorInfo* in : program.inputs()) {
    auto it = tensors.find(in->name);
    if (it == tensors.end()) throw Error("reference: input '" + in->name + "' was not provided");
    if (it->second.shape != in->shape) throw Error("reference: input '" + in->name + "' has the wrong shape");
    bind_storage(it->second);
  }

  double total_work = std::max(1.0, reference_work(program));
  double done_work = 0;
  for (size_t di = 0; di < program.defs.size(); ++di) {
    const BoundDefinition& bd = program.defs[di];
    const Definition& def = *bd.def;

    // Variable slots: p-variables then r-variables.
    CompiledExpr::Bindings bindings;
    for (auto& v : def.target.index) bindings.vars.push_back(v.name);
    for (auto& v : def.reduce_vars) bindings.vars.push_back(v.name);
    bindings.dims = program.dims;
    bindings.tensor = [&](const std::string& name) -> const TensorStorage* {
      auto it = storage.find(name);
      return it == storage.end() ? nullptr : &it->second;
    };
    CompiledExpr body(def.body, bindings, Arithmetic::float64);

    const TensorInfo& info = program.tensor(def.target.name);
    HostTensor out{info.name, info.shape, info.dtype, std::vector<double>(static_cast<size_t>(info.elements()))};
    HostTensor index_out;
    if (def.index_target) {
      const TensorInfo& ii = program.tensor(def.index_target->name);
      index_out = HostTensor{ii.name, ii.shape, ii.dtype, std::vector<double>(static_cast<size_t>(ii.elements()))};
    }

    const size_t np = def.target.index.size();
    const size_t nr = def.reduce_vars.size();
    const int64_t r_points = product(bd.r_extents);
    // For topk the rank variable is not evaluated: iterate the other p-variables.
    std::vector<int64_t> outer_extents = bd.p_extents;
    if (def.reduce == ReduceOp::topk) outer_extents[static_cast<size_t>(bd.topk_rank_position)] = 1;
    const int64_t p_points = product(outer_extents);
    std::vector<int64_t> out_strides(np);
    for (size_t d = np, s = 1; d-- > 0;) { out_strides[d] = static_cast<int64_t>(s); s *= static_cast<size_t>(bd.p_extents[d]); }

    std::atomic<int64_t> progress_points{0};
    parallel_for(p_points, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> vars(np + nr, 0);
      std::vector<std::pair<double, int64_t>> candidates;
      for (int64_t p = begin; p < end; ++p) {
        decode(p, outer_extents, vars.data());
        int64_t offset = 0;
        for (size_t d = 0; d < np; ++d) offset += vars[d] * out_strides[d];
        auto eval_at = [&](int64_t r) {
          decode(r, bd.r_extents, vars.data() + np);
          return body.eval(vars.data());
        };
        switch (def.reduce) {
          case ReduceOp::none: out.values[offset] = body.eval(vars.data()); break;
          case ReduceOp::sum: {
            double acc = 0;
            for (int64_t r = 0; r < r_points; ++r) acc += eval_at(r);
            out.values[offset] = acc;
            break;
          }
          case ReduceOp::prod: {
            double acc = 1;
            for (int64_t r = 0; r < r_points; ++r) acc *= eval_at(r);
            out.values[offset] = acc;
            break;
          }
          case ReduceOp::max:
          case ReduceOp::min: {
            bool is_max = def.reduce == ReduceOp::max;
            double acc = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
            for (int64_t r = 0; r < r_points; ++r) acc = apply_binary(is_max ? BinaryOp::max : BinaryOp::min, acc, eval_at(r));
            out.values[offset] = acc;
            break;
          }
          case ReduceOp::argmax:
          case ReduceOp::argmin: {
            bool is_max = def.reduce == ReduceOp::argmax;
            double best = 0;
            int64_t best_index = -1;
            for (int64_t r = 0; r < r_points; ++r) {
              double v = eval_at(r);
              if (best_index >= 0 && std::isnan(best)) break;  // the first NaN wins
              if (best_index < 0 || std::isnan(v) || (is_max ? v > best : v < best)) { best = v; best_index = r; }
            }
            out.values[offset] = static_cast<double>(best_index);
            break;
          }
          case ReduceOp::topk: {
            candidates.clear();
            for (int64_t r = 0; r < r_points; ++r) candidates.emplace_back(eval_at(r), r);
            auto k = static_cast<size_t>(bd.topk_k);
            std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(k), candidates.end(),
                              [](auto& a, auto& b) { return greater_for_topk(a.first, a.second, b.first, b.second); });
            auto rank_stride = out_strides[static_cast<size_t>(bd.topk_rank_position)];
            for (size_t i = 0; i < k; ++i) {
              out.values[offset + static_cast<int64_t>(i) * rank_stride] = candidates[i].first;
              if (def.index_target) index_out.values[offset + static_cast<int64_t>(i) * rank_stride] = static_cast<double>(candidates[i].second);
            }
            break;
          }
        }
      }
      if (options.progress) {
        int64_t done = progress_points.fetch_add(end - begin) + (end - begin);
        double fraction = (done_work + static_cast<double>(done) * static_cast<double>(std::max<int64_t>(1, r_points))) / total_work;
        options.progress(static_cast<int>(di), std::min(1.0, fraction));
      }
    }, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, r_points)));
    done_work += static_cast<double>(p_points) * static_cast<double>(std::max<int64_t>(1, r_points));

    for (double& v : out.values) v = round_to_dtype(v, out.dtype);
    tensors[out.name] = std::move(out);
    bind_storage(tensors[info.name]);
    if (def.index_target) {
      std::string name = index_out.name;
      tensors[name] = std::move(index_out);
      bind_storage(tensors[name]);
    }
  }
  return tensors;
}

}  // namespace solder
