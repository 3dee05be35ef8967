// lower(): the compiler's entry point, one linear pipeline from a specialized IR program to CUDA
// translation units the runtime can compile and launch:
//
//   verify -> simplify -> lower_scatter_to_gather -> simplify -> lower_scatter_to_atomics
//          -> derive_grid -> narrow_index_math -> emit_cuda (one unit per kernel)
//
// With LowerOptions::record_passes the IR after each pass, or "(unchanged)" when the pass
// returned the very same program, is recorded in CompiledProgram::pass_dump.
#pragma once

#include "compiler/compiled_program.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// kDefault: deterministic unless a kernel has no deterministic strategy (data-dependent
/// scatters, which use atomics under either setting for now). kAllowAtomics: atomics are
/// welcome wherever they are faster. Part of the runtime's cache key.
enum class Determinism { kDefault, kAllowAtomics };

struct LowerOptions {
  Determinism determinism = Determinism::kDefault;
  int arch = 90;  ///< target compute capability (major * 10 + minor)
  bool record_passes = false;
};

/// Lowers `program`. Throws adjoint::Error (kInvalidProgram) when it fails verification or an
/// explicit grid configuration does not cover its kernel's domain.
CompiledProgram lower(const ir::Program& program, const LowerOptions& options);

}  // namespace adjoint::compiler
