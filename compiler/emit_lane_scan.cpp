// KernelEmitter, lane scans (EmitOptions::lane_scan: the binned gather's offsets,
// lower_scatter_to_binned_gather.h). In a kernel whose grid gives every warp the 32 consecutive
// points [32w, 32w + 32) of a 1-d domain (emit_body checks it and sets lane_scan_point_), two
// integer sums of the IR become warp code instead of a serial loop per point:
// - sum over j in [32 (i / 32), i) of x[j], i the point: the exclusive scan of x over the
//   warp's lanes. Lane l (= i % 32) loads x[i] once, an inclusive scan adds the values of lanes
//   l - 1, l - 2, l - 4, l - 8, l - 16 (__shfl_up_sync), and the lane's own value comes off
//   again: one load per point instead of up to 31.
// - a sum whose bounds depend on i only through i / c, c a multiple of 32 (the upper levels'
//   digits): one value for the whole warp, so its lanes stride over the iterations and a
//   __shfl_xor_sync butterfly adds their parts, instead of every lane repeating the whole loop.
// Integer sums are exact and associative: every lane's result is the serial loop's, bit for
// bit. Every lane of the warp reaches these shuffles: the point's code has no branch around
// them, and the domain's warps are whole (emit_body's early return takes a warp at once).
// Any other reduction of the kernel keeps the serial loop.
#include "compiler/kernel_emitter.h"
#include "ir/equality.h"
#include "ir/printer.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

/// `e` is the point variable, or a cast of it (narrow_index_math's i32(i)).
bool is_point(const ir::Expr& e, const ir::VarNode* point) {
  if (const ir::CastNode* cast = e.as<ir::CastNode>()) return is_point(cast->value, point);
  return e.as<ir::VarNode>() == point;
}

/// True when every use of `point` in `e` is the dividend of a division by a constant multiple
/// of 32 (so that `e` is one value across the point's warp), reading no memory.
class WarpUniform : public ir::ExprFunctor<bool> {
 public:
  explicit WarpUniform(const ir::VarNode* point) : point_(point) {}

 protected:
  bool visit_IntConst(const ir::IntConstNode&, const ir::Expr&) override { return true; }
  bool visit_FloatConst(const ir::FloatConstNode&, const ir::Expr&) override { return true; }
  bool visit_Var(const ir::VarNode& n, const ir::Expr&) override { return &n != point_; }
  bool visit_Load(const ir::LoadNode&, const ir::Expr&) override { return false; }
  bool visit_Unary(const ir::UnaryNode& n, const ir::Expr&) override { return visit(n.operand); }
  bool visit_Binary(const ir::BinaryNode& n, const ir::Expr&) override {
    if (n.op == ir::BinaryOp::kDiv && is_point(n.a, point_)) {
      const ir::IntConstNode* c = n.b.as<ir::IntConstNode>();
      return c && c->value > 0 && c->value % 32 == 0;
    }
    return visit(n.a) && visit(n.b);
  }
  bool visit_Compare(const ir::CompareNode& n, const ir::Expr&) override {
    return visit(n.a) && visit(n.b);
  }
  bool visit_Select(const ir::SelectNode& n, const ir::Expr&) override {
    return visit(n.condition) && visit(n.true_value) && visit(n.false_value);
  }
  bool visit_Cast(const ir::CastNode& n, const ir::Expr&) override { return visit(n.value); }
  bool visit_Reduce(const ir::ReduceNode&, const ir::Expr&) override { return false; }

 private:
  const ir::VarNode* point_;
};

/// `e` is `(point / 32) * 32`, whatever the constants' types.
bool is_warp_start(const ir::Expr& e, const ir::VarNode* point) {
  const ir::BinaryNode* mul = e.as<ir::BinaryNode>();
  if (!mul || mul->op != ir::BinaryOp::kMul) return false;
  const ir::BinaryNode* div = mul->a.as<ir::BinaryNode>();
  const ir::IntConstNode* c = mul->b.as<ir::IntConstNode>();
  const ir::IntConstNode* d = div ? div->b.as<ir::IntConstNode>() : nullptr;
  return div && div->op == ir::BinaryOp::kDiv && is_point(div->a, point) && c && d &&
         c->value == 32 && d->value == 32;
}

}  // namespace

std::optional<std::string> KernelEmitter::emit_lane_scan_reduce(const ir::ReduceNode& n) {
  const ir::VarNode* point = lane_scan_point_;
  if (!point || n.axes.size() != 1 || !ir::is_sum(n.op) ||
      (n.dtype != ir::DType::kI32 && n.dtype != ir::DType::kI64))
    return std::nullopt;
  const ir::Axis& axis = n.axes.front();
  const std::string type(cuda_value_type(n.dtype));
  const std::string j_hint = axis.var.name_hint();
  const int64_t points = lane_scan_extent_;
  // The exclusive lane scan: start 32 (i / 32), extent i - start, body x[j] with x long enough
  // that j = i is in range (the domain's extent at most x's).
  const ir::BinaryNode* extent = axis.extent.as<ir::BinaryNode>();
  const ir::LoadNode* load = n.body.as<ir::LoadNode>();
  const bool prefix =
      extent && extent->op == ir::BinaryOp::kSub && is_point(extent->a, point) &&
      ir::structurally_equal(extent->b, axis.start) && is_warp_start(axis.start, point) && load &&
      load->indices.size() == 1 && is_point(load->indices[0], axis.var.get()) &&
      load->tensor->rank() == 1 && load->tensor->shape[0] >= points;
  WarpUniform uniform(point);
  const bool shared = !prefix && uniform.visit(axis.start) && uniform.visit(axis.extent);
  if (!prefix && !shared) return std::nullopt;
  const std::string point_name = var_names_.at(point);
  referenced_.insert(point_name);
  if (lane_scan_lane_.empty()) {  // once per point: the stage's sums share one scope
    lane_scan_lane_ = names_.fresh("lane");
    out_->line("const int " + lane_scan_lane_ + " = threadIdx.x % 32;  // = " + point_name +
               " % 32: the warp's 32 points are consecutive");
  }
  const std::string& lane = lane_scan_lane_;
  const std::string acc = names_.fresh("acc");
  if (prefix) {
    lane_scan_notes_.push_back("sum over " + j_hint + " in [32 (" + point->name_hint + " / 32), " +
                               point->name_hint +
                               "): exclusive scan over the warp's lanes, one load per lane");
    out_->line("// sum over " + j_hint + " in [32 (" + point_name + " / 32), " + point_name +
               "): an exclusive scan over the warp's lanes, __shfl_up_sync 1, 2, 4, 8, 16");
    // The body at j = i: the loop variable names the point.
    var_names_[axis.var.get()] = point_name;
    var_levels_[axis.var.get()] = 0;
    bounds_.bind(axis.var.get(), ir::Interval{0, points - 1});
    const std::string own = names_.fresh("own");
    ++reduce_depth_;
    out_->line("const " + type + " " + own + " = " + strip_parens(emit_expr(n.body)) + ";");
    --reduce_depth_;
    out_->line(type + " " + acc + " = " + own + ";");
    const std::string offset = names_.fresh("offset");
    out_->line("#pragma unroll");
    {
      CodeWriter::Block loop = out_->block("for (int " + offset + " = 1; " + offset + " < 32; " +
                                           offset + " *= 2) {");
      const std::string up = names_.fresh("up");
      out_->line("const " + type + " " + up + " = __shfl_up_sync(0xffffffffu, " + acc + ", " +
                 offset + ");");
      out_->line("if (" + lane + " >= " + offset + ") " + acc + " += " + up + ";");
    }
    out_->line(acc + " -= " + own + ";");
    return acc;
  }
  lane_scan_notes_.push_back("sum over " + j_hint + ": one value for the warp (bounds of " +
                             point->name_hint + " / 32c), lanes stride over it, shuffle butterfly");
  int64_t unrolled_trips = 1;
  const LoopBounds bounds = loop_bounds(axis, unrolled_trips);
  bounds_.bind_reduce_axis(axis);
  out_->line("// sum over " + j_hint + ": one value for the warp's 32 points: lanes stride " +
             "over it, then a shuffle butterfly");
  out_->line(type + " " + acc + " = 0;");
  scopes_.push_back(Scope{{}, out_, false});
  {
    const std::string v = names_.fresh(j_hint);
    var_names_[axis.var.get()] = v;
    var_levels_[axis.var.get()] = scopes_.size() - 1;
    const std::string start = strip_parens(bounds.start);
    CodeWriter::Block loop = out_->block(
        "for (" + index_type_ + " " + v + " = " + (start == "0" ? lane : start + " + " + lane) +
        "; " + v + " < " + bounds.end + "; " + v + " += 32) {");
    ++reduce_depth_;
    out_->line(accumulate_body(n, acc));
    --reduce_depth_;
  }
  scopes_.pop_back();
  const std::string offset = names_.fresh("offset");
  out_->line("#pragma unroll");
  {
    CodeWriter::Block loop = out_->block("for (int " + offset + " = 16; " + offset + " > 0; " +
                                         offset + " /= 2) {");
    out_->line(acc + " += __shfl_xor_sync(0xffffffffu, " + acc + ", " + offset + ");");
  }
  return acc;
}

}  // namespace adjoint::compiler
