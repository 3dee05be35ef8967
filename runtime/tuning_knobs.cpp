// tuning_knobs: parsing the ADJOINT_TUNE_* variables and handing them to the compiler and the ops.
#include "runtime/tuning_knobs.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "compiler/block_reductions.h"
#include "compiler/reduction_schedule.h"
#include "compiler/row_groups.h"
#include "ir/error.h"

namespace adjoint::runtime {
namespace {

/// The integer value of environment variable `name` (`fallback` when unset or empty), which
/// must be one of the values `accepts` allows; otherwise an adjoint::Error naming the variable
/// and `valid`.
template <typename Accepts>
int parse_integer_knob(const EnvironmentLookup& lookup, const char* name, int fallback,
                       Accepts accepts, const char* valid) {
  const char* text = lookup(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || value < INT32_MIN || value > INT32_MAX ||
      !accepts(static_cast<int>(value))) {
    throw Error(std::string(name) + ": expected " + valid + ", got '" + text + "'",
                ErrorCode::kInvalidArgument);
  }
  return static_cast<int>(value);
}

}  // namespace

TuningKnobs read_tuning_knobs(const EnvironmentLookup& lookup) {
  TuningKnobs knobs;
  auto integer_knob = [&](const char* name, int fallback, auto accepts, const char* valid) {
    return parse_integer_knob(lookup, name, fallback, accepts, valid);
  };
  knobs.block_size = integer_knob(
      "ADJOINT_TUNE_BLOCK_SIZE", 0,
      [](int v) { return v == 0 || (v >= 32 && v <= 1024 && v % 32 == 0); },
      "0 (derive) or a multiple of 32 in [32, 1024]");
  knobs.vector_bytes = integer_knob(
      "ADJOINT_TUNE_VECTOR_BYTES", 0,
      [](int v) { return v == 0 || v == 8 || v == 16 || v == 32; }, "0 (derive), 8, 16 or 32");
  knobs.binned_whole_axis_records_max = integer_knob(
      "ADJOINT_TUNE_WHOLE_AXIS_GROUPS", 2, [](int v) { return v >= 0 && v <= (1 << 20); },
      "0 (power-of-two vector widths only) or the most records per cell (records / cells) for "
      "which a binned gather takes a cell's broadcast elements (3 channels) per thread, at most "
      "1048576");
  knobs.direct_transposed_store =
      integer_knob("ADJOINT_TUNE_DIRECT_STORE", 1, [](int v) { return v == 0 || v == 1; },
                   "0 (only tiled copies are fused, staged in shared memory) or 1 (a copy whose "
                   "source rows are whole vector groups is fused as direct stores)") == 1;
  const int streaming = integer_knob(
      "ADJOINT_TUNE_STREAMING", 1, [](int v) { return v >= 0 && v <= 3; },
      "0 (none), 1 (loads and stores), 2 (stores only) or 3 (loads only)");
  knobs.streaming_loads = streaming == 1 || streaming == 3;
  knobs.streaming_stores = streaming == 1 || streaming == 2;
  knobs.binned_reread_streaming =
      integer_knob("ADJOINT_TUNE_BINNED_REREAD_STREAMING", 0,
                   [](int v) { return v == 0 || v == 1; },
                   "0 (plain span loads in the binned walks whose records share reads) or 1 "
                   "(they take the streaming hints of ADJOINT_TUNE_STREAMING, as before)") == 1;
  knobs.reduction_split = integer_knob(
      "ADJOINT_TUNE_REDUCTION_SPLIT", -1, [](int v) { return v >= -1 && v != 1 && v <= 4096; },
      "-1 (derive), 0 (never split) or a number of partials in [2, 4096]");
  knobs.thread_tile = integer_knob(
      "ADJOINT_TUNE_THREAD_TILE", -1, [](int v) { return v >= -1 && v != 1 && v <= 64; },
      "-1 (derive), 0 (never tile) or a thread tile of 2 to 64 points");
  knobs.tile_prefer_vector =
      integer_knob(
          "ADJOINT_TUNE_TILE_PREFER_VECTOR", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a derived thread tile that takes its axis in parts gives way to the vector "
          "width) or 0 (it keeps its points and the vector width shrinks: the tiles before)") == 1;
  knobs.tile_partial =
      integer_knob(
          "ADJOINT_TUNE_TILE_PARTIAL", 1, [](int v) { return v == 0 || v == 1; },
          "1 (an axis no thread tile divides takes one with a partial last tile) or 0 (only "
          "tiles that divide their axis: the tiles before)") == 1;
  knobs.token_pair =
      integer_knob(
          "ADJOINT_TUNE_TOKEN_PAIR", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a generic program whose batch and seq are one contiguous token axis takes the "
          "specialized pipeline's kernels) or 0 (lower_generic's own pipeline: the kernels "
          "before)") == 1;
  knobs.row_groups = integer_knob(
      "ADJOINT_TUNE_ROW_GROUPS", -1, [](int v) { return v >= -1 && v <= 1024; },
      "-1 (derive), 0 (never fuse row groups) or rows per block in [1, 1024]");
  knobs.split_threads_log2 = integer_knob(
      "ADJOINT_TUNE_SPLIT_THREADS", 0, [](int v) { return v == 0 || (v >= 10 && v <= 24); },
      "0 (default) or the log2 of the threads a derived split aims at, in [10, 24]");
  knobs.split_count_vector =
      integer_knob(
          "ADJOINT_TUNE_SPLIT_COUNT_VECTOR", 0, [](int v) { return v == 0 || v == 1; },
          "1 (a thread-tiled split counts the threads it launches, points x G / (R x V)) or 0 "
          "(points x G / R: the count before)") == 1;
  knobs.split_tail =
      integer_knob(
          "ADJOINT_TUNE_SPLIT_TAIL", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a split's G need not divide the axis: the combine sums the tail) or 0 (G divides "
          "it: the splits before)") == 1;
  knobs.programmatic_launch = integer_knob(
      "ADJOINT_TUNE_PROGRAMMATIC_LAUNCH", 2, [](int v) { return v >= 0 && v <= 2; },
      "2 (every kernel launched with programmatic stream serialization on sm_90 and later), 1 "
      "(only kernels of at most two blocks per SM) or 0 (plain launches)");
  knobs.temporary_arena =
      integer_knob(
          "ADJOINT_TUNE_TEMPORARY_ARENA", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a launch's temporaries share one stream-ordered allocation, those zeroed before "
          "their first use zeroed by one memset ahead of the first kernel) or 0 (an allocation "
          "and a memset each, as before: what compute-sanitizer's bounds checks see best)") == 1;
  knobs.partial_unroll = integer_knob(
      "ADJOINT_TUNE_PARTIAL_UNROLL", 0, [](int v) { return v >= 0 && v <= 64; },
      "0 (NVVM's choice: long constant loops unrolled completely) or an unroll factor in "
      "[1, 64]");
  knobs.long_loop_unroll = integer_knob(
      "ADJOINT_TUNE_LONG_LOOP_UNROLL", 16, [](int v) { return v >= 0 && v <= 64; },
      "an unroll factor in [1, 64] for reduction loops of more than 128 constant trips that no "
      "other rule gives a pragma, or 0 (NVVM's choice: unrolled completely, before)");
  knobs.tile_unroll = integer_knob(
      "ADJOINT_TUNE_TILE_UNROLL", 0, [](int v) { return v >= 0 && v <= 64; },
      "0 (derived) or the unroll factor of thread-tiled reduction loops, in [1, 64]");
  knobs.tile_prefetch = integer_knob(
      "ADJOINT_TUNE_TILE_PREFETCH", knobs.tile_prefetch, [](int v) { return v >= 0 && v <= 64; },
      "0 (an alignment check per access, the tiled kernels of before), 1 (one check per "
      "kernel) or the iterations of streamed spans loaded ahead, in [2, 64]");
  knobs.tile_early_copies =
      integer_knob("ADJOINT_TUNE_TILE_EARLY_COPIES", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (a tiled stage's spans per tile point copied to shared memory before its "
                   "reductions) or 0 (loaded after them)") == 1;
  knobs.progressive_group_sums =
      integer_knob("ADJOINT_TUNE_PROGRESSIVE_SUMS", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (a vector-group kernel adds its group reductions as soon as they are "
                   "computed) or 0 (all at the end)") == 1;
  knobs.tile_early_wide_reads =
      integer_knob("ADJOINT_TUNE_TILE_EARLY_WIDE_READS", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (each tile point's early-copied span read back from shared memory with "
                   "the widest aligned loads) or 0 (each element read where it is used, as "
                   "before)") == 1;
  knobs.tile_uniform_ring =
      integer_knob("ADJOINT_TUNE_TILE_UNIFORM_RING", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (a tiled kernel's ring also takes the spans that move with the tile axis "
                   "but are the same for the whole block, copied once per block and read from "
                   "shared memory) or 0 (those loaded per iteration by every thread, as "
                   "before)") == 1;
  knobs.tile_point_fallback =
      integer_knob("ADJOINT_TUNE_TILE_FALLBACK", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (a thread-tiled kernel's misaligned copy computes its points one at a "
                   "time in rolled loops) or 0 (the tiled body with a check per access, as "
                   "before)") == 1;
  knobs.tile_min_blocks = integer_knob(
      "ADJOINT_TUNE_TILE_MIN_BLOCKS", -1, [](int v) { return v >= -1 && v <= 32; },
      "-1 (derived: 5 blocks of 128 for tiled kernels with a prefetched ring and at most 48 "
      "accumulators), 0 (no minimum) or the resident blocks per SM every thread-tiled kernel's "
      "registers must allow (__launch_bounds__), in [1, 32]");
  knobs.tile_few_parts = integer_knob(
      "ADJOINT_TUNE_TILE_FEW_PARTS", 2, [](int v) { return v >= 0 && v <= 8; },
      "2 (default: an axis taken in at most 2 parts keeps its tile, 24 included), N in [1, 8] "
      "that many parts, or 0 (the tiles before)");
  knobs.tile_accumulators = integer_knob(
      "ADJOINT_TUNE_TILE_ACCUMULATORS", knobs.tile_accumulators,
      [](int v) { return v >= 16 && v <= 256; },
      "the most R x V accumulators of a long thread tile (one that keeps its whole axis, in a "
      "kernel of reductions over more than 128 iterations: x_mix's partials), in [16, 256] "
      "(96 by default; 64: the tiles before)");
  knobs.tile_block_rows = integer_knob(
      "ADJOINT_TUNE_TILE_BLOCK_ROWS", -1,
      [](int v) { return v >= -1 && v <= 1024 && (v <= 1 || (v & (v - 1)) == 0); },
      "-1 (derived: a thread-tiled kernel's block in rows of tiles by columns of vector groups "
      "where that reads less per reduction iteration), 0 or 1 (one row, the blocks before) or "
      "a power of two in [2, 1024] (that many rows where they fit)");
  knobs.unroll_budget = integer_knob(
      "ADJOINT_TUNE_UNROLL_BUDGET", knobs.unroll_budget,
      [](int v) { return v >= 0 && v <= (1 << 20); },
      "0 (no budget: NVVM unrolls long constant loops completely) or the IR nodes an "
      "unrolled loop nest may hold, in [1, 1048576] (8192 suggested)");
  knobs.runtime_unroll = integer_knob(
      "ADJOINT_TUNE_RUNTIME_UNROLL", 0, [](int v) { return v >= 0 && v <= 16; },
      "0 (NVVM's choice), 1 (not unrolled) or an unroll factor in [2, 16]");
  knobs.binned_channels_last_min = integer_knob(
      "ADJOINT_TUNE_BINNED_CHANNELS_LAST", 2, [](int v) { return v >= 0; },
      "0 (never) or the fewest broadcast elements for a broadcast-innermost binned gather");
  knobs.scan_gather_work_max = integer_knob(
      "ADJOINT_TUNE_SCAN_GATHER", 1 << 24, [](int v) { return v >= 0; },
      "0 (never) or the most target elements x records per element for which a data-dependent "
      "scatter becomes one gather kernel that scans its records (default 16777216)");
  knobs.scan_gather_length_max = integer_knob(
      "ADJOINT_TUNE_SCAN_GATHER_LENGTH", 128, [](int v) { return v >= 0; },
      "0 (never) or the most records per element that a scanned gather reads");
  knobs.scan_gather_unroll_budget = integer_knob(
      "ADJOINT_TUNE_SCAN_GATHER_UNROLL", 512, [](int v) { return v >= 0 && v <= (1 << 20); },
      "0 (no budget of their own) or the unroll budget, in IR nodes up to 1048576, of the "
      "scanned gathers' kernels");
  knobs.binned_gather_chunk = integer_knob(
      "ADJOINT_TUNE_BINNED_GATHER_CHUNK", -1, [](int v) { return v >= -1 && v <= (1 << 20); },
      "-1 (derived from the records per cell: 64, or fewer where buckets are crowded), 0 (one "
      "sequential walk per bucket) or the slots per chunk of a binned gather's walk, at most "
      "1048576");
  knobs.binned_taps_walks_max = integer_knob(
      "ADJOINT_TUNE_BINNED_TAPS", 16, [](int v) { return v >= 0; },
      "0 (every tap a record) or the most taps x broadcast elements for which a binned gather "
      "bins one record per point and walks a bucket per tap");
  knobs.binned_taps_walks_wide_max = integer_knob(
      "ADJOINT_TUNE_BINNED_TAPS_WIDE", 64, [](int v) { return v >= 0; },
      "0 (ADJOINT_TUNE_BINNED_TAPS alone) or the most taps x broadcast elements for which a "
      "binned gather also takes its taps where broadcast elements <= 8, points >= cells and the "
      "gather is large");
  const int binned_scan = integer_knob(
      "ADJOINT_TUNE_BINNED_SCAN", 2, [](int v) { return v >= 0 && v <= 2; },
      "2 (a binned gather's offsets scanned on warp lanes: one kernel per level of chunk sums "
      "and one shuffle scan for every entry), 1 (by base-32 digits: one kernel per level and "
      "one that adds each level's digits serially) or 0 (the chained levels, two kernels per "
      "level)");
  knobs.binned_scan_digits = binned_scan >= 1;
  knobs.binned_scan_lanes = binned_scan == 2;
  knobs.binned_scan_top_loads = integer_knob(
      "ADJOINT_TUNE_BINNED_SCAN_TOP", 32, [](int v) { return v >= 1 && v <= 1024; },
      "the loads per lane a binned gather's lane scan spends on its top level: its levels of "
      "chunk sums stop at 32 x this many entries, an integer in [1, 1024]");
  knobs.binned_packed_keys =
      integer_knob(
          "ADJOINT_TUNE_BINNED_PACKED_KEYS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a binned fill writes each record's bucket key with its id, 8 bytes, and the sort "
          "reads it) or 0 (ids only; the sort recomputes every key)") == 1;
  knobs.binned_ranked_count =
      integer_knob(
          "ADJOINT_TUNE_BINNED_RANKED_COUNT", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a binned count's atomics return each record's rank in its bucket, stored per "
          "record, and the fill stores without atomics) or 0 (the fill claims its slots by "
          "atomic decrements)") == 1;
  knobs.binned_over_atomics =
      integer_knob(
          "ADJOINT_TUNE_BINNED_OVER_ATOMICS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (under allow_atomics, a data-dependent scatter with enough channels for its taps "
          "takes the binned gather, the faster there) or 0 (allow_atomics: atomics for every "
          "data-dependent scatter)") == 1;
  knobs.binned_subbucket_records = integer_knob(
      "ADJOINT_TUNE_BINNED_SUBBUCKET", 16, [](int v) { return v >= 0 && v <= (1 << 20); },
      "0 (a binned sort ranks each record among its whole bucket) or the records per id range "
      "that buckets are cut into where cells hold more than twice that many on average, at most "
      "1048576");
  knobs.gathered_rows_min = integer_knob(
      "ADJOINT_TUNE_GATHERED_ROWS", 2, [](int v) { return v >= 0; },
      "0 (never) or the shortest reduced axis whose gathered reads use row-innermost copies");
  knobs.gathered_rows_skip_sparse =
      integer_knob("ADJOINT_TUNE_GATHERED_ROWS_SPARSE", 0, [](int v) { return v == 0 || v == 1; },
                   "0 (row-innermost copies wherever ADJOINT_TUNE_GATHERED_ROWS allows) or 1 "
                   "(none for a stage of fewer points than the tensor has rows)") == 1;
  knobs.fused_multiply_add =
      integer_knob(
          "ADJOINT_TUNE_FMA", 1, [](int v) { return v == 0 || v == 1; },
          "1 (fma_sum reduces accumulate with fused multiply-adds, as the IR says) or 0 (as "
          "plain sums, each product rounded: for measuring)") == 1;
  knobs.binned_records_per_cell_min = integer_knob(
      "ADJOINT_TUNE_BINNED_RECORDS_PER_CELL", 2, [](int v) { return v >= 0; },
      "the fewest records per cell for a broadcast-innermost binned gather (0 or 1: always)");
  knobs.binned_sparse_channels_last_min = integer_knob(
      "ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST", 4, [](int v) { return v >= 0; },
      "0 (the records per cell alone decide) or the fewest broadcast elements for which a binned "
      "gather with fewer records per cell takes the broadcast-innermost layout");
  knobs.gathered_lanes_min = integer_knob(
      "ADJOINT_TUNE_GATHERED_LANES", 16, [](int v) { return v >= 0; },
      "0 (never) or the shortest reduced axis of a gathered reduction laid out for warp lanes");
  knobs.tiled_transpose_min = integer_knob(
      "ADJOINT_TUNE_TILED_TRANSPOSE", 16, [](int v) { return v >= 0; },
      "0 (never) or the fewest rows and columns of a transposing copy emitted as shared-memory "
      "tiles");
  knobs.gathered_lane_width = integer_knob(
      "ADJOINT_TUNE_GATHERED_LANE_WIDTH", 0,
      [](int v) { return v == 0 || v == 32 || v == 16 || v == 8 || v == 4; },
      "0 (derived: 4 lanes per point of a gathered reduction laid out for lanes over fewer than "
      "32 elements, 16 with at most 4 taps, else 32), 32 (a warp per point), 16, 8 or 4 lanes "
      "per point");
  knobs.gathered_lane_whole_axis = integer_knob(
      "ADJOINT_TUNE_GATHERED_WHOLE_AXIS", 0, [](int v) { return v >= 0 && v <= 64; },
      "0 (default: never) or the longest odd innermost axis that a gathered reduction laid out for lanes "
      "computes whole per lane group (3-d grad_grid's 3 coordinates), in [0, 64]");
  knobs.transposed_store =
      integer_knob(
          "ADJOINT_TUNE_TRANSPOSED_STORE", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a tiled copy of a kernel's target is fused into that kernel's stores) or 0 (the "
          "copy kernel of before)") == 1;
  knobs.split_warp_combine_points = integer_knob(
      "ADJOINT_TUNE_SPLIT_WARP_COMBINE", 1024, [](int v) { return v >= 0; },
      "0 (a split's combine is a thread per point) or the points below which it is a warp per "
      "point");
  knobs.split_warp_combine_stages = integer_knob(
      "ADJOINT_TUNE_SPLIT_WARP_COMBINE_STAGES", 256, [](int v) { return v >= 0; },
      "0 (a kernel of several stages combines its splits a thread per point, before) or N: "
      "it runs a warp per point, as a one-stage combine of few points, when a combine sums "
      "more than N partials");
  knobs.block_shared_vectors =
      integer_knob(
          "ADJOINT_TUNE_BLOCK_SHARED_VECTORS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a block reduction reads its staged f32 values 16 bytes at a time where C, K and "
          "the outputs per thread allow) or 0 (one value per shared load, before)") == 1;
  knobs.block_output_points = integer_knob(
      "ADJOINT_TUNE_BLOCK_OUTPUT_POINTS", 0, [](int v) { return v >= 0 && v <= 64; },
      "0 (derived: the largest of 8, 6, 4, 3, 2 dividing the outputs) or the outputs per "
      "thread of a block reduction's tile, in [1, 64], where it divides them");
  knobs.reducing_min_groups = integer_knob(
      "ADJOINT_TUNE_REDUCING_MIN_GROUPS", 0, [](int v) { return v >= 0 && v <= (1 << 24); },
      "0 (derived: 131072) or the fewest vector groups, in [1, 16777216], of a kernel whose "
      "points each reduce serially over at least 64 iterations (32768: the rule before)");
  knobs.block_min_tokens = integer_knob(
      "ADJOINT_TUNE_BLOCK_MIN_TOKENS", 32, [](int v) { return v >= 1 && v <= 1048576; },
      "the fewest tokens for which a skinny GEMM always takes the block reduction, in [1, "
      "1048576] (default 32; fewer tokens whose weight reads stay within "
      "ADJOINT_TUNE_BLOCK_STREAMED_MB go to the split reduction, which streams the weights; 1 "
      "takes every token count, before)");
  knobs.block_streamed_mib = integer_knob(
      "ADJOINT_TUNE_BLOCK_STREAMED_MB", 40, [](int v) { return v >= 0 && v <= (1 << 20); },
      "the most MiB of weights, read once per token, that a narrow skinny GEMM of few tokens "
      "streams instead of taking the block reduction (twice that at 4 tokens or fewer), in "
      "[0, 1048576] (default 40; 0 never)");
  knobs.block_few_tokens = integer_knob(
      "ADJOINT_TUNE_BLOCK_FEW_TOKENS", 7, [](int v) { return v >= 0 && v <= 15; },
      "a mask in [0, 15] for block splits at few tokens: 1 tiles of one token per lane when "
      "tiles of four cannot fill the GPU, 2 a warp per point combines many partials, 4 more "
      "partials for one tile of many weights, 8 chunks of 64 there (default 7: the first "
      "three); 0 the splits of before");
  knobs.block_split_rows =
      integer_knob(
          "ADJOINT_TUNE_BLOCK_SPLIT_ROWS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (default: where a block split leaves few blocks, the reduced axis outside its "
          "split axis folds into the partials, each reading one row's contiguous range) or 0 "
          "(each partial reads a slice of every row, before)") == 1;
  knobs.block_stage_width = integer_knob(
      "ADJOINT_TUNE_BLOCK_STAGING", 8, [](int v) { return v == 1 || v == 2 || v == 4 || v == 8; },
      "1, 2, 4 or 8: the most consecutive iterations a block reduction's staging thread loads "
      "(8: vector loads; 1: one element per thread, the schedule of before)");
  knobs.warp_group_fill =
      integer_knob(
          "ADJOINT_TUNE_WARP_GROUP_FILL", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a warp kernel's points per warp halve while its warps are fewer than 1024) or 0 "
          "(the widest group: the warp kernels before)") == 1;
  knobs.lane_spans = integer_knob(
      "ADJOINT_TUNE_LANE_SPANS", 16, [](int v) { return v == 0 || v == 8 || v == 16; },
      "16 or 8 (the bytes a warp lane reads of each stride-1 load per trip of a cooperative "
      "reduction, consecutive iterations in one vector access) or 0 (one iteration per lane "
      "and trip, the warp kernels of before)");
  knobs.lane_span_unroll = integer_knob(
      "ADJOINT_TUNE_LANE_SPAN_UNROLL", 0, [](int v) { return v >= 0 && v <= 16; },
      "0 (derived: 4 trips of a lane-span loop unrolled, fewer past 16 span loads) or the trips "
      "unrolled, 1 to 16");
  if (const char* text = lookup("ADJOINT_TUNE_REDUCTION"); text && *text) {
    compiler::parse_reduction_mode(text, "ADJOINT_TUNE_REDUCTION");  // throws, naming it
    knobs.reduction_schedule = text;
  }
  if (const char* text = lookup("ADJOINT_TUNE_BLOCK_REDUCTION"); text && *text) {
    compiler::parse_block_reduction_mode(text, "ADJOINT_TUNE_BLOCK_REDUCTION");  // throws
    knobs.block_reduction = text;
  }
  knobs.stage_loops =
      integer_knob(
          "ADJOINT_TUNE_STAGE_LOOPS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (stages of a row-group kernel that repeat up to their tensors run as a loop) or 0 "
          "(every stage written out, the straight-line code of before)") == 1;
  knobs.row_stage_unroll_loads = integer_knob(
      "ADJOINT_TUNE_ROW_STAGE_UNROLL_LOADS", knobs.row_stage_unroll_loads,
      [](int v) { return v >= 0 && v <= (1 << 24); },
      "0 (a row-group stage of at most 64 points is always unrolled, as before) or the most "
      "memory loads its unrolled loop may hold, in [1, 16777216] (1024 default)");
  knobs.generic_vector_groups =
      integer_knob(
          "ADJOINT_TUNE_GENERIC_VECTOR_GROUPS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (generic kernels whose innermost extent is a constant that their group divides take "
          "a vector group, their token axes decoded between its warps) or 0 (tail-guarded points, "
          "the generic kernels of before)") == 1;
  knobs.generic_aligned_twin =
      integer_knob(
          "ADJOINT_TUNE_GENERIC_TWIN", 1, [](int v) { return v == 0 || v == 1; },
          "1 (generic thread-tiled kernels get the aligned copy with early cp.async copies and "
          "a ring of shared memory, as specialized kernels) or 0 (one copy with a check per "
          "access: the generic kernels of before)") == 1;
  knobs.generic_lane_groups =
      integer_knob(
          "ADJOINT_TUNE_GENERIC_LANE_GROUPS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a warp-cooperative generic kernel computes a vector group of innermost points per "
          "warp where the constant extent allows) or 0 (a point per warp, before)") == 1;
  knobs.generic_evaluated_spans =
      integer_knob(
          "ADJOINT_TUNE_GENERIC_SPANS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (generic vector groups load spans of the loads their expressions always evaluate, "
          "without an interval proof of the other indices) or 0 (element loads where the "
          "intervals prove nothing, before)") == 1;
  knobs.generic_min_vector_groups = integer_knob(
      "ADJOINT_TUNE_GENERIC_MIN_GROUPS", 1 << 15, [](int v) { return v >= 0; },
      "0 (every generic kernel whose innermost extent allows it takes a vector group, before) or "
      "N: a generic kernel of a static domain only while N groups remain (32768)");
  knobs.generic_interleave =
      integer_knob(
          "ADJOINT_TUNE_GENERIC_INTERLEAVE", 1, [](int v) { return v == 0 || v == 1; },
          "1 (generic vector-group kernels with leading runtime axes decode them between warps "
          "of 32 groups) or 0 (the innermost-first decode)") == 1;
  knobs.generic_streaming =
      integer_knob(
          "ADJOINT_TUNE_GENERIC_STREAMING", 1, [](int v) { return v == 0 || v == 1; },
          "1 (generic vector groups take the streaming cache hints of ADJOINT_TUNE_STREAMING) or "
          "0 (plain loads and stores, before)") == 1;
  knobs.generic_warp_groups = integer_knob(
      "ADJOINT_TUNE_GENERIC_WARP_GROUPS", 2, [](int v) { return v >= 0 && v <= 2; },
      "2 (warp-cooperative generic kernels compute 2-8 innermost points per warp where a "
      "reduction's loads do not move with them, and a tile of tokens where they do not move with "
      "those), 1 (the groups only) or 0 (none: ADJOINT_TUNE_GENERIC_LANE_GROUPS decides; both 0 give "
      "one point per warp, the generic kernels of before)");
  if (const char* text = lookup("ADJOINT_TUNE_ROW_SCHEDULE"); text && *text) {
    compiler::parse_row_schedule(text, "ADJOINT_TUNE_ROW_SCHEDULE");  // throws, naming it
    knobs.row_schedule = text;
  }
  // Op-building knobs: they choose the IR of mhc_pre_backward (ops/mhc.cpp), not the lowering.
  knobs.mhc_x_mix =
      integer_knob("ADJOINT_TUNE_MHC_X_MIX", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (x_mix where the direct dgamma would load more: its phi loads counted) or 0 "
                   "(its loads of x only, the rule before)") == 1;
  knobs.mhc_dvecx =
      integer_knob("ADJOINT_TUNE_MHC_DVECX", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (with the direct token sums, dvecx = dh_mix . phi stored once for dx and "
                   "dgamma) or 0 (recomputed in both: phi read twice, before)") == 1;
  return knobs;
}

const TuningKnobs& tuning_knobs() {
  static const TuningKnobs knobs = read_tuning_knobs([](const char* name) { return std::getenv(name); });
  return knobs;
}

void apply_tuning_knobs(const TuningKnobs& knobs, compiler::LowerOptions& options) {
  options.block_size = knobs.block_size;
  options.vector_bytes = knobs.vector_bytes;
  options.direct_transposed_store = knobs.direct_transposed_store;
  options.binned_whole_axis_records_max = knobs.binned_whole_axis_records_max;
  options.streaming_loads = knobs.streaming_loads;
  options.streaming_stores = knobs.streaming_stores;
  options.binned_reread_streaming = knobs.binned_reread_streaming;
  options.reduction_split = knobs.reduction_split;
  options.thread_tile = knobs.thread_tile;
  options.tile_prefer_vector = knobs.tile_prefer_vector;
  options.tile_few_parts = knobs.tile_few_parts;
  options.tile_accumulators = knobs.tile_accumulators;
  options.tile_block_rows = knobs.tile_block_rows;
  options.tile_partial = knobs.tile_partial;
  options.token_pair = knobs.token_pair;
  options.split_count_vector = knobs.split_count_vector;
  options.split_tail = knobs.split_tail;
  options.fused_multiply_add = knobs.fused_multiply_add;
  options.row_groups = knobs.row_groups;
  options.row_schedule = knobs.row_schedule;
  options.stage_loops = knobs.stage_loops;
  options.row_stage_unroll_loads = knobs.row_stage_unroll_loads;
  options.generic_vector_groups = knobs.generic_vector_groups;
  options.generic_aligned_twin = knobs.generic_aligned_twin;
  options.generic_lane_groups = knobs.generic_lane_groups;
  options.generic_evaluated_spans = knobs.generic_evaluated_spans;
  options.generic_min_vector_groups = knobs.generic_min_vector_groups;
  options.generic_interleave = knobs.generic_interleave;
  options.generic_streaming = knobs.generic_streaming;
  options.generic_warp_groups = knobs.generic_warp_groups;
  options.partial_unroll = knobs.partial_unroll;
  options.long_loop_unroll = knobs.long_loop_unroll;
  options.tile_unroll = knobs.tile_unroll;
  options.tile_prefetch = knobs.tile_prefetch;
  options.tile_early_copies = knobs.tile_early_copies;
  options.progressive_group_sums = knobs.progressive_group_sums;
  options.tile_early_wide_reads = knobs.tile_early_wide_reads;
  options.tile_uniform_ring = knobs.tile_uniform_ring;
  options.tile_point_fallback = knobs.tile_point_fallback;
  options.tile_min_blocks = knobs.tile_min_blocks;
  options.unroll_budget = knobs.unroll_budget;
  options.runtime_unroll = knobs.runtime_unroll;
  options.reduction_schedule = knobs.reduction_schedule;
  options.warp_group_fill = knobs.warp_group_fill;
  options.lane_spans = knobs.lane_spans;
  options.lane_span_unroll = knobs.lane_span_unroll;
  options.block_reduction = knobs.block_reduction;
  options.block_stage_width = knobs.block_stage_width;
  options.block_output_points = knobs.block_output_points;
  options.block_few_tokens = knobs.block_few_tokens;
  options.block_min_tokens = knobs.block_min_tokens;
  options.block_streamed_mib = knobs.block_streamed_mib;
  options.reducing_min_groups = knobs.reducing_min_groups;
  options.block_split_rows = knobs.block_split_rows;
  options.block_shared_vectors = knobs.block_shared_vectors;
  options.split_warp_combine_points = knobs.split_warp_combine_points;
  options.split_warp_combine_stages = knobs.split_warp_combine_stages;
  options.binned_channels_last_min = knobs.binned_channels_last_min;
  options.binned_gather_chunk = knobs.binned_gather_chunk;
  options.scan_gather_work_max = knobs.scan_gather_work_max;
  options.scan_gather_length_max = knobs.scan_gather_length_max;
  options.scan_gather_unroll_budget = knobs.scan_gather_unroll_budget;
  options.binned_taps_walks_max = knobs.binned_taps_walks_max;
  options.binned_taps_walks_wide_max = knobs.binned_taps_walks_wide_max;
  options.binned_scan_digits = knobs.binned_scan_digits;
  options.binned_scan_lanes = knobs.binned_scan_lanes;
  options.binned_scan_top_loads = knobs.binned_scan_top_loads;
  options.binned_packed_keys = knobs.binned_packed_keys;
  options.binned_ranked_count = knobs.binned_ranked_count;
  options.binned_over_atomics = knobs.binned_over_atomics;
  options.binned_subbucket_records = knobs.binned_subbucket_records;
  options.gathered_rows_min = knobs.gathered_rows_min;
  options.gathered_rows_skip_sparse = knobs.gathered_rows_skip_sparse;
  options.tiled_transpose_min = knobs.tiled_transpose_min;
  options.transposed_store = knobs.transposed_store;
  options.gathered_lanes_min = knobs.gathered_lanes_min;
  options.gathered_lane_width = knobs.gathered_lane_width;
  options.gathered_lane_whole_axis = knobs.gathered_lane_whole_axis;
  options.binned_records_per_cell_min = knobs.binned_records_per_cell_min;
  options.binned_sparse_channels_last_min = knobs.binned_sparse_channels_last_min;
  if (knobs.split_threads_log2 != 0)
    options.split_target_threads = int64_t{1} << knobs.split_threads_log2;
}

void apply_tuning_knobs(const TuningKnobs& knobs, ops::BuildOptions& options) {
  options.mhc_x_mix_counts_phi = knobs.mhc_x_mix;
  options.mhc_store_dvecx = knobs.mhc_dvecx;
}

}  // namespace adjoint::runtime
