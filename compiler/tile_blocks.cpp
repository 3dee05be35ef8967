// tile_blocks: scores the rows of a thread-tiled kernel's block by the bytes a block reads per
// reduction iteration, checks that the rows fit the tile and group counts, and records the
// choice (see the header).
#include "compiler/tile_blocks.h"

#include <algorithm>
#include <vector>

#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"
#include "ir/error.h"

namespace adjoint::compiler {
namespace {

bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

bool moves_with(const ir::Expr& e, const ir::ReduceNode& r) {
  for (const ir::Axis& a : r.axes) {
    if (depends_on(e, a.var.get())) return true;
  }
  return false;
}

/// Bytes a thread reads per reduction iteration in the loads that move with the innermost axis
/// x but not with the tile axis a (`x_bytes`, V elements each) and a row reads in those that
/// move with a but not with x (`a_bytes`, R elements each).
void shared_load_bytes(const ir::Kernel& kernel, int a, int x, int64_t* x_bytes,
                       int64_t* a_bytes) {
  const int64_t v = kernel.grid.vector_width, r = kernel.grid.tile_points;
  for (const ir::Stage& stage : kernel.stages) {
    const ir::VarNode* av = stage.domain[a].var.get();
    const ir::VarNode* xv = stage.domain[x].var.get();
    for (const ir::ReduceNode* red : outermost_reductions(stage.value)) {
      std::vector<const ir::ExprNode*> seen;
      for_each_node(red->body, [&](const ir::Expr& node) {
        auto* load = node.as<ir::LoadNode>();
        if (!load || !moves_with(node, *red)) return;
        if (std::find(seen.begin(), seen.end(), node.get()) != seen.end()) return;
        seen.push_back(node.get());
        const bool with_a = depends_on(node, av), with_x = depends_on(node, xv);
        const int64_t bytes = ir::dtype_bytes(load->tensor->dtype);
        if (with_x && !with_a) *x_bytes += bytes * v;
        if (with_a && !with_x) *a_bytes += bytes * r;
      });
    }
  }
}

}  // namespace

void check_tile_block_options(const TileBlockOptions& options) {
  const int y = options.forced_rows;
  if (y < -1 || y > 1024 || (y > 1 && !power_of_two(y))) {
    throw Error("tile_block_rows: expected -1 (derive), 0 or 1 (one row) or a power of two in "
                "[2, 1024], got " + std::to_string(y),
                ErrorCode::kInvalidArgument);
  }
}

TileBlockChoice choose_tile_block(const ir::Kernel& kernel, const TileBlockOptions& options) {
  TileBlockChoice choice;
  const ir::GridConfig& g = kernel.grid;
  if (!g.is_set || g.tile_points < 2 || kernel.stages.empty()) {
    choice.why = "no thread tile";
    return choice;
  }
  if (options.forced_rows == 0 || options.forced_rows == 1) {
    choice.why = "one row of threads: ADJOINT_TUNE_TILE_BLOCK_ROWS=" +
                 std::to_string(options.forced_rows);
    return choice;
  }
  if (g.reduction_lanes != 1 || g.block_tokens > 0 || kernel.row_axes > 0 ||
      std::any_of(g.bindings.begin(), g.bindings.end(),
                  [](ir::AxisBinding b) { return b != ir::AxisBinding::kLinear; })) {
    choice.why = "its axes are not all linear";
    return choice;
  }
  const std::vector<int64_t> extents = domain_extents(kernel);
  const GridMapping m = grid_mapping(kernel);
  const int a = g.tile_axis, x = m.linear_axes.back();
  const int64_t block = g.block_size, v = g.vector_width;
  const int64_t tiles = (extents[a] + g.tile_points - 1) / g.tile_points;
  const int64_t groups = extents[x] / v;
  const std::string a_name = kernel.stages.front().domain[a].var.name_hint();
  const std::string x_name = kernel.stages.front().domain[x].var.name_hint();
  // Rows that fit: Y divides the block and a's tiles, X = B / Y divides x's groups, and the
  // grid runs every linear index once without a grid-stride loop.
  auto fits = [&](int64_t y) {
    return block % y == 0 && tiles % y == 0 && groups % (block / y) == 0 &&
           m.linear_points / block <= kMaxLinearBlocks;
  };
  int64_t narrowest_target = 8;
  for (const ir::Stage& stage : kernel.stages)
    narrowest_target = std::min<int64_t>(narrowest_target, ir::dtype_bytes(stage.target->dtype));
  int64_t rows = 1;
  // A long reduction: the prefetch ring's, which takes block-uniform loads once a block.
  bool long_reduction = false;
  for (const ir::Stage& stage : kernel.stages) {
    for (const ir::ReduceNode* red : outermost_reductions(stage.value)) {
      int64_t iterations = 1;
      for (const ir::Axis& axis : red->axes) {
        const ir::IntConstNode* trips = axis.extent.as<ir::IntConstNode>();
        iterations = trips ? iterations * trips->value : kLongTileReduction + 1;
        if (iterations > kLongTileReduction) break;
      }
      long_reduction = long_reduction || iterations > kLongTileReduction;
    }
  }
  if (options.forced_rows < 2 && options.yield_to_block_ring && long_reduction) {
    choice.why = "its reduction is a long loop, prefetched in chunks: one row keeps the loads "
                 "that move with " + a_name + " alone the same for the whole block (a ring of "
                 "the block, ADJOINT_TUNE_TILE_UNIFORM_RING)";
    choice.rows = 1;
    return choice;
  }
  if (options.forced_rows >= 2) {
    if (fits(options.forced_rows)) rows = options.forced_rows;
    choice.why = std::to_string(options.forced_rows) + " rows forced by ADJOINT_TUNE_TILE_BLOCK_ROWS" +
                 (rows == 1 ? ", which do not divide the block (" + std::to_string(block) +
                                  "), " + a_name + "'s " + std::to_string(tiles) + " tiles or " +
                                  x_name + "'s " + std::to_string(groups) + " groups by rows"
                            : "");
  } else {
    int64_t x_bytes = 0, a_bytes = 0;
    shared_load_bytes(kernel, a, x, &x_bytes, &a_bytes);
    auto cost = [&](int64_t y) { return block / y * x_bytes + y * a_bytes; };
    int64_t best = cost(1);
    for (int64_t y = 2; y <= block; y *= 2) {
      if (!fits(y) || block / y < options.min_columns ||
          block / y * v * narrowest_target < options.min_row_bytes)
        continue;
      if (cost(y) < best) {
        best = cost(y);
        rows = y;
      }
    }
    if (rows == 1) {
      choice.why = x_bytes == 0 ? "no load of its reductions moves with " + x_name + " but not with " + a_name
                                : "no rows that fit " + a_name + "'s " + std::to_string(tiles) +
                                      " tiles and " + x_name + "'s " + std::to_string(groups) +
                                      " groups read less";
    } else {
      choice.why = std::to_string(cost(1)) + " -> " + std::to_string(best) +
                   " bytes a block reads per reduction iteration: the rows share the loads that "
                   "do not move with " + a_name;
    }
  }
  choice.rows = static_cast<int>(rows);
  return choice;
}

ir::Program choose_tile_blocks(const ir::Program& program, const TileBlockOptions& options,
                               ScheduleNotes* notes) {
  check_tile_block_options(options);
  ir::Program out = program;
  bool changed = false;
  for (ir::Kernel& kernel : out.kernels) {
    if (!kernel.grid.is_set || kernel.grid.tile_points < 2 || kernel.grid.tile_block_rows > 1)
      continue;
    TileBlockChoice choice = choose_tile_block(kernel, options);
    if (choice.rows > 1) {
      kernel.grid.tile_block_rows = choice.rows;
      launch_dims(kernel);  // the coverage proof of the rows
      changed = true;
      const ir::Stage& stage = kernel.stages.front();
      const std::string a = stage.domain[kernel.grid.tile_axis].var.name_hint();
      const std::string x = stage.domain[grid_mapping(kernel).linear_axes.back()].var.name_hint();
      if (notes)
        add_schedule_note(*notes, kernel.name,
                          "tile block: " + std::to_string(choice.rows) + " rows (tiles of " + a +
                              ") x " + std::to_string(kernel.grid.block_size / choice.rows) +
                              " columns (groups of " + x + ") per block (" + choice.why + ")");
    } else if (notes && choice.why.find("forced") != std::string::npos) {
      add_schedule_note(*notes, kernel.name, "tile block: one row (" + choice.why + ")");
    }
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
