// PLACEHOLDER (being written now): plain-loop references of the grid_sampler family.
#include "reference/families.h"
namespace adjoint::reference {
std::vector<std::pair<std::string, ReferenceFn>> grid_sampler_references() { return {}; }
void adjust_grid_sampler_inputs(const ops::Specialization&, const ir::Program&, ir::HostBuffers&, std::mt19937_64&) {}
}  // namespace adjoint::reference
