// Vector groups: a thread of a kernel with vector width V > 1 computes V consecutive points of
// the innermost linear axis x (x = x_base + e, e < V, x_base a multiple of V), so that it
// writes them with one wide store and reads what they share with wide loads. This header holds
// the decisions and the compile-time facts about such groups that derive_grid and the CUDA
// emitter need:
//   - which width a derived grid gets (derived_vector_width);
//   - how the windows of a reduce axis over x lie inside a group (group_windows): for the
//     gathers of lower_scatter_to_gather, whose window along x is [L(x), L(x+1)) with L a floor
//     line, every group sees the same windows relative to the window start of its first point,
//     so the group reads one span of consecutive source points and each point sums its own
//     constant sub-range of it;
//   - which indices are "uniform part plus variable plus constant" (lane_index), and how wide
//     the accesses to a
//     group of consecutive elements may be (access_bytes), proven from constant strides and
//     offsets.
// Everything is decided from constants at compile time; the only run-time assumption is the
// base pointer's alignment, which templates/adjoint_memory.cuh checks.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/program.h"

namespace adjoint::compiler {

/// The widest memory access a group uses, in bytes.
inline constexpr int kMaxAccessBytes = 16;
/// The most bytes of its widest target a derived vector group stores: one 16-byte store.
inline constexpr int kDefaultGroupBytes = 16;
/// Vectorize only while a kernel keeps at least this many groups (threads): about one block of
/// 256 threads for each SM of a large GPU. Smaller domains are latency-bound, and a kernel with
/// few points and long per-point reductions should keep every thread it has.
inline constexpr int64_t kMinVectorGroups = int64_t{1} << 15;

/// The vector width derive_grid gives `kernel`, whose bindings are all linear: 1 unless every
/// stage is a compute whose target is contiguous (stride 1) along the innermost linear axis.
/// Then the largest power of two V such that a group of V target elements is at most
/// `group_bytes` (a power of two; above kMaxAccessBytes a group stores in several accesses),
/// V divides the axis' extent (no tail), and at least kMinVectorGroups groups remain.
/// Whole-axis groups (`whole_axis_groups`, for the kernels DeriveGridOptions::
/// whole_axis_kernels names: the binned gather at few records per cell): where that V is below
/// the axis' extent E, E is no power of two, E elements fit `group_bytes`, at least
/// kMinVectorGroups groups remain, and a reduction of the kernel reads in its body an element
/// that does not move with the axis, V = E: one thread per row of E, which reads the shared
/// elements once (the binned gather at 3 channels: a cell's bucket walks once for its 3
/// channels instead of once per channel).
/// `min_groups` replaces kMinVectorGroups (derive_grid raises it for kernels whose points
/// each reduce serially over many iterations: DeriveGridOptions::reducing_min_groups).
int derived_vector_width(const ir::Kernel& kernel, int group_bytes = kDefaultGroupBytes,
                         bool whole_axis_groups = false,
                         int64_t min_groups = kMinVectorGroups);

/// Where the windows of one reduce axis lie inside every group: for the point x_base + e, the
/// axis runs over base(x_base) + [begin[e], end[e]), where base(x_base) = start(x_base) + shift.
struct GroupWindows {
  std::vector<int64_t> begin, end;  ///< per element, relative to the base
  int64_t shift = 0;                ///< base = start(x_base) + shift (the smallest begin)
  int64_t span = 0;                 ///< the group reads base + [0, span)
  /// gcd of base(x_base) over all groups (0 when the base is always 0): its alignment.
  int64_t base_alignment = 0;
  /// The lowest base and the highest base + span - 1 over all groups: what the spans read.
  int64_t lowest = 0, highest = -1;

  /// begin[e] == first + e * step and end[e] == begin[e] + width for every e.
  bool affine() const;
  int64_t step() const { return begin.size() > 1 ? begin[1] - begin[0] : 0; }
  int64_t width() const { return begin.empty() ? 0 : end[0] - begin[0]; }
};

/// The group windows of `axis` (a reduce axis whose start and extent depend on x alone) for
/// groups of `width` points of x over [0, extent), or nullopt when they differ between groups
/// (clamped edges, irregular maps) or the bounds involve other variables. Evaluated at every x,
/// so it gives up on axes longer than kMaxEvaluatedPoints.
std::optional<GroupWindows> group_windows(const ir::Axis& axis, const ir::VarNode* x,
                                          int64_t extent, int64_t width);
inline constexpr int64_t kMaxEvaluatedPoints = int64_t{1} << 20;

/// An index of the form `rest + var + offset`, read as a sum of terms: `var` one of the lane
/// variables (bare or cast to an integer type, coefficient 1), `offset` the sum of the constant
/// terms, `rest` the sum of the other terms (undefined when there are none), none of which
/// involves a lane variable: a flattened view such as phi[k, i * 4096 + d] is contiguous in d.
struct LaneIndex {
  const ir::VarNode* var = nullptr;
  int64_t offset = 0;
  ir::Expr rest;
  int64_t rest_multiple = 0;  ///< rest is always a multiple of this (0: no rest)
};
std::optional<LaneIndex> lane_index(const ir::Expr& index,
                                    const std::vector<const ir::VarNode*>& lanes);

/// The widest access, in bytes (a power of two up to kMaxAccessBytes), for `count` consecutive
/// elements of `element_bytes` bytes each whose element offset is always a multiple of
/// `offset_alignment` (0: the offset is always 0).
int access_bytes(int64_t offset_alignment, int64_t count, int64_t element_bytes);

}  // namespace adjoint::compiler
