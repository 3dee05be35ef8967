// binned_taps: recognizes the tap axis of a scatter (binned_taps.h): a record axis that shifts
// the target index by constants, found by splitting each index component into a tap-free base
// and a tap-only shift and evaluating the shift at every tap.
#include "compiler/binned_taps.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <utility>

#include "compiler/program_utils.h"
#include "compiler/simplify.h"
#include "ir/builder.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;

/// The largest shift (in absolute value) a tap may have, and the float-base extent bound.
constexpr int64_t kMaxShift = 1024;
constexpr int64_t kExactFloatExtent = int64_t{1} << 22;

/// Whether `e` depends on `tap` and on nothing else (no other variable, no memory).
bool tap_only(const Expr& e, const ir::VarNode* tap) {
  bool ok = depends_on(e, tap);
  for_each_node(e, [&](const Expr& node) {
    if (node.kind() == ir::ExprKind::kLoad || node.kind() == ir::ExprKind::kReduce) ok = false;
    if (auto* v = node.as<ir::VarNode>(); v && v != tap) ok = false;
  });
  return ok;
}

Expr as_i64(const Expr& e) { return e.dtype() == DType::kI64 ? e : ir::cast(DType::kI64, e); }

/// The value of a float constant, or nothing.
std::optional<double> float_constant(const Expr& e) {
  auto* c = e.as<ir::FloatConstNode>();
  return c ? std::optional<double>(c->value) : std::nullopt;
}

/// How a clamped component clamps: `min(max(x, 0), hi)` or `max(min(x, hi), 0)` (which differ
/// for a NaN x: 0 and hi).
enum class Clamp { kNone, kMinOfMax, kMaxOfMin };

/// `x` of `min(max(x, 0), hi)` or `max(min(x, hi), 0)` with float constants, and hi; or
/// nothing.
std::optional<std::pair<Expr, double>> clamp_to_zero(const Expr& e) {
  auto* outer = e.as<ir::BinaryNode>();
  if (!outer || (outer->op != ir::BinaryOp::kMin && outer->op != ir::BinaryOp::kMax))
    return std::nullopt;
  const ir::BinaryOp inner_op =
      outer->op == ir::BinaryOp::kMin ? ir::BinaryOp::kMax : ir::BinaryOp::kMin;
  auto* inner = outer->a.as<ir::BinaryNode>();
  if (!inner || inner->op != inner_op) return std::nullopt;
  const auto outer_bound = float_constant(outer->b), inner_bound = float_constant(inner->b);
  if (!outer_bound || !inner_bound) return std::nullopt;
  const double lo = outer->op == ir::BinaryOp::kMax ? *outer_bound : *inner_bound;
  const double hi = outer->op == ir::BinaryOp::kMin ? *outer_bound : *inner_bound;
  if (lo != 0.0) return std::nullopt;
  return std::make_pair(inner->a, hi);
}

/// Splits one index component into base + shift, or returns false. `clamp` says whether and
/// how the component is clamp(base + shift, 0, extent - 1) (base then the float floor, not
/// cast).
bool split_component(const Expr& index, const ir::VarNode* tap, int64_t extent, Expr& base,
                     Expr& shift, Clamp& clamp) {
  clamp = Clamp::kNone;
  if (!depends_on(index, tap)) {
    base = index;
    shift = Expr(int64_t{0});
    return true;
  }
  if (auto* add = index.as<ir::BinaryNode>();
      add && ir::is_integer(index.dtype()) &&
      (add->op == ir::BinaryOp::kAdd || add->op == ir::BinaryOp::kSub)) {
    const bool sub = add->op == ir::BinaryOp::kSub;
    if (!depends_on(add->a, tap) && tap_only(add->b, tap)) {
      base = add->a;
      shift = sub ? Expr(int64_t{0}) - as_i64(add->b) : add->b;
      return true;
    }
    if (!sub && !depends_on(add->b, tap) && tap_only(add->a, tap)) {
      base = add->b;
      shift = add->a;
      return true;
    }
    return false;
  }
  // i64(floor(b) + f(shift)): exact in bounds when the extent is small (binned_taps.h);
  // i64(min(max(floor(b) + f(shift), 0), extent - 1)): clamped.
  auto* cast = index.as<ir::CastNode>();
  if (!cast || !ir::is_integer(index.dtype()) || extent >= kExactFloatExtent) return false;
  Expr sum = cast->value;
  if (auto clamped = clamp_to_zero(sum)) {
    if (clamped->second != static_cast<double>(extent - 1)) return false;
    clamp = sum.as<ir::BinaryNode>()->op == ir::BinaryOp::kMin ? Clamp::kMinOfMax
                                                               : Clamp::kMaxOfMin;
    sum = clamped->first;
  }
  // Whole floats below 2^22 add exactly in f32 and f64, not in f16 or bf16.
  auto* add = sum.as<ir::BinaryNode>();
  if (!add || add->op != ir::BinaryOp::kAdd ||
      (sum.dtype() != DType::kF32 && sum.dtype() != DType::kF64))
    return false;
  for (int side = 0; side < 2; ++side) {
    const Expr& b = side == 0 ? add->a : add->b;
    const Expr& s = side == 0 ? add->b : add->a;
    auto* s_cast = s.as<ir::CastNode>();
    if (depends_on(b, tap) || !s_cast || !ir::is_integer(s_cast->value.dtype()) ||
        !tap_only(s_cast->value, tap))
      continue;
    // The base must be whole (a floor): i64(b + s) is i64(b) + s only then (i64 truncates:
    // i64(-0.5 + 1) is 0, i64(-0.5) + 1 is 1), and i64(clamp(b + s)) is i64(clamp(b)) + s.
    auto* floor = b.as<ir::UnaryNode>();
    if (!floor || floor->op != ir::UnaryOp::kFloor) return false;
    base = clamp != Clamp::kNone ? b : ir::cast(index.dtype(), b);
    shift = s_cast->value;
    return true;
  }
  return false;
}

}  // namespace

std::optional<BinnedTaps> find_binned_taps(const ir::Stage& stage,
                                           const std::vector<int>& candidates, int64_t max_taps) {
  const int rank = stage.target->rank();
  for (size_t c = candidates.size(); c-- > 0;) {
    const ir::Axis& axis = stage.domain[candidates[c]];
    auto* extent = axis.extent.as<ir::IntConstNode>();
    if (!extent || extent->value < 2 || extent->value > max_taps) continue;
    const ir::VarNode* tap = axis.var.get();
    BinnedTaps taps;
    taps.axis = candidates[c];
    taps.taps = extent->value;
    bool ok = true, shifts = false;
    for (int j = 0; j < rank && ok; ++j) {
      Expr base, shift;
      Clamp clamp = Clamp::kNone;
      ok = split_component(stage.indices[j], tap, stage.target->shape[j], base, shift, clamp);
      if (!ok) break;
      int64_t lo = 0, hi = 0;
      for (int64_t k = 0; k < taps.taps && ok; ++k) {
        Expr value = simplify(substitute(shift, tap, Expr(k)));
        auto* v = value.as<ir::IntConstNode>();
        ok = v && std::llabs(v->value) <= kMaxShift;
        if (!ok) break;
        lo = k == 0 ? v->value : std::min(lo, v->value);
        hi = k == 0 ? v->value : std::max(hi, v->value);
      }
      if (!ok) break;
      shifts |= lo != hi;
      if (clamp != Clamp::kNone) {
        // Bases past [-hi, extent - 1 - lo] send every tap to the edge that the range's end
        // sends it to (binned_taps.h): the clamped base, a whole float, converts exactly. The
        // same nesting as the index's, so that a NaN base goes to the index's edge.
        const DType f = base.dtype();
        const Expr low = ir::constant(f, static_cast<double>(-hi));
        const Expr high = ir::constant(f, static_cast<double>(stage.target->shape[j] - 1 - lo));
        base = clamp == Clamp::kMinOfMax ? ir::min(ir::max(base, low), high)
                                         : ir::max(ir::min(base, high), low);
      }
      taps.clamped.push_back(clamp != Clamp::kNone);
      taps.base.push_back(as_i64(base));
      taps.shift.push_back(as_i64(shift));
      taps.min_shift.push_back(lo);
      taps.max_shift.push_back(hi);
    }
    if (ok && shifts) return taps;
  }
  return std::nullopt;
}

}  // namespace adjoint::compiler
