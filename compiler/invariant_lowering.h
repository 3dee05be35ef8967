// invariant_lowering: the check that lower_outer_generic's two forms (one outer batch, a token
// pair) share. A program generic in its sizes is bound at two neighbouring values of them and
// lowered by the specialized pipeline at each; the lowering at the first serves every smaller
// value only when the two agree in everything but comments (schedule notes count points) and
// the dynamic tensors' shapes: the same kernels, code line for line, the same launch blocks,
// parameters, zeroings and temporaries. Also the generic buffers' bookkeeping both forms need.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compiled_program.h"
#include "compiler/lower.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// Whether `e` is the size's variable itself (a dimension or extent that is exactly the size).
inline bool is_size(const ir::Expr& e, const ir::VarNode* size) {
  return e.as<ir::VarNode>() == size;
}

/// The program's dynamic tensors (inputs, outputs and temporaries with a dynamic shape) by name.
std::map<std::string, ir::Tensor> dynamic_tensors(const ir::Program& program);

/// Lowers `program` bound at `values(0)` with `outer(0)` as LowerOptions::outer_size, and at
/// `values(1)` with `outer(1)`, and returns the first lowering when the two do not differ (see
/// above); otherwise nullopt with the difference in `*why`, or the lowering's own message when
/// lower() rejects a binding as an invalid program (other errors propagate). Only the first
/// lowering records its passes (options.record_passes).
std::optional<CompiledProgram> lower_invariant(
    const ir::Program& program, const LowerOptions& options,
    const std::function<std::vector<int64_t>(int)>& values,
    const std::function<OuterSizeParam(int)>& outer, std::string* why);

}  // namespace adjoint::compiler
