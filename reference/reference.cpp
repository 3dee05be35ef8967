// The table of op references and the deterministic input generator.
#include "reference/reference.h"

#include <random>

#include "reference/families.h"

namespace adjoint::reference {

ReferenceFn find(const std::string& op_name) {
  for (const auto& [name, fn] : all_references()) {
    if (name == op_name) return fn;
  }
  return nullptr;
}

ir::HostBuffers make_inputs(const ops::Specialization& spec, const ir::Program& program,
                            uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  ir::HostBuffers inputs;
  for (const ir::Tensor& t : program.inputs) {
    std::vector<double> values(t->storage_elements());
    for (double& v : values) v = ir::round_to(t->dtype, uniform(rng));
    inputs[t->name] = std::move(values);
  }
  adjust_inputs(spec, program, inputs, rng);
  return inputs;
}

}  // namespace adjoint::reference
