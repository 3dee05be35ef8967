// thread_tiles: the thread-tile schedule (register blocking over a second domain axis). A kernel
// whose reductions read, in every iteration, a tensor element that does not depend on one of
// its domain axes a (x[t, j] in a token sum dphi[k, j] = sum_t dh_mix[t, k] x[t, j], which no k
// changes; phi[k, j] in dvecx[s, j] = sum_k dh_mix[s, k] phi[k, j], which no s changes) reads
// that element once per point of a: R = 24 times for dphi. With a tile of R points of a
// (GridConfig::tile_axis / tile_points) each thread computes the R points a_base + r together
// with its vector group: one loop over the reduction, R x V accumulators, the shared element
// read once for all R (emit_vector_groups.cpp runs the unrolled tile loop inside the
// reduction's loops and loads the spans that do not move with a before it). Each point's sum
// keeps the interpreter's iteration order: the tile changes which thread computes a point, not
// how, so the results are bitwise those of the untiled kernel.
//
// Derived choice: among the domain axes other than the innermost (which owns the vector group)
// the one whose tile saves the most bytes per reduction iteration (the loads of the reductions'
// bodies that move with the reduction but not with that axis; a load contiguous along the
// innermost axis counts 8 times), times R - 1 for the R that axis would get; R is the whole
// extent up to max_points, else 24 if that takes it in at most few_parts parts, else the largest
// of 16, 8, 4, 2 that divides it, halved while fewer than min_threads points per tile would
// remain. Where R takes its axis in more than few_parts parts (R < extent:
// dx's 16 of 4096 tokens), R is halved further while R x V exceeds max_accumulators, V being
// the vector width derive_grid would give the kernel: the wide loads and stores of the streamed
// tensors are worth more than the shared element's reuse, which the tile's other parts repeat
// anyway (on the H100 dx went from R = 16, V = 4 to R = 8, V = 8: 261 -> 212 us at B1 S4096 n4
// D4096). A tile that takes its whole axis (x_mix's 24 k: x read once) or few parts of it (48 k
// at n = 6 in 2 tiles of 24: x read twice, not 3 times) keeps R and derive_grid halves V instead. ADJOINT_TUNE_THREAD_TILE (runtime::lower_options) switches tiles off
// (0) or forces R.
//
// Partial last tile (ThreadTileOptions::partial_tiles, ADJOINT_TUNE_TILE_PARTIAL=1, the
// default): where no candidate divides the axis (181 or 127 tokens), R is the largest of 16, 8,
// 4, 2 whose padding ceil(E / R) R - E is at most E / 8 (then halved as above), and the axis
// gets ceil(E / R) tiles: the last tile's points past E - 1 compute at the clamped index E - 1
// (in bounds, the very values of point E - 1) and are not stored, so every point is stored once,
// by one thread, with its sum in the interpreter's order. A tile that divides its axis is chosen
// and emitted as before. Runs after split_reductions (which asks choose_thread_tile first, so that a
// split counts tiled threads) and before derive_grid, which keeps the tile and bounds R x V
// (tile_accumulator_limit: 64, or 96 for a long tile, one that keeps its R in a kernel of
// reductions over more than 128 iterations, with the ring: x_mix's partials take 24 k x 4 d).
#pragma once

#include <cstdint>
#include <string>

#include "compiler/schedule_notes.h"
#include "ir/program.h"

namespace adjoint::compiler {

struct ThreadTileOptions {
  /// -1: derive; 0: never tile; R >= 2: tile every eligible kernel by R where R divides the
  /// chosen axis' extent (or, with partial_tiles, is below it).
  int forced_points = -1;
  /// The largest tile, and the most accumulators (R x V) derive_grid lets a thread keep.
  int max_points = 32;
  int max_accumulators = 64;
  /// A long tile (tile_accumulator_limit: one that keeps its R, its whole axis or at most
  /// few_parts parts of it, in a kernel whose reductions run more than long_trips iterations
  /// a point) may keep up to this many (x_mix's partials: 24 k x V = 4 d instead of V = 2,
  /// each dh_mix value read from shared memory once for 4 multiply-adds instead of 2);
  /// ADJOINT_TUNE_TILE_ACCUMULATORS, max_accumulators or less: the tiles before.
  int long_tile_accumulators = 96;
  int64_t long_trips = 128;
  /// A derived tile leaves at least this many points per tile (points / R): the threads also
  /// take vector groups of up to 8 points, and 2^14 threads keep the H100's 132 SMs busy.
  int64_t min_threads = int64_t{1} << 17;
  /// Reductions of fewer iterations than this are not worth a tile (derived only).
  int64_t min_trips = 16;
  /// A derived tile that takes its axis in parts is halved while R x V > max_accumulators
  /// (ADJOINT_TUNE_TILE_PREFER_VECTOR=1, the default); false keeps R and lets derive_grid halve
  /// V (the tiles before, for measuring).
  bool prefer_vector = true;
  /// An axis whose natural tile takes it in at most this many parts keeps its R (derive_grid
  /// halves V instead), and 24 is a natural tile (so that x_mix's 48 k at n = 6 are taken in 2
  /// parts of 24, x read twice, not 3 parts of 16); 0: the tiles before (16, 8, 4, 2 and the
  /// vector-first halving everywhere; ADJOINT_TUNE_TILE_FEW_PARTS=0).
  int few_parts = 2;
  /// derive_grid's group bytes (DeriveGridOptions::vector_bytes, 0: kDefaultGroupBytes), for V.
  int group_bytes = 0;
  /// An axis no candidate divides takes a tile with a partial last tile (padding at most 1/8
  /// of the axis; a forced R < extent applies too); false: only tiles that divide their axis
  /// (ADJOINT_TUNE_TILE_PARTIAL=0, the tiles before).
  bool partial_tiles = true;
};

/// Throws adjoint::Error (kInvalidArgument) for forced_points outside {-1, 0} and [2, 64].
void check_thread_tile_options(const ThreadTileOptions& options);

/// The tile `kernel` gets: tile_points 1 (none) or R with its axis, and the reason either way.
struct TileChoice {
  int axis = -1;
  int points = 1;
  std::string why;
};
TileChoice choose_thread_tile(const ir::Kernel& kernel, const ThreadTileOptions& options);

/// The most accumulators (R x V) a thread of `kernel` keeps with a tile of `points` points of
/// domain axis `axis`: long_tile_accumulators for a long tile (R takes its axis whole or in at
/// most few_parts parts, and some reduction of the kernel runs more than long_trips constant
/// iterations a point), else max_accumulators. derive_grid and split_reductions halve V to
/// fit it.
int64_t tile_accumulator_limit(const ir::Kernel& kernel, int axis, int64_t points,
                               const ThreadTileOptions& options);

/// Sets GridConfig::tile_axis / tile_points on the kernels chosen (only kernels without an
/// explicit grid or warp lanes, of rank >= 2, whose stages all compute). Returns the very same
/// program when nothing changes; `notes` receives a line per kernel considered.
ir::Program choose_thread_tiles(const ir::Program& program, const ThreadTileOptions& options,
                                ScheduleNotes* notes = nullptr);

}  // namespace adjoint::compiler
