// Tensors of the IR: a name, a dtype, a static shape and strides (in elements), and a role
// (kernel input, output, or temporary that the runtime allocates). A Tensor is identified by its
// node; names must be unique within a program (the verifier checks) because the runtime and the
// interpreter bind buffers by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace adjoint::ir {

enum class TensorRole : uint8_t { kInput, kOutput, kTemporary };
std::string_view tensor_role_name(TensorRole role);

struct TensorNode {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements; same rank as shape
  TensorRole role;
  /// Dynamic tensors of generic programs (ir/dynamic_sizes.h): each dimension and stride as an
  /// expression of the program's size variables; empty for a static tensor. `shape` and
  /// `strides` then hold the values at the sizes' upper bounds.
  std::vector<Expr> dynamic_shape;
  std::vector<Expr> dynamic_strides;

  bool is_dynamic() const { return !dynamic_shape.empty(); }
  int rank() const { return static_cast<int>(shape.size()); }
  /// Number of logical elements (product of the shape).
  int64_t num_elements() const;
  /// Number of elements the storage spans: 1 + max offset, or 0 when empty.
  int64_t storage_elements() const;
  bool is_contiguous() const;
};

/// Row-major strides for a shape.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
/// Strides of the channels-last layout (N, C, spatial...) -> memory order N, spatial..., C.
std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& shape);

/// Creates a tensor; `strides` empty means contiguous. Throws adjoint::Error on a negative size
/// or a stride list of the wrong rank.
Tensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape, TensorRole role,
                   std::vector<int64_t> strides = {});

/// `t(i, j, ...)`-style loads for builder code: load(t, {i, j}).
Expr load(const Tensor& t, std::vector<Expr> indices);

}  // namespace adjoint::ir
