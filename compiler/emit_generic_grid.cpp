// KernelEmitter, generic kernels (ir/dynamic_sizes.h): the size parameters of the signature and
// the body's grid. Every axis is linear (compiler/lower_generic.h proves coverage for nothing
// else): each thread takes linear indices blockIdx.x * B + threadIdx.x, then steps by the
// grid's thread count while below the runtime count, and decodes the axes innermost first with
// / and % by the runtime extents. With a group of R points (GridConfig tile_points on the
// innermost axis, compiler/lower_generic.h), the innermost axis counts ceil(extent / R) groups and
// each thread computes the group's R consecutive points behind nested tail guards, so that the
// decode and the outer axes' windows are computed once per group. A warp-cooperative kernel
// (reduction_lanes 32) runs the same loop over warps instead of threads, its lanes striding over
// the reduction (emit_cooperative_reduce) and lane 0 storing. The stages are emitted as for
// specialized kernels.
#include <algorithm>

#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"
#include "ir/printer.h"

namespace adjoint::compiler {

std::vector<std::string> KernelEmitter::bind_size_params(CompiledKernel& result) {
  std::vector<std::string> declarations;
  result.size_param_bytes = index_type_ == "int" ? 4 : 8;
  for (const ir::SizeParam& size : program_.sizes) {
    std::string name = names_.fresh(size.var.name_hint());
    var_names_[size.var.get()] = name;
    var_levels_[size.var.get()] = 0;
    bounds_.bind(size.var.get(), ir::Interval{size.lower_bound, size.upper_bound});
    result.size_params.push_back(size.source);
    declarations.push_back("const " + index_type_ + " " + name);
  }
  return declarations;
}

std::string KernelEmitter::size_text(const ir::Expr& e) {
  if (auto* c = e.as<ir::IntConstNode>()) return std::to_string(c->value);
  if (auto* v = e.as<ir::VarNode>()) {
    referenced_.insert(var_names_.at(v));
    return var_names_.at(v);
  }
  if (auto* b = e.as<ir::BinaryNode>(); b && b->op == ir::BinaryOp::kMul)
    return "(" + size_text(b->a) + " * " + size_text(b->b) + ")";
  throw Error("emit_cuda: '" + ir::to_string(e) + "' is not a product of sizes",
              ErrorCode::kInternal);
}

void KernelEmitter::emit_generic_body() {
  const std::vector<ir::Axis>& domain = kernel_.stages.front().domain;
  const std::string& type = index_type_;
  std::vector<std::string> names;
  for (const ir::Axis& axis : domain) names.push_back(names_.fresh(axis.var.name_hint()));
  const ir::GridConfig& grid = kernel_.grid;
  const bool grouped = !domain.empty() && grid.tile_points > 1 &&
                       grid.tile_axis == static_cast<int>(domain.size()) - 1;
  // A vector group (GridConfig::vector_width V): the innermost extent is a constant multiple of
  // V (check_generic_coverage), so the innermost axis counts extent / V whole groups and the
  // stages are emitted as in a specialized vector-group kernel (emit_vector_stage: spans,
  // one reduction loop for the group's points, group stores).
  const bool vectored = !domain.empty() && grid.vector_width > 1;
  const int64_t group = grouped ? grid.tile_points : vectored ? grid.vector_width : 1;
  // A thread tile of R points on another axis (vector groups only; lower_generic puts it on a
  // runtime axis): that axis counts ceil(extent / R) tiles, the tile's points share one loop
  // of each reduction (their common loads read once), and the last tile is partial: its points
  // past the runtime extent compute at extent - 1 and are not stored (ThreadTile).
  const bool tiled = vectored && grid.tile_points > 1 && grid.tile_axis >= 0 &&
                     grid.tile_axis + 1 < static_cast<int>(domain.size());
  // The innermost axis counts groups of `group` points: ceil(extent / group) of them.
  std::vector<std::string> extents;
  for (const ir::Axis& axis : domain) extents.push_back(size_text(axis.extent));
  std::string tile_extent, tile_index;
  if (tiled) {
    tile_extent = extents[grid.tile_axis];
    const std::string tiles = names_.fresh("tiles");
    out_->line("const " + type + " " + tiles + " = (" + tile_extent + " + " +
               std::to_string(grid.tile_points - 1) + ") / " + std::to_string(grid.tile_points) +
               ";");
    extents[grid.tile_axis] = tiles;  // the decode counts tiles on that axis
    tile_index = names_.fresh(names[grid.tile_axis] + "_tile");
  }
  // The decode's name of axis i: the tile index on the tile axis.
  auto decoded_name = [&](size_t i) { return tiled && static_cast<int>(i) == grid.tile_axis ? tile_index : names[i]; };
  std::string inner_groups;
  if (grouped || vectored) {
    inner_groups = names_.fresh("row_groups");
    out_->line("const " + type + " " + inner_groups + " = (" + extents.back() + " + " +
               std::to_string(group - 1) + ") / " + std::to_string(group) + ";");
  }
  std::string points;
  for (size_t i = 0; i < domain.size(); ++i) {
    const std::string& factor =
        (grouped || vectored) && i + 1 == domain.size() ? inner_groups : extents[i];
    points += (points.empty() ? "" : " * ") + std::string("(") + type + ")" + factor;
  }
  const std::string count = names_.fresh(grouped || vectored ? "groups" : "points");
  out_->line("const " + type + " " + count + " = " + (points.empty() ? "1" : points) + ";");
  // A warp-cooperative kernel (GridConfig::reduction_lanes 32) counts warps: every lane of a
  // warp takes the same points, so the loop and every guard in it are warp-uniform.
  const int lanes = std::max(grid.reduction_lanes, 1);
  const std::string block = std::to_string(grid.block_size / lanes);
  const std::string thread =
      lanes == 1 ? std::string("threadIdx.x") : "threadIdx.x / " + std::to_string(lanes);
  if (lanes > 1) {
    lane_ = names_.fresh("lane");
    out_->line("const int " + lane_ + " = threadIdx.x % " + std::to_string(lanes) +
               ";  // the warp's lanes share each point");
  }
  const std::string linear = names_.fresh("linear");
  CodeWriter::Block loop = out_->block(
      "for (" + type + " " + linear + " = (" + type + ")blockIdx.x * " + block + " + " + thread +
      "; " + linear + " < " + count + "; " + linear + " += (" + type + ")gridDim.x * " + block +
      ") {");
  // Mixed-radix decode, innermost first, once per thread (per group of points). With
  // interleave_size_axes, the innermost axis' groups split into warps of 32 (g = outer * 32 +
  // inner) and the runtime axes (a prefix of the domain) are decoded between them.
  std::string first;  // the group's first point on the innermost axis
  size_t dynamic_prefix = 0;
  while (dynamic_prefix < domain.size() && !domain[dynamic_prefix].extent.as<ir::IntConstNode>())
    ++dynamic_prefix;
  if (options_.interleave_size_axes && vectored && dynamic_prefix > 0 &&
      dynamic_prefix + 1 < domain.size()) {
    const int64_t groups_inner =
        domain.back().extent.as<ir::IntConstNode>()->value / grid.vector_width;
    std::string rest = linear;
    const std::string inner = names_.fresh("warp_group"), outer = names_.fresh("warp_row");
    out_->line("const " + type + " " + inner + " = " + rest + " % 32;");
    std::string next = names_.fresh("rest");
    out_->line("const " + type + " " + next + " = " + rest + " / 32;");
    rest = next;
    std::vector<size_t> order;  // innermost first: the runtime axes, then the static ones
    for (size_t i = dynamic_prefix; i-- > 0;) order.push_back(i);
    order.push_back(domain.size() - 1);  // the warps of the innermost axis
    for (size_t i = domain.size() - 1; i-- > dynamic_prefix;) order.push_back(i);
    for (size_t n = 0; n < order.size(); ++n) {
      const size_t i = order[n];
      const bool warps = i + 1 == domain.size();
      const std::string name = warps ? outer : decoded_name(i);
      const std::string radix = warps ? std::to_string(groups_inner / 32) : extents[i];
      if (n + 1 == order.size()) {
        out_->line("const " + type + " " + name + " = " + rest + ";");
      } else {
        out_->line("const " + type + " " + name + " = " + rest + " % " + radix + ";");
        next = names_.fresh("rest");
        out_->line("const " + type + " " + next + " = " + rest + " / " + radix + ";");
        rest = next;
      }
    }
    first = names_.fresh("row_group");
    out_->line("const " + type + " " + first + " = " + outer + " * 32 + " + inner + ";");
  } else {
    std::string rest = linear;
    for (size_t i = domain.size(); i-- > 0;) {
      const bool inner_group = (grouped || vectored) && i + 1 == domain.size();
      const std::string name = inner_group ? names_.fresh("row_group") : decoded_name(i);
      const std::string radix = inner_group ? inner_groups : extents[i];
      if (i == 0) {
        out_->line("const " + type + " " + name + " = " + rest + ";");
      } else {
        out_->line("const " + type + " " + name + " = " + rest + " % " + radix + ";");
        std::string next = names_.fresh("rest");
        out_->line("const " + type + " " + next + " = " + rest + " / " + radix + ";");
        rest = next;
      }
      if (inner_group) first = name;
    }
  }
  GridMapping mapping;  // no serial axes: emit_points emits the stages once per point
  if (vectored) {
    const ir::Axis& inner = domain.back();
    const int64_t extent = inner.extent.as<ir::IntConstNode>()->value;
    VectorGroup v;
    v.axis = static_cast<int>(domain.size()) - 1;
    v.width = grid.vector_width;
    v.extent = extent;
    v.base = names_.fresh(names.back() + "_base");
    v.base_var = ir::Var(v.base);
    v.element = names_.fresh("e");
    v.offset = names_.fresh("j");
    var_names_[v.base_var.get()] = v.base;
    var_levels_[v.base_var.get()] = 0;
    bounds_.bind(v.base_var.get(), ir::Interval{0, extent - grid.vector_width});
    out_->line("const " + type + " " + v.base + " = " + first + " * " +
               std::to_string(grid.vector_width) + ";");
    vector_ = std::move(v);
    if (tiled) {
      ThreadTile tile;
      tile.axis = grid.tile_axis;
      tile.points = grid.tile_points;
      tile.base = names_.fresh(names[grid.tile_axis] + "_base");
      tile.base_var = ir::Var(tile.base);
      tile.index = names_.fresh("r");
      if (auto* constant = domain[grid.tile_axis].extent.as<ir::IntConstNode>()) {
        tile.extent = constant->value;  // a static axis: only the last tile may be partial
        tile.padded = (tile.extent + grid.tile_points - 1) / grid.tile_points * grid.tile_points;
      } else {
        tile.runtime_extent = tile_extent;
        const ir::Interval range = bounds_.of(domain[grid.tile_axis].extent);
        tile.extent = range.has_max() ? range.max : 0;
        tile.padded = tile.extent + grid.tile_points;
      }
      var_names_[tile.base_var.get()] = tile.base;
      var_levels_[tile.base_var.get()] = 0;
      bounds_.bind(tile.base_var.get(), ir::Interval{0, std::max<int64_t>(tile.extent - 1, 0)});
      out_->line("const " + type + " " + tile.base + " = " + tile_index + " * " +
                 std::to_string(grid.tile_points) + ";");
      tile_ = std::move(tile);
    }
    emit_points(mapping, {}, names);
    return;
  }
  if (!grouped) {
    emit_points(mapping, {}, names);
    return;
  }
  // The group's points, each guarded against the row's tail. The guards nest (a point past
  // the end is followed by points past the end), so each point's code dominates the next one's
  // and the compiler computes what they share (the outer axes' windows, the shared window edge
  // of neighbours) once.
  std::vector<CodeWriter::Block> guards;
  for (int64_t v = 0; v < group; ++v) {
    const std::string point = names_.fresh(domain.back().var.name_hint());
    out_->line("const " + type + " " + point + " = " + first + " * " + std::to_string(group) +
               " + " + std::to_string(v) + ";");
    guards.push_back(out_->block("if (" + point + " < " + extents.back() + ") {"));
    names.back() = point;
    emit_points(mapping, {}, names);
  }
  while (!guards.empty()) guards.pop_back();
}

}  // namespace adjoint::compiler
