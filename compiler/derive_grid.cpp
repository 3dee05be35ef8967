// derive_grid: fills unset grid configurations with the default linear mapping and its vector
// width, and checks every kernel's launch with the coverage proof.
#include "compiler/derive_grid.h"

#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"
#include "compiler/vector_groups.h"

namespace adjoint::compiler {
namespace {

/// A domain of rank 0 is one point: one warp is plenty.
constexpr int kScalarBlockSize = 32;

ir::GridConfig default_grid(size_t rank) {
  ir::GridConfig grid;
  grid.is_set = true;
  grid.bindings.assign(rank, ir::AxisBinding::kLinear);
  grid.block_size = rank == 0 ? kScalarBlockSize : kDefaultBlockSize;
  grid.vector_width = 1;
  return grid;
}

}  // namespace

ir::Program derive_grid(const ir::Program& program) {
  ir::Program out = program;
  bool changed = false;
  for (ir::Kernel& kernel : out.kernels) {
    if (!kernel.grid.is_set) {
      kernel.grid = default_grid(domain_extents(kernel).size());
      kernel.grid.vector_width = derived_vector_width(kernel);
      changed = true;
    }
    launch_dims(kernel);  // throws, naming the kernel, unless the launch covers the domain
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
