// The reference interpreter: runs any verified program on host buffers. Its results define the
// semantics of the IR; the CUDA backend must agree with it.
//
// Values are held in f64. Every float node's result is rounded to the node's dtype (so f32 index
// maps such as floor(o * 0.5f) match the device exactly), stores round to the tensor's dtype,
// reductions and scatter-adds accumulate in f64 and round once to their result dtype, and
// scatter-adds run in a fixed order (domain points in row-major order). Loads and stores are
// bounds-checked: an out-of-range index is an adjoint::Error naming the tensor and the index.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/program.h"

namespace adjoint::ir {

/// Buffers bound by tensor name. Each holds `storage_elements()` values laid out by the
/// tensor's strides (contiguous tensors: row-major).
using HostBuffers = std::map<std::string, std::vector<double>>;

/// Runs `program` with the given input buffers (each value is first rounded to its tensor's
/// dtype, as storing it in device memory would); returns every output and temporary. Throws
/// adjoint::Error for a missing or mis-sized input, an out-of-bounds access or an integer
/// division by zero.
HostBuffers interpret(const Program& program, const HostBuffers& inputs);

/// Runs a generic program (ir/dynamic_sizes.h) at `sizes`, one value per size parameter: the
/// program bind_sizes() makes of it, with buffers sized for those values. A generic program
/// given to interpret() without sizes is an adjoint::Error naming its size parameters.
HostBuffers interpret(const Program& program, const std::vector<int64_t>& sizes,
                      const HostBuffers& inputs);

/// Evaluates an expression with no free variables (a constant expression), e.g. in tests.
double evaluate_constant(const Expr& e);

/// Evaluates `e`, whose only free variable is `x`, at x = 0, 1, ..., count - 1: at each point
/// what evaluate_constant gives for `e` with x substituted by that i64 constant (Vars are i64),
/// without building those expressions (the compiler tabulates index maps over up to 2^20
/// points). Throws what evaluate_constant would, at the first point that fails; `stop`, when
/// given, ends the walk early once it returns true for a value.
std::vector<double> evaluate_at_points(const Expr& e, const VarNode* x, int64_t count,
                                       const std::function<bool(double)>& stop = nullptr);

}  // namespace adjoint::ir
