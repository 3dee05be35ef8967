// KernelEmitter, generic kernels (ir/dynamic_sizes.h): the size parameters of the signature and
// the body's grid. Every axis is linear (compiler/lower_generic.h proves coverage for nothing
// else): each thread takes linear indices blockIdx.x * B + threadIdx.x, then steps by the
// grid's thread count while below the runtime point count, and decodes the axes innermost
// first with / and % by the runtime extents. The stages are emitted as for specialized kernels.
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
    bounds_.bind(size.var.get(), Interval{size.lower_bound, size.upper_bound});
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
  std::string points;
  for (const ir::Axis& axis : domain)
    points += (points.empty() ? "" : " * ") + std::string("(") + type + ")" + size_text(axis.extent);
  const std::string count = names_.fresh("points");
  out_->line("const " + type + " " + count + " = " + (points.empty() ? "1" : points) + ";");
  const std::string block = std::to_string(kernel_.grid.block_size);
  const std::string linear = names_.fresh("linear");
  CodeWriter::Block loop = out_->block(
      "for (" + type + " " + linear + " = (" + type + ")blockIdx.x * " + block +
      " + threadIdx.x; " + linear + " < " + count + "; " + linear + " += (" + type +
      ")gridDim.x * " + block + ") {");
  std::string rest = linear;
  for (size_t i = domain.size(); i-- > 0;) {
    std::string extent = size_text(domain[i].extent);
    if (i == 0) {
      out_->line("const " + type + " " + names[i] + " = " + rest + ";");
    } else {
      out_->line("const " + type + " " + names[i] + " = " + rest + " % " + extent + ";");
      std::string next = names_.fresh("rest");
      out_->line("const " + type + " " + next + " = " + rest + " / " + extent + ";");
      rest = next;
    }
  }
  GridMapping mapping;  // no serial axes: emit_points emits the stages once per point
  emit_points(mapping, {}, names);
}

}  // namespace adjoint::compiler
