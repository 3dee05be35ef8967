// Interval arithmetic on i64 with saturation at +-kUnbounded, and the affine forms that make
// the ranges of affine index expressions exact.
#include "ir/index_ranges.h"

#include "ir/int_math.h"

#include <algorithm>

namespace adjoint::ir {
namespace {

constexpr int64_t kInf = IndexInterval::kUnbounded;

bool is_infinite(int64_t x) {
  return x == kInf || x == -kInf;
}

int64_t saturate(__int128 x) {
  if (x >= kInf) return kInf;
  if (x <= -kInf) return -kInf;
  return static_cast<int64_t>(x);
}

/// Sum of two bounds of the same side (lo + lo or hi + hi), so inf + -inf never occurs.
int64_t add(int64_t a, int64_t b) {
  if (is_infinite(a)) return a;
  if (is_infinite(b)) return b;
  return saturate(static_cast<__int128>(a) + b);
}

int64_t multiply(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (is_infinite(a) || is_infinite(b)) return (a < 0) != (b < 0) ? -kInf : kInf;
  return saturate(static_cast<__int128>(a) * b);
}

/// Floor division by a finite nonzero b; an infinite bound stays infinite.
int64_t floor_div_bound(int64_t a, int64_t b) {
  if (is_infinite(a)) return (a < 0) != (b < 0) ? -kInf : kInf;
  return ir::floor_div(a, b);
}

IndexInterval add(IndexInterval a, IndexInterval b) {
  return {add(a.lo, b.lo), add(a.hi, b.hi)};
}
IndexInterval negate(IndexInterval a) {
  return {-a.hi, -a.lo};
}

IndexInterval multiply(IndexInterval a, IndexInterval b) {
  int64_t c[] = {multiply(a.lo, b.lo), multiply(a.lo, b.hi), multiply(a.hi, b.lo),
                 multiply(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

bool is_nonzero_constant(IndexInterval a) {
  return a.lo == a.hi && a.lo != 0 && !is_infinite(a.lo);
}

/// Floor division by a nonzero constant (monotone in the dividend); unknown otherwise.
IndexInterval divide(IndexInterval a, IndexInterval b) {
  if (!is_nonzero_constant(b)) return {};
  int64_t x = floor_div_bound(a.lo, b.lo), y = floor_div_bound(a.hi, b.lo);
  return {std::min(x, y), std::max(x, y)};
}

/// Floor modulo by a nonzero constant c: exact within one period of the dividend, else the
/// whole range of residues ([0, c) for c > 0, (c, 0] for c < 0).
IndexInterval modulo(IndexInterval a, IndexInterval b) {
  if (!is_nonzero_constant(b)) return {};
  int64_t c = b.lo;
  if (!is_infinite(a.lo) && !is_infinite(a.hi) && floor_div_bound(a.lo, c) == floor_div_bound(a.hi, c)) {
    int64_t base = floor_div_bound(a.lo, c) * c;  // a % c == a - base over the whole range
    return {a.lo - base, a.hi - base};
  }
  return c > 0 ? IndexInterval{0, c - 1} : IndexInterval{c + 1, 0};
}

std::string bound_string(int64_t x) {
  if (x == kInf) return "inf";
  if (x == -kInf) return "-inf";
  return std::to_string(x);
}

}  // namespace

std::string to_string(const IndexInterval& range) {
  std::string text = "[";  // appended piecewise: GCC 12 warns falsely on "[" + std::string
  text += bound_string(range.lo);
  text += ", ";
  text += bound_string(range.hi);
  return text + "]";
}

void IndexRanges::bind_domain(const VarNode* v, int64_t extent) {
  bindings_[v] = Binding{IndexInterval{0, extent - 1}, Affine{{{v, 1}}, 0}};
  symbol_extent_[v] = extent;
}

void IndexRanges::bind_reduce(const Axis& axis) {
  IndexInterval start = interval(axis.start), extent = interval(axis.extent);
  Binding binding{IndexInterval{start.lo, add(add(start.hi, extent.hi), -1)}, std::nullopt};
  auto* constant_extent = axis.extent.as<IntConstNode>();
  std::optional<Affine> start_affine = affine(axis.start);
  if (start_affine && constant_extent && constant_extent->value > 0) {
    start_affine->terms[axis.var.get()] += 1;  // var = start + offset, offset in [0, extent)
    binding.affine = std::move(start_affine);
    symbol_extent_[axis.var.get()] = constant_extent->value;
  }
  bindings_[axis.var.get()] = std::move(binding);
}

void IndexRanges::unbind(const VarNode* v) {
  bindings_.erase(v);
  symbol_extent_.erase(v);
}

IndexInterval IndexRanges::interval(const Expr& e) const {
  if (auto* c = e.as<IntConstNode>()) return {c->value, c->value};
  if (auto* v = e.as<VarNode>()) return is_bound(v) ? bindings_.at(v).range : IndexInterval{};
  if (auto* c = e.as<CastNode>()) {
    return is_float(c->value.dtype()) ? IndexInterval{} : interval(c->value);
  }
  if (auto* u = e.as<UnaryNode>()) {
    return u->op == UnaryOp::kNeg ? negate(interval(u->operand)) : IndexInterval{};
  }
  if (auto* s = e.as<SelectNode>()) {
    IndexInterval t = interval(s->true_value), f = interval(s->false_value);
    return {std::min(t.lo, f.lo), std::max(t.hi, f.hi)};
  }
  auto* b = e.as<BinaryNode>();
  if (!b || !is_integer(b->dtype)) return {};
  IndexInterval x = interval(b->a), y = interval(b->b);
  switch (b->op) {
    case BinaryOp::kAdd:
      return add(x, y);
    case BinaryOp::kSub:
      return add(x, negate(y));
    case BinaryOp::kMul:
      return multiply(x, y);
    case BinaryOp::kDiv:
      return divide(x, y);
    case BinaryOp::kMod:
      return modulo(x, y);
    case BinaryOp::kMin:
      return {std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
    case BinaryOp::kMax:
      return {std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
    default:
      return {};
  }
}

std::optional<IndexInterval> IndexRanges::exact_interval(const Expr& e) const {
  std::optional<Affine> a = affine(e);
  if (!a) return std::nullopt;
  IndexInterval range{a->constant, a->constant};
  for (const auto& [symbol, coefficient] : a->terms) {
    int64_t extent = symbol_extent_.at(symbol);
    range = add(range, multiply(IndexInterval{coefficient, coefficient}, {0, extent - 1}));
  }
  return range;
}

IndexRanges::Affine IndexRanges::combine(Affine a, const Affine& b, int64_t scale) {
  for (const auto& [symbol, coefficient] : b.terms) {
    a.terms[symbol] = add(a.terms[symbol], multiply(scale, coefficient));
  }
  a.constant = add(a.constant, multiply(scale, b.constant));
  return a;
}

std::optional<IndexRanges::Affine> IndexRanges::affine(const Expr& e) const {
  if (auto* c = e.as<IntConstNode>()) return Affine{{}, c->value};
  if (auto* v = e.as<VarNode>()) return is_bound(v) ? bindings_.at(v).affine : std::nullopt;
  if (auto* c = e.as<CastNode>()) {
    return is_integer(c->value.dtype()) ? affine(c->value) : std::nullopt;
  }
  if (auto* u = e.as<UnaryNode>(); u && u->op == UnaryOp::kNeg) {
    std::optional<Affine> a = affine(u->operand);
    if (a) a = combine({}, *a, -1);
    return a;
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
      if (x->terms.empty()) return combine({}, *y, x->constant);
      if (y->terms.empty()) return combine({}, *x, y->constant);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace adjoint::ir
