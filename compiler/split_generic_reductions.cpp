// split_generic_reductions: eligibility, G, the partials kernel and the ordered combine.
#include "compiler/split_generic_reductions.h"

#include <optional>
#include <string>
#include <vector>

#include "compiler/program_utils.h"
#include "ir/builder.h"
#include "ir/printer.h"

namespace adjoint::compiler {
namespace {

using ir::Expr;

Expr index_constant(int64_t v) { return ir::IntConstNode::make(ir::DType::kI64, v); }

Expr binary(ir::BinaryOp op, Expr a, Expr b) { return ir::BinaryNode::make(op, std::move(a), std::move(b)); }

/// True when `e` names one of the program's sizes.
bool depends_on_sizes(const Expr& e, const ir::Program& program) {
  for (const ir::SizeParam& s : program.sizes)
    if (depends_on(e, s.var.get())) return true;
  return false;
}

/// The split axis of `r` (see the header), or nullopt with the reason in `why`.
std::optional<size_t> split_axis(const ir::ReduceNode& r, const ir::Program& program,
                                 std::string& why) {
  if (!ir::is_sum(r.op)) {
    why = "not a sum";
    return std::nullopt;
  }
  for (size_t a = r.axes.size(); a-- > 0;) {
    const ir::Axis& axis = r.axes[a];
    if (!depends_on_sizes(axis.extent, program)) continue;
    auto* start = axis.start.as<ir::IntConstNode>();
    bool named = false;
    for (const ir::Axis& other : r.axes) {
      named = named || depends_on(other.start, axis.var.get()) ||
              depends_on(other.extent, axis.var.get());
    }
    if (start && start->value == 0 && !named) return a;
  }
  why = "no axis from 0 whose extent is a runtime size";
  return std::nullopt;
}

}  // namespace

ir::Program split_generic_reductions(const ir::Program& program, const GenericSplitOptions& options,
                                     ScheduleNotes* notes) {
  if (!options.enabled || program.sizes.empty()) return program;
  ir::Program out = program;
  out.kernels.clear();
  bool changed = false;
  for (const ir::Kernel& kernel : program.kernels) {
    auto keep = [&] { out.kernels.push_back(kernel); };
    if (kernel.grid.is_set || kernel.stages.size() != 1 ||
        kernel.stages.front().kind != ir::StageKind::kCompute) {
      keep();
      continue;
    }
    const ir::Stage& stage = kernel.stages.front();
    const ir::ReduceNode* r = stage.value.as<ir::ReduceNode>();
    bool static_domain = true;
    int64_t points = 1;
    for (const ir::Axis& a : stage.domain) {
      auto* e = a.extent.as<ir::IntConstNode>();
      static_domain = static_domain && e && a.start.as<ir::IntConstNode>();
      if (e) points *= std::max<int64_t>(e->value, 1);
    }
    std::string why;
    std::optional<size_t> axis;
    if (r && static_domain) axis = split_axis(*r, program, why);
    if (!axis) {
      if (r && notes && static_domain)
        add_schedule_note(*notes, kernel.name, stage.target->name + ": not split (" + why + ")");
      keep();
      continue;
    }
    int64_t partials = 2;
    while (partials * 2 <= options.max_partials && points * partials < options.target_threads)
      partials *= 2;

    // partials[g, p...] = reduce over (other axes, u < (E - g + G - 1) / G) of body[s := g + G u]
    const ir::Axis& split = r->axes[*axis];
    ir::Var g("g"), step(split.var.name_hint() + "_step");
    std::vector<ir::Var> vars{g};
    std::vector<int64_t> shape{partials};
    Expr body = r->body;
    std::vector<ir::Axis> axes = r->axes;
    for (const ir::Axis& a : stage.domain) {
      ir::Var v(a.var.name_hint());
      vars.push_back(v);
      shape.push_back(a.extent.as<ir::IntConstNode>()->value);
      body = substitute(body, a.var.get(), v);
      for (ir::Axis& other : axes) {
        other.start = substitute(other.start, a.var.get(), v);
        other.extent = substitute(other.extent, a.var.get(), v);
      }
    }
    const Expr G = index_constant(partials);
    body = substitute(body, split.var.get(),
                      binary(ir::BinaryOp::kAdd, g, binary(ir::BinaryOp::kMul, step, G)));
    const Expr trips = binary(
        ir::BinaryOp::kDiv,
        binary(ir::BinaryOp::kAdd, binary(ir::BinaryOp::kSub, axes[*axis].extent, g),
               index_constant(partials - 1)),
        G);
    axes[*axis] = ir::Axis{step, index_constant(0), trips};
    ir::Tensor partial_tensor =
        ir::make_tensor(unique_tensor_name(out, stage.target->name + "_partials"), r->dtype, shape,
                        ir::TensorRole::kTemporary);
    out.temporaries.push_back(partial_tensor);
    ir::Kernel partials_kernel{kernel.name + "_" + stage.target->name + "_partials",
                               {ir::compute(partial_tensor, ir::over(partial_tensor, vars),
                                            ir::ReduceNode::make(r->op, axes, body, r->dtype))},
                               {}};
    // target[p...] = reduce over g < G of partials[g, p...], in order
    ir::Var combine("g");
    std::vector<Expr> indices{combine};
    for (const ir::Axis& a : stage.domain) indices.push_back(a.var);
    ir::Kernel rewritten = kernel;
    rewritten.stages.front().value = ir::ReduceNode::make(
        r->op, {ir::Axis{combine, index_constant(0), G}},
        ir::LoadNode::make(partial_tensor, indices), r->dtype);
    if (notes) {
      const std::string extent = ir::to_string(split.extent);
      add_schedule_note(*notes, partials_kernel.name,
                        "generic split reduction, stage 1 of 2: " + std::to_string(partials) +
                            " partials of " + stage.target->name + " per point, partial g sums " +
                            split.var.name_hint() + " = g, g + " + std::to_string(partials) +
                            ", ... below the runtime extent " + extent +
                            " (the same G for every size)");
      add_schedule_note(*notes, kernel.name,
                        stage.target->name + ": reduction over the runtime extent " + extent +
                            ", " + std::to_string(points) + " points: split into G=" +
                            std::to_string(partials) + " strided partials over " +
                            split.var.name_hint() + " (kernel " + partials_kernel.name +
                            "), combined in order g = 0.." + std::to_string(partials - 1) +
                            "; points x G reach " + std::to_string(points * partials) +
                            " (target " + std::to_string(options.target_threads) + ")");
    }
    out.kernels.push_back(std::move(partials_kernel));
    out.kernels.push_back(std::move(rewritten));
    changed = true;
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
