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

#include "backend/cpu/sampled_worker.h"

namespace solder {
namespace {

using namespace sampled;

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
