// DynamicPolicy: distinct sizes per family and axis, and the generic axes they call for.
#include "runtime/dynamic_policy.h"

#include <algorithm>

#include "compiler/lower_generic.h"
#include "compiler/lower_outer_generic.h"
#include "compiler/lower_token_pair.h"
#include "ir/error.h"

namespace adjoint::runtime {

const char* dynamic_mode_name(DynamicMode mode) {
  switch (mode) {
    case DynamicMode::kNever: return "never";
    case DynamicMode::kBatch: return "batch";
    case DynamicMode::kAuto: return "auto";
    case DynamicMode::kAlways: return "always";
  }
  return "?";
}

DynamicMode parse_dynamic_mode(const std::string& text, const std::string& what) {
  if (text == "never") return DynamicMode::kNever;
  if (text == "batch") return DynamicMode::kBatch;
  if (text == "auto") return DynamicMode::kAuto;
  if (text == "always") return DynamicMode::kAlways;
  throw Error(what + ": expected never, batch, auto or always, got '" + text + "'",
              ErrorCode::kInvalidArgument);
}

std::vector<std::string> DynamicPolicy::observe(const ops::Specialization& spec,
                                                const ops::DynamicOp& op, DynamicMode mode) {
  std::vector<std::string> generic;
  if (mode == DynamicMode::kNever) return generic;
  std::vector<std::string> all;
  for (const ops::DynamicAxis& axis : op.axes) all.push_back(axis.name());
  if (mode == DynamicMode::kAlways) return all;
  const std::string family = ops::generic_key(spec, all);
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, std::set<int64_t>>& axes = seen_[family];
  bool pair_varied = false;  // mode batch: a token-pair axis has shown two values
  for (const ops::DynamicAxis& axis : op.axes) {
    if (mode == DynamicMode::kBatch && !axis.outer_batch && !axis.token_pair) continue;
    std::optional<int64_t> value = axis.value(spec);
    if (!value) continue;  // the op rejects it later
    std::set<int64_t>& seen = axes[axis.name()];
    seen.insert(*value);
    if (seen.size() < 2) continue;
    if (mode == DynamicMode::kBatch && axis.token_pair)
      pair_varied = true;
    else
      generic.push_back(axis.name());
  }
  if (!pair_varied) return generic;
  std::vector<std::string> ordered;  // the pair joins, both axes, in the op's order
  for (const ops::DynamicAxis& axis : op.axes) {
    const std::string name = axis.name();
    if (axis.token_pair || std::find(generic.begin(), generic.end(), name) != generic.end())
      ordered.push_back(name);
  }
  return ordered;
}

namespace {

/// The largest storage (elements) of the dynamic tensors at `values`.
int64_t largest_storage(const ir::Program& program, const std::vector<int64_t>& values) {
  int64_t largest = 0;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (!t->is_dynamic()) continue;
      int64_t span = 1;
      for (size_t d = 0; d < t->dynamic_shape.size(); ++d) {
        int64_t size = ir::evaluate_size(t->dynamic_shape[d], program.sizes, values);
        if (size == 0) {
          span = 0;
          break;
        }
        span += (size - 1) * ir::evaluate_size(t->dynamic_strides[d], program.sizes, values);
      }
      largest = std::max(largest, span);
    }
  }
  return largest;
}

}  // namespace

ProgramChoice choose_program(const ops::Specialization& spec, DynamicPolicy& policy,
                             DynamicMode mode) {
  const ops::DynamicOp* op = ops::find_dynamic_op(spec.op_name());
  if (!op) return ProgramChoice{};
  std::vector<std::string> axes = policy.observe(spec, *op, mode);
  if (axes.empty()) return ProgramChoice{};
  ProgramChoice choice = generic_choice(spec, axes);
  if (mode == DynamicMode::kBatch && choice.generic) {
    if (!compiler::outer_batch_refusal(choice.program).empty() &&
        !compiler::token_pair_refusal(choice.program).empty())
      return ProgramChoice{};
    choice.require_outer_batch = true;
  }
  return choice;
}

ProgramChoice generic_choice(const ops::Specialization& spec,
                             const std::vector<std::string>& axes) {
  const ops::DynamicOp* op = ops::find_dynamic_op(spec.op_name());
  if (!op) {
    throw Error(spec.op_name() + ": has no dynamic axes; generic programs exist for " +
                    "upsample_nearest{1,2,3}d_backward and their exact variants",
                ErrorCode::kInvalidArgument);
  }
  ProgramChoice choice;
  choice.axes = axes;
  ir::Program program;
  try {
    program = op->build_generic(spec, choice.axes);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidProgram) throw;  // an invalid specialization
    return ProgramChoice{};  // one the op keeps specialized (e.g. given input strides)
  }
  std::vector<int64_t> values = ops::size_values(program, spec);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < program.sizes[i].lower_bound || values[i] > program.sizes[i].upper_bound)
      return ProgramChoice{};  // outside the generic program's bounds: specialized
  }
  const bool narrow = largest_storage(program, values) <= compiler::kGenericInt32StorageBound;
  if (narrow) program.dynamic_storage_bound = compiler::kGenericInt32StorageBound;
  choice.generic = true;
  choice.key = "generic " + ops::generic_key(spec, choice.axes) + (narrow ? " |index32" : " |index64");
  choice.program = std::move(program);
  choice.size_values = std::move(values);
  return choice;
}

void DynamicPolicy::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  seen_.clear();
}

}  // namespace adjoint::runtime
