// unfuse_fma_sums: an ExprMutator that rebuilds each fma_sum as a sum over the same axes.
#include "compiler/unfuse_fma.h"

#include "compiler/program_utils.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

class Unfuser : public ir::ExprMutator {
 protected:
  ir::Expr visit_Reduce(const ir::ReduceNode& node, const ir::Expr& self) override {
    ir::Expr rebuilt = ir::ExprMutator::visit_Reduce(node, self);
    auto* r = rebuilt.as<ir::ReduceNode>();
    if (r->op != ir::ReduceOp::kFmaSum) return rebuilt;
    return ir::ReduceNode::make(ir::ReduceOp::kSum, r->axes, r->body, r->dtype);
  }
};

}  // namespace

ir::Program unfuse_fma_sums(const ir::Program& program) {
  ir::Program out = program;
  Unfuser unfuser;
  for (ir::Kernel& kernel : out.kernels) {
    for (ir::Stage& stage : kernel.stages) {
      stage = map_stage(stage, [&](const ir::Expr& e) { return unfuser.mutate(e); });
    }
  }
  return same_program(out, program) ? program : out;
}

}  // namespace adjoint::compiler
