// KernelEmitter, generic kernels (ir/dynamic_sizes.h): the size parameters of the signature and
// the body's grid. Every axis is linear (compiler/lower_generic.h proves coverage for nothing
// else): each thread takes linear indices blockIdx.x * B + threadIdx.x, then steps by the
// grid's thread count while below the runtime count, and decodes the axes innermost first with
// / and % by the runtime extents. With a group of R points (GridConfig tile_points on the
// innermost axis, compiler/lower_generic.h), the innermost axis counts ceil(extent / R) groups and
// each thread computes the group's R consecutive points behind nested tail guards, so that the
// decode and the outer axes' windows are computed once per group. The stages are emitted as for
// specialized kernels.
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
  const int64_t group = grouped ? grid.tile_points : 1;
  // The innermost axis counts groups of `group` points: ceil(extent / group) of them.
  std::vector<std::string> extents;
  for (const ir::Axis& axis : domain) extents.push_back(size_text(axis.extent));
  std::string inner_groups;
  if (grouped) {
    inner_groups = names_.fresh("row_groups");
    out_->line("const " + type + " " + inner_groups + " = (" + extents.back() + " + " +
               std::to_string(group - 1) + ") / " + std::to_string(group) + ";");
  }
  std::string points;
  for (size_t i = 0; i < domain.size(); ++i) {
    const std::string& factor = grouped && i + 1 == domain.size() ? inner_groups : extents[i];
    points += (points.empty() ? "" : " * ") + std::string("(") + type + ")" + factor;
  }
  const std::string count = names_.fresh(grouped ? "groups" : "points");
  out_->line("const " + type + " " + count + " = " + (points.empty() ? "1" : points) + ";");
  const std::string block = std::to_string(grid.block_size);
  const std::string linear = names_.fresh("linear");
  CodeWriter::Block loop = out_->block(
      "for (" + type + " " + linear + " = (" + type + ")blockIdx.x * " + block +
      " + threadIdx.x; " + linear + " < " + count + "; " + linear + " += (" + type +
      ")gridDim.x * " + block + ") {");
  // Mixed-radix decode, innermost first, once per thread (per group of points).
  std::string rest = linear;
  std::string first;  // the group's first point on the innermost axis
  for (size_t i = domain.size(); i-- > 0;) {
    const bool inner_group = grouped && i + 1 == domain.size();
    const std::string name = inner_group ? names_.fresh("row_group") : names[i];
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
  GridMapping mapping;  // no serial axes: emit_points emits the stages once per point
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
