// emit_cuda: the translation unit of one kernel, assembled from a declaration part (comment,
// includes, signature) built here and the body a KernelEmitter writes (kernel_emitter.h says
// which file emits what).
#include "compiler/cuda_emitter.h"

#include <algorithm>
#include <memory>

#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"
#include "compiler/thread_tiles.h"
#include "ir/printer.h"

namespace adjoint::compiler {

CompiledKernel KernelEmitter::emit(const std::string& entry) {
  // A thread-tiled kernel's aligned copy (EmitOptions::tile_prefetch), emitted first: whether
  // it exists (a tile, some base claimed aligned) decides how this emitter writes the other
  // copy (EmitOptions::tile_point_fallback).
  std::unique_ptr<KernelEmitter> twin;
  // Generic kernels take it too where lower_generic asks (LowerOptions::generic_aligned_twin):
  // the alignment test reads base pointers only, whatever the sizes.
  if (!aligned_twin_ && options_.tile_prefetch > 0 && kernel_.grid.tile_points > 1 &&
      kernel_.row_axes == 0 && kernel_.grid.block_tokens == 0 &&
      !options_.tiled_transpose && !options_.transposed_store) {
    twin = std::make_unique<KernelEmitter>(program_, kernel_, options_);
    twin->aligned_twin_ = true;
    twin->span_alignment_claims_ = &twin->twin_claims_;
    twin->body_ = CodeWriter(2);
    twin->emit(entry);
    if (!twin->tile_ || twin->twin_claims_.empty()) twin.reset();
  }
  point_fallback_ = twin && options_.tile_point_fallback;
  CompiledKernel result;
  result.entry = entry;
  std::vector<ir::Tensor> written = tensors_written(kernel_);
  std::vector<std::string> signature;
  for (ir::Tensor t : kernel_tensors(program_, kernel_)) {
    if (options_.transposed_store && t->name == options_.transposed_store->transpose.source) {
      // The fused store writes the copy's target; the source is never written.
      t = program_.find_tensor(options_.transposed_store->transpose.target);
      if (!t)
        throw Error("emit_cuda: transposed store of kernel '" + kernel_.name +
                        "' names a tensor the program does not have",
                    ErrorCode::kInternal);
      written.push_back(t);
    }
    std::string name = names_.fresh(t->name);
    params_[t.get()] = name;
    result.params.push_back(t->name);
    bool is_written = std::find(written.begin(), written.end(), t) != written.end() ||
                      t->name == options_.claim_slot_tensor;
    signature.push_back(std::string(is_written ? "" : "const ") +
                        std::string(cuda_storage_type(t->dtype)) + "* __restrict__ " + name);
  }
  const bool generic = !program_.sizes.empty();
  std::vector<std::string> axes, bindings;
  if (generic) {
    for (std::string& size : bind_size_params(result)) signature.push_back(std::move(size));
    result.launch.block[0] = static_cast<uint32_t>(kernel_.grid.block_size);
    result.launch.grid[0] = 0;  // derived by the runtime from the point count
    launch_.block[0] = result.launch.block[0];  // the early copies' shared arrays need it
    if (!kernel_.stages.empty()) emit_generic_body();
    for (size_t j = 0; j < kernel_.grid.bindings.size(); ++j) {
      const ir::Axis& axis = kernel_.stages.front().domain[j];
      axes.push_back(axis.var.name_hint() + " < " + ir::to_string(axis.extent));
      bindings.emplace_back(ir::axis_binding_name(kernel_.grid.bindings[j]));
    }
  } else if (kernel_.row_axes > 0) {
    result.launch = launch_dims(kernel_);
    launch_ = result.launch;
    if (options_.outer_size) bind_outer_rows(result, signature);
    emit_row_group_body();
    const RowGroupShape shape = row_group_shape(kernel_);
    const ir::Stage& first = kernel_.stages.front();
    for (size_t j = 0; j < static_cast<size_t>(kernel_.row_axes); ++j)
      axes.push_back(first.domain[j].var.name_hint() + " < " + ir::to_string(first.domain[j].extent));
    std::string stages;
    for (size_t s = 0; s < kernel_.stages.size(); ++s)
      stages += (s == 0 ? "" : ", ") + kernel_.stages[s].target->name + " " +
                std::to_string(shape.stage_points[s]);
    bindings.push_back(std::to_string(kernel_.grid.rows_per_block) + " rows per block" +
                       (kernel_.grid.row_per_thread ? ", one per thread" : "") +
                       "; points per row: " + stages);
  } else {
    std::vector<int64_t> extents = domain_extents(kernel_);
    std::optional<GridMapping> mapping;  // none for block reductions and tiled transposes
    if (options_.tiled_transpose) {
      if (options_.outer_size)  // lower() never asks for both: the launch would drop the size
        throw Error("emit_cuda: kernel '" + kernel_.name +
                        "': a tiled transposition cannot take an outer size",
                    ErrorCode::kInternal);
      result.launch = emit_tiled_transpose(*options_.tiled_transpose);
      launch_ = result.launch;
    } else if (kernel_.grid.block_tokens > 0) {
      result.launch = launch_dims(kernel_);
      launch_ = result.launch;
      emit_block_reduction_body();
    } else {
      result.launch = launch_dims(kernel_);
      launch_ = result.launch;
      mapping = grid_mapping(kernel_);
      if (options_.outer_size) bind_outer_size(*mapping, extents, result, signature);
      const bool staged = options_.transposed_store && !options_.transposed_store->direct;
      if (staged) begin_transposed_store();
      if (!kernel_.stages.empty()) emit_body(*mapping, extents);
      if (staged) end_transposed_store();
    }
    if (options_.outer_size && outer_count_.empty())  // a block reduction's grid: constant
      throw Error("kernel '" + kernel_.name + "': its grid cannot be counted by " +
                      options_.outer_size->source + ": not a linear grid",
                  ErrorCode::kInvalidProgram);
    for (size_t j = 0; j < extents.size(); ++j) {
      const bool outer =
          options_.outer_size && mapping &&
          static_cast<int>(j) ==
              (outer_token_axis_ >= 0 ? outer_token_axis_ : mapping->linear_axes.front());
      axes.push_back(kernel_.stages.front().domain[j].var.name_hint() + " < " +
                     (outer ? options_.outer_size->name : std::to_string(extents[j])));
      bindings.emplace_back(ir::axis_binding_name(kernel_.grid.bindings[j]));
    }
  }
  // A thread-tiled kernel's body again, behind one alignment test (EmitOptions::tile_prefetch).
  std::string body = body_.text();
  std::string aligned_note;
  int min_blocks = kernel_.grid.tile_points > 1 && tile_ ? std::max(options_.tile_min_blocks, 0) : 0;
  if (twin && tile_) {
    std::string aligned;
    int checks = 0;
    for (const auto& [param, bytes] : twin->twin_claims_) {
      const std::string check = "adjoint::is_aligned<" + std::to_string(bytes) + ">(" + param + ")";
      if (aligned.find(check) == std::string::npos) {
        aligned += (aligned.empty() ? "" : " && ") + check;
        ++checks;
      }
    }
    if (!aligned.empty()) {
      std::string checked;  // the body of before, one level deeper
      size_t start = 0;
      while (start < body.size()) {
        size_t end = body.find('\n', start);
        if (end == std::string::npos) end = body.size() - 1;
        if (end > start) checked += "  ";
        checked += body.substr(start, end + 1 - start);
        start = end + 1;
      }
      body = "  if (" + aligned + ") {  // every base spanned is aligned: no check per access\n" +
             twin->body_.text() +
             (point_fallback_ ? "  } else {  // a misaligned base: each point alone\n"
                              : "  } else {  // a misaligned base: a check per access\n") +
             checked + "  }\n";
      aligned_note = "one alignment test for the kernel (" + std::to_string(checks) +
                     " base pointer(s)): the aligned copy of the body loads its spans and " +
                     "stores its groups without a branch per access " +
                     (point_fallback_ ? std::string("(else each point alone, in rolled loops)")
                                      : std::string("(else the body of before)"));
      for (const std::string& note : twin->prefetch_notes_) aligned_note += "\nprefetch: " + note;
      // The header describes the aligned copy: its unroll decisions (the point-by-point copy
      // rolls its loops and records none) and the helpers and fmaf it uses.
      if (point_fallback_) unroll_notes_ = twin->unroll_notes_;
      uses_fma_ = uses_fma_ || twin->uses_fma_;
      uses_memory_helpers_ = uses_memory_helpers_ || twin->uses_memory_helpers_;
      // A prefetched ring holds the streamed spans in shared memory, not registers: such a
      // kernel with few accumulators is held to 640 resident threads per SM (5 blocks of 128;
      // measured on the H100: x_mix's partials at B1 S4096 n4 D2560, 640 blocks, 168 -> 103 us),
      // one with more than derive_grid's usual 64 (a long tile's, thread_tiles.h) to 384
      // (3 blocks of 128, at most 168 registers: x_mix's 96 without the copies between
      // registers that a cap of 128 costs its chunk loop).
      const int64_t accumulators = tile_->points * vector_->width;
      const int threads_per_sm = accumulators <= kMinBlocksAccumulators ? 640
                                 : accumulators > ThreadTileOptions{}.max_accumulators &&
                                         accumulators <= kMinBlocksLongAccumulators
                                     ? 384
                                     : 0;
      if (options_.tile_min_blocks < 0 && twin->prefetch_rings_ > 0 && threads_per_sm > 0 &&
          launch_.block[0] > 0 && threads_per_sm / static_cast<int>(launch_.block[0]) >= 2) {
        min_blocks = threads_per_sm / static_cast<int>(launch_.block[0]);
        aligned_note += "\nminimum " + std::to_string(min_blocks) + " blocks per SM (" +
                        std::to_string(accumulators) + " accumulators, x in a ring of shared " +
                        "memory): __launch_bounds__(" + std::to_string(launch_.block[0]) + ", " +
                        std::to_string(min_blocks) + ")";
      }
    }
  }
  const LaunchDims& d = result.launch;
  CodeWriter head;
  head.line("// Generated by adjoint: program '" + program_.name + "', kernel '" + kernel_.name +
            "'.");
  const std::string grid_text =
      generic || options_.outer_size ? std::string("derived at launch")
              : "(" + std::to_string(d.grid[0]) + ", " + std::to_string(d.grid[1]) + ", " +
                    std::to_string(d.grid[2]) + ")";
  if (kernel_.row_axes > 0) {
    head.line("// Row group: rows (" + join(axes, ", ") + "), " + join(bindings, "") + "; " +
              std::to_string(kernel_.stages.size()) +
              (kernel_.grid.row_per_thread ? " stages, run in order by the row's thread; "
                                           : " stages, __syncthreads() between them; ") +
              "launch grid " + grid_text + " x " + std::to_string(d.block[0]) + " threads; " +
              (index_type_ == "int" ? "32" : "64") + "-bit index math.");
  } else {
    head.line("// Domain (" + join(axes, ", ") + "), axes bound (" + join(bindings, ", ") +
              "); launch grid " + grid_text + " x " + std::to_string(d.block[0]) + " threads; " +
              (index_type_ == "int" ? "32" : "64") + "-bit index math.");
  }
  if (vector_) {
    head.line("// Each thread computes " + std::to_string(vector_->width) +
              " consecutive points of " +
              kernel_.stages.front().domain[vector_->axis].var.name_hint() + ".");
    if (tile_)
      head.line("// Thread tile: each thread also computes " + std::to_string(tile_->points) +
                " consecutive points of " +
                kernel_.stages.front().domain[tile_->axis].var.name_hint() +
                "; their reductions share one loop, so what they read in common is read once." +
                (!tile_->runtime_extent.empty()
                     ? " Any tile may be the partial last one: its points at or past the runtime "
                       "extent " + tile_->runtime_extent + " compute at " + tile_->runtime_extent +
                       " - 1 and are not stored."
                 : tile_->partial() ? " The last tile is partial: its points past " +
                                        std::to_string(tile_->extent - 1) + " compute at " +
                                        std::to_string(tile_->extent - 1) + " and are not stored."
                                  : ""));
    if (options_.streaming_loads || options_.streaming_stores)
      head.line(std::string("// Streaming cache hints (evict first) on ") +
                (options_.streaming_loads && options_.streaming_stores ? "span loads and group stores."
                 : options_.streaming_loads ? "span loads." : "group stores."));
  }
  if (options_.outer_size) {
    const OuterSizeParam& outer = *options_.outer_size;
    if (outer.batch_source.empty()) {
      head.line("// Generic in " + outer.source + " (an outer batch, the parameter " +
                outer_count_.substr(0, outer_count_.find(' ')) + "): lowered at " + outer.source +
                " = " + std::to_string(outer.value) + ", which the point counts below are at.");
    } else {
      const size_t second = outer_count_.find(" * ") + 3;
      head.line("// Generic in " + outer.batch_source + ", " + outer.source +
                " (one token axis of " + outer_count_.substr(0, outer_count_.find(' ')) + " * " +
                outer_count_.substr(second, outer_count_.find(' ', second) - second) +
                " tokens, the parameters): lowered at " + outer.batch_source + " = 1, " +
                outer.source + " = " + std::to_string(outer.value) +
                ", which the point counts below are at.");
    }
  }
  if (!options_.schedule_note.empty()) {
    size_t start = 0;
    while (start <= options_.schedule_note.size()) {
      size_t end = options_.schedule_note.find('\n', start);
      if (end == std::string::npos) end = options_.schedule_note.size();
      head.line("// Schedule: " + options_.schedule_note.substr(start, end - start));
      start = end + 1;
    }
  }
  for (const std::string& note : stage_loop_notes_) head.line("// Schedule: " + note);
  for (const std::string& note : unroll_notes_) head.line("// Schedule: unroll " + note);
  for (const std::string& note : lane_span_notes_) head.line("// Schedule: lane spans: " + note);
  for (const std::string& note : lane_scan_notes_) head.line("// Schedule: lane scan: " + note);
  if (!aligned_note.empty()) {
    size_t start = 0;
    while (start <= aligned_note.size()) {
      size_t end = aligned_note.find('\n', start);
      if (end == std::string::npos) end = aligned_note.size();
      head.line("// Schedule: " + aligned_note.substr(start, end - start));
      start = end + 1;
    }
  }
  head.line("// Compile with --fmad=false: the IR never contracts float operations into FMAs.");
  if (uses_fma_)
    head.line("// Fused multiply-adds: only the accumulations of the IR's fma_sum reductions (fmaf/fma).");
  head.line("#include \"adjoint_types.cuh\"");
  head.line("#include \"adjoint_math.cuh\"");
  if (uses_atomics_) head.line("#include \"adjoint_atomics.cuh\"");
  if (uses_memory_helpers_) head.line("#include \"adjoint_memory.cuh\"");
  head.line("");
  head.line("extern \"C\" __global__ void __launch_bounds__(" +
            std::to_string(generic ? kernel_.grid.block_size : d.block[0]) +
            (min_blocks > 0 ? ", " + std::to_string(min_blocks) : std::string()) + ")");
  head.line(entry + "(" + join(signature, ",\n    ") + ") {");
  // First, before any memory access (and before the alignment test of a tiled kernel's two
  // bodies): the wait of a programmatic dependent launch (a no-op unless the runtime launches
  // with it, on sm_90 and later; adjoint_types.cuh).
  result.source = head.text() + "  adjoint::grid_dependency_prologue();\n" + body + "}\n";
  result.uses_atomics = uses_float_atomics_;
  return result;
}

void KernelEmitter::bind_outer_size(const GridMapping& m, const std::vector<int64_t>& extents,
                                    CompiledKernel& result, std::vector<std::string>& signature) {
  const OuterSizeParam& outer = *options_.outer_size;
  auto refuse = [&](const std::string& why) {
    throw Error("kernel '" + kernel_.name + "': its extent " + std::to_string(outer.value) +
                    " cannot become the size " + outer.source + ": " + why,
                ErrorCode::kInvalidProgram);
  };
  if (!program_.sizes.empty()) refuse("the program is generic already");
  if (m.linear_axes.empty()) refuse("no linear axis");
  // A token pair lowered at batch 1: the batch's axis (and any other of extent 1) in front.
  size_t front = 0;
  const bool pair = !outer.batch_source.empty();
  while (pair && front + 1 < m.linear_axes.size() && extents[m.linear_axes[front]] == 1) ++front;
  const int axis = m.linear_axes[front];
  if (extents[axis] != outer.value) refuse("the outermost linear axis has another extent");
  if (m.thread_points != 1 || !m.block_axes.empty())
    refuse("thread or block axes make the grid depend on more than the count");
  // Warp-cooperative points (L lanes each, 32 / L points a warp) of a token pair: the guard
  // returns whole warps (before their shuffles) when the count is a multiple of 32 / L, which
  // a multiple of the linear indices per token is.
  const int64_t lanes = m.reduction_lanes;
  if (lanes != 1 && !pair) refuse("warp-cooperative axes make the grid depend on more than the count");
  if (lanes != 1 && (32 % lanes != 0 || m.lanes * lanes != kernel_.grid.block_size ||
                     (m.linear_points / outer.value) % (32 / lanes) != 0))
    refuse("its warps' points do not stay whole at every token count");
  const ir::GridConfig& grid = kernel_.grid;
  if (grid.tile_points > 1 && grid.tile_axis == axis) refuse("its axis is tiled");
  if (grid.tile_points > 1 && extents[grid.tile_axis] % grid.tile_points != 0)
    refuse("its thread tile's last tile is partial");
  if (front + 1 == m.linear_axes.size() && grid.vector_width > 1) refuse("its axis is vectorized");
  if (outer.value < 1 || m.linear_points % outer.value != 0) refuse("no whole linear count per index");
  const int64_t per_index = m.linear_points / outer.value;  // linear indices per outer index
  std::string count;  // the runtime count of outer indices
  if (pair) {
    count = names_.fresh(outer.batch_name) + " * ";
    signature.push_back("const " + index_type_ + " " + count.substr(0, count.find(' ')));
    result.size_params = {outer.batch_source};
  }
  const std::string name = names_.fresh(outer.name);
  signature.push_back("const " + index_type_ + " " + name);
  count += name;
  result.size_params.push_back(outer.source);
  result.size_param_bytes = index_type_ == "int" ? 4 : 8;
  const int64_t points_per_index = grid.vector_width * std::max<int64_t>(grid.tile_points, 1);
  // The runtime launches ceil(points / (block * points_per_thread)) blocks: with L lanes per
  // point, `points` counts each point L times (a block runs block / L linear indices).
  result.points = SizeProduct{per_index * points_per_index * lanes, result.size_params};
  result.points_per_thread = static_cast<int>(points_per_index);
  result.one_index_per_thread = true;
  result.launch.grid[0] = 0;  // derived by the runtime from the point count
  outer_count_ = per_index == 1 ? count : count + " * " + std::to_string(per_index);
  if (pair) outer_token_axis_ = axis;
}

void KernelEmitter::bind_outer_rows(CompiledKernel& result, std::vector<std::string>& signature) {
  const OuterSizeParam& outer = *options_.outer_size;
  auto refuse = [&](const std::string& why) {
    throw Error("kernel '" + kernel_.name + "': its rows cannot be counted by " + outer.source +
                    ": " + why,
                ErrorCode::kInvalidProgram);
  };
  // Only a token pair: its batch axis (extent 1) and token axis lead the rows; one size would
  // need its axis first too, which fuse_row_groups does not promise (lower() keeps those linear).
  if (outer.batch_source.empty()) refuse("not a token pair");
  if (!program_.sizes.empty()) refuse("the program is generic already");
  const std::vector<ir::Axis>& domain = kernel_.stages.front().domain;
  auto extent_of = [&](size_t j) {
    const ir::IntConstNode* c = domain[j].extent.as<ir::IntConstNode>();
    return c ? c->value : -1;
  };
  if (kernel_.row_axes < 2 || extent_of(0) != 1 || extent_of(1) != outer.value)
    refuse("its row axes do not begin with the batch (lowered at 1) and the tokens");
  const RowGroupShape shape = row_group_shape(kernel_);
  if (shape.rows % outer.value != 0) refuse("no whole rows per token");
  const int64_t per_token = shape.rows / outer.value;
  const std::string batch = names_.fresh(outer.batch_name), seq = names_.fresh(outer.name);
  signature.push_back("const " + index_type_ + " " + batch);
  signature.push_back("const " + index_type_ + " " + seq);
  result.size_params = {outer.batch_source, outer.source};
  result.size_param_bytes = index_type_ == "int" ? 4 : 8;
  // The runtime launches ceil(points / (block * points_per_thread)) blocks: with points a block
  // per row and points_per_thread the rows per block, a block per rows_per_block rows.
  const int64_t block = std::max<int64_t>(result.launch.block[0], 1);
  result.points = SizeProduct{per_token * block, result.size_params};
  result.points_per_thread = static_cast<int>(kernel_.grid.rows_per_block);
  result.one_index_per_thread = true;
  result.launch.grid[0] = 0;  // derived by the runtime from the row count
  outer_count_ = batch + " * " + seq + (per_token == 1 ? "" : " * " + std::to_string(per_token));
  outer_token_axis_ = 1;
}

CompiledKernel emit_cuda_kernel(const ir::Program& program, size_t kernel_index,
                                const std::string& entry, const EmitOptions& options) {
  if (kernel_index >= program.kernels.size()) {
    throw Error(
        "emit_cuda: program '" + program.name + "' has no kernel " + std::to_string(kernel_index),
        ErrorCode::kInternal);
  }
  KernelEmitter emitter(program, program.kernels[kernel_index], options);
  return emitter.emit(entry);
}

}  // namespace adjoint::compiler
