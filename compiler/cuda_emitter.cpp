// emit_cuda: a KernelEmitter (an ExprFunctor<std::string>) writes the kernel body into a
// CodeWriter while tracking scopes of `const` temporaries; the translation unit is assembled
// from a separately built declaration part (comment, includes, signature) and that body.
#include "compiler/cuda_emitter.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "compiler/bounds.h"
#include "compiler/cuda_syntax.h"
#include "compiler/index_width.h"
#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"
#include "compiler/vector_groups.h"
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
  KernelEmitter(const ir::Program& program, const ir::Kernel& kernel, const EmitOptions& options)
      : program_(program),
        kernel_(kernel),
        options_(options),
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
  std::string visit_Load(const ir::LoadNode& n, const Expr& self) override {
    std::string access;
    if (auto span = spans_.find(ids_.id(self)); span != spans_.end()) {
      access = span->second.name + "[" + span->second.index + "]";  // read by a group load
    } else {
      std::vector<std::string> indices;
      for (const Expr& i : n.indices) indices.push_back(as_index(i));
      access = element(n.tensor, indices);
    }
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

  /// A reduce loop's bounds: `start` and `end` as emitted before the loops; `unrolled` when
  /// the trip count is a constant that keeps the product of the reduction's unrolled trip
  /// counts so far (`unrolled_trips`, updated) within kMaxUnrolledTrips.
  struct LoopBounds {
    std::string start, end;
    bool unrolled = false;
  };
  LoopBounds loop_bounds(const ir::Axis& axis, int64_t& unrolled_trips);
  std::string reduce_init(const ir::ReduceNode& n);
  std::string accumulate(const ir::ReduceNode& n, const std::string& acc, const std::string& body);

  void emit_body(const GridMapping& m, const std::vector<int64_t>& extents);
  void emit_points(const GridMapping& m, const std::vector<int64_t>& extents,
                   std::vector<std::string> names);
  void begin_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  void emit_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  void emit_stage_point(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  std::string stored_value(const ir::Stage& stage);

  // Vector groups (kernels with vector width V > 1, see vector_groups.h): each thread computes
  // the points x_base + e, e < V, of the innermost linear axis x.
  struct VectorGroup {
    int axis = -1;        ///< the domain axis of x
    int64_t width = 1;    ///< V
    int64_t extent = 1;   ///< x's extent
    std::string base;     ///< the name of x_base
    ir::Var base_var;     ///< x_base as an IR variable, for expressions evaluated at x_base
    std::string element;  ///< the name of the element loop's variable e
    std::string offset;   ///< the name of a window loop's variable (an offset into a span)
  };
  /// A load every element of a group reads from one span of consecutive elements, loaded
  /// once before the group's element loop: the load reads `name[index]`.
  struct Span {
    std::string name, index;
  };
  /// A lane variable of a span: x (spans of V points from x_base) or a window axis over x
  /// (spans of a group's windows from that axis' base).
  struct Lane {
    std::string base;                  ///< the lane index of the span's first element
    std::string index;                 ///< the loop variable indexing the span
    int64_t count = 0;                 ///< elements in the span
    int64_t alignment = 0;             ///< the base is always a multiple of this (0: always 0)
    int64_t lowest = 0, highest = -1;  ///< the lane values any span covers
  };
  /// x as a lane: spans of V points from x_base, over the whole axis.
  Lane x_lane() const {
    return Lane{vector_->base,      vector_->element, vector_->width, vector_->width, 0,
                vector_->extent - 1};
  }
  void emit_vector_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  void emit_scoped_loop(const std::string& header, const ir::VarNode* var, const std::string& name,
                        const std::string& value, const std::function<void()>& body);
  void for_each_element(const ir::VarNode* x, const std::string& x_name,
                        const std::function<void()>& body);
  bool plan_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                            std::optional<GroupWindows>& windows);
  std::string emit_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                                   const std::string& x_name,
                                   const std::optional<GroupWindows>& windows);
  void emit_spans(const Expr& e, const std::unordered_map<const ir::VarNode*, Lane>& lanes);
  int64_t offset_alignment(const ir::Tensor& t, const std::vector<Expr>& indices, size_t lane_dim,
                           int64_t lane_alignment);
  /// The adjoint_memory.cuh helper for `base` ("load_elements", "store_elements"): its
  /// streaming variant under EmitOptions::streaming_loads / streaming_stores.
  std::string memory_helper(const std::string& base) const {
    const bool streaming =
        base == "store_elements" ? options_.streaming_stores : options_.streaming_loads;
    return streaming ? base + "_streaming" : base;
  }

  const ir::Program& program_;
  const ir::Kernel& kernel_;
  const EmitOptions options_;
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
  bool uses_memory_helpers_ = false;
  LaunchDims launch_;
  std::optional<VectorGroup> vector_;
  /// Reductions of the current stage computed for a whole group: node -> accumulator array.
  std::unordered_map<const ir::ExprNode*, std::string> group_reductions_;
  std::unordered_map<int, Span> spans_;  ///< by structural id of the load
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

std::string KernelEmitter::reduce_init(const ir::ReduceNode& n) {
  const bool is_float = ir::is_float(n.dtype);
  if (n.op == ir::ReduceOp::kSum) return is_float ? cuda_float_literal(n.dtype, 0.0) : "0";
  const bool max = n.op == ir::ReduceOp::kMax;
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  if (is_float) return cuda_float_literal(n.dtype, max ? -kInfinity : kInfinity);
  return cuda_int_literal(n.dtype, max ? (n.dtype == DType::kI32 ? INT32_MIN : INT64_MIN)
                                       : (n.dtype == DType::kI32 ? INT32_MAX : INT64_MAX));
}

std::string KernelEmitter::accumulate(const ir::ReduceNode& n, const std::string& acc,
                                      const std::string& body) {
  if (n.op == ir::ReduceOp::kSum) return acc + " += " + strip_parens(body) + ";";
  const bool is_float = ir::is_float(n.dtype), f64 = n.dtype == DType::kF64;
  std::string fn = n.op == ir::ReduceOp::kMax ? (is_float ? (f64 ? "fmax" : "fmaxf") : "max")
                                              : (is_float ? (f64 ? "fmin" : "fminf") : "min");
  return acc + " = " + fn + "(" + acc + ", " + strip_parens(body) + ");";
}

/// The loops of one reduction whose trip counts are constants multiplying to at most this many
/// iterations are written for full unrolling (straight-line code once compiled): the windows
/// of a fixed-ratio gather, say.
constexpr int64_t kMaxUnrolledTrips = 8;

KernelEmitter::LoopBounds KernelEmitter::loop_bounds(const ir::Axis& axis,
                                                     int64_t& unrolled_trips) {
  LoopBounds b;
  b.start = converted_named(axis.start, index_type_, axis.var.name_hint() + "_begin");
  auto* constant = axis.extent.as<ir::IntConstNode>();
  auto* sub = axis.extent.as<ir::BinaryNode>();
  auto* zero_start = axis.start.as<ir::IntConstNode>();
  const bool starts_at_zero = zero_start && zero_start->value == 0;
  if (constant && constant->value >= 1 && unrolled_trips * constant->value <= kMaxUnrolledTrips) {
    unrolled_trips *= constant->value;
    b.unrolled = true;
    if (!starts_at_zero && !is_identifier(b.start) && !is_literal(b.start))
      b.start = declare(axis.var.name_hint() + "_begin", index_type_, b.start);
    b.end = starts_at_zero ? as_index(axis.extent) : b.start + " + " + as_index(axis.extent);
    return b;
  }
  if (sub && sub->op == BinaryOp::kSub && ids_.id(sub->b) == ids_.id(axis.start)) {
    b.end = as_index(sub->a);  // extent = end - start: loop to `end` directly
  } else if (starts_at_zero) {
    b.end = as_index(axis.extent);
  } else {
    b.end = "(" + b.start + " + " + as_index(axis.extent) + ")";
  }
  if (!is_identifier(b.end) && !is_literal(b.end)) {
    b.end = declare(axis.var.name_hint() + "_end", index_type_, b.end);
  }
  return b;
}

std::string KernelEmitter::visit_Reduce(const ir::ReduceNode& n, const Expr&) {
  if (auto group = group_reductions_.find(&n); group != group_reductions_.end()) {
    std::string acc = group->second + "[" + vector_->element + "]";
    return is_half_precision(n.dtype) ? round_function(n.dtype) + "(" + acc + ")" : acc;
  }
  // Loop bounds depend only on outer variables: evaluate them all before the loops.
  std::vector<LoopBounds> bounds;
  int64_t unrolled_trips = 1;
  for (const ir::Axis& axis : n.axes) {
    bounds.push_back(loop_bounds(axis, unrolled_trips));
    bounds_.bind_reduce_axis(axis);
  }
  std::string acc = names_.fresh("acc");
  out_->line(std::string(cuda_value_type(n.dtype)) + " " + acc + " = " + reduce_init(n) + ";");
  scopes_.push_back(Scope{{}, out_, false});
  std::vector<CodeWriter::Block> loops;
  for (size_t i = 0; i < n.axes.size(); ++i) {
    std::string v = names_.fresh(n.axes[i].var.name_hint());
    var_names_[n.axes[i].var.get()] = v;
    var_levels_[n.axes[i].var.get()] = scopes_.size() - 1;
    if (bounds[i].unrolled) out_->line("#pragma unroll");
    loops.push_back(out_->block("for (" + index_type_ + " " + v + " = " +
                                strip_parens(bounds[i].start) + "; " + v + " < " + bounds[i].end +
                                "; ++" + v + ") {"));
  }
  out_->line(accumulate(n, acc, emit_expr(n.body)));
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
  launch_ = result.launch;
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
  if (vector_) {
    head.line("// Each thread computes " + std::to_string(vector_->width) +
              " consecutive points of " +
              kernel_.stages.front().domain[vector_->axis].var.name_hint() + ".");
    if (options_.streaming_loads || options_.streaming_stores)
      head.line(std::string("// Streaming cache hints (evict first) on ") +
                (options_.streaming_loads && options_.streaming_stores ? "span loads and group stores."
                 : options_.streaming_loads ? "span loads." : "group stores."));
  }
  head.line("// Compile with --fmad=false: the IR never contracts float operations into FMAs.");
  head.line("#include \"adjoint_types.cuh\"");
  head.line("#include \"adjoint_math.cuh\"");
  if (uses_atomics_) head.line("#include \"adjoint_atomics.cuh\"");
  if (uses_memory_helpers_) head.line("#include \"adjoint_memory.cuh\"");
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
  // Declarations wait until the code using them is written: an axis the code never names (e.g.
  // a size-1 dimension, which drops out of offsets) is not declared.
  std::vector<std::pair<std::string, std::string>> pending;  // (name, value)
  auto declare_axis = [&](int axis, const std::string& value) {
    pending.emplace_back(names[axis], value);
  };
  auto emit_declared_points = [&]() {
    CodeWriter code(out_->indent());
    CodeWriter* saved = out_;
    out_ = &code;
    emit_points(m, extents, names);
    out_ = saved;
    for (const auto& [name, value] : pending) {
      if (mentions(code.text(), name))
        out_->line("const " + type + " " + name + " = " + value + ";");
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
  const std::string count = std::to_string(m.linear_points);
  std::string lane = m.thread_points == 1 ? "threadIdx.x" : "threadIdx.x / " + points;
  std::string linear = names_.fresh("linear");
  std::string first_index = "(" + type + ")blockIdx.x * " + lanes + " + " + lane;
  // One linear index per thread when the grid covers them all (the usual case: at most
  // kMaxLinearBlocks blocks); a grid-stride loop otherwise.
  std::optional<CodeWriter::Block> loop;
  if (int64_t{launch_.grid[0]} * m.lanes >= m.linear_points) {
    out_->line("const " + type + " " + linear + " = " + first_index + ";");
    out_->line("if (" + linear + " >= " + count + ") return;");
  } else {
    loop.emplace(out_->block("for (" + type + " " + linear + " = " + first_index + "; " + linear +
                             " < " + count + "; " + linear + " += (" + type + ")gridDim.x * " +
                             lanes + ") {"));
  }
  // Linear axes: innermost fastest; the innermost counts groups of `vector_width` points.
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
  for (size_t i = 0; i < m.linear_axes.size(); ++i) {
    int axis = m.linear_axes[i];
    if (i + 1 == m.linear_axes.size() && vector_width > 1) {
      VectorGroup group;
      group.axis = axis;
      group.width = vector_width;
      group.extent = extents[axis];
      group.base = names_.fresh(names[axis] + "_base");
      group.base_var = ir::Var(group.base);
      group.element = names_.fresh("e");
      group.offset = names_.fresh("j");
      var_names_[group.base_var.get()] = group.base;
      var_levels_[group.base_var.get()] = 0;
      bounds_.bind(group.base_var.get(), Interval{0, extents[axis] - vector_width});
      pending.emplace_back(group.base, decoded[i] + " * " + std::to_string(vector_width));
      vector_ = std::move(group);
    } else {
      declare_axis(axis, decoded[i]);
    }
  }
  emit_declared_points();
}

void KernelEmitter::emit_points(const GridMapping& m, const std::vector<int64_t>& extents,
                                std::vector<std::string> names) {
  std::vector<CodeWriter::Block> loops;
  for (int axis : m.serial_axes) {
    loops.push_back(out_->block("for (" + index_type_ + " " + names[axis] + " = 0; " + names[axis] +
                                " < " + std::to_string(extents[axis]) + "; ++" + names[axis] +
                                ") {"));
  }
  for (const ir::Stage& stage : kernel_.stages) {
    if (vector_) {
      emit_vector_stage(stage, names);
    } else {
      emit_stage(stage, names);
    }
  }
  while (!loops.empty()) loops.pop_back();
}

/// Binds the stage's domain variables to their names and ranges, counts its subexpressions'
/// uses (for the const temporaries) and opens the stage's outermost scope.
void KernelEmitter::begin_stage(const ir::Stage& stage,
                                const std::vector<std::string>& axis_names) {
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
}

/// The value a compute stage stores, in the target's storage type.
std::string KernelEmitter::stored_value(const ir::Stage& stage) {
  const ir::Tensor& target = stage.target;
  if (is_half_precision(target->dtype)) {
    // Storing a cast from float rounds once: from_float(x) == from_float(round_to_half(x)).
    auto* cast = stage.value.as<ir::CastNode>();
    const Expr& stored = cast && cast->value.dtype() == DType::kF32 ? cast->value : stage.value;
    return "adjoint::from_float<" + std::string(cuda_storage_type(target->dtype)) + ">(" +
           strip_parens(emit_expr(stored)) + ")";
  }
  return converted(stage.value, std::string(cuda_value_type(target->dtype)));
}

void KernelEmitter::emit_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names) {
  begin_stage(stage, axis_names);
  emit_stage_point(stage, axis_names);
  scopes_.clear();
}

void KernelEmitter::emit_stage_point(const ir::Stage& stage,
                                     const std::vector<std::string>& axis_names) {
  const ir::Tensor& target = stage.target;
  if (stage.kind == ir::StageKind::kCompute) {
    out_->line("// compute " + target->name + "[" + join(axis_names, ", ") + "]");
    out_->line(element(target, axis_names) + " = " + strip_parens(stored_value(stage)) + ";");
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
}

// --- vector groups -----------------------------------------------------------------------------

/// The reductions of `value` evaluated whenever it is (not inside a select branch or the right
/// operand of && and ||, not inside another reduction), each once, outermost first.
std::vector<const ir::ReduceNode*> unconditional_reductions(const Expr& value) {
  std::vector<const ir::ReduceNode*> found;
  std::function<void(const Expr&, bool)> walk = [&](const Expr& e, bool conditional) {
    if (auto* reduce = e.as<ir::ReduceNode>()) {
      if (!conditional && std::find(found.begin(), found.end(), reduce) == found.end())
        found.push_back(reduce);
      return;
    }
    if (auto* select = e.as<ir::SelectNode>()) {
      walk(select->condition, conditional);
      walk(select->true_value, true);
      walk(select->false_value, true);
      return;
    }
    auto* binary = e.as<ir::BinaryNode>();
    if (binary && (binary->op == BinaryOp::kAnd || binary->op == BinaryOp::kOr)) {
      walk(binary->a, conditional);
      walk(binary->b, true);
      return;
    }
    ir::for_each_child(e, [&](const Expr& child) { walk(child, conditional); });
  };
  walk(value, false);
  return found;
}

/// `base + offset` as C++ text.
std::string plus(const std::string& base, int64_t offset) {
  if (offset == 0) return base;
  return base + (offset > 0 ? " + " : " - ") + std::to_string(offset > 0 ? offset : -offset);
}

void KernelEmitter::emit_scoped_loop(const std::string& header, const ir::VarNode* var,
                                     const std::string& name, const std::string& value,
                                     const std::function<void()>& body) {
  out_->line("#pragma unroll");
  CodeWriter::Block loop = out_->block(header);
  CodeWriter inner(out_->indent());
  CodeWriter* saved = out_;
  out_ = &inner;
  scopes_.push_back(Scope{{}, &inner, false});
  var_names_[var] = name;
  var_levels_[var] = scopes_.size() - 1;
  body();
  var_names_.erase(var);
  scopes_.pop_back();
  out_ = saved;
  if (mentions(inner.text(), name))
    out_->line("const " + index_type_ + " " + name + " = " + value + ";");
  out_->append(inner.text());
}

void KernelEmitter::for_each_element(const ir::VarNode* x, const std::string& x_name,
                                     const std::function<void()>& body) {
  const std::string& e = vector_->element;
  emit_scoped_loop(
      "for (int " + e + " = 0; " + e + " < " + std::to_string(vector_->width) + "; ++" + e + ") {",
      x, x_name, vector_->base + " + " + e, body);
}

/// A reduction runs once for the whole group, with one accumulator per element, when all its
/// axes but the last are uniform over the group (independent of x) and the last is uniform too
/// or has the same windows in every group (`windows`, see vector_groups.h).
bool KernelEmitter::plan_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                                         std::optional<GroupWindows>& windows) {
  if (n.axes.empty()) return false;
  auto uniform = [&](const ir::Axis& axis) {
    return !depends_on(axis.start, x) && !depends_on(axis.extent, x);
  };
  for (size_t i = 0; i + 1 < n.axes.size(); ++i) {
    if (!uniform(n.axes[i])) return false;
  }
  if (uniform(n.axes.back())) return true;
  windows = group_windows(n.axes.back(), x, vector_->extent, vector_->width);
  return windows.has_value();
}

std::string KernelEmitter::emit_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                                                const std::string& x_name,
                                                const std::optional<GroupWindows>& windows) {
  const size_t uniform_axes = windows ? n.axes.size() - 1 : n.axes.size();
  const std::string width = std::to_string(vector_->width);
  const std::string& e = vector_->element;
  std::vector<LoopBounds> bounds;
  int64_t unrolled_trips = 1;
  for (size_t i = 0; i < uniform_axes; ++i)
    bounds.push_back(loop_bounds(n.axes[i], unrolled_trips));
  for (const ir::Axis& axis : n.axes) bounds_.bind_reduce_axis(axis);
  std::unordered_map<const ir::VarNode*, Lane> lanes;
  lanes[x] = x_lane();

  // A windowed last axis: element e runs over window_base + [begin(e), end(e)).
  const ir::Axis* windowed = windows ? &n.axes.back() : nullptr;
  std::string window_base, window_begin, window_end, window_var;
  if (windowed) {
    const std::string hint = windowed->var.name_hint();
    std::string start = as_index(substitute(windowed->start, x, vector_->base_var));
    window_base = declare(hint + "_base", index_type_, plus(start, windows->shift));
    out_->line("// the " + hint + " windows of " + x_name + " = " + vector_->base + " + " + e +
               " lie in " + window_base + " + [0, " + std::to_string(windows->span) + ")");
    if (windows->affine()) {
      std::string scaled = windows->step() == 0   ? ""
                           : windows->step() == 1 ? e
                                                  : e + " * " + std::to_string(windows->step());
      window_begin =
          scaled.empty() ? std::to_string(windows->begin[0]) : plus(scaled, windows->begin[0]);
      window_end =
          scaled.empty() ? std::to_string(windows->end[0]) : plus(window_begin, windows->width());
    } else {
      auto table = [&](const std::string& suffix, const std::vector<int64_t>& values) {
        std::string name = names_.fresh(hint + suffix);
        std::vector<std::string> items;
        for (int64_t v : values) items.push_back(std::to_string(v));
        out_->line("constexpr int " + name + "[" + width + "] = {" + join(items, ", ") + "};");
        return name + "[" + e + "]";
      };
      window_begin = table("_begin_offset", windows->begin);
      window_end = table("_end_offset", windows->end);
    }
    window_var = names_.fresh(hint);
    lanes[windowed->var.get()] =
        Lane{window_base,     vector_->offset, windows->span, windows->base_alignment,
             windows->lowest, windows->highest};
  }

  std::string acc = names_.fresh("acc");
  std::vector<std::string> init(static_cast<size_t>(vector_->width), reduce_init(n));
  out_->line(std::string(cuda_value_type(n.dtype)) + " " + acc + "[" + width + "] = {" +
             join(init, ", ") + "};");
  scopes_.push_back(Scope{{}, out_, false});
  std::vector<CodeWriter::Block> loops;
  for (size_t i = 0; i < uniform_axes; ++i) {
    std::string v = names_.fresh(n.axes[i].var.name_hint());
    var_names_[n.axes[i].var.get()] = v;
    var_levels_[n.axes[i].var.get()] = scopes_.size() - 1;
    if (bounds[i].unrolled) out_->line("#pragma unroll");
    loops.push_back(out_->block("for (" + index_type_ + " " + v + " = " +
                                strip_parens(bounds[i].start) + "; " + v + " < " + bounds[i].end +
                                "; ++" + v + ") {"));
  }
  std::unordered_map<int, Span> outer_spans = spans_;
  emit_spans(n.body, lanes);
  const std::string element_acc = acc + "[" + e + "]";
  for_each_element(x, x_name, [&] {
    if (!windowed) {
      out_->line(accumulate(n, element_acc, emit_expr(n.body)));
      return;
    }
    const std::string& j = vector_->offset;
    emit_scoped_loop(
        "for (int " + j + " = " + window_begin + "; " + j + " < " + window_end + "; ++" + j + ") {",
        windowed->var.get(), window_var, window_base + " + " + j,
        [&] { out_->line(accumulate(n, element_acc, emit_expr(n.body))); });
  });
  spans_ = std::move(outer_spans);
  scopes_.pop_back();
  while (!loops.empty()) loops.pop_back();
  return acc;
}

int64_t KernelEmitter::offset_alignment(const ir::Tensor& t, const std::vector<Expr>& indices,
                                        size_t lane_dim, int64_t lane_alignment) {
  int64_t alignment = lane_alignment;  // the lane dimension has stride 1
  for (size_t d = 0; d < indices.size(); ++d) {
    if (d == lane_dim || t->shape[d] == 1 || t->strides[d] == 0) continue;
    auto* constant = indices[d].as<ir::IntConstNode>();
    alignment = std::gcd(alignment, constant ? constant->value * t->strides[d] : t->strides[d]);
  }
  return alignment;
}

/// Loads of `e` (outside reductions) whose indices vary over the group only along one
/// contiguous dimension, as a lane variable plus a constant, and that are in bounds for the
/// whole lane: each becomes one span, loaded here with the widest aligned accesses.
void KernelEmitter::emit_spans(const Expr& e,
                               const std::unordered_map<const ir::VarNode*, Lane>& lanes) {
  std::unordered_set<const ir::ExprNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& node) {
    if (!seen.insert(node.get()).second || node.kind() == ir::ExprKind::kReduce) return;
    ir::for_each_child(node, walk);
    auto* load = node.as<ir::LoadNode>();
    if (!load || spans_.count(ids_.id(node))) return;
    const ir::Tensor& t = load->tensor;
    int lane_dim = -1;
    for (size_t d = 0; d < load->indices.size(); ++d) {
      bool varies = false;
      for (const auto& [var, lane] : lanes) varies = varies || depends_on(load->indices[d], var);
      if (!varies) continue;
      if (lane_dim >= 0) return;  // varies along two dimensions
      lane_dim = static_cast<int>(d);
    }
    if (lane_dim < 0 || t->strides[lane_dim] != 1 || t->shape[lane_dim] == 1) return;
    std::vector<const ir::VarNode*> lane_vars;
    for (const auto& [var, lane] : lanes) lane_vars.push_back(var);
    std::optional<LaneIndex> index = lane_index(load->indices[lane_dim], lane_vars);
    if (!index) return;
    const Lane& lane = lanes.at(index->var);
    // Every element of every span is in bounds (the span reads points no element may need).
    Interval rest = index->rest.defined() ? bounds_.of(index->rest) : Interval::point(0);
    if (index->rest.defined() && !speculatable(index->rest)) return;
    if (!rest.is_bounded() || lane.lowest + index->offset + rest.min < 0 ||
        lane.highest + index->offset + rest.max >= t->shape[lane_dim])
      return;
    for (size_t d = 0; d < load->indices.size(); ++d) {
      if (static_cast<int>(d) == lane_dim) continue;
      const Expr& i = load->indices[d];
      if (!speculatable(i) || !bounds_.of(i).within(0, t->shape[d] - 1)) return;
    }
    std::vector<std::string> first;
    for (size_t d = 0; d < load->indices.size(); ++d) {
      if (static_cast<int>(d) != lane_dim) {
        first.push_back(as_index(load->indices[d]));
      } else {
        std::string rest_text = index->rest.defined() ? as_index(index->rest) + " + " : "";
        first.push_back(rest_text + plus(lane.base, index->offset));
      }
    }
    const int64_t lane_alignment =
        std::gcd(std::gcd(lane.alignment, index->offset), index->rest_multiple);
    const int64_t alignment =
        offset_alignment(t, load->indices, static_cast<size_t>(lane_dim), lane_alignment);
    const int bytes = access_bytes(alignment, lane.count, ir::dtype_bytes(t->dtype));
    std::string name = names_.fresh(t->name + "_span");
    out_->line(std::string(cuda_storage_type(t->dtype)) + " " + name + "[" +
               std::to_string(lane.count) + "];");
    out_->line("adjoint::" + memory_helper("load_elements") + "<" + std::to_string(bytes) + ">(" +
               name + ", &" + element(t, first) + ");");
    uses_memory_helpers_ = true;
    spans_[ids_.id(node)] = Span{name, lane.index};
  };
  walk(e);
}

void KernelEmitter::emit_vector_stage(const ir::Stage& stage,
                                      const std::vector<std::string>& axis_names) {
  begin_stage(stage, axis_names);
  const ir::VarNode* x = stage.domain[vector_->axis].var.get();
  const std::string& x_name = axis_names[vector_->axis];
  var_names_.erase(x);  // each element loop names it
  const ir::Tensor& target = stage.target;
  if (stage.kind != ir::StageKind::kCompute) {  // explicit grids only: one point at a time
    for_each_element(x, x_name, [&] { emit_stage_point(stage, axis_names); });
    scopes_.clear();
    return;
  }
  const std::string width = std::to_string(vector_->width);
  std::vector<std::string> group_point = axis_names;
  group_point[vector_->axis] = vector_->base;
  std::vector<std::string> comment_point = axis_names;
  comment_point[vector_->axis] = vector_->base + " + " + vector_->element;
  out_->line("// compute " + target->name + "[" + join(comment_point, ", ") + "], " +
             vector_->element + " < " + width);
  for (const ir::ReduceNode* reduce : unconditional_reductions(stage.value)) {
    std::optional<GroupWindows> windows;
    if (plan_group_reduction(*reduce, x, windows))
      group_reductions_[reduce] = emit_group_reduction(*reduce, x, x_name, windows);
  }
  emit_spans(stage.value, {{x, x_lane()}});
  const bool contiguous = target->strides[vector_->axis] == 1;
  std::string values;
  auto accumulated = group_reductions_.find(stage.value.get());
  if (contiguous && accumulated != group_reductions_.end() &&
      stage.value.dtype() == target->dtype && !is_half_precision(target->dtype)) {
    values = accumulated->second;  // the accumulators are the stored values
  } else {
    if (contiguous) {
      values = names_.fresh(target->name + "_values");
      out_->line(std::string(cuda_storage_type(target->dtype)) + " " + values + "[" + width + "];");
    }
    for_each_element(x, x_name, [&] {
      std::string stored =
          contiguous ? values + "[" + vector_->element + "]" : element(target, axis_names);
      out_->line(stored + " = " + strip_parens(stored_value(stage)) + ";");
    });
  }
  if (contiguous) {
    std::vector<Expr> point;
    for (const ir::Axis& axis : stage.domain) point.push_back(axis.var);
    const int64_t alignment =
        offset_alignment(target, point, static_cast<size_t>(vector_->axis), vector_->width);
    const int bytes = access_bytes(alignment, vector_->width, ir::dtype_bytes(target->dtype));
    out_->line("adjoint::" + memory_helper("store_elements") + "<" + std::to_string(bytes) +
               ">(&" + element(target, group_point) + ", " + values + ");");
    uses_memory_helpers_ = true;
  }
  group_reductions_.clear();
  spans_.clear();
  scopes_.clear();
}

}  // namespace

CompiledKernel emit_cuda_kernel(const ir::Program& program, size_t kernel_index,
                                const std::string& entry, const EmitOptions& options) {
  if (kernel_index >= program.kernels.size()) {
    throw Error(
        "emit_cuda: program '" + program.name + "' has no kernel " + std::to_string(kernel_index),
        ErrorCode::kInternal);
  }
  KernelEmitter emitter(program, program.kernels[kernel_index], options);
  return emitter.emit(entry);
}

}  // namespace adjoint::compiler
