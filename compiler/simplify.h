// simplify: folds constants and removes index-math redundancy after specialization.
//
// Guarantees: the result computes the same values as the input under the interpreter's
// semantics (integer folding is exact int64; float folding evaluates exactly as the interpreter
// would, rounding to the node's dtype; floats are never reassociated). Rewrites: constant
// folding, select/&&/|| of constant conditions, x+0, x-0, x*1, x*0, (x+y)-x (integers only), x/1, x%1,
// min/max and comparisons of provably ordered ranges, division and modulo by constants of
// values within one period or of multiples of the divisor, and casts to the operand's own type.
// Unchanged subtrees (and an unchanged program) are returned as the very same nodes.
#pragma once

#include "ir/program.h"

namespace adjoint::compiler {

/// Returns `program` with every expression simplified.
ir::Program simplify(const ir::Program& program);

/// Simplifies one expression with no index variables bound (for tests and other passes).
ir::Expr simplify(const ir::Expr& e);

}  // namespace adjoint::compiler
