// tuning_knobs: the ADJOINT_TUNE_* environment variables (docs/runtime.md, "Tuning and
// debugging knobs"). Each overrides one code-generation, op-building or launch choice; read once
// per process, they change the emitted source (so the disk cache and packages, keyed by source,
// keep the variants apart) or how the runtime launches. An invalid value is an adjoint::Error
// naming the variable, what it accepts and what it got, on every use. This is the one place
// that reads them (but for the compile knobs ADJOINT_TUNE_SPLIT_COMPILE, _NVRTC_OPTIONS,
// _BF16_CVT (runtime/kernel_binary.cpp) and _COMPILE_HUGE_PAGES (compile_huge_pages.cpp),
// read where each build compiles): the compiler gets its knobs as LowerOptions, the ops as ops::BuildOptions.
#pragma once

#include <functional>
#include <string>

#include "compiler/lower.h"
#include "ops/build_options.h"

namespace adjoint::runtime {

/// The knobs' values; every default is the compiler's or the runtime's own default
/// (runtime_tuning_knobs_test checks that they agree with LowerOptions).
struct TuningKnobs {
  int block_size = 0;
  int vector_bytes = 0;
  int binned_whole_axis_records_max = 2;
  bool streaming_loads = true;
  bool streaming_stores = true;
  /// ADJOINT_TUNE_BINNED_REREAD_STREAMING (LowerOptions::binned_reread_streaming).
  bool binned_reread_streaming = false;
  int reduction_split = -1;
  int thread_tile = -1;
  bool tile_prefer_vector = true;
  int tile_few_parts = 2;
  /// ADJOINT_TUNE_TILE_ACCUMULATORS (LowerOptions::tile_accumulators).
  int tile_accumulators = 96;
  /// Rows of a thread-tiled kernel's block (compiler/tile_blocks.h, LowerOptions::
  /// tile_block_rows; ADJOINT_TUNE_TILE_BLOCK_ROWS, 0 for the blocks before).
  int tile_block_rows = -1;
  bool tile_partial = true;
  bool token_pair = true;
  int row_groups = -1;
  int split_threads_log2 = 0;
  bool split_count_vector = false;
  bool split_tail = true;
  int programmatic_launch = 2;
  bool temporary_arena = true;
  int partial_unroll = 0;
  /// ADJOINT_TUNE_LONG_LOOP_UNROLL (LowerOptions::long_loop_unroll).
  int long_loop_unroll = 16;
  int tile_unroll = 0;
  int tile_prefetch = 8;
  bool tile_early_copies = true;
  bool progressive_group_sums = true;
  bool tile_early_wide_reads = true;
  bool tile_uniform_ring = true;
  bool tile_point_fallback = true;
  int tile_min_blocks = -1;
  int unroll_budget = 0;
  int runtime_unroll = 0;
  std::string reduction_schedule = "auto";
  bool warp_group_fill = true;
  /// ADJOINT_TUNE_LANE_SPANS (LowerOptions::lane_spans).
  int lane_spans = 16;
  /// ADJOINT_TUNE_LANE_SPAN_UNROLL (LowerOptions::lane_span_unroll).
  int lane_span_unroll = 0;
  std::string block_reduction = "auto";
  std::string row_schedule = "auto";
  bool stage_loops = true;
  /// ADJOINT_TUNE_ROW_STAGE_UNROLL_LOADS (LowerOptions::row_stage_unroll_loads).
  int row_stage_unroll_loads = 1024;
  /// ADJOINT_TUNE_GENERIC_VECTOR_GROUPS (LowerOptions::generic_vector_groups).
  bool generic_vector_groups = true;
  /// ADJOINT_TUNE_GENERIC_TWIN (LowerOptions::generic_aligned_twin).
  bool generic_aligned_twin = true;
  /// ADJOINT_TUNE_GENERIC_LANE_GROUPS (LowerOptions::generic_lane_groups).
  bool generic_lane_groups = true;
  /// ADJOINT_TUNE_GENERIC_SPANS (LowerOptions::generic_evaluated_spans).
  bool generic_evaluated_spans = true;
  /// ADJOINT_TUNE_GENERIC_MIN_GROUPS (LowerOptions::generic_min_vector_groups).
  int generic_min_vector_groups = 1 << 15;
  /// ADJOINT_TUNE_GENERIC_INTERLEAVE (LowerOptions::generic_interleave).
  bool generic_interleave = true;
  /// ADJOINT_TUNE_GENERIC_STREAMING (LowerOptions::generic_streaming).
  bool generic_streaming = true;
  /// ADJOINT_TUNE_GENERIC_WARP_GROUPS (LowerOptions::generic_warp_groups: 0, 1 or 2).
  int generic_warp_groups = 2;
  int block_stage_width = 8;
  bool block_shared_vectors = true;
  int block_output_points = 0;
  int block_few_tokens = 7;
  int block_min_tokens = 32;
  int block_streamed_mib = 40;
  int reducing_min_groups = 0;
  bool block_split_rows = true;
  int split_warp_combine_points = 1024;
  int split_warp_combine_stages = 256;
  int binned_channels_last_min = 2;
  int binned_gather_chunk = -1;
  int scan_gather_work_max = 1 << 24;
  int scan_gather_length_max = 128;
  int scan_gather_unroll_budget = 512;
  int binned_taps_walks_max = 16;
  int binned_taps_walks_wide_max = 64;
  bool binned_scan_digits = true;
  bool binned_scan_lanes = true;
  int binned_scan_top_loads = 32;
  bool binned_packed_keys = true;
  bool binned_ranked_count = true;
  bool binned_over_atomics = true;
  int binned_subbucket_records = 16;
  int gathered_rows_min = 2;
  /// ADJOINT_TUNE_GATHERED_ROWS_SPARSE (LowerOptions::gathered_rows_skip_sparse).
  bool gathered_rows_skip_sparse = false;
  bool fused_multiply_add = true;
  int tiled_transpose_min = 16;
  bool transposed_store = true;
  bool direct_transposed_store = true;
  int gathered_lanes_min = 16;
  int gathered_lane_width = 0;
  int gathered_lane_whole_axis = 0;
  int binned_records_per_cell_min = 2;
  int binned_sparse_channels_last_min = 4;
  bool mhc_x_mix = true;  ///< ops::BuildOptions::mhc_x_mix_counts_phi
  bool mhc_dvecx = true;  ///< ops::BuildOptions::mhc_store_dvecx
};

/// The value of an environment variable, or null when unset (std::getenv; tests pass a map).
using EnvironmentLookup = std::function<const char*(const char*)>;

/// Every knob read through `lookup`; throws adjoint::Error (kInvalidArgument) naming the first
/// invalid one.
TuningKnobs read_tuning_knobs(const EnvironmentLookup& lookup);

/// The process's knobs, read from the environment on first use (an invalid value throws on
/// every use).
const TuningKnobs& tuning_knobs();

/// Copies the code-generation knobs into `options` (the launch knobs stay in TuningKnobs).
void apply_tuning_knobs(const TuningKnobs& knobs, compiler::LowerOptions& options);

/// Copies the op-building knobs (ADJOINT_TUNE_MHC_*) into `options`.
void apply_tuning_knobs(const TuningKnobs& knobs, ops::BuildOptions& options);

}  // namespace adjoint::runtime
