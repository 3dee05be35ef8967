// Printer: an ExprFunctor<std::string> with a name supply shared across one printed unit
// (a program, kernel, stage or expression), so variable names are unique and stable. Children
// are always visited left to right in separate statements (the operands of `a + b` on strings
// are evaluated in an unspecified order), so names are given in order of appearance.
#include "ir/printer.h"

#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "ir/visitor.h"

namespace adjoint::ir {
namespace {

std::string join(const std::vector<std::string>& parts, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string format_float(DType t, double v) {
  std::string body;
  if (std::isnan(v)) {
    body = "nan";
  } else if (std::isinf(v)) {
    body = v > 0 ? "inf" : "-inf";
  } else {
    char buf[64];
    auto res = (t == DType::kF64) ? std::to_chars(buf, buf + sizeof buf, v)
                                  : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
    body.assign(buf, res.ptr);
    if (body.find_first_of(".eni") == std::string::npos) body += ".0";
  }
  switch (t) {
    case DType::kF32: return body + "f";
    case DType::kF16: return body + "h";
    case DType::kBF16: return body + "bf";
    default: return body;
  }
}

class Printer : public ExprFunctor<std::string> {
 public:
  std::string name(const VarNode* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    std::string base = v->name_hint.empty() ? "v" : v->name_hint;
    std::string candidate = base;
    for (int i = 1; used_.count(candidate); ++i) candidate = base + "_" + std::to_string(i);
    used_.insert(candidate);
    return names_[v] = candidate;
  }

  std::string axis(const Axis& ax) {
    std::string v = name(ax.var.get());
    auto* s = ax.start.as<IntConstNode>();
    if (s && s->value == 0) return v + " < " + visit(ax.extent);
    std::string start = visit(ax.start);
    return v + " in [" + start + ", " + start + " + " + visit(ax.extent) + ")";
  }

  std::string domain(const std::vector<Axis>& axes) {
    std::vector<std::string> parts;
    for (const Axis& ax : axes) parts.push_back(axis(ax));
    return join(parts);
  }

  std::string stage(const Stage& s) {
    // Bind domain names first so they read in domain order.
    for (const Axis& ax : s.domain) name(ax.var.get());
    std::string out;
    if (s.kind == StageKind::kCompute) {
      std::vector<std::string> idx;
      for (const Axis& ax : s.domain) idx.push_back(name(ax.var.get()));
      out = "compute " + s.target->name + "[" + join(idx) + "] = " + visit(s.value);
    } else {
      std::vector<std::string> idx;
      for (const Expr& e : s.indices) idx.push_back(visit(e));
      out = "scatter_add " + s.target->name + "[" + join(idx) + "] += " + visit(s.value);
      if (s.condition.defined()) out += " if " + visit(s.condition);
      out += " accumulate " + std::string(dtype_name(s.accumulation));
    }
    return out + "\n      over (" + domain(s.domain) + ")";
  }

 protected:
  std::string visit_IntConst(const IntConstNode& n, const Expr&) override {
    if (n.dtype == DType::kBool) return n.value ? "true" : "false";
    std::string s = std::to_string(n.value);
    return n.dtype == DType::kI32 ? s + "i32" : s;
  }
  std::string visit_FloatConst(const FloatConstNode& n, const Expr&) override {
    return format_float(n.dtype, n.value);
  }
  std::string visit_Var(const VarNode& n, const Expr&) override { return name(&n); }
  std::string visit_Load(const LoadNode& n, const Expr&) override {
    std::vector<std::string> idx;
    for (const Expr& i : n.indices) idx.push_back(visit(i));
    return n.tensor->name + "[" + join(idx) + "]";
  }
  std::string visit_Unary(const UnaryNode& n, const Expr&) override {
    if (n.op == UnaryOp::kNeg) return "-" + wrap(n.operand);
    if (n.op == UnaryOp::kNot) return "!" + wrap(n.operand);
    return std::string(unary_op_name(n.op)) + "(" + visit(n.operand) + ")";
  }
  std::string visit_Binary(const BinaryNode& n, const Expr&) override {
    switch (n.op) {
      case BinaryOp::kMin:
      case BinaryOp::kMax:
      case BinaryOp::kPow: {
        std::string a = visit(n.a);  // operands in order: names are made unique left to right
        return std::string(binary_op_name(n.op)) + "(" + a + ", " + visit(n.b) + ")";
      }
      default: {
        std::string a = wrap(n.a);
        return a + " " + std::string(binary_op_name(n.op)) + " " + wrap(n.b);
      }
    }
  }
  std::string visit_Compare(const CompareNode& n, const Expr&) override {
    std::string a = wrap(n.a);
    return a + " " + std::string(compare_op_name(n.op)) + " " + wrap(n.b);
  }
  std::string visit_Select(const SelectNode& n, const Expr&) override {
    std::string condition = visit(n.condition);
    std::string true_value = visit(n.true_value);
    return "select(" + condition + ", " + true_value + ", " + visit(n.false_value) + ")";
  }
  std::string visit_Cast(const CastNode& n, const Expr&) override {
    return std::string(dtype_name(n.dtype)) + "(" + visit(n.value) + ")";
  }
  std::string visit_Reduce(const ReduceNode& n, const Expr&) override {
    std::string axes = domain(n.axes);
    return std::string(reduce_op_name(n.op)) + "<" + std::string(dtype_name(n.dtype)) + ">(" +
           axes + " : " + visit(n.body) + ")";
  }

 private:
  /// Operands of infix operators are parenthesized when they are infix themselves.
  std::string wrap(const Expr& e) {
    std::string s = visit(e);
    bool infix = e.kind() == ExprKind::kCompare ||
                 (e.kind() == ExprKind::kBinary && e.as<BinaryNode>()->op != BinaryOp::kMin &&
                  e.as<BinaryNode>()->op != BinaryOp::kMax &&
                  e.as<BinaryNode>()->op != BinaryOp::kPow);
    return infix ? "(" + s + ")" : s;
  }

  std::map<const VarNode*, std::string> names_;
  std::set<std::string> used_;
};

std::string grid_string(const GridConfig& g) {
  if (!g.is_set) {
    std::string extra;
    if (g.reduction_lanes != 1) extra += "reduction lanes " + std::to_string(g.reduction_lanes);
    if (g.tile_points > 1)
      extra += (extra.empty() ? "" : ", ") + std::string("tile axis ") +
               std::to_string(g.tile_axis) + " x " + std::to_string(g.tile_points);
    return extra.empty() ? "grid(derived)" : "grid(derived; " + extra + ")";
  }
  std::vector<std::string> b;
  for (AxisBinding x : g.bindings) b.emplace_back(axis_binding_name(x));
  if (g.rows_per_block > 0)
    b.push_back(std::to_string(g.rows_per_block) + " rows per block" +
                (g.row_per_thread ? ", one per thread" : ""));
  std::string s = "grid(" + join(b) + "; block " + std::to_string(g.block_size);
  if (g.vector_width != 1) s += ", vector " + std::to_string(g.vector_width);
  if (g.reduction_lanes != 1) s += ", reduction lanes " + std::to_string(g.reduction_lanes);
  if (g.tile_points > 1)
    s += ", tile axis " + std::to_string(g.tile_axis) + " x " + std::to_string(g.tile_points);
  if (g.tile_block_rows > 1) s += ", " + std::to_string(g.tile_block_rows) + " tile rows";
  return s + ")";
}

std::string kernel_string(Printer& p, const Kernel& k) {
  std::string out = "  kernel " + k.name + " " +
                    (k.row_axes > 0 ? "rows(" + std::to_string(k.row_axes) + " axes) " : "") +
                    grid_string(k.grid) + " {\n";
  for (const Stage& s : k.stages) out += "    " + p.stage(s) + "\n";
  return out + "  }\n";
}

}  // namespace

namespace {

/// A tensor's signature; a dynamic tensor's dims and strides as size expressions named by `p`.
std::string tensor_text(Printer& p, const TensorNode& t) {
  if (t.is_dynamic()) {
    std::vector<std::string> dims, st;
    for (const Expr& d : t.dynamic_shape) dims.push_back(p.visit(d));
    for (const Expr& d : t.dynamic_strides) st.push_back(p.visit(d));
    return t.name + ": " + std::string(dtype_name(t.dtype)) + "[" + join(dims) + "] strides [" +
           join(st) + "]";
  }
  return tensor_signature(t);
}

}  // namespace

std::string tensor_signature(const TensorNode& t) {
  if (t.is_dynamic()) {
    Printer p;
    return tensor_text(p, t);
  }
  std::vector<std::string> dims;
  for (int64_t d : t.shape) dims.push_back(std::to_string(d));
  std::string s = t.name + ": " + std::string(dtype_name(t.dtype)) + "[" + join(dims) + "]";
  if (!t.is_contiguous()) {
    std::vector<std::string> st;
    for (int64_t d : t.strides) st.push_back(std::to_string(d));
    s += " strides [" + join(st) + "]";
  }
  return s;
}

std::string to_string(const Expr& e) {
  Printer p;
  return e.defined() ? p.visit(e) : "<undefined>";
}

std::string to_string(const Stage& s) {
  Printer p;
  return p.stage(s);
}

std::string to_string(const Kernel& k) {
  Printer p;
  return kernel_string(p, k);
}

std::string to_string(const Program& prog) {
  Printer p;
  std::string out = "program " + prog.name + " {\n";
  for (const auto& [k, v] : prog.attributes) out += "  attribute " + k + " = " + v + "\n";
  for (const SizeParam& size : prog.sizes) {
    out += "  size " + p.visit(size.var) + " = " + size.source + " in [" +
           std::to_string(size.lower_bound) + ", " + std::to_string(size.upper_bound) + "]\n";
  }
  if (prog.dynamic_storage_bound > 0)
    out += "  dynamic storage <= " + std::to_string(prog.dynamic_storage_bound) + " elements\n";
  for (const Tensor& t : prog.inputs) out += "  input " + tensor_text(p, *t) + "\n";
  for (const Tensor& t : prog.outputs) out += "  output " + tensor_text(p, *t) + "\n";
  for (const Tensor& t : prog.temporaries) out += "  temporary " + tensor_text(p, *t) + "\n";
  for (const Kernel& k : prog.kernels) out += kernel_string(p, k);
  return out + "}\n";
}

}  // namespace adjoint::ir
