// Launch geometry: how a kernel's domain maps onto CUDA blocks and threads, the launch
// dimensions that follow from it, and the proof that the mapping covers every domain point
// exactly once. The emitter generates its index decoding from the same GridMapping, so what is
// proven here is what runs.
//
// The execution model of a GridConfig (one binding per domain axis, block_size threads in
// blockDim.x):
//   - thread axes: decoded from threadIdx.x % T, T = product of their extents (row-major);
//   - linear axes: flattened (outermost to innermost, see GridMapping::linear_axes) into
//     [0, N / vector_width); each block runs `lanes = block_size / T` of them at a time in a
//     grid-stride loop: linear = blockIdx.x * lanes + threadIdx.x / T, step gridDim.x * lanes;
//     with vector_width w each linear index covers w consecutive points of the innermost one;
//   - block axes: one block index each, blockIdx.y then .z when linear axes use .x, else .x,
//     .y, .z; the grid dimension equals the extent;
//   - serial axes: loops inside each thread, over the whole extent.
//   - reduction lanes L (GridConfig::reduction_lanes, 1, or 4, 8, 16 or 32 lanes of a warp;
//     only with every axis linear): each linear index (its vector_width points) belongs to the L
//     consecutive threads of one warp (a warp holds 32 / L linear indices),
//     linear = blockIdx.x * (block_size / L) + threadIdx.x / L, lane = threadIdx.x % L; the
//     lanes share the point, split its reductions (lane l takes iterations l, l + L, ...) and
//     lane 0 stores. Every point still runs once: once per warp.
//   - thread tile R (GridConfig::tile_points > 1, on a linear axis a other than the innermost,
//     of extent E >= R): axis a counts its ceil(E / R) tiles of R points in the flattening, and
//     each linear index covers the points a_base + r, r < R, a_base = R * (its tile), each with
//     its vector group: R * vector_width points per linear index, each once. Where R does not
//     divide E the last tile is partial: its indices a_base + r >= E are computed at the
//     clamped index E - 1 (every load in bounds) and not stored, so the points stored are
//     exactly [0, E), each by one thread.
//   - tile rows Y (GridConfig::tile_block_rows > 1, with a thread tile, every axis linear,
//     compiler/tile_blocks.h): the block's threads are Y rows of X = block_size / Y; thread t
//     of block b takes tile Y q_a + t / X of the tile axis and group X q_x + t % X of the
//     innermost axis, where b decodes (innermost fastest) like a linear index over the tile
//     axis' tiles / Y, the innermost axis' groups / X and the other axes; Y divides the tiles,
//     X the groups, and the grid has exactly linear indices / block_size blocks.
// Without linear axes, threads with threadIdx.x >= T do nothing.
//
// Row-group kernels (ir::Kernel::row_axes = r > 0, compiler/row_groups.h) have no bindings:
// the rows (the first r axes of every stage, flattened row-major, N of them) go R =
// rows_per_block to a block, block b owning rows [b R, b R + R) (grid ceil(N / R) x 1 x 1); for
// each stage of P points per row (its other axes, row-major) the block's threads take the
// flattened indices p = threadIdx.x, + block_size, ... below R P, point p being row b R + p / P
// (skipped from the first p past row N - 1 on) and point p % P of it; a __syncthreads() ends
// every stage but the last, and no thread returns early, so every thread meets every barrier.
// With GridConfig::row_per_thread the block has R threads, thread t owning row b R + t for
// every stage (threads past row N - 1 return at once: there is no barrier).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/compiled_program.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// Threads per block when a kernel's grid is derived.
inline constexpr int kDefaultBlockSize = 256;
/// The most blocks a grid-stride loop launches; larger domains loop.
inline constexpr int64_t kMaxLinearBlocks = int64_t{1} << 20;

/// Which domain axes take which role, in the order the emitter decodes them.
struct GridMapping {
  std::vector<int> linear_axes;   ///< outermost first; the last one is the innermost
  std::vector<int> block_axes;    ///< in grid-dimension order
  std::vector<int> thread_axes;   ///< row-major over threadIdx.x % thread_points
  std::vector<int> serial_axes;   ///< loops, outermost first
  int64_t linear_points = 1;      ///< linear indices: product of linear extents / vector width
  int64_t thread_points = 1;      ///< T: product of thread extents
  int64_t lanes = 1;              ///< linear indices per block per step (block_size / (T * L))
  int64_t reduction_lanes = 1;    ///< L: threads per point (GridConfig::reduction_lanes)
  int first_block_dimension = 0;  ///< 0 (x) or 1 (y): where the block axes start
};

/// The mapping of `kernel`'s domain under its (set) grid configuration. Linear axes are
/// ordered so that the innermost one is the one with the smallest stride in the tensor the
/// first compute stage writes, so consecutive threads write consecutive addresses (channels-
/// last layouts included); otherwise in domain order.
GridMapping grid_mapping(const ir::Kernel& kernel);

/// The rows of a row-group kernel (the product of its first row_axes extents) and each stage's
/// points per row.
struct RowGroupShape {
  int64_t rows = 1;
  std::vector<int64_t> stage_points;
};
RowGroupShape row_group_shape(const ir::Kernel& kernel);

/// Proves that `launch` runs every point of every stage of a row-group kernel exactly once
/// under the model above: blockDim is the configured block, R >= 1, and the grid has exactly
/// ceil(N / R) blocks (each row owned by one block; no block without a row). Throws like
/// check_grid_coverage.
void check_row_group_coverage(const std::string& kernel_name, const RowGroupShape& shape,
                              const ir::GridConfig& config, const LaunchDims& launch);

/// The launch dimensions of `kernel` (whose grid configuration must be set); checks them with
/// check_grid_coverage (check_row_group_coverage for a row-group kernel).
LaunchDims launch_dims(const ir::Kernel& kernel);

/// Proves that `launch` runs every point of a domain with these extents exactly once under
/// `config` and the execution model above; throws adjoint::Error naming `kernel_name` and the
/// first condition that fails (a thread axis longer than the block, a block axis whose grid
/// dimension is not its extent, a grid-stride loop with no blocks, a vector width that does not
/// divide the innermost linear axis, ...). `linear_order` is the order the linear axes are
/// flattened in (GridMapping::linear_axes; empty: domain order), which names the innermost one.
void check_grid_coverage(const std::string& kernel_name, const std::vector<int64_t>& extents,
                         const ir::GridConfig& config, const LaunchDims& launch,
                         const std::vector<int>& linear_order = {});

}  // namespace adjoint::compiler
