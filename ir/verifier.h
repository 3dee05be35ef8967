// The verifier: checks a program against the IR's rules and throws adjoint::Error (kind
// kInvalidProgram) naming the rule, the kernel and stage, and what was found. Rules:
//  - tensor names are unique and every tensor a stage reads or writes is declared;
//  - every output is written; nothing writes an input; a tensor written by a compute stage is
//    written by no other stage;
//  - a compute stage's domain is its target's shape in order (each point written once) and its
//    value has the target's dtype;
//  - a scatter_add has one index per target dimension, integer indices, a value of its
//    accumulation dtype, an accumulation of the target's kind (float for float targets,
//    integer for integer ones) at least as wide as the target, a bool condition;
//  - the stages of a kernel share one domain; domain axes start at 0 and their extents are
//    constants >= 0;
//  - every variable is bound (by the stage domain or an enclosing reduce) and bound once: never
//    again while in scope, and by one binder within a stage (stages may share domain variables);
//  - reduce starts/extents depend only on outer variables;
//  - loads and scatter indices that are provably out of bounds are errors;
//  - a stage reads a tensor that its own kernel writes only at the point an earlier compute
//    stage wrote; other non-input tensors it reads were written by an earlier kernel;
//  - an explicit grid configuration has one binding per domain axis and a valid block size.
#pragma once

#include "ir/program.h"

namespace adjoint::ir {

/// Throws adjoint::Error if `program` breaks a rule; returns normally otherwise.
void verify(const Program& program);

}  // namespace adjoint::ir
