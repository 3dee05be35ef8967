// lower_outer_generic(): the structural check, the lowering value N_max, the two lowerings at
// N_max and N_max - 1 and their comparison, and the buffers of the generic program.
#include "compiler/lower_outer_generic.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "compiler/lower_generic.h"
#include "compiler/program_utils.h"
#include "ir/dynamic_sizes.h"
#include "ir/error.h"

namespace adjoint::compiler {
namespace {

bool is_size(const ir::Expr& e, const ir::VarNode* size) { return e.as<ir::VarNode>() == size; }

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
                       const std::set<std::string>& dynamic) {
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

std::string outer_batch_refusal(const ir::Program& program) {
  if (program.sizes.size() != 1) return "it has " + std::to_string(program.sizes.size()) + " sizes";
  if (program.dynamic_storage_bound <= 0 || program.dynamic_storage_bound > kGenericInt32StorageBound)
    return "its storage bound does not allow 32-bit index math";
  const ir::VarNode* size = program.sizes[0].var.get();
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (!t->is_dynamic()) continue;
      for (size_t d = 0; d < t->dynamic_shape.size(); ++d) {
        const ir::Expr& dim = t->dynamic_shape[d];
        if (!is_size(dim, size) && !dim.as<ir::IntConstNode>())
          return "tensor '" + t->name + "' has a dimension that is neither the size nor a constant";
        if (depends_on(t->dynamic_strides[d], size))
          return "the size enters a stride of tensor '" + t->name + "' (not outermost in memory)";
      }
    }
  }
  for (const ir::Kernel& kernel : program.kernels) {
    for (const ir::Stage& stage : kernel.stages) {
      for (const ir::Axis& axis : stage.domain) {
        if (depends_on(axis.start, size)) return "the size enters an axis start";
        if (depends_on(axis.extent, size) && !is_size(axis.extent, size))
          return "the size enters an extent other than as itself";
      }
      std::vector<ir::Expr> uses(stage.indices.begin(), stage.indices.end());
      uses.push_back(stage.value);
      if (stage.condition.defined()) uses.push_back(stage.condition);
      for (const ir::Expr& e : uses) {
        if (depends_on(e, size))
          return "kernel '" + kernel.name + "' uses the size in its index or value math";
      }
    }
  }
  return "";
}

int64_t outer_batch_lowering_value(const ir::Program& program) {
  const ir::SizeParam& s = program.sizes.at(0);
  int64_t best = s.upper_bound;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (!t->is_dynamic()) continue;
      int64_t rest = 1, stride = 0;  // storage at N >= 1: (N - 1) * stride + rest
      bool empty = false;
      for (size_t d = 0; d < t->dynamic_shape.size(); ++d) {
        const int64_t st = ir::evaluate_size(t->dynamic_strides[d], program.sizes, {1});
        if (is_size(t->dynamic_shape[d], s.var.get())) {
          stride = st;
          continue;
        }
        const int64_t extent = ir::evaluate_size(t->dynamic_shape[d], program.sizes, {1});
        if (extent == 0) empty = true;
        rest += (extent - 1) * st;
      }
      if (empty || stride == 0) continue;
      if (rest > program.dynamic_storage_bound) return 0;
      best = std::min(best, (program.dynamic_storage_bound - rest) / stride + 1);
    }
  }
  return std::max<int64_t>(best, 0);
}

std::optional<CompiledProgram> lower_outer_generic(const ir::Program& program,
                                                   const LowerOptions& options, std::string* why) {
  auto refuse = [&](const std::string& reason) -> std::optional<CompiledProgram> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (std::string reason = outer_batch_refusal(program); !reason.empty()) return refuse(reason);
  const ir::SizeParam& size = program.sizes[0];
  const int64_t value = outer_batch_lowering_value(program);
  if (value < 2 || value - 1 < std::max<int64_t>(size.lower_bound, 1))
    return refuse("no two batches of at least 1 fit the storage bound");
  std::set<std::string> dynamic;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries})
    for (const ir::Tensor& t : *list)
      if (t->is_dynamic()) dynamic.insert(t->name);
  std::optional<CompiledProgram> lowered[2];
  for (int i = 0; i < 2; ++i) {
    LowerOptions at = options;
    at.outer_size = OuterSizeParam{size.source, size.var.name_hint(), value - i};
    at.record_passes = options.record_passes && i == 0;
    try {
      lowered[i] = lower(ir::bind_sizes(program, {value - i}), at);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInvalidProgram) throw;
      return refuse(e.what());
    }
  }
  if (std::string reason = difference(*lowered[0], *lowered[1], dynamic); !reason.empty())
    return refuse(reason);
  CompiledProgram out = std::move(*lowered[0]);
  out.sizes = {size.source};
  std::map<std::string, ir::Tensor> tensors;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries})
    for (const ir::Tensor& t : *list) tensors[t->name] = t;
  for (BufferInfo& b : out.buffers) {
    auto t = tensors.find(b.name);
    if (t == tensors.end() || !t->second->is_dynamic()) continue;
    for (size_t d = 0; d < t->second->dynamic_shape.size(); ++d) {
      const ir::Expr& dim = t->second->dynamic_shape[d];
      b.dynamic_shape.push_back(is_size(dim, size.var.get())
                                    ? SizeProduct{1, {size.source}}
                                    : SizeProduct{ir::evaluate_size(dim, program.sizes, {1}), {}});
      b.dynamic_strides.push_back(
          SizeProduct{ir::evaluate_size(t->second->dynamic_strides[d], program.sizes, {1}), {}});
    }
  }
  if (options.record_passes) {
    out.pass_dump = "// generic in " + size.source + " (an outer batch): lowered at " +
                    size.source + " = " + std::to_string(value) +
                    " by the specialized pipeline; the kernels take it as a parameter\n" +
                    out.pass_dump;
  }
  return out;
}

}  // namespace adjoint::compiler
