// Inputs read through given strides (reference/strided_inputs.h).
#include "reference/strided_inputs.h"

namespace adjoint::reference {

ir::HostBuffers row_major_inputs(const ops::Specialization& spec, const ir::HostBuffers& inputs,
                                 const std::vector<std::pair<std::string, std::vector<int64_t>>>&
                                     shapes) {
  ir::HostBuffers out = inputs;
  for (const auto& [name, shape] : shapes) {
    std::string attribute = name + "_strides";
    bool has_attribute = false;
    for (const ops::AttrSpec& a : spec.op().attributes) has_attribute |= a.name == attribute;
    if (!has_attribute) continue;
    std::vector<int64_t> strides = spec.get_ints(attribute);
    if (strides.empty()) continue;
    int64_t count = 1;
    for (int64_t size : shape) count *= size;
    const std::vector<double>& storage = inputs.at(name);
    std::vector<double> values(static_cast<size_t>(count));
    for (int64_t flat = 0; flat < count; ++flat) {
      int64_t rest = flat, offset = 0;
      for (size_t d = shape.size(); d-- > 0;) {
        offset += (rest % shape[d]) * strides[d];
        rest /= shape[d];
      }
      values[static_cast<size_t>(flat)] = storage.at(static_cast<size_t>(offset));
    }
    out[name] = std::move(values);
  }
  return out;
}

}  // namespace adjoint::reference
