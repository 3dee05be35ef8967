// Interval analysis of integer index expressions: the verifier's bounds check, and any pass that
// must prove an index stays in range (e.g. that offsets fit in 32 bits).
//
// An IndexRanges holds the index variables in scope: stage domain variables over [0, extent) and
// reduce variables over [start, start + extent). It answers two questions about an integer
// expression of those variables:
// - interval(): a range that contains every value the expression takes (conservative; bounds
//   saturate at -/+kUnbounded, which also stands for "unknown");
// - exact_interval(): for an expression that is affine in the variables, the exact range of
//   its values (every bound is attained at some point), computed after rewriting each reduce
//   variable as its (affine) start plus an offset over [0, extent) when its extent is a positive
//   constant. nullopt when the expression is not affine in such independent offsets.
// Loads, float casts and reductions inside an index are unknown.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "ir/expr.h"

namespace adjoint::ir {

/// A closed range [lo, hi] of i64 values; +-kUnbounded means no bound on that side.
struct IndexInterval {
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  int64_t lo = -kUnbounded;
  int64_t hi = kUnbounded;
};

/// "[lo, hi]" with "-inf"/"inf" for unbounded sides.
std::string to_string(const IndexInterval& range);

/// The index variables in scope and the ranges of expressions over them.
class IndexRanges {
 public:
  bool is_bound(const VarNode* v) const { return bindings_.count(v) != 0; }
  /// Binds a domain variable over [0, extent).
  void bind_domain(const VarNode* v, int64_t extent);
  /// Binds a reduce axis' variable; its start and extent are evaluated in the current scope.
  void bind_reduce(const Axis& axis);
  void unbind(const VarNode* v);

  /// A range containing every value of the integer expression `e`.
  IndexInterval interval(const Expr& e) const;
  /// The exact range of `e` when it is affine in independent variables, else nullopt.
  std::optional<IndexInterval> exact_interval(const Expr& e) const;

 private:
  /// sum(coefficient * symbol) + constant; each symbol ranges independently over [0, extent).
  struct Affine {
    std::map<const VarNode*, int64_t> terms;
    int64_t constant = 0;
  };
  struct Binding {
    IndexInterval range;
    std::optional<Affine> affine;  ///< in terms of independent symbols, when known
  };

  /// a + scale * b.
  static Affine combine(Affine a, const Affine& b, int64_t scale);
  std::optional<Affine> affine(const Expr& e) const;

  std::map<const VarNode*, Binding> bindings_;
  std::map<const VarNode*, int64_t> symbol_extent_;
};

}  // namespace adjoint::ir
