// KernelEmitter, lane spans of warp-cooperative reductions (EmitOptions::lane_spans). The
// strided lane loop of before gives lane l the iterations l, l + 32, ... of the reduction's
// innermost axis, one element per lane and trip: 2-byte loads for bf16, 64 bytes a warp
// instruction. Where every load that moves with that axis reads it stride-1 (the axis plus a
// constant in the innermost, stride-1 dimension, in no other index and in no nested
// reduction), lane l instead takes the V consecutive iterations 32 V k + V l + j, j < V, of the
// trips over whole chunks of 32 V: each such load is one span of V elements, read with one
// vector access (16 bytes: V = 8 for bf16, 4 for f32) when every spanned base pointer is
// aligned (one test per reduction, then no branch per access, so the loads of the unrolled
// trips are in flight together), else with element loads in the same order. Each lane's
// accumulator still sums its iterations in a fixed order and the shuffle butterfly is that of
// before: the bits are the same every run and on both paths (not those of the strided loop).
// The iterations past the last whole chunk run the strided loop of before. A vector group
// (several points per warp) loads its spans per point inside the span loop.
#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"

namespace adjoint::compiler {

using ir::Expr;

namespace {

std::optional<int64_t> constant_of(const Expr& e) {
  if (auto* c = e.as<ir::IntConstNode>()) return c->value;
  return std::nullopt;
}

/// A number every value of `e` is a multiple of (0: `e` is always 0).
int64_t multiple_of(const Expr& e) {
  if (auto* c = e.as<ir::IntConstNode>()) return std::abs(c->value);
  if (auto* b = e.as<ir::BinaryNode>()) {
    if (b->op == ir::BinaryOp::kAdd || b->op == ir::BinaryOp::kSub)
      return std::gcd(multiple_of(b->a), multiple_of(b->b));
    if (b->op == ir::BinaryOp::kMul) {
      const int64_t a = multiple_of(b->a), c = multiple_of(b->b);
      if (a == 0 || c == 0) return 0;
      return a <= (int64_t{1} << 30) / std::max<int64_t>(c, 1) ? a * c : 1;
    }
  }
  return 1;
}

}  // namespace

std::optional<KernelEmitter::LaneSpanPlan> KernelEmitter::plan_lane_spans(
    const ir::ReduceNode& n, const ir::VarNode* group_var) {
  if (options_.lane_spans <= 0 || lane_.empty() || kernel_.grid.reduction_lanes != 32 || tile_ ||
      aligned_twin_ || prefetch_ || span_alignment_claims_ || n.axes.empty())
    return std::nullopt;
  const ir::Axis& axis = n.axes.back();
  const ir::VarNode* var = axis.var.get();
  // The loads that move with the lane axis: each must read it stride-1, outside any nested
  // reduction (emit_spans does not look into those).
  struct Moving {
    const ir::LoadNode* load;
    Expr node;
    int id;
    LaneIndex index;
  };
  std::vector<Moving> moving;
  bool refused = false;
  std::unordered_set<const ir::ExprNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& node) {
    if (refused || !seen.insert(node.get()).second) return;
    if (node.kind() == ir::ExprKind::kReduce) {
      refused = refused || depends_on(node, var);
      return;
    }
    ir::for_each_child(node, walk);
    auto* load = node.as<ir::LoadNode>();
    if (!load || !depends_on(node, var)) return;
    const ir::Tensor& t = load->tensor;
    if (load->indices.empty() || t->name == options_.claim_slot_tensor ||
        t->strides.back() != 1 || t->shape.back() == 1) {
      refused = true;
      return;
    }
    for (size_t d = 0; d + 1 < load->indices.size(); ++d)
      refused = refused || depends_on(load->indices[d], var);
    std::optional<LaneIndex> index = lane_index(load->indices.back(), {var});
    if (!index || index->var != var) refused = true;
    if (!refused) moving.push_back({load, node, ids_.id(node), *index});
  };
  walk(n.body);
  if (refused || moving.empty()) return std::nullopt;
  int64_t narrowest = 8;
  for (const Moving& m : moving) narrowest = std::min<int64_t>(narrowest, ir::dtype_bytes(m.load->tensor->dtype));
  const std::optional<int64_t> extent = constant_of(axis.extent);
  const int64_t start_multiple = multiple_of(axis.start);
  const int lanes = kernel_.grid.reduction_lanes;
  // At least 8 bytes of the narrowest tensor a span: narrower accesses gain little.
  for (int64_t width = options_.lane_spans / narrowest; width >= 2 && width * narrowest >= 8;
       width /= 2) {
    if (extent && *extent < lanes * width) continue;
    const int64_t alignment = start_multiple == 0 ? width : std::gcd(width, start_multiple);
    bool whole = true;  // every span in accesses as wide as it allows (up to 16 bytes)
    for (const Moving& m : moving) {
      const ir::Tensor& t = m.load->tensor;
      const int64_t lane_alignment =
          std::gcd(std::gcd(alignment, m.index.offset), m.index.rest_multiple);
      const int64_t offset = offset_alignment(t, m.load->indices, m.load->indices.size() - 1,
                                              lane_alignment);
      const int64_t bytes = width * ir::dtype_bytes(t->dtype);
      whole = whole && access_bytes(offset, width, ir::dtype_bytes(t->dtype)) >=
                           std::min<int64_t>(bytes, kMaxAccessBytes);
    }
    if (!whole) continue;
    LaneSpanPlan plan;
    plan.width = width;
    plan.alignment = alignment;
    int64_t loads = 0;  // span loads per trip (a group's per point)
    for (const Moving& m : moving) {
      if (std::find(plan.loads.begin(), plan.loads.end(), m.id) != plan.loads.end())
        continue;  // structurally equal loads share one span
      plan.loads.push_back(m.id);
      loads += group_var && depends_on(m.node, group_var)
                   ? vector_->width
                   : 1;
    }
    if (options_.lane_span_unroll > 0) {
      plan.unroll = options_.lane_span_unroll;
    } else {
      plan.unroll = 4;  // at most 16 span loads in flight a lane (256 bytes of 16-byte spans)
      while (plan.unroll > 1 && plan.unroll * loads > 16) plan.unroll /= 2;
    }
    if (extent) {  // no more copies than whole trips
      const int64_t trips = *extent / (lanes * width);
      while (plan.unroll > 1 && plan.unroll > trips) plan.unroll /= 2;
    }
    return plan;
  }
  return std::nullopt;
}

bool KernelEmitter::emit_lane_spans(
    const ir::ReduceNode& n, const std::string& start, const std::string& end,
    const ir::VarNode* group_var,
    const std::function<void(const std::function<void()>&)>& group_loop,
    const std::function<void()>& accumulate_one) {
  const std::optional<LaneSpanPlan> plan = plan_lane_spans(n, group_var);
  if (!plan) return false;
  const ir::Axis& axis = n.axes.back();
  const ir::VarNode* var = axis.var.get();
  const std::string hint = axis.var.name_hint();
  const int lanes = kernel_.grid.reduction_lanes;
  const int64_t chunk = lanes * plan->width;
  const std::string width = std::to_string(plan->width);
  const std::optional<int64_t> first = constant_of(axis.start), extent = constant_of(axis.extent);

  // Where the whole chunks end: a literal when the bounds are constants, else computed once.
  std::string chunks_end;
  bool tail = true;
  if (first && extent) {
    const int64_t whole = *extent / chunk * chunk;
    chunks_end = std::to_string(*first + whole);
    tail = whole != *extent;
  }
  const std::string base = names_.fresh(hint + "_base");
  const std::string j = names_.fresh("j");
  const std::string name = names_.fresh(hint);
  Lane lane{base, j, plan->width, plan->alignment, 0, -1};
  {
    const ir::Interval range = bounds_.of(axis.var);
    if (!range.is_bounded()) return false;
    lane.lowest = range.min;
    lane.highest = range.max;
  }
  const std::string lane_start =
      (start == "0" ? std::string() : start + " + ") + lane_ + " * " + width;

  // One copy of the span loop; `aligned`: spans with vector loads (the claims recorded).
  std::vector<std::pair<std::string, int>> claims;
  std::unordered_set<int> spanned;
  const std::unordered_map<int, Span> outer_spans = spans_;
  auto copy = [&](bool aligned, const std::string& loop_end) {
    CodeWriter writer(out_->indent() + 1);
    CodeWriter* saved = out_;
    out_ = &writer;
    if (aligned) span_alignment_claims_ = &claims;
    auto spans = [&](const ir::VarNode* skip) {
      if (!aligned) return;
      spans_skip_var_ = skip;
      span_reduction_ = &n;
      emit_spans(n.body, {{var, lane}});
      span_reduction_ = nullptr;
      spans_skip_var_ = nullptr;
      for (int id : plan->loads)
        if (spans_.count(id)) spanned.insert(id);
    };
    out_->line("#pragma unroll " + std::to_string(plan->unroll));
    {
      CodeWriter::Block loop = out_->block("for (" + index_type_ + " " + base + " = " +
                                           lane_start + "; " + base + " < " + loop_end + "; " +
                                           base + " += " + std::to_string(chunk) + ") {");
      spans(group_var);  // a group's loads that do not move with its points, once
      if (group_var) {   // the group's spans along its own axis (not moving with the lane axis)
        spans_skip_var_ = var;
        span_reduction_ = &n;
        emit_spans(n.body, {{group_var, x_lane()}});
        span_reduction_ = nullptr;
        spans_skip_var_ = nullptr;
      }
      group_loop([&] {
        spans(nullptr);
        emit_scoped_loop("for (int " + j + " = 0; " + j + " < " + width + "; ++" + j + ") {",
                         var, name, base, j, accumulate_one);
      });
    }
    span_alignment_claims_ = nullptr;
    spans_ = outer_spans;
    out_ = saved;
    return writer.text();
  };
  if (chunks_end.empty()) {  // runtime bounds: the end of the whole chunks, before both copies
    chunks_end = declare(hint + "_chunks_end", index_type_,
                         (start == "0" ? std::string() : start + " + ") + "(" + end +
                             (start == "0" ? std::string() : " - " + start) + ") / " +
                             std::to_string(chunk) + " * " + std::to_string(chunk));
  }
  const std::string aligned_text = copy(true, chunks_end);
  bool whole = spanned.size() == plan->loads.size();
  std::string check;
  for (const auto& [param, bytes] : claims) {
    const std::string test = "adjoint::is_aligned<" + std::to_string(bytes) + ">(" + param + ")";
    if (check.find(test) == std::string::npos) check += (check.empty() ? "" : " && ") + test;
  }
  if (!whole || check.empty()) return false;  // a span refused (bounds): the strided loop
  const std::string plain_text = copy(false, chunks_end);
  out_->line("// " + std::string(ir::reduce_op_name(n.op)) + " over " + hint + ": lane spans, " +
             "each lane takes " + width + " consecutive iterations of every " +
             std::to_string(chunk) + ", then a shuffle butterfly in fixed order");
  {
    CodeWriter::Block branch = out_->block("if (" + check + ") {");
    out_->append(aligned_text);
    branch.split("} else {  // a misaligned base: element loads, the same order");
    out_->append(plain_text);
  }
  uses_memory_helpers_ = true;
  if (tail) {  // the iterations past the last whole chunk, strided as before
    scopes_.push_back(Scope{{}, out_, false});
    var_names_[var] = name;
    var_levels_[var] = scopes_.size() - 1;
    {
      CodeWriter::Block loop = out_->block("for (" + index_type_ + " " + name + " = " +
                                           chunks_end + " + " + lane_ + "; " + name + " < " +
                                           end + "; " + name + " += " + std::to_string(lanes) +
                                           ") {");
      group_loop(accumulate_one);
    }
    scopes_.pop_back();
  }
  var_names_.erase(var);
  std::string note = hint + " in spans of " + width + " a lane (" +
                     std::to_string(plan->width * 32) + " iterations a warp per trip), " +
                     std::to_string(plan->unroll) + " trip(s) unrolled, aligned bases: " + check +
                     (tail ? "; the iterations past the whole chunks strided" : "");
  if (std::find(lane_span_notes_.begin(), lane_span_notes_.end(), note) == lane_span_notes_.end())
    lane_span_notes_.push_back(std::move(note));
  return true;
}

}  // namespace adjoint::compiler
