// invariant_lowering: two lowerings of a generic program at neighbouring values of its sizes,
// compared in everything but comments (see the header).
#include "compiler/invariant_lowering.h"

#include <set>
#include <sstream>

#include "ir/dynamic_sizes.h"
#include "ir/error.h"

namespace adjoint::compiler {
namespace {

/// The source's lines that are code: comments (schedule notes count points) and blank lines
/// dropped.
std::string code_lines(const std::string& source) {
  std::istringstream in(source);
  std::string line, code;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line.compare(first, 2, "//") == 0) continue;
    code += line + "\n";
  }
  return code;
}

/// What differs between the lowerings at two batches, or "" when nothing but comments does.
std::string difference(const CompiledProgram& a, const CompiledProgram& b,
                       const std::map<std::string, ir::Tensor>& dynamic) {
  if (a.kernels.size() != b.kernels.size()) return "the kernel count depends on the batch";
  for (size_t k = 0; k < a.kernels.size(); ++k) {
    const CompiledKernel &x = a.kernels[k], &y = b.kernels[k];
    if (code_lines(x.source) != code_lines(y.source))
      return "kernel '" + x.entry + "': its code depends on the batch";
    if (x.launch.block[0] != y.launch.block[0] || x.launch.block[1] != y.launch.block[1] ||
        x.launch.block[2] != y.launch.block[2] || x.launch.shared_bytes != y.launch.shared_bytes ||
        x.params != y.params || x.zero_before != y.zero_before ||
        x.points.constant != y.points.constant || x.points_per_thread != y.points_per_thread)
      return "kernel '" + x.entry + "': its launch depends on the batch";
  }
  if (a.buffers.size() != b.buffers.size()) return "the buffers depend on the batch";
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const BufferInfo &x = a.buffers[i], &y = b.buffers[i];
    if (x.name != y.name) return "the buffers depend on the batch";
    if (!dynamic.count(x.name) && (x.shape != y.shape || x.strides != y.strides))
      return "temporary '" + x.name + "' depends on the batch";
  }
  return "";
}

}  // namespace

std::map<std::string, ir::Tensor> dynamic_tensors(const ir::Program& program) {
  std::map<std::string, ir::Tensor> out;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries})
    for (const ir::Tensor& t : *list)
      if (t->is_dynamic()) out[t->name] = t;
  return out;
}

std::optional<CompiledProgram> lower_invariant(
    const ir::Program& program, const LowerOptions& options,
    const std::function<std::vector<int64_t>(int)>& values,
    const std::function<OuterSizeParam(int)>& outer, std::string* why) {
  std::optional<CompiledProgram> lowered[2];
  for (int i = 0; i < 2; ++i) {
    LowerOptions at = options;
    at.outer_size = outer(i);
    at.record_passes = options.record_passes && i == 0;
    try {
      lowered[i] = lower(ir::bind_sizes(program, values(i)), at);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInvalidProgram) throw;
      if (why) *why = e.what();
      return std::nullopt;
    }
  }
  if (std::string reason = difference(*lowered[0], *lowered[1], dynamic_tensors(program));
      !reason.empty()) {
    if (why) *why = reason;
    return std::nullopt;
  }
  return std::move(lowered[0]);
}

}  // namespace adjoint::compiler
