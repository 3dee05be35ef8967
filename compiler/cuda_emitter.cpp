// emit_cuda: a KernelEmitter (an ExprFunctor<std::string>) writes the kernel body into a
// CodeWriter while tracking scopes of `const` temporaries; the translation unit is assembled
// from a separately built declaration part (comment, includes, signature) and that body.
#include "compiler/cuda_emitter.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>

#include "compiler/bounds.h"
#include "compiler/cuda_syntax.h"
#include "compiler/index_width.h"
#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::BinaryOp;
using ir::DType;
using ir::Expr;
using ir::UnaryOp;

/// Structural identity for common-subexpression elimination: equal ids mean the same
/// computation (variables and tensors by identity, reductions only when they are one node).
class StructuralIds {
 public:
  int id(const Expr& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second.second;
    std::string sig = std::to_string(static_cast<int>(e.kind())) + "/" +
                      std::to_string(static_cast<int>(e.dtype()));
    auto addr = [](const void* p) { return std::to_string(reinterpret_cast<uintptr_t>(p)); };
    if (auto* c = e.as<ir::IntConstNode>()) sig += "/" + std::to_string(c->value);
    if (auto* f = e.as<ir::FloatConstNode>()) {
      uint64_t bits;
      std::memcpy(&bits, &f->value, sizeof bits);
      sig += "/" + std::to_string(bits);
    }
    if (e.kind() == ir::ExprKind::kVar || e.kind() == ir::ExprKind::kReduce)
      sig += "/" + addr(e.get());
    if (auto* l = e.as<ir::LoadNode>()) sig += "/" + addr(l->tensor.get());
    if (auto* u = e.as<ir::UnaryNode>()) sig += "/" + std::to_string(static_cast<int>(u->op));
    if (auto* b = e.as<ir::BinaryNode>()) sig += "/" + std::to_string(static_cast<int>(b->op));
    if (auto* c = e.as<ir::CompareNode>()) sig += "/" + std::to_string(static_cast<int>(c->op));
    if (e.kind() != ir::ExprKind::kReduce) {
      ir::for_each_child(e, [&](const Expr& child) { sig += "," + std::to_string(id(child)); });
    }
    int result = ids_.emplace(sig, static_cast<int>(ids_.size())).first->second;
    memo_[e.get()] = {e, result};
    return result;
  }

 private:
  std::unordered_map<const ir::ExprNode*, std::pair<Expr, int>> memo_;
  std::unordered_map<std::string, int> ids_;
};

bool is_leaf(const Expr& e) {
  return e.kind() == ir::ExprKind::kIntConst || e.kind() == ir::ExprKind::kFloatConst ||
         e.kind() == ir::ExprKind::kVar;
}

/// "(a + b)" -> "a + b" when the outer parentheses enclose the whole text.
std::string strip_parens(const std::string& s) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    depth += s[i] == '(' ? 1 : (s[i] == ')' ? -1 : 0);
    if (depth == 0 && i + 1 < s.size()) return s;
  }
  return s.substr(1, s.size() - 2);
}

/// A non-negative integer literal such as 42 or 42LL.
bool is_literal(const std::string& s) {
  size_t digits = s.find_first_not_of("0123456789");
  return digits > 0 && (digits == std::string::npos || s.substr(digits) == "LL");
}

bool is_identifier(const std::string& s) {
  return !s.empty() &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
             std::string::npos;
}

std::string round_function(DType t) {
  return t == DType::kF16 ? "adjoint::round_to_half" : "adjoint::round_to_bfloat16";
}

/// The CUDA function computing a math op for a value of dtype t (f16/bf16: the float one).
std::string math_function(UnaryOp op, DType t) {
  const bool f64 = t == DType::kF64;
  auto pick = [&](const char* single, const char* dbl) { return std::string(f64 ? dbl : single); };
  switch (op) {
    case UnaryOp::kAbs:
      return pick("fabsf", "fabs");
    case UnaryOp::kFloor:
      return pick("floorf", "floor");
    case UnaryOp::kCeil:
      return pick("ceilf", "ceil");
    case UnaryOp::kRoundEven:
      return "adjoint::round_half_even";
    case UnaryOp::kExp:
      return pick("expf", "exp");
    case UnaryOp::kLog:
      return pick("logf", "log");
    case UnaryOp::kSqrt:
      return pick("sqrtf", "sqrt");
    case UnaryOp::kRsqrt:
      return "adjoint::reciprocal_sqrt";
    case UnaryOp::kSigmoid:
      return "adjoint::sigmoid";
    case UnaryOp::kTanh:
      return pick("tanhf", "tanh");
    case UnaryOp::kSin:
      return pick("sinf", "sin");
    case UnaryOp::kCos:
      return pick("cosf", "cos");
    case UnaryOp::kLog1p:
      return pick("log1pf", "log1p");
    case UnaryOp::kExpm1:
      return pick("expm1f", "expm1");
    default:
      return "?";
  }
}

/// Ops whose exact result is already representable in the operand's format (no rounding).
bool exact_in_format(UnaryOp op) {
  return op == UnaryOp::kAbs || op == UnaryOp::kFloor || op == UnaryOp::kCeil ||
         op == UnaryOp::kRoundEven;
}

class KernelEmitter : public ir::ExprFunctor<std::string> {
 public:
  KernelEmitter(const ir::Program& program, const ir::Kernel& kernel)
      : program_(program),
        kernel_(kernel),
        index_type_(kernel_index_width(kernel) == IndexWidth::k32 ? "int" : "long long") {}

  CompiledKernel emit(const std::string& entry);

 protected:
  std::string visit_IntConst(const ir::IntConstNode& n, const Expr&) override {
    // i64 literals always carry LL so that no int-sized arithmetic can overflow.
    std::string s = cuda_int_literal(n.dtype, n.value);
    if (n.dtype == DType::kI64 && s.find("LL") == std::string::npos) {
      return s.front() == '(' ? s.substr(0, s.size() - 1) + "LL)" : s + "LL";
    }
    return s;
  }
  std::string visit_FloatConst(const ir::FloatConstNode& n, const Expr&) override {
    return cuda_float_literal(n.dtype, n.value);
  }
  std::string visit_Var(const ir::VarNode& n, const Expr&) override {
    auto it = var_names_.find(&n);
    if (it == var_names_.end()) {
      throw Error(
          "emit_cuda: variable '" + n.name_hint + "' is not bound in kernel '" + kernel_.name + "'",
          ErrorCode::kInternal);
    }
    return it->second;
  }
  std::string visit_Load(const ir::LoadNode& n, const Expr&) override {
    std::vector<std::string> indices;
    for (const Expr& i : n.indices) indices.push_back(as_index(i));
    std::string access = element(n.tensor, indices);
    return is_half_precision(n.dtype) ? "adjoint::to_float(" + access + ")" : access;
  }
  std::string visit_Unary(const ir::UnaryNode& n, const Expr&) override;
  std::string visit_Binary(const ir::BinaryNode& n, const Expr&) override;
  std::string visit_Compare(const ir::CompareNode& n, const Expr&) override {
    std::string type(value_type(n.a));
    if (value_type(n.b) != type && ir::is_integer(n.a.dtype())) type = "long long";
    return "(" + converted(n.a, type) + " " + std::string(ir::compare_op_name(n.op)) + " " +
           converted(n.b, type) + ")";
  }
  std::string visit_Select(const ir::SelectNode& n, const Expr&) override;
  std::string visit_Cast(const ir::CastNode& n, const Expr&) override;
  std::string visit_Reduce(const ir::ReduceNode& n, const Expr&) override;

 private:
  /// Statements and value of an expression emitted one level deeper in a scope of its own.
  struct Captured {
    std::string statements;
    std::string value;
  };

  /// A block of the emitted body: its const temporaries (by structural id), the writer its
  /// statements go to, and whether it is a captured branch (a writer of its own, so an
  /// expression can be hoisted out of it by writing to the enclosing scope's writer).
  struct Scope {
    std::unordered_map<int, std::string> temps;
    CodeWriter* writer;
    bool captured;
  };

  std::string emit_expr(const Expr& e, std::string_view hint = "");
  std::string bind(int id, const Expr& e, const std::string& text, std::string_view hint,
                   size_t level);
  size_t hoist_level(const Expr& e);
  bool speculatable(const Expr& e);
  Captured capture(const Expr& e);
  std::string declare(std::string_view hint, std::string_view type, const std::string& value);

  /// The C++ type an emitted expression has: its dtype's, but index variables are index_t.
  std::string value_type(const Expr& e) const {
    return e.kind() == ir::ExprKind::kVar ? index_type_ : std::string(cuda_value_type(e.dtype()));
  }
  /// emit_expr(e), converted to `type` if its C++ type differs.
  std::string converted(const Expr& e, const std::string& type) {
    if (auto* c = e.as<ir::IntConstNode>(); c && (type == "int" || type == "long long")) {
      bool fits = c->value >= INT32_MIN && c->value <= INT32_MAX;
      if (type == "int" && fits) return cuda_int_literal(DType::kI32, c->value);
      if (type == "long long") return visit(ir::IntConstNode::make(DType::kI64, c->value));
    }
    std::string text = emit_expr(e);
    return value_type(e) == type ? text : "(" + type + ")" + text;
  }
  std::string converted_named(const Expr& e, const std::string& type, std::string_view hint) {
    std::string text = emit_expr(e, hint);
    return value_type(e) == type ? text : "(" + type + ")" + text;
  }
  /// An index expression in the kernel's index type (loads and stores are in bounds, so a
  /// 64-bit index value of a 32-bit kernel fits).
  std::string as_index(const Expr& e) { return converted(e, index_type_); }
  std::string element(const ir::Tensor& t, const std::vector<std::string>& indices);
  std::string integer_division(const ir::BinaryNode& n, const std::string& type);

  void emit_body(const GridMapping& m, const std::vector<int64_t>& extents);
  void emit_points(const GridMapping& m, const std::vector<int64_t>& extents,
                   std::vector<std::string> names);
  void emit_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names);

  const ir::Program& program_;
  const ir::Kernel& kernel_;
  const std::string index_type_;
  NameSupply names_;
  CodeWriter body_{1};
  CodeWriter* out_ = &body_;
  std::vector<Scope> scopes_;
  std::unordered_map<const ir::VarNode*, std::string> var_names_;
  std::unordered_map<const ir::VarNode*, size_t> var_levels_;  ///< scope level declaring each var
  std::unordered_map<const ir::ExprNode*, std::pair<Expr, bool>> speculatable_;
  std::unordered_map<const ir::TensorNode*, std::string> params_;
  StructuralIds ids_;
  std::unordered_map<int, int> uses_;
  Bounds bounds_;
  bool uses_atomics_ = false;
};

std::string KernelEmitter::emit_expr(const Expr& e, std::string_view hint) {
  if (is_leaf(e)) return visit(e);
  const int id = ids_.id(e);
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    auto it = scope->temps.find(id);
    if (it != scope->temps.end()) return it->second;
  }
  if (uses_[id] < 2 || scopes_.empty()) return visit(e);
  size_t level = hoist_level(e);
  if (level + 1 == scopes_.size()) return bind(id, e, visit(e), hint, level);
  // Emit it once in the enclosing scope, where the other uses can see it too.
  std::vector<Scope> inner(scopes_.begin() + static_cast<std::ptrdiff_t>(level) + 1, scopes_.end());
  scopes_.resize(level + 1);
  CodeWriter* saved = out_;
  out_ = scopes_[level].writer;
  std::string name = bind(id, e, visit(e), hint, level);
  out_ = saved;
  scopes_.insert(scopes_.end(), inner.begin(), inner.end());
  return name;
}

std::string KernelEmitter::bind(int id, const Expr& e, const std::string& text,
                                std::string_view hint, size_t level) {
  std::string name = text;
  if (!is_identifier(text)) {
    auto* load = e.as<ir::LoadNode>();
    std::string base = !hint.empty() ? std::string(hint)
                       : load        ? load->tensor->name + "_value"
                                     : "t";
    name = names_.fresh(base);
    scopes_[level].writer->line("const " + value_type(e) + " " + name + " = " + strip_parens(text) +
                                ";");
  }
  scopes_[level].temps[id] = name;
  return name;
}

/// The outermost scope an expression may be evaluated in: out of captured branches (whose
/// enclosing writer is positioned before the branch) as long as its variables are declared
/// there and evaluating it early can do no harm.
size_t KernelEmitter::hoist_level(const Expr& e) {
  size_t level = scopes_.size() - 1;
  if (!speculatable(e)) return level;
  size_t needed = 0;
  for_each_node(e, [&](const Expr& node) {
    if (auto* v = node.as<ir::VarNode>()) needed = std::max(needed, var_levels_[v]);
  });
  while (level > 0 && scopes_[level].captured && level - 1 >= needed) --level;
  return level;
}

/// True when evaluating `e` where the IR would not is harmless: no reductions (statements),
/// only loads whose indices are provably in bounds, no integer division by a possible zero.
bool KernelEmitter::speculatable(const Expr& e) {
  auto it = speculatable_.find(e.get());
  if (it != speculatable_.end()) return it->second.second;
  bool ok = e.kind() != ir::ExprKind::kReduce;
  if (auto* load = e.as<ir::LoadNode>()) {
    for (size_t d = 0; d < load->indices.size() && ok; ++d) {
      ok = bounds_.of(load->indices[d]).within(0, load->tensor->shape[d] - 1);
    }
  }
  if (auto* b = e.as<ir::BinaryNode>();
      b && !ir::is_float(b->dtype) && (b->op == BinaryOp::kDiv || b->op == BinaryOp::kMod)) {
    Interval divisor = bounds_.of(b->b);
    ok = ok && ((divisor.has_min() && divisor.min > 0) || (divisor.has_max() && divisor.max < 0));
  }
  if (ok) ir::for_each_child(e, [&](const Expr& child) { ok = ok && speculatable(child); });
  speculatable_[e.get()] = {e, ok};
  return ok;
}

std::string KernelEmitter::declare(std::string_view hint, std::string_view type,
                                   const std::string& value) {
  std::string name = names_.fresh(hint);
  out_->line("const " + std::string(type) + " " + name + " = " + strip_parens(value) + ";");
  return name;
}

KernelEmitter::Captured KernelEmitter::capture(const Expr& e) {
  CodeWriter inner(out_->indent() + 1);
  CodeWriter* saved = out_;
  out_ = &inner;
  scopes_.push_back(Scope{{}, &inner, true});
  std::string value = emit_expr(e);
  scopes_.pop_back();
  out_ = saved;
  return {inner.text(), value};
}

std::string KernelEmitter::element(const ir::Tensor& t, const std::vector<std::string>& indices) {
  std::string offset;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (t->shape[d] == 1 || t->strides[d] == 0)
      continue;  // in bounds, so the index is 0 or irrelevant
    std::string term = indices[d];
    if (t->strides[d] != 1) term += " * " + std::to_string(t->strides[d]);
    offset += (offset.empty() ? "" : " + ") + term;
  }
  return params_.at(t.get()) + "[" + (offset.empty() ? "0" : strip_parens(offset)) + "]";
}

std::string KernelEmitter::visit_Unary(const ir::UnaryNode& n, const Expr&) {
  std::string type(cuda_value_type(n.dtype));
  std::string a = converted(
      n.operand, ir::is_float(n.dtype) || n.dtype == DType::kBool ? value_type(n.operand) : type);
  if (n.op == UnaryOp::kNot) return "(!" + a + ")";
  if (n.op == UnaryOp::kNeg) return "(-" + a + ")";
  if (!ir::is_float(n.dtype))
    return std::string(n.dtype == DType::kI64 ? "llabs(" : "abs(") + a + ")";
  std::string call = math_function(n.op, n.dtype) + "(" + a + ")";
  return is_half_precision(n.dtype) && !exact_in_format(n.op)
             ? round_function(n.dtype) + "(" + call + ")"
             : call;
}

std::string KernelEmitter::integer_division(const ir::BinaryNode& n, const std::string& type) {
  std::string a = converted(n.a, type), b = converted(n.b, type);
  const bool plain =
      bounds_.provably_non_negative(n.a) && bounds_.of(n.b).has_min() && bounds_.of(n.b).min > 0;
  if (plain) return "(" + a + (n.op == BinaryOp::kDiv ? " / " : " % ") + b + ")";
  return std::string(n.op == BinaryOp::kDiv ? "adjoint::floor_div(" : "adjoint::floor_mod(") + a +
         ", " + b + ")";
}

std::string KernelEmitter::visit_Binary(const ir::BinaryNode& n, const Expr&) {
  std::string type(cuda_value_type(n.dtype));
  std::string op(ir::binary_op_name(n.op));
  if (n.op == BinaryOp::kAnd || n.op == BinaryOp::kOr) {  // the right side only when needed
    std::string a = emit_expr(n.a);
    Captured b = capture(n.b);
    if (b.statements.empty()) return "(" + a + " " + op + " " + b.value + ")";
    std::string name = names_.fresh("condition");
    out_->line("bool " + name + " = " + strip_parens(a) + ";");
    CodeWriter::Block block =
        out_->block(n.op == BinaryOp::kAnd ? "if (" + name + ") {" : "if (!" + name + ") {");
    out_->append(b.statements);
    out_->line(name + " = " + strip_parens(b.value) + ";");
    return name;
  }
  if (!ir::is_float(n.dtype)) {
    if (n.op == BinaryOp::kDiv || n.op == BinaryOp::kMod) return integer_division(n, type);
    std::string a = converted(n.a, type), b = converted(n.b, type);
    if (n.op == BinaryOp::kMin || n.op == BinaryOp::kMax) return op + "(" + a + ", " + b + ")";
    return "(" + a + " " + op + " " + b + ")";
  }
  std::string a = emit_expr(n.a), b = emit_expr(n.b);
  const bool f64 = n.dtype == DType::kF64, half = is_half_precision(n.dtype);
  std::string result;
  switch (n.op) {
    case BinaryOp::kMin:
      return std::string(f64 ? "fmin(" : "fminf(") + a + ", " + b + ")";
    case BinaryOp::kMax:
      return std::string(f64 ? "fmax(" : "fmaxf(") + a + ", " + b + ")";
    case BinaryOp::kPow:
      result = std::string(f64 ? "pow(" : "powf(") + a + ", " + b + ")";
      break;
    case BinaryOp::kMod:
      result = std::string(half ? "adjoint::floor_mod_exact(" : "adjoint::floor_mod(") + a + ", " +
               b + ")";
      break;
    default:
      result = "(" + a + " " + op + " " + b + ")";
      break;
  }
  return half ? round_function(n.dtype) + "(" + strip_parens(result) + ")" : result;
}

std::string KernelEmitter::visit_Select(const ir::SelectNode& n, const Expr&) {
  std::string condition = emit_expr(n.condition);
  Captured t = capture(n.true_value), f = capture(n.false_value);
  std::string type = value_type(n.true_value);
  if (value_type(n.false_value) != type) type = cuda_value_type(n.dtype);
  auto value = [&](const Expr& e, const std::string& text) {
    return value_type(e) == type ? text : "(" + type + ")" + text;
  };
  if (t.statements.empty() && f.statements.empty()) {
    return "(" + condition + " ? " + value(n.true_value, t.value) + " : " +
           value(n.false_value, f.value) + ")";
  }
  std::string name = names_.fresh("selected");
  out_->line(type + " " + name + ";");
  {
    CodeWriter::Block block = out_->block("if (" + strip_parens(condition) + ") {");
    out_->append(t.statements);
    out_->line(name + " = " + strip_parens(value(n.true_value, t.value)) + ";");
    block.split("} else {");
    out_->append(f.statements);
    out_->line(name + " = " + strip_parens(value(n.false_value, f.value)) + ";");
  }
  return name;
}

std::string KernelEmitter::visit_Cast(const ir::CastNode& n, const Expr&) {
  const DType to = n.dtype, from = n.value.dtype();
  if (to == DType::kI32 && n.value.kind() == ir::ExprKind::kVar && index_type_ == "int")
    return emit_expr(n.value);
  std::string v = emit_expr(n.value);
  if (to == DType::kBool) return "(" + v + " != " + (ir::is_float(from) ? "0.0f" : "0") + ")";
  if (is_half_precision(to)) {
    if (from == to) return v;
    if (ir::is_float(from))
      return round_function(to) + "(" + strip_parens(v) + ")";  // float or double overload
    return round_function(to) + "((double)" + v +
           ")";  // one rounding from double (exact for ints < 2^53)
  }
  std::string type(cuda_value_type(to));
  if (value_type(n.value) == type) return v;
  return "(" + type + ")" + v;
}

std::string KernelEmitter::visit_Reduce(const ir::ReduceNode& n, const Expr&) {
  const std::string acc_type(cuda_value_type(n.dtype));
  const bool is_float = ir::is_float(n.dtype), f64 = n.dtype == DType::kF64;
  std::string init = "0";
  if (n.op != ir::ReduceOp::kSum) {
    const bool max = n.op == ir::ReduceOp::kMax;
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    if (is_float)
      init = cuda_float_literal(n.dtype, max ? -kInfinity : kInfinity);
    else
      init = cuda_int_literal(n.dtype, max ? (n.dtype == DType::kI32 ? INT32_MIN : INT64_MIN)
                                           : (n.dtype == DType::kI32 ? INT32_MAX : INT64_MAX));
  } else {
    init = is_float ? cuda_float_literal(n.dtype, 0.0) : "0";
  }
  // Loop bounds depend only on outer variables: evaluate them all before the loops.
  std::vector<std::string> starts, ends;
  for (const ir::Axis& axis : n.axes) {
    std::string start = converted_named(axis.start, index_type_, axis.var.name_hint() + "_begin");
    auto* sub = axis.extent.as<ir::BinaryNode>();
    std::string end;
    if (sub && sub->op == BinaryOp::kSub && ids_.id(sub->b) == ids_.id(axis.start)) {
      end = as_index(sub->a);  // extent = end - start: loop to `end` directly
    } else if (auto* c = axis.start.as<ir::IntConstNode>(); c && c->value == 0) {
      end = as_index(axis.extent);
    } else {
      end = "(" + start + " + " + as_index(axis.extent) + ")";
    }
    if (!is_identifier(end) && !is_literal(end)) {
      end = declare(axis.var.name_hint() + "_end", index_type_, end);
    }
    starts.push_back(start);
    ends.push_back(end);
    bounds_.bind_reduce_axis(axis);
  }
  std::string acc = names_.fresh("acc");
  out_->line(acc_type + " " + acc + " = " + init + ";");
  scopes_.push_back(Scope{{}, out_, false});
  std::vector<CodeWriter::Block> loops;
  for (size_t i = 0; i < n.axes.size(); ++i) {
    std::string v = names_.fresh(n.axes[i].var.name_hint());
    var_names_[n.axes[i].var.get()] = v;
    var_levels_[n.axes[i].var.get()] = scopes_.size() - 1;
    loops.push_back(out_->block("for (" + index_type_ + " " + v + " = " + strip_parens(starts[i]) +
                                "; " + v + " < " + ends[i] + "; ++" + v + ") {"));
  }
  std::string body = emit_expr(n.body);
  if (n.op == ir::ReduceOp::kSum) {
    out_->line(acc + " += " + strip_parens(body) + ";");
  } else {
    std::string fn = n.op == ir::ReduceOp::kMax ? (is_float ? (f64 ? "fmax" : "fmaxf") : "max")
                                                : (is_float ? (f64 ? "fmin" : "fminf") : "min");
    out_->line(acc + " = " + fn + "(" + acc + ", " + strip_parens(body) + ");");
  }
  scopes_.pop_back();
  while (!loops.empty()) loops.pop_back();  // innermost closes first
  return is_half_precision(n.dtype) ? round_function(n.dtype) + "(" + acc + ")" : acc;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

CompiledKernel KernelEmitter::emit(const std::string& entry) {
  CompiledKernel result;
  result.entry = entry;
  std::vector<ir::Tensor> written = tensors_written(kernel_);
  std::vector<std::string> signature;
  for (const ir::Tensor& t : kernel_tensors(program_, kernel_)) {
    std::string name = names_.fresh(t->name);
    params_[t.get()] = name;
    result.params.push_back(t->name);
    bool is_written = std::find(written.begin(), written.end(), t) != written.end();
    signature.push_back(std::string(is_written ? "" : "const ") +
                        std::string(cuda_storage_type(t->dtype)) + "* __restrict__ " + name);
  }
  std::vector<int64_t> extents = domain_extents(kernel_);
  GridMapping mapping = grid_mapping(kernel_);
  result.launch = launch_dims(kernel_);
  if (!kernel_.stages.empty()) emit_body(mapping, extents);

  std::vector<std::string> axes, bindings;
  for (size_t j = 0; j < extents.size(); ++j) {
    axes.push_back(kernel_.stages.front().domain[j].var.name_hint() + " < " +
                   std::to_string(extents[j]));
    bindings.emplace_back(ir::axis_binding_name(kernel_.grid.bindings[j]));
  }
  const LaunchDims& d = result.launch;
  CodeWriter head;
  head.line("// Generated by adjoint: program '" + program_.name + "', kernel '" + kernel_.name +
            "'.");
  head.line("// Domain (" + join(axes, ", ") + "), axes bound (" + join(bindings, ", ") +
            "); launch grid (" + std::to_string(d.grid[0]) + ", " + std::to_string(d.grid[1]) +
            ", " + std::to_string(d.grid[2]) + ") x " + std::to_string(d.block[0]) + " threads; " +
            (index_type_ == "int" ? "32" : "64") + "-bit index math.");
  head.line("// Compile with --fmad=false: the IR never contracts float operations into FMAs.");
  head.line("#include \"adjoint_types.cuh\"");
  head.line("#include \"adjoint_math.cuh\"");
  if (uses_atomics_) head.line("#include \"adjoint_atomics.cuh\"");
  head.line("");
  head.line("extern \"C\" __global__ void __launch_bounds__(" +
            std::to_string(kernel_.grid.block_size) + ")");
  head.line(entry + "(" + join(signature, ",\n    ") + ") {");
  result.source = head.text() + body_.text() + "}\n";
  result.uses_atomics = uses_atomics_;
  return result;
}

/// True when `name` occurs as a whole identifier in `code` outside comment lines.
bool mentions(const std::string& code, const std::string& name) {
  auto identifier_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  size_t line_start = 0;
  while (line_start < code.size()) {
    size_t line_end = code.find('\n', line_start);
    if (line_end == std::string::npos) line_end = code.size();
    std::string line = code.substr(line_start, line_end - line_start);
    size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos && line.compare(first, 2, "//") != 0) {
      for (size_t at = line.find(name); at != std::string::npos; at = line.find(name, at + 1)) {
        bool starts = at == 0 || !identifier_char(line[at - 1]);
        bool ends = at + name.size() == line.size() || !identifier_char(line[at + name.size()]);
        if (starts && ends) return true;
      }
    }
    line_start = line_end + 1;
  }
  return false;
}

void KernelEmitter::emit_body(const GridMapping& m, const std::vector<int64_t>& extents) {
  const ir::Stage& first = kernel_.stages.front();
  std::vector<std::string> names;
  for (const ir::Axis& axis : first.domain) names.push_back(names_.fresh(axis.var.name_hint()));
  const std::string& type = index_type_;
  const std::string points = std::to_string(m.thread_points);
  // Axis declarations wait until the code using them is written: an axis the code never names
  // (e.g. a size-1 dimension, which drops out of offsets) is not declared.
  std::vector<std::pair<int, std::string>> pending;
  auto declare_axis = [&](int axis, const std::string& value) {
    pending.emplace_back(axis, value);
  };
  auto emit_declared_points = [&]() {
    CodeWriter code(out_->indent());
    CodeWriter* saved = out_;
    out_ = &code;
    emit_points(m, extents, names);
    out_ = saved;
    for (const auto& [axis, value] : pending) {
      if (mentions(code.text(), names[axis]))
        out_->line("const " + type + " " + names[axis] + " = " + value + ";");
    }
    pending.clear();
    out_->append(code.text());
  };
  // Thread axes, row-major over `flat`.
  auto decode_threads = [&](const std::string& flat) {
    int64_t divisor = 1;
    for (size_t i = m.thread_axes.size(); i-- > 0;) {
      int axis = m.thread_axes[i];
      std::string v = divisor == 1 ? flat : "(" + flat + ") / " + std::to_string(divisor);
      declare_axis(axis, i == 0 ? v : v + " % " + std::to_string(extents[axis]));
      divisor *= extents[axis];
    }
  };
  auto decode_blocks = [&]() {
    for (size_t i = 0; i < m.block_axes.size(); ++i) {
      declare_axis(m.block_axes[i], std::string("blockIdx.") + "xyz"[m.first_block_dimension + i]);
    }
  };
  if (m.linear_axes.empty()) {
    if (m.thread_points < kernel_.grid.block_size) {
      out_->line("if (threadIdx.x >= " + points + ") return;");
    }
    decode_threads("(" + type + ")threadIdx.x");
    decode_blocks();
    emit_declared_points();
    return;
  }
  const int64_t vector_width = kernel_.grid.vector_width;
  const std::string lanes = std::to_string(m.lanes);
  std::string lane = m.thread_points == 1 ? "threadIdx.x" : "threadIdx.x / " + points;
  std::string linear = names_.fresh("linear");
  CodeWriter::Block loop =
      out_->block("for (" + type + " " + linear + " = (" + type + ")blockIdx.x * " + lanes + " + " +
                  lane + "; " + linear + " < " + std::to_string(m.linear_points) + "; " + linear +
                  " += (" + type + ")gridDim.x * " + lanes + ") {");
  // Linear axes: innermost fastest; the innermost counts vectors of `vector_width` points.
  std::vector<std::string> decoded(m.linear_axes.size());
  int64_t divisor = 1;
  for (size_t i = m.linear_axes.size(); i-- > 0;) {
    int axis = m.linear_axes[i];
    int64_t extent = extents[axis] / (i + 1 == m.linear_axes.size() ? vector_width : 1);
    std::string v = divisor == 1 ? linear : linear + " / " + std::to_string(divisor);
    decoded[i] = extent == 1 && i != 0 ? "0" : (i == 0 ? v : v + " % " + std::to_string(extent));
    divisor *= extent;
  }
  if (!m.thread_axes.empty()) decode_threads("threadIdx.x % " + points);
  decode_blocks();
  std::string vector_index;
  for (size_t i = 0; i < m.linear_axes.size(); ++i) {
    int axis = m.linear_axes[i];
    if (i + 1 == m.linear_axes.size() && vector_width > 1) {
      vector_index = names_.fresh(names[axis] + "_vector");
      out_->line("const " + type + " " + vector_index + " = " + decoded[i] + ";");
    } else {
      declare_axis(axis, decoded[i]);
    }
  }
  if (vector_width > 1) {
    // The other axes are declared before the element loop, the innermost inside it.
    std::vector<std::pair<int, std::string>> outer = std::move(pending);
    pending.clear();
    int axis = m.linear_axes.back();
    std::string element_index = names_.fresh("element");
    CodeWriter loop_code(out_->indent());
    CodeWriter* saved = out_;
    out_ = &loop_code;
    {
      out_->line("#pragma unroll");
      CodeWriter::Block elements =
          out_->block("for (" + type + " " + element_index + " = 0; " + element_index + " < " +
                      std::to_string(vector_width) + "; ++" + element_index + ") {");
      declare_axis(axis,
                   vector_index + " * " + std::to_string(vector_width) + " + " + element_index);
      emit_declared_points();
    }
    out_ = saved;
    for (const auto& [outer_axis, value] : outer) {
      if (mentions(loop_code.text(), names[outer_axis])) {
        out_->line("const " + type + " " + names[outer_axis] + " = " + value + ";");
      }
    }
    out_->append(loop_code.text());
  } else {
    emit_declared_points();
  }
}

void KernelEmitter::emit_points(const GridMapping& m, const std::vector<int64_t>& extents,
                                std::vector<std::string> names) {
  std::vector<CodeWriter::Block> loops;
  for (int axis : m.serial_axes) {
    loops.push_back(out_->block("for (" + index_type_ + " " + names[axis] + " = 0; " + names[axis] +
                                " < " + std::to_string(extents[axis]) + "; ++" + names[axis] +
                                ") {"));
  }
  for (const ir::Stage& stage : kernel_.stages) emit_stage(stage, names);
  while (!loops.empty()) loops.pop_back();
}

void KernelEmitter::emit_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names) {
  for (size_t j = 0; j < stage.domain.size(); ++j) {
    var_names_[stage.domain[j].var.get()] = axis_names[j];
    var_levels_[stage.domain[j].var.get()] = 0;
  }
  bounds_.bind_domain(stage.domain);
  uses_.clear();
  std::function<void(const Expr&)> count = [&](const Expr& e) {
    if (uses_[ids_.id(e)]++ == 0) ir::for_each_child(e, count);
  };
  for (const Expr& e : stage_expressions(stage)) count(e);
  scopes_.assign(1, Scope{{}, out_, false});
  const ir::Tensor& target = stage.target;
  if (stage.kind == ir::StageKind::kCompute) {
    out_->line("// compute " + target->name + "[" + join(axis_names, ", ") + "]");
    std::string value;
    if (is_half_precision(target->dtype)) {
      // Storing a cast from float rounds once: from_float(x) == from_float(round_to_half(x)).
      auto* cast = stage.value.as<ir::CastNode>();
      const Expr& stored = cast && cast->value.dtype() == DType::kF32 ? cast->value : stage.value;
      value = "adjoint::from_float<" + std::string(cuda_storage_type(target->dtype)) + ">(" +
              strip_parens(emit_expr(stored)) + ")";
    } else {
      value = converted(stage.value, std::string(cuda_value_type(target->dtype)));
    }
    out_->line(element(target, axis_names) + " = " + strip_parens(value) + ";");
  } else {
    uses_atomics_ = true;
    out_->line("// scatter_add into " + target->name + ": atomic, accumulated in " +
               std::string(ir::dtype_name(stage.accumulation)));
    std::optional<CodeWriter::Block> guarded;
    if (stage.condition.defined()) {
      guarded.emplace(out_->block("if (" + strip_parens(emit_expr(stage.condition)) + ") {"));
      scopes_.push_back(Scope{{}, out_, false});
    }
    std::vector<std::string> indices;
    for (const Expr& i : stage.indices) indices.push_back(as_index(i));
    std::string value = converted(stage.value, std::string(cuda_value_type(stage.accumulation)));
    out_->line("adjoint::atomic_add(&" + element(target, indices) + ", " + strip_parens(value) +
               ");");
  }
  scopes_.clear();
}

}  // namespace

CompiledKernel emit_cuda_kernel(const ir::Program& program, size_t kernel_index,
                                const std::string& entry) {
  if (kernel_index >= program.kernels.size()) {
    throw Error(
        "emit_cuda: program '" + program.name + "' has no kernel " + std::to_string(kernel_index),
        ErrorCode::kInternal);
  }
  KernelEmitter emitter(program, program.kernels[kernel_index]);
  return emitter.emit(entry);
}

}  // namespace adjoint::compiler
