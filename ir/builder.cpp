// Builder functions: literal adaptation (a constant takes the dtype of the other operand) and
// thin wrappers over the node constructors, plus stage and program assembly with their checks.
#include "ir/builder.h"

#include <cmath>
#include <limits>
#include <set>

namespace adjoint::ir {
namespace {

bool is_constant(const Expr& e) {
  return e.kind() == ExprKind::kIntConst || e.kind() == ExprKind::kFloatConst;
}

/// A constant converted to type t (exactly; a non-integral float to an integer type is an error).
Expr retype_constant(const Expr& c, DType t) {
  if (c.dtype() == t) return c;
  double v = 0;
  if (auto* i = c.as<IntConstNode>()) v = static_cast<double>(i->value);
  if (auto* f = c.as<FloatConstNode>()) v = f->value;
  if (is_float(t)) return FloatConstNode::make(t, v);
  if (v != std::floor(v)) {
    throw Error("IR type error: the constant " + std::to_string(v) +
                    " cannot be used as an " + std::string(dtype_name(t)) + " value",
                ErrorCode::kInvalidProgram);
  }
  if (auto* i = c.as<IntConstNode>()) return IntConstNode::make(t, i->value);
  return IntConstNode::make(t, static_cast<int64_t>(v));
}

/// Makes the operand types of a binary operation agree where one side is a literal; i32 index
/// math meeting i64 is widened to i64.
void unify(Expr& a, Expr& b) {
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype()) return;
  bool ca = is_constant(a), cb = is_constant(b);
  if (ca && !cb) {
    a = retype_constant(a, b.dtype());
  } else if (cb && !ca) {
    b = retype_constant(b, a.dtype());
  } else if (ca && cb) {
    DType t = (is_float(a.dtype()) || !is_float(b.dtype())) ? a.dtype() : b.dtype();
    if (is_float(a.dtype()) && is_float(b.dtype())) {
      t = dtype_bytes(a.dtype()) >= dtype_bytes(b.dtype()) ? a.dtype() : b.dtype();
    }
    a = retype_constant(a, t);
    b = retype_constant(b, t);
  } else if (is_integer(a.dtype()) && is_integer(b.dtype())) {
    if (a.dtype() == DType::kI32) a = CastNode::make(DType::kI64, a);
    if (b.dtype() == DType::kI32) b = CastNode::make(DType::kI64, b);
  }
}

Expr binary(BinaryOp op, Expr a, Expr b) {
  unify(a, b);
  return BinaryNode::make(op, std::move(a), std::move(b));
}

Expr compare(CompareOp op, Expr a, Expr b) {
  unify(a, b);
  return CompareNode::make(op, std::move(a), std::move(b));
}

/// Converts the body to the accumulation type when that widens it (f16 -> f32, int -> float);
/// a float body with an integer or narrower accumulation is left for ReduceNode::make to reject.
Expr reduce(ReduceOp op, std::vector<Axis> axes, Expr body, DType acc) {
  bool narrows = body.defined() && is_float(body.dtype()) &&
                 (!is_float(acc) || dtype_bytes(acc) < dtype_bytes(body.dtype()));
  if (body.defined() && body.dtype() != acc && !narrows) {
    body = is_constant(body) ? retype_constant(body, acc) : CastNode::make(acc, body);
  }
  return ReduceNode::make(op, std::move(axes), std::move(body), acc);
}

}  // namespace

Expr operator+(Expr a, Expr b) { return binary(BinaryOp::kAdd, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(BinaryOp::kSub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(BinaryOp::kMul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return binary(BinaryOp::kDiv, std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) { return binary(BinaryOp::kMod, std::move(a), std::move(b)); }
Expr operator-(Expr a) { return UnaryNode::make(UnaryOp::kNeg, std::move(a)); }
Expr operator==(Expr a, Expr b) { return compare(CompareOp::kEq, std::move(a), std::move(b)); }
Expr operator!=(Expr a, Expr b) { return compare(CompareOp::kNe, std::move(a), std::move(b)); }
Expr operator<(Expr a, Expr b) { return compare(CompareOp::kLt, std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return compare(CompareOp::kLe, std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return compare(CompareOp::kGt, std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return compare(CompareOp::kGe, std::move(a), std::move(b)); }
Expr operator&&(Expr a, Expr b) { return binary(BinaryOp::kAnd, std::move(a), std::move(b)); }
Expr operator||(Expr a, Expr b) { return binary(BinaryOp::kOr, std::move(a), std::move(b)); }
Expr operator!(Expr a) { return UnaryNode::make(UnaryOp::kNot, std::move(a)); }

Expr min(Expr a, Expr b) { return binary(BinaryOp::kMin, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(BinaryOp::kMax, std::move(a), std::move(b)); }
Expr clamp(Expr x, Expr lo, Expr hi) { return min(max(std::move(x), std::move(lo)), std::move(hi)); }
Expr pow(Expr a, Expr b) { return binary(BinaryOp::kPow, std::move(a), std::move(b)); }
Expr abs(Expr a) { return UnaryNode::make(UnaryOp::kAbs, std::move(a)); }
Expr floor(Expr a) { return UnaryNode::make(UnaryOp::kFloor, std::move(a)); }
Expr ceil(Expr a) { return UnaryNode::make(UnaryOp::kCeil, std::move(a)); }
Expr round_even(Expr a) { return UnaryNode::make(UnaryOp::kRoundEven, std::move(a)); }
Expr exp(Expr a) { return UnaryNode::make(UnaryOp::kExp, std::move(a)); }
Expr log(Expr a) { return UnaryNode::make(UnaryOp::kLog, std::move(a)); }
Expr sqrt(Expr a) { return UnaryNode::make(UnaryOp::kSqrt, std::move(a)); }
Expr rsqrt(Expr a) { return UnaryNode::make(UnaryOp::kRsqrt, std::move(a)); }
Expr sigmoid(Expr a) { return UnaryNode::make(UnaryOp::kSigmoid, std::move(a)); }
Expr tanh(Expr a) { return UnaryNode::make(UnaryOp::kTanh, std::move(a)); }
Expr sin(Expr a) { return UnaryNode::make(UnaryOp::kSin, std::move(a)); }
Expr cos(Expr a) { return UnaryNode::make(UnaryOp::kCos, std::move(a)); }

Expr select(Expr c, Expr t, Expr f) {
  unify(t, f);
  return SelectNode::make(std::move(c), std::move(t), std::move(f));
}

Expr cast(DType t, Expr value) {
  if (value.defined() && value.dtype() == t) return value;
  if (value.defined() && is_constant(value) && (is_float(t) || value.kind() == ExprKind::kIntConst)) {
    return retype_constant(value, t);
  }
  return CastNode::make(t, std::move(value));
}

Expr constant(DType t, double value) {
  if (is_float(t)) return FloatConstNode::make(t, value);
  return IntConstNode::make(t, static_cast<int64_t>(value));
}

Axis range(Var var, Expr extent) { return Axis{std::move(var), Expr(0), std::move(extent)}; }
Axis range(Var var, Expr start, Expr extent) {
  return Axis{std::move(var), std::move(start), std::move(extent)};
}

std::vector<Axis> over(const Tensor& t, std::vector<Var> vars) {
  if (static_cast<int>(vars.size()) != t->rank()) {
    throw Error("over('" + t->name + "'): " + std::to_string(vars.size()) +
                    " variables for a tensor of rank " + std::to_string(t->rank()),
                ErrorCode::kInvalidProgram);
  }
  std::vector<Axis> axes;
  for (size_t i = 0; i < vars.size(); ++i) {
    axes.push_back(range(vars[i], t->is_dynamic() ? t->dynamic_shape[i] : Expr(t->shape[i])));
  }
  return axes;
}

std::vector<Axis> over(std::vector<Var> vars, std::vector<int64_t> extents) {
  if (vars.size() != extents.size()) {
    throw Error("over(): " + std::to_string(vars.size()) + " variables but " +
                    std::to_string(extents.size()) + " extents",
                ErrorCode::kInvalidProgram);
  }
  std::vector<Axis> axes;
  for (size_t i = 0; i < vars.size(); ++i) axes.push_back(range(vars[i], Expr(extents[i])));
  return axes;
}

Expr sum(std::vector<Axis> axes, Expr body, DType acc) {
  return reduce(ReduceOp::kSum, std::move(axes), std::move(body), acc);
}
Expr fma_sum(std::vector<Axis> axes, Expr a, Expr b, DType acc) {
  auto widened = [&](Expr e) {
    if (!e.defined() || e.dtype() == acc) return e;
    if (is_constant(e)) return retype_constant(e, acc);
    if (is_float(e.dtype()) && dtype_bytes(e.dtype()) > dtype_bytes(acc)) return e;  // rejected
    return CastNode::make(acc, e);
  };
  return reduce(ReduceOp::kFmaSum, std::move(axes), widened(std::move(a)) * widened(std::move(b)),
                acc);
}
Expr maximum(std::vector<Axis> axes, Expr body, DType acc) {
  return reduce(ReduceOp::kMax, std::move(axes), std::move(body), acc);
}
Expr minimum(std::vector<Axis> axes, Expr body, DType acc) {
  return reduce(ReduceOp::kMin, std::move(axes), std::move(body), acc);
}

Stage compute(Tensor target, std::vector<Axis> domain, Expr value) {
  Stage s;
  s.kind = StageKind::kCompute;
  s.target = std::move(target);
  s.domain = std::move(domain);
  if (value.defined() && s.target && value.dtype() != s.target->dtype && is_constant(value)) {
    value = retype_constant(value, s.target->dtype);
  }
  s.value = std::move(value);
  return s;
}

Stage scatter_add(Tensor target, std::vector<Expr> indices, Expr value, std::vector<Axis> domain,
                  DType accumulation, Expr condition) {
  Stage s;
  s.kind = StageKind::kScatterAdd;
  s.target = std::move(target);
  s.indices = std::move(indices);
  s.domain = std::move(domain);
  if (value.defined() && value.dtype() != accumulation && is_constant(value)) {
    value = retype_constant(value, accumulation);
  }
  s.value = std::move(value);
  s.condition = std::move(condition);
  s.accumulation = accumulation;
  return s;
}

ProgramBuilder::ProgramBuilder(std::string name) { program_.name = std::move(name); }

Tensor ProgramBuilder::add(std::string name, DType t, std::vector<int64_t> shape, TensorRole role,
                           std::vector<int64_t> strides) {
  if (program_.find_tensor(name)) {
    throw Error("program '" + program_.name + "': a tensor named '" + name + "' already exists",
                ErrorCode::kInvalidProgram);
  }
  Tensor tensor = make_tensor(std::move(name), t, std::move(shape), role, std::move(strides));
  switch (role) {
    case TensorRole::kInput: program_.inputs.push_back(tensor); break;
    case TensorRole::kOutput: program_.outputs.push_back(tensor); break;
    case TensorRole::kTemporary: program_.temporaries.push_back(tensor); break;
  }
  return tensor;
}

Tensor ProgramBuilder::input(std::string name, DType t, std::vector<int64_t> shape,
                             std::vector<int64_t> strides) {
  return add(std::move(name), t, std::move(shape), TensorRole::kInput, std::move(strides));
}
Tensor ProgramBuilder::output(std::string name, DType t, std::vector<int64_t> shape,
                              std::vector<int64_t> strides) {
  return add(std::move(name), t, std::move(shape), TensorRole::kOutput, std::move(strides));
}
Tensor ProgramBuilder::temporary(std::string name, DType t, std::vector<int64_t> shape) {
  return add(std::move(name), t, std::move(shape), TensorRole::kTemporary, {});
}

Var ProgramBuilder::size(std::string name, std::string source, int64_t lower_bound,
                         int64_t upper_bound) {
  if (lower_bound < 0 || upper_bound < lower_bound) {
    throw Error("program '" + program_.name + "': size '" + name + "' needs 0 <= lower bound <= "
                "upper bound, given [" + std::to_string(lower_bound) + ", " +
                    std::to_string(upper_bound) + "]",
                ErrorCode::kInvalidProgram);
  }
  Var var(std::move(name));
  program_.sizes.push_back(SizeParam{var, std::move(source), lower_bound, upper_bound});
  return var;
}

Tensor ProgramBuilder::dynamic_tensor(std::string name, DType t, std::vector<Expr> dims,
                                      const std::vector<int>& memory_order, TensorRole role) {
  if (program_.find_tensor(name)) {
    throw Error("program '" + program_.name + "': a tensor named '" + name + "' already exists",
                ErrorCode::kInvalidProgram);
  }
  Tensor tensor =
      make_dynamic_tensor(std::move(name), t, std::move(dims), memory_order, role, program_.sizes);
  switch (role) {
    case TensorRole::kInput: program_.inputs.push_back(tensor); break;
    case TensorRole::kOutput: program_.outputs.push_back(tensor); break;
    case TensorRole::kTemporary: program_.temporaries.push_back(tensor); break;
  }
  return tensor;
}

void ProgramBuilder::kernel(std::string name, std::vector<Stage> stages, GridConfig grid) {
  program_.kernels.push_back(Kernel{std::move(name), std::move(stages), std::move(grid)});
}

void ProgramBuilder::attribute(std::string key, std::string value) {
  program_.attributes[std::move(key)] = std::move(value);
}

Program ProgramBuilder::build() && { return std::move(program_); }

}  // namespace adjoint::ir
