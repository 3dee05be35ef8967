// Whether a program's outputs are all zero in a run's buffers: what the empty-shape tests of
// the grid_sampler ops (2-d and 3-d) expect where no grid point or channel contributes.
#pragma once

#include <string>

#include "ir/interpreter.h"
#include "ir/program.h"

namespace adjoint::testing {

/// "" when every element of every output of `program` in `buffers` is 0; else the first
/// output with another value, as "<name>[<index>] = <value>".
std::string first_nonzero_output(const ir::Program& program, const ir::HostBuffers& buffers);

}  // namespace adjoint::testing
