// lower_outer_generic(): generic programs whose one size is an outer batch, through the
// specialized pipeline. When the size (upsample's N) only counts an axis that is outermost in
// every tensor's memory and enters no index, window or condition, the kernel a specialized
// compile makes for one batch serves every smaller batch unchanged except for the linear count
// that bounds its grid. So such a program is bound at the largest batch its index width allows
// (N_max: every tensor's storage within Program::dynamic_storage_bound), lowered by lower(), and
// each kernel is emitted with that count as `N * K` for a kernel parameter N
// (EmitOptions::outer_size). The kernels then have the specialized kernels' schedule (host
// window tables, vector groups, thread tiles, streaming hints) and compute every point with the
// same operations in the same order: results are bitwise those of the specialized kernel of
// that batch, and its speed is theirs.
//
// What makes that hold is checked, not assumed: the structure (one size, appearing only as a
// domain extent and as a tensor dimension that no stride contains), each kernel's grid (the
// emitter refuses anything but a one-index-per-thread linear grid whose outermost linear axis
// has extent N_max), and invariance: the program is lowered at N_max and at N_max - 1 and
// every kernel's code (comments aside), launch block, parameters and temporaries must be the
// same. Proofs made at N_max (bounds, index width) cover every smaller batch, since the kernel
// never decodes a batch index at or past its runtime N. Anything that fails leaves the program
// to lower_generic's own pipeline.
//
// A token pair (two sizes, mHC's batch and seq over one contiguous token axis) is the same
// thing with two sizes: lower_token_pair.h.
#pragma once

#include <optional>
#include <string>

#include "compiler/compiled_program.h"
#include "compiler/lower.h"
#include "compiler/lower_token_pair.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// Why `program` does not have the outer-batch form above (one size; its storage bound set and
/// 32-bit; the size only an extent and an outermost dimension), or "" when it does.
std::string outer_batch_refusal(const ir::Program& program);

/// The largest value of the size of an outer-batch `program` for which every tensor's storage
/// stays within program.dynamic_storage_bound (at most the size's upper bound; 0 when none).
int64_t outer_batch_lowering_value(const ir::Program& program);

/// The program lowered as above (one outer batch, or a token pair), or nullopt (with the reason in `*why` when given) when it does
/// not have that form or its kernels are not invariant in the size.
std::optional<CompiledProgram> lower_outer_generic(const ir::Program& program,
                                                   const LowerOptions& options,
                                                   std::string* why = nullptr);

}  // namespace adjoint::compiler
