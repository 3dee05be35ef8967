// split_reductions: the split-reduction schedule. A compute stage whose domain is too small to
// fill the GPU and whose value reduces over a long axis (a per-token sum over D, a token sum
// over B*S) gets the reduction in two stages: a new kernel, run just before, computes G
// partial results per point into a temporary (partial g reduces the axis' iterations
// g, g + G, g + 2G, ... below G * floor(E / G)), and the stage itself combines the G partials in
// order g = 0..G-1, then adds the tail [G * floor(E / G), E) that G leaves when it does not divide
// the extent E (so a prime token count splits as well as a power of two).
// Fixed combine order, no atomics: bitwise the same every run. The summation order is not the
// serial order of the interpreter, so float results may differ from it in the last bits.
//
// Kernels with a block reduction schedule (block_reductions.h) split into contiguous ranges
// instead: partial g reduces iterations [g E/G, (g + 1) E/G) of the split axis, g is the
// partials kernel's outermost axis, and that kernel keeps the block schedule (g as a block
// axis), so that each block stages consecutive elements; where that leaves too few blocks, the
// reduced axis outside the split axis folds into g as well (block_split_rows: partial g then
// covers one row's range). The combine is the same, except that
// with few points (fewer than block_warp_combine_points) a warp combines each point: lanes
// stride over g and meet in the fixed shuffle butterfly (reduction_schedule.h). Other splits'
// combines do the same below warp_combine_points.
//
// G is derived from the specialized shapes (ReductionSplitOptions) or forced by
// ADJOINT_TUNE_REDUCTION_SPLIT through runtime::lower_options. Each decision, and each
// reduction left serial with the reason, is reported in ScheduleNotes for the dumps.
#pragma once

#include <map>
#include <set>
#include <string>

#include "compiler/schedule_notes.h"
#include "compiler/thread_tiles.h"
#include "ir/program.h"

namespace adjoint::compiler {

struct ReductionSplitOptions {
  /// -1: derive G from the shapes; 0: never split; G >= 2: split every eligible reduction
  /// into G partials (where G divides the split axis, or leaves a tail that `tail` allows).
  int forced_partials = -1;
  /// Derived G doubles while (domain points x G) is below this many threads.
  int64_t target_threads = int64_t{1} << 20;
  /// A derived split leaves every partial at least this many iterations of the split axis.
  int64_t min_iterations = 16;
  /// Reductions of fewer iterations than this stay serial (derived G only).
  int64_t min_trips = 512;
  /// The largest derived G.
  int64_t max_partials = 1024;
  /// Kernels with a block reduction's shape that choose_block_reductions left unmarked for too
  /// few tokens (BlockReductionOptions::min_tokens): GEMVs whose weights (phi, 42 MB at n = 8,
  /// D = 16384) every thread of the GPU should stream. Their derived G may grow to
  /// streamed_max_partials (the partials are few: points x G floats against the weights' K x R),
  /// each partial at least min_iterations of all the reduction's axes (not the split axis'
  /// alone: at n = 8, G = 4096 leaves 4 of d's 16384 in each of the 8 rows i).
  std::set<std::string> streamed_weight_kernels;
  int64_t streamed_max_partials = 4096;
  /// A kernel that thread_tiles will tile (R points per thread) counts points x G / R threads
  /// and aims at target_threads / tiled_thread_divisor of them: each tiled thread keeps R x V
  /// accumulators busy, and every partial costs the whole output again in traffic.
  ThreadTileOptions tiles;
  int64_t tiled_thread_divisor = 8;
  /// true (ADJOINT_TUNE_SPLIT_COUNT_VECTOR=1): a tiled kernel counts the threads its partials
  /// kernel launches for each G, points x G / (R x V) with that kernel's own tile R (which
  /// grows with its points, thread_tiles' min_threads) and vector width V (as derive_grid gives
  /// it, R x V at most tiles.max_accumulators), and aims at target_threads /
  /// vector_thread_divisor of them (2^16: the 65,536 threads of mhc_pre_backward's x_mix
  /// partials at n = 4; at n = 6, R = 16 and V = 4, the count above leaves 36,864 and this one
  /// takes G from 8 to 16). false (the default until measured on the H100): the count above.
  bool count_vector = false;
  int64_t vector_thread_divisor = 16;
  /// Kernels with a block reduction (block_reductions.h) are split into contiguous ranges, G
  /// doubling while (token tiles x G) is below this many blocks, up to block_max_partials (the
  /// combine reads G partials per point in one thread), every partial at least
  /// block_min_iterations of the split axis.
  int64_t block_target_blocks = 512;
  int64_t block_max_partials = 256;
  int64_t block_min_iterations = 64;
  /// The combine of a block split with fewer points than this runs a warp per point.
  int64_t block_warp_combine_points = 1024;
  /// Few-token block splits (ADJOINT_TUNE_BLOCK_FEW_TOKENS), a mask; 0 is the split of before.
  /// "Few points" means points x 32 <= target_threads (a warp per point stays within the thread
  /// target: B*S up to ~1,300 tokens at K = 24).
  ///   1: when tiles of Mt = 4 tokens per lane x the largest G stay below block_target_blocks,
  ///      the tiles take one token per lane (4x the blocks; the same bits: every point is still
  ///      summed in order by one thread within its partial);
  ///   2: with few points, a combine of at least block_warp_combine_min_partials partials runs
  ///      a warp per point where a thread per point would wait on G serial loads with little
  ///      parallelism: fewer than block_warp_combine_rows_points points, or at most 64 outputs
  ///      per token (row_groups then fuses the combine a row per thread, K x G serial loads:
  ///      3,072 at B1 S256 n4 D4096); and with few points the tail may be up to 32 ranges
  ///      (the ranges, multiples of 8, leave up to 7 G iterations: G stopped at 32 for
  ///      D = 12000), a warp per point combining any tail longer than one range;
  ///   4: with few points and one tile short of the target even at block_max_partials, G may
  ///      grow to max_partials with block_min_warp_iterations iterations of the split axis per
  ///      partial, where the weights are at least block_wide_weight_bytes (K x R x 4): more
  ///      blocks in flight for a GEMV that streams its weights from DRAM (B*S = 1, n = 8,
  ///      D = 16384: 42 MB of phi). Weights that stay in L2 (1.5 MB at n = 4, D = 4096) measured
  ///      2-6% slower with it on the H100, so the bound is a third of its 50 MB L2;
  ///   8: (off by default: measured mixed) rule 4's split in chunks of 64 (docs/compiler.md
  ///      "Block reductions at few tokens").
  int block_few_tokens = 7;
  /// Block splits fold the reduced axis just outside the split axis into g (partial g reduces
  /// row g / Gi, range g % Gi of it, every row's tail at most 4 ranges) where the split over
  /// the split axis alone leaves the blocks at half block_target_blocks or less and a token has
  /// more than block_fold_min_outputs outputs: each partial then reads one row's contiguous
  /// range, and a short split axis (D = 1000, 2000) no longer caps G. On the H100
  /// (docs/results/h100-2026-11-27-gemv/rows3) 1.4-3.2x faster at n = 6 and 8 with D of 1000 to
  /// 2048; at n = 4 (24 outputs) neutral to 1.4x slower, hence the bound.
  /// ADJOINT_TUNE_BLOCK_SPLIT_ROWS (0: the splits of before).
  bool block_split_rows = true;
  int64_t block_fold_min_outputs = 32;
  int64_t block_wide_weight_bytes = int64_t{16} << 20;
  int64_t block_warp_combine_min_partials = 64;
  int64_t block_warp_combine_rows_points = 8192;
  int64_t block_min_warp_iterations = 16;
  /// BlockReductionOptions::output_points for the partials kernels' block tiles (0: derived).
  int block_output_points = 0;
  /// The combine of any other split runs a warp per point (lanes stride over g, the fixed
  /// shuffle butterfly) when its kernel has fewer points than this, one compute stage and
  /// shuffle-able accumulators (B*S = 1: mhc_pre's inv_rms combined 1024 partials in one
  /// thread); 0: always a thread per point, in order. ADJOINT_TUNE_SPLIT_WARP_COMBINE.
  int64_t warp_combine_points = 1024;
  /// A kernel of several stages takes that warp combine (same condition on its points) when
  /// one of its combines sums more than this many partials, every stage computes over the
  /// first stage's domain and every outermost reduction shuffles; 0: only one-stage kernels
  /// (before). Default 256, the longest reduction a row group takes
  /// (RowGroupOptions::max_reduction_trips): shorter combines stay a thread per point and
  /// fusable (mhc_pre_backward's gate_grads at B1 S126 n8 D1000, G = 32, joins the row group
  /// of mix_grads and rms_grad), while at B1 S1 n8 D16384 its one thread per point summed 1024
  /// partials in order. ADJOINT_TUNE_SPLIT_WARP_COMBINE_STAGES.
  int64_t multi_stage_warp_combine_partials = 256;
  /// true (default): G need not divide the split axis. The partials take floor(E / G)
  /// iterations each (a multiple of 8 for block splits) and the combine sums the tail
  /// [G * floor(E / G), E) after them, when that tail is no longer than one partial; a token
  /// count such as 3 x 6159 gets partials at all. false (ADJOINT_TUNE_SPLIT_TAIL=0): G divides
  /// E, as before (an odd extent is never split).
  bool tail = true;
};


/// Throws adjoint::Error (kInvalidArgument) for a forced_partials below -1 or above 4096, or a
/// target_threads that is not a power of two in [2^10, 2^24].
void check_reduction_split_options(const ReductionSplitOptions& options);

/// Splits the eligible reductions of kernels without an explicit grid (see the top of this
/// file). Eligible: a Reduce evaluated unconditionally by a compute stage (not inside a select
/// branch, the right side of && or ||, or another Reduce), accumulating in f32, f64, i32 or
/// i64, whose body (nested reductions included) reads no tensor its own kernel writes, with an
/// axis of constant start 0 and constant extent that no other axis' bounds name. Returns the
/// very same program when nothing is split. `notes`, when given, receives a line per kernel.
ir::Program split_reductions(const ir::Program& program, const ReductionSplitOptions& options,
                             ScheduleNotes* notes = nullptr);

}  // namespace adjoint::compiler
