// The one interval analysis of IR expressions, shared by everything that must prove facts about
// index math: the verifier (every index in bounds), simplify (min/max of ordered ranges, div/mod
// by constants, comparisons), index_width (every offset and loop bound fits in int32) and the
// CUDA emitter (plain `/` and `%` where the operands are provably non-negative).
//
// A Bounds object holds the ranges of the index variables in scope (stage domains over
// [0, extent), reduce axes over [start, start + extent)) and answers "which values can this
// expression take" conservatively: the true value always lies in the returned range. Integer
// ranges are exact int64 arithmetic that gives up (becomes unbounded) on overflow; float ranges
// are doubles rounded outward and then to the node's dtype (rounding is monotone), so an f32
// index map such as floor(f32(o) * 0.5f) is bounded soundly. Loads of float or i64 data are
// unknown. Results are memoized per node; variables are bound once per program (an IR rule), so
// a node's range never changes while a binding lives (unbind forgets the memo).
//
// Interval arithmetic over-approximates expressions that use a variable twice (`k - 2*i` where
// k itself ranges over 2i + [0, 3)). exact_of() answers those: for an integer expression affine
// in the domain variables and in the offsets of reduce axes of constant extent (each reduce
// variable rewritten as its affine start plus an offset over [0, extent)), the exact range,
// every bound of which is attained.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/expr.h"
#include "ir/int_math.h"

namespace adjoint::ir {

/// A closed range [min, max] of integer values; the int64 limits stand for "unbounded".
struct Interval {
  static constexpr int64_t kUnboundedBelow = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kUnboundedAbove = std::numeric_limits<int64_t>::max();
  int64_t min = kUnboundedBelow;
  int64_t max = kUnboundedAbove;

  static Interval point(int64_t v) { return {v, v}; }
  bool has_min() const { return min != kUnboundedBelow; }
  bool has_max() const { return max != kUnboundedAbove; }
  bool is_bounded() const { return has_min() && has_max(); }
  bool is_point() const { return is_bounded() && min == max; }
  /// True when every value lies in [lo, hi].
  bool within(int64_t lo, int64_t hi) const {
    return has_min() && has_max() && min >= lo && max <= hi;
  }
  bool fits_int32() const;
};

/// A closed range of float values; infinities mean unbounded. NaN is not tracked: consumers
/// use float ranges only to bound float-to-integer casts, which are undefined for NaN anyway.
struct FloatInterval {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
};

/// "[lo, hi]" with "-inf"/"inf" for unbounded sides.
std::string to_string(const Interval& range);

/// The ranges of index variables in scope and of expressions over them.
class Bounds {
 public:
  /// Binds a variable to a range (a stage domain var or a reduce axis).
  void bind(const VarNode* var, Interval range);
  /// Binds each axis of a stage domain (constant extents) to [0, extent).
  void bind_domain(const std::vector<Axis>& domain);
  /// Binds a reduce axis: [min of start, max of start + extent - 1], evaluated in this scope.
  void bind_reduce_axis(const Axis& axis);
  /// Forgets a variable's binding (and every memoized range, which may have used it).
  void unbind(const VarNode* var);
  bool is_bound(const VarNode* var) const { return vars_.count(var) != 0; }

  /// A range containing every value of an integer or bool expression (bool: 0 or 1).
  Interval of(const Expr& e);
  /// A range containing every value of a float expression.
  FloatInterval of_float(const Expr& e);
  /// The exact range of an integer expression affine in the domain variables and in the
  /// offsets of constant-extent reduce axes; nullopt when it is not such an expression.
  std::optional<Interval> exact_of(const Expr& e) const;

  /// Proves `a <= b` / `a < b` for every value of the variables in scope.
  bool provably_le(const Expr& a, const Expr& b) {
    return of(a).max <= of(b).min && of(a).has_max() && of(b).has_min();
  }
  bool provably_lt(const Expr& a, const Expr& b) {
    return of(a).max < of(b).min && of(a).has_max() && of(b).has_min();
  }
  /// Proves that an integer expression is never negative.
  bool provably_non_negative(const Expr& e) {
    Interval r = of(e);
    return r.has_min() && r.min >= 0;
  }

 private:
  friend class BoundsVisitor;
  struct Range {
    Interval ints;
    FloatInterval floats;
  };
  Range range_of(const Expr& e);

  /// sum(coefficient * symbol) + constant; each symbol ranges independently over [0, extent).
  struct Affine {
    std::map<const VarNode*, int64_t> terms;
    int64_t constant = 0;
  };
  /// The affine form of `e`, or nullopt (not affine, or an overflow).
  std::optional<Affine> affine(const Expr& e) const;


  std::unordered_map<const VarNode*, Interval> vars_;
  /// The affine forms of bound variables, where known, and the extents of their symbols.
  std::unordered_map<const VarNode*, Affine> affine_vars_;
  std::unordered_map<const VarNode*, int64_t> symbol_extent_;
  /// Keyed by node; holds the Expr so that a node's address is never reused while memoized.
  std::unordered_map<const ExprNode*, std::pair<Expr, Range>> memo_;
};


}  // namespace adjoint::ir
