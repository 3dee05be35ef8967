// copy_gathered_rows_innermost: a layout pass for reductions that read a tensor at
// data-dependent places, one element per iteration of a reduced axis: grid_sampler's grad_grid
// sums input[n, c, tap_y, tap_x] over channels c, where (tap_y, tap_x) come from the grid. In the
// tensor's own layout every iteration reads one element of another plane (a memory sector per
// element, none shared); read from a copy with the reduced axis's component last, the
// iterations walk one contiguous row, so consecutive iterations share sectors.
//
// A load qualifies when it sits inside a reduction over an axis `r` (constant start 0, constant
// extent >= min_extent, and extent x element size <= 32 bytes: the whole row is one memory
// sector, so a thread's iterations over `r` reread one sector; longer rows cross sectors that
// the L1 does not keep between iterations, and on the H100 grad_grid at 32 and 64 channels
// took 2x longer through the copy, while at 3 channels it took 100 -> 63 us + a 20 us copy),
// one of its components is exactly `r` and is not already the last, no
// other component depends on `r`, another component reads memory (the data-dependent part),
// and its kernel does not write the tensor. Each qualifying (tensor, component order) gets one
// copy kernel `<tensor>_rows` (a transposition, exact in every dtype) placed right before the
// kernel that reads it; the load then reads the copy (a tensor whose strides already make
// that order its layout is read in place). The values and the order of the sums are
// unchanged, so results are bitwise the same. Run by lower() after the scatter lowerings.
#pragma once

#include <cstdint>

#include "ir/program.h"

namespace adjoint::compiler {

/// Returns `program` with qualifying gathered loads reading row-innermost copies (the program
/// itself when none qualifies, or when `min_extent` is 0). With `skip_sparse`, a load of a stage
/// whose domain has fewer points than the tensor has rows (elements / row extent) does not
/// qualify: such a grid (grid_sampler down-sampling, 4x3x512^2 -> 256^2) reads fewer rows than
/// the copy moves, and on the H100 grad_grid on the planar input was 2.7-8.3% faster there, but
/// only that one shape was measured (docs/results/h100-2026-11-27-gridknobs), so it is off by
/// default (LowerOptions::gathered_rows_skip_sparse, ADJOINT_TUNE_GATHERED_ROWS_SPARSE).
ir::Program copy_gathered_rows_innermost(const ir::Program& program, int64_t min_extent,
                                         bool skip_sparse = false);

}  // namespace adjoint::compiler
