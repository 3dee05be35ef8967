// Plain-loop references of every shipped op, written from the op's definition (PyTorch / the
// DESIGN.md formulas) without the IR, so that checking the IR against them means something.
// Used by the tests, the `adjoint demo` command and the GPU parity checks.
#pragma once

#include <functional>
#include <string>

#include "ir/interpreter.h"
#include "ops/registry.h"

namespace adjoint::reference {

/// Computes every output of the op for a specialization from the same named input buffers the
/// IR program takes (values in f64, laid out by the program's tensor strides).
using ReferenceFn =
    std::function<ir::HostBuffers(const ops::Specialization&, const ir::HostBuffers& inputs)>;

/// The reference for an op, or nullptr if it has none.
ReferenceFn find(const std::string& op_name);

/// Deterministic test inputs for a program: values in [-1, 1] rounded to each tensor's dtype,
/// with op-aware ranges where the op needs them (grid_sampler grids include points outside
/// [-1, 1] and exactly on pixel boundaries; mHC saved activations are in their valid ranges).
ir::HostBuffers make_inputs(const ops::Specialization& spec, const ir::Program& program,
                            uint64_t seed = 1);

}  // namespace adjoint::reference
