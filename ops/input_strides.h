// Input tensors of any strides, read in place. An op lists `<tensor>_strides` among its
// attributes (input_strides_attribute); a specialization that leaves it empty reads the tensor
// in the op's layout, one that gives strides is compiled for exactly those strides, as for
// shapes, so that a sliced or permuted tensor from autograd needs no copy. The attribute is
// printed in the canonical text only when it is given, so specializations without it keep
// their text and cache keys. Inputs only: an output is always written in the op's layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace adjoint::ops {

/// The attribute name for the strides of `tensor`: "<tensor>_strides".
std::string input_strides_attribute_name(const std::string& tensor);

/// The optional `<tensor>_strides` attribute (elements, outermost first; empty: the layout).
AttrSpec input_strides_attribute(const std::string& tensor);

/// True when two different indices of a tensor of `shape` and `strides` may address the same
/// element (a stride 0 on a dimension of size > 1, as after expand(), or interleaved strides).
bool overlaps_itself(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);

/// The strides `tensor` is read with: `layout_strides` when the attribute is empty, else the
/// given ones after checking them. Throws adjoint::Error (kInvalidArgument) naming the op and
/// the attribute for a count other than the rank, a negative stride, strides under which the
/// tensor overlaps itself, or an extent past 64-bit indexing.
std::vector<int64_t> input_strides(const Specialization& spec, const std::string& tensor,
                                   const std::vector<int64_t>& shape,
                                   std::vector<int64_t> layout_strides);

/// The same check for strides given by a typed entry point (`op` and `tensor` name the error).
void check_input_strides(const std::string& op, const std::string& tensor,
                         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);

}  // namespace adjoint::ops
