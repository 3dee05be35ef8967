// Tensor construction, layout helpers and Program lookups.
#include "ir/tensor.h"

#include <algorithm>
#include <string>

#include "ir/error.h"
#include "ir/program.h"

namespace adjoint::ir {

std::string_view tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::kInput: return "input";
    case TensorRole::kOutput: return "output";
    case TensorRole::kTemporary: return "temporary";
  }
  return "?";
}

int64_t TensorNode::num_elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t TensorNode::storage_elements() const {
  int64_t span = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    span += (shape[i] - 1) * strides[i];
  }
  return span;
}

bool TensorNode::is_contiguous() const { return strides == contiguous_strides(shape); }

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// s * size, or an Error when the product leaves the i64 range (a stride of a tensor whose
/// element count overflows 64-bit indexing; never computed with wrapping arithmetic).
int64_t checked_stride_product(int64_t s, int64_t size, const std::vector<int64_t>& shape) {
  int64_t product = 0;
  if (__builtin_mul_overflow(s, std::max<int64_t>(size, 1), &product)) {
    throw Error("a tensor of shape " + shape_text(shape) +
                    " has more elements than 64-bit indexing can address",
                ErrorCode::kInvalidArgument);
  }
  return product;
}

}  // namespace

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s = checked_stride_product(s, shape[i], shape);
  }
  return strides;
}

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& shape) {
  if (shape.size() < 3) return contiguous_strides(shape);
  std::vector<int64_t> strides(shape.size());
  auto sz = [&](size_t i) { return std::max<int64_t>(shape[i], 1); };
  int64_t s = 1;
  strides[1] = s;  // C is innermost
  s = checked_stride_product(s, sz(1), shape);
  for (size_t i = shape.size() - 1; i >= 2; --i) {
    strides[i] = s;
    s = checked_stride_product(s, sz(i), shape);
  }
  strides[0] = s;
  return strides;
}

Tensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape, TensorRole role,
                   std::vector<int64_t> strides) {
  if (name.empty()) throw Error("a tensor needs a name", ErrorCode::kInvalidProgram);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error("tensor '" + name + "': dimension " + std::to_string(i) + " has size " +
                      std::to_string(shape[i]) + ", expected a size >= 0",
                  ErrorCode::kInvalidProgram);
    }
  }
  int64_t elements = 1;
  for (int64_t size : shape) {
    if (__builtin_mul_overflow(elements, std::max<int64_t>(size, 1), &elements)) {
      throw Error("tensor '" + name + "' of shape " + shape_text(shape) +
                      " has more elements than 64-bit indexing can address",
                  ErrorCode::kInvalidArgument);
    }
  }
  if (strides.empty()) strides = contiguous_strides(shape);
  if (strides.size() != shape.size()) {
    throw Error("tensor '" + name + "': " + std::to_string(strides.size()) +
                    " strides given for rank " + std::to_string(shape.size()),
                ErrorCode::kInvalidProgram);
  }
  for (int64_t s : strides) {
    if (s < 0) {
      throw Error("tensor '" + name + "': negative stride " + std::to_string(s),
                  ErrorCode::kInvalidProgram);
    }
  }
  auto node = std::make_shared<TensorNode>();
  node->name = std::move(name);
  node->dtype = dtype;
  node->shape = std::move(shape);
  node->strides = std::move(strides);
  node->role = role;
  return node;
}

Expr load(const Tensor& t, std::vector<Expr> indices) {
  // Literal indices become i64 constants already; nothing to adapt.
  return LoadNode::make(t, std::move(indices));
}

Tensor Program::find_tensor(const std::string& name) const {
  for (const auto* list : {&inputs, &outputs, &temporaries}) {
    for (const Tensor& t : *list) {
      if (t->name == name) return t;
    }
  }
  return nullptr;
}

std::string_view axis_binding_name(AxisBinding b) {
  switch (b) {
    case AxisBinding::kLinear: return "linear";
    case AxisBinding::kBlock: return "block";
    case AxisBinding::kThread: return "thread";
    case AxisBinding::kSerial: return "serial";
  }
  return "?";
}

}  // namespace adjoint::ir
