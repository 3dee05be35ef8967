// The loop-unroll policy (unroll_policy.h): a walk from the innermost loop outwards that keeps
// the unrolled nest within the budget, and the IR size measure it budgets.
#include "compiler/unroll_policy.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "ir/equality.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

/// a * b, saturating at INT64_MAX / 2 so that long nests cannot overflow.
int64_t saturating_product(int64_t a, int64_t b) {
  constexpr int64_t kCap = INT64_MAX / 2;
  if (a <= 0 || b <= 0) return 0;
  return a > kCap / b ? kCap : a * b;
}

}  // namespace

std::string LoopUnroll::pragma() const {
  if (factor < 0) return "";
  if (factor == 0) return "#pragma unroll";
  return "#pragma unroll " + std::to_string(factor);
}

std::vector<LoopUnroll> choose_unrolling(const std::vector<LoopTrips>& trips, int64_t body_nodes,
                                         const UnrollPolicy& policy, int64_t* nest_nodes) {
  std::vector<LoopUnroll> loops(trips.size());
  int64_t inside = std::max<int64_t>(body_nodes, 1);  // the nodes one trip of loop i holds
  for (size_t i = trips.size(); i-- > 0;) {
    LoopUnroll& loop = loops[i];
    if (!trips[i].constant) {
      if (trips[i].at_most && *trips[i].at_most <= kShortLoopTrips) {
        loop.factor = 1;
        const int64_t most = *trips[i].at_most;
        loop.reason = "at most " + std::to_string(most) + (most == 1 ? " trip" : " trips") +
                      ", known only at run time: not unrolled (NVVM's 4 copies could never run)";
        continue;
      }
      loop.factor = policy.runtime_factor == 0 ? -1 : policy.runtime_factor;
      if (loop.factor > 1) inside = saturating_product(inside, loop.factor);
      if (loop.factor != -1) {
        loop.reason = "a trip count known only at run time: " +
                      (loop.factor == 1 ? std::string("not unrolled")
                                        : "unrolled " + std::to_string(loop.factor) + " times");
      }
      continue;
    }
    const int64_t count = std::max<int64_t>(*trips[i].constant, 1);
    const int64_t whole = saturating_product(inside, count);
    if (policy.budget == 0 || whole <= policy.budget || count <= 1) {
      loop.factor = policy.budget == 0 ? -1 : 0;
      inside = whole;  // NVVM's choice may unroll it completely: count it so
      continue;
    }
    // A loop too long to unroll completely gains little from a large factor (a few
    // iterations' loads in flight are enough) and costs compile time: its unrolled body is
    // kept within a sixteenth of the budget.
    const int64_t partial_budget = std::max<int64_t>(policy.budget / kPartialBudgetDivisor, 1);
    int64_t power = 1;
    while (power * 2 < count && saturating_product(inside, power * 2) <= partial_budget)
      power *= 2;
    int64_t factor = power;
    for (int64_t d = std::min<int64_t>(count - 1, partial_budget / inside); d > power / 2; --d) {
      if (count % d == 0) {
        factor = d;
        break;
      }
    }
    loop.factor = factor;
    loop.reason = std::to_string(count) + " trips of " + std::to_string(inside) +
                  " IR nodes, over the budget of " + std::to_string(policy.budget) + ": " +
                  (factor == 1 ? std::string("not unrolled")
                               : "unrolled " + std::to_string(factor) + " times");
    inside = saturating_product(inside, factor);
  }
  if (nest_nodes) *nest_nodes = inside;
  return loops;
}

std::optional<int64_t> window_extent_at_most(const ir::Expr& extent) {
  const auto* difference = extent.as<ir::BinaryNode>();
  if (!difference || difference->op != ir::BinaryOp::kSub) return std::nullopt;
  const auto* high = difference->a.as<ir::BinaryNode>();
  const auto* low = difference->b.as<ir::BinaryNode>();
  if (!high || !low || high->op != ir::BinaryOp::kDiv || low->op != ir::BinaryOp::kDiv)
    return std::nullopt;
  const auto* divisor = high->b.as<ir::IntConstNode>();
  if (!divisor || divisor->value <= 0 || !ir::structurally_equal(high->b, low->b))
    return std::nullopt;
  // x + c as (x, c); a bare x as (x, 0).
  auto split = [](const ir::Expr& e) -> std::pair<ir::Expr, int64_t> {
    if (const auto* sum = e.as<ir::BinaryNode>(); sum && sum->op == ir::BinaryOp::kAdd) {
      if (const auto* c = sum->b.as<ir::IntConstNode>()) return {sum->a, c->value};
    }
    return {e, 0};
  };
  const auto [x_high, c_high] = split(high->a);
  const auto [x_low, c_low] = split(low->a);
  if (!ir::structurally_equal(x_high, x_low) || c_high < c_low) return std::nullopt;
  const int64_t delta = c_high - c_low, d = divisor->value;
  return delta / d + (delta % d != 0 ? 1 : 0);
}

int64_t unrolled_size(const ir::Expr& root, const UnrollPolicy& policy,
                      const std::vector<ir::Axis>& loops) {
  std::unordered_set<const ir::ExprNode*> seen;
  std::unordered_set<const ir::VarNode*> loop_vars;
  for (const ir::Axis& axis : loops) loop_vars.insert(axis.var.get());
  // True when `e` depends on no variable but the loops' own.
  std::function<bool(const ir::Expr&)> over_loops = [&](const ir::Expr& e) {
    if (const auto* var = e.as<ir::VarNode>()) return loop_vars.count(var) != 0;
    if (e.kind() == ir::ExprKind::kLoad || e.kind() == ir::ExprKind::kReduce) return false;
    bool only = true;
    ir::for_each_child(e, [&](const ir::Expr& child) { only = only && over_loops(child); });
    return only;
  };
  std::function<int64_t(const ir::Expr&)> size = [&](const ir::Expr& e) -> int64_t {
    if (!seen.insert(e.get()).second) return 0;
    switch (e.kind()) {
      case ir::ExprKind::kSelect: {
        // Unrolled, a condition over the loop variables alone is a constant in every copy,
        // and only one arm remains (a bicubic tap's choice of polynomial).
        const auto* select = e.as<ir::SelectNode>();
        if (!over_loops(select->condition)) break;
        const int64_t t = size(select->true_value), f = size(select->false_value);
        return 1 + size(select->condition) + std::max(t, f);
      }
      case ir::ExprKind::kIntConst:
      case ir::ExprKind::kFloatConst:
      case ir::ExprKind::kVar: return 0;
      case ir::ExprKind::kReduce: {
        const auto* reduce = e.as<ir::ReduceNode>();
        int64_t bounds = 0;
        std::vector<LoopTrips> trips;
        for (const ir::Axis& axis : reduce->axes) {
          bounds += size(axis.start) + size(axis.extent);
          trips.push_back({constant_trips(axis), window_extent_at_most(axis.extent)});
          loop_vars.insert(axis.var.get());
        }
        int64_t nest = 0;
        choose_unrolling(trips, size(reduce->body) + 1, policy, &nest);
        return bounds + nest;
      }
      default: break;
    }
    int64_t total = 1;
    ir::for_each_child(e, [&](const ir::Expr& child) { total += size(child); });
    return total;
  };
  return size(root);
}

std::optional<int64_t> constant_trips(const ir::Axis& axis) {
  if (const auto* constant = axis.extent.as<ir::IntConstNode>()) return constant->value;
  return std::nullopt;
}

}  // namespace adjoint::compiler
