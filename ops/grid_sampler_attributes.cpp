// grid_sampler_attributes: the size lists, output_mask and the shared attribute schemas.
#include "ops/grid_sampler_attributes.h"

#include "ir/error.h"
#include "ops/input_strides.h"
#include "ops/shape_checks.h"

namespace adjoint::ops {

void bad_grid_sampler_attribute(const std::string& op, const std::string& attribute,
                                const std::string& what) {
  throw Error(op + ": attribute '" + attribute + "': " + what, ErrorCode::kInvalidArgument);
}

std::vector<int64_t> read_grid_sampler_sizes(const Specialization& spec,
                                             const std::string& attribute, size_t count,
                                             const std::string& layout, size_t empty_before) {
  std::vector<int64_t> sizes = spec.get_ints(attribute);
  bool valid = sizes.size() == count;
  for (size_t i = 0; valid && i < sizes.size(); ++i) valid = sizes[i] >= (i < empty_before ? 0 : 1);
  if (!valid) {
    // "N and C at least 0, the others at least 1", naming the first sizes from `layout`.
    std::string minimum = empty_before == 0 ? "each at least 1" : "each at least 0";
    if (empty_before > 0 && empty_before < count) {
      std::string names;
      size_t begin = 0;
      for (size_t i = 0; i < empty_before; ++i) {
        const size_t end = layout.find(',', begin);
        names += (i == 0 ? "" : i + 1 == empty_before ? " and " : ", ") +
                 layout.substr(begin, end - begin);
        begin = end + 1;
      }
      minimum = names + " at least 0, the others at least 1";
    }
    bad_grid_sampler_attribute(spec.op_name(), attribute,
                               "expected " + std::to_string(count) + " sizes (" + layout + "), " +
                                   minimum + ", got '" + spec.raw(attribute) + "'");
  }
  check_sizes_addressable(spec.op_name(), "attribute '" + attribute + "'", sizes);
  return sizes;
}

bool read_grid_sampler_output_mask(const Specialization& spec) {
  std::vector<int64_t> mask = spec.get_ints("output_mask");
  bool valid = mask.size() == 2;
  for (int64_t m : mask) valid = valid && (m == 0 || m == 1);
  if (!valid) {
    bad_grid_sampler_attribute(spec.op_name(), "output_mask",
                               "expected two 0/1 values (grad_input, grad_grid), got '" +
                                   spec.raw("output_mask") + "'");
  }
  return mask[0] == 1;
}

std::vector<AttrSpec> grid_sampler_shared_attributes() {
  using K = AttrKind;
  return {
      {"padding_mode",
       K::kChoice,
       "zeros",
       "what samples outside the input read",
       {"zeros", "border", "reflection"}},
      {"align_corners",
       K::kBool,
       "false",
       "true: -1 and 1 are the centers of the corner pixels; false: their outer edges",
       {}},
      {"output_mask",
       K::kIntList,
       "1,1",
       "which gradients are wanted (grad_input, grad_grid); grad_grid is always produced",
       {}},
      input_strides_attribute("grad_output"),
      input_strides_attribute("input"),
      input_strides_attribute("grid"),
  };
}

}  // namespace adjoint::ops
