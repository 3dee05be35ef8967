// PLACEHOLDER (being written now): the mhc op family.
#pragma once
#include <vector>
#include "ops/registry.h"
namespace adjoint::ops {
std::vector<OpDefinition> mhc_ops();
}  // namespace adjoint::ops
