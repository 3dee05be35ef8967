// reduction_schedule: chooses, per kernel, whether each domain point's reductions run serially
// in one thread or cooperatively in a warp. With the warp schedule (GridConfig::reduction_lanes
// = 32) the 32 lanes of a warp share one point: lane l takes iterations l, l + 32, l + 64, ...
// of the reduction's innermost axis (the other axes whole), the lanes combine their partial
// results with __shfl_xor_sync in the fixed butterfly 16, 8, 4, 2, 1, lane 0's value is
// broadcast to all lanes, and lane 0 stores. Fixed order, no atomics: bitwise the same every
// run (not the interpreter's serial order, so floats may differ from it in the last bits).
//
// Derived choice (ReductionScheduleOptions::Mode::kAuto): a kernel gets the warp schedule when
// one of its reductions is long (at least min_trips iterations, the innermost axis at least
// min_lane_extent), its innermost axis picks consecutive elements of a stride-1 dimension in a
// load of the body (so the lanes of a warp read consecutive addresses, where one thread per
// point would read a separate row per thread), and the domain has at least min_points points
// (fewer warps than that cannot fill the GPU: split_reductions, which skips warp kernels, gives
// such domains partials instead). A warp kernel whose loads share a row across points of its
// innermost axis computes several of them per warp (group_width, 8, 4 or 2); under kAuto that
// width halves while the warps it leaves (points / width) are fewer than min_points, so that
// grouping never starves a domain the rule above found large enough (mhc_pre_backward's
// gate_grads at B*S = 181, n = 8: 181 warps in 23 blocks with 8 points a warp, 1448 warps with
// one; fill_warps = false, ADJOINT_TUNE_WARP_GROUP_FILL=0, keeps the widest width).
// ADJOINT_TUNE_REDUCTION=serial|warp overrides it through
// runtime::lower_options. Runs before split_reductions and derive_grid (which keeps the lanes
// and gives warp kernels vector width 1); each decision goes to ScheduleNotes for the dumps.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "compiler/split_reductions.h"
#include "ir/program.h"

namespace adjoint::compiler {

struct ReductionScheduleOptions {
  enum class Mode { kAuto, kSerial, kWarp };
  /// kAuto: the rule above; kSerial: never warp; kWarp: every kernel whose shape allows it
  /// (see cooperative_shape_allows) and that has a reduction outside any other reduction.
  Mode mode = Mode::kAuto;
  int64_t min_trips = 256;
  int64_t min_lane_extent = 64;
  int64_t min_points = 1024;
  /// kAuto: a warp kernel's points per warp (group_width) halve while points / width is below
  /// min_points (false: the widest width that divides the axis, the schedule before).
  /// LowerOptions::warp_group_fill, ADJOINT_TUNE_WARP_GROUP_FILL.
  bool fill_warps = true;
  /// Kernels that keep one thread per point whatever the mode: those whose loads claim slots
  /// with atomics (lower_scatter_to_binned_gather), which every lane would repeat.
  std::set<std::string> excluded_kernels;
  /// Kernels laid out for lanes by an earlier pass (gathered_reduction_lanes.h: the lane axis
  /// innermost, its rows contiguous): under kAuto they take the warp schedule whenever their
  /// shape and accumulation type allow it, whatever their lengths.
  std::set<std::string> preferred_kernels;
  /// Lanes per point of the preferred kernels: 32 (a warp) or 16, 8 or 4, so that a warp
  /// shares out 32 / L points (fewer shuffles and less per-point work per lane); 0 (default)
  /// derives it: 4 where a lane axis is shorter than kShortLaneAxis (8 or serial where the
  /// points do not fill warps of 4-lane groups), else 16 where the
  /// reductions' iterations outside the lane axis (grid_sampler's taps) are at most
  /// kFewLaneRows, else 32. Fewer than 32 only where every outermost
  /// reduction is evaluated whenever the stage is (no point-dependent branch around a shuffle)
  /// and the linear points fill whole warps (no warp partly past the end): the shuffles of a
  /// warp's groups then meet. LowerOptions::gathered_lane_width,
  /// ADJOINT_TUNE_GATHERED_LANE_WIDTH.
  int preferred_lanes = 0;
  /// The longest innermost axis of odd extent (no width of 8, 4 or 2 divides it) that a
  /// preferred kernel computes whole per lane group, one accumulator per element, so that the
  /// loads its elements share are read once: 3-d grid_sampler's grad_grid takes its point's 3
  /// coordinates in one group. 0 (default) never, one point per group: on the H100 the groups
  /// made 3-d grad_grid slower at 4 lanes (a third of the threads; docs/compiler.md "Sub-warp
  /// lanes"). LowerOptions::gathered_lane_whole_axis, ADJOINT_TUNE_GATHERED_WHOLE_AXIS.
  int64_t whole_axis_lanes_max = 0;
};

/// The mode named by `text` ("auto", "serial" or "warp"); throws adjoint::Error
/// (kInvalidArgument) naming `what` and the three values otherwise.
/// The most iterations outside the lane axis for which preferred_lanes = 0 takes 16 lanes per
/// point: 2-d bilinear's 4 taps (on the H100, 16 lanes made its grad_grid programs 0-8% faster
/// at 32 and 64 channels; bicubic's 16 taps up to 30% slower: docs/compiler.md).
inline constexpr int64_t kFewLaneRows = 4;
/// A preferred kernel whose lane axis is shorter than this (a warp) takes 4 lanes per point
/// under preferred_lanes = 0, whatever its rows: 3-d grid_sampler's grad_grid at 16 channels x 8
/// taps (on the H100 4 lanes were faster than 8 and 16, and than one thread per point:
/// docs/compiler.md "Sub-warp lanes"). Points that do not fill warps of 4-lane groups take 8
/// lanes where they fill warps of those, else one thread per point (never 32 lanes over so few
/// elements).
inline constexpr int64_t kShortLaneAxis = 32;

ReductionScheduleOptions::Mode parse_reduction_mode(const std::string& text,
                                                    const std::string& what);

/// Sets GridConfig::reduction_lanes = 32 (preferred kernels: preferred_lanes) on the kernels chosen (see the top of this file);
/// only kernels without an explicit grid, of rank >= 1, whose stages all compute. Returns the
/// very same program when nothing changes. `notes`, when given, receives a line per reduction
/// considered, by kernel name.
ir::Program choose_reduction_schedules(const ir::Program& program,
                                       const ReductionScheduleOptions& options,
                                       ScheduleNotes* notes = nullptr);

}  // namespace adjoint::compiler
