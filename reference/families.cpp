// Gathers the families' references and input adjustments.
#include "reference/families.h"

namespace adjoint::reference {

std::vector<std::pair<std::string, ReferenceFn>> all_references() {
  std::vector<std::pair<std::string, ReferenceFn>> all;
  for (auto family : {upsample_nearest_references, grid_sampler_references, mhc_references,
                      mhc_layer_references}) {
    for (auto& entry : family()) all.push_back(std::move(entry));
  }
  return all;
}

void adjust_inputs(const ops::Specialization& spec, const ir::Program& program,
                   ir::HostBuffers& inputs, std::mt19937_64& rng) {
  const std::string& op = spec.op_name();
  if (op.rfind("grid_sampler", 0) == 0) adjust_grid_sampler_inputs(spec, program, inputs, rng);
  if (op.rfind("mhc_pre", 0) == 0) adjust_mhc_inputs(spec, program, inputs, rng);
  if (op.rfind("mhc_post", 0) == 0 || op.rfind("mhc_sinkhorn", 0) == 0) {
    adjust_mhc_layer_inputs(spec, program, inputs, rng);
  }
}

}  // namespace adjoint::reference
