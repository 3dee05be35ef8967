// Vector groups: the derived width, the group windows of reduce axes (evaluated at every point,
// as the gather pass evaluates its index maps), lane indices and proven access widths.
#include "compiler/vector_groups.h"

#include <algorithm>
#include <numeric>

#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"
#include "ir/error.h"
#include "ir/interpreter.h"

namespace adjoint::compiler {

namespace {

/// True when some reduction of `kernel` reads, in its body, an element that does not move with
/// the domain axis `axis` (a binned gather's record ids and factors, the same for every
/// channel): a group along that axis reads it once for all its points.
bool reductions_share_a_load(const ir::Kernel& kernel, int axis) {
  for (const ir::Stage& stage : kernel.stages) {
    const ir::VarNode* x = stage.domain[static_cast<size_t>(axis)].var.get();
    for (const ir::ReduceNode* r : outermost_reductions(stage.value)) {
      bool shared = false;
      for_each_node(r->body, [&](const ir::Expr& node) {
        shared = shared || (node.kind() == ir::ExprKind::kLoad && !depends_on(node, x));
      });
      if (shared) return true;
    }
  }
  return false;
}

}  // namespace

int derived_vector_width(const ir::Kernel& kernel, int group_bytes, bool whole_axis_groups,
                         int64_t min_groups) {
  if (kernel.stages.empty()) return 1;
  GridMapping mapping = grid_mapping(kernel);
  if (mapping.linear_axes.empty()) return 1;
  const int axis = mapping.linear_axes.back();
  int64_t widest = 1;
  for (const ir::Stage& stage : kernel.stages) {
    // A compute stage's domain is its target's shape, in order: axis `axis` is dimension `axis`.
    if (stage.kind != ir::StageKind::kCompute || stage.target->strides[axis] != 1) return 1;
    widest = std::max<int64_t>(widest, ir::dtype_bytes(stage.target->dtype));
  }
  std::vector<int64_t> extents = domain_extents(kernel);
  int64_t points = 1;
  for (int64_t e : extents) points *= e;
  const int64_t most = std::max<int64_t>(group_bytes / widest, 1);
  int64_t width = most;
  while (width > 1 && (extents[axis] % width != 0 || points / width < min_groups)) width /= 2;
  // A whole short axis of no power-of-two extent (3 channels): one group, if its reductions
  // share a load that the group then reads once (see the header).
  const int64_t extent = extents[axis];
  if (whole_axis_groups && extent > width && extent <= most && (extent & (extent - 1)) != 0 &&
      points / extent >= kMinVectorGroups && reductions_share_a_load(kernel, axis))
    width = extent;
  return static_cast<int>(width);
}

bool GroupWindows::affine() const {
  for (size_t e = 0; e < begin.size(); ++e) {
    const int64_t i = static_cast<int64_t>(e);
    if (begin[e] != begin[0] + i * step() || end[e] - begin[e] != width()) return false;
  }
  return true;
}

namespace {

/// True when every variable of `e` is `x`.
bool only_variable(const ir::Expr& e, const ir::VarNode* x) {
  bool only = true;
  for_each_node(e, [&](const ir::Expr& node) {
    if (node.kind() == ir::ExprKind::kVar && node.get() != x) only = false;
    if (node.kind() == ir::ExprKind::kLoad || node.kind() == ir::ExprKind::kReduce) only = false;
  });
  return only;
}

/// f(x) at every x in [0, extent), as the interpreter evaluates it; nullopt if any evaluation
/// fails (a division by zero, say).
std::optional<std::vector<int64_t>> evaluate_at_every_point(const ir::Expr& f, const ir::VarNode* x,
                                                            int64_t extent) {
  std::vector<double> evaluated;
  try {
    evaluated = ir::evaluate_at_points(f, x, extent);
  } catch (const Error&) {
    return std::nullopt;
  }
  return std::vector<int64_t>(evaluated.begin(), evaluated.end());
}

}  // namespace

std::optional<GroupWindows> group_windows(const ir::Axis& axis, const ir::VarNode* x,
                                          int64_t extent, int64_t width) {
  if (width < 1 || extent % width != 0 || extent > kMaxEvaluatedPoints) return std::nullopt;
  if (!only_variable(axis.start, x) || !only_variable(axis.extent, x)) return std::nullopt;
  auto starts = evaluate_at_every_point(axis.start, x, extent);
  auto counts = evaluate_at_every_point(axis.extent, x, extent);
  if (!starts || !counts) return std::nullopt;
  const size_t v = static_cast<size_t>(width);
  // Offsets relative to the group's first point, checked equal in every group (an empty window
  // may start anywhere).
  std::vector<int64_t> offset(v), count(v);
  for (size_t e = 0; e < v; ++e) {
    offset[e] = (*starts)[e] - (*starts)[0];
    count[e] = std::max<int64_t>((*counts)[e], 0);
  }
  for (size_t base = v; base < starts->size(); base += v) {
    for (size_t e = 0; e < v; ++e) {
      if (std::max<int64_t>((*counts)[base + e], 0) != count[e]) return std::nullopt;
      if (count[e] > 0 && (*starts)[base + e] - (*starts)[base] != offset[e]) return std::nullopt;
    }
  }
  GroupWindows w;
  bool any = false;
  for (size_t e = 0; e < v; ++e) {
    if (count[e] == 0) continue;
    w.shift = any ? std::min(w.shift, offset[e]) : offset[e];
    any = true;
  }
  for (size_t e = 0; e < v; ++e) {
    int64_t begin = count[e] > 0 ? offset[e] - w.shift : 0;
    w.begin.push_back(begin);
    w.end.push_back(begin + count[e]);
    w.span = std::max(w.span, w.end.back());
  }
  // An empty window of an element between others reads nothing: place it where the previous
  // one ends, so tables read in order.
  for (size_t e = 0; e < v; ++e) {
    if (count[e] == 0 && e > 0) w.begin[e] = w.end[e] = w.end[e - 1];
  }
  for (size_t base = 0; base < starts->size(); base += v) {
    const int64_t first = (*starts)[base] + w.shift;
    w.base_alignment = std::gcd(w.base_alignment, first);
    w.lowest = base == 0 ? first : std::min(w.lowest, first);
    w.highest = std::max(w.highest, first + w.span - 1);
  }
  return w;
}

namespace {

/// The terms of a sum, with their signs: a + (b - c) -> {+a, +b, -c}.
void flatten_sum(const ir::Expr& e, int sign, std::vector<std::pair<int, ir::Expr>>& terms) {
  auto* binary = e.as<ir::BinaryNode>();
  if (binary && (binary->op == ir::BinaryOp::kAdd || binary->op == ir::BinaryOp::kSub)) {
    flatten_sum(binary->a, sign, terms);
    flatten_sum(binary->b, binary->op == ir::BinaryOp::kAdd ? sign : -sign, terms);
    return;
  }
  terms.emplace_back(sign, e);
}

/// The variable of `v` or of an integer cast of it, else nullptr.
const ir::VarNode* bare_variable(const ir::Expr& e) {
  if (auto* var = e.as<ir::VarNode>()) return var;
  auto* cast = e.as<ir::CastNode>();
  return cast && ir::is_integer(cast->dtype) ? cast->value.as<ir::VarNode>() : nullptr;
}

/// A positive number every value of the term is a multiple of.
int64_t known_multiple(const ir::Expr& term) {
  if (auto* product = term.as<ir::BinaryNode>(); product && product->op == ir::BinaryOp::kMul) {
    if (auto* c = product->b.as<ir::IntConstNode>()) return c->value == 0 ? 0 : std::abs(c->value);
    if (auto* c = product->a.as<ir::IntConstNode>()) return c->value == 0 ? 0 : std::abs(c->value);
  }
  return 1;
}

}  // namespace

std::optional<LaneIndex> lane_index(const ir::Expr& index,
                                    const std::vector<const ir::VarNode*>& lanes) {
  std::vector<std::pair<int, ir::Expr>> terms;
  flatten_sum(index, 1, terms);
  auto is_lane = [&](const ir::VarNode* v) {
    return std::find(lanes.begin(), lanes.end(), v) != lanes.end();
  };
  LaneIndex lane;
  for (const auto& [sign, term] : terms) {
    if (auto* c = term.as<ir::IntConstNode>()) {
      lane.offset += sign * c->value;
      continue;
    }
    const ir::VarNode* var = bare_variable(term);
    if (var && is_lane(var) && sign > 0 && !lane.var) {
      lane.var = var;
      continue;
    }
    for (const ir::VarNode* v : lanes) {
      if (depends_on(term, v)) return std::nullopt;  // the lane again, scaled or nested
    }
    if (!lane.rest.defined()) {
      lane.rest = sign > 0 ? term
                           : ir::BinaryNode::make(ir::BinaryOp::kSub,
                                                  ir::IntConstNode::make(term.dtype(), 0), term);
    } else {
      lane.rest =
          ir::BinaryNode::make(sign > 0 ? ir::BinaryOp::kAdd : ir::BinaryOp::kSub, lane.rest, term);
    }
    lane.rest_multiple = std::gcd(lane.rest_multiple, known_multiple(term));
  }
  if (!lane.var) return std::nullopt;
  return lane;
}

int access_bytes(int64_t offset_alignment, int64_t count, int64_t element_bytes) {
  int64_t bytes = count * element_bytes;
  if (offset_alignment != 0) bytes = std::gcd(bytes, offset_alignment * element_bytes);
  int access = kMaxAccessBytes;
  while (access > 1 && bytes % access != 0) access /= 2;
  return access;
}

}  // namespace adjoint::compiler
