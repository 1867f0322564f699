#include "lower/internal_names.h"

#include "ir/expr_visitor.h"

namespace solder {

InternalNames::InternalNames(const BoundProgram& program) {
  for (auto& t : program.tensors) reserve(t.name);
  for (auto& [dim_name, value] : program.dims) reserve(dim_name);
  for (auto& d : program.program->defs) reserve_definition(d);
}

void InternalNames::reserve_names_in(const Expr& e) {
  struct Names : ExprVisitor {
    std::set<std::string>* taken;
    using ExprVisitor::visit;
    void visit(const VarNode& v) override { taken->insert(v.name); }
    void visit(const LoadNode& l) override {
      taken->insert(l.tensor);
      ExprVisitor::visit(l);
    }
  } names;
  names.taken = &taken_;
  if (e) names.visit(e);
}

void InternalNames::reserve_definition(const Definition& d) {
  for (const DefTarget* t : {&d.target, d.index_target ? &*d.index_target : nullptr}) {
    if (!t) continue;
    reserve(t->name);
    for (auto& v : t->index) reserve(v.name);
  }
  for (auto& v : d.reduce_vars) reserve(v.name);
  reserve_names_in(d.body);
}

std::string InternalNames::get(const std::string& kind, const std::string& of, const std::string& wanted) {
  auto [it, inserted] = given_.try_emplace({kind, of});
  if (!inserted) return it->second;
  std::string name = wanted;
  for (int n = 2; taken_.count(name); ++n) name = wanted + "_" + std::to_string(n);
  taken_.insert(name);
  return it->second = name;
}

}  // namespace solder
