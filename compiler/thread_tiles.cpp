// thread_tiles: scores each candidate axis of a kernel by the bytes a tile along it saves per
// reduction iteration, picks R, and records the choice and its reason (see the header).
#include "compiler/thread_tiles.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "compiler/program_utils.h"
#include "compiler/vector_groups.h"
#include "ir/error.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::Expr;

int64_t trips(const ir::ReduceNode& r) {
  int64_t n = 1;
  for (const ir::Axis& a : r.axes) {
    if (auto* c = a.extent.as<ir::IntConstNode>()) n *= std::max<int64_t>(c->value, 1);
  }
  return n;
}

/// The domain axis the vector group runs along: the innermost of the first target's layout
/// (smallest stride, later axes first on ties), as grid_mapping orders linear axes.
size_t innermost_axis(const ir::Kernel& kernel) {
  const std::vector<int64_t>& strides = kernel.stages.front().target->strides;
  size_t best = 0;
  for (size_t j = 1; j < strides.size(); ++j) {
    if (strides[j] <= strides[best]) best = j;
  }
  return best;
}

bool moves_with(const Expr& e, const ir::ReduceNode& r) {
  for (const ir::Axis& a : r.axes) {
    if (depends_on(e, a.var.get())) return true;
  }
  return false;
}

/// Bytes per reduction iteration that a tile along `axis` reads once instead of once per tile
/// point: loads in the outermost reductions that move with the reduction but not with the
/// axis (x 8 when they are contiguous along the innermost axis, as a group reads V of them),
/// 0 when some reduction's bounds move with the axis (its points could not share a loop).
int64_t shared_bytes(const ir::Kernel& kernel, size_t axis, size_t inner) {
  int64_t bytes = 0;
  for (const ir::Stage& stage : kernel.stages) {
    const ir::VarNode* a = stage.domain[axis].var.get();
    const ir::VarNode* x = stage.domain[inner].var.get();
    for (const ir::ReduceNode* r : outermost_reductions(stage.value)) {
      for (const ir::Axis& ra : r->axes) {
        if (depends_on(ra.start, a) || depends_on(ra.extent, a) || depends_on(ra.start, x) ||
            depends_on(ra.extent, x))
          return 0;
      }
      std::vector<const ir::ExprNode*> seen;
      for_each_node(r->body, [&](const Expr& node) {
        auto* load = node.as<ir::LoadNode>();
        if (!load || !moves_with(node, *r) || depends_on(node, a)) return;
        if (std::find(seen.begin(), seen.end(), node.get()) != seen.end()) return;
        seen.push_back(node.get());
        const bool along_x = !load->indices.empty() && load->tensor->strides.back() == 1 &&
                             depends_on(load->indices.back(), x);
        bytes += ir::dtype_bytes(load->tensor->dtype) * (along_x ? 8 : 1);
      });
    }
  }
  return bytes;
}

/// Why the kernel's shape rules a tile out, or empty.
std::string shape_forbids_tile(const ir::Kernel& kernel) {
  if (kernel.grid.is_set) return "its grid is explicit";
  if (kernel.grid.reduction_lanes > 1) return "its warps share each point's reductions";
  if (kernel.grid.block_tokens > 0) return "it has a block reduction schedule";
  if (kernel.stages.empty() || kernel.stages.front().domain.size() < 2)
    return "its domain has fewer than two axes";
  for (const ir::Stage& stage : kernel.stages) {
    if (stage.kind != ir::StageKind::kCompute) return "a stage scatters";
  }
  return "";
}

}  // namespace

void check_thread_tile_options(const ThreadTileOptions& options) {
  const int r = options.forced_points;
  if (r < -1 || r == 1 || r > 64) {
    throw Error("thread_tile: expected -1 (derive), 0 (never) or a tile of 2 to 64 points, got " +
                    std::to_string(r),
                ErrorCode::kInvalidArgument);
  }
}

TileChoice choose_thread_tile(const ir::Kernel& kernel, const ThreadTileOptions& options) {
  TileChoice choice;
  if (std::string why = shape_forbids_tile(kernel); !why.empty()) {
    choice.why = why;
    return choice;
  }
  int64_t longest = 0;
  for (const ir::Stage& stage : kernel.stages) {
    for (const ir::ReduceNode* r : outermost_reductions(stage.value))
      longest = std::max(longest, trips(*r));
  }
  if (longest == 0) {
    choice.why = "no reductions";
    return choice;
  }
  if (options.forced_points == 0) {
    choice.why = "tiles switched off by ADJOINT_TUNE_THREAD_TILE=0";
    return choice;
  }
  if (options.forced_points < 0 && longest < options.min_trips) {
    choice.why = "its reductions are short (fewer than " + std::to_string(options.min_trips) +
                 " iterations)";
    return choice;
  }
  const std::vector<int64_t> extents = domain_extents(kernel);
  const size_t inner = innermost_axis(kernel);
  int64_t points = 1;
  for (int64_t e : extents) points *= e;
  // A tile of r points on an axis of this extent: r divides it, or (partial tiles) the last
  // tile's padding, ceil(extent / r) r - extent, is at most extent / 8.
  auto fits = [&](int64_t extent, int64_t r) {
    if (extent % r == 0) return true;
    return options.partial_tiles && r < extent && (r - extent % r) * 8 <= extent;
  };
  // The tile an axis of this extent gets: all of it up to max_points, else 24 (when that takes
  // it in at most few_parts parts), 16, 8, 4 or 2 dividing it, else (partial tiles) the largest
  // of 16, 8, 4, 2 that fits.
  auto natural_tile = [&](int64_t extent) -> int64_t {
    if (extent <= options.max_points) return extent;
    for (int64_t candidate : {24, 16, 8, 4, 2}) {
      if (candidate == 24 && (options.few_parts < 1 || extent > 24 * options.few_parts)) continue;
      if (candidate <= options.max_points && extent % candidate == 0) return candidate;
    }
    for (int64_t candidate : {16, 8, 4, 2}) {
      if (candidate <= options.max_points && fits(extent, candidate)) return candidate;
    }
    return 1;
  };
  // Score: bytes per iteration saved, (R - 1) of every R reads of the shared loads.
  int64_t best_bytes = 0, best_score = 0;
  for (size_t a = 0; a < extents.size(); ++a) {
    if (a == inner || extents[a] < 2) continue;
    const int64_t bytes = shared_bytes(kernel, a, inner);
    const int64_t score = bytes * (natural_tile(extents[a]) - 1);
    if (score > best_score) {
      best_score = score;
      best_bytes = bytes;
      choice.axis = static_cast<int>(a);
    }
  }
  if (choice.axis < 0) {
    choice.why = "every load of its reductions moves with every axis: a tile would share nothing";
    return choice;
  }
  const int64_t extent = extents[choice.axis];
  const std::string name = kernel.stages.front().domain[choice.axis].var.name_hint();
  int64_t r = 1;
  if (options.forced_points >= 2) {
    const int64_t forced = options.forced_points;
    if (extent % forced == 0 || (options.partial_tiles && forced < extent)) r = forced;
    choice.why = "R=" + std::to_string(forced) + " forced by ADJOINT_TUNE_THREAD_TILE" +
                 (r == 1 ? ", which does not divide " + name + "'s " + std::to_string(extent)
                         : "");
  } else {
    r = natural_tile(extent);
    // Points per tile: the tile count along the axis (the last tile may be partial) times the
    // other axes' points.
    auto per_tile = [&](int64_t t) { return points / extent * ((extent + t - 1) / t); };
    while (r > 1 && per_tile(r) < options.min_threads && r % 2 == 0 && fits(extent, r / 2))
      r /= 2;
    if (r > 1 && per_tile(r) < options.min_threads) r = 1;
    // An axis taken in parts: the vector width first (see the header).
    std::string halved;
    const bool few_parts = options.few_parts > 0 && r > 1 && extent <= r * options.few_parts;
    if (options.prefer_vector && r > 1 && r < extent && !few_parts) {
      ir::Kernel linear = kernel;  // derive_grid's bindings: every axis linear
      linear.grid.bindings.assign(extents.size(), ir::AxisBinding::kLinear);
      const int v = derived_vector_width(
          linear, options.group_bytes != 0 ? options.group_bytes : kDefaultGroupBytes);
      const int64_t before = r;
      while (r > 2 && r * v > options.max_accumulators && r % 2 == 0 && fits(extent, r / 2))
        r /= 2;
      if (r != before)
        halved = "; " + std::to_string(before) + " halved to " + std::to_string(r) +
                 " so that its vector groups of " + std::to_string(v) + " fit " +
                 std::to_string(options.max_accumulators) + " accumulators";
    }
    choice.why = r > 1 ? std::to_string(best_bytes) + " bytes per reduction iteration do not move "
                         "with " + name + ": read once for the tile, not once per point"
                       : "too few points (" + std::to_string(points) + ") to tile " + name +
                             " and keep " + std::to_string(options.min_threads) + " threads";
    choice.why += halved;
  }
  if (r > 1 && extent % r != 0)
    choice.why += "; the last of its " + std::to_string((extent + r - 1) / r) + " tiles is partial (" +
                  std::to_string(extent % r) + " of " + std::to_string(r) + " points of " + name +
                  "'s " + std::to_string(extent) + ")";
  if (r < 2) {
    choice.axis = -1;
    return choice;
  }
  choice.points = static_cast<int>(r);
  return choice;
}

int64_t tile_accumulator_limit(const ir::Kernel& kernel, int axis, int64_t points,
                               const ThreadTileOptions& options) {
  const int64_t base = options.max_accumulators;
  if (points <= 1 || axis < 0 || options.long_tile_accumulators <= base || kernel.stages.empty())
    return base;
  const std::vector<int64_t> extents = domain_extents(kernel);
  if (static_cast<size_t>(axis) >= extents.size()) return base;
  const int64_t extent = extents[axis];
  const int64_t parts = std::max(options.few_parts, 1);
  if (extent > points * parts) return base;  // the tile takes its axis in many parts
  int64_t longest = 0;
  for (const ir::Stage& stage : kernel.stages) {
    for (const ir::ReduceNode* r : outermost_reductions(stage.value))
      longest = std::max(longest, trips(*r));
  }
  return longest > options.long_trips ? options.long_tile_accumulators : base;
}

ir::Program choose_thread_tiles(const ir::Program& program, const ThreadTileOptions& options,
                                ScheduleNotes* notes) {
  check_thread_tile_options(options);
  ir::Program out = program;
  bool changed = false;
  for (ir::Kernel& kernel : out.kernels) {
    if (kernel.grid.tile_points > 1) continue;
    TileChoice choice = choose_thread_tile(kernel, options);
    const bool worth_saying = choice.points > 1 || choice.why.find("ADJOINT_TUNE") != std::string::npos ||
                              choice.why.find("too few points") != std::string::npos;
    if (choice.points > 1) {
      kernel.grid.tile_axis = choice.axis;
      kernel.grid.tile_points = choice.points;
      changed = true;
      if (notes)
        add_schedule_note(*notes, kernel.name,
                          "thread tile: " + std::to_string(choice.points) + " points of " +
                              kernel.stages.front().domain[choice.axis].var.name_hint() +
                              " per thread, one reduction loop for all of them (" + choice.why +
                              ")");
    } else if (notes && worth_saying) {
      add_schedule_note(*notes, kernel.name, "no thread tile (" + choice.why + ")");
    }
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
