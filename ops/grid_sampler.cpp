// PLACEHOLDER (being written now): the grid_sampler op family registers nothing yet.
#include "ops/grid_sampler.h"
namespace adjoint::ops {
std::vector<OpDefinition> grid_sampler_ops() { return {}; }
}  // namespace adjoint::ops
