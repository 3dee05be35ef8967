// KernelEmitter, block reductions (block_reductions.h): the body of a kernel whose grid has
// block_tokens > 0. Shared arrays for the staged token and weight parts, a grid-stride loop over
// token tiles, chunks staged cooperatively between two __syncthreads, each thread's Mt x Mk
// accumulators summed in iteration order, and the stores of the stage's value per point.
#include <functional>

#include "compiler/block_reductions.h"
#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"

namespace adjoint::compiler {

using ir::Expr;

void KernelEmitter::emit_block_reduction_body() {
  ir::Kernel unset = kernel_;
  unset.grid.is_set = false;
  const BlockReductionOptions any = any_block_shape();
  const BlockReductionShape shape = analyze_block_reduction(unset, any);
  if (!shape.why_not.empty())
    throw Error("emit_cuda: kernel '" + kernel_.name + "' has no block shape: " + shape.why_not,
                ErrorCode::kInternal);
  const ir::Stage& stage = kernel_.stages.front();
  const ir::GridConfig& g = kernel_.grid;
  const ir::ReduceNode& r = *shape.reduce;
  const std::vector<int64_t> extents = domain_extents(kernel_);
  const int64_t T = g.block_tokens, mt = g.block_token_points, mk = g.block_output_points,
                C = g.block_chunk, K = shape.outputs, lanes = T / mt, stride = C + 1,
                R = shape.trips, N = shape.tokens, tiles = (N + T - 1) / T;
  const std::string& it = index_type_;
  const std::string acc_type(cuda_value_type(r.dtype));
  const std::string threads = std::to_string(g.block_size);
  std::vector<std::string> names;
  for (const ir::Axis& axis : stage.domain) names.push_back(names_.fresh(axis.var.name_hint()));
  begin_stage(stage, names);
  for (const ir::Axis& axis : r.axes) bounds_.bind_reduce_axis(axis);
  std::vector<std::string> reduce_names;
  for (const ir::Axis& axis : r.axes) {
    reduce_names.push_back(names_.fresh(axis.var.name_hint()));
    var_names_[axis.var.get()] = reduce_names.back();
  }
  // Every variable is declared where it is decoded, inside the block that uses it.
  auto at_current_level = [&](const ir::VarNode* v) { var_levels_[v] = scopes_.size() - 1; };
  auto decode_reduction = [&](const std::string& flat) {
    int64_t divisor = 1;
    for (size_t a = r.axes.size(); a-- > 0;) {
      const int64_t extent = r.axes[a].extent.as<ir::IntConstNode>()->value;
      std::string v = divisor == 1 ? flat : "(" + flat + ") / " + std::to_string(divisor);
      if (a > 0) v = "(" + v + ") % " + std::to_string(extent);
      out_->line("const " + it + " " + reduce_names[a] + " = " + v + ";");
      at_current_level(r.axes[a].var.get());
      divisor *= extent;
    }
  };
  auto decode_tokens = [&](const std::string& flat) {
    int64_t divisor = 1;
    for (size_t i = shape.token_axes.size(); i-- > 0;) {
      const int axis = shape.token_axes[i];
      std::string v = divisor == 1 ? flat : "(" + flat + ") / " + std::to_string(divisor);
      if (i > 0) v = "(" + v + ") % " + std::to_string(extents[axis]);
      out_->line("const " + it + " " + names[axis] + " = " + v + ";");
      at_current_level(stage.domain[axis].var.get());
      divisor *= extents[axis];
    }
  };
  auto push_scope = [&]() { scopes_.push_back(Scope{{}, out_, false}); };
  auto pop_scope = [&]() { scopes_.pop_back(); };

  out_->line("// Block reduction: a block owns a tile of " + std::to_string(T) + " tokens and all " +
             std::to_string(K) + " points of " + stage.domain[shape.output_axis].var.name_hint() +
             "; chunks of " + std::to_string(C) + " of the " + std::to_string(R) +
             " iterations are staged in shared memory and each thread sums " + std::to_string(mt) +
             " x " + std::to_string(mk) + " points in iteration order.");
  std::vector<std::string> token_arrays, weight_arrays;
  for (const Expr& e : shape.token_parts) {
    token_arrays.push_back(names_.fresh("token_part"));
    out_->line("__shared__ " + std::string(cuda_value_type(e.dtype())) + " " + token_arrays.back() +
               "[" + std::to_string(T * stride) + "];");
  }
  for (const Expr& e : shape.weight_parts) {
    weight_arrays.push_back(names_.fresh("weight_part"));
    out_->line("__shared__ " + std::string(cuda_value_type(e.dtype())) + " " +
               weight_arrays.back() + "[" + std::to_string(K * stride) + "];");
  }
  const std::string lane = names_.fresh("token_lane"), group = names_.fresh("output_group");
  out_->line("const int " + lane + " = threadIdx.x % " + std::to_string(lanes) + ";");
  out_->line("const int " + group + " = threadIdx.x / " + std::to_string(lanes) + ";");
  for (size_t i = 0; i < shape.block_axes.size(); ++i) {
    out_->line("const " + it + " " + names[shape.block_axes[i]] + " = blockIdx." + "yz"[i] + ";");
    at_current_level(stage.domain[shape.block_axes[i]].var.get());
  }
  const std::string tile = names_.fresh("tile"), acc = names_.fresh("acc");
  CodeWriter::Block tile_loop = out_->block("for (" + it + " " + tile + " = blockIdx.x; " + tile +
                                            " < " + std::to_string(tiles) + "; " + tile +
                                            " += gridDim.x) {");
  out_->line(acc_type + " " + acc + "[" + std::to_string(mt) + "][" + std::to_string(mk) + "];");
  out_->line("#pragma unroll");
  {
    CodeWriter::Block m_loop = out_->block("for (int m = 0; m < " + std::to_string(mt) + "; ++m) {");
    out_->line("#pragma unroll");
    out_->line("for (int j = 0; j < " + std::to_string(mk) + "; ++j) " + acc + "[m][j] = " +
               reduce_init(r) + ";");
  }
  const std::string chunk = names_.fresh("chunk");
  {
    CodeWriter::Block chunk_loop = out_->block("for (" + it + " " + chunk + " = 0; " + chunk + " < " +
                                               std::to_string(R) + "; " + chunk + " += " +
                                               std::to_string(C) + ") {");
    out_->line("__syncthreads();  // every thread is done with the previous chunk");
    const std::string e = names_.fresh("e"), t = names_.fresh("t"), c = names_.fresh("c");
    {
      CodeWriter::Block stage_loop = out_->block(
          "for (int " + e + " = threadIdx.x; " + e + " < " + std::to_string(T * C) + "; " + e +
          " += " + threads + ") {");
      out_->line("const int " + t + " = " + e + " / " + std::to_string(C) + ";");
      out_->line("const int " + c + " = " + e + " % " + std::to_string(C) + ";");
      const std::string token = names_.fresh("token");
      out_->line("const " + it + " " + token + " = " + tile + " * " + std::to_string(T) + " + " + t + ";");
      CodeWriter::Block guard = out_->block("if (" + token + " < " + std::to_string(N) + ") {");
      push_scope();
      decode_tokens(token);
      decode_reduction(chunk + " + " + c);
      for (size_t p = 0; p < shape.token_parts.size(); ++p)
        out_->line(token_arrays[p] + "[" + t + " * " + std::to_string(stride) + " + " + c + "] = " +
                   strip_parens(emit_expr(shape.token_parts[p])) + ";");
      pop_scope();
    }
    {
      CodeWriter::Block stage_loop = out_->block(
          "for (int " + e + " = threadIdx.x; " + e + " < " + std::to_string(K * C) + "; " + e +
          " += " + threads + ") {");
      const std::string k = names[shape.output_axis];
      out_->line("const " + it + " " + k + " = " + e + " / " + std::to_string(C) + ";");
      out_->line("const int " + c + " = " + e + " % " + std::to_string(C) + ";");
      push_scope();
      at_current_level(stage.domain[shape.output_axis].var.get());
      decode_reduction(chunk + " + " + c);
      for (size_t p = 0; p < shape.weight_parts.size(); ++p)
        out_->line(weight_arrays[p] + "[" + k + " * " + std::to_string(stride) + " + " + c + "] = " +
                   strip_parens(emit_expr(shape.weight_parts[p])) + ";");
      pop_scope();
    }
    out_->line("__syncthreads();  // the chunk is staged");
    out_->line("#pragma unroll 4");
    CodeWriter::Block c_loop = out_->block("for (int " + c + " = 0; " + c + " < " +
                                           std::to_string(C) + "; ++" + c + ") {");
    auto value_name = [&](const std::string& array, int64_t index) {
      return array + "_" + std::to_string(index);
    };
    for (int64_t m = 0; m < mt; ++m) {
      for (size_t p = 0; p < shape.token_parts.size(); ++p)
        out_->line("const " + std::string(cuda_value_type(shape.token_parts[p].dtype())) + " " +
                   value_name(token_arrays[p], m) + " = " + token_arrays[p] + "[(" +
                   std::to_string(m * lanes) + " + " + lane + ") * " + std::to_string(stride) +
                   " + " + c + "];");
    }
    for (int64_t j = 0; j < mk; ++j) {
      for (size_t p = 0; p < shape.weight_parts.size(); ++p)
        out_->line("const " + std::string(cuda_value_type(shape.weight_parts[p].dtype())) + " " +
                   value_name(weight_arrays[p], j) + " = " + weight_arrays[p] + "[(" + group +
                   " * " + std::to_string(mk) + " + " + std::to_string(j) + ") * " +
                   std::to_string(stride) + " + " + c + "];");
    }
    for (int64_t m = 0; m < mt; ++m) {
      for (int64_t j = 0; j < mk; ++j) {
        // The body with each staged part replaced by its value: the arithmetic of the IR.
        std::function<std::string(const Expr&)> combine = [&](const Expr& x) -> std::string {
          for (size_t p = 0; p < shape.token_parts.size(); ++p)
            if (shape.token_parts[p].get() == x.get()) return value_name(token_arrays[p], m);
          for (size_t p = 0; p < shape.weight_parts.size(); ++p)
            if (shape.weight_parts[p].get() == x.get()) return value_name(weight_arrays[p], j);
          if (auto* b = x.as<ir::BinaryNode>())
            return "(" + combine(b->a) + " " + std::string(ir::binary_op_name(b->op)) + " " +
                   combine(b->b) + ")";
          return visit(x);  // a float constant
        };
        const std::string point = acc + "[" + std::to_string(m) + "][" + std::to_string(j) + "]";
        if (const ir::BinaryNode* product = ir::fused_product(r)) {  // fma_sum: one rounding
          uses_fma_ = true;
          out_->line(point + " = " + (r.dtype == ir::DType::kF64 ? "fma(" : "fmaf(") +
                     strip_parens(combine(product->a)) + ", " + strip_parens(combine(product->b)) +
                     ", " + point + ");");
        } else {
          out_->line(point + " += " + strip_parens(combine(r.body)) + ";");
        }
      }
    }
  }
  // The stores: each thread's points, the stage's value with the reduction replaced by its sum.
  for (int64_t m = 0; m < mt; ++m) {
    const std::string token = names_.fresh("token");
    out_->line("const " + it + " " + token + " = " + tile + " * " + std::to_string(T) + " + " +
               std::to_string(m * lanes) + " + " + lane + ";");
    CodeWriter::Block guard = out_->block("if (" + token + " < " + std::to_string(N) + ") {");
    push_scope();
    decode_tokens(token);
    for (int64_t j = 0; j < mk; ++j) {
      CodeWriter::Block point = out_->block("{");
      push_scope();
      out_->line("const " + it + " " + names[shape.output_axis] + " = " + group + " * " +
                 std::to_string(mk) + " + " + std::to_string(j) + ";");
      at_current_level(stage.domain[shape.output_axis].var.get());
      block_accumulators_[&r] = acc + "[" + std::to_string(m) + "][" + std::to_string(j) + "]";
      out_->line(element(stage.target, names) + " = " + strip_parens(stored_value(stage)) + ";");
      pop_scope();
    }
    pop_scope();
  }
  block_accumulators_.clear();
  scopes_.clear();
}

}  // namespace adjoint::compiler
