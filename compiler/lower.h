// lower(): the compiler's entry point, one linear pipeline from a specialized IR program to CUDA
// translation units the runtime can compile and launch:
//
//   [unfuse_fma_sums, only with LowerOptions::fused_multiply_add off]
//          -> verify -> simplify -> lower_scatter_to_gather (scanned gathers within ScanGatherOptions) -> simplify
//          -> lower_scatter_to_binned_gather (Determinism::kDefault only) -> lower_scatter_to_atomics
//          -> lay_out_gathered_reductions_for_lanes -> copy_gathered_rows_innermost
//          -> split_reductions -> derive_grid -> narrow_index_math
//          -> choose_tiled_transposes -> choose_transposed_stores
//          -> emit_cuda (one unit per kernel)
//
// Generic programs (ir/dynamic_sizes.h: extents that are kernel parameters) take a pipeline of
// their own, compiler/lower_generic.h.
//
// With LowerOptions::record_passes the IR after each pass, or "(unchanged)" when the pass
// returned the very same program, is recorded in CompiledProgram::pass_dump.
#pragma once

#include <optional>

#include "compiler/compiled_program.h"
#include "compiler/cuda_emitter.h"
#include "compiler/unroll_policy.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// kDefault: deterministic unless a kernel has no deterministic strategy (data-dependent
/// scatters become binned gathers, lower_scatter_to_binned_gather.h; the few it cannot take
/// fall back to atomics). kAllowAtomics: atomics are welcome wherever they are faster: a
/// data-dependent scatter becomes atomics unless its binned gather is the faster
/// (binned_over_atomics_min_broadcast; LowerOptions::binned_over_atomics), and the program is
/// deterministic if no kernel kept atomics. Part of the runtime's cache key.
enum class Determinism { kDefault, kAllowAtomics };

struct LowerOptions {
  Determinism determinism = Determinism::kDefault;
  int arch = 90;  ///< target compute capability (major * 10 + minor)
  bool record_passes = false;
  /// Threads per block of the grids derive_grid derives (0: kDefaultBlockSize, 128 for
  /// thread-tiled kernels). A multiple of
  /// 32 in [32, 1024]; kernels of rank 0 keep one warp, explicit grids keep their own.
  int block_size = 0;
  /// The most bytes of the widest target one vector group stores (0: kDefaultGroupBytes, 16).
  /// 8, 16 or 32; 32 gives each thread two 16-byte stores.
  int vector_bytes = 0;
  /// DeriveGridOptions::reducing_min_groups: the fewest vector groups of a kernel whose points
  /// each reduce serially over at least 64 iterations (0: derived, 2^17; 32768 the rule before).
  /// ADJOINT_TUNE_REDUCING_MIN_GROUPS.
  int64_t reducing_min_groups = 0;
  /// Whole-axis vector groups (vector_groups.h, derived_vector_width) for the broadcast-
  /// innermost binned gather and its chunk sums where records / cells is at most this (3
  /// channels per thread at one record per walk); 0: power-of-two widths only
  /// (BinnedGatherOptions::whole_axis_records_max, ADJOINT_TUNE_WHOLE_AXIS_GROUPS).
  int64_t binned_whole_axis_records_max = 2;
  /// Span loads (ld.global.cs) and group stores (st.global.cs) of vector-group kernels carry
  /// evict-first streaming hints (templates/adjoint_memory.cuh), each switched on its own. On by
  /// default: on the H100 they raised the upsample backward cases from 80-89% to 84-105% of copy
  /// bandwidth, except 16x256x64x64->128^2 in f16/bf16 (95% -> 75%/89%); see docs/compiler.md.
  bool streaming_loads = true;
  bool streaming_stores = true;
  /// Span loads of the kernels that walk binned records whose values other records read too
  /// (RereadRowKernels, lower_scatter_to_binned_gather.h: grid_sampler's factors, chunk sums
  /// and gather where a point's taps are several records or walks) take streaming_loads'
  /// evict-first hint when true (before); false (the default): plain loads there, every other
  /// kernel unchanged. On the H100 (docs/results/h100-2026-11-27-gridknobs) false made 14 of
  /// the 56 grid_sampler cases it changes 2.5-7% faster and none slower by more than 1.1%
  /// (ADJOINT_TUNE_BINNED_REREAD_STREAMING; docs/compiler.md "Streaming hints").
  bool binned_reread_streaming = false;
  /// Split reductions (split_reductions.h): -1 derives the number of partials G from the
  /// shapes, 0 never splits, G >= 2 forces G wherever it divides the split axis.
  int reduction_split = -1;
  /// The thread count a derived split aims at (split_reductions.h's target_threads; 0: its
  /// default). A power of two in [2^10, 2^24].
  int64_t split_target_threads = 0;
  /// ReductionSplitOptions::count_vector: a tiled kernel's split counts the threads it launches
  /// (points x G / (R x V)); false (the default): points x G / R
  /// (ADJOINT_TUNE_SPLIT_COUNT_VECTOR).
  bool split_count_vector = false;
  /// ReductionSplitOptions::warp_combine_points: a split's combine with fewer points than this
  /// runs a warp per point; 0 never. ADJOINT_TUNE_SPLIT_WARP_COMBINE.
  int64_t split_warp_combine_points = 1024;
  /// ReductionSplitOptions::multi_stage_warp_combine_partials: a combine of more partials than
  /// this in a kernel of several stages runs a warp per point as well (same points
  /// condition); 0 never. ADJOINT_TUNE_SPLIT_WARP_COMBINE_STAGES.
  int64_t split_warp_combine_stages = 256;
  /// ReductionSplitOptions::tail: G need not divide the split axis (the combine sums the
  /// tail). ADJOINT_TUNE_SPLIT_TAIL (1, the default; 0: G divides the axis, as before).
  bool split_tail = true;
  /// EmitOptions::partial_unroll: the unroll factor of loops with a long constant trip count
  /// (0: NVVM's choice, full unrolling). In [0, 64]. 0 by default: 4 cut mhc_pre_backward's
  /// cold compile at B*S=4096, D=2560 from seconds to ~0.2 s on the H100 but made its kernels
  /// 1.24-1.83x slower (docs/runtime.md), so it is a knob (ADJOINT_TUNE_PARTIAL_UNROLL).
  /// Applies while unroll_budget is 0; a budget decides those loops itself.
  int partial_unroll = 0;
  /// EmitOptions::long_loop_unroll (ADJOINT_TUNE_LONG_LOOP_UNROLL; 0: NVVM's choice, before).
  int long_loop_unroll = 16;
  /// EmitOptions::tile_unroll: 0 derived, N in [1, 64] the unroll factor of thread-tiled
  /// reduction loops (ADJOINT_TUNE_TILE_UNROLL).
  int tile_unroll = 0;
  /// EmitOptions::tile_prefetch: 0 the tiled kernels of before (an alignment check per access),
  /// 1 one alignment check per kernel, N in [2, 64] also N iterations' streamed spans loaded
  /// ahead (ADJOINT_TUNE_TILE_PREFETCH).
  int tile_prefetch = 8;
  /// EmitOptions::tile_early_copies (ADJOINT_TUNE_TILE_EARLY_COPIES).
  bool tile_early_copies = true;
  /// EmitOptions::progressive_group_sums (ADJOINT_TUNE_PROGRESSIVE_SUMS).
  bool progressive_group_sums = true;
  /// EmitOptions::tile_early_wide_reads (ADJOINT_TUNE_TILE_EARLY_WIDE_READS).
  bool tile_early_wide_reads = true;
  /// EmitOptions::tile_uniform_ring (ADJOINT_TUNE_TILE_UNIFORM_RING).
  bool tile_uniform_ring = true;
  /// EmitOptions::tile_point_fallback (ADJOINT_TUNE_TILE_FALLBACK: 1, the default, the
  /// misaligned copy point by point in rolled loops; 0 the tiled body of before).
  bool tile_point_fallback = true;
  /// EmitOptions::tile_min_blocks (ADJOINT_TUNE_TILE_MIN_BLOCKS): -1 derived, 0 none or N in
  /// [1, 32].
  int tile_min_blocks = -1;
  /// The unroll policy's budget (unroll_policy.h, EmitOptions::unroll): the IR nodes an
  /// unrolled reduction nest may hold, in [0, 2^20]; 0 (default) switches it off (NVVM unrolls
  /// long constant loops completely, partial_unroll applies): kSuggestedUnrollBudget cuts
  /// mhc_pre_backward's compile from seconds to ~0.1 s but makes its kernels 12-47% slower on
  /// the H100. ADJOINT_TUNE_UNROLL_BUDGET.
  int64_t unroll_budget = 0;
  /// The unroll factor of loops whose trip count is known only at run time and not provably
  /// at most 3 (those are never unrolled): 0 (default: no pragma, NVVM's choice), 1 (not
  /// unrolled) or a factor in [2, 16]. ADJOINT_TUNE_RUNTIME_UNROLL.
  int runtime_unroll = 0;
  /// Reduction schedule (reduction_schedule.h): "auto" derives serial or warp-cooperative per
  /// kernel, "serial" never uses warp lanes, "warp" uses them wherever the kernel allows.
  std::string reduction_schedule = "auto";
  /// ReductionScheduleOptions::fill_warps: a warp kernel's points per warp halve while its
  /// warps are fewer than the warp schedule's minimum (1024); false keeps the widest group.
  /// ADJOINT_TUNE_WARP_GROUP_FILL.
  bool warp_group_fill = true;
  /// EmitOptions::lane_spans (ADJOINT_TUNE_LANE_SPANS: 0, 8 or 16 bytes a lane reads of a span
  /// per trip; 0 the strided warp lanes of before). Kernels laid out for lanes by
  /// gathered_reduction_lanes keep the strided lanes.
  int lane_spans = 16;
  /// EmitOptions::lane_span_unroll (ADJOINT_TUNE_LANE_SPAN_UNROLL; 0 derived).
  int lane_span_unroll = 0;
  /// Block reductions (block_reductions.h): "auto" gives skinny-GEMM kernels a block schedule
  /// (shared-memory staging, register tiles), "off" never. ADJOINT_TUNE_BLOCK_REDUCTION.
  std::string block_reduction = "auto";
  /// BlockReductionOptions::max_stage_width: the most consecutive iterations a block
  /// reduction's staging thread loads, 1, 2, 4 or 8 (vector loads; default).
  /// ADJOINT_TUNE_BLOCK_STAGING.
  int block_stage_width = 8;
  /// BlockReductionOptions::shared_vectors: 16-byte shared reads in block reductions' compute
  /// loops where the tile allows. ADJOINT_TUNE_BLOCK_SHARED_VECTORS.
  bool block_shared_vectors = true;
  /// BlockReductionOptions::output_points: Mk, the outputs per thread of a block reduction's
  /// tile (0: derived). ADJOINT_TUNE_BLOCK_OUTPUT_POINTS.
  int block_output_points = 0;
  /// BlockReductionOptions::min_tokens: the fewest tokens for a block reduction without block
  /// axes; fewer go to the split reduction, which streams the weights (1: any token count).
  /// ADJOINT_TUNE_BLOCK_MIN_TOKENS.
  int64_t block_min_tokens = 32;
  /// BlockReductionOptions::streamed_max_bytes, in MiB: the most weight bytes, read once per
  /// token, that a narrow one may stream (default 40; few_tokens_max_bytes is twice it).
  /// ADJOINT_TUNE_BLOCK_STREAMED_MB.
  int64_t block_streamed_mib = 40;
  /// ReductionSplitOptions::block_few_tokens, a mask in [0, 15] (split_reductions.h): block
  /// splits at few tokens take tiles of one token per lane (1), warp combines of many partials
  /// (2), more partials (4) and, off by default, chunks of 64 under rule 4 (8).
  /// ADJOINT_TUNE_BLOCK_FEW_TOKENS.
  int block_few_tokens = 7;
  /// ReductionSplitOptions::block_split_rows (ADJOINT_TUNE_BLOCK_SPLIT_ROWS).
  bool block_split_rows = true;
  /// BinnedGatherOptions::channels_last_min: the fewest broadcast elements (grid_sampler's
  /// channels) for which a binned gather reads and writes broadcast-innermost copies; 0 never.
  int64_t binned_channels_last_min = 2;
  /// BinnedGatherOptions::records_per_cell_min: the fewest records per cell (on average) for
  /// the broadcast-innermost layout; 0 or 1 takes it whatever the records
  /// (ADJOINT_TUNE_BINNED_RECORDS_PER_CELL).
  int64_t binned_records_per_cell_min = 2;
  /// BinnedGatherOptions::sparse_channels_last_min: below binned_records_per_cell_min records
  /// per cell, the fewest broadcast elements for the broadcast-innermost layout; 0 never
  /// (ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST).
  int64_t binned_sparse_channels_last_min = 4;
  /// BinnedGatherOptions::gather_chunk: the slots per chunk of a binned gather's walk (buckets
  /// that hold an aligned chunk add chunk sums); -1 derived from the records per cell, 0 walks
  /// every bucket sequentially.
  int64_t binned_gather_chunk = -1;
  /// ScanGatherOptions (lower_scatter_to_gather.h, Determinism::kDefault only): data-dependent
  /// scatters whose target elements x records per element are at most scan_gather_work_max, with
  /// at most scan_gather_length_max records per element, become one gather kernel that scans
  /// the records (docs/compiler.md "Scanned gather"); 0 never (ADJOINT_TUNE_SCAN_GATHER,
  /// ADJOINT_TUNE_SCAN_GATHER_LENGTH).
  int64_t scan_gather_work_max = int64_t{1} << 24;
  int64_t scan_gather_length_max = 128;
  /// The unroll budget (unroll_policy.h) of the scanned gathers' kernels, IR nodes: NVVM's
  /// complete unrolling of their scans gave 72 KB cubins for 80 records
  /// (ADJOINT_TUNE_SCAN_GATHER_UNROLL; 0: no budget of their own).
  int64_t scan_gather_unroll_budget = 512;
  /// BinnedGatherOptions::taps_walks_max: the most taps x broadcast elements (grid_sampler's
  /// taps x channels) for which a binned gather bins one record per point and walks a bucket
  /// per tap (binned_taps.h); 0 keeps every tap a record (ADJOINT_TUNE_BINNED_TAPS).
  int64_t binned_taps_walks_max = 16;
  /// BinnedGatherOptions::taps_walks_wide_max: up to this many taps x broadcast elements the
  /// taps also go into the gather where points >= cells and the gather is large
  /// (ADJOINT_TUNE_BINNED_TAPS_WIDE; 0: binned_taps_walks_max alone).
  int64_t binned_taps_walks_wide_max = 64;
  /// BinnedGatherOptions::scan_digits: the binned gather's offsets scanned by base-32 digits
  /// (K + 1 kernels for K levels of chunk sums); false: the chained levels, 2K + 1 kernels
  /// (ADJOINT_TUNE_BINNED_SCAN=0).
  bool binned_scan_digits = true;
  /// BinnedGatherOptions::scan_lanes (with binned_scan_digits): the offsets on warp lanes,
  /// K + 1 kernels, the last one a shuffle scan (ADJOINT_TUNE_BINNED_SCAN=2, the default; 1:
  /// by digits, the kernels of before).
  bool binned_scan_lanes = true;
  /// BinnedGatherOptions::scan_top_loads (ADJOINT_TUNE_BINNED_SCAN_TOP).
  int64_t binned_scan_top_loads = 32;
  /// BinnedGatherOptions::packed_keys: the fill writes each record's slot key with its id, so
  /// that the sort does not recompute the key (ADJOINT_TUNE_BINNED_PACKED_KEYS=0: ids only).
  bool binned_packed_keys = true;
  /// BinnedGatherOptions::ranked_count: the count's atomics hand out each record's slot in its
  /// bucket, and the fill stores without atomics (ADJOINT_TUNE_BINNED_RANKED_COUNT=0: the fill
  /// claims its slots).
  bool binned_ranked_count = true;
  /// Under kAllowAtomics, the data-dependent scatters whose binned gather is faster than their
  /// atomics (enough broadcast elements for their taps: binned_over_atomics_min_broadcast) take
  /// the default's deterministic gather, scanned where small enough, else binned
  /// (ADJOINT_TUNE_BINNED_OVER_ATOMICS=1, the default); false: every such scatter is atomics
  /// under kAllowAtomics (the rule before; how the atomics lowering is measured at any size).
  bool binned_over_atomics = true;
  /// BinnedGatherOptions::subbucket_records: the records per sub-bucket a binned sort aims at
  /// where cells hold many records on average; 0 never cuts buckets.
  int64_t binned_subbucket_records = 16;
  /// copy_gathered_rows_innermost's min_extent: the shortest reduced axis whose data-dependent
  /// reads go through a copy with that axis innermost (grid_sampler's grad_grid); 0 never.
  int64_t gathered_rows_min = 2;
  /// copy_gathered_rows_innermost's skip_sparse: no row copy for a stage of fewer points than
  /// the tensor has rows (false, the default: the copies of before;
  /// ADJOINT_TUNE_GATHERED_ROWS_SPARSE).
  bool gathered_rows_skip_sparse = false;
  /// lay_out_gathered_reductions_for_lanes' min_extent: the shortest reduced axis (grid_sampler's
  /// channels) of a gathered reduction that is laid out for warp lanes (grad_grid); 0 never
  /// (ADJOINT_TUNE_GATHERED_LANES).
  int64_t gathered_lanes_min = 16;
  /// ReductionScheduleOptions::preferred_lanes: lanes per point of those kernels, 0 derived
  /// (16 for at most 4 iterations outside the lane axis, else 32), 32 (a warp), 16, 8 or 4
  /// (ADJOINT_TUNE_GATHERED_LANE_WIDTH).
  int gathered_lane_width = 0;
  /// ReductionScheduleOptions::whole_axis_lanes_max: the longest odd innermost axis (3-d
  /// grad_grid's 3 coordinates) that a kernel laid out for lanes computes whole per lane group,
  /// sharing its loads; 0 (default) never, one point per lane group (measured faster on the
  /// H100; ADJOINT_TUNE_GATHERED_WHOLE_AXIS).
  int64_t gathered_lane_whole_axis = 0;
  /// tiled_transpose.h: the fewest rows and columns of a copy kernel that is a batched
  /// transposition (the binned gather's broadcast-innermost copies) for which it is emitted as
  /// shared-memory tiles; 0 never (ADJOINT_TUNE_TILED_TRANSPOSE).
  int64_t tiled_transpose_min = 16;
  /// transposed_store.h: a tiled copy of a kernel's target is fused into that kernel (the
  /// binned gather writes grad_input transposed through shared memory; no copy kernel, no
  /// gathered temporary); false keeps the two kernels (ADJOINT_TUNE_TRANSPOSED_STORE=0).
  bool transposed_store = true;
  /// transposed_store.h, "Direct stores": where a kernel's vector groups are whole rows of the
  /// copy's source (the binned gather at 3 f32 channels under whole-axis groups), the copy is
  /// fused as one store per channel from each thread, tiled or not; false: only tiled copies
  /// are fused, staged (ADJOINT_TUNE_DIRECT_STORE=0).
  bool direct_transposed_store = true;
  /// Thread tiles (thread_tiles.h): -1 derives them, 0 never tiles, R in [2, 64] forces a tile
  /// of R points wherever the chosen axis' extent allows (ADJOINT_TUNE_THREAD_TILE).
  int thread_tile = -1;
  /// Derived tiles that take their axis in parts give way to the vector width
  /// (ThreadTileOptions::prefer_vector; ADJOINT_TUNE_TILE_PREFER_VECTOR, 0 for the tiles before).
  bool tile_prefer_vector = true;
  /// ThreadTileOptions::few_parts (ADJOINT_TUNE_TILE_FEW_PARTS; 0 for the tiles before).
  int tile_few_parts = 2;
  /// ThreadTileOptions::long_tile_accumulators (ADJOINT_TUNE_TILE_ACCUMULATORS): the most R x
  /// V accumulators of a long tile (thread_tiles.h, tile_accumulator_limit: x_mix's partials,
  /// 24 k x 4 d), in [16, 256]; 64 (or less) the tiles before.
  int tile_accumulators = 96;
  /// TileBlockOptions::forced_rows (tile_blocks.h, ADJOINT_TUNE_TILE_BLOCK_ROWS): -1 derives
  /// the rows of a thread-tiled kernel's block, 0 or 1 keeps one row (the blocks before), Y
  /// forces Y rows where they fit.
  int tile_block_rows = -1;
  /// ThreadTileOptions::partial_tiles: an axis no tile divides (a prime token count) takes a
  /// tile with a partial last tile (ADJOINT_TUNE_TILE_PARTIAL; false for the tiles before).
  bool tile_partial = true;
  /// Set by lower_outer_generic only (compiler/lower_outer_generic.h): every kernel's
  /// outermost linear extent, the value of a generic program's batch size, is emitted as that
  /// size's kernel parameter (EmitOptions::outer_size).
  std::optional<OuterSizeParam> outer_size;
  /// Generic programs whose one size is an outer batch take lower_outer_generic (the
  /// specialized pipeline, the batch a kernel parameter); false sends them through
  /// lower_generic's own pipeline (tests compare the two).
  bool outer_generic = true;
  /// Generic programs whose two sizes are a token pair (mHC's batch and seq over per-token
  /// tensors) take lower_outer_generic as one token axis (the specialized pipeline, both sizes
  /// kernel parameters); false sends them through lower_generic's own pipeline, the kernels of
  /// before (ADJOINT_TUNE_TOKEN_PAIR=0).
  bool token_pair = true;
  /// Generic kernels whose innermost extent is a constant that their group of points divides
  /// take a vector group (spans, one reduction loop per group) instead of tail-guarded points
  /// (ADJOINT_TUNE_GENERIC_VECTOR_GROUPS=0: the guarded points, before).
  bool generic_vector_groups = true;
  /// Generic thread-tiled kernels are written twice, as specialized ones (EmitOptions::
  /// tile_prefetch): behind one alignment test of their base pointers, a copy without a check
  /// per access whose spans read per tile point after the reductions are copied to shared
  /// memory (cp.async) before them, and a long token loop's spans streamed through a ring of
  /// shared memory, else each point alone. false (ADJOINT_TUNE_GENERIC_TWIN=0): one copy with
  /// a check per access, before.
  bool generic_aligned_twin = true;
  /// Warp-cooperative generic kernels whose innermost extent is a constant multiple of the
  /// group of points take a vector group: each warp computes the group's points, its lanes
  /// striding over the reduction once for all of them (loads that do not move with the group
  /// read once). Only where generic_warp_groups gave the kernel no group. false
  /// (ADJOINT_TUNE_GENERIC_LANE_GROUPS=0): a point per warp, before.
  bool generic_lane_groups = true;
  /// Generic vector-group kernels take spans of the loads their expressions evaluate
  /// unconditionally without an interval proof of the other indices (EmitOptions::
  /// spans_of_evaluated_loads: x_mix partials' x and dh_mix, indexed by a split token). false
  /// (ADJOINT_TUNE_GENERIC_SPANS=0): element loads there, before.
  bool generic_evaluated_spans = true;
  /// A generic kernel whose domain is static takes a vector group only while at least this
  /// many groups remain (derive_grid's kMinVectorGroups rule; fewer: a thread per point).
  /// 0 (ADJOINT_TUNE_GENERIC_MIN_GROUPS=0): every such kernel is grouped, before.
  int64_t generic_min_vector_groups = int64_t{1} << 15;
  /// EmitOptions::interleave_size_axes where lower_generic finds it applies; false
  /// (ADJOINT_TUNE_GENERIC_INTERLEAVE=0): the plain innermost-first decode.
  bool generic_interleave = true;
  /// Generic vector-group kernels take the streaming cache hints of LowerOptions::
  /// streaming_loads and streaming_stores (with generic_aligned_twin); false
  /// (ADJOINT_TUNE_GENERIC_STREAMING=0): plain loads and stores, before.
  bool generic_streaming = true;
  /// Warp-cooperative generic kernels: 2 (default) computes a group of 2-8 innermost points per
  /// warp where a reduction loads a tensor that does not move with that axis, and a tile of
  /// tokens per warp where it loads one that does not move with them (lower_generic.cpp,
  /// generic_warp_group); 1 the groups only; 0 none (then generic_lane_groups decides; both off:
  /// one point per warp, the kernels of before) (ADJOINT_TUNE_GENERIC_WARP_GROUPS).
  int generic_warp_groups = 2;
  /// fma_sum reduces (ir/expr.h) accumulate with fmaf/fma, as the IR specifies. false
  /// (ADJOINT_TUNE_FMA=0) turns them into plain sums first (unfuse_fma.h): the kernels of
  /// before, for measuring; results then differ from the interpreter's in the last bits.
  bool fused_multiply_add = true;
  /// Row groups (row_groups.h): -1 derives them, 0 never fuses, R in [1, 1024] fuses with R
  /// rows per block (ADJOINT_TUNE_ROW_GROUPS).
  int row_groups = -1;
  /// How row-group kernels run their rows (row_groups.h RowSchedule): "auto", "block" (the
  /// block strides over each stage, barriers between) or "thread" (a row per thread)
  /// (ADJOINT_TUNE_ROW_SCHEDULE).
  std::string row_schedule = "auto";
  /// Row-group kernels run the stages that repeat up to their tensors as loops (stage_loops.h,
  /// EmitOptions::stage_loops); false writes every stage out, as before
  /// (ADJOINT_TUNE_STAGE_LOOPS=0).
  bool stage_loops = true;
  /// EmitOptions::row_stage_unroll_loads (ADJOINT_TUNE_ROW_STAGE_UNROLL_LOADS).
  int64_t row_stage_unroll_loads = 1024;
};

/// Lowers `program`. Throws adjoint::Error (kInvalidProgram) when it fails verification or an
/// explicit grid configuration does not cover its kernel's domain, and (kInvalidArgument) when
/// `options.block_size`, `options.vector_bytes`, `options.reduction_split` or
/// `options.split_target_threads`, `options.partial_unroll`, `options.unroll_budget` or
/// `options.runtime_unroll` or `options.row_groups` is not one of the values
/// documented above.
CompiledProgram lower(const ir::Program& program, const LowerOptions& options);

}  // namespace adjoint::compiler
