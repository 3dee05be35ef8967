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
// With ScanGatherOptions, a small scatter whose indices have none of these forms is gathered too,
// by scanning its records (below). Scatters that do not qualify are left for
// lower_scatter_to_binned_gather and lower_scatter_to_atomics.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ir/program.h"

namespace adjoint::compiler {

/// The most source points a window may hold beyond the exact preimage before inversion is
/// judged worse than atomics.
inline constexpr int64_t kMaxGatherWindowSlack = 4;

/// Small data-dependent scatters gathered by scanning (docs/compiler.md, "Scanned gather"):
/// a target index that is none of the forms above (grid_sampler's cells, which load the grid)
/// becomes the membership test `index == t` over the whole extent of every domain variable no
/// other index takes, so each target element scans the records of its identity axes' slice
/// (grid_sampler: its batch's points and taps) in domain order: one kernel, no temporaries, no
/// atomics, the interpreter's order of every sum. Only where that scan is short: at most
/// `length_max` records per element and `work_max` records x target elements in all (0: never).
struct ScanGatherOptions {
  int64_t work_max = 0;
  int64_t length_max = 0;
  /// When set, a scatter is scanned only where this returns true (under kAllowAtomics: where
  /// a deterministic gather beats the atomics, binned_gather_beats_atomics).
  std::function<bool(const ir::Stage&)> may_scan_stage;
  /// When set, receives the kernels that hold a scanned gather, each with the line its dump
  /// gives the choice (lower() keeps them out of row groups: fused with their producers, their
  /// scans compiled for seconds).
  std::map<std::string, std::string>* scanned_kernels = nullptr;
};

/// Returns `program` with every invertible scatter_add rewritten as a gather (and, within
/// `scan`'s bounds, every other scatter_add that is its target's only writer).
ir::Program lower_scatter_to_gather(const ir::Program& program, const ScanGatherOptions& scan);
/// The same without scanned gathers.
ir::Program lower_scatter_to_gather(const ir::Program& program);

}  // namespace adjoint::compiler
