// simplify: an ExprMutator that rebuilds children first, then rewrites the rebuilt node with the
// rules listed in simplify.h, using a Bounds analysis of the variables in scope.
#include "compiler/simplify.h"

#include <cmath>
#include <optional>
#include <unordered_map>

#include "ir/bounds.h"
#include "compiler/program_utils.h"
#include "ir/equality.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::BinaryOp;
using ir::DType;
using ir::Expr;

std::optional<int64_t> int_value(const Expr& e) {
  if (auto* c = e.as<ir::IntConstNode>()) return c->value;
  return std::nullopt;
}

bool is_constant(const Expr& e) {
  return e.as<ir::IntConstNode>() || e.as<ir::FloatConstNode>();
}
bool is_int_constant(const Expr& e, int64_t v) {
  return int_value(e) == v;
}
bool is_float_constant(const Expr& e, double v, bool negative_zero = false) {
  auto* c = e.as<ir::FloatConstNode>();
  return c && c->value == v && std::signbit(c->value) == negative_zero;
}

/// An integer constant of type t, or nullopt if the value does not fit.
std::optional<Expr> make_int(DType t, int64_t v) {
  if (t == DType::kI32 && (v < INT32_MIN || v > INT32_MAX)) return std::nullopt;
  return ir::IntConstNode::make(t, v);
}

/// Exact int64 folding of a binary operation; nullopt on overflow or division by zero.
std::optional<int64_t> fold_int(BinaryOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional(r);
    case BinaryOp::kSub:
      return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional(r);
    case BinaryOp::kMul:
      return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional(r);
    case BinaryOp::kDiv:
      return (b == 0 || (a == INT64_MIN && b == -1)) ? std::nullopt
                                                     : std::optional(ir::floor_div(a, b));
    case BinaryOp::kMod:
      return (b == 0 || (a == INT64_MIN && b == -1)) ? std::nullopt
                                                     : std::optional(ir::floor_mod(a, b));
    case BinaryOp::kMin:
      return std::min(a, b);
    case BinaryOp::kMax:
      return std::max(a, b);
    case BinaryOp::kAnd:
      return (a != 0 && b != 0) ? 1 : 0;
    case BinaryOp::kOr:
      return (a != 0 || b != 0) ? 1 : 0;
    default:
      return std::nullopt;
  }
}

/// Folds a float-valued (or float-compare) node whose operands are constants, exactly as the
/// interpreter evaluates it.
Expr fold_with_interpreter(const Expr& e) {
  double v = ir::evaluate_constant(e);
  if (ir::is_float(e.dtype())) return ir::FloatConstNode::make(e.dtype(), v);
  return ir::IntConstNode::make(e.dtype(), static_cast<int64_t>(v));
}

/// `x * c` or `c * x` with a constant c: returns x and sets *c.
const Expr* scaled_by_constant(const ir::BinaryNode& mul, int64_t* c) {
  if (mul.op != BinaryOp::kMul) return nullptr;
  if (auto v = int_value(mul.b)) {
    *c = *v;
    return &mul.a;
  }
  if (auto v = int_value(mul.a)) {
    *c = *v;
    return &mul.b;
  }
  return nullptr;
}

class Simplifier : public ir::ExprMutator {
 public:
  explicit Simplifier(ir::Bounds& bounds) : bounds_(bounds) {}

 protected:
  Expr visit_Unary(const ir::UnaryNode& node, const Expr& self) override {
    Expr e = ExprMutator::visit_Unary(node, self);
    auto* u = e.as<ir::UnaryNode>();
    if (!u || !is_constant(u->operand)) return e;
    if (u->op == ir::UnaryOp::kNot)
      return ir::IntConstNode::make(DType::kBool, *int_value(u->operand) == 0);
    if (u->op == ir::UnaryOp::kNeg && !ir::is_float(u->dtype)) {
      auto v = fold_int(BinaryOp::kSub, 0, *int_value(u->operand));
      auto r = v ? make_int(u->dtype, *v) : std::nullopt;
      return r ? *r : e;
    }
    if (u->op == ir::UnaryOp::kAbs && !ir::is_float(u->dtype)) {
      int64_t v = *int_value(u->operand);
      auto r = v == INT64_MIN ? std::nullopt : make_int(u->dtype, v < 0 ? -v : v);
      return r ? *r : e;
    }
    return fold_with_interpreter(e);
  }

  Expr visit_Binary(const ir::BinaryNode& node, const Expr& self) override {
    Expr e = ExprMutator::visit_Binary(node, self);
    auto* b = e.as<ir::BinaryNode>();
    return b ? rewrite_binary(*b, e) : e;
  }

  Expr visit_Compare(const ir::CompareNode& node, const Expr& self) override {
    Expr e = ExprMutator::visit_Compare(node, self);
    auto* c = e.as<ir::CompareNode>();
    if (!c) return e;
    auto x = int_value(c->a), y = int_value(c->b);
    if (x && y) {  // exact int64 comparison (the interpreter's double would round above 2^53)
      static constexpr bool kTable[6][3] = {// [op][a<b, a==b, a>b]
                                            {false, true, false}, {true, false, true},
                                            {true, false, false}, {true, true, false},
                                            {false, false, true}, {false, true, true}};
      int order = *x < *y ? 0 : (*x == *y ? 1 : 2);
      return ir::IntConstNode::make(DType::kBool, kTable[static_cast<int>(c->op)][order]);
    }
    if (is_constant(c->a) && is_constant(c->b)) return fold_with_interpreter(e);
    ir::Interval r = bounds_.of(e);  // provably true or false over the ranges in scope
    return r.is_point() ? ir::IntConstNode::make(DType::kBool, r.min) : e;
  }

  Expr visit_Select(const ir::SelectNode& node, const Expr& self) override {
    Expr e = ExprMutator::visit_Select(node, self);
    auto* s = e.as<ir::SelectNode>();
    if (!s) return e;
    if (auto c = int_value(s->condition)) return *c ? s->true_value : s->false_value;
    return e;
  }

  Expr visit_Cast(const ir::CastNode& node, const Expr& self) override {
    Expr e = ExprMutator::visit_Cast(node, self);
    auto* c = e.as<ir::CastNode>();
    if (!c) return e;
    if (c->value.dtype() == c->dtype) return c->value;
    if (auto v = int_value(c->value); v && ir::is_integer(c->dtype)) {
      auto r = make_int(c->dtype, *v);
      return r ? *r : e;
    }
    if (auto v = int_value(c->value);
        v && ir::is_float(c->dtype) && std::llabs(*v) < (int64_t{1} << 53)) {
      return fold_with_interpreter(e);  // exact in the interpreter's double
    }
    if (auto* f = c->value.as<ir::FloatConstNode>()) {
      bool exact_in_int = std::isfinite(f->value) && std::fabs(f->value) < 2147483648.0;
      if (ir::is_float(c->dtype) || c->dtype == DType::kBool || exact_in_int)
        return fold_with_interpreter(e);
    }
    return e;
  }

  // A Reduce node used twice in a stage (r + r) binds its variables once; rewriting each use
  // separately would give two Reduces binding the same variables, which verify rejects. Its
  // rewrite depends only on the ranges of the variables it names, the same at every use, so
  // every use gets the first one's result.
  Expr visit_Reduce(const ir::ReduceNode& node, const Expr& self) override {
    if (auto done = rewritten_reduces_.find(&node); done != rewritten_reduces_.end())
      return done->second;
    Expr result = rewrite_reduce(node, self);
    rewritten_reduces_.emplace(&node, result);
    return result;
  }

 private:
  Expr rewrite_reduce(const ir::ReduceNode& node, const Expr& self) {
    bool changed = false;
    std::vector<ir::Axis> axes;
    for (const ir::Axis& axis : node.axes) {
      ir::Axis m{axis.var, mutate(axis.start), mutate(axis.extent)};
      changed |= !m.start.same_as(axis.start) || !m.extent.same_as(axis.extent);
      bounds_.bind_reduce_axis(m);  // the body is simplified knowing each axis' range
      axes.push_back(std::move(m));
    }
    Expr body = mutate(node.body);
    changed |= !body.same_as(node.body);
    return changed ? ir::ReduceNode::make(node.op, std::move(axes), body, node.dtype) : self;
  }

  Expr rewrite_binary(const ir::BinaryNode& b, const Expr& e) {
    const bool is_int = !ir::is_float(b.dtype);
    if (is_int) {
      auto x = int_value(b.a), y = int_value(b.b);
      if (x && y) {
        auto v = fold_int(b.op, *x, *y);
        auto r = v ? make_int(b.dtype, *v) : std::nullopt;
        return r ? *r : e;
      }
      if (b.op == BinaryOp::kAnd || b.op == BinaryOp::kOr) return rewrite_logic(b, e);
      return rewrite_int(b, e);
    }
    if (is_constant(b.a) && is_constant(b.b)) return fold_with_interpreter(e);
    switch (b.op) {  // exact float identities only (x + 0.0 is not: -0.0 + 0.0 == +0.0)
      case BinaryOp::kMul:
        if (is_float_constant(b.b, 1.0)) return b.a;
        if (is_float_constant(b.a, 1.0)) return b.b;
        break;
      case BinaryOp::kDiv:
        if (is_float_constant(b.b, 1.0)) return b.a;
        break;
      case BinaryOp::kSub:
        if (is_float_constant(b.b, 0.0)) return b.a;
        break;
      case BinaryOp::kAdd:
        if (is_float_constant(b.b, 0.0, true)) return b.a;
        if (is_float_constant(b.a, 0.0, true)) return b.b;
        break;
      default:
        break;
    }
    return e;
  }

  Expr rewrite_logic(const ir::BinaryNode& b, const Expr& e) {
    bool is_and = b.op == BinaryOp::kAnd;
    for (const Expr* side : {&b.a, &b.b}) {
      auto v = int_value(*side);
      if (!v) continue;
      const Expr& other = side == &b.a ? b.b : b.a;
      if (is_and) return *v ? other : *side;  // true && x -> x; false && x -> false
      return *v ? *side : other;              // true || x -> true; false || x -> x
    }
    return e;
  }

  Expr rewrite_int(const ir::BinaryNode& b, const Expr& e) {
    Expr zero = ir::IntConstNode::make(b.dtype, 0);
    switch (b.op) {
      case BinaryOp::kAdd:
        if (is_int_constant(b.b, 0)) return b.a;
        if (is_int_constant(b.a, 0)) return b.b;
        return combine_constants(b, e);
      case BinaryOp::kSub:
        if (is_int_constant(b.b, 0)) return b.a;
        if (b.a.same_as(b.b)) return zero;
        if (auto* sum = b.a.as<ir::BinaryNode>(); sum && sum->op == BinaryOp::kAdd) {
          // (p + q) - p -> q and (p + q) - q -> p: a window's extent end - start.
          if (ir::structurally_equal(sum->a, b.b)) return sum->b;
          if (ir::structurally_equal(sum->b, b.b)) return sum->a;
        }
        return combine_constants(b, e);
      case BinaryOp::kMul:
        if (is_int_constant(b.b, 1)) return b.a;
        if (is_int_constant(b.a, 1)) return b.b;
        if (is_int_constant(b.a, 0) || is_int_constant(b.b, 0)) return zero;
        break;
      case BinaryOp::kMin:
      case BinaryOp::kMax: {
        bool a_le_b = bounds_.provably_le(b.a, b.b), b_le_a = bounds_.provably_le(b.b, b.a);
        if (b.op == BinaryOp::kMin && (a_le_b || b_le_a)) return a_le_b ? b.a : b.b;
        if (b.op == BinaryOp::kMax && (a_le_b || b_le_a)) return a_le_b ? b.b : b.a;
        if (b.a.same_as(b.b)) return b.a;
        break;
      }
      case BinaryOp::kDiv:
      case BinaryOp::kMod:
        if (auto c = int_value(b.b); c && *c > 0) return rewrite_div_mod(b, *c, e);
        break;
      default:
        break;
    }
    return e;
  }

  /// (x + c1) + c2 -> x + (c1 + c2), and the same with subtractions (exact for integers).
  Expr combine_constants(const ir::BinaryNode& b, const Expr& e) {
    auto outer = int_value(b.b);
    auto* inner = b.a.as<ir::BinaryNode>();
    if (!outer || !inner || (inner->op != BinaryOp::kAdd && inner->op != BinaryOp::kSub)) return e;
    auto c1 = int_value(inner->b);
    if (!c1) return e;
    std::optional<int64_t> first =
        inner->op == BinaryOp::kAdd ? *c1 : fold_int(BinaryOp::kSub, 0, *c1);
    std::optional<int64_t> total = first ? fold_int(b.op, *first, *outer) : std::nullopt;
    auto constant = total ? make_int(b.dtype, *total) : std::nullopt;
    if (!constant) return e;
    return simplify_node(ir::BinaryNode::make(BinaryOp::kAdd, inner->a, *constant));
  }

  /// x / c and x % c for a constant c > 0.
  Expr rewrite_div_mod(const ir::BinaryNode& b, int64_t c, const Expr& e) {
    const bool is_div = b.op == BinaryOp::kDiv;
    if (c == 1) return is_div ? b.a : ir::IntConstNode::make(b.dtype, 0);
    ir::Interval x = bounds_.of(b.a);
    if (x.is_bounded() && ir::floor_div(x.min, c) == ir::floor_div(x.max, c)) {  // one period
      int64_t q = ir::floor_div(x.min, c);
      if (is_div) return ir::IntConstNode::make(b.dtype, q);
      if (q == 0) return b.a;
    }
    // (y * k) / c with c | k -> y * (k / c);  (y * k) % c with c | k -> 0
    if (auto* inner = b.a.as<ir::BinaryNode>()) {
      int64_t k = 0;
      if (const Expr* y = scaled_by_constant(*inner, &k); y && k % c == 0) {
        if (!is_div) return ir::IntConstNode::make(b.dtype, 0);
        return simplify_node(
            ir::BinaryNode::make(BinaryOp::kMul, *y, ir::IntConstNode::make(b.dtype, k / c)));
      }
      // (y * k + z) / c with c | k -> y * (k / c) + z / c;  (...) % c -> z % c
      if (inner->op == BinaryOp::kAdd) {
        for (int side = 0; side < 2; ++side) {
          const Expr& term = side == 0 ? inner->a : inner->b;
          const Expr& rest = side == 0 ? inner->b : inner->a;
          auto* t = term.as<ir::BinaryNode>();
          int64_t m = 0;
          const Expr* y = t ? scaled_by_constant(*t, &m) : nullptr;
          if (!y || m % c != 0) continue;
          Expr rest_op = simplify_node(ir::BinaryNode::make(b.op, rest, b.b));
          if (!is_div) return rest_op;
          Expr scaled = simplify_node(
              ir::BinaryNode::make(BinaryOp::kMul, *y, ir::IntConstNode::make(b.dtype, m / c)));
          return simplify_node(ir::BinaryNode::make(BinaryOp::kAdd, scaled, rest_op));
        }
      }
    }
    return e;
  }

  /// Simplifies a node built by a rewrite (its children are already simplified).
  Expr simplify_node(const Expr& e) { return mutate(e); }

  ir::Bounds& bounds_;
  /// Reduce nodes already rewritten in this stage (the key is kept alive by the stage).
  std::unordered_map<const ir::ReduceNode*, Expr> rewritten_reduces_;
};

}  // namespace

ir::Program simplify(const ir::Program& program) {
  ir::Program out = program;
  ir::Bounds bounds;
  for (ir::Kernel& kernel : out.kernels) {
    for (ir::Stage& stage : kernel.stages) {
      bounds.bind_domain(stage.domain);
      Simplifier simplifier(bounds);
      stage = map_stage(stage, [&](const Expr& e) { return simplifier.mutate(e); });
    }
  }
  return same_program(out, program) ? program : out;
}

ir::Expr simplify(const ir::Expr& e) {
  ir::Bounds bounds;
  Simplifier simplifier(bounds);
  return simplifier.mutate(e);
}

}  // namespace adjoint::compiler
