// KernelEmitter, block reductions (block_reductions.h): the body of a kernel whose grid has
// block_tokens > 0. Shared arrays for the staged token and weight parts, a grid-stride loop over
// token tiles, chunks staged cooperatively between two __syncthreads, each thread's Mt x Mk
// accumulators summed in iteration order, and the stores of the stage's value per point.
// With a staging width W > 1 each staging thread loads W consecutive iterations of a row at
// once (vector accesses), in a loop unrolled over its rows (emit_wide_staging).
#include <functional>
#include <optional>
#include <unordered_map>

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
                C = g.block_chunk, K = shape.outputs, lanes = T / mt,
                R = shape.trips, N = shape.tokens, tiles = (N + T - 1) / T,
                W = g.block_stage_width;
  const bool v4 = g.block_shared_vectors == 4;
  const BlockSharedLayout layout = block_shared_layout(g, K);
  const int64_t stride = layout.token_stride;
  // A weight part's element (output k, iteration c) in its shared array.
  auto weight_at = [&](const std::string& k, const std::string& c) {
    return v4 ? "(" + c + ") * " + std::to_string(K) + " + " + k
              : k + " * " + std::to_string(layout.weight_row) + " + " + c;
  };
  const std::string aligned_shared = v4 ? "alignas(16) __shared__ " : "__shared__ ";
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
    out_->line(aligned_shared + std::string(cuda_value_type(e.dtype())) + " " +
               token_arrays.back() + "[" + std::to_string(T * stride) + "];");
  }
  for (const Expr& e : shape.weight_parts) {
    weight_arrays.push_back(names_.fresh("weight_part"));
    out_->line(aligned_shared + std::string(cuda_value_type(e.dtype())) + " " +
               weight_arrays.back() + "[" + std::to_string(v4 ? C * K : K * (C + 1)) + "];");
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
    auto scalar_staging = [&]() {
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
        out_->line(weight_arrays[p] + "[" + weight_at(k, c) + "] = " +
                   strip_parens(emit_expr(shape.weight_parts[p])) + ";");
      pop_scope();
    }
    };
    if (W > 1) {
      // Wide staging takes vector loads without a check per load: it runs when every base
      // pointer it spans is aligned (the same for every thread and chunk); else the scalar one.
      std::vector<std::pair<std::string, int>> claims;
      CodeWriter wide(out_->indent() + 1);
      CodeWriter* saved = out_;
      out_ = &wide;
      span_alignment_claims_ = &claims;
      emit_wide_staging(shape, names, tile, chunk, token_arrays, weight_arrays);
      span_alignment_claims_ = nullptr;
      out_ = saved;
      std::string aligned;
      for (const auto& [param, bytes] : claims) {
        const std::string check = "adjoint::is_aligned<" + std::to_string(bytes) + ">(" + param + ")";
        if (aligned.find(check) == std::string::npos)
          aligned += (aligned.empty() ? "" : " && ") + check;
      }
      if (aligned.empty()) {
        CodeWriter::Block all = out_->block("{");
        out_->append(wide.text());
      } else {
        CodeWriter::Block branch = out_->block("if (" + aligned + ") {");
        out_->append(wide.text());
        branch.split("} else {  // a misaligned base: one element per thread");
        scalar_staging();
      }
    } else {
      scalar_staging();
    }
    out_->line("__syncthreads();  // the chunk is staged");
    auto value_name = [&](const std::string& array, int64_t index) {
      return array + "_" + std::to_string(index);
    };
    // The multiply-adds of one iteration, from the values named by value_name.
    auto emit_updates = [&]() {
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
    };
    if (v4) {
      // Four iterations per step: each token row's 4 values are one 16-byte read, each weight
      // row's 4 consecutive outputs another; the iterations still run in order c, c + 1, ...
      out_->line("#pragma unroll 2");
      CodeWriter::Block c_loop = out_->block("for (int " + c + " = 0; " + c + " < " +
                                             std::to_string(C) + "; " + c + " += 4) {");
      const char* component[4] = {"x", "y", "z", "w"};
      for (int64_t m = 0; m < mt; ++m) {
        for (size_t p = 0; p < shape.token_parts.size(); ++p)
          out_->line("const uint4 " + value_name(token_arrays[p], m) + "_4 = *reinterpret_cast<const uint4*>(&" +
                     token_arrays[p] + "[(" + std::to_string(m * lanes) + " + " + lane + ") * " +
                     std::to_string(stride) + " + " + c + "]);");
      }
      for (int step = 0; step < 4; ++step) {
        CodeWriter::Block iteration = out_->block("{  // iteration " + c + " + " + std::to_string(step));
        for (int64_t q = 0; q < mk / 4; ++q) {
          for (size_t p = 0; p < shape.weight_parts.size(); ++p)
            out_->line("const uint4 " + value_name(weight_arrays[p], q) + "_4 = *reinterpret_cast<const uint4*>(&" +
                       weight_arrays[p] + "[" +
                       weight_at(group + " * " + std::to_string(mk) + " + " + std::to_string(4 * q),
                                 c + " + " + std::to_string(step)) + "]);");
        }
        for (int64_t m = 0; m < mt; ++m) {
          for (size_t p = 0; p < shape.token_parts.size(); ++p)
            out_->line("const float " + value_name(token_arrays[p], m) + " = __uint_as_float(" +
                       value_name(token_arrays[p], m) + "_4." + component[step] + ");");
        }
        for (int64_t j = 0; j < mk; ++j) {
          for (size_t p = 0; p < shape.weight_parts.size(); ++p)
            out_->line("const float " + value_name(weight_arrays[p], j) + " = __uint_as_float(" +
                       value_name(weight_arrays[p], j / 4) + "_4." + component[j % 4] + ");");
        }
        emit_updates();
      }
    } else {
      out_->line("#pragma unroll 4");
      CodeWriter::Block c_loop = out_->block("for (int " + c + " = 0; " + c + " < " +
                                             std::to_string(C) + "; ++" + c + ") {");
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
                     value_name(weight_arrays[p], j) + " = " + weight_arrays[p] + "[" +
                     weight_at("(" + group + " * " + std::to_string(mk) + " + " +
                                   std::to_string(j) + ")", c) + "];");
      }
      emit_updates();
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

void KernelEmitter::emit_wide_staging(const BlockReductionShape& shape,
                                      const std::vector<std::string>& names,
                                      const std::string& tile, const std::string& chunk,
                                      const std::vector<std::string>& token_arrays,
                                      const std::vector<std::string>& weight_arrays) {
  const ir::Stage& stage = kernel_.stages.front();
  const ir::GridConfig& g = kernel_.grid;
  const ir::ReduceNode& r = *shape.reduce;
  const std::vector<int64_t> extents = domain_extents(kernel_);
  const int64_t T = g.block_tokens, C = g.block_chunk, K = shape.outputs, W = g.block_stage_width,
                N = shape.tokens, per_row = C / W, threads = g.block_size;
  const std::string& it = index_type_;
  const ir::VarNode* inner = r.axes.back().var.get();
  const int64_t inner_extent = r.axes.back().extent.as<ir::IntConstNode>()->value;
  auto at_current_level = [&](const ir::VarNode* v) { var_levels_[v] = scopes_.size() - 1; };
  // Stages `rows` rows (the tile's tokens, or the K outputs) of the chunk's C iterations.
  auto stage_rows = [&](int64_t rows, bool tokens) {
    const int64_t groups = rows * per_row, trips = (groups + threads - 1) / threads;
    const std::string q = names_.fresh("q"), e = names_.fresh("e"),
                      row = names_.fresh(tokens ? "t" : "o"), c = names_.fresh("c"),
                      v = names_.fresh("v");
    out_->line("#pragma unroll");
    CodeWriter::Block loop = out_->block("for (int " + q + " = 0; " + q + " < " +
                                         std::to_string(trips) + "; ++" + q + ") {");
    out_->line("const int " + e + " = threadIdx.x + " + q + " * " + std::to_string(threads) + ";");
    // Only the last trip can run past the rows (the test folds away once unrolled).
    std::optional<CodeWriter::Block> in_range;
    if (groups % threads != 0)
      in_range.emplace(out_->block("if (" + q + " < " + std::to_string(groups / threads) +
                                   " || " + e + " < " + std::to_string(groups) + ") {"));
    out_->line("const int " + row + " = " + e + " / " + std::to_string(per_row) + ";");
    out_->line("const int " + c + " = " + e + " % " + std::to_string(per_row) + " * " +
               std::to_string(W) + ";");
    std::optional<CodeWriter::Block> token_guard;
    scopes_.push_back(Scope{{}, out_, false});
    if (tokens) {
      const std::string token = names_.fresh("token");
      out_->line("const " + it + " " + token + " = " + tile + " * " + std::to_string(T) + " + " +
                 row + ";");
      if (N % T != 0)  // only a last, partial tile has tokens past N
        token_guard.emplace(out_->block("if (" + token + " < " + std::to_string(N) + ") {"));
      int64_t divisor = 1;
      for (size_t i = shape.token_axes.size(); i-- > 0;) {
        const int axis = shape.token_axes[i];
        std::string value = divisor == 1 ? token : "(" + token + ") / " + std::to_string(divisor);
        if (i > 0) value = "(" + value + ") % " + std::to_string(extents[axis]);
        out_->line("const " + it + " " + names[axis] + " = " + value + ";");
        at_current_level(stage.domain[axis].var.get());
        divisor *= extents[axis];
      }
    } else {
      out_->line("const " + it + " " + names[shape.output_axis] + " = " + row + ";");
      at_current_level(stage.domain[shape.output_axis].var.get());
    }
    // The W iterations chunk + c + v (v < W) share every reduced axis but the innermost, which
    // runs from `base` (W divides C and the innermost extent).
    const std::string flat = chunk + " + " + c;
    int64_t divisor = 1;
    std::string base;
    for (size_t a = r.axes.size(); a-- > 0;) {
      const int64_t extent = r.axes[a].extent.as<ir::IntConstNode>()->value;
      std::string value = divisor == 1 ? flat : "(" + flat + ") / " + std::to_string(divisor);
      if (a > 0) value = "(" + value + ") % " + std::to_string(extent);
      const std::string name = var_names_.at(r.axes[a].var.get());
      if (a + 1 == r.axes.size()) {
        base = names_.fresh(name + "_base");
        out_->line("const " + it + " " + base + " = " + value + ";");
      } else {
        out_->line("const " + it + " " + name + " = " + value + ";");
        at_current_level(r.axes[a].var.get());
      }
      divisor *= extent;
    }
    const std::vector<Expr>& parts = tokens ? shape.token_parts : shape.weight_parts;
    const std::vector<std::string>& arrays = tokens ? token_arrays : weight_arrays;
    const std::string inner_name = var_names_.at(inner);
    var_names_.erase(inner);  // only as base + v, inside the element loop
    std::unordered_map<const ir::VarNode*, Lane> lanes;
    lanes[inner] = Lane{base, v, W, W, 0, inner_extent - 1};
    for (const Expr& part : parts) emit_spans(part, lanes);
    referenced_.insert(base);
    const BlockSharedLayout layout = block_shared_layout(g, K);
    const std::string at =
        tokens || g.block_shared_vectors != 4
            ? row + " * " + std::to_string(tokens ? layout.token_stride : layout.weight_row) +
                  " + " + c + " + " + v
            : "(" + c + " + " + v + ") * " + std::to_string(K) + " + " + row;
    emit_scoped_loop("for (int " + v + " = 0; " + v + " < " + std::to_string(W) + "; ++" + v + ") {",
                     inner, inner_name, base, v, [&]() {
                       for (size_t p = 0; p < parts.size(); ++p)
                         out_->line(arrays[p] + "[" + at + "] = " +
                                    strip_parens(emit_expr(parts[p])) + ";");
                     });
    var_names_[inner] = inner_name;
    spans_.clear();
    scopes_.pop_back();
  };
  stage_rows(T, true);
  stage_rows(K, false);
}

}  // namespace adjoint::compiler
