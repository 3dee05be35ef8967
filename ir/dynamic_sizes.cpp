// Dynamic sizes: dynamic tensors, size expressions and binding a generic program to values.
#include "ir/dynamic_sizes.h"

#include <algorithm>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/program.h"
#include "ir/visitor.h"

namespace adjoint::ir {
namespace {

int size_index(const VarNode* var, const std::vector<SizeParam>& sizes) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i].var.get() == var) return static_cast<int>(i);
  }
  return -1;
}

/// Replaces size variables by constants and loads of dynamic tensors by loads of their static
/// counterparts.
class SizeBinder : public ExprMutator {
 public:
  SizeBinder(const std::vector<SizeParam>& sizes, const std::vector<int64_t>& values,
             const std::unordered_map<const TensorNode*, Tensor>& tensors)
      : sizes_(sizes), values_(values), tensors_(tensors) {}

 protected:
  Expr visit_Var(const VarNode& n, const Expr& self) override {
    int i = size_index(&n, sizes_);
    return i < 0 ? self : IntConstNode::make(n.dtype, values_[i]);
  }
  Expr visit_Load(const LoadNode& n, const Expr& self) override {
    Expr mutated = ExprMutator::visit_Load(n, self);
    auto it = tensors_.find(n.tensor.get());
    if (it == tensors_.end()) return mutated;
    return LoadNode::make(it->second, mutated.as<LoadNode>()->indices);
  }

 private:
  const std::vector<SizeParam>& sizes_;
  const std::vector<int64_t>& values_;
  const std::unordered_map<const TensorNode*, Tensor>& tensors_;
};

std::vector<int64_t> at_values(const std::vector<Expr>& exprs, const std::vector<SizeParam>& sizes,
                               const std::vector<int64_t>& values) {
  std::vector<int64_t> out;
  for (const Expr& e : exprs) out.push_back(evaluate_size(e, sizes, values));
  return out;
}

}  // namespace

std::string size_param_text(const SizeParam& size) {
  return size.var.name_hint() + " = " + size.source + " in [" +
         std::to_string(size.lower_bound) + ", " + std::to_string(size.upper_bound) + "]";
}

int64_t evaluate_size(const Expr& e, const std::vector<SizeParam>& sizes,
                      const std::vector<int64_t>& values) {
  if (auto* c = e.as<IntConstNode>()) return c->value;
  if (auto* v = e.as<VarNode>()) {
    int i = size_index(v, sizes);
    if (i < 0 || static_cast<size_t>(i) >= values.size()) {
      throw Error("'" + v->name_hint + "' is not a size parameter", ErrorCode::kInvalidProgram);
    }
    return values[i];
  }
  if (auto* b = e.as<BinaryNode>()) {
    int64_t x = evaluate_size(b->a, sizes, values), y = evaluate_size(b->b, sizes, values);
    switch (b->op) {
      case BinaryOp::kAdd: return x + y;
      case BinaryOp::kSub: return x - y;
      case BinaryOp::kMul: return x * y;
      default: break;
    }
  }
  throw Error("a size expression may hold only integer constants, size parameters, +, - and *",
              ErrorCode::kInvalidProgram);
}

Tensor make_dynamic_tensor(std::string name, DType dtype, std::vector<Expr> dims,
                           const std::vector<int>& memory_order, TensorRole role,
                           const std::vector<SizeParam>& sizes) {
  const size_t rank = dims.size();
  std::vector<int> sorted = memory_order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted.size() != rank || sorted[i] != static_cast<int>(i)) {
      throw Error("dynamic tensor '" + name + "': the memory order must be a permutation of its " +
                      std::to_string(rank) + " dimensions",
                  ErrorCode::kInvalidProgram);
    }
  }
  for (const Expr& d : dims) {
    const VarNode* v = d.as<VarNode>();
    if (!d.as<IntConstNode>() && !(v && size_index(v, sizes) >= 0)) {
      throw Error("dynamic tensor '" + name + "': each dimension must be a constant or a size "
                  "parameter",
                  ErrorCode::kInvalidProgram);
    }
  }
  std::vector<Expr> strides(rank);
  Expr stride = Expr(int64_t{1});
  for (size_t k = rank; k-- > 0;) {
    strides[memory_order[k]] = stride;
    const Expr& d = dims[memory_order[k]];
    auto* one = stride.as<IntConstNode>();
    stride = one && one->value == 1 ? d : stride * d;
  }
  std::vector<int64_t> upper(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) upper[i] = sizes[i].upper_bound;
  // The shape at the upper bounds; strides saturate at kSaturatedStride, so storage_elements()
  // of a tensor whose upper-bound size leaves int64 is merely huge (conservative).
  constexpr int64_t kSaturatedStride = int64_t{1} << 40;
  auto node = std::make_shared<TensorNode>();
  node->name = std::move(name);
  node->dtype = dtype;
  node->role = role;
  node->shape = at_values(dims, sizes, upper);
  node->strides.assign(rank, 1);
  int64_t running = 1;
  for (size_t k = rank; k-- > 0;) {
    node->strides[memory_order[k]] = running;
    int64_t next = 0;
    if (__builtin_mul_overflow(running, std::max<int64_t>(node->shape[memory_order[k]], 1), &next))
      next = kSaturatedStride;
    running = std::min(next, kSaturatedStride);
  }
  node->dynamic_shape = std::move(dims);
  node->dynamic_strides = std::move(strides);
  return node;
}

Program bind_sizes(const Program& program, const std::vector<int64_t>& values) {
  if (values.size() != program.sizes.size()) {
    throw Error("program '" + program.name + "': " + std::to_string(values.size()) +
                    " size values given, expected one per size parameter (" +
                    std::to_string(program.sizes.size()) + ")",
                ErrorCode::kInvalidArgument);
  }
  if (program.sizes.empty()) return program;
  for (size_t i = 0; i < values.size(); ++i) {
    const SizeParam& s = program.sizes[i];
    if (values[i] < s.lower_bound || values[i] > s.upper_bound) {
      throw Error("program '" + program.name + "': size " + s.var.name_hint() + " (" + s.source +
                      "): expected a value in [" + std::to_string(s.lower_bound) + ", " +
                      std::to_string(s.upper_bound) + "], given " + std::to_string(values[i]),
                  ErrorCode::kInvalidArgument);
    }
  }
  std::unordered_map<const TensorNode*, Tensor> tensors;
  Program out = program;
  out.sizes.clear();
  for (auto* list : {&out.inputs, &out.outputs, &out.temporaries}) {
    for (Tensor& t : *list) {
      if (!t->is_dynamic()) continue;
      Tensor bound = make_tensor(t->name, t->dtype, at_values(t->dynamic_shape, program.sizes, values),
                                 t->role, at_values(t->dynamic_strides, program.sizes, values));
      tensors[t.get()] = bound;
      t = bound;
    }
  }
  SizeBinder binder(program.sizes, values, tensors);
  auto rebind_axes = [&](std::vector<Axis>& axes) {
    for (Axis& a : axes) {
      a.start = binder.mutate(a.start);
      a.extent = binder.mutate(a.extent);
    }
  };
  for (Kernel& kernel : out.kernels) {
    for (Stage& stage : kernel.stages) {
      if (auto it = tensors.find(stage.target.get()); it != tensors.end()) stage.target = it->second;
      rebind_axes(stage.domain);
      for (Expr& index : stage.indices) index = binder.mutate(index);
      stage.value = binder.mutate(stage.value);
      stage.condition = binder.mutate(stage.condition);
    }
  }
  return out;
}

}  // namespace adjoint::ir
