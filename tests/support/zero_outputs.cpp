// zero_outputs: finds the first output element of a run that is not 0.
#include "support/zero_outputs.h"

namespace adjoint::testing {

std::string first_nonzero_output(const ir::Program& program, const ir::HostBuffers& buffers) {
  for (const ir::Tensor& t : program.outputs) {
    const std::vector<double>& values = buffers.at(t->name);
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] != 0.0) {
        return t->name + "[" + std::to_string(i) + "] = " + std::to_string(values[i]);
      }
    }
  }
  return "";
}

}  // namespace adjoint::testing
