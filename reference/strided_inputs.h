// Inputs read through the strides a specialization gives them (`<tensor>_strides`): the
// references compute in row-major order, so they first gather each such input's elements from
// its storage. Written from the attribute's meaning (element offset = sum of index x stride),
// without ops/input_strides.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/interpreter.h"
#include "ops/registry.h"

namespace adjoint::reference {

/// `inputs` with every tensor of `shapes` ((name, shape) pairs) that the specialization reads
/// with given strides replaced by its elements in row-major order; the others as they are.
ir::HostBuffers row_major_inputs(const ops::Specialization& spec, const ir::HostBuffers& inputs,
                                 const std::vector<std::pair<std::string, std::vector<int64_t>>>&
                                     shapes);

}  // namespace adjoint::reference
