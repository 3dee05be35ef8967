// PLACEHOLDER (being written now): plain-loop references of the upsample_nearest family.
#include "reference/families.h"
namespace adjoint::reference {
std::vector<std::pair<std::string, ReferenceFn>> upsample_nearest_references() { return {}; }

}  // namespace adjoint::reference
