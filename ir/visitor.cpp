// Default ExprMutator rebuilding (sharing unchanged subtrees) and generic traversal.
#include "ir/visitor.h"

#include <memory>

namespace adjoint::ir {

Expr ExprMutator::visit_Load(const LoadNode& node, const Expr& self) {
  bool changed = false;
  std::vector<Expr> idx;
  idx.reserve(node.indices.size());
  for (const Expr& i : node.indices) {
    idx.push_back(mutate(i));
    changed |= !idx.back().same_as(i);
  }
  return changed ? LoadNode::make(node.tensor, std::move(idx)) : self;
}

Expr ExprMutator::visit_Unary(const UnaryNode& node, const Expr& self) {
  Expr a = mutate(node.operand);
  return a.same_as(node.operand) ? self : UnaryNode::make(node.op, a);
}

Expr ExprMutator::visit_Binary(const BinaryNode& node, const Expr& self) {
  Expr a = mutate(node.a), b = mutate(node.b);
  return (a.same_as(node.a) && b.same_as(node.b)) ? self : BinaryNode::make(node.op, a, b);
}

Expr ExprMutator::visit_Compare(const CompareNode& node, const Expr& self) {
  Expr a = mutate(node.a), b = mutate(node.b);
  return (a.same_as(node.a) && b.same_as(node.b)) ? self : CompareNode::make(node.op, a, b);
}

Expr ExprMutator::visit_Select(const SelectNode& node, const Expr& self) {
  Expr c = mutate(node.condition), t = mutate(node.true_value), f = mutate(node.false_value);
  if (c.same_as(node.condition) && t.same_as(node.true_value) && f.same_as(node.false_value)) {
    return self;
  }
  return SelectNode::make(c, t, f);
}

Expr ExprMutator::visit_Cast(const CastNode& node, const Expr& self) {
  Expr v = mutate(node.value);
  return v.same_as(node.value) ? self : CastNode::make(node.dtype, v);
}

Expr ExprMutator::visit_Reduce(const ReduceNode& node, const Expr& self) {
  bool changed = false;
  std::vector<Axis> axes;
  for (const Axis& ax : node.axes) {
    Axis m{ax.var, mutate(ax.start), mutate(ax.extent)};
    changed |= !m.start.same_as(ax.start) || !m.extent.same_as(ax.extent);
    axes.push_back(std::move(m));
  }
  Expr body = mutate(node.body);
  changed |= !body.same_as(node.body);
  return changed ? ReduceNode::make(node.op, std::move(axes), body, node.dtype) : self;
}

void for_each_child(const Expr& e, const std::function<void(const Expr&)>& fn) {
  switch (e.kind()) {
    case ExprKind::kIntConst:
    case ExprKind::kFloatConst:
    case ExprKind::kVar: return;
    case ExprKind::kLoad:
      for (const Expr& i : e.as<LoadNode>()->indices) fn(i);
      return;
    case ExprKind::kUnary: fn(e.as<UnaryNode>()->operand); return;
    case ExprKind::kBinary:
      fn(e.as<BinaryNode>()->a);
      fn(e.as<BinaryNode>()->b);
      return;
    case ExprKind::kCompare:
      fn(e.as<CompareNode>()->a);
      fn(e.as<CompareNode>()->b);
      return;
    case ExprKind::kSelect: {
      auto* s = e.as<SelectNode>();
      fn(s->condition);
      fn(s->true_value);
      fn(s->false_value);
      return;
    }
    case ExprKind::kCast: fn(e.as<CastNode>()->value); return;
    case ExprKind::kReduce: {
      auto* r = e.as<ReduceNode>();
      for (const Axis& ax : r->axes) {
        fn(ax.start);
        fn(ax.extent);
      }
      fn(r->body);
      return;
    }
  }
}

void visit_post_order(const Expr& e, const std::function<void(const Expr&)>& fn) {
  for_each_child(e, [&](const Expr& c) { visit_post_order(c, fn); });
  fn(e);
}

}  // namespace adjoint::ir
