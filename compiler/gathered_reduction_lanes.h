// lay_out_gathered_reductions_for_lanes: a layout pass for reductions over a wide axis that read
// a tensor at data-dependent places, such as grid_sampler's grad_grid, which sums
// input[n, c, tap_y, tap_x] * grad_output[n, c, h, w] over channels c and taps, where (tap_y,
// tap_x) come from the grid. One thread per point walks c in the tensors' own layout: every
// iteration reads one element of another plane, a memory sector per element, none shared (137 us
// of the bilinear 8x64x128^2 backward on the H100, most of it sectors fetched for 4 bytes).
//
// For an outermost reduction with an axis `r` of constant extent >= min_extent (start 0) such
// that some load of its body is gathered (r is one of its components as itself, not the last,
// and another component reads memory), and every load of the body that depends on r names it
// as exactly one plain component, the pass
//   - moves r to the innermost position of the reduction's axes, and
//   - reads every load indexed by r through a copy with r's component last (the r-rows of
//     every tensor become contiguous), unless the tensor's strides already lay it out so; a copy
//     that an earlier kernel of the program already makes (the binned gather's channels-last
//     grad_output) is reused, else a kernel `<tensor>_lanes` is added before the reading one,
//   - and names the kernel in `warp_kernels`, for which choose_reduction_schedules takes the
//     warp schedule (ReductionScheduleOptions::preferred_kernels): the 32 lanes of a warp
//     stride over r, so each gathered load of a warp reads consecutive elements of one row.
// The sum's order changes (taps outer, r split over the lanes and combined by the fixed shuffle
// butterfly): deterministic and independent of the launch configuration, not the serial
// order's bits. Only kernels of one compute stage without an explicit grid are considered.
// Under ADJOINT_TUNE_REDUCTION=serial the layout stays and the reduction runs in one thread per
// point (set ADJOINT_TUNE_GATHERED_LANES=0 too for the schedule before this pass).
// Run by lower() after the scatter lowerings, before copy_gathered_rows_innermost.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "compiler/schedule_notes.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// Returns `program` with qualifying reductions laid out for warp lanes (the program itself when
/// none qualifies, or when `min_extent` is 0); adds the kernels it rewrote to `warp_kernels`
/// and a line each to `notes` (either may be null).
ir::Program lay_out_gathered_reductions_for_lanes(const ir::Program& program, int64_t min_extent,
                                                  std::set<std::string>* warp_kernels,
                                                  ScheduleNotes* notes = nullptr);

}  // namespace adjoint::compiler
