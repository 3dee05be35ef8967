// lower_outer_generic(): the structural checks of one outer batch, its lowering value N_max, the
// generic buffers of the program lowered at N_max, and the dispatch of two sizes to the token
// pair (lower_token_pair.h). The invariance check itself is invariant_lowering.h's.
#include "compiler/lower_outer_generic.h"

#include <algorithm>
#include <map>

#include "compiler/invariant_lowering.h"
#include "compiler/lower_generic.h"
#include "compiler/lower_token_pair.h"
#include "compiler/program_utils.h"
#include "ir/dynamic_sizes.h"

namespace adjoint::compiler {

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
  if (program.sizes.size() == 2) {
    if (!options.token_pair) return refuse("it has 2 sizes (the token pair is off)");
    std::string pair_why;
    std::optional<CompiledProgram> out = lower_token_pair(program, options, &pair_why);
    if (!out) return refuse("it has 2 sizes, not one token axis: " + pair_why);
    return out;
  }
  if (std::string reason = outer_batch_refusal(program); !reason.empty()) return refuse(reason);
  const ir::SizeParam& size = program.sizes[0];
  const int64_t value = outer_batch_lowering_value(program);
  if (value < 2 || value - 1 < std::max<int64_t>(size.lower_bound, 1))
    return refuse("no two batches of at least 1 fit the storage bound");
  std::optional<CompiledProgram> lowered = lower_invariant(
      program, options, [&](int i) { return std::vector<int64_t>{value - i}; },
      [&](int i) { return OuterSizeParam{size.source, size.var.name_hint(), value - i, "", ""}; },
      why);
  if (!lowered) return std::nullopt;
  CompiledProgram out = std::move(*lowered);
  out.sizes = {size.source};
  const std::map<std::string, ir::Tensor> tensors = dynamic_tensors(program);
  for (BufferInfo& b : out.buffers) {
    auto t = tensors.find(b.name);
    if (t == tensors.end()) continue;
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
