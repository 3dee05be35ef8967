// lower_outer_generic(): the structural checks (one outer batch, or a token pair), the lowering
// value N_max (T_max), the two lowerings at N_max and N_max - 1 and their comparison, and the
// buffers of the generic program.
#include "compiler/lower_outer_generic.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "compiler/lower_generic.h"
#include "compiler/program_utils.h"
#include "ir/dynamic_sizes.h"
#include "ir/error.h"
#include "ir/visitor.h"

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

/// Pair-tensor loads ([b, s, ...] with b, s the stage's first two axes) with those two indices
/// replaced by 0: what is left must not mention b, s or the sizes. Counts loads of pair tensors
/// indexed otherwise in `stray`.
class PairLoadEraser : public ir::ExprMutator {
 public:
  PairLoadEraser(const std::set<const ir::TensorNode*>& pair, const ir::VarNode* b,
                 const ir::VarNode* s)
      : pair_(pair), b_(b), s_(s) {}
  int stray = 0;

 protected:
  ir::Expr visit_Load(const ir::LoadNode& node, const ir::Expr& self) override {
    if (!pair_.count(node.tensor.get())) return ir::ExprMutator::visit_Load(node, self);
    if (node.indices.size() < 2 || node.indices[0].as<ir::VarNode>() != b_ ||
        node.indices[1].as<ir::VarNode>() != s_) {
      ++stray;
      return self;
    }
    std::vector<ir::Expr> indices = node.indices;
    indices[0] = indices[1] = ir::Expr(int64_t{0});
    const ir::Expr erased = ir::LoadNode::make(node.tensor, indices);
    return ir::ExprMutator::visit_Load(*erased.as<ir::LoadNode>(), erased);
  }

 private:
  const std::set<const ir::TensorNode*>& pair_;
  const ir::VarNode *b_, *s_;
};

/// The sizes (batch, seq) of a token pair: the first two dimensions of the first dynamic tensor.
std::pair<int, int> pair_sizes(const ir::Program& program) {
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (!t->is_dynamic() || t->dynamic_shape.size() < 2) continue;
      int first = -1, second = -1;
      for (size_t i = 0; i < program.sizes.size(); ++i) {
        if (is_size(t->dynamic_shape[0], program.sizes[i].var.get())) first = static_cast<int>(i);
        if (is_size(t->dynamic_shape[1], program.sizes[i].var.get())) second = static_cast<int>(i);
      }
      return {first, second};
    }
  }
  return {-1, -1};
}

}  // namespace

std::string token_pair_refusal(const ir::Program& program) {
  if (program.sizes.size() != 2) return "it has " + std::to_string(program.sizes.size()) + " sizes";
  if (program.dynamic_storage_bound <= 0 || program.dynamic_storage_bound > kGenericInt32StorageBound)
    return "its storage bound does not allow 32-bit index math";
  const auto [bi, si] = pair_sizes(program);
  if (bi < 0 || si < 0 || bi == si) return "its first dynamic tensor does not begin with the two sizes";
  const ir::VarNode* batch = program.sizes[bi].var.get();
  const ir::VarNode* seq = program.sizes[si].var.get();
  auto sized = [&](const ir::Expr& e) { return depends_on(e, batch) || depends_on(e, seq); };
  std::set<const ir::TensorNode*> pair;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (!t->is_dynamic()) continue;
      const std::string name = "tensor '" + t->name + "'";
      if (t->dynamic_shape.size() < 2 || !is_size(t->dynamic_shape[0], batch) ||
          !is_size(t->dynamic_shape[1], seq))
        return name + " does not begin with the dimensions [batch, seq]";
      for (size_t d = 1; d < t->dynamic_shape.size(); ++d) {
        if (d >= 2 && sized(t->dynamic_shape[d])) return name + " has another sized dimension";
        if (sized(t->dynamic_strides[d])) return "a size enters a stride of " + name;
      }
      // b * stride0 + s * K is the token b * S + s times K when stride0 is S * K.
      const int64_t row = ir::evaluate_size(t->dynamic_strides[1], program.sizes, {1, 1});
      for (int64_t seq_value : {1, 7}) {
        std::vector<int64_t> values(2, 3);
        values[si] = seq_value;
        if (ir::evaluate_size(t->dynamic_strides[0], program.sizes, values) != seq_value * row)
          return "the batch stride of " + name + " is not seq times its seq stride " +
                 "(not one contiguous token axis)";
      }
      pair.insert(t.get());
    }
  }
  for (const ir::Kernel& kernel : program.kernels) {
    for (const ir::Stage& stage : kernel.stages) {
      const std::string name = "kernel '" + kernel.name + "'";
      if (!pair.count(stage.target.get())) return name + " writes a tensor without the pair";
      if (stage.domain.size() < 2 || !is_size(stage.domain[0].extent, batch) ||
          !is_size(stage.domain[1].extent, seq))
        return name + ": its first two axes do not count the batch and seq";
      for (size_t j = 0; j < stage.domain.size(); ++j) {
        const ir::Axis& axis = stage.domain[j];
        const ir::IntConstNode* start = axis.start.as<ir::IntConstNode>();
        if (!start || start->value != 0) return name + ": an axis does not start at 0";
        if (j >= 2 && sized(axis.extent)) return name + ": a size enters another extent";
      }
      const ir::VarNode* b = stage.domain[0].var.get();
      const ir::VarNode* s = stage.domain[1].var.get();
      std::vector<ir::Expr> rest;
      if (stage.kind == ir::StageKind::kScatterAdd) {
        if (stage.indices.size() < 2 || stage.indices[0].as<ir::VarNode>() != b ||
            stage.indices[1].as<ir::VarNode>() != s)
          return name + " adds to other tokens than its own";
        rest.assign(stage.indices.begin() + 2, stage.indices.end());
      }
      PairLoadEraser eraser(pair, b, s);
      rest.push_back(eraser.mutate(stage.value));
      if (stage.condition.defined()) rest.push_back(eraser.mutate(stage.condition));
      if (eraser.stray > 0) return name + " reads another token than its own (a token reduction?)";
      for (const ir::Expr& e : rest) {
        if (depends_on(e, b) || depends_on(e, s) || sized(e))
          return name + " uses the token indices or sizes in other index or value math";
      }
    }
  }
  return "";
}

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

int64_t token_pair_lowering_value(const ir::Program& program) {
  const auto [bi, si] = pair_sizes(program);
  if (program.sizes[bi].lower_bound > 1 || program.sizes[bi].upper_bound < 1) return 0;
  int64_t best = program.sizes[si].upper_bound;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (!t->is_dynamic()) continue;
      int64_t rest = 1;  // storage at batch 1 and seq T >= 1: (T - 1) * row + rest
      bool empty = false;
      for (size_t d = 2; d < t->dynamic_shape.size(); ++d) {
        const int64_t extent = ir::evaluate_size(t->dynamic_shape[d], program.sizes, {1, 1});
        if (extent == 0) empty = true;
        rest += (extent - 1) * ir::evaluate_size(t->dynamic_strides[d], program.sizes, {1, 1});
      }
      const int64_t row = ir::evaluate_size(t->dynamic_strides[1], program.sizes, {1, 1});
      if (empty || row == 0) continue;
      if (rest > program.dynamic_storage_bound) return 0;
      best = std::min(best, (program.dynamic_storage_bound - rest) / row + 1);
    }
  }
  return std::max<int64_t>(best, 0);
}

namespace {

/// The token-pair form of lower_outer_generic (its header): bound at batch 1 and seq T_max.
std::optional<CompiledProgram> lower_token_pair(const ir::Program& program,
                                                const LowerOptions& options, std::string* why) {
  auto refuse = [&](const std::string& reason) -> std::optional<CompiledProgram> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (std::string reason = token_pair_refusal(program); !reason.empty()) return refuse(reason);
  const auto [bi, si] = pair_sizes(program);
  const ir::SizeParam &batch = program.sizes[bi], &seq = program.sizes[si];
  const int64_t value = token_pair_lowering_value(program);
  if (value < 2 || value - 1 < std::max<int64_t>(seq.lower_bound, 1))
    return refuse("no two token counts of at least 1 fit the storage bound");
  std::set<std::string> dynamic;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries})
    for (const ir::Tensor& t : *list)
      if (t->is_dynamic()) dynamic.insert(t->name);
  std::optional<CompiledProgram> lowered[2];
  for (int i = 0; i < 2; ++i) {
    LowerOptions at = options;
    at.outer_size = OuterSizeParam{seq.source, seq.var.name_hint(), value - i, batch.source,
                                   batch.var.name_hint()};
    at.record_passes = options.record_passes && i == 0;
    std::vector<int64_t> values(2, 1);
    values[si] = value - i;
    try {
      lowered[i] = lower(ir::bind_sizes(program, values), at);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInvalidProgram) throw;
      return refuse(e.what());
    }
  }
  if (std::string reason = difference(*lowered[0], *lowered[1], dynamic); !reason.empty())
    return refuse(reason);
  CompiledProgram out = std::move(*lowered[0]);
  out.sizes = {program.sizes[0].source, program.sizes[1].source};
  std::map<std::string, ir::Tensor> tensors;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries})
    for (const ir::Tensor& t : *list) tensors[t->name] = t;
  for (BufferInfo& b : out.buffers) {
    auto t = tensors.find(b.name);
    if (t == tensors.end() || !t->second->is_dynamic()) continue;
    const ir::TensorNode& tensor = *t->second;
    const int64_t row = ir::evaluate_size(tensor.dynamic_strides[1], program.sizes, {1, 1});
    for (size_t d = 0; d < tensor.dynamic_shape.size(); ++d) {
      if (d == 0) {
        b.dynamic_shape.push_back(SizeProduct{1, {batch.source}});
        b.dynamic_strides.push_back(SizeProduct{row, {seq.source}});
      } else if (d == 1) {
        b.dynamic_shape.push_back(SizeProduct{1, {seq.source}});
        b.dynamic_strides.push_back(SizeProduct{row, {}});
      } else {
        b.dynamic_shape.push_back(
            SizeProduct{ir::evaluate_size(tensor.dynamic_shape[d], program.sizes, {1, 1}), {}});
        b.dynamic_strides.push_back(
            SizeProduct{ir::evaluate_size(tensor.dynamic_strides[d], program.sizes, {1, 1}), {}});
      }
    }
  }
  if (options.record_passes) {
    out.pass_dump = "// generic in " + batch.source + ", " + seq.source +
                    " (one token axis): lowered at " + batch.source + " = 1, " + seq.source +
                    " = " + std::to_string(value) +
                    " by the specialized pipeline; the kernels take both as parameters\n" +
                    out.pass_dump;
  }
  return out;
}

}  // namespace

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
  std::set<std::string> dynamic;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries})
    for (const ir::Tensor& t : *list)
      if (t->is_dynamic()) dynamic.insert(t->name);
  std::optional<CompiledProgram> lowered[2];
  for (int i = 0; i < 2; ++i) {
    LowerOptions at = options;
    at.outer_size = OuterSizeParam{size.source, size.var.name_hint(), value - i, "", ""};
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
