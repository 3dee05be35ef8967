// PLACEHOLDER (being written now): the mhc op family registers nothing yet.
#include "ops/mhc.h"
namespace adjoint::ops {
std::vector<OpDefinition> mhc_ops() { return {}; }
}  // namespace adjoint::ops
