// lower_scatter_to_atomics: the strategy for scatters that lower_scatter_to_gather left alone
// (data-dependent indices such as grid_sampler's grad_input): atomic adds (DESIGN.md, scatter
// strategy 2). No deterministic strategy for them exists yet, so this runs under every
// Determinism setting and the compiled program reports itself non-deterministic.
//
// Guarantees: afterwards every scatter_add's target has its accumulation dtype, so the emitter
// adds atomically straight into it (the runtime zeroes it before the first kernel that
// scatters into it). A target narrower than its accumulation (f16/bf16 accumulated in f32) is
// replaced by a zero-initialized accumulation temporary `<target>_accumulator`, and a
// conversion kernel `<target>_convert` (compute target = dtype(accumulator)) follows the last
// kernel that scatters into it, so the conversion happens once every contribution is in.
#pragma once

#include "ir/program.h"

namespace adjoint::compiler {

/// Returns `program` with narrow scatter targets redirected to accumulation temporaries.
ir::Program lower_scatter_to_atomics(const ir::Program& program);

}  // namespace adjoint::compiler
