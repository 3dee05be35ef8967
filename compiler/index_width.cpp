// index_width: the per-kernel decision and a mutator that narrows provably small i64 index
// expressions to i32, memoized per node.
#include "compiler/index_width.h"

#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "ir/bounds.h"
#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

/// Every reduce axis' start and end (start + extent) fit in int32. Walks parents before
/// children so that each reduce's axes are bound before its body (and nested reduces) are read.
bool reduce_bounds_fit(const Expr& e, ir::Bounds& bounds,
                       std::unordered_set<const ir::ExprNode*>& seen) {
  if (!seen.insert(e.get()).second) return true;
  if (auto* r = e.as<ir::ReduceNode>()) {
    for (const ir::Axis& axis : r->axes) {
      ir::Interval start = bounds.of(axis.start), extent = bounds.of(axis.extent);
      bool fits = start.fits_int32() && extent.is_bounded() && extent.max <= kInt32Max &&
                  start.max + std::max<int64_t>(extent.max, 0) <= kInt32Max;
      if (!fits) return false;
      bounds.bind_reduce_axis(axis);
    }
    return reduce_bounds_fit(r->body, bounds, seen);
  }
  bool fits = true;
  ir::for_each_child(
      e, [&](const Expr& child) { fits = fits && reduce_bounds_fit(child, bounds, seen); });
  return fits;
}

class Narrower : public ir::ExprMutator {
 public:
  explicit Narrower(ir::Bounds& bounds) : bounds_(bounds) {}

  /// The i32 form of an i64 expression whose value provably fits, else an undefined Expr.
  Expr narrow(const Expr& e) {
    if (e.dtype() != DType::kI64) return Expr();
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second.second;
    Expr r = bounds_.of(e).fits_int32() ? build(e) : Expr();
    memo_[e.get()] = {e, r};
    return r;
  }

  /// `narrow(e)` when it succeeds, else `e` with its subexpressions narrowed.
  Expr narrowed(const Expr& e) {
    Expr n = narrow(e);
    return n.defined() ? n : mutate(e);
  }

  /// narrowed(e), except that a bare variable
  /// stays as it is: the emitter declares variables in the kernel's index type already, and
  /// `x[i]` keeps reading as the stage's own point (the verifier's dataflow rule).
  Expr narrow_or_mutate(const Expr& e) { return e.kind() == ir::ExprKind::kVar ? e : narrowed(e); }

 protected:
  Expr visit_Load(const ir::LoadNode& node, const Expr& self) override {
    bool changed = false;
    std::vector<Expr> indices;
    for (const Expr& i : node.indices) {
      indices.push_back(narrow_or_mutate(i));
      changed |= !indices.back().same_as(i);
    }
    return changed ? ir::LoadNode::make(node.tensor, indices) : self;
  }
  Expr visit_Compare(const ir::CompareNode& node, const Expr& self) override {
    Expr a = narrow(node.a), b = narrow(node.b);
    if (a.defined() && b.defined()) return ir::CompareNode::make(node.op, a, b);
    return ExprMutator::visit_Compare(node, self);
  }
  Expr visit_Cast(const ir::CastNode& node, const Expr& self) override {
    if (ir::is_float(node.dtype)) {  // f32(i64 index) == f32(i32 index) when it fits
      Expr v = narrow(node.value);
      if (v.defined()) return ir::CastNode::make(node.dtype, v);
    }
    return ExprMutator::visit_Cast(node, self);
  }
  Expr visit_Reduce(const ir::ReduceNode& node, const Expr& self) override {
    bool changed = false;
    std::vector<ir::Axis> axes;
    for (const ir::Axis& axis : node.axes) {
      bounds_.bind_reduce_axis(axis);
      ir::Axis m{axis.var, narrowed(axis.start), narrowed(axis.extent)};
      changed |= !m.start.same_as(axis.start) || !m.extent.same_as(axis.extent);
      axes.push_back(std::move(m));
    }
    Expr body = mutate(node.body);
    changed |= !body.same_as(node.body);
    return changed ? ir::ReduceNode::make(node.op, std::move(axes), body, node.dtype) : self;
  }

 private:
  Expr build(const Expr& e) {
    switch (e.kind()) {
      case ir::ExprKind::kIntConst:
        return ir::IntConstNode::make(DType::kI32, e.as<ir::IntConstNode>()->value);
      case ir::ExprKind::kVar:
        return ir::CastNode::make(DType::kI32, e);
      case ir::ExprKind::kBinary: {
        auto* b = e.as<ir::BinaryNode>();
        Expr x = narrow(b->a), y = narrow(b->b);
        return x.defined() && y.defined() ? ir::BinaryNode::make(b->op, x, y) : Expr();
      }
      case ir::ExprKind::kUnary: {
        auto* u = e.as<ir::UnaryNode>();
        Expr x = narrow(u->operand);
        return x.defined() ? ir::UnaryNode::make(u->op, x) : Expr();
      }
      case ir::ExprKind::kSelect: {
        auto* s = e.as<ir::SelectNode>();
        Expr t = narrow(s->true_value), f = narrow(s->false_value);
        return t.defined() && f.defined() ? ir::SelectNode::make(mutate(s->condition), t, f)
                                          : Expr();
      }
      case ir::ExprKind::kCast: {
        auto* c = e.as<ir::CastNode>();
        if (c->value.dtype() == DType::kI32) return c->value;
        if (ir::is_float(c->value.dtype()) || c->value.dtype() == DType::kBool) {
          return ir::CastNode::make(DType::kI32, mutate(c->value));
        }
        return narrow(c->value);
      }
      default:
        return Expr();  // loads of i64 data, reductions: left alone
    }
  }

  ir::Bounds& bounds_;
  std::unordered_map<const ir::ExprNode*, std::pair<Expr, Expr>> memo_;
};

}  // namespace

IndexWidth kernel_index_width(const ir::Kernel& kernel) {
  // Loads and stores are in bounds, so the largest offset is storage_elements() - 1; every
  // partial sum of an offset's (non-negative) terms is at most that.
  for (const auto& tensors : {tensors_read(kernel), tensors_written(kernel)}) {
    for (const ir::Tensor& t : tensors) {
      if (t->storage_elements() - 1 > kInt32Max) return IndexWidth::k64;
    }
  }
  if (kernel.row_axes > 0) {
    // Row-group kernels: row indices up to rows + R, a stage's strided index up to R P + block.
    RowGroupShape shape = row_group_shape(kernel);
    const int64_t per_block = kernel.grid.rows_per_block;
    if (shape.rows + per_block > kInt32Max) return IndexWidth::k64;
    for (int64_t points : shape.stage_points) {
      if (shape.rows * points > kInt32Max ||
          per_block * points + kernel.grid.block_size > kInt32Max)
        return IndexWidth::k64;
    }
  } else {
    std::vector<int64_t> extents = domain_extents(kernel);
    for (int64_t e : extents) {
      if (e > kInt32Max) return IndexWidth::k64;
    }
    GridMapping m = grid_mapping(kernel);
    LaunchDims dims = launch_dims(kernel);
    if (!m.linear_axes.empty() && m.linear_points + int64_t{dims.grid[0]} * m.lanes > kInt32Max)
      return IndexWidth::k64;
  }
  ir::Bounds bounds;
  for (const ir::Stage& stage : kernel.stages) {
    bounds.bind_domain(stage.domain);
    std::unordered_set<const ir::ExprNode*> seen;
    for (const Expr& e : stage_expressions(stage)) {
      if (!reduce_bounds_fit(e, bounds, seen)) return IndexWidth::k64;
    }
  }
  return IndexWidth::k32;
}

ir::Stage narrow_stage_index_math(const ir::Stage& stage, ir::Bounds& bounds) {
  bounds.bind_domain(stage.domain);
  Narrower narrower(bounds);
  ir::Stage narrowed = map_stage(stage, [&](const Expr& e) { return narrower.mutate(e); });
  for (size_t k = 0; k < stage.indices.size(); ++k)
    narrowed.indices[k] = narrower.narrow_or_mutate(stage.indices[k]);
  narrowed.domain = stage.domain;  // domain extents stay as the emitter decodes them
  return narrowed;
}

ir::Program narrow_index_math(const ir::Program& program) {
  std::vector<IndexWidth> widths;
  return narrow_index_math_recording(program, widths);
}

ir::Program narrow_index_math_recording(const ir::Program& program,
                                        std::vector<IndexWidth>& widths) {
  ir::Program out = program;
  widths.clear();
  for (ir::Kernel& kernel : out.kernels) {
    const IndexWidth width =
        kernel.stages.empty() ? IndexWidth::k64 : kernel_index_width(kernel);
    widths.push_back(width);
    if (width != IndexWidth::k32) continue;
    ir::Bounds bounds;
    for (ir::Stage& stage : kernel.stages) stage = narrow_stage_index_math(stage, bounds);
  }
  return same_program(out, program) ? program : out;
}

}  // namespace adjoint::compiler
