// KernelEmitter, statements: the kernel body. Grid decoding (thread, block and linear axes, a
// grid-stride loop when the grid cannot cover every point), serial loops over points, and the
// stages (a compute stage stores its value, a scatter stage adds atomically).
#include <functional>

#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"
#include "ir/printer.h"

namespace adjoint::compiler {

using ir::BinaryOp;
using ir::DType;
using ir::Expr;
using ir::UnaryOp;

void KernelEmitter::emit_body(const GridMapping& m, const std::vector<int64_t>& extents) {
  const ir::Stage& first = kernel_.stages.front();
  std::vector<std::string> names;
  for (const ir::Axis& axis : first.domain) names.push_back(names_.fresh(axis.var.name_hint()));
  const std::string& type = index_type_;
  const std::string points = std::to_string(m.thread_points);
  // Declarations wait until the code using them is written: an axis the code never names (e.g.
  // a size-1 dimension, which drops out of offsets) is not declared.
  std::vector<std::pair<std::string, std::string>> pending;  // (name, value)
  auto declare_axis = [&](int axis, const std::string& value) {
    pending.emplace_back(names[axis], value);
  };
  auto emit_declared_points = [&]() {
    CodeWriter code(out_->indent());
    CodeWriter* saved = out_;
    out_ = &code;
    referenced_.clear();
    emit_points(m, extents, names);
    out_ = saved;
    for (const auto& [name, value] : pending) {
      if (referenced_.count(name))
        out_->line("const " + type + " " + name + " = " + value + ";");
    }
    pending.clear();
    out_->append(code.text());
  };
  // Thread axes, row-major over `flat`.
  auto decode_threads = [&](const std::string& flat) {
    int64_t divisor = 1;
    for (size_t i = m.thread_axes.size(); i-- > 0;) {
      int axis = m.thread_axes[i];
      std::string v = divisor == 1 ? flat : "(" + flat + ") / " + std::to_string(divisor);
      declare_axis(axis, i == 0 ? v : v + " % " + std::to_string(extents[axis]));
      divisor *= extents[axis];
    }
  };
  auto decode_blocks = [&]() {
    for (size_t i = 0; i < m.block_axes.size(); ++i) {
      declare_axis(m.block_axes[i], std::string("blockIdx.") + "xyz"[m.first_block_dimension + i]);
    }
  };
  block_uniform_axes_.clear();
  if (m.linear_axes.empty()) {
    if (m.thread_points < kernel_.grid.block_size) {
      out_->line("if (threadIdx.x >= " + points + ") return;");
    }
    decode_threads("(" + type + ")threadIdx.x");
    decode_blocks();
    emit_declared_points();
    return;
  }
  const int64_t vector_width = kernel_.grid.vector_width;
  const int64_t tile_points = kernel_.grid.tile_points;
  const std::string lanes = std::to_string(m.lanes);
  const std::string count = std::to_string(m.linear_points);
  const int64_t per_index = m.thread_points * m.reduction_lanes;
  std::string lane =
      per_index == 1 ? "threadIdx.x" : "threadIdx.x / " + std::to_string(per_index);
  // Tile rows (GridConfig::tile_block_rows, tile_blocks.h): blockIdx.x decodes the axes with
  // the tile axis in tiles / Y and the innermost in groups / X; the thread's row and column
  // complete them. Every block is full (check_grid_coverage): no bound, no grid-stride loop.
  const int64_t rows = outer_count_.empty() ? kernel_.grid.tile_block_rows : 1;
  if (rows > 1) {
    const int64_t columns = kernel_.grid.block_size / rows;
    const std::string row = names_.fresh("tile_row"), column = names_.fresh("column");
    out_->line("// the block's " + std::to_string(kernel_.grid.block_size) + " threads: " +
               std::to_string(rows) + " rows (tiles) x " + std::to_string(columns) +
               " columns (vector groups)");
    out_->line("const int " + row + " = threadIdx.x / " + std::to_string(columns) + ";");
    out_->line("const int " + column + " = threadIdx.x % " + std::to_string(columns) + ";");
    std::vector<std::string> decoded(m.linear_axes.size());
    int64_t divisor = 1;
    const std::string b = "(" + type + ")blockIdx.x";
    for (size_t i = m.linear_axes.size(); i-- > 0;) {
      const int axis = m.linear_axes[i];
      const bool inner = i + 1 == m.linear_axes.size();
      const bool tiled = axis == kernel_.grid.tile_axis;
      int64_t extent = extents[axis] / (inner ? vector_width : 1);
      if (tiled) extent = (extent + tile_points - 1) / tile_points;
      const int64_t per_block = inner ? columns : tiled ? rows : 1;
      extent /= per_block;
      std::string v = divisor == 1 ? b : b + " / " + std::to_string(divisor);
      if (i != 0 && extent == 1) v = "0";
      else if (i != 0) v += " % " + std::to_string(extent);
      if (per_block > 1)
        v = v == "0" ? (inner ? column : row)
                     : "(" + v + " * " + std::to_string(per_block) + " + " +
                           (inner ? column : row) + ")";
      decoded[i] = v;
      divisor *= extent;
    }
    declare_linear_axes(m, extents, names, decoded, pending);
    emit_declared_points();
    return;
  }
  // A lane scan (EmitOptions::lane_scan) wants every warp on 32 consecutive points from a
  // multiple of 32, all of them in the domain or none (a whole warp returns or loops on).
  lane_scan_point_ = nullptr;
  lane_scan_lane_.clear();
  if (options_.lane_scan && outer_count_.empty() && program_.sizes.empty() &&
      kernel_.stages.size() == 1 && first.domain.size() == 1 && m.linear_axes.size() == 1 &&
      m.thread_axes.empty() && m.block_axes.empty() && m.serial_axes.empty() &&
      m.reduction_lanes == 1 && m.thread_points == 1 && vector_width == 1 && tile_points <= 1 &&
      m.lanes % 32 == 0 && extents[m.linear_axes[0]] % 32 == 0) {
    lane_scan_point_ = first.domain[0].var.get();
    lane_scan_extent_ = extents[m.linear_axes[0]];
  }
  std::string linear = names_.fresh("linear");
  std::string first_index = "(" + type + ")blockIdx.x * " + lanes + " + " + lane;
  // One linear index per thread when the grid covers them all (the usual case: at most
  // kMaxLinearBlocks blocks); a grid-stride loop otherwise.
  std::optional<CodeWriter::Block> loop;
  if (!outer_count_.empty()) {  // the runtime launches a thread per linear index
    out_->line("const " + type + " " + linear + " = " + first_index + ";");
    out_->line("if (" + linear + " >= " + outer_count_ + ") return;");
  } else if (int64_t{launch_.grid[0]} * m.lanes >= m.linear_points) {
    out_->line("const " + type + " " + linear + " = " + first_index + ";");
    out_->line("if (" + linear + " >= " + count + ") return;");
  } else {
    loop.emplace(out_->block("for (" + type + " " + linear + " = " + first_index + "; " + linear +
                             " < " + count + "; " + linear + " += (" + type + ")gridDim.x * " +
                             lanes + ") {"));
  }
  // Linear axes: innermost fastest; the innermost counts groups of `vector_width` points.
  std::vector<std::string> decoded(m.linear_axes.size());
  // Whole blocks: every block's threads pass the bound together (static extents only).
  const bool whole_blocks = outer_count_.empty() && program_.sizes.empty() && m.lanes > 0 &&
                            m.linear_points % m.lanes == 0;
  if (whole_blocks) {
    block_uniform_axes_.assign(extents.size(), false);
    for (int axis : m.block_axes) block_uniform_axes_[axis] = true;
    for (int axis : m.serial_axes) block_uniform_axes_[axis] = true;
  }
  int64_t divisor = 1;
  // A token pair lowered at batch 1 (outer_token_axis_): the axes in front of the token axis
  // are 0 and the token axis is outermost.
  size_t outermost = 0;
  while (outer_token_axis_ >= 0 && m.linear_axes[outermost] != outer_token_axis_) ++outermost;
  for (size_t i = m.linear_axes.size(); i-- > 0;) {
    int axis = m.linear_axes[i];
    int64_t extent = extents[axis] / (i + 1 == m.linear_axes.size() ? vector_width : 1);
    if (tile_points > 1 && axis == kernel_.grid.tile_axis)  // its tiles, the last maybe partial
      extent = (extent + tile_points - 1) / tile_points;
    std::string v = divisor == 1 ? linear : linear + " / " + std::to_string(divisor);
    decoded[i] = i < outermost || (extent == 1 && i != outermost)
                     ? "0"
                     : (i == outermost ? v : v + " % " + std::to_string(extent));
    // A block's linear indices are [b L, (b + 1) L): linear / D is one value if L divides D.
    if (whole_blocks) block_uniform_axes_[axis] = decoded[i] == "0" || divisor % m.lanes == 0;
    divisor *= extent;
  }
  if (!m.thread_axes.empty()) decode_threads("threadIdx.x % " + points);
  if (m.reduction_lanes > 1) {
    lane_ = names_.fresh("lane");
    out_->line("const int " + lane_ + " = threadIdx.x % " + std::to_string(m.reduction_lanes) +
               (m.reduction_lanes == 32 ? ";  // the warp's lanes share one point"
                                        : ";  // each group of " +
                                              std::to_string(m.reduction_lanes) +
                                              " lanes of a warp shares one point"));
  }
  decode_blocks();
  declare_linear_axes(m, extents, names, decoded, pending);
  emit_declared_points();
}

void KernelEmitter::declare_linear_axes(
    const GridMapping& m, const std::vector<int64_t>& extents,
    const std::vector<std::string>& names, const std::vector<std::string>& decoded,
    std::vector<std::pair<std::string, std::string>>& pending) {
  const int64_t vector_width = kernel_.grid.vector_width;
  const int64_t tile_points = kernel_.grid.tile_points;
  auto declare_axis = [&](int axis, const std::string& value) {
    pending.emplace_back(names[axis], value);
  };
  for (size_t i = 0; i < m.linear_axes.size(); ++i) {
    int axis = m.linear_axes[i];
    if (tile_points > 1 && axis == kernel_.grid.tile_axis) {
      ThreadTile tile;
      tile.axis = axis;
      tile.points = tile_points;
      tile.base = names_.fresh(names[axis] + "_base");
      tile.base_var = ir::Var(tile.base);
      tile.index = names_.fresh("r");
      tile.extent = extents[axis];
      tile.padded = (extents[axis] + tile_points - 1) / tile_points * tile_points;
      var_names_[tile.base_var.get()] = tile.base;
      var_levels_[tile.base_var.get()] = 0;
      bounds_.bind(tile.base_var.get(), ir::Interval{0, tile.padded - tile_points});
      pending.emplace_back(tile.base, decoded[i] + " * " + std::to_string(tile_points));
      tile_ = std::move(tile);
    } else if (i + 1 == m.linear_axes.size() && (vector_width > 1 || tile_points > 1)) {
      VectorGroup group;
      group.axis = axis;
      group.width = vector_width;
      group.extent = extents[axis];
      group.base = names_.fresh(names[axis] + "_base");
      group.base_var = ir::Var(group.base);
      group.element = names_.fresh("e");
      group.offset = names_.fresh("j");
      var_names_[group.base_var.get()] = group.base;
      var_levels_[group.base_var.get()] = 0;
      bounds_.bind(group.base_var.get(), ir::Interval{0, extents[axis] - vector_width});
      pending.emplace_back(group.base, decoded[i] + " * " + std::to_string(vector_width));
      vector_ = std::move(group);
    } else {
      declare_axis(axis, decoded[i]);
    }
  }
}

void KernelEmitter::emit_points(const GridMapping& m, const std::vector<int64_t>& extents,
                                std::vector<std::string> names) {
  std::vector<CodeWriter::Block> loops;
  for (int axis : m.serial_axes) {
    loops.push_back(out_->block("for (" + index_type_ + " " + names[axis] + " = 0; " + names[axis] +
                                " < " + std::to_string(extents[axis]) + "; ++" + names[axis] +
                                ") {"));
  }
  for (const ir::Stage& stage : kernel_.stages) {
    // Lane 0 stored the previous stage's value; the lanes that read it wait for it.
    if (!lane_.empty() && &stage != &kernel_.stages.front()) out_->line("__syncwarp();");
    if (vector_) {
      emit_vector_stage(stage, names);
    } else {
      emit_stage(stage, names);
    }
  }
  while (!loops.empty()) loops.pop_back();
}

/// Binds the stage's domain variables to their names and ranges, counts its subexpressions'
/// uses (for the const temporaries) and opens the stage's outermost scope.
void KernelEmitter::begin_stage(const ir::Stage& stage,
                                const std::vector<std::string>& axis_names) {
  for (size_t j = 0; j < stage.domain.size(); ++j) {
    var_names_[stage.domain[j].var.get()] = axis_names[j];
    var_levels_[stage.domain[j].var.get()] = 0;
  }
  bounds_.bind_domain(stage.domain);
  varying_axes_.clear();
  for (const ir::Axis& axis : stage.domain) {
    auto* extent = axis.extent.as<ir::IntConstNode>();
    if (!extent || extent->value > 1) varying_axes_.push_back(axis.var.get());
  }
  block_uniform_vars_.clear();
  for (size_t j = 0; j < stage.domain.size() && j < block_uniform_axes_.size(); ++j) {
    if (!block_uniform_axes_[j]) continue;
    block_uniform_vars_.insert(stage.domain[j].var.get());
    if (tile_ && tile_->axis == static_cast<int>(j)) block_uniform_vars_.insert(tile_->base_var.get());
  }
  uses_.clear();
  std::function<void(const Expr&)> count = [&](const Expr& e) {
    if (uses_[ids_.id(e)]++ == 0) ir::for_each_child(e, count);
  };
  for (const Expr& e : stage_expressions(stage)) count(e);
  scopes_.assign(1, Scope{{}, out_, false});
}

/// The value a compute stage stores, in the target's storage type.
std::string KernelEmitter::stored_value(const ir::Stage& stage) {
  const ir::Tensor& target = stage.target;
  if (is_half_precision(target->dtype)) {
    // Storing a cast from float rounds once: from_float(x) == from_float(round_to_half(x)).
    auto* cast = stage.value.as<ir::CastNode>();
    const Expr& stored = cast && cast->value.dtype() == DType::kF32 ? cast->value : stage.value;
    return "adjoint::from_float<" + std::string(cuda_storage_type(target->dtype)) + ">(" +
           strip_parens(emit_expr(stored)) + ")";
  }
  return converted(stage.value, std::string(cuda_value_type(target->dtype)));
}

void KernelEmitter::emit_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names) {
  begin_stage(stage, axis_names);
  emit_stage_point(stage, axis_names);
  scopes_.clear();
}

void KernelEmitter::emit_stage_point(const ir::Stage& stage,
                                     const std::vector<std::string>& axis_names) {
  const ir::Tensor& target = stage.target;
  if (stage.kind == ir::StageKind::kCompute) {
    out_->line("// compute " + target->name + "[" + join(axis_names, ", ") + "]");
    const std::string value = strip_parens(stored_value(stage));
    if (!staged_.empty() && target->name == options_.transposed_store->transpose.source) {
      // Transposed store, one point per thread: staged for the block's epilogue.
      const std::string columns = std::to_string(options_.transposed_store->transpose.columns);
      out_->line(staged_ + "[(int)threadIdx.x / " + columns + " * " +
                 std::to_string(options_.transposed_store->transpose.columns + 1) +
                 " + (int)threadIdx.x % " + columns + "] = " + value + ";");
      return;
    }
    out_->line((lane_.empty() ? "" : "if (" + lane_ + " == 0) ") + element(target, axis_names) +
               " = " + value + ";");
  } else {
    const bool store = target->name == options_.store_scatter_target;
    uses_atomics_ |= !store;
    if (!store && ir::is_float(stage.accumulation)) uses_float_atomics_ = true;
    out_->line("// scatter_add into " + target->name +
               (store ? ": distinct elements, stored" : ": atomic, accumulated in " +
                                                           std::string(ir::dtype_name(
                                                               stage.accumulation))));
    std::optional<CodeWriter::Block> guarded;
    if (stage.condition.defined()) {
      guarded.emplace(out_->block("if (" + strip_parens(emit_expr(stage.condition)) + ") {"));
      scopes_.push_back(Scope{{}, out_, false});
    }
    std::vector<std::string> indices = element_indices(target, stage.indices);
    std::string value = converted(stage.value, std::string(cuda_value_type(stage.accumulation)));
    if (store) {
      out_->line(element(target, indices) + " = " + strip_parens(value) + ";");
    } else {
      out_->line("adjoint::atomic_add(&" + element(target, indices) + ", " +
                 strip_parens(value) + ");");
    }
  }
}

}  // namespace adjoint::compiler

namespace adjoint::compiler {

// Transposed store (transposed_store.h). choose_transposed_stores proved the shape of the
// kernel: one compute stage over its target G = [b][p][q] (dense, q innermost) with every axis
// linear in G's order, V points per thread (a vector group, or one point), B threads per
// block, one linear index per thread and full blocks. So block `blockIdx.x` computes G's flat
// elements [blockIdx.x * B * V, (blockIdx.x + 1) * B * V): P = B * V / C whole rows of C
// elements, of cells blockIdx.x * P onwards. Element threadIdx.x * V + e of the block is staged
// at row (threadIdx.x * V + e) / C, column (threadIdx.x * V + e) % C of a P x (C + 1) array
// (the padding keeps the column reads of the epilogue free of bank conflicts); after the
// barrier, thread t writes elements i * B + t, i < V, taken column by column: consecutive
// threads write consecutive cells of one channel, a coalesced run of the target.
void KernelEmitter::begin_transposed_store() {
  const TransposedStore& s = *options_.transposed_store;
  const ir::Tensor source = program_.find_tensor(s.transpose.source);
  const int64_t columns = s.transpose.columns;
  const int64_t rows = s.block_elements / columns;
  staged_ = names_.fresh("staged");
  body_.line("// Transposed store (compiler/transposed_store.h): the block stages its " +
             std::to_string(s.block_elements) + " values of " + s.transpose.source +
             " in shared memory and writes them as " + s.transpose.target + "[b][q][p] = " +
             s.transpose.source + "[b][p][q] (b < " + std::to_string(s.transpose.batches) +
             ", p < " + std::to_string(s.transpose.rows) + ", q < " + std::to_string(columns) +
             "), the copy kernel '" + s.copy_kernel + "' fused.");
  body_.line("__shared__ " + std::string(cuda_storage_type(source->dtype)) + " " + staged_ + "[" +
             std::to_string(rows * (columns + 1)) + "];");
}

void KernelEmitter::end_transposed_store() {
  const TransposedStore& s = *options_.transposed_store;
  const TiledTranspose& t = s.transpose;
  const ir::Tensor target = program_.find_tensor(t.target);
  const int64_t columns = t.columns;
  const int64_t rows = s.block_elements / columns;  // P: the block's cells
  const int64_t block = kernel_.grid.block_size;
  const int64_t width = kernel_.grid.vector_width;
  const int64_t highest = (t.batches - 1) * t.target_batch_stride +
                          (t.columns - 1) * t.target_column_stride +
                          (t.rows - 1) * t.target_row_stride;
  const std::string index =
      index_type_ == "int" && highest <= INT32_MAX && t.batches * t.rows <= INT32_MAX ? "int"
                                                                                      : "long long";
  auto literal = [&](int64_t v) {
    return index == "int" ? std::to_string(v) : std::to_string(v) + "LL";
  };
  const std::string& out = params_.at(target.get());
  CodeWriter& w = body_;
  w.line("__syncthreads();  // every group of the block is staged");
  const std::string cell0 = names_.fresh("cell0");
  w.line("const " + index + " " + cell0 + " = (" + index + ")blockIdx.x * " + literal(rows) + ";");
  const std::string i = names_.fresh("i"), k = names_.fresh("k"), q = names_.fresh("q"),
                    r = names_.fresh("r"), g = names_.fresh("g");
  w.line("#pragma unroll");
  CodeWriter::Block loop(
      w, "for (int " + i + " = 0; " + i + " < " + std::to_string(width) + "; ++" + i + ") {", "}");
  w.line("const int " + k + " = " + i + " * " + std::to_string(block) + " + (int)threadIdx.x;");
  w.line("const int " + q + " = " + k + " / " + std::to_string(rows) + ", " + r + " = " + k +
         " % " + std::to_string(rows) + ";");
  w.line("const " + index + " " + g + " = " + cell0 + " + " + r + ";");
  w.line(out + "[" + g + " / " + literal(t.rows) + " * " + literal(t.target_batch_stride) +
         " + " + q + " * " + literal(t.target_column_stride) + " + " + g + " % " +
         literal(t.rows) + " * " + literal(t.target_row_stride) + "] = " + staged_ + "[" + r +
         " * " + std::to_string(columns + 1) + " + " + q + "];");
}

}  // namespace adjoint::compiler
