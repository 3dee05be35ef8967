// Node constructors: each make() checks the typing rules stated in ir/expr.h and throws
// adjoint::Error with the offending operand types, so an ill-typed node never exists.
#include "ir/expr.h"

#include <cmath>
#include <sstream>

#include "ir/error.h"
#include "ir/tensor.h"

namespace adjoint::ir {
namespace {

[[noreturn]] void type_error(const std::string& what) {
  throw Error("IR type error: " + what, ErrorCode::kInvalidProgram);
}

std::string dt(DType t) { return std::string(dtype_name(t)); }

}  // namespace

Expr::Expr(int value) : Expr(IntConstNode::make(DType::kI64, value)) {}
Expr::Expr(int64_t value) : Expr(IntConstNode::make(DType::kI64, value)) {}
Expr::Expr(double value) : Expr(FloatConstNode::make(DType::kF64, value)) {}
Expr::Expr(const Var& v) : node_(v.node()) {}

Var::Var(std::string name_hint) : node_(std::make_shared<VarNode>(std::move(name_hint))) {}
Var Var::from_node(std::shared_ptr<const VarNode> node) {
  Var v;
  v.node_ = std::move(node);
  return v;
}

Expr IntConstNode::make(DType t, int64_t v) {
  if (!is_integer(t) && t != DType::kBool) type_error("integer constant of type " + dt(t));
  if (t == DType::kBool) v = v != 0;
  if (t == DType::kI32 && (v > INT32_MAX || v < INT32_MIN)) {
    type_error("constant " + std::to_string(v) + " does not fit in i32");
  }
  return Expr(std::make_shared<IntConstNode>(t, v));
}

Expr FloatConstNode::make(DType t, double v) {
  if (!is_float(t)) type_error("float constant of type " + dt(t));
  return Expr(std::make_shared<FloatConstNode>(t, round_to(t, v)));
}

LoadNode::LoadNode(Tensor t, std::vector<Expr> idx)
    : ExprNode(kKind, t->dtype), tensor(std::move(t)), indices(std::move(idx)) {}

Expr LoadNode::make(Tensor t, std::vector<Expr> indices) {
  if (!t) type_error("load from a null tensor");
  if (static_cast<int>(indices.size()) != t->rank()) {
    type_error("load of '" + t->name + "' has " + std::to_string(indices.size()) +
               " indices, but the tensor has rank " + std::to_string(t->rank()));
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i].defined()) type_error("load of '" + t->name + "': index " +
                                          std::to_string(i) + " is undefined");
    if (!is_integer(indices[i].dtype())) {
      type_error("load of '" + t->name + "': index " + std::to_string(i) + " has type " +
                 dt(indices[i].dtype()) + ", expected i32 or i64");
    }
  }
  return Expr(std::make_shared<LoadNode>(std::move(t), std::move(indices)));
}

std::string_view unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kFloor: return "floor";
    case UnaryOp::kCeil: return "ceil";
    case UnaryOp::kRoundEven: return "round_even";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kRsqrt: return "rsqrt";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kSin: return "sin";
    case UnaryOp::kCos: return "cos";
    case UnaryOp::kLog1p: return "log1p";
    case UnaryOp::kExpm1: return "expm1";
    case UnaryOp::kNot: return "not";
  }
  return "?";
}

Expr UnaryNode::make(UnaryOp op, Expr a) {
  if (!a.defined()) type_error(std::string(unary_op_name(op)) + " of an undefined operand");
  DType t = a.dtype();
  if (op == UnaryOp::kNot) {
    if (t != DType::kBool) type_error("not of a " + dt(t) + " operand, expected bool");
  } else if (op == UnaryOp::kNeg || op == UnaryOp::kAbs) {
    if (t == DType::kBool) type_error(std::string(unary_op_name(op)) + " of a bool operand");
  } else if (!is_float(t)) {
    type_error(std::string(unary_op_name(op)) + " of a " + dt(t) +
               " operand, expected a float type (cast it first)");
  }
  return Expr(std::make_shared<UnaryNode>(op, std::move(a)));
}

std::string_view binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kMin: return "min";
    case BinaryOp::kMax: return "max";
    case BinaryOp::kPow: return "pow";
    case BinaryOp::kAnd: return "&&";
    case BinaryOp::kOr: return "||";
  }
  return "?";
}

Expr BinaryNode::make(BinaryOp op, Expr a, Expr b) {
  std::string name(binary_op_name(op));
  if (!a.defined() || !b.defined()) type_error("'" + name + "' with an undefined operand");
  if (a.dtype() != b.dtype()) {
    type_error("operands of '" + name + "' have types " + dt(a.dtype()) + " and " +
               dt(b.dtype()) + "; insert a cast so they match");
  }
  DType t = a.dtype();
  if ((op == BinaryOp::kAnd || op == BinaryOp::kOr) != (t == DType::kBool)) {
    type_error("'" + name + "' of " + dt(t) + " operands" +
               (t == DType::kBool ? " (bool only supports && and ||)" : ", expected bool"));
  }
  if (op == BinaryOp::kPow && !is_float(t)) {
    type_error("pow of " + dt(t) + " operands, expected a float type");
  }
  return Expr(std::make_shared<BinaryNode>(op, std::move(a), std::move(b)));
}

std::string_view compare_op_name(CompareOp op) {
  switch (op) {
    case CompareOp::kEq: return "==";
    case CompareOp::kNe: return "!=";
    case CompareOp::kLt: return "<";
    case CompareOp::kLe: return "<=";
    case CompareOp::kGt: return ">";
    case CompareOp::kGe: return ">=";
  }
  return "?";
}

Expr CompareNode::make(CompareOp op, Expr a, Expr b) {
  std::string name(compare_op_name(op));
  if (!a.defined() || !b.defined()) type_error("'" + name + "' with an undefined operand");
  if (a.dtype() != b.dtype()) {
    type_error("operands of '" + name + "' have types " + dt(a.dtype()) + " and " +
               dt(b.dtype()) + "; insert a cast so they match");
  }
  return Expr(std::make_shared<CompareNode>(op, std::move(a), std::move(b)));
}

Expr SelectNode::make(Expr c, Expr t, Expr f) {
  if (!c.defined() || !t.defined() || !f.defined()) type_error("select with an undefined operand");
  if (c.dtype() != DType::kBool) type_error("select condition has type " + dt(c.dtype()) +
                                            ", expected bool");
  if (t.dtype() != f.dtype()) {
    type_error("select branches have types " + dt(t.dtype()) + " and " + dt(f.dtype()));
  }
  return Expr(std::make_shared<SelectNode>(std::move(c), std::move(t), std::move(f)));
}

Expr CastNode::make(DType t, Expr v) {
  if (!v.defined()) type_error("cast of an undefined operand");
  return Expr(std::make_shared<CastNode>(t, std::move(v)));
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kFmaSum: return "fma_sum";
  }
  return "?";
}

bool is_sum(ReduceOp op) { return op == ReduceOp::kSum || op == ReduceOp::kFmaSum; }

const BinaryNode* fused_product(const ReduceNode& reduce) {
  if (reduce.op != ReduceOp::kFmaSum) return nullptr;
  auto* product = reduce.body.as<BinaryNode>();
  return product && product->op == BinaryOp::kMul && product->dtype == reduce.dtype ? product
                                                                                   : nullptr;
}

Expr ReduceNode::make(ReduceOp op, std::vector<Axis> axes, Expr body, DType accumulation) {
  std::string name(reduce_op_name(op));
  if (!body.defined()) type_error(name + " of an undefined body");
  if (axes.empty()) type_error(name + " over no axes");
  if (accumulation == DType::kBool) type_error(name + " accumulated in bool");
  if (op == ReduceOp::kFmaSum && accumulation != DType::kF32 && accumulation != DType::kF64) {
    type_error(name + " accumulated in " + dt(accumulation) + ", expected f32 or f64");
  }
  if (is_float(body.dtype()) && !is_float(accumulation)) {
    type_error(name + " of a " + dt(body.dtype()) + " body accumulated in " + dt(accumulation) +
               ", expected a float accumulation type");
  }
  if (is_float(body.dtype()) && dtype_bytes(accumulation) < dtype_bytes(body.dtype())) {
    type_error(name + " of a " + dt(body.dtype()) + " body accumulated in the narrower " +
               dt(accumulation));
  }
  for (const Axis& ax : axes) {
    if (!ax.start.defined() || !ax.extent.defined()) {
      type_error(name + " axis '" + ax.var.name_hint() + "' has an undefined start or extent");
    }
    if (!is_integer(ax.start.dtype()) || !is_integer(ax.extent.dtype())) {
      type_error(name + " axis '" + ax.var.name_hint() + "' has a non-integer start or extent");
    }
  }
  return Expr(std::make_shared<ReduceNode>(op, std::move(axes), std::move(body), accumulation));
}

}  // namespace adjoint::ir
