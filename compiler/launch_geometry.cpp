// Launch geometry: the GridMapping of a configuration, its launch dimensions, and the coverage
// proof, which checks each condition under which the execution model is a bijection between
// (block, thread, loop iteration) and domain points.
#include "compiler/launch_geometry.h"

#include <algorithm>

#include "compiler/block_reductions.h"
#include "compiler/program_utils.h"
#include "ir/error.h"

namespace adjoint::compiler {
namespace {

constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxGridYZ = 65535;
constexpr const char* kDimensionNames[3] = {"x", "y", "z"};

/// The mapping with linear axes in the given order (any order is a valid bijection).
GridMapping mapping_for(const std::vector<int64_t>& extents, const ir::GridConfig& config,
                        const std::vector<int>& linear_order) {
  GridMapping m;
  m.linear_axes = linear_order;
  for (size_t j = 0; j < config.bindings.size() && j < extents.size(); ++j) {
    switch (config.bindings[j]) {
      case ir::AxisBinding::kLinear:
        // The tile axis counts its ceil(E / R) tiles (the last one may be partial).
        if (config.tile_points > 1 && static_cast<int>(j) == config.tile_axis)
          m.linear_points *= (extents[j] + config.tile_points - 1) / config.tile_points;
        else
          m.linear_points *= extents[j];
        break;
      case ir::AxisBinding::kBlock:
        m.block_axes.push_back(static_cast<int>(j));
        break;
      case ir::AxisBinding::kThread:
        m.thread_axes.push_back(static_cast<int>(j));
        m.thread_points *= extents[j];
        break;
      case ir::AxisBinding::kSerial:
        m.serial_axes.push_back(static_cast<int>(j));
        break;
    }
  }
  if (config.vector_width > 1) m.linear_points /= config.vector_width;
  m.reduction_lanes = std::max(config.reduction_lanes, 1);
  m.lanes = m.thread_points > 0
                ? std::max<int64_t>(config.block_size / (m.thread_points * m.reduction_lanes), 1)
                : 1;
  m.first_block_dimension = m.linear_axes.empty() ? 0 : 1;
  return m;
}

std::vector<int> linear_axes_in_domain_order(const ir::GridConfig& config) {
  std::vector<int> axes;
  for (size_t j = 0; j < config.bindings.size(); ++j) {
    if (config.bindings[j] == ir::AxisBinding::kLinear) axes.push_back(static_cast<int>(j));
  }
  return axes;
}

}  // namespace

GridMapping grid_mapping(const ir::Kernel& kernel) {
  std::vector<int64_t> extents = domain_extents(kernel);
  std::vector<int> linear = linear_axes_in_domain_order(kernel.grid);
  if (!kernel.stages.empty() && kernel.stages.front().kind == ir::StageKind::kCompute) {
    const std::vector<int64_t>& strides = kernel.stages.front().target->strides;
    std::stable_sort(linear.begin(), linear.end(),
                     [&](int a, int b) { return strides[a] > strides[b]; });
  }
  return mapping_for(extents, kernel.grid, linear);
}

LaunchDims launch_dims(const ir::Kernel& kernel) {
  if (!kernel.grid.is_set) {
    throw Error("kernel '" + kernel.name + "' has no grid configuration; run derive_grid first",
                ErrorCode::kInternal);
  }
  if (kernel.grid.block_tokens > 0) return block_reduction_launch(kernel);
  if (kernel.row_axes > 0) {
    RowGroupShape shape = row_group_shape(kernel);
    LaunchDims dims;
    dims.block[0] = static_cast<uint32_t>(kernel.grid.block_size);
    const int64_t per_block = std::max<int64_t>(kernel.grid.rows_per_block, 1);
    dims.grid[0] = static_cast<uint32_t>(
        std::min<int64_t>((shape.rows + per_block - 1) / per_block, int64_t{1} << 32));
    check_row_group_coverage(kernel.name, shape, kernel.grid, dims);
    return dims;
  }
  std::vector<int64_t> extents = domain_extents(kernel);
  GridMapping m = grid_mapping(kernel);
  LaunchDims dims;
  dims.block[0] = static_cast<uint32_t>(kernel.grid.block_size);
  bool empty = std::find(extents.begin(), extents.end(), 0) != extents.end();
  if (empty) {
    dims.grid[0] = 0;  // nothing to do: the runtime skips the launch
  } else {
    if (!m.linear_axes.empty()) {
      dims.grid[0] = static_cast<uint32_t>(
          std::min((m.linear_points + m.lanes - 1) / m.lanes, kMaxLinearBlocks));
    }
    for (size_t i = 0; i < m.block_axes.size() && m.first_block_dimension + i < 3; ++i) {
      dims.grid[m.first_block_dimension + i] = static_cast<uint32_t>(extents[m.block_axes[i]]);
    }
  }
  check_grid_coverage(kernel.name, extents, kernel.grid, dims, m.linear_axes);
  return dims;
}

RowGroupShape row_group_shape(const ir::Kernel& kernel) {
  RowGroupShape shape;
  const size_t rows = static_cast<size_t>(kernel.row_axes);
  for (size_t s = 0; s < kernel.stages.size(); ++s) {
    const std::vector<ir::Axis>& domain = kernel.stages[s].domain;
    int64_t row_count = 1, points = 1;
    for (size_t i = 0; i < domain.size(); ++i) {
      auto* extent = domain[i].extent.as<ir::IntConstNode>();
      if (!extent) {
        throw Error("kernel '" + kernel.name + "': a row-group stage's extent is not a constant",
                    ErrorCode::kInternal);
      }
      (i < rows ? row_count : points) *= extent->value;
    }
    if (domain.size() < rows || (s > 0 && row_count != shape.rows)) {
      throw Error("kernel '" + kernel.name + "': stage " + std::to_string(s) +
                      " does not share the kernel's " + std::to_string(rows) + " row axes",
                  ErrorCode::kInvalidProgram);
    }
    shape.rows = row_count;
    shape.stage_points.push_back(points);
  }
  return shape;
}

void check_row_group_coverage(const std::string& kernel_name, const RowGroupShape& shape,
                              const ir::GridConfig& config, const LaunchDims& launch) {
  auto fail = [&](const std::string& reason) {
    throw Error("kernel '" + kernel_name +
                    "': the launch does not cover its rows exactly once: " + reason,
                ErrorCode::kInvalidProgram);
  };
  auto str = [](int64_t v) { return std::to_string(v); };
  if (!config.is_set) fail("it has no grid configuration");
  if (!config.bindings.empty()) fail("a row-group kernel has no axis bindings");
  const int64_t block = config.block_size, per_block = config.rows_per_block;
  if (block < 1 || block > 1024) fail("block size " + str(block) + " is outside [1, 1024]");
  if (launch.block[0] != block || launch.block[1] != 1 || launch.block[2] != 1)
    fail("blockDim is not (" + str(block) + ", 1, 1)");
  if (per_block < 1) fail("rows per block " + str(per_block) + " is not positive");
  if (config.row_per_thread && block != per_block)
    fail("a row per thread needs one thread per row of the block, not " + str(block) +
         " threads for " + str(per_block) + " rows");
  if (config.vector_width != 1 || config.reduction_lanes != 1 || config.tile_points != 1)
    fail("a row-group kernel has no vector width, reduction lanes or thread tile");
  const int64_t blocks = (shape.rows + per_block - 1) / per_block;
  if (blocks > 2147483647) fail(str(blocks) + " blocks exceed the grid's x dimension");
  if (launch.grid[0] != blocks || launch.grid[1] != 1 || launch.grid[2] != 1)
    fail("the grid is (" + str(launch.grid[0]) + ", " + str(launch.grid[1]) + ", " +
         str(launch.grid[2]) + "), not ceil(" + str(shape.rows) + " / " + str(per_block) +
         ") = " + str(blocks) + " blocks");
  for (int64_t points : shape.stage_points) {
    // The strided loop's index stays below R P + block; it must fit the index type used.
    if (per_block * points + block > (int64_t{1} << 62))
      fail("a stage's points per block overflow the index");
  }
}

void check_grid_coverage(const std::string& kernel_name, const std::vector<int64_t>& extents,
                         const ir::GridConfig& config, const LaunchDims& launch,
                         const std::vector<int>& linear_order) {
  auto fail = [&](const std::string& reason) {
    throw Error("kernel '" + kernel_name +
                    "': the launch does not cover its domain exactly once: " + reason,
                ErrorCode::kInvalidProgram);
  };
  auto str = [](int64_t v) { return std::to_string(v); };
  if (!config.is_set) fail("it has no grid configuration");
  if (config.bindings.size() != extents.size()) {
    fail(str(config.bindings.size()) + " axis bindings for a domain of rank " +
         str(extents.size()));
  }
  const int64_t block = config.block_size;
  if (block < 1 || block > 1024) fail("block size " + str(block) + " is outside [1, 1024]");
  if (launch.block[0] != block || launch.block[1] != 1 || launch.block[2] != 1) {
    fail("blockDim is (" + str(launch.block[0]) + ", " + str(launch.block[1]) + ", " +
         str(launch.block[2]) + ") but the configuration has block size " + str(block));
  }
  if (config.vector_width < 1)
    fail("vector width " + str(config.vector_width) + " is not positive");
  std::vector<int> order = linear_axes_in_domain_order(config);
  if (!linear_order.empty()) {
    std::vector<int> sorted_given = linear_order, sorted_domain = order;
    std::sort(sorted_given.begin(), sorted_given.end());
    if (sorted_given != sorted_domain) fail("the linear axes' order names other axes");
    order = linear_order;
  }
  GridMapping m = mapping_for(extents, config, order);

  if (std::find(extents.begin(), extents.end(), 0) != extents.end()) {
    bool skipped = launch.grid[0] == 0 || launch.grid[1] == 0 || launch.grid[2] == 0;
    if (!skipped) fail("the domain is empty but the grid launches blocks");
    return;
  }
  if (config.vector_width > 1) {
    if (m.linear_axes.empty())
      fail("vector width " + str(config.vector_width) + " needs a linear axis");
    int64_t innermost = extents[m.linear_axes.back()];
    if (innermost % config.vector_width != 0) {
      fail("the innermost linear axis (extent " + str(innermost) +
           ") is not a multiple of the vector width " + str(config.vector_width) +
           ": its tail would be dropped");
    }
  }
  if (config.tile_points < 1) fail("thread tile of " + str(config.tile_points) + " points");
  if (config.tile_points > 1) {
    const int axis = config.tile_axis;
    if (axis < 0 || static_cast<size_t>(axis) >= extents.size() ||
        std::find(m.linear_axes.begin(), m.linear_axes.end(), axis) == m.linear_axes.end())
      fail("the thread tile's axis " + str(axis) + " is not a linear axis");
    if (axis == m.linear_axes.back())
      fail("the thread tile's axis " + str(axis) + " is the innermost linear axis, which the " +
           "vector group owns");
    // ceil(E / R) tiles: a last tile past E - 1 computes its extra points at the clamped index
    // E - 1 and stores only those below E (the emitter's guard), so each point is stored once.
    if (extents[axis] < config.tile_points) {
      fail("the thread tile of " + str(config.tile_points) + " points is longer than its axis " +
           "(extent " + str(extents[axis]) + ")");
    }
    if (config.reduction_lanes != 1) fail("a thread tile with cooperative reduction lanes");
  }
  if (config.tile_block_rows < 1) fail(str(config.tile_block_rows) + " tile rows");
  if (config.tile_block_rows > 1) {
    // Rows of threads (tile_blocks.h): thread t of block b holds tile row t / X and group
    // column t % X, blockIdx.x decodes the rest; a bijection when every block is full.
    const int64_t rows = config.tile_block_rows;
    if (config.tile_points < 2) fail(str(rows) + " tile rows without a thread tile");
    if (!m.thread_axes.empty() || !m.block_axes.empty() || !m.serial_axes.empty())
      fail("tile rows need every axis linear");
    if (block % rows != 0) fail(str(rows) + " tile rows do not divide a block of " + str(block));
    const int64_t columns = block / rows;
    const int64_t tiles = (extents[config.tile_axis] + config.tile_points - 1) / config.tile_points;
    const int64_t groups = extents[m.linear_axes.back()] / config.vector_width;
    if (tiles % rows != 0)
      fail(str(rows) + " tile rows do not divide the " + str(tiles) + " tiles of axis " +
           str(config.tile_axis));
    if (groups % columns != 0)
      fail(str(columns) + " columns of threads do not divide the " + str(groups) +
           " groups of the innermost axis");
    if (int64_t{launch.grid[0]} * block != m.linear_points)
      fail("grid.x is " + str(launch.grid[0]) + " blocks of " + str(block) + " threads for " +
           str(m.linear_points) + " linear indices: tile rows need one full block each");
  }
  if (config.reduction_lanes != 1) {
    const int l = config.reduction_lanes;
    if (l != 4 && l != 8 && l != 16 && l != 32)
      fail("reduction lanes " + str(config.reduction_lanes) +
           " is neither 1 nor a warp (32) nor 4, 8 or 16 lanes of one");
    if (m.linear_axes.empty() || !m.thread_axes.empty() || !m.block_axes.empty() ||
        !m.serial_axes.empty()) {
      fail("cooperative reduction lanes need every axis linear (and at least one): a warp's "
           "lanes must share one linear index");
    }
    if (block % 32 != 0) {
      fail("a block of " + str(block) + " threads is not whole warps: a warp's lanes would " +
           "fall into two blocks");
    }
  }
  if (!m.linear_axes.empty() && block % m.thread_points != 0) {
    fail("a block of " + str(block) + " threads cannot be split into lanes of the " +
         str(m.thread_points) + " points of its thread axes");
  }
  if (m.linear_axes.empty() && m.thread_points > block) {
    fail("the thread axes hold " + str(m.thread_points) + " points but a block has " + str(block) +
         " threads: " + str(m.thread_points - block) + " points per block would never run");
  }
  const size_t available = 3 - static_cast<size_t>(m.first_block_dimension);
  if (m.block_axes.size() > available) {
    fail(str(m.block_axes.size()) + " block axes but only " + str(available) +
         " grid dimensions are free");
  }
  std::vector<bool> used(3, false);
  if (!m.linear_axes.empty()) {
    used[0] = true;
    if (launch.grid[0] < 1 || launch.grid[0] > kMaxGridX) {
      fail("grid.x is " + str(launch.grid[0]) + " for a grid-stride loop over " +
           str(m.linear_points) + " points");
    }
  }
  for (size_t i = 0; i < m.block_axes.size(); ++i) {
    int d = m.first_block_dimension + static_cast<int>(i);
    int64_t extent = extents[m.block_axes[i]];
    used[d] = true;
    if (launch.grid[d] != extent) {
      fail(std::string("grid.") + kDimensionNames[d] + " is " + str(launch.grid[d]) +
           " but block axis " + str(m.block_axes[i]) + " has extent " + str(extent));
    }
    if (extent > (d == 0 ? kMaxGridX : kMaxGridYZ)) {
      fail(std::string("block axis ") + str(m.block_axes[i]) + " has extent " + str(extent) +
           ", more than grid." + kDimensionNames[d] + " allows");
    }
  }
  for (int d = 0; d < 3; ++d) {
    if (!used[d] && launch.grid[d] != 1) {
      fail(std::string("grid.") + kDimensionNames[d] + " is " + str(launch.grid[d]) +
           " though no axis uses it: every point would run " + str(launch.grid[d]) + " times");
    }
  }
}

}  // namespace adjoint::compiler
