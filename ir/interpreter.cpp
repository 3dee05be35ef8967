// Interpreter: an ExprFunctor<double> over an environment of bound index variables, and a
// stage loop that walks each kernel's domain in row-major order.
#include "ir/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/error.h"
#include "ir/int_math.h"
#include "ir/printer.h"
#include "ir/visitor.h"

namespace adjoint::ir {
namespace {


struct Storage {
  const TensorNode* tensor;
  std::vector<double>* data;
};

class Evaluator : public ExprFunctor<double> {
 public:
  explicit Evaluator(std::unordered_map<const TensorNode*, std::vector<double>*> buffers = {})
      : buffers_(std::move(buffers)) {}

  void bind(const VarNode* v, int64_t value) { env_[v] = value; }
  void unbind(const VarNode* v) { env_.erase(v); }

  int64_t offset(const TensorNode& t, const std::vector<int64_t>& idx, const char* what) const {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (idx[d] < 0 || idx[d] >= t.shape[d]) {
        std::string at;
        for (size_t k = 0; k < idx.size(); ++k) at += (k ? ", " : "") + std::to_string(idx[k]);
        throw Error(std::string("interpreter: ") + what + " of '" + t.name + "' at [" + at +
                        "]: index " + std::to_string(d) + " is out of bounds for size " +
                        std::to_string(t.shape[d]),
                    ErrorCode::kInvalidProgram);
      }
      off += idx[d] * t.strides[d];
    }
    return off;
  }

  std::vector<double>& buffer(const TensorNode* t) {
    auto it = buffers_.find(t);
    if (it == buffers_.end()) {
      throw Error("interpreter: no buffer bound for tensor '" + t->name + "'",
                  ErrorCode::kInvalidProgram);
    }
    return *it->second;
  }

  int64_t as_int(const Expr& e) { return static_cast<int64_t>(visit(e)); }

 protected:
  double visit_IntConst(const IntConstNode& n, const Expr&) override {
    return static_cast<double>(n.value);
  }
  double visit_FloatConst(const FloatConstNode& n, const Expr&) override { return n.value; }
  double visit_Var(const VarNode& n, const Expr&) override {
    auto it = env_.find(&n);
    if (it == env_.end()) {
      throw Error("interpreter: variable '" + n.name_hint + "' is not bound here",
                  ErrorCode::kInvalidProgram);
    }
    return static_cast<double>(it->second);
  }
  double visit_Load(const LoadNode& n, const Expr&) override {
    std::vector<int64_t> idx;
    idx.reserve(n.indices.size());
    for (const Expr& i : n.indices) idx.push_back(as_int(i));
    return buffer(n.tensor.get())[offset(*n.tensor, idx, "load")];
  }
  double visit_Unary(const UnaryNode& n, const Expr&) override {
    double x = visit(n.operand);
    double r = 0;
    switch (n.op) {
      case UnaryOp::kNeg: r = -x; break;
      case UnaryOp::kAbs: r = std::fabs(x); break;
      case UnaryOp::kFloor: r = std::floor(x); break;
      case UnaryOp::kCeil: r = std::ceil(x); break;
      case UnaryOp::kRoundEven: r = std::nearbyint(x); break;
      case UnaryOp::kExp: r = std::exp(x); break;
      case UnaryOp::kLog: r = std::log(x); break;
      case UnaryOp::kSqrt: r = std::sqrt(x); break;
      case UnaryOp::kRsqrt: r = 1.0 / std::sqrt(x); break;
      case UnaryOp::kSigmoid: r = 1.0 / (1.0 + std::exp(-x)); break;
      case UnaryOp::kTanh: r = std::tanh(x); break;
      case UnaryOp::kSin: r = std::sin(x); break;
      case UnaryOp::kCos: r = std::cos(x); break;
      case UnaryOp::kLog1p: r = std::log1p(x); break;
      case UnaryOp::kExpm1: r = std::expm1(x); break;
      case UnaryOp::kNot: return x == 0 ? 1.0 : 0.0;
    }
    return is_float(n.dtype) ? round_to(n.dtype, r) : r;
  }
  double visit_Binary(const BinaryNode& n, const Expr&) override {
    if (n.op == BinaryOp::kAnd) return (visit(n.a) != 0 && visit(n.b) != 0) ? 1.0 : 0.0;
    if (n.op == BinaryOp::kOr) return (visit(n.a) != 0 || visit(n.b) != 0) ? 1.0 : 0.0;
    double a = visit(n.a), b = visit(n.b);
    if (is_integer(n.dtype)) {
      int64_t x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
      switch (n.op) {
        case BinaryOp::kAdd: return static_cast<double>(x + y);
        case BinaryOp::kSub: return static_cast<double>(x - y);
        case BinaryOp::kMul: return static_cast<double>(x * y);
        case BinaryOp::kDiv:
        case BinaryOp::kMod:
          if (y == 0) throw Error("interpreter: integer division by zero", ErrorCode::kInvalidProgram);
          return static_cast<double>(n.op == BinaryOp::kDiv ? floor_div(x, y) : floor_mod(x, y));
        case BinaryOp::kMin: return static_cast<double>(std::min(x, y));
        case BinaryOp::kMax: return static_cast<double>(std::max(x, y));
        default: break;
      }
      throw Error("interpreter: unsupported integer operation", ErrorCode::kInternal);
    }
    double r = 0;
    switch (n.op) {
      case BinaryOp::kAdd: r = a + b; break;
      case BinaryOp::kSub: r = a - b; break;
      case BinaryOp::kMul: r = a * b; break;
      case BinaryOp::kDiv: r = a / b; break;
      case BinaryOp::kMod: r = a - std::floor(a / b) * b; break;
      case BinaryOp::kMin: r = std::fmin(a, b); break;
      case BinaryOp::kMax: r = std::fmax(a, b); break;
      case BinaryOp::kPow: r = std::pow(a, b); break;
      default: break;
    }
    return round_to(n.dtype, r);
  }
  double visit_Compare(const CompareNode& n, const Expr&) override {
    double a = visit(n.a), b = visit(n.b);
    bool r = false;
    switch (n.op) {
      case CompareOp::kEq: r = a == b; break;
      case CompareOp::kNe: r = a != b; break;
      case CompareOp::kLt: r = a < b; break;
      case CompareOp::kLe: r = a <= b; break;
      case CompareOp::kGt: r = a > b; break;
      case CompareOp::kGe: r = a >= b; break;
    }
    return r ? 1.0 : 0.0;
  }
  double visit_Select(const SelectNode& n, const Expr&) override {
    return visit(n.condition) != 0 ? visit(n.true_value) : visit(n.false_value);
  }
  double visit_Cast(const CastNode& n, const Expr&) override {
    return round_to(n.dtype, visit(n.value));
  }
  double visit_Reduce(const ReduceNode& n, const Expr&) override {
    size_t rank = n.axes.size();
    std::vector<int64_t> start(rank), extent(rank);
    for (size_t i = 0; i < rank; ++i) {
      start[i] = as_int(n.axes[i].start);
      extent[i] = as_int(n.axes[i].extent);
    }
    double acc = 0;
    if (n.op == ReduceOp::kMax) acc = -std::numeric_limits<double>::infinity();
    if (n.op == ReduceOp::kMin) acc = std::numeric_limits<double>::infinity();
    bool empty = false;
    for (int64_t e : extent) empty |= e <= 0;
    if (!empty) {
      std::vector<int64_t> idx(start);
      for (size_t i = 0; i < rank; ++i) bind(n.axes[i].var.get(), idx[i]);
      // fma_sum: acc = fma(a, b, acc), the product unrounded (f32 products are exact in f64;
      // for f64 this is the device's own step, one rounding).
      const BinaryNode* product = fused_product(n);
      while (true) {
        if (product) {
          acc = std::fma(visit(product->a), visit(product->b), acc);
        } else {
          double v = visit(n.body);
          if (is_sum(n.op)) acc += v;
          if (n.op == ReduceOp::kMax) acc = std::fmax(acc, v);
          if (n.op == ReduceOp::kMin) acc = std::fmin(acc, v);
        }
        size_t d = rank;
        while (d > 0) {
          --d;
          if (++idx[d] < start[d] + extent[d]) break;
          idx[d] = start[d];
          if (d == 0) { d = rank + 1; break; }
        }
        if (d == rank + 1) break;
        for (size_t i = 0; i < rank; ++i) bind(n.axes[i].var.get(), idx[i]);
      }
      for (size_t i = 0; i < rank; ++i) unbind(n.axes[i].var.get());
    }
    if (is_integer(n.dtype) && std::isinf(acc)) {  // empty max/min: the dtype's own limits
      bool i32 = n.dtype == DType::kI32;
      acc = acc > 0 ? (i32 ? std::numeric_limits<int32_t>::max()
                           : static_cast<double>(std::numeric_limits<int64_t>::max()))
                    : (i32 ? std::numeric_limits<int32_t>::min()
                           : static_cast<double>(std::numeric_limits<int64_t>::min()));
    }
    return is_float(n.dtype) ? round_to(n.dtype, acc) : acc;
  }

 private:
  std::unordered_map<const VarNode*, int64_t> env_;
  std::unordered_map<const TensorNode*, std::vector<double>*> buffers_;
};

/// Runs `stages` point by point over `domain` (the domain every one of them has).
void run_stages(const std::vector<Stage>& stages, const std::vector<Axis>& domain, Evaluator& ev,
                std::unordered_map<const TensorNode*, std::vector<double>>& shadows) {
  size_t rank = domain.size();
  std::vector<int64_t> extent(rank);
  for (size_t i = 0; i < rank; ++i) extent[i] = ev.as_int(domain[i].extent);
  for (int64_t e : extent) {
    if (e <= 0) return;
  }
  std::vector<int64_t> idx(rank, 0);
  while (true) {
    for (const Stage& s : stages) {
      for (size_t i = 0; i < rank; ++i) ev.bind(s.domain[i].var.get(), idx[i]);
      if (s.kind == StageKind::kCompute) {
        double v = ev.visit(s.value);
        ev.buffer(s.target.get())[ev.offset(*s.target, idx, "store")] =
            round_to(s.target->dtype, v);
      } else if (!s.condition.defined() || ev.visit(s.condition) != 0) {
        std::vector<int64_t> at;
        for (const Expr& e : s.indices) at.push_back(ev.as_int(e));
        double v = ev.visit(s.value);
        shadows[s.target.get()][ev.offset(*s.target, at, "scatter_add")] += v;
      }
      for (size_t i = 0; i < rank; ++i) ev.unbind(s.domain[i].var.get());
    }
    size_t d = rank;
    bool done = true;
    while (d > 0) {
      --d;
      if (++idx[d] < extent[d]) { done = false; break; }
      idx[d] = 0;
    }
    if (done) break;
  }
}

/// A kernel: its stages point by point over their one domain, or (a row-group kernel,
/// Kernel::row_axes > 0) each stage over its own whole domain before the next one.
void run_kernel(const Kernel& k, Evaluator& ev,
                std::unordered_map<const TensorNode*, std::vector<double>>& shadows) {
  if (k.stages.empty()) return;
  if (k.row_axes == 0) {
    run_stages(k.stages, k.stages.front().domain, ev, shadows);
    return;
  }
  for (const Stage& s : k.stages) run_stages({s}, s.domain, ev, shadows);
}

}  // namespace

HostBuffers interpret(const Program& program, const std::vector<int64_t>& sizes,
                      const HostBuffers& inputs) {
  return interpret(bind_sizes(program, sizes), inputs);
}

HostBuffers interpret(const Program& program, const HostBuffers& inputs) {
  if (!program.sizes.empty()) {
    std::string names;
    for (const SizeParam& s : program.sizes) names += (names.empty() ? "" : ", ") + s.source;
    throw Error("interpreter: program '" + program.name + "' is generic in " + names +
                    "; give a value for each size (interpret(program, sizes, inputs))",
                ErrorCode::kInvalidArgument);
  }
  HostBuffers buffers;
  std::unordered_map<const TensorNode*, std::vector<double>*> bound;
  for (const Tensor& t : program.inputs) {
    auto it = inputs.find(t->name);
    if (it == inputs.end()) {
      throw Error("interpreter: program '" + program.name + "' needs input '" + t->name +
                      "', which was not given",
                  ErrorCode::kInvalidArgument);
    }
    if (static_cast<int64_t>(it->second.size()) != t->storage_elements()) {
      throw Error("interpreter: input '" + t->name + "' has " +
                      std::to_string(it->second.size()) + " values, expected " +
                      std::to_string(t->storage_elements()) + " for " + tensor_signature(*t),
                  ErrorCode::kInvalidArgument);
    }
    // Device memory holds values of the tensor's dtype: round what the caller gave.
    std::vector<double>& values = buffers[t->name] = it->second;
    for (double& v : values) v = round_to(t->dtype, v);
  }
  for (const auto* list : {&program.outputs, &program.temporaries}) {
    for (const Tensor& t : *list) buffers[t->name].assign(t->storage_elements(), 0.0);
  }
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const Tensor& t : *list) bound[t.get()] = &buffers[t->name];
  }
  Evaluator ev(bound);
  std::unordered_map<const TensorNode*, std::vector<double>> shadows;
  for (const Kernel& k : program.kernels) {
    for (const Stage& s : k.stages) {
      if (s.kind == StageKind::kScatterAdd && !shadows.count(s.target.get())) {
        shadows[s.target.get()].assign(s.target->storage_elements(), 0.0);
      }
    }
    run_kernel(k, ev, shadows);
    for (auto& [tensor, shadow] : shadows) {
      std::vector<double>& out = *bound[tensor];
      for (size_t i = 0; i < shadow.size(); ++i) out[i] = round_to(tensor->dtype, shadow[i]);
    }
  }
  HostBuffers result;
  for (const auto* list : {&program.outputs, &program.temporaries}) {
    for (const Tensor& t : *list) result[t->name] = std::move(buffers[t->name]);
  }
  return result;
}

double evaluate_constant(const Expr& e) {
  Evaluator ev;
  return ev.visit(e);
}

std::vector<double> evaluate_at_points(const Expr& e, const VarNode* x, int64_t count,
                                       const std::function<bool(double)>& stop) {
  Evaluator ev;
  std::vector<double> values;
  values.reserve(static_cast<size_t>(std::max<int64_t>(count, 0)));
  for (int64_t v = 0; v < count; ++v) {
    ev.bind(x, v);
    values.push_back(ev.visit(e));
    if (stop && stop(values.back())) break;
  }
  return values;
}

}  // namespace adjoint::ir
