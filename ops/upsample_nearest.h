// PLACEHOLDER (being written now): the upsample_nearest op family.
#pragma once
#include <vector>
#include "ops/registry.h"
namespace adjoint::ops {
std::vector<OpDefinition> upsample_nearest_ops();
}  // namespace adjoint::ops
