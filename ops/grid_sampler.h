// PLACEHOLDER (being written now): the grid_sampler op family.
#pragma once
#include <vector>
#include "ops/registry.h"
namespace adjoint::ops {
std::vector<OpDefinition> grid_sampler_ops();
}  // namespace adjoint::ops
