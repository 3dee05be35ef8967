// Interval analysis: one ExprFunctor computing a node's range from its children's memoized
// ranges. Integer arithmetic gives up ("unbounded") on overflow; float bounds are computed in
// double, nudged outward by one ulp and rounded to the node's dtype. The affine forms behind
// exact_of() are built from the same bindings.
#include "ir/bounds.h"

#include <algorithm>
#include <cmath>

#include "ir/equality.h"
#include "ir/int_math.h"
#include "ir/visitor.h"

namespace adjoint::ir {

bool Interval::fits_int32() const {
  return within(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
}

std::string to_string(const Interval& range) {
  return "[" + (range.has_min() ? std::to_string(range.min) : std::string("-inf")) + ", " +
         (range.has_max() ? std::to_string(range.max) : std::string("inf")) + "]";
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const Interval kUnknown{};
const FloatInterval kUnknownFloat{};

/// The range of values an integer dtype can hold (bool: 0 or 1).
Interval dtype_range(DType t) {
  if (t == DType::kBool) return {0, 1};
  if (t == DType::kI32)
    return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  return kUnknown;
}

Interval hull(const std::vector<int64_t>& values) {
  return {*std::min_element(values.begin(), values.end()),
          *std::max_element(values.begin(), values.end())};
}

/// Applies an overflow-checked operation to the four corners of two bounded intervals.
template <typename Op>
Interval corners(const Interval& a, const Interval& b, Op op) {
  if (!a.is_bounded() || !b.is_bounded()) return kUnknown;
  std::vector<int64_t> values;
  for (int64_t x : {a.min, a.max}) {
    for (int64_t y : {b.min, b.max}) {
      int64_t r;
      if (op(x, y, &r)) return kUnknown;  // overflow
      values.push_back(r);
    }
  }
  return hull(values);
}

Interval add(const Interval& a, const Interval& b) {
  Interval r;
  if (a.has_min() && b.has_min() && __builtin_add_overflow(a.min, b.min, &r.min))
    r.min = Interval::kUnboundedBelow;
  if (!a.has_min() || !b.has_min()) r.min = Interval::kUnboundedBelow;
  if (a.has_max() && b.has_max() && __builtin_add_overflow(a.max, b.max, &r.max))
    r.max = Interval::kUnboundedAbove;
  if (!a.has_max() || !b.has_max()) r.max = Interval::kUnboundedAbove;
  return r;
}

Interval negate(const Interval& a) {
  return {a.has_max() ? -a.max : Interval::kUnboundedBelow,
          a.has_min() ? -a.min : Interval::kUnboundedAbove};
}

Interval divide(const Interval& a, const Interval& b) {
  if (b.is_point() && b.min > 0) {  // the common case: division by a positive constant
    return {a.has_min() ? floor_div(a.min, b.min) : a.min,
            a.has_max() ? floor_div(a.max, b.min) : a.max};
  }
  if (!b.is_bounded() || (b.min <= 0 && b.max >= 0)) return kUnknown;
  return corners(a, b, [](int64_t x, int64_t y, int64_t* r) {
    if (x == Interval::kUnboundedBelow && y == -1) return true;
    *r = floor_div(x, y);
    return false;
  });
}

Interval modulo(const Interval& a, const Interval& b) {
  if (b.is_point() && b.min < 0) {  // a negative constant c: residues in (c, 0]
    if (a.is_bounded() && floor_div(a.min, b.min) == floor_div(a.max, b.min))
      return {floor_mod(a.min, b.min), floor_mod(a.max, b.min)};
    return {b.min + 1, 0};
  }
  if (!b.has_min() || b.min <= 0) return kUnknown;  // other non-positive divisors: unknown
  if (b.is_point() && a.is_bounded() && floor_div(a.min, b.min) == floor_div(a.max, b.min)) {
    return {floor_mod(a.min, b.min), floor_mod(a.max, b.min)};  // one period: no wrap-around
  }
  if (b.is_point() && a.has_min() && a.min >= 0 && a.has_max() && a.max < b.min) return a;
  return {0, b.has_max() ? b.max - 1 : Interval::kUnboundedAbove};
}

/// Rounds a double bound outward by one ulp, then to the dtype (a monotone rounding).
double round_down(DType t, double v) {
  return std::isinf(v) ? v : round_to(t, std::nextafter(v, -kInf));
}
double round_up(DType t, double v) {
  return std::isinf(v) ? v : round_to(t, std::nextafter(v, kInf));
}

FloatInterval float_hull(DType t, std::vector<double> values) {
  for (double v : values) {
    if (std::isnan(v)) return kUnknownFloat;
  }
  return {round_down(t, *std::min_element(values.begin(), values.end())),
          round_up(t, *std::max_element(values.begin(), values.end()))};
}

}  // namespace

class BoundsVisitor : public ExprFunctor<Bounds::Range> {
 public:
  explicit BoundsVisitor(Bounds& bounds) : bounds_(bounds) {}
  using Range = Bounds::Range;

 protected:
  Range ints(Interval i) { return Range{i, kUnknownFloat}; }
  Range floats(FloatInterval f) { return Range{kUnknown, f}; }
  Interval int_of(const Expr& e) { return bounds_.range_of(e).ints; }
  FloatInterval float_of(const Expr& e) { return bounds_.range_of(e).floats; }

  Range visit_IntConst(const IntConstNode& n, const Expr&) override {
    return ints(Interval::point(n.value));
  }
  Range visit_FloatConst(const FloatConstNode& n, const Expr&) override {
    return std::isnan(n.value) ? floats(kUnknownFloat) : floats({n.value, n.value});
  }
  Range visit_Var(const VarNode& n, const Expr&) override {
    auto it = bounds_.vars_.find(&n);
    return ints(it == bounds_.vars_.end() ? kUnknown : it->second);
  }
  Range visit_Load(const LoadNode& n, const Expr&) override {
    return ints(dtype_range(n.dtype));
  }
  Range visit_Unary(const UnaryNode& n, const Expr&) override {
    if (n.op == UnaryOp::kNot) return ints({0, 1});
    if (!is_float(n.dtype)) {
      Interval a = int_of(n.operand);
      if (n.op == UnaryOp::kNeg) return ints(negate(a));
      if (a.has_min() && a.min >= 0) return ints(a);  // abs of a non-negative value
      return ints(a.is_bounded() ? Interval{0, std::max(-a.min, a.max)}
                                 : Interval{0, Interval::kUnboundedAbove});
    }
    FloatInterval a = float_of(n.operand);
    switch (n.op) {
      case UnaryOp::kNeg:
        return floats({-a.max, -a.min});
      case UnaryOp::kFloor:
        return floats({std::floor(a.min), std::floor(a.max)});
      case UnaryOp::kCeil:
        return floats({std::ceil(a.min), std::ceil(a.max)});
      case UnaryOp::kRoundEven:
        return floats({std::nearbyint(a.min), std::nearbyint(a.max)});
      case UnaryOp::kSigmoid:
        return floats({0.0, 1.0});
      case UnaryOp::kTanh:
        return floats({-1.0, 1.0});
      case UnaryOp::kExp:
        return floats({0.0, kInf});
      case UnaryOp::kAbs:
        return floats({a.min >= 0 ? a.min : 0.0, std::max(std::fabs(a.min), std::fabs(a.max))});
      default:
        return floats(kUnknownFloat);
    }
  }
  Range visit_Binary(const BinaryNode& n, const Expr&) override {
    if (n.op == BinaryOp::kAnd || n.op == BinaryOp::kOr) return ints({0, 1});
    return is_float(n.dtype) ? floats(float_binary(n)) : ints(int_binary(n));
  }
  Range visit_Compare(const CompareNode& n, const Expr&) override {
    if (is_float(n.a.dtype())) return ints({0, 1});
    Interval a = int_of(n.a), b = int_of(n.b);
    auto lt = [](const Interval& x, const Interval& y) {
      return x.has_max() && y.has_min() && x.max < y.min;
    };
    auto le = [](const Interval& x, const Interval& y) {
      return x.has_max() && y.has_min() && x.max <= y.min;
    };
    bool always = false, never = false;
    switch (n.op) {
      case CompareOp::kLt:
        always = lt(a, b);
        never = le(b, a);
        break;
      case CompareOp::kLe:
        always = le(a, b);
        never = lt(b, a);
        break;
      case CompareOp::kGt:
        always = lt(b, a);
        never = le(a, b);
        break;
      case CompareOp::kGe:
        always = le(b, a);
        never = lt(a, b);
        break;
      case CompareOp::kEq:
        always = a.is_point() && b.is_point() && a.min == b.min;
        never = lt(a, b) || lt(b, a);
        break;
      case CompareOp::kNe:
        never = a.is_point() && b.is_point() && a.min == b.min;
        always = lt(a, b) || lt(b, a);
        break;
    }
    return ints(always ? Interval{1, 1} : never ? Interval{0, 0} : Interval{0, 1});
  }
  Range visit_Select(const SelectNode& n, const Expr&) override {
    Interval c = int_of(n.condition);
    if (c.is_point()) return bounds_.range_of(c.min != 0 ? n.true_value : n.false_value);
    if (is_float(n.dtype)) {
      FloatInterval t = float_of(n.true_value), f = float_of(n.false_value);
      return floats({std::min(t.min, f.min), std::max(t.max, f.max)});
    }
    Interval t = int_of(n.true_value), f = int_of(n.false_value);
    return ints({std::min(t.min, f.min), std::max(t.max, f.max)});
  }
  Range visit_Cast(const CastNode& n, const Expr&) override {
    DType from = n.value.dtype();
    if (is_float(n.dtype)) {
      if (is_float(from)) {
        FloatInterval v = float_of(n.value);
        return floats({round_to(n.dtype, v.min), round_to(n.dtype, v.max)});
      }
      Interval v = int_of(n.value);
      return floats({v.has_min() ? round_to(n.dtype, static_cast<double>(v.min)) : -kInf,
                     v.has_max() ? round_to(n.dtype, static_cast<double>(v.max)) : kInf});
    }
    if (n.dtype == DType::kBool) return ints({0, 1});
    Interval target = dtype_range(n.dtype), v;
    if (is_float(from)) {
      FloatInterval f = float_of(n.value);
      constexpr double kLimit = 4.0e18;  // comfortably inside int64
      if (!(f.min > -kLimit && f.max < kLimit)) return ints(target);
      v = {static_cast<int64_t>(std::trunc(f.min)), static_cast<int64_t>(std::trunc(f.max))};
    } else {
      v = int_of(n.value);
    }
    bool fits = (!target.has_min() || (v.has_min() && v.min >= target.min)) &&
                (!target.has_max() || (v.has_max() && v.max <= target.max));
    return ints(fits ? v : target);
  }
  Range visit_Reduce(const ReduceNode& n, const Expr&) override {
    for (const Axis& axis : n.axes) {
      if (!bounds_.is_bound(axis.var.get())) bounds_.bind_reduce_axis(axis);
    }
    if (is_sum(n.op)) return ints(kUnknown);
    // max/min: the body's range, or the identity when the box may be empty.
    bool non_empty = true;
    for (const Axis& axis : n.axes)
      non_empty &= int_of(axis.extent).min >= 1 && int_of(axis.extent).has_min();
    if (!non_empty) return Range{};
    return bounds_.range_of(n.body);
  }

 private:
  Interval int_binary(const BinaryNode& n) {
    Interval a = int_of(n.a), b = int_of(n.b);
    switch (n.op) {
      case BinaryOp::kAdd:
        return add(a, b);
      case BinaryOp::kSub:
        return add(a, negate(b));
      case BinaryOp::kMul:
        return corners(
            a, b, [](int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); });
      case BinaryOp::kDiv:
        return divide(a, b);
      case BinaryOp::kMod:
        return modulo(a, b);
      case BinaryOp::kMin:
        return {std::min(a.min, b.min), std::min(a.max, b.max)};
      case BinaryOp::kMax:
        return {std::max(a.min, b.min), std::max(a.max, b.max)};
      default:
        return kUnknown;
    }
  }

  FloatInterval float_binary(const BinaryNode& n) {
    FloatInterval a = float_of(n.a), b = float_of(n.b);
    switch (n.op) {
      case BinaryOp::kAdd:
        return float_hull(n.dtype, {a.min + b.min, a.max + b.max});
      case BinaryOp::kSub:
        return float_hull(n.dtype, {a.min - b.max, a.max - b.min});
      case BinaryOp::kMul:
        return float_hull(n.dtype, {a.min * b.min, a.min * b.max, a.max * b.min, a.max * b.max});
      case BinaryOp::kDiv:
        if (b.min <= 0 && b.max >= 0) return kUnknownFloat;
        return float_hull(n.dtype, {a.min / b.min, a.min / b.max, a.max / b.min, a.max / b.max});
      case BinaryOp::kMin:
        return {std::min(a.min, b.min), std::min(a.max, b.max)};
      case BinaryOp::kMax:
        return {std::max(a.min, b.min), std::max(a.max, b.max)};
      default:
        return kUnknownFloat;
    }
  }

  Bounds& bounds_;
};

void Bounds::bind(const VarNode* var, Interval range) {
  auto [it, first] = vars_.emplace(var, range);
  if (!first && (it->second.min != range.min || it->second.max != range.max)) {
    it->second = range;
    memo_.clear();  // ranges computed under the old binding are stale
  }
  affine_vars_.erase(var);
  symbol_extent_.erase(var);
}

void Bounds::unbind(const VarNode* var) {
  vars_.erase(var);
  affine_vars_.erase(var);
  symbol_extent_.erase(var);
  memo_.clear();
}

void Bounds::bind_domain(const std::vector<Axis>& domain) {
  for (const Axis& axis : domain) {
    Interval extent = of(axis.extent);
    Interval start = of(axis.start);
    int64_t last = extent.has_max() && start.has_max()
                       ? start.max + std::max<int64_t>(extent.max - 1, 0)
                       : Interval::kUnboundedAbove;
    // An extent written `end - start` (a gather's window) ends before `end`, which interval
    // arithmetic on the difference alone cannot see.
    auto* difference = axis.extent.as<BinaryNode>();
    if (difference && difference->op == BinaryOp::kSub &&
        structurally_equal(difference->b, axis.start)) {
      Interval end = of(difference->a);
      if (end.has_max()) last = std::min(last, end.max - 1);
    }
    if (start.has_min()) last = std::max(last, start.min);  // never empty, even when unused
    bind(axis.var.get(), {start.min, last});
    // var = start + offset, offset in [0, extent): exact for affine index math.
    auto* constant_extent = axis.extent.as<IntConstNode>();
    std::optional<Affine> start_affine = affine(axis.start);
    if (start_affine && constant_extent && constant_extent->value > 0) {
      start_affine->terms[axis.var.get()] += 1;
      affine_vars_[axis.var.get()] = std::move(*start_affine);
      symbol_extent_[axis.var.get()] = constant_extent->value;
    }
  }
}

void Bounds::bind_reduce_axis(const Axis& axis) {
  bind_domain({axis});
}

Bounds::Range Bounds::range_of(const Expr& e) {
  auto it = memo_.find(e.get());
  if (it != memo_.end()) return it->second.second;
  BoundsVisitor visitor(*this);
  Range r = visitor.visit(e);
  if (r.floats.min > r.floats.max) r.floats = kUnknownFloat;  // NaN-producing corners
  memo_[e.get()] = {e, r};
  return r;
}

Interval Bounds::of(const Expr& e) {
  return range_of(e).ints;
}
FloatInterval Bounds::of_float(const Expr& e) {
  return range_of(e).floats;
}

namespace {

/// a + scale * b, or nullopt on overflow.
template <typename AffineT>
std::optional<AffineT> combine(AffineT a, const AffineT& b, int64_t scale) {
  for (const auto& [symbol, coefficient] : b.terms) {
    int64_t scaled;
    if (__builtin_mul_overflow(scale, coefficient, &scaled) ||
        __builtin_add_overflow(a.terms[symbol], scaled, &a.terms[symbol]))
      return std::nullopt;
  }
  int64_t scaled;
  if (__builtin_mul_overflow(scale, b.constant, &scaled) ||
      __builtin_add_overflow(a.constant, scaled, &a.constant))
    return std::nullopt;
  return a;
}

}  // namespace

std::optional<Bounds::Affine> Bounds::affine(const Expr& e) const {
  if (auto* c = e.as<IntConstNode>()) return Affine{{}, c->value};
  if (auto* v = e.as<VarNode>()) {
    auto it = affine_vars_.find(v);
    return it == affine_vars_.end() ? std::nullopt : std::optional<Affine>(it->second);
  }
  if (auto* c = e.as<CastNode>()) {
    return is_integer(c->value.dtype()) && is_integer(c->dtype) ? affine(c->value) : std::nullopt;
  }
  if (auto* u = e.as<UnaryNode>(); u && u->op == UnaryOp::kNeg && is_integer(u->dtype)) {
    std::optional<Affine> a = affine(u->operand);
    return a ? combine(Affine{}, *a, -1) : std::nullopt;
  }
  auto* b = e.as<BinaryNode>();
  if (!b || !is_integer(b->dtype)) return std::nullopt;
  std::optional<Affine> x = affine(b->a), y = affine(b->b);
  if (!x || !y) return std::nullopt;
  switch (b->op) {
    case BinaryOp::kAdd:
      return combine(*x, *y, 1);
    case BinaryOp::kSub:
      return combine(*x, *y, -1);
    case BinaryOp::kMul:
      if (x->terms.empty()) return combine(Affine{}, *y, x->constant);
      if (y->terms.empty()) return combine(Affine{}, *x, y->constant);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<Interval> Bounds::exact_of(const Expr& e) const {
  std::optional<Affine> a = affine(e);
  if (!a) return std::nullopt;
  Interval range = Interval::point(a->constant);
  for (const auto& [symbol, coefficient] : a->terms) {
    auto extent = symbol_extent_.find(symbol);
    if (extent == symbol_extent_.end()) return std::nullopt;
    int64_t span;  // coefficient * (extent - 1), added to the side its sign selects
    if (__builtin_mul_overflow(coefficient, extent->second - 1, &span)) return std::nullopt;
    int64_t& side = span < 0 ? range.min : range.max;
    if (__builtin_add_overflow(side, span, &side)) return std::nullopt;
  }
  return range;
}

}  // namespace adjoint::ir
