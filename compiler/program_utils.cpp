// Program helpers: stage rewriting, pointer-equality comparison and tensor usage queries.
#include "compiler/program_utils.h"

#include <algorithm>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/visitor.h"

namespace adjoint::compiler {

ir::Stage map_stage(const ir::Stage& stage,
                    const std::function<ir::Expr(const ir::Expr&)>& rewrite) {
  ir::Stage out = stage;
  for (ir::Axis& axis : out.domain) {
    axis.start = rewrite(axis.start);
    axis.extent = rewrite(axis.extent);
  }
  for (ir::Expr& index : out.indices) index = rewrite(index);
  out.value = rewrite(out.value);
  if (out.condition.defined()) out.condition = rewrite(out.condition);
  return out;
}

void for_each_node(const ir::Expr& e, const std::function<void(const ir::Expr&)>& fn) {
  std::unordered_set<const ir::ExprNode*> seen;
  std::function<void(const ir::Expr&)> walk = [&](const ir::Expr& node) {
    if (!seen.insert(node.get()).second) return;
    ir::for_each_child(node, walk);
    fn(node);
  };
  walk(e);
}

namespace {

class Substitute : public ir::ExprMutator {
 public:
  Substitute(const ir::VarNode* var, ir::Expr value) : var_(var), value_(std::move(value)) {}

 protected:
  ir::Expr visit_Var(const ir::VarNode& node, const ir::Expr& self) override {
    return &node == var_ ? value_ : self;
  }

 private:
  const ir::VarNode* var_;
  ir::Expr value_;
};

}  // namespace

ir::Expr substitute(const ir::Expr& e, const ir::VarNode* var, const ir::Expr& value) {
  Substitute rewrite(var, value);
  return rewrite.mutate(e);
}

bool depends_on(const ir::Expr& e, const ir::VarNode* var) {
  bool found = false;
  for_each_node(e, [&](const ir::Expr& node) { found = found || node.get() == var; });
  return found;
}

std::vector<ir::Expr> stage_expressions(const ir::Stage& stage) {
  std::vector<ir::Expr> exprs;
  for (const ir::Axis& axis : stage.domain) {
    exprs.push_back(axis.start);
    exprs.push_back(axis.extent);
  }
  exprs.insert(exprs.end(), stage.indices.begin(), stage.indices.end());
  exprs.push_back(stage.value);
  if (stage.condition.defined()) exprs.push_back(stage.condition);
  return exprs;
}

namespace {

bool same_stage(const ir::Stage& a, const ir::Stage& b) {
  if (a.kind != b.kind || a.target != b.target || a.accumulation != b.accumulation) return false;
  std::vector<ir::Expr> ea = stage_expressions(a), eb = stage_expressions(b);
  if (ea.size() != eb.size() || a.domain.size() != b.domain.size()) return false;
  for (size_t i = 0; i < a.domain.size(); ++i) {
    if (!(a.domain[i].var == b.domain[i].var)) return false;
  }
  for (size_t i = 0; i < ea.size(); ++i) {
    if (!ea[i].same_as(eb[i])) return false;
  }
  return true;
}

bool same_grid(const ir::GridConfig& a, const ir::GridConfig& b) {
  return a.is_set == b.is_set && a.bindings == b.bindings && a.block_size == b.block_size &&
         a.vector_width == b.vector_width;
}

void add_unique(std::vector<ir::Tensor>& list, const ir::Tensor& t) {
  if (std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
}

}  // namespace

bool same_program(const ir::Program& a, const ir::Program& b) {
  if (a.inputs != b.inputs || a.outputs != b.outputs || a.temporaries != b.temporaries)
    return false;
  if (a.kernels.size() != b.kernels.size()) return false;
  for (size_t k = 0; k < a.kernels.size(); ++k) {
    const ir::Kernel& ka = a.kernels[k];
    const ir::Kernel& kb = b.kernels[k];
    if (ka.name != kb.name || !same_grid(ka.grid, kb.grid) || ka.stages.size() != kb.stages.size())
      return false;
    for (size_t s = 0; s < ka.stages.size(); ++s) {
      if (!same_stage(ka.stages[s], kb.stages[s])) return false;
    }
  }
  return true;
}

std::vector<ir::Tensor> tensors_read(const ir::Kernel& kernel) {
  std::vector<ir::Tensor> read;
  for (const ir::Stage& stage : kernel.stages) {
    for (const ir::Expr& e : stage_expressions(stage)) {
      for_each_node(e, [&](const ir::Expr& node) {
        if (auto* load = node.as<ir::LoadNode>()) add_unique(read, load->tensor);
      });
    }
  }
  return read;
}

std::vector<ir::Tensor> tensors_written(const ir::Kernel& kernel) {
  std::vector<ir::Tensor> written;
  for (const ir::Stage& stage : kernel.stages) add_unique(written, stage.target);
  return written;
}

std::vector<ir::Tensor> kernel_tensors(const ir::Program& program, const ir::Kernel& kernel) {
  std::vector<ir::Tensor> used = tensors_read(kernel);
  for (const ir::Tensor& t : tensors_written(kernel)) add_unique(used, t);
  std::vector<ir::Tensor> ordered;
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (std::find(used.begin(), used.end(), t) != used.end()) ordered.push_back(t);
    }
  }
  for (const ir::Tensor& t : used) add_unique(ordered, t);  // tensors the program does not list
  return ordered;
}

std::vector<int64_t> domain_extents(const ir::Kernel& kernel) {
  std::vector<int64_t> extents;
  if (kernel.stages.empty()) return extents;
  for (const ir::Axis& axis : kernel.stages.front().domain) {
    auto* c = axis.extent.as<ir::IntConstNode>();
    if (!c) {
      throw Error("kernel '" + kernel.name + "': domain axis '" + axis.var.name_hint() +
                      "' has a non-constant extent; the compiler needs constant domains",
                  ErrorCode::kInvalidProgram);
    }
    extents.push_back(c->value);
  }
  return extents;
}

std::string unique_tensor_name(const ir::Program& program, const std::string& base) {
  std::string name = base;
  for (int i = 1; program.find_tensor(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

int64_t constant_trips(const ir::ReduceNode& r) {
  constexpr int64_t kMost = int64_t{1} << 40;
  int64_t n = 1;
  for (const ir::Axis& a : r.axes) {
    const auto* c = a.extent.as<ir::IntConstNode>();
    const int64_t e = c ? std::min<int64_t>(std::max<int64_t>(c->value, 1), kMost) : 1;
    n = n > kMost / e ? kMost : n * e;
  }
  return n;
}

std::vector<const ir::ReduceNode*> outermost_reductions(const ir::Expr& value) {
  std::vector<const ir::ReduceNode*> found;
  std::function<void(const ir::Expr&)> walk = [&](const ir::Expr& e) {
    if (auto* reduce = e.as<ir::ReduceNode>()) {
      if (std::find(found.begin(), found.end(), reduce) == found.end()) found.push_back(reduce);
      return;
    }
    ir::for_each_child(e, walk);
  };
  walk(value);
  return found;
}

namespace {

/// Walks `value` as the emitter evaluates it: a select's branches and the right operand of a
/// short-circuit && / || are conditional. `visit(node, conditional)` sees every node; returning
/// true stops the walk below that node.
void walk_evaluation(const ir::Expr& value,
                     const std::function<bool(const ir::Expr&, bool)>& visit) {
  std::function<void(const ir::Expr&, bool)> walk = [&](const ir::Expr& e, bool conditional) {
    if (visit(e, conditional)) return;
    if (auto* select = e.as<ir::SelectNode>()) {
      walk(select->condition, conditional);
      walk(select->true_value, true);
      walk(select->false_value, true);
      return;
    }
    auto* binary = e.as<ir::BinaryNode>();
    if (binary && (binary->op == ir::BinaryOp::kAnd || binary->op == ir::BinaryOp::kOr)) {
      walk(binary->a, conditional);
      walk(binary->b, true);
      return;
    }
    ir::for_each_child(e, [&](const ir::Expr& child) { walk(child, conditional); });
  };
  walk(value, false);
}

}  // namespace

std::vector<const ir::ReduceNode*> unconditional_reductions(const ir::Expr& value) {
  std::vector<const ir::ReduceNode*> found;
  walk_evaluation(value, [&](const ir::Expr& e, bool conditional) {
    auto* reduce = e.as<ir::ReduceNode>();
    if (reduce && !conditional && std::find(found.begin(), found.end(), reduce) == found.end())
      found.push_back(reduce);
    return reduce != nullptr;  // not into a reduction's body
  });
  return found;
}

std::unordered_set<const ir::LoadNode*> unconditional_loads(const ir::Expr& value) {
  std::unordered_set<const ir::LoadNode*> found;
  walk_evaluation(value, [&](const ir::Expr& e, bool conditional) {
    if (e.as<ir::ReduceNode>()) return true;
    if (auto* load = e.as<ir::LoadNode>(); load && !conditional) found.insert(load);
    return false;
  });
  return found;
}

bool reads_memory(const ir::Expr& e) {
  bool reads = false;
  for_each_node(e, [&](const ir::Expr& node) { reads |= node.kind() == ir::ExprKind::kLoad; });
  return reads;
}

bool laid_out(const ir::TensorNode& t, const std::vector<int>& order) {
  std::vector<int64_t> permuted;
  for (int k : order) permuted.push_back(t.shape[k]);
  const std::vector<int64_t> wanted = ir::contiguous_strides(permuted);
  for (size_t k = 0; k < order.size(); ++k) {
    if (permuted[k] != 1 && t.strides[order[k]] != wanted[k]) return false;
  }
  return true;
}

std::pair<ir::Tensor, ir::Kernel> permuted_copy(ir::Program& program, const ir::Tensor& x,
                                                const std::vector<int>& order,
                                                const std::string& suffix,
                                                const std::string& var_prefix) {
  std::vector<int64_t> shape;
  for (int k : order) shape.push_back(x->shape[k]);
  ir::Tensor copy = ir::make_tensor(unique_tensor_name(program, x->name + suffix), x->dtype,
                                    shape, ir::TensorRole::kTemporary);
  program.temporaries.push_back(copy);
  std::vector<ir::Var> vars;
  for (size_t k = 0; k < order.size(); ++k) vars.emplace_back(var_prefix + std::to_string(k));
  std::vector<ir::Expr> source(order.size());
  for (size_t k = 0; k < order.size(); ++k) source[order[k]] = vars[k];
  ir::Kernel kernel{copy->name,
                    {ir::compute(copy, ir::over(copy, vars), ir::load(x, std::move(source)))},
                    {}};
  return {copy, std::move(kernel)};
}

}  // namespace adjoint::compiler
