// lower(): runs the passes in order, records the dump, then emits each kernel and collects what
// the runtime needs (parameters, launch geometry, buffers to zero and to allocate).
#include "compiler/lower.h"

#include <algorithm>
#include <set>

#include "compiler/block_reductions.h"
#include "compiler/cuda_emitter.h"
#include "compiler/cuda_syntax.h"
#include "compiler/derive_grid.h"
#include "compiler/gathered_reduction_lanes.h"
#include "compiler/gathered_rows_innermost.h"
#include "compiler/index_width.h"
#include "compiler/lower_generic.h"
#include "compiler/lower_scatter_to_atomics.h"
#include "compiler/lower_scatter_to_binned_gather.h"
#include "compiler/lower_scatter_to_gather.h"
#include "compiler/program_utils.h"
#include "ir/error.h"
#include "compiler/reduction_schedule.h"
#include "compiler/row_groups.h"
#include "compiler/simplify.h"
#include "compiler/split_reductions.h"
#include "compiler/tiled_transpose.h"
#include "compiler/transposed_store.h"
#include "compiler/thread_tiles.h"
#include "compiler/tile_blocks.h"
#include "compiler/unfuse_fma.h"
#include "compiler/vector_groups.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace adjoint::compiler {
namespace {

/// Runs one pass and appends its result (or "(unchanged)") to the dump.
class PassRecorder {
 public:
  explicit PassRecorder(bool enabled) : enabled_(enabled) {}

  template <typename Pass>
  ir::Program run(const char* name, const ir::Program& program, Pass pass) {
    ir::Program result = pass(program);
    if (enabled_) {
      dump_ += "// ----- after " + std::string(name) + "\n";
      dump_ += same_program(result, program) ? "(unchanged)\n" : ir::to_string(result);
    }
    return result;
  }
  void record(const char* name, const ir::Program& program) {
    if (enabled_) dump_ += "// ----- " + std::string(name) + "\n" + ir::to_string(program);
  }
  const std::string& dump() const { return dump_; }

 private:
  bool enabled_;
  std::string dump_;
};

BufferInfo buffer_info(const ir::Tensor& t) {
  return BufferInfo{
      t->name, t->dtype, t->shape, t->strides, t->storage_elements() * ir::dtype_bytes(t->dtype),
      t->role, {}, {}};
}

/// Entry points are C identifiers unique within the program: <program>_<kernel>.
std::string entry_name(const ir::Program& program, const ir::Kernel& kernel,
                       std::set<std::string>& used) {
  std::string base = sanitize_identifier(program.name + "_" + kernel.name);
  std::string name = base;
  for (int i = 1; used.count(name); ++i) name = base + "_" + std::to_string(i);
  used.insert(name);
  return name;
}

}  // namespace

CompiledProgram lower(const ir::Program& source, const LowerOptions& options) {
  const ir::Program input = options.fused_multiply_add ? source : unfuse_fma_sums(source);
  DeriveGridOptions grid_options{options.block_size, options.vector_bytes, {}, {}};
  check_derive_grid_options(grid_options);  // bad tuning fails before any work
  ReductionSplitOptions split_options;
  split_options.forced_partials = options.reduction_split;
  if (options.split_target_threads != 0) split_options.target_threads = options.split_target_threads;
  split_options.tiles.forced_points = options.thread_tile;
  if (options.split_warp_combine_points < 0) {
    throw Error("LowerOptions.split_warp_combine_points: expected 0 (never) or a number of "
                "points, got " + std::to_string(options.split_warp_combine_points),
                ErrorCode::kInvalidArgument);
  }
  split_options.warp_combine_points = options.split_warp_combine_points;
  if (options.split_warp_combine_stages < 0) {
    throw Error("LowerOptions.split_warp_combine_stages: expected 0 (never) or a number of "
                "partials, got " + std::to_string(options.split_warp_combine_stages),
                ErrorCode::kInvalidArgument);
  }
  split_options.multi_stage_warp_combine_partials = options.split_warp_combine_stages;
  split_options.tiles.prefer_vector = options.tile_prefer_vector;
  split_options.tiles.few_parts = options.tile_few_parts;
  if (options.tile_accumulators < 16 || options.tile_accumulators > 256) {
    throw Error("LowerOptions.tile_accumulators: expected accumulators in [16, 256], got " +
                    std::to_string(options.tile_accumulators),
                ErrorCode::kInvalidArgument);
  }
  // A long tile's extra accumulators pay where its streamed spans wait in a ring of shared
  // memory, not in registers: only with the prefetch (EmitOptions::tile_prefetch >= 2).
  split_options.tiles.long_tile_accumulators =
      options.tile_prefetch >= 2 ? options.tile_accumulators : split_options.tiles.max_accumulators;
  split_options.tiles.partial_tiles = options.tile_partial;
  split_options.count_vector = options.split_count_vector;
  split_options.block_output_points = options.block_output_points;
  if (options.block_few_tokens < 0 || options.block_few_tokens > 15) {
    throw Error("LowerOptions.block_few_tokens: expected a mask in [0, 15], got " +
                    std::to_string(options.block_few_tokens),
                ErrorCode::kInvalidArgument);
  }
  split_options.block_few_tokens = options.block_few_tokens;
  split_options.block_split_rows = options.block_split_rows;
  split_options.tail = options.split_tail;
  split_options.tiles.group_bytes = options.vector_bytes;
  check_reduction_split_options(split_options);
  check_thread_tile_options(split_options.tiles);
  grid_options.tiles = split_options.tiles;
  if (options.reducing_min_groups < 0 || options.reducing_min_groups > (int64_t{1} << 24))
    throw Error("LowerOptions.reducing_min_groups: expected 0 (derived) or an integer in [1, 2^24], got " +
                    std::to_string(options.reducing_min_groups),
                ErrorCode::kInvalidArgument);
  if (options.reducing_min_groups > 0) grid_options.reducing_min_groups = options.reducing_min_groups;
  TileBlockOptions tile_block_options;
  tile_block_options.forced_rows = options.tile_block_rows;
  tile_block_options.yield_to_block_ring = options.tile_uniform_ring;
  check_tile_block_options(tile_block_options);
  RowGroupOptions row_options;
  row_options.forced_rows_per_block = options.row_groups;
  row_options.schedule = parse_row_schedule(options.row_schedule, "row_schedule");
  // A token pair serves every token count up to the one it is lowered at (lower_outer_generic.h):
  // its row groups take the R of a few blocks' rows per SM, not of that largest count.
  if (options.outer_size && !options.outer_size->batch_source.empty())
    row_options.schedule_rows = row_options.target_blocks * 32;
  check_row_group_options(row_options);
  if (options.long_loop_unroll < 0 || options.long_loop_unroll > 64) {
    throw Error("LowerOptions.long_loop_unroll: expected 0 (NVVM's choice) or an unroll factor "
                "in [1, 64], got " + std::to_string(options.long_loop_unroll),
                ErrorCode::kInvalidArgument);
  }
  if (options.partial_unroll < 0 || options.partial_unroll > 64) {
    throw Error("LowerOptions.partial_unroll: expected 0 (NVVM's choice) or an unroll factor in "
                "[1, 64], got " + std::to_string(options.partial_unroll),
                ErrorCode::kInvalidArgument);
  }
  if (options.tile_unroll < 0 || options.tile_unroll > 64) {
    throw Error("LowerOptions.tile_unroll: expected 0 (derived) or an unroll factor in [1, 64], "
                "got " + std::to_string(options.tile_unroll),
                ErrorCode::kInvalidArgument);
  }
  if (options.lane_spans != 0 && options.lane_spans != 8 && options.lane_spans != 16) {
    throw Error("LowerOptions.lane_spans: expected 0, 8 or 16 bytes, got " +
                    std::to_string(options.lane_spans),
                ErrorCode::kInvalidArgument);
  }
  if (options.tile_prefetch < 0 || options.tile_prefetch > 64) {
    throw Error("LowerOptions.tile_prefetch: expected 0 (a check per access), 1 (one check) or "
                "a prefetch depth in [2, 64], got " + std::to_string(options.tile_prefetch),
                ErrorCode::kInvalidArgument);
  }
  if (options.tile_min_blocks < -1 || options.tile_min_blocks > 32) {
    throw Error("LowerOptions.tile_min_blocks: expected -1 (derived), 0 (none) or a block count "
                "in [1, 32], "
                "got " + std::to_string(options.tile_min_blocks),
                ErrorCode::kInvalidArgument);
  }
  if (options.unroll_budget < 0 || options.unroll_budget > (int64_t{1} << 20)) {
    throw Error("LowerOptions.unroll_budget: expected 0 (no budget) or a number of IR "
                "nodes in [1, 1048576], got " + std::to_string(options.unroll_budget),
                ErrorCode::kInvalidArgument);
  }
  if (options.runtime_unroll < 0 || options.runtime_unroll > 16) {
    throw Error("LowerOptions.runtime_unroll: expected 0 (NVVM's choice), 1 (not unrolled) or "
                "an unroll factor in [2, 16], got " + std::to_string(options.runtime_unroll),
                ErrorCode::kInvalidArgument);
  }
  if (options.block_stage_width != 1 && options.block_stage_width != 2 &&
      options.block_stage_width != 4 && options.block_stage_width != 8) {
    throw Error("LowerOptions.block_stage_width: expected 1, 2, 4 or 8, got " +
                    std::to_string(options.block_stage_width),
                ErrorCode::kInvalidArgument);
  }
  if (options.gathered_rows_min < 0) {
    throw Error("LowerOptions.gathered_rows_min: expected 0 (never) or an extent, got " +
                    std::to_string(options.gathered_rows_min),
                ErrorCode::kInvalidArgument);
  }
  if (options.binned_channels_last_min < 0) {
    throw Error("LowerOptions.binned_channels_last_min: expected 0 (never) or a number of "
                "broadcast elements, got " + std::to_string(options.binned_channels_last_min),
                ErrorCode::kInvalidArgument);
  }
  if (options.binned_records_per_cell_min < 0) {
    throw Error("LowerOptions.binned_records_per_cell_min: expected a count >= 0, got " +
                    std::to_string(options.binned_records_per_cell_min),
                ErrorCode::kInvalidArgument);
  }
  if (options.binned_sparse_channels_last_min < 0) {
    throw Error("LowerOptions.binned_sparse_channels_last_min: expected 0 (never) or a number "
                "of broadcast elements, got " +
                    std::to_string(options.binned_sparse_channels_last_min),
                ErrorCode::kInvalidArgument);
  }
  if (options.binned_taps_walks_max < 0) {
    throw Error("LowerOptions.binned_taps_walks_max: expected 0 (never) or a number of "
                "bucket walks, got " + std::to_string(options.binned_taps_walks_max),
                ErrorCode::kInvalidArgument);
  }
  if (options.binned_taps_walks_wide_max < 0) {
    throw Error("LowerOptions.binned_taps_walks_wide_max: expected 0 (never) or a number of "
                "bucket walks, got " + std::to_string(options.binned_taps_walks_wide_max),
                ErrorCode::kInvalidArgument);
  }
  if (options.binned_subbucket_records < 0) {
    throw Error("LowerOptions.binned_subbucket_records: expected 0 (never) or a number of "
                "records, got " + std::to_string(options.binned_subbucket_records),
                ErrorCode::kInvalidArgument);
  }
  if (options.scan_gather_unroll_budget < 0 || options.scan_gather_unroll_budget > (int64_t{1} << 20)) {
    throw Error("LowerOptions.scan_gather_unroll_budget: expected 0 (none) or a number of IR "
                "nodes in [1, 1048576], got " + std::to_string(options.scan_gather_unroll_budget),
                ErrorCode::kInvalidArgument);
  }
  if (options.scan_gather_work_max < 0 || options.scan_gather_length_max < 0) {
    throw Error("LowerOptions.scan_gather_work_max / scan_gather_length_max: expected 0 (never) "
                "or a number of records, got " + std::to_string(options.scan_gather_work_max) +
                    " / " + std::to_string(options.scan_gather_length_max),
                ErrorCode::kInvalidArgument);
  }
  if (options.binned_gather_chunk < -1) {
    throw Error("LowerOptions.binned_gather_chunk: expected -1 (derived), 0 (never) or a number "
                "of slots, "
                "got " + std::to_string(options.binned_gather_chunk),
                ErrorCode::kInvalidArgument);
  }
  if (options.gathered_lanes_min < 0) {
    throw Error("LowerOptions.gathered_lanes_min: expected 0 (never) or an extent, got " +
                    std::to_string(options.gathered_lanes_min),
                ErrorCode::kInvalidArgument);
  }
  if (options.tiled_transpose_min < 0) {
    throw Error("LowerOptions.tiled_transpose_min: expected 0 (never) or an extent, got " +
                    std::to_string(options.tiled_transpose_min),
                ErrorCode::kInvalidArgument);
  }
  if (!input.sizes.empty()) return lower_generic(input, options);  // extents are parameters
  ReductionScheduleOptions schedule_options;
  schedule_options.mode = parse_reduction_mode(options.reduction_schedule, "reduction_schedule");
  schedule_options.preferred_lanes = options.gathered_lane_width;
  schedule_options.whole_axis_lanes_max = options.gathered_lane_whole_axis;
  schedule_options.fill_warps = options.warp_group_fill;
  BlockReductionOptions block_options;
  block_options.mode = parse_block_reduction_mode(options.block_reduction, "block_reduction");
  block_options.max_stage_width = options.block_stage_width;
  block_options.shared_vectors = options.block_shared_vectors;
  block_options.output_points = options.block_output_points;
  if (options.block_min_tokens < 1)
    throw Error("LowerOptions.block_min_tokens: expected an integer >= 1, got " +
                    std::to_string(options.block_min_tokens),
                ErrorCode::kInvalidArgument);
  block_options.min_tokens = options.block_min_tokens;
  if (options.block_streamed_mib < 0 || options.block_streamed_mib > (int64_t{1} << 20))
    throw Error("LowerOptions.block_streamed_mib: expected an integer in [0, 2^20], got " +
                    std::to_string(options.block_streamed_mib),
                ErrorCode::kInvalidArgument);
  block_options.streamed_max_bytes = options.block_streamed_mib << 20;
  block_options.few_tokens_max_bytes = 2 * block_options.streamed_max_bytes;
  ir::verify(input);
  PassRecorder passes(options.record_passes);
  passes.record("input", source);
  if (!options.fused_multiply_add)
    passes.run("unfuse_fma_sums", source, [&](const ir::Program&) { return input; });
  ir::Program p = input;
  p = passes.run("simplify", p, [](const ir::Program& x) { return simplify(x); });
  ScanGatherOptions scan_options;
  ScheduleNotes scanned_kernels;  // kept out of row groups below; their dumps say why
  scan_options.scanned_kernels = &scanned_kernels;
  if (options.determinism == Determinism::kDefault || options.binned_over_atomics) {
    scan_options.work_max = options.scan_gather_work_max;
    scan_options.length_max = options.scan_gather_length_max;
    // Atomics allowed: a scan only where a deterministic gather beats them ("Binned or atomics").
    if (options.determinism == Determinism::kAllowAtomics)
      scan_options.may_scan_stage = binned_gather_beats_atomics;
  }
  p = passes.run("lower_scatter_to_gather", p,
                 [&](const ir::Program& x) { return lower_scatter_to_gather(x, scan_options); });
  p = passes.run("simplify", p, [](const ir::Program& x) { return simplify(x); });
  ClaimSlotTensors claims;  // data-dependent scatters: binned gathers (kAllowAtomics: if faster)
  CountingClaims counting_claims;  // ... whose claims count up (the ranked count)
  LaneScanKernels lane_scans;  // ... whose offsets are scanned on warp lanes
  RereadRowKernels reread_kernels;  // ... that walk records whose reads other records share
  RolledLoopKernels rolled_kernels;  // ... whose run-time loops stay rolled (the edges' walks)
  StoreScatterTargets stores;  // their fill and sort kernels write distinct slots
  BinnedGatherOptions binned_options;
  binned_options.channels_last_min = options.binned_channels_last_min;
  binned_options.records_per_cell_min = options.binned_records_per_cell_min;
  binned_options.sparse_channels_last_min = options.binned_sparse_channels_last_min;
  binned_options.sparse_tiled_min = options.tiled_transpose_min;
  binned_options.sparse_row_bytes_max =
      options.vector_bytes > 0 ? options.vector_bytes : kDefaultGroupBytes;
  binned_options.gather_chunk = options.binned_gather_chunk;
  binned_options.taps_walks_max = options.binned_taps_walks_max;
  binned_options.taps_walks_wide_max = options.binned_taps_walks_wide_max;
  binned_options.scan_digits = options.binned_scan_digits;
  binned_options.scan_lanes = options.binned_scan_lanes;
  binned_options.scan_top_loads = options.binned_scan_top_loads;
  binned_options.packed_keys = options.binned_packed_keys;
  binned_options.ranked_count = options.binned_ranked_count;
  binned_options.subbucket_records = options.binned_subbucket_records;
  binned_options.whole_axis_records_max = options.binned_whole_axis_records_max;
  ScheduleNotes notes, cooperative_notes, layout_notes;
  binned_options.only_where_faster = options.determinism == Determinism::kAllowAtomics;
  if (options.determinism == Determinism::kDefault || options.binned_over_atomics) {
    p = passes.run("lower_scatter_to_binned_gather", p, [&](const ir::Program& x) {
      return lower_scatter_to_binned_gather(x, &claims, binned_options, &stores, &layout_notes,
                                            &schedule_options.preferred_kernels,
                                            &grid_options.whole_axis_kernels,
                                            &counting_claims, &lane_scans, &reread_kernels,
                                            &rolled_kernels);
    });
  }
  for (const std::string& kernel : rolled_kernels) {
    layout_notes[kernel] += std::string(layout_notes[kernel].empty() ? "" : "\n") +
                            "unroll: loops with run-time trip counts rolled (#pragma unroll 1): "
                            "a few rows of bucket walks per tap on two edges' elements";
  }
  // The lane scans keep one point per thread, in whole warps: no other schedule, no vectors.
  for (const std::string& kernel : lane_scans) {
    schedule_options.excluded_kernels.insert(kernel);
    row_options.excluded_kernels.insert(kernel);
    grid_options.scalar_kernels.insert(kernel);
  }
  p = passes.run("lower_scatter_to_atomics", p, lower_scatter_to_atomics);
  p = passes.run("lay_out_gathered_reductions_for_lanes", p, [&](const ir::Program& x) {
    return lay_out_gathered_reductions_for_lanes(x, options.gathered_lanes_min,
                                                 &schedule_options.preferred_kernels,
                                                 &layout_notes);
  });
  p = passes.run("copy_gathered_rows_innermost", p, [&](const ir::Program& x) {
    return copy_gathered_rows_innermost(x, options.gathered_rows_min,
                                        options.gathered_rows_skip_sparse);
  });
  for (const auto& [kernel, tensor] : claims) schedule_options.excluded_kernels.insert(kernel);
  p = passes.run("choose_block_reductions", p, [&](const ir::Program& x) {
    return choose_block_reductions(x, block_options, &notes,
                                   &split_options.streamed_weight_kernels);
  });
  for (const auto& [kernel, tensor] : claims) row_options.excluded_kernels.insert(kernel);
  for (const auto& [kernel, tensor] : stores) row_options.excluded_kernels.insert(kernel);
  for (const auto& [kernel, note] : scanned_kernels) {
    row_options.excluded_kernels.insert(kernel);
    layout_notes[kernel] += (layout_notes[kernel].empty() ? "" : "\n") + note;
  }
  p = passes.run("choose_reduction_schedules", p, [&](const ir::Program& x) {
    return choose_reduction_schedules(x, schedule_options, &cooperative_notes);
  });
  p = passes.run("split_reductions", p, [&](const ir::Program& x) {
    return split_reductions(x, split_options, &notes);
  });
  p = passes.run("choose_thread_tiles", p, [&](const ir::Program& x) {
    return choose_thread_tiles(x, split_options.tiles, &notes);
  });
  // The lane scans' sums are the emitter's (its "lane scan" lines), not the schedule's.
  for (const std::string& kernel : lane_scans) {
    cooperative_notes.erase(kernel);
    notes.erase(kernel);
  }
  // The row groups take over the notes of the kernels they fuse: the reduction schedules'
  // lines first, as the emitter writes them.
  for (const auto& [kernel, text] : cooperative_notes) {
    std::string& line = notes[kernel];
    line = text + (line.empty() ? "" : "\n" + line);
  }
  cooperative_notes.clear();
  // A batch-generic program (outer_size) keeps linear grids: only they take the batch as a
  // kernel parameter. A token pair's row groups take it too (their rows lead with the pair).
  if (!options.outer_size || !options.outer_size->batch_source.empty()) {
    p = passes.run("fuse_row_groups", p, [&](const ir::Program& x) {
      return fuse_row_groups(x, row_options, &notes);
    });
  }
  p = passes.run("derive_grid", p,
                 [&](const ir::Program& x) { return derive_grid(x, grid_options); });
  // A batch-generic program (outer_size) keeps one row: its grid is counted per token.
  if (!options.outer_size) {
    p = passes.run("choose_tile_blocks", p, [&](const ir::Program& x) {
      return choose_tile_blocks(x, tile_block_options, &notes);
    });
  }
  std::vector<IndexWidth> widths;
  p = passes.run("narrow_index_math", p,
                 [&](const ir::Program& x) { return narrow_index_math_recording(x, widths); });

  // A batch-generic program (outer_size) keeps its copies plain: a tiled launch has no size.
  const TiledTransposes transposes = options.outer_size
                                         ? TiledTransposes{}
                                         : choose_tiled_transposes(p, options.tiled_transpose_min);
  // Copies fused into the kernel writing their source: the copy is not emitted, its source
  // not allocated.
  const TransposedStores fused_stores = options.transposed_store
                                            ? choose_transposed_stores(
                                                  p, transposes, options.direct_transposed_store)
                                            : TransposedStores{};
  std::set<std::string> fused_copies, unallocated;
  for (const auto& [writer, store] : fused_stores) {
    fused_copies.insert(store.copy_kernel);
    unallocated.insert(store.transpose.source);
  }

  CompiledProgram out;
  out.name = input.name;
  std::set<std::string> entries, zeroed;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const ir::Kernel& kernel = p.kernels[k];
    if (kernel.stages.empty() || fused_copies.count(kernel.name)) continue;
    EmitOptions emit_options;
    emit_options.streaming_loads =
        options.streaming_loads &&
        (options.binned_reread_streaming || !reread_kernels.count(kernel.name));
    emit_options.streaming_stores = options.streaming_stores;
    emit_options.index_width = widths[k];
    emit_options.partial_unroll = options.partial_unroll;
    emit_options.long_loop_unroll = options.long_loop_unroll;
    emit_options.tile_unroll = options.tile_unroll;
    emit_options.tile_prefetch = options.tile_prefetch;
    emit_options.tile_early_copies = options.tile_early_copies;
    emit_options.progressive_group_sums = options.progressive_group_sums;
    emit_options.tile_early_wide_reads = options.tile_early_wide_reads;
    emit_options.tile_uniform_ring = options.tile_uniform_ring;
    emit_options.lane_spans =
        schedule_options.preferred_kernels.count(kernel.name) ? 0 : options.lane_spans;
    emit_options.lane_span_unroll = options.lane_span_unroll;
    emit_options.tile_point_fallback = options.tile_point_fallback;
    emit_options.tile_min_blocks = options.tile_min_blocks;
    emit_options.unroll = UnrollPolicy{options.unroll_budget, options.runtime_unroll};
    if (rolled_kernels.count(kernel.name)) emit_options.unroll.runtime_factor = 1;
    // A scanned gather's own budget, where it is tighter than the program's (0: none).
    if (scanned_kernels.count(kernel.name) && options.scan_gather_unroll_budget > 0 &&
        (options.unroll_budget == 0 || options.unroll_budget > options.scan_gather_unroll_budget))
      emit_options.unroll.budget = options.scan_gather_unroll_budget;
    emit_options.stage_loops = options.stage_loops;
    emit_options.row_stage_unroll_loads = options.row_stage_unroll_loads;
    emit_options.outer_size = options.outer_size;
    if (auto note = layout_notes.find(kernel.name); note != layout_notes.end())
      emit_options.schedule_note = note->second;
    if (auto note = cooperative_notes.find(kernel.name); note != cooperative_notes.end()) {
      emit_options.schedule_note +=
          (emit_options.schedule_note.empty() ? "" : "\n") + note->second;
    }
    if (auto note = notes.find(kernel.name); note != notes.end()) {
      emit_options.schedule_note +=
          (emit_options.schedule_note.empty() ? "" : "\n") + note->second;
    }
    if (options.streaming_loads && !options.binned_reread_streaming &&
        reread_kernels.count(kernel.name)) {
      emit_options.schedule_note +=
          std::string(emit_options.schedule_note.empty() ? "" : "\n") +
          "no evict-first hint on span loads: other records read the same values from other "
          "buckets (ADJOINT_TUNE_BINNED_REREAD_STREAMING)";
    }
    if (auto claim = claims.find(kernel.name); claim != claims.end())
      emit_options.claim_slot_tensor = claim->second;
    emit_options.claim_counts_up = counting_claims.count(kernel.name) > 0;
    emit_options.lane_scan = lane_scans.count(kernel.name) > 0;
    if (auto store = stores.find(kernel.name); store != stores.end())
      emit_options.store_scatter_target = store->second;
    if (auto transpose = transposes.find(kernel.name); transpose != transposes.end())
      emit_options.tiled_transpose = transpose->second;
    if (auto store = fused_stores.find(kernel.name); store != fused_stores.end())
      emit_options.transposed_store = store->second;
    CompiledKernel compiled =
        emit_cuda_kernel(p, k, entry_name(p, kernel, entries), emit_options);
    for (const ir::Stage& stage : kernel.stages) {  // atomics accumulate into zeroed buffers
      if (stage.kind == ir::StageKind::kScatterAdd &&
          stage.target->name != emit_options.store_scatter_target &&
          zeroed.insert(stage.target->name).second) {
        compiled.zero_before.push_back(stage.target->name);
      }
    }
    out.deterministic &= !compiled.uses_atomics;
    out.kernels.push_back(std::move(compiled));
  }
  for (const auto* list : {&p.inputs, &p.outputs, &p.temporaries}) {
    for (const ir::Tensor& t : *list) {
      if (!unallocated.count(t->name)) out.buffers.push_back(buffer_info(t));
    }
  }
  out.pass_dump = passes.dump();
  return out;
}

}  // namespace adjoint::compiler
