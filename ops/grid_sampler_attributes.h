// The attributes that grid_sampler_2d_backward and grid_sampler_3d_backward share, and how both
// read them: the size lists, output_mask, and the schemas of padding_mode, align_corners,
// output_mask and the three inputs' strides. One place, so that the two ops accept and refuse
// the same texts with the same messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace adjoint::ops {

/// Throws adjoint::Error (kInvalidArgument): "<op>: attribute '<attribute>': <what>".
[[noreturn]] void bad_grid_sampler_attribute(const std::string& op, const std::string& attribute,
                                             const std::string& what);

/// The int list `attribute` of `count` addressable sizes (`layout` names them in the error,
/// e.g. "N,C,H,W"): those before index `empty_before` may be 0, the others are at least 1.
/// ATen's rule: the batch, the channels and the grid's sizes may be empty, the input's
/// spatial sizes may not.
std::vector<int64_t> read_grid_sampler_sizes(const Specialization& spec,
                                             const std::string& attribute, size_t count,
                                             const std::string& layout, size_t empty_before);

/// output_mask's first value: whether grad_input is wanted (two 0/1 values, else an error).
bool read_grid_sampler_output_mask(const Specialization& spec);

/// The schemas of padding_mode, align_corners, output_mask and the strides of grad_output,
/// input and grid, in the order both ops list them after interpolation_mode.
std::vector<AttrSpec> grid_sampler_shared_attributes();

}  // namespace adjoint::ops
