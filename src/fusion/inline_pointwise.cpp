#include "fusion/inline_pointwise.h"

#include "ir/expr_depth.h"
#include "ir/expr_visitor.h"

namespace solder {
namespace {

// Replaces loads of inlined producers by their (already inlined) bodies.
class Inliner : public ExprMutator {
 public:
  const std::map<std::string, Definition>* pointwise;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const LoadNode& n, const Expr& self) override {
    Expr rebuilt = ExprMutator::mutate(n, self);
    auto it = pointwise->find(n.tensor);
    if (it == pointwise->end()) return rebuilt;
    const Definition& def = it->second;
    std::map<std::string, Expr> replacement;
    auto load = rebuilt.as<LoadNode>();
    for (size_t i = 0; i < def.target.index.size(); ++i) replacement[def.target.index[i].name] = load->index[i];
    Expr body = substitute_vars(def.body, replacement);  // its own producers are inlined already
    DType dtype = def.value_dtype();
    return dtype == DType::f32 ? body : make_cast(dtype, body, n.loc);
  }
};

// A producer is inlined only while its inlined body stays small: every use copies it, and a chain
// of producers each reading the previous one twice would otherwise grow exponentially (and deep
// bodies would make every later pass recurse deeply). Larger producers stay materialised.
constexpr int kMaxInlinedDepth = 64;
constexpr int64_t kMaxInlinedNodes = 1024;

}  // namespace

InlinedProgram inline_pointwise(const BoundProgram& program, const std::set<std::string>& keep) {
  InlinedProgram result;
  std::map<std::string, Definition> pointwise;  // inlined producers, with inlined bodies
  for (auto& bd : program.defs) {
    const Definition& def = *bd.def;
    Inliner inliner;
    inliner.pointwise = &pointwise;
    Definition rewritten = def;
    rewritten.body = inliner.mutate(def.body);
    if (def.reduce == ReduceOp::none && !def.target.is_output && !keep.count(def.target.name) && expr_depth(rewritten.body) <= kMaxInlinedDepth &&
        expr_tree_size(rewritten.body, kMaxInlinedNodes + 1) <= kMaxInlinedNodes) {
      result.inlined.push_back(def.target.name);
      pointwise.emplace(def.target.name, std::move(rewritten));
      continue;
    }
    result.defs.push_back(std::move(rewritten));
  }
  return result;
}

}  // namespace solder
