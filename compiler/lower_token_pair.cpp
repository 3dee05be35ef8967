// lower_token_pair(): the structural checks of a token pair, its lowering value T_max, and the
// generic buffers of the program lowered at batch 1 and seq T_max (see the header).
#include "compiler/lower_token_pair.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/invariant_lowering.h"
#include "compiler/lower_generic.h"
#include "compiler/program_utils.h"
#include "ir/dynamic_sizes.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

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
  std::optional<CompiledProgram> lowered = lower_invariant(
      program, options,
      [&](int i) {
        std::vector<int64_t> values(2, 1);
        values[si] = value - i;
        return values;
      },
      [&](int i) {
        return OuterSizeParam{seq.source, seq.var.name_hint(), value - i, batch.source,
                              batch.var.name_hint()};
      },
      why);
  if (!lowered) return std::nullopt;
  CompiledProgram out = std::move(*lowered);
  out.sizes = {program.sizes[0].source, program.sizes[1].source};
  const std::map<std::string, ir::Tensor> tensors = dynamic_tensors(program);
  for (BufferInfo& b : out.buffers) {
    auto t = tensors.find(b.name);
    if (t == tensors.end()) continue;
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

}  // namespace adjoint::compiler
