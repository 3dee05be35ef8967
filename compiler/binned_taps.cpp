// binned_taps: recognizes the tap axis of a scatter (binned_taps.h): a record axis that shifts
// the target index by constants, found by splitting each index component into a tap-free base
// and a tap-only shift and evaluating the shift at every tap.
#include "compiler/binned_taps.h"

#include <algorithm>
#include <cstdlib>

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

/// Splits one index component into base + shift, or returns false.
bool split_component(const Expr& index, const ir::VarNode* tap, int64_t extent, Expr& base,
                     Expr& shift) {
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
  // i64(base_f + f(shift)): exact in bounds when the extent is small (binned_taps.h).
  auto* cast = index.as<ir::CastNode>();
  if (!cast || !ir::is_integer(index.dtype()) || extent >= kExactFloatExtent) return false;
  auto* add = cast->value.as<ir::BinaryNode>();
  if (!add || add->op != ir::BinaryOp::kAdd || !ir::is_float(cast->value.dtype())) return false;
  for (int side = 0; side < 2; ++side) {
    const Expr& b = side == 0 ? add->a : add->b;
    const Expr& s = side == 0 ? add->b : add->a;
    auto* s_cast = s.as<ir::CastNode>();
    if (depends_on(b, tap) || !s_cast || !ir::is_integer(s_cast->value.dtype()) ||
        !tap_only(s_cast->value, tap))
      continue;
    base = ir::cast(index.dtype(), b);
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
      ok = split_component(stage.indices[j], tap, stage.target->shape[j], base, shift);
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
      shifts |= lo != hi;
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
