// Small helpers over whole programs that several passes and the emitter share: rewriting every
// expression of a stage, telling whether a pass changed anything (pointer equality, as the
// ExprMutator guarantees for unchanged subtrees), and which tensors a kernel touches.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <unordered_set>
#include <vector>

#include "ir/program.h"

namespace adjoint::compiler {

/// Rewrites every expression of a stage (domain starts and extents, indices, value, condition)
/// with `rewrite`; undefined expressions (a missing condition) are left alone.
ir::Stage map_stage(const ir::Stage& stage,
                    const std::function<ir::Expr(const ir::Expr&)>& rewrite);

/// True when `a` and `b` have the same tensors, kernels, stages and grid configurations, with
/// pointer-equal expressions: what a pass returns when it changed nothing.
bool same_program(const ir::Program& a, const ir::Program& b);

/// Calls fn once on every distinct node of `e` (children before parents). Unlike
/// ir::visit_post_order it does not revisit shared subtrees, so it stays linear on DAGs.
void for_each_node(const ir::Expr& e, const std::function<void(const ir::Expr&)>& fn);

/// `e` with every occurrence of `var` replaced by `value` (unchanged subtrees shared).
ir::Expr substitute(const ir::Expr& e, const ir::VarNode* var, const ir::Expr& value);

/// True when `var` occurs anywhere in `e` (reduce bodies and axis bounds included).
bool depends_on(const ir::Expr& e, const ir::VarNode* var);

/// True when `e` loads from memory anywhere.
bool reads_memory(const ir::Expr& e);

/// True when `t`'s strides already make `order` its row-major layout (component k of that
/// layout is t's component order[k]; extent-1 components aside).
bool laid_out(const ir::TensorNode& t, const std::vector<int>& order);

/// Every expression of a stage, in the order map_stage visits them.
std::vector<ir::Expr> stage_expressions(const ir::Stage& stage);

/// Tensors a kernel reads (loads anywhere in its stages).
std::vector<ir::Tensor> tensors_read(const ir::Kernel& kernel);
/// Tensors a kernel writes (stage targets).
std::vector<ir::Tensor> tensors_written(const ir::Kernel& kernel);
/// Tensors a kernel reads or writes, in the program's declaration order (inputs, outputs,
/// temporaries): the kernel's parameter list.
std::vector<ir::Tensor> kernel_tensors(const ir::Program& program, const ir::Kernel& kernel);

/// The constant extents of a kernel's domain (its first stage's); empty for a kernel without
/// stages. Throws adjoint::Error if an extent is not a constant.
std::vector<int64_t> domain_extents(const ir::Kernel& kernel);

/// A tensor name not yet used in `program`: `base`, else base_1, base_2, ...
std::string unique_tensor_name(const ir::Program& program, const std::string& base);

/// A new temporary of `program` (named `x`'s name + `suffix`, made unique) holding `x` with its
/// components permuted, component k being x's component order[k], and returns it with the
/// kernel that fills it (named after it; its domain variables are `var_prefix`0, 1, ...). The
/// caller places the kernel.
std::pair<ir::Tensor, ir::Kernel> permuted_copy(ir::Program& program, const ir::Tensor& x,
                                                const std::vector<int>& order,
                                                const std::string& suffix,
                                                const std::string& var_prefix);

/// Reductions of `value` not nested in another reduction, each once, in the order first met
/// (a warp kernel makes exactly these cooperative; thread tiles share their loops).
std::vector<const ir::ReduceNode*> outermost_reductions(const ir::Expr& value);

/// The iterations of `r` per point: the product of its axes' constant extents (an extent that
/// is not a constant counts 1, an empty one 1), saturated at 2^40 so that it never overflows.
int64_t constant_trips(const ir::ReduceNode& r);

/// The reductions of `value` evaluated whenever it is (not inside a select branch or the right
/// operand of && and ||, not inside another reduction), each once, outermost first.
std::vector<const ir::ReduceNode*> unconditional_reductions(const ir::Expr& value);

/// The loads of `value` evaluated whenever it is (as unconditional_reductions, not inside any
/// reduction): their indices are in bounds wherever `value` is evaluated (ir/expr.h).
std::unordered_set<const ir::LoadNode*> unconditional_loads(const ir::Expr& value);

}  // namespace adjoint::compiler
