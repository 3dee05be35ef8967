// Internal to reference/: each op family's reference functions and input adjustments.
#pragma once

#include <random>
#include <utility>
#include <vector>

#include "reference/reference.h"

namespace adjoint::reference {

std::vector<std::pair<std::string, ReferenceFn>> upsample_nearest_references();
std::vector<std::pair<std::string, ReferenceFn>> grid_sampler_references();
/// grid_sampler_3d_backward (reference/grid_sampler_3d.cpp; listed by grid_sampler_references).
ir::HostBuffers grid_sampler_3d_backward(const ops::Specialization& spec,
                                         const ir::HostBuffers& inputs);
std::vector<std::pair<std::string, ReferenceFn>> mhc_references();
std::vector<std::pair<std::string, ReferenceFn>> mhc_layer_references();  // post, sinkhorn

/// All of the above.
std::vector<std::pair<std::string, ReferenceFn>> all_references();

/// Lets a family replace uniform inputs by values in the op's valid ranges.
void adjust_inputs(const ops::Specialization& spec, const ir::Program& program,
                   ir::HostBuffers& inputs, std::mt19937_64& rng);
void adjust_grid_sampler_inputs(const ops::Specialization& spec, const ir::Program& program,
                                ir::HostBuffers& inputs, std::mt19937_64& rng);
void adjust_mhc_inputs(const ops::Specialization& spec, const ir::Program& program,
                       ir::HostBuffers& inputs, std::mt19937_64& rng);
void adjust_mhc_layer_inputs(const ops::Specialization& spec, const ir::Program& program,
                             ir::HostBuffers& inputs, std::mt19937_64& rng);

}  // namespace adjoint::reference
