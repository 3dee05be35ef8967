// The one textual form of the IR: deterministic (same program, same text), readable, and used
// for dumps, FileCheck tests and cache keys. Variables print under their name hints, made unique
// in order of first appearance (n, n_1, ...). Constants carry their dtype as a suffix:
// 3 (i64), 3i32, 0.5 (f64), 0.5f (f32), 0.5h (f16), 0.5bf (bf16), true/false.
#pragma once

#include <string>

#include "ir/expr.h"
#include "ir/program.h"

namespace adjoint::ir {

std::string to_string(const Expr& e);
std::string to_string(const Stage& s);
std::string to_string(const Kernel& k);
std::string to_string(const Program& p);
/// The header line of a tensor: "grad_input: f32[2, 3, 4, 4]" (+ " strides [...]" if not
/// contiguous).
std::string tensor_signature(const TensorNode& t);

}  // namespace adjoint::ir
