// The device helper headers of templates/*.cuh, embedded into the library at build time by
// cmake/embed_templates.cmake (which generates the definition). NVRTC receives each one as a
// named header, so nothing is searched for on disk at run time.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace adjoint::compiler {

/// (header name, header text) of every templates/*.cuh, e.g. {"adjoint_types.cuh", "..."}.
const std::vector<std::pair<std::string, std::string>>& embedded_templates();

}  // namespace adjoint::compiler
