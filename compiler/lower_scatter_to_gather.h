// lower_scatter_to_gather: scatter-to-gather inversion (DESIGN.md, scatter strategy 1).
//
// A scatter_add `T[idx...] += value if cond over domain` is inverted when it is the only stage
// that writes T and every target index is either
//   - a domain variable (identity), a constant, or
//   - a monotone non-decreasing function of exactly one domain variable (no other variable, no
//     loads), checked by evaluating it at every point of that variable's range at compile time,
// with each domain variable feeding at most one index. It becomes `compute T[t...] =
// T.dtype(sum<accumulation>(axes : select(mask, value, 0)))`, over T's own domain, where the
// sum runs, per mapped variable, over the window of source points mapping to t (see
// preimage_window.h) and, per domain variable that no index uses, over its whole extent, in
// domain order (the order the interpreter accumulates in). The mask holds the scatter's
// condition and, for windows that are not exact, the membership test f(o) == t. Identity axes
// whose domain is shorter than T, and constant indices, become guards around the sum.
//
// Guarantees: deterministic, no atomics, no zeroing, accumulation in the scatter's
// accumulation dtype and one conversion in the kernel; interpreting the result gives the same
// values as the original program (bit for bit when the target dtype is the accumulation dtype).
// A scatter that shares its kernel with other stages moves to a new kernel right after it.
// Scatters that do not qualify are left for lower_scatter_to_atomics.
#pragma once

#include "ir/program.h"

namespace adjoint::compiler {

/// The most source points a window may hold beyond the exact preimage before inversion is
/// judged worse than atomics.
inline constexpr int64_t kMaxGatherWindowSlack = 4;

/// Returns `program` with every invertible scatter_add rewritten as a gather.
ir::Program lower_scatter_to_gather(const ir::Program& program);

}  // namespace adjoint::compiler
