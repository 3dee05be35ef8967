// Dynamic sizes: the extents a generic program leaves to run time.
//
// A program is generic when it declares size parameters (Program::sizes). Each is an i64 index
// variable (a Var, so every pass treats it as an unknown integer) that stands for one extent of
// the specialization, named by where the runtime reads its value (`source`, e.g.
// "input_size[0]"), and bounded by a declared range [lower_bound, upper_bound]. Proofs over a
// generic program hold for every value in that range: the coverage proof, the index width
// (32-bit only when the largest offset at the upper bounds fits) and the gather windows.
//
// A dynamic tensor has its dimensions as expressions of the sizes (an IntConst or a size Var
// each) and its strides as products of them, in a memory order of the dimensions. Its `shape`
// and `strides` hold the values at the upper bounds, so that conservative analyses (storage
// size, index width) keep working unchanged.
//
// bind_sizes() turns a generic program into the static program of one assignment of the sizes:
// that is what the interpreter runs (its semantics) and what a generic kernel must agree with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace adjoint::ir {

struct Program;

/// One dynamic extent of a generic program.
struct SizeParam {
  Var var;              ///< the size as an i64 variable, used in extents, strides and math
  std::string source;   ///< where its value comes from, e.g. "input_size[0]"
  int64_t lower_bound = 0;
  int64_t upper_bound = 0;  ///< declared; proofs and the index width rely on it
};

/// A dynamic tensor: `dims` are IntConsts or size variables of `sizes`; strides are products
/// of the dims in `memory_order` (the dimensions from outermost to innermost in memory, a
/// permutation of 0..rank-1). Throws adjoint::Error (kInvalidProgram) for anything else.
Tensor make_dynamic_tensor(std::string name, DType dtype, std::vector<Expr> dims,
                           const std::vector<int>& memory_order, TensorRole role,
                           const std::vector<SizeParam>& sizes);

/// The value of a size expression (integer constants, size variables, +, -, *) for one value
/// per entry of `sizes`. Throws adjoint::Error for any other expression or a variable that is
/// not a size.
int64_t evaluate_size(const Expr& e, const std::vector<SizeParam>& sizes,
                      const std::vector<int64_t>& values);

/// The static program of a generic `program` at `values` (one per program.sizes entry, each
/// within its bounds; otherwise adjoint::Error kInvalidArgument naming the size): every size
/// variable replaced by its value, every dynamic tensor made static. A static program is
/// returned as it is (values must then be empty).
Program bind_sizes(const Program& program, const std::vector<int64_t>& values);

/// "N = input_size[0] in [1, 65536]": a size parameter as the printer and dumps show it.
std::string size_param_text(const SizeParam& size);

}  // namespace adjoint::ir
