// Expression nodes of the tensor-expression IR and the Expr handle that owns them.
//
// Semantics that every pass, the interpreter and the CUDA emitter rely on:
// - Every node has a dtype. Binary operands and select branches have equal dtypes (the builder
//   adapts literals; anything else needs an explicit cast). Comparisons yield bool.
// - Index arithmetic is i64 by default and never overflows (the compiler picks 32-bit math only
//   where it proves every value fits). Integer division and modulo round toward negative
//   infinity (floor division; the result of a modulo has the sign of the divisor), as in
//   Python/Halide; division by zero is undefined.
// - Float arithmetic happens in the node's dtype: a node of type f32 yields the f32 rounding of
//   its exact result. Float expressions are never reassociated or contracted into FMAs by any
//   pass (the emitter compiles with --fmad=false) so the device agrees with the interpreter.
//   Fused multiply-adds exist only where the IR says so: a `fma_sum` reduce (below).
// - Evaluation has no side effects; select evaluates only the branch it picks (a load in the
//   other branch may be out of bounds).
// - A Reduce sums/maxes/mins its body over a box of reduce axes. Each axis has a start and an
//   extent, both expressions of outer index variables (not of the reduce's own axes); an empty
//   box yields the identity (0 for sum, -inf/+inf for max/min, or the integer limits). The body
//   is converted to the reduce's accumulation dtype, which is the reduce's own dtype. The order
//   of accumulation is unspecified for floats (the interpreter accumulates in f64).
// - A `fma_sum` is a sum (f32 or f64 accumulation) whose body, when it is a multiply a * b in
//   the accumulation dtype, is never rounded on its own: each step adds the exact product to
//   the accumulator with one rounding, acc = fma(a, b, acc) (fmaf/fma on the device, as the
//   compiler emits it; the interpreter adds the unrounded product to its f64 accumulator).
//   Any other body is added as in a sum. The ops write it where they mean a multiply-accumulate
//   (mhc's token and K sums); the compiler never fuses a plain sum, and splitting a fma_sum
//   combines its partials with plain additions. See docs/compiler.md, "Fused multiply-add".
// - Variables are identified by their node, never by name; names are hints made unique by the
//   printer and the emitter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace adjoint::ir {

enum class ExprKind : uint8_t {
#define X(name) k##name,
#include "ir/nodes.def"
#undef X
};

struct ExprNode {
  ExprKind kind;
  DType dtype;
  ExprNode(ExprKind k, DType t) : kind(k), dtype(t) {}
  virtual ~ExprNode() = default;
};

class Expr;
class Var;
struct TensorNode;
using Tensor = std::shared_ptr<const TensorNode>;

/// A cheap, immutable handle to an expression node. Default-constructed handles are "undefined".
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  Expr(int value);      // NOLINT: i64 literal, adapts to the other operand's type
  Expr(int64_t value);  // NOLINT
  Expr(double value);   // NOLINT: f64 literal, adapts to the other operand's type
  Expr(const Var& v);   // NOLINT

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  DType dtype() const { return node_->dtype; }
  ExprKind kind() const { return node_->kind; }
  bool same_as(const Expr& other) const { return node_ == other.node_; }
  const std::shared_ptr<const ExprNode>& node() const { return node_; }

  /// Down-cast by kind tag: nullptr when this is not a T.
  template <typename T>
  const T* as() const {
    return (node_ && node_->kind == T::kKind) ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

/// An integer constant (i64, i32 or bool).
struct IntConstNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kIntConst;
  int64_t value;
  IntConstNode(DType t, int64_t v) : ExprNode(kKind, t), value(v) {}
  static Expr make(DType t, int64_t v);
};

/// A floating-point constant; `value` is already rounded to `dtype`.
struct FloatConstNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kFloatConst;
  double value;
  FloatConstNode(DType t, double v) : ExprNode(kKind, t), value(v) {}
  static Expr make(DType t, double v);
};

/// An index variable (i64), bound by a stage's domain or a reduce axis.
struct VarNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kVar;
  std::string name_hint;
  explicit VarNode(std::string hint) : ExprNode(kKind, DType::kI64), name_hint(std::move(hint)) {}
};

/// A named handle to a VarNode; two Vars with the same hint are different variables.
class Var {
 public:
  explicit Var(std::string name_hint = "v");
  const VarNode* get() const { return node_.get(); }
  const std::string& name_hint() const { return node_->name_hint; }
  const std::shared_ptr<const VarNode>& node() const { return node_; }
  bool operator==(const Var& o) const { return node_ == o.node_; }
  /// Wraps an existing node (the var of an Expr that is a VarNode).
  static Var from_node(std::shared_ptr<const VarNode> node);

 private:
  std::shared_ptr<const VarNode> node_;
};

/// `tensor[indices...]`: reads one element; dtype is the tensor's.
struct LoadNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLoad;
  Tensor tensor;
  std::vector<Expr> indices;
  LoadNode(Tensor t, std::vector<Expr> idx);
  static Expr make(Tensor t, std::vector<Expr> indices);
};

enum class UnaryOp : uint8_t {
  kNeg, kAbs, kFloor, kCeil, kRoundEven, kExp, kLog, kSqrt, kRsqrt, kSigmoid, kTanh, kSin, kCos,
  kLog1p, kExpm1, kNot
};
std::string_view unary_op_name(UnaryOp op);

/// A one-operand operation. Math functions need a float operand; kNot needs bool.
/// floor/ceil/round_even of a float stay floats (cast to get an index).
struct UnaryNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kUnary;
  UnaryOp op;
  Expr operand;
  UnaryNode(UnaryOp o, Expr a) : ExprNode(kKind, a.dtype()), op(o), operand(std::move(a)) {}
  static Expr make(UnaryOp op, Expr a);
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kMod, kMin, kMax, kPow, kAnd, kOr };
std::string_view binary_op_name(BinaryOp op);

/// A two-operand operation on operands of equal dtype. kDiv/kMod on integers are floor
/// division and modulo; kPow needs floats; kAnd/kOr need bools.
struct BinaryNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kBinary;
  BinaryOp op;
  Expr a, b;
  BinaryNode(BinaryOp o, Expr x, Expr y)
      : ExprNode(kKind, x.dtype()), op(o), a(std::move(x)), b(std::move(y)) {}
  static Expr make(BinaryOp op, Expr a, Expr b);
};

enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
std::string_view compare_op_name(CompareOp op);

/// A comparison of two operands of equal dtype; yields bool.
struct CompareNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCompare;
  CompareOp op;
  Expr a, b;
  CompareNode(CompareOp o, Expr x, Expr y)
      : ExprNode(kKind, DType::kBool), op(o), a(std::move(x)), b(std::move(y)) {}
  static Expr make(CompareOp op, Expr a, Expr b);
};

/// `condition ? true_value : false_value`; only the chosen branch is evaluated.
struct SelectNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kSelect;
  Expr condition, true_value, false_value;
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNode(kKind, t.dtype()),
        condition(std::move(c)),
        true_value(std::move(t)),
        false_value(std::move(f)) {}
  static Expr make(Expr c, Expr t, Expr f);
};

/// Conversion to `dtype` with the rounding of ir::round_to (float->int truncates).
struct CastNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCast;
  Expr value;
  CastNode(DType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  static Expr make(DType t, Expr v);
};

/// One axis of a domain or a reduction: `var` runs over [start, start + extent).
struct Axis {
  Var var;
  Expr start;
  Expr extent;
};

enum class ReduceOp : uint8_t { kSum, kMax, kMin, kFmaSum };
std::string_view reduce_op_name(ReduceOp op);
/// True for the sums (kSum and kFmaSum): identity 0, partials combine by addition.
bool is_sum(ReduceOp op);

/// `op over axes of body`, accumulated in (and typed) `dtype`. See the header comment.
struct ReduceNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kReduce;
  ReduceOp op;
  std::vector<Axis> axes;
  Expr body;
  ReduceNode(ReduceOp o, std::vector<Axis> ax, Expr b, DType accumulation)
      : ExprNode(kKind, accumulation), op(o), axes(std::move(ax)), body(std::move(b)) {}
  static Expr make(ReduceOp op, std::vector<Axis> axes, Expr body, DType accumulation);
};

/// The product a fma_sum fuses into its accumulation: its body when that is a multiply in the
/// reduce's own (f32 or f64) dtype; nullptr for any other reduce or body (added as in a sum).
const BinaryNode* fused_product(const ReduceNode& reduce);

}  // namespace adjoint::ir
