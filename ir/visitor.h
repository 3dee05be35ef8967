// Visitors over expressions, generated from ir/nodes.def so that adding a node kind makes every
// visitor that does not handle it fail to compile.
// - ExprFunctor<R>: `R visit(e)` dispatches on the kind tag and returns a value (printer,
//   interpreter, emitter).
// - ExprMutator: rebuilds an expression bottom-up and returns the very same node when no child
//   changed, so "did this pass change anything" is `result.same_as(input)`.
// - for_each_child / visit_post_order: read-only traversal for analyses.
#pragma once

#include <functional>

#include "ir/expr.h"

namespace adjoint::ir {

template <typename R>
class ExprFunctor {
 public:
  virtual ~ExprFunctor() = default;
  R visit(const Expr& e) {
    switch (e.kind()) {
#define X(name) \
  case ExprKind::k##name: return visit_##name(*static_cast<const name##Node*>(e.get()), e);
#include "ir/nodes.def"
#undef X
    }
    return visit_IntConst(*static_cast<const IntConstNode*>(e.get()), e);  // unreachable
  }

 protected:
#define X(name) virtual R visit_##name(const name##Node& node, const Expr& self) = 0;
#include "ir/nodes.def"
#undef X
};

/// Rebuilds expressions; override visit_<Kind> for the nodes a pass changes and call the base
/// for the rest. Reduce axes' start/extent are mutated too.
class ExprMutator : public ExprFunctor<Expr> {
 public:
  Expr mutate(const Expr& e) { return e.defined() ? visit(e) : e; }

 protected:
  Expr visit_IntConst(const IntConstNode&, const Expr& self) override { return self; }
  Expr visit_FloatConst(const FloatConstNode&, const Expr& self) override { return self; }
  Expr visit_Var(const VarNode&, const Expr& self) override { return self; }
  Expr visit_Load(const LoadNode& node, const Expr& self) override;
  Expr visit_Unary(const UnaryNode& node, const Expr& self) override;
  Expr visit_Binary(const BinaryNode& node, const Expr& self) override;
  Expr visit_Compare(const CompareNode& node, const Expr& self) override;
  Expr visit_Select(const SelectNode& node, const Expr& self) override;
  Expr visit_Cast(const CastNode& node, const Expr& self) override;
  Expr visit_Reduce(const ReduceNode& node, const Expr& self) override;
};

/// Calls fn on each direct child of e (reduce axes' start and extent first, then the body).
void for_each_child(const Expr& e, const std::function<void(const Expr&)>& fn);
/// Calls fn on every node of e, children before parents.
void visit_post_order(const Expr& e, const std::function<void(const Expr&)>& fn);

}  // namespace adjoint::ir
