// derive_grid: fills unset grid configurations with the default linear mapping (block size and
// vector bytes tunable) and its vector width, and checks every kernel's launch with the coverage
// proof.
#include "compiler/derive_grid.h"

#include <string>

#include "compiler/block_reductions.h"
#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"
#include "compiler/thread_tiles.h"
#include "compiler/vector_groups.h"
#include "ir/error.h"

namespace adjoint::compiler {
namespace {

/// The most constant iterations any outermost reduction of the kernel's compute stages takes
/// per point (0 without one).
int64_t serial_trips(const ir::Kernel& kernel) {
  int64_t most = 0;
  for (const ir::Stage& stage : kernel.stages) {
    if (stage.kind != ir::StageKind::kCompute) continue;
    for (const ir::ReduceNode* r : outermost_reductions(stage.value))
      most = std::max(most, constant_trips(*r));
  }
  return most;
}

/// A domain of rank 0 is one point: one warp is plenty.
constexpr int kScalarBlockSize = 32;

/// Derived blocks of thread-tiled kernels (R x V accumulators: 100-140 registers a thread).
/// Measured on the H100 with every block at 128 (docs/results/h100-2026-11-23-fma):
/// mhc_pre_backward 0.706 -> 0.643 ms at B1 S4096 n4 D4096, 0.655 -> 0.433 at D2560, all of it
/// in the tiled kernels (dx at 103 registers: 319 -> 260 us). Same points per thread, same
/// order: the same bits.
constexpr int kTiledBlockSize = 128;

ir::GridConfig default_grid(size_t rank, int block_size) {
  ir::GridConfig grid;
  grid.is_set = true;
  grid.bindings.assign(rank, ir::AxisBinding::kLinear);
  grid.block_size = rank == 0 ? kScalarBlockSize : block_size;
  grid.vector_width = 1;
  return grid;
}

}  // namespace

void check_derive_grid_options(const DeriveGridOptions& options) {
  const int block = options.block_size;
  if (block != 0 && (block < 32 || block > 1024 || block % 32 != 0)) {
    throw Error("block_size: expected 0 (derive) or a multiple of 32 in [32, 1024], got " +
                    std::to_string(block),
                ErrorCode::kInvalidArgument);
  }
  const int bytes = options.vector_bytes;
  if (bytes != 0 && bytes != 8 && bytes != 16 && bytes != 32) {
    throw Error("vector_bytes: expected 0 (derive), 8, 16 or 32, got " + std::to_string(bytes),
                ErrorCode::kInvalidArgument);
  }
}

ir::Program derive_grid(const ir::Program& program, const DeriveGridOptions& options) {
  check_derive_grid_options(options);
  const int block_size = options.block_size != 0 ? options.block_size : kDefaultBlockSize;
  const int group_bytes = options.vector_bytes != 0 ? options.vector_bytes : kDefaultGroupBytes;
  ir::Program out = program;
  bool changed = false;
  for (ir::Kernel& kernel : out.kernels) {
    if (!kernel.grid.is_set && kernel.grid.block_tokens > 0) {
      bind_block_reduction_grid(kernel);  // block_reductions' choice: its own bindings
      changed = true;
    } else if (!kernel.grid.is_set) {
      // reduction_schedule's choice: warp lanes with their own vector width
      const int lanes = kernel.grid.reduction_lanes, width = kernel.grid.vector_width;
      const int tile_axis = kernel.grid.tile_axis, tile = kernel.grid.tile_points;
      const bool tiled_default = tile > 1 && options.block_size == 0;
      kernel.grid = default_grid(domain_extents(kernel).size(),
                                 tiled_default ? kTiledBlockSize : block_size);
      kernel.grid.reduction_lanes = lanes;
      const bool whole_axis = options.whole_axis_kernels.count(kernel.name) > 0;
      const bool scalar = options.scalar_kernels.count(kernel.name) > 0;
      kernel.grid.vector_width =
          lanes > 1 ? width
          : scalar  ? 1
                    : derived_vector_width(kernel, group_bytes, whole_axis,
                                           serial_trips(kernel) >= options.reducing_min_trips
                                               ? options.reducing_min_groups
                                               : kMinVectorGroups);
      // thread_tiles' choice: R points of its axis, R x V accumulators at most
      kernel.grid.tile_axis = tile_axis;
      kernel.grid.tile_points = tile;
      const int64_t limit = tile_accumulator_limit(kernel, tile_axis, tile, options.tiles);
      while (tile > 1 && kernel.grid.vector_width > 1 && tile * kernel.grid.vector_width > limit)
        kernel.grid.vector_width /= 2;
      changed = true;
    }
    launch_dims(kernel);  // throws, naming the kernel, unless the launch covers the domain
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
