#include "fusion/inline_pointwise.h"

#include "ir/expr_visitor.h"

namespace solder {
namespace {

class VarSubstituter : public ExprMutator {
 public:
  const std::map<std::string, Expr>* replacement;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const VarNode& v, const Expr& self) override {
    auto it = replacement->find(v.name);
    return it == replacement->end() ? self : it->second;
  }
};

class Inliner : public ExprMutator {
 public:
  const std::map<std::string, const Definition*>* pointwise;
  using ExprMutator::mutate;

 protected:
  Expr mutate(const LoadNode& n, const Expr& self) override {
    Expr rebuilt = ExprMutator::mutate(n, self);
    auto it = pointwise->find(n.tensor);
    if (it == pointwise->end()) return rebuilt;
    const Definition& def = *it->second;
    std::map<std::string, Expr> replacement;
    auto load = rebuilt.as<LoadNode>();
    for (size_t i = 0; i < def.target.index.size(); ++i) replacement[def.target.index[i].name] = load->index[i];
    Expr body = mutate(substitute_vars(def.body, replacement));  // producers may read other inlined tensors
    DType dtype = def.value_dtype();
    return dtype == DType::f32 ? body : make_cast(dtype, body, n.loc);
  }
};

}  // namespace

Expr substitute_vars(const Expr& e, const std::map<std::string, Expr>& replacement) {
  VarSubstituter s;
  s.replacement = &replacement;
  return s.mutate(e);
}

InlinedProgram inline_pointwise(const BoundProgram& program) {
  InlinedProgram result;
  std::map<std::string, const Definition*> pointwise;
  for (auto& bd : program.defs) {
    const Definition& def = *bd.def;
    Inliner inliner;
    inliner.pointwise = &pointwise;
    Definition rewritten = def;
    rewritten.body = inliner.mutate(def.body);
    if (def.reduce == ReduceOp::none && !def.target.is_output) {
      pointwise[def.target.name] = &def;
      result.inlined.push_back(def.target.name);
      continue;
    }
    result.defs.push_back(std::move(rewritten));
  }
  return result;
}

}  // namespace solder
