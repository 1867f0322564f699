#include "contract/operand_reads.h"

#include <algorithm>
#include <map>

#include "ir/expr_visitor.h"

namespace solder {

std::optional<int64_t> operand_bytes_read(const Expr& x, int64_t points, const std::vector<GlobalTensor>& globals) {
  std::map<std::string, int64_t> loads;  // tensor → loads of it in X
  for_each_load(x, [&](const LoadNode& load) { ++loads[load.tensor]; });
  int64_t bytes = 0;
  for (auto& [tensor, count] : loads) {
    auto g = std::find_if(globals.begin(), globals.end(), [&](const GlobalTensor& t) { return t.name == tensor; });
    if (g == globals.end()) return std::nullopt;
    bytes += std::min(g->bytes(), count * points * dtype_bytes(g->dtype));
  }
  return bytes;
}

std::optional<std::string> row_gather(const Expr& x, const std::string& side, const std::string& depth) {
  Expr e = x;
  while (auto c = e.as<CastNode>()) e = c->operand;
  auto load = e.as<LoadNode>();
  if (!load || load->index.size() < 2) return std::nullopt;
  auto last = load->index.back().as<VarNode>();
  if (!last || last->name != depth) return std::nullopt;
  std::vector<std::string> index_tensors;
  for (size_t d = 0; d + 1 < load->index.size(); ++d) {
    const Expr& i = load->index[d];
    for (auto& v : vars_used(i))
      if (v != side) return std::nullopt;
    for (auto& t : tensors_used(i))
      if (std::find(index_tensors.begin(), index_tensors.end(), t) == index_tensors.end()) index_tensors.push_back(t);
  }
  if (index_tensors.empty()) return std::nullopt;  // no tensor in the index: a plain (strided) load
  std::string text = load->tensor + "[";
  for (size_t i = 0; i < index_tensors.size(); ++i) text += (i ? ", " : "") + index_tensors[i];
  return text + "]";
}

}  // namespace solder
