// PLACEHOLDER (being written now): plain-loop references of the mhc family.
#include "reference/families.h"
namespace adjoint::reference {
std::vector<std::pair<std::string, ReferenceFn>> mhc_references() { return {}; }
void adjust_mhc_inputs(const ops::Specialization&, const ir::Program&, ir::HostBuffers&, std::mt19937_64&) {}
}  // namespace adjoint::reference
