// KernelEmitter, expressions: each IR expression as C++ text; repeated subexpressions bound
// once per scope as `const` temporaries (hoisted out of captured branches when that is safe);
// selects and && / || whose untaken side needs statements as if/else; a Reduce as a serial
// loop in the thread.
#include <algorithm>
#include <limits>

#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"
#include "ir/printer.h"

namespace adjoint::compiler {

using ir::BinaryOp;
using ir::DType;
using ir::Expr;
using ir::UnaryOp;

namespace {

bool is_leaf(const Expr& e) {
  return e.kind() == ir::ExprKind::kIntConst || e.kind() == ir::ExprKind::kFloatConst ||
         e.kind() == ir::ExprKind::kVar;
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

/// Whether evaluating e runs a reduction (outside the bodies of others).
bool has_reduction(const Expr& e) {
  bool found = false;
  for_each_node(e, [&](const Expr& node) { found |= node.kind() == ir::ExprKind::kReduce; });
  return found;
}

}  // namespace

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
    ok = load->tensor->name != options_.claim_slot_tensor;  // a claim runs once, where the IR says
    ok = ok && !load->tensor->is_dynamic();  // its shape holds upper bounds, not the extents
    for (size_t d = 0; d < load->indices.size() && ok; ++d) {
      ok = bounds_.of(load->indices[d]).within(0, load->tensor->shape[d] - 1);
    }
  }
  if (auto* b = e.as<ir::BinaryNode>();
      b && !ir::is_float(b->dtype) && (b->op == BinaryOp::kDiv || b->op == BinaryOp::kMod)) {
    ir::Interval divisor = bounds_.of(b->b);
    ok = ok && ((divisor.has_min() && divisor.min > 0) || (divisor.has_max() && divisor.max < 0));
  }
  if (ok) ir::for_each_child(e, [&](const Expr& child) { ok = ok && speculatable(child); });
  speculatable_[e.get()] = {e, ok};
  return ok;
}

std::string KernelEmitter::element_index(const ir::Tensor& t, size_t d, const Expr& index) {
  const bool dropped = t->shape[d] == 1 || t->strides[d] == 0 ||
                       (d < static_cast<size_t>(kernel_.row_axes) && row_local_.count(t.get()));
  if (!dropped || index.kind() != ir::ExprKind::kVar) return as_index(index);
  std::unordered_set<std::string> before = referenced_;
  std::string text = as_index(index);
  referenced_ = std::move(before);
  return text;
}

std::vector<std::string> KernelEmitter::element_indices(const ir::Tensor& t,
                                                        const std::vector<Expr>& indices) {
  std::vector<std::string> texts;
  for (size_t d = 0; d < indices.size(); ++d) texts.push_back(element_index(t, d, indices[d]));
  return texts;
}

bool KernelEmitter::uses_name(const std::string& name, const std::function<void()>& body) {
  const bool before = referenced_.erase(name) > 0;
  body();
  const bool used = referenced_.count(name) > 0;
  if (before) referenced_.insert(name);
  return used;
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
  if (auto local = row_local_.find(t.get()); local != row_local_.end()) {
    // A row-local temporary: the row's own elements, the non-row indices row-major.
    std::string offset;
    int64_t stride = 1;
    for (size_t d = indices.size(); d-- > static_cast<size_t>(kernel_.row_axes);) {
      if (t->shape[d] != 1) {
        if (is_identifier(indices[d])) referenced_.insert(indices[d]);
        std::string term = stride == 1 ? indices[d] : indices[d] + " * " + std::to_string(stride);
        offset = offset.empty() ? term : term + " + " + offset;
      }
      stride *= t->shape[d];
    }
    return local->second + "[" + (offset.empty() ? "0" : strip_parens(offset)) + "]";
  }
  std::string offset;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (t->shape[d] == 1 || t->strides[d] == 0)
      continue;  // in bounds, so the index is 0 or irrelevant
    if (is_identifier(indices[d])) referenced_.insert(indices[d]);
    std::string term = indices[d];
    if (t->is_dynamic()) {  // a generic kernel's stride: a product of size parameters
      std::string stride = size_text(t->dynamic_strides[d]);
      if (stride != "1") term += " * " + stride;
    } else if (t->strides[d] != 1) {
      term += " * " + std::to_string(t->strides[d]);
    }
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
  if (auto partial = group_reductions_.find(&n); partial != group_reductions_.end())
    return partial->second + "[" + vector_->element + "]";  // emit_progressive_group_sum's
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
  std::string a = emit_expr(n.a);
  // EmitOptions::progressive_group_sums, one value per thread: where both sides reduce (a
  // binned gather's walks), the left side's sum is written before the right side's loops, so
  // its accumulators die there instead of living to the end. The same add: the same bits.
  if (options_.progressive_group_sums && n.op == BinaryOp::kAdd && !is_half_precision(n.dtype) &&
      !is_identifier(a) && has_reduction(n.a) && has_reduction(n.b)) {
    const std::string sum = names_.fresh("partial");
    out_->line("const " + std::string(cuda_value_type(n.dtype)) + " " + sum + " = " +
               strip_parens(a) + ";");
    a = sum;
  }
  std::string b = emit_expr(n.b);
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
  if (ir::is_sum(n.op)) return is_float ? cuda_float_literal(n.dtype, 0.0) : "0";
  const bool max = n.op == ir::ReduceOp::kMax;
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  if (is_float) return cuda_float_literal(n.dtype, max ? -kInfinity : kInfinity);
  return cuda_int_literal(n.dtype, max ? (n.dtype == DType::kI32 ? INT32_MIN : INT64_MIN)
                                       : (n.dtype == DType::kI32 ? INT32_MAX : INT64_MAX));
}

std::string KernelEmitter::accumulate(const ir::ReduceNode& n, const std::string& acc,
                                      const std::string& body) {
  if (ir::is_sum(n.op)) return acc + " += " + strip_parens(body) + ";";
  const bool is_float = ir::is_float(n.dtype), f64 = n.dtype == DType::kF64;
  std::string fn = n.op == ir::ReduceOp::kMax ? (is_float ? (f64 ? "fmax" : "fmaxf") : "max")
                                              : (is_float ? (f64 ? "fmin" : "fminf") : "min");
  return acc + " = " + fn + "(" + acc + ", " + strip_parens(body) + ");";
}

/// One step of the reduction's body into `acc`; a fma_sum's product (ir::fused_product) goes
/// into fmaf/fma with the accumulator, one rounding, as the IR specifies.
std::string KernelEmitter::accumulate_body(const ir::ReduceNode& n, const std::string& acc) {
  const ir::BinaryNode* product = ir::fused_product(n);
  if (!product) return accumulate(n, acc, emit_expr(n.body));
  uses_fma_ = true;
  const std::string a = emit_expr(product->a);
  const std::string b = emit_expr(product->b);
  return acc + " = " + (n.dtype == DType::kF64 ? "fma(" : "fmaf(") + strip_parens(a) + ", " +
         strip_parens(b) + ", " + acc + ");";
}

/// The loops of one reduction whose trip counts are constants multiplying to at most this many
/// iterations are written for full unrolling (straight-line code once compiled): the windows
/// of a fixed-ratio gather, say. A loop with a longer constant trip count gets
/// EmitOptions::partial_unroll: NVVM would otherwise unroll it completely, nested loops
/// multiplying (mhc_pre_backward's dgamma partials: 32 x 4 x 24 copies of the body, a 474 KB
/// cubin, seconds of NVRTC time).
constexpr int64_t kMaxUnrolledTrips = 8;
/// Constant loops longer than this that nothing else gives a pragma get
/// `#pragma unroll EmitOptions::long_loop_unroll` instead of NVVM's complete unrolling. 128: the
/// 80-trip loops of n = 8 (dvecx, dgamma) keep complete unrolling, which bench.py measured faster
/// (mhc_pre_backward B1 S1 n8 D16384 0.0694 ms against 0.0760 with a threshold of 64).
constexpr int64_t kLongLoopTrips = 128;

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
  b.long_constant = constant && constant->value > kMaxUnrolledTrips;
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

std::vector<std::string> KernelEmitter::loop_pragmas(const std::vector<ir::Axis>& axes,
                                                     const std::vector<LoopBounds>& bounds,
                                                     int64_t body_nodes, size_t first_free) {
  std::vector<LoopTrips> trips;
  for (size_t i = 0; i < bounds.size(); ++i) {
    LoopTrips loop{constant_trips(axes[i]), window_extent_at_most(axes[i].extent)};
    if (const ir::Interval range = bounds_.of(axes[i].extent); range.has_max())
      loop.at_most = std::min(loop.at_most.value_or(range.max), range.max);
    trips.push_back(loop);
  }
  std::vector<std::string> pragmas(bounds.size());
  if (point_fallback_) {  // the misaligned copy's points one by one: only short loops unrolled
    for (size_t i = 0; i < bounds.size() && i < first_free; ++i)
      pragmas[i] = bounds[i].unrolled ? "#pragma unroll" : "#pragma unroll 1";
    return pragmas;
  }
  const std::vector<LoopUnroll> unroll = choose_unrolling(trips, body_nodes, options_.unroll);
  for (size_t i = 0; i < bounds.size() && i < first_free; ++i) {
    // The policy caps, it does not force: a loop it leaves to NVVM or would unroll completely
    // keeps the pragma of before (complete unrolling up to 8 trips, LowerOptions::partial_unroll
    // on longer constant loops with the budget off, else NVVM's choice, which never exceeds
    // complete unrolling). Forcing complete unrolling made mhc_dx's cubin grow from 30 to 72 KB.
    if (unroll[i].factor <= 0) {
      if (bounds[i].unrolled) {
        pragmas[i] = "#pragma unroll";
      } else if (bounds[i].long_constant && options_.partial_unroll > 0 && unroll[i].factor < 0) {
        pragmas[i] = "#pragma unroll " + std::to_string(options_.partial_unroll);
      } else if (bounds[i].long_constant && unroll[i].factor < 0 && options_.long_loop_unroll > 0 &&
                 !tile_ && lane_.empty() && trips[i].constant &&
                 *trips[i].constant > kLongLoopTrips) {
        // Left to itself NVVM unrolls a constant loop completely: mhc_pre_backward's x_mix at
        // 455 tokens (a serial sum below the split's 512 iterations) became a 446 KB cubin and
        // 4-7 s of NVRTC time.
        pragmas[i] = "#pragma unroll " + std::to_string(options_.long_loop_unroll);
        std::string note = axes[i].var.name_hint() + ": " +
                           std::to_string(options_.long_loop_unroll) + " (a constant loop of " +
                           std::to_string(*trips[i].constant) + " trips, which NVVM would unroll "
                           "completely)";
        if (std::find(unroll_notes_.begin(), unroll_notes_.end(), note) == unroll_notes_.end())
          unroll_notes_.push_back(std::move(note));
      }
    } else {
      pragmas[i] = unroll[i].pragma();
    }
    if (!unroll[i].reason.empty()) {  // once per loop, though a generic group emits it per point
      std::string note = axes[i].var.name_hint() + ": " + unroll[i].reason;
      if (std::find(unroll_notes_.begin(), unroll_notes_.end(), note) == unroll_notes_.end())
        unroll_notes_.push_back(std::move(note));
    }
  }
  return pragmas;
}

std::string KernelEmitter::visit_Reduce(const ir::ReduceNode& n, const Expr&) {
  if (auto block = block_accumulators_.find(&n); block != block_accumulators_.end())
    return block->second;
  if (auto group = group_reductions_.find(&n); group != group_reductions_.end()) {
    std::string acc = group->second + "[" + vector_->element + "]";
    return is_half_precision(n.dtype) ? round_function(n.dtype) + "(" + acc + ")" : acc;
  }
  if (!lane_.empty() && reduce_depth_ == 0) return emit_cooperative_reduce(n);
  if (lane_scan_point_ && reduce_depth_ == 0) {
    if (std::optional<std::string> scanned = emit_lane_scan_reduce(n)) return *scanned;
  }
  // Loop bounds depend only on outer variables: evaluate them all before the loops.
  std::vector<LoopBounds> bounds;
  int64_t unrolled_trips = 1;
  for (const ir::Axis& axis : n.axes) {
    bounds.push_back(loop_bounds(axis, unrolled_trips));
    bounds_.bind_reduce_axis(axis);
  }
  const std::vector<std::string> pragmas =
      loop_pragmas(n.axes, bounds, unrolled_size(n.body, options_.unroll, n.axes) + 1);
  std::string acc = names_.fresh("acc");
  out_->line(std::string(cuda_value_type(n.dtype)) + " " + acc + " = " + reduce_init(n) + ";");
  scopes_.push_back(Scope{{}, out_, false});
  std::vector<CodeWriter::Block> loops;
  for (size_t i = 0; i < n.axes.size(); ++i) {
    std::string v = names_.fresh(n.axes[i].var.name_hint());
    var_names_[n.axes[i].var.get()] = v;
    var_levels_[n.axes[i].var.get()] = scopes_.size() - 1;
    if (!pragmas[i].empty()) out_->line(pragmas[i]);
    loops.push_back(out_->block("for (" + index_type_ + " " + v + " = " +
                                strip_parens(bounds[i].start) + "; " + v + " < " + bounds[i].end +
                                "; ++" + v + ") {"));
  }
  ++reduce_depth_;
  out_->line(accumulate_body(n, acc));
  --reduce_depth_;
  scopes_.pop_back();
  while (!loops.empty()) loops.pop_back();  // innermost closes first
  return is_half_precision(n.dtype) ? round_function(n.dtype) + "(" + acc + ")" : acc;
}

// Every lane of the warp evaluates the same point and reaches this code together (conditions
// and early exits depend only on the point), so the full-mask shuffles are well defined.
std::string KernelEmitter::emit_cooperative_reduce(const ir::ReduceNode& n) {
  std::vector<LoopBounds> bounds;
  int64_t unrolled_trips = 1;
  for (const ir::Axis& axis : n.axes) {
    bounds.push_back(loop_bounds(axis, unrolled_trips));
    bounds_.bind_reduce_axis(axis);
  }
  const std::string type(cuda_value_type(n.dtype));
  std::string acc = names_.fresh("acc");
  // Lane spans (emit_lane_spans.cpp) write their own comment; the plan is tried again there.
  const bool spans_planned = plan_lane_spans(n, nullptr).has_value();
  if (!spans_planned)
    out_->line("// " + std::string(ir::reduce_op_name(n.op)) + " over " +
               n.axes.back().var.name_hint() +
               ": each lane takes every " + std::to_string(kernel_.grid.reduction_lanes) +
               "th iteration, then a shuffle butterfly in fixed order");
  out_->line(type + " " + acc + " = " + reduce_init(n) + ";");
  scopes_.push_back(Scope{{}, out_, false});
  std::vector<CodeWriter::Block> loops;
  bool spanned = false;
  for (size_t i = 0; i < n.axes.size(); ++i) {
    const bool strided = i + 1 == n.axes.size();
    if (strided && spans_planned &&
        emit_lane_spans(n, strip_parens(bounds[i].start), bounds[i].end, nullptr,
                        [](const std::function<void()>& f) { f(); },
                        [&] {
                          ++reduce_depth_;
                          out_->line(accumulate_body(n, acc));
                          --reduce_depth_;
                        })) {
      spanned = true;
      break;
    }
    std::string v = names_.fresh(n.axes[i].var.name_hint());
    var_names_[n.axes[i].var.get()] = v;
    var_levels_[n.axes[i].var.get()] = scopes_.size() - 1;
    if (bounds[i].unrolled && !strided) out_->line("#pragma unroll");
    std::string start = strip_parens(bounds[i].start);
    if (strided) start = start == "0" ? lane_ : start + " + " + lane_;
    loops.push_back(out_->block("for (" + index_type_ + " " + v + " = " + start + "; " + v +
                                " < " + bounds[i].end +
                                (strided ? "; " + v + " += " + std::to_string(kernel_.grid.reduction_lanes)
                                         : "; ++" + v) +
                                ") {"));
  }
  if (!spanned) {
    ++reduce_depth_;
    out_->line(accumulate_body(n, acc));
    --reduce_depth_;
  }
  scopes_.pop_back();
  while (!loops.empty()) loops.pop_back();
  std::string offset = names_.fresh("offset");
  out_->line("#pragma unroll");
  {
    CodeWriter::Block loop = out_->block("for (int " + offset + " = " +
                                         std::to_string(kernel_.grid.reduction_lanes / 2) + "; " +
                                         offset + " > 0; " + offset + " /= 2) {");
    out_->line(accumulate(n, acc, "__shfl_xor_sync(0xffffffffu, " + acc + ", " + offset + ")"));
  }
  // Sums give every lane the same bits (addition commutes); max/min of signed zeros may not,
  // so every lane continues with lane 0's value, the one lane 0 stores (of its group of
  // lanes, when fewer than 32 lanes share a point).
  out_->line(acc + " = " + lane_broadcast(acc) + ";");
  return is_half_precision(n.dtype) ? round_function(n.dtype) + "(" + acc + ")" : acc;
}

}  // namespace adjoint::compiler
