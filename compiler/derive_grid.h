// derive_grid: gives every kernel a grid configuration and proves it covers the domain.
//
// Guarantees: afterwards every kernel's GridConfig is set. A kernel without one gets every
// domain axis bound kLinear (flattened, grid-stride loop) with DeriveGridOptions::block_size
// threads per block (kDefaultBlockSize, 128 for a thread-tiled kernel, unless tuned) and the
// vector width of derived_vector_width (vector_groups.h: V consecutive points of the innermost
// axis per thread,
// at most DeriveGridOptions::vector_bytes of the widest target, stored in accesses of up to 16
// bytes, when the targets are contiguous along it and the domain is large); an explicit one is
// kept. Either way launch_dims() of the result passes check_grid_coverage (launch_geometry.h);
// an explicit configuration that does not is an adjoint::Error naming the kernel. Grid and block
// extents are therefore never chosen by hand from the wrong extent: they follow from the domain.
#pragma once

#include <set>
#include <string>

#include "compiler/thread_tiles.h"
#include "compiler/vector_groups.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// Tuning of derived grids (LowerOptions carries the same fields; 0 means the default).
struct DeriveGridOptions {
  /// Threads per block: 0 (kDefaultBlockSize) or a multiple of 32 in [32, 1024]. Kernels of
  /// rank 0 (one point) keep one warp.
  int block_size = 0;
  /// Most bytes of the widest target per vector group: 0 (kDefaultGroupBytes), 8, 16 or 32.
  int vector_bytes = 0;
  /// Kernels derived_vector_width may give a whole-axis group (vector_groups.h): the binned
  /// gathers whose walks are short (lower_scatter_to_binned_gather.h, WholeAxisKernels).
  std::set<std::string> whole_axis_kernels;
  /// Kernels that keep one point per thread (vector width 1): the binned gather's lane scans
  /// (lower_scatter_to_binned_gather.h, LaneScanKernels), whose warps scan 32 consecutive points.
  std::set<std::string> scalar_kernels;
  /// The fewest vector groups (threads) a kernel keeps when each of its points reduces serially
  /// over at least reducing_min_trips constant iterations (the column sums of mhc_pre_backward
  /// at few tokens: dvecx and dgamma, 80 rows of phi each): more threads keep more of those
  /// rows' loads in flight: H200, B1 S1 n8 D16384 dvecx 29.7 -> 15.0 us, B1 S4 dx 43.3 -> 13.4
  /// and dgamma 45.9 -> 27.1 (2^15, every other kernel's minimum, before: docs/mhc.md).
  /// ADJOINT_TUNE_REDUCING_MIN_GROUPS.
  int64_t reducing_min_groups = int64_t{1} << 17;
  int64_t reducing_min_trips = 64;
  /// A thread-tiled kernel's R x V at most (tile_accumulator_limit of these options: their
  /// max_accumulators and long_tile_accumulators): V halves to fit.
  ThreadTileOptions tiles;
};

/// Throws adjoint::Error (kInvalidArgument) naming the field, the valid values and the value
/// given when `options` holds a block size or vector byte count derive_grid does not accept.
void check_derive_grid_options(const DeriveGridOptions& options);

/// Returns `program` with every kernel's grid configuration set and checked.
ir::Program derive_grid(const ir::Program& program, const DeriveGridOptions& options = {});

}  // namespace adjoint::compiler
