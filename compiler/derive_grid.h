// derive_grid: gives every kernel a grid configuration and proves it covers the domain.
//
// Guarantees: afterwards every kernel's GridConfig is set. A kernel without one gets every
// domain axis bound kLinear (flattened, grid-stride loop) with kDefaultBlockSize threads per
// block and the vector width of derived_vector_width (vector_groups.h: V consecutive points of
// the innermost axis per thread, one store of up to 16 bytes, when the targets are contiguous
// along it and the domain is large); an explicit one is kept. Either way launch_dims() of the
// result passes check_grid_coverage (launch_geometry.h); an explicit configuration that does not
// is an adjoint::Error naming the kernel. Grid and block extents are therefore never chosen by hand
// from the wrong extent: they follow from the domain.
#pragma once

#include "ir/program.h"

namespace adjoint::compiler {

/// Returns `program` with every kernel's grid configuration set and checked.
ir::Program derive_grid(const ir::Program& program);

}  // namespace adjoint::compiler
