// Visitor and mutator over scalar expressions, both driven by SOLDER_EXPR_NODES.
//
// ExprVisitor walks a tree; override the `visit` overloads you care about and call the base to
// keep recursing. ExprMutator rebuilds a tree bottom-up; its default for every node rebuilds from
// the mutated children and returns the original node when no child changed.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ir/expr.h"

namespace solder {

class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;
  void visit(const Expr& e);

#define SOLDER_VISIT_DECL(name) virtual void visit(const name##Node& node);
  SOLDER_EXPR_NODES(SOLDER_VISIT_DECL)
#undef SOLDER_VISIT_DECL
};

class ExprMutator {
 public:
  virtual ~ExprMutator() = default;
  Expr mutate(const Expr& e);

 protected:
  // Each gets the node and the handle that owns it (to return unchanged).
#define SOLDER_MUTATE_DECL(name) virtual Expr mutate(const name##Node& node, const Expr& self);
  SOLDER_EXPR_NODES(SOLDER_MUTATE_DECL)
#undef SOLDER_MUTATE_DECL
};

// `e` with every variable named in `replacement` replaced by its expression (loads' indices too).
Expr substitute_vars(const Expr& e, const std::map<std::string, Expr>& replacement);

// Every load an expression performs, loads inside indices included, in visiting order.
void for_each_load(const Expr& e, const std::function<void(const LoadNode&)>& f);

}  // namespace solder
