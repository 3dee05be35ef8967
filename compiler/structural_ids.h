// StructuralIds: the emitter's structural identity of expressions, for common-subexpression
// elimination: equal ids mean the same computation (variables and tensors by identity,
// reductions only when they are one node).
#pragma once

#include <string>
#include <unordered_map>
#include <utility>

#include "ir/expr.h"

namespace adjoint::compiler {

/// Ids by structure, memoized per node (the memo keeps its nodes alive).
class StructuralIds {
 public:
  int id(const ir::Expr& e);

 private:
  std::unordered_map<const ir::ExprNode*, std::pair<ir::Expr, int>> memo_;
  std::unordered_map<std::string, int> ids_;
};

}  // namespace adjoint::compiler
